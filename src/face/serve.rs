//! `wirescope serve grpc`: the BenchmarkService server alone, for third-party
//! clients (ghz, grpc-go's benchmark client); wirescope's own client against
//! any BenchmarkService server is `wirescope run --engine grpc --target`.
//!
//! Owns this command's plain-text/JSON output (its arguments are in
//! [`crate::cli::serve`]). The server has no token: anyone who reaches the
//! port may use it, and it says so when it starts.

use super::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::cli::serve::*;
use crate::traffic::grpc::counters::{interval, GrpcCounters, GrpcInterval, GrpcSnapshot};
use crate::traffic::grpc::server::{GrpcServer, Incoming, ServerConfig};
use crate::traffic::grpc::{memory, threads_or_cores, GrpcError};
use crate::units::Bytes;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Run `wirescope serve ...`; returns the exit code.
pub fn command(args: ServeArgs) -> anyhow::Result<u8> {
    let r = match args.what {
        ServeWhat::Grpc(a) => serve_grpc(a),
    };
    match r {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("error: {e}");
            Ok(if e.is_usage() {
                EXIT_USAGE
            } else {
                EXIT_FAILED
            })
        }
    }
}

fn serve_grpc(a: ServeGrpcArgs) -> Result<u8, GrpcError> {
    let cfg = ServerConfig {
        threads: threads_or_cores(a.threads),
        cpus: a.cpus.map(|c| c.0).unwrap_or_default(),
        max_message: a.max_message.as_usize(),
        memory_budget: a.memory_budget.as_usize(),
        max_streams: a.max_streams,
        max_connections: a.max_connections as usize,
        max_calls: a.max_calls as usize,
        handshake_timeout: a.handshake_timeout,
        body_timeout: a.body_timeout,
        response_timeout: a.response_timeout,
    };
    let listener = std::net::TcpListener::bind(a.listen).map_err(|source| GrpcError::Io {
        op: "binding the gRPC listener",
        source,
    })?;
    // The signal runtime and its handlers first: once clients connect they
    // can take every descriptor (the accept loop waits that out), and a
    // runtime or a signal handler made then could not start.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| GrpcError::Io {
            op: "starting the signal runtime",
            source,
        })?;
    let signals = rt.block_on(async { Signals::watch() })?;
    let _ = memory::reset_peak();
    let server = GrpcServer::start(cfg.clone(), Incoming::Listener(listener))?;
    let addr = server.local_addr().unwrap_or(a.listen);
    eprintln!(
        "wirescope serve grpc: grpc.testing.BenchmarkService on {addr}, {} threads, max message {}, memory budget {}, {} streams per connection, {} connections, {} calls",
        cfg.threads,
        Bytes(cfg.max_message as u64),
        Bytes(cfg.memory_budget as u64),
        cfg.max_streams,
        cfg.max_connections,
        cfg.max_calls
    );
    eprintln!("wirescope serve grpc: NO TOKEN: anyone who reaches {addr} can use this server; Ctrl-C stops it");
    let counters = Arc::clone(server.counters());
    let start = Instant::now();
    rt.block_on(wait_for_signal(signals, &counters, a.interval));
    server.stop();
    // Give clients a moment to finish; then cut.
    let deadline = Instant::now() + Duration::from_secs(1);
    while !server.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    server.abort();
    let mut server = server;
    let joined = server.join();
    let total = interval(
        &GrpcSnapshot::default(),
        &counters.snapshot(),
        start.elapsed().as_secs_f64(),
        &counters.take_latency(),
    );
    let hwm = memory::peak_resident().ok();
    if a.json {
        let totals = serde_json::json!({
            "totals": counters.snapshot(),
            "vm_hwm_bytes": hwm.map(|b| b.0),
        });
        outln!("{totals}");
    } else {
        outln!("total    {}", line(&total, hwm));
    }
    joined.map_err(GrpcError::from)?;
    Ok(EXIT_OK)
}

/// SIGINT and SIGTERM, registered before the server takes connections.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    /// Register both (inside the signal runtime).
    fn watch() -> Result<Signals, GrpcError> {
        use tokio::signal::unix::{signal, SignalKind};
        let io = |source| GrpcError::Io {
            op: "watching SIGINT and SIGTERM",
            source,
        };
        Ok(Signals {
            int: signal(SignalKind::interrupt()).map_err(io)?,
            term: signal(SignalKind::terminate()).map_err(io)?,
        })
    }
}

async fn wait_for_signal(mut sig: Signals, counters: &GrpcCounters, every: Duration) {
    let mut prev = counters.snapshot();
    let mut at = Instant::now();
    let mut tick = tokio::time::interval(if every.is_zero() {
        Duration::from_secs(3600)
    } else {
        every
    });
    tick.tick().await;
    loop {
        tokio::select! {
            _ = sig.int.recv() => return,
            _ = sig.term.recv() => return,
            _ = tick.tick() => {
                if every.is_zero() { continue; }
                let now = counters.snapshot();
                let secs = at.elapsed().as_secs_f64();
                at = Instant::now();
                let i = interval(&prev, &now, secs, &counters.take_latency());
                prev = now;
                outln!("{:7.1}s {}", at.elapsed().as_secs_f64(), line(&i, memory::peak_resident().ok()));
            }
        }
    }
}

/// One line of server figures.
fn line(i: &GrpcInterval, hwm: Option<Bytes>) -> String {
    let mut s = format!(
        "{:>10.0} RPC/s  rx {:>9.2} MB/s  tx {:>9.2} MB/s",
        i.rpcs_per_sec,
        i.rx_bytes_per_sec / 1e6,
        i.tx_bytes_per_sec / 1e6
    );
    if let Some(h) = hwm {
        s.push_str(&format!("  VmHWM {h}"));
    }
    for (code, n) in &i.errors {
        s.push_str(&format!("  {code} {n}"));
    }
    s
}

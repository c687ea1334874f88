//! `wirescope serve grpc`: the BenchmarkService server alone, for
//! third-party clients (ghz, grpc-go's benchmark client); wirescope's own
//! client against any BenchmarkService server is `wirescope run --engine
//! grpc --target`.
//!
//! Owns this server's arguments, its start from its own listener, and the
//! text and values of its figures (banner, interval lines, totals) that the
//! face prints ([`crate::traffic::serve`]); it prints nothing itself. The
//! server has no token: anyone who reaches the port may use it, and its
//! banner says so.

use super::counters::{interval, GrpcCounters, GrpcInterval, GrpcSnapshot};
use super::server::{GrpcServer, Incoming, ServerConfig};
use super::{memory, threads_or_cores, GrpcError};
use crate::traffic::serve::{
    BoundServer, LoneServer, RunningServer, ServeError, ServeOptions, Served,
};
use crate::units::{parse_cpu_list, parse_duration, parse_size, Bytes, CpuId};
use clap::Args;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `wirescope serve grpc`.
#[derive(Debug, Args)]
pub struct ServeGrpcArgs {
    /// Address and port to listen on.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:50051")]
    pub listen: SocketAddr,
    /// Server worker threads (default: one per core).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub threads: u32,
    /// Pin the worker threads to these CPUs (e.g. 0-3,8).
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub cpus: Option<Cpus>,
    /// Largest request or response message accepted.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = parse_size)]
    pub max_message: Bytes,
    /// Bytes of messages held at once, over all connections.
    #[arg(long, value_name = "SIZE", default_value = "96M", value_parser = parse_size)]
    pub memory_budget: Bytes,
    /// Concurrent streams per HTTP/2 connection.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_streams: u32,
    /// Connections open at once; more are closed as they arrive.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// Calls in flight over all connections; more are answered RESOURCE_EXHAUSTED.
    #[arg(long, value_name = "N", default_value_t = 16384, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub max_calls: u32,
    /// Time a new connection has to send the HTTP/2 preface before it is closed.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    pub handshake_timeout: Duration,
    /// A request whose bytes stop coming this long (or that arrives slower
    /// than 1 MiB/s after it) fails with DEADLINE_EXCEEDED and frees its memory.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    pub body_timeout: Duration,
    /// A response its client leaves unread this long resets its connection.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_timeout)]
    pub response_timeout: Duration,
    /// Print one line of figures per interval (0 = only at the end).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Print the totals at the end as one JSON line (`{"totals": ..., "vm_hwm_bytes": ...}`).
    #[arg(long)]
    pub json: bool,
}

/// A CPU list (`0-3,8`) as one value (a bare `Vec` would make clap expect several).
#[derive(Debug, Clone, PartialEq)]
pub struct Cpus(pub Vec<CpuId>);

/// A value of `serve grpc` that its parser refuses.
#[derive(Debug, thiserror::Error)]
pub enum ServeValueError {
    /// A timeout of zero.
    #[error("a timeout must be above zero (e.g. 10s)")]
    ZeroTimeout,
    /// A duration or CPU list the shared parsers refused (their message
    /// names the value and gives an example).
    #[error(transparent)]
    Value(#[from] crate::units::UnitError),
}

/// A timeout: a duration above zero.
fn parse_timeout(s: &str) -> Result<Duration, ServeValueError> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(ServeValueError::ZeroTimeout);
    }
    Ok(d)
}

fn parse_cpus(s: &str) -> Result<Cpus, ServeValueError> {
    Ok(Cpus(parse_cpu_list(s)?))
}

impl From<GrpcError> for ServeError {
    fn from(e: GrpcError) -> Self {
        if e.is_usage() {
            ServeError::Usage(Box::new(e))
        } else {
            ServeError::Failed(Box::new(e))
        }
    }
}

impl LoneServer for ServeGrpcArgs {
    fn options(&self) -> ServeOptions {
        ServeOptions {
            interval: self.interval,
            json: self.json,
        }
    }

    fn bind(self: Box<Self>) -> Result<Box<dyn BoundServer>, ServeError> {
        let a = *self;
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
        let listener = TcpListener::bind(a.listen).map_err(|source| GrpcError::Io {
            op: "binding the gRPC listener",
            source,
        })?;
        Ok(Box::new(BoundGrpc {
            cfg,
            listener,
            listen: a.listen,
        }))
    }
}

/// The server's settings and its listener, before it serves.
struct BoundGrpc {
    cfg: ServerConfig,
    listener: TcpListener,
    /// The address asked for (shown when the listener cannot say its own).
    listen: SocketAddr,
}

impl BoundServer for BoundGrpc {
    fn start(self: Box<Self>) -> Result<Box<dyn RunningServer>, ServeError> {
        let BoundGrpc {
            cfg,
            listener,
            listen,
        } = *self;
        let _ = memory::reset_peak();
        let server = GrpcServer::start(cfg.clone(), Incoming::Listener(listener))?;
        let addr = server.local_addr().unwrap_or(listen);
        let counters = Arc::clone(server.counters());
        let prev = counters.snapshot();
        Ok(Box::new(ServingGrpc {
            server,
            cfg,
            addr,
            counters,
            prev,
            at: Instant::now(),
            start: Instant::now(),
        }))
    }
}

/// The server as it serves, with what its next interval line starts from.
struct ServingGrpc {
    server: GrpcServer,
    cfg: ServerConfig,
    addr: SocketAddr,
    counters: Arc<GrpcCounters>,
    /// The counters at the previous interval line.
    prev: GrpcSnapshot,
    /// When they were read.
    at: Instant,
    /// When the server started (the totals' span).
    start: Instant,
}

impl RunningServer for ServingGrpc {
    fn banner(&self) -> Vec<String> {
        let (cfg, addr) = (&self.cfg, self.addr);
        vec![
            format!(
                "wirescope serve grpc: grpc.testing.BenchmarkService on {addr}, {} threads, max message {}, memory budget {}, {} streams per connection, {} connections, {} calls",
                cfg.threads,
                Bytes(cfg.max_message as u64),
                Bytes(cfg.memory_budget as u64),
                cfg.max_streams,
                cfg.max_connections,
                cfg.max_calls
            ),
            format!("wirescope serve grpc: NO TOKEN: anyone who reaches {addr} can use this server; Ctrl-C stops it"),
        ]
    }

    fn interval_line(&mut self) -> String {
        let now = self.counters.snapshot();
        let secs = self.at.elapsed().as_secs_f64();
        self.at = Instant::now();
        let i = interval(&self.prev, &now, secs, &self.counters.take_latency());
        self.prev = now;
        // Stamped with the time since the server started, as iperf3's
        // interval lines are.
        format!(
            "{:7.1}s {}",
            self.start.elapsed().as_secs_f64(),
            line(&i, memory::peak_resident().ok())
        )
    }

    fn stop(self: Box<Self>) -> Served {
        let ServingGrpc {
            mut server,
            counters,
            start,
            ..
        } = *self;
        server.stop();
        // Give clients a moment to finish; then cut.
        let deadline = Instant::now() + Duration::from_secs(1);
        while !server.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        server.abort();
        let joined = server.join();
        let total = interval(
            &GrpcSnapshot::default(),
            &counters.snapshot(),
            start.elapsed().as_secs_f64(),
            &counters.take_latency(),
        );
        let hwm = memory::peak_resident().ok();
        Served {
            line: format!("total    {}", line(&total, hwm)),
            json: serde_json::json!({
                "totals": counters.snapshot(),
                "vm_hwm_bytes": hwm.map(|b| b.0),
            }),
            result: joined.map_err(|e| ServeError::from(GrpcError::from(e))),
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

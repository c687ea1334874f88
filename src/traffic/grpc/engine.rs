//! The gRPC engine inside a session: the controller's [`GrpcClient`] and the
//! agent's [`GrpcServer`] on the test's own data connections (opened,
//! authenticated and bound to the test by the session, one per channel), run
//! like every other engine (see [`crate::traffic::Engine`]).
//!
//! What the sampler reads ([`GrpcProbe`]):
//! * as the engine's byte and message counters, one entry for the whole
//!   engine: payload bytes sent and received and RPCs completed with OK (the
//!   HTTP/2 connections share one runtime, so bytes are not split per
//!   connection; TCP_INFO is still read for every connection);
//! * the latency of the RPCs the client completed (through the same
//!   histogram path as `tcp rr`, so `latency` and the summary's percentiles
//!   mean the same thing);
//! * as the engine's own figures: RPCs/s, payload goodput both ways and the
//!   non-OK statuses per interval ([`super::GrpcInterval`]), and at the end the
//!   point's totals with this process's peak resident memory (VmHWM, reset
//!   when the point starts).
//!
//! The client is started on its own thread: its first RPC waits for the
//! agent's server, and the session's async threads must never wait on the
//! network (a server that never answers would hold them). The thread then
//! forwards stop and abort to the client and reports its error, if any, as
//! the engine's result.

use super::client::{GrpcClient, Target};
use super::counters::{interval, GrpcCounters, GrpcSnapshot};
use super::server::{GrpcServer, Incoming};
use super::{memory, GrpcSpec, MAX_CHANNELS, MAX_CONCURRENCY, MAX_MESSAGE, MESSAGE_OVERHEAD};
use crate::traffic::limits::{MemoryNeed, SpecError};
use crate::traffic::options::{SweepParam, SweepPoint};
use crate::traffic::workers::Workers;
use crate::traffic::{
    spawn_worker, ConnRole, ConnSnapshot, Engine, EngineControl, EngineCounters, EngineError,
    EngineHost, EngineInterval, EngineKind, EngineProbe, EngineSpecOps, EngineTotals,
    RunningEngine, Side,
};
use crate::units::{Bytes, CpuId};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the engine's thread looks at the stop flags (the client and
/// server react within their own loops; this only forwards the request).
const WATCH_EVERY: Duration = Duration::from_millis(20);
/// How long the agent's server waits, once told to stop, for the client to
/// close the connections before it stops on its own.
const SERVER_GRACE: Duration = Duration::from_secs(3);

/// What the session, the plan, the faces and the diagnosis ask of a gRPC
/// spec (see [`EngineSpecOps`]).
impl EngineSpecOps for GrpcSpec {
    fn kind(&self) -> EngineKind {
        EngineKind::Grpc
    }

    fn mode_name(&self) -> &'static str {
        self.mode.name()
    }

    /// A plain socket: the HTTP/2 client sets what it needs.
    fn data_socket(
        &self,
        addr: &std::net::SocketAddr,
        conn: usize,
    ) -> Result<socket2::Socket, EngineError> {
        socket2::Socket::new(
            socket2::Domain::for_address(*addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .map_err(|source| EngineError::Io {
            op: "socket",
            conn,
            source,
        })
    }

    fn with_flows(&self, n: u32) -> String {
        format!(
            "--engine grpc -m {} --channels {n} --concurrency {}",
            self.mode.name(),
            self.concurrency.max(n)
        )
    }

    fn short(&self) -> String {
        format!(
            "grpc {} --channels {} --concurrency {}",
            self.mode.name(),
            self.channels,
            self.concurrency
        )
    }

    fn label(&self) -> String {
        format!(
            "grpc {} channels={} concurrency={} size={} resp_size={}",
            self.mode.name(),
            self.channels,
            self.concurrency,
            self.size.0,
            self.resp_size.0
        )
    }

    fn prepare(
        &self,
        side: Side,
        _toward: Option<std::net::IpAddr>,
        _host: &dyn EngineHost,
    ) -> Result<Box<dyn Engine>, EngineError> {
        Ok(Box::new(GrpcEngine::new(self.clone(), side)))
    }

    fn start_against_server(&self, target: String) -> Result<RunningEngine, EngineError> {
        GrpcEngine::against(self.clone(), target).start_ready()
    }

    /// Apply one sweep point: the request size (the response too when it
    /// followed it), the channels or the RPCs in flight.
    fn apply_sweep(&mut self, p: SweepPoint<'_>) {
        let n = u32::try_from(p.value).unwrap_or(u32::MAX);
        match p.param {
            SweepParam::Size => {
                if self.resp_size == self.size {
                    self.resp_size = Bytes(p.value);
                }
                self.size = Bytes(p.value);
            }
            SweepParam::Channels => self.channels = n,
            SweepParam::Concurrency => self.concurrency = n,
            // Refused for grpc by its validation.
            _ => {}
        }
    }

    /// Data connections the controller opens.
    fn connection_count(&self) -> usize {
        self.channels as usize
    }

    /// Limits an agent enforces on a spec from the network (the CLI checks the
    /// same with friendlier messages). Bounds what a test allocates: one
    /// payload per size and the server's budget.
    fn validate(&self) -> Result<(), SpecError> {
        use crate::traffic::limits::check;
        let max_payload = (MAX_MESSAGE - MESSAGE_OVERHEAD) as u64;
        check(
            "channels",
            u64::from(self.channels),
            1,
            u64::from(MAX_CHANNELS),
        )?;
        check(
            "concurrency",
            u64::from(self.concurrency),
            1,
            u64::from(MAX_CONCURRENCY),
        )?;
        check("size", self.size.0, 0, max_payload)?;
        check("resp_size", self.resp_size.0, 0, max_payload)?;
        check("threads", u64::from(self.threads), 0, 1024)?;
        check("peer_threads", u64::from(self.peer_threads), 0, 1024)?;
        if self.concurrency < self.channels {
            return Err(SpecError::Invalid(format!(
                "concurrency {} is below channels {}: every channel needs at least one RPC in flight",
                self.concurrency, self.channels
            )));
        }
        Ok(())
    }

    /// True when small packets are the workload: requests and responses
    /// that fit in one packet (`mtu` bytes) each way.
    fn small_packets_by_design(&self, mtu: f64) -> bool {
        self.size.0.max(self.resp_size.0) as f64 <= mtu
    }

    /// One RPC with the test's sizes on one channel to the server at
    /// `target`, before anything starts: a server that is not there is a
    /// failed test; one that is not a BenchmarkService, answers
    /// UNIMPLEMENTED or refuses the message size is a usage error.
    fn check_server(&self, target: &str) -> Result<(), crate::traffic::ServerCheckError> {
        use crate::traffic::ServerCheckError;
        let mut cfg = self.client_config();
        cfg.channels = 1;
        cfg.concurrency = 1;
        cfg.threads = 1;
        cfg.cpus.clear();
        match super::GrpcClient::start(cfg, super::Target::Addr(target.to_string())) {
            Ok(mut c) => {
                c.abort();
                let _ = c.join();
                Ok(())
            }
            Err(e) if e.is_usage() => Err(ServerCheckError::Usage(e.to_string())),
            Err(e) => Err(ServerCheckError::Failed(e.to_string())),
        }
    }

    /// The controller is the client on every connection, the agent the server.
    fn conn_roles(&self, side: Side) -> Vec<ConnRole> {
        let role = match side {
            Side::Controller => ConnRole::Client,
            Side::Agent => ConnRole::Server,
        };
        vec![role; self.connection_count()]
    }

    /// CPUs `side` pins its runtime threads to.
    fn cpus_for(&self, side: Side) -> &[CpuId] {
        match side {
            Side::Controller => &self.cpus,
            Side::Agent => &self.peer_cpus,
        }
    }

    /// What a point holds at most: the client one shared payload and its
    /// receive windows (64 MiB in all); the server its message budget, one
    /// shared response and the HTTP/2 connection windows.
    fn memory_needed(&self, side: Side) -> MemoryNeed {
        match side {
            Side::Controller => MemoryNeed {
                bytes: Bytes(self.size.0.saturating_add(64 << 20)),
                what: format!(
                    "one {} request payload and 64 MiB of HTTP/2 receive windows",
                    self.size
                ),
                smaller: "use a smaller --size".into(),
            },
            Side::Agent => {
                let cfg = self.server_config();
                let windows = u64::from(cfg.conn_window()).saturating_mul(u64::from(self.channels));
                MemoryNeed {
                    bytes: Bytes(
                        (cfg.memory_budget as u64)
                            .saturating_add(self.resp_size.0)
                            .saturating_add(windows),
                    ),
                    what: format!(
                        "the server's {} message budget, one {} response and {} channels' HTTP/2 windows",
                        Bytes(cfg.memory_budget as u64),
                        self.resp_size,
                        self.channels
                    ),
                    smaller: "use fewer --channels or less --concurrency".into(),
                }
            }
        }
    }
}

/// One end of a gRPC point over the whole point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GrpcTotals {
    /// RPCs (or stream messages) completed with OK.
    pub rpcs: u64,
    /// Payload bytes sent (client: requests; server: responses).
    pub tx_payload: u64,
    /// Payload bytes received.
    pub rx_payload: u64,
    /// Non-OK statuses by code name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    /// This process's peak resident memory during the point (VmHWM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss: Option<Bytes>,
}

/// What the sampler reads of a running gRPC end.
pub struct GrpcProbe {
    counters: Arc<GrpcCounters>,
    /// (previous, latest) snapshots: `counters()` reads, `interval()` uses
    /// the span between the two, so both see one read.
    reads: Mutex<(GrpcSnapshot, GrpcSnapshot)>,
}

impl GrpcProbe {
    fn new(counters: Arc<GrpcCounters>) -> Self {
        GrpcProbe {
            counters,
            reads: Mutex::new((GrpcSnapshot::default(), GrpcSnapshot::default())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (GrpcSnapshot, GrpcSnapshot)> {
        self.reads.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl EngineProbe for GrpcProbe {
    fn counters(&self) -> Option<Vec<ConnSnapshot>> {
        let now = self.counters.snapshot();
        self.lock().1 = now;
        Some(vec![ConnSnapshot {
            tx_bytes: now.tx_payload,
            rx_bytes: now.rx_payload,
            messages: now.rpcs,
            ..ConnSnapshot::default()
        }])
    }

    fn take_latency(&self) -> Option<Histogram<u64>> {
        Some(self.counters.take_latency())
    }

    fn interval(&self, secs: f64) -> Option<EngineInterval> {
        let mut reads = self.lock();
        let (prev, now) = *reads;
        reads.0 = now;
        // Latency travels in the Sample's own latency field.
        let empty = crate::traffic::new_latency_histogram();
        let mut i = interval(&prev, &now, secs, &empty);
        i.peak_rss = memory::peak_resident().ok();
        Some(EngineInterval::Grpc(i))
    }

    fn totals(&self) -> Option<EngineTotals> {
        let s = self.counters.snapshot();
        let empty = crate::traffic::new_latency_histogram();
        let errors = interval(&GrpcSnapshot::default(), &s, 1.0, &empty).errors;
        Some(EngineTotals::Grpc(GrpcTotals {
            rpcs: s.rpcs,
            tx_payload: s.tx_payload,
            rx_payload: s.rx_payload,
            errors,
            peak_rss: memory::peak_resident().ok(),
        }))
    }
}

/// One side of a gRPC point, prepared.
pub struct GrpcEngine {
    spec: GrpcSpec,
    side: Side,
    /// `HOST:PORT` of a third-party server (`run --engine grpc --target`):
    /// the client connects there itself instead of using the session's
    /// data connections.
    target: Option<String>,
}

impl GrpcEngine {
    /// `side` of the point `spec` describes.
    pub fn new(spec: GrpcSpec, side: Side) -> Self {
        GrpcEngine {
            spec,
            side,
            target: None,
        }
    }

    /// The client alone, against any BenchmarkService server at `target`.
    pub fn against(spec: GrpcSpec, target: String) -> Self {
        GrpcEngine {
            spec,
            side: Side::Controller,
            target: Some(target),
        }
    }
}

/// The client or the server, as the engine's thread sees it.
enum Running {
    Client(GrpcClient),
    Server(GrpcServer),
}

impl Running {
    /// Its thread and stop flags.
    fn workers(&self) -> &Workers {
        match self {
            Running::Client(c) => &c.sup,
            Running::Server(s) => &s.sup,
        }
    }
    fn join(&mut self) -> Result<(), EngineError> {
        match self {
            Running::Client(c) => c
                .join()
                .map_err(|e| EngineError::Unsupported(e.to_string())),
            Running::Server(s) => s.join(),
        }
    }
}

impl Engine for GrpcEngine {
    fn start(self: Box<Self>, conns: Vec<TcpStream>) -> Result<RunningEngine, EngineError> {
        self.launch(conns).map(|(e, _)| e)
    }
}

impl GrpcEngine {
    /// Start, and wait until the client's first RPC succeeded (or say why it
    /// could not): for a client without a session around it, whose errors
    /// (nothing listens, not gRPC, UNIMPLEMENTED) must stop the test at once.
    /// Blocks the calling thread.
    pub fn start_ready(self) -> Result<RunningEngine, EngineError> {
        let (mut engine, ready) = self.launch(Vec::new())?;
        super::await_ready(
            &ready,
            || engine.join(),
            || EngineError::Unsupported("the gRPC client ended before it started".into()),
        )?;
        Ok(engine)
    }

    /// Start the thread that runs the client or server; the receiver says
    /// when it runs (or why it could not start).
    fn launch(
        self,
        conns: Vec<TcpStream>,
    ) -> Result<
        (
            RunningEngine,
            std::sync::mpsc::Receiver<Result<(), EngineError>>,
        ),
        EngineError,
    > {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (sockets, shut) = duplicates(&conns)?;
        let roles = if self.target.is_some() {
            Vec::new()
        } else {
            self.spec.conn_roles(self.side)
        };
        let (side, spec, target) = (self.side, self.spec, self.target);
        let threads = match side {
            Side::Controller => spec.client_config().threads,
            Side::Agent => spec.server_config().threads,
        };
        let counters = GrpcCounters::new(threads);
        let probe = Arc::new(GrpcProbe::new(Arc::clone(&counters)));
        // The point's peak memory starts here (best effort: without
        // /proc/self/clear_refs the peak is the process's).
        let _ = memory::reset_peak();
        let control = EngineControl::default();
        let ctl = control.clone();
        let name = match side {
            Side::Controller => "ws-grpc-client",
            Side::Agent => "ws-grpc-server",
        };
        let thread = spawn_worker(name.into(), None, &control, move || {
            let started = match side {
                Side::Controller => GrpcClient::start_counted(
                    spec.client_config(),
                    match target {
                        Some(addr) => Target::Addr(addr),
                        None => Target::Streams(conns),
                    },
                    counters,
                )
                .map(Running::Client),
                Side::Agent => GrpcServer::start_counted(
                    spec.server_config(),
                    Incoming::Streams(conns),
                    counters,
                )
                .map(Running::Server),
            };
            let mut running = match started {
                Ok(r) => r,
                Err(e) => {
                    shut_down(&shut);
                    let why = e.to_string();
                    let _ = ready_tx.send(Err(EngineError::Unsupported(why.clone())));
                    return Err(EngineError::Unsupported(why));
                }
            };
            let _ = ready_tx.send(Ok(()));
            watch(&running, &ctl);
            let result = running.join();
            shut_down(&shut);
            result
        })?;
        Ok((
            RunningEngine {
                threads: vec![thread],
                counters: Arc::new(EngineCounters::new(0, 0)),
                sockets,
                control,
                roles,
                probe: Some(probe),
            },
            ready_rx,
        ))
    }
}

/// The data connections' duplicates: one set the sampler keeps (TCP_INFO),
/// one the engine's thread shuts down once the client or server is done —
/// the sampler's duplicates keep each socket open, so closing hyper's copy
/// alone would never send the FIN the other end waits for. Sets TCP_NODELAY.
fn duplicates(conns: &[TcpStream]) -> Result<(Vec<TcpStream>, Vec<TcpStream>), EngineError> {
    let sockets = conns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            c.try_clone().map_err(|source| EngineError::Io {
                op: "dup",
                conn: i,
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    for (i, c) in conns.iter().enumerate() {
        c.set_nodelay(true).map_err(|source| EngineError::Io {
            op: "setsockopt TCP_NODELAY",
            conn: i,
            source,
        })?;
    }
    let shut = sockets
        .iter()
        .filter_map(|s| s.try_clone().ok())
        .collect::<Vec<_>>();
    Ok((sockets, shut))
}

fn shut_down(shut: &[TcpStream]) {
    for s in shut {
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
}

/// Wait until the client or server is done, passing on stop and abort.
///
/// The client ends a point: on stop it finishes its RPCs and closes the
/// connections. The server ends when they are closed (like a TCP receiver
/// at EOF); stopping it at the same moment would cut RPCs the client still
/// waits for ("operation was canceled"). Only if the client never closes
/// does the server stop itself.
fn watch(running: &Running, ctl: &EngineControl) {
    let workers = running.workers();
    let mut stop_seen: Option<std::time::Instant> = None;
    loop {
        if ctl.abort.load(Ordering::Relaxed) {
            workers.abort();
            break;
        }
        if ctl.stop.load(Ordering::Relaxed) {
            match (running, stop_seen) {
                (Running::Client(_), _) => {
                    workers.stop();
                    break;
                }
                (Running::Server(_), None) => stop_seen = Some(std::time::Instant::now()),
                (Running::Server(_), Some(t)) if t.elapsed() > SERVER_GRACE => {
                    workers.stop();
                    break;
                }
                (Running::Server(_), Some(_)) => {}
            }
        }
        if workers.is_finished() {
            break;
        }
        std::thread::sleep(WATCH_EVERY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::grpc::GrpcMode;

    fn spec() -> GrpcSpec {
        GrpcSpec {
            mode: GrpcMode::Unary,
            channels: 2,
            concurrency: 8,
            size: Bytes(64),
            resp_size: Bytes(64),
            threads: 1,
            peer_threads: 1,
            cpus: Vec::new(),
            peer_cpus: Vec::new(),
        }
    }

    #[test]
    fn roles_and_memory_per_side() {
        let s = spec();
        assert_eq!(s.conn_roles(Side::Controller), vec![ConnRole::Client; 2]);
        assert_eq!(s.conn_roles(Side::Agent), vec![ConnRole::Server; 2]);
        assert!(s.memory_needed(Side::Agent).bytes.0 >= 96 << 20);
        assert_eq!(s.memory_needed(Side::Controller).bytes.0, 64 + (64 << 20));
    }

    #[test]
    fn the_probe_reports_one_read_per_interval() {
        let c = GrpcCounters::new(1);
        let p = GrpcProbe::new(Arc::clone(&c));
        c.record_ok(100, 50, Some(Duration::from_micros(20)));
        c.record_ok(100, 50, Some(Duration::from_micros(40)));
        c.record_error(14);
        let read = p.counters().unwrap();
        assert_eq!(
            (read[0].tx_bytes, read[0].rx_bytes, read[0].messages),
            (200, 100, 2)
        );
        // Counted after the read: not in this interval.
        c.record_ok(100, 50, None);
        let Some(EngineInterval::Grpc(i)) = p.interval(2.0) else {
            panic!("a gRPC interval")
        };
        assert_eq!(i.rpcs_per_sec, 1.0);
        assert_eq!(i.tx_bytes_per_sec, 100.0);
        assert_eq!(i.errors.get("UNAVAILABLE"), Some(&1));
        assert_eq!(p.take_latency().map(|h| h.len()), Some(2));
        let Some(EngineTotals::Grpc(t)) = p.totals() else {
            panic!("gRPC totals")
        };
        assert_eq!((t.rpcs, t.tx_payload, t.rx_payload), (3, 300, 150));
    }
}

//! What a test point runs: [`EngineSpec`], one arm per engine, and the limits
//! every face and the agent check against.
//!
//! The spec is plain data. The controller builds it from the command line (or
//! the TUI's control view), sends it to the agent inside `Start`, and both
//! ends run from it. It is serialised with the engine name as a tag
//! (`{"engine": "tcp", "mode": "stream", ...}`), so each engine keeps its own
//! knobs and logs written before engines were an enum still read back.

use super::grpc::{GrpcInterval, GrpcSpec};
use super::limits::MemoryNeed;
use super::rdma::{RdmaInterval, RdmaOutcome, RdmaSetup, RdmaSpec};
use super::sink::engine::{GenEndTotals, GenLive, SinkEndTotals, SinkLive};
use super::sink::{GeneratorEnd, SinkEnd, SinkSpec};
use super::tcp::{TcpMode, TcpSpec};
use super::{ConnRole, EngineKind, Side};
use crate::units::CpuId;
use serde::{Deserialize, Serialize};

/// Everything both ends need to know to run one test point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "engine", rename_all = "lowercase")]
pub enum EngineSpec {
    /// Kernel TCP sockets: stream, pingpong, rr.
    Tcp(TcpSpec),
    /// grpc.testing.BenchmarkService: unary calls or ping-pong streams.
    Grpc(GrpcSpec),
    /// UDP/IPv4 frames from a packet generator to a packet sink.
    Sink(SinkSpec),
    /// RC queue pairs over libibverbs: RDMA WRITE, READ or SEND.
    Rdma(RdmaSpec),
}

impl EngineSpec {
    /// Which engine.
    pub fn kind(&self) -> EngineKind {
        match self {
            EngineSpec::Tcp(_) => EngineKind::Tcp,
            EngineSpec::Grpc(_) => EngineKind::Grpc,
            EngineSpec::Sink(_) => EngineKind::Sink,
            EngineSpec::Rdma(_) => EngineKind::Rdma,
        }
    }

    /// The mode's name (`stream`, `rr`, ...), as typed on the command line.
    pub fn mode_name(&self) -> &'static str {
        match self {
            EngineSpec::Tcp(t) => t.mode.name(),
            EngineSpec::Grpc(g) => g.mode.name(),
            EngineSpec::Sink(s) => s.mode.name(),
            EngineSpec::Rdma(r) => r.mode.name(),
        }
    }

    /// Which way the data goes between the controller's host (left) and
    /// the agent's (right): `->`, `<-` (reverse, RDMA READ) or `<->`.
    pub fn arrow(&self) -> &'static str {
        match self {
            EngineSpec::Tcp(t) if t.bidir => "<->",
            EngineSpec::Tcp(t) if t.reverse => "<-",
            EngineSpec::Sink(s) if s.sink_side() == Side::Controller => "<-",
            EngineSpec::Rdma(r) if r.bidir => "<->",
            EngineSpec::Rdma(r) if r.op == crate::traffic::rdma::RdmaOp::Read => "<-",
            _ => "->",
        }
    }

    /// The TCP arm, when this is a TCP test.
    pub fn as_tcp(&self) -> Option<&TcpSpec> {
        match self {
            EngineSpec::Tcp(t) => Some(t),
            _ => None,
        }
    }

    /// The RDMA arm, when this is an RDMA test.
    pub fn as_rdma(&self) -> Option<&RdmaSpec> {
        match self {
            EngineSpec::Rdma(r) => Some(r),
            _ => None,
        }
    }

    /// The packet arm, when this is a packet test.
    pub fn as_sink(&self) -> Option<&SinkSpec> {
        match self {
            EngineSpec::Sink(s) => Some(s),
            _ => None,
        }
    }

    /// Mutable packet arm.
    pub fn as_sink_mut(&mut self) -> Option<&mut SinkSpec> {
        match self {
            EngineSpec::Sink(s) => Some(s),
            _ => None,
        }
    }

    /// The gRPC arm, when this is a gRPC test.
    pub fn as_grpc(&self) -> Option<&GrpcSpec> {
        match self {
            EngineSpec::Grpc(g) => Some(g),
            _ => None,
        }
    }

    /// Mutable gRPC arm.
    pub fn as_grpc_mut(&mut self) -> Option<&mut GrpcSpec> {
        match self {
            EngineSpec::Grpc(g) => Some(g),
            _ => None,
        }
    }

    /// Mutable TCP arm.
    pub fn as_tcp_mut(&mut self) -> Option<&mut TcpSpec> {
        match self {
            EngineSpec::Tcp(t) => Some(t),
            _ => None,
        }
    }

    /// True for a bulk-transfer TCP test (the throughput table's layout).
    pub fn is_tcp_stream(&self) -> bool {
        self.as_tcp().is_some_and(|t| t.mode == TcpMode::Stream)
    }

    /// Data connections the controller opens to the agent for this point.
    pub fn connection_count(&self) -> usize {
        match self {
            EngineSpec::Tcp(t) => t.connection_count(),
            EngineSpec::Grpc(g) => g.connection_count(),
            // Frames go between the interfaces, and RDMA over its own
            // queue pairs, not over data connections.
            EngineSpec::Sink(_) | EngineSpec::Rdma(_) => 0,
        }
    }

    /// What `side` does on each data connection, by index.
    pub fn conn_roles(&self, side: Side) -> Vec<ConnRole> {
        match self {
            EngineSpec::Tcp(t) => t.conn_roles(side),
            EngineSpec::Grpc(g) => g.conn_roles(side),
            EngineSpec::Sink(_) | EngineSpec::Rdma(_) => Vec::new(),
        }
    }

    /// Apply one point of a sweep to this spec (each engine knows which of
    /// its knobs the parameter names).
    pub fn apply_sweep(&mut self, p: super::options::SweepPoint<'_>) {
        match self {
            EngineSpec::Tcp(t) => t.apply_sweep(p),
            EngineSpec::Grpc(g) => g.apply_sweep(p),
            EngineSpec::Sink(s) => s.apply_sweep(p),
            EngineSpec::Rdma(r) => r.apply_sweep(p),
        }
    }

    /// The limits an agent enforces on a spec received from the network.
    pub fn validate(&self) -> Result<(), super::limits::SpecError> {
        match self {
            EngineSpec::Tcp(t) => t.validate(),
            EngineSpec::Grpc(g) => g.validate(),
            EngineSpec::Sink(s) => s.validate(),
            EngineSpec::Rdma(r) => r.validate(),
        }
    }

    /// CPUs `side` pins its worker threads to (empty: unpinned).
    pub fn cpus_for(&self, side: Side) -> &[CpuId] {
        match self {
            EngineSpec::Tcp(t) => t.cpus_for(side),
            EngineSpec::Grpc(g) => g.cpus_for(side),
            EngineSpec::Sink(s) => s.cpus_for(side),
            EngineSpec::Rdma(_) => &[],
        }
    }

    /// The options that run this test with `n` flows (for fixes that spread
    /// traffic over queues or cores): `-P n`, `-m rr --conns n`,
    /// `--engine grpc --channels n`.
    pub fn with_flows(&self, n: u32) -> String {
        match self {
            EngineSpec::Tcp(t) if t.mode == TcpMode::Stream => format!("-P {n}"),
            EngineSpec::Tcp(t) => format!("-m {} --conns {n}", t.mode.name()),
            EngineSpec::Grpc(g) => format!(
                "--engine grpc -m {} --channels {n} --concurrency {}",
                g.mode.name(),
                g.concurrency.max(n)
            ),
            EngineSpec::Sink(s) => format!(
                "--engine sink --sink {} --queues {n} --frame-size {}",
                s.mode.name(),
                s.frame_size
            ),
            EngineSpec::Rdma(r) => format!(
                "--engine rdma --op {} -m {} --qps {n}",
                r.op.name(),
                r.mode.name()
            ),
        }
    }

    /// A few words for a header (`tcp stream -P 2`, `tcp rr --conns 16`).
    pub fn short(&self) -> String {
        match self {
            EngineSpec::Tcp(t) if t.mode == TcpMode::Stream => {
                format!("tcp stream -P {}", t.streams)
            }
            EngineSpec::Tcp(t) => format!("tcp {} --conns {}", t.mode.name(), t.streams),
            EngineSpec::Grpc(g) => format!(
                "grpc {} --channels {} --concurrency {}",
                g.mode.name(),
                g.channels,
                g.concurrency
            ),
            EngineSpec::Sink(s) => format!(
                "sink {} {} B --queues {}",
                s.mode.name(),
                s.frame_size,
                s.queues
            ),
            EngineSpec::Rdma(r) => {
                format!("rdma {} {} --qps {}", r.op.name(), r.mode.name(), r.qps)
            }
        }
    }

    /// What this point allocates on `side`, checked against the host's
    /// available memory before anything is allocated.
    pub fn memory_needed(&self, side: Side) -> MemoryNeed {
        match self {
            EngineSpec::Tcp(t) => t.memory_needed(side),
            EngineSpec::Grpc(g) => g.memory_needed(side),
            EngineSpec::Sink(s) => MemoryNeed {
                bytes: crate::units::Bytes(s.memory_bound()),
                what: format!("{} queue rings of {} B frames", s.queues, s.frame_size),
                smaller: "use fewer --queues or a smaller --frame-size".into(),
            },
            EngineSpec::Rdma(r) => MemoryNeed {
                bytes: crate::units::Bytes(r.memory_bytes()),
                what: format!("{} QP buffers of {} and timestamps", r.qps, r.size),
                smaller: "use fewer --qps, a smaller --size or fewer --iters".into(),
            },
        }
    }

    /// File descriptors this point opens on a side (data sockets and the
    /// duplicates kept for TCP_INFO).
    pub fn descriptors_needed(&self) -> u64 {
        if let EngineSpec::Sink(s) = self {
            // A socket (and an XDP map entry) per queue, per flow with sendmmsg.
            return u64::from(s.queues)
                .saturating_add(u64::from(s.flow_count()))
                .saturating_add(8);
        }
        (self.connection_count() as u64).saturating_mul(3)
    }

    /// One line that says what runs, for logs and status lines
    /// (`tcp stream streams=2 len=131072`).
    pub fn label(&self) -> String {
        match self {
            EngineSpec::Tcp(t) => format!(
                "tcp {} streams={} len={} size={}",
                t.mode.name(),
                t.streams,
                t.len.0,
                t.size.0
            ),
            EngineSpec::Grpc(g) => format!(
                "grpc {} channels={} concurrency={} size={} resp_size={}",
                g.mode.name(),
                g.channels,
                g.concurrency,
                g.size.0,
                g.resp_size.0
            ),
            EngineSpec::Sink(s) => format!(
                "sink {} frame_size={} queues={} flows={} rate={}{}",
                s.mode.name(),
                s.frame_size,
                s.queues,
                s.flow_count(),
                s.rate,
                if s.reverse { " reverse" } else { "" }
            ),
            EngineSpec::Rdma(r) => r.describe(),
        }
    }
}

/// What the lifecycle of a test (the plan, the local pair, the session and
/// the faces that start it) asks of a spec, answered by each engine in its
/// folder: the callers ask what the answer means for them, never which
/// engine runs.
impl EngineSpec {
    /// Whether one run of this point measures both directions at once
    /// (TCP `--bidir`), so a fleet tests each pair once instead of once per
    /// direction.
    pub fn both_ways_in_one_run(&self) -> bool {
        self.as_tcp().is_some_and(TcpSpec::both_ways_in_one_run)
    }

    /// Fill in what depends on the host that runs both ends' plan: worker
    /// threads from its `online` CPUs, and, when both ends share the host,
    /// CPUs that keep them apart (from the `usable` ones; too few leaves
    /// the threads unpinned and the spec says so).
    pub fn settle_on_host(
        &mut self,
        online: impl FnOnce() -> usize,
        usable: impl FnOnce() -> Vec<CpuId>,
    ) {
        match self {
            EngineSpec::Tcp(t) => t.settle_on_host(online),
            EngineSpec::Sink(s) => s.settle_on_host(usable),
            EngineSpec::Grpc(_) | EngineSpec::Rdma(_) => {}
        }
    }

    /// Mark that both ends run on this host (the local pair), so the spec
    /// keeps them apart when it settles ([`Self::settle_on_host`]).
    pub fn put_ends_on_one_host(&mut self) {
        if let EngineSpec::Sink(s) = self {
            s.put_ends_on_one_host();
        }
    }

    /// Why the test cannot run between the two ends of a loopback pair,
    /// when it cannot (its frames must go between two interfaces on one
    /// link): one line with what to do instead.
    pub fn loopback_refusal(&self) -> Option<&'static str> {
        self.as_sink().and_then(SinkSpec::loopback_refusal)
    }

    /// Prepare `side` of this point on `host`: each engine builds its own
    /// engine. `toward` is the other end's test address as this side knows
    /// it (engines that pick an interface or device pick the one that routes
    /// there).
    pub fn prepare(
        &self,
        side: Side,
        toward: Option<std::net::IpAddr>,
        host: &dyn super::EngineHost,
    ) -> Result<Box<dyn super::Engine>, super::EngineError> {
        match self {
            EngineSpec::Sink(s) => super::sink::engine::prepare_on_host(s, side, toward, host),
            EngineSpec::Rdma(r) => super::rdma::session::prepare_on_host(r, side, toward, host),
            EngineSpec::Tcp(_) | EngineSpec::Grpc(_) => super::prepare_engine(self, side),
        }
    }

    /// What this host must have for the test before anything else happens
    /// (RDMA: the verbs library and a device), checked on `host` toward the
    /// peer at `toward` (None: the local pair, over the default route): one
    /// line with the fix when something is missing.
    pub fn preflight(
        &self,
        host: &dyn super::EngineHost,
        toward: Option<std::net::IpAddr>,
    ) -> Result<(), String> {
        match self {
            EngineSpec::Rdma(_) => super::rdma::session::preflight_on_host(host, toward),
            EngineSpec::Tcp(_) | EngineSpec::Grpc(_) | EngineSpec::Sink(_) => Ok(()),
        }
    }

    /// The side whose CPU list a `--sweep cores` set gives, when the engine
    /// sweeps cores (the packet sink's side).
    pub fn cores_sweep_side(&self) -> Option<Side> {
        self.as_sink().map(SinkSpec::sink_side)
    }

    /// The IP MTU the link between the ends needs for this point's frames,
    /// when the engine sends frames of a size it chooses (the frame less
    /// 14 B of Ethernet header and 4 B of FCS).
    pub fn frame_mtu(&self) -> Option<u32> {
        self.as_sink().map(SinkSpec::ip_mtu)
    }

    /// Receive threads that each need an rx queue of their own, when the
    /// engine runs one thread per queue.
    pub fn rx_queues_needed(&self) -> Option<u32> {
        self.as_sink().and_then(SinkSpec::rx_queues_needed)
    }

    /// One line on where the threads run, when the engine chooses CPUs
    /// itself and says so before its first interval.
    pub fn pinning_line(&self) -> Option<String> {
        self.as_sink().map(SinkSpec::pinning_line)
    }

    /// Whether this engine's client can run against a third-party server
    /// without an agent (`run --target`).
    pub fn runs_against_servers(&self) -> bool {
        self.as_grpc().is_some()
    }

    /// One request with the test's sizes to the server at `target`, before
    /// anything starts: whether it is there and serves this test.
    pub fn check_server(&self, target: &str) -> Result<(), ServerCheckError> {
        match self {
            EngineSpec::Grpc(g) => g.check_server(target),
            _ => Err(ServerCheckError::Usage(format!(
                "{} cannot run against a server without an agent",
                self.short()
            ))),
        }
    }

    /// Start this engine's client against the server at `target` (see
    /// [`Self::runs_against_servers`]), once its first request proved the
    /// server. Blocks the calling thread.
    pub fn start_against_server(
        &self,
        target: String,
    ) -> Result<super::RunningEngine, super::EngineError> {
        match self {
            EngineSpec::Grpc(g) => {
                super::grpc::GrpcEngine::against(g.clone(), target).start_ready()
            }
            _ => Err(super::EngineError::Unsupported(format!(
                "{} needs an agent; it cannot run against a server",
                self.short()
            ))),
        }
    }
}

/// Why a third-party server does not serve a test ([`EngineSpec::check_server`]).
#[derive(Debug, thiserror::Error)]
pub enum ServerCheckError {
    /// The server answered, but not as this test needs (not the service,
    /// unimplemented, a message size it refuses): change the command.
    #[error("{0}")]
    Usage(String),
    /// The server is not there or the request failed.
    #[error("{0}")]
    Failed(String),
}

/// What one end tells the other before a point starts, when its engine needs
/// more than data connections (RDMA: queue pairs, keys, addresses; a packet
/// sink: MACs and queues). The controller sends its own in `Start`, the agent
/// answers with its own in `Accepting`; both check what they receive. Each
/// engine that exchanges anything adds its variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "engine", rename_all = "lowercase")]
pub enum EngineSetup {
    /// A packet sink: where to send (MAC, address), its queues and mode.
    Sink(SinkEnd),
    /// A packet generator: its MAC, address and flows.
    Generator(GeneratorEnd),
    /// RDMA queue pairs: QPNs, PSNs, LID/GID, rkeys, addresses, MTU.
    Rdma(RdmaSetup),
}

impl EngineSetup {
    /// The test address of the end that sent this setup, when it names one
    /// (the interface or device that carries the test routes to it; the
    /// control connection may use another network).
    pub fn address(&self) -> Option<std::net::IpAddr> {
        match self {
            EngineSetup::Sink(e) => Some(std::net::IpAddr::V4(e.ip)),
            EngineSetup::Generator(e) => Some(std::net::IpAddr::V4(e.ip)),
            EngineSetup::Rdma(r) => r
                .gid
                .and_then(|g| g.to_ipv4_mapped())
                .map(std::net::IpAddr::V4),
        }
        .filter(|ip| match ip {
            std::net::IpAddr::V4(v4) => super::sink::engine::is_test_address(*v4),
            std::net::IpAddr::V6(_) => false,
        })
    }
}

/// An engine's own figures for one interval, beyond the byte and message
/// counters every engine has (`EngineSample::extra`). Each engine with
/// figures of its own adds its variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "engine", rename_all = "lowercase")]
pub enum EngineInterval {
    /// The gRPC end's RPC rate, payload goodput, latency and statuses.
    Grpc(GrpcInterval),
    /// A packet sink's counts per queue, rates and drops.
    Sink(Box<SinkLive>),
    /// A packet generator's counts per thread and rates.
    Generator(Box<GenLive>),
    /// An RDMA end's bytes and messages per QP.
    Rdma(RdmaInterval),
}

impl EngineInterval {
    /// The span (s) this engine's figures cover when it is not the whole
    /// interval: a packet sink's last interval ends when its counts last
    /// moved (the quiet tail of the drain is waiting, not receiving), so its
    /// rates, and the Sample's message rate, are over that span.
    pub fn own_span_s(&self) -> Option<f64> {
        match self {
            EngineInterval::Sink(k) => Some(k.figures.secs),
            EngineInterval::Generator(g) => Some(g.figures.secs),
            EngineInterval::Grpc(_) | EngineInterval::Rdma(_) => None,
        }
    }
}

/// An engine's own totals at the end of a point (`SideResult::extra`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "engine", rename_all = "lowercase")]
pub enum EngineTotals {
    /// The gRPC end's figures over the whole point and its peak memory.
    Grpc(super::grpc::GrpcTotals),
    /// A packet sink's counters at both ends of the point and what it saw per flow.
    Sink(Box<SinkEndTotals>),
    /// A packet generator's counters and what it sent per flow.
    Generator(Box<GenEndTotals>),
    /// An RDMA end's perftest-style result.
    Rdma(Box<RdmaOutcome>),
}

/// What the layers above ask of a test's spec, answered by its engine
/// (the read side: the diagnosis, the summary, the record).
impl EngineSpec {
    /// True when small packets are the test's workload, so GRO has nothing
    /// to aggregate: every message fits in one packet (`mtu` bytes) each way
    /// (rr, pingpong and gRPC with messages ≤ MTU), or the engine moves
    /// frames or work requests, not a byte stream (packet and RDMA tests).
    pub fn small_packets_by_design(&self, mtu: f64) -> bool {
        match self {
            EngineSpec::Tcp(t) => t.small_packets_by_design(mtu),
            EngineSpec::Grpc(g) => g.small_packets_by_design(mtu),
            EngineSpec::Sink(_) | EngineSpec::Rdma(_) => true,
        }
    }

    /// True when the engine's own rules judge where `side`'s cores sit
    /// relative to the NIC (a packet sink's), so the host-wide NUMA rule
    /// leaves them be: one cause, one finding.
    pub fn judges_own_numa(&self, side: Side) -> bool {
        match self {
            EngineSpec::Sink(k) => k.judges_own_numa(side),
            _ => false,
        }
    }

    /// True when the summary reports the MiB/s the client received
    /// (TCP pingpong: muduo's figure).
    pub fn reports_mib_per_s(&self) -> bool {
        self.as_tcp().is_some_and(TcpSpec::reports_mib_per_s)
    }

    /// True when the senders use MSG_ZEROCOPY, so each stream row reports
    /// its zero-copy completions.
    pub fn sends_zerocopy(&self) -> bool {
        self.as_tcp().is_some_and(|t| t.zerocopy)
    }

    /// The spec as it ran, with what the ends chose themselves and
    /// reported in their totals filled in (a packet test's default
    /// pinning); any other spec as it was.
    pub fn as_run<'a>(&self, totals: impl IntoIterator<Item = &'a EngineTotals>) -> EngineSpec {
        match self {
            EngineSpec::Sink(k) => EngineSpec::Sink(super::sink::engine::as_run(k, totals)),
            other => other.clone(),
        }
    }

    /// The cores the test pins its busiest threads to on one host (a packet
    /// test's sink cores: the spec's list, else what the sink chose itself
    /// and reports in `live`), for the facts view to place; `live`: both
    /// ends' figures of the interval shown (local, peer).
    pub fn placed_cores(&self, live: [Option<&EngineInterval>; 2]) -> Option<super::PlacedCores> {
        match self {
            EngineSpec::Sink(k) => super::sink::views::placed_cores(k, live),
            _ => None,
        }
    }
}

/// What the layers above ask of one end's own interval figures (the read
/// side: the report, the views).
impl EngineInterval {
    /// The change over the interval of the messages the receiving end
    /// finds missing (a packet sink's gaps below the highest sequence seen;
    /// negative when late frames filled more gaps than opened), when the
    /// engine counts them.
    pub fn missing_in_interval(&self) -> Option<i64> {
        match self {
            EngineInterval::Sink(k) => Some(k.figures.missing_delta),
            _ => None,
        }
    }

    /// True when this end's message rate is the test's whichever host it
    /// runs on (a packet sink counts the frames that arrived; the
    /// generator's count is what it sent).
    pub fn counts_the_tests_rate(&self) -> bool {
        matches!(self, EngineInterval::Sink(_))
    }

    /// This end's own count of its queues (a packet sink's), for the queues
    /// view; None when the engine counts no queues of its own.
    pub fn own_queues(&self) -> Option<super::OwnQueues> {
        match self {
            EngineInterval::Sink(k) => Some(super::sink::views::own_queues(k)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arrow_follows_the_data() {
        let sink = |reverse| {
            EngineSpec::Sink(SinkSpec {
                reverse,
                ..SinkSpec::default()
            })
        };
        assert_eq!(sink(false).arrow(), "->");
        assert_eq!(sink(true).arrow(), "<-");
        use crate::traffic::rdma::{RdmaMode, RdmaOp};
        let rdma = |op| RdmaSpec::perftest_defaults(op, RdmaMode::Bw);
        assert_eq!(EngineSpec::Rdma(rdma(RdmaOp::Write)).arrow(), "->");
        assert_eq!(EngineSpec::Rdma(rdma(RdmaOp::Read)).arrow(), "<-");
        let bidir = RdmaSpec {
            bidir: true,
            ..rdma(RdmaOp::Write)
        };
        assert_eq!(EngineSpec::Rdma(bidir).arrow(), "<->");
    }
}

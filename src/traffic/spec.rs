//! What a test point runs, as every engine's spec answers it: the
//! [`EngineSpecOps`] trait, and the limits every face and the agent check
//! against.
//!
//! The spec is plain data. The controller builds it from the command line (or
//! the TUI's control view), sends it to the agent inside `Start`, and both
//! ends run from it. [`EngineSpec`] (in the registry, the one place that
//! lists the engines) is serialised with the engine name as a tag
//! (`{"engine": "tcp", "mode": "stream", ...}`), so each engine keeps its own
//! knobs and logs written before engines were an enum still read back.
//!
//! `EngineSpec` derefs to its engine's [`EngineSpecOps`]: the session, the
//! plan, the faces and the diagnosis ask `spec.validate()`,
//! `spec.frame_mtu()`, `spec.prepare(..)` and never match on the engine.
//! Every method with a default has the answer of an engine that has nothing
//! of its own to say, so an engine implements only what it has.

use super::limits::{MemoryNeed, SpecError};
use super::options::SweepPoint;
use super::{
    ConnRole, Engine, EngineError, EngineHost, EngineInterval, EngineKind, EngineSpec,
    EngineTotals, PlacedCores, RunningEngine, Side,
};
use crate::units::CpuId;
use std::net::IpAddr;

/// Receive threads of a test that each need an rx queue of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxQueues {
    /// The threads.
    pub threads: u32,
    /// The option that sets their number (`--queues`).
    pub flag: &'static str,
}

/// What the session, the plan, the faces and the diagnosis ask of a test's
/// spec, answered by its engine in its folder. The callers ask what the
/// answer means for them, never which engine runs.
pub trait EngineSpecOps: Send + Sync {
    /// Which engine.
    fn kind(&self) -> EngineKind;

    /// The mode's name (`stream`, `rr`, ...), as typed on the command line.
    fn mode_name(&self) -> &'static str;

    /// Which way the data goes between the controller's host (left) and
    /// the agent's (right): `->`, `<-` (reverse, RDMA READ) or `<->`.
    fn arrow(&self) -> &'static str {
        "->"
    }

    /// Data connections the controller opens to the agent for this point
    /// (none for engines that move frames between interfaces or work over
    /// queue pairs of their own).
    fn connection_count(&self) -> usize {
        0
    }

    /// What `side` does on each data connection, by index.
    fn conn_roles(&self, _side: Side) -> Vec<ConnRole> {
        Vec::new()
    }

    /// A fresh data socket for `addr` with the options the engine needs
    /// before `connect` (buffer sizes and MSS go into the SYN).
    fn data_socket(
        &self,
        _addr: &std::net::SocketAddr,
        _conn: usize,
    ) -> Result<socket2::Socket, EngineError> {
        Err(EngineError::Unsupported(format!(
            "{} tests open no data connections",
            self.kind().name()
        )))
    }

    /// Apply one point of a sweep to this spec (each engine knows which of
    /// its knobs the parameter names; the others are refused before).
    fn apply_sweep(&mut self, p: SweepPoint<'_>);

    /// The limits an agent enforces on a spec received from the network
    /// (the controller's command line checks the same ranges from the same
    /// constants, with friendlier messages).
    fn validate(&self) -> Result<(), SpecError>;

    /// CPUs `side` pins its worker threads to (empty: unpinned).
    fn cpus_for(&self, _side: Side) -> &[CpuId] {
        &[]
    }

    /// The options that run this test with `n` flows (for fixes that spread
    /// traffic over queues or cores): `-P n`, `-m rr --conns n`,
    /// `--engine grpc --channels n`.
    fn with_flows(&self, n: u32) -> String;

    /// A few words for a header (`tcp stream -P 2`, `tcp rr --conns 16`).
    fn short(&self) -> String;

    /// One line that says what runs, for logs and status lines
    /// (`tcp stream streams=2 len=131072`).
    fn label(&self) -> String;

    /// What this point allocates on `side`, checked against the host's
    /// available memory before anything is allocated.
    fn memory_needed(&self, side: Side) -> MemoryNeed;

    /// File descriptors this point opens on a side (data sockets and the
    /// duplicates kept for TCP_INFO).
    fn descriptors_needed(&self) -> u64 {
        (self.connection_count() as u64).saturating_mul(3)
    }

    // What the lifecycle of a test (the plan, the local pair, the session
    // and the faces that start it) asks.

    /// Whether one run of this point measures both directions at once
    /// (TCP `--bidir`), so a fleet tests each pair once instead of once per
    /// direction.
    fn both_ways_in_one_run(&self) -> bool {
        false
    }

    /// Fill in what depends on the host that runs both ends' plan: worker
    /// threads from its `online` CPUs, and, when both ends share the host,
    /// CPUs that keep them apart (from the `usable` ones; too few leaves
    /// the threads unpinned and the spec says so).
    fn settle_on_host(&mut self, _online: &dyn Fn() -> usize, _usable: &dyn Fn() -> Vec<CpuId>) {}

    /// Mark that both ends run on this host (the local pair), so the spec
    /// keeps them apart when it settles ([`Self::settle_on_host`]).
    fn put_ends_on_one_host(&mut self) {}

    /// Why the test cannot run between the two ends of a loopback pair,
    /// when it cannot (its frames must go between two interfaces on one
    /// link): one line with what to do instead.
    fn loopback_refusal(&self) -> Option<&'static str> {
        None
    }

    /// Prepare `side` of this point on `host`: each engine builds its own
    /// engine. `toward` is the other end's test address as this side knows
    /// it (engines that pick an interface or device pick the one that routes
    /// there).
    fn prepare(
        &self,
        side: Side,
        toward: Option<IpAddr>,
        host: &dyn EngineHost,
    ) -> Result<Box<dyn Engine>, EngineError>;

    /// What this host must have for the test before anything else happens
    /// (RDMA: the verbs library and a device), checked on `host` toward the
    /// peer at `toward` (None: the local pair, over the default route): one
    /// line with the fix when something is missing (a usage error: exit 2).
    fn preflight(
        &self,
        _host: &dyn EngineHost,
        _toward: Option<IpAddr>,
    ) -> Result<(), EngineError> {
        Ok(())
    }

    /// The side whose CPU list a `--sweep cores` set gives, when the engine
    /// sweeps cores (the packet sink's side).
    fn cores_sweep_side(&self) -> Option<Side> {
        None
    }

    /// The IP MTU the link between the ends needs for this point's frames,
    /// when the engine sends frames of a size it chooses (the frame less
    /// 14 B of Ethernet header and 4 B of FCS).
    fn frame_mtu(&self) -> Option<u32> {
        None
    }

    /// Receive threads that each need an rx queue of their own, when the
    /// engine runs one thread per queue.
    fn rx_queues_needed(&self) -> Option<RxQueues> {
        None
    }

    /// One line on where the threads run, when the engine chooses CPUs
    /// itself and says so before its first interval.
    fn pinning_line(&self) -> Option<String> {
        None
    }

    /// One request with the test's sizes to the server at `target`, before
    /// anything starts: whether it is there and serves this test.
    fn check_server(&self, _target: &str) -> Result<(), ServerCheckError> {
        Err(ServerCheckError::Usage(format!(
            "{} cannot run against a server without an agent",
            self.short()
        )))
    }

    /// Start this engine's client against the server at `target` (see
    /// [`crate::traffic::EngineSlice::foreign_client`]), once its first request proved the
    /// server. Blocks the calling thread.
    fn start_against_server(&self, _target: String) -> Result<RunningEngine, EngineError> {
        Err(EngineError::Unsupported(format!(
            "{} needs an agent; it cannot run against a server",
            self.short()
        )))
    }

    // What the layers above ask (the read side: the diagnosis, the
    // summary, the record, the views).

    /// True when small packets are the test's workload, so GRO has nothing
    /// to aggregate: every message fits in one packet (`mtu` bytes) each way
    /// (rr, pingpong and gRPC with messages ≤ MTU), or the engine moves
    /// frames or work requests, not a byte stream (packet and RDMA tests).
    /// No default: a byte-stream engine that forgot it would silence the
    /// GRO rule.
    fn small_packets_by_design(&self, mtu: f64) -> bool;

    /// True when the test moves one byte stream per connection in bulk
    /// (TCP stream): its figures are iperf3's (bit/s, retransmits, no
    /// message rate), and the closing table and the views are laid out so.
    fn bulk_transfer(&self) -> bool {
        false
    }

    /// The fix that saves the kernel's send copy when a test is bound by
    /// system time, when the engine has an option for it (TCP stream:
    /// `--zerocopy`).
    fn send_copy_fix(&self) -> Option<&'static str> {
        None
    }

    /// True when the engine's own rules judge where `side`'s cores sit
    /// relative to the NIC (a packet sink's), so the host-wide NUMA rule
    /// leaves them be: one cause, one finding.
    fn judges_own_numa(&self, _side: Side) -> bool {
        false
    }

    /// True when the summary reports the MiB/s the client received
    /// (TCP pingpong: muduo's figure).
    fn reports_mib_per_s(&self) -> bool {
        false
    }

    /// True when the senders use MSG_ZEROCOPY, so each stream row reports
    /// its zero-copy completions.
    fn sends_zerocopy(&self) -> bool {
        false
    }

    /// The spec as it ran, when the ends chose something themselves and
    /// reported it in their `totals` (a packet test's default pinning);
    /// None: the spec as it was.
    fn chosen_by_ends(&self, _totals: &[&EngineTotals]) -> Option<EngineSpec> {
        None
    }

    /// The cores the test pins its busiest threads to on one host (a packet
    /// test's sink cores: the spec's list, else what the sink chose itself
    /// and reports in `live`), for the facts view to place; `live`: both
    /// ends' figures of the interval shown (local, peer).
    fn placed_cores(&self, _live: [Option<&EngineInterval>; 2]) -> Option<PlacedCores> {
        None
    }
}

impl EngineSpec {
    /// The spec as it ran, with what the ends chose themselves and
    /// reported in their totals filled in (see
    /// [`EngineSpecOps::chosen_by_ends`]); any other spec as it was.
    pub fn as_run<'a>(&self, totals: impl IntoIterator<Item = &'a EngineTotals>) -> EngineSpec {
        let totals: Vec<&EngineTotals> = totals.into_iter().collect();
        self.chosen_by_ends(&totals).unwrap_or_else(|| self.clone())
    }
}

/// Why a third-party server does not serve a test ([`EngineSpecOps::check_server`]).
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

/// How an engine's client that runs against a foreign server without an
/// agent ([`crate::traffic::EngineSlice::foreign_client`]) and that server are named in
/// messages (`wirescope: gRPC client against 10.0.0.2:50051`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForeignClient {
    /// The client (`gRPC client`).
    pub client: &'static str,
    /// A server it runs against (`gRPC server`).
    pub server: &'static str,
    /// Any server that serves its test, with its article (`a
    /// BenchmarkService server`).
    pub any_server: &'static str,
}

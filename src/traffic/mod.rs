//! The data plane: engines that generate and sink traffic.
//!
//! An engine owns its worker threads and its data sockets. It counts bytes,
//! messages and latency into lock-free [`EngineCounters`] and never prints,
//! logs or draws anything: the sampler reads the counters once per interval.
//! An engine's slice words its own figures (summary rows, a server's lines,
//! [`serve`]) and hands the text to the face that prints it.
//!
//! Both ends of a test run the same engine code; [`Side`] says which end this
//! process is, and [`EngineSpecOps::conn_roles`] tells each end what to do on each
//! data connection, so the two ends cannot disagree about who sends.

pub mod bpf;
pub mod grpc;
pub mod habits;
pub mod limits;
pub mod options;
pub mod paths;
pub mod rdma;
pub mod registry;
pub mod sched;
pub mod serve;
pub mod sink;
pub mod spec;
pub mod tcp;
pub(crate) mod workers;

pub use limits::MemoryNeed;
pub use paths::DataPaths;
pub use registry::{
    ladder, si, EngineForm, EngineSlice, FormDirection, FormOptions, Headline, IntervalRow,
    OwnQueueRow, OwnQueues, PayloadCells, PlacedCores, PointEnds, TestOptions, Warmup,
};
pub use registry::{slice, EngineArgs, Sections};
pub use registry::{EngineInterval, EngineKind, EngineSetup, EngineSpec, EngineTotals};
pub use sched::{pin_current_thread, raise_priority, Priority};
pub use spec::{EngineSpecOps, ForeignClient, RxQueues, ServerCheckError};

use crate::units::CpuId;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Which end of the node pair this process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// Runs `wirescope run` / the TUI and opens the data connections.
    Controller,
    /// Runs `wirescope agent` and accepts them.
    Agent,
}

/// What one end does on one data connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConnRole {
    /// stream: writes bulk data.
    Sender,
    /// stream: reads bulk data.
    Receiver,
    /// rr: issues requests and measures latency; pingpong: starts the echo.
    Client,
    /// rr: answers requests; pingpong: echoes.
    Server,
}

/// Counters of one data connection. Written by exactly one worker thread,
/// read by the sampler; aligned so neighbours do not share a cache line.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct ConnCounters {
    /// Bytes written to the socket.
    pub tx_bytes: AtomicU64,
    /// Bytes read from the socket (or discarded by MSG_TRUNC).
    pub rx_bytes: AtomicU64,
    /// Completed messages (rr: responses received or requests answered).
    pub messages: AtomicU64,
    /// MSG_ZEROCOPY sends completed by the kernel.
    pub zc_completed: AtomicU64,
    /// ... of which the kernel had to copy after all (always so on loopback/veth).
    pub zc_copied: AtomicU64,
}

/// A point-in-time copy of one connection's counters.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ConnSnapshot {
    /// Bytes written.
    pub tx_bytes: u64,
    /// Bytes read.
    pub rx_bytes: u64,
    /// Messages completed.
    pub messages: u64,
    /// Zero-copy sends completed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub zc_completed: u64,
    /// Zero-copy sends the kernel copied.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub zc_copied: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl ConnCounters {
    /// Copy the counters (relaxed loads; each value is monotonic).
    pub fn snapshot(&self) -> ConnSnapshot {
        ConnSnapshot {
            tx_bytes: self.tx_bytes.load(Ordering::Relaxed),
            rx_bytes: self.rx_bytes.load(Ordering::Relaxed),
            messages: self.messages.load(Ordering::Relaxed),
            zc_completed: self.zc_completed.load(Ordering::Relaxed),
            zc_copied: self.zc_copied.load(Ordering::Relaxed),
        }
    }
}

/// Latency percentiles (µs) of a histogram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencySummary {
    /// Transactions measured.
    pub count: u64,
    /// Minimum.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Maximum.
    pub max: f64,
}

impl LatencySummary {
    /// Percentiles of a histogram recorded in ns; None when empty.
    pub fn from_histogram(h: &Histogram<u64>) -> Option<Self> {
        if h.is_empty() {
            return None;
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Some(LatencySummary {
            count: h.len(),
            min: us(h.min()),
            mean: h.mean() / 1000.0,
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        })
    }
}

/// Latency histograms are recorded in nanoseconds, 3 significant digits, up to 100 s.
pub fn new_latency_histogram() -> Histogram<u64> {
    // Bounds are constants that hdrhistogram accepts; a failure here is a programming error.
    #[allow(clippy::expect_used)]
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// All counters of a running engine.
#[derive(Debug)]
pub struct EngineCounters {
    /// One entry per data connection, by connection index.
    pub conns: Vec<ConnCounters>,
    /// One histogram per worker thread that measures latency; each worker
    /// merges its private histogram in every few milliseconds, the sampler
    /// swaps it out once per interval.
    pub latency: Vec<Mutex<Histogram<u64>>>,
}

impl EngineCounters {
    /// Counters for `conns` connections and `latency_workers` latency-measuring threads.
    pub fn new(conns: usize, latency_workers: usize) -> Self {
        EngineCounters {
            conns: (0..conns).map(|_| ConnCounters::default()).collect(),
            latency: (0..latency_workers)
                .map(|_| Mutex::new(new_latency_histogram()))
                .collect(),
        }
    }

    /// Snapshot of every connection.
    pub fn snapshot(&self) -> Vec<ConnSnapshot> {
        self.conns.iter().map(ConnCounters::snapshot).collect()
    }

    /// Take the latencies recorded since the last call (empty histogram if none).
    pub fn take_latency(&self) -> Histogram<u64> {
        let mut out = new_latency_histogram();
        for h in &self.latency {
            // A poisoned lock means a worker panicked; its data is still valid counts.
            let mut g = match h.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            // Both histograms share bounds, so add cannot fail; ignore to stay total.
            let _ = out.add(&*g);
            g.reset();
        }
        out
    }
}

/// Shared stop flags of a running engine, and its completion signal.
#[derive(Debug, Clone, Default)]
pub struct EngineControl {
    /// Graceful end: senders and clients stop issuing work and close their write side.
    pub stop: Arc<AtomicBool>,
    /// Immediate end (peer lost, error, Ctrl-C): every thread returns as soon as it wakes.
    pub abort: Arc<AtomicBool>,
    /// Worker threads still running.
    pub running: Arc<AtomicUsize>,
    /// Signalled once, by the last worker to exit (a stored permit, so it is
    /// never missed), so sessions wait for the engine without polling it.
    pub done: Arc<tokio::sync::Notify>,
    /// Workers wait here before their first byte (see [`StartGate`]).
    pub gate: Arc<StartGate>,
}

/// Where the workers of a gated engine wait until every one of them exists.
///
/// Spawning 1000 threads while the first ones already send took the
/// controller 2-4 s on two CPUs (the spawner waits for the address-space
/// lock the busy senders keep taking), while the agent's clock had started:
/// the first interval then held seconds of data ("76 Gbit/s" on a 15 Gbit/s
/// pair). A gated engine spawns every worker parked here, the session starts
/// the sampler's clock, then [`RunningEngine::release`] lets them all go at
/// once. Open by default (engines that do not gate never wait); stop and
/// abort open it too, so a parked worker always returns.
#[derive(Debug, Default)]
pub struct StartGate {
    closed: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
}

impl StartGate {
    fn lock(&self) -> std::sync::MutexGuard<'_, bool> {
        self.closed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Close the gate (before any worker is spawned).
    pub fn close(&self) {
        *self.lock() = true;
    }

    /// Let every waiting worker go.
    pub fn open(&self) {
        *self.lock() = false;
        self.opened.notify_all();
    }

    /// Wait until the gate is open.
    pub fn wait(&self) {
        let mut closed = self.lock();
        while *closed {
            closed = self
                .opened
                .wait(closed)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

impl EngineControl {
    /// Controls whose workers wait for [`RunningEngine::release`].
    pub fn gated() -> Self {
        let c = EngineControl::default();
        c.gate.close();
        c
    }

    /// A token counted like a worker; the engine is not "done" before it is dropped.
    pub fn starter(&self) -> WorkerExit {
        self.running.fetch_add(1, Ordering::AcqRel);
        WorkerExit(self.clone())
    }
}

/// Decrements the running count when a worker (or the starter token) goes
/// away, even by panic; the last one signals `done`.
pub struct WorkerExit(EngineControl);

impl Drop for WorkerExit {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.done.notify_one();
        }
    }
}

impl EngineControl {
    /// True once a graceful stop or an abort was requested.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.aborted()
    }
    /// True once an abort was requested.
    pub fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }
}

/// Errors of the data plane. Each names the operation and the connection.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A socket call failed on a data connection.
    #[error("{op} on data connection {conn} failed: {source}")]
    Io {
        /// The failed operation (e.g. "write", "setsockopt TCP_CONGESTION").
        op: &'static str,
        /// Connection index.
        conn: usize,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The test asked for something this host cannot do.
    #[error("{0}")]
    Unsupported(String),
    /// The test as asked does not fit the hosts or their interfaces and
    /// the command line must change: a usage error (exit 2), said in one line.
    #[error("{0}")]
    Usage(String),
    /// What an RDMA test needs is missing on this host (the verbs library,
    /// a device, the port or GID asked for): one line with the fix, a usage
    /// error (exit 2) like [`Self::Usage`].
    #[error(transparent)]
    Preflight(#[from] rdma::preflight::PreflightError),
    /// A worker thread could not be started.
    #[error("cannot start worker thread {name}: {source}")]
    Spawn {
        /// Thread name.
        name: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A worker thread panicked (a bug; the message is the panic payload).
    #[error("worker thread {0} panicked")]
    Panicked(String),
    /// A buffer could not be allocated (the host is out of memory, or a
    /// limit such as RLIMIT_AS or the cgroup's stops it).
    #[error("cannot allocate {bytes} for {what}: the host is out of memory for this test; use fewer connections or smaller buffers")]
    Memory {
        /// What the buffer is for.
        what: &'static str,
        /// Its size.
        bytes: crate::units::Bytes,
    },
}

/// A buffer of `len` bytes set to `fill`, or [`EngineError::Memory`] when
/// it cannot be had: an engine never aborts the process on an allocation.
pub fn alloc_buf(len: usize, fill: u8, what: &'static str) -> Result<Vec<u8>, EngineError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| EngineError::Memory {
        what,
        bytes: crate::units::Bytes(len as u64),
    })?;
    v.resize(len, fill);
    Ok(v)
}

/// A started engine: its threads, its counters and a duplicate of every data
/// socket (kept so the sampler can read TCP_INFO safely, even after a worker
/// closed its copy).
#[derive(Debug)]
pub struct RunningEngine {
    /// Worker threads, each returning its own result.
    pub threads: Vec<JoinHandle<Result<(), EngineError>>>,
    /// Counters the workers write.
    pub counters: Arc<EngineCounters>,
    /// Duplicated data sockets, by connection index.
    pub sockets: Vec<TcpStream>,
    /// Stop flags.
    pub control: EngineControl,
    /// Role of each connection on this side.
    pub roles: Vec<ConnRole>,
    /// The engine's own figures, when it has any beyond the counters.
    pub probe: Option<Arc<dyn EngineProbe>>,
}

impl std::fmt::Debug for dyn EngineProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EngineProbe")
    }
}

impl RunningEngine {
    /// An engine without workers, for observing without traffic
    /// (`wirescope watch`): it is done as soon as it is stopped.
    pub fn idle() -> Self {
        RunningEngine {
            threads: Vec::new(),
            counters: Arc::new(EngineCounters::new(0, 0)),
            sockets: Vec::new(),
            control: EngineControl::default(),
            roles: Vec::new(),
            probe: None,
        }
    }

    /// Let the workers of a gated engine start (call once the sampler's
    /// clock runs); a no-op for engines that do not gate.
    pub fn release(&self) {
        self.control.gate.open();
    }

    /// Ask senders/clients to finish gracefully. (Dropping a running engine aborts it.)
    pub fn stop(&self) {
        self.control.stop.store(true, Ordering::Relaxed);
        self.control.gate.open();
        if self.control.running.load(Ordering::Acquire) == 0 {
            self.control.done.notify_one();
        }
    }
    /// Ask every worker to return now.
    pub fn abort(&self) {
        self.control.abort.store(true, Ordering::Relaxed);
        self.stop();
    }
    /// True when every worker thread has returned.
    pub fn is_finished(&self) -> bool {
        self.threads.iter().all(JoinHandle::is_finished)
    }
    /// Wait for every worker; the first error wins.
    pub fn join(&mut self) -> Result<(), EngineError> {
        join_all(std::mem::take(&mut self.threads))
    }

    /// The byte and message counters now: the engine's own when its probe
    /// keeps them, else those of its connections.
    pub fn snapshot(&self) -> Vec<ConnSnapshot> {
        self.probe
            .as_ref()
            .and_then(|p| p.counters())
            .unwrap_or_else(|| self.counters.snapshot())
    }
}

impl Drop for RunningEngine {
    /// An engine dropped on any path (error, cancelled future) stops its workers.
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.abort();
        }
    }
}

/// Join worker threads; the first error (or panic) wins.
pub fn join_all(threads: Vec<JoinHandle<Result<(), EngineError>>>) -> Result<(), EngineError> {
    let mut first = Ok(());
    for t in threads {
        let name = t.thread().name().unwrap_or("worker").to_string();
        let r = t.join().unwrap_or(Err(EngineError::Panicked(name)));
        if first.is_ok() {
            first = r;
        }
    }
    first
}

/// One side of an engine for one test point, prepared (its resources
/// allocated) and not yet running. The session calls, in order:
/// [`Engine::setup`] (what this side tells the other), [`Engine::connect`]
/// (what the other side told), then [`Engine::start`] on the data connections.
pub trait Engine: Send {
    /// This side's part of the setup exchange (None: nothing to tell).
    fn setup(&self) -> Option<EngineSetup> {
        None
    }
    /// The other side's part of the setup exchange arrived (checked here).
    fn connect(&mut self, peer: Option<EngineSetup>) -> Result<(), EngineError> {
        match peer {
            None => Ok(()),
            Some(s) => Err(EngineError::Unsupported(format!(
                "the peer sent a setup this engine does not use: {s:?}"
            ))),
        }
    }
    /// Start the workers on `conns` (this side's data connections, by index).
    fn start(self: Box<Self>, conns: Vec<TcpStream>) -> Result<RunningEngine, EngineError>;
}

/// An engine's own figures, read by the sampler each interval and at the end.
pub trait EngineProbe: Send + Sync {
    /// The byte and message counters, for engines that do not count per
    /// connection into [`EngineCounters`] (read first in every interval).
    fn counters(&self) -> Option<Vec<ConnSnapshot>> {
        None
    }
    /// Latencies recorded since the previous call, for such engines.
    fn take_latency(&self) -> Option<Histogram<u64>> {
        None
    }
    /// Figures since the previous call (`secs` is the interval's span).
    fn interval(&self, secs: f64) -> Option<EngineInterval>;
    /// Totals of the point so far.
    fn totals(&self) -> Option<EngineTotals>;
}

/// What an engine asks of the host while it prepares one side of a point
/// (routes, NUMA placement, path counters, RDMA devices). The session hands
/// in the live host (`probe::engine_host` implements it), so the data plane
/// never reads the host itself and each engine prepares itself
/// ([`EngineSpecOps::prepare`]).
pub trait EngineHost {
    /// The interface that routes to `to`.
    fn route_iface(&self, to: std::net::IpAddr) -> Option<String>;
    /// The interface of the default route.
    fn default_route_iface(&self) -> Option<String>;
    /// The interface that routes to `to`, and this host's address on it.
    fn route_to(&self, to: std::net::IpAddr) -> (Option<String>, Option<std::net::IpAddr>);
    /// The CPUs of `iface`'s NUMA node, when the host says.
    fn nic_node_cpus(&self, iface: &str) -> Option<Vec<CpuId>>;
    /// An opener of the counters along a packet's path through an interface.
    fn path_opener(&self) -> paths::PathOpener;
    /// Whether the verbs library and a device are there (`here` names the
    /// host, `iface` the interface the test should use): one line with the
    /// fix when either is missing.
    fn verbs_preflight(
        &self,
        provider: &dyn rdma::verbs::VerbsProvider,
        here: &str,
        iface: Option<&str>,
    ) -> Result<(), rdma::preflight::PreflightError>;
    /// The RDMA device, port and GID to use: `want`'s, else the one behind
    /// `route_iface` with the RoCE v2 GID of `local`.
    fn verbs_device(
        &self,
        want: &rdma::RdmaEndpoint,
        route_iface: Option<&str>,
        local: Option<std::net::IpAddr>,
    ) -> Result<rdma::Chosen, rdma::preflight::PreflightError>;
}

/// Spawn a named worker thread, pinned to `cpu` when given, counted in `control.running`.
pub fn spawn_worker<F>(
    name: String,
    cpu: Option<CpuId>,
    control: &EngineControl,
    f: F,
) -> Result<JoinHandle<Result<(), EngineError>>, EngineError>
where
    F: FnOnce() -> Result<(), EngineError> + Send + 'static,
{
    control.running.fetch_add(1, Ordering::AcqRel);
    let exit = WorkerExit(control.clone());
    let gate = Arc::clone(&control.gate);
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let _exit = exit;
            if let Some(c) = cpu {
                pin_current_thread(c)?;
            }
            gate.wait();
            f()
        })
        .map_err(|source| EngineError::Spawn { name, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gated_workers_wait_for_release_and_stop_frees_them() {
        let control = EngineControl::gated();
        let ran = Arc::new(AtomicUsize::new(0));
        let spawn = |control: &EngineControl| {
            let ran = Arc::clone(&ran);
            spawn_worker("ws-test".into(), None, control, move || {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .unwrap()
        };
        let t = spawn(&control);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(ran.load(Ordering::SeqCst), 0, "a gated worker waits");
        let mut engine = RunningEngine::idle();
        engine.control = control.clone();
        engine.release();
        t.join().unwrap().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        // A gated engine stopped before its release: the workers return.
        let control = EngineControl::gated();
        let t = spawn(&control);
        let mut engine = RunningEngine::idle();
        engine.control = control;
        engine.abort();
        t.join().unwrap().unwrap();
    }

    #[test]
    fn latency_take_resets() {
        let c = EngineCounters::new(1, 2);
        c.latency[0].lock().unwrap().record(1000).unwrap();
        c.latency[1].lock().unwrap().record(3000).unwrap();
        let h = c.take_latency();
        assert_eq!(h.len(), 2);
        assert_eq!(c.take_latency().len(), 0);
    }
}

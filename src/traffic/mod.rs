//! The data plane: engines that generate and sink traffic.
//!
//! An engine owns its worker threads and its data sockets. It counts bytes,
//! messages and latency into lock-free [`EngineCounters`] and never formats,
//! logs or draws anything: the sampler reads the counters once per interval.
//!
//! Both ends of a test run the same engine code; [`Side`] says which end this
//! process is, and [`EngineSpec::conn_roles`] tells each end what to do on each
//! data connection, so the two ends cannot disagree about who sends.

pub mod sink;
pub mod tcp;

use crate::units::{Bytes, CpuId};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Which engine generates the traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Kernel TCP sockets.
    Tcp,
}

/// What the TCP engine does on its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum TcpMode {
    /// Bulk transfer, one thread per stream (like iperf3).
    Stream,
    /// Both ends echo everything they receive (muduo/evpp pingpong); reports MiB/s.
    Pingpong,
    /// Closed-loop request/response with a latency histogram (like netperf TCP_RR).
    Rr,
}

impl EngineKind {
    /// Lower-case name as used on the command line and in logs.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Tcp => "tcp",
        }
    }
}

impl TcpMode {
    /// Lower-case name as used on the command line and in logs.
    pub fn name(self) -> &'static str {
        match self {
            TcpMode::Stream => "stream",
            TcpMode::Pingpong => "pingpong",
            TcpMode::Rr => "rr",
        }
    }
}

/// Everything both ends need to know to run one test point. Sent to the agent
/// verbatim inside the control protocol's `StartTest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineSpec {
    /// Engine family.
    pub engine: EngineKind,
    /// Mode within the engine.
    pub mode: TcpMode,
    /// stream: streams per direction; pingpong/rr: connections.
    pub streams: u32,
    /// Worker threads per side for pingpong/rr (stream always uses one per stream).
    pub threads: u32,
    /// stream: bytes per write() call.
    pub len: Bytes,
    /// pingpong: message size; rr: request size.
    pub size: Bytes,
    /// rr: response size.
    pub resp_size: Bytes,
    /// rr: requests in flight per connection.
    pub depth: u32,
    /// SO_SNDBUF and SO_RCVBUF on every data socket (kernel doubles it).
    pub window: Option<Bytes>,
    /// TCP_MAXSEG.
    pub mss: Option<u32>,
    /// TCP_CONGESTION (e.g. cubic, bbr).
    pub congestion: Option<String>,
    /// MSG_ZEROCOPY on send.
    pub zerocopy: bool,
    /// MSG_TRUNC on receive: the kernel discards the data without copying it.
    pub skip_rx_copy: bool,
    /// stream: the agent sends, the controller receives.
    pub reverse: bool,
    /// stream: both directions at once, `streams` connections each.
    pub bidir: bool,
    /// CPUs for the controller's worker threads (round-robin); empty = unpinned.
    pub cpus: Vec<CpuId>,
    /// CPUs for the agent's worker threads; empty = unpinned.
    pub peer_cpus: Vec<CpuId>,
    /// stream: stop after this many bytes in total per direction.
    pub bytes: Option<Bytes>,
}

/// Which end of the node pair this process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// Runs `wirescope run` / the TUI and opens the data connections.
    Controller,
    /// Runs `wirescope agent` and accepts them.
    Agent,
}

/// What one end does on one data connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

impl EngineSpec {
    /// Number of data connections the controller opens.
    pub fn connection_count(&self) -> usize {
        let n = self.streams as usize;
        if self.mode == TcpMode::Stream && self.bidir {
            2 * n
        } else {
            n
        }
    }

    /// The role of each data connection, by index, for `side`.
    pub fn conn_roles(&self, side: Side) -> Vec<ConnRole> {
        let controller_roles: Vec<ConnRole> = match self.mode {
            TcpMode::Stream => {
                let n = self.streams as usize;
                let fwd = if self.reverse {
                    ConnRole::Receiver
                } else {
                    ConnRole::Sender
                };
                let mut v = vec![fwd; n];
                if self.bidir {
                    let back = if self.reverse {
                        ConnRole::Sender
                    } else {
                        ConnRole::Receiver
                    };
                    v.extend(std::iter::repeat_n(back, n));
                }
                v
            }
            TcpMode::Pingpong | TcpMode::Rr => vec![ConnRole::Client; self.streams as usize],
        };
        match side {
            Side::Controller => controller_roles,
            Side::Agent => controller_roles
                .into_iter()
                .map(|r| match r {
                    ConnRole::Sender => ConnRole::Receiver,
                    ConnRole::Receiver => ConnRole::Sender,
                    ConnRole::Client => ConnRole::Server,
                    ConnRole::Server => ConnRole::Client,
                })
                .collect(),
        }
    }

    /// Limits a receiving agent enforces on a spec that came over the network
    /// (the controller's CLI checks the same ranges, with friendlier messages).
    pub fn validate(&self) -> Result<(), String> {
        const MAX_MSG: u64 = 64 << 20;
        let check = |what: &str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("{what} {v} is outside {lo}..={hi}"))
            }
        };
        check("streams", u64::from(self.streams), 1, 65_536)?;
        check("threads", u64::from(self.threads), 0, 4096)?;
        check("depth", u64::from(self.depth), 1, 65_536)?;
        check("len", self.len.0, 1, MAX_MSG)?;
        check("size", self.size.0, 1, MAX_MSG)?;
        check("resp_size", self.resp_size.0, 1, MAX_MSG)?;
        if let Some(w) = self.window {
            check("window", w.0, 1024, 1 << 30)?;
        }
        Ok(())
    }

    /// CPUs this side pins its threads to.
    pub fn cpus_for(&self, side: Side) -> &[CpuId] {
        match side {
            Side::Controller => &self.cpus,
            Side::Agent => &self.peer_cpus,
        }
    }
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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
}

impl EngineControl {
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
        }
    }

    /// Ask senders/clients to finish gracefully. (Dropping a running engine aborts it.)
    pub fn stop(&self) {
        self.control.stop.store(true, Ordering::Relaxed);
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

/// A traffic engine: turns data connections into worker threads.
pub trait Engine {
    /// Start the workers of `side` on `conns` (ordered by connection index).
    fn start(&self, side: Side, conns: Vec<TcpStream>) -> Result<RunningEngine, EngineError>;
}

/// Pin the calling thread to `cpu` (no-op error-free when the list is empty).
pub fn pin_current_thread(cpu: CpuId) -> Result<(), EngineError> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu.0 as usize).map_err(|e| {
        EngineError::Unsupported(format!(
            "cannot pin to {cpu}: {e} (the CPU number is too large for this system)"
        ))
    })?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).map_err(|e| {
        EngineError::Unsupported(format!("cannot pin a worker to {cpu}: {e}; check the CPU exists and is online (see /sys/devices/system/cpu/online)"))
    })
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
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let _exit = exit;
            if let Some(c) = cpu {
                pin_current_thread(c)?;
            }
            f()
        })
        .map_err(|source| EngineError::Spawn { name, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(mode: TcpMode) -> EngineSpec {
        EngineSpec {
            engine: EngineKind::Tcp,
            mode,
            streams: 2,
            threads: 1,
            len: Bytes(1024),
            size: Bytes(64),
            resp_size: Bytes(64),
            depth: 1,
            window: None,
            mss: None,
            congestion: None,
            zerocopy: false,
            skip_rx_copy: false,
            reverse: false,
            bidir: false,
            cpus: vec![],
            peer_cpus: vec![],
            bytes: None,
        }
    }

    #[test]
    fn roles_mirror_between_sides() {
        let mut s = spec(TcpMode::Stream);
        s.bidir = true;
        let c = s.conn_roles(Side::Controller);
        let a = s.conn_roles(Side::Agent);
        assert_eq!(
            c,
            vec![
                ConnRole::Sender,
                ConnRole::Sender,
                ConnRole::Receiver,
                ConnRole::Receiver
            ]
        );
        assert_eq!(
            a,
            vec![
                ConnRole::Receiver,
                ConnRole::Receiver,
                ConnRole::Sender,
                ConnRole::Sender
            ]
        );
        s.reverse = true;
        s.bidir = false;
        assert_eq!(s.conn_roles(Side::Controller), vec![ConnRole::Receiver; 2]);
        assert_eq!(s.connection_count(), 2);
        let r = spec(TcpMode::Rr);
        assert_eq!(r.conn_roles(Side::Agent), vec![ConnRole::Server; 2]);
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

//! The engine's counters: lock-free atomics written by one thread each,
//! read by whoever samples (the sampler thread, the lab, a test), and the
//! plain snapshots they are copied into.
//!
//! Writers publish with relaxed stores once per batch (not per frame);
//! every value is cumulative and monotonic, so a reader subtracts two
//! snapshots. The thread id of each worker is published so its CPU time
//! can be read from `/proc/self/task/TID/schedstat` without its help
//! (procfs-core parses it).

use crate::units::CpuId;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Counters of one sink queue (one thread; in `xdp` mode, the kernel's).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct SinkQueueCounters {
    /// Test frames read by user space (duplicates included).
    pub frames: AtomicU64,
    /// Their bytes, as written (without FCS).
    pub bytes: AtomicU64,
    /// Unique test frames.
    pub received: AtomicU64,
    /// Σ over flows of highest sequence + 1.
    pub expected: AtomicU64,
    /// Duplicates.
    pub duplicates: AtomicU64,
    /// Reordered frames.
    pub reordered: AtomicU64,
    /// Stamped frames of a flow id outside the test.
    pub unknown_flow: AtomicU64,
    /// Other frames in the ring (ARP, the control connection, ...).
    pub foreign: AtomicU64,
    /// Frames the kernel dropped because this socket's ring was full
    /// (TPACKET tp_drops, AF_XDP rx_dropped + rx_ring_full, UDP SO_RXQ_OVFL).
    pub ring_drops: AtomicU64,
    /// AF_XDP: times the fill ring was empty when the kernel needed a buffer.
    pub fill_empty: AtomicU64,
    /// Kernel thread id of the worker (0 until it runs).
    pub tid: AtomicU32,
}

/// Counters of one generator thread.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct GenThreadCounters {
    /// Frames the kernel accepted.
    pub sent: AtomicU64,
    /// Their bytes, as written (without FCS).
    pub bytes: AtomicU64,
    /// Send calls that failed (the frames are not counted as sent).
    pub errors: AtomicU64,
    /// Times the thread found its ring full and had to wait for the kernel.
    pub ring_full: AtomicU64,
    /// AF_XDP: tx_invalid_descs + tx_ring_empty_descs (kernel statistics).
    pub kernel_drops: AtomicU64,
    /// Kernel thread id of the worker (0 until it runs).
    pub tid: AtomicU32,
}

/// Copy of one sink queue's counters.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct SinkQueueSnap {
    /// Queue (or reuseport socket) index.
    pub queue: u32,
    /// CPU the thread is pinned to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuId>,
    /// Index of the sink thread that serves it (None in `xdp` mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<u32>,
    /// Test frames read (duplicates included).
    pub frames: u64,
    /// Bytes of those frames without FCS.
    pub bytes: u64,
    /// Unique test frames.
    pub received: u64,
    /// Σ highest sequence + 1.
    pub expected: u64,
    /// Duplicates.
    pub duplicates: u64,
    /// Reordered.
    pub reordered: u64,
    /// Stamped frames of unknown flows.
    pub unknown_flow: u64,
    /// Other frames.
    pub foreign: u64,
    /// Dropped by the kernel: this socket's ring was full.
    pub ring_drops: u64,
    /// AF_XDP fill ring found empty.
    pub fill_empty: u64,
    /// CPU time of the thread (ns), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ns: Option<u64>,
    /// What the XDP program counted on this queue (xdp and af-xdp modes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdp: Option<XdpQueueSnap>,
}

/// The XDP program's counters of one queue, summed over CPUs, plus the split by CPU.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct XdpQueueSnap {
    /// Test frames.
    pub packets: u64,
    /// Their bytes (without FCS).
    pub bytes: u64,
    /// af-xdp: dropped for want of a socket on the queue.
    pub no_socket: u64,
    /// Other frames passed to the stack.
    pub passed: u64,
    /// The CPU that ran most of this queue's XDP (its NAPI CPU) and its packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_cpu: Option<(CpuId, u64)>,
}

/// Copy of one generator thread's counters.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct GenThreadSnap {
    /// Thread index.
    pub thread: u32,
    /// The transmit queue it is bound to (AF_XDP), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<u32>,
    /// CPU it is pinned to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuId>,
    /// Frames accepted by the kernel.
    pub sent: u64,
    /// Their bytes without FCS.
    pub bytes: u64,
    /// Failed send calls.
    pub errors: u64,
    /// Waits on a full ring.
    pub ring_full: u64,
    /// AF_XDP descriptors the kernel refused.
    pub kernel_drops: u64,
    /// CPU time (ns), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ns: Option<u64>,
}

/// CPU time of thread `tid` of this process (ns), from its schedstat
/// (parsed by procfs-core).
pub fn thread_cpu_ns(tid: u32) -> Option<u64> {
    if tid == 0 {
        return None;
    }
    let s = std::fs::read(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    parse_schedstat(&s)
}

/// On-CPU time (ns) of a `schedstat` text: its first field.
pub fn parse_schedstat(bytes: &[u8]) -> Option<u64> {
    use procfs_core::FromRead;
    procfs_core::process::Schedstat::from_read(bytes)
        .ok()
        .map(|s| s.sum_exec_runtime)
}

/// Wait (at most 2 s) until every worker has published its thread id, so
/// the first snapshot already reads every thread's CPU time.
pub fn wait_for_tids<'a>(tids: impl Iterator<Item = &'a AtomicU32> + Clone) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while tids.clone().any(|t| t.load(Ordering::Acquire) == 0) && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The calling thread's kernel id.
pub fn current_tid() -> u32 {
    nix::unistd::gettid().as_raw() as u32
}

impl SinkQueueCounters {
    /// Copy (relaxed loads).
    pub fn snapshot(&self, queue: u32, cpu: Option<CpuId>) -> SinkQueueSnap {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        SinkQueueSnap {
            queue,
            cpu,
            thread: None,
            frames: l(&self.frames),
            bytes: l(&self.bytes),
            received: l(&self.received),
            expected: l(&self.expected),
            duplicates: l(&self.duplicates),
            reordered: l(&self.reordered),
            unknown_flow: l(&self.unknown_flow),
            foreign: l(&self.foreign),
            ring_drops: l(&self.ring_drops),
            fill_empty: l(&self.fill_empty),
            cpu_ns: thread_cpu_ns(self.tid.load(Ordering::Relaxed)),
            xdp: None,
        }
    }
}

impl GenThreadCounters {
    /// Copy (relaxed loads).
    pub fn snapshot(&self, thread: u32, queue: Option<u32>, cpu: Option<CpuId>) -> GenThreadSnap {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        GenThreadSnap {
            thread,
            queue,
            cpu,
            sent: l(&self.sent),
            bytes: l(&self.bytes),
            errors: l(&self.errors),
            ring_full: l(&self.ring_full),
            kernel_drops: l(&self.kernel_drops),
            cpu_ns: thread_cpu_ns(self.tid.load(Ordering::Relaxed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_thread_cpu_time_is_readable() {
        let tid = current_tid();
        let a = thread_cpu_ns(tid).expect("schedstat of this thread");
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        let b = thread_cpu_ns(tid).unwrap();
        assert!(b > a, "{a} -> {b}");
        assert_eq!(thread_cpu_ns(0), None);
    }

    #[test]
    fn schedstat_is_parsed_by_its_first_field() {
        let t = include_bytes!("../../../tests/fixtures/proc/schedstat");
        assert_eq!(parse_schedstat(t), Some(203450525));
        assert_eq!(parse_schedstat(b"123 456 7\n"), Some(123));
        assert_eq!(parse_schedstat(b""), None);
        assert_eq!(parse_schedstat(b"x 1 2\n"), None);
    }

    #[test]
    fn snapshots_copy_every_counter() {
        let c = SinkQueueCounters::default();
        c.frames.store(5, Ordering::Relaxed);
        c.ring_drops.store(2, Ordering::Relaxed);
        let s = c.snapshot(3, Some(CpuId(1)));
        assert_eq!(
            (s.queue, s.frames, s.ring_drops, s.cpu),
            (3, 5, 2, Some(CpuId(1)))
        );
        let g = GenThreadCounters::default();
        g.sent.store(9, Ordering::Relaxed);
        assert_eq!(g.snapshot(0, Some(0), None).sent, 9);
    }
}

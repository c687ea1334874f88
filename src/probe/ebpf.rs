//! eBPF probes: exact softirq time per CPU and per-CPU × per-queue packet counts.
//!
//! This module owns the userspace half of the programs in `ebpf/` (C, CO-RE,
//! built by `cargo xtask build-ebpf`): the `#[repr(C)]` mirrors of the types
//! shared with `ebpf/wirescope.h`, the embedded object and the hash of its
//! sources, the loader ([`Ebpf`]) and the conversion of the kernel's
//! cumulative per-CPU counters into per-interval Sample fields.
//!
//! What it gives that /proc cannot: `/proc/stat`'s softirq column is
//! tick-sampled on kernels without IRQ time accounting; `softirq_entry`/`exit`
//! timing is exact. And `netif_receive_skb`/`net_dev_start_xmit` say which CPU
//! handled which queue — the queue→CPU matrix behind "one core does all the work".
//!
//! It observes only: programs are attached for as long as an [`Ebpf`] lives,
//! nothing is pinned, and dropping it detaches and unloads everything. It
//! never changes the host otherwise, and when it cannot load (no privileges,
//! no BTF, a kernel that refuses) it says why in one line and the sampler
//! carries on without it.

mod kernel;

pub use kernel::{Ebpf, EbpfCounters};

use super::counters::Dir;
use super::sample::{QueueSample, QueueSource};
use crate::units::{BitsPerSec, CpuId};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// The compiled programs, as committed next to their sources.
pub static OBJECT: &[u8] = aya::include_bytes_aligned!("../../ebpf/wirescope.bpf.o");
/// The recorded hash of the sources [`OBJECT`] was built from (`ebpf/wirescope.bpf.o.sha256`).
pub const OBJECT_SOURCE_HASH: &str = include_str!("../../ebpf/wirescope.bpf.o.sha256");
/// Source files of the object, relative to `ebpf/`, in hashing order.
pub const SOURCES: [&str; 2] = ["wirescope.bpf.c", "wirescope.h"];
/// The C file clang compiles.
pub const MAIN_SOURCE: &str = "wirescope.bpf.c";
/// The object file name, relative to `ebpf/`.
pub const OBJECT_NAME: &str = "wirescope.bpf.o";
/// clang flags (part of the hash: changing them makes the object stale).
pub const CLANG_ARGS: [&str; 7] = ["-O2", "-g", "-target", "bpf", "-Wall", "-Werror", "-c"];
/// The programs, by ELF function name, and the BTF tracepoint each attaches to.
pub const PROGRAMS: [(&str, &str); 4] = [
    ("ws_softirq_entry", "softirq_entry"),
    ("ws_softirq_exit", "softirq_exit"),
    ("ws_netif_receive_skb", "netif_receive_skb"),
    ("ws_net_dev_start_xmit", "net_dev_start_xmit"),
];

/// Interfaces watched at once (`WS_MAX_IFACES`).
pub const MAX_IFACES: usize = 8;
/// Queue slots per (interface, direction) (`WS_QSTRIDE`): slot 0 = queue not
/// recorded, slot 1 + q = queue q.
pub const QSTRIDE: u32 = 257;
/// Softirq vectors (`WS_NR_SOFTIRQS`).
pub const NR_SOFTIRQS: u32 = 10;
/// `NET_TX_SOFTIRQ` vector number.
pub const NET_TX: usize = 2;
/// `NET_RX_SOFTIRQ` vector number.
pub const NET_RX: usize = 3;

/// Filter map key (`struct ws_iface_key`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IfaceKey {
    /// Interface index in its namespace.
    pub ifindex: u32,
    /// Inode number of the network namespace (`/proc/PID/ns/net`).
    pub netns: u32,
}

/// Packets and bytes of one queue slot on one CPU (`struct ws_count`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCount {
    /// skbs seen.
    pub packets: u64,
    /// Sum of `skb->len`.
    pub bytes: u64,
}

/// One softirq vector on one CPU (`struct ws_softirq`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SoftirqSlot {
    /// Handler time (ns), summed.
    pub ns: u64,
    /// Handler runs.
    pub count: u64,
    /// Entry timestamp of a running handler (kernel scratch).
    pub start: u64,
}

// SAFETY: plain #[repr(C)] integer structs without padding; any bit pattern is valid.
unsafe impl aya::Pod for IfaceKey {}
// SAFETY: as above.
unsafe impl aya::Pod for QueueCount {}
// SAFETY: as above.
unsafe impl aya::Pod for SoftirqSlot {}

/// An interface to count, as the kernel identifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EbpfIface {
    /// Name (for the Samples).
    pub name: String,
    /// The kernel's identity of the interface.
    pub key: IfaceKey,
    /// rx queues (`/sys/class/net/NAME/queues/rx-*`).
    pub rx_queues: u32,
    /// tx queues.
    pub tx_queues: u32,
}

/// Why eBPF is off. Display is the one line the user sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EbpfUnavailable {
    /// Missing capabilities.
    #[error("eBPF off: needs CAP_BPF and CAP_PERFMON (run as root)")]
    NotPrivileged,
    /// The kernel exposes no BTF.
    #[error("eBPF off: the kernel has no BTF (/sys/kernel/btf/vmlinux missing; needs CONFIG_DEBUG_INFO_BTF)")]
    NoBtf,
    /// Too many interfaces for the filter map.
    #[error("eBPF off: {0} interfaces, at most {MAX_IFACES} can be watched")]
    TooManyIfaces(usize),
    /// Loading the object or a program failed.
    #[error("eBPF off: loading {what} failed: {reason}")]
    Load {
        /// The object or the program.
        what: String,
        /// The kernel's or aya's answer.
        reason: String,
    },
    /// Attaching a program failed.
    #[error("eBPF off: attaching {program} to {tracepoint} failed: {reason}")]
    Attach {
        /// Program name.
        program: String,
        /// Tracepoint.
        tracepoint: String,
        /// The kernel's answer.
        reason: String,
    },
}

/// Exact softirq handler time of one CPU over an interval (eBPF `softirq_entry`/`exit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftirqTime {
    /// CPU.
    pub cpu: CpuId,
    /// NET_RX handler time (ns).
    pub net_rx_ns: u64,
    /// NET_TX handler time (ns).
    pub net_tx_ns: u64,
    /// NET_RX handler runs (comparable to /proc/softirqs NET_RX).
    pub net_rx_count: u64,
    /// NET_TX handler runs.
    pub net_tx_count: u64,
    /// All vectors' handler time (ns).
    pub all_ns: u64,
}

/// One cell of the queue→CPU matrix (eBPF): what `cpu` handled of one queue in an interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueCpu {
    /// Interface.
    pub iface: String,
    /// Direction: rx = `netif_receive_skb`, tx = `net_dev_start_xmit`.
    pub dir: Dir,
    /// Queue; None for received skbs with no recorded rx queue (`skb_rx_queue_recorded` false).
    pub queue: Option<u32>,
    /// The CPU that ran the hook.
    pub cpu: CpuId,
    /// skbs (a GSO/GRO skb counts once, as in /proc/net/dev).
    pub packets: u64,
    /// Bytes (`skb->len`).
    pub bytes: u64,
}

/// Hash of the object's sources in `dir` (normally `ebpf/`) and the clang flags, hex.
pub fn source_hash(dir: &Path) -> std::io::Result<String> {
    let mut h = Sha256::new();
    for name in SOURCES {
        let text = std::fs::read(dir.join(name))?;
        h.update(name.as_bytes());
        h.update([0]);
        h.update((text.len() as u64).to_le_bytes());
        h.update(&text);
    }
    h.update(CLANG_ARGS.join(" ").as_bytes());
    Ok(hex::encode(h.finalize()))
}

/// Index into `ws_queues` of (interface slot, direction, queue slot).
pub fn queue_index(slot: usize, dir: Dir, qslot: u32) -> u32 {
    let d = match dir {
        Dir::Rx => 0,
        Dir::Tx => 1,
    };
    (slot as u32 * 2 + d) * QSTRIDE + qslot
}

impl EbpfCounters {
    /// Per-queue Samples (source Ebpf, every queue of every watched interface,
    /// summed over CPUs) with rates over `secs`.
    pub fn queue_samples(&self, ifaces: &[EbpfIface], secs: f64) -> Vec<QueueSample> {
        let mut sums: BTreeMap<(&str, Dir, u32), QueueCount> = BTreeMap::new();
        for i in ifaces {
            for (dir, n) in [(Dir::Rx, i.rx_queues), (Dir::Tx, i.tx_queues)] {
                for q in 0..n {
                    sums.insert((&i.name, dir, q), QueueCount::default());
                }
            }
        }
        for c in &self.queue_cpus {
            if let Some(q) = c.queue {
                let s = sums.entry((&c.iface, c.dir, q)).or_default();
                s.packets += c.packets;
                s.bytes += c.bytes;
            }
        }
        sums.into_iter()
            .map(|((iface, dir, queue), c)| QueueSample {
                iface: iface.to_string(),
                dir,
                queue,
                packets: Some(c.packets),
                bytes: Some(c.bytes),
                drops: None,
                pps: if secs > 0.0 {
                    c.packets as f64 / secs
                } else {
                    0.0
                },
                bps: BitsPerSec::from_bytes(c.bytes, secs),
                source: QueueSource::Ebpf,
                other: BTreeMap::new(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_types_match_the_c_layout() {
        assert_eq!(std::mem::size_of::<IfaceKey>(), 8);
        assert_eq!(std::mem::size_of::<QueueCount>(), 16);
        assert_eq!(std::mem::size_of::<SoftirqSlot>(), 24);
        assert_eq!(queue_index(0, Dir::Rx, 0), 0);
        assert_eq!(queue_index(0, Dir::Tx, 1), QSTRIDE + 1);
        assert_eq!(
            queue_index(MAX_IFACES - 1, Dir::Tx, QSTRIDE - 1),
            MAX_IFACES as u32 * 2 * QSTRIDE - 1
        );
    }

    #[test]
    fn queue_samples_cover_every_queue_and_sum_over_cpus() {
        let ifaces = [EbpfIface {
            name: "veth-b".into(),
            key: IfaceKey::default(),
            rx_queues: 2,
            tx_queues: 1,
        }];
        let cell = |queue, cpu, packets| QueueCpu {
            iface: "veth-b".into(),
            dir: Dir::Rx,
            queue,
            cpu: CpuId(cpu),
            packets,
            bytes: packets * 100,
        };
        let c = EbpfCounters {
            softirq: Vec::new(),
            queue_cpus: vec![cell(Some(1), 0, 3), cell(Some(1), 1, 4), cell(None, 0, 9)],
        };
        let q = c.queue_samples(&ifaces, 2.0);
        assert_eq!(q.len(), 3);
        let rx1 = q.iter().find(|s| s.dir == Dir::Rx && s.queue == 1).unwrap();
        assert_eq!((rx1.packets, rx1.bytes, rx1.pps), (Some(7), Some(700), 3.5));
        let rx0 = q.iter().find(|s| s.dir == Dir::Rx && s.queue == 0).unwrap();
        assert_eq!(rx0.packets, Some(0));
    }
}

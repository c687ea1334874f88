//! A synthetic big host: 256 CPUs on 2 NUMA nodes with SMT siblings, 8
//! mlx5 NICs of 64 queues each, written as a host tree in the capture layout
//! that [`CaptureDir`] reads (`DIR/proc/stat`, `DIR/sys/class/net/IF/...`,
//! `DIR/sos_commands/networking/ethtool_-S_IF`, ... — the same relative paths
//! [`super::capture_writer`] writes).
//!
//! Every content is generated (names follow real mlx5 `ethtool -S` and
//! `/proc/interrupts` output; the values come from the rates below), so the
//! sampler, the rules, the log and the TUI can be measured and tested at the
//! size of the hosts wirescope is for without such a host. Counters are a
//! pure function of the host's clock: [`SyntheticHost::advance`] moves the
//! clock by whole seconds and rewrites every counter file, so a reader that
//! takes two snapshots knows exactly what moved — the rate accessors
//! ([`SyntheticHost::cpu_load`], [`SyntheticHost::queue_rate`], ...) say it.
//!
//! The load it describes: [`Layout::hot_cpus`] (cpu0-7 by default) saturated
//! by softirq (100 %), carrying rx queues 0-7 of the first NIC at 1 Mpps
//! each; every other core 10 % busy; every other queue a few thousand
//! packets per second, each at its own rate.
//!
//! Writes only below its directory; never reads the running host.

mod counters;
mod tree;

use super::capture_dir::CaptureDir;
use super::ethtool_names::Dir;
use crate::units::CpuId;
use std::path::{Path, PathBuf};

/// Kernel clock ticks per second (`USER_HZ`) in /proc/stat.
pub const USER_HZ: u64 = 100;

/// Seconds the host has been up at the start: counters start far from zero,
/// as they do on a real host (softnet's 32-bit ones have wrapped).
const UPTIME0: u64 = 864_000;

/// The shape of the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Hardware threads (a multiple of `2 × nodes`: two SMT threads per core).
    pub cpus: u32,
    /// NUMA nodes (one socket each).
    pub nodes: u32,
    /// NICs (mlx5, dual-port cards; the first half on node 0).
    pub nics: u32,
    /// Combined channels (rx + tx queue pairs) per NIC.
    pub queues: u32,
    /// NVMe devices (their queue interrupts fill /proc/interrupts as on a real server).
    pub nvme: u32,
    /// Interrupt queues per NVMe device.
    pub nvme_queues: u32,
    /// Cores saturated by softirq; they receive rx queues `0..hot_cpus.len()` of the first NIC.
    pub hot_cpus: Vec<u32>,
}

impl Default for Layout {
    /// The big host of issue 26: 256 CPUs, 2 nodes, 8 NICs × 64 queues,
    /// ~1,500 interrupt lines, cpu0-7 saturated by softirq.
    fn default() -> Self {
        Layout {
            cpus: 256,
            nodes: 2,
            nics: 8,
            queues: 64,
            nvme: 8,
            nvme_queues: 120,
            hot_cpus: (0..8).collect(),
        }
    }
}

/// What the generator could not do.
#[derive(Debug, thiserror::Error)]
pub enum SyntheticError {
    /// The layout cannot describe a host.
    #[error("synthetic host layout: {0}")]
    Layout(String),
    /// Writing the tree failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// File or directory.
        path: PathBuf,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
}

/// A CPU's time per second, in ticks of [`USER_HZ`] (so also in % of the core).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuLoad {
    /// user.
    pub user: u64,
    /// system.
    pub system: u64,
    /// irq.
    pub irq: u64,
    /// softirq.
    pub softirq: u64,
}

impl CpuLoad {
    /// Busy ticks per second (= busy %).
    pub fn busy(&self) -> u64 {
        self.user + self.system + self.irq + self.softirq
    }
}

/// One queue's traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueRate {
    /// Packets per second.
    pub pps: u64,
    /// Bytes per packet.
    pub bytes_per_packet: u64,
}

/// The generated host: its directory, its layout and its clock.
#[derive(Debug)]
pub struct SyntheticHost {
    root: PathBuf,
    /// Keeps a temporary directory alive (removed on drop).
    _temp: Option<tempfile::TempDir>,
    layout: Layout,
    /// Seconds since the host was generated.
    t: u64,
}

impl SyntheticHost {
    /// Generate the host into a new temporary directory (removed on drop).
    pub fn in_temp(layout: Layout) -> Result<Self, SyntheticError> {
        let temp = tempfile::Builder::new()
            .prefix("wirescope-synthetic-")
            .tempdir()
            .map_err(|source| SyntheticError::Write {
                path: std::env::temp_dir(),
                source,
            })?;
        let mut h = Self::create(temp.path(), layout)?;
        h._temp = Some(temp);
        Ok(h)
    }

    /// Generate the host into `dir` (created if missing).
    pub fn create(dir: &Path, layout: Layout) -> Result<Self, SyntheticError> {
        check(&layout)?;
        let h = SyntheticHost {
            root: dir.to_path_buf(),
            _temp: None,
            layout,
            t: 0,
        };
        h.write_static()?;
        h.write_counters()?;
        Ok(h)
    }

    /// The directory (read it with [`CaptureDir::new`] or `wirescope watch --from`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A [`CaptureDir`] over the tree: the source the sampler reads.
    pub fn source(&self) -> CaptureDir {
        CaptureDir::new(&self.root)
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Seconds since generation.
    pub fn elapsed(&self) -> u64 {
        self.t
    }

    /// Move the host's clock on by `secs` and rewrite every counter file.
    pub fn advance(&mut self, secs: u64) -> Result<(), SyntheticError> {
        self.t += secs;
        self.write_counters()
    }

    /// Interface names, in order (`ens1f0np0`, `ens1f1np1`, `ens2f0np0`, ...).
    pub fn nic_names(&self) -> Vec<String> {
        (0..self.layout.nics).map(nic_name).collect()
    }

    /// The NUMA node of NIC `nic` (the first half on node 0).
    pub fn nic_node(&self, nic: u32) -> u32 {
        (nic * self.layout.nodes / self.layout.nics.max(1)).min(self.layout.nodes - 1)
    }

    /// The PCI address of NIC `nic` (dual-port cards).
    pub fn nic_bus(&self, nic: u32) -> String {
        format!("0000:{:02x}:00.{}", 0x17 + 0x20 * (nic / 2), nic % 2)
    }

    /// Cores (first SMT thread of each) of node `node`, in order.
    fn node_first_threads(&self, node: u32) -> Vec<u32> {
        let per = self.cores_per_node();
        (node * per..(node + 1) * per).collect()
    }

    fn cores_per_node(&self) -> u32 {
        self.layout.cpus / 2 / self.layout.nodes
    }

    /// The NUMA node of `cpu`.
    pub fn cpu_node(&self, cpu: u32) -> u32 {
        (cpu % (self.layout.cpus / 2)) / self.cores_per_node()
    }

    /// The SMT siblings of `cpu` (itself included), as the kernel numbers
    /// them: cpuN and cpuN+cpus/2.
    pub fn siblings(&self, cpu: u32) -> [u32; 2] {
        let half = self.layout.cpus / 2;
        let c = cpu % half;
        [c, c + half]
    }

    /// CPUs of node `node` (both threads), ascending.
    pub fn node_cpus(&self, node: u32) -> Vec<CpuId> {
        let half = self.layout.cpus / 2;
        let first = self.node_first_threads(node);
        first
            .iter()
            .copied()
            .chain(first.iter().map(|c| c + half))
            .map(CpuId)
            .collect()
    }

    /// The core that handles queue `queue` of NIC `nic` (its IRQ's affinity).
    pub fn queue_cpu(&self, nic: u32, queue: u32) -> u32 {
        let cores = self.node_first_threads(self.nic_node(nic));
        cores[(queue as usize) % cores.len()]
    }

    /// IRQ number of NIC `nic`'s completion vector for queue `queue`
    /// (`mlx5_comp{queue}@pci:BUS`); the NIC's async vector is the one before queue 0.
    pub fn queue_irq(&self, nic: u32, queue: u32) -> u32 {
        self.nic_first_irq(nic) + 1 + queue
    }

    fn nic_first_irq(&self, nic: u32) -> u32 {
        200 + nic * (self.layout.queues + 1)
    }

    /// True for a core saturated by softirq.
    pub fn is_hot(&self, cpu: u32) -> bool {
        self.layout.hot_cpus.contains(&cpu)
    }

    /// A CPU's load: hot cores 100 % softirq; the rest 10 % busy (user 5, system 3, softirq 2).
    pub fn cpu_load(&self, cpu: u32) -> CpuLoad {
        let (user, system, softirq) = if self.is_hot(cpu) {
            (0, 0, USER_HZ)
        } else {
            (5, 3, 2)
        };
        CpuLoad {
            user,
            system,
            irq: 0,
            softirq,
        }
    }

    /// NET_RX softirqs per second raised on `cpu`.
    pub fn net_rx_per_s(&self, cpu: u32) -> u64 {
        if self.is_hot(cpu) {
            40_000
        } else {
            200 + u64::from(cpu)
        }
    }

    /// Packets softnet processed per second on `cpu`.
    pub fn softnet_per_s(&self, cpu: u32) -> u64 {
        if self.is_hot(cpu) {
            1_000_000
        } else {
            10_000
        }
    }

    /// Traffic of one queue: rx queue `q < hot_cpus.len()` of the first NIC
    /// at 1 Mpps of 1500 B (they saturate the hot cores); every other queue
    /// at its own rate (rx 10,000 + 1,000 × nic + 10 × q pps of 1500 B;
    /// tx half that, of 200 B).
    pub fn queue_rate(&self, nic: u32, dir: Dir, queue: u32) -> QueueRate {
        let hot = nic == 0 && (queue as usize) < self.layout.hot_cpus.len();
        let (pps, bytes_per_packet) = match (dir, hot) {
            (Dir::Rx, true) => (1_000_000, 1500),
            (Dir::Rx, false) => (
                10_000 + 1_000 * u64::from(nic) + 10 * u64::from(queue),
                1500,
            ),
            (Dir::Tx, true) => (100_000, 200),
            (Dir::Tx, false) => (5_000 + 500 * u64::from(nic) + 5 * u64::from(queue), 200),
        };
        QueueRate {
            pps,
            bytes_per_packet,
        }
    }

    /// Interrupts per second of queue `queue`'s completion vector (on its core only).
    pub fn queue_irq_per_s(&self, nic: u32, queue: u32) -> u64 {
        self.queue_rate(nic, Dir::Rx, queue).pps / 32 + 10
    }

    /// Packets per second of NIC `nic` in direction `dir` (the sum of its queues).
    pub fn nic_pps(&self, nic: u32, dir: Dir) -> u64 {
        (0..self.layout.queues)
            .map(|q| self.queue_rate(nic, dir, q).pps)
            .sum()
    }

    /// Bytes per second of NIC `nic` in direction `dir`.
    pub fn nic_bytes_per_s(&self, nic: u32, dir: Dir) -> u64 {
        (0..self.layout.queues)
            .map(|q| {
                let r = self.queue_rate(nic, dir, q);
                r.pps * r.bytes_per_packet
            })
            .sum()
    }

    /// Seconds of counting behind the current files.
    fn now(&self) -> u64 {
        UPTIME0 + self.t
    }
}

fn check(l: &Layout) -> Result<(), SyntheticError> {
    let bad = |why: String| Err(SyntheticError::Layout(why));
    if l.nodes == 0 || l.cpus == 0 || !l.cpus.is_multiple_of(2 * l.nodes) {
        return bad(format!(
            "{} CPUs on {} nodes: give a non-zero multiple of 2 × nodes (two SMT threads per core)",
            l.cpus, l.nodes
        ));
    }
    if l.nics == 0 || l.queues == 0 {
        return bad("at least one NIC with one queue".into());
    }
    if l.nics > 16 {
        return bad(format!("{} NICs: at most 16", l.nics));
    }
    if let Some(c) = l.hot_cpus.iter().find(|c| **c >= l.cpus) {
        return bad(format!("hot cpu{c} is not one of the {} CPUs", l.cpus));
    }
    if l.hot_cpus.len() > l.queues as usize {
        return bad(format!(
            "{} hot CPUs but {} queues on the first NIC to keep them busy",
            l.hot_cpus.len(),
            l.queues
        ));
    }
    Ok(())
}

/// NIC `n`'s name: dual-port cards, `ens1f0np0`, `ens1f1np1`, `ens2f0np0`, ...
pub fn nic_name(n: u32) -> String {
    format!("ens{}f{}np{}", n / 2 + 1, n % 2, n % 2)
}

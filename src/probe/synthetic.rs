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

use super::capture_dir::{ethtool_file, CaptureDir};
use super::ethtool_names::Dir;
use super::ethtool_text as text;
use super::facts::{Channels, DrvInfo, LinkInfo, Rings};
use super::system::SYSCTLS;
use crate::units::{format_cpu_list, CpuId};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Kernel clock ticks per second (`USER_HZ`) in /proc/stat.
pub const USER_HZ: u64 = 100;

/// Seconds the host has been up at the start: counters start far from zero,
/// as they do on a real host (softnet's 32-bit ones have wrapped).
const UPTIME0: u64 = 864_000;

/// Whole-channel counters of mlx5 `ethtool -S` per rx queue (the order the driver prints).
const MLX5_RX: &[&str] = &[
    "packets",
    "bytes",
    "csum_complete",
    "csum_unnecessary",
    "csum_unnecessary_inner",
    "csum_none",
    "xdp_drop",
    "xdp_tx",
    "xdp_tx_full",
    "lro_packets",
    "lro_bytes",
    "removed_vlan_packets",
    "wqe_err",
    "mpwqe_filler",
    "buff_alloc_err",
    "cqe_compress_blks",
    "cqe_compress_pkts",
    "page_reuse",
    "cache_reuse",
    "cache_full",
    "cache_empty",
    "cache_busy",
    "cache_waive",
];

/// mlx5 `ethtool -S` counters per tx queue.
const MLX5_TX: &[&str] = &[
    "packets",
    "bytes",
    "tso_packets",
    "tso_bytes",
    "tso_inner_packets",
    "tso_inner_bytes",
    "csum_partial",
    "csum_partial_inner",
    "added_vlan_packets",
    "nop",
    "csum_none",
    "stopped",
    "wake",
    "dropped",
    "xmit_more",
];

/// mlx5 device-wide `ethtool -S` counters (vport, phy, per-priority, pause,
/// PCI, module), in the driver's order; the traffic ones move.
#[rustfmt::skip]
const MLX5_GLOBAL: &[&str] = &[
    "rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "tx_tso_packets", "tx_tso_bytes",
    "tx_tso_inner_packets", "tx_tso_inner_bytes", "tx_added_vlan_packets", "rx_lro_packets",
    "rx_lro_bytes", "rx_removed_vlan_packets", "rx_csum_unnecessary", "rx_csum_none",
    "rx_csum_complete", "rx_csum_unnecessary_inner", "rx_xdp_drop", "rx_xdp_tx",
    "rx_xdp_tx_full", "tx_csum_none", "tx_csum_partial", "tx_csum_partial_inner",
    "tx_queue_stopped", "tx_queue_wake", "tx_queue_dropped", "tx_xmit_more", "rx_wqe_err",
    "rx_mpwqe_filler", "rx_buff_alloc_err", "rx_cqe_compress_blks", "rx_cqe_compress_pkts",
    "rx_page_reuse", "rx_cache_reuse", "rx_cache_full", "rx_cache_empty", "rx_cache_busy",
    "rx_cache_waive", "link_down_events_phy", "rx_out_of_buffer", "rx_vport_unicast_packets",
    "rx_vport_unicast_bytes", "tx_vport_unicast_packets", "tx_vport_unicast_bytes",
    "rx_vport_multicast_packets", "rx_vport_multicast_bytes", "tx_vport_multicast_packets",
    "tx_vport_multicast_bytes", "rx_vport_broadcast_packets", "rx_vport_broadcast_bytes",
    "tx_vport_broadcast_packets", "tx_vport_broadcast_bytes", "rx_vport_rdma_unicast_packets",
    "rx_vport_rdma_unicast_bytes", "tx_vport_rdma_unicast_packets",
    "tx_vport_rdma_unicast_bytes", "rx_vport_rdma_multicast_packets",
    "rx_vport_rdma_multicast_bytes", "tx_vport_rdma_multicast_packets",
    "tx_vport_rdma_multicast_bytes", "tx_packets_phy", "rx_packets_phy", "rx_crc_errors_phy",
    "tx_bytes_phy", "rx_bytes_phy", "tx_multicast_phy", "tx_broadcast_phy", "rx_multicast_phy",
    "rx_broadcast_phy", "rx_in_range_len_errors_phy", "rx_out_of_range_len_phy",
    "rx_oversize_pkts_phy", "rx_symbol_err_phy", "tx_mac_control_phy", "rx_mac_control_phy",
    "rx_unsupported_op_phy", "rx_pause_ctrl_phy", "tx_pause_ctrl_phy", "rx_discards_phy",
    "tx_discards_phy", "tx_errors_phy", "rx_undersize_pkts_phy", "rx_fragments_phy",
    "rx_jabbers_phy", "rx_64_bytes_phy", "rx_65_to_127_bytes_phy", "rx_128_to_255_bytes_phy",
    "rx_256_to_511_bytes_phy", "rx_512_to_1023_bytes_phy", "rx_1024_to_1518_bytes_phy",
    "rx_1519_to_2047_bytes_phy", "rx_2048_to_4095_bytes_phy", "rx_4096_to_8191_bytes_phy",
    "rx_8192_to_10239_bytes_phy", "rx_pcs_symbol_err_phy", "rx_corrected_bits_phy",
    "rx_buffer_passed_thres_phy", "rx_pci_signal_integrity", "tx_pci_signal_integrity",
    "outbound_pci_stalled_rd", "outbound_pci_stalled_wr", "outbound_pci_stalled_rd_events",
    "outbound_pci_stalled_wr_events", "rx_global_pause", "rx_global_pause_duration",
    "tx_global_pause", "tx_global_pause_duration", "rx_global_pause_transition",
    "module_unplug", "module_bus_stuck", "module_high_temp", "module_bad_shorted",
];

/// Softirq vectors, in /proc/softirqs order.
#[rustfmt::skip]
const SOFTIRQS: &[&str] = &[
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// The named (non-numeric) lines at the end of /proc/interrupts.
const IRQ_NAMED: &[(&str, &str)] = &[
    ("NMI", "Non-maskable interrupts"),
    ("LOC", "Local timer interrupts"),
    ("SPU", "Spurious interrupts"),
    ("PMI", "Performance monitoring interrupts"),
    ("IWI", "IRQ work interrupts"),
    ("RTR", "APIC ICR read retries"),
    ("RES", "Rescheduling interrupts"),
    ("CAL", "Function call interrupts"),
    ("TLB", "TLB shootdowns"),
    ("TRM", "Thermal event interrupts"),
    ("THR", "Threshold APIC interrupts"),
    ("DFR", "Deferred Error APIC interrupts"),
    ("MCE", "Machine check exceptions"),
    ("MCP", "Machine check polls"),
];

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
        if self.is_hot(cpu) {
            CpuLoad {
                user: 0,
                system: 0,
                irq: 0,
                softirq: USER_HZ,
            }
        } else {
            CpuLoad {
                user: 5,
                system: 3,
                irq: 0,
                softirq: 2,
            }
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
        match (dir, hot) {
            (Dir::Rx, true) => QueueRate {
                pps: 1_000_000,
                bytes_per_packet: 1500,
            },
            (Dir::Rx, false) => QueueRate {
                pps: 10_000 + 1_000 * u64::from(nic) + 10 * u64::from(queue),
                bytes_per_packet: 1500,
            },
            (Dir::Tx, true) => QueueRate {
                pps: 100_000,
                bytes_per_packet: 200,
            },
            (Dir::Tx, false) => QueueRate {
                pps: 5_000 + 500 * u64::from(nic) + 5 * u64::from(queue),
                bytes_per_packet: 200,
            },
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

    fn put(&self, rel: &str, content: &str) -> Result<(), SyntheticError> {
        let path = self.root.join(rel.trim_start_matches('/'));
        let io = |source| SyntheticError::Write {
            path: path.clone(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(&path, content).map_err(io)
    }

    fn mkdir(&self, rel: &str) -> Result<(), SyntheticError> {
        let path = self.root.join(rel.trim_start_matches('/'));
        std::fs::create_dir_all(&path).map_err(|source| SyntheticError::Write { path, source })
    }

    /// Files that do not change: kernel, sysctls, topology, NIC facts.
    fn write_static(&self) -> Result<(), SyntheticError> {
        let l = &self.layout;
        self.put("/proc/sys/kernel/osrelease", "6.8.0-49-generic\n")?;
        self.put(
            "/proc/sys/kernel/random/boot_id",
            "5f0c2d8e-9a43-4b71-8c1e-2f6d0b3a7e91\n",
        )?;
        self.put(
            "/proc/cmdline",
            "BOOT_IMAGE=/vmlinuz-6.8.0-49-generic root=/dev/nvme0n1p2 ro iommu=pt\n",
        )?;
        self.put("/proc/uptime", &format!("{UPTIME0}.00 0.00\n"))?;
        self.put("/proc/sys/net/core/somaxconn", "4096\n")?;
        for name in SYSCTLS {
            self.put(
                &format!("/proc/sys/{}", name.replace('.', "/")),
                &format!("{}\n", sysctl_value(name)),
            )?;
        }
        let mut cpuinfo = String::new();
        for c in 0..l.cpus {
            let _ = write!(
                cpuinfo,
                "processor\t: {c}\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9554 64-Core Processor\nphysical id\t: {}\ncore id\t\t: {}\n\n",
                self.cpu_node(c),
                c % (l.cpus / 2) % self.cores_per_node()
            );
        }
        self.put("/proc/cpuinfo", &cpuinfo)?;
        self.put(
            "/sys/devices/system/cpu/online",
            &format!("0-{}\n", l.cpus - 1),
        )?;
        self.write_topology()?;
        self.put("/proc/net/snmp", SNMP)?;
        self.put("/proc/net/netstat", NETSTAT)?;
        let mut tc = String::new();
        for n in 0..l.nics {
            self.write_nic(n)?;
            let _ = writeln!(tc, "qdisc mq 0: dev {} root ", nic_name(n));
        }
        self.put("sos_commands/networking/tc_-s_qdisc_show", &tc)?;
        self.put(
            super::capture_writer::MANIFEST,
            "wirescope synthetic host (generated by probe::synthetic)\n",
        )
    }

    /// sysfs topology: nodes, SMT siblings, core and package ids, the L3 per socket.
    fn write_topology(&self) -> Result<(), SyntheticError> {
        let l = &self.layout;
        for n in 0..l.nodes {
            self.put(
                &format!("/sys/devices/system/node/node{n}/cpulist"),
                &format!("{}\n", format_cpu_list(&self.node_cpus(n))),
            )?;
        }
        for c in 0..l.cpus {
            let base = format!("/sys/devices/system/cpu/cpu{c}");
            let node = self.cpu_node(c);
            let sib = self.siblings(c);
            self.put(
                &format!("{base}/topology/thread_siblings_list"),
                &format!("{},{}\n", sib[0], sib[1]),
            )?;
            self.put(
                &format!("{base}/topology/core_id"),
                &format!("{}\n", sib[0] % self.cores_per_node()),
            )?;
            self.put(
                &format!("{base}/topology/physical_package_id"),
                &format!("{node}\n"),
            )?;
            self.put(&format!("{base}/cpufreq/scaling_governor"), "performance\n")?;
            self.put(&format!("{base}/cache/index3/level"), "3\n")?;
            self.put(&format!("{base}/cache/index3/id"), &format!("{node}\n"))?;
            self.put(
                &format!("{base}/cache/index3/shared_cpu_list"),
                &format!("{}\n", format_cpu_list(&self.node_cpus(node))),
            )?;
        }
        Ok(())
    }

    /// sysfs, IRQ affinities and the static ethtool outputs of one NIC.
    fn write_nic(&self, n: u32) -> Result<(), SyntheticError> {
        let l = &self.layout;
        let name = nic_name(n);
        let base = format!("/sys/class/net/{name}");
        let node = self.nic_node(n);
        let bus = self.nic_bus(n);
        for (f, v) in [
            ("ifindex", (n + 2).to_string()),
            ("mtu", "9000".into()),
            ("operstate", "up".into()),
            (
                "address",
                format!("b8:ce:f6:4a:{:02x}:{:02x}", n / 2, n % 2),
            ),
            ("speed", "100000".into()),
            ("duplex", "full".into()),
            ("device/numa_node", node.to_string()),
            (
                "device/local_cpulist",
                format_cpu_list(&self.node_cpus(node)),
            ),
            ("device/current_link_speed", "16.0 GT/s PCIe".into()),
            ("device/current_link_width", "16".into()),
            ("device/max_link_speed", "16.0 GT/s PCIe".into()),
            ("device/max_link_width", "16".into()),
            ("device.link", bus.clone()),
        ] {
            self.put(&format!("{base}/{f}"), &format!("{v}\n"))?;
        }
        for q in 0..l.queues {
            self.mkdir(&format!("{base}/queues/rx-{q}"))?;
            self.put(
                &format!("{base}/queues/rx-{q}/rps_cpus"),
                &format!("{}\n", cpu_mask(l.cpus, None)),
            )?;
            self.put(
                &format!("{base}/queues/tx-{q}/xps_cpus"),
                &format!("{}\n", cpu_mask(l.cpus, Some(self.queue_cpu(n, q)))),
            )?;
        }
        let first = self.node_first_threads(node);
        let async_irq = self.nic_first_irq(n);
        let mut affinity = vec![(async_irq, first[0])];
        affinity.extend((0..l.queues).map(|q| (self.queue_irq(n, q), self.queue_cpu(n, q))));
        for (irq, cpu) in affinity {
            for f in ["effective_affinity_list", "smp_affinity_list"] {
                self.put(&format!("/proc/irq/{irq}/{f}"), &format!("{cpu}\n"))?;
            }
        }
        self.write_nic_ethtool(n, &name, &bus)
    }

    fn write_nic_ethtool(&self, _n: u32, name: &str, bus: &str) -> Result<(), SyntheticError> {
        let l = &self.layout;
        let drv = DrvInfo {
            driver: "mlx5_core".into(),
            version: "24.10-1.1.4".into(),
            firmware: "22.39.1002 (MT_0000000359)".into(),
            expansion_rom: String::new(),
            bus_info: bus.to_string(),
            supports_statistics: true,
            supports_test: true,
            supports_eeprom_access: false,
            supports_register_dump: false,
            supports_priv_flags: true,
        };
        self.put(&ethtool_file("-i", name), &text::format_drvinfo(&drv))?;
        let ch = Channels {
            max_rx: None,
            max_tx: None,
            max_other: None,
            max_combined: Some(l.queues),
            rx: None,
            tx: None,
            other: None,
            combined: Some(l.queues),
        };
        self.put(&ethtool_file("-l", name), &text::format_channels(name, &ch))?;
        let rings = Rings {
            max_rx: Some(8192),
            max_tx: Some(8192),
            rx: Some(1024),
            tx: Some(1024),
            ..Default::default()
        };
        self.put(&ethtool_file("-g", name), &text::format_rings(name, &rings))?;
        let link = LinkInfo {
            speed_mbps: Some(100_000),
            duplex: Some("Full".into()),
            autoneg: Some(true),
            link_detected: Some(true),
        };
        self.put(&ethtool_file("", name), &text::format_link(name, &link))
    }

    /// Every counter file at the current clock.
    fn write_counters(&self) -> Result<(), SyntheticError> {
        self.put("/proc/stat", &self.proc_stat())?;
        self.put("/proc/softirqs", &self.softirqs())?;
        self.put("/proc/net/softnet_stat", &self.softnet())?;
        self.put("/proc/interrupts", &self.interrupts())?;
        self.put("/proc/net/dev", &self.net_dev())?;
        self.put("/proc/uptime", &format!("{}.00 0.00\n", self.now()))?;
        for n in 0..self.layout.nics {
            let stats = self.ethtool_stats(n);
            self.put(
                &ethtool_file("-S", &nic_name(n)),
                &text::format_stats(&stats),
            )?;
        }
        Ok(())
    }

    fn proc_stat(&self) -> String {
        let now = self.now();
        let mut lines = Vec::with_capacity(self.layout.cpus as usize);
        let mut sum = [0u64; 10];
        for c in 0..self.layout.cpus {
            let ld = self.cpu_load(c);
            let idle = USER_HZ - ld.busy();
            let v = [
                ld.user * now,
                0,
                ld.system * now,
                idle * now,
                0,
                ld.irq * now,
                ld.softirq * now,
                0,
                0,
                0,
            ];
            for (s, x) in sum.iter_mut().zip(v) {
                *s += x;
            }
            lines.push(format!("cpu{c} {}", join(&v)));
        }
        let irqs: u64 = self.irq_lines().iter().map(|l| l.total(now)).sum();
        format!(
            "cpu  {}\n{}\nintr {irqs}\nctxt {}\nbtime 1732000000\nprocesses {}\nprocs_running 9\nprocs_blocked 0\nsoftirq 0\n",
            join(&sum),
            lines.join("\n"),
            now * 250_000,
            now * 40
        )
    }

    fn softirqs(&self) -> String {
        let now = self.now();
        let mut s = String::from("          ");
        for c in 0..self.layout.cpus {
            let _ = write!(s, " {:>10}", format!("CPU{c}"));
        }
        s.push('\n');
        for v in SOFTIRQS {
            let _ = write!(s, "{v:>12}:");
            for c in 0..self.layout.cpus {
                let rate = match *v {
                    "NET_RX" => self.net_rx_per_s(c),
                    "NET_TX" => {
                        if self.is_hot(c) {
                            1_000
                        } else {
                            100
                        }
                    }
                    "TIMER" => 250,
                    "SCHED" => 120,
                    "RCU" => 150,
                    "HRTIMER" | "TASKLET" => 1,
                    _ => 0,
                };
                let _ = write!(s, " {:>10}", rate * now);
            }
            s.push('\n');
        }
        s
    }

    fn softnet(&self) -> String {
        let now = self.now();
        let mut s = String::new();
        for c in 0..self.layout.cpus {
            // 32-bit counters, wrapped as the kernel prints them.
            let processed = (self.softnet_per_s(c) * now) as u32;
            let squeeze = if self.is_hot(c) { (20 * now) as u32 } else { 0 };
            let _ = writeln!(
                s,
                "{processed:08x} 00000000 {squeeze:08x} 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 {c:08x}"
            );
        }
        s
    }

    fn net_dev(&self) -> String {
        let now = self.now();
        let mut s = String::from(
            "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n",
        );
        let _ = writeln!(
            s,
            "    lo: {} {} 0 0 0 0 0 0 {} {} 0 0 0 0 0 0",
            now * 1000,
            now * 10,
            now * 1000,
            now * 10
        );
        for n in 0..self.layout.nics {
            let _ = writeln!(
                s,
                "{:>6}: {} {} 0 0 0 0 0 0 {} {} 0 0 0 0 0 0",
                nic_name(n),
                self.nic_bytes_per_s(n, Dir::Rx) * now,
                self.nic_pps(n, Dir::Rx) * now,
                self.nic_bytes_per_s(n, Dir::Tx) * now,
                self.nic_pps(n, Dir::Tx) * now
            );
        }
        s
    }

    /// `ethtool -S` of NIC `n` now: the device-wide counters, then every rx
    /// queue's and every tx queue's, as mlx5 prints them.
    pub fn ethtool_stats(&self, n: u32) -> Vec<(String, u64)> {
        let now = self.now();
        let l = &self.layout;
        let (rxp, rxb) = (
            self.nic_pps(n, Dir::Rx) * now,
            self.nic_bytes_per_s(n, Dir::Rx) * now,
        );
        let (txp, txb) = (
            self.nic_pps(n, Dir::Tx) * now,
            self.nic_bytes_per_s(n, Dir::Tx) * now,
        );
        let mut out = Vec::with_capacity(MLX5_GLOBAL.len() + l.queues as usize * 40);
        for name in MLX5_GLOBAL {
            let v = match *name {
                "rx_packets"
                | "rx_vport_unicast_packets"
                | "rx_packets_phy"
                | "rx_csum_complete" => rxp,
                "rx_bytes" | "rx_vport_unicast_bytes" | "rx_bytes_phy" => rxb,
                "tx_packets"
                | "tx_vport_unicast_packets"
                | "tx_packets_phy"
                | "tx_csum_partial" => txp,
                "tx_bytes" | "tx_vport_unicast_bytes" | "tx_bytes_phy" => txb,
                "rx_1519_to_2047_bytes_phy" => rxp,
                "rx_vport_multicast_packets" | "rx_multicast_phy" => 807_705,
                "tx_pci_signal_integrity" => 34,
                _ => 0,
            };
            out.push(((*name).to_string(), v));
        }
        for q in 0..l.queues {
            let r = self.queue_rate(n, Dir::Rx, q);
            for f in MLX5_RX {
                let v = match *f {
                    "packets" | "csum_complete" => r.pps * now,
                    "bytes" => r.pps * r.bytes_per_packet * now,
                    "cache_reuse" => r.pps / 2 * now,
                    _ => 0,
                };
                out.push((format!("rx{q}_{f}"), v));
            }
        }
        for q in 0..l.queues {
            let r = self.queue_rate(n, Dir::Tx, q);
            for f in MLX5_TX {
                let v = match *f {
                    "packets" | "csum_partial" => r.pps * now,
                    "bytes" => r.pps * r.bytes_per_packet * now,
                    "xmit_more" => r.pps / 4 * now,
                    _ => 0,
                };
                out.push((format!("tx{q}_{f}"), v));
            }
        }
        out
    }

    /// The numeric lines of /proc/interrupts: legacy, the NICs' async and
    /// completion vectors, the NVMe queues.
    fn irq_lines(&self) -> Vec<IrqSpec> {
        let l = &self.layout;
        let mut v: Vec<IrqSpec> = (0..25u32)
            .map(|i| IrqSpec {
                irq: i,
                cpu: 0,
                rate: u64::from(i == 0),
                desc: format!("IR-IO-APIC   {i}-edge      legacy{i}"),
            })
            .collect();
        for n in 0..l.nics {
            let bus = self.nic_bus(n);
            let first = self.node_first_threads(self.nic_node(n));
            v.push(IrqSpec {
                irq: self.nic_first_irq(n),
                cpu: first[0],
                rate: 1,
                desc: format!("IR-PCI-MSIX-{bus}    0-edge      mlx5_async0@pci:{bus}"),
            });
            for q in 0..l.queues {
                v.push(IrqSpec {
                    irq: self.queue_irq(n, q),
                    cpu: self.queue_cpu(n, q),
                    rate: self.queue_irq_per_s(n, q),
                    desc: format!(
                        "IR-PCI-MSIX-{bus} {:>4}-edge      mlx5_comp{q}@pci:{bus}",
                        q + 1
                    ),
                });
            }
        }
        let base = self.nic_first_irq(l.nics) + 100;
        for d in 0..l.nvme {
            let bus = format!("0000:{:02x}:00.0", 0xc1 + d);
            for q in 0..l.nvme_queues {
                v.push(IrqSpec {
                    irq: base + d * l.nvme_queues + q,
                    cpu: q % l.cpus,
                    rate: 3,
                    desc: format!("IR-PCI-MSIX-{bus} {q:>4}-edge      nvme{d}q{q}"),
                });
            }
        }
        v
    }

    fn interrupts(&self) -> String {
        let now = self.now();
        let cpus = self.layout.cpus;
        let mut s = String::from("     ");
        for c in 0..cpus {
            let _ = write!(s, " {:>10}", format!("CPU{c}"));
        }
        s.push('\n');
        for line in self.irq_lines() {
            let _ = write!(s, "{:>4}:", line.irq);
            for c in 0..cpus {
                let n = if c == line.cpu { line.total(now) } else { 0 };
                let _ = write!(s, " {n:>10}");
            }
            let _ = writeln!(s, "  {}", line.desc);
        }
        for (name, what) in IRQ_NAMED {
            let _ = write!(s, "{name:>4}:");
            let rate = if *name == "LOC" { 1000 } else { 0 };
            for _ in 0..cpus {
                let _ = write!(s, " {:>10}", rate * now);
            }
            let _ = writeln!(s, "   {what}");
        }
        s.push_str(" ERR:          0\n MIS:          0\n");
        s
    }

    /// How many numeric lines /proc/interrupts has.
    pub fn irq_line_count(&self) -> usize {
        self.irq_lines().len()
    }
}

/// One numeric line of /proc/interrupts: all its interrupts land on `cpu`.
struct IrqSpec {
    irq: u32,
    cpu: u32,
    rate: u64,
    desc: String,
}

impl IrqSpec {
    fn total(&self, now: u64) -> u64 {
        self.rate * now
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

/// A sysfs CPU mask of `cpus` bits (comma-separated 32-bit words), with `cpu` set.
fn cpu_mask(cpus: u32, cpu: Option<u32>) -> String {
    let words = cpus.div_ceil(32);
    (0..words)
        .rev()
        .map(|w| {
            let bits = match cpu {
                Some(c) if c / 32 == w => 1u32 << (c % 32),
                _ => 0,
            };
            format!("{bits:08x}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn join(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")
}

fn sysctl_value(name: &str) -> &'static str {
    match name {
        "net.core.rmem_max" | "net.core.wmem_max" => "67108864",
        "net.core.rmem_default" | "net.core.wmem_default" => "212992",
        "net.ipv4.tcp_rmem" => "4096 131072 67108864",
        "net.ipv4.tcp_wmem" => "4096 16384 67108864",
        "net.core.netdev_max_backlog" => "250000",
        "net.core.netdev_budget" => "600",
        "net.core.netdev_budget_usecs" => "8000",
        "net.ipv4.tcp_congestion_control" => "bbr",
        "net.core.default_qdisc" => "fq",
        _ => "1",
    }
}

const SNMP: &str = "Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates
Ip: 2 64 912345678 0 0 0 0 0 912345600 845123456 0 0 0 0 0 0 0 0 0
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 51234 48211 12 310 412 911234567 844123456 120345 0 4521 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 1234567 120 0 1234000 0 0 0 0 0
";

const NETSTAT: &str = "TcpExt: SyncookiesSent SyncookiesRecv SyncookiesFailed PruneCalled TCPLossProbes TCPTimeouts TCPRcvCollapsed TCPBacklogDrop TCPOFOQueue TCPDSACKRecv
TcpExt: 0 0 0 12 4512 310 0 0 123456 2345
IpExt: InNoRoutes InTruncatedPkts InMcastPkts OutMcastPkts InBcastPkts OutBcastPkts InOctets OutOctets
IpExt: 0 0 807705 287994 23269 1 2199120290572 2658838156693
";

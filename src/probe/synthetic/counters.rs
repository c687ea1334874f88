//! The counter files of the synthetic host, rewritten at every clock step:
//! /proc/stat, /proc/softirqs, softnet_stat, /proc/interrupts,
//! /proc/net/dev and `ethtool -S` of every NIC, from the host's rates.

use super::{nic_name, SyntheticError, SyntheticHost, USER_HZ};
use crate::probe::capture_dir::ethtool_file;
use crate::probe::ethtool_names::Dir;
use crate::probe::ethtool_text as text;
use std::fmt::Write as _;

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

impl SyntheticHost {
    /// Every counter file at the current clock.
    pub(super) fn write_counters(&self) -> Result<(), SyntheticError> {
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
        let irqs: u64 = self.irq_lines().iter().map(|l| l.rate * now).sum();
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
        for (dir, prefix, fields) in [(Dir::Rx, "rx", MLX5_RX), (Dir::Tx, "tx", MLX5_TX)] {
            for q in 0..l.queues {
                let r = self.queue_rate(n, dir, q);
                for f in fields {
                    let v = match (dir, *f) {
                        (_, "packets") | (Dir::Rx, "csum_complete") | (Dir::Tx, "csum_partial") => {
                            r.pps * now
                        }
                        (_, "bytes") => r.pps * r.bytes_per_packet * now,
                        (Dir::Rx, "cache_reuse") => r.pps / 2 * now,
                        (Dir::Tx, "xmit_more") => r.pps / 4 * now,
                        _ => 0,
                    };
                    out.push((format!("{prefix}{q}_{f}"), v));
                }
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
                let n = if c == line.cpu { line.rate * now } else { 0 };
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

fn join(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")
}

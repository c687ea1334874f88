//! Softirq and softnet counters per CPU: /proc/softirqs and /proc/net/softnet_stat.
//!
//! softnet_stat has one row per *online* CPU, in hex. Kernels since 5.10
//! print the CPU number in column 13; older ones do not, and their rows are
//! mapped onto the online CPU list in order (offline CPUs have no row).
//! Counters are 32 bits wide there and wrap, so deltas are taken modulo 2^32.
//!
//! Parsed here because procfs-core has neither file (nor /proc/interrupts,
//! whose header [`parse_cpu_header`] also reads); see [`super::procfs`].

use crate::units::CpuId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Cumulative softirq counts per vector for each CPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Softirqs {
    /// CPU numbers, in column order.
    pub cpus: Vec<CpuId>,
    /// Vector name (`NET_RX`, ...) → count per column.
    pub vectors: BTreeMap<String, Vec<u64>>,
}

/// The `CPU0 CPU1 ...` header of /proc/softirqs and /proc/interrupts: the
/// CPU of each column (offline CPUs have no column).
pub fn parse_cpu_header(line: &str) -> Vec<CpuId> {
    line.split_ascii_whitespace()
        .filter_map(|c| {
            c.strip_prefix("CPU")
                .and_then(|n| n.parse().ok())
                .map(CpuId)
        })
        .collect()
}

/// Parse /proc/softirqs.
pub fn parse_softirqs(text: &str) -> Softirqs {
    let mut lines = text.lines();
    let cpus = parse_cpu_header(lines.next().unwrap_or(""));
    let mut vectors = BTreeMap::new();
    for l in lines {
        let Some((name, rest)) = l.split_once(':') else {
            continue;
        };
        let v: Vec<u64> = rest
            .split_ascii_whitespace()
            .take(cpus.len())
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        vectors.insert(name.trim().to_string(), v);
    }
    Softirqs { cpus, vectors }
}

/// Softirqs raised on one CPU during an interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SoftirqCpu {
    /// CPU.
    pub cpu: CpuId,
    /// NET_RX softirqs (receive processing).
    pub net_rx: u64,
    /// NET_TX softirqs (transmit completion).
    pub net_tx: u64,
    /// All other vectors with a non-zero count, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other: BTreeMap<String, u64>,
}

/// Per-CPU deltas between two snapshots.
pub fn softirq_deltas(prev: &Softirqs, cur: &Softirqs) -> Vec<SoftirqCpu> {
    cur.cpus
        .iter()
        .enumerate()
        .map(|(col, cpu)| {
            let pcol = prev.cpus.iter().position(|c| c == cpu);
            let d = |name: &str| -> u64 {
                let now = cur
                    .vectors
                    .get(name)
                    .and_then(|v| v.get(col))
                    .copied()
                    .unwrap_or(0);
                let before = pcol
                    .and_then(|p| prev.vectors.get(name).and_then(|v| v.get(p)))
                    .copied()
                    .unwrap_or(now);
                // /proc/softirqs prints unsigned int: the counter wraps at 2^32.
                u64::from((now as u32).wrapping_sub(before as u32))
            };
            let other = cur
                .vectors
                .keys()
                .filter(|k| *k != "NET_RX" && *k != "NET_TX")
                .map(|k| (k.clone(), d(k)))
                .filter(|(_, v)| *v > 0)
                .collect();
            SoftirqCpu {
                cpu: *cpu,
                net_rx: d("NET_RX"),
                net_tx: d("NET_TX"),
                other,
            }
        })
        .collect()
}

/// One row of softnet_stat (cumulative, 32-bit).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Softnet {
    /// Packets processed by the backlog/NAPI of this CPU.
    pub processed: u32,
    /// Dropped because the backlog (netdev_max_backlog) was full.
    pub dropped: u32,
    /// net_rx_action ran out of budget or time (netdev_budget / netdev_budget_usecs).
    pub time_squeeze: u32,
    /// RPS: packets steered to this CPU by inter-processor interrupt.
    pub received_rps: u32,
    /// Dropped by the flow limit.
    pub flow_limit: u32,
}

/// softnet deltas of one CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SoftnetCpu {
    /// CPU.
    pub cpu: CpuId,
    /// Deltas over the interval.
    #[serde(flatten)]
    pub delta: Softnet,
}

/// Parse softnet_stat. `online` maps rows to CPUs on kernels that do not print the index.
pub fn parse_softnet(text: &str, online: &[CpuId]) -> Vec<(CpuId, Softnet)> {
    text.lines()
        .enumerate()
        .filter_map(|(row, l)| {
            let v: Vec<u32> = l
                .split_ascii_whitespace()
                .map(|x| u32::from_str_radix(x, 16).unwrap_or(0))
                .collect();
            if v.len() < 3 {
                return None;
            }
            let get = |i: usize| v.get(i).copied().unwrap_or(0);
            let cpu = if v.len() >= 13 {
                CpuId(get(12))
            } else {
                online.get(row).copied().unwrap_or(CpuId(row as u32))
            };
            Some((
                cpu,
                Softnet {
                    processed: get(0),
                    dropped: get(1),
                    time_squeeze: get(2),
                    received_rps: get(9),
                    flow_limit: get(10),
                },
            ))
        })
        .collect()
}

/// Deltas (modulo 2^32) for CPUs present in both snapshots.
pub fn softnet_deltas(prev: &[(CpuId, Softnet)], cur: &[(CpuId, Softnet)]) -> Vec<SoftnetCpu> {
    cur.iter()
        .filter_map(|(cpu, c)| {
            let (_, p) = prev.iter().find(|(pc, _)| pc == cpu)?;
            Some(SoftnetCpu {
                cpu: *cpu,
                delta: Softnet {
                    processed: c.processed.wrapping_sub(p.processed),
                    dropped: c.dropped.wrapping_sub(p.dropped),
                    time_squeeze: c.time_squeeze.wrapping_sub(p.time_squeeze),
                    received_rps: c.received_rps.wrapping_sub(p.received_rps),
                    flow_limit: c.flow_limit.wrapping_sub(p.flow_limit),
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softirqs_fixture() {
        let s = parse_softirqs(include_str!("../../tests/fixtures/proc/softirqs"));
        assert_eq!(s.cpus, vec![CpuId(0), CpuId(1)]);
        assert!(s.vectors.contains_key("NET_RX"));
        assert_eq!(s.vectors["TIMER"].len(), 2);
        let mut later = s.clone();
        later.vectors.get_mut("NET_RX").unwrap()[1] += 7;
        let d = softirq_deltas(&s, &later);
        assert_eq!(d[1].net_rx, 7);
        assert_eq!(d[0].net_rx, 0);
        assert!(d[0].other.is_empty());
    }

    #[test]
    fn softnet_with_index_column_and_old_kernels() {
        let rows = parse_softnet(include_str!("../../tests/fixtures/proc/softnet_stat"), &[]);
        assert_eq!(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            vec![CpuId(0), CpuId(1)]
        );
        assert!(rows[0].1.processed > 0);
        // A 4.x kernel: 11 columns, CPU 1 offline → rows map to online CPUs 0 and 2.
        let old = "0000000a 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000000 00000003 00000000\n\
                   000000ff 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n";
        let r = parse_softnet(old, &[CpuId(0), CpuId(2)]);
        assert_eq!(r[1].0, CpuId(2));
        assert_eq!(r[0].1.received_rps, 3);
        assert_eq!(r[0].1.dropped, 1);
    }

    #[test]
    fn softnet_deltas_wrap() {
        let a = vec![(
            CpuId(0),
            Softnet {
                processed: u32::MAX - 1,
                ..Default::default()
            },
        )];
        let b = vec![(
            CpuId(0),
            Softnet {
                processed: 3,
                ..Default::default()
            },
        )];
        assert_eq!(softnet_deltas(&a, &b)[0].delta.processed, 5);
    }
}

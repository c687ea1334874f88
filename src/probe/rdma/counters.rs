//! Per-interval RDMA counters: `counters/` and `hw_counters/` of every port,
//! and the per-priority pause (PFC) and traffic counters of the netdev behind
//! it (`ethtool -S`: mlx5 `rx_prio3_pause`, Intel `port.rx_priority_3_xoff`).
//!
//! A [`RdmaSnapshot`] is one read of cumulative values; [`port_sample`] turns
//! two of them into deltas and rates, and [`RdmaCounterReader`] keeps the
//! previous read so the sampler only calls `read` once per interval. Unknown
//! counter names are kept; only counters that moved are reported.
//!
//! Resets and wraps: the IBA port counters of `counters/` saturate instead of
//! wrapping and `hw_counters/` are 64-bit, so a value that went down almost
//! always means the counters were cleared (driver reload, `rdma statistic`
//! reset): the delta is then the new value, counted since the reset, and the
//! counter is listed in `resets`. Only a drop from the top quarter of the
//! 32-bit range to its bottom quarter is read as a 32-bit wrap.

use super::{RdmaFacts, SYSFS_ROOT};
use crate::probe::source::HostSource;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// Cumulative counters of one port at one moment.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdmaPortCounters {
    /// Device.
    pub device: String,
    /// Port number.
    pub port: u32,
    /// Netdev behind the port, whose PFC counters are in `netdev`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdev_name: Option<String>,
    /// `counters/NAME`.
    pub counters: BTreeMap<String, u64>,
    /// `hw_counters/NAME`.
    pub hw_counters: BTreeMap<String, u64>,
    /// Per-priority counters of the netdev (`ethtool -S`), by their ethtool names.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub netdev: BTreeMap<String, u64>,
}

/// One read of every port's counters.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdmaSnapshot {
    /// Ports.
    pub ports: Vec<RdmaPortCounters>,
    /// When it was read (monotonic; not serialized).
    #[serde(skip)]
    pub at: Option<Instant>,
}

fn read_dir_counters(src: &dyn HostSource, dir: &str) -> BTreeMap<String, u64> {
    src.list(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|n| {
            // Some counters cannot be read (EINVAL on an unsupported one): skip that name only.
            let v = src.read(&format!("{dir}/{n}")).ok()?;
            Some((n, v.trim().parse().ok()?))
        })
        .collect()
}

/// Is this `ethtool -S` name a per-priority counter (PFC pause or traffic)?
pub fn is_prio_counter(name: &str) -> bool {
    parse_prio_name(name).is_some()
}

/// `(direction, priority, what)` of a per-priority ethtool counter:
/// mlx5 `rx_prio3_pause` / `tx_prio3_bytes` / `rx_prio3_pause_duration`,
/// Intel `port.rx_priority_3_xoff`.
pub fn parse_prio_name(name: &str) -> Option<(&'static str, u8, String)> {
    let n = name.strip_prefix("port.").unwrap_or(name);
    let (dir, rest) = if let Some(r) = n.strip_prefix("rx_") {
        ("rx", r)
    } else if let Some(r) = n.strip_prefix("tx_") {
        ("tx", r)
    } else {
        return None;
    };
    let rest = rest
        .strip_prefix("priority_")
        .or_else(|| rest.strip_prefix("prio"))?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let prio: u8 = digits.parse().ok().filter(|p| *p < 16)?;
    let what = rest[digits.len()..].trim_start_matches('_');
    if what.is_empty() {
        return None;
    }
    let what = match what {
        "xoff" => "pause".to_string(),
        w => w.to_string(),
    };
    Some((dir, prio, what))
}

/// Read every port's counters now (and the netdev's per-priority counters).
pub fn read_snapshot(src: &dyn HostSource, facts: &RdmaFacts) -> RdmaSnapshot {
    let mut ports = Vec::new();
    for d in &facts.devices {
        for p in &d.ports {
            let base = format!("{SYSFS_ROOT}/{}/ports/{}", d.name, p.port);
            let netdev = p
                .netdev
                .as_ref()
                .and_then(|n| src.ethtool_stats(n).value().cloned())
                .map(|stats| {
                    stats
                        .iter()
                        .filter(|(n, _)| is_prio_counter(n))
                        .map(|(n, v)| (n.to_owned(), v))
                        .collect()
                })
                .unwrap_or_default();
            ports.push(RdmaPortCounters {
                device: d.name.clone(),
                port: p.port,
                netdev_name: p.netdev.clone(),
                counters: read_dir_counters(src, &format!("{base}/counters")),
                hw_counters: read_dir_counters(src, &format!("{base}/hw_counters")),
                netdev,
            });
        }
    }
    RdmaSnapshot {
        ports,
        at: Some(Instant::now()),
    }
}

/// How a counter moved between two reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Movement {
    /// Normal increase (or none).
    Up(u64),
    /// Went down: counters were cleared; the value counts since then.
    Reset(u64),
    /// A 32-bit counter passed 2^32.
    Wrapped(u64),
}

impl Movement {
    /// The increase over the interval.
    pub fn delta(self) -> u64 {
        match self {
            Movement::Up(d) | Movement::Reset(d) | Movement::Wrapped(d) => d,
        }
    }
}

/// The movement of one counter from `prev` to `cur` (see the module docs).
pub fn movement(prev: u64, cur: u64) -> Movement {
    const TOP_QUARTER: u64 = 3 << 30;
    const BOTTOM_QUARTER: u64 = 1 << 30;
    if cur >= prev {
        Movement::Up(cur - prev)
    } else if (TOP_QUARTER..=u64::from(u32::MAX)).contains(&prev) && cur < BOTTOM_QUARTER {
        Movement::Wrapped(u64::from(u32::MAX) - prev + cur + 1)
    } else {
        Movement::Reset(cur)
    }
}

/// One counter that moved in an interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CounterDelta {
    /// `counters` or `hw_counters`.
    pub group: String,
    /// File name (`out_of_buffer`, `np_cnp_sent`, a name this code does not know...).
    pub name: String,
    /// Increase over the interval.
    pub delta: u64,
    /// Per second.
    pub per_s: f64,
}

/// Per-priority netdev counters that moved in an interval.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PfcPrio {
    /// Priority (0–7).
    pub prio: u8,
    /// Pause frames received for this priority (the link partner stopped us).
    pub rx_pause: u64,
    /// Pause frames sent for this priority (we stopped the link partner).
    pub tx_pause: u64,
    /// Bytes received on this priority.
    pub rx_bytes: u64,
    /// Bytes sent on this priority.
    pub tx_bytes: u64,
    /// Other per-priority counters that moved (`rx_pause_duration`, `tx_packets`...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other: BTreeMap<String, u64>,
}

/// One port over one interval.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdmaPortSample {
    /// Device.
    pub device: String,
    /// Port.
    pub port: u32,
    /// Netdev behind the port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdev: Option<String>,
    /// Interval length (s).
    pub secs: f64,
    /// Bytes sent (`counters/port_xmit_data` × 4: the IBA counts 32-bit words).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_bytes: Option<u64>,
    /// Bytes received (`counters/port_rcv_data` × 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_bytes: Option<u64>,
    /// Send rate, bit/s.
    pub tx_bps: f64,
    /// Receive rate, bit/s.
    pub rx_bps: f64,
    /// Every `counters/` and `hw_counters/` entry that moved.
    pub counters: Vec<CounterDelta>,
    /// Priorities whose netdev counters moved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pfc: Vec<PfcPrio>,
    /// Counters that went down (cleared) or wrapped in this interval, `group/name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resets: Vec<String>,
}

impl RdmaPortSample {
    /// Delta of a counter by file name (either group); 0 when it did not move or is absent.
    pub fn delta(&self, name: &str) -> u64 {
        self.counters
            .iter()
            .filter(|c| c.name == name)
            .map(|c| c.delta)
            .sum()
    }

    /// `device/port` for messages.
    pub fn label(&self) -> String {
        format!("{} port {}", self.device, self.port)
    }
}

/// All RDMA ports of a host over one interval: the engine-independent part of a Sample.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdmaSample {
    /// Ports, in device/port order.
    pub ports: Vec<RdmaPortSample>,
}

fn deltas(
    group: &str,
    prev: &BTreeMap<String, u64>,
    cur: &BTreeMap<String, u64>,
    secs: f64,
    resets: &mut Vec<String>,
) -> Vec<CounterDelta> {
    let mut out = Vec::new();
    for (name, &v) in cur {
        // A counter that appeared since the last read has no interval yet.
        let Some(&p) = prev.get(name) else { continue };
        let m = movement(p, v);
        if !matches!(m, Movement::Up(_)) {
            resets.push(format!("{group}/{name}"));
        }
        let d = m.delta();
        if d > 0 {
            out.push(CounterDelta {
                group: group.to_string(),
                name: name.clone(),
                delta: d,
                per_s: if secs > 0.0 { d as f64 / secs } else { 0.0 },
            });
        }
    }
    out
}

/// Deltas and rates of one port between two reads `secs` apart.
pub fn port_sample(prev: &RdmaPortCounters, cur: &RdmaPortCounters, secs: f64) -> RdmaPortSample {
    let mut resets = Vec::new();
    let mut counters = deltas("counters", &prev.counters, &cur.counters, secs, &mut resets);
    counters.extend(deltas(
        "hw_counters",
        &prev.hw_counters,
        &cur.hw_counters,
        secs,
        &mut resets,
    ));
    let words = |name: &str| {
        let (p, c) = (prev.counters.get(name)?, cur.counters.get(name)?);
        Some(movement(*p, *c).delta().saturating_mul(4))
    };
    let tx_bytes = words("port_xmit_data");
    let rx_bytes = words("port_rcv_data");
    let bps = |b: Option<u64>| match (b, secs > 0.0) {
        (Some(b), true) => b as f64 * 8.0 / secs,
        _ => 0.0,
    };
    let mut prios: BTreeMap<u8, PfcPrio> = BTreeMap::new();
    for d in deltas("netdev", &prev.netdev, &cur.netdev, secs, &mut resets) {
        let Some((dir, prio, what)) = parse_prio_name(&d.name) else {
            continue;
        };
        let e = prios.entry(prio).or_insert_with(|| PfcPrio {
            prio,
            ..Default::default()
        });
        match (dir, what.as_str()) {
            ("rx", "pause") => e.rx_pause += d.delta,
            ("tx", "pause") => e.tx_pause += d.delta,
            ("rx", "bytes") => e.rx_bytes += d.delta,
            ("tx", "bytes") => e.tx_bytes += d.delta,
            _ => {
                *e.other.entry(format!("{dir}_{what}")).or_insert(0) += d.delta;
            }
        }
    }
    RdmaPortSample {
        device: cur.device.clone(),
        port: cur.port,
        netdev: cur.netdev_name.clone(),
        secs,
        tx_bps: bps(tx_bytes),
        rx_bps: bps(rx_bytes),
        tx_bytes,
        rx_bytes,
        counters,
        pfc: prios.into_values().collect(),
        resets,
    }
}

/// Deltas of every port present in both reads.
pub fn sample(prev: &RdmaSnapshot, cur: &RdmaSnapshot, secs: f64) -> RdmaSample {
    RdmaSample {
        ports: cur
            .ports
            .iter()
            .filter_map(|c| {
                let p = prev
                    .ports
                    .iter()
                    .find(|p| p.device == c.device && p.port == c.port)?;
                Some(port_sample(p, c, secs))
            })
            .collect(),
    }
}

/// Keeps the previous read; each [`RdmaCounterReader::read`] returns the
/// interval since the last one (None the first time).
#[derive(Debug, Default)]
pub struct RdmaCounterReader {
    prev: Option<RdmaSnapshot>,
}

impl RdmaCounterReader {
    /// A reader with no previous read.
    pub fn new() -> Self {
        Self::default()
    }

    /// Read now and return the interval since the previous read.
    pub fn read(&mut self, src: &dyn HostSource, facts: &RdmaFacts) -> Option<RdmaSample> {
        self.push(read_snapshot(src, facts))
    }

    /// Take a snapshot read elsewhere; the interval length comes from the
    /// snapshots' timestamps (0 s, so rates 0, when one has none).
    pub fn push(&mut self, snap: RdmaSnapshot) -> Option<RdmaSample> {
        let out = self.prev.as_ref().map(|p| {
            let secs = match (p.at, snap.at) {
                (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64(),
                _ => 0.0,
            };
            sample(p, &snap, secs)
        });
        self.prev = Some(snap);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn movements() {
        assert_eq!(movement(10, 15), Movement::Up(5));
        assert_eq!(movement(10, 10), Movement::Up(0));
        // Cleared: the new value counts since the reset.
        assert_eq!(movement(1_000_000, 7), Movement::Reset(7));
        // 32-bit wrap: 0xFFFF_FFF0 -> 0x10 is 0x10 + 0x10 = 32.
        assert_eq!(movement(0xFFFF_FFF0, 0x10), Movement::Wrapped(32));
        // A 64-bit counter that dropped is a reset, not a wrap.
        assert_eq!(movement(1 << 40, 5), Movement::Reset(5));
    }

    #[test]
    fn prio_names() {
        assert_eq!(
            parse_prio_name("rx_prio3_pause"),
            Some(("rx", 3, "pause".into()))
        );
        assert_eq!(
            parse_prio_name("tx_prio0_pause_duration"),
            Some(("tx", 0, "pause_duration".into()))
        );
        assert_eq!(
            parse_prio_name("port.rx_priority_5_xoff"),
            Some(("rx", 5, "pause".into()))
        );
        assert_eq!(
            parse_prio_name("rx_prio1_bytes"),
            Some(("rx", 1, "bytes".into()))
        );
        assert_eq!(parse_prio_name("rx_pause_ctrl_phy"), None);
        assert_eq!(parse_prio_name("rx_prio_x"), None);
    }

    fn port(counters: &[(&str, u64)], hw: &[(&str, u64)], nd: &[(&str, u64)]) -> RdmaPortCounters {
        let m = |v: &[(&str, u64)]| v.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        RdmaPortCounters {
            device: "mlx5_0".into(),
            port: 1,
            netdev_name: Some("eth0".into()),
            counters: m(counters),
            hw_counters: m(hw),
            netdev: m(nd),
        }
    }

    #[test]
    fn port_sample_deltas_rates_and_pfc() {
        let a = port(
            &[("port_xmit_data", 1000), ("port_rcv_data", 0)],
            &[
                ("out_of_buffer", 5),
                ("np_cnp_sent", 100),
                ("new_fw_counter", 1),
            ],
            &[("rx_prio3_pause", 10), ("tx_prio3_bytes", 0)],
        );
        let b = port(
            &[("port_xmit_data", 1000 + 250_000_000), ("port_rcv_data", 0)],
            &[
                ("out_of_buffer", 9),
                ("np_cnp_sent", 100),
                ("new_fw_counter", 3),
            ],
            &[("rx_prio3_pause", 15), ("tx_prio3_bytes", 4096)],
        );
        let s = port_sample(&a, &b, 2.0);
        // 250e6 words x 4 B = 1e9 B over 2 s = 4 Gbit/s.
        assert_eq!(s.tx_bytes, Some(1_000_000_000));
        assert_eq!(s.tx_bps, 4e9);
        assert_eq!(s.rx_bps, 0.0);
        assert_eq!(s.delta("out_of_buffer"), 4);
        assert_eq!(s.delta("np_cnp_sent"), 0);
        // Unknown names are kept.
        assert_eq!(s.delta("new_fw_counter"), 2);
        assert_eq!(
            s.pfc,
            vec![PfcPrio {
                prio: 3,
                rx_pause: 5,
                tx_bytes: 4096,
                ..Default::default()
            }]
        );
        assert!(s.resets.is_empty());
    }

    #[test]
    fn reader_reports_from_the_second_read_and_flags_resets() {
        let mut r = RdmaCounterReader::new();
        let snap = |v: u64| RdmaSnapshot {
            ports: vec![port(&[], &[("out_of_sequence", v)], &[])],
            at: None,
        };
        assert!(r.push(snap(100)).is_none());
        let s = r.push(snap(3)).unwrap();
        assert_eq!(s.ports[0].delta("out_of_sequence"), 3);
        assert_eq!(s.ports[0].resets, vec!["hw_counters/out_of_sequence"]);
        assert_eq!(s.ports[0].counters[0].per_s, 0.0);
    }
}

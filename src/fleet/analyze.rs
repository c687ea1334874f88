//! What a fleet's results say, as a pure function of them: the throughput
//! matrix, the slow links and slow nodes, and the settings in which a few
//! hosts differ from the rest.
//!
//! * **Slow node**: most of a node's links in one direction (it sending, or
//!   it receiving) are below [`SLOW`] × the fleet's median link — its NIC,
//!   its CPU or its settings.
//! * **Slow link**: a directed link below [`SLOW`] × the median of *both*
//!   nodes' other links (in either direction), so neither end explains it.
//!   A link of a slow node is named under the node, not as a link.
//! * **Odd settings**: for each fact (driver, firmware, MTU, offloads,
//!   rings, channels, IRQ placement, sysctls, kernel), the majority value and
//!   the hosts that differ from it. Only facts with a strict majority are
//!   compared, so a fleet split in halves is not "odd".

use crate::probe::facts::HostFacts;
use crate::tune::key::on_off;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A link or node counts as slow below this share of its reference median.
pub const SLOW: f64 = 0.5;

/// Directed throughput (bits/s) of every tested link; `cells[from][to]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Matrix {
    /// Host names, in order (row = sender, column = receiver).
    pub hosts: Vec<String>,
    /// bits/s; None: not tested, or the test failed.
    pub cells: Vec<Vec<Option<f64>>>,
}

impl Matrix {
    /// An empty matrix over `hosts`.
    pub fn new(hosts: Vec<String>) -> Self {
        let n = hosts.len();
        Matrix {
            hosts,
            cells: vec![vec![None; n]; n],
        }
    }

    /// Record one direction.
    pub fn set(&mut self, from: usize, to: usize, bps: f64) {
        if let Some(c) = self.cells.get_mut(from).and_then(|r| r.get_mut(to)) {
            *c = Some(bps);
        }
    }

    /// Median of every tested link (bits/s); None before any.
    pub fn link_median(&self) -> Option<f64> {
        median(&mut self.links().map(|l| l.2).collect::<Vec<_>>())
    }

    pub(crate) fn links(&self) -> impl Iterator<Item = (usize, usize, f64)> + '_ {
        self.cells.iter().enumerate().flat_map(|(i, r)| {
            r.iter()
                .enumerate()
                .filter_map(move |(j, c)| c.map(|v| (i, j, v)))
        })
    }
}

/// A node whose links are mostly slow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SlowNode {
    /// The node.
    pub host: String,
    /// `sending`, `receiving` or `both`.
    pub direction: String,
    /// Its slow links.
    pub slow_links: usize,
    /// Its tested links in that direction.
    pub links: usize,
    /// Median of those links (bits/s).
    pub median_bps: f64,
    /// Median of every link of the fleet (bits/s).
    pub fleet_median_bps: f64,
}

/// A link slower than both of its nodes' other links.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SlowLink {
    /// Sender.
    pub from: String,
    /// Receiver.
    pub to: String,
    /// Its throughput (bits/s).
    pub bps: f64,
    /// Median of the sender's other links.
    pub from_median_bps: f64,
    /// Median of the receiver's other links.
    pub to_median_bps: f64,
}

/// A setting in which some hosts differ from the majority.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OddFact {
    /// What (`nic.firmware`, `nic.mtu`, `sysctl.net.ipv4.tcp_rmem`, ...).
    pub key: String,
    /// The majority's value.
    pub majority: String,
    /// Hosts with it.
    pub majority_hosts: usize,
    /// The others: host and value.
    pub odd: Vec<(String, String)>,
}

impl OddFact {
    /// One line: "node07: nic.firmware 20.31.1014, the other 15 have 20.39.2048".
    pub fn line(&self) -> String {
        let who: Vec<String> = self.odd.iter().map(|(h, v)| format!("{h}: {v}")).collect();
        format!(
            "{}: {}; the other {} have {}",
            self.key,
            who.join(", "),
            self.majority_hosts,
            self.majority
        )
    }
}

/// The middle value (mean of the two middle ones for an even count).
pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Slow nodes and slow links of a matrix.
pub fn outliers(m: &Matrix) -> (Vec<SlowNode>, Vec<SlowLink>) {
    let links: Vec<(usize, usize, f64)> = m.links().collect();
    let Some(fleet) = m.link_median() else {
        return (Vec::new(), Vec::new());
    };
    let n = m.hosts.len();
    let mut nodes = Vec::new();
    // [sending, receiving] slow per node.
    let mut slow_dir = vec![[false; 2]; n];
    for (h, dirs) in slow_dir.iter_mut().enumerate() {
        let mut found = Vec::new();
        for (d, name) in [(0, "sending"), (1, "receiving")] {
            let mut mine: Vec<f64> = links
                .iter()
                .filter(|l| if d == 0 { l.0 == h } else { l.1 == h })
                .map(|l| l.2)
                .collect();
            let slow = mine.iter().filter(|v| **v < SLOW * fleet).count();
            // "Most": more than half, and at least two links to say so.
            if mine.len() >= 2 && slow * 2 > mine.len() {
                dirs[d] = true;
                found.push((name, slow, mine.len(), median(&mut mine).unwrap_or(0.0)));
            }
        }
        match found.as_slice() {
            [] => {}
            [(dir, slow, of, med)] => nodes.push(SlowNode {
                host: m.hosts[h].clone(),
                direction: dir.to_string(),
                slow_links: *slow,
                links: *of,
                median_bps: *med,
                fleet_median_bps: fleet,
            }),
            [a, b, ..] => nodes.push(SlowNode {
                host: m.hosts[h].clone(),
                direction: "both".into(),
                slow_links: a.1 + b.1,
                links: a.2 + b.2,
                median_bps: (a.3 + b.3) / 2.0,
                fleet_median_bps: fleet,
            }),
        }
    }
    let mut slow_links = Vec::new();
    for &(a, b, v) in &links {
        if slow_dir[a][0] || slow_dir[b][1] {
            continue;
        }
        let others = |h: usize| {
            let mut o: Vec<f64> = links
                .iter()
                .filter(|l| {
                    (l.0 == h || l.1 == h) && !((l.0 == a && l.1 == b) || (l.0 == b && l.1 == a))
                })
                .map(|l| l.2)
                .collect();
            median(&mut o)
        };
        let (Some(ma), Some(mb)) = (others(a), others(b)) else {
            continue;
        };
        if v < SLOW * ma && v < SLOW * mb {
            slow_links.push(SlowLink {
                from: m.hosts[a].clone(),
                to: m.hosts[b].clone(),
                bps: v,
                from_median_bps: ma,
                to_median_bps: mb,
            });
        }
    }
    slow_links.sort_by(|x, y| x.bps.total_cmp(&y.bps));
    (nodes, slow_links)
}

/// The settings of a host that a fleet compares, by key. The NIC is the
/// first one under test (the one the tests ran over), whatever its name.
pub fn flatten(f: &HostFacts) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        out.insert(k.to_string(), v);
    };
    put("kernel", f.kernel.clone());
    put("cpu_model", f.cpu_model.clone());
    put("cpus", f.cpus.to_string());
    put("numa_nodes", f.numa.len().to_string());
    if let Some(b) = f.irqbalance {
        put("irqbalance", on_off(b));
    }
    if !f.governors.is_empty() {
        let g: Vec<&str> = f.governors.keys().map(String::as_str).collect();
        put("cpufreq_governor", g.join(","));
    }
    for (k, v) in &f.sysctls {
        put(
            &format!("sysctl.{k}"),
            v.split_whitespace().collect::<Vec<_>>().join(" "),
        );
    }
    let Some(nic) = f.nics.first() else {
        return out;
    };
    let drv = nic.drvinfo.value();
    let rings = nic.rings.value();
    let text = |s: &String| (!s.is_empty()).then(|| s.clone());
    let channels = nic.channels.value().map(|c| {
        [("rx", c.rx), ("tx", c.tx), ("combined", c.combined)]
            .iter()
            .filter_map(|(n, v)| v.filter(|x| *x > 0).map(|x| format!("{n} {x}")))
            .collect::<Vec<_>>()
            .join(", ")
    });
    fn shown<T: ToString>(v: Option<T>) -> Option<String> {
        v.map(|v| v.to_string())
    }
    let nic_facts = [
        ("nic.mtu", shown(nic.mtu)),
        ("nic.driver", drv.map(|d| d.driver.clone())),
        ("nic.driver_version", drv.and_then(|d| text(&d.version))),
        ("nic.firmware", drv.and_then(|d| text(&d.firmware))),
        ("nic.channels", channels.as_ref().and_then(text)),
        ("nic.ring_rx", shown(rings.and_then(|r| r.rx))),
        ("nic.ring_tx", shown(rings.and_then(|r| r.tx))),
        (
            "nic.speed_mbps",
            shown(nic.link.value().and_then(|l| l.speed_mbps)),
        ),
        ("nic.qdisc", nic.qdisc.clone()),
        (
            "nic.queues",
            nic.rx_queues
                .zip(nic.tx_queues)
                .map(|(rx, tx)| format!("rx {rx}, tx {tx}")),
        ),
        ("nic.numa_node", shown(nic.numa_node.filter(|n| *n >= 0))),
        ("nic.irqs_off_numa_node", shown(irqs_off_node(f, nic))),
    ];
    for (k, v) in nic_facts {
        if let Some(v) = v {
            put(k, v);
        }
    }
    if let Some(feat) = nic.features.value() {
        for name in OFFLOADS {
            if let Some(on) = feat.on(name) {
                put(&format!("nic.{name}"), on_off(on));
            }
        }
    }
    out
}

/// Offloads worth comparing (ethtool names).
const OFFLOADS: &[&str] = &[
    "generic-receive-offload",
    "generic-segmentation-offload",
    "tcp-segmentation-offload",
    "large-receive-offload",
    "rx-checksumming",
    "tx-checksumming",
    "scatter-gather",
];

/// How many of the NIC's IRQs may run only on CPUs outside its NUMA node
/// (None without a NUMA node or affinities).
fn irqs_off_node(f: &HostFacts, nic: &crate::probe::facts::NicFacts) -> Option<usize> {
    let node = u32::try_from(nic.numa_node?).ok()?;
    let local: std::collections::BTreeSet<u32> = f
        .cpu_places
        .iter()
        .filter(|p| p.numa_node == Some(node))
        .map(|p| p.cpu.0)
        .collect();
    if local.is_empty() || nic.irqs.is_empty() {
        return None;
    }
    Some(
        nic.irqs
            .iter()
            .filter(|i| {
                crate::units::parse_cpu_list(&i.affinity)
                    .map(|cpus| cpus.iter().all(|c| !local.contains(&c.0)))
                    .unwrap_or(false)
            })
            .count(),
    )
}

/// Facts in which a minority of hosts differ from a strict majority.
/// `facts[i]` belongs to `hosts[i]` (None: never seen).
pub fn odd_facts(hosts: &[String], facts: &[Option<&HostFacts>]) -> Vec<OddFact> {
    let flat: Vec<(usize, BTreeMap<String, String>)> = facts
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.map(|f| (i, flatten(f))))
        .collect();
    let mut keys: BTreeMap<&str, Vec<(usize, &str)>> = BTreeMap::new();
    for (i, m) in &flat {
        for (k, v) in m {
            keys.entry(k.as_str()).or_default().push((*i, v.as_str()));
        }
    }
    let mut out = Vec::new();
    for (key, vals) in keys {
        // Compared only where at least 3 hosts tell (2 cannot outvote each other).
        if vals.len() < 3 {
            continue;
        }
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, v) in &vals {
            *counts.entry(v).or_default() += 1;
        }
        let Some((maj, cnt)) = counts.iter().max_by_key(|(_, c)| **c) else {
            continue;
        };
        if *cnt == vals.len() || *cnt * 2 <= vals.len() {
            continue;
        }
        out.push(OddFact {
            key: key.to_string(),
            majority: maj.to_string(),
            majority_hosts: *cnt,
            odd: vals
                .iter()
                .filter(|(_, v)| v != maj)
                .map(|(i, v)| (hosts.get(*i).cloned().unwrap_or_default(), v.to_string()))
                .collect(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: f64 = 1e9;

    fn full(n: usize, v: f64) -> Matrix {
        let mut m = Matrix::new((0..n).map(|i| format!("n{i}")).collect());
        for a in 0..n {
            for b in 0..n {
                if a != b {
                    m.set(a, b, v * (1.0 + 0.03 * ((a * 7 + b * 3) % 5) as f64));
                }
            }
        }
        m
    }

    #[test]
    fn a_healthy_fleet_has_no_outliers() {
        let (nodes, links) = outliers(&full(8, 9.0 * G));
        assert!(nodes.is_empty() && links.is_empty(), "{nodes:?} {links:?}");
    }

    #[test]
    fn one_slow_direction_is_a_slow_link_and_nothing_else() {
        let mut m = full(8, 9.0 * G);
        m.set(3, 5, 0.9 * G);
        let (nodes, links) = outliers(&m);
        assert!(nodes.is_empty(), "{nodes:?}");
        assert_eq!(links.len(), 1, "{links:?}");
        assert_eq!((links[0].from.as_str(), links[0].to.as_str()), ("n3", "n5"));
    }

    #[test]
    fn a_node_that_sends_slowly_is_a_slow_node_not_seven_slow_links() {
        let mut m = full(8, 9.0 * G);
        for b in 0..8 {
            if b != 6 {
                m.set(6, b, 1.0 * G);
            }
        }
        let (nodes, links) = outliers(&m);
        assert!(links.is_empty(), "{links:?}");
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].host, "n6");
        assert_eq!(nodes[0].direction, "sending");
        assert_eq!((nodes[0].slow_links, nodes[0].links), (7, 7));
    }

    #[test]
    fn a_ring_finds_its_slow_link_too() {
        // Each node has only its two neighbours: 0→1 slow against 1→2 and 7→0.
        let mut m = Matrix::new((0..8).map(|i| format!("n{i}")).collect());
        for i in 0..8 {
            m.set(i, (i + 1) % 8, 9.0 * G);
            m.set((i + 1) % 8, i, 9.0 * G);
        }
        m.set(0, 1, 2.0 * G);
        let (nodes, links) = outliers(&m);
        assert!(nodes.is_empty(), "{nodes:?}");
        assert_eq!(links.len(), 1, "{links:?}");
    }

    fn facts(mtu: u32, rmem: &str) -> HostFacts {
        let mut f = HostFacts {
            kernel: "6.1.0".into(),
            ..Default::default()
        };
        f.sysctls.insert("net.ipv4.tcp_rmem".into(), rmem.into());
        f.nics.push(crate::probe::facts::NicFacts {
            name: "eth0".into(),
            mtu: Some(mtu),
            ..Default::default()
        });
        f
    }

    #[test]
    fn the_odd_host_out_is_named_with_the_majority_value() {
        let hosts: Vec<String> = (0..5).map(|i| format!("n{i}")).collect();
        let all: Vec<HostFacts> = (0..5)
            .map(|i| {
                if i == 2 {
                    facts(1400, "4096 131072 6291456")
                } else {
                    facts(1500, "4096\t131072 6291456")
                }
            })
            .collect();
        let refs: Vec<Option<&HostFacts>> = all.iter().map(Some).collect();
        let odd = odd_facts(&hosts, &refs);
        let keys: Vec<&str> = odd.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["nic.mtu"], "{odd:?}");
        assert_eq!(odd[0].majority, "1500");
        assert_eq!(odd[0].odd, vec![("n2".to_string(), "1400".to_string())]);
        assert_eq!(odd[0].line(), "nic.mtu: n2: 1400; the other 4 have 1500");
        // Halves are not odd.
        let halves: Vec<HostFacts> = (0..4).map(|i| facts(1400 + (i % 2) * 100, "1")).collect();
        let refs: Vec<Option<&HostFacts>> = halves.iter().map(Some).collect();
        assert!(odd_facts(&hosts[..4], &refs).is_empty());
    }
}

//! NIC rules on live counters: nic.queue-imbalance, nic.ring-small,
//! nic.rx-out-of-buffer, nic.discards-phy, nic.pause-frames, and nic.gro-off
//! raised to a warning when packets are seen arriving unaggregated.

use super::nic::gro_off;
use super::{index_or_push, HostCtx, QueueTotals};
use crate::diagnose::finding::{Finding, Severity};
use crate::diagnose::impact::prior;
use crate::diagnose::thresholds::Thresholds;
use crate::diagnose::util::{driver, secs};
use crate::probe::ethtool_names::Dir;
use crate::probe::facts::NicFacts;
use crate::probe::sample::QueueSource;
use std::collections::BTreeMap;

/// All live NIC rules of one host.
pub fn rules(ctx: &HostCtx, t: &Thresholds) -> Vec<Finding> {
    let mut out = queue_imbalance(ctx, t);
    let Some(facts) = ctx.facts else {
        return out;
    };
    let all = counters(ctx);
    let none = Counters::new();
    for nic in &facts.nics {
        let c = all.get(nic.name.as_str()).unwrap_or(&none);
        out.extend(ring_small(ctx, nic, c));
        out.extend(counter_rule(ctx, nic, c, "rx_out_of_buffer"));
        out.extend(counter_rule(ctx, nic, c, "rx_discards_phy"));
        out.extend(pause(ctx, nic, c));
        out.extend(unaggregated_gro(ctx, nic, t));
    }
    out
}

/// Receive drop counters of the drivers (`ethtool -S` names) nic.ring-small reads.
const RING_DROPS: [&str; 5] = [
    "rx_out_of_buffer",
    "rx_missed_errors",
    "rx_fifo_errors",
    "rx_no_buffer_count",
    "rx_dropped",
];

/// The `ethtool -S` counters the rules below read: the drop counters and
/// every pause counter (mlx5 has some 2,500 names per NIC; the rest are
/// not summed at all).
fn read_by_rules(name: &str) -> bool {
    RING_DROPS.contains(&name) || name == "rx_discards_phy" || name.contains("pause")
}

/// One interface's `ethtool -S` counters summed over the window, by name.
type Counters<'a> = BTreeMap<&'a str, u64>;

/// Sum of each `ethtool -S` counter over the active window, per interface
/// (one pass over the window, names borrowed: thousands of counters on a
/// host of 8 NICs).
fn counters<'a>(ctx: &HostCtx<'a>) -> BTreeMap<&'a str, Counters<'a>> {
    let mut m: BTreeMap<&str, Counters> = BTreeMap::new();
    for s in &ctx.active {
        let mut at: Option<(&str, &mut Counters)> = None;
        for c in s.nic_counters.iter().filter(|c| read_by_rules(&c.name)) {
            // Counters come grouped by interface: look the map up once per run.
            let per = match at.take() {
                Some((i, per)) if i == c.iface => per,
                _ => m.entry(c.iface.as_str()).or_default(),
            };
            *per.entry(c.name.as_str()).or_insert(0) += c.delta;
            at = Some((c.iface.as_str(), per));
        }
    }
    m
}

fn window_secs(ctx: &HostCtx) -> f64 {
    ctx.active.iter().map(|s| secs(s)).sum::<f64>().max(1e-9)
}

/// Preference among per-queue sources of one interface: the NIC's own
/// counters first (they count packets before GRO, on the queue the hardware
/// chose), eBPF when the NIC has none (veth, many VFs).
fn source_rank(s: QueueSource) -> u8 {
    match s {
        QueueSource::Qstats => 0,
        QueueSource::Ethtool => 1,
        QueueSource::Ebpf => 2,
        QueueSource::EbpfSampled => 3,
    }
}

/// The source as evidence: eBPF names the tracepoint that counted.
fn source_label(s: QueueSource, dir: Dir) -> &'static str {
    match (s, dir) {
        (QueueSource::Qstats, _) => "netdev qstats",
        (QueueSource::Ebpf, Dir::Rx) => "eBPF netif_receive_skb",
        (QueueSource::Ebpf, Dir::Tx) => "eBPF net_dev_start_xmit",
        (QueueSource::EbpfSampled, Dir::Rx) => "eBPF netif_receive_skb (sampled)",
        (QueueSource::EbpfSampled, Dir::Tx) => "eBPF net_dev_start_xmit (sampled)",
        (s, _) => s.name(),
    }
}

/// nic.queue-imbalance: one queue carries > 80 % of the packets in ≥ N intervals.
fn queue_imbalance(ctx: &HostCtx, t: &Thresholds) -> Vec<Finding> {
    let best = queue_sources(ctx);
    let acc = dominated_queues(ctx, t, &best);
    imbalanced_queues(ctx, t, &best, acc)
        .into_iter()
        .map(|(iface, hits)| imbalance_finding(ctx, t, iface, &hits))
        .collect()
}

/// (iface, dir) -> the per-queue source chosen for it.
type Sources<'a> = BTreeMap<(&'a str, Dir), QueueSource>;

/// (iface, dir) -> (queue -> intervals it dominated, total packets per queue, queues seen)
type QueueAcc = (BTreeMap<u32, usize>, QueueTotals<u64>, usize);

/// One sample's queues of one (iface, dir), in the sample's order.
struct Group<'a> {
    key: (&'a str, Dir),
    /// The source chosen for the key, looked up once per group.
    chosen: Option<QueueSource>,
    qs: Vec<(u32, u64)>,
}

/// The group of `key` in `groups`: the last one used when it matches (a
/// sample lists each interface's queues together), else found or added.
fn group_of<'a, 'g>(
    groups: &'g mut Vec<Group<'a>>,
    last: &mut usize,
    key: (&'a str, Dir),
    best: &Sources<'a>,
) -> &'g mut Group<'a> {
    if groups.get(*last).is_none_or(|g| g.key != key) {
        *last = index_or_push(
            groups,
            |g| g.key == key,
            || Group {
                key,
                chosen: best.get(&key).copied(),
                qs: Vec::new(),
            },
        );
    }
    &mut groups[*last]
}

/// One source per (iface, dir) over the whole window: the preferred one
/// among those that counted packets (veth's ethtool -S has per-queue XDP
/// counters that stay 0 for ordinary traffic; they do not describe it).
fn queue_sources<'a>(ctx: &HostCtx<'a>) -> Sources<'a> {
    let mut best: Vec<((&str, Dir), QueueSource)> = Vec::new();
    for run in ctx.queue_runs().flat_map(|(_, runs)| runs) {
        let key = (run.iface, run.dir);
        let mut at = None;
        for q in run.rows {
            if q.packets.is_none_or(|p| p == 0) {
                continue;
            }
            let i = *at.get_or_insert_with(|| {
                index_or_push(&mut best, |b| b.0 == key, || (key, q.source))
            });
            let e = &mut best[i].1;
            if source_rank(q.source) < source_rank(*e) {
                *e = q.source;
            }
        }
    }
    best.into_iter().collect()
}

/// Per (iface, dir), from its chosen source: the intervals each queue
/// carried most of a busy interval's packets, the packets per queue, and
/// the most queues seen.
fn dominated_queues<'a>(
    ctx: &HostCtx<'a>,
    t: &Thresholds,
    best: &Sources<'a>,
) -> BTreeMap<(&'a str, Dir), QueueAcc> {
    let mut acc: BTreeMap<(&str, Dir), QueueAcc> = BTreeMap::new();
    let mut groups: Vec<Group> = Vec::new();
    for (s, runs) in ctx.queue_runs() {
        for g in &mut groups {
            g.qs.clear();
        }
        let mut last = usize::MAX;
        for run in runs {
            let g = group_of(&mut groups, &mut last, (run.iface, run.dir), best);
            for q in run.rows {
                if let (Some(p), true) = (q.packets, g.chosen == Some(q.source)) {
                    g.qs.push((q.queue, p));
                }
            }
        }
        for g in groups.iter().filter(|g| !g.qs.is_empty()) {
            let qs = &g.qs;
            let total: u64 = qs.iter().map(|q| q.1).sum();
            let e = acc.entry(g.key).or_default();
            e.2 = e.2.max(qs.len());
            for (q, p) in qs {
                e.1.add(*q, *p);
            }
            if qs.len() < 2 || (total as f64) / secs(s).max(1e-9) < t.queue_min_pps {
                continue;
            }
            if let Some((q, p)) = qs.iter().max_by_key(|q| q.1) {
                if *p as f64 >= t.queue_share * total as f64 {
                    *e.0.entry(*q).or_insert(0) += 1;
                }
            }
        }
    }
    acc
}

// One finding per interface, both directions in it: a single flow
// skews rx and tx alike, and four near-identical findings tell nothing more.
struct Hit {
    dir: Dir,
    queue: u32,
    share: f64,
    intervals: usize,
    queues: usize,
    source: &'static str,
}

/// The directions whose queue dominated enough intervals, by interface.
fn imbalanced_queues<'a>(
    ctx: &HostCtx<'a>,
    t: &Thresholds,
    best: &Sources<'a>,
    acc: BTreeMap<(&'a str, Dir), QueueAcc>,
) -> BTreeMap<&'a str, Vec<Hit>> {
    let mut hits: BTreeMap<&str, Vec<Hit>> = BTreeMap::new();
    for ((iface, dir), (dominated, totals, nq)) in acc {
        let Some((&q, &n)) = dominated.iter().max_by_key(|e| e.1) else {
            continue;
        };
        if n < ctx.need(t) {
            continue;
        }
        let share = totals.get(q) as f64 / totals.sum().max(1) as f64;
        let source = best
            .get(&(iface, dir))
            .map_or("per-queue counters", |s| source_label(*s, dir));
        hits.entry(iface).or_default().push(Hit {
            dir,
            queue: q,
            share,
            intervals: n,
            queues: nq,
            source,
        });
    }
    hits
}

/// The finding for one interface, with both directions' queues in it.
fn imbalance_finding(ctx: &HostCtx, t: &Thresholds, iface: &str, hits: &[Hit]) -> Finding {
    let streams = ctx.spec.map(|s| s.connection_count()).unwrap_or(1);
    let name = |d: Dir| if d == Dir::Rx { "rx" } else { "tx" };
    let dirs: Vec<&str> = hits.iter().map(|h| name(h.dir)).collect();
    let parts: Vec<String> = hits
        .iter()
        .map(|h| {
            format!(
                "{} queue {} carries {:.0} % of the packets",
                name(h.dir),
                h.queue,
                h.share * 100.0
            )
        })
        .collect();
    let nq = hits.iter().map(|h| h.queues).max().unwrap_or(1);
    let share = hits.iter().map(|h| h.share).fold(0.0, f64::max);
    let veth = ctx
        .facts
        .and_then(|f| f.nics.iter().find(|n| n.name == iface))
        .map(|n| driver(n) == "veth")
        .unwrap_or(false);
    let mut f = Finding::new(
        "nic.queue-imbalance",
        Severity::Info,
        ctx.host,
        format!("{iface} {}", dirs.join("+")),
        format!(
            "{iface} {}; {} other queue(s) idle",
            parts.join(", "),
            nq.saturating_sub(1)
        ),
        share * prior("nic.queue-imbalance"),
    );
    for h in hits {
        let d = name(h.dir);
        f = f
            .num(
                format!("{d} queue {} share", h.queue),
                h.share * 100.0,
                "%",
                format!("{} {iface}", h.source),
            )
            .num(
                format!(
                    "{d} intervals with > {:.0} % on one queue",
                    t.queue_share * 100.0
                ),
                h.intervals as f64,
                "",
                "window",
            );
    }
    f = f
        .num("queues", nq as f64, "", format!("{} {iface}", hits[0].source))
        .num("connections", streams as f64, "", "test spec")
        .why("RSS hashes each flow to one queue and so to one core: with one flow (or a hash that ignores ports) one core does all the work however many queues exist.")
        .fix(format!(
            "wirescope run {}  # more flows spread over the queues",
            ctx.spec.map_or_else(
                || format!("-P {}", (nq as u32).max(2)),
                |s| s.with_flows((nq as u32).max(2))
            )
        ));
    if !veth && hits.iter().any(|h| h.dir == Dir::Rx) {
        f = f.fix(format!("ethtool -N {iface} rx-flow-hash tcp4 sdfn"));
    }
    f
}

/// nic.ring-small: receive drops rising while the rx ring is below its maximum.
fn ring_small(ctx: &HostCtx, nic: &NicFacts, c: &Counters) -> Option<Finding> {
    let r = nic.rings.value()?;
    let (rx, max) = (r.rx?, r.max_rx?);
    if rx >= max {
        return None;
    }
    let dev_drops: u64 = ctx
        .active
        .iter()
        .flat_map(|s| s.ifaces.iter().filter(|i| i.name == nic.name))
        .map(|i| i.delta.rx_dropped)
        .sum();
    let nic_drops: u64 = RING_DROPS.iter().filter_map(|n| c.get(*n)).sum();
    let drops = dev_drops.max(nic_drops);
    if drops == 0 {
        return None;
    }
    Some(
        Finding::rule(
            "nic.ring-small",
            Severity::Warn,
            ctx.host,
            nic.name.clone(),
            format!("{}: {drops} rx drops with the rx ring at {rx} of {max}", nic.name),
        )
        .num("rx drops", drops as f64, "", format!("/proc/net/dev + ethtool -S {}", nic.name))
        .num("rx ring", rx as f64, "descriptors", format!("ethtool -g {}", nic.name))
        .num("rx ring max", max as f64, "descriptors", format!("ethtool -g {}", nic.name))
        .why("A small ring overflows during bursts or short stalls of the core that drains it; each drop costs a TCP retransmission.")
        .fix(format!("ethtool -G {} rx {max}", nic.name)),
    )
}

/// nic.rx-out-of-buffer / nic.discards-phy: mlx5 counters rising.
fn counter_rule(ctx: &HostCtx, nic: &NicFacts, c: &Counters, name: &str) -> Option<Finding> {
    let n = *c.get(name)?;
    if n == 0 {
        return None;
    }
    let rate = n as f64 / window_secs(ctx);
    let (id, title, why, fixes): (&str, String, &str, Vec<String>) = if name == "rx_out_of_buffer" {
        (
            "nic.rx-out-of-buffer",
            format!("{}: rx_out_of_buffer rising ({rate:.0}/s): the host does not drain the rings fast enough", nic.name),
            "The NIC had a packet for a queue whose ring had no free buffer: the cores serving the queues are too slow or too few.",
            vec![
                format!("ethtool -G {} rx 8192", nic.name),
                format!("ethtool -L {} combined <NIC-local cores>", nic.name),
            ],
        )
    } else {
        (
            "nic.discards-phy",
            format!("{}: rx_discards_phy rising ({rate:.0}/s): the port buffer is congested", nic.name),
            "The NIC dropped packets at the port for lack of internal buffer (PCIe or host too slow, or no flow control).",
            vec![format!("ethtool -A {} rx on tx on", nic.name)],
        )
    };
    let mut f = Finding::rule(id, Severity::Warn, ctx.host, nic.name.clone(), title)
        .num(name, n as f64, "", format!("ethtool -S {}", nic.name))
        .num(
            format!("{name} rate"),
            rate,
            "/s",
            format!("ethtool -S {}", nic.name),
        )
        .why(why);
    f.fix.extend(fixes);
    Some(f)
}

/// nic.pause-frames: pause counters rising; tx pause means this host is congested.
fn pause(ctx: &HostCtx, nic: &NicFacts, c: &Counters) -> Option<Finding> {
    let is_pause = |n: &str| {
        n.contains("pause")
            && !["duration", "transition", "storm"]
                .iter()
                .any(|x| n.contains(x))
    };
    let sum = |dir: &str| -> u64 {
        c.iter()
            .filter(|(n, _)| n.starts_with(dir) && is_pause(n))
            .map(|e| e.1)
            .sum()
    };
    let (rx, tx) = (sum("rx"), sum("tx"));
    if rx + tx == 0 {
        return None;
    }
    let who = if tx >= rx {
        "this host is congested (it asks the link partner to stop)"
    } else {
        "the link partner (switch or peer) is congested and stops this host"
    };
    Some(
        Finding::rule(
            "nic.pause-frames",
            Severity::Warn,
            ctx.host,
            nic.name.clone(),
            format!("{}: pause frames rx {rx} / tx {tx}: {who}", nic.name),
        )
        .num("rx pause frames", rx as f64, "", format!("ethtool -S {}", nic.name))
        .num("tx pause frames", tx as f64, "", format!("ethtool -S {}", nic.name))
        .why("Pause frames stop the sender for a while: the congested side sets the pace of the whole link.")
        .fix(format!("ethtool -S {} | grep -E 'pause|discard|out_of_buffer'", nic.name))
        .fix(format!("ethtool -G {} rx 8192  # on the congested host", nic.name)),
    )
}

/// nic.gro-off as a warning when this host receives unaggregated packets.
fn unaggregated_gro(ctx: &HostCtx, nic: &NicFacts, t: &Thresholds) -> Option<Finding> {
    let mtu = nic.mtu? as f64;
    let (bytes, pkts) = ctx
        .active
        .iter()
        .flat_map(|s| s.ifaces.iter().filter(|i| i.name == nic.name))
        .fold((0u64, 0u64), |a, i| {
            (a.0 + i.delta.rx_bytes, a.1 + i.delta.rx_packets)
        });
    let rate = bytes as f64 * 8.0 / window_secs(ctx);
    if pkts == 0 || rate < t.active_bps * 100.0 {
        return None;
    }
    let avg = bytes as f64 / pkts as f64;
    if avg > mtu * t.unaggregated_factor || ctx.spec.is_some_and(|s| s.small_packets_by_design(mtu))
    {
        return None;
    }
    // A veth hands over packets as the sending stack built them: with TSO
    // off on the other host's interface, that sender cut them to the MTU
    // itself (its nic.tso-off names the cause); GRO here would only merge
    // again what the sender needlessly cut. GRO off stays worth knowing.
    if driver(nic) == "veth" {
        if let Some(sender) = tso_off_iface(ctx.other_facts) {
            return gro_off(nic, ctx.host, None, false).map(|f| {
                f.num(
                    "average received packet",
                    avg,
                    "B",
                    "/proc/net/dev rx_bytes/rx_packets",
                )
                .text(
                    "sender's tcp-segmentation-offload",
                    format!("off on {sender}: it sends MTU-sized packets"),
                    format!("ethtool -k {sender} (other host)"),
                )
            });
        }
    }
    gro_off(nic, ctx.host, Some(avg), false)
}

/// An interface under test of `facts` whose TSO is off (the sender that
/// segments in software).
fn tso_off_iface(facts: Option<&crate::probe::facts::HostFacts>) -> Option<&str> {
    facts?
        .nics
        .iter()
        .find(|n| {
            n.features
                .value()
                .is_some_and(|f| f.on("tcp-segmentation-offload") == Some(false))
        })
        .map(|n| n.name.as_str())
}

#[cfg(test)]
mod tests {
    use crate::diagnose::{diagnose, Finding, Input, Severity, TestContext, Window};
    use crate::probe::facts::{DrvInfo, Feature, Features, HostFacts, NicFacts, Support};
    use crate::probe::sample::{HostRole, Sample};
    use crate::traffic::EngineSpec;
    use serde_json::json;

    /// A veth end whose GRO is off (veth's default) and TSO as given.
    fn veth(name: &str, tso: bool) -> HostFacts {
        let f = |on| Feature {
            on,
            fixed: false,
            requested: None,
        };
        HostFacts {
            boot_id: "same-kernel".into(),
            nics: vec![NicFacts {
                name: name.into(),
                mtu: Some(1500),
                drvinfo: Support::Value(DrvInfo {
                    driver: "veth".into(),
                    version: "1.0".into(),
                    ..Default::default()
                }),
                features: Support::Value(Features(
                    [
                        ("generic-receive-offload".to_string(), f(false)),
                        ("tcp-segmentation-offload".to_string(), f(tso)),
                        ("generic-segmentation-offload".to_string(), f(true)),
                    ]
                    .into_iter()
                    .collect(),
                )),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// Four 1-s intervals of a 10 Gb/s stream on `iface`, received in
    /// packets of `pkt` bytes (the window the TSO-off fault recorded: the
    /// receiver saw 1514-byte packets).
    fn window(host: &str, iface: &str, pkt: u64) -> Vec<Sample> {
        (0..4u32)
            .map(|i| {
                serde_json::from_value(json!({
                    "host": host, "index": i, "start_s": f64::from(i), "end_s": f64::from(i) + 1.0,
                    "omitted": false,
                    "engine": {"tx_bytes": 1_250_000_000u64, "rx_bytes": 1_250_000_000u64,
                               "tx_bps": 1e10, "rx_bps": 1e10, "messages": 0, "msgs_per_s": 0.0},
                    "cpus": [], "softirqs": [], "softnet": [],
                    "ifaces": [{"name": iface, "rx_bytes": 1_250_000_000u64,
                                "rx_packets": 1_250_000_000u64 / pkt, "rx_errors": 0, "rx_dropped": 0,
                                "tx_bytes": 0, "tx_packets": 0, "tx_errors": 0, "tx_dropped": 0,
                                "rx_bps": 1e10, "tx_bps": 0.0}],
                    "nstat": {}
                }))
                .expect("sample json")
            })
            .collect()
    }

    fn gro_on_receiver(sender_tso: bool) -> Finding {
        let spec: EngineSpec = serde_json::from_value(json!({"engine":"tcp","mode":"stream",
            "streams":2,"threads":0,"len":131072,"size":16384,"resp_size":16384,"depth":1,
            "window":null,"mss":null,"congestion":null,"zerocopy":false,"skip_rx_copy":false,
            "reverse":false,"bidir":false,"cpus":[],"peer_cpus":[],"bytes":null}))
        .expect("spec json");
        let (lf, pf) = (veth("veth-a", sender_tso), veth("veth-b", true));
        let (local, peer) = (
            window("local", "veth-a", 65_000),
            window("peer", "veth-b", 1514),
        );
        let found = diagnose(&Input {
            local: Window {
                samples: &local,
                facts: Some(&lf),
            },
            peer: Window {
                samples: &peer,
                facts: Some(&pf),
            },
            test: TestContext { spec: Some(&spec) },
        });
        found
            .into_iter()
            .find(|f| f.id == "nic.gro-off" && f.host == HostRole::Peer)
            .expect("nic.gro-off on the receiver")
    }

    #[test]
    fn unaggregated_packets_on_veth_warn_unless_the_senders_tso_cut_them() {
        // The sender hands over large packets it did not cut: GRO off on
        // the receiving veth makes its stack take them one MTU at a time.
        let f = gro_on_receiver(true);
        assert_eq!(f.severity, Severity::Warn, "{f:#?}");
        // TSO off on the sender (the fault injected): the sender cut them,
        // nic.tso-off names that; GRO off here stays worth knowing (info).
        let f = gro_on_receiver(false);
        assert_eq!(f.severity, Severity::Info, "{f:#?}");
        assert!(
            f.evidence
                .iter()
                .any(|e| e.what == "sender's tcp-segmentation-offload"
                    && e.source.contains("veth-a")),
            "{f:#?}"
        );
    }
}

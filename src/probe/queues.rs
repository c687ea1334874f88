//! Per-queue NIC counters, best source first: netdev `qstats-get`, then the
//! driver's `ethtool -S` counters grouped per queue as
//! [`per_queue`](super::ethtool_names::per_queue) groups them.
//!
//! The names are classified once per name list (a
//! [`NameClasses`] per interface): while the driver's counter set stays the
//! same, each interval reads the values by index through a plan of where
//! each queue's counters are; a changed set is classified again.
//!
//! Kept as cumulative values between intervals; each interval yields deltas
//! and rates tagged with their [`QueueSource`]. A driver without qstats is
//! asked again only when facts are refreshed, not every interval.

use super::ethtool_names::{queue_plan, Class, Dir, Gathered, NameClasses, Pick};
use super::netlink::{NetdevNl, NlError, QueueStat};
use super::nic::NicStats;
use super::sample::{QueueSample, QueueSource};
use crate::units::BitsPerSec;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

#[derive(Debug, Clone, Default, PartialEq)]
struct Cumulative {
    packets: Option<u64>,
    bytes: Option<u64>,
    drops: Option<u64>,
    other: BTreeMap<String, u64>,
}

/// Netdev generic netlink `qstats-get`: per-queue counters from the kernel.
pub trait QstatsSource: Send {
    /// Per-queue statistics of the interface with this index.
    fn qstats(&mut self, ifindex: u32) -> Result<Vec<QueueStat>, NlError>;
}

impl QstatsSource for NetdevNl {
    fn qstats(&mut self, ifindex: u32) -> Result<Vec<QueueStat>, NlError> {
        NetdevNl::qstats(self, ifindex)
    }
}

/// Where each queue's counters are in one `ethtool -S` name list, shared
/// by the readings made with it.
type Plan = Arc<Vec<QueuePicks>>;

/// One queue's counters in an `ethtool -S` listing, by index: a
/// [`Gathered<Pick>`] with its other counters in a list (in name order),
/// which each interval walks for 1,024 queues on a big host.
struct QueuePicks {
    dir: Dir,
    queue: u32,
    packets: Option<Pick>,
    bytes: Option<Pick>,
    drops: Option<Pick>,
    other: Vec<(String, Pick)>,
}

impl From<Gathered<Pick>> for QueuePicks {
    fn from(g: Gathered<Pick>) -> Self {
        QueuePicks {
            dir: g.dir,
            queue: g.queue,
            packets: g.packets,
            bytes: g.bytes,
            drops: g.drops,
            other: g.other.into_iter().collect(),
        }
    }
}

/// Queue counters of one interface, between intervals.
#[derive(Default)]
pub struct QueueProbe {
    prev: HashMap<(Dir, u32), Cumulative>,
    source: Option<QueueSource>,
    qstats_unsupported: bool,
    /// The `ethtool -S` names' classes, kept while the names stay the same.
    classes: NameClasses,
    /// Where each queue's counters are in `ethtool -S` (built from `classes`).
    plan: Plan,
    /// `classes.classified()` when `plan` was built.
    plan_run: u64,
    /// The previous `ethtool -S` values and the plan they were read with.
    prev_ethtool: Option<(Plan, Vec<u64>)>,
}

/// Each queue's cumulative counters: `values` read through `plan`.
fn cumulative(plan: &[QueuePicks], values: &[u64]) -> HashMap<(Dir, u32), Cumulative> {
    let get = |p: &Option<Pick>| p.and_then(|p| p.value(values));
    plan.iter()
        .map(|g| {
            let c = Cumulative {
                packets: get(&g.packets),
                bytes: get(&g.bytes),
                drops: get(&g.drops),
                other: g
                    .other
                    .iter()
                    .filter_map(|(k, p)| Some((k.clone(), p.value(values)?)))
                    .collect(),
            };
            ((g.dir, g.queue), c)
        })
        .collect()
}

fn delta(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    Some(a?.saturating_sub(b?))
}

impl QueueProbe {
    /// Ask qstats again on the next read (drivers can gain support after a reload).
    pub fn retry_qstats(&mut self) {
        self.qstats_unsupported = false;
    }

    /// The class of each `ethtool -S` name of this interface (cached: the
    /// names are classified again only when they or the driver change).
    pub fn classes(&mut self, driver: &str, stats: &NicStats) -> &[Class] {
        self.classes.get(driver, &stats.names)
    }

    /// Read the queues of one interface. `stats` is this interval's `ethtool -S`, if any.
    pub fn read(
        &mut self,
        nl: Option<&mut (dyn QstatsSource + 'static)>,
        iface: &str,
        ifindex: Option<u32>,
        driver: &str,
        stats: Option<&NicStats>,
        secs: f64,
    ) -> Vec<QueueSample> {
        let mut cur: HashMap<(Dir, u32), Cumulative> = HashMap::new();
        let mut source = None;
        if let (Some(nl), Some(idx), false) = (nl, ifindex, self.qstats_unsupported) {
            source = self.read_qstats(nl, idx, &mut cur);
        }
        let mut ethtool = None;
        if source.is_none() {
            if let Some(stats) = stats {
                self.classes.get(driver, &stats.names);
                let run = self.classes.classified();
                if run != self.plan_run {
                    let plan = queue_plan(&stats.names, self.classes.get(driver, &stats.names));
                    self.plan = Arc::new(plan.into_iter().map(QueuePicks::from).collect());
                    self.plan_run = run;
                }
                if !self.plan.is_empty() {
                    source = Some(QueueSource::Ethtool);
                    ethtool = Some((Arc::clone(&self.plan), stats.values.clone()));
                }
            }
        }
        let changed_source = source != self.source;
        self.source = source;
        let prev = std::mem::replace(&mut self.prev, cur);
        let prev_ethtool = std::mem::replace(&mut self.prev_ethtool, ethtool);
        let Some(source) = source else {
            return Vec::new();
        };
        if changed_source {
            return Vec::new(); // first reading from this source: nothing to subtract yet
        }
        let mut out = match (&prev_ethtool, &self.prev_ethtool) {
            // The same names as last time: the values by index.
            (Some((p_plan, p_values)), Some((plan, values))) if Arc::ptr_eq(p_plan, plan) => {
                plan_deltas(plan, values, p_values, iface, secs)
            }
            // Other names (a driver change, more channels): queue by queue, name by name.
            (Some((p_plan, p_values)), Some((plan, values))) => deltas(
                &cumulative(plan, values),
                &cumulative(p_plan, p_values),
                iface,
                source,
                secs,
            ),
            _ => deltas(&self.prev, &prev, iface, source, secs),
        };
        out.sort_by_key(|q| (q.dir, q.queue));
        out
    }

    /// netdev `qstats-get` into `cur`; remembers a kernel without it.
    fn read_qstats(
        &mut self,
        nl: &mut (dyn QstatsSource + 'static),
        idx: u32,
        cur: &mut HashMap<(Dir, u32), Cumulative>,
    ) -> Option<QueueSource> {
        match nl.qstats(idx) {
            Ok(q) => {
                for s in q {
                    let dir = s.queue_type;
                    let mut other = s.other.clone();
                    for (k, v) in [
                        ("alloc-fail", s.alloc_fail),
                        ("stop", s.stop),
                        ("wake", s.wake),
                    ] {
                        if let Some(v) = v {
                            other.insert(k.to_string(), v);
                        }
                    }
                    cur.insert(
                        (dir, s.queue_id),
                        Cumulative {
                            packets: s.packets,
                            bytes: s.bytes,
                            drops: s.drops,
                            other,
                        },
                    );
                }
                return Some(QueueSource::Qstats);
            }
            Err(NlError::NotSupported { .. }) => self.qstats_unsupported = true,
            Err(_) => {}
        }
        None
    }
}

/// One queue's Sample from its deltas.
#[allow(clippy::too_many_arguments)]
pub(super) fn queue_sample(
    iface: &str,
    dir: Dir,
    queue: u32,
    packets: Option<u64>,
    bytes: Option<u64>,
    drops: Option<u64>,
    other: BTreeMap<String, u64>,
    source: QueueSource,
    secs: f64,
) -> QueueSample {
    QueueSample {
        iface: iface.into(),
        dir,
        queue,
        packets,
        bytes,
        drops,
        pps: if secs > 0.0 {
            packets.unwrap_or(0) as f64 / secs
        } else {
            0.0
        },
        bps: BitsPerSec::from_bytes(bytes.unwrap_or(0), secs),
        source,
        other,
    }
}

/// Each queue's growth from `prev` to `cur`, per second over `secs`.
fn deltas(
    cur: &HashMap<(Dir, u32), Cumulative>,
    prev: &HashMap<(Dir, u32), Cumulative>,
    iface: &str,
    source: QueueSource,
    secs: f64,
) -> Vec<QueueSample> {
    cur.iter()
        .filter_map(|(&(dir, queue), c)| {
            let p = prev.get(&(dir, queue))?;
            let other = c
                .other
                .iter()
                .filter_map(|(k, v)| {
                    let d = v.saturating_sub(*p.other.get(k)?);
                    (d > 0).then(|| (k.clone(), d))
                })
                .collect();
            Some(queue_sample(
                iface,
                dir,
                queue,
                delta(c.packets, p.packets),
                delta(c.bytes, p.bytes),
                delta(c.drops, p.drops),
                other,
                source,
                secs,
            ))
        })
        .collect()
}

/// [`deltas`] of two `ethtool -S` readings of the same names, by index.
fn plan_deltas(
    plan: &[QueuePicks],
    values: &[u64],
    prev: &[u64],
    iface: &str,
    secs: f64,
) -> Vec<QueueSample> {
    let d = |p: &Option<Pick>| {
        delta(
            p.and_then(|p| p.value(values)),
            p.and_then(|p| p.value(prev)),
        )
    };
    plan.iter()
        .map(|g| {
            let other = g
                .other
                .iter()
                .filter_map(|(k, p)| {
                    let d = p.value(values)?.saturating_sub(p.value(prev)?);
                    (d > 0).then(|| (k.clone(), d))
                })
                .collect();
            queue_sample(
                iface,
                g.dir,
                g.queue,
                d(&g.packets),
                d(&g.bytes),
                d(&g.drops),
                other,
                QueueSource::Ethtool,
                secs,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reading of these counters with names of its own.
    fn st(v: &[(String, u64)]) -> NicStats {
        NicStats::from(v.to_vec())
    }

    /// What the probe gave before it cached the names: both readings grouped
    /// by `per_queue`, the deltas queue by queue and name by name.
    fn reference(driver: &str, a: &[(String, u64)], b: &[(String, u64)]) -> Vec<QueueSample> {
        let m = |s: &[(String, u64)]| -> HashMap<(Dir, u32), Cumulative> {
            super::super::ethtool_names::per_queue(driver, s)
                .0
                .into_iter()
                .map(|q| {
                    let c = Cumulative {
                        packets: q.packets,
                        bytes: q.bytes,
                        drops: q.drops,
                        other: q.other,
                    };
                    ((q.dir, q.queue), c)
                })
                .collect()
        };
        let mut v = deltas(&m(b), &m(a), "eth0", QueueSource::Ethtool, 2.0);
        v.sort_by_key(|q| (q.dir, q.queue));
        v
    }

    /// Every counter grows by its index (so each delta is different), some not at all.
    fn grown(s: &[(String, u64)]) -> Vec<(String, u64)> {
        s.iter()
            .enumerate()
            .map(|(i, (n, v))| (n.clone(), v + (i as u64 % 5) * (i as u64)))
            .collect()
    }

    #[test]
    fn cached_names_give_the_deltas_of_a_fresh_split() {
        for (file, driver) in [
            ("mlx5_core", "mlx5_core"),
            ("bnxt_en", "bnxt_en"),
            ("mlx5_core", "ice"),
        ] {
            let path = format!(
                "{}/tests/fixtures/ethtool/S/{file}",
                env!("CARGO_MANIFEST_DIR")
            );
            let text = std::fs::read_to_string(&path).unwrap();
            let a = super::super::ethtool_text::parse_stats(&text).unwrap();
            let mut p = QueueProbe::default();
            assert!(p
                .read(None, "eth0", None, driver, Some(&st(&a)), 2.0)
                .is_empty());
            let b = grown(&a);
            let got = p.read(None, "eth0", None, driver, Some(&st(&b)), 2.0);
            assert!(!got.is_empty(), "{file}");
            assert_eq!(got, reference(driver, &a, &b), "{file} as {driver}");
            // The driver's set changes (a channel more, a counter renamed):
            // the names are classified again, the deltas stay right.
            let mut c = grown(&b);
            c.push(("rx99_packets".into(), 5));
            c.push(("[99]: rx_ucast_packets".into(), 5));
            c[0].0 = "tx98_bytes".into();
            assert_eq!(
                p.read(None, "eth0", None, driver, Some(&st(&c)), 2.0),
                reference(driver, &b, &c),
                "{file} as {driver}, renamed"
            );
            let d = grown(&c);
            assert_eq!(
                p.read(None, "eth0", None, driver, Some(&st(&d)), 2.0),
                reference(driver, &c, &d),
                "{file} as {driver}, after the change"
            );
            // A reading sharing the previous one's names (as the sources
            // give them while the names stay the same): the same deltas.
            let shared = st(&d);
            let e = grown(&d);
            let e_shared = NicStats {
                names: Arc::clone(&shared.names),
                values: st(&e).values,
            };
            p.read(None, "eth0", None, driver, Some(&shared), 2.0);
            assert_eq!(
                p.read(None, "eth0", None, driver, Some(&e_shared), 2.0),
                reference(driver, &d, &e),
                "{file} as {driver}, shared names"
            );
        }
    }

    #[test]
    fn ethtool_fallback_gives_deltas_with_source() {
        let text = include_str!("../../tests/fixtures/ethtool/S/mlx5_core");
        let a = super::super::ethtool_text::parse_stats(text).unwrap();
        let mut b = a.clone();
        for (n, v) in b.iter_mut() {
            if n == "rx3_packets" {
                *v += 1000;
            }
            if n == "rx3_bytes" {
                *v += 1_500_000;
            }
        }
        let mut p = QueueProbe::default();
        assert!(p
            .read(None, "eth0", None, "mlx5_core", Some(&st(&a)), 1.0)
            .is_empty());
        let q = p.read(None, "eth0", None, "mlx5_core", Some(&st(&b)), 1.0);
        assert_eq!(q.len(), 32, "16 rx + 16 tx queues");
        let rx3 = q.iter().find(|x| x.dir == Dir::Rx && x.queue == 3).unwrap();
        assert_eq!(rx3.packets, Some(1000));
        assert_eq!(rx3.source, QueueSource::Ethtool);
        assert_eq!(rx3.bps, BitsPerSec(12e6));
        assert!(q
            .iter()
            .filter(|x| x.queue != 3)
            .all(|x| x.packets == Some(0)));
    }
}

//! Per-queue NIC counters, best source first: netdev `qstats-get`, then the
//! driver's `ethtool -S` counters classified by [`per_queue`].
//!
//! Kept as cumulative values between intervals; each interval yields deltas
//! and rates tagged with their [`QueueSource`]. A driver without qstats is
//! asked again only when facts are refreshed, not every interval.

use super::ethtool_names::{per_queue, Dir};
use super::netlink::{NetdevNl, NlError, QueueStat, QueueType};
use super::sample::{QueueSample, QueueSource};
use crate::units::BitsPerSec;
use std::collections::{BTreeMap, HashMap};

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

/// Queue counters of one interface, between intervals.
#[derive(Default)]
pub struct QueueProbe {
    prev: HashMap<(Dir, u32), Cumulative>,
    source: Option<QueueSource>,
    qstats_unsupported: bool,
}

fn delta(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    Some(a?.saturating_sub(b?))
}

impl QueueProbe {
    /// Ask qstats again on the next read (drivers can gain support after a reload).
    pub fn retry_qstats(&mut self) {
        self.qstats_unsupported = false;
    }

    /// Read the queues of one interface. `stats` is this interval's `ethtool -S`, if any.
    pub fn read(
        &mut self,
        nl: Option<&mut (dyn QstatsSource + 'static)>,
        iface: &str,
        ifindex: Option<u32>,
        driver: &str,
        stats: Option<&[(String, u64)]>,
        secs: f64,
    ) -> Vec<QueueSample> {
        let mut cur: HashMap<(Dir, u32), Cumulative> = HashMap::new();
        let mut source = None;
        if let (Some(nl), Some(idx), false) = (nl, ifindex, self.qstats_unsupported) {
            source = self.read_qstats(nl, idx, &mut cur);
        }
        if source.is_none() {
            if let Some(stats) = stats {
                source = read_ethtool(driver, stats, &mut cur);
            }
        }
        let changed_source = source != self.source;
        self.source = source;
        let prev = std::mem::replace(&mut self.prev, cur);
        let Some(source) = source else {
            return Vec::new();
        };
        if changed_source {
            return Vec::new(); // first reading from this source: nothing to subtract yet
        }
        let mut out = self.deltas(&prev, iface, source, secs);
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
        let mut source = None;
        match nl.qstats(idx) {
            Ok(q) => {
                source = Some(QueueSource::Qstats);
                for s in q {
                    let dir = if s.queue_type == QueueType::Rx {
                        Dir::Rx
                    } else {
                        Dir::Tx
                    };
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
            }
            Err(NlError::NotSupported { .. }) => self.qstats_unsupported = true,
            Err(_) => {}
        }
        source
    }

    /// Each queue's growth from `prev` to the reading just kept, per second over `secs`.
    fn deltas(
        &self,
        prev: &HashMap<(Dir, u32), Cumulative>,
        iface: &str,
        source: QueueSource,
        secs: f64,
    ) -> Vec<QueueSample> {
        self.prev
            .iter()
            .filter_map(|(&(dir, queue), c)| {
                let p = prev.get(&(dir, queue))?;
                let packets = delta(c.packets, p.packets);
                let bytes = delta(c.bytes, p.bytes);
                let other = c
                    .other
                    .iter()
                    .filter_map(|(k, v)| {
                        let d = v.saturating_sub(*p.other.get(k)?);
                        (d > 0).then(|| (k.clone(), d))
                    })
                    .collect();
                Some(QueueSample {
                    iface: iface.to_string(),
                    dir,
                    queue,
                    packets,
                    bytes,
                    drops: delta(c.drops, p.drops),
                    pps: if secs > 0.0 {
                        packets.unwrap_or(0) as f64 / secs
                    } else {
                        0.0
                    },
                    bps: BitsPerSec::from_bytes(bytes.unwrap_or(0), secs),
                    source,
                    other,
                })
            })
            .collect()
    }
}

/// The driver's per-queue `ethtool -S` counters into `cur`.
fn read_ethtool(
    driver: &str,
    stats: &[(String, u64)],
    cur: &mut HashMap<(Dir, u32), Cumulative>,
) -> Option<QueueSource> {
    let (queues, _) = per_queue(driver, stats);
    let source = (!queues.is_empty()).then_some(QueueSource::Ethtool);
    for q in queues {
        cur.insert(
            (q.dir, q.queue),
            Cumulative {
                packets: q.packets,
                bytes: q.bytes,
                drops: q.drops,
                other: q.other,
            },
        );
    }
    source
}

#[cfg(test)]
mod tests {
    use super::*;

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
            .read(None, "eth0", None, "mlx5_core", Some(&a), 1.0)
            .is_empty());
        let q = p.read(None, "eth0", None, "mlx5_core", Some(&b), 1.0);
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

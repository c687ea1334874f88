//! Driver-aware classification of `ethtool -S` counter names into per-queue
//! counters.
//!
//! Every driver spells its per-queue counters differently (`rx3_packets`,
//! `rx_queue_3_packets`, `rx-3.rx_packets`, `queue_3_rx_cnt`,
//! `[3]: rx_ucast_packets`, ...). This module recognises those shapes with
//! small hand-written matchers, maps the field to packets / bytes / drops /
//! errors with a few per-driver extras, and groups the values per queue.
//!
//! It owns names only: it never reads counters and never drops one. A name no
//! pattern knows is [`Class::Global`] and comes back unchanged among the
//! globals of [`per_queue`], so an unknown driver or a renamed counter costs
//! detail, never data.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Direction of a queue.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Dir {
    /// Receive queue.
    Rx,
    /// Transmit queue.
    Tx,
}

/// What a per-queue counter counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    /// Packets through the queue.
    Packets,
    /// Bytes through the queue.
    Bytes,
    /// Packets dropped on the queue.
    Drops,
    /// Errors on the queue.
    Errors,
    /// Anything else, by the driver's field name with the queue part removed
    /// (e.g. `csum_complete` for mlx5 `rx0_csum_complete`).
    Other(String),
}

/// Where one `ethtool -S` counter belongs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// A counter of one queue (or one channel, filed under its rx queue).
    Queue {
        /// Direction.
        dir: Dir,
        /// Queue (ring, channel) index as the driver numbers it.
        queue: u32,
        /// What it counts.
        field: Field,
    },
    /// A device-wide counter, or a name no pattern recognises.
    Global,
}

/// The counters of one queue, gathered from `ethtool -S`.
pub type QueueCounters = Gathered<u64>;

/// Drivers whose names need more than the generic rules.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Driver {
    Mlx5,
    Veth,
    Ena,
    Bnxt,
    Generic,
}

fn driver_kind(driver: &str) -> Driver {
    match driver {
        "mlx5_core" | "mlx5e" => Driver::Mlx5,
        "veth" => Driver::Veth,
        "ena" => Driver::Ena,
        "bnxt_en" => Driver::Bnxt,
        _ => Driver::Generic,
    }
}

/// What the index in a name numbers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// One queue of this direction.
    Queue(Dir),
    /// A whole channel (mlx5 `ch3_events`).
    Channel,
    /// A whole ring without a direction in the field (bnxt `[3]: tpa_packets`).
    Ring,
}

/// A name split into its queue part and its field part.
struct Split<'a> {
    scope: Scope,
    queue: u32,
    field: &'a str,
}

impl<'a> Split<'a> {
    fn queue(dir: Dir, queue: u32, field: &'a str) -> Self {
        Split {
            scope: Scope::Queue(dir),
            queue,
            field,
        }
    }
}

fn strip_dir(s: &str) -> Option<(Dir, &str)> {
    if let Some(rest) = s.strip_prefix("rx") {
        Some((Dir::Rx, rest))
    } else {
        s.strip_prefix("tx").map(|rest| (Dir::Tx, rest))
    }
}

/// Leading decimal digits as a queue index, and the rest.
fn strip_index(s: &str) -> Option<(u32, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let index = s.get(..end).filter(|d| !d.is_empty())?.parse().ok()?;
    Some((index, &s[end..]))
}

/// The field after `sep`, not empty.
fn field_after<'a>(s: &'a str, sep: &str) -> Option<&'a str> {
    s.strip_prefix(sep).filter(|f| !f.is_empty())
}

/// `rx3_packets` (mlx5, mlx4, virtio_net since 6.x).
fn dir_index(name: &str) -> Option<Split<'_>> {
    let (dir, rest) = strip_dir(name)?;
    let (queue, rest) = strip_index(rest)?;
    let field = field_after(rest, "_")?;
    Some(Split::queue(dir, queue, field))
}

/// `rx_queue_3_packets` (ice, virtio_net, veth, ixgbe, igb) and
/// `rx-queue-3.packets`.
fn dir_queue_index(name: &str) -> Option<Split<'_>> {
    let (dir, rest) = strip_dir(name)?;
    let (queue, field) = if let Some(rest) = rest.strip_prefix("_queue_") {
        let (queue, rest) = strip_index(rest)?;
        (queue, field_after(rest, "_")?)
    } else {
        let (queue, rest) = strip_index(rest.strip_prefix("-queue-")?)?;
        (queue, field_after(rest, ".")?)
    };
    Some(Split::queue(dir, queue, field))
}

/// `rx-3.rx_packets` (i40e, sfc) and `rx-3.packets` (i40e 2.x, iavf); the
/// repeated direction in the field is dropped.
fn dir_dash_index(name: &str) -> Option<Split<'_>> {
    let (dir, rest) = strip_dir(name)?;
    let (queue, rest) = strip_index(rest.strip_prefix('-')?)?;
    let field = field_after(rest, ".")?;
    let prefix = if dir == Dir::Rx { "rx_" } else { "tx_" };
    let field = field
        .strip_prefix(prefix)
        .filter(|f| !f.is_empty())
        .unwrap_or(field);
    Some(Split::queue(dir, queue, field))
}

/// `queue_3_rx_cnt` (ena).
fn queue_index_dir(name: &str) -> Option<Split<'_>> {
    let (queue, rest) = strip_index(name.strip_prefix("queue_")?)?;
    let (dir, rest) = strip_dir(rest.strip_prefix('_')?)?;
    let field = field_after(rest, "_")?;
    Some(Split::queue(dir, queue, field))
}

/// `[3]: rx_ucast_packets` (bnxt); `[3]: tpa_packets` has no direction.
fn bracket_index(name: &str) -> Option<Split<'_>> {
    let (queue, rest) = strip_index(name.strip_prefix('[')?)?;
    let rest = field_after(rest, "]: ")?;
    let with_dir = strip_dir(rest)
        .and_then(|(dir, f)| field_after(f, "_").map(|field| Split::queue(dir, queue, field)));
    Some(with_dir.unwrap_or(Split {
        scope: Scope::Ring,
        queue,
        field: rest,
    }))
}

/// `ch3_events` (mlx5 channel counters).
fn channel_index(name: &str) -> Option<Split<'_>> {
    let (queue, rest) = strip_index(name.strip_prefix("ch")?)?;
    let field = field_after(rest, "_")?;
    Some(Split {
        scope: Scope::Channel,
        queue,
        field,
    })
}

fn split(name: &str) -> Option<Split<'_>> {
    dir_queue_index(name)
        .or_else(|| dir_index(name))
        .or_else(|| dir_dash_index(name))
        .or_else(|| queue_index_dir(name))
        .or_else(|| bracket_index(name))
        .or_else(|| channel_index(name))
}

/// The field meaning, with the per-driver extras.
fn field_of(driver: Driver, dir: Dir, field: &str) -> Field {
    match (driver, dir, field) {
        (Driver::Mlx5, Dir::Rx, "xdp_drop") => Field::Drops,
        (Driver::Veth, Dir::Rx, "xdp_packets") => Field::Packets,
        (Driver::Veth, Dir::Rx, "xdp_bytes") => Field::Bytes,
        (Driver::Ena, _, "cnt") => Field::Packets,
        (_, _, "packets" | "pkts") => Field::Packets,
        (_, _, "bytes") => Field::Bytes,
        (_, _, "drops" | "dropped" | "discards") => Field::Drops,
        (_, _, "errors") => Field::Errors,
        (_, _, other) => Field::Other(other.to_owned()),
    }
}

/// Classify one `ethtool -S` name of a device driven by `driver` (the
/// `driver:` of `ethtool -i`). Unknown drivers get the generic shapes:
/// `rx3_packets`, `rx_queue_3_packets`, `rx-queue-3.packets`,
/// `rx-3.packets`, `queue_3_rx_packets`, `[3]: rx_packets`.
pub fn classify(driver: &str, name: &str) -> Class {
    let driver = driver_kind(driver);
    let Some(split) = split(name) else {
        return Class::Global;
    };
    let (dir, field) = match (split.scope, driver) {
        (Scope::Queue(dir), _) => (dir, field_of(driver, dir, split.field)),
        // Counters of a whole channel (mlx5) or ring (bnxt) are filed under
        // the rx queue of the same index: that is the NAPI context they count.
        (Scope::Channel, Driver::Mlx5) | (Scope::Ring, Driver::Bnxt) => {
            (Dir::Rx, Field::Other(split.field.to_owned()))
        }
        (Scope::Channel | Scope::Ring, _) => return Class::Global,
    };
    Class::Queue {
        dir,
        queue: split.queue,
        field,
    }
}

/// What a queue's field holds while grouping: a counter's value, or where
/// the value is (a [`Pick`]), so one grouping serves both.
trait Slot: Clone {
    /// The sum of the three cast counters (bnxt `{ucast,mcast,bcast}_*`).
    fn sum3(a: &Self, b: &Self, c: &Self) -> Self;
}

impl Slot for u64 {
    fn sum3(a: &Self, b: &Self, c: &Self) -> Self {
        [a, b, c].iter().fold(0u64, |s, v| s.saturating_add(**v))
    }
}

/// Where a queue field's value is in an `ethtool -S` listing: one counter
/// by its index, or the sum of three (bnxt casts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// The counter at this index.
    One(usize),
    /// The sum of the counters at these indices.
    Sum([usize; 3]),
}

impl Slot for Pick {
    fn sum3(a: &Self, b: &Self, c: &Self) -> Self {
        let one = |p: &Pick| match p {
            Pick::One(i) => *i,
            // Casts are single counters: a sum is never summed again.
            Pick::Sum(ix) => ix[0],
        };
        Pick::Sum([one(a), one(b), one(c)])
    }
}

impl Pick {
    /// The value in `values` (the listing's values, in order).
    pub fn value(&self, values: &[u64]) -> Option<u64> {
        match self {
            Pick::One(i) => values.get(*i).copied(),
            Pick::Sum(ix) => ix
                .iter()
                .try_fold(0u64, |s, i| Some(s.saturating_add(*values.get(*i)?))),
        }
    }
}

/// One queue's fields, grouped: their values ([`QueueCounters`]) or where
/// the values are (a [`Pick`] each).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Gathered<T> {
    /// Direction.
    pub dir: Dir,
    /// Queue index.
    pub queue: u32,
    /// Packets, when the driver reports them per queue. For bnxt this is the
    /// sum of the unicast, multicast and broadcast counters (when all three
    /// are present).
    pub packets: Option<T>,
    /// Bytes (for bnxt the sum of unicast, multicast and broadcast bytes).
    pub bytes: Option<T>,
    /// Drops on this queue.
    pub drops: Option<T>,
    /// Every other counter of this queue (errors included), by its full
    /// `ethtool -S` name, so each number keeps its source.
    pub other: BTreeMap<String, T>,
}

/// Per-queue accumulator: the fields, plus the bnxt cast counters.
struct Acc<T> {
    counters: Gathered<T>,
    casts: BTreeMap<String, T>,
}

const CASTS: [&str; 3] = ["ucast", "mcast", "bcast"];

impl<T: Slot> Acc<T> {
    fn new(dir: Dir, queue: u32) -> Self {
        Acc {
            counters: Gathered {
                dir,
                queue,
                packets: None,
                bytes: None,
                drops: None,
                other: BTreeMap::new(),
            },
            casts: BTreeMap::new(),
        }
    }

    fn add(&mut self, name: &str, field: &Field, value: T) {
        let slot = match field {
            Field::Packets => &mut self.counters.packets,
            Field::Bytes => &mut self.counters.bytes,
            Field::Drops => &mut self.counters.drops,
            Field::Errors => return self.keep(name, value),
            Field::Other(f) => {
                if CASTS.iter().any(|c| f.starts_with(c)) {
                    self.casts.insert(f.clone(), value.clone());
                }
                return self.keep(name, value);
            }
        };
        // The first counter with a meaning wins; a second one of the same
        // meaning on the same queue is kept, not summed twice.
        match slot {
            None => *slot = Some(value),
            Some(_) => self.keep(name, value),
        }
    }

    fn keep(&mut self, name: &str, value: T) {
        self.counters.other.insert(name.to_owned(), value);
    }

    /// Sum of `{ucast,mcast,bcast}_<what>` when all three are present.
    fn cast_sum(&self, what: &str) -> Option<T> {
        let get = |c: &str| self.casts.get(&format!("{c}_{what}"));
        Some(T::sum3(get(CASTS[0])?, get(CASTS[1])?, get(CASTS[2])?))
    }

    fn finish(mut self) -> Gathered<T> {
        if self.counters.packets.is_none() {
            self.counters.packets = self.cast_sum("packets");
        }
        if self.counters.bytes.is_none() {
            self.counters.bytes = self.cast_sum("bytes");
        }
        self.counters
    }
}

/// Group the classified names per queue, each with `value(i)` of the i-th;
/// the indices of the rest (the globals) in order.
fn gather<'n, T: Slot>(
    names: impl Iterator<Item = &'n str>,
    classes: &[Class],
    value: impl Fn(usize) -> T,
) -> (Vec<Gathered<T>>, Vec<usize>) {
    let mut queues: BTreeMap<(Dir, u32), Acc<T>> = BTreeMap::new();
    let mut globals = Vec::new();
    for (i, name) in names.enumerate() {
        match classes.get(i) {
            Some(Class::Queue { dir, queue, field }) => queues
                .entry((*dir, *queue))
                .or_insert_with(|| Acc::new(*dir, *queue))
                .add(name, field, value(i)),
            Some(Class::Global) | None => globals.push(i),
        }
    }
    (queues.into_values().map(Acc::finish).collect(), globals)
}

/// Where each queue's counters are in a listing of these names, classified
/// as `classes`: the grouping of [`per_queue_classified`] with indices for
/// values. Computed once per name list; each interval then reads the values
/// by index ([`Pick::value`]) and gets what [`per_queue_classified`] gives.
pub fn queue_plan(names: &[String], classes: &[Class]) -> Vec<Gathered<Pick>> {
    gather(names.iter().map(String::as_str), classes, Pick::One).0
}

/// Group `ethtool -S` output (in printed order) per queue.
///
/// Returns the queues sorted by direction (rx first) and index, and every
/// counter that is not per queue — device-wide ones and names no pattern
/// recognises — in the order printed. No counter is dropped: each lands in a
/// queue field, a queue's `other`, or the globals.
pub fn per_queue(
    driver: &str,
    stats: &[(String, u64)],
) -> (Vec<QueueCounters>, Vec<(String, u64)>) {
    let classes: Vec<Class> = stats.iter().map(|(n, _)| classify(driver, n)).collect();
    per_queue_classified(stats, &classes)
}

/// [`per_queue`] with the names already classified: `classes[i]` is the
/// class of `stats[i]` (from [`NameClasses`]). A name without a class (a
/// shorter `classes`) is a global.
pub fn per_queue_classified(
    stats: &[(String, u64)],
    classes: &[Class],
) -> (Vec<QueueCounters>, Vec<(String, u64)>) {
    let (queues, globals) = gather(stats.iter().map(|(n, _)| n.as_str()), classes, |i| {
        stats[i].1
    });
    let globals = globals.into_iter().map(|i| stats[i].clone()).collect();
    (queues, globals)
}

/// The classes of one NIC's `ethtool -S` names, kept between intervals:
/// names change only when the driver's counter set does (a reload, a
/// channel count change), so they are classified again only when the
/// driver or the list of names differs from the one classified last.
#[derive(Debug, Default, Clone)]
pub struct NameClasses {
    driver: String,
    names: Arc<[String]>,
    classes: Vec<Class>,
    runs: u64,
}

impl NameClasses {
    /// The class of each of `names` (in order) for `driver`, classifying
    /// them again when the driver or the name list changed. A list shared
    /// with the one classified last (a [`NicStats`] reading of the same
    /// names) is known the same without comparing the names.
    ///
    /// [`NicStats`]: super::nic::NicStats
    pub fn get(&mut self, driver: &str, names: &Arc<[String]>) -> &[Class] {
        let same =
            self.driver == driver && (Arc::ptr_eq(&self.names, names) || self.names == *names);
        if !same {
            driver.clone_into(&mut self.driver);
            self.classes = names.iter().map(|n| classify(driver, n)).collect();
            self.runs += 1;
        }
        if !Arc::ptr_eq(&self.names, names) {
            self.names = Arc::clone(names);
        }
        &self.classes
    }

    /// How many times the names were classified (once per distinct name list and driver).
    pub fn classified(&self) -> u64 {
        self.runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::ethtool_text::parse_stats;
    use std::path::Path;

    fn stats(name: &str) -> Vec<(String, u64)> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/ethtool/S")
            .join(name);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        parse_stats(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn queue(queues: &[QueueCounters], dir: Dir, index: u32) -> &QueueCounters {
        queues
            .iter()
            .find(|q| q.dir == dir && q.queue == index)
            .unwrap_or_else(|| panic!("no {dir:?} queue {index}"))
    }

    fn count(queues: &[QueueCounters], dir: Dir) -> usize {
        queues.iter().filter(|q| q.dir == dir).count()
    }

    /// Every counter lands somewhere: a queue field, a queue's `other`, or the globals.
    fn assert_nothing_dropped(driver: &str, all: &[(String, u64)]) {
        let (queues, globals) = per_queue(driver, all);
        let in_queues: usize = queues
            .iter()
            .map(|q| q.other.len() + [q.packets, q.bytes, q.drops].iter().flatten().count())
            .sum();
        // bnxt packets/bytes are sums of counters that also stay in `other`.
        let derived: usize = queues
            .iter()
            .map(|q| {
                let sums = |what: &str| {
                    ["ucast", "mcast", "bcast"]
                        .iter()
                        .all(|c| q.other.keys().any(|k| k.ends_with(&format!("_{c}_{what}"))))
                };
                usize::from(sums("packets")) + usize::from(sums("bytes"))
            })
            .sum();
        assert_eq!(in_queues - derived + globals.len(), all.len(), "{driver}");
    }

    #[test]
    fn mlx5_queues() {
        let all = stats("mlx5_core");
        let (queues, globals) = per_queue("mlx5_core", &all);
        assert_eq!((count(&queues, Dir::Rx), count(&queues, Dir::Tx)), (16, 16));
        let rx0 = queue(&queues, Dir::Rx, 0);
        assert_eq!(
            (rx0.packets, rx0.bytes, rx0.drops),
            (Some(53_947_906), Some(146_815_482_364), Some(0))
        );
        assert_eq!(rx0.other.get("rx0_csum_complete"), Some(&53_898_451));
        let tx15 = queue(&queues, Dir::Tx, 15);
        assert_eq!(
            (tx15.packets, tx15.bytes, tx15.drops),
            (Some(16_237_939), Some(27_233_534_311), Some(0))
        );
        assert_eq!(globals.len(), 751 - 608);
        for global in [
            "rx_out_of_buffer",
            "rx_discards_phy",
            "rx_pause_ctrl_phy",
            "tx_pause_ctrl_phy",
            "rx_prio0_bytes",
        ] {
            assert!(globals.iter().any(|(k, _)| k == global), "{global}");
        }
        assert_nothing_dropped("mlx5_core", &all);
    }

    #[test]
    fn mlx5_channel_and_drop_names() {
        let ch = classify("mlx5_core", "ch3_events");
        assert_eq!(
            ch,
            Class::Queue {
                dir: Dir::Rx,
                queue: 3,
                field: Field::Other("events".into())
            }
        );
        let drop = classify("mlx5_core", "rx7_xdp_drop");
        assert_eq!(
            drop,
            Class::Queue {
                dir: Dir::Rx,
                queue: 7,
                field: Field::Drops
            }
        );
        assert_eq!(classify("mlx5_core", "rx_xdp_drop"), Class::Global);
        // Channel counters mean nothing for other drivers.
        assert_eq!(classify("ice", "ch3_events"), Class::Global);
    }

    #[test]
    fn ice_queues() {
        let all = stats("ice");
        let (queues, globals) = per_queue("ice", &all);
        assert_eq!(
            (count(&queues, Dir::Rx), count(&queues, Dir::Tx)),
            (128, 128)
        );
        let tx9 = queue(&queues, Dir::Tx, 9);
        assert_eq!(
            (tx9.packets, tx9.bytes, tx9.drops),
            (Some(2_032_857), Some(3_077_738_770), None)
        );
        assert_eq!(queue(&queues, Dir::Rx, 2).packets, Some(452_533));
        assert!(globals.iter().any(|(k, _)| k == "rx_priority_0_xon.nic"));
        assert_nothing_dropped("ice", &all);
    }

    #[test]
    fn i40e_both_namings_and_iavf() {
        let old = stats("i40e");
        let (queues, globals) = per_queue("i40e", &old);
        assert_eq!((count(&queues, Dir::Rx), count(&queues, Dir::Tx)), (12, 12));
        let rx0 = queue(&queues, Dir::Rx, 0);
        assert_eq!(
            (rx0.packets, rx0.bytes),
            (Some(64_128_515_158), Some(4_974_745_040_637))
        );
        assert_eq!(queue(&queues, Dir::Tx, 11).bytes, Some(4_319_338_748_501));
        assert!(globals.iter().any(|(k, _)| k == "veb.tc_0_rx_packets"));
        assert!(globals.iter().any(|(k, _)| k == "port.rx_bytes"));
        assert_nothing_dropped("i40e", &old);

        let new = stats("i40e-v2.3.2k");
        let (queues, _) = per_queue("i40e", &new);
        assert_eq!((count(&queues, Dir::Rx), count(&queues, Dir::Tx)), (64, 64));
        assert_eq!(queue(&queues, Dir::Tx, 0).packets, Some(36_459_363_750));
        assert_nothing_dropped("i40e", &new);

        let iavf = stats("iavf");
        let (queues, globals) = per_queue("iavf", &iavf);
        assert_eq!((count(&queues, Dir::Rx), count(&queues, Dir::Tx)), (16, 16));
        assert_eq!(queue(&queues, Dir::Rx, 8).packets, Some(69_038));
        assert_eq!(queue(&queues, Dir::Tx, 14).bytes, Some(6_765_832));
        assert_eq!(globals.len(), 12);
    }

    #[test]
    fn bnxt_rings_sum_casts() {
        let all = stats("bnxt_en");
        let (queues, globals) = per_queue("bnxt_en", &all);
        assert_eq!((count(&queues, Dir::Rx), count(&queues, Dir::Tx)), (12, 12));
        let rx0 = queue(&queues, Dir::Rx, 0);
        assert_eq!(rx0.packets, Some(10_198_513_532 + 3_854_315 + 124_570_464));
        assert_eq!(
            rx0.bytes,
            Some(8_926_453_110_639 + 1_184_763_754 + 7_658_835_398)
        );
        assert_eq!(rx0.drops, Some(11_763_190));
        assert_eq!(
            rx0.other.get("[0]: rx_ucast_packets"),
            Some(&10_198_513_532)
        );
        assert_eq!(rx0.other.get("[0]: rx_errors"), Some(&0));
        assert_eq!(rx0.other.get("[0]: tpa_packets"), Some(&0));
        assert_eq!(rx0.other.get("[0]: missed_irqs"), Some(&0));
        let tx0 = queue(&queues, Dir::Tx, 0);
        assert_eq!(
            (tx0.packets, tx0.bytes),
            (Some(2_811_906_835), Some(1_462_856_966_524))
        );
        assert_eq!(queue(&queues, Dir::Rx, 11).drops, Some(9_244_693));
        assert_eq!(globals.len(), all.len() - 288);
        assert_nothing_dropped("bnxt_en", &all);
    }

    #[test]
    fn bnxt_packets_need_all_three_casts() {
        let partial = vec![
            ("[0]: rx_ucast_packets".to_owned(), 5),
            ("[0]: rx_mcast_packets".to_owned(), 1),
        ];
        let (queues, _) = per_queue("bnxt_en", &partial);
        assert_eq!(queues[0].packets, None);
        assert_eq!(queues[0].other.len(), 2);
    }

    #[test]
    fn virtio_old_and_new_names() {
        let old = stats("virtio_net");
        let (queues, globals) = per_queue("virtio_net", &old);
        assert_eq!((count(&queues, Dir::Rx), count(&queues, Dir::Tx)), (2, 2));
        assert_eq!(queue(&queues, Dir::Rx, 1).bytes, Some(4_819_127_125));
        assert_eq!(queue(&queues, Dir::Tx, 0).packets, Some(3_558_968));
        assert!(globals.is_empty());

        let new = stats("virtio_net-6.18");
        let (queues, globals) = per_queue("virtio_net", &new);
        assert_eq!((count(&queues, Dir::Rx), count(&queues, Dir::Tx)), (1, 1));
        let rx0 = queue(&queues, Dir::Rx, 0);
        assert_eq!((rx0.packets, rx0.drops), (None, Some(0)));
        assert_eq!(rx0.other.get("rx0_kicks"), Some(&453));
        assert_eq!(
            queue(&queues, Dir::Tx, 0).other.get("tx0_kicks"),
            Some(&1920)
        );
        assert!(globals.iter().any(|(k, _)| k == "rx_drops"));
        assert_nothing_dropped("virtio_net", &new);
    }

    #[test]
    fn veth_xdp_counters() {
        let all = stats("veth");
        let (queues, globals) = per_queue("veth", &all);
        assert_eq!((count(&queues, Dir::Rx), count(&queues, Dir::Tx)), (4, 4));
        let rx3 = queue(&queues, Dir::Rx, 3);
        assert_eq!(
            (rx3.packets, rx3.bytes, rx3.drops),
            (Some(0), Some(0), Some(0))
        );
        assert!(rx3.other.contains_key("rx_queue_3_xdp_drops"));
        assert!(queue(&queues, Dir::Tx, 2)
            .other
            .contains_key("tx_queue_2_xdp_xmit"));
        assert_eq!(globals, vec![("peer_ifindex".to_owned(), 2)]);
        assert_nothing_dropped("veth", &all);
    }

    #[test]
    fn ena_queues() {
        let all = stats("ena");
        let (queues, globals) = per_queue("ena", &all);
        assert_eq!((count(&queues, Dir::Rx), count(&queues, Dir::Tx)), (4, 4));
        let rx3 = queue(&queues, Dir::Rx, 3);
        assert_eq!(
            (rx3.packets, rx3.bytes),
            (Some(9_010_589), Some(66_809_815_952))
        );
        assert_eq!(queue(&queues, Dir::Tx, 3).packets, Some(4_647_398));
        assert!(globals.iter().any(|(k, _)| k == "ena_admin_q_aborted_cmd"));
        assert_nothing_dropped("ena", &all);
    }

    #[test]
    fn sfc_queues_and_xdp_cpus_stay_global() {
        let all = stats("sfc");
        let (queues, globals) = per_queue("sfc", &all);
        assert_eq!((count(&queues, Dir::Rx), count(&queues, Dir::Tx)), (12, 18));
        assert_eq!(queue(&queues, Dir::Rx, 0).packets, Some(232));
        assert_eq!(queue(&queues, Dir::Tx, 11).packets, Some(439));
        assert_eq!(
            globals
                .iter()
                .filter(|(k, _)| k.starts_with("tx-xdp-cpu-"))
                .count(),
            24
        );
        assert_nothing_dropped("sfc", &all);
    }

    #[test]
    fn generic_fallback_for_unknown_drivers() {
        let q = |dir, queue, field| Class::Queue { dir, queue, field };
        assert_eq!(
            classify("newnic", "rx12_packets"),
            q(Dir::Rx, 12, Field::Packets)
        );
        assert_eq!(
            classify("newnic", "tx_queue_3_bytes"),
            q(Dir::Tx, 3, Field::Bytes)
        );
        assert_eq!(
            classify("newnic", "rx-queue-2.drops"),
            q(Dir::Rx, 2, Field::Drops)
        );
        assert_eq!(
            classify("newnic", "rx-5.rx_packets"),
            q(Dir::Rx, 5, Field::Packets)
        );
        assert_eq!(
            classify("newnic", "queue_1_rx_packets"),
            q(Dir::Rx, 1, Field::Packets)
        );
        assert_eq!(
            classify("newnic", "[4]: tx_errors"),
            q(Dir::Tx, 4, Field::Errors)
        );
        assert_eq!(
            classify("newnic", "rx_queue_0_csum_err"),
            q(Dir::Rx, 0, Field::Other("csum_err".into()))
        );
        // Direction-less ring counters are only filed for bnxt.
        assert_eq!(classify("newnic", "[4]: tpa_packets"), Class::Global);
        // Driver-specific meanings do not leak into other drivers.
        assert_eq!(
            classify("newnic", "queue_0_rx_cnt"),
            q(Dir::Rx, 0, Field::Other("cnt".into()))
        );
        assert_eq!(
            classify("newnic", "rx_queue_0_xdp_packets"),
            q(Dir::Rx, 0, Field::Other("xdp_packets".into()))
        );
    }

    #[test]
    fn unknown_names_stay_in_globals() {
        for name in [
            "made_up_counter",
            "rx_",
            "rx_queue_x_packets",
            "rx99999999999_packets",
            "tx-xdp-cpu-0.tx_packets",
            "[]: rx_packets",
            "ch_events",
            "",
        ] {
            assert_eq!(classify("mlx5_core", name), Class::Global, "{name:?}");
        }
        let stats = vec![
            ("rx0_packets".to_owned(), 1),
            ("made_up_counter".to_owned(), 7),
            ("rx0_packets".to_owned(), 2),
        ];
        let (queues, globals) = per_queue("mlx5_core", &stats);
        assert_eq!(globals, vec![("made_up_counter".to_owned(), 7)]);
        assert_eq!(queues.len(), 1);
        assert_eq!(queues[0].packets, Some(1));
        // A second counter with the same meaning is kept, not summed or lost.
        assert_eq!(queues[0].other.get("rx0_packets"), Some(&2));
    }

    #[test]
    fn name_classes_are_kept_until_the_names_change() {
        let mut all = stats("mlx5_core");
        let mut c = NameClasses::default();
        let names =
            |s: &[(String, u64)]| -> Arc<[String]> { s.iter().map(|(n, _)| n.clone()).collect() };
        let expect = |d: &str, s: &[(String, u64)]| -> Vec<Class> {
            s.iter().map(|(n, _)| classify(d, n)).collect()
        };
        assert_eq!(c.get("mlx5_core", &names(&all)), expect("mlx5_core", &all));
        assert_eq!(c.classified(), 1);
        // New values, same names: the classes are reused.
        for (_, v) in all.iter_mut() {
            *v += 7;
        }
        assert_eq!(c.get("mlx5_core", &names(&all)), expect("mlx5_core", &all));
        assert_eq!(c.classified(), 1);
        // A renamed counter (same length): classified again.
        all[0].0 = "rx99_packets".into();
        assert_eq!(c.get("mlx5_core", &names(&all)), expect("mlx5_core", &all));
        assert_eq!(c.classified(), 2);
        assert!(matches!(
            &c.get("mlx5_core", &names(&all))[0],
            Class::Queue { queue: 99, .. }
        ));
        // A counter more (the set grew with the channels): classified again.
        all.push(("ch99_events".into(), 1));
        assert_eq!(c.get("mlx5_core", &names(&all)), expect("mlx5_core", &all));
        assert_eq!(c.classified(), 3);
        // The same names under another driver: classified again
        // (`ch99_events` is a channel counter of mlx5 only).
        assert_eq!(c.get("ice", &names(&all)), expect("ice", &all));
        assert_eq!(c.classified(), 4);
        assert_eq!(c.get("ice", &names(&all)).last(), Some(&Class::Global));
        // And the split over the cached classes is the split of per_queue.
        let classes = c.get("ice", &names(&all)).to_vec();
        assert_eq!(per_queue_classified(&all, &classes), per_queue("ice", &all));
        all.truncate(10);
        assert_eq!(c.get("ice", &names(&all)).len(), 10);
        assert_eq!(c.classified(), 5);
        // One list shared by two readings: the same, without comparing.
        let shared = names(&all);
        c.get("ice", &shared);
        assert_eq!(c.get("ice", &Arc::clone(&shared)).len(), 10);
        assert_eq!(c.classified(), 5);
    }

    #[test]
    fn serde_names_are_snake_case() {
        let class = Class::Queue {
            dir: Dir::Tx,
            queue: 1,
            field: Field::Other("kicks".into()),
        };
        let json = serde_json::to_string(&class).expect("serialize");
        assert_eq!(
            json,
            r#"{"queue":{"dir":"tx","queue":1,"field":{"other":"kicks"}}}"#
        );
        assert_eq!(
            serde_json::to_string(&Field::Drops).expect("serialize"),
            r#""drops""#
        );
    }
}

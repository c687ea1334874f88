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

/// Direction of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dir {
    /// Receive queue.
    Rx,
    /// Transmit queue.
    Tx,
}

/// What a per-queue counter counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QueueCounters {
    /// Direction.
    pub dir: Dir,
    /// Queue index.
    pub queue: u32,
    /// Packets, when the driver reports them per queue. For bnxt this is the
    /// sum of the unicast, multicast and broadcast counters (when all three
    /// are present).
    pub packets: Option<u64>,
    /// Bytes (for bnxt the sum of unicast, multicast and broadcast bytes).
    pub bytes: Option<u64>,
    /// Drops on this queue.
    pub drops: Option<u64>,
    /// Every other counter of this queue (errors included), by its full
    /// `ethtool -S` name, so each number keeps its source.
    pub other: BTreeMap<String, u64>,
}

impl Default for Dir {
    fn default() -> Self {
        Dir::Rx
    }
}

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

/// A name split into its queue part and its field part.
struct Split<'a> {
    /// None for counters of a channel or ring as a whole (mlx5 `ch3_events`,
    /// bnxt `[3]: tpa_packets`).
    dir: Option<Dir>,
    queue: u32,
    field: &'a str,
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
    Some(Split { dir: Some(dir), queue, field })
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
    Some(Split { dir: Some(dir), queue, field })
}

/// `rx-3.rx_packets` (i40e, sfc) and `rx-3.packets` (i40e 2.x, iavf); the
/// repeated direction in the field is dropped.
fn dir_dash_index(name: &str) -> Option<Split<'_>> {
    let (dir, rest) = strip_dir(name)?;
    let (queue, rest) = strip_index(rest.strip_prefix('-')?)?;
    let field = field_after(rest, ".")?;
    let prefix = if dir == Dir::Rx { "rx_" } else { "tx_" };
    let field = field.strip_prefix(prefix).filter(|f| !f.is_empty()).unwrap_or(field);
    Some(Split { dir: Some(dir), queue, field })
}

/// `queue_3_rx_cnt` (ena).
fn queue_index_dir(name: &str) -> Option<Split<'_>> {
    let (queue, rest) = strip_index(name.strip_prefix("queue_")?)?;
    let (dir, rest) = strip_dir(rest.strip_prefix('_')?)?;
    let field = field_after(rest, "_")?;
    Some(Split { dir: Some(dir), queue, field })
}

/// `[3]: rx_ucast_packets` (bnxt); `[3]: tpa_packets` has no direction.
fn bracket_index(name: &str) -> Option<Split<'_>> {
    let (queue, rest) = strip_index(name.strip_prefix('[')?)?;
    let rest = field_after(rest, "]: ")?;
    let split = match strip_dir(rest) {
        Some((dir, f)) => field_after(f, "_").map(|field| Split { dir: Some(dir), queue, field }),
        None => None,
    };
    Some(split.unwrap_or(Split { dir: None, queue, field: rest }))
}

/// `ch3_events` (mlx5 channel counters).
fn channel_index(name: &str) -> Option<Split<'_>> {
    let (queue, rest) = strip_index(name.strip_prefix("ch")?)?;
    let field = field_after(rest, "_")?;
    Some(Split { dir: None, queue, field })
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
    let dir = match split.dir {
        Some(dir) => dir,
        // Counters of a whole channel or ring: filed under its rx queue
        // for the drivers where that is what they mean.
        None if driver == Driver::Mlx5 && name.starts_with("ch") => Dir::Rx,
        None if driver == Driver::Bnxt && name.starts_with('[') => Dir::Rx,
        None => return Class::Global,
    };
    let field = match (split.dir, field_of(driver, dir, split.field)) {
        (None, _) if name.starts_with("ch") => Field::Other(format!("ch_{}", split.field)),
        (None, _) => Field::Other(split.field.to_owned()),
        (Some(_), field) => field,
    };
    Class::Queue { dir, queue: split.queue, field }
}

/// Per-queue accumulator: the fields, plus the bnxt cast counters.
struct Acc {
    counters: QueueCounters,
    casts: BTreeMap<String, u64>,
}

const CASTS: [&str; 3] = ["ucast", "mcast", "bcast"];

impl Acc {
    fn new(dir: Dir, queue: u32) -> Self {
        Acc {
            counters: QueueCounters { dir, queue, ..QueueCounters::default() },
            casts: BTreeMap::new(),
        }
    }

    fn add(&mut self, name: &str, field: Field, value: u64) {
        let slot = match field {
            Field::Packets => &mut self.counters.packets,
            Field::Bytes => &mut self.counters.bytes,
            Field::Drops => &mut self.counters.drops,
            Field::Errors => return self.keep(name, value),
            Field::Other(f) => {
                if CASTS.iter().any(|c| f.starts_with(c)) {
                    self.casts.insert(f, value);
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

    fn keep(&mut self, name: &str, value: u64) {
        self.counters.other.insert(name.to_owned(), value);
    }

    /// Sum of `{ucast,mcast,bcast}_<what>` when all three are present.
    fn cast_sum(&self, what: &str) -> Option<u64> {
        CASTS.iter().try_fold(0u64, |sum, c| {
            let v = self.casts.get(&format!("{c}_{what}"))?;
            Some(sum.saturating_add(*v))
        })
    }

    fn finish(mut self) -> QueueCounters {
        if self.counters.packets.is_none() {
            self.counters.packets = self.cast_sum("packets");
        }
        if self.counters.bytes.is_none() {
            self.counters.bytes = self.cast_sum("bytes");
        }
        self.counters
    }
}

/// Group `ethtool -S` output (in printed order) per queue.
///
/// Returns the queues sorted by direction (rx first) and index, and every
/// counter that is not per queue — device-wide ones and names no pattern
/// recognises — in the order printed. No counter is dropped: each lands in a
/// queue field, a queue's `other`, or the globals.
pub fn per_queue(driver: &str, stats: &[(String, u64)]) -> (Vec<QueueCounters>, Vec<(String, u64)>) {
    let mut queues: BTreeMap<(Dir, u32), Acc> = BTreeMap::new();
    let mut globals = Vec::new();
    for (name, value) in stats {
        match classify(driver, name) {
            Class::Queue { dir, queue, field } => queues
                .entry((dir, queue))
                .or_insert_with(|| Acc::new(dir, queue))
                .add(name, field, *value),
            Class::Global => globals.push((name.clone(), *value)),
        }
    }
    (queues.into_values().map(Acc::finish).collect(), globals)
}

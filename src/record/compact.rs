//! The log's compact encoding of a Sample (schema 2): the big per-interval
//! arrays as columns instead of one object per row.
//!
//! A host of 256 CPUs and 8 NICs × 64 queues writes 1,792 rows per
//! interval; as objects every row repeats its keys, its interface name and
//! its derived rates, and that was 300 kB per host per interval. Here:
//!
//! * `cpu_cols`: per-CPU times as columns of integers in **tenths of a
//!   percent** (the one rounding: at `USER_HZ` 100 a 1 s interval counts
//!   whole percents, so nothing measured is lost at intervals up to 10 s);
//!   the CPU numbers as ranges (`[[0,255]]`); a column that is zero on
//!   every CPU is left out.
//! * `queue_blocks`: consecutive queues of one interface, direction and
//!   source as one block — the identity once, then columns of packets,
//!   bytes and drops, and the seconds the rates are over (`dt`): pps and
//!   bit/s are recomputed from the counts exactly as the sampler computed
//!   them (the encoder checks that they are; when they are not, the rates
//!   are listed). The queue's other counters are columns named with `{q}`
//!   for the queue number (`rx{q}_cache_reuse`).
//! * `softirq_cols`, `softnet_cols`: per-CPU columns, zero columns left out.
//! * `nic_counter_groups`: the NIC-wide counters grouped by interface.
//!
//! Everything else of the Sample keeps its schema-1 form, and the reader
//! takes both forms (a schema-1 line simply has no columns), so logs of
//! older versions read as before. Counts are exact; only the CPU
//! percentages are rounded (to 0.05 % at most).
//!
//! Owns the mapping between [`Sample`] and [`LogSample`] only; it does no
//! I/O and knows nothing of the other record types.

use crate::probe::cpu::CpuSample;
use crate::probe::ethtool_names::Dir;
use crate::probe::sample::{NicCounter, QueueSample, QueueSource, Sample};
use crate::probe::softirq::{SoftirqCpu, Softnet, SoftnetCpu};
use crate::units::{BitsPerSec, CpuId, Percent};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most rows a column block may describe: far above any host (4,096
/// CPUs, 64 NICs × 512 queues × 2 directions), checked before allocating.
pub const MAX_ROWS: usize = 1 << 17;

/// A log line's Sample: the schema-1 Sample (its big arrays left empty when
/// the columns carry them) and the columns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogSample {
    /// The Sample's other fields (and, in schema-1 lines, its arrays as rows).
    #[serde(flatten)]
    pub sample: Sample,
    /// Per-CPU times (schema 2), instead of `cpus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cols: Option<CpuCols>,
    /// Per-queue counters (schema 2), instead of `queues`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queue_blocks: Vec<QueueBlock>,
    /// Softirqs per CPU (schema 2), instead of `softirqs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softirq_cols: Option<SoftirqCols>,
    /// softnet per CPU (schema 2), instead of `softnet`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softnet_cols: Option<SoftnetCols>,
    /// NIC-wide counters by interface (schema 2), instead of `nic_counters`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nic_counter_groups: Vec<NicCounterGroup>,
}

/// Row identities (CPU or queue numbers) as runs of consecutive numbers,
/// `[first, last]` each: `[[0,255]]` is 0 to 255.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct Ids(pub Vec<[u32; 2]>);

impl Ids {
    fn of(ids: impl IntoIterator<Item = u32>) -> Self {
        let mut runs: Vec<[u32; 2]> = Vec::new();
        for id in ids {
            match runs.last_mut() {
                Some(r) if r[1].checked_add(1) == Some(id) => r[1] = id,
                _ => runs.push([id, id]),
            }
        }
        Ids(runs)
    }

    /// The numbers, refused when the runs are reversed or describe more
    /// than [`MAX_ROWS`] rows (checked before allocating).
    pub fn expand(&self) -> Result<Vec<u32>, CompactError> {
        let mut n: usize = 0;
        for &[a, b] in &self.0 {
            if b < a {
                return Err(CompactError::Reversed { a, b });
            }
            n = n.saturating_add((b - a) as usize + 1);
        }
        if n > MAX_ROWS {
            return Err(CompactError::TooManyRows { n });
        }
        let mut v = Vec::with_capacity(n);
        for [a, b] in &self.0 {
            v.extend(*a..=*b);
        }
        Ok(v)
    }
}

/// Per-CPU times in tenths of a percent; an absent column is zero on every CPU.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuCols {
    /// CPU numbers.
    pub cpu: Ids,
    /// User mode (not niced), 0.1 %.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user: Vec<u32>,
    /// Niced user mode, 0.1 %.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nice: Vec<u32>,
    /// Kernel mode, 0.1 %.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<u32>,
    /// Hard interrupts, 0.1 %.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub irq: Vec<u32>,
    /// Softirqs, 0.1 %.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub softirq: Vec<u32>,
    /// I/O wait, 0.1 %.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub iowait: Vec<u32>,
    /// Stolen, 0.1 %.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steal: Vec<u32>,
    /// Idle, 0.1 %.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle: Vec<u32>,
}

/// Consecutive queues of one interface, direction and source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueBlock {
    /// Interface.
    pub iface: String,
    /// Direction.
    pub dir: Dir,
    /// Which counters these are.
    pub source: QueueSource,
    /// Queue numbers, one per row.
    pub queue: Ids,
    /// Packets per row (null: the source has no packet count); absent: none has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packets: Option<Vec<Option<u64>>>,
    /// Bytes per row, likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Vec<Option<u64>>>,
    /// Drops per row, likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drops: Option<Vec<Option<u64>>>,
    /// Seconds the rates are over: pps = packets / dt, bit/s = bytes × 8 /
    /// dt (0 when dt is 0). Absent when the rates are listed in `pps`/`bps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dt: Option<f64>,
    /// Packets per second per row, when there is no `dt`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pps: Vec<f64>,
    /// Bits per second per row, when there is no `dt`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bps: Vec<f64>,
    /// The queues' other counters, by name with `{q}` for the queue number;
    /// null where a queue's counter did not move.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other: BTreeMap<String, Vec<Option<u64>>>,
    /// Other counters whose names do not carry the queue number, by row.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_rows: Vec<OtherRow>,
}

/// Counters of one row of a [`QueueBlock`] under their own names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OtherRow {
    /// Row in the block (0-based).
    pub row: u32,
    /// Counters.
    pub other: BTreeMap<String, u64>,
}

/// Softirqs raised per CPU; an absent column is zero on every CPU.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SoftirqCols {
    /// CPU numbers.
    pub cpu: Ids,
    /// NET_RX.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub net_rx: Vec<u64>,
    /// NET_TX.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub net_tx: Vec<u64>,
    /// Other vectors by name; null where a CPU had none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other: BTreeMap<String, Vec<Option<u64>>>,
}

/// softnet deltas per CPU; an absent column is zero on every CPU.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SoftnetCols {
    /// CPU numbers.
    pub cpu: Ids,
    /// Packets processed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processed: Vec<u32>,
    /// Backlog drops.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<u32>,
    /// Out of budget or time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub time_squeeze: Vec<u32>,
    /// RPS IPIs received.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub received_rps: Vec<u32>,
    /// Flow-limit drops.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flow_limit: Vec<u32>,
}

/// Consecutive NIC-wide counters of one interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NicCounterGroup {
    /// Interface.
    pub iface: String,
    /// Counter names.
    pub name: Vec<String>,
    /// Their increase over the interval, in the same order.
    pub delta: Vec<u64>,
}

/// A column of `n` values, or empty when all are zero.
fn col<T: Copy + Default + PartialEq>(n: usize, f: impl Fn(usize) -> T) -> Vec<T> {
    let v: Vec<T> = (0..n).map(f).collect();
    if v.iter().all(|x| *x == T::default()) {
        Vec::new()
    } else {
        v
    }
}

/// A compact sample whose columns do not fit together: which column, and
/// how many values it has for how many rows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    /// An id run `[a,b]` with `b < a`.
    #[error("id run [{a},{b}] is reversed")]
    Reversed {
        /// First id.
        a: u32,
        /// Last id.
        b: u32,
    },
    /// Id runs describing more than [`MAX_ROWS`] rows.
    #[error("{n} rows: more than {MAX_ROWS}")]
    TooManyRows {
        /// The rows described.
        n: usize,
    },
    /// A column with another number of values than rows.
    #[error("{what} has {k} values for {n} rows")]
    Column {
        /// The column (`cpu_cols.user`).
        what: String,
        /// Its values.
        k: usize,
        /// The rows.
        n: usize,
    },
    /// A queue block's column with another number of values than queues.
    #[error("queue block {iface}: {what} has {k} values for {n} queues{hint}")]
    QueueColumn {
        /// The interface of the block.
        iface: String,
        /// The column (`packets`, `counter NAME`).
        what: String,
        /// Its values.
        k: usize,
        /// The queues.
        n: usize,
        /// What to give instead, or nothing.
        hint: &'static str,
    },
    /// `other_rows` naming a row the block does not have.
    #[error("queue block {iface}: other_rows names row {row}")]
    OtherRow {
        /// The interface of the block.
        iface: String,
        /// The row named.
        row: u32,
    },
    /// A counter group with more names than deltas, or fewer.
    #[error("nic_counter_groups {iface}: {names} names but {deltas} deltas")]
    NicGroup {
        /// The interface of the group.
        iface: String,
        /// Its names.
        names: usize,
        /// Its deltas.
        deltas: usize,
    },
    /// Rows given both as a list and as columns.
    #[error("a sample gives both `{0}` and its columns")]
    Both(&'static str),
    /// Queue blocks adding up to more than [`MAX_ROWS`] rows.
    #[error("more than {MAX_ROWS} queue rows")]
    TooManyQueueRows,
}

/// Column `c` (named `what`) read back for `n` rows: empty is all zeros.
fn uncol<T: Copy + Default>(c: &[T], n: usize, what: &str) -> Result<Vec<T>, CompactError> {
    match c.len() {
        0 => Ok(vec![T::default(); n]),
        k if k == n => Ok(c.to_vec()),
        k => Err(CompactError::Column {
            what: what.to_string(),
            k,
            n,
        }),
    }
}

fn tenths(p: Percent) -> u32 {
    (p.0 * 10.0).round().clamp(0.0, f64::from(u32::MAX)) as u32
}

fn pct(t: u32) -> Percent {
    Percent(f64::from(t) / 10.0)
}

fn encode_cpus(cpus: &[CpuSample]) -> CpuCols {
    let n = cpus.len();
    let c = |f: fn(&CpuSample) -> Percent| col(n, |i| tenths(f(&cpus[i])));
    CpuCols {
        cpu: Ids::of(cpus.iter().map(|c| c.cpu.0)),
        user: c(|c| c.user),
        nice: c(|c| c.nice),
        system: c(|c| c.system),
        irq: c(|c| c.irq),
        softirq: c(|c| c.softirq),
        iowait: c(|c| c.iowait),
        steal: c(|c| c.steal),
        idle: c(|c| c.idle),
    }
}

fn decode_cpus(c: &CpuCols) -> Result<Vec<CpuSample>, CompactError> {
    let ids = c.cpu.expand()?;
    let n = ids.len();
    let get = |v: &[u32], w: &str| uncol(v, n, &format!("cpu_cols.{w}"));
    let user = get(&c.user, "user")?;
    let nice = get(&c.nice, "nice")?;
    let system = get(&c.system, "system")?;
    let irq = get(&c.irq, "irq")?;
    let softirq = get(&c.softirq, "softirq")?;
    let iowait = get(&c.iowait, "iowait")?;
    let steal = get(&c.steal, "steal")?;
    let idle = get(&c.idle, "idle")?;
    Ok((0..n)
        .map(|i| CpuSample {
            cpu: CpuId(ids[i]),
            user: pct(user[i]),
            nice: pct(nice[i]),
            system: pct(system[i]),
            irq: pct(irq[i]),
            softirq: pct(softirq[i]),
            iowait: pct(iowait[i]),
            steal: pct(steal[i]),
            idle: pct(idle[i]),
        })
        .collect())
}

/// The rates the sampler computes from a count over `dt` seconds.
fn per_s(count: Option<u64>, dt: f64) -> f64 {
    if dt > 0.0 {
        count.unwrap_or(0) as f64 / dt
    } else {
        0.0
    }
}

/// The seconds every row's rates were computed over, if there is one:
/// candidates from the first counted row (and their neighbouring floats),
/// each checked bit for bit on every row.
fn rates_dt(rows: &[QueueSample]) -> Option<f64> {
    let mut cands = vec![0.0];
    if let Some(r) = rows
        .iter()
        .find(|r| r.packets.unwrap_or(0) > 0 && r.pps > 0.0)
    {
        cands.push(r.packets.unwrap_or(0) as f64 / r.pps);
    }
    if let Some(r) = rows
        .iter()
        .find(|r| r.bytes.unwrap_or(0) > 0 && r.bps.0 > 0.0)
    {
        cands.push(r.bytes.unwrap_or(0) as f64 * 8.0 / r.bps.0);
    }
    let near = cands
        .clone()
        .into_iter()
        .filter(|c| *c > 0.0)
        .flat_map(|c| {
            let b = c.to_bits();
            [b.saturating_sub(2), b.saturating_sub(1), b + 1, b + 2].map(f64::from_bits)
        });
    cands.extend(near.collect::<Vec<_>>());
    cands.into_iter().find(|dt| {
        rows.iter().all(|r| {
            per_s(r.packets, *dt).to_bits() == r.pps.to_bits()
                && BitsPerSec::from_bytes(r.bytes.unwrap_or(0), *dt)
                    .0
                    .to_bits()
                    == r.bps.0.to_bits()
        })
    })
}

/// Where `q` (in decimal, not part of a longer number) first occurs in `key`.
fn queue_at(key: &str, q: &str) -> Option<usize> {
    let b = key.as_bytes();
    key.match_indices(q).map(|(i, _)| i).find(|&i| {
        let before = i.checked_sub(1).map(|j| b[j]);
        let after = b.get(i + q.len()).copied();
        !before.is_some_and(|c| c.is_ascii_digit()) && !after.is_some_and(|c| c.is_ascii_digit())
    })
}

/// `key` with the queue number as `{q}`, when it carries it (and no `{q}` of its own).
fn template(key: &str, queue: u32) -> Option<String> {
    if key.contains("{q}") {
        return None;
    }
    let q = queue.to_string();
    let i = queue_at(key, &q)?;
    Some(format!("{}{{q}}{}", &key[..i], &key[i + q.len()..]))
}

fn opt_col(v: Vec<Option<u64>>) -> Option<Vec<Option<u64>>> {
    v.iter().any(Option::is_some).then_some(v)
}

fn encode_block(rows: &[QueueSample]) -> QueueBlock {
    let n = rows.len();
    let first = &rows[0];
    let dt = rates_dt(rows);
    let mut other: BTreeMap<String, Vec<Option<u64>>> = BTreeMap::new();
    let mut other_rows = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let mut own = BTreeMap::new();
        for (k, v) in &r.other {
            match template(k, r.queue) {
                Some(t) => other.entry(t).or_insert_with(|| vec![None; n])[i] = Some(*v),
                None => {
                    own.insert(k.clone(), *v);
                }
            }
        }
        if !own.is_empty() {
            other_rows.push(OtherRow {
                row: i as u32,
                other: own,
            });
        }
    }
    QueueBlock {
        iface: first.iface.to_string(),
        dir: first.dir,
        source: first.source,
        queue: Ids::of(rows.iter().map(|r| r.queue)),
        packets: opt_col(rows.iter().map(|r| r.packets).collect()),
        bytes: opt_col(rows.iter().map(|r| r.bytes).collect()),
        drops: opt_col(rows.iter().map(|r| r.drops).collect()),
        dt,
        pps: if dt.is_some() {
            Vec::new()
        } else {
            rows.iter().map(|r| r.pps).collect()
        },
        bps: if dt.is_some() {
            Vec::new()
        } else {
            rows.iter().map(|r| r.bps.0).collect()
        },
        other,
        other_rows,
    }
}

fn encode_queues(queues: &[QueueSample]) -> Vec<QueueBlock> {
    queues
        .chunk_by(|a, b| a.iface == b.iface && a.dir == b.dir && a.source == b.source)
        .map(encode_block)
        .collect()
}

fn decode_block(b: &QueueBlock, out: &mut Vec<QueueSample>) -> Result<(), CompactError> {
    let ids = b.queue.expand()?;
    let n = ids.len();
    let column = |what: String, k: usize, hint: &'static str| CompactError::QueueColumn {
        iface: b.iface.clone(),
        what,
        k,
        n,
        hint,
    };
    let counts = |c: &Option<Vec<Option<u64>>>, w: &str| match c {
        None => Ok(vec![None; n]),
        Some(v) if v.len() == n => Ok(v.clone()),
        Some(v) => Err(column(w.to_string(), v.len(), "")),
    };
    let (packets, bytes, drops) = (
        counts(&b.packets, "packets")?,
        counts(&b.bytes, "bytes")?,
        counts(&b.drops, "drops")?,
    );
    let listed = |v: &[f64], w: &str| match (b.dt, v.len()) {
        (Some(_), 0) => Ok(None),
        (None, k) if k == n => Ok(Some(v.to_vec())),
        (_, k) => Err(column(w.to_string(), k, " (give dt or one rate per queue)")),
    };
    let (pps, bps) = (listed(&b.pps, "pps")?, listed(&b.bps, "bps")?);
    for (k, v) in &b.other {
        if v.len() != n {
            return Err(column(format!("counter {k}"), v.len(), ""));
        }
    }
    let start = out.len();
    for i in 0..n {
        let dt = b.dt.unwrap_or(0.0);
        let q = ids[i];
        let other = b
            .other
            .iter()
            .filter_map(|(k, v)| v[i].map(|x| (k.replace("{q}", &q.to_string()), x)))
            .collect();
        out.push(QueueSample {
            iface: b.iface.as_str().into(),
            dir: b.dir,
            queue: q,
            packets: packets[i],
            bytes: bytes[i],
            drops: drops[i],
            pps: pps.as_ref().map_or_else(|| per_s(packets[i], dt), |v| v[i]),
            bps: bps.as_ref().map_or_else(
                || BitsPerSec::from_bytes(bytes[i].unwrap_or(0), dt),
                |v| BitsPerSec(v[i]),
            ),
            source: b.source,
            other,
        });
    }
    for r in &b.other_rows {
        let row = out
            .get_mut(start + r.row as usize)
            .filter(|_| (r.row as usize) < n)
            .ok_or_else(|| CompactError::OtherRow {
                iface: b.iface.clone(),
                row: r.row,
            })?;
        row.other
            .extend(r.other.iter().map(|(k, v)| (k.clone(), *v)));
    }
    Ok(())
}

/// A map column per name: `None` where a row lacks the name.
fn map_cols<'a>(
    n: usize,
    rows: impl Iterator<Item = &'a BTreeMap<String, u64>>,
) -> BTreeMap<String, Vec<Option<u64>>> {
    let mut out: BTreeMap<String, Vec<Option<u64>>> = BTreeMap::new();
    for (i, m) in rows.enumerate() {
        for (k, v) in m {
            out.entry(k.clone()).or_insert_with(|| vec![None; n])[i] = Some(*v);
        }
    }
    out
}

fn encode_softirqs(s: &[SoftirqCpu]) -> SoftirqCols {
    let n = s.len();
    SoftirqCols {
        cpu: Ids::of(s.iter().map(|c| c.cpu.0)),
        net_rx: col(n, |i| s[i].net_rx),
        net_tx: col(n, |i| s[i].net_tx),
        other: map_cols(n, s.iter().map(|c| &c.other)),
    }
}

fn decode_softirqs(c: &SoftirqCols) -> Result<Vec<SoftirqCpu>, CompactError> {
    let ids = c.cpu.expand()?;
    let n = ids.len();
    let rx = uncol(&c.net_rx, n, "softirq_cols.net_rx")?;
    let tx = uncol(&c.net_tx, n, "softirq_cols.net_tx")?;
    if let Some((k, v)) = c.other.iter().find(|(_, v)| v.len() != n) {
        return Err(CompactError::Column {
            what: format!("softirq_cols.other.{k}"),
            k: v.len(),
            n,
        });
    }
    Ok((0..n)
        .map(|i| SoftirqCpu {
            cpu: CpuId(ids[i]),
            net_rx: rx[i],
            net_tx: tx[i],
            other: c
                .other
                .iter()
                .filter_map(|(k, v)| v[i].map(|x| (k.clone(), x)))
                .collect(),
        })
        .collect())
}

fn encode_softnet(s: &[SoftnetCpu]) -> SoftnetCols {
    let n = s.len();
    let c = |f: fn(&Softnet) -> u32| col(n, |i| f(&s[i].delta));
    SoftnetCols {
        cpu: Ids::of(s.iter().map(|c| c.cpu.0)),
        processed: c(|d| d.processed),
        dropped: c(|d| d.dropped),
        time_squeeze: c(|d| d.time_squeeze),
        received_rps: c(|d| d.received_rps),
        flow_limit: c(|d| d.flow_limit),
    }
}

fn decode_softnet(c: &SoftnetCols) -> Result<Vec<SoftnetCpu>, CompactError> {
    let ids = c.cpu.expand()?;
    let n = ids.len();
    let get = |v: &[u32], w: &str| uncol(v, n, &format!("softnet_cols.{w}"));
    let (p, d, t) = (
        get(&c.processed, "processed")?,
        get(&c.dropped, "dropped")?,
        get(&c.time_squeeze, "time_squeeze")?,
    );
    let (r, f) = (
        get(&c.received_rps, "received_rps")?,
        get(&c.flow_limit, "flow_limit")?,
    );
    Ok((0..n)
        .map(|i| SoftnetCpu {
            cpu: CpuId(ids[i]),
            delta: Softnet {
                processed: p[i],
                dropped: d[i],
                time_squeeze: t[i],
                received_rps: r[i],
                flow_limit: f[i],
            },
        })
        .collect())
}

fn encode_nic(c: &[NicCounter]) -> Vec<NicCounterGroup> {
    c.chunk_by(|a, b| a.iface == b.iface)
        .map(|g| NicCounterGroup {
            iface: g[0].iface.clone(),
            name: g.iter().map(|c| c.name.clone()).collect(),
            delta: g.iter().map(|c| c.delta).collect(),
        })
        .collect()
}

fn decode_nic(groups: &[NicCounterGroup]) -> Result<Vec<NicCounter>, CompactError> {
    let mut out = Vec::new();
    for g in groups {
        if g.name.len() != g.delta.len() {
            return Err(CompactError::NicGroup {
                iface: g.iface.clone(),
                names: g.name.len(),
                deltas: g.delta.len(),
            });
        }
        out.extend(g.name.iter().zip(&g.delta).map(|(n, d)| NicCounter {
            iface: g.iface.clone(),
            name: n.clone(),
            delta: *d,
        }));
    }
    Ok(out)
}

impl LogSample {
    /// The compact form of `s` (its big arrays moved into columns).
    pub fn encode(mut s: Sample) -> Self {
        let cpus = std::mem::take(&mut s.cpus);
        let queues = std::mem::take(&mut s.queues);
        let softirqs = std::mem::take(&mut s.softirqs);
        let softnet = std::mem::take(&mut s.softnet);
        let nic = std::mem::take(&mut s.nic_counters);
        LogSample {
            cpu_cols: (!cpus.is_empty()).then(|| encode_cpus(&cpus)),
            queue_blocks: encode_queues(&queues),
            softirq_cols: (!softirqs.is_empty()).then(|| encode_softirqs(&softirqs)),
            softnet_cols: (!softnet.is_empty()).then(|| encode_softnet(&softnet)),
            nic_counter_groups: encode_nic(&nic),
            sample: s,
        }
    }

    /// The Sample back; a line that gives both an array and its columns,
    /// or columns of unequal lengths, is refused with what is wrong.
    pub fn decode(self) -> Result<Sample, CompactError> {
        let LogSample {
            mut sample,
            cpu_cols,
            queue_blocks,
            softirq_cols,
            softnet_cols,
            nic_counter_groups,
        } = self;
        let both = CompactError::Both;
        if let Some(c) = cpu_cols {
            if !sample.cpus.is_empty() {
                return Err(both("cpus"));
            }
            sample.cpus = decode_cpus(&c)?;
        }
        if !queue_blocks.is_empty() {
            if !sample.queues.is_empty() {
                return Err(both("queues"));
            }
            let rows: usize = queue_blocks.iter().map(|b| b.queue.0.len()).sum();
            sample.queues = Vec::with_capacity(rows.min(MAX_ROWS));
            for b in &queue_blocks {
                decode_block(b, &mut sample.queues)?;
                if sample.queues.len() > MAX_ROWS {
                    return Err(CompactError::TooManyQueueRows);
                }
            }
        }
        if let Some(c) = softirq_cols {
            if !sample.softirqs.is_empty() {
                return Err(both("softirqs"));
            }
            sample.softirqs = decode_softirqs(&c)?;
        }
        if let Some(c) = softnet_cols {
            if !sample.softnet.is_empty() {
                return Err(both("softnet"));
            }
            sample.softnet = decode_softnet(&c)?;
        }
        if !nic_counter_groups.is_empty() {
            if !sample.nic_counters.is_empty() {
                return Err(both("nic_counters"));
            }
            sample.nic_counters = decode_nic(&nic_counter_groups)?;
        }
        Ok(sample)
    }
}

/// `#[serde(with)]` for the log's `sample` record: written compact, read in
/// either form.
pub mod record {
    use super::LogSample;
    use crate::probe::sample::Sample;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Write `s` in the compact form.
    pub fn serialize<S: Serializer>(s: &Sample, ser: S) -> Result<S::Ok, S::Error> {
        LogSample::encode(s.clone()).serialize(ser)
    }

    /// Read a Sample written in either form.
    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<Box<Sample>, D::Error> {
        LogSample::deserialize(de)?
            .decode()
            .map(Box::new)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::ebpf::EbpfUnavailable;
    use crate::probe::sampler::{EbpfLoader, Sampler};
    use crate::probe::synthetic::{Layout, SyntheticHost};
    use crate::record::schema::Record;

    /// Two intervals of the synthetic big host, as the sampler makes them.
    fn big_samples() -> Vec<Sample> {
        let mut h = SyntheticHost::in_temp(Layout::default()).unwrap();
        let loader: EbpfLoader = Box::new(|_, _| Err(EbpfUnavailable::Disabled("test".into())));
        let mut s = Sampler::with(Box::new(h.source()), None, loader);
        s.set_ifaces(&h.nic_names());
        s.begin(
            None,
            std::time::Duration::ZERO,
            std::time::Duration::from_secs(1),
        );
        (0..2)
            .map(|_| {
                h.advance(1).unwrap();
                s.sample()
            })
            .collect()
    }

    fn line(s: &Sample) -> String {
        serde_json::to_string(&Record::Sample(Box::new(s.clone()))).unwrap()
    }

    fn read(line: &str) -> Result<Sample, serde_json::Error> {
        match serde_json::from_str::<Record>(line)? {
            Record::Sample(s) => Ok(*s),
            other => panic!("not a sample: {other:?}"),
        }
    }

    /// `s` with its CPU times at the log's precision (0.1 %).
    fn rounded(mut s: Sample) -> Sample {
        for c in &mut s.cpus {
            for p in c.times_mut() {
                p.0 = (p.0 * 10.0).round() / 10.0;
            }
        }
        s
    }

    /// The top-level fields where `a` and `b` differ (a short failure message).
    fn diff(a: &Sample, b: &Sample) -> Vec<String> {
        let (a, b) = (
            serde_json::to_value(a).unwrap(),
            serde_json::to_value(b).unwrap(),
        );
        let keys: std::collections::BTreeSet<&String> = a
            .as_object()
            .unwrap()
            .keys()
            .chain(b.as_object().unwrap().keys())
            .collect();
        keys.into_iter()
            .filter(|k| a.get(k.as_str()) != b.get(k.as_str()))
            .map(|k| k.to_string())
            .collect()
    }

    #[test]
    fn a_big_host_sample_reads_back_equal_within_the_cpu_rounding() {
        for s in big_samples() {
            assert_eq!(s.cpus.len(), 256);
            assert_eq!(s.queues.len(), 1024);
            let l = line(&s);
            let back = read(&l).unwrap();
            let want = rounded(s.clone());
            assert!(back == want, "differ in {:?}", diff(&back, &want));
            for (a, b) in s.cpus.iter().zip(&back.cpus) {
                assert!((a.busy().0 - b.busy().0).abs() <= 0.3, "{a:?} {b:?}");
            }
            // The rates were recomputed, not listed.
            let v: serde_json::Value = serde_json::from_str(&l).unwrap();
            let blocks = v["queue_blocks"].as_array().unwrap();
            assert_eq!(blocks.len(), 16, "8 NICs x rx/tx");
            assert!(blocks
                .iter()
                .all(|b| b["dt"].is_number() && b.get("pps").is_none()));
            // The generator's rx3 of the first NIC: 1 Mpps, cache_reuse half of it, per 1 s advance.
            assert_eq!(blocks[0]["other"]["rx{q}_cache_reuse"][3], 500_000);
        }
    }

    #[test]
    fn schema_1_lines_still_read() {
        for s in big_samples() {
            let mut v = serde_json::to_value(&s).unwrap();
            v["type"] = "sample".into();
            assert!(v["cpus"].as_array().unwrap()[0].is_object());
            let back = read(&v.to_string()).unwrap();
            assert!(
                back == s,
                "a schema-1 line is exact; differ in {:?}",
                diff(&back, &s)
            );
        }
    }

    fn queue(q: u32, packets: Option<u64>, pps: f64, other: &[(&str, u64)]) -> QueueSample {
        QueueSample {
            iface: "eth0".into(),
            dir: Dir::Rx,
            queue: q,
            packets,
            bytes: packets.map(|p| p * 100),
            drops: None,
            pps,
            bps: BitsPerSec(pps * 800.0),
            source: QueueSource::Ethtool,
            other: other.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }

    fn small(queues: Vec<QueueSample>) -> Sample {
        let mut s = big_samples_free();
        s.queues = queues;
        s
    }

    /// A Sample with no rows (the Sample of a host with nothing to show).
    fn big_samples_free() -> Sample {
        serde_json::from_value(serde_json::json!({
            "host": "peer", "index": 3, "start_s": 2.0, "end_s": 3.0, "omitted": false,
            "engine": {"tx_bytes": 0, "rx_bytes": 0, "tx_bps": 0.0, "rx_bps": 0.0,
                       "messages": 0, "msgs_per_s": 0.0},
            "cpus": []
        }))
        .unwrap()
    }

    #[test]
    fn odd_rows_keep_their_figures_names_and_order() {
        let s = small(vec![
            // Rates that are not count / one span: listed as they are.
            queue(
                11,
                Some(1000),
                1234.5,
                &[("rx11_x", 5), ("q11", 1), ("rx11_1", 2)],
            ),
            queue(1, Some(10), 3.0, &[("rx11_y", 7), ("{q}1", 9)]),
            queue(2, None, 0.0, &[]),
        ]);
        let l = line(&s);
        assert_eq!(read(&l).unwrap(), s);
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        assert!(v["queue_blocks"][0]["pps"].is_array(), "{l}");
        // Names without the queue's number are kept per row.
        assert_eq!(v["queue_blocks"][0]["other_rows"][0]["row"], 1, "{l}");
        // Out-of-order queues and a missing count stay as they were.
        let ids: Vec<u32> = read(&l).unwrap().queues.iter().map(|q| q.queue).collect();
        assert_eq!(ids, [11, 1, 2]);
        // Exact rates over one span: recomputed.
        let dt = 0.987_654_321;
        let q = |i: u32, p: u64| {
            let mut r = queue(i, Some(p), p as f64 / dt, &[]);
            r.bps = BitsPerSec::from_bytes(p * 100, dt);
            r
        };
        let s = small((0..64).map(|i| q(i, 1000 + 7 * u64::from(i))).collect());
        let l = line(&s);
        assert!(!l.contains("\"pps\""), "{l}");
        assert_eq!(read(&l).unwrap(), s);
    }

    #[test]
    fn bad_columns_are_refused_with_what_is_wrong() {
        let s = big_samples().remove(0);
        let mut v: serde_json::Value = serde_json::from_str(&line(&s)).unwrap();
        v["cpu_cols"]["idle"].as_array_mut().unwrap().pop();
        let e = read(&v.to_string()).unwrap_err().to_string();
        assert!(
            e.contains("cpu_cols.idle has 255 values for 256 rows"),
            "{e}"
        );
        let mut v: serde_json::Value = serde_json::from_str(&line(&s)).unwrap();
        v["cpu_cols"]["cpu"] = serde_json::json!([[0, 4_000_000_000u32]]);
        let e = read(&v.to_string()).unwrap_err().to_string();
        assert!(e.contains("more than"), "{e}");
        let mut v: serde_json::Value = serde_json::from_str(&line(&s)).unwrap();
        v["cpus"] = serde_json::to_value(&s.cpus).unwrap();
        let e = read(&v.to_string()).unwrap_err().to_string();
        assert!(e.contains("both `cpus` and its columns"), "{e}");
    }
}

//! A big host's per-row detail in the log every few intervals, summed over
//! them, so a day's log stays within a gigabyte before compression.
//!
//! A host of 256 CPUs and 8 NICs × 64 queues writes some 46 kB of per-row
//! figures per interval (per-CPU times, softirqs and softnet, 1,024 queue
//! rows, the NICs' counters): 8 GB a day for a pair at 1 s. The rest of a
//! Sample (throughput, interfaces, connections, nstat, eBPF status) is 3 kB.
//! So the log writes every interval's line with that rest, and the per-row
//! arrays only on a *detail line* every `K` intervals: **summed** over those
//! `K` intervals — counts added (packets, bytes, drops, softirqs, NIC
//! counters: exact over the span, nothing is sampled away), CPU times and
//! rates their means over its seconds — and marked
//! [`Detail::Span`]. The lines between are marked [`Detail::Later`] and
//! carry no arrays; every line still stands alone (its throughput and
//! interfaces are its own; its rows are in the next detail line's sums).
//!
//! `K` follows what the rows of a detail line cost: up to
//! [`DETAIL_KEEP_BYTES`] they are written with every interval (`K` is 1:
//! a small host's log is exactly as before); above, [`detail_every`] keeps
//! them within [`DETAIL_BYTES_PER_S`] per host on average. The first
//! interval of a test point is a detail line of its own, and the last
//! closes its span (the writer holds one interval back until it knows).
//!
//! A reader of the records gets the lines as written: sums over Samples
//! stay exact (a detail line holds its span's counts, the lines between
//! none). [`Carry`] is the replay's side: a [`Detail::Later`] line shows
//! the rows of its host's latest detail line, with that line's span.
//!
//! No I/O here: [`super::log`] writes and reads the lines.

use crate::probe::cpu::CpuSample;
use crate::probe::sample::{
    Detail, HostRole, NapiSample, NicCounter, QueueCpu, QueueSample, Sample, SoftirqTime,
};
use crate::probe::softirq::{SoftirqCpu, SoftnetCpu};
use crate::units::BitsPerSec;

/// The log bytes per second that one host's per-row detail may add on
/// average (a pair at 1 s: 0.26 GB a day of detail; with the lines' 3 kB
/// rest 0.67-0.8 GB in all on the big host).
pub const DETAIL_BYTES_PER_S: usize = 1_500;

/// The most intervals one detail line sums.
pub const MAX_DETAIL_EVERY: u32 = 60;

/// Rows that take at most this many bytes in a line are written with every
/// interval (0.7 GB a day per host at 1 s: some 300 rows — up to 64 CPUs
/// and 128 queues); only bigger hosts' logs sum them.
pub const DETAIL_KEEP_BYTES: usize = 8_000;

/// Detail lines every this many intervals after one whose rows took `bytes`.
pub fn detail_every(bytes: usize) -> u32 {
    if bytes <= DETAIL_KEEP_BYTES {
        return 1;
    }
    u32::try_from(bytes.div_ceil(DETAIL_BYTES_PER_S))
        .unwrap_or(u32::MAX)
        .clamp(1, MAX_DETAIL_EVERY)
}

/// A Sample's per-row arrays.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rows {
    cpus: Vec<CpuSample>,
    softirqs: Vec<SoftirqCpu>,
    softnet: Vec<SoftnetCpu>,
    queues: Vec<QueueSample>,
    nic_counters: Vec<NicCounter>,
    softirq_time: Vec<SoftirqTime>,
    queue_cpus: Vec<QueueCpu>,
    napi: Vec<NapiSample>,
}

impl Rows {
    /// Move the arrays out of `s` (left empty).
    pub fn take(s: &mut Sample) -> Rows {
        Rows {
            cpus: std::mem::take(&mut s.cpus),
            softirqs: std::mem::take(&mut s.softirqs),
            softnet: std::mem::take(&mut s.softnet),
            queues: std::mem::take(&mut s.queues),
            nic_counters: std::mem::take(&mut s.nic_counters),
            softirq_time: std::mem::take(&mut s.softirq_time),
            queue_cpus: std::mem::take(&mut s.queue_cpus),
            napi: std::mem::take(&mut s.napi),
        }
    }

    /// A copy of `s`'s arrays.
    fn of(s: &Sample) -> Rows {
        Rows {
            cpus: s.cpus.clone(),
            softirqs: s.softirqs.clone(),
            softnet: s.softnet.clone(),
            queues: s.queues.clone(),
            nic_counters: s.nic_counters.clone(),
            softirq_time: s.softirq_time.clone(),
            queue_cpus: s.queue_cpus.clone(),
            napi: s.napi.clone(),
        }
    }

    /// Put the arrays into `s`.
    pub fn put(self, s: &mut Sample) {
        s.cpus = self.cpus;
        s.softirqs = self.softirqs;
        s.softnet = self.softnet;
        s.queues = self.queues;
        s.nic_counters = self.nic_counters;
        s.softirq_time = self.softirq_time;
        s.queue_cpus = self.queue_cpus;
        s.napi = self.napi;
    }
}

/// Add each row of `xs` into the row of `acc` that `same` matches, else
/// append it. Rows come in the same order every interval, so the row at
/// the same position is tried first (1,024 queue rows: no quadratic search).
fn add_rows<T: Clone>(
    acc: &mut Vec<T>,
    xs: &[T],
    same: impl Fn(&T, &T) -> bool,
    add: impl Fn(&mut T, &T),
) {
    for (i, x) in xs.iter().enumerate() {
        let at = match acc.get(i) {
            Some(a) if same(a, x) => Some(i),
            _ => acc.iter().position(|a| same(a, x)),
        };
        match at {
            Some(j) => add(&mut acc[j], x),
            None => acc.push(x.clone()),
        }
    }
}

/// Add counters by name (a row's other softirqs or queue counters).
fn add_named(
    a: &mut std::collections::BTreeMap<String, u64>,
    b: &std::collections::BTreeMap<String, u64>,
) {
    for (k, v) in b {
        let e = a.entry(k.clone()).or_insert(0);
        *e = e.saturating_add(*v);
    }
}

fn add_opt(a: &mut Option<u64>, b: Option<u64>) {
    if let Some(b) = b {
        *a = Some(a.unwrap_or(0).saturating_add(b));
    }
}

impl Rows {
    /// Add the per-CPU rows of `r` (CPU times already weighted by seconds).
    fn add_cpu_rows(&mut self, r: &Rows) {
        let acc = self;
        add_rows(
            &mut acc.cpus,
            &r.cpus,
            |a, b| a.cpu == b.cpu,
            |a, b| {
                let mut b = *b;
                for (x, y) in a.times_mut().into_iter().zip(b.times_mut()) {
                    x.0 += y.0;
                }
            },
        );
        add_rows(
            &mut acc.softirqs,
            &r.softirqs,
            |a, b| a.cpu == b.cpu,
            |a, b| {
                a.net_rx = a.net_rx.saturating_add(b.net_rx);
                a.net_tx = a.net_tx.saturating_add(b.net_tx);
                add_named(&mut a.other, &b.other);
            },
        );
        add_rows(
            &mut acc.softnet,
            &r.softnet,
            |a, b| a.cpu == b.cpu,
            |a, b| {
                let (x, y) = (&mut a.delta, &b.delta);
                x.processed = x.processed.saturating_add(y.processed);
                x.dropped = x.dropped.saturating_add(y.dropped);
                x.time_squeeze = x.time_squeeze.saturating_add(y.time_squeeze);
                x.received_rps = x.received_rps.saturating_add(y.received_rps);
                x.flow_limit = x.flow_limit.saturating_add(y.flow_limit);
            },
        );
    }

    /// Add the per-queue, per-NIC and eBPF rows of `r`.
    fn add_nic_rows(&mut self, r: &Rows) {
        let acc = self;
        let same = |a: &QueueSample, b: &QueueSample| {
            a.queue == b.queue && a.dir == b.dir && a.source == b.source && a.iface == b.iface
        };
        add_rows(&mut acc.queues, &r.queues, same, |a, b| {
            add_opt(&mut a.packets, b.packets);
            add_opt(&mut a.bytes, b.bytes);
            add_opt(&mut a.drops, b.drops);
            // Seconds-weighted rates: the means for rows without counts.
            a.pps += b.pps;
            a.bps.0 += b.bps.0;
            add_named(&mut a.other, &b.other);
        });
        add_rows(
            &mut acc.nic_counters,
            &r.nic_counters,
            |a, b| a.name == b.name && a.iface == b.iface,
            |a, b| {
                a.delta = a.delta.saturating_add(b.delta);
            },
        );
        add_rows(
            &mut acc.softirq_time,
            &r.softirq_time,
            |a, b| a.cpu == b.cpu,
            |a, b| {
                a.net_rx_ns = a.net_rx_ns.saturating_add(b.net_rx_ns);
                a.net_tx_ns = a.net_tx_ns.saturating_add(b.net_tx_ns);
                a.net_rx_count = a.net_rx_count.saturating_add(b.net_rx_count);
                a.net_tx_count = a.net_tx_count.saturating_add(b.net_tx_count);
                a.all_ns = a.all_ns.saturating_add(b.all_ns);
            },
        );
        let same = |a: &QueueCpu, b: &QueueCpu| {
            a.cpu == b.cpu && a.queue == b.queue && a.dir == b.dir && a.iface == b.iface
        };
        add_rows(&mut acc.queue_cpus, &r.queue_cpus, same, |a, b| {
            a.packets = a.packets.saturating_add(b.packets);
            a.bytes = a.bytes.saturating_add(b.bytes);
        });
        let same = |a: &NapiSample, b: &NapiSample| {
            a.napi_id == b.napi_id && a.cpu == b.cpu && a.iface == b.iface
        };
        add_rows(&mut acc.napi, &r.napi, same, |a, b| {
            a.polls = a.polls.saturating_add(b.polls);
            a.work = a.work.saturating_add(b.work);
            a.exhausted = a.exhausted.saturating_add(b.exhausted);
        });
    }
}

/// The rows of several intervals summed; CPU times weighted by each
/// interval's seconds until [`Span::finish`] makes them means.
#[derive(Debug, Default)]
struct Span {
    start_s: f64,
    end_s: f64,
    secs: f64,
    n: u32,
    rows: Rows,
}

impl Span {
    fn add(&mut self, s: &Sample, mut r: Rows) {
        let secs = (s.end_s - s.start_s).max(0.0);
        if self.n == 0 {
            self.start_s = s.start_s;
        }
        self.end_s = s.end_s;
        self.secs += secs;
        self.n += 1;
        for c in &mut r.cpus {
            for p in c.times_mut() {
                p.0 *= secs;
            }
        }
        for q in &mut r.queues {
            q.pps *= secs;
            q.bps.0 *= secs;
        }
        self.rows.add_cpu_rows(&r);
        self.rows.add_nic_rows(&r);
    }

    /// The sums as rows over the span: CPU times and rates its means.
    fn finish(mut self) -> (Rows, Detail) {
        let secs = self.secs;
        let mean = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
        for c in &mut self.rows.cpus {
            for p in c.times_mut() {
                p.0 = mean(p.0);
            }
        }
        for q in &mut self.rows.queues {
            // The rates the sampler computes from counts, over the span (so
            // the log's columns recompute them exactly); else the mean rate.
            q.pps = match q.packets {
                Some(p) if secs > 0.0 => p as f64 / secs,
                Some(_) => 0.0,
                None => mean(q.pps),
            };
            q.bps = match q.bytes {
                Some(b) if secs > 0.0 => BitsPerSec::from_bytes(b, secs),
                Some(_) => BitsPerSec(0.0),
                None => BitsPerSec(mean(q.bps.0)),
            };
        }
        let detail = Detail::Span {
            start_s: self.start_s,
            end_s: self.end_s,
        };
        (self.rows, detail)
    }
}

/// One host's detail lines: the span being summed and its `K`.
#[derive(Debug)]
struct HostSpan {
    span: Span,
    every: u32,
}

impl Default for HostSpan {
    fn default() -> Self {
        HostSpan {
            span: Span::default(),
            every: 1,
        }
    }
}

/// The writer's side: which intervals are detail lines, and their sums.
#[derive(Debug, Default)]
pub struct Thinner {
    hosts: [HostSpan; 2],
}

fn slot(h: HostRole) -> usize {
    match h {
        HostRole::Local => 0,
        HostRole::Peer => 1,
    }
}

impl Thinner {
    /// Turn `s` into its log line: its rows added to its host's span, and
    /// the span's sums put in when the span is complete (`K` intervals, or
    /// `closes`: the last interval of a point, or the first, which is a
    /// detail line of its own); else marked [`Detail::Later`] without rows.
    /// A live Sample only ([`Detail::Own`]); others pass unchanged.
    pub fn line(&mut self, mut s: Sample, closes: bool) -> Sample {
        if !s.detail.is_own() {
            return s;
        }
        let h = &mut self.hosts[slot(s.host)];
        let first = s.index == 0;
        if first {
            // A point's first interval: whatever an unclosed span held
            // belongs to the point before (the writer closes them at its end).
            h.span = Span::default();
        }
        let complete = first || closes || h.span.n + 1 >= h.every;
        if complete && h.span.n == 0 {
            // One interval: its own rows, exactly as the sampler gave them.
            return s;
        }
        let rows = Rows::take(&mut s);
        h.span.add(&s, rows);
        if complete {
            let (rows, detail) = std::mem::take(&mut h.span).finish();
            rows.put(&mut s);
            s.detail = detail;
        } else {
            s.detail = Detail::Later;
        }
        s
    }

    /// Whether `s`'s host sums several intervals per detail line now.
    pub fn thins(&self, host: HostRole) -> bool {
        self.hosts[slot(host)].every > 1
    }

    /// A detail line of `host` took `bytes`: set its `K` from it.
    pub fn wrote_detail(&mut self, host: HostRole, bytes: usize) {
        self.hosts[slot(host)].every = detail_every(bytes);
    }

    /// A new test point: the spans start over (nothing is pending: the
    /// point's last interval closed them).
    pub fn new_point(&mut self) {
        for h in &mut self.hosts {
            h.span = Span::default();
        }
    }
}

/// The reader's side: each host's latest detail rows, given to the
/// [`Detail::Later`] lines after it.
#[derive(Debug, Default)]
pub struct Carry {
    hosts: [Option<(Rows, Detail)>; 2],
}

impl Carry {
    /// Fill `s` when its rows were left to a detail line; remember them when it has them.
    pub fn fill(&mut self, s: &mut Sample) {
        let h = &mut self.hosts[slot(s.host)];
        match s.detail {
            Detail::Later => {
                if let Some((rows, detail)) = h {
                    rows.clone().put(s);
                    s.detail = *detail;
                }
            }
            Detail::Own => {
                *h = Some((
                    Rows::of(s),
                    Detail::Span {
                        start_s: s.start_s,
                        end_s: s.end_s,
                    },
                ));
            }
            Detail::Span { .. } => *h = Some((Rows::of(s), s.detail)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_hosts_keep_their_rows_every_interval_and_big_ones_sum_them_within_the_budget() {
        assert_eq!(detail_every(0), 1);
        assert_eq!(detail_every(DETAIL_KEEP_BYTES), 1);
        // The synthetic big host's rows: 46 kB a line.
        assert_eq!(detail_every(46_000), 31);
        assert_eq!(detail_every(usize::MAX), MAX_DETAIL_EVERY);
    }
}

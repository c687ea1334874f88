//! From counters to figures: what one interval and the whole point looked
//! like, per host and per queue. Pure functions over snapshots — no clock,
//! no I/O — so the sampler, the lab and the tests compute the same numbers.
//!
//! Rates are counted as RFC 2544 does: a frame of `frame_size` bytes
//! includes its FCS; L2 bit/s = pps × frame_size × 8; L1 bit/s adds the
//! preamble, SFD and minimum inter-frame gap, 20 B per frame. Line rate
//! is L1 against the link speed, when the driver reports one.
//!
//! What the sink counted is, per mode: the XDP program's count (`xdp`),
//! or the unique frames user space read (`af-xdp`, `tpacket`, `udp`).

use super::counters::{GenThreadSnap, SinkQueueSnap};
use super::flow::FlowSeen;
use super::frame::ports;
use super::spec::{SinkMode, TxPath, L1_OVERHEAD};
use crate::traffic::paths::PathCounters;
use crate::traffic::EngineSpecOps;
use crate::units::{BitsPerSec, CpuId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A sink host's counters at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SinkSnapshot {
    /// Seconds since the sink started, taken when the counters were read.
    pub elapsed_s: f64,
    /// The mode that runs.
    pub mode: SinkMode,
    /// One per queue (or socket).
    pub queues: Vec<SinkQueueSnap>,
    /// The host's loss counters, when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathCounters>,
}

/// A generator host's counters at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GenSnapshot {
    /// Seconds since the generator started, taken when read.
    pub elapsed_s: f64,
    /// The path that runs.
    pub path: TxPath,
    /// One per thread.
    pub threads: Vec<GenThreadSnap>,
    /// The host's loss counters (tx drops), when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<PathCounters>,
}

/// Rates of a frame count over `secs`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rates {
    /// Frames per second.
    pub pps: f64,
    /// Layer 2 (frame incl. FCS).
    pub l2_bps: BitsPerSec,
    /// Layer 1 (frame + 20 B preamble, SFD and IFG).
    pub l1_bps: BitsPerSec,
    /// L1 as % of the link speed, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_rate_pct: Option<f64>,
}

impl Rates {
    /// `frames` of `frame_size` bytes in `secs` on a link of `speed_mbps`.
    pub fn of(frames: u64, secs: f64, frame_size: u32, speed_mbps: Option<u32>) -> Rates {
        if secs <= 0.0 {
            return Rates::default();
        }
        let pps = frames as f64 / secs;
        let l1 = pps * f64::from(frame_size + L1_OVERHEAD) * 8.0;
        Rates {
            pps,
            l2_bps: BitsPerSec(pps * f64::from(frame_size) * 8.0),
            l1_bps: BitsPerSec(l1),
            line_rate_pct: speed_mbps
                .filter(|s| *s > 0)
                .map(|s| l1 / (f64::from(s) * 1e6) * 100.0),
        }
    }
}

/// Where the frames that were not counted went, over an interval or a point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Drops {
    /// Generator: failed send calls.
    pub generator_errors: u64,
    /// Generator host: interface tx drops.
    pub tx_dropped: u64,
    /// Sink host: interface rx drops (rx_dropped + rx_missed_errors).
    pub rx_dropped: u64,
    /// Sink host: NIC loss counters that moved, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nic: BTreeMap<String, u64>,
    /// Sink host: per rx queue drops that moved, beyond the frames the
    /// sink's own ring refused on that queue (veth counts an XDP redirect
    /// to a full AF_XDP ring as a queue drop too).
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        with = "crate::traffic::paths::queue_keys"
    )]
    #[schemars(with = "BTreeMap<String, u64>")]
    pub rx_queue_drops: BTreeMap<u32, u64>,
    /// Sink host: softnet backlog drops.
    pub softnet_dropped: u64,
    /// Sink: frames the kernel dropped because a socket ring was full.
    pub ring_full: u64,
    /// af-xdp: frames the XDP program had no socket for.
    pub xdp_no_socket: u64,
    /// Of `ring_full` + `xdp_no_socket`, the frames the driver's rx-queue
    /// drop counters booked as well (veth does, and then its interface's rx
    /// drop column holds them too).
    #[serde(default)]
    pub ring_seen_by_driver: u64,
}

impl Drops {
    /// Frames the NIC lost before the host saw them: the larger of its
    /// named loss counters and its per-queue drops (two views of one loss).
    pub fn nic_loss(&self) -> u64 {
        self.nic
            .values()
            .sum::<u64>()
            .max(self.rx_queue_drops.values().sum())
    }

    /// Of the interface's rx drops (`/proc/net/dev`), those that none of the
    /// other counters explain: that column already holds the NIC's loss,
    /// softnet backlog drops and, where the driver booked them (veth), XDP
    /// redirects to a full ring. Drops no driver sees (a TPACKET ring's, a
    /// socket's) are not in it and are not taken off.
    pub fn other_rx(&self) -> u64 {
        self.rx_dropped
            .saturating_sub(self.nic_loss() + self.softnet_dropped + self.ring_seen_by_driver)
    }

    /// Frames the test itself lost on the sink's host: its rings, frames
    /// without a socket and the NIC's loss — not the host-wide softnet drops
    /// or interface drops of other traffic (LLDP, STP, ...).
    pub fn by_the_test(&self) -> u64 {
        self.ring_full + self.xdp_no_socket + self.nic_loss()
    }

    /// Frames lost on the sink host, each counted once (the kernel's
    /// counters overlap, see [`Drops::other_rx`]).
    pub fn sink_host(&self) -> u64 {
        self.ring_full
            + self.xdp_no_socket
            + self.softnet_dropped
            + self.nic_loss()
            + self.other_rx()
    }

    /// Frames lost on the generator's host, each counted once: a send the
    /// interface dropped shows both as a failed send and as a tx drop.
    pub fn generator_host(&self) -> u64 {
        self.generator_errors.max(self.tx_dropped)
    }

    /// Every frame lost on the path, each counted once.
    pub fn total(&self) -> u64 {
        self.sink_host() + self.generator_host()
    }
}

/// One sink queue over an interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueFigures {
    /// Queue (or socket) index.
    pub queue: u32,
    /// CPU of its thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuId>,
    /// Frames counted (see the module doc for what counts per mode).
    pub counted: u64,
    /// Rates of `counted`.
    #[serde(flatten)]
    pub rates: Rates,
    /// Duplicates.
    pub duplicates: u64,
    /// Reordered.
    pub reordered: u64,
    /// Change of the gaps below the highest sequence seen (negative when
    /// late frames filled more gaps than opened).
    pub missing_delta: i64,
    /// Ring full drops of this queue's socket.
    pub ring_full: u64,
    /// NIC drops of this rx queue, when the driver counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_drops: Option<u64>,
    /// Index of the sink thread that reads this queue (None in `xdp` mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<u32>,
    /// CPU of that thread, % of one core — on the first row of each thread
    /// only, so the rows sum to the threads' CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pct: Option<f64>,
    /// The CPU that ran this queue's XDP program most (its NAPI CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub napi_cpu: Option<CpuId>,
}

/// The sink host over one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SinkInterval {
    /// Length (s).
    pub secs: f64,
    /// Mode.
    pub mode: SinkMode,
    /// Frames counted by the sink.
    pub counted: u64,
    /// Their rates.
    #[serde(flatten)]
    pub rates: Rates,
    /// Duplicates.
    pub duplicates: u64,
    /// Reordered.
    pub reordered: u64,
    /// Gaps below the highest sequence seen, at the interval's end (live
    /// loss; final loss comes from the generator's counts).
    pub missing: u64,
    /// Change of `missing` over the interval.
    pub missing_delta: i64,
    /// Sink threads' CPU, % of one core (summed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pct: Option<f64>,
    /// The interface's rx packets (all frames, test or not), when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface_rx_packets: Option<u64>,
    /// Where frames were dropped on this host.
    pub drops: Drops,
    /// Per queue; their `counted` sum to `counted`.
    pub queues: Vec<QueueFigures>,
}

/// One generator thread over an interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GenThreadFigures {
    /// Thread index.
    pub thread: u32,
    /// Its tx queue, when bound to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<u32>,
    /// Its CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuId>,
    /// Frames sent.
    pub sent: u64,
    /// Rates of `sent`.
    #[serde(flatten)]
    pub rates: Rates,
    /// Failed sends.
    pub errors: u64,
    /// Waits on a full ring.
    pub ring_full: u64,
    /// CPU % of one core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pct: Option<f64>,
}

/// The generator host over one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GenInterval {
    /// Length (s).
    pub secs: f64,
    /// Path.
    pub path: TxPath,
    /// Frames sent.
    pub sent: u64,
    /// Their rates.
    #[serde(flatten)]
    pub rates: Rates,
    /// Failed sends.
    pub errors: u64,
    /// Interface tx drops, when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_dropped: Option<u64>,
    /// Generator threads' CPU, % of one core (summed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pct: Option<f64>,
    /// Per thread.
    pub threads: Vec<GenThreadFigures>,
}

/// Frames a queue counted: the XDP program's count in `xdp` mode, else
/// the unique frames user space read.
pub(crate) fn counted(q: &SinkQueueSnap, mode: SinkMode) -> u64 {
    match mode {
        SinkMode::Xdp => q.xdp.map_or(0, |x| x.packets),
        _ => q.received,
    }
}

fn cpu_pct(a: Option<u64>, b: Option<u64>, secs: f64) -> Option<f64> {
    a.zip(b)
        .filter(|_| secs > 0.0)
        .map(|(a, b)| b.saturating_sub(a) as f64 / 1e9 / secs * 100.0)
}

/// The sum of the values given; None when none is.
fn sum_opt(v: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    v.flatten().reduce(|a, b| a + b)
}

/// Σ CPU % over the sink's threads (each on one row only).
fn thread_cpu(figs: &[QueueFigures]) -> Option<f64> {
    sum_opt(figs.iter().map(|f| f.cpu_pct))
}

/// The sink host between two snapshots.
pub fn sink_interval(
    prev: &SinkSnapshot,
    cur: &SinkSnapshot,
    frame_size: u32,
    speed_mbps: Option<u32>,
) -> SinkInterval {
    let secs = cur.elapsed_s - prev.elapsed_s;
    let mode = cur.mode;
    let path = prev
        .path
        .as_ref()
        .zip(cur.path.as_ref())
        .map(|(p, c)| c.delta(p));
    let span = QueueSpan {
        mode,
        secs,
        frame_size,
        speed_mbps,
        path: path.as_ref().zip(cur.path.as_ref()),
    };
    let mut queues = Vec::new();
    let mut drops = Drops::default();
    let mut threads_seen = std::collections::BTreeSet::new();
    let mut queue_drops: BTreeMap<u32, u64> = BTreeMap::new();
    for c in &cur.queues {
        let p = prev
            .queues
            .iter()
            .find(|p| p.queue == c.queue)
            .copied()
            .unwrap_or(SinkQueueSnap {
                queue: c.queue,
                ..Default::default()
            });
        let q = queue_figures(&p, c, &span, &mut drops, &mut threads_seen);
        if let Some(d) = q.nic_drops.filter(|d| *d > 0) {
            queue_drops.insert(c.queue, d);
        }
        queues.push(q);
    }
    if let Some(d) = &path {
        drops.rx_dropped = d.rx_dropped;
        drops.nic = d.nic.clone();
        drops.rx_queue_drops = queue_drops;
        drops.softnet_dropped = d.softnet_dropped;
    }
    let total: u64 = queues.iter().map(|q| q.counted).sum();
    let missing = cur
        .queues
        .iter()
        .map(|q| q.expected.saturating_sub(q.received))
        .sum();
    SinkInterval {
        secs,
        mode,
        counted: total,
        rates: Rates::of(total, secs, frame_size, speed_mbps),
        duplicates: queues.iter().map(|q| q.duplicates).sum(),
        reordered: queues.iter().map(|q| q.reordered).sum(),
        missing,
        missing_delta: queues.iter().map(|q| q.missing_delta).sum(),
        cpu_pct: thread_cpu(&queues),
        iface_rx_packets: path.as_ref().map(|d| d.rx_packets),
        drops,
        queues,
    }
}

/// What every queue of one sink interval shares: the mode, the span, the
/// frame size and link speed for the rates, and the path counters' growth
/// with the latest reading (which queues the driver counts drops of).
struct QueueSpan<'a> {
    mode: SinkMode,
    secs: f64,
    frame_size: u32,
    speed_mbps: Option<u32>,
    path: Option<(&'a PathCounters, &'a PathCounters)>,
}

/// One queue between two snapshots; its ring and XDP drops are added to
/// `drops`. A thread that reads several queues has its CPU time on the first.
fn queue_figures(
    p: &SinkQueueSnap,
    c: &SinkQueueSnap,
    span: &QueueSpan,
    drops: &mut Drops,
    threads_seen: &mut std::collections::BTreeSet<u32>,
) -> QueueFigures {
    let (mode, secs) = (span.mode, span.secs);
    // XDP-based modes: a redirect the queue's ring refused is the sink's
    // drop, which veth also books as a drop of that rx queue.
    let xdp_based = matches!(mode, SinkMode::Xdp | SinkMode::AfXdp);
    let n = counted(c, mode).saturating_sub(counted(p, mode));
    let md = (c.expected.saturating_sub(c.received) as i64)
        - (p.expected.saturating_sub(p.received) as i64);
    let ring = c.ring_drops.saturating_sub(p.ring_drops);
    let (xc, xp) = (c.xdp.unwrap_or_default(), p.xdp.unwrap_or_default());
    drops.ring_full += ring;
    drops.xdp_no_socket += xc.no_socket.saturating_sub(xp.no_socket);
    let no_socket = xc.no_socket.saturating_sub(xp.no_socket);
    let nic_drops = span
        .path
        .and_then(|(d, full)| {
            full.rx_queue_drops
                .contains_key(&c.queue)
                .then(|| d.rx_queue_drops.get(&c.queue).copied().unwrap_or(0))
        })
        .map(|d| {
            if xdp_based {
                let seen = d.min(ring + no_socket);
                drops.ring_seen_by_driver += seen;
                d - seen
            } else {
                d
            }
        });
    QueueFigures {
        queue: c.queue,
        cpu: c.cpu,
        counted: n,
        rates: Rates::of(n, secs, span.frame_size, span.speed_mbps),
        duplicates: c.duplicates.saturating_sub(p.duplicates),
        reordered: c.reordered.saturating_sub(p.reordered),
        missing_delta: md,
        ring_full: ring,
        nic_drops,
        thread: c.thread,
        cpu_pct: if c.thread.is_none_or(|t| threads_seen.insert(t)) {
            cpu_pct(p.cpu_ns, c.cpu_ns, secs)
        } else {
            None
        },
        napi_cpu: c.xdp.and_then(|x| x.top_cpu).map(|t| t.0),
    }
}

/// The generator host between two snapshots.
pub fn gen_interval(
    prev: &GenSnapshot,
    cur: &GenSnapshot,
    frame_size: u32,
    speed_mbps: Option<u32>,
) -> GenInterval {
    let secs = cur.elapsed_s - prev.elapsed_s;
    let threads: Vec<GenThreadFigures> = cur
        .threads
        .iter()
        .map(|c| {
            let p = prev
                .threads
                .iter()
                .find(|p| p.thread == c.thread)
                .copied()
                .unwrap_or_default();
            let sent = c.sent.saturating_sub(p.sent);
            GenThreadFigures {
                thread: c.thread,
                queue: c.queue,
                cpu: c.cpu,
                sent,
                rates: Rates::of(sent, secs, frame_size, speed_mbps),
                errors: c.errors.saturating_sub(p.errors),
                ring_full: c.ring_full.saturating_sub(p.ring_full),
                cpu_pct: cpu_pct(p.cpu_ns, c.cpu_ns, secs),
            }
        })
        .collect();
    let sent = threads.iter().map(|t| t.sent).sum();
    GenInterval {
        secs,
        path: cur.path,
        sent,
        rates: Rates::of(sent, secs, frame_size, speed_mbps),
        errors: threads.iter().map(|t| t.errors).sum(),
        tx_dropped: prev
            .host
            .as_ref()
            .zip(cur.host.as_ref())
            .map(|(p, c)| c.tx_dropped.saturating_sub(p.tx_dropped)),
        cpu_pct: sum_opt(threads.iter().map(|t| t.cpu_pct)),
        threads,
    }
}

/// What the generator reports at the end of a point.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GenTotals {
    /// The path that ran.
    pub path: TxPath,
    /// AF_XDP: zero-copy (true) or copy mode (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_copy: Option<bool>,
    /// Why faster paths were refused, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    /// Frames sent per flow (index = flow id): the flow's next sequence number.
    pub sent_per_flow: Vec<u64>,
    /// Failed send calls.
    pub errors: u64,
}

/// One flow at the end of a point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FlowRow {
    /// Flow id.
    pub flow: u16,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// Queues it arrived on.
    pub queues: Vec<u32>,
    /// Frames sent.
    pub sent: u64,
    /// Unique frames counted.
    pub received: u64,
    /// sent − received.
    pub lost: u64,
    /// Reordered.
    pub reordered: u64,
    /// Duplicates.
    pub duplicates: u64,
}

/// Loss accounting of a point: per flow, exact (the sink has drained).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LossTally {
    /// Frames sent.
    pub sent: u64,
    /// Unique frames counted.
    pub received: u64,
    /// Σ max(0, sent − received) per flow.
    pub lost: u64,
    /// Reordered.
    pub reordered: u64,
    /// Duplicates.
    pub duplicates: u64,
    /// Flows that lost at least one frame.
    pub flows_with_loss: u32,
    /// Every flow, by id.
    pub flows: Vec<FlowRow>,
}

/// Per-flow loss from what the generator sent and what the sink saw.
pub fn tally(sent_per_flow: &[u64], seen: &[FlowSeen], dst_port: u16) -> LossTally {
    let mut t = LossTally::default();
    for (f, &sent) in sent_per_flow.iter().enumerate() {
        let flow = f as u16;
        let s = seen.iter().find(|s| s.flow == flow);
        let received = s.map_or(0, |s| s.received);
        let lost = sent.saturating_sub(received);
        let row = FlowRow {
            flow,
            src_port: ports(flow, dst_port).0,
            dst_port,
            queues: s.map(|s| s.queues.clone()).unwrap_or_default(),
            sent,
            received,
            lost,
            reordered: s.map_or(0, |s| s.reordered),
            duplicates: s.map_or(0, |s| s.duplicates),
        };
        t.sent += sent;
        t.received += received;
        t.lost += lost;
        t.reordered += row.reordered;
        t.duplicates += row.duplicates;
        t.flows_with_loss += u32::from(lost > 0);
        t.flows.push(row);
    }
    t
}

/// Rows of lossy flows kept in a summary (the count of all of them is kept too).
pub const MAX_FLOW_ROWS: usize = 256;

/// One point, for the `--json` summary: what the sink counted, what was
/// sent, what was lost and where, per queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SinkSummary {
    /// Always `sink`.
    pub engine: String,
    /// Sink mode that ran.
    pub mode: SinkMode,
    /// Generator path that ran.
    pub tx_path: TxPath,
    /// AF_XDP generator: zero-copy (true) or copy mode (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_zero_copy: Option<bool>,
    /// AF_XDP sink: zero-copy (true) or copy mode (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_zero_copy: Option<bool>,
    /// Refused modes and paths, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    /// Frame size incl. FCS.
    pub frame_size: u32,
    /// Threads per side.
    pub queues: u32,
    /// Flows.
    pub flows: u32,
    /// CPUs of the sink threads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sink_cpus: Vec<CpuId>,
    /// Length of the measured window (s): the generator's sending time when
    /// this process saw it, else the sink's window.
    pub duration_s: f64,
    /// Packets per second counted by the sink over `duration_s`.
    pub rate_per_s: f64,
    /// Packets counted by the sink.
    pub messages: u64,
    /// L2 bit/s of what the sink counted.
    pub l2_bps: BitsPerSec,
    /// L1 bit/s of what the sink counted.
    pub l1_bps: BitsPerSec,
    /// L1 as % of the link, when known (null on virtual interfaces).
    #[serde(default)]
    pub line_rate_pct: Option<f64>,
    /// Frames sent (the generator's count).
    pub sent: u64,
    /// Frames lost: Σ per flow of sent − received.
    pub lost: u64,
    /// Reordered frames.
    pub reordered: u64,
    /// Duplicates.
    pub duplicates: u64,
    /// Packets per second the generator sent.
    pub generator_pps: f64,
    /// Generator threads' CPU (% of one core, summed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_cpu_pct: Option<f64>,
    /// Sink threads' CPU (% of one core, summed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink_cpu_pct: Option<f64>,
    /// Frames the sink's interface received in the window (all of them,
    /// test or not: /proc/net/dev), when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface_rx_packets: Option<u64>,
    /// Where frames were dropped.
    pub drops: Drops,
    /// Per queue of the sink; their `counted` sum to `messages` and their
    /// rates are over `duration_s`.
    pub per_queue: Vec<QueueFigures>,
    /// Flows whose frames arrived on more than one queue (each queue's
    /// thread tracks its part: the live gaps overstate loss; the final
    /// tally is exact).
    #[serde(default)]
    pub split_flows: u32,
    /// Flows that lost frames.
    pub flows_with_loss: u32,
    /// Those flows (at most [`MAX_FLOW_ROWS`], most lost first).
    #[serde(default)]
    pub lossy_flows: Vec<FlowRow>,
    /// The point was cut short.
    #[serde(default)]
    pub interrupted: bool,
}

/// What [`summarize`] reads.
#[derive(Debug, Clone, Copy)]
pub struct PointInputs<'a> {
    /// The sink's snapshots at the start and the end of the window.
    pub sink: (&'a SinkSnapshot, &'a SinkSnapshot),
    /// The generator's, when this host pair ran one.
    pub gen: Option<(&'a GenSnapshot, &'a GenSnapshot)>,
    /// The generator's totals.
    pub totals: Option<&'a GenTotals>,
    /// What the sink saw per flow.
    pub seen: &'a [FlowSeen],
    /// Link speed (Mb/s).
    pub speed_mbps: Option<u32>,
}

/// The summary of a point.
pub fn summarize(spec: &super::spec::SinkSpec, i: PointInputs) -> SinkSummary {
    let s = sink_interval(i.sink.0, i.sink.1, spec.frame_size, i.speed_mbps);
    let g = i
        .gen
        .map(|(a, b)| gen_interval(a, b, spec.frame_size, i.speed_mbps));
    // Rates over the time the generator sent (the sink's window also holds
    // the drain after it stopped); the sink's own window without one.
    let secs = g.as_ref().map_or(s.secs, |g| g.secs);
    let rates = Rates::of(s.counted, secs, spec.frame_size, i.speed_mbps);
    let sent_per_flow = i
        .totals
        .map(|t| t.sent_per_flow.clone())
        .unwrap_or_default();
    let t = tally(&sent_per_flow, i.seen, spec.dst_port);
    let mut lossy: Vec<FlowRow> = t.flows.iter().filter(|f| f.lost > 0).cloned().collect();
    lossy.sort_by(|a, b| b.lost.cmp(&a.lost).then(a.flow.cmp(&b.flow)));
    lossy.truncate(MAX_FLOW_ROWS);
    // The rows' rates over the same span as the total's.
    let mut per_queue = s.queues;
    for q in &mut per_queue {
        q.rates = Rates::of(q.counted, secs, spec.frame_size, i.speed_mbps);
    }
    let split_flows = t.flows.iter().filter(|f| f.queues.len() > 1).count() as u32;
    let mut drops = s.drops.clone();
    drops.generator_errors = i.totals.map_or(0, |t| t.errors);
    drops.tx_dropped = g.as_ref().and_then(|g| g.tx_dropped).unwrap_or(0);
    SinkSummary {
        engine: "sink".into(),
        mode: s.mode,
        tx_path: i.totals.map_or(TxPath::Auto, |t| t.path),
        tx_zero_copy: i.totals.and_then(|t| t.zero_copy),
        rx_zero_copy: None,
        refused: i.totals.map(|t| t.refused.clone()).unwrap_or_default(),
        frame_size: spec.frame_size,
        queues: spec.queues,
        flows: spec.flow_count(),
        sink_cpus: spec.cpus_for(spec.sink_side()).to_vec(),
        duration_s: secs,
        rate_per_s: rates.pps,
        messages: s.counted,
        l2_bps: rates.l2_bps,
        l1_bps: rates.l1_bps,
        line_rate_pct: rates.line_rate_pct,
        sent: t.sent,
        lost: t.lost,
        reordered: t.reordered,
        duplicates: t.duplicates,
        generator_pps: g.as_ref().map_or(0.0, |g| g.rates.pps),
        generator_cpu_pct: g.as_ref().and_then(|g| g.cpu_pct),
        sink_cpu_pct: s.cpu_pct,
        iface_rx_packets: s.iface_rx_packets,
        drops,
        per_queue,
        split_flows,
        flows_with_loss: t.flows_with_loss,
        lossy_flows: lossy,
        interrupted: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::sink::counters::XdpQueueSnap;

    fn q(queue: u32, received: u64, expected: u64, cpu_ns: u64) -> SinkQueueSnap {
        SinkQueueSnap {
            queue,
            frames: received,
            received,
            expected,
            cpu_ns: Some(cpu_ns),
            ..Default::default()
        }
    }

    #[test]
    fn rfc2544_rates() {
        // 64 B at 14.88 Mpps is 10 GbE line rate: L1 = 84 B × 8 × pps.
        let r = Rates::of(14_880_952, 1.0, 64, Some(10_000));
        assert!((r.l1_bps.0 - 10e9).abs() < 1000.0, "{:?}", r.l1_bps);
        assert!((r.l2_bps.0 - 7.619e9).abs() < 1e6);
        assert!((r.line_rate_pct.unwrap() - 100.0).abs() < 1e-3);
        assert_eq!(Rates::of(5, 0.0, 64, None), Rates::default());
        let r = Rates::of(100, 2.0, 1518, None);
        assert!(r.l1_bps.0 > r.l2_bps.0 && r.l2_bps.0 > 0.0 && r.line_rate_pct.is_none());
    }

    #[test]
    fn interval_sums_queues_and_tracks_missing() {
        let a = SinkSnapshot {
            elapsed_s: 1.0,
            mode: SinkMode::AfXdp,
            queues: vec![q(0, 100, 100, 0), q(1, 50, 52, 0)],
            path: Some(PathCounters {
                rx_packets: 1000,
                rx_queue_drops: [(0, 5), (1, 0)].into(),
                ..Default::default()
            }),
        };
        let b = SinkSnapshot {
            elapsed_s: 3.0,
            mode: SinkMode::AfXdp,
            queues: vec![q(0, 300, 301, 500_000_000), q(1, 152, 152, 1_000_000_000)],
            path: Some(PathCounters {
                rx_packets: 1400,
                rx_dropped: 3,
                softnet_dropped: 1,
                rx_queue_drops: [(0, 9), (1, 0)].into(),
                nic: [("rx_missed_errors".to_string(), 4)].into(),
                ..Default::default()
            }),
        };
        let i = sink_interval(&a, &b, 64, None);
        assert_eq!(i.counted, 302);
        assert_eq!(i.queues.iter().map(|q| q.counted).sum::<u64>(), i.counted);
        assert_eq!((i.missing, i.missing_delta), (1, -1));
        assert_eq!(i.queues[0].missing_delta, 1);
        assert_eq!(i.queues[1].missing_delta, -2, "late frames filled two gaps");
        assert!((i.rates.pps - 151.0).abs() < 1e-9);
        assert_eq!(i.cpu_pct, Some(75.0));
        assert_eq!(i.queues[0].nic_drops, Some(4));
        assert_eq!(i.queues[1].nic_drops, Some(0));
        assert_eq!(i.iface_rx_packets, Some(400));
        assert_eq!(i.drops.rx_dropped, 3);
        assert_eq!(i.drops.softnet_dropped, 1);
        assert_eq!(
            i.drops.nic.get("rx_missed_errors"),
            None,
            "first seen: no delta"
        );
    }

    #[test]
    fn overlapping_drop_counters_count_each_frame_once() {
        // veth, af-xdp: 4232 redirects found queue 0's ring full; veth books
        // them as queue-0 drops and interface rx drops as well.
        let snap = |ring: u64, qdrop: u64, rx_dropped: u64| SinkSnapshot {
            elapsed_s: 0.0,
            mode: SinkMode::AfXdp,
            queues: vec![SinkQueueSnap {
                ring_drops: ring,
                ..q(0, 0, 0, 0)
            }],
            path: Some(PathCounters {
                rx_dropped,
                rx_queue_drops: [(0, qdrop)].into(),
                ..Default::default()
            }),
        };
        let a = snap(0, 0, 0);
        let b = SinkSnapshot {
            elapsed_s: 1.0,
            ..snap(4232, 4232, 4232)
        };
        let i = sink_interval(&a, &b, 64, None);
        assert_eq!(i.drops.ring_full, 4232);
        assert_eq!(i.queues[0].nic_drops, Some(0), "not a NIC drop");
        assert!(i.drops.rx_queue_drops.is_empty());
        assert_eq!((i.drops.nic_loss(), i.drops.other_rx()), (0, 0));
        assert_eq!(i.drops.ring_seen_by_driver, 4232);
        assert_eq!(i.drops.sink_host(), 4232);
        // tpacket: its ring's drops never reach the interface's counters; the
        // interface dropped 1000 other frames (no handler, say).
        let d = Drops {
            rx_dropped: 1000,
            ring_full: 500,
            ..Default::default()
        };
        assert_eq!(
            (d.other_rx(), d.sink_host(), d.by_the_test()),
            (1000, 1500, 500)
        );
        // A NIC that missed 1000 frames (its named counter and the
        // interface's drop column) while a socket ring refused 500 more.
        let d = Drops {
            rx_dropped: 1000,
            nic: [("rx_out_of_buffer".to_string(), 1000)].into(),
            ring_full: 500,
            ..Default::default()
        };
        assert_eq!((d.nic_loss(), d.other_rx(), d.sink_host()), (1000, 0, 1500));
        // The generator's failed sends are its interface's tx drops.
        let g = Drops {
            generator_errors: 4233,
            tx_dropped: 4233,
            ..Default::default()
        };
        assert_eq!(g.total(), 4233);
    }

    #[test]
    fn a_thread_serving_several_queues_shows_its_cpu_once() {
        let row = |queue, thread, cpu_ns| SinkQueueSnap {
            thread: Some(thread),
            ..q(queue, 0, 0, cpu_ns)
        };
        let a = SinkSnapshot {
            elapsed_s: 0.0,
            mode: SinkMode::Tpacket,
            queues: vec![row(0, 0, 0), row(1, 0, 0), row(2, 1, 0)],
            path: None,
        };
        let b = SinkSnapshot {
            elapsed_s: 1.0,
            queues: vec![
                row(0, 0, 800_000_000),
                row(1, 0, 800_000_000),
                row(2, 1, 300_000_000),
            ],
            ..a.clone()
        };
        let i = sink_interval(&a, &b, 64, None);
        let cpu: Vec<Option<f64>> = i.queues.iter().map(|q| q.cpu_pct).collect();
        assert_eq!(cpu, [Some(80.0), None, Some(30.0)]);
        assert_eq!(i.queues[1].thread, Some(0));
        assert_eq!(i.cpu_pct, Some(110.0));
    }

    #[test]
    fn summary_rows_use_the_totals_span_and_find_split_flows() {
        let spec = crate::traffic::sink::SinkSpec::default();
        let s0 = SinkSnapshot {
            elapsed_s: 0.0,
            mode: SinkMode::AfXdp,
            queues: vec![q(0, 0, 0, 0), q(1, 0, 0, 0)],
            path: None,
        };
        // The sink's window is 2.3 s (its drain), the generator sent for 2 s.
        let s1 = SinkSnapshot {
            elapsed_s: 2.3,
            queues: vec![q(0, 1000, 1000, 0), q(1, 600, 600, 0)],
            ..s0.clone()
        };
        let g = |elapsed_s: f64| GenSnapshot {
            elapsed_s,
            path: TxPath::AfXdp,
            threads: Vec::new(),
            host: None,
        };
        let (g0, g1) = (g(0.0), g(2.0));
        let seen = [
            FlowSeen {
                flow: 0,
                queues: vec![0, 1],
                received: 1000,
                next: 1000,
                duplicates: 0,
                reordered: 0,
                late: 0,
            },
            FlowSeen {
                flow: 1,
                queues: vec![1],
                received: 600,
                next: 600,
                duplicates: 0,
                reordered: 0,
                late: 0,
            },
        ];
        let totals = GenTotals {
            path: TxPath::AfXdp,
            sent_per_flow: vec![1000, 600],
            ..Default::default()
        };
        let sum = summarize(
            &spec,
            PointInputs {
                sink: (&s0, &s1),
                gen: Some((&g0, &g1)),
                totals: Some(&totals),
                seen: &seen,
                speed_mbps: None,
            },
        );
        assert_eq!(sum.duration_s, 2.0);
        assert_eq!(sum.rate_per_s, 800.0);
        let pps: f64 = sum.per_queue.iter().map(|q| q.rates.pps).sum();
        assert_eq!(pps, sum.rate_per_s, "rows add up to the total's rate");
        assert_eq!(sum.split_flows, 1);
        let j = serde_json::to_value(&sum).unwrap();
        assert!(
            j["lossy_flows"].is_array() && j["line_rate_pct"].is_null(),
            "{j}"
        );
    }

    #[test]
    fn xdp_mode_counts_what_the_program_counted() {
        let x = |packets| SinkQueueSnap {
            queue: 0,
            xdp: Some(XdpQueueSnap {
                packets,
                top_cpu: Some((CpuId(1), packets)),
                ..Default::default()
            }),
            ..Default::default()
        };
        let a = SinkSnapshot {
            elapsed_s: 0.0,
            mode: SinkMode::Xdp,
            queues: vec![x(10)],
            path: None,
        };
        let b = SinkSnapshot {
            elapsed_s: 1.0,
            queues: vec![x(110)],
            ..a.clone()
        };
        let i = sink_interval(&a, &b, 64, None);
        assert_eq!(i.counted, 100);
        assert_eq!(i.queues[0].napi_cpu, Some(CpuId(1)));
        assert_eq!(i.cpu_pct, None);
    }

    #[test]
    fn generator_interval() {
        let t = |sent, errors| GenThreadSnap {
            thread: 0,
            sent,
            errors,
            cpu_ns: Some(sent * 1000),
            ..Default::default()
        };
        let a = GenSnapshot {
            elapsed_s: 0.0,
            path: TxPath::TxRing,
            threads: vec![t(0, 0)],
            host: None,
        };
        let b = GenSnapshot {
            elapsed_s: 0.5,
            threads: vec![t(1000, 2)],
            ..a.clone()
        };
        let g = gen_interval(&a, &b, 128, Some(1000));
        assert_eq!((g.sent, g.errors), (1000, 2));
        assert!((g.rates.pps - 2000.0).abs() < 1e-9);
        assert!((g.cpu_pct.unwrap() - 0.2).abs() < 1e-9);
    }

    #[test]
    fn tally_finds_lost_flows_including_the_tail() {
        let seen = vec![
            FlowSeen {
                flow: 0,
                queues: vec![2],
                received: 100,
                next: 100,
                duplicates: 0,
                reordered: 0,
                late: 0,
            },
            FlowSeen {
                flow: 1,
                queues: vec![3],
                received: 97,
                next: 99,
                duplicates: 1,
                reordered: 2,
                late: 0,
            },
        ];
        let t = tally(&[100, 100, 5], &seen, 9);
        assert_eq!((t.sent, t.received, t.lost), (205, 197, 8));
        assert_eq!(t.flows_with_loss, 2);
        assert_eq!(t.flows[1].lost, 3, "one gap, two never seen after the last");
        assert_eq!(t.flows[2].lost, 5, "a flow never seen is all lost");
        assert_eq!(t.flows[1].src_port, 32769);
        assert_eq!((t.reordered, t.duplicates), (2, 1));
    }
}

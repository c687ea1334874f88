//! Turning a finished point (outcome + its running aggregates) into a [`Summary`].
//!
//! Bytes are what the *receiving* end counted, like iperf3's receiver line:
//! the agent's final counters for local→peer streams, ours for peer→local.
//! The warm-up (`--omit`) is subtracted using the omitted intervals' own
//! counts on the same host, so omitted and counted bytes add up exactly.
//!
//! When a receiving host's final counters never arrived (the peer was lost),
//! its bytes are those its Samples reported and the duration is the span
//! those Samples cover — never bytes up to one moment divided by a longer
//! time — and the summary says so in `partial`.

use super::aggregate::{HostAggregate, PointAggregate};
use super::schema::{Hosts, StreamSummary, Summary, ZeroCopy};
use crate::session::outcome::{EndReason, PointOutcome};
use crate::session::plan::SweepValue;
use crate::session::proto::SideResult;
use crate::traffic::{ConnRole, EngineSpec, Side};
use crate::traffic::{PointEnds, Warmup};

/// Everything measured for one point.
pub struct PointData<'a> {
    /// The spec that ran.
    pub spec: &'a EngineSpec,
    /// Sweep coordinates.
    pub sweep: Option<SweepValue>,
    /// How it ended and the totals.
    pub outcome: &'a PointOutcome,
    /// Running sums of its intervals.
    pub agg: &'a PointAggregate,
}

/// What one receiving host counted, and over which span.
struct Received<'a> {
    result: Option<&'a SideResult>,
    agg: &'a HostAggregate,
}

impl Received<'_> {
    /// Counted bytes of `conn`: the final counter minus the warm-up, or the
    /// Samples' sum when the final counters never arrived.
    fn bytes(&self, conn: usize) -> u64 {
        match self.result.and_then(|r| r.conns.get(conn)) {
            Some(c) => c.rx_bytes.saturating_sub(self.agg.omitted_rx(conn)),
            None => self.agg.counted_rx(conn),
        }
    }

    /// Seconds from Go to the end of what was counted (engine finished, or
    /// the last Sample when the totals are missing).
    fn until_s(&self) -> f64 {
        match self.result {
            Some(r) => r.duration_s,
            None => self.agg.last_end_s,
        }
    }
}

/// Build the summary of one point: the streams as their receivers counted
/// them, the span those counts cover, the engine's own section and
/// headline, and how the point ended.
pub fn build(d: &PointData<'_>) -> Summary {
    let o = d.outcome;
    let spec = d.spec;
    let mode = spec.mode_name();
    let stream = spec.bulk_transfer();
    let slice = crate::traffic::slice(spec.kind());
    // Request/response engines whose client measured latency.
    let has_latency = slice.measures_latency(spec);
    let peer = o.peer.as_ref();
    let at_local = Received {
        result: Some(&o.local),
        agg: &d.agg.local,
    };
    let at_peer = Received {
        result: peer,
        agg: &d.agg.peer,
    };
    let streams = stream_rows(d, &at_local, &at_peer);
    let bytes: u64 = streams.iter().map(|s| s.bytes).sum();
    let (duration_s, partial) = counted_span(d, &at_local, &at_peer);
    let messages = if stream {
        0
    } else {
        o.local
            .conns
            .iter()
            .map(|c| c.messages)
            .sum::<u64>()
            .saturating_sub(d.agg.local.omitted_msgs)
    };
    let mut sections = crate::traffic::Sections::default();
    let head = slice.summarize(
        &PointEnds {
            spec,
            local: o.local.extra.as_ref(),
            peer: peer.and_then(|p| p.extra.as_ref()),
            local_warmup: warmup(&d.agg.local),
            peer_warmup: warmup(&d.agg.peer),
            duration_s,
            local_duration_s: o.local.duration_s,
            interrupted: matches!(o.end, EndReason::Interrupted),
        },
        &mut sections,
    );
    let (duration_s, bytes, messages) = head.counts.unwrap_or((duration_s, bytes, messages));
    let per_s = |v: f64| {
        if duration_s > 0.0 {
            v / duration_s
        } else {
            0.0
        }
    };
    let (peer_lost, interrupted, error) = match &o.end {
        EndReason::Completed => (false, false, None),
        EndReason::Interrupted => (false, true, None),
        EndReason::PeerLost(why) => (true, false, Some(format!("peer lost: {why}"))),
        EndReason::Failed(why) => (false, false, Some(why.clone())),
    };
    let throughput_bps = head
        .throughput_bps
        .unwrap_or_else(|| per_s(bytes as f64 * 8.0));
    let rate_per_s = head.rate_per_s.unwrap_or_else(|| per_s(messages as f64));
    Summary {
        engine: d.spec.kind().name().into(),
        mode: mode.into(),
        sweep: d.sweep.clone(),
        duration_s,
        bytes,
        throughput_bps,
        messages,
        rate_per_s,
        mib_per_s: spec
            .reports_mib_per_s()
            .then(|| per_s(bytes as f64 / 1048576.0)),
        sections,
        latency_us: if has_latency { o.local.latency } else { None },
        streams,
        hosts: Hosts {
            local: d.agg.local.cpu(),
            peer: d.agg.peer.cpu(),
        },
        peer_lost,
        interrupted,
        error,
        partial,
        findings: Vec::new(),
        limited_by: None,
    }
}

/// One row per data connection: its direction, what its receiver counted,
/// what its sender sent, retransmits and zero-copy completions.
fn stream_rows(d: &PointData<'_>, at_local: &Received, at_peer: &Received) -> Vec<StreamSummary> {
    let o = d.outcome;
    let mode = d.spec.mode_name();
    let zerocopy_on = d.spec.sends_zerocopy();
    let roles = d.spec.conn_roles(Side::Controller);
    let peer = o.peer.as_ref();
    let mut streams = Vec::with_capacity(roles.len());
    for (i, role) in roles.iter().enumerate() {
        let local_conn = o.local.conns.get(i);
        let peer_conn = peer.and_then(|p| p.conns.get(i));
        let local_tx = local_conn.map(|c| c.tx_bytes).unwrap_or(0);
        let peer_tx = peer_conn.map(|c| c.tx_bytes).unwrap_or(0);
        let local_re = o.local.retransmits.get(i).copied().unwrap_or(0);
        let peer_re = peer
            .and_then(|p| p.retransmits.get(i))
            .copied()
            .unwrap_or(0);
        // (direction, bytes received, bytes sent, retransmits, the sender's counters)
        let (direction, bytes, sent_bytes, retransmits, sender) = match role {
            ConnRole::Sender => (
                "local->peer".to_string(),
                at_peer.bytes(i),
                local_tx,
                local_re,
                local_conn,
            ),
            ConnRole::Receiver => (
                "peer->local".to_string(),
                at_local.bytes(i),
                peer_tx,
                peer_re,
                peer_conn,
            ),
            _ => (
                mode.to_string(),
                at_local.bytes(i),
                local_tx,
                local_re + peer_re,
                local_conn,
            ),
        };
        let zerocopy = sender.filter(|_| zerocopy_on).map(|c| ZeroCopy {
            completed: c.zc_completed,
            copied: c.zc_copied,
        });
        streams.push(StreamSummary {
            id: i,
            direction,
            bytes,
            sent_bytes,
            retransmits,
            zerocopy,
        });
    }
    if crate::traffic::slice(d.spec.kind()).one_counted_stream() {
        // One figure for the whole engine (entry 0); retransmits are per
        // connection and add up.
        if let Some(first) = streams.first().cloned() {
            let retransmits = streams.iter().map(|s| s.retransmits).sum();
            streams = vec![StreamSummary {
                retransmits,
                ..first
            }];
        }
    }
    streams
}

/// The counted seconds of the point and, when the receiving host's final
/// counters never arrived, what the figures cover instead.
fn counted_span(
    d: &PointData<'_>,
    at_local: &Received,
    at_peer: &Received,
) -> (f64, Option<String>) {
    let stream = d.spec.bulk_transfer();
    let roles = d.spec.conn_roles(Side::Controller);
    let forward = roles.contains(&ConnRole::Sender);
    let backward = roles.contains(&ConnRole::Receiver);
    // The receiving host(s) of the point: the peer for local->peer streams.
    let (receivers, peer_receives): (Vec<&Received>, bool) = match (stream, forward, backward) {
        (true, true, false) => (vec![at_peer], true),
        (true, true, true) => (vec![at_peer, at_local], true),
        _ => (vec![at_local], false),
    };
    let receiver_time = receivers.iter().map(|r| r.until_s()).fold(0.0, f64::max);
    // The warm-up is what the receiver's omitted intervals covered (omitted by
    // interval number on both hosts), not the nominal --omit.
    let omitted_s = receivers
        .iter()
        .map(|r| r.agg.warmup_end_s)
        .fold(0.0, f64::max);
    let duration_s = (receiver_time - omitted_s).max(0.0);
    let partial = (peer_receives && d.outcome.peer.is_none()).then(|| {
        format!(
            "the agent's final counters never arrived: bytes and rates cover {omitted_s:.2}-{:.2} s, the intervals its Samples reported",
            d.agg.peer.last_end_s
        )
    });
    (duration_s, partial)
}

/// What `h`'s omitted intervals counted, as an engine leaves it out.
fn warmup(h: &HostAggregate) -> Warmup<'_> {
    Warmup {
        msgs: h.omitted_msgs,
        tx: h.omitted_tx,
        rx: &h.omitted_rx,
        end_s: h.warmup_end_s,
    }
}

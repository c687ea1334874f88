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
use crate::traffic::{ConnRole, EngineSpec, Side, TcpMode};

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

/// Build the summary of one point.
pub fn build(d: &PointData<'_>) -> Summary {
    let o = d.outcome;
    let spec = d.spec;
    let mode = spec.mode_name();
    let stream = spec.is_tcp_stream();
    let zerocopy_on = spec.as_tcp().is_some_and(|t| t.zerocopy);
    let pingpong = spec.as_tcp().is_some_and(|t| t.mode == TcpMode::Pingpong);
    // Request/response engines whose client measured latency.
    let has_latency = match spec {
        EngineSpec::Tcp(t) => t.mode == TcpMode::Rr,
        EngineSpec::Grpc(_) => true,
        EngineSpec::Sink(_) | EngineSpec::Rdma(_) => false,
    };
    let roles = d.spec.conn_roles(Side::Controller);
    let peer = o.peer.as_ref();
    let at_local = Received {
        result: Some(&o.local),
        agg: &d.agg.local,
    };
    let at_peer = Received {
        result: peer,
        agg: &d.agg.peer,
    };
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
        let zerocopy = zerocopy_on
            .then(|| {
                sender.map(|c| ZeroCopy {
                    completed: c.zc_completed,
                    copied: c.zc_copied,
                })
            })
            .flatten();
        streams.push(StreamSummary {
            id: i,
            direction,
            bytes,
            sent_bytes,
            retransmits,
            zerocopy,
        });
    }
    if let EngineSpec::Grpc(_) = spec {
        // One runtime carries every HTTP/2 connection: the client counts
        // bytes for the engine, not per connection (entry 0); retransmits
        // are per connection and add up.
        if let Some(first) = streams.first().cloned() {
            let retransmits = streams.iter().map(|s| s.retransmits).sum();
            streams = vec![StreamSummary {
                retransmits,
                ..first
            }];
        }
    }
    let bytes: u64 = streams.iter().map(|s| s.bytes).sum();
    let forward = roles.contains(&ConnRole::Sender);
    let backward = roles.contains(&ConnRole::Receiver);
    // The receiving host(s) of the point: the peer for local->peer streams.
    let (receivers, peer_receives): (Vec<&Received>, bool) = match (stream, forward, backward) {
        (true, true, false) => (vec![&at_peer], true),
        (true, true, true) => (vec![&at_peer, &at_local], true),
        _ => (vec![&at_local], false),
    };
    let receiver_time = receivers.iter().map(|r| r.until_s()).fold(0.0, f64::max);
    // The warm-up is what the receiver's omitted intervals covered (omitted by
    // interval number on both hosts), not the nominal --omit.
    let omitted_s = receivers
        .iter()
        .map(|r| r.agg.warmup_end_s)
        .fold(0.0, f64::max);
    let duration_s = (receiver_time - omitted_s).max(0.0);
    let partial = (peer_receives && peer.is_none()).then(|| {
        format!(
            "the agent's final counters never arrived: bytes and rates cover {omitted_s:.2}-{:.2} s, the intervals its Samples reported",
            d.agg.peer.last_end_s
        )
    });
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
    let sink = spec
        .as_sink()
        .and_then(|k| sink_summary(k, o, d.agg).map(Box::new));
    let rdma = spec.as_rdma().and_then(|_| rdma_summary(o).map(Box::new));
    let (duration_s, bytes, messages) = match (&sink, rdma.as_ref().and_then(|r| r.local.as_ref()))
    {
        (Some(k), _) => (
            k.duration_s,
            k.messages.saturating_mul(u64::from(k.frame_size)),
            k.messages,
        ),
        (None, Some(l)) => (o.local.duration_s, l.tx_bytes + l.rx_bytes, l.messages),
        (None, None) => (duration_s, bytes, messages),
    };
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
    // RDMA: the rates are perftest's (its report's window, not the loop's set-up).
    let (throughput_bps, rate_per_s) = match rdma.as_ref().and_then(|r| r.bw) {
        Some(b) => (b.bw_avg_gbps * 1e9, b.msg_rate_mpps * 1e6),
        None => (per_s(bytes as f64 * 8.0), per_s(messages as f64)),
    };
    Summary {
        engine: d.spec.kind().name().into(),
        mode: mode.into(),
        sweep: d.sweep.clone(),
        duration_s,
        bytes,
        throughput_bps,
        messages,
        rate_per_s,
        mib_per_s: pingpong.then(|| per_s(bytes as f64 / 1048576.0)),
        grpc: grpc_summary(o, d.agg, duration_s),
        sink,
        rdma,
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

/// The packet figures of a point, from both ends' totals: the sink's
/// counters at the start and after its drain, the generator's, and the
/// per-flow tally (exact: every frame sent, the warm-up included). Rates
/// leave the warm-up out, like every other engine's.
fn sink_summary(
    spec: &crate::traffic::sink::SinkSpec,
    o: &PointOutcome,
    agg: &PointAggregate,
) -> Option<crate::traffic::sink::figures::SinkSummary> {
    use crate::traffic::sink::figures::{summarize, PointInputs, Rates};
    use crate::traffic::EngineTotals;
    let sides = [(Some(&o.local), &agg.local), (o.peer.as_ref(), &agg.peer)];
    let (sink, sink_agg) = sides.iter().find_map(|&(r, a)| match r?.extra.as_ref()? {
        EngineTotals::Sink(s) => Some((s, a)),
        _ => None,
    })?;
    let gen = sides.iter().find_map(|&(r, _)| match r?.extra.as_ref()? {
        EngineTotals::Generator(g) => Some(g),
        _ => None,
    });
    let mut s = summarize(
        spec,
        PointInputs {
            sink: (&sink.first, &sink.last),
            gen: gen.map(|g| (&g.first, &g.last)),
            totals: gen.and_then(|g| g.totals.as_ref()),
            seen: sink.seen.as_ref().map_or(&[], |t| t.seen.as_slice()),
            speed_mbps: sink.end.speed_mbps,
        },
    );
    let mut refused = sink.end.refused.clone();
    refused.append(&mut s.refused);
    s.refused = refused;
    s.interrupted = matches!(o.end, EndReason::Interrupted);
    s.rx_zero_copy = sink.end.zero_copy;
    if sink_agg.omitted_msgs > 0 || sink_agg.warmup_end_s > 0.0 {
        let rates = |n: u64, secs: f64| Rates::of(n, secs, spec.frame_size, sink.end.speed_mbps);
        s.messages = s.messages.saturating_sub(sink_agg.omitted_msgs);
        s.duration_s = (s.duration_s - sink_agg.warmup_end_s).max(0.0);
        let r = rates(s.messages, s.duration_s);
        s.rate_per_s = r.pps;
        s.l2_bps = r.l2_bps;
        s.l1_bps = r.l1_bps;
        s.line_rate_pct = r.line_rate_pct;
        // The queues' rows are the sink's connections, in the same order:
        // leave each one's warm-up out too, so they sum to `messages`.
        let fs = u64::from(spec.frame_size).max(1);
        for (i, q) in s.per_queue.iter_mut().enumerate() {
            let warm = sink_agg.omitted_rx.get(i).copied().unwrap_or(0) / fs;
            q.counted = q.counted.saturating_sub(warm);
            q.rates = rates(q.counted, s.duration_s);
        }
    }
    Some(s)
}

/// An RDMA point: the requester's perftest report (both directions summed
/// with `--bidir`, as perftest's `-b` prints it) and both ends' outcomes.
fn rdma_summary(o: &PointOutcome) -> Option<super::schema::RdmaSummary> {
    use crate::traffic::EngineTotals;
    let outcome = |r: Option<&SideResult>| match r.and_then(|r| r.extra.as_ref()) {
        Some(EngineTotals::Rdma(x)) => Some((**x).clone()),
        _ => None,
    };
    let local = outcome(Some(&o.local));
    let peer = outcome(o.peer.as_ref());
    if local.is_none() && peer.is_none() {
        return None;
    }
    let bw = match (
        local.as_ref().and_then(|l| l.bw),
        peer.as_ref().and_then(|p| p.bw),
    ) {
        (Some(l), Some(p)) => Some(l.plus(&p)),
        (l, p) => l.or(p),
    };
    Some(super::schema::RdmaSummary {
        bw,
        lat: local.as_ref().and_then(|l| l.lat),
        lat_duration: local.as_ref().and_then(|l| l.lat_duration),
        local,
        peer,
    })
}

/// The gRPC figures of a point: RPC rate and payload goodput both ways over
/// the measured span, non-OK statuses, and each end's peak memory.
fn grpc_summary(
    o: &PointOutcome,
    agg: &PointAggregate,
    duration_s: f64,
) -> Option<super::schema::GrpcSummary> {
    use crate::traffic::EngineTotals;
    let totals = |r: Option<&SideResult>| match r.and_then(|r| r.extra.as_ref()) {
        Some(EngineTotals::Grpc(t)) => Some(t.clone()),
        _ => None,
    };
    let client = totals(Some(&o.local))?;
    let server = totals(o.peer.as_ref());
    let per_s = |v: u64| {
        if duration_s > 0.0 {
            v as f64 / duration_s
        } else {
            0.0
        }
    };
    let omitted = agg.local.omitted_tx;
    Some(super::schema::GrpcSummary {
        rpcs_per_s: per_s(client.rpcs.saturating_sub(agg.local.omitted_msgs)),
        request_bytes_per_s: per_s(client.tx_payload.saturating_sub(omitted)),
        response_bytes_per_s: per_s(client.rx_payload.saturating_sub(agg.local.omitted_rx(0))),
        errors: client.errors,
        client_peak_rss: client.peak_rss,
        agent_peak_rss: server.and_then(|s| s.peak_rss),
    })
}

//! Turning a finished point (outcome + its intervals) into a [`Summary`].
//!
//! Bytes are what the *receiving* end counted, like iperf3's receiver line:
//! the agent's final counters for local→peer streams, ours for peer→local.
//! The warm-up (`--omit`) is subtracted using the omitted intervals' own
//! counts on the same host, so omitted and counted bytes add up exactly.

use super::schema::{CoreMean, HostCpu, Hosts, StreamSummary, Summary, SweepValue, ZeroCopy};
use crate::probe::sample::Sample;
use crate::session::controller::{EndReason, PointOutcome};
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
    /// Local Samples, in order.
    pub local: &'a [Sample],
    /// Peer Samples, in order.
    pub peer: &'a [Sample],
}

fn omitted_rx(samples: &[Sample], conn: usize) -> u64 {
    samples
        .iter()
        .filter(|s| s.omitted)
        .filter_map(|s| s.conns.get(conn))
        .map(|c| c.rx_bytes)
        .sum()
}

fn sampled_rx(samples: &[Sample], conn: usize) -> u64 {
    samples
        .iter()
        .filter_map(|s| s.conns.get(conn))
        .map(|c| c.rx_bytes)
        .sum()
}

/// Receiver-side total of `conn`: the final counter when the side reported it, else the sum of its Samples.
fn received(result: Option<&SideResult>, samples: &[Sample], conn: usize) -> u64 {
    let total = result
        .and_then(|r| r.conns.get(conn))
        .map(|c| c.rx_bytes)
        .unwrap_or_else(|| sampled_rx(samples, conn));
    total.saturating_sub(omitted_rx(samples, conn))
}

/// Per-core means over the counted intervals, weighted by interval length
/// (so a short closing interval counts for what it is).
fn host_cpu(samples: &[Sample]) -> HostCpu {
    let counted: Vec<&Sample> = samples
        .iter()
        .filter(|s| !s.omitted && !s.cpus.is_empty())
        .collect();
    let total: f64 = counted.iter().map(|s| (s.end_s - s.start_s).max(0.0)).sum();
    if counted.is_empty() || total <= 0.0 {
        return HostCpu::default();
    }
    let mut cores: Vec<CoreMean> = counted[0]
        .cpus
        .iter()
        .map(|c| CoreMean {
            cpu: c.cpu.0,
            busy: 0.0,
            user: 0.0,
            system: 0.0,
            irq: 0.0,
            softirq: 0.0,
        })
        .collect();
    for s in &counted {
        let w = (s.end_s - s.start_s).max(0.0) / total;
        for c in &s.cpus {
            if let Some(m) = cores.iter_mut().find(|m| m.cpu == c.cpu.0) {
                m.busy += c.busy().0 * w;
                m.user += (c.user.0 + c.nice.0) * w;
                m.system += c.system.0 * w;
                m.irq += c.irq.0 * w;
                m.softirq += c.softirq.0 * w;
            }
        }
    }
    let mean_busy = cores.iter().map(|c| c.busy).sum::<f64>() / cores.len().max(1) as f64;
    HostCpu {
        mean_busy,
        cpus: cores,
        intervals: counted.len(),
    }
}

/// Build the summary of one point.
pub fn build(d: &PointData<'_>) -> Summary {
    let o = d.outcome;
    let EngineSpec::Tcp(tcp) = d.spec;
    let roles = d.spec.conn_roles(Side::Controller);
    let peer = o.peer.as_ref();
    let mut streams = Vec::with_capacity(roles.len());
    for (i, role) in roles.iter().enumerate() {
        let local_tx = o.local.conns.get(i).map(|c| c.tx_bytes).unwrap_or(0);
        let peer_tx = peer
            .and_then(|p| p.conns.get(i))
            .map(|c| c.tx_bytes)
            .unwrap_or(0);
        let local_re = o.local.retransmits.get(i).copied().unwrap_or(0);
        let peer_re = peer
            .and_then(|p| p.retransmits.get(i))
            .copied()
            .unwrap_or(0);
        let local_conn = o.local.conns.get(i);
        let peer_conn = peer.and_then(|p| p.conns.get(i));
        // (direction, bytes received, bytes sent, retransmits, the sender's counters)
        let (direction, bytes, sent_bytes, retransmits, sender) = match role {
            ConnRole::Sender => (
                "local->peer".to_string(),
                received(peer, d.peer, i),
                local_tx,
                local_re,
                local_conn,
            ),
            ConnRole::Receiver => (
                "peer->local".to_string(),
                received(Some(&o.local), d.local, i),
                peer_tx,
                peer_re,
                peer_conn,
            ),
            _ => (
                tcp.mode.name().to_string(),
                received(Some(&o.local), d.local, i),
                local_tx,
                local_re + peer_re,
                local_conn,
            ),
        };
        let zerocopy = if tcp.zerocopy {
            sender.map(|c| ZeroCopy {
                completed: c.zc_completed,
                copied: c.zc_copied,
            })
        } else {
            None
        };
        streams.push(StreamSummary {
            id: i,
            direction,
            bytes,
            sent_bytes,
            retransmits,
            zerocopy,
        });
    }
    let bytes: u64 = streams.iter().map(|s| s.bytes).sum();
    let forward = roles.contains(&ConnRole::Sender);
    let backward = roles.contains(&ConnRole::Receiver);
    let receiver_time = match (tcp.mode, forward, backward, peer) {
        (TcpMode::Stream, true, false, Some(p)) => p.duration_s,
        (TcpMode::Stream, true, true, Some(p)) => p.duration_s.max(o.local.duration_s),
        _ => o.local.duration_s,
    };
    // The warm-up is what the receiver's omitted intervals covered (omitted by
    // interval number on both hosts), not the nominal --omit.
    let warmup = |v: &[Sample]| {
        v.iter()
            .filter(|x| x.omitted)
            .map(|x| x.end_s)
            .fold(0.0, f64::max)
    };
    let omitted_s = match (tcp.mode, forward, backward) {
        (TcpMode::Stream, true, false) => warmup(d.peer),
        (TcpMode::Stream, true, true) => warmup(d.peer).max(warmup(d.local)),
        _ => warmup(d.local),
    };
    let duration_s = (receiver_time - omitted_s).max(0.0);
    let omitted_msgs: u64 = d
        .local
        .iter()
        .filter(|s| s.omitted)
        .map(|s| s.engine.messages)
        .sum();
    let messages = if tcp.mode == TcpMode::Stream {
        0
    } else {
        o.local
            .conns
            .iter()
            .map(|c| c.messages)
            .sum::<u64>()
            .saturating_sub(omitted_msgs)
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
    Summary {
        engine: d.spec.kind().name().into(),
        mode: tcp.mode.name().into(),
        sweep: d.sweep.clone(),
        duration_s,
        bytes,
        throughput_bps: per_s(bytes as f64 * 8.0),
        messages,
        rate_per_s: per_s(messages as f64),
        mib_per_s: (tcp.mode == TcpMode::Pingpong).then(|| per_s(bytes as f64 / 1048576.0)),
        latency_us: if tcp.mode == TcpMode::Rr {
            o.local.latency
        } else {
            None
        },
        streams,
        hosts: Hosts {
            local: host_cpu(d.local),
            peer: host_cpu(d.peer),
        },
        peer_lost,
        interrupted,
        error,
        findings: Vec::new(),
    }
}

//! The engine's share of a Sample: its counters, read first in every
//! interval and timestamped where they are read, then TCP_INFO of its sockets.
//!
//! [`EngineView`] is what the sampler keeps of a running engine: the shared
//! counters, duplicates of its data sockets (so TCP_INFO can be read even
//! after a worker closed its copy) and the previous values for deltas. It is
//! built on the session's thread and handed to the sampler thread.

use crate::probe::sample::{ConnSample, EngineSample, LatencySummary};
use crate::probe::tcpinfo;
use crate::traffic::{ConnRole, ConnSnapshot, EngineCounters, RunningEngine};
use crate::units::BitsPerSec;
use hdrhistogram::Histogram;
use std::net::TcpStream;
use std::sync::Arc;

/// What the sampler watches of a running engine.
pub struct EngineView {
    counters: Arc<EngineCounters>,
    probe: Option<Arc<dyn crate::traffic::EngineProbe>>,
    sockets: Vec<TcpStream>,
    roles: Vec<ConnRole>,
    prev: Vec<ConnSnapshot>,
    prev_retrans: Vec<u32>,
}

impl std::fmt::Debug for EngineView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineView")
            .field("conns", &self.roles.len())
            .finish()
    }
}

/// The counters of one interval, read before anything slow.
pub struct EngineRead {
    cur: Vec<ConnSnapshot>,
    latency: Option<Histogram<u64>>,
}

impl EngineView {
    /// A view of `engine` (None when its sockets cannot be duplicated: out of
    /// descriptors; the engine then runs unobserved rather than not at all).
    pub fn of(engine: &RunningEngine) -> Option<Self> {
        let sockets = engine
            .sockets
            .iter()
            .filter_map(|s| s.try_clone().ok())
            .collect::<Vec<_>>();
        (sockets.len() == engine.sockets.len()).then(|| EngineView {
            counters: Arc::clone(&engine.counters),
            probe: engine.probe.clone(),
            prev: vec![ConnSnapshot::default(); sockets.len()],
            prev_retrans: vec![0; sockets.len()],
            roles: engine.roles.clone(),
            sockets,
        })
    }

    /// Read the counters now (relaxed atomic loads and one histogram swap per
    /// latency worker): the first thing an interval does.
    pub fn read(&self) -> EngineRead {
        if let Some(cur) = self.probe.as_ref().and_then(|p| p.counters()) {
            return EngineRead {
                cur,
                latency: self.probe.as_ref().and_then(|p| p.take_latency()),
            };
        }
        EngineRead {
            cur: self.counters.snapshot(),
            latency: (!self.counters.latency.is_empty()).then(|| self.counters.take_latency()),
        }
    }

    /// Turn a read into this interval's figures over `secs` (the span between
    /// two counter reads); TCP_INFO is read here, after the counters.
    /// Latencies of counted intervals are added to `total`.
    pub fn interval(
        &mut self,
        read: EngineRead,
        secs: f64,
        omitted: bool,
        total: &mut Histogram<u64>,
    ) -> (EngineSample, Vec<ConnSample>) {
        let mut e = EngineSample::default();
        let mut conns = Vec::with_capacity(read.cur.len());
        for (i, c) in read.cur.iter().enumerate() {
            let p = self.prev.get(i).copied().unwrap_or_default();
            let tx = c.tx_bytes.saturating_sub(p.tx_bytes);
            let rx = c.rx_bytes.saturating_sub(p.rx_bytes);
            e.tx_bytes += tx;
            e.rx_bytes += rx;
            e.messages += c.messages.saturating_sub(p.messages);
            let prev_re = self.prev_retrans.get(i).copied().unwrap_or(0);
            let tcp = self.sockets.get(i).and_then(|s| tcpinfo::read(s).ok());
            let retrans = tcp.map(|t| t.total_retrans).unwrap_or(prev_re);
            conns.push(ConnSample {
                id: i,
                role: self.roles.get(i).copied().unwrap_or(ConnRole::Sender),
                tx_bytes: tx,
                rx_bytes: rx,
                retransmits: retrans.saturating_sub(prev_re),
                tcp,
            });
            if let Some(r) = self.prev_retrans.get_mut(i) {
                *r = retrans;
            }
        }
        self.prev = read.cur;
        e.extra = self.probe.as_ref().and_then(|p| p.interval(secs));
        // One span for every rate of the interval: the engine's own when its
        // figures cover less (a sink's drain tail), so the Sample's message
        // rate and the engine's pps agree.
        let secs = rate_span(secs, e.extra.as_ref());
        e.tx_bps = BitsPerSec::from_bytes(e.tx_bytes, secs);
        e.rx_bps = BitsPerSec::from_bytes(e.rx_bytes, secs);
        e.msgs_per_s = if secs > 0.0 {
            e.messages as f64 / secs
        } else {
            0.0
        };
        if let Some(h) = read.latency {
            e.latency = LatencySummary::from_histogram(&h);
            if !omitted {
                // Same bounds on both histograms: add cannot fail.
                let _ = total.add(&h);
            }
        }
        (e, conns)
    }
}

/// The span (s) an interval's rates are computed over: the sampler's span
/// between two counter reads, or the engine's own when it is positive and
/// shorter (see [`crate::traffic::EngineInterval::own_span_s`]).
fn rate_span(secs: f64, extra: Option<&crate::traffic::EngineInterval>) -> f64 {
    extra
        .and_then(|x| x.own_span_s())
        .filter(|own| *own > 0.0 && *own < secs)
        .unwrap_or(secs)
}

#[cfg(test)]
mod tests {
    use super::rate_span;
    use crate::traffic::EngineInterval;

    fn sink(secs: f64) -> EngineInterval {
        serde_json::from_value(serde_json::json!({"engine": "sink", "iface": "veth-b",
            "figures": {"secs": secs, "mode": "udp", "counted": 672_500, "pps": 672_500.0,
            "l2_bps": 0.0, "l1_bps": 0.0, "duplicates": 0, "reordered": 0, "missing": 0,
            "missing_delta": 0, "drops": {"generator_errors": 0, "tx_dropped": 0,
            "rx_dropped": 0, "softnet_dropped": 0, "ring_full": 0, "xdp_no_socket": 0},
            "queues": []}}))
        .expect("sink interval json")
    }

    #[test]
    fn a_sinks_message_rate_is_over_the_span_its_counts_moved_in() {
        // The drain's quiet tail: 1.38 s between the sampler's reads, the
        // sink's counts moved for 1.0 s of it.
        assert_eq!(rate_span(1.38, Some(&sink(1.0))), 1.0);
        // Never longer than the sampler's span, never zero.
        assert_eq!(rate_span(1.0, Some(&sink(1.2))), 1.0);
        assert_eq!(rate_span(1.0, Some(&sink(0.0))), 1.0);
        assert_eq!(rate_span(1.0, None), 1.0);
    }
}

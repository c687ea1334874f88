//! The sampler: once per interval, every probe plus the engine counters → one Sample.
//!
//! It is driven by the session's ticker (the sampling period is a setting of
//! the session, not of the sampler) and does only delta arithmetic per call:
//! one read of /proc/stat, one atomic snapshot per connection, one
//! `getsockopt(TCP_INFO)` per socket. It never blocks the engines: the
//! counters are relaxed atomics and the latency histograms are swapped under
//! a lock the workers hold for a few microseconds every 10 ms.

use super::cpu::{cpu_deltas, parse_proc_stat, CpuTicks};
use super::sample::{ConnSample, EngineSample, HostRole, LatencySummary, Sample};
use super::source::HostSource;
use super::tcpinfo;
use crate::traffic::{
    new_latency_histogram, ConnRole, ConnSnapshot, EngineCounters, RunningEngine,
};
use crate::units::{BitsPerSec, CpuId};
use hdrhistogram::Histogram;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct EngineView {
    counters: Arc<EngineCounters>,
    sockets: Vec<TcpStream>,
    roles: Vec<ConnRole>,
    prev: Vec<ConnSnapshot>,
    prev_retrans: Vec<u32>,
}

/// Produces Samples for this host.
pub struct Sampler {
    source: Box<dyn HostSource>,
    prev_cpu: Vec<(CpuId, CpuTicks)>,
    engine: Option<EngineView>,
    index: u32,
    t0: Instant,
    last: Instant,
    omit: Duration,
    latency_total: Histogram<u64>,
}

impl Sampler {
    /// A sampler reading from `source`; takes the first /proc/stat snapshot now.
    pub fn new(source: Box<dyn HostSource>) -> Self {
        let now = Instant::now();
        let s = Sampler {
            source,
            prev_cpu: Vec::new(),
            engine: None,
            index: 0,
            t0: now,
            last: now,
            omit: Duration::ZERO,
            latency_total: new_latency_histogram(),
        };
        let _ = s.read_cpu();
        s
    }

    /// Start a new test point at `t0`: interval numbering restarts, the engine (if any) is watched.
    pub fn begin(&mut self, engine: Option<&RunningEngine>, omit: Duration) {
        let now = Instant::now();
        let _ = self.read_cpu().map(|c| self.prev_cpu = c);
        self.t0 = now;
        self.last = now;
        self.index = 0;
        self.omit = omit;
        self.latency_total.reset();
        self.engine = engine.and_then(|e| {
            let sockets = e
                .sockets
                .iter()
                .filter_map(|s| s.try_clone().ok())
                .collect::<Vec<_>>();
            (sockets.len() == e.sockets.len()).then(|| EngineView {
                counters: Arc::clone(&e.counters),
                prev: vec![ConnSnapshot::default(); e.sockets.len()],
                prev_retrans: vec![0; e.sockets.len()],
                roles: e.roles.clone(),
                sockets,
            })
        });
    }

    /// Stop watching the engine and release the socket duplicates.
    pub fn end(&mut self) {
        self.engine = None;
    }

    fn read_cpu(&self) -> Result<Vec<(CpuId, CpuTicks)>, String> {
        let text = self.source.read("/proc/stat").map_err(|e| {
            format!(
                "cpu: cannot read /proc/stat from {}: {e}",
                self.source.describe()
            )
        })?;
        parse_proc_stat(&text).map_err(|e| format!("cpu: {e}"))
    }

    /// Seconds since the current point began.
    pub fn elapsed(&self) -> Duration {
        self.t0.elapsed()
    }

    /// Take one Sample covering the time since the previous one.
    pub fn sample(&mut self) -> Sample {
        let now = Instant::now();
        let secs = now.duration_since(self.last).as_secs_f64();
        let start_s = self.last.duration_since(self.t0).as_secs_f64();
        let end_s = now.duration_since(self.t0).as_secs_f64();
        let omitted = now.duration_since(self.t0) <= self.omit && !self.omit.is_zero();
        let mut probe_errors = Vec::new();
        let cpus = match self.read_cpu() {
            Ok(cur) => {
                let d = cpu_deltas(&self.prev_cpu, &cur);
                self.prev_cpu = cur;
                d
            }
            Err(e) => {
                probe_errors.push(e);
                Vec::new()
            }
        };
        let (engine, conns) = match self.engine.as_mut() {
            Some(v) => Self::engine_sample(v, secs, omitted, &mut self.latency_total),
            None => (EngineSample::default(), Vec::new()),
        };
        let s = Sample {
            host: HostRole::Local,
            index: self.index,
            start_s,
            end_s,
            omitted,
            engine,
            cpus,
            conns,
            probe_errors,
        };
        self.index += 1;
        self.last = now;
        s
    }

    fn engine_sample(
        v: &mut EngineView,
        secs: f64,
        omitted: bool,
        total: &mut Histogram<u64>,
    ) -> (EngineSample, Vec<ConnSample>) {
        let cur = v.counters.snapshot();
        let mut e = EngineSample::default();
        let mut conns = Vec::with_capacity(cur.len());
        for (i, c) in cur.iter().enumerate() {
            let p = v.prev[i];
            let tx = c.tx_bytes.saturating_sub(p.tx_bytes);
            let rx = c.rx_bytes.saturating_sub(p.rx_bytes);
            e.tx_bytes += tx;
            e.rx_bytes += rx;
            e.messages += c.messages.saturating_sub(p.messages);
            let tcp = tcpinfo::read(&v.sockets[i]).ok();
            let retrans = tcp.map(|t| t.total_retrans).unwrap_or(v.prev_retrans[i]);
            conns.push(ConnSample {
                id: i,
                role: v.roles[i],
                tx_bytes: tx,
                rx_bytes: rx,
                retransmits: retrans.saturating_sub(v.prev_retrans[i]),
                tcp,
            });
            v.prev_retrans[i] = retrans;
        }
        v.prev = cur;
        e.tx_bps = BitsPerSec::from_bytes(e.tx_bytes, secs);
        e.rx_bps = BitsPerSec::from_bytes(e.rx_bytes, secs);
        e.msgs_per_s = if secs > 0.0 {
            e.messages as f64 / secs
        } else {
            0.0
        };
        if !v.counters.latency.is_empty() {
            let h = v.counters.take_latency();
            e.latency = LatencySummary::from_histogram(&h);
            if !omitted {
                let _ = total.add(&h);
            }
        }
        (e, conns)
    }

    /// Latency over every non-omitted interval of the current point.
    pub fn latency_total(&self) -> Option<LatencySummary> {
        LatencySummary::from_histogram(&self.latency_total)
    }
}

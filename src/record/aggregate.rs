//! Running aggregates of one test point, updated per interval, so a summary
//! never needs the point's Samples: a 24-hour run keeps a few numbers per
//! connection and per core, not 86 400 Samples.
//!
//! What the summary needs of the intervals: per connection, the bytes each
//! host received in omitted intervals and in all intervals (the fallback when
//! a host's final counters never arrived); per host, the interval-length
//! weighted CPU means over counted intervals, where the warm-up ended, and the
//! span its Samples cover; and the messages completed during the warm-up.

use super::schema::{CoreMean, HostCpu};
use crate::probe::sample::{HostRole, Sample};

/// Per-host running sums.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostAggregate {
    /// Bytes received per connection during omitted intervals.
    pub omitted_rx: Vec<u64>,
    /// Bytes received per connection over every interval.
    pub sampled_rx: Vec<u64>,
    /// Messages completed during omitted intervals.
    pub omitted_msgs: u64,
    /// Bytes the engine sent during omitted intervals (all connections).
    pub omitted_tx: u64,
    /// End of the last omitted interval (s since the point started).
    pub warmup_end_s: f64,
    /// End of the last interval seen (s since the point started).
    pub last_end_s: f64,
    /// Per core: (cpu, busy, user, system, irq, softirq) × seconds, counted intervals only.
    cores: Vec<(u32, [f64; 5])>,
    /// Seconds of counted intervals with CPU data.
    cpu_secs: f64,
    /// The sampler's own CPU time over counted intervals (µs).
    sampler_cpu_us: u64,
    /// Busy core-seconds over counted intervals (sum of busy % × span / 100).
    busy_core_secs: f64,
    /// Counted intervals with CPU data.
    cpu_intervals: usize,
}

fn add_at(v: &mut Vec<u64>, i: usize, x: u64) {
    if v.len() <= i {
        v.resize(i + 1, 0);
    }
    v[i] = v[i].saturating_add(x);
}

impl HostAggregate {
    /// Fold one Sample in.
    pub fn push(&mut self, s: &Sample) {
        for c in &s.conns {
            add_at(&mut self.sampled_rx, c.id, c.rx_bytes);
            if s.omitted {
                add_at(&mut self.omitted_rx, c.id, c.rx_bytes);
            }
        }
        self.last_end_s = self.last_end_s.max(s.end_s);
        if s.omitted {
            self.omitted_msgs = self.omitted_msgs.saturating_add(s.engine.messages);
            self.omitted_tx = self.omitted_tx.saturating_add(s.engine.tx_bytes);
            self.warmup_end_s = self.warmup_end_s.max(s.end_s);
            return;
        }
        if s.cpus.is_empty() {
            return;
        }
        let w = (s.end_s - s.start_s).max(0.0);
        self.sampler_cpu_us = self.sampler_cpu_us.saturating_add(s.sampler_cpu_us);
        self.busy_core_secs += s.cpus.iter().map(|c| c.busy().0).sum::<f64>() * w / 100.0;
        if self.cores.is_empty() {
            self.cores = s.cpus.iter().map(|c| (c.cpu.0, [0.0; 5])).collect();
        }
        for c in &s.cpus {
            if let Some((_, m)) = self.cores.iter_mut().find(|(id, _)| *id == c.cpu.0) {
                m[0] += c.busy().0 * w;
                m[1] += (c.user.0 + c.nice.0) * w;
                m[2] += c.system.0 * w;
                m[3] += c.irq.0 * w;
                m[4] += c.softirq.0 * w;
            }
        }
        self.cpu_secs += w;
        self.cpu_intervals += 1;
    }

    /// Bytes `conn` received over the counted intervals, from the Samples.
    pub fn counted_rx(&self, conn: usize) -> u64 {
        let all = self.sampled_rx.get(conn).copied().unwrap_or(0);
        all.saturating_sub(self.omitted_rx(conn))
    }

    /// Bytes `conn` received during the warm-up.
    pub fn omitted_rx(&self, conn: usize) -> u64 {
        self.omitted_rx.get(conn).copied().unwrap_or(0)
    }

    /// Per-core means over the counted intervals, weighted by interval length
    /// (a short closing interval counts for what it is).
    pub fn cpu(&self) -> HostCpu {
        if self.cpu_intervals == 0 || self.cpu_secs <= 0.0 {
            return HostCpu::default();
        }
        let cpus: Vec<CoreMean> = self
            .cores
            .iter()
            .map(|(cpu, m)| CoreMean {
                cpu: *cpu,
                busy: m[0] / self.cpu_secs,
                user: m[1] / self.cpu_secs,
                system: m[2] / self.cpu_secs,
                irq: m[3] / self.cpu_secs,
                softirq: m[4] / self.cpu_secs,
            })
            .collect();
        let mean_busy = cpus.iter().map(|c| c.busy).sum::<f64>() / cpus.len().max(1) as f64;
        let observer_cpu_ms = self.sampler_cpu_us as f64 / 1000.0;
        HostCpu {
            mean_busy,
            cpus,
            intervals: self.cpu_intervals,
            observer_cpu_ms,
            observer_share_pct: (self.busy_core_secs > 0.0)
                .then(|| observer_cpu_ms / 1000.0 / self.busy_core_secs * 100.0),
        }
    }
}

/// Both hosts' running sums for one point.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PointAggregate {
    /// The controller's host.
    pub local: HostAggregate,
    /// The agent's host.
    pub peer: HostAggregate,
}

impl PointAggregate {
    /// Fold one interval in.
    pub fn push(&mut self, local: Option<&Sample>, peer: Option<&Sample>) {
        if let Some(s) = local {
            self.local.push(s);
        }
        if let Some(s) = peer {
            self.peer.push(s);
        }
    }

    /// One host's sums.
    pub fn host(&self, h: HostRole) -> &HostAggregate {
        match h {
            HostRole::Local => &self.local,
            HostRole::Peer => &self.peer,
        }
    }
}
/// Receiver-counted rates of one interval, (local→peer, peer→local) in
/// bit/s: the bytes the receiving end read, else (its Sample missing) what
/// the sender wrote.
pub fn receiver_rates(
    local: Option<&crate::probe::sample::EngineSample>,
    peer: Option<&crate::probe::sample::EngineSample>,
) -> (f64, f64) {
    let l2p = peer
        .map(|e| e.rx_bps.0)
        .or(local.map(|e| e.tx_bps.0))
        .unwrap_or(0.0);
    let p2l = local
        .map(|e| e.rx_bps.0)
        .or(peer.map(|e| e.tx_bps.0))
        .unwrap_or(0.0);
    (l2p, p2l)
}

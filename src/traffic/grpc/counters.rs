//! Counters of a gRPC engine (client or server) and the interval figures
//! computed from them.
//!
//! Owns the hot-path counting: one cache-line-aligned shard per runtime worker
//! thread (the thread's index is set when the runtime starts it), plain
//! relaxed atomics in it, and a latency histogram that each thread fills
//! privately and merges into its shard's `Mutex<Histogram>` every ~10 ms (and
//! when the thread stops). The sampler reads cumulative [`GrpcSnapshot`]s and
//! swaps the histograms out; [`interval`] turns two snapshots into the figures
//! of one interval. Nothing here formats, logs or draws.

use crate::traffic::new_latency_histogram;
use crate::traffic::LatencySummary;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// gRPC status codes 0..=16, by number (the canonical upper-case names).
pub const STATUS_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// Name of a status code; codes outside 0..=16 are counted as UNKNOWN (as gRPC does).
pub fn status_name(code: i32) -> &'static str {
    STATUS_NAMES[status_index(code)]
}

fn status_index(code: i32) -> usize {
    usize::try_from(code)
        .ok()
        .filter(|c| *c < STATUS_NAMES.len())
        .unwrap_or(2)
}

/// How often a thread merges its private latency histogram into its shard.
const MERGE_EVERY: Duration = Duration::from_millis(10);

/// Counters of one runtime worker thread.
#[derive(Debug)]
#[repr(align(128))]
struct Shard {
    rpcs: AtomicU64,
    tx_payload: AtomicU64,
    rx_payload: AtomicU64,
    /// Non-OK statuses by code (index 0 unused).
    errors: [AtomicU64; 17],
    latency: Mutex<Histogram<u64>>,
}

impl Shard {
    fn new() -> Self {
        Shard {
            rpcs: AtomicU64::new(0),
            tx_payload: AtomicU64::new(0),
            rx_payload: AtomicU64::new(0),
            errors: std::array::from_fn(|_| AtomicU64::new(0)),
            latency: Mutex::new(new_latency_histogram()),
        }
    }
}

/// All counters of one running gRPC engine.
#[derive(Debug)]
pub struct GrpcCounters {
    shards: Vec<Shard>,
}

/// A point-in-time copy of the cumulative counters.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct GrpcSnapshot {
    /// RPCs (unary calls or stream messages) completed with OK.
    pub rpcs: u64,
    /// Payload body bytes sent (client: requests; server: responses).
    pub tx_payload: u64,
    /// Payload body bytes received.
    pub rx_payload: u64,
    /// Non-OK statuses by code number.
    pub errors: [u64; 17],
}

impl GrpcSnapshot {
    /// Non-OK statuses in total.
    pub fn error_total(&self) -> u64 {
        self.errors.iter().sum()
    }
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

/// A runtime worker thread's private state: its shard and unmerged latencies.
struct Local {
    counters: Arc<GrpcCounters>,
    shard: usize,
    latency: Histogram<u64>,
    merged: Instant,
}

impl Local {
    fn merge(&mut self) {
        if self.latency.is_empty() {
            return;
        }
        if let Some(s) = self.counters.shards.get(self.shard) {
            let mut h = s.latency.lock().unwrap_or_else(|p| p.into_inner());
            // Same bounds on both sides, so add cannot fail.
            let _ = h.add(&self.latency);
        }
        self.latency.reset();
    }
}

impl GrpcCounters {
    /// Counters for `threads` runtime worker threads.
    pub fn new(threads: usize) -> Arc<Self> {
        Arc::new(GrpcCounters {
            shards: (0..threads.max(1)).map(|_| Shard::new()).collect(),
        })
    }

    /// Register the calling thread as worker `index` of this engine's runtime
    /// (call from the runtime's `on_thread_start`).
    pub fn attach_thread(self: &Arc<Self>, index: usize) {
        let shard = index % self.shards.len();
        LOCAL.with(|l| {
            *l.borrow_mut() = Some(Local {
                counters: Arc::clone(self),
                shard,
                latency: new_latency_histogram(),
                merged: Instant::now(),
            });
        });
    }

    /// Merge what the calling thread still holds (call from `on_thread_stop`).
    pub fn detach_thread() {
        LOCAL.with(|l| {
            if let Some(mut local) = l.borrow_mut().take() {
                local.merge();
            }
        });
    }

    fn with_shard<R>(&self, f: impl FnOnce(&Shard, Option<&mut Local>) -> R) -> R {
        LOCAL.with(|l| {
            let mut l = l.borrow_mut();
            match l.as_mut() {
                Some(local) if std::ptr::eq(Arc::as_ptr(&local.counters), self) => {
                    let shard = &self.shards[local.shard];
                    f(shard, Some(local))
                }
                // A thread outside the runtime (tests, setup): shard 0, locked latency.
                _ => f(&self.shards[0], None),
            }
        })
    }

    /// One RPC (or stream message) completed with OK.
    pub fn record_ok(&self, tx_payload: u64, rx_payload: u64, latency: Option<Duration>) {
        self.with_shard(|s, local| {
            s.rpcs.fetch_add(1, Ordering::Relaxed);
            s.tx_payload.fetch_add(tx_payload, Ordering::Relaxed);
            s.rx_payload.fetch_add(rx_payload, Ordering::Relaxed);
            let Some(lat) = latency else { return };
            let ns = u64::try_from(lat.as_nanos()).unwrap_or(u64::MAX).max(1);
            match local {
                Some(local) => {
                    let _ = local.latency.record(ns);
                    if local.merged.elapsed() >= MERGE_EVERY {
                        local.merge();
                        local.merged = Instant::now();
                    }
                }
                None => {
                    let mut h = s.latency.lock().unwrap_or_else(|p| p.into_inner());
                    let _ = h.record(ns);
                }
            }
        });
    }

    /// One RPC ended with a non-OK status `code`.
    pub fn record_error(&self, code: i32) {
        self.with_shard(|s, _| {
            s.errors[status_index(code)].fetch_add(1, Ordering::Relaxed);
        });
    }

    /// Cumulative values (relaxed loads; each value is monotonic).
    pub fn snapshot(&self) -> GrpcSnapshot {
        let mut out = GrpcSnapshot::default();
        for s in &self.shards {
            out.rpcs += s.rpcs.load(Ordering::Relaxed);
            out.tx_payload += s.tx_payload.load(Ordering::Relaxed);
            out.rx_payload += s.rx_payload.load(Ordering::Relaxed);
            for (o, e) in out.errors.iter_mut().zip(&s.errors) {
                *o += e.load(Ordering::Relaxed);
            }
        }
        out
    }

    /// Take the latencies merged since the last call (empty when none).
    pub fn take_latency(&self) -> Histogram<u64> {
        let mut out = new_latency_histogram();
        for s in &self.shards {
            let mut h = s.latency.lock().unwrap_or_else(|p| p.into_inner());
            let _ = out.add(&*h);
            h.reset();
        }
        out
    }
}

/// The figures of one interval (or of a whole point, from the zero snapshot).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GrpcInterval {
    /// Seconds the interval lasted.
    pub secs: f64,
    /// RPCs (or stream messages) completed with OK per second.
    pub rpcs_per_sec: f64,
    /// Payload bytes per second sent.
    pub tx_bytes_per_sec: f64,
    /// Payload bytes per second received.
    pub rx_bytes_per_sec: f64,
    /// Latency percentiles of the RPCs completed in the interval (client only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
    /// Non-OK statuses in the interval, by code name (`UNAVAILABLE`: ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    /// This end's peak resident memory so far in the point (VmHWM), when
    /// the engine runs in a session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss: Option<crate::units::Bytes>,
}

/// Figures of the span between `prev` and `now`, `secs` long, with the
/// latencies recorded in it. Counters never go backwards; a reset one counts as 0.
pub fn interval(
    prev: &GrpcSnapshot,
    now: &GrpcSnapshot,
    secs: f64,
    latency: &Histogram<u64>,
) -> GrpcInterval {
    let rate = |a: u64, b: u64| {
        if secs > 0.0 {
            b.saturating_sub(a) as f64 / secs
        } else {
            0.0
        }
    };
    let errors = now
        .errors
        .iter()
        .zip(&prev.errors)
        .enumerate()
        .filter_map(|(code, (n, p))| {
            let d = n.saturating_sub(*p);
            (d > 0).then(|| (STATUS_NAMES[code].to_string(), d))
        })
        .collect();
    GrpcInterval {
        secs,
        rpcs_per_sec: rate(prev.rpcs, now.rpcs),
        tx_bytes_per_sec: rate(prev.tx_payload, now.tx_payload),
        rx_bytes_per_sec: rate(prev.rx_payload, now.rx_payload),
        latency: LatencySummary::from_histogram(latency),
        errors,
        peak_rss: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_rates_and_errors() {
        let prev = GrpcSnapshot {
            rpcs: 100,
            tx_payload: 6400,
            rx_payload: 6400,
            errors: [0; 17],
        };
        let mut now = prev;
        now.rpcs = 300;
        now.tx_payload = 19_200;
        now.rx_payload = 6400 + 400;
        now.errors[14] = 3;
        let mut h = new_latency_histogram();
        h.record(1_000).unwrap();
        h.record(3_000).unwrap();
        let i = interval(&prev, &now, 2.0, &h);
        assert_eq!(i.rpcs_per_sec, 100.0);
        assert_eq!(i.tx_bytes_per_sec, 6400.0);
        assert_eq!(i.rx_bytes_per_sec, 200.0);
        assert_eq!(i.errors, BTreeMap::from([("UNAVAILABLE".to_string(), 3)]));
        assert_eq!(i.latency.unwrap().count, 2);
        let zero = interval(&now, &prev, 0.0, &new_latency_histogram());
        assert_eq!(zero.rpcs_per_sec, 0.0);
        assert!(zero.latency.is_none() && zero.errors.is_empty());
    }

    #[test]
    fn threads_merge_into_their_shard() {
        let c = GrpcCounters::new(2);
        let c2 = Arc::clone(&c);
        std::thread::spawn(move || {
            c2.attach_thread(1);
            c2.record_ok(10, 20, Some(Duration::from_micros(5)));
            c2.record_error(14);
            c2.record_error(99);
            GrpcCounters::detach_thread();
        })
        .join()
        .unwrap();
        c.record_ok(1, 2, Some(Duration::from_micros(7)));
        let s = c.snapshot();
        assert_eq!((s.rpcs, s.tx_payload, s.rx_payload), (2, 11, 22));
        assert_eq!((s.errors[14], s.errors[2]), (1, 1));
        assert_eq!(c.take_latency().len(), 2);
        assert_eq!(c.take_latency().len(), 0);
        assert_eq!(status_name(16), "UNAUTHENTICATED");
        assert_eq!(status_name(-1), "UNKNOWN");
    }
}

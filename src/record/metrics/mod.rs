//! Prometheus metrics: the [`MetricsHub`] that faces feed, its OpenMetrics
//! encoding ([`encode`]) and the HTTP endpoint that serves it ([`http`]) for
//! `wirescope agent --metrics ADDR` and `wirescope watch --metrics ADDR`.
//!
//! # What is served
//!
//! node_exporter's names where the meaning is identical, with its labels and
//! spelling, plus a `host` label (the hub can hold several hosts):
//!
//! * `node_cpu_seconds_total{cpu,mode}` — modes `user nice system idle iowait irq softirq steal`;
//! * `node_softirqs_functions_total{cpu,type}` — `type` is the /proc/softirqs row (`NET_RX`, ...);
//! * `node_softnet_processed_total`, `node_softnet_dropped_total`,
//!   `node_softnet_times_squeezed_total` `{cpu}`.
//!
//! `wirescope_*` for the rest: `wirescope_queue_{packets,bytes,drops}_total`
//! `{host,iface,queue,direction,source}` (the queue's three counters, never
//! one label per `ethtool -S` name), `wirescope_engine_bytes_per_second
//! {host,engine,direction}` while a test runs, `wirescope_finding
//! {host,id,severity,subject} 1` for each active finding,
//! `wirescope_build_info{version,face} 1`, and
//! `wirescope_metrics_dropped_series_total` (series refused by the bounds
//! below). Families a caller defines with [`MetricsHub::set_gauges`] follow.
//!
//! # Where the counters come from
//!
//! * The host the process runs on (the label given to
//!   [`MetricsHub::with_live_host`]): its CPU, softirq and softnet counters
//!   are read from the kernel **at each scrape** ([`HostTotals`]: three small
//!   procfs files, nothing when nobody scrapes). They are cumulative since
//!   boot, exactly as node_exporter serves them, they have no gap between
//!   tests, and an idle agent serves them without sampling anything. Its
//!   Samples then add only what the kernel files do not hold (queues, engine).
//! * Any other host (the peer of `watch --peer`, the hosts of a fleet): only
//!   its Samples reach us, and they carry per-interval deltas, so the hub
//!   accumulates them into counters that start at zero when the hub first
//!   hears of the host (a counter reset, for Prometheus). CPU seconds are the
//!   Sample's share of each mode times the interval's length.
//! * Queue counters are always accumulated from Sample deltas: they exist
//!   only for the interfaces a session watches, from the source the Sample
//!   names (`source` label: `qstats`, `ethtool`, `ebpf`, `ebpf_sampled`; an
//!   interface can have rows from two sources, so the label keeps them apart).
//!
//! # Bounds
//!
//! A peer or a caller can make label sets big, so every family has a written
//! limit, checked before a series is added: [`MAX_HOSTS`] hosts,
//! [`MAX_CPUS`] CPUs and [`MAX_SOFTIRQ_TYPES`] softirq types per host,
//! [`MAX_QUEUE_SERIES`] queues per host, [`MAX_FINDINGS`] findings,
//! [`MAX_GAUGE_FAMILIES`] caller families of at most [`MAX_GAUGE_SERIES`]
//! series. What does not fit is counted in
//! `wirescope_metrics_dropped_series_total`, never silently lost.
//!
//! # API for other faces
//!
//! ```no_run
//! # use wirescope::record::metrics::{MetricsHub, http::MetricsServer};
//! let hub = MetricsHub::new("fleet");
//! let server = MetricsServer::start("127.0.0.1:9464".parse().unwrap(), hub.clone()).unwrap();
//! hub.set_gauges(
//!     "wirescope_fleet_link_bits_per_second",
//!     "Throughput of the last test of each link (bits/s).",
//!     vec![(vec![("sender".into(), "node01".into()), ("receiver".into(), "node02".into())], 9.4e10)],
//! ).unwrap();
//! // hub.publish_sample("node01", &sample); hub.publish_findings(&findings);
//! drop(server); // stops serving
//! ```
//!
//! [`HostFeed`] adapts a hub to the agent's [`Observer`] (the agent's tests
//! publish through it; `session` stays below `record`).
//!
//! The hub is a cheap clone (one `Arc`); every method takes `&self` and
//! holds its lock for a copy or an insert only. It must not do I/O for a
//! caller: the kernel files are read by the scrape, on the server's thread.

pub mod encode;
pub mod http;

use crate::diagnose::Finding;
use crate::probe::sample::{HostRole, Sample};
use crate::probe::source::HostSource;
use crate::probe::totals::HostTotals;
use crate::record::pipeline::Output;
use crate::session::agent::Observer;
use crate::traffic::EngineKind;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

pub use encode::Format;

/// Hosts one hub keeps.
pub const MAX_HOSTS: usize = 4096;
/// CPUs per host (node_cpu, softirqs, softnet).
pub const MAX_CPUS: usize = 8192;
/// Softirq types per host (the kernel has 10).
pub const MAX_SOFTIRQ_TYPES: usize = 32;
/// Queue series (iface, queue, direction, source) per host.
pub const MAX_QUEUE_SERIES: usize = 16_384;
/// Active findings.
pub const MAX_FINDINGS: usize = 1024;
/// Families defined through [`MetricsHub::set_gauges`].
pub const MAX_GAUGE_FAMILIES: usize = 64;
/// Series of one such family (a 1,000-node all-pairs matrix is 999,000).
pub const MAX_GAUGE_SERIES: usize = 1_048_576;

/// Errors of the metrics hub and its endpoint.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The metrics address could not be bound.
    #[error("cannot serve metrics on {addr}: {source}; give a free address with --metrics ADDR:PORT (e.g. 127.0.0.1:9464), or stop what listens there")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// The server thread could not start.
    #[error("cannot start the metrics server thread: {0}")]
    Thread(#[source] std::io::Error),
    /// A caller-defined family is not valid.
    #[error("metric family {family:?}: {why}")]
    Family {
        /// The family's name.
        family: String,
        /// What is wrong and what to do.
        #[source]
        why: FamilyError,
    },
    /// The text could not be produced.
    #[error("cannot encode the metrics: {0}")]
    Encode(#[from] std::fmt::Error),
}

/// What is wrong with a caller-defined gauge family, and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FamilyError {
    /// Not a metric name.
    #[error("not a metric name: use letters, digits, _ and : (not first a digit)")]
    Name,
    /// A name ending in a suffix OpenMetrics reserves.
    #[error("a gauge's name must not end in {0} (OpenMetrics reserves it for counters, histograms and summaries)")]
    ReservedSuffix(&'static str),
    /// One of the hub's own families.
    #[error("the hub serves a family of that name itself; choose another")]
    Own,
    /// A help text of several lines.
    #[error("the help text must be one line")]
    Help,
    /// A label name that is not valid.
    #[error("label name {0:?} is not valid: use letters, digits and _ (not first a digit, not __ first)")]
    LabelName(String),
    /// A label set naming a label twice.
    #[error("a label set names a label twice: {0:?}")]
    LabelTwice(Vec<(String, String)>),
    /// A label set given twice.
    #[error("the label set {0:?} is given twice")]
    SetTwice(Vec<(String, String)>),
    /// More series than one family may hold.
    #[error("{0} series, more than the {MAX_GAUGE_SERIES} one family may hold")]
    TooManySeries(usize),
    /// The hub is full.
    #[error("the hub holds {MAX_GAUGE_FAMILIES} families already")]
    TooManyFamilies,
}

/// One caller-defined gauge family.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GaugeFamily {
    pub help: String,
    pub series: Vec<(Vec<(String, String)>, f64)>,
}

/// A queue series' key: iface, queue, direction, source.
pub(crate) type QueueKey = (String, u32, &'static str, &'static str);

/// What the hub knows of one host.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct HostState {
    /// The engine of the running test, if one runs.
    pub engine: Option<EngineKind>,
    /// Its last interval's rates (tx, rx), bits/s.
    pub engine_bps: Option<(f64, f64)>,
    /// Accumulated CPU seconds by mode (hosts not read live).
    pub cpu: BTreeMap<u32, [f64; 8]>,
    /// Accumulated softirqs by type, then cpu.
    pub softirqs: BTreeMap<String, BTreeMap<u32, u64>>,
    /// Accumulated softnet (processed, dropped, times squeezed) by cpu.
    pub softnet: BTreeMap<u32, [u64; 3]>,
    /// Accumulated (packets, bytes, drops) per queue; None: the source
    /// never counted it.
    pub queues: BTreeMap<QueueKey, [Option<u64>; 3]>,
}

/// One active finding's labels: host, id, severity, subject.
pub(crate) type FindingKey = (String, String, &'static str, String);

#[derive(Debug, Default)]
pub(crate) struct HubState {
    pub hosts: BTreeMap<String, HostState>,
    pub findings: Vec<FindingKey>,
    pub gauges: BTreeMap<String, GaugeFamily>,
    pub dropped: u64,
}

/// The host read live at each scrape.
#[derive(Clone)]
struct LiveHost {
    label: String,
    source: Arc<dyn HostSource>,
    ticks_per_s: u64,
}

/// What faces feed and the endpoint serves; a cheap clone.
#[derive(Clone)]
pub struct MetricsHub {
    face: Arc<str>,
    live: Option<LiveHost>,
    state: Arc<Mutex<HubState>>,
}

impl std::fmt::Debug for MetricsHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsHub")
            .field("face", &self.face)
            .field("live", &self.live.as_ref().map(|l| &l.label))
            .finish_non_exhaustive()
    }
}

fn lock(m: &Mutex<HubState>) -> MutexGuard<'_, HubState> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// node_exporter's CPU modes, in the order of [`HostState::cpu`].
pub(crate) const CPU_MODES: [&str; 8] = [
    "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal",
];

impl MetricsHub {
    /// An empty hub; `face` names the command in `wirescope_build_info`.
    pub fn new(face: &str) -> MetricsHub {
        MetricsHub {
            face: face.into(),
            live: None,
            state: Arc::default(),
        }
    }

    /// Serve the host `source` describes under the label `host`, its CPU,
    /// softirq and softnet counters read at each scrape (cumulative since
    /// boot; `ticks_per_s` is its `USER_HZ`,
    /// [`crate::probe::totals::user_hz`] on the live host). Samples
    /// published for `host` then add only their queues and engine rates.
    pub fn with_live_host(
        mut self,
        host: &str,
        source: Arc<dyn HostSource>,
        ticks_per_s: u64,
    ) -> MetricsHub {
        self.live = Some(LiveHost {
            label: host.to_string(),
            source,
            ticks_per_s,
        });
        self
    }

    /// Say which engine's test runs on `host` from now on (None: none; its
    /// throughput series goes away).
    pub fn set_engine(&self, host: &str, engine: Option<EngineKind>) {
        let mut st = lock(&self.state);
        if let Some(h) = host_entry(&mut st, host) {
            h.engine = engine;
            h.engine_bps = None;
        }
    }

    /// Add one interval of `host`: counter deltas are accumulated, the
    /// engine's rates replace the previous ones.
    pub fn publish_sample(&self, host: &str, sample: &Sample) {
        let live = self.live.as_ref().is_some_and(|l| l.label == host);
        let mut st = lock(&self.state);
        let mut dropped = 0;
        if let Some(h) = host_entry(&mut st, host) {
            h.engine_bps = h
                .engine
                .map(|_| (sample.engine.tx_bps.0, sample.engine.rx_bps.0));
            if !live {
                dropped += add_host_counters(h, sample);
            }
            dropped += add_queues(h, sample);
        }
        st.dropped += dropped;
    }

    /// Replace the active findings (each is served with its host's role as
    /// `host`; the same id and subject on one host is one series).
    pub fn publish_findings(&self, findings: &[Finding]) {
        let mut keys: Vec<FindingKey> = findings
            .iter()
            .map(|f| {
                (
                    f.host.name().to_string(),
                    f.id.clone(),
                    f.severity.name(),
                    f.subject.clone(),
                )
            })
            .collect();
        keys.sort();
        keys.dedup_by(|a, b| (&a.0, &a.1, &a.3) == (&b.0, &b.1, &b.3));
        let over = keys.len().saturating_sub(MAX_FINDINGS);
        keys.truncate(MAX_FINDINGS);
        let mut st = lock(&self.state);
        st.findings = keys;
        st.dropped += over as u64;
    }

    /// Define (or replace) a gauge family of the caller's: `family` is its
    /// name (`[a-zA-Z_:][a-zA-Z0-9_:]*`, not one of the hub's own),
    /// `help` one line, `series` each label set (valid label names, each set
    /// once) with its value. An empty `series` keeps the family with no
    /// series.
    pub fn set_gauges(
        &self,
        family: &str,
        help: &str,
        series: Vec<(Vec<(String, String)>, f64)>,
    ) -> Result<(), MetricsError> {
        let bad = |why: FamilyError| MetricsError::Family {
            family: family.to_string(),
            why,
        };
        encode::check_family(family, help).map_err(bad)?;
        if series.len() > MAX_GAUGE_SERIES {
            return Err(bad(FamilyError::TooManySeries(series.len())));
        }
        encode::check_series(&series).map_err(bad)?;
        let mut st = lock(&self.state);
        if !st.gauges.contains_key(family) && st.gauges.len() >= MAX_GAUGE_FAMILIES {
            return Err(bad(FamilyError::TooManyFamilies));
        }
        st.gauges.insert(
            family.to_string(),
            GaugeFamily {
                help: help.to_string(),
                series,
            },
        );
        Ok(())
    }

    /// Feed what a session's pipeline produced (`watch`, and any face that
    /// runs one): a point's engine, both hosts' Samples under their role
    /// (`local`, `peer`), the active findings.
    pub fn publish_output(&self, o: &Output) {
        let roles = [HostRole::Local.name(), HostRole::Peer.name()];
        match o {
            Output::PointStarted(p) => {
                for r in roles {
                    self.set_engine(r, p.spec.as_ref().map(|s| s.kind()));
                }
            }
            Output::Interval {
                local,
                peer,
                active,
                ..
            } => {
                for s in local.iter().chain(peer) {
                    self.publish_sample(s.host.name(), s);
                }
                self.publish_findings(active);
            }
            Output::PointDone { .. } | Output::Failed(_) | Output::Refused(_) => {
                for r in roles {
                    self.set_engine(r, None);
                }
            }
            _ => {}
        }
    }

    /// The metrics now, in `format` (the live host is read here).
    pub fn encode(&self, format: Format) -> Result<String, MetricsError> {
        let totals = self.live.as_ref().map(|l| {
            (
                l.label.clone(),
                HostTotals::read(l.source.as_ref(), l.ticks_per_s),
            )
        });
        let snapshot = {
            let st = lock(&self.state);
            encode::Snapshot {
                face: self.face.to_string(),
                live: totals,
                hosts: st.hosts.clone(),
                findings: st.findings.clone(),
                gauges: st.gauges.clone(),
                dropped: st.dropped,
            }
        };
        Ok(snapshot.encode(format)?)
    }
}

/// One host's feed into a hub: what the agent's tests show its [`Observer`]
/// (`wirescope agent --metrics`).
#[derive(Debug, Clone)]
pub struct HostFeed {
    hub: MetricsHub,
    host: String,
}

impl HostFeed {
    /// Feed `hub` under the label `host`.
    pub fn new(hub: MetricsHub, host: &str) -> HostFeed {
        HostFeed {
            hub,
            host: host.to_string(),
        }
    }
}

impl Observer for HostFeed {
    fn engine(&self, engine: Option<EngineKind>) {
        self.hub.set_engine(&self.host, engine);
    }

    fn sample(&self, sample: &Sample) {
        self.hub.publish_sample(&self.host, sample);
    }
}

/// The state of `host`, added if there is room (None: over [`MAX_HOSTS`], counted).
fn host_entry<'a>(st: &'a mut HubState, host: &str) -> Option<&'a mut HostState> {
    if !st.hosts.contains_key(host) {
        if st.hosts.len() >= MAX_HOSTS {
            st.dropped += 1;
            return None;
        }
        st.hosts.insert(host.to_string(), HostState::default());
    }
    st.hosts.get_mut(host)
}

/// Add `key` to `map` if it is there or there is room; false: dropped.
fn bounded<K: Ord, V: Default>(
    map: &mut BTreeMap<K, V>,
    key: K,
    cap: usize,
    f: impl FnOnce(&mut V),
) -> bool {
    if let Some(v) = map.get_mut(&key) {
        f(v);
        return true;
    }
    if map.len() >= cap {
        return false;
    }
    f(map.entry(key).or_default());
    true
}

/// CPU seconds, softirqs and softnet of a Sample; returns the series dropped.
fn add_host_counters(h: &mut HostState, s: &Sample) -> u64 {
    let mut dropped = 0;
    // A peer's Sample: a span or a share that is not a finite, positive
    // number adds nothing (a counter must never go down or become NaN).
    let span = Some(s.end_s - s.start_s)
        .filter(|d| d.is_finite() && *d > 0.0)
        .unwrap_or(0.0);
    for c in &s.cpus {
        let share = [
            c.user, c.nice, c.system, c.idle, c.iowait, c.irq, c.softirq, c.steal,
        ];
        let ok = bounded(&mut h.cpu, c.cpu.0, MAX_CPUS, |acc| {
            for (a, p) in acc.iter_mut().zip(share) {
                let share = if p.0.is_finite() {
                    p.0.clamp(0.0, 100.0)
                } else {
                    0.0
                };
                *a += share / 100.0 * span;
            }
        });
        dropped += u64::from(!ok);
    }
    for c in &s.softirqs {
        let rows = [("NET_RX", c.net_rx), ("NET_TX", c.net_tx)]
            .into_iter()
            .chain(c.other.iter().map(|(k, v)| (k.as_str(), *v)));
        for (kind, n) in rows {
            if !h.softirqs.contains_key(kind) && h.softirqs.len() >= MAX_SOFTIRQ_TYPES {
                dropped += 1;
                continue;
            }
            let per_cpu = h.softirqs.entry(kind.to_string()).or_default();
            let ok = bounded(per_cpu, c.cpu.0, MAX_CPUS, |acc| *acc += n);
            dropped += u64::from(!ok);
        }
    }
    for c in &s.softnet {
        let d = [c.delta.processed, c.delta.dropped, c.delta.time_squeeze];
        let ok = bounded(&mut h.softnet, c.cpu.0, MAX_CPUS, |acc| {
            for (a, v) in acc.iter_mut().zip(d) {
                *a += u64::from(v);
            }
        });
        dropped += u64::from(!ok);
    }
    dropped
}

/// The Sample's per-queue deltas; returns the series dropped.
fn add_queues(h: &mut HostState, s: &Sample) -> u64 {
    use crate::probe::ethtool_names::Dir;
    use crate::probe::sample::QueueSource;
    let mut dropped = 0;
    for q in &s.queues {
        let dir = match q.dir {
            Dir::Rx => "rx",
            Dir::Tx => "tx",
        };
        let source = match q.source {
            QueueSource::Qstats => "qstats",
            QueueSource::Ethtool => "ethtool",
            QueueSource::Ebpf => "ebpf",
            QueueSource::EbpfSampled => "ebpf_sampled",
        };
        let d = [q.packets, q.bytes, q.drops];
        let key = (q.iface.to_string(), q.queue, dir, source);
        let ok = bounded(&mut h.queues, key, MAX_QUEUE_SERIES, |acc| {
            for (a, v) in acc.iter_mut().zip(d) {
                if let Some(v) = v {
                    *a = Some(a.unwrap_or(0).saturating_add(v));
                }
            }
        });
        dropped += u64::from(!ok);
    }
    dropped
}

#[cfg(test)]
mod tests;

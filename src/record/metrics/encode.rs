//! The text of a scrape: a `Snapshot` of the hub (plus the live host's
//! totals, read by the scrape) encoded by `prometheus-client` as OpenMetrics
//! 1.0 or, when the scraper asks for it, Prometheus text 0.0.4. Owns the
//! family names, their help and the checks on caller-defined families; does
//! no I/O.

use super::{FamilyError, FindingKey, GaugeFamily, HostState, CPU_MODES};
use crate::probe::totals::HostTotals;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;

/// The exposition formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text (the default).
    OpenMetrics,
    /// Prometheus text 0.0.4 (what `Accept: text/plain` asks for).
    PrometheusText,
}

impl Format {
    /// The Content-Type of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::PrometheusText => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// The format an `Accept` header asks for: OpenMetrics unless it names
    /// `text/plain` and not `application/openmetrics-text` (Prometheus
    /// lists both and prefers OpenMetrics; none, or `*/*`, gets OpenMetrics).
    pub fn from_accept(accept: Option<&str>) -> Format {
        let Some(a) = accept.map(str::to_ascii_lowercase) else {
            return Format::OpenMetrics;
        };
        if !a.contains("application/openmetrics-text") && a.contains("text/plain") {
            Format::PrometheusText
        } else {
            Format::OpenMetrics
        }
    }
}

/// The hub's own family names (a caller's family must not reuse them).
const OWN_FAMILIES: [&str; 13] = [
    "node_cpu_seconds_total",
    "node_softirqs_functions_total",
    "node_softnet_processed_total",
    "node_softnet_dropped_total",
    "node_softnet_times_squeezed_total",
    "wirescope_queue_packets_total",
    "wirescope_queue_bytes_total",
    "wirescope_queue_drops_total",
    "wirescope_engine_bytes_per_second",
    "wirescope_finding",
    "wirescope_build_info",
    "wirescope_metrics_dropped_series_total",
    "up",
];

fn valid_name(s: &str, colon: bool) -> bool {
    let ok = |c: char, first: bool| {
        c.is_ascii_alphabetic() || c == '_' || (colon && c == ':') || (!first && c.is_ascii_digit())
    };
    let mut chars = s.chars();
    chars.next().is_some_and(|c| ok(c, true)) && chars.all(|c| ok(c, false))
}

/// A caller's family name and help: Err says what is wrong.
pub(super) fn check_family(name: &str, help: &str) -> Result<(), FamilyError> {
    if !valid_name(name, true) {
        return Err(FamilyError::Name);
    }
    if let Some(suffix) = ["_total", "_created", "_count", "_sum", "_bucket"]
        .into_iter()
        .find(|x| name.ends_with(x))
    {
        return Err(FamilyError::ReservedSuffix(suffix));
    }
    if OWN_FAMILIES
        .iter()
        .any(|f| *f == name || f.strip_suffix("_total") == Some(name))
    {
        return Err(FamilyError::Own);
    }
    if help.contains(['\n', '\r']) {
        return Err(FamilyError::Help);
    }
    Ok(())
}

/// A caller's series: valid label names, no name twice in a set, no set twice.
pub(super) fn check_series(series: &[(Vec<(String, String)>, f64)]) -> Result<(), FamilyError> {
    let mut seen = std::collections::BTreeSet::new();
    for (labels, _) in series {
        let mut names: Vec<&str> = labels.iter().map(|(k, _)| k.as_str()).collect();
        if let Some(bad) = names
            .iter()
            .find(|n| !valid_name(n, false) || n.starts_with("__"))
        {
            return Err(FamilyError::LabelName(bad.to_string()));
        }
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return Err(FamilyError::LabelTwice(labels.clone()));
        }
        let mut key = labels.clone();
        key.sort();
        if !seen.insert(key) {
            return Err(FamilyError::SetTwice(labels.clone()));
        }
    }
    Ok(())
}

/// Everything one scrape serves, owned (the encoder runs without the hub's lock).
#[derive(Debug)]
pub(super) struct Snapshot {
    pub face: String,
    pub live: Option<(String, HostTotals)>,
    pub hosts: BTreeMap<String, HostState>,
    pub findings: Vec<FindingKey>,
    pub gauges: BTreeMap<String, GaugeFamily>,
    pub dropped: u64,
}

type Labels<'a> = Vec<(&'static str, std::borrow::Cow<'a, str>)>;

fn counter<'a, N: prometheus_client::encoding::EncodeCounterValue>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels<'a>, N)>,
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in series {
        ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn gauge<'a, L: prometheus_client::encoding::EncodeLabelSet + 'a>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (&'a L, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in series {
        ConstGauge::new(v).encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

fn cow(s: &str) -> std::borrow::Cow<'_, str> {
    std::borrow::Cow::Borrowed(s)
}

fn owned<'a>(s: String) -> std::borrow::Cow<'a, str> {
    std::borrow::Cow::Owned(s)
}

impl Snapshot {
    /// The text in `format`.
    pub fn encode(self, format: Format) -> Result<String, std::fmt::Error> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        let mut out = String::new();
        match format {
            Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut out, &registry)?,
            Format::PrometheusText => {
                prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)?
            }
        }
        Ok(out)
    }

    /// CPU seconds by (host, cpu, mode): live totals, then accumulated hosts.
    fn cpu_series(&self) -> Vec<(Labels<'_>, f64)> {
        let mut v = Vec::new();
        if let Some((host, t)) = &self.live {
            let hz = t.ticks_per_s as f64;
            for (cpu, c) in &t.cpus {
                let ticks = [
                    c.user, c.nice, c.system, c.idle, c.iowait, c.irq, c.softirq, c.steal,
                ];
                for (mode, n) in CPU_MODES.iter().zip(ticks) {
                    v.push((host_cpu_and(host, cpu.0, "mode", mode), n as f64 / hz));
                }
            }
        }
        for (host, h) in self.accumulated() {
            for (cpu, secs) in &h.cpu {
                for (mode, s) in CPU_MODES.iter().zip(secs) {
                    v.push((host_cpu_and(host, *cpu, "mode", mode), *s));
                }
            }
        }
        v
    }

    fn softirq_series(&self) -> Vec<(Labels<'_>, u64)> {
        let mut v = Vec::new();
        if let Some((host, t)) = &self.live {
            for (kind, counts) in &t.softirqs.vectors {
                for (cpu, n) in t.softirqs.cpus.iter().zip(counts) {
                    v.push((host_cpu_and(host, cpu.0, "type", kind), *n));
                }
            }
        }
        for (host, h) in self.accumulated() {
            for (kind, per_cpu) in &h.softirqs {
                for (cpu, n) in per_cpu {
                    v.push((host_cpu_and(host, *cpu, "type", kind), *n));
                }
            }
        }
        v
    }

    /// softnet's processed, dropped and times squeezed by (host, cpu).
    fn softnet_series(&self) -> [Vec<(Labels<'_>, u64)>; 3] {
        let mut v: [Vec<(Labels<'_>, u64)>; 3] = Default::default();
        if let Some((host, t)) = &self.live {
            for (cpu, s) in &t.softnet {
                let vals = [s.processed, s.dropped, s.time_squeeze];
                for (out, n) in v.iter_mut().zip(vals) {
                    out.push((host_cpu(host, cpu.0), u64::from(n)));
                }
            }
        }
        for (host, h) in self.accumulated() {
            for (cpu, vals) in &h.softnet {
                for (out, n) in v.iter_mut().zip(vals) {
                    out.push((host_cpu(host, *cpu), *n));
                }
            }
        }
        v
    }

    /// Hosts whose CPU, softirq and softnet counters come from Samples.
    fn accumulated(&self) -> impl Iterator<Item = (&String, &HostState)> {
        let live = self.live.as_ref().map(|(h, _)| h);
        self.hosts.iter().filter(move |(h, _)| Some(*h) != live)
    }
}

fn host_cpu(host: &str, cpu: u32) -> Labels<'_> {
    vec![("host", cow(host)), ("cpu", owned(cpu.to_string()))]
}

/// [`host_cpu`] and one more label (`mode`, `type`).
fn host_cpu_and<'a>(host: &'a str, cpu: u32, label: &'static str, v: &'a str) -> Labels<'a> {
    let mut l = host_cpu(host, cpu);
    l.push((label, cow(v)));
    l
}

impl Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let version = [
            ("version", cow(env!("CARGO_PKG_VERSION"))),
            ("face", cow(&self.face)),
        ];
        gauge(
            &mut enc,
            "wirescope_build_info",
            "The wirescope version serving these metrics, and its command (always 1).",
            [(&version, 1.0)],
        )?;
        counter(
            &mut enc,
            "node_cpu_seconds",
            "Seconds the CPUs spent in each mode.",
            self.cpu_series(),
        )?;
        counter(
            &mut enc,
            "node_softirqs_functions",
            "Softirq counts per CPU.",
            self.softirq_series(),
        )?;
        let softnet = [
            ("node_softnet_processed", "Number of processed packets"),
            ("node_softnet_dropped", "Number of dropped packets"),
            (
                "node_softnet_times_squeezed",
                "Number of times processing packets ran out of quota",
            ),
        ];
        for ((name, help), series) in softnet.into_iter().zip(self.softnet_series()) {
            counter(&mut enc, name, help, series)?;
        }
        self.encode_queues(&mut enc)?;
        self.encode_engines(&mut enc)?;
        let findings: Vec<Labels<'_>> = self
            .findings
            .iter()
            .map(|(host, id, severity, subject)| {
                vec![
                    ("host", cow(host)),
                    ("id", cow(id)),
                    ("severity", cow(severity)),
                    ("subject", cow(subject)),
                ]
            })
            .collect();
        gauge(
            &mut enc,
            "wirescope_finding",
            "Findings of the diagnosis active now (always 1; the ids are explained in docs/diagnosis.md).",
            findings.iter().map(|l| (l, 1.0)),
        )?;
        counter(
            &mut enc,
            "wirescope_metrics_dropped_series",
            "Series not served because a bound of the metrics hub was reached.",
            [(Labels::new(), self.dropped)],
        )?;
        for (name, f) in &self.gauges {
            gauge(
                &mut enc,
                name,
                &f.help,
                f.series.iter().map(|(l, v)| (l, *v)),
            )?;
        }
        Ok(())
    }
}

impl Snapshot {
    fn encode_queues(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let names = [
            ("wirescope_queue_packets", "Packets through a NIC queue."),
            ("wirescope_queue_bytes", "Bytes through a NIC queue."),
            ("wirescope_queue_drops", "Packets dropped on a NIC queue."),
        ];
        for (i, (name, help)) in names.into_iter().enumerate() {
            let series = self.hosts.iter().flat_map(|(host, h)| {
                h.queues
                    .iter()
                    .filter_map(move |((iface, queue, dir, source), vals)| {
                        let v = vals.get(i).copied().flatten()?;
                        let labels: Labels<'_> = vec![
                            ("host", cow(host)),
                            ("iface", cow(iface)),
                            ("queue", owned(queue.to_string())),
                            ("direction", cow(dir)),
                            ("source", cow(source)),
                        ];
                        Some((labels, v))
                    })
            });
            counter(enc, name, help, series)?;
        }
        Ok(())
    }

    fn encode_engines(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let series: Vec<(Labels<'_>, f64)> = self
            .hosts
            .iter()
            .filter_map(|(host, h)| Some((host, h.engine?, h.engine_bps?)))
            .flat_map(|(host, engine, (tx, rx))| {
                [("tx", tx), ("rx", rx)].map(|(dir, v)| {
                    let labels: Labels<'_> = vec![
                        ("host", cow(host)),
                        ("engine", cow(engine.name())),
                        ("direction", cow(dir)),
                    ];
                    // Prometheus' base unit: bytes (promtool refuses bits).
                    (labels, v / 8.0)
                })
            })
            .collect();
        gauge(
            enc,
            "wirescope_engine_bytes_per_second",
            "Throughput of the running test's engine on a host over the last interval (bytes/s).",
            series.iter().map(|(l, v)| (l, *v)),
        )
    }
}

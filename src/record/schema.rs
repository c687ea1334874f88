//! The versioned record types of the JSON-lines log.

use crate::diagnose::{Change, Finding};
pub use crate::probe::ebpf::EbpfHosts;
pub use crate::probe::sample::Hosts;
use crate::probe::sample::{LatencySummary, Sample};
use crate::probe::system::HostInfo;
pub use crate::session::plan::SweepValue;
use crate::traffic::EngineSpec;
use serde::{Deserialize, Serialize};

/// Version of the log schema. Bump on incompatible changes only; new
/// optional fields do not need a bump. 2: Samples' per-CPU and per-queue
/// arrays as columns ([`super::compact`]); the reader takes schema 1 too.
pub const SCHEMA_VERSION: u32 = 2;

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// First line.
    Header(Box<Header>),
    /// One host, one interval: written in the compact form of
    /// [`super::compact`] (schema 2); schema-1 lines (one object per row) read as well.
    #[serde(with = "super::compact::record")]
    #[schemars(with = "super::compact::LogSample")]
    Sample(Box<Sample>),
    /// Something that happened (peer lost, point started, ...).
    Event(Event),
    /// Result of one test point.
    Summary(Box<Summary>),
    /// A finding was raised or cleared (after hysteresis) during the run.
    Finding(Box<Change>),
}

/// The run's identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Header {
    /// [`SCHEMA_VERSION`].
    pub schema: u32,
    /// wirescope version.
    pub wirescope: String,
    /// argv.
    pub command_line: Vec<String>,
    /// RFC 3339, UTC.
    pub start_time: String,
    /// Both hosts.
    pub hosts: Hosts<HostInfo>,
    /// How the pair is built ("remote 10.0.0.2:5310", "namespaces ...", "loopback (...)").
    pub pair: String,
    /// The test as requested (first sweep point's spec when sweeping); absent for `watch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<EngineSpec>,
    /// Time limit (s), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
    /// Warm-up (s).
    pub omit_s: f64,
    /// Sampling period (s).
    pub interval_s: f64,
    /// The sweep, if any: parameter and values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepInfo>,
    /// eBPF probes of each host: the set, the attached tracepoints and the
    /// interfaces they count, or why they are off. Absent for offline sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebpf: Option<EbpfHosts>,
}

/// Sweep description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SweepInfo {
    /// `size` or `streams`.
    pub param: String,
    /// The values, in order.
    pub values: Vec<u64>,
}

/// Something that happened during the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Event {
    /// Seconds since the current point started.
    pub t: f64,
    /// Machine-readable kind (`point_start`, `peer_lost`, `interrupted`,
    /// `error`, `refused`: the test as asked cannot run on these hosts).
    pub kind: String,
    /// For people.
    pub message: String,
}

/// Per-stream result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StreamSummary {
    /// Connection index.
    pub id: usize,
    /// `local->peer` or `peer->local` (stream), `rr`/`pingpong` otherwise.
    pub direction: String,
    /// Bytes the receiving end counted.
    pub bytes: u64,
    /// Bytes the sending end wrote.
    pub sent_bytes: u64,
    /// Retransmitted segments (sender's TCP_INFO).
    pub retransmits: u32,
    /// MSG_ZEROCOPY sends the kernel completed, and how many of them it copied
    /// anyway (always all of them on loopback and veth), when `--zerocopy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zerocopy: Option<ZeroCopy>,
}

/// Zero-copy completion counts of one stream's sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ZeroCopy {
    /// Sends whose pages the kernel released.
    pub completed: u64,
    /// ... of which it had copied after all.
    pub copied: u64,
}

/// Mean per-core CPU of one host over the counted intervals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct HostCpu {
    /// Mean busy % over all cores.
    pub mean_busy: f64,
    /// Per core.
    pub cpus: Vec<CoreMean>,
    /// Intervals averaged.
    pub intervals: usize,
    /// CPU time wirescope's sampler spent observing this host over the
    /// counted intervals (ms, its thread's CPU clock).
    #[serde(default)]
    pub observer_cpu_ms: f64,
    /// That time as a share of the CPU time the host's cores were busy over
    /// the same intervals (%): what observing cost, against what the
    /// traffic kept busy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observer_share_pct: Option<f64>,
}

/// One core's means (percent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CoreMean {
    /// CPU number.
    pub cpu: u32,
    /// user+nice+system+irq+softirq+steal.
    pub busy: f64,
    /// user+nice.
    pub user: f64,
    /// system.
    pub system: f64,
    /// irq.
    pub irq: f64,
    /// softirq.
    pub softirq: f64,
}

/// The result of one test point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// Engine name.
    pub engine: String,
    /// Mode name.
    pub mode: String,
    /// Sweep coordinates, when sweeping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepValue>,
    /// Seconds counted (after the warm-up).
    pub duration_s: f64,
    /// Bytes received over the counted time (by the receiving end(s)).
    pub bytes: u64,
    /// bytes × 8 / duration.
    pub throughput_bps: f64,
    /// Messages completed (rr: transactions; pingpong: messages; stream: 0).
    pub messages: u64,
    /// messages / duration.
    pub rate_per_s: f64,
    /// pingpong: MiB/s the client received (muduo's figure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mib_per_s: Option<f64>,
    /// The engine's own section, under its own key (`grpc`, `sink`,
    /// `rdma`; none for TCP): see [`crate::traffic::Sections`].
    #[serde(flatten)]
    pub sections: crate::traffic::Sections,
    /// rr latency (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<LatencySummary>,
    /// Per stream.
    pub streams: Vec<StreamSummary>,
    /// Mean per-core CPU per host.
    pub hosts: Hosts<HostCpu>,
    /// True when the agent vanished.
    pub peer_lost: bool,
    /// True when the user ended the point early.
    pub interrupted: bool,
    /// Why the point failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Set when the figures cover less than the whole point (the receiving
    /// host's final counters never arrived): what they do cover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
    /// What limited the point, most important first (diagnosis over all its intervals).
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// The bottleneck in one sentence: the most important warning or error
    /// with the first fix to try, or what the hosts' CPUs say when no rule
    /// found a limit ([`crate::diagnose::limited_by`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<String>,
}

/// The log's JSON Schema (draft 2020-12), derived from [`Record`]: what
/// `docs/log.schema.json` publishes. Every line of a log (and of
/// `--log -`) is one instance of it.
pub fn json_schema() -> serde_json::Value {
    schemars::schema_for!(Record).to_value()
}

/// `value` as JSON with the log's [`SCHEMA_VERSION`] as its first key
/// (`{"schema":1,...}`): what the faces' `--json` outputs print, so a
/// reader knows which fields to expect. `value` must serialize as an
/// object (a struct or a map); its keys keep their order.
pub fn versioned_json<T: Serialize>(value: &T, pretty: bool) -> serde_json::Result<String> {
    #[derive(Serialize)]
    struct Versioned<'a, T> {
        schema: u32,
        #[serde(flatten)]
        value: &'a T,
    }
    let v = Versioned {
        schema: SCHEMA_VERSION,
        value,
    };
    if pretty {
        serde_json::to_string_pretty(&v)
    } else {
        serde_json::to_string(&v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/log.schema.json is the types' schema (regenerate it with
    /// `WIRESCOPE_BLESS=1 cargo test --lib record::schema`).
    #[test]
    fn the_published_schema_is_the_types() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/log.schema.json");
        let want = format!(
            "{}\n",
            serde_json::to_string_pretty(&json_schema()).expect("schema encodes")
        );
        let now = std::fs::read_to_string(&path).unwrap_or_default();
        if now != want && std::env::var_os("WIRESCOPE_BLESS").is_some() {
            std::fs::write(&path, &want).expect("write docs/log.schema.json");
            return;
        }
        assert!(
            now == want,
            "docs/log.schema.json is stale: WIRESCOPE_BLESS=1 cargo test --lib record::schema"
        );
    }

    #[test]
    fn the_schema_names_every_record_type_and_the_version_key() {
        let s = serde_json::to_string(&json_schema()).expect("schema encodes");
        for t in ["header", "sample", "event", "summary", "finding"] {
            assert!(s.contains(&format!("\"const\":\"{t}\"")), "{t} missing");
        }
        let e = Event {
            t: 1.5,
            kind: "x".into(),
            message: "y".into(),
        };
        let line = versioned_json(&e, false).expect("encodes");
        assert!(
            line.starts_with(&format!("{{\"schema\":{SCHEMA_VERSION},")),
            "{line}"
        );
        assert!(
            versioned_json(&[1, 2], false).is_err(),
            "an array has no key to add"
        );
    }
}

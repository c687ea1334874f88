//! The fleet log: JSON lines, one record per line, written as the fleet
//! runs (so a killed run leaves every finished pair behind):
//! `fleet_header` (hosts, pattern, rounds, the test), one `host` per agent
//! when its facts are first seen, one `pair` per tested pair, and a closing
//! `fleet_summary` (the matrix, the outliers, the odd settings, who was not
//! tested and why).

use super::analyze::{Matrix, OddFact, SlowLink, SlowNode};
use crate::diagnose::Finding;
use crate::probe::facts::HostFacts;
use crate::probe::system::HostInfo;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// The fleet log's schema name and version (its first record says it).
pub const FLEET_SCHEMA: &str = "wirescope-fleet/1";

/// One line of a fleet log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FleetRecord {
    /// First line.
    FleetHeader(Box<FleetHeader>),
    /// An agent's identity and facts.
    Host(Box<HostRecord>),
    /// One pair's test (both directions).
    Pair(Box<PairRecord>),
    /// Last line.
    FleetSummary(Box<FleetSummary>),
}

/// What the fleet runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FleetHeader {
    /// [`FLEET_SCHEMA`].
    pub schema: String,
    /// argv of the coordinator.
    pub command_line: Vec<String>,
    /// Hosts in matrix order: name and control address.
    pub hosts: Vec<(String, String)>,
    /// `ring`, `all-pairs`, `star`, `pairs`.
    pub pattern: String,
    /// The pairs of every round (host indices; the first runs the test).
    pub rounds: Vec<Vec<(usize, usize)>>,
    /// The engine and mode, e.g. `tcp stream`.
    pub test: String,
    /// Seconds per test.
    pub time_s: f64,
    /// `both` (each direction in turn), `bidir` (both at once) or `one` (first → second only).
    pub directions: String,
    /// When the run started (RFC 3339).
    pub started: String,
}

/// An agent as the fleet saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostRecord {
    /// Its name in the matrix.
    pub host: String,
    /// Who it says it is.
    pub info: HostInfo,
    /// Its facts (from its first Sample of a test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<Box<HostFacts>>,
}

/// One direction of a pair's test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirectionResult {
    /// Sender.
    pub from: String,
    /// Receiver.
    pub to: String,
    /// Throughput the receiver counted (bits/s); None when the test failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bps: Option<f64>,
    /// Retransmitted segments (TCP).
    pub retransmits: u64,
    /// Busiest core of the sender: CPU and busy %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_from: Option<(u32, f64)>,
    /// Busiest core of the receiver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_to: Option<(u32, f64)>,
    /// What the rules found (hosts: `local` is the host that ran the test).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// The bottleneck in one sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<String>,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One tested pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PairRecord {
    /// Round number, from 1.
    pub round: usize,
    /// The host that ran the test.
    pub a: String,
    /// The other.
    pub b: String,
    /// Each direction tested.
    pub directions: Vec<DirectionResult>,
}

/// How the fleet run ended and what it found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FleetSummary {
    /// Throughput matrix (rows = sender).
    pub matrix: Matrix,
    /// Nodes whose links are mostly slow.
    pub slow_nodes: Vec<Explained<SlowNode>>,
    /// Links slower than both nodes' others.
    pub slow_links: Vec<Explained<SlowLink>>,
    /// Settings in which some hosts differ from the rest.
    pub odd_facts: Vec<OddFact>,
    /// Hosts not tested at all, and why.
    pub untested: Vec<(String, String)>,
    /// Pair directions that failed: from, to, why.
    pub failed: Vec<(String, String, String)>,
    /// Rounds run (of the planned).
    pub rounds_run: usize,
    /// Rounds planned.
    pub rounds_planned: usize,
    /// Pair tests run.
    pub pairs_run: usize,
    /// True when Ctrl-C ended the run early.
    pub interrupted: bool,
    /// Wall time of the run (s).
    pub wall_s: f64,
    /// Sum of the test lengths of the rounds (s): wall time minus this is the
    /// coordination overhead.
    pub test_s: f64,
}

/// An outlier with what explains it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Explained<T> {
    /// The outlier.
    #[serde(flatten)]
    pub what: T,
    /// Findings of its tests and odd settings of its hosts, one line each.
    pub evidence: Vec<String>,
}

/// Writes a fleet log, one flushed line per record.
pub struct FleetLog {
    w: std::io::BufWriter<std::fs::File>,
    path: String,
}

/// A fleet log that cannot be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the fleet log {path}: {source}")]
pub struct FleetLogError {
    path: String,
    #[source]
    source: std::io::Error,
}

/// A fleet log that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum FleetReadError {
    /// The file.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A line that is not a fleet record.
    #[error("{path}:{line}: not a fleet record: {source}")]
    Line {
        /// The path.
        path: String,
        /// Line number, from 1.
        line: usize,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

impl FleetLog {
    /// Create (or truncate) `path`.
    pub fn create(path: &Path) -> Result<Self, FleetLogError> {
        let f = std::fs::File::create(path).map_err(|source| FleetLogError {
            path: path.display().to_string(),
            source,
        })?;
        Ok(FleetLog {
            w: std::io::BufWriter::new(f),
            path: path.display().to_string(),
        })
    }

    /// Append one record.
    pub fn write(&mut self, r: &FleetRecord) -> Result<(), FleetLogError> {
        let err = |source| FleetLogError {
            path: self.path.clone(),
            source,
        };
        serde_json::to_writer(&mut self.w, r).map_err(|e| err(e.into()))?;
        self.w.write_all(b"\n").map_err(err)?;
        self.w.flush().map_err(err)
    }
}

/// Read a fleet log back (every line one record).
pub fn read(path: &Path) -> Result<Vec<FleetRecord>, FleetReadError> {
    let text = std::fs::read_to_string(path).map_err(|source| FleetReadError::Io {
        path: path.display().to_string(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            serde_json::from_str(l).map_err(|source| FleetReadError::Line {
                path: path.display().to_string(),
                line: n + 1,
                source,
            })
        })
        .collect()
}

/// The fleet log's JSON Schema (draft 2020-12), derived from
/// [`FleetRecord`]: what `docs/fleet.schema.json` publishes.
pub fn json_schema() -> serde_json::Value {
    schemars::schema_for!(FleetRecord).to_value()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/fleet.schema.json is the types' schema (regenerate it with
    /// `WIRESCOPE_BLESS=1 cargo test --lib fleet::log`).
    #[test]
    fn the_published_fleet_schema_is_the_types() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/fleet.schema.json");
        let want = format!(
            "{}\n",
            serde_json::to_string_pretty(&json_schema()).expect("schema encodes")
        );
        let now = std::fs::read_to_string(&path).unwrap_or_default();
        if now != want && std::env::var_os("WIRESCOPE_BLESS").is_some() {
            std::fs::write(&path, &want).expect("write docs/fleet.schema.json");
            return;
        }
        assert!(
            now == want,
            "docs/fleet.schema.json is stale: WIRESCOPE_BLESS=1 cargo test --lib fleet::log"
        );
        for t in ["fleet_header", "host", "pair", "fleet_summary"] {
            assert!(want.contains(&format!("\"const\": \"{t}\"")), "{t} missing");
        }
    }

    #[test]
    fn a_log_round_trips_and_a_bad_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.jsonl");
        let mut log = FleetLog::create(&p).unwrap();
        let pair = PairRecord {
            round: 1,
            a: "n1".into(),
            b: "n2".into(),
            directions: vec![DirectionResult {
                from: "n1".into(),
                to: "n2".into(),
                bps: Some(9.4e9),
                retransmits: 3,
                busiest_from: Some((2, 97.5)),
                busiest_to: None,
                findings: Vec::new(),
                limited_by: Some("one core".into()),
                error: None,
            }],
        };
        log.write(&FleetRecord::Pair(Box::new(pair.clone())))
            .unwrap();
        drop(log);
        assert_eq!(read(&p).unwrap(), vec![FleetRecord::Pair(Box::new(pair))]);
        std::fs::write(&p, "{\"type\":\"pair\"}\n").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("f.jsonl:1"), "{e}");
    }
}

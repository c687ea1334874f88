//! The Finding type: what a rule says, with its evidence, fix and score.

use crate::probe::sample::HostRole;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How bad a finding is.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; not holding the link back on its own.
    Info,
    /// Likely costs throughput.
    Warn,
    /// Known to cost throughput badly.
    Error,
}

impl Severity {
    /// Lower-case name (`info`, `warn`, `error`).
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Error => "error",
        }
    }

    /// Base of the ranking score (see the module docs of [`crate::diagnose`]).
    pub fn base_score(self) -> f64 {
        match self {
            Severity::Info => 0.0,
            Severity::Warn => 100.0,
            Severity::Error => 200.0,
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A number or a piece of text shown as evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Value {
    /// A measured or configured number.
    Num(f64),
    /// A configured string (driver version, governor, qdisc kind...).
    Text(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Num(v) if v.fract() == 0.0 && v.abs() < 1e15 => write!(f, "{}", *v as i64),
            Value::Num(v) if v.abs() >= 100.0 => write!(f, "{v:.0}"),
            Value::Num(v) => write!(f, "{v:.2}"),
            Value::Text(s) => f.write_str(s),
        }
    }
}

/// One number (or setting) behind a finding, with its unit and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Evidence {
    /// What was measured (`cpu3 busy`, `rx_out_of_buffer`, `tcp_rmem max`).
    pub what: String,
    /// The value.
    pub value: Value,
    /// Its unit (`%`, `B`, `/s`, `Mb/s`, `us`; empty for text and plain counts).
    pub unit: String,
    /// The counter or file it came from (`/proc/stat`, `ethtool -S veth-b`, `TCP_INFO conn 0`).
    pub source: String,
}

impl fmt::Display for Evidence {
    /// `what = value unit (source)`; percentages to a tenth at most, as
    /// the titles print them (`100 %`, `99.9 %`, never `100.00 %`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.value {
            Value::Num(v) if self.unit == "%" => {
                let r = (v * 10.0).round() / 10.0;
                if r.fract() == 0.0 {
                    write!(f, "{} = {r:.0}", self.what)?;
                } else {
                    write!(f, "{} = {r:.1}", self.what)?;
                }
            }
            _ => write!(f, "{} = {}", self.what, self.value)?,
        }
        if !self.unit.is_empty() {
            write!(f, " {}", self.unit)?;
        }
        write!(f, " ({})", self.source)
    }
}

impl Evidence {
    /// A numeric evidence line.
    pub fn num(what: impl Into<String>, value: f64, unit: &str, source: impl Into<String>) -> Self {
        Evidence {
            what: what.into(),
            value: Value::Num(value),
            unit: unit.to_string(),
            source: source.into(),
        }
    }

    /// A textual evidence line.
    pub fn text(
        what: impl Into<String>,
        value: impl Into<String>,
        source: impl Into<String>,
    ) -> Self {
        Evidence {
            what: what.into(),
            value: Value::Text(value.into()),
            unit: String::new(),
            source: source.into(),
        }
    }
}

/// What a rule found on one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Finding {
    /// Stable rule id (`cpu.single-core-saturated`, `nic.gro-off`, ...): part of the interface.
    pub id: String,
    /// How bad.
    pub severity: Severity,
    /// Which host it is about (and where the fix must be run).
    pub host: HostRole,
    /// What exactly it is about on that host (`veth-b`, `cpu1`, `conn 0`); with `id`
    /// and `host` it identifies the finding across intervals.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject: String,
    /// One line for people.
    pub title: String,
    /// The numbers that prove it.
    pub evidence: Vec<Evidence>,
    /// Why it limits throughput.
    pub why: String,
    /// Exact commands to run on that host (`ethtool -K veth-b gro on`).
    pub fix: Vec<String>,
    /// Where to read more (kernel doc or vendor guide), from `assets/rules.md`.
    pub reference: String,
    /// Ranking score: higher first (see [`crate::diagnose`]).
    pub score: f64,
}

impl Finding {
    /// A finding with empty evidence and fix; `impact` ∈ [0, 1] sets the score.
    pub fn new(
        id: &str,
        severity: Severity,
        host: HostRole,
        subject: impl Into<String>,
        title: impl Into<String>,
        impact: f64,
    ) -> Self {
        Finding {
            id: id.to_string(),
            severity,
            host,
            subject: subject.into(),
            title: title.into(),
            evidence: Vec::new(),
            why: String::new(),
            fix: Vec::new(),
            reference: super::impact::reference(id).to_string(),
            score: severity.base_score() + 100.0 * impact.clamp(0.0, 1.0),
        }
    }

    /// A finding of rule `id` scored by the rule's prior impact
    /// ([`super::impact::prior`]): [`Finding::new`] for the usual case.
    pub fn rule(
        id: &str,
        severity: Severity,
        host: HostRole,
        subject: impl Into<String>,
        title: impl Into<String>,
    ) -> Self {
        Finding::new(id, severity, host, subject, title, super::impact::prior(id))
    }

    /// Add an evidence line.
    pub fn ev(mut self, e: Evidence) -> Self {
        self.evidence.push(e);
        self
    }

    /// Add a numeric evidence line ([`Evidence::num`]).
    pub fn num(
        self,
        what: impl Into<String>,
        value: f64,
        unit: &str,
        source: impl Into<String>,
    ) -> Self {
        self.ev(Evidence::num(what, value, unit, source))
    }

    /// Add a textual evidence line ([`Evidence::text`]).
    pub fn text(
        self,
        what: impl Into<String>,
        value: impl Into<String>,
        source: impl Into<String>,
    ) -> Self {
        self.ev(Evidence::text(what, value, source))
    }

    /// Set why it limits throughput.
    pub fn why(mut self, why: impl Into<String>) -> Self {
        self.why = why.into();
        self
    }

    /// Add a fix command.
    pub fn fix(mut self, cmd: impl Into<String>) -> Self {
        self.fix.push(cmd.into());
        self
    }

    /// The identity used by the [`super::Tracker`]: id, host and subject.
    pub fn key(&self) -> (String, &'static str, String) {
        (self.id.clone(), self.host.name(), self.subject.clone())
    }
}

//! The pure part of a checklist: is a change better than the noise, the
//! record of each step, the summary table, and the kept changes as a new
//! profile.
//!
//! Rounds cannot alternate before/after here (a change stays applied while
//! it is measured), so the noise is estimated from each side's own spread:
//! `spread = (max − min) / median` of that side's rounds. A change is kept
//! when its median gain is larger than the larger of the two spreads and
//! than the checklist's `min_gain_pct` floor (a single round has no spread;
//! the floor stops a 0.1 % wobble from counting as a win). Otherwise
//! rolling it back is proposed.

use crate::probe::sample::HostRole;
use serde::{Deserialize, Serialize};

/// What a checklist measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Received throughput of the test (bit/s), higher is better.
    Throughput,
    /// Completed requests (messages/s), higher is better.
    Rate,
    /// 99th-percentile latency (µs), lower is better.
    P99,
}

impl Metric {
    /// Parse the checklist word.
    pub fn parse(s: &str) -> Option<Metric> {
        match s {
            "throughput" => Some(Metric::Throughput),
            "rate" => Some(Metric::Rate),
            "p99" => Some(Metric::P99),
            _ => None,
        }
    }

    /// True unless it is a latency.
    pub fn higher_is_better(self) -> bool {
        !matches!(self, Metric::P99)
    }

    /// A value with its unit (`9.41 Gbit/s`, `52.3 k msg/s`, `41 us`).
    pub fn format(self, v: f64) -> String {
        match self {
            Metric::Throughput => {
                let (d, u) = scale(v, &["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"]);
                format!("{:.2} {u}", d)
            }
            Metric::Rate => {
                let (d, u) = scale(v, &["msg/s", "k msg/s", "M msg/s", "G msg/s", "T msg/s"]);
                format!("{:.1} {u}", d)
            }
            Metric::P99 => format!("{v:.0} us"),
        }
    }
}

fn scale<'a>(v: f64, units: &[&'a str]) -> (f64, &'a str) {
    let mut d = v;
    let mut i = 0;
    while d.abs() >= 1000.0 && i + 1 < units.len() {
        d /= 1000.0;
        i += 1;
    }
    (d, units[i])
}

/// One side's rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stats {
    /// Every round, in order.
    pub values: Vec<f64>,
    /// Median.
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// (max − min) / median, in %.
    pub spread_pct: f64,
}

/// Median, range and spread of some rounds (an empty list gives zeros).
pub fn stats(values: &[f64]) -> Stats {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = match n {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    };
    let (min, max) = (
        v.first().copied().unwrap_or(0.0),
        v.last().copied().unwrap_or(0.0),
    );
    let spread_pct = if median.abs() > 0.0 {
        (max - min) / median.abs() * 100.0
    } else {
        0.0
    };
    Stats {
        values: values.to_vec(),
        median,
        min,
        max,
        spread_pct,
    }
}

/// Keep the change or propose to roll it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verdict {
    /// Before the change.
    pub before: Stats,
    /// After it.
    pub after: Stats,
    /// Change of the median, in % (signed as measured).
    pub change_pct: f64,
    /// Improvement in % (positive = better, whichever direction is better).
    pub gain_pct: f64,
    /// The larger spread of the two sides, in %.
    pub spread_pct: f64,
    /// What the gain had to beat: max(spread, floor).
    pub threshold_pct: f64,
    /// Keep it?
    pub keep: bool,
    /// One line for people.
    pub reason: String,
}

/// Decide on a change from the rounds before and after it.
pub fn decide(metric: Metric, before: &[f64], after: &[f64], min_gain_pct: f64) -> Verdict {
    let b = stats(before);
    let a = stats(after);
    let change_pct = if b.median.abs() > 0.0 {
        (a.median - b.median) / b.median.abs() * 100.0
    } else if a.median > 0.0 {
        100.0
    } else {
        0.0
    };
    let gain_pct = if metric.higher_is_better() {
        change_pct
    } else {
        -change_pct
    };
    let spread_pct = b.spread_pct.max(a.spread_pct);
    let threshold_pct = spread_pct.max(min_gain_pct);
    let keep = gain_pct > threshold_pct;
    let reason = if keep {
        format!("better by {gain_pct:.1} %, more than the spread of the rounds ({spread_pct:.1} %): keep it")
    } else if gain_pct > 0.0 {
        format!(
            "better by only {gain_pct:.1} %, not more than {threshold_pct:.1} % (spread {spread_pct:.1} %, floor {min_gain_pct:.1} %): roll it back"
        )
    } else {
        format!(
            "worse by {:.1} % (spread {spread_pct:.1} %): roll it back",
            -gain_pct
        )
    };
    Verdict {
        before: b,
        after: a,
        change_pct,
        gain_pct,
        spread_pct,
        threshold_pct,
        keep,
        reason,
    }
}

/// How a step ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "status", content = "detail", rename_all = "snake_case")]
pub enum StepStatus {
    /// Measured better: kept.
    Kept,
    /// Not better: rolled back.
    RolledBack,
    /// Not better, but the user kept it.
    KeptAnyway,
    /// The user declined the change.
    Declined,
    /// The finding was not present: nothing to do.
    NotFound,
    /// Nothing to change (already set, or not applicable here).
    Skipped(String),
    /// Applying or measuring failed.
    Failed(String),
}

impl StepStatus {
    /// Short word for the table.
    pub fn word(&self) -> &'static str {
        match self {
            StepStatus::Kept => "kept",
            StepStatus::RolledBack => "rolled back",
            StepStatus::KeptAnyway => "kept (asked)",
            StepStatus::Declined => "declined",
            StepStatus::NotFound => "not found",
            StepStatus::Skipped(_) => "skipped",
            StepStatus::Failed(_) => "failed",
        }
    }
}

/// One checklist step, as the summary and the JSON-lines output carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StepRecord {
    /// 1-based step number.
    pub step: usize,
    /// Rule id of the check.
    pub rule: String,
    /// Title of the check.
    pub title: String,
    /// Host the change was made on (see [`super::side`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostRole>,
    /// Why that host ("it receives the test's data").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host_why: String,
    /// The finding's subject.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject: String,
    /// The changes the step made (`setting: before -> after`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
    /// What rolling the step back restored (`setting restored to X (was Y
    /// during the step)`), in the past tense.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restored: Vec<String>,
    /// The host whose agent refused the change (the step is `skipped`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_by: Option<HostRole>,
    /// The profile fragment applied (TOML), for saving the kept changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// How it ended.
    #[serde(flatten)]
    pub status: StepStatus,
}

/// The end-of-run table: step, change, before, after, change %, spread, outcome.
pub fn summary_table(metric: Metric, steps: &[StepRecord]) -> String {
    let rows: Vec<[String; 7]> = steps
        .iter()
        .map(|s| {
            let host = s.host.map(|h| h.name()).unwrap_or("-");
            let change = if !s.restored.is_empty() {
                s.restored.join("; ")
            } else if s.changes.is_empty() {
                s.title.clone()
            } else {
                s.changes.join("; ")
            };
            let (b, a, c, sp) = match &s.verdict {
                Some(v) => (
                    metric.format(v.before.median),
                    metric.format(v.after.median),
                    format!("{:+.1} %", v.change_pct),
                    format!("{:.1} %", v.spread_pct),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            [
                format!("{} {}", s.step, s.rule),
                format!("{host}: {change}"),
                b,
                a,
                c,
                sp,
                s.status.word().to_string(),
            ]
        })
        .collect();
    let head = [
        "step", "change", "before", "after", "change", "spread", "result",
    ];
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<width$}", width = w[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = line(&head.map(String::from));
    out.push('\n');
    for r in &rows {
        out.push_str(&line(r));
        out.push('\n');
    }
    out
}

/// One line counting how the steps ended: `3 kept, 1 rolled back, 1 skipped
/// (refused by the peer), 4 not found`; outcomes with no step are left out.
pub fn summary_counts(steps: &[StepRecord]) -> String {
    let label = |s: &StepRecord| match (&s.status, s.refused_by) {
        (StepStatus::KeptAnyway, _) => "kept when asked",
        (StepStatus::Skipped(_), Some(HostRole::Peer)) => "skipped (refused by the peer)",
        (StepStatus::Skipped(_), Some(HostRole::Local)) => "skipped (refused by the local host)",
        (status, _) => status.word(),
    };
    let order = [
        "kept",
        "kept when asked",
        "rolled back",
        "skipped (refused by the peer)",
        "skipped (refused by the local host)",
        "skipped",
        "declined",
        "failed",
        "not found",
    ];
    let parts = order.map(|w| (steps.iter().filter(|s| label(s) == w).count(), w));
    let v: Vec<String> = parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, w)| format!("{n} {w}"))
        .collect();
    if v.is_empty() {
        "no steps".into()
    } else {
        v.join(", ")
    }
}

/// Why the kept changes could not be written as a profile.
#[derive(Debug, thiserror::Error)]
pub enum KeptError {
    /// The profile name is not one.
    #[error(transparent)]
    Name(#[from] super::profile::NameError),
    /// A step's change does not parse as TOML.
    #[error("step {step}: {source}")]
    Step {
        /// The step.
        step: usize,
        /// The parser's error.
        #[source]
        source: toml::de::Error,
    },
    /// The merged table could not be written.
    #[error("cannot write the kept changes as TOML: {0}")]
    Write(#[from] toml::ser::Error),
    /// The merged profile does not parse back.
    #[error(transparent)]
    Profile(#[from] super::profile::ProfileError),
}

/// The kept changes of one host as a new profile (TOML), or None when
/// nothing was kept there. Later steps override earlier ones.
pub fn kept_profile(
    name: &str,
    checklist: &str,
    host: HostRole,
    steps: &[StepRecord],
) -> Result<Option<String>, KeptError> {
    super::profile::check_profile_name(name)?;
    let mut sysctl = toml::Table::new();
    let mut interfaces: Vec<toml::Value> = Vec::new();
    let mut host_t = toml::Table::new();
    let mut kept = Vec::new();
    for s in steps {
        if !matches!(s.status, StepStatus::Kept | StepStatus::KeptAnyway) || s.host != Some(host) {
            continue;
        }
        let Some(text) = &s.profile else { continue };
        let t: toml::Table = text.parse().map_err(|source| KeptError::Step {
            step: s.step,
            source,
        })?;
        if let Some(toml::Value::Table(x)) = t.get("sysctl") {
            sysctl.extend(x.clone());
        }
        if let Some(toml::Value::Array(x)) = t.get("interface") {
            interfaces.extend(x.iter().cloned());
        }
        if let Some(toml::Value::Table(x)) = t.get("host") {
            host_t.extend(x.clone());
        }
        kept.push(format!("{} {}", s.step, s.rule));
    }
    if kept.is_empty() {
        return Ok(None);
    }
    let mut doc = toml::Table::new();
    doc.insert("name".into(), name.into());
    doc.insert(
        "description".into(),
        format!(
            "Changes kept by checklist {checklist} on the {} host (steps {})",
            host.name(),
            kept.join(", ")
        )
        .into(),
    );
    doc.insert(
        "for".into(),
        format!("what checklist {checklist} measured").into(),
    );
    if !sysctl.is_empty() {
        doc.insert("sysctl".into(), toml::Value::Table(sysctl));
    }
    if !interfaces.is_empty() {
        doc.insert("interface".into(), toml::Value::Array(interfaces));
    }
    if !host_t.is_empty() {
        doc.insert("host".into(), toml::Value::Table(host_t));
    }
    let text = toml::to_string(&doc)?;
    let text = format!("# Kept by `wirescope checklist run {checklist}`; apply with `wirescope profile apply {name}`.\n{text}");
    super::profile::Profile::parse(&text, "kept changes")?;
    Ok(Some(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_rounds() {
        let s = stats(&[10.0, 12.0, 11.0]);
        assert_eq!((s.median, s.min, s.max), (11.0, 10.0, 12.0));
        assert!((s.spread_pct - 200.0 / 11.0).abs() < 1e-9);
        assert_eq!(stats(&[5.0, 7.0]).median, 6.0);
        assert_eq!(stats(&[4.0]).spread_pct, 0.0);
        assert_eq!(stats(&[]).median, 0.0);
    }

    #[test]
    fn a_large_gain_is_kept() {
        let v = decide(
            Metric::Throughput,
            &[1.0e9, 1.1e9, 1.05e9],
            &[9.0e9, 9.2e9, 9.1e9],
            1.0,
        );
        assert!(v.keep, "{v:?}");
        assert!((v.change_pct - (9.1 / 1.05 - 1.0) * 100.0).abs() < 1e-9);
        assert!(v.reason.contains("keep"));
    }

    #[test]
    fn a_gain_inside_the_spread_is_rolled_back() {
        // +2 % median gain, but the rounds before vary by ~10 %.
        let v = decide(
            Metric::Throughput,
            &[95.0, 100.0, 105.0],
            &[101.0, 102.0, 103.0],
            1.0,
        );
        assert!(!v.keep);
        assert!((v.spread_pct - 10.0).abs() < 1e-9);
        assert!(v.reason.contains("not more than"), "{}", v.reason);
        // Worse.
        let v = decide(Metric::Rate, &[100.0], &[90.0], 1.0);
        assert!(
            !v.keep && v.reason.contains("worse by 10.0"),
            "{}",
            v.reason
        );
        // One round each: no spread, the floor decides.
        assert!(!decide(Metric::Throughput, &[100.0], &[100.5], 1.0).keep);
        assert!(decide(Metric::Throughput, &[100.0], &[101.5], 1.0).keep);
    }

    #[test]
    fn lower_latency_is_better() {
        let v = decide(Metric::P99, &[100.0, 101.0, 99.0], &[50.0, 51.0, 49.0], 1.0);
        assert!(v.keep && v.gain_pct > 49.0 && v.change_pct < 0.0, "{v:?}");
    }

    fn step(n: usize, rule: &str, status: StepStatus, host: HostRole, profile: &str) -> StepRecord {
        StepRecord {
            step: n,
            rule: rule.into(),
            title: "t".into(),
            host: Some(host),
            host_why: String::new(),
            subject: String::new(),
            changes: vec![format!("change {n}")],
            restored: Vec::new(),
            refused_by: None,
            profile: Some(profile.into()),
            verdict: Some(decide(Metric::Throughput, &[1.0e9], &[2.0e9], 1.0)),
            status,
        }
    }

    #[test]
    fn summary_and_kept_profile() {
        let a = "name = \"a\"\n[sysctl]\n\"net.ipv4.tcp_rmem\" = \"4096 131072 268435456\"\n";
        let b = "name = \"b\"\n[[interface]]\nmatch = \"veth-b\"\nfeatures = { gro = true }\n";
        let c = "name = \"c\"\n[sysctl]\n\"net.ipv4.tcp_wmem\" = \"4096 65536 268435456\"\n";
        let steps = vec![
            step(1, "tcp.buffer-limited", StepStatus::Kept, HostRole::Peer, a),
            step(2, "nic.gro-off", StepStatus::Kept, HostRole::Peer, b),
            step(
                3,
                "tcp.buffer-limited",
                StepStatus::RolledBack,
                HostRole::Peer,
                c,
            ),
            step(4, "cpu.governor", StepStatus::Kept, HostRole::Local, a),
        ];
        let t = summary_table(Metric::Throughput, &steps);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        assert!(lines[0].starts_with("step") && lines[0].ends_with("result"));
        assert!(lines[1].contains("1 tcp.buffer-limited") && lines[1].contains("peer: change 1"));
        assert!(
            lines[1].contains("1.00 Gbit/s")
                && lines[1].contains("2.00 Gbit/s")
                && lines[1].contains("+100.0 %")
        );
        assert!(lines[3].ends_with("rolled back"));
        let p = kept_profile("kept-peer", "single-stream", HostRole::Peer, &steps)
            .unwrap()
            .unwrap();
        let parsed = crate::tune::Profile::parse(&p, "k").unwrap();
        assert_eq!(parsed.name, "kept-peer");
        assert!(
            p.contains("tcp_rmem") && p.contains("veth-b") && !p.contains("tcp_wmem"),
            "{p}"
        );
        assert!(kept_profile("k", "x", HostRole::Local, &steps[..3])
            .unwrap()
            .is_none());
        let rec = serde_json::to_value(&steps[2]).unwrap();
        assert_eq!(rec["status"], "rolled_back");
    }
}

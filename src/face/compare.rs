//! `wirescope compare A.jsonl B.jsonl`: two runs point by point — the
//! throughput (or rate) and its CPU cost with the change and whether it
//! exceeds the run-to-run spread, the findings that appeared or cleared,
//! and the host facts that differ (driver, firmware, sysctls, offloads,
//! rings, channels, MTU, kernel). Text, or `--json`.
//!
//! The spread of a point is its intervals' coefficient of variation (the
//! warm-up left out): a change counts when it exceeds twice the larger of
//! the two points' spreads (about 95 % for roughly normal intervals), so a
//! 3 % difference between two runs that each wander by 10 % is "within
//! the spread", as it is.

use super::report::data::{Point, Run};
use super::FaceError;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// One figure of a point.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Figure {
    /// The headline value: Gbit/s for byte streams, else per second.
    pub value: f64,
    /// Its unit.
    pub unit: &'static str,
    /// Busy cores of both hosts per unit (per Gbit/s, or per million per second).
    pub cpu_per_unit: Option<f64>,
    /// Coefficient of variation of the intervals (%).
    pub spread_pct: f64,
}

/// One point of both runs.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PointDiff {
    /// `point 2 (size=65536)`.
    pub point: String,
    /// Run A's figure.
    pub a: Option<Figure>,
    /// Run B's figure.
    pub b: Option<Figure>,
    /// (B − A) / A in %.
    pub change_pct: Option<f64>,
    /// CPU cost change in %.
    pub cpu_change_pct: Option<f64>,
    /// The change exceeds twice the larger spread.
    pub significant: bool,
}

/// A host fact with different values.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FactDiff {
    /// `local` or `peer`.
    pub host: &'static str,
    /// Dotted path (`nics.veth-b.features.generic-receive-offload`).
    pub key: String,
    /// In A (absent: null).
    pub a: Option<String>,
    /// In B.
    pub b: Option<String>,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Comparison {
    /// File names.
    pub a: String,
    /// File names.
    pub b: String,
    /// Per point.
    pub points: Vec<PointDiff>,
    /// Findings (host id subject) in B's summaries, not in A's.
    pub appeared: Vec<String>,
    /// Findings in A's summaries, not in B's.
    pub cleared: Vec<String>,
    /// Facts that differ.
    pub facts: Vec<FactDiff>,
}

fn figure(p: &Point) -> Option<Figure> {
    let s = p.summary.as_ref()?;
    let (value, unit) = super::report::html::headline_value(p)?;
    let bytes = unit == "Gbit/s";
    let per = if bytes { 1.0 } else { 1e6 };
    let cores = |h: &crate::record::schema::HostCpu| h.mean_busy / 100.0 * h.cpus.len() as f64;
    let busy = cores(&s.hosts.local) + cores(&s.hosts.peer);
    let series: Vec<f64> = p
        .rows
        .iter()
        .filter(|r| !r.omitted)
        .map(|r| if bytes { r.l2p + r.p2l } else { r.rate })
        .collect();
    Some(Figure {
        value,
        unit,
        cpu_per_unit: (value > 0.0 && busy > 0.0).then(|| busy / (value / per)),
        spread_pct: spread(&series),
    })
}

/// Coefficient of variation (%) of the intervals; the last, partial one
/// is left out when there are several.
fn spread(v: &[f64]) -> f64 {
    let v = if v.len() > 2 { &v[..v.len() - 1] } else { v };
    let n = v.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mean = v.iter().sum::<f64>() / n;
    if mean <= 0.0 {
        return 0.0;
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    var.sqrt() / mean * 100.0
}

fn pct(a: f64, b: f64) -> Option<f64> {
    (a > 0.0).then(|| (b - a) / a * 100.0)
}

fn findings(r: &Run) -> BTreeSet<String> {
    r.points
        .iter()
        .filter_map(|p| p.summary.as_ref())
        .flat_map(|s| s.findings.iter())
        .map(|f| {
            format!(
                "{} {}: {} {}",
                f.severity.name(),
                f.host.name(),
                f.id,
                f.subject
            )
            .trim_end()
            .to_string()
        })
        .collect()
}

/// A JSON value flattened to dotted keys; arrays of objects with a `name`
/// (NICs, IRQs) are keyed by it, other arrays by index.
fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    use serde_json::Value;
    let key = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                flatten(&key(k), x, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let k = match x.get("name").and_then(Value::as_str) {
                    Some(n) => n.to_string(),
                    None => i.to_string(),
                };
                flatten(&key(&k), x, out);
            }
        }
        Value::Null => {}
        Value::String(s) => _ = out.insert(prefix.to_string(), s.clone()),
        other => _ = out.insert(prefix.to_string(), other.to_string()),
    }
}

/// Facts that say what a host is and how it is set, not what it is doing.
fn volatile(key: &str) -> bool {
    key.starts_with("boot_id") || key.starts_with("unavailable") || key.contains("uptime")
}

fn facts(a: &Run, b: &Run) -> Vec<FactDiff> {
    let first = |r: &Run, h: usize| -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        if let Some(f) = r.points.iter().find_map(|p| p.facts[h].as_ref()) {
            if let Ok(v) = serde_json::to_value(f) {
                flatten("", &v, &mut m);
            }
        }
        m
    };
    let mut out = Vec::new();
    for (h, host) in ["local", "peer"].into_iter().enumerate() {
        let (fa, fb) = (first(a, h), first(b, h));
        if fa.is_empty() || fb.is_empty() {
            continue;
        }
        let keys: BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
        for k in keys {
            let (x, y) = (fa.get(k), fb.get(k));
            if x != y && !volatile(k) {
                out.push(FactDiff {
                    host,
                    key: k.clone(),
                    a: x.cloned(),
                    b: y.cloned(),
                });
            }
        }
    }
    out
}

/// Compare run `a` (before) with run `b` (after).
pub fn compare(a: &Run, b: &Run) -> Comparison {
    let n = a.points.len().max(b.points.len());
    let points = (0..n)
        .map(|i| {
            let (pa, pb) = (a.points.get(i), b.points.get(i));
            let (fa, fb) = (pa.and_then(figure), pb.and_then(figure));
            let label = pa
                .or(pb)
                .map(super::report::html::point_label)
                .unwrap_or_default();
            let change = fa
                .as_ref()
                .zip(fb.as_ref())
                .and_then(|(x, y)| pct(x.value, y.value));
            let cpu_change = fa
                .as_ref()
                .zip(fb.as_ref())
                .and_then(|(x, y)| pct(x.cpu_per_unit?, y.cpu_per_unit?));
            let bound = 2.0
                * fa.iter()
                    .chain(fb.iter())
                    .map(|f| f.spread_pct)
                    .fold(0.0, f64::max);
            PointDiff {
                point: label,
                significant: change.is_some_and(|c| c.abs() > bound),
                change_pct: change,
                cpu_change_pct: cpu_change,
                a: fa,
                b: fb,
            }
        })
        .collect();
    let (ia, ib) = (findings(a), findings(b));
    Comparison {
        a: a.name.clone(),
        b: b.name.clone(),
        points,
        appeared: ib.difference(&ia).cloned().collect(),
        cleared: ia.difference(&ib).cloned().collect(),
        facts: facts(a, b),
    }
}

fn fig(f: &Option<Figure>) -> String {
    match f {
        Some(f) if f.unit == "Gbit/s" => format!("{:.2} Gbit/s ±{:.0} %", f.value, f.spread_pct),
        Some(f) => format!(
            "{} /s ±{:.0} %",
            super::report::charts::short(f.value),
            f.spread_pct
        ),
        None => "-".into(),
    }
}

/// The comparison for people.
pub fn text(c: &Comparison) -> String {
    let mut o = format!("compare {} (A) with {} (B)\n", c.a, c.b);
    for p in &c.points {
        let change = match (p.change_pct, p.significant) {
            (Some(x), true) => format!("{x:+.1} % (beyond the spread)"),
            (Some(x), false) => format!("{x:+.1} % (within the spread)"),
            (None, _) => "no figure to compare".into(),
        };
        let _ = writeln!(
            o,
            "  {}: A {}  B {}  {}",
            p.point,
            fig(&p.a),
            fig(&p.b),
            change
        );
        if let (Some(a), Some(b), Some(x)) = (
            p.a.as_ref().and_then(|f| f.cpu_per_unit),
            p.b.as_ref().and_then(|f| f.cpu_per_unit),
            p.cpu_change_pct,
        ) {
            let unit = p.a.as_ref().map_or("", |f| {
                if f.unit == "Gbit/s" {
                    "Gbit/s"
                } else {
                    "million/s"
                }
            });
            let _ = writeln!(
                o,
                "    CPU per {unit}: A {a:.2} cores  B {b:.2} cores  {x:+.1} %"
            );
        }
    }
    let list = |o: &mut String, what: &str, v: &[String]| {
        if v.is_empty() {
            let _ = writeln!(o, "findings {what}: none");
        } else {
            let _ = writeln!(o, "findings {what}:");
            for x in v {
                let _ = writeln!(o, "  {x}");
            }
        }
    };
    list(&mut o, "that appeared in B", &c.appeared);
    list(&mut o, "that cleared in B", &c.cleared);
    if c.facts.is_empty() {
        o.push_str("facts that differ: none\n");
    } else {
        o.push_str("facts that differ:\n");
        for f in &c.facts {
            let _ = writeln!(
                o,
                "  {} {}: {} -> {}",
                f.host,
                f.key,
                f.a.as_deref().unwrap_or("(absent)"),
                f.b.as_deref().unwrap_or("(absent)")
            );
        }
    }
    o
}

/// `wirescope compare`.
pub fn command(a: crate::cli::CompareArgs) -> super::FaceResult {
    let runs = super::report::read_runs(&[a.a.clone(), a.b.clone()])?;
    let c = compare(&runs[0], &runs[1]);
    if a.json {
        let s = crate::record::schema::versioned_json(&c, true)
            .map_err(|e| FaceError::Failed(e.into()))?;
        outln!("{s}");
    } else {
        super::out(&text(&c));
    }
    Ok(0)
}

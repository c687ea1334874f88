//! The checklist step loop: baseline, then for each finding a check covers
//! propose → confirm → apply → re-measure → keep or roll back; then the
//! summary and the kept changes per host.
//!
//! The loop decides; a [`Driver`] acts. The session (spine) implements the
//! driver: it runs the test as `wirescope run` would (on the local pair or
//! against `--peer`), applies a profile fragment on the host a finding
//! named (locally through [`super::apply`], on the peer through a
//! [`super::peer::TuneRequest`]), asks the user (TUI key or prompt; `--yes`
//! answers yes) and shows or logs each [`Record`]. Nothing here does I/O.

use super::apply::{ApplyReport, RollbackReport};
use super::checklist::{Check, Checklist};
use super::decide::{decide, kept_profile, Metric, StepRecord, StepStatus, Verdict};
use crate::diagnose::{Evidence, Finding};
use crate::probe::sample::HostRole;
use serde::{Deserialize, Serialize};

/// One run of the checklist's test.
#[derive(Debug, Clone)]
pub struct TestOutcome {
    /// The metric of that run (bit/s, msg/s or µs as the checklist says).
    pub value: f64,
    /// The findings of that run, ranked.
    pub findings: Vec<Finding>,
}

/// What the user is asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "question", rename_all = "snake_case")]
pub enum Question {
    /// Make this change?
    Apply {
        /// Step number.
        step: usize,
        /// Rule id.
        rule: String,
        /// The finding's one line.
        finding: String,
        /// Its evidence (`what = value unit (source)`).
        evidence: Vec<String>,
        /// Which host.
        host: HostRole,
        /// The commands the change amounts to (dry run on that host, when known) or the fragment.
        change: String,
    },
    /// Not better: roll it back?
    Rollback {
        /// Step number.
        step: usize,
        /// Why.
        verdict: Verdict,
    },
}

/// What the loop reports as it goes (the JSON-lines output of `--json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// The baseline rounds.
    Baseline {
        /// Metric.
        metric: Metric,
        /// Every round.
        values: Vec<f64>,
        /// Findings of the baseline (rule id, host, subject).
        findings: Vec<String>,
    },
    /// One step, finished.
    Step(Box<StepRecord>),
    /// The end.
    Summary(Box<Summary>),
}

/// The end of a checklist run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Checklist name.
    pub checklist: String,
    /// Metric.
    pub metric: Metric,
    /// Median of the baseline.
    pub baseline: f64,
    /// Median after the last kept change.
    pub last: f64,
    /// Every step.
    pub steps: Vec<StepRecord>,
    /// The kept changes of the local host as a profile (TOML), if any.
    pub kept_local: Option<String>,
    /// The same for the peer.
    pub kept_peer: Option<String>,
}

/// What the loop needs from the session (see the module docs).
pub trait Driver {
    /// Run the test once: `args` are `wirescope run` arguments (no --peer, --log, --json).
    fn run_test(&mut self, args: &[String], metric: Metric) -> Result<TestOutcome, String>;
    /// The commands a change would run on `host` (a dry run), for the question.
    fn preview(&mut self, host: HostRole, profile: &str) -> Result<Vec<String>, String>;
    /// Apply a profile on `host` through the profile machinery, skipping
    /// settings that host does not have; `@route` means the interface towards the other host.
    fn apply(&mut self, host: HostRole, profile: &str) -> Result<ApplyReport, String>;
    /// Roll back the last apply on `host`.
    fn rollback(&mut self, host: HostRole) -> Result<RollbackReport, String>;
    /// Ask; `--yes` answers true.
    fn confirm(&mut self, q: &Question) -> bool;
    /// Show or write a record.
    fn record(&mut self, r: &Record);
}

fn measure(
    d: &mut dyn Driver,
    c: &Checklist,
    rounds: u32,
) -> Result<(Vec<f64>, Vec<Finding>), String> {
    let mut values = Vec::new();
    let mut findings = Vec::new();
    for _ in 0..rounds {
        let o = d.run_test(&c.test.run, c.test.metric)?;
        values.push(o.value);
        findings = o.findings;
    }
    Ok((values, findings))
}

fn find<'a>(check: &Check, findings: &'a [Finding]) -> Option<&'a Finding> {
    findings.iter().find(|f| check.matches(&f.id, &f.subject))
}

/// Run a checklist (see the module docs). Fails only when the baseline cannot be measured.
pub fn run(c: &Checklist, rounds: u32, d: &mut dyn Driver) -> Result<Summary, String> {
    if let Some(why) = c.unavailable() {
        return Err(why);
    }
    let rounds = rounds.clamp(1, super::checklist::MAX_ROUNDS);
    let (mut current, mut findings) = measure(d, c, rounds)?;
    d.record(&Record::Baseline {
        metric: c.test.metric,
        values: current.clone(),
        findings: findings
            .iter()
            .map(|f| format!("{} {} {}", f.id, f.host.name(), f.subject))
            .collect(),
    });
    let baseline = super::decide::stats(&current).median;
    let mut steps = Vec::new();
    for check in &c.checks {
        let (rec, kept) = step(c, check, steps.len() + 1, rounds, &current, &findings, d);
        if let Some((values, f)) = kept {
            current = values;
            findings = f;
        }
        d.record(&Record::Step(Box::new(rec.clone())));
        steps.push(rec);
    }
    let name = |h: HostRole| format!("{}-kept-{}", c.name, h.name());
    let summary = Summary {
        checklist: c.name.clone(),
        metric: c.test.metric,
        baseline,
        last: super::decide::stats(&current).median,
        kept_local: kept_profile(&name(HostRole::Local), &c.name, HostRole::Local, &steps)?,
        kept_peer: kept_profile(&name(HostRole::Peer), &c.name, HostRole::Peer, &steps)?,
        steps,
    };
    d.record(&Record::Summary(Box::new(summary.clone())));
    Ok(summary)
}

/// One check: find its finding, propose, apply, re-measure, decide. Returns
/// the record and, when the change stays, the new rounds and findings.
#[allow(clippy::type_complexity)]
fn step(
    c: &Checklist,
    check: &Check,
    n: usize,
    rounds: u32,
    current: &[f64],
    findings: &[Finding],
    d: &mut dyn Driver,
) -> (StepRecord, Option<(Vec<f64>, Vec<Finding>)>) {
    let mut rec = StepRecord {
        step: n,
        rule: check.rule.clone(),
        title: check.title.clone(),
        host: None,
        subject: String::new(),
        changes: Vec::new(),
        profile: None,
        verdict: None,
        status: StepStatus::NotFound,
    };
    let Some(f) = find(check, findings) else {
        return (rec, None);
    };
    rec.host = Some(f.host);
    rec.subject = f.subject.clone();
    let end = |mut rec: StepRecord, status| {
        rec.status = status;
        (rec, None)
    };
    let fragment = match check.instantiate(&f.subject) {
        Ok(t) => t,
        Err(e) => return end(rec, StepStatus::Skipped(e)),
    };
    let change = match d.preview(f.host, &fragment) {
        Ok(cmds) if cmds.is_empty() => {
            let why = format!("the {} host already has these values", f.host.name());
            return end(rec, StepStatus::Skipped(why));
        }
        Ok(cmds) => cmds.join("\n"),
        Err(e) => return end(rec, StepStatus::Failed(e)),
    };
    let q = Question::Apply {
        step: n,
        rule: f.id.clone(),
        finding: f.title.clone(),
        evidence: f.evidence.iter().map(Evidence::to_string).collect(),
        host: f.host,
        change,
    };
    if !d.confirm(&q) {
        return end(rec, StepStatus::Declined);
    }
    let report = match d.apply(f.host, &fragment) {
        Ok(r) => r,
        Err(e) => return end(rec, StepStatus::Failed(e)),
    };
    rec.changes = report
        .changes
        .iter()
        .map(|ch| format!("{}: {} -> {}", ch.setting, ch.before, ch.after))
        .collect();
    rec.profile = Some(fragment);
    let after = match measure(d, c, rounds) {
        Ok(x) => x,
        Err(e) => {
            // Leave the host as it was before this step.
            let undo = d
                .rollback(f.host)
                .err()
                .map(|u| format!("; rolling back failed too: {u}"))
                .unwrap_or_default();
            let why = format!("measuring after the change failed: {e}{undo}");
            return end(rec, StepStatus::Failed(why));
        }
    };
    let v = decide(c.test.metric, current, &after.0, c.min_gain_pct);
    rec.status = if v.keep {
        StepStatus::Kept
    } else if d.confirm(&Question::Rollback {
        step: n,
        verdict: v.clone(),
    }) {
        match d.rollback(f.host) {
            Ok(_) => StepStatus::RolledBack,
            Err(e) => StepStatus::Failed(format!("rolling back failed: {e}")),
        }
    } else {
        StepStatus::KeptAnyway
    };
    rec.verdict = Some(v);
    let kept = matches!(rec.status, StepStatus::Kept | StepStatus::KeptAnyway).then_some(after);
    (rec, kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::Severity;

    /// A scripted session: each test run returns the next value; findings
    /// disappear once the change that fixes them is applied. It tests the
    /// loop's decisions, not a host.
    struct Script {
        values: Vec<f64>,
        applied: Vec<(HostRole, String)>,
        rolled_back: usize,
        answers: Vec<bool>,
        records: Vec<Record>,
    }

    fn finding(id: &str, host: HostRole, subject: &str) -> Finding {
        Finding::new(
            id,
            Severity::Warn,
            host,
            subject,
            format!("{id} on {subject}"),
            0.5,
        )
    }

    impl Driver for Script {
        fn run_test(&mut self, _: &[String], _: Metric) -> Result<TestOutcome, String> {
            let mut f = Vec::new();
            if !self.applied.iter().any(|(_, p)| p.contains("tcp_rmem")) {
                f.push(finding("tcp.buffer-limited", HostRole::Peer, "receive"));
            }
            if !self.applied.iter().any(|(_, p)| p.contains("gro = true")) || self.rolled_back > 0 {
                f.push(finding("nic.gro-off", HostRole::Peer, "veth-b"));
            }
            Ok(TestOutcome {
                value: self.values.remove(0),
                findings: f,
            })
        }
        fn preview(&mut self, _: HostRole, p: &str) -> Result<Vec<String>, String> {
            Ok(vec![format!("would apply {} bytes", p.len())])
        }
        fn apply(&mut self, h: HostRole, p: &str) -> Result<ApplyReport, String> {
            self.applied.push((h, p.to_string()));
            Ok(ApplyReport {
                backup: format!("b{}", self.applied.len()),
                profile: "x".into(),
                host: "h".into(),
                changes: Vec::new(),
                unchanged: 0,
                skipped: Vec::new(),
                notes: Vec::new(),
            })
        }
        fn rollback(&mut self, _: HostRole) -> Result<RollbackReport, String> {
            self.rolled_back += 1;
            Ok(RollbackReport {
                backup: "b".into(),
                profile: "x".into(),
                host: "h".into(),
                restored: Vec::new(),
                drifted: Vec::new(),
                already: 0,
            })
        }
        fn confirm(&mut self, _: &Question) -> bool {
            self.answers.remove(0)
        }
        fn record(&mut self, r: &Record) {
            self.records.push(r.clone());
        }
    }

    #[test]
    fn keeps_a_large_gain_and_rolls_back_a_gain_inside_the_noise() {
        let c = super::super::checklist::shipped("single-stream")
            .unwrap()
            .unwrap();
        let mut s = Script {
            // baseline 3 rounds, after buffer change 3 rounds (5x), after GRO 3 rounds (+0.5 %)
            values: vec![
                2.0e9, 2.1e9, 2.05e9, 10.0e9, 10.2e9, 10.1e9, 10.15e9, 10.05e9, 10.1e9,
            ],
            applied: Vec::new(),
            rolled_back: 0,
            answers: vec![true, true, true],
            records: Vec::new(),
        };
        let sum = run(&c, 3, &mut s).unwrap();
        let acted: Vec<(&str, &StepStatus)> = sum
            .steps
            .iter()
            .filter(|x| x.status != StepStatus::NotFound)
            .map(|x| (x.rule.as_str(), &x.status))
            .collect();
        assert_eq!(
            acted,
            vec![
                ("tcp.buffer-limited", &StepStatus::Kept),
                ("nic.gro-off", &StepStatus::RolledBack)
            ],
            "{:#?}",
            sum.steps
        );
        assert_eq!(s.rolled_back, 1);
        assert_eq!(
            s.applied[0].0,
            HostRole::Peer,
            "the change goes to the host the finding names"
        );
        assert!(
            s.applied[1].1.contains("match = \"veth-b\""),
            "@subject replaced: {}",
            s.applied[1].1
        );
        let kept = sum.kept_peer.unwrap();
        assert!(kept.contains("tcp_rmem") && !kept.contains("gro"), "{kept}");
        assert!(sum.kept_local.is_none());
        assert!((sum.last - 10.1e9).abs() < 1.0);
        assert!(matches!(s.records.first(), Some(Record::Baseline { .. })));
        assert!(matches!(s.records.last(), Some(Record::Summary(_))));
    }

    #[test]
    fn a_declined_change_is_not_applied() {
        let c = super::super::checklist::shipped("single-stream")
            .unwrap()
            .unwrap();
        let mut s = Script {
            values: vec![1.0e9; 3],
            applied: Vec::new(),
            rolled_back: 0,
            answers: vec![false, false],
            records: Vec::new(),
        };
        let sum = run(&c, 3, &mut s).unwrap();
        assert!(s.applied.is_empty());
        assert!(sum.steps.iter().any(|x| x.status == StepStatus::Declined));
    }
}

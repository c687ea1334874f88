//! The checklist step loop: baseline, then for each finding a check covers
//! propose → confirm → apply → re-measure → keep or roll back; then the
//! summary and the kept changes per host.
//!
//! The loop decides; a [`Driver`] acts. The session (spine) implements the
//! driver: it runs the test as `wirescope run` would (on the local pair or
//! against `--peer`), applies a profile fragment on the host
//! [`super::side::place`] chooses from the test's [`DataFlow`] (locally
//! through [`super::apply`], on the peer through a
//! [`super::peer::TuneRequest`]; a refusal there skips the step and says
//! so), asks the user (TUI key or prompt; `--yes`
//! answers yes) and shows or logs each [`Record`]. Nothing here does I/O.

use super::apply::{ApplyReport, RollbackReport};
use super::checklist::{Check, Checklist};
use super::decide::{decide, kept_profile, KeptError, Metric, StepRecord, StepStatus, Verdict};
use super::side::{path_side, place, DataFlow};
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
        /// Why that host ("it receives the test's data").
        host_why: String,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// Why a change on a host did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// The host's agent does not allow it (no `--allow-tuning`, or a key
    /// it refuses); nothing was changed there.
    #[error("the agent refused: {0}")]
    Refused(String),
    /// It was tried and failed (the message says what and where).
    #[error("{0}")]
    Failed(String),
}

impl From<String> for StepError {
    fn from(e: String) -> Self {
        StepError::Failed(e)
    }
}

/// Why the test gave no value (the session says what and where).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TestError {
    /// The test did not run or did not finish.
    #[error("{0}")]
    Failed(String),
}

impl From<String> for TestError {
    fn from(e: String) -> Self {
        TestError::Failed(e)
    }
}

impl From<&str> for TestError {
    fn from(e: &str) -> Self {
        TestError::Failed(e.to_string())
    }
}

/// Why a checklist run stopped before its summary.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The checklist needs an engine this build lacks.
    #[error("{0}")]
    Unavailable(String),
    /// The baseline could not be measured.
    #[error("{0}")]
    Baseline(#[from] TestError),
    /// The kept changes could not be written as a profile.
    #[error(transparent)]
    Kept(#[from] KeptError),
}

/// What a checklist step does to a host besides running the test.
#[derive(Debug, Clone, PartialEq)]
pub enum TuneOp {
    /// The commands a profile fragment would run (a dry run), for the question.
    Preview(String),
    /// Apply a profile fragment (backed up), skipping what the host lacks.
    Apply(String),
    /// Undo the last apply.
    Rollback,
}

/// What a [`TuneOp`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum TuneDone {
    /// The commands of a preview.
    Commands(Vec<String>),
    /// Applied.
    Applied(ApplyReport),
    /// Rolled back.
    RolledBack(RollbackReport),
}

impl TuneDone {
    fn commands(self) -> Result<Vec<String>, StepError> {
        match self {
            TuneDone::Commands(c) => Ok(c),
            other => Err(other.unexpected()),
        }
    }

    fn applied(self) -> Result<ApplyReport, StepError> {
        match self {
            TuneDone::Applied(r) => Ok(r),
            other => Err(other.unexpected()),
        }
    }

    fn rolled_back(self) -> Result<RollbackReport, StepError> {
        match self {
            TuneDone::RolledBack(r) => Ok(r),
            other => Err(other.unexpected()),
        }
    }

    fn unexpected(self) -> StepError {
        StepError::Failed(format!("unexpected result of a tuning step: {self:?}"))
    }
}

/// What the loop needs from the session (see the module docs).
pub trait Driver {
    /// Run the test once: `args` are `wirescope run` arguments (no --peer, --log, --json).
    fn run_test(&mut self, args: &[String], metric: Metric) -> Result<TestOutcome, TestError>;
    /// Carry out `op` on `host` through the profile machinery (here or on
    /// the agent's host); `@route` in a profile means the interface
    /// towards the other host.
    fn op(&mut self, host: HostRole, op: TuneOp) -> Result<TuneDone, StepError>;
    /// Ask; `--yes` answers true.
    fn confirm(&mut self, q: &Question) -> bool;
    /// Show or write a record.
    fn record(&mut self, r: &Record);
}

fn measure(
    d: &mut dyn Driver,
    c: &Checklist,
    rounds: u32,
) -> Result<(Vec<f64>, Vec<Finding>), TestError> {
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

/// Run a checklist (see the module docs) whose test moves data as `flow`
/// says. Fails only when the baseline cannot be measured.
pub fn run(
    c: &Checklist,
    rounds: u32,
    flow: DataFlow,
    d: &mut dyn Driver,
) -> Result<Summary, RunError> {
    if let Some(why) = c.unavailable() {
        return Err(RunError::Unavailable(why));
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
        let at = Step {
            n: steps.len() + 1,
            rounds,
            flow,
        };
        let (rec, kept) = step(c, check, &at, &current, &findings, d);
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

/// Where a step stands in the run.
struct Step {
    n: usize,
    rounds: u32,
    flow: DataFlow,
}

/// What a step ends with: its record and, when the change stays, the new
/// rounds and findings.
type StepEnd = (StepRecord, Option<(Vec<f64>, Vec<Finding>)>);

/// One check: find its finding, choose the host, propose, apply,
/// re-measure, decide.
fn step(
    c: &Checklist,
    check: &Check,
    at: &Step,
    current: &[f64],
    findings: &[Finding],
    d: &mut dyn Driver,
) -> StepEnd {
    let mut rec = StepRecord {
        step: at.n,
        rule: check.rule.clone(),
        title: check.title.clone(),
        host: None,
        host_why: String::new(),
        subject: String::new(),
        changes: Vec::new(),
        restored: Vec::new(),
        refused_by: None,
        profile: None,
        verdict: None,
        status: StepStatus::NotFound,
    };
    let Some(f) = find(check, findings) else {
        return (rec, None);
    };
    let on = place(check.host, f.host, path_side(&check.change), at.flow);
    let host = on.host;
    rec.host = Some(host);
    rec.host_why = on.why;
    rec.subject = f.subject.clone();
    let (fragment, change) = match propose(check, f, host, findings, &mut rec, d) {
        Ok(x) => x,
        Err(status) => return ended(rec, status),
    };
    let q = Question::Apply {
        step: at.n,
        rule: f.id.clone(),
        finding: f.title.clone(),
        evidence: f.evidence.iter().map(Evidence::to_string).collect(),
        host,
        host_why: rec.host_why.clone(),
        change,
    };
    if !d.confirm(&q) {
        return ended(rec, StepStatus::Declined);
    }
    let report = match d
        .op(host, TuneOp::Apply(fragment.clone()))
        .and_then(TuneDone::applied)
    {
        Ok(r) => r,
        Err(e) => {
            let status = refusal(&mut rec, host, e);
            return ended(rec, status);
        }
    };
    rec.changes = report
        .changes
        .iter()
        .map(|ch| format!("{}: {} -> {}", ch.setting, ch.before, ch.after))
        .collect();
    rec.profile = Some(fragment);
    match measure(d, c, at.rounds) {
        Ok(after) => judge(c, (at.n, host), current, after, rec, d),
        Err(e) => {
            let status = undo(host, &e, &mut rec, d);
            ended(rec, status)
        }
    }
}

fn ended(mut rec: StepRecord, status: StepStatus) -> StepEnd {
    rec.status = status;
    (rec, None)
}

/// A refusal skips the step (nothing changed there); anything else failed it.
fn refusal(rec: &mut StepRecord, host: HostRole, e: StepError) -> StepStatus {
    match e {
        StepError::Refused(why) => {
            rec.refused_by = Some(host);
            StepStatus::Skipped(format!("the agent refused: {why}"))
        }
        StepError::Failed(why) => StepStatus::Failed(why),
    }
}

/// The change for the step's host and the commands it would run there;
/// the status the step ends with when there is nothing to propose.
fn propose(
    check: &Check,
    f: &Finding,
    host: HostRole,
    findings: &[Finding],
    rec: &mut StepRecord,
    d: &mut dyn Driver,
) -> Result<(String, String), StepStatus> {
    // On the other host: the same rule's finding there names its own
    // interface (both ends of a pair often report it); else the interface
    // that routes to the first host.
    let there = findings
        .iter()
        .find(|x| x.host == host && check.matches(&x.id, &x.subject));
    let fragment = if host == f.host {
        check.instantiate(&f.subject)
    } else if let Some(x) = there {
        rec.subject = x.subject.clone();
        check.instantiate(&x.subject)
    } else {
        check.instantiate_across()
    };
    let fragment = fragment.map_err(|e| StepStatus::Skipped(e.to_string()))?;
    match d
        .op(host, TuneOp::Preview(fragment.clone()))
        .and_then(TuneDone::commands)
    {
        Ok(cmds) if cmds.is_empty() => Err(StepStatus::Skipped(format!(
            "the {} host already has these values",
            host.name()
        ))),
        Ok(cmds) => Ok((fragment, cmds.join("\n"))),
        Err(e) => Err(refusal(rec, host, e)),
    }
}

/// Measuring after the change failed: leave the host as it was before
/// this step.
fn undo(host: HostRole, e: &TestError, rec: &mut StepRecord, d: &mut dyn Driver) -> StepStatus {
    let undo = match d.op(host, TuneOp::Rollback).and_then(TuneDone::rolled_back) {
        Ok(r) => {
            rec.restored = restored_lines(&r);
            String::new()
        }
        Err(u) => format!("; rolling back failed too: {u}"),
    };
    StepStatus::Failed(format!("measuring after the change failed: {e}{undo}"))
}

/// Keep the change when it helped (or when asked to), else roll it back.
fn judge(
    c: &Checklist,
    (n, host): (usize, HostRole),
    current: &[f64],
    after: (Vec<f64>, Vec<Finding>),
    mut rec: StepRecord,
    d: &mut dyn Driver,
) -> StepEnd {
    let v = decide(c.test.metric, current, &after.0, c.min_gain_pct);
    rec.status = if v.keep {
        StepStatus::Kept
    } else if d.confirm(&Question::Rollback {
        step: n,
        verdict: v.clone(),
    }) {
        match d.op(host, TuneOp::Rollback).and_then(TuneDone::rolled_back) {
            Ok(r) => {
                rec.restored = restored_lines(&r);
                StepStatus::RolledBack
            }
            Err(e) => StepStatus::Failed(format!("rolling back failed: {e}")),
        }
    } else {
        StepStatus::KeptAnyway
    };
    rec.verdict = Some(v);
    let kept = matches!(rec.status, StepStatus::Kept | StepStatus::KeptAnyway).then_some(after);
    (rec, kept)
}

/// What a rollback put back, in the past tense: the value restored, and
/// the value the setting had while the step was measured.
pub fn restored_lines(r: &RollbackReport) -> Vec<String> {
    let mut v: Vec<String> = r
        .restored
        .iter()
        .map(|ch| {
            format!(
                "{} restored to {} (was {} during the step)",
                ch.setting, ch.after, ch.before
            )
        })
        .collect();
    v.extend(
        r.drifted
            .iter()
            .map(|s| format!("{s}: changed by something else during the step; restored anyway")),
    );
    if v.is_empty() {
        v.push(
            "nothing to restore: every setting already had its value from before the step".into(),
        );
    }
    v
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
        /// Findings every run reports, besides the two scripted ones.
        extra: Vec<Finding>,
        /// Report only `extra`.
        only_extra: bool,
        /// The agent on the peer refuses changes with this reason.
        refuse: Option<String>,
        /// What apply reports as changed: (setting, before, after).
        changed: Vec<(String, String, String)>,
    }

    impl Script {
        fn new(values: Vec<f64>, answers: Vec<bool>) -> Script {
            Script {
                values,
                applied: Vec::new(),
                rolled_back: 0,
                answers,
                records: Vec::new(),
                extra: Vec::new(),
                only_extra: false,
                refuse: None,
                changed: Vec::new(),
            }
        }
    }

    fn change(setting: &str, before: &str, after: &str) -> super::super::Change {
        super::super::Change {
            setting: setting.into(),
            key: super::super::Key::Sysctl {
                name: setting.into(),
            },
            before: before.into(),
            after: after.into(),
            command: String::new(),
        }
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
        fn run_test(&mut self, _: &[String], _: Metric) -> Result<TestOutcome, TestError> {
            let mut f = Vec::new();
            if !self.applied.iter().any(|(_, p)| p.contains("tcp_rmem")) {
                f.push(finding("tcp.buffer-limited", HostRole::Peer, "receive"));
            }
            if !self.applied.iter().any(|(_, p)| p.contains("gro = true")) || self.rolled_back > 0 {
                f.push(finding("nic.gro-off", HostRole::Peer, "veth-b"));
            }
            if self.only_extra {
                f.clear();
            }
            f.extend(self.extra.iter().cloned());
            Ok(TestOutcome {
                value: self.values.remove(0),
                findings: f,
            })
        }
        fn op(&mut self, h: HostRole, op: TuneOp) -> Result<TuneDone, StepError> {
            match op {
                TuneOp::Preview(p) => Ok(TuneDone::Commands(vec![format!(
                    "would apply {} bytes",
                    p.len()
                )])),
                TuneOp::Apply(p) => self.apply(h, p).map(TuneDone::Applied),
                TuneOp::Rollback => self.rollback().map(TuneDone::RolledBack),
            }
        }
        fn confirm(&mut self, _: &Question) -> bool {
            self.answers.remove(0)
        }
        fn record(&mut self, r: &Record) {
            self.records.push(r.clone());
        }
    }

    impl Script {
        fn apply(&mut self, h: HostRole, p: String) -> Result<ApplyReport, StepError> {
            if let (HostRole::Peer, Some(why)) = (h, &self.refuse) {
                return Err(StepError::Refused(why.clone()));
            }
            self.applied.push((h, p));
            Ok(ApplyReport {
                backup: format!("b{}", self.applied.len()),
                profile: "x".into(),
                host: "h".into(),
                changes: self
                    .changed
                    .iter()
                    .map(|(s, b, a)| change(s, b, a))
                    .collect(),
                unchanged: 0,
                skipped: Vec::new(),
                notes: Vec::new(),
            })
        }
        fn rollback(&mut self) -> Result<RollbackReport, StepError> {
            self.rolled_back += 1;
            Ok(RollbackReport {
                backup: "b".into(),
                profile: "x".into(),
                host: "h".into(),
                // Read back before the restore (the step's value), then restored.
                restored: self
                    .changed
                    .iter()
                    .map(|(s, b, a)| change(s, a, b))
                    .collect(),
                drifted: Vec::new(),
                already: 0,
            })
        }
    }

    #[test]
    fn keeps_a_large_gain_and_rolls_back_a_gain_inside_the_noise() {
        let c = super::super::checklist::shipped("single-stream")
            .unwrap()
            .unwrap();
        // baseline 3 rounds, after buffer change 3 rounds (5x), after GRO 3 rounds (+0.5 %)
        let mut s = Script::new(
            vec![
                2.0e9, 2.1e9, 2.05e9, 10.0e9, 10.2e9, 10.1e9, 10.15e9, 10.05e9, 10.1e9,
            ],
            vec![true, true, true],
        );
        let sum = run(&c, 3, flow(&[]), &mut s).unwrap();
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
        let mut s = Script::new(vec![1.0e9; 3], vec![false, false]);
        let sum = run(&c, 3, flow(&[]), &mut s).unwrap();
        assert!(s.applied.is_empty());
        assert!(sum.steps.iter().any(|x| x.status == StepStatus::Declined));
    }

    /// The direction of a `wirescope run` test with these extra arguments
    /// (parsed as `run` parses them).
    fn flow(extra: &[&str]) -> DataFlow {
        let mut args: Vec<String> = ["--mode", "stream", "--time", "5s"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect();
        args.dedup();
        let plan = crate::face::checklist::test_plan(&args).unwrap();
        DataFlow::of(&plan.spec)
    }

    fn single_stream() -> Checklist {
        super::super::checklist::shipped("single-stream")
            .unwrap()
            .unwrap()
    }

    fn step_of<'a>(sum: &'a Summary, rule: &str) -> &'a StepRecord {
        sum.steps
            .iter()
            .find(|s| s.rule == rule && s.status != StepStatus::NotFound)
            .unwrap_or_else(|| panic!("no step for {rule}: {:#?}", sum.steps))
    }

    fn step_titled<'a>(sum: &'a Summary, part: &str) -> &'a StepRecord {
        sum.steps
            .iter()
            .find(|x| x.title.contains(part))
            .unwrap_or_else(|| panic!("no step titled ..{part}..: {:#?}", sum.steps))
    }

    /// The profile applied to turn GRO on, with its host.
    fn gro_applied(s: &Script) -> &(HostRole, String) {
        s.applied
            .iter()
            .find(|(_, p)| p.contains("gro = true"))
            .unwrap_or_else(|| panic!("no GRO change applied: {:#?}", s.applied))
    }

    #[test]
    fn a_rollback_says_what_it_restored_in_the_past_tense() {
        // Buffer step kept (5x), GRO step inside the noise and rolled back.
        let mut s = Script::new(
            vec![
                2.0e9, 2.1e9, 2.05e9, 10.0e9, 10.2e9, 10.1e9, 10.15e9, 10.05e9, 10.1e9,
            ],
            vec![true, true, true],
        );
        s.changed = vec![("veth-b feature rx-gro".into(), "off".into(), "on".into())];
        let sum = run(&single_stream(), 3, flow(&[]), &mut s).unwrap();
        let gro = step_of(&sum, "nic.gro-off");
        assert_eq!(gro.status, StepStatus::RolledBack);
        assert_eq!(
            gro.restored,
            vec!["veth-b feature rx-gro restored to off (was on during the step)".to_string()]
        );
        let text = crate::face::checklist::record_lines(&Record::Step(Box::new(gro.clone())));
        assert!(
            text.iter().any(|l| l.trim()
                == "rolled back: veth-b feature rx-gro restored to off (was on during the step)"),
            "{text:#?}"
        );
        assert!(
            !text.iter().any(|l| l.contains("off -> on")),
            "a rolled-back step prints no line that reads as a new change: {text:#?}"
        );
        let j = serde_json::to_value(gro).unwrap();
        assert_eq!(j["status"], "rolled_back");
        assert_eq!(
            j["restored"][0],
            "veth-b feature rx-gro restored to off (was on during the step)"
        );
        // A kept step still shows the change it made.
        let kept = step_of(&sum, "tcp.buffer-limited");
        assert_eq!(kept.status, StepStatus::Kept);
        assert!(kept.restored.is_empty());
        assert_eq!(kept.changes, vec!["veth-b feature rx-gro: off -> on"]);
    }

    /// Findings on the "wrong" hosts for a local -> peer test: receive
    /// buffer and GRO on the local host (veth-a), send buffer on the peer.
    /// Where do the changes go?
    fn placed(extra: &[&str]) -> (Summary, Script) {
        let mut s = Script::new(vec![1.0e9; 4], vec![true; 6]);
        s.only_extra = true;
        s.extra = vec![
            finding("tcp.buffer-limited", HostRole::Local, "receive"),
            finding("tcp.buffer-limited", HostRole::Peer, "send"),
            finding("nic.gro-off", HostRole::Local, "veth-a"),
        ];
        let mut c = single_stream();
        // Only the checks under test: receive buffer, send buffer, GRO.
        c.checks
            .retain(|k| k.rule == "nic.gro-off" || k.rule == "tcp.buffer-limited");
        let sum = run(&c, 1, flow(extra), &mut s).unwrap();
        (sum, s)
    }

    #[test]
    fn a_change_moved_to_the_other_host_uses_that_hosts_own_finding() {
        // Both ends report GRO off (the local pair's veths): the peer's
        // change names veth-b, its own interface, not a route lookup.
        let mut s = Script::new(vec![1.0e9; 4], vec![true; 6]);
        s.only_extra = true;
        s.extra = vec![
            finding("nic.gro-off", HostRole::Local, "veth-a"),
            finding("nic.gro-off", HostRole::Peer, "veth-b"),
        ];
        let mut c = single_stream();
        c.checks.retain(|k| k.rule == "nic.gro-off");
        let sum = run(&c, 1, flow(&[]), &mut s).unwrap();
        let rx = step_of(&sum, "nic.gro-off");
        assert_eq!(rx.host, Some(HostRole::Peer), "{rx:#?}");
        assert_eq!(rx.subject, "veth-b", "{rx:#?}");
        let gro = gro_applied(&s);
        assert_eq!(gro.0, HostRole::Peer);
        assert!(
            gro.1.contains("veth-b") && !gro.1.contains("@route"),
            "{}",
            gro.1
        );
    }

    #[test]
    fn receive_side_changes_go_to_the_receiver_and_send_side_to_the_sender() {
        // local -> peer: the peer receives, the local host sends.
        let (sum, s) = placed(&[]);
        let rx = step_of(&sum, "nic.gro-off");
        assert_eq!(rx.host, Some(HostRole::Peer), "{rx:#?}");
        assert_eq!(rx.host_why, "it receives the test's data");
        let gro = gro_applied(&s);
        assert_eq!(gro.0, HostRole::Peer);
        assert!(
            gro.1.contains("match = \"@route\"") && !gro.1.contains("veth-a"),
            "the local interface's name means nothing on the peer: {}",
            gro.1
        );
        let line = crate::face::checklist::record_lines(&Record::Step(Box::new(rx.clone())));
        assert!(
            line[0].contains("on the peer: it receives the test's data"),
            "{line:?}"
        );
        let send = step_titled(&sum, "send buffer");
        assert_eq!(send.host, Some(HostRole::Local), "{send:#?}");
        assert_eq!(send.host_why, "it sends the test's data");
        let rmem = step_titled(&sum, "receive buffer");
        assert_eq!(rmem.host, Some(HostRole::Peer), "{rmem:#?}");
        assert_eq!(rmem.host_why, "it receives the test's data");

        // -R: the local host receives, the peer sends.
        let (sum, s) = placed(&["-R"]);
        let rx = step_of(&sum, "nic.gro-off");
        assert_eq!(rx.host, Some(HostRole::Local));
        let gro = gro_applied(&s);
        assert!(gro.1.contains("match = \"veth-a\""), "{}", gro.1);
        let send = step_titled(&sum, "send buffer");
        assert_eq!(send.host, Some(HostRole::Peer));

        // --bidir: both hosts receive and send; the finding's host stays.
        let (sum, _) = placed(&["--bidir"]);
        assert_eq!(step_of(&sum, "nic.gro-off").host, Some(HostRole::Local));
        let send = step_titled(&sum, "send buffer");
        assert_eq!(send.host, Some(HostRole::Peer));
    }

    #[test]
    fn a_check_that_names_its_host_keeps_it() {
        let text = "name = \"t\"\n[test]\nrun = [\"--mode\", \"stream\", \"--time\", \"5s\"]\n[[check]]\nrule = \"nic.gro-off\"\ntitle = \"gro\"\nhost = \"local\"\n[[check.change.interface]]\nmatch = \"@subject\"\nfeatures = { gro = true }\n";
        let c = Checklist::parse(text, "t.toml").unwrap();
        let mut s = Script::new(vec![1.0e9; 2], vec![true; 2]);
        s.only_extra = true;
        s.extra = vec![finding("nic.gro-off", HostRole::Local, "veth-a")];
        let sum = run(&c, 1, flow(&[]), &mut s).unwrap();
        let st = step_of(&sum, "nic.gro-off");
        assert_eq!(st.host, Some(HostRole::Local));
        assert_eq!(st.host_why, "the checklist names it");
    }

    #[test]
    fn a_step_the_agent_refuses_is_reported_as_skipped_and_counted() {
        let mut s = Script::new(vec![1.0e9; 12], vec![true; 8]);
        s.refuse = Some("the agent on b does not allow tuning".into());
        let sum = run(&single_stream(), 1, flow(&[]), &mut s).unwrap();
        assert!(s.applied.is_empty());
        let rx = step_of(&sum, "tcp.buffer-limited");
        assert_eq!(
            rx.status,
            StepStatus::Skipped("the agent refused: the agent on b does not allow tuning".into())
        );
        assert_eq!(rx.refused_by, Some(HostRole::Peer));
        let j = serde_json::to_value(rx).unwrap();
        assert_eq!(j["status"], "skipped");
        assert!(
            j["detail"]
                .as_str()
                .unwrap()
                .contains("does not allow tuning"),
            "{j}"
        );
        assert_eq!(j["refused_by"], "peer");
        let line = crate::face::checklist::record_lines(&Record::Step(Box::new(rx.clone())));
        assert_eq!(
            line,
            vec![format!(
                "skipped: step {} tcp.buffer-limited on the peer — the agent refused: the agent on b does not allow tuning",
                rx.step
            )]
        );
        let counts = super::super::decide::summary_counts(&sum.steps);
        assert!(
            counts.contains("2 skipped (refused by the peer)"),
            "{counts}"
        );
        let Some(Record::Summary(last)) = s.records.last() else {
            panic!("no summary")
        };
        let text = crate::face::checklist::record_lines(&Record::Summary(last.clone()));
        assert_eq!(text.last(), Some(&counts));
    }
}

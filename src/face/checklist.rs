//! `wirescope checklist list | run NAME`: guided tuning on the pair.
//!
//! The step loop and its decisions are [`crate::tune::runner`]; this face is
//! its [`Driver`]: one session with the agent for the whole checklist (so
//! the pair, and on the local pair its namespaces, stay the same between
//! the runs compared), each test run through the same driver and pipeline
//! as `wirescope run` (its summary gives the metric, its closing diagnosis
//! the findings), changes on this host through the profile machinery
//! (backed up under `--state-dir`; on the local pair, unless one is given,
//! a temporary one that goes with the pair), changes on the agent's host through the
//! control protocol ([`TuneRequest`], refused unless the agent runs with
//! `--allow-tuning`). Between tests, while the user is asked, the session
//! is kept alive with pings.

use super::{FaceError, FaceResult, EXIT_FAILED, EXIT_OK};
use crate::cli::checklist::{check_run_args, ChecklistArgs, ChecklistCommand, ChecklistRunArgs};
use crate::diagnose::HostRole;
use crate::probe::system::HostInfo;
use crate::record::pipeline::{Origin, Output, Pipeline};
use crate::session::controller::Controller;
use crate::session::driver::{connect_ready, run_plan, SessionEvent};
use crate::session::plan::{Observe, Plan};
use crate::tune::apply::{self, ApplyOptions};
use crate::tune::checklist::{self, Checklist};
use crate::tune::decide::Metric;
use crate::tune::host::Host;
use crate::tune::peer::{TuneRequest, TuneResponse};
use crate::tune::profile::Profile;
use crate::tune::resolve::ResolveOpts;
use crate::tune::runner::{
    self, Driver, Question, Record, StepError, TestError, TestOutcome, TuneDone, TuneOp,
};
use crate::tune::side::DataFlow;
use crate::tune::state::StateDir;
use anyhow::Context;
use std::io::{BufRead, IsTerminal, Write as _};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Run `wirescope checklist ...`.
pub fn command(args: ChecklistArgs, argv: Vec<String>) -> FaceResult {
    match args.command {
        ChecklistCommand::List => list(),
        ChecklistCommand::Run(a) => run(a, argv),
    }
}

fn list() -> FaceResult {
    outln!("{:18}  FOR", "NAME");
    for (name, _) in checklist::SHIPPED {
        match checklist::shipped(name) {
            Some(Ok(c)) => {
                let note = c
                    .unavailable()
                    .map(|w| format!("  (not available: {w})"))
                    .unwrap_or_default();
                outln!("{name:18}  {}{note}", c.purpose);
            }
            Some(Err(e)) => outln!("{name:18}  (does not load: {e})"),
            None => {}
        }
    }
    Ok(EXIT_OK)
}

/// A shipped checklist by name, or a TOML file; its test checked with `run`'s parser.
fn load(name: &str) -> Result<Checklist, FaceError> {
    let c = match checklist::shipped(name) {
        Some(r) => r.map_err(|e| FaceError::Usage(e.to_string()))?,
        None => {
            // Bounded and regular files only: `/dev/zero` or a FIFO would never end.
            let max = crate::tune::profile::MAX_TEXT as u64;
            let text = crate::probe::trusted::read_bounded(std::path::Path::new(name), max)
                .map_err(|e| {
                    let names: Vec<&str> = checklist::SHIPPED.iter().map(|(n, _)| *n).collect();
                    match e.io_kind() {
                        Some(_) => FaceError::Usage(format!(
                            "{name} is neither a shipped checklist ({}) nor a readable file: {e}",
                            names.join(", ")
                        )),
                        None => FaceError::Usage(format!("checklist {e}")),
                    }
                })?;
            Checklist::parse(&text, name).map_err(|e| FaceError::Usage(e.to_string()))?
        }
    };
    c.check_run(name, &check_run_args)
        .map_err(|e| FaceError::Usage(e.to_string()))?;
    if let Some(why) = c.unavailable() {
        return Err(FaceError::Usage(format!("checklist {name}: {why}")));
    }
    Ok(c)
}

fn run(a: ChecklistRunArgs, argv: Vec<String>) -> FaceResult {
    let c = load(&a.name)?;
    let flow = test_flow(&c).map_err(|e| FaceError::Usage(e.to_string()))?;
    let choice = a.target.resolve()?;
    let opened = crate::session::open(&choice, a.target.token_file.as_deref())?;
    let (temp_state, state) = state_dir(opened.pair.is_some(), a.state_dir.as_deref())?;
    let crate::session::Opened {
        pair,
        target,
        token,
        description,
        same_kernel,
    } = opened;
    let rt = super::control_runtime("ws-runtime").context("cannot start the async runtime")?;
    let observe = Observe::default();
    let (tx, mut rx) = mpsc::channel(8);
    let ctl = rt.block_on(connect_ready(target, &token, &observe, same_kernel, &tx));
    drop(tx);
    while rx.try_recv().is_ok() {}
    let ctl = ctl.map_err(|e| FaceError::Failed(anyhow::anyhow!(super::error_text(&e))))?;
    if !a.json {
        outln!(
            "checklist {} on {} ({}): {} check(s), {} round(s) per measurement",
            c.name,
            description,
            c.purpose,
            c.checks.len(),
            a.rounds.unwrap_or(c.rounds)
        );
    }
    let mut d = SessionDriver {
        route_to: Some(ctl.data_ip()),
        rt,
        ctl: Some(ctl),
        observe,
        host: Host::live(),
        state,
        yes: a.yes,
        json: a.json,
        report: a.report.as_deref().map(ReportLogs::new).transpose()?,
        origin: Origin {
            command_line: argv,
            local: HostInfo::current(),
            pair: description,
            netns: pair.as_ref().and_then(|p| p.netns()),
        },
        cancel: CancellationToken::new(),
    };
    {
        let _guard = d.rt.enter();
        super::spawn_signal_handler(d.cancel.clone());
    }
    let result = runner::run(&c, a.rounds.unwrap_or(c.rounds), flow, &mut d);
    if let Some(ctl) = d.ctl.take() {
        d.rt.block_on(ctl.close());
    }
    drop(pair);
    write_report(&mut d)?;
    conclude(&mut d, &c, result, temp_state.is_some())
}

/// Where backups go. On the local pair this host's side is a namespace that
/// goes away with the run: its backups go with it (a temporary state
/// directory, as the TUI does), never into the host's, where they would
/// block rollbacks. The temporary directory lives as long as its guard.
fn state_dir(
    local_pair: bool,
    given: Option<&std::path::Path>,
) -> Result<(Option<tempfile::TempDir>, StateDir), FaceError> {
    let temp_state = match (local_pair, given) {
        (true, None) => Some(
            tempfile::Builder::new()
                .prefix("wirescope-checklist-")
                .tempdir()
                .context("cannot create a temporary state directory for the local pair")?,
        ),
        _ => None,
    };
    let state = match &temp_state {
        Some(t) => StateDir::at(t.path()),
        None => StateDir::resolve(given),
    };
    Ok((temp_state, state))
}

/// The `--report` page, written whatever the outcome: a failed step is worth a look too.
fn write_report(d: &mut SessionDriver) -> Result<(), FaceError> {
    if let Some(r) = d.report.take() {
        let n = r.logs.len();
        let out = r.out.clone();
        r.write()?;
        if !d.json {
            eprintln!("wirescope: wrote {} ({n} test run(s))", out.display());
        }
    }
    Ok(())
}

/// What was kept (offered as a profile), or the error; the exit code.
fn conclude(
    d: &mut SessionDriver,
    c: &Checklist,
    result: Result<runner::Summary, runner::RunError>,
    temp_state: bool,
) -> FaceResult {
    match result {
        Ok(s) => {
            if let Some(text) = &s.kept_local {
                if temp_state {
                    if !d.json {
                        outln!("kept in the local pair's namespace (gone with it); as a profile:\n{text}");
                    }
                } else {
                    d.offer_save(&format!("{}-kept-local", c.name), text);
                }
            }
            if let Some(text) = &s.kept_peer {
                if !d.json {
                    outln!("kept on the peer (apply it there with `wirescope profile apply FILE` to repeat):\n{text}");
                }
            }
            Ok(EXIT_OK)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(EXIT_FAILED)
        }
    }
}

/// Why a checklist's test or a step's change could not be carried out
/// here: what was being done and the error of the part that failed.
#[derive(Debug, thiserror::Error)]
pub enum ChecklistError {
    /// A step's profile does not parse.
    #[error(transparent)]
    Profile(#[from] crate::tune::profile::ProfileError),
    /// A step's change could not be planned, applied or rolled back.
    #[error(transparent)]
    Tune(#[from] crate::tune::error::TuneError),
    /// A checklist's test that does not resolve.
    #[error("checklist {name}: {source}")]
    Checklist {
        /// The checklist.
        name: String,
        /// What is wrong with its test.
        #[source]
        source: Box<ChecklistError>,
    },
    /// A test's arguments that `wirescope run`'s parser refuses.
    #[error("{}", .0.to_string().trim())]
    Args(#[source] clap::Error),
    /// A test line that is not a `wirescope run` command line.
    #[error("not a `wirescope run` command line")]
    NotRun,
    /// A test's options that cannot work together.
    #[error(transparent)]
    Usage(#[from] crate::cli::UsageError),
    /// The test ran and failed (the summary's error).
    #[error("{0}")]
    Test(String),
    /// The metric p99 of a test that measured no latency.
    #[error("the test measured no latency (p99 needs --mode rr)")]
    NoLatency,
    /// The session with the agent is gone.
    #[error("the session with the agent ended")]
    SessionEnded,
    /// `--report`: a test's log could not be created.
    #[error("--report: cannot write {path}: {source}")]
    ReportLog {
        /// The log's path.
        path: std::path::PathBuf,
        /// The log's error.
        #[source]
        source: crate::record::log::LogError,
    },
}

impl From<ChecklistError> for StepError {
    fn from(e: ChecklistError) -> Self {
        StepError::Failed(e.to_string())
    }
}

impl From<ChecklistError> for TestError {
    fn from(e: ChecklistError) -> Self {
        TestError::Failed(e.to_string())
    }
}

/// Carry out `op` on this host (blocking: files, ioctls, netlink).
pub fn local_op(
    op: &TuneOp,
    host: &Host,
    state: &StateDir,
    opts: &ResolveOpts,
) -> Result<TuneDone, ChecklistError> {
    let parse = |text: &str| Profile::parse(text, "checklist step");
    match op {
        TuneOp::Preview(text) => {
            let (plan, _) = apply::plan(&parse(text)?, host, opts, true)?;
            Ok(TuneDone::Commands(
                plan.changes().iter().map(|c| c.command()).collect(),
            ))
        }
        TuneOp::Apply(text) => {
            let o = ApplyOptions {
                skip_unsupported: true,
                after_step: None,
            };
            Ok(TuneDone::Applied(apply::apply(
                &parse(text)?,
                host,
                state,
                opts,
                &o,
            )?))
        }
        TuneOp::Rollback => Ok(TuneDone::RolledBack(apply::rollback(host, state)?)),
    }
}

/// The request that carries `op` to the agent's host.
pub fn peer_request(op: &TuneOp) -> TuneRequest {
    match op {
        TuneOp::Preview(text) => TuneRequest::Plan {
            profile: text.clone(),
            skip_unsupported: true,
        },
        TuneOp::Apply(text) => TuneRequest::Apply {
            profile: text.clone(),
            skip_unsupported: true,
        },
        TuneOp::Rollback => TuneRequest::Rollback,
    }
}

/// The agent's answer as a [`TuneDone`]; a refusal is
/// [`StepError::Refused`] (the step is skipped), a failure
/// [`StepError::Failed`].
pub fn peer_done(resp: TuneResponse) -> Result<TuneDone, StepError> {
    match resp {
        TuneResponse::Planned { plan, .. } => Ok(TuneDone::Commands(
            plan.changes().iter().map(|c| c.command()).collect(),
        )),
        TuneResponse::Applied(r) => Ok(TuneDone::Applied(r)),
        TuneResponse::RolledBack(r) => Ok(TuneDone::RolledBack(r)),
        TuneResponse::Refused { reason } => Err(StepError::Refused(reason)),
        TuneResponse::Failed { error } => Err(StepError::Failed(error)),
        other => Err(StepError::Failed(format!(
            "unexpected answer from the agent: {other:?}"
        ))),
    }
}

/// Which hosts receive and send a checklist's test data (from its
/// `wirescope run` arguments, with `run`'s parser).
pub fn test_flow(c: &Checklist) -> Result<DataFlow, ChecklistError> {
    let plan = test_plan(&c.test.run).map_err(|e| ChecklistError::Checklist {
        name: c.name.clone(),
        source: Box::new(e),
    })?;
    Ok(DataFlow::of(&plan.spec))
}

/// The runner's hands: one session, this host's profile machinery, prompts.
/// `--report`: each test run of the checklist logged to a file of its own
/// in a temporary directory, named after what it measured once the runner
/// records it (the baseline, a step), then drawn into one page.
struct ReportLogs {
    dir: tempfile::TempDir,
    out: std::path::PathBuf,
    /// (log, what it measured) in order.
    logs: Vec<(std::path::PathBuf, String)>,
    /// Logs written since the last runner record.
    unnamed: usize,
}

impl ReportLogs {
    fn new(out: &std::path::Path) -> Result<ReportLogs, FaceError> {
        let parent = super::report::parent_dir(out);
        if !parent.is_dir() {
            return Err(FaceError::Usage(format!(
                "--report {}: {} is not a directory; choose a path in an existing directory",
                out.display(),
                parent.display()
            )));
        }
        let dir = tempfile::Builder::new()
            .prefix("wirescope-report-")
            .tempdir()
            .map_err(|e| {
                FaceError::Usage(format!(
                    "--report: cannot create a temporary directory: {e}"
                ))
            })?;
        Ok(ReportLogs {
            dir,
            out: out.to_path_buf(),
            logs: Vec::new(),
            unnamed: 0,
        })
    }

    /// The log of the next test run.
    fn next(&mut self) -> Result<crate::record::log::LogWriter, ChecklistError> {
        let p = self
            .dir
            .path()
            .join(format!("run-{:02}.jsonl", self.logs.len() + 1));
        let w = match crate::record::log::LogWriter::create(&p) {
            Ok(w) => w,
            Err(source) => return Err(ChecklistError::ReportLog { path: p, source }),
        };
        self.logs.push((p, String::new()));
        self.unnamed += 1;
        Ok(w)
    }

    /// Name the runs since the last record after what the runner says they measured.
    fn name(&mut self, r: &Record) {
        let what = match r {
            Record::Baseline { .. } => "baseline".to_string(),
            Record::Step(s) => format!("step {} after ({} {})", s.step, s.rule, s.subject),
            Record::Summary(_) => return,
        };
        let start = self.logs.len() - self.unnamed;
        for (k, (_, name)) in self.logs[start..].iter_mut().enumerate() {
            *name = format!("{what}, round {}", k + 1);
        }
        self.unnamed = 0;
    }

    fn write(self) -> Result<(), FaceError> {
        let mut runs = Vec::new();
        for (p, name) in &self.logs {
            let records = crate::record::log::read_log(p)
                .map_err(|e| FaceError::Failed(anyhow::anyhow!("--report: {e}")))?;
            let name = if name.is_empty() {
                "unfinished step"
            } else {
                name
            };
            runs.push(super::report::data::run(name, records));
        }
        let page = super::report::html::page(&runs).map_err(|e| FaceError::Failed(e.into()))?;
        super::report::write_page(&self.out, &page)
    }
}

struct SessionDriver {
    /// `--report`.
    report: Option<ReportLogs>,
    rt: tokio::runtime::Runtime,
    /// Held between tests; lent to the task that runs a test.
    ctl: Option<Controller>,
    observe: Observe,
    host: Host,
    state: StateDir,
    route_to: Option<std::net::IpAddr>,
    yes: bool,
    json: bool,
    origin: Origin,
    cancel: CancellationToken,
}

impl SessionDriver {
    fn ctl(&mut self) -> Result<&mut Controller, ChecklistError> {
        self.ctl.as_mut().ok_or(ChecklistError::SessionEnded)
    }

    fn opts(&self) -> ResolveOpts {
        ResolveOpts {
            route_to: self.route_to,
            subject: None,
        }
    }

    /// Ask on the terminal, keeping the agent's session alive meanwhile.
    fn ask(&mut self, prompt: &str) -> bool {
        if self.yes {
            return true;
        }
        if !std::io::stdin().is_terminal() {
            eprintln!("wirescope: {prompt} -> no (not a terminal; --yes answers yes)");
            return false;
        }
        let Some(mut ctl) = self.ctl.take() else {
            return false;
        };
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let pinger = self.rt.spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(crate::session::proto::PING_EVERY) => {
                        if ctl.ping().await.is_err() { break; }
                    }
                    _ = &mut stop_rx => break,
                }
            }
            ctl
        });
        eprint!("{prompt} [y/N] ");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let yes = std::io::stdin().lock().read_line(&mut line).is_ok()
            && matches!(line.trim(), "y" | "Y" | "yes");
        let _ = stop_tx.send(());
        self.ctl = self.rt.block_on(pinger).ok();
        yes
    }

    fn offer_save(&mut self, name: &str, text: &str) {
        let path = self.state.profiles_dir().join(format!("{name}.toml"));
        if !self.json {
            outln!("kept on this host, as a profile:\n{text}");
        }
        if self.ask(&format!("save it as {}?", path.display())) {
            let saved = std::fs::create_dir_all(self.state.profiles_dir())
                .and_then(|()| std::fs::write(&path, text));
            match saved {
                Ok(()) => eprintln!("wirescope: saved {}", path.display()),
                Err(e) => eprintln!("wirescope: cannot save {}: {e}", path.display()),
            }
        }
    }
}

/// A checklist's test (`wirescope run` arguments) as a plan, with `run`'s parser.
pub fn test_plan(args: &[String]) -> Result<crate::session::plan::TestPlan, ChecklistError> {
    let mut argv = vec!["wirescope".to_string(), "run".to_string()];
    argv.extend(args.iter().cloned());
    let cli =
        <crate::cli::Cli as clap::Parser>::try_parse_from(argv).map_err(ChecklistError::Args)?;
    let Some(crate::cli::Command::Run(r)) = cli.command else {
        return Err(ChecklistError::NotRun);
    };
    Ok(r.test.resolve()?)
}

/// What the runner compares, from a test's summary (a failed test is an error).
pub fn outcome(
    metric: Metric,
    s: crate::record::schema::Summary,
) -> Result<TestOutcome, ChecklistError> {
    if let Some(e) = &s.error {
        return Err(ChecklistError::Test(e.clone()));
    }
    Ok(TestOutcome {
        value: metric_of(metric, &s)?,
        findings: s.findings,
    })
}

fn metric_of(m: Metric, s: &crate::record::schema::Summary) -> Result<f64, ChecklistError> {
    match m {
        Metric::Throughput => Ok(s.throughput_bps),
        Metric::Rate => Ok(s.rate_per_s),
        Metric::P99 => s.latency_us.map(|l| l.p99).ok_or(ChecklistError::NoLatency),
    }
}

impl Driver for SessionDriver {
    /// A step's change on `host`: here through the profile machinery, on
    /// the agent's host through the control connection.
    fn op(&mut self, host: HostRole, op: TuneOp) -> Result<TuneDone, StepError> {
        match host {
            HostRole::Local => Ok(local_op(&op, &self.host, &self.state, &self.opts())?),
            HostRole::Peer => {
                let rt = self.rt.handle().clone();
                let ctl = self.ctl()?;
                let resp = rt
                    .block_on(ctl.tune(peer_request(&op)))
                    .map_err(|e| super::error_text(&e))?;
                peer_done(resp)
            }
        }
    }

    fn run_test(&mut self, args: &[String], metric: Metric) -> Result<TestOutcome, TestError> {
        let plan = test_plan(args)?;
        let mut ctl = self.ctl.take().ok_or("the session with the agent ended")?;
        let (tx, mut rx) = mpsc::channel(64);
        let observe = self.observe.clone();
        let cancel = self.cancel.clone();
        let task = self.rt.spawn(async move {
            let r = run_plan(
                &mut ctl,
                &Plan::Test(Box::new(plan)),
                &observe,
                &tx,
                &cancel,
            )
            .await;
            (ctl, r.is_ok())
        });
        let mut pipeline = Pipeline::new(self.origin.clone());
        if let Some(r) = &mut self.report {
            pipeline
                .record_to(r.next()?)
                .map_err(|e| format!("--report: {e}"))?;
        }
        let mut summary = None;
        let mut failure = None;
        while let Some(ev) = rx.blocking_recv() {
            if let SessionEvent::Failed(e) | SessionEvent::Refused(e) = &ev {
                failure.get_or_insert_with(|| e.clone());
            }
            if let Ok(Output::PointDone {
                summary: Some(s), ..
            }) = pipeline.handle(ev)
            {
                summary = Some(*s);
            }
        }
        let (ctl, ok) = self
            .rt
            .block_on(task)
            .map_err(|e| format!("the test task failed: {e}"))?;
        self.ctl = Some(ctl);
        if self.cancel.is_cancelled() {
            return Err("interrupted".into());
        }
        let s = summary.ok_or_else(|| {
            failure
                .clone()
                .unwrap_or_else(|| "the test gave no result".into())
        })?;
        if !ok && s.error.is_none() {
            let why = failure.unwrap_or_else(|| "the test failed".into());
            return Err(TestError::Failed(why));
        }
        let o = outcome(metric, s)?;
        if !self.json {
            eprintln!("wirescope: measured {}", metric.format(o.value));
        }
        Ok(o)
    }

    fn confirm(&mut self, q: &Question) -> bool {
        if !self.json {
            outln!();
            for l in question_lines(q) {
                outln!("{l}");
            }
        }
        let prompt = match q {
            Question::Apply { host, .. } => {
                format!("apply this change on the {} host?", host.name())
            }
            Question::Rollback { step, .. } => format!("step {step} did not help; roll it back?"),
        };
        self.ask(&prompt)
    }

    fn record(&mut self, r: &Record) {
        if let Some(rep) = &mut self.report {
            rep.name(r);
        }
        if self.json {
            match serde_json::to_string(r) {
                Ok(j) => outln!("{j}"),
                Err(e) => eprintln!("wirescope: cannot encode a record: {e}"),
            }
            return;
        }
        if matches!(r, Record::Summary(_)) {
            outln!();
        }
        for l in record_lines(r) {
            outln!("{l}");
        }
    }
}

/// A checklist's question as text lines: the finding, its evidence, the
/// host and why, and the change (or why the step did not help). The
/// headless face and the TUI's Tune view show the same.
pub fn question_lines(q: &Question) -> Vec<String> {
    match q {
        Question::Apply {
            step,
            rule,
            finding,
            evidence,
            host,
            host_why,
            change,
        } => {
            let why = if host_why.is_empty() {
                String::new()
            } else {
                format!(" ({host_why})")
            };
            let mut v = vec![format!(
                "step {step}: {rule} on the {} host{why}: {finding}",
                host.name()
            )];
            v.extend(evidence.iter().map(|e| format!("    {e}")));
            v.push("  change:".into());
            v.extend(change.lines().map(|l| format!("    {l}")));
            v
        }
        Question::Rollback { step, verdict } => vec![format!("step {step}: {}", verdict.reason)],
    }
}

/// A checklist's record (baseline, step, summary table and counts) as text lines.
pub fn record_lines(r: &Record) -> Vec<String> {
    use crate::tune::decide::StepStatus;
    match r {
        Record::Baseline {
            metric,
            values,
            findings,
        } => {
            let v: Vec<String> = values.iter().map(|v| metric.format(*v)).collect();
            let mut out = vec![format!("baseline: {}", v.join(", "))];
            out.extend(findings.iter().map(|f| format!("  finding: {f}")));
            out
        }
        Record::Step(s) => {
            let on = match s.host {
                Some(h) if s.host_why.is_empty() => format!(" — on the {}", h.name()),
                Some(h) => format!(" — on the {}: {}", h.name(), s.host_why),
                None => String::new(),
            };
            if let (Some(h), StepStatus::Skipped(w)) = (s.refused_by, &s.status) {
                return vec![format!(
                    "skipped: step {} {} on the {} — {w}",
                    s.step,
                    s.rule,
                    h.name()
                )];
            }
            let why = match &s.status {
                StepStatus::Skipped(w) | StepStatus::Failed(w) => format!(" ({w})"),
                _ => String::new(),
            };
            let mut out = vec![format!(
                "step {} {}: {}{why}{on}",
                s.step,
                s.rule,
                s.status.word()
            )];
            // Once rolled back, only what was put back: never the change
            // itself, which would read as one just made.
            if s.restored.is_empty() {
                out.extend(s.changes.iter().map(|c| format!("    {c}")));
            } else {
                out.extend(s.restored.iter().map(|c| format!("    rolled back: {c}")));
            }
            out
        }
        Record::Summary(s) => {
            let mut out: Vec<String> = crate::tune::decide::summary_table(s.metric, &s.steps)
                .lines()
                .map(str::to_string)
                .collect();
            out.push(crate::tune::decide::summary_counts(&s.steps));
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_refusal_is_a_refusal_not_a_failure() {
        let r = peer_done(TuneResponse::Refused {
            reason: "no --allow-tuning".into(),
        });
        assert_eq!(r, Err(StepError::Refused("no --allow-tuning".into())));
        let f = peer_done(TuneResponse::Failed {
            error: "EPERM".into(),
        });
        assert_eq!(f, Err(StepError::Failed("EPERM".into())));
    }
}

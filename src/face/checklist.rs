//! `wirescope checklist list | run NAME`: guided tuning on the pair.
//!
//! The step loop and its decisions are [`crate::tune::runner`]; this face is
//! its [`Driver`]: one session with the agent for the whole checklist (so
//! the pair, and on the local pair its namespaces, stay the same between
//! the runs compared), each test run through the same driver and pipeline
//! as `wirescope run` (its summary gives the metric, its closing diagnosis
//! the findings), changes on this host through the profile machinery
//! (backed up under `--state-dir`), changes on the agent's host through the
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
use crate::tune::apply::{self, ApplyOptions, ApplyReport, RollbackReport};
use crate::tune::checklist::{self, Checklist};
use crate::tune::decide::Metric;
use crate::tune::host::Host;
use crate::tune::peer::{TuneRequest, TuneResponse};
use crate::tune::profile::Profile;
use crate::tune::resolve::ResolveOpts;
use crate::tune::runner::{self, Driver, Question, Record, TestOutcome};
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
    println!("{:18}  FOR", "NAME");
    for (name, _) in checklist::SHIPPED {
        match checklist::shipped(name) {
            Some(Ok(c)) => {
                let note = c
                    .unavailable()
                    .map(|w| format!("  (not available: {w})"))
                    .unwrap_or_default();
                println!("{name:18}  {}{note}", c.purpose);
            }
            Some(Err(e)) => println!("{name:18}  (does not load: {e})"),
            None => {}
        }
    }
    Ok(EXIT_OK)
}

/// A shipped checklist by name, or a TOML file; its test checked with `run`'s parser.
fn load(name: &str) -> Result<Checklist, FaceError> {
    let (c, file) = match checklist::shipped(name) {
        Some(r) => (
            r.map_err(|e| FaceError::Usage(e.to_string()))?,
            name.to_string(),
        ),
        None => {
            let text = std::fs::read_to_string(name).map_err(|e| {
                let names: Vec<&str> = checklist::SHIPPED.iter().map(|(n, _)| *n).collect();
                FaceError::Usage(format!(
                    "{name} is neither a shipped checklist ({}) nor a readable file: {e}",
                    names.join(", ")
                ))
            })?;
            let c = Checklist::parse(&text, name).map_err(|e| FaceError::Usage(e.to_string()))?;
            (c, name.to_string())
        }
    };
    c.check_run(&file, &check_run_args)
        .map_err(|e| FaceError::Usage(e.to_string()))?;
    if let Some(why) = c.unavailable() {
        return Err(FaceError::Usage(format!("checklist {name}: {why}")));
    }
    Ok(c)
}

fn run(a: ChecklistRunArgs, argv: Vec<String>) -> FaceResult {
    let c = load(&a.name)?;
    let choice = a.target.resolve()?;
    let state = StateDir::resolve(a.state_dir.as_deref());
    let opened = crate::session::open(&choice, a.target.token_file.as_deref())?;
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
        println!(
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
        origin: Origin {
            command_line: argv,
            local: HostInfo::current(),
            pair: description,
        },
        cancel: CancellationToken::new(),
    };
    {
        let _guard = d.rt.enter();
        super::spawn_signal_handler(d.cancel.clone());
    }
    let result = runner::run(&c, a.rounds.unwrap_or(c.rounds), &mut d);
    if let Some(ctl) = d.ctl.take() {
        d.rt.block_on(ctl.close());
    }
    drop(pair);
    match result {
        Ok(s) => {
            if let Some(text) = &s.kept_local {
                d.offer_save(&format!("{}-kept-local", c.name), text);
            }
            if let Some(text) = &s.kept_peer {
                if !d.json {
                    println!("kept on the peer (apply it there with `wirescope profile apply FILE` to repeat):\n{text}");
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

/// The runner's hands: one session, this host's profile machinery, prompts.
struct SessionDriver {
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
    fn ctl(&mut self) -> Result<&mut Controller, String> {
        self.ctl
            .as_mut()
            .ok_or_else(|| "the session with the agent ended".to_string())
    }

    /// One request to the agent's host; refusals and failures become errors.
    fn peer(&mut self, req: TuneRequest) -> Result<TuneResponse, String> {
        let rt = self.rt.handle().clone();
        let ctl = self.ctl()?;
        match rt.block_on(ctl.tune(req)) {
            Ok(TuneResponse::Refused { reason }) => Err(reason),
            Ok(TuneResponse::Failed { error }) => Err(error),
            Ok(r) => Ok(r),
            Err(e) => Err(super::error_text(&e)),
        }
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
            println!("kept on this host, as a profile:\n{text}");
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

fn metric_of(m: Metric, s: &crate::record::schema::Summary) -> Result<f64, String> {
    match m {
        Metric::Throughput => Ok(s.throughput_bps),
        Metric::Rate => Ok(s.rate_per_s),
        Metric::P99 => s
            .latency_us
            .map(|l| l.p99)
            .ok_or_else(|| "the test measured no latency (p99 needs --mode rr)".to_string()),
    }
}

impl Driver for SessionDriver {
    fn run_test(&mut self, args: &[String], metric: Metric) -> Result<TestOutcome, String> {
        let mut argv = vec!["wirescope".to_string(), "run".to_string()];
        argv.extend(args.iter().cloned());
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv)
            .map_err(|e| e.to_string().trim().to_string())?;
        let Some(crate::cli::Command::Run(r)) = cli.command else {
            return Err("not a `wirescope run` command line".into());
        };
        let plan = r.test.resolve().map_err(|e| e.0)?;
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
        let mut summary = None;
        let mut failure = None;
        while let Some(ev) = rx.blocking_recv() {
            if let SessionEvent::Failed(e) = &ev {
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
        if let Some(e) = &s.error {
            return Err(e.clone());
        }
        if !ok {
            return Err(failure.unwrap_or_else(|| "the test failed".into()));
        }
        let value = metric_of(metric, &s)?;
        if !self.json {
            eprintln!("wirescope: measured {}", metric.format(value));
        }
        Ok(TestOutcome {
            value,
            findings: s.findings,
        })
    }

    fn preview(&mut self, host: HostRole, profile: &str) -> Result<Vec<String>, String> {
        match host {
            HostRole::Local => {
                let p = Profile::parse(profile, "checklist step").map_err(|e| e.to_string())?;
                let (plan, _) =
                    apply::plan(&p, &self.host, &self.opts(), true).map_err(|e| e.to_string())?;
                Ok(plan.changes().iter().map(|c| c.command()).collect())
            }
            HostRole::Peer => match self.peer(TuneRequest::Plan {
                profile: profile.to_string(),
                skip_unsupported: true,
            })? {
                TuneResponse::Planned { plan, .. } => {
                    Ok(plan.changes().iter().map(|c| c.command()).collect())
                }
                other => Err(format!("unexpected answer from the agent: {other:?}")),
            },
        }
    }

    fn apply(&mut self, host: HostRole, profile: &str) -> Result<ApplyReport, String> {
        match host {
            HostRole::Local => {
                let p = Profile::parse(profile, "checklist step").map_err(|e| e.to_string())?;
                let opts = ApplyOptions {
                    skip_unsupported: true,
                    after_step: None,
                };
                apply::apply(&p, &self.host, &self.state, &self.opts(), &opts)
                    .map_err(|e| e.to_string())
            }
            HostRole::Peer => match self.peer(TuneRequest::Apply {
                profile: profile.to_string(),
                skip_unsupported: true,
            })? {
                TuneResponse::Applied(r) => Ok(r),
                other => Err(format!("unexpected answer from the agent: {other:?}")),
            },
        }
    }

    fn rollback(&mut self, host: HostRole) -> Result<RollbackReport, String> {
        match host {
            HostRole::Local => apply::rollback(&self.host, &self.state).map_err(|e| e.to_string()),
            HostRole::Peer => match self.peer(TuneRequest::Rollback)? {
                TuneResponse::RolledBack(r) => Ok(r),
                other => Err(format!("unexpected answer from the agent: {other:?}")),
            },
        }
    }

    fn confirm(&mut self, q: &Question) -> bool {
        let prompt = match q {
            Question::Apply {
                step,
                rule,
                finding,
                evidence,
                host,
                change,
            } => {
                if !self.json {
                    println!(
                        "\nstep {step}: {rule} on the {} host: {finding}",
                        host.name()
                    );
                    for e in evidence {
                        println!("    {e}");
                    }
                    println!("  change:");
                    for l in change.lines() {
                        println!("    {l}");
                    }
                }
                format!("apply this change on the {} host?", host.name())
            }
            Question::Rollback { step, verdict } => {
                if !self.json {
                    println!("step {step}: {}", verdict.reason);
                }
                format!("step {step} did not help; roll it back?")
            }
        };
        self.ask(&prompt)
    }

    fn record(&mut self, r: &Record) {
        if self.json {
            match serde_json::to_string(r) {
                Ok(j) => println!("{j}"),
                Err(e) => eprintln!("wirescope: cannot encode a record: {e}"),
            }
            return;
        }
        match r {
            Record::Baseline {
                metric,
                values,
                findings,
            } => {
                let v: Vec<String> = values.iter().map(|v| metric.format(*v)).collect();
                println!("baseline: {}", v.join(", "));
                for f in findings {
                    println!("  finding: {f}");
                }
            }
            Record::Step(s) => {
                let why = match &s.status {
                    crate::tune::decide::StepStatus::Skipped(w)
                    | crate::tune::decide::StepStatus::Failed(w) => format!(" ({w})"),
                    _ => String::new(),
                };
                println!("step {} {}: {}{why}", s.step, s.rule, s.status.word());
                for c in &s.changes {
                    println!("    {c}");
                }
            }
            Record::Summary(s) => {
                println!();
                print!("{}", crate::tune::decide::summary_table(s.metric, &s.steps));
            }
        }
    }
}

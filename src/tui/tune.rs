//! Guided checklists in the TUI (the Tune view): the same step loop as
//! `wirescope checklist run` ([`crate::tune::runner`]), driven from the TUI's
//! session.
//!
//! The loop is synchronous and asks its [`Driver`] for everything; here it
//! runs on its own thread with a [`RemoteDriver`] that turns each call into
//! a [`DriverReq`] for the session task and waits for the answer. The
//! session task owns the agent's session: it runs each test with
//! [`run_plan`] (the intervals reach the UI like any test's, the summary
//! gives the metric and the findings), carries out each change on this host
//! ([`local_op`], off the async threads) or on the agent's host (through the
//! control connection), and forwards questions and records to the UI as
//! [`TuneNote`]s; the user answers with `y`/`n`, which come back as
//! [`SessionCmd::Answer`]. Stop or quit while a test runs interrupts it, and
//! the loop ends the checklist there.

use super::session_task::{PipeIn, SessionCmd};
use crate::diagnose::HostRole;
use crate::face::checklist::{
    local_op, outcome, peer_done, peer_request, test_plan, TuneDone, TuneOp,
};
use crate::record::pipeline::{Origin, Output, Pipeline};
use crate::session::controller::Controller;
use crate::session::driver::{run_plan, SessionEvent};
use crate::session::plan::{Observe, Plan};
use crate::tune::apply::{ApplyReport, RollbackReport};
use crate::tune::checklist::Checklist;
use crate::tune::decide::Metric;
use crate::tune::host::Host;
use crate::tune::resolve::ResolveOpts;
use crate::tune::runner::{self, Driver, Question, Record, TestOutcome};
use crate::tune::state::StateDir;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// What the Tune view is told while a checklist runs.
#[derive(Debug, Clone, PartialEq)]
pub enum TuneNote {
    /// A question for the user (`y`/`n`).
    Question(Question),
    /// A baseline, a finished step, or the summary.
    Record(Record),
    /// The checklist ended (or could not run: why).
    Ended(Result<(), String>),
}

/// One call of the step loop, for the session task.
pub enum DriverReq {
    /// Run the checklist's test once.
    RunTest {
        /// `wirescope run` arguments.
        args: Vec<String>,
        /// What is compared.
        metric: Metric,
        /// The answer.
        reply: oneshot::Sender<Result<TestOutcome, String>>,
    },
    /// Preview, apply or roll back a change on a host.
    Op {
        /// Which host.
        host: HostRole,
        /// What.
        op: TuneOp,
        /// The answer.
        reply: oneshot::Sender<Result<TuneDone, String>>,
    },
    /// Ask the user.
    Confirm {
        /// The question.
        q: Question,
        /// The answer.
        reply: oneshot::Sender<bool>,
    },
    /// Show a record.
    Record(Record),
}

/// The step loop's [`Driver`] on its own thread: every call goes to the
/// session task and waits for its answer.
pub struct RemoteDriver {
    tx: mpsc::Sender<DriverReq>,
}

const GONE: &str = "the TUI's session ended";

impl RemoteDriver {
    fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> DriverReq) -> Option<T> {
        let (reply, rx) = oneshot::channel();
        self.tx.blocking_send(make(reply)).ok()?;
        rx.blocking_recv().ok()
    }

    fn op(&self, host: HostRole, op: TuneOp) -> Result<TuneDone, String> {
        self.ask(|reply| DriverReq::Op { host, op, reply })
            .unwrap_or_else(|| Err(GONE.into()))
    }
}

fn unexpected(d: &TuneDone) -> String {
    format!("unexpected result of a tuning step: {d:?}")
}

impl Driver for RemoteDriver {
    fn run_test(&mut self, args: &[String], metric: Metric) -> Result<TestOutcome, String> {
        let args = args.to_vec();
        self.ask(|reply| DriverReq::RunTest {
            args,
            metric,
            reply,
        })
        .unwrap_or_else(|| Err(GONE.into()))
    }

    fn preview(&mut self, host: HostRole, profile: &str) -> Result<Vec<String>, String> {
        match self.op(host, TuneOp::Preview(profile.to_string()))? {
            TuneDone::Commands(c) => Ok(c),
            other => Err(unexpected(&other)),
        }
    }

    fn apply(&mut self, host: HostRole, profile: &str) -> Result<ApplyReport, String> {
        match self.op(host, TuneOp::Apply(profile.to_string()))? {
            TuneDone::Applied(r) => Ok(r),
            other => Err(unexpected(&other)),
        }
    }

    fn rollback(&mut self, host: HostRole) -> Result<RollbackReport, String> {
        match self.op(host, TuneOp::Rollback)? {
            TuneDone::RolledBack(r) => Ok(r),
            other => Err(unexpected(&other)),
        }
    }

    fn confirm(&mut self, q: &Question) -> bool {
        let q = q.clone();
        self.ask(|reply| DriverReq::Confirm { q, reply })
            .unwrap_or(false)
    }

    fn record(&mut self, r: &Record) {
        let _ = self.tx.blocking_send(DriverReq::Record(r.clone()));
    }
}

/// Run checklist `c` on the session; returns a command that arrived and must
/// be handled next (Quit), or Err when the session is unusable.
pub async fn run_checklist(
    ctl: &mut Controller,
    c: Checklist,
    observe: &Observe,
    cmds: &mut mpsc::UnboundedReceiver<SessionCmd>,
    tx: &mpsc::Sender<SessionEvent>,
    out: &mpsc::Sender<PipeIn>,
) -> Result<Option<SessionCmd>, ()> {
    let note = |n: TuneNote| out.send(PipeIn::Tune(Box::new(n)));
    let (req_tx, mut req_rx) = mpsc::channel::<DriverReq>(1);
    let rounds = c.rounds;
    let spawned = std::thread::Builder::new()
        .name("ws-tui-checklist".into())
        .spawn(move || {
            let mut d = RemoteDriver { tx: req_tx };
            runner::run(&c, rounds, &mut d).map(|_| ())
        });
    let runner = match spawned {
        Ok(t) => t,
        Err(e) => {
            let _ = note(TuneNote::Ended(Err(format!(
                "cannot start the checklist: {e}"
            ))))
            .await;
            return Ok(None);
        }
    };
    let host = std::sync::Arc::new(Host::live());
    // On the local pair this host's side is a namespace that goes away with
    // the TUI: its backups go with it, not into the host's state directory.
    let state = std::sync::Arc::new(if ctl.is_local_pair() {
        StateDir::at(std::env::temp_dir().join(format!("wirescope-{}-tune", std::process::id())))
    } else {
        StateDir::resolve(None)
    });
    let opts = ResolveOpts {
        route_to: Some(ctl.data_ip()),
        subject: None,
    };
    let mut after = None;
    let mut lost = false;
    while let Some(req) = req_rx.recv().await {
        match req {
            DriverReq::RunTest {
                args,
                metric,
                reply,
            } => {
                let r = if after.is_some() || lost {
                    Err("the checklist was stopped".to_string())
                } else {
                    match run_test(ctl, &args, metric, observe, cmds, tx).await {
                        TestRun::Done(r) => r,
                        TestRun::Stopped(next) => {
                            after = next;
                            Err("the checklist was stopped".to_string())
                        }
                        TestRun::Lost(e) => {
                            lost = true;
                            Err(e)
                        }
                    }
                };
                let _ = reply.send(r);
            }
            DriverReq::Op {
                host: on,
                op,
                reply,
            } => {
                let r = match on {
                    HostRole::Local => {
                        let (h, s, o) = (host.clone(), state.clone(), opts.clone());
                        tokio::task::spawn_blocking(move || local_op(&op, &h, &s, &o))
                            .await
                            .unwrap_or_else(|e| Err(format!("the tuning task failed: {e}")))
                    }
                    HostRole::Peer => match ctl.tune(peer_request(&op)).await {
                        Ok(resp) => peer_done(resp),
                        Err(e) => Err(crate::face::error_text(&e)),
                    },
                };
                let _ = reply.send(r);
            }
            DriverReq::Confirm { q, reply } => {
                if after.is_some() || lost {
                    let _ = reply.send(false);
                    continue;
                }
                let _ = note(TuneNote::Question(q)).await;
                let answer = loop {
                    match cmds.recv().await {
                        Some(SessionCmd::Answer(b)) => break b,
                        Some(SessionCmd::Quit) | None => {
                            after = Some(SessionCmd::Quit);
                            break false;
                        }
                        // Start, Stop, another checklist: not while a question waits.
                        Some(_) => {}
                    }
                };
                let _ = reply.send(answer);
            }
            DriverReq::Record(r) => {
                let _ = note(TuneNote::Record(r)).await;
            }
        }
    }
    let result = tokio::task::spawn_blocking(move || runner.join())
        .await
        .map_err(|e| format!("the checklist thread failed: {e}"))
        .and_then(|j| j.unwrap_or_else(|_| Err("the checklist thread panicked".into())));
    let _ = note(TuneNote::Ended(result)).await;
    if lost {
        return Err(());
    }
    Ok(after)
}

/// How one test of a checklist ended.
enum TestRun {
    /// Measured (or failed as a test).
    Done(Result<TestOutcome, String>),
    /// The user stopped it; a command to handle after the checklist (Quit).
    Stopped(Option<SessionCmd>),
    /// The session is gone.
    Lost(String),
}

/// Run the checklist's test once: its events go to the UI like any test's,
/// and through a pipeline of its own (no log) for the summary.
async fn run_test(
    ctl: &mut Controller,
    args: &[String],
    metric: Metric,
    observe: &Observe,
    cmds: &mut mpsc::UnboundedReceiver<SessionCmd>,
    tx: &mpsc::Sender<SessionEvent>,
) -> TestRun {
    let plan = match test_plan(args) {
        Ok(p) => p,
        Err(e) => return TestRun::Done(Err(e)),
    };
    let (mine_tx, mut mine_rx) = mpsc::channel::<SessionEvent>(64);
    let cancel = CancellationToken::new();
    let mut pipeline = Pipeline::new(Origin {
        command_line: Vec::new(),
        local: crate::probe::system::HostInfo::current(),
        pair: String::new(),
    });
    let mut summary = None;
    let mut stopped: Option<Option<SessionCmd>> = None;
    let plan = Plan::Test(Box::new(plan));
    let end = {
        let run = run_plan(ctl, &plan, observe, &mine_tx, &cancel);
        tokio::pin!(run);
        let mut cmds_open = true;
        loop {
            tokio::select! {
                r = &mut run => break r,
                Some(ev) = mine_rx.recv() => {
                    let _ = tx.send(ev.clone()).await;
                    if let Ok(Output::PointDone { summary: Some(s), .. }) = pipeline.handle(ev) {
                        summary = Some(*s);
                    }
                }
                c = cmds.recv(), if cmds_open => match c {
                    Some(SessionCmd::Quit) | None => {
                        cmds_open = false;
                        cancel.cancel();
                        stopped = Some(Some(SessionCmd::Quit));
                    }
                    Some(SessionCmd::Stop) => { cancel.cancel(); stopped.get_or_insert(None); }
                    Some(_) => {}
                },
            }
        }
    };
    drop(mine_tx);
    while let Some(ev) = mine_rx.recv().await {
        let _ = tx.send(ev.clone()).await;
        if let Ok(Output::PointDone {
            summary: Some(s), ..
        }) = pipeline.handle(ev)
        {
            summary = Some(*s);
        }
    }
    match end {
        Ok(crate::session::outcome::EndReason::PeerLost(w)) => {
            TestRun::Lost(format!("peer lost: {w}"))
        }
        Err(e) => TestRun::Lost(crate::face::error_text(&e)),
        Ok(_) => match stopped {
            Some(next) => TestRun::Stopped(next),
            None => TestRun::Done(
                summary
                    .ok_or_else(|| "the test gave no result".to_string())
                    .and_then(|s| outcome(metric, s)),
            ),
        },
    }
}

//! The TUI's link to the session: a tokio task that drives the controller,
//! and a pipeline thread that turns its events into what the UI shows.
//!
//! The task connects once (the local pair's agent serves one controller),
//! then waits for [`SessionCmd`]s: `Start` runs every point of a plan through
//! [`run_plan`] (the same driver as `run`), `Stop` cancels the running point
//! (it ends as interrupted, engines stopped on both hosts), `Quit` stops and
//! closes. Its [`SessionEvent`]s go to the pipeline thread, which runs the
//! same [`Pipeline`] as `run` — log records, findings, summaries — and
//! forwards each [`Output`] to the UI as an [`Event`]. The log is written on
//! that thread, never on the UI thread; `l` only sends [`PipeCmd`]s.
//!
//! Commands from the UI travel on unbounded channels: they come from key
//! presses, at human speed, and the model lets at most one start or stop be
//! pending at a time, so the queue cannot grow — and a command is never
//! dropped because a queue was full.

use super::event::Event;
use super::tune::{ChecklistEnd, DriverReq, RemoteDriver, TuneNote};
use crate::diagnose::HostRole;
use crate::face::checklist::{local_op, outcome, peer_done, peer_request, test_flow, test_plan};
use crate::probe::ebpf::EbpfIface;
use crate::record::log::LogWriter;
use crate::record::pipeline::{Origin, Output, Pipeline};
use crate::session::auth::Token;
use crate::session::controller::{Controller, Target};
use crate::session::driver::{connect_ready, run_plan, SessionError, SessionEvent};
use crate::session::plan::{Observe, Plan, TestPlan};
use crate::session::proto::PING_EVERY;
use crate::tune::checklist::Checklist;
use crate::tune::decide::Metric;
use crate::tune::host::Host;
use crate::tune::resolve::ResolveOpts;
use crate::tune::runner::{self, StepError, TestError, TestOutcome};
use crate::tune::state::StateDir;
use std::path::PathBuf;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What the UI asks of the session.
#[derive(Debug)]
pub enum SessionCmd {
    /// Run a plan.
    Start(Box<TestPlan>),
    /// Stop the running plan.
    Stop,
    /// Stop and close the session.
    Quit,
    /// Walk through a checklist (the Tune view).
    Checklist(Box<crate::tune::checklist::Checklist>),
    /// The user's answer to the checklist's question.
    Answer(bool),
}

/// What the UI asks of the pipeline thread.
#[derive(Debug)]
pub enum PipeCmd {
    /// Start recording the log at this path.
    Record(PathBuf),
    /// Stop recording.
    StopRecording,
}

/// The pipeline thread's input: the session's events and the UI's log commands.
#[derive(Debug)]
pub enum PipeIn {
    /// From the session task.
    Session(SessionEvent),
    /// From the UI.
    Cmd(PipeCmd),
    /// From a running checklist, for the Tune view.
    Tune(Box<TuneNote>),
}

/// Events the session task may queue for the pipeline thread.
pub const PIPE_QUEUE: usize = 256;

/// Connect, then serve commands until `Quit` or the UI goes away.
pub async fn serve(
    target: Target,
    token: Token,
    observe: Observe,
    same_kernel: Vec<EbpfIface>,
    mut cmds: mpsc::UnboundedReceiver<SessionCmd>,
    out: mpsc::Sender<PipeIn>,
) {
    let (tx, mut rx) = mpsc::channel::<SessionEvent>(64);
    let forward = {
        let out = out.clone();
        tokio::spawn(async move {
            while let Some(ev) = rx.recv().await {
                if out.send(PipeIn::Session(ev)).await.is_err() {
                    return;
                }
            }
        })
    };
    if let Err(e) = session(target, token, observe, same_kernel, &mut cmds, &tx, &out).await {
        let _ = tx
            .send(SessionEvent::Failed(crate::face::error_text(&e)))
            .await;
    }
    drop(tx);
    let _ = forward.await;
}

async fn session(
    target: Target,
    token: Token,
    observe: Observe,
    same_kernel: Vec<EbpfIface>,
    cmds: &mut mpsc::UnboundedReceiver<SessionCmd>,
    tx: &mpsc::Sender<SessionEvent>,
    out: &mpsc::Sender<PipeIn>,
) -> Result<(), SessionError> {
    let mut ctl = connect_ready(target, &token, &observe, same_kernel, tx).await?;
    let mut pending = None;
    loop {
        let cmd = match pending.take() {
            Some(c) => c,
            // Idle between tests: keep the agent's session alive.
            None => match tokio::time::timeout(PING_EVERY, cmds.recv()).await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(_) => {
                    ctl.ping().await?;
                    continue;
                }
            },
        };
        let next = match cmd {
            SessionCmd::Start(plan) => {
                run_one(&mut ctl, Plan::Test(plan), &observe, cmds, tx).await
            }
            SessionCmd::Checklist(c) => run_checklist(&mut ctl, *c, &observe, cmds, tx, out).await,
            SessionCmd::Stop | SessionCmd::Answer(_) => Ok(None),
            SessionCmd::Quit => break,
        };
        let Ok(next) = next else { return Ok(()) };
        pending = next;
    }
    ctl.close().await;
    Ok(())
}

/// Run one plan while still listening to commands; returns a command that
/// arrived and must be handled next (Quit), or Err when the session is unusable.
async fn run_one(
    ctl: &mut Controller,
    plan: Plan,
    observe: &Observe,
    cmds: &mut mpsc::UnboundedReceiver<SessionCmd>,
    tx: &mpsc::Sender<SessionEvent>,
) -> Result<Option<SessionCmd>, ()> {
    let cancel = CancellationToken::new();
    let mut after = None;
    let result = {
        let run = run_plan(ctl, &plan, observe, tx, &cancel);
        tokio::pin!(run);
        let mut cmds_open = true;
        loop {
            tokio::select! {
                r = &mut run => break r,
                c = cmds.recv(), if cmds_open => match c {
                    Some(SessionCmd::Stop) | Some(SessionCmd::Start(_)) => cancel.cancel(),
                    Some(SessionCmd::Checklist(_)) | Some(SessionCmd::Answer(_)) => {}
                    Some(SessionCmd::Quit) => { cancel.cancel(); after = Some(SessionCmd::Quit); }
                    None => { cancel.cancel(); cmds_open = false; after = Some(SessionCmd::Quit); }
                },
            }
        }
    };
    match result {
        // A test refused as asked leaves the session as it was.
        Err(e) if e.is_usage() => Ok(after),
        Ok(crate::session::outcome::EndReason::PeerLost(_)) | Err(_) => Err(()),
        Ok(_) => Ok(after),
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
    let flow = match test_flow(&c) {
        Ok(f) => f,
        Err(e) => {
            let _ = note(TuneNote::Ended(Err(ChecklistEnd::Run(e.to_string())))).await;
            return Ok(None);
        }
    };
    let spawned = std::thread::Builder::new()
        .name("ws-tui-checklist".into())
        .spawn(move || {
            let mut d = RemoteDriver::new(req_tx);
            runner::run(&c, rounds, flow, &mut d)
                .map(|_| ())
                .map_err(|e| ChecklistEnd::Run(e.to_string()))
        });
    let runner = match spawned {
        Ok(t) => t,
        Err(e) => {
            let _ = note(TuneNote::Ended(Err(ChecklistEnd::Spawn(e.to_string())))).await;
            return Ok(None);
        }
    };
    let local = LocalTuning::of(ctl);
    let mut st = Serving::default();
    while let Some(req) = req_rx.recv().await {
        match req {
            DriverReq::RunTest {
                args,
                metric,
                reply,
            } => {
                let r = serve_test(ctl, (&args, metric), observe, cmds, tx, &mut st).await;
                let _ = reply.send(r);
            }
            DriverReq::Op {
                host: on,
                op,
                reply,
            } => {
                let _ = reply.send(local.op(ctl, on, op).await);
            }
            DriverReq::Confirm { q, reply } => {
                let _ = reply.send(confirm(q, cmds, out, &mut st).await);
            }
            DriverReq::Record(r) => {
                let _ = note(TuneNote::Record(r)).await;
            }
        }
    }
    let result = tokio::task::spawn_blocking(move || runner.join())
        .await
        .map_err(|e| ChecklistEnd::Join(e.to_string()))
        .and_then(|j| j.unwrap_or(Err(ChecklistEnd::Panicked)));
    let _ = note(TuneNote::Ended(result)).await;
    if st.lost {
        Err(())
    } else {
        Ok(st.after)
    }
}

/// Where answering a checklist stands: a command to handle after it (Quit),
/// and whether the session was lost.
#[derive(Default)]
struct Serving {
    after: Option<SessionCmd>,
    lost: bool,
}

impl Serving {
    fn stopped(&self) -> bool {
        self.after.is_some() || self.lost
    }
}

/// The answer to a test asked for after the user stopped the checklist.
const STOPPED: &str = "the checklist was stopped";

/// One test the checklist asked for, run on the session.
async fn serve_test(
    ctl: &mut Controller,
    (args, metric): (&[String], Metric),
    observe: &Observe,
    cmds: &mut mpsc::UnboundedReceiver<SessionCmd>,
    tx: &mpsc::Sender<SessionEvent>,
    st: &mut Serving,
) -> Result<TestOutcome, TestError> {
    if st.stopped() {
        return Err(STOPPED.into());
    }
    match run_test(ctl, args, metric, observe, cmds, tx).await {
        TestRun::Done(r) => r,
        TestRun::Stopped(next) => {
            st.after = next;
            Err(STOPPED.into())
        }
        TestRun::Lost(e) => {
            st.lost = true;
            Err(TestError::Failed(e))
        }
    }
}

/// Ask the user (the Tune view shows the question); Quit ends the checklist.
async fn confirm(
    q: crate::tune::runner::Question,
    cmds: &mut mpsc::UnboundedReceiver<SessionCmd>,
    out: &mpsc::Sender<PipeIn>,
    st: &mut Serving,
) -> bool {
    if st.stopped() {
        return false;
    }
    let _ = out
        .send(PipeIn::Tune(Box::new(TuneNote::Question(q))))
        .await;
    loop {
        match cmds.recv().await {
            Some(SessionCmd::Answer(b)) => return b,
            Some(SessionCmd::Quit) | None => {
                st.after = Some(SessionCmd::Quit);
                return false;
            }
            // Start, Stop, another checklist: not while a question waits.
            Some(_) => {}
        }
    }
}

/// This host's side of the checklist's changes: the live host, its state
/// directory and where `@route` points.
struct LocalTuning {
    host: std::sync::Arc<Host>,
    state: std::sync::Arc<StateDir>,
    opts: ResolveOpts,
}

impl LocalTuning {
    fn of(ctl: &Controller) -> LocalTuning {
        // On the local pair this host's side is a namespace that goes away
        // with the TUI: its backups go with it, not into the host's state
        // directory.
        let state = if ctl.is_local_pair() {
            let dir = format!("wirescope-{}-tune", std::process::id());
            StateDir::at(std::env::temp_dir().join(dir))
        } else {
            StateDir::resolve(None)
        };
        LocalTuning {
            host: std::sync::Arc::new(Host::live()),
            state: std::sync::Arc::new(state),
            opts: ResolveOpts {
                route_to: Some(ctl.data_ip()),
                subject: None,
            },
        }
    }

    /// Preview, apply or roll back on `on`: here off the runtime, or on the agent.
    async fn op(
        &self,
        ctl: &mut Controller,
        on: HostRole,
        op: crate::tune::runner::TuneOp,
    ) -> Result<crate::tune::runner::TuneDone, StepError> {
        match on {
            HostRole::Local => {
                let (h, s, o) = (self.host.clone(), self.state.clone(), self.opts.clone());
                tokio::task::spawn_blocking(move || {
                    local_op(&op, &h, &s, &o).map_err(|e| e.to_string())
                })
                .await
                .unwrap_or_else(|e| Err(format!("the tuning task failed: {e}")))
                .map_err(StepError::Failed)
            }
            HostRole::Peer => match ctl.tune(peer_request(&op)).await {
                Ok(resp) => peer_done(resp),
                Err(e) => Err(StepError::Failed(crate::face::error_text(&e))),
            },
        }
    }
}

/// How one test of a checklist ended.
enum TestRun {
    /// Measured (or failed as a test).
    Done(Result<TestOutcome, TestError>),
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
        Err(e) => return TestRun::Done(Err(TestError::Failed(e.to_string()))),
    };
    let (mine_tx, mut mine_rx) = mpsc::channel::<SessionEvent>(64);
    let cancel = CancellationToken::new();
    let mut pipeline = Pipeline::new(Origin {
        command_line: Vec::new(),
        local: crate::probe::system::HostInfo::current(),
        pair: String::new(),
        netns: None,
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
                Some(ev) = mine_rx.recv() => relay(ev, tx, &mut pipeline, &mut summary).await,
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
        relay(ev, tx, &mut pipeline, &mut summary).await;
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
                    .ok_or_else(|| "the test gave no result".into())
                    .and_then(|s| outcome(metric, s).map_err(TestError::from)),
            ),
        },
    }
}

/// A checklist test's event: to the UI, and through its own pipeline for the summary.
async fn relay(
    ev: SessionEvent,
    tx: &mpsc::Sender<SessionEvent>,
    pipeline: &mut Pipeline,
    summary: &mut Option<crate::record::schema::Summary>,
) {
    let _ = tx.send(ev.clone()).await;
    if let Ok(Output::PointDone {
        summary: Some(s), ..
    }) = pipeline.handle(ev)
    {
        *summary = Some(*s);
    }
}

/// The pipeline thread: session events and log commands in, UI events out.
/// Ends when every sender is gone or the UI stops listening.
pub fn pipeline_thread(
    origin: Origin,
    mut input: mpsc::Receiver<PipeIn>,
    ui: mpsc::Sender<Event>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("ws-tui-pipeline".into())
        .spawn(move || {
            // Part of the control path: engines must not starve it.
            crate::traffic::raise_priority();
            let mut p = Pipeline::new(origin);
            while let Some(msg) = input.blocking_recv() {
                let ev = match msg {
                    PipeIn::Session(ev) => match p.handle(ev) {
                        Ok(o) => Event::Output(Box::new(o)),
                        Err(e) => Event::LogFailed(e.to_string()),
                    },
                    PipeIn::Cmd(PipeCmd::Record(path)) => {
                        match LogWriter::create(&path).and_then(|w| p.record_to(w)) {
                            Ok(()) => Event::LogOpened(path),
                            Err(e) => Event::LogFailed(e.to_string()),
                        }
                    }
                    PipeIn::Cmd(PipeCmd::StopRecording) => {
                        p.stop_recording();
                        continue;
                    }
                    PipeIn::Tune(n) => Event::Tune(n),
                };
                if ui.blocking_send(ev).is_err() {
                    return;
                }
            }
        })
}

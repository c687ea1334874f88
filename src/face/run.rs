//! `wirescope run`: the test without a terminal UI.
//!
//! The session (connect, configure, every point of the plan) runs on the
//! control runtime and publishes [`SessionEvent`]s; this thread feeds them
//! through the [`Pipeline`] (log, findings, summaries) and prints what comes
//! out: an iperf3-like table, or one JSON summary per point with `--json`.
//! Exit codes: 0 ok, 1 the test failed (peer lost, engine error), 2 usage
//! error (also one the hosts reveal before traffic: a CPU or a queue they
//! do not have, frames above the MTU), 3 a finding at or above `--fail-on`,
//! 130 interrupted.

use super::{out, FaceError, FaceResult, EXIT_FAILED, EXIT_FINDINGS, EXIT_OK};
use crate::cli::{FailOn, RunArgs};
use crate::probe::ebpf::EbpfIface;
use crate::probe::system::HostInfo;
use crate::record::log::LogWriter;
use crate::record::pipeline::{Origin, Output, Pipeline};
use crate::record::text;
use crate::session::auth::Token;
use crate::session::controller::Target;
use crate::session::driver::{connect_ready, run_plan, SessionEvent};
use crate::session::outcome::EndReason;
use crate::session::plan::{Observe, Plan};
use crate::traffic::ServerCheckError;
use anyhow::Context;
use std::io::IsTerminal;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Events the session may queue before the printer catches up.
const EVENT_QUEUE: usize = 64;

/// Run `wirescope run`. Builds the local pair first (privileged, on the main
/// thread), then the runtime; the pair is torn down when this returns,
/// whatever happened.
pub fn run(args: RunArgs, argv: Vec<String>) -> FaceResult {
    let plan = args.test.resolve()?;
    if let Some(t) = args.foreign_target.clone() {
        return against_server(args, plan, t, argv);
    }
    let choice = args.target.resolve()?;
    preflight(&plan, &choice)?;
    check_plan_here(&plan, &choice)?;
    let log = open_log(args.log.as_deref(), args.json)?;
    let opened = crate::session::open(&choice, args.target.token_file.as_deref())?;
    if let Some(pair) = &opened.pair {
        eprintln!(
            "wirescope: {}; agent pid {}",
            opened.description,
            pair.agent_pid().unwrap_or(0)
        );
    }
    let crate::session::Opened {
        pair,
        target,
        token,
        description,
        same_kernel,
    } = opened;
    let origin = Origin {
        command_line: argv,
        local: HostInfo::current(),
        pair: description,
        netns: pair.as_ref().and_then(|p| p.netns()),
    };
    let (face, pipeline) = drive(origin, log, args.json, |tx, cancel| {
        let observe = args.observe.resolve();
        session(
            target,
            token,
            same_kernel,
            Plan::Test(Box::new(plan)),
            observe,
            tx,
            cancel,
        )
    })?;
    if let (true, Some(p)) = (face.agent_log_helps(), &pair) {
        eprintln!("wirescope: local agent log: {}", p.agent_log_tail());
    }
    drop(pair);
    super::stdout_result()?;
    face.exit(pipeline.worst_raised(), args.fail_on)
}

/// What this host can tell about the plan before anything starts: the CPU
/// lists of every point that run here (with the local pair both ends run
/// here; a remote agent checks its own when the first point starts) and,
/// on the local pair's veth, the sink threads against its queues. One line,
/// exit 2.
fn check_plan_here(
    plan: &crate::session::plan::TestPlan,
    choice: &crate::session::plan::TargetChoice,
) -> Result<(), FaceError> {
    use crate::session::plan::TargetChoice;
    use crate::traffic::Side;
    let sides: &[Side] = match choice {
        TargetChoice::LocalPair { .. } => &[Side::Controller, Side::Agent],
        TargetChoice::Peer(_) => &[Side::Controller],
    };
    crate::session::engines::check_plan_cpus(plan, sides)
        .map_err(|e| FaceError::Usage(e.to_string()))?;
    // As root the pair is a veth with that many queues (else loopback,
    // where the sink reads UDP sockets and has no queues to run out of).
    if let TargetChoice::LocalPair { queues } = choice {
        if nix::unistd::geteuid().is_root() {
            crate::session::localpair::check_plan_queues(plan, *queues)
                .map_err(|e| FaceError::Usage(e.to_string()))?;
        } else {
            crate::session::engines::check_plan_loopback(plan)
                .map_err(|e| FaceError::Usage(e.to_string()))?;
        }
    }
    Ok(())
}

/// What the test's engine needs on this host before anything else happens
/// (RDMA: libibverbs and a device): without it, one line says what is
/// missing and the command that fixes it (exit 2). The agent checks its own
/// host the same way when the test reaches it.
fn preflight(
    plan: &crate::session::plan::TestPlan,
    choice: &crate::session::plan::TargetChoice,
) -> Result<(), FaceError> {
    use crate::session::plan::TargetChoice;
    let toward = match choice {
        TargetChoice::Peer(a) => Some(a.ip()),
        TargetChoice::LocalPair { .. } => None,
    };
    let host = crate::probe::engine_host::LiveEngineHost::default();
    plan.spec
        .preflight(&host, toward)
        .map_err(|e| FaceError::Usage(e.to_string()))
}

/// `run --target HOST:PORT`: the engine's client against a foreign
/// (third-party) server, when its engine has one
/// ([`EngineSlice::foreign_client`](crate::traffic::EngineSlice::foreign_client)),
/// through the same driver, pipeline, log and summary as a test with an
/// agent; only this host is sampled (the interface that routes to the
/// server is watched).
fn against_server(
    args: RunArgs,
    plan: crate::session::plan::TestPlan,
    target: String,
    argv: Vec<String>,
) -> FaceResult {
    let Some(words) = crate::traffic::slice(plan.spec.kind()).foreign_client() else {
        return Err(FaceError::Usage(no_foreign_client()));
    };
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&target)
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            FaceError::Usage(format!(
                "--target {target} is not a HOST:PORT that resolves; e.g. --target 10.0.0.2:50051"
            ))
        })?;
    // The engine checks the server with the test's sizes before anything
    // starts (gRPC: one RPC): a server that is not there is a failed test
    // (exit 1); one that is not the engine's kind of server, or refuses the
    // test's sizes, is a usage error (exit 2), said in one line.
    match plan.spec.check_server(&target) {
        Ok(()) => {}
        Err(e @ ServerCheckError::Usage(_)) => return Err(FaceError::Usage(e.to_string())),
        Err(e @ ServerCheckError::Failed(_)) => {
            return Err(FaceError::Failed(anyhow::anyhow!(e.to_string())))
        }
    }
    let log = open_log(args.log.as_deref(), args.json)?;
    let mut observe = args.observe.resolve();
    if let Some(i) = crate::probe::system::route_iface(addr.ip()) {
        if !observe.ifaces.contains(&i) {
            observe.ifaces.insert(0, i);
        }
    }
    eprintln!(
        "wirescope: {} against {target} (no agent: only this host's telemetry is sampled)",
        words.client
    );
    let origin = Origin {
        command_line: argv,
        local: HostInfo::current(),
        pair: format!("{} {target} (no agent)", words.server),
        netns: None,
    };
    let (face, pipeline) = drive(origin, log, args.json, |tx, cancel| {
        super::local_session(
            Plan::Test(Box::new(plan)),
            observe,
            Some(target),
            tx,
            cancel,
        )
    })?;
    super::stdout_result()?;
    face.exit(pipeline.worst_raised(), args.fail_on)
}

/// Start the control runtime and on it the `session` that publishes to the
/// channel it is given (cancelled by the token it is given), then feed its
/// events through a pipeline from `origin` that records to `log` and show
/// them ([`consume`]) until it ends.
fn drive<F: std::future::Future<Output = ()> + Send + 'static>(
    origin: Origin,
    log: Option<LogWriter>,
    json: bool,
    session: impl FnOnce(mpsc::Sender<SessionEvent>, CancellationToken) -> F,
) -> Result<(RunFace, Pipeline), FaceError> {
    let rt = super::control_runtime("ws-runtime").context("cannot start the async runtime")?;
    let mut pipeline = Pipeline::new(origin);
    if let Some(w) = log {
        pipeline.record_to(w).context("cannot write the log")?;
    }
    let (tx, mut rx) = mpsc::channel(EVENT_QUEUE);
    let cancel = CancellationToken::new();
    let task = rt.spawn(session(tx, cancel.clone()));
    let face = consume(&mut rx, &mut pipeline, json, &cancel);
    let _ = rt.block_on(task);
    Ok((face, pipeline))
}

/// Why `--target` cannot run this test: which engines' clients run against
/// which servers, and the options that choose them (from the registry).
fn no_foreign_client() -> String {
    let runs: Vec<String> = crate::traffic::registry::foreign_clients()
        .iter()
        .map(|(_, w)| format!("the {} against {}", w.client, w.any_server))
        .collect();
    format!(
        "--target runs {}; add {} (other engines need an agent: --peer)",
        runs.join(" or "),
        crate::traffic::registry::foreign_client_engines()
    )
}

/// Feed every event of the session through the pipeline and print what comes
/// out, until the session ends. A log that cannot be written cancels the
/// test (the session still ends cleanly) and fails the run.
///
/// The consumer is part of the control path: when it falls behind, the
/// session's event queue fills, the controller stops reading the agent and
/// sending its ticks, and both ends' intervals go wrong (`-P 1000` on two
/// CPUs gave the consumer a 1/1000 share). So the calling thread runs at
/// raised priority, like the runtime and the sampler.
pub fn consume(
    rx: &mut mpsc::Receiver<SessionEvent>,
    pipeline: &mut Pipeline,
    json: bool,
    cancel: &CancellationToken,
) -> RunFace {
    crate::traffic::raise_priority();
    let mut face = RunFace::new(json);
    while let Some(ev) = rx.blocking_recv() {
        match pipeline.handle(ev) {
            Ok(o) => face.show(&o),
            Err(e) => {
                face.log_error.get_or_insert_with(|| e.to_string());
                cancel.cancel();
            }
        }
    }
    // A run that ends without its plan's end leaves no half line behind.
    face.progress.clear();
    face
}

/// Create the log before anything starts, so a bad path costs nothing.
/// `--log -` streams the records to stdout as they happen (iperf3's
/// `--json-stream`); the table then goes to stderr.
pub(crate) fn open_log(
    path: Option<&std::path::Path>,
    json: bool,
) -> Result<Option<LogWriter>, FaceError> {
    match path {
        Some(p) if p.as_os_str() == "-" => {
            if json {
                return Err(FaceError::Usage(
                    "--log - and --json both write stdout: use --log - for every record as it happens, or --json for the summary".into(),
                ));
            }
            super::human_to_stderr();
            Ok(Some(LogWriter::stdout()))
        }
        _ => path
            .map(LogWriter::create)
            .transpose()
            .map_err(|e| FaceError::Usage(format!("--log: {e}; choose a writable path"))),
    }
}

/// Connect, configure, run the plan, close: the session side of `run` and
/// `watch --peer`, publishing everything to `tx`.
pub(crate) async fn session(
    target: Target,
    token: Token,
    same_kernel: Vec<EbpfIface>,
    plan: Plan,
    observe: Observe,
    tx: mpsc::Sender<SessionEvent>,
    cancel: CancellationToken,
) {
    super::spawn_signal_handler(cancel.clone());
    let mut ctl = match connect_ready(target, &token, &observe, same_kernel, &tx).await {
        Ok(c) => c,
        Err(e) => {
            let _ = tx.send(SessionEvent::Failed(super::error_text(&e))).await;
            return;
        }
    };
    // A test refused as asked leaves the connection clean: say goodbye.
    match run_plan(&mut ctl, &plan, &observe, &tx, &cancel).await {
        Ok(_) => ctl.close().await,
        Err(e) if e.is_usage() => ctl.close().await,
        Err(_) => {}
    }
}

/// What `run` printed, and how it ends.
pub struct RunFace {
    json: bool,
    /// Why the run failed, if it did (printed at the end, exit 1).
    failure: Option<String>,
    /// Why the test cannot run as asked, if so (exit 2).
    usage: Option<String>,
    /// The session reached the agent (its failures say what happened there).
    ready: bool,
    /// A point ended because the agent was lost.
    peer_lost: bool,
    interrupted: bool,
    log_error: Option<String>,
    spec: Option<crate::traffic::EngineSpec>,
    /// Summaries of the plan's points, for the sweep table at its end.
    points: Vec<crate::record::schema::Summary>,
    /// "point k of N, ~T left" on a terminal's stderr, during a sweep.
    progress: super::progress::Progress,
}

impl RunFace {
    fn new(json: bool) -> Self {
        RunFace {
            json,
            failure: None,
            usage: None,
            ready: false,
            peer_lost: false,
            interrupted: false,
            log_error: None,
            points: Vec::new(),
            spec: None,
            progress: super::progress::Progress::new(std::io::stderr().is_terminal()),
        }
    }

    /// Show one output; the progress line is erased first and drawn again after.
    fn show(&mut self, o: &Output) {
        let now = std::time::Instant::now();
        self.progress.clear();
        match o {
            Output::PlanStarted(h) => {
                let points = h.sweep.as_ref().map_or(1, |s| s.values.len());
                let guess = h
                    .time_s
                    .map(|t| std::time::Duration::from_secs_f64((t + h.omit_s).max(0.0)));
                self.progress.plan(points, guess);
            }
            Output::PointStarted(p) => self.progress.point(p.number as usize, now),
            Output::PointDone { .. } => self.progress.point_done(now),
            Output::PlanDone => self.progress.plan_done(),
            _ => {}
        }
        self.show_output(o);
        self.progress.draw(now);
    }

    fn show_output(&mut self, o: &Output) {
        match o {
            Output::Ready { ebpf, .. } => {
                self.ready = true;
                if !self.json {
                    super::report_ebpf(ebpf);
                }
            }
            Output::PlanStarted(h) => {
                if !self.json {
                    crate::face::out(&format!("{}\n", text::run_title(h)));
                }
            }
            Output::PointStarted(p) => {
                self.spec = p.spec.clone();
                if !self.json {
                    if let Some(s) = &p.sweep {
                        out(&format!("\n{}\n", text::sweep_heading(s)));
                    }
                    if let Some(l) = p.spec.as_ref().and_then(|s| s.pinning_line()) {
                        out(&format!("{l}\n"));
                    }
                    if let Some(spec) = &p.spec {
                        out(&format!("{}\n", text::interval_header(spec)));
                    }
                }
            }
            Output::Interval {
                local,
                peer,
                changes,
                ..
            } => {
                if self.json {
                    return;
                }
                if let Some(spec) = &self.spec {
                    out(&text::interval_rows(
                        spec,
                        local.as_deref(),
                        peer.as_deref(),
                    ));
                }
                for c in changes {
                    out(&text::finding_change(c));
                }
            }
            Output::PointDone { outcome, summary } => {
                if let Some(s) = summary {
                    if self.json {
                        match crate::record::schema::versioned_json(s, false) {
                            Ok(j) => out(&format!("{j}\n")),
                            Err(e) => {
                                self.failure = Some(format!("cannot encode the summary: {e}"))
                            }
                        }
                    } else {
                        out(&text::summary_block(s));
                    }
                    self.points.push((**s).clone());
                }
                match &outcome.end {
                    EndReason::Completed => {}
                    EndReason::Interrupted => self.interrupted = true,
                    EndReason::PeerLost(_) | EndReason::Failed(_) => {
                        self.peer_lost |= matches!(outcome.end, EndReason::PeerLost(_));
                        let why = summary
                            .as_ref()
                            .and_then(|s| s.error.clone())
                            .unwrap_or_else(|| format!("{:?}", outcome.end));
                        self.failure.get_or_insert(why);
                    }
                }
            }
            Output::PlanDone => {
                if !self.json {
                    out(&text::sweep_table(&self.points));
                }
                self.points.clear();
            }
            Output::Failed(e) => {
                self.failure.get_or_insert_with(|| e.clone());
            }
            Output::Refused(e) => {
                self.usage.get_or_insert_with(|| e.clone());
            }
        }
    }

    /// Whether the local agent's log can tell more than the error does: the
    /// session never reached the agent, or lost it. When the agent (or this
    /// host's engine) refused or failed, the error already says why.
    pub fn agent_log_helps(&self) -> bool {
        self.failure.is_some() && (!self.ready || self.peer_lost)
    }

    /// The exit code: failures first, then an interruption, then `--fail-on`.
    pub fn exit(
        self,
        worst: Option<crate::diagnose::Severity>,
        fail_on: Option<FailOn>,
    ) -> FaceResult {
        if let Some(r) = went_wrong(self.log_error, self.usage, self.failure) {
            return r;
        }
        if self.interrupted {
            return Ok(super::interrupted_exit());
        }
        if let (Some(level), Some(w)) = (fail_on, worst) {
            if w >= level.severity() {
                eprintln!(
                    "wirescope: a finding of level {} or worse was raised (--fail-on {})",
                    w.name(),
                    level.severity().name()
                );
                return Ok(EXIT_FINDINGS);
            }
        }
        Ok(EXIT_OK)
    }
}

/// How a session that went wrong ends, if it did: a log that could not be
/// written, then a refusal, then a failure (said on stderr).
pub(super) fn went_wrong(
    log_error: Option<String>,
    usage: Option<String>,
    failure: Option<String>,
) -> Option<FaceResult> {
    let log =
        log_error.map(|e| FaceError::Failed(anyhow::anyhow!("the log could not be written: {e}")));
    if let Some(e) = log.or(usage.map(FaceError::Usage)) {
        return Some(Err(e));
    }
    failure.map(|e| {
        eprintln!("error: {e}");
        Ok(EXIT_FAILED)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn target_without_a_foreign_client_says_which_engines_have_one() {
        assert_eq!(
            super::no_foreign_client(),
            "--target runs the gRPC client against a BenchmarkService server; add --engine grpc (other engines need an agent: --peer)"
        );
    }
}

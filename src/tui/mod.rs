//! The interactive dashboard: `wirescope`, `wirescope tui [--peer HOST]`,
//! `wirescope tui --replay LOG`.
//!
//! Architecture (see the repository's STYLE notes): one [`event::Event`]
//! stream (keys, ticks, what the session's pipeline produced) through one
//! bounded channel; keys become [`action::Action`]s through the
//! [`keys::KEYMAP`] table; [`action::update`] is the only code that changes
//! the [`model::Model`] and returns [`action::Effect`]s for the loop in
//! [`app`] to carry out; renderers in [`view`] only read the model, one
//! module per view. The session runs in a tokio task and its events go
//! through the same pipeline as `run` on a thread of their own
//! ([`session_task`]): the UI loop runs on the main thread, never waits on
//! either, and writes no file. The terminal is restored on every exit path
//! ([`terminal`]).
//!
//! What this module must not do: compute telemetry (it shows Samples as the
//! sampler made them), diagnose or build log records (the pipeline does),
//! validate test options itself (the control view edits a
//! [`TestArgs`](crate::cli::TestArgs) and asks
//! [`resolve`](crate::cli::TestArgs::resolve), like `run`), or exit the process.

pub mod action;
pub mod app;
pub mod event;
pub mod fleet;
pub mod form;
pub mod keys;
pub mod model;
pub mod replay;
pub mod session_task;
pub mod terminal;
pub mod tune;
pub mod view;

use crate::cli::TuiArgs;
use crate::face::{FaceResult, EXIT_FAILED, EXIT_OK};
use crate::probe::system::HostInfo;
use crate::record::pipeline::Origin;
use anyhow::Context;
use model::{Model, ModelConfig, RunState, Source};
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

/// Colours unless `NO_COLOR` is set to something non-empty (no-color.org).
pub fn color_enabled() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Run the TUI. Builds the local pair first (privileged, on the main thread,
/// before any other thread exists), then the runtime, the pipeline thread, the
/// input thread and the terminal; everything is torn down in reverse order on
/// every path.
pub fn run(args: TuiArgs, argv: Vec<String>) -> FaceResult {
    // The same validation as `run`, before anything starts.
    args.test.resolve()?;
    let cfg = ModelConfig {
        source: Source::Live,
        local_host: HostInfo::current(),
        pair: String::new(),
        test: args.test.clone(),
        history: args.history,
        color: color_enabled(),
        log_path: args.log.clone(),
    };
    match &args.replay {
        Some(path) => replay(path, cfg),
        None => live(args, argv, cfg),
    }
}

/// `tui --replay LOG`: the log's records in the dashboard, no session.
fn replay(path: &std::path::Path, cfg: ModelConfig) -> FaceResult {
    // The header first (it says which test the log holds; a file that is
    // not a log fails here, before the terminal is touched), then the rest
    // streams in on a thread while the dashboard is already up: a day's log
    // of a big host opens at once instead of after minutes of parsing.
    let mut reader = crate::record::log::LogReader::open(path).map_err(anyhow::Error::from)?;
    let first = reader.next().transpose().map_err(anyhow::Error::from)?;
    let cfg = ModelConfig {
        source: Source::Replay(path.to_path_buf()),
        ..cfg
    };
    let mut model = replay::streaming_model(first.as_ref(), cfg);
    if first.is_none() {
        model.message = Some("this log holds no interval (an empty or header-only log)".into());
    }
    let (tx, mut rx) = mpsc::channel(event::EVENT_QUEUE);
    let feed = replay_streaming(first, reader, tx.clone())
        .context("cannot start the log reader thread")?;
    let mut io = app::Io::default();
    let input = event::InputThread::spawn(tx).context("cannot start the input thread")?;
    let mut guard = terminal::TerminalGuard::enter().context("cannot set up the terminal")?;
    let r = app::run_loop(&mut guard.terminal, &mut model, &mut rx, &mut io);
    drop(guard);
    drop(rx);
    drop(input);
    let _ = feed.join();
    r.context("terminal I/O failed")?;
    Ok(EXIT_OK)
}

/// The log's records after the header, turned into the outputs a live
/// session produced and sent to the dashboard as they are read. A record
/// that cannot be read ends the replay there, said on the dashboard. The
/// thread ends when the log does or the dashboard goes away.
fn replay_streaming(
    first: Option<crate::record::schema::Record>,
    reader: crate::record::log::LogReader,
    tx: mpsc::Sender<event::Event>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("ws-replay".into())
        .spawn(move || {
            // Each batch stops at the first event the UI no longer takes.
            let send = |o| tx.blocking_send(event::Event::Output(Box::new(o))).is_ok();
            let mut r = crate::record::replay::Replayer::default();
            if let Some(h) = first {
                r.push(h);
            }
            for rec in reader {
                match rec {
                    Ok(rec) => r.push(rec),
                    Err(e) => {
                        if r.finish().into_iter().all(send) {
                            let _ = send(crate::record::pipeline::Output::Failed(format!(
                                "the log cannot be read further: {e}"
                            )));
                        }
                        return;
                    }
                }
                if !r.ready().into_iter().all(send) {
                    return;
                }
            }
            let _ = r.finish().into_iter().all(send);
        })
}

/// A live session: open the pair or the peer, start the session task and
/// the pipeline thread, run the dashboard, then stop them all.
fn live(args: TuiArgs, argv: Vec<String>, cfg: ModelConfig) -> FaceResult {
    let choice = args.target.resolve()?;
    let crate::session::Opened {
        pair,
        target,
        token,
        description: pair_desc,
        same_kernel,
    } = crate::session::open(&choice, args.target.token_file.as_deref())?;
    let rt =
        crate::face::control_runtime("ws-tui-runtime").context("cannot start the async runtime")?;
    let mut model = Model::new(ModelConfig {
        pair: pair_desc.clone(),
        ..cfg
    });
    let (ev_tx, mut ev_rx) = mpsc::channel(event::EVENT_QUEUE);
    let (pipe_tx, pipe_rx) = mpsc::channel(session_task::PIPE_QUEUE);
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let pipeline = session_task::pipeline_thread(
        Origin {
            command_line: argv,
            local: HostInfo::current(),
            pair: pair_desc,
            netns: pair.as_ref().and_then(|p| p.netns()),
        },
        pipe_rx,
        ev_tx.clone(),
    )
    .context("cannot start the pipeline thread")?;
    let task = rt.spawn(session_task::serve(
        target,
        token,
        args.observe.resolve(),
        same_kernel,
        cmd_rx,
        pipe_tx.clone(),
    ));
    rt.spawn(signals(
        ev_tx.clone(),
        vec![SignalKind::terminate(), SignalKind::hangup()],
    ));
    let mut io = app::Io {
        session: Some(cmd_tx.clone()),
        pipe: Some(pipe_tx),
        autostart: true,
        log_at_start: args.log.is_some(),
        ..app::Io::default()
    };
    let input = event::InputThread::spawn(ev_tx).context("cannot start the input thread")?;
    let result = terminal::TerminalGuard::enter()
        .and_then(|mut guard| app::run_loop(&mut guard.terminal, &mut model, &mut ev_rx, &mut io));
    // The terminal is back to normal here (the guard dropped); stop the test and close.
    let _ = cmd_tx.send(session_task::SessionCmd::Quit);
    drop(cmd_tx);
    drop(io);
    input.stop();
    let stopped = stop_session(&rt, task, ev_rx);
    drop(input);
    rt.shutdown_timeout(Duration::from_secs(1));
    // The session task and its forwarder are gone: the pipeline thread's
    // input closes, it writes what it has and ends.
    let _ = pipeline.join();
    if !stopped {
        eprintln!("wirescope: the test did not stop within 8 s; its agent is killed with the pair");
    }
    if let Some(p) = &pair {
        if matches!(model.state, RunState::Failed(_)) {
            eprintln!("wirescope: local agent log: {}", p.agent_log_tail());
        }
    }
    drop(pair);
    result.context("terminal I/O failed")?;
    match model.state {
        RunState::Failed(e) | RunState::PeerLost(e) => {
            eprintln!("error: {e}");
            Ok(EXIT_FAILED)
        }
        _ => Ok(EXIT_OK),
    }
}

/// Wait (at most 8 s) for the session task to end after Quit, draining the
/// events meanwhile so the pipeline never blocks on a full queue. True when
/// it ended.
fn stop_session(
    rt: &tokio::runtime::Runtime,
    task: tokio::task::JoinHandle<()>,
    mut ev_rx: mpsc::Receiver<event::Event>,
) -> bool {
    rt.block_on(async {
        tokio::select! {
            r = tokio::time::timeout(Duration::from_secs(8), task) => r.is_ok(),
            // Keep draining so the pipeline never blocks on a full event queue.
            _ = async { while ev_rx.recv().await.is_some() {} } => true,
        }
    })
}

/// SIGTERM and SIGHUP (ssh gone) leave like `q`; the fleet view also
/// passes SIGINT (from another process).
async fn signals(tx: mpsc::Sender<event::Event>, kinds: Vec<SignalKind>) {
    let Ok(mut sigs) = kinds
        .iter()
        .map(|k| signal(*k))
        .collect::<std::io::Result<Vec<_>>>()
    else {
        return;
    };
    futures_util::future::select_all(sigs.iter_mut().map(|s| Box::pin(s.recv()))).await;
    let _ = tx.send(event::Event::Quit).await;
}

//! The interactive dashboard: `wirescope`, `wirescope tui [--peer HOST]`,
//! `wirescope tui --replay LOG`.
//!
//! Architecture (see the repository's STYLE notes): one [`event::Event`]
//! stream (keys, ticks, the controller's intervals) through one bounded
//! channel; keys become [`action::Action`]s through the
//! [`keys::KEYMAP`] table; [`action::update`] is the only code that changes
//! the [`model::Model`] and returns [`action::Effect`]s for the loop in
//! [`app`] to carry out; renderers in [`view`] only read the model, one
//! module per view. The controller runs in a tokio task ([`session`]); the
//! UI loop runs on the main thread and never waits on it. The terminal is
//! restored on every exit path ([`terminal`]).
//!
//! What this module must not do: compute telemetry (it shows Samples as the
//! sampler made them), validate test options itself (the control view edits
//! a [`TestArgs`](crate::cli::TestArgs) and asks
//! [`resolve`](crate::cli::TestArgs::resolve), like `run`), or exit the process.

pub mod action;
pub mod app;
pub mod event;
pub mod form;
pub mod keys;
pub mod model;
pub mod replay;
pub mod session;
pub mod terminal;
pub mod view;

use crate::cli::TuiArgs;
use crate::headless::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::probe::system::HostInfo;
use crate::record::log::read_log;
use anyhow::Context;
use model::{Model, ModelConfig, RunState, Source};
use std::time::Duration;
use tokio::sync::mpsc;

/// Colours unless `NO_COLOR` is set to something non-empty (no-color.org).
pub fn color_enabled() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Run the TUI. Builds the local pair first (privileged, on the main thread,
/// before any other thread exists), then the runtime, the input thread and
/// the terminal; everything is torn down in reverse order on every path.
pub fn run(args: TuiArgs, argv: Vec<String>) -> anyhow::Result<u8> {
    if let Err(e) = args.test.resolve() {
        eprintln!("error: {e}");
        return Ok(EXIT_USAGE);
    }
    let cfg = ModelConfig {
        source: Source::Live,
        local_host: HostInfo::current(),
        pair: String::new(),
        test: args.test.clone(),
        history: args.history,
        color: color_enabled(),
        log_path: args.log.clone(),
    };
    if let Some(path) = &args.replay {
        let records = read_log(path)?;
        let cfg = ModelConfig {
            source: Source::Replay(path.clone()),
            ..cfg
        };
        let mut model = replay::model_from_records(records, cfg);
        let (tx, mut rx) = mpsc::channel(event::EVENT_QUEUE);
        let mut io = app::Io::default();
        let input = event::InputThread::spawn(tx).context("cannot start the input thread")?;
        let mut guard = terminal::TerminalGuard::enter().context("cannot set up the terminal")?;
        let r = app::run_loop(&mut guard.terminal, &mut model, &mut rx, &mut io);
        drop(guard);
        drop(rx);
        drop(input);
        r?;
        return Ok(EXIT_OK);
    }
    let choice = match args.target.resolve() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let crate::session::Opened {
        pair,
        target,
        token,
        description: pair_desc,
        same_kernel,
    } = crate::session::open(&choice, args.target.token_file.as_deref())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ws-tui-runtime")
        .worker_threads(2)
        .build()
        .context("cannot start the async runtime")?;
    let mut model = Model::new(ModelConfig {
        pair: pair_desc,
        ..cfg
    });
    let (ev_tx, mut ev_rx) = mpsc::channel(event::EVENT_QUEUE);
    let (cmd_tx, cmd_rx) = mpsc::channel(session::CMD_QUEUE);
    let task = rt.spawn(session::serve(
        target,
        token,
        args.observe.clone(),
        same_kernel,
        cmd_rx,
        ev_tx.clone(),
    ));
    rt.spawn(signals(ev_tx.clone()));
    let mut io = app::Io {
        session: Some(cmd_tx.clone()),
        argv,
        autostart: true,
        log_at_start: args.log.is_some(),
        ..app::Io::default()
    };
    let input = event::InputThread::spawn(ev_tx).context("cannot start the input thread")?;
    let result = match terminal::TerminalGuard::enter() {
        Ok(mut guard) => app::run_loop(&mut guard.terminal, &mut model, &mut ev_rx, &mut io),
        Err(e) => Err(e),
    };
    // The terminal is back to normal here (the guard dropped); stop the test and close.
    let _ = cmd_tx.try_send(session::SessionCmd::Quit);
    drop(cmd_tx);
    drop(io);
    input.stop();
    let stopped = rt.block_on(async {
        tokio::select! {
            r = tokio::time::timeout(Duration::from_secs(8), task) => r.is_ok(),
            // Keep draining so the session never blocks on a full event queue.
            _ = async { while ev_rx.recv().await.is_some() {} } => true,
        }
    });
    drop(input);
    rt.shutdown_timeout(Duration::from_secs(1));
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

/// SIGTERM and SIGHUP (ssh gone) leave like `q`.
async fn signals(tx: mpsc::Sender<event::Event>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
    let _ = tx.send(event::Event::Quit).await;
}

//! The fleet view, `wirescope fleet --tui ...`: the run of `wirescope
//! fleet` (same options, same plan, same coordinator, same log) shown as a
//! heat map of the matrix filling in round by round, the outliers found so
//! far, and each pair's test on Enter.
//!
//! Threads: the coordinator runs on the control runtime; its events go to a
//! named log thread (`ws-fleet-log`) that writes the fleet log (`--log`, the
//! same `Recorder` as the headless face) and passes each event on to the
//! UI loop on the main thread, through the TUI's one bounded event channel
//! with the keys from the input thread. The loop writes nothing; [`update`]
//! is the only code that changes the [`FleetModel`]; [`view`] only reads it.
//!
//! Ctrl-C stops the run (the running tests end and report, no round
//! starts) and keeps the partial matrix on screen; `q` leaves (stopping a
//! running fleet first). The terminal is restored before the process waits
//! for the coordinator, then the summary is printed as `wirescope fleet`
//! prints it and the exit code is the same (0, 3 when something is named,
//! 1 when no test ran, 130 when the run was stopped early).
//!
//! What this module must not do: plan, test, analyse or build log records
//! itself (the face, the coordinator and [`crate::fleet`] do), or exit the
//! process.

pub mod keys;
pub mod model;
pub mod view;

use super::event::{self, Event, InputThread};
use super::terminal::TerminalGuard;
use crate::cli::fleet::FleetArgs;
use crate::face::fleet::{exit_code, open_log, plan, summary_text, token, Planned, Recorder};
use crate::face::{FaceError, FaceResult};
use crate::fleet::coordinator::{self, Directions, FleetEvent};
use crate::fleet::log::FleetLog;
use anyhow::Context;
use model::{update, FleetAction, FleetConfig, FleetEffect, FleetModel};
use ratatui::backend::Backend;
use ratatui::Terminal;
use std::time::{Duration, Instant};
use tokio::signal::unix::SignalKind;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Events from the coordinator waiting for the log thread.
const FLEET_QUEUE: usize = 256;
/// How long leaving waits for the coordinator's running tests to stop.
const STOP_LIMIT: Duration = Duration::from_secs(30);

/// Run `wirescope fleet --tui`.
pub fn run(args: FleetArgs, argv: Vec<String>) -> FaceResult {
    let rt =
        crate::face::control_runtime("ws-fleet-tui").context("cannot start the async runtime")?;
    let Planned { plan, untested } = plan(&args, &rt)?;
    let token = token(&args)?;
    let log = open_log(&args, &plan, argv)?;
    let names: Vec<String> = plan.hosts.iter().map(|h| h.name.clone()).collect();
    let mut model = FleetModel::new(FleetConfig {
        hosts: names.clone(),
        pattern: args.pattern.name().into(),
        test: plan.spec.spec.label(),
        time_s: plan.spec.time_ms as f64 / 1000.0,
        bidir: plan.directions == Directions::Bidir,
        rounds_planned: plan.rounds.len(),
        pairs_planned: plan.rounds.iter().map(Vec::len).sum(),
        untested: untested.clone(),
        log_path: args.log.clone(),
        color: super::color_enabled(),
    });
    let cancel = CancellationToken::new();
    let (ev_tx, mut ev_rx) = mpsc::channel(event::EVENT_QUEUE);
    let (fleet_tx, fleet_rx) = mpsc::channel(FLEET_QUEUE);
    let writer = log_thread(log, Recorder::new(names), fleet_rx, ev_tx.clone())
        .context("cannot start the fleet log thread")?;
    let task = rt.spawn(coordinator::run(
        plan,
        token,
        untested,
        fleet_tx,
        cancel.clone(),
    ));
    rt.spawn(super::signals(
        ev_tx.clone(),
        vec![
            SignalKind::terminate(),
            SignalKind::hangup(),
            SignalKind::interrupt(),
        ],
    ));
    let input = InputThread::spawn(ev_tx).context("cannot start the input thread")?;
    let result = TerminalGuard::enter()
        .and_then(|mut guard| run_loop(&mut guard.terminal, &mut model, &mut ev_rx, &cancel));
    // The terminal is back to normal here (the guard dropped).
    input.stop();
    if model.running() || model.state == model::RunState::Stopping {
        cancel.cancel();
        eprintln!("wirescope: stopping the running tests…");
    }
    // The log thread still writes what comes; nothing waits for the UI.
    drop(ev_rx);
    let summary = rt.block_on(async { tokio::time::timeout(STOP_LIMIT, task).await });
    rt.shutdown_timeout(Duration::from_secs(1));
    let log_error = writer
        .join()
        .unwrap_or(Some("the fleet log thread panicked".into()));
    drop(input);
    result.context("terminal I/O failed")?;
    let summary = summary
        .map_err(|_| {
            anyhow::anyhow!(
                "the fleet's tests did not stop within {} s",
                STOP_LIMIT.as_secs()
            )
        })
        .and_then(|r| r.map_err(|e| anyhow::anyhow!("the fleet coordinator failed: {e}")))
        .map_err(FaceError::Failed)?;
    crate::face::out(&summary_text(&summary));
    crate::face::stdout_result()?;
    if let Some(e) = log_error {
        return Err(FaceError::Failed(anyhow::anyhow!(e)));
    }
    Ok(exit_code(&summary))
}

/// Read events, [`update`] the model, carry out the effects, draw (after
/// draining what is pending, at most once per [`super::app::FRAME`]). Runs
/// until the model says quit or every event source is gone.
pub fn run_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    model: &mut FleetModel,
    events: &mut mpsc::Receiver<Event>,
    cancel: &CancellationToken,
) -> std::io::Result<()> {
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    loop {
        if dirty && last_draw.is_none_or(|t| t.elapsed() >= super::app::FRAME) {
            terminal.draw(|f| view::draw(f, model))?;
            last_draw = Some(Instant::now());
            dirty = false;
        }
        if model.quit {
            return Ok(());
        }
        let Some(ev) = events.blocking_recv() else {
            return Ok(());
        };
        dirty |= handle(ev, model, cancel);
        while let Ok(ev) = events.try_recv() {
            dirty |= handle(ev, model, cancel);
        }
    }
}

/// The action an event means for the fleet view.
pub fn action_of(ev: Event) -> Option<FleetAction> {
    match ev {
        Event::Input(k) => super::keys::action_in(keys::FLEET_KEYS, &k),
        Event::Fleet(e) => Some(FleetAction::Event(e)),
        Event::LogFailed(e) => Some(FleetAction::LogFailed(e)),
        Event::Quit => Some(FleetAction::Quit),
        Event::Resize | Event::Tick | Event::Output(_) | Event::LogOpened(_) | Event::Tune(_) => {
            None
        }
    }
}

/// Apply one event; true when the screen must be drawn again.
pub fn handle(ev: Event, model: &mut FleetModel, cancel: &CancellationToken) -> bool {
    let resize = matches!(ev, Event::Resize);
    let Some(a) = action_of(ev) else {
        return resize;
    };
    for eff in update(model, a) {
        match eff {
            FleetEffect::Cancel => cancel.cancel(),
        }
    }
    true
}

/// The thread between the coordinator and the UI: writes each event's
/// record to the fleet log, then passes the event on. Once the UI has left
/// it keeps writing until the coordinator ends. Returns why the log
/// stopped being written, if it did.
fn log_thread(
    mut log: Option<FleetLog>,
    mut recorder: Recorder,
    mut rx: mpsc::Receiver<FleetEvent>,
    ui: mpsc::Sender<Event>,
) -> std::io::Result<std::thread::JoinHandle<Option<String>>> {
    std::thread::Builder::new()
        .name("ws-fleet-log".into())
        .spawn(move || {
            let mut error = None;
            while let Some(ev) = rx.blocking_recv() {
                if let (Some(l), Some(r)) = (log.as_mut(), recorder.record(&ev)) {
                    if let Err(e) = l.write(&r) {
                        log = None;
                        error = Some(e.to_string());
                        let _ = ui.blocking_send(Event::LogFailed(e.to_string()));
                    }
                }
                // The UI may have left: the events are still logged.
                let _ = ui.blocking_send(Event::Fleet(Box::new(ev)));
            }
            error
        })
}

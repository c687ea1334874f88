//! The event loop: read events, turn them into [`Action`]s, [`update`] the
//! model, carry out the [`Effect`]s (commands to the session task and the
//! pipeline thread; the loop itself does no file or socket I/O), draw. Generic over the ratatui backend,
//! so tests drive the whole loop with a `TestBackend` and scripted events.
//!
//! Redraws happen only after something changed and at most once per
//! [`FRAME`] (ticks wake the loop to draw a frame that was held back); all
//! pending events are drained before drawing.

use super::action::{update, Action, Effect};
use super::event::Event;
use super::keys::action_for;
use super::model::Model;
use super::session_task::{PipeCmd, PipeIn, SessionCmd};
use super::view;
use crate::record::pipeline::Output;
use ratatui::backend::Backend;
use ratatui::Terminal;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Shortest time between two frames (10 frames/s at most).
pub const FRAME: Duration = Duration::from_millis(100);

/// The loop's connections to the outside world. It writes nothing itself:
/// commands go to the session task and the pipeline thread.
#[derive(Default)]
pub struct Io {
    /// Commands to the session task (None in replay).
    pub session: Option<mpsc::UnboundedSender<SessionCmd>>,
    /// Log commands to the pipeline thread (None in replay).
    pub pipe: Option<mpsc::Sender<PipeIn>>,
    /// Log commands waiting for room in the pipeline's queue (never dropped).
    pub pipe_pending: VecDeque<PipeCmd>,
    /// Start the default test as soon as the agent is connected.
    pub autostart: bool,
    /// Start recording as soon as the agent is connected (`--log`).
    pub log_at_start: bool,
    /// Frames drawn (for tests and the cost report).
    pub frames: u64,
}

/// Run until the model says quit or every event source is gone.
pub fn run_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    model: &mut Model,
    events: &mut mpsc::Receiver<Event>,
    io: &mut Io,
) -> std::io::Result<()> {
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    loop {
        if dirty && last_draw.is_none_or(|t| t.elapsed() >= FRAME) {
            terminal.draw(|f| view::draw(f, model))?;
            io.frames += 1;
            last_draw = Some(Instant::now());
            dirty = false;
        }
        if model.quit {
            return Ok(());
        }
        let Some(ev) = events.blocking_recv() else {
            return Ok(());
        };
        dirty |= handle(ev, model, io);
        while let Ok(ev) = events.try_recv() {
            dirty |= handle(ev, model, io);
        }
        flush_pipe(io);
    }
}

/// The actions an output of the session's pipeline means for the model.
pub fn actions_of(o: Output) -> Vec<Action> {
    match o {
        Output::Ready { peer, ebpf } => vec![Action::Connected { peer: *peer }, Action::Ebpf(ebpf)],
        Output::PlanStarted(_) => Vec::new(),
        Output::PointStarted(p) => vec![Action::PointStarted {
            spec: p.spec.map(Box::new),
            time: p.time,
        }],
        Output::Interval {
            local,
            peer,
            changes,
            active,
        } => vec![Action::Interval {
            local,
            peer,
            changes,
            active,
        }],
        Output::PointDone { outcome, summary } => vec![Action::PointDone {
            end: outcome.end,
            summary,
        }],
        Output::PlanDone => vec![Action::PlanDone],
        Output::Failed(e) => vec![Action::SessionFailed(e)],
        Output::Refused(e) => vec![Action::TestRefused(e)],
    }
}

/// Map one event to actions and apply them; true when the model changed.
pub fn handle(ev: Event, model: &mut Model, io: &mut Io) -> bool {
    let actions = match ev {
        Event::Input(k) => match action_for(&k) {
            Some(a) => vec![a],
            None => return false,
        },
        Event::Resize => vec![Action::Resize],
        Event::Tick | Event::Fleet(_) => return false,
        Event::Output(o) => {
            let ready = matches!(*o, Output::Ready { .. });
            let mut v = actions_of(*o);
            if ready {
                if io.log_at_start {
                    v.push(Action::ToggleLog);
                }
                if io.autostart {
                    v.push(Action::StartStop);
                }
            }
            v
        }
        Event::LogOpened(p) => vec![Action::LogOpened(p)],
        Event::LogFailed(e) => vec![Action::LogFailed(e)],
        Event::Quit => vec![Action::Quit],
        Event::Tune(n) => vec![Action::Tune(n)],
    };
    for a in actions {
        dispatch(a, model, io);
    }
    true
}

/// Apply an action and every effect (and follow-up action) it causes.
pub fn dispatch(action: Action, model: &mut Model, io: &mut Io) {
    let mut queue = vec![action];
    while let Some(a) = queue.pop() {
        for eff in update(model, a) {
            if let Some(next) = apply(eff, io) {
                queue.push(next);
            }
        }
    }
}

fn apply(eff: Effect, io: &mut Io) -> Option<Action> {
    match eff {
        Effect::Start(plan) => send(io, SessionCmd::Start(plan)),
        Effect::Stop => send(io, SessionCmd::Stop),
        Effect::Checklist(c) => send(io, SessionCmd::Checklist(c)),
        Effect::Answer(b) => send(io, SessionCmd::Answer(b)),
        Effect::OpenLog { path } => {
            io.pipe_pending
                .push_back(PipeCmd::Record(path.unwrap_or_else(default_log_path)));
            flush_pipe(io);
            None
        }
        Effect::CloseLog => {
            io.pipe_pending.push_back(PipeCmd::StopRecording);
            flush_pipe(io);
            None
        }
    }
}

/// Hand waiting log commands to the pipeline thread, in order, as room allows.
fn flush_pipe(io: &mut Io) {
    let Some(tx) = io.pipe.as_ref() else {
        io.pipe_pending.clear();
        return;
    };
    while let Some(cmd) = io.pipe_pending.pop_front() {
        match tx.try_send(PipeIn::Cmd(cmd)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(PipeIn::Cmd(c))) => {
                io.pipe_pending.push_front(c);
                return;
            }
            Err(_) => {
                io.pipe_pending.clear();
                return;
            }
        }
    }
}

fn send(io: &mut Io, cmd: SessionCmd) -> Option<Action> {
    let tx = io.session.as_ref()?;
    match tx.send(cmd) {
        Ok(()) => None,
        Err(_) => Some(Action::SessionFailed("the session task ended".into())),
    }
}

/// `wirescope-YYYYMMDDTHHMMSS.jsonl` in the current directory.
fn default_log_path() -> PathBuf {
    let t = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let stamp: String = t.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    PathBuf::from(format!("wirescope-{}.jsonl", stamp.trim_end_matches('Z')))
}

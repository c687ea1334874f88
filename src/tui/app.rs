//! The event loop: read events, turn them into [`Action`]s, [`update`] the
//! model, carry out the [`Effect`]s, draw. Generic over the ratatui backend,
//! so tests drive the whole loop with a `TestBackend` and scripted events.
//!
//! Redraws happen only after something changed and at most once per
//! [`FRAME`] (ticks wake the loop to draw a frame that was held back); all
//! pending events are drained before drawing.

use super::action::{update, Action, Effect};
use super::event::Event;
use super::keys::action_for;
use super::model::Model;
use super::session::SessionCmd;
use super::view;
use crate::record::log::LogWriter;
use crate::record::schema::Record;
use ratatui::backend::Backend;
use ratatui::Terminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Shortest time between two frames (10 frames/s at most).
pub const FRAME: Duration = Duration::from_millis(100);

/// The loop's connections to the outside world.
#[derive(Default)]
pub struct Io {
    /// Commands to the controller task (None in replay).
    pub session: Option<mpsc::Sender<SessionCmd>>,
    /// The open log, when recording.
    pub log: Option<LogWriter>,
    /// argv, for the log header.
    pub argv: Vec<String>,
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
    }
}

/// Map one event to actions and apply them; true when the model changed.
pub fn handle(ev: Event, model: &mut Model, io: &mut Io) -> bool {
    let mut follow_up = Vec::new();
    let action = match ev {
        Event::Input(k) => match action_for(&k) {
            Some(a) => a,
            None => return false,
        },
        Event::Resize => Action::Resize,
        Event::Tick => return false,
        Event::Connected(peer) => {
            if io.log_at_start {
                follow_up.push(Action::ToggleLog);
            }
            if io.autostart {
                follow_up.push(Action::StartStop);
            }
            Action::Connected { peer }
        }
        Event::Ebpf(e) => Action::Ebpf(e),
        Event::PointStarted(spec, time) => Action::PointStarted { spec, time },
        Event::Interval(local, peer) => Action::Interval { local, peer },
        Event::PointDone(o) => Action::PointDone(o),
        Event::Failed(e) => Action::SessionFailed(e),
        Event::Quit => Action::Quit,
    };
    dispatch(action, model, io);
    for a in follow_up {
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
        Effect::OpenLog { path, mut header } => {
            let path = path.unwrap_or_else(default_log_path);
            header.start_time =
                humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
            header.command_line = io.argv.clone();
            let opened = LogWriter::create(&path)
                .and_then(|mut w| w.write(&Record::Header(header)).map(|()| w));
            match opened {
                Ok(w) => {
                    io.log = Some(w);
                    Some(Action::LogOpened(path))
                }
                Err(e) => Some(Action::LogFailed(e.to_string())),
            }
        }
        Effect::Log(records) => {
            let w = io.log.as_mut()?;
            for r in &records {
                if let Err(e) = w.write(r) {
                    io.log = None;
                    return Some(Action::LogFailed(e.to_string()));
                }
            }
            None
        }
        Effect::CloseLog => {
            io.log = None;
            None
        }
    }
}

fn send(io: &mut Io, cmd: SessionCmd) -> Option<Action> {
    let tx = io.session.as_ref()?;
    match tx.try_send(cmd) {
        Ok(()) => None,
        Err(mpsc::error::TrySendError::Full(_)) => None,
        Err(mpsc::error::TrySendError::Closed(_)) => {
            Some(Action::SessionFailed("the session task ended".into()))
        }
    }
}

/// `wirescope-YYYYMMDDTHHMMSS.jsonl` in the current directory.
fn default_log_path() -> PathBuf {
    let t = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let stamp: String = t.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    PathBuf::from(format!("wirescope-{}.jsonl", stamp.trim_end_matches('Z')))
}

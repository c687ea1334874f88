//! [`Action`]s and [`update`]: the only code that changes the [`Model`].
//!
//! Keys become actions through [`super::keys::KEYMAP`]; the session's news
//! (connected, an interval, a point done) become actions in the event loop.
//! `update` is pure: what needs the outside world (start or stop a test,
//! open, write or close the log) is returned as [`Effect`]s for the loop to
//! carry out, so every key and every data path is testable without a
//! terminal, a socket or a file.

use super::form::{self, FIELDS};
use super::model::{Interval, LogState, Modal, Model, RunState, Source, View};
use crate::diagnose::{Change, Finding};
use crate::probe::sample::Sample;
use crate::probe::system::HostInfo;
use crate::record::schema::{EbpfHosts, Summary};
use crate::session::outcome::EndReason;
use crate::session::plan::TestPlan;
use crate::traffic::EngineSpec;
use crate::tune::checklist::SHIPPED;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can change the model.
#[derive(Debug, Clone)]
pub enum Action {
    /// Leave (q, Ctrl-C, SIGTERM).
    Quit,
    /// Next view (Tab).
    NextView,
    /// Previous view (Shift-Tab).
    PrevView,
    /// A view by number.
    ShowView(View),
    /// Start a test, or stop the running one.
    StartStop,
    /// Freeze the display (data keeps arriving and is recorded), or follow live again.
    TogglePause,
    /// Up: scroll, or the previous control field.
    Up,
    /// Down: scroll, or the next control field.
    Down,
    /// Left: time cursor back, or the control value down.
    Left,
    /// Right: time cursor forward, or the control value up.
    Right,
    /// Scroll a page up.
    PageUp,
    /// Scroll a page down.
    PageDown,
    /// First interval kept.
    Home,
    /// Newest interval (and follow live).
    End,
    /// Start or stop recording the log.
    ToggleLog,
    /// Show or hide the key list.
    ToggleHelp,
    /// Close the modal.
    Close,
    /// Enter: start the test from the control view.
    Confirm,
    /// Nothing to change; time passed (lets the loop redraw a throttled frame).
    Tick,
    /// The terminal was resized.
    Resize,
    /// What the eBPF probes of each host do.
    Ebpf(Box<EbpfHosts>),
    /// The controller is connected.
    Connected {
        /// The agent's host.
        peer: HostInfo,
    },
    /// A point started.
    PointStarted {
        /// Its spec (None: observing without traffic).
        spec: Option<Box<EngineSpec>>,
        /// Its time limit.
        time: Option<Duration>,
    },
    /// One interval of both hosts, with what the diagnosis says after it.
    Interval {
        /// This host.
        local: Option<Box<Sample>>,
        /// The agent's host.
        peer: Option<Box<Sample>>,
        /// Findings raised or cleared in this interval.
        changes: Vec<Change>,
        /// Findings active after it, most important first.
        active: Vec<Finding>,
    },
    /// A point ended.
    PointDone {
        /// How.
        end: EndReason,
        /// Its summary (throughput, busiest cores, findings), when it had a test.
        summary: Option<Box<Summary>>,
    },
    /// Every point of the plan ran (or it stopped early).
    PlanDone,
    /// The session failed (connect, setup, engine start).
    SessionFailed(String),
    /// The test as asked cannot run on these hosts (the session stays).
    TestRefused(String),
    /// The log file was opened by the loop.
    LogOpened(PathBuf),
    /// Opening or writing the log failed.
    LogFailed(String),
    /// `y`/`n`: the answer to a running checklist's question.
    Answer(bool),
    /// A running checklist's question, record or end.
    Tune(Box<super::tune::TuneNote>),
}

/// What `update` asks the event loop to do.
#[derive(Debug, Clone)]
pub enum Effect {
    /// Run this plan (every point of it, in order).
    Start(Box<TestPlan>),
    /// Stop the running test (the point ends as interrupted).
    Stop,
    /// Start recording the log at this path (or a timestamped one).
    OpenLog {
        /// Requested path.
        path: Option<PathBuf>,
    },
    /// Stop recording.
    CloseLog,
    /// Walk through this checklist (Tune view).
    Checklist(Box<crate::tune::checklist::Checklist>),
    /// Answer the checklist's question.
    Answer(bool),
}

/// Apply one action. Returns the effects to carry out, in order.
pub fn update(m: &mut Model, a: Action) -> Vec<Effect> {
    let Some(a) = event(m, a) else {
        return Vec::new();
    };
    if m.modal == Modal::Help && !matches!(a, Action::Quit) {
        m.modal = Modal::None;
        return Vec::new();
    }
    key(m, a)
}

/// A key the user pressed (what [`event`] returned), with no modal over the views.
fn key(m: &mut Model, a: Action) -> Vec<Effect> {
    match a {
        Action::Quit => {
            m.quit = true;
            if m.state.busy() {
                return vec![Effect::Stop];
            }
        }
        Action::NextView => show(m, m.view.step(1)),
        Action::PrevView => show(m, m.view.step(-1)),
        Action::ShowView(v) => show(m, v),
        Action::Up if m.view == View::Tune && m.tune.running.is_none() => {
            m.tune.selected = m.tune.selected.saturating_sub(1)
        }
        Action::Down if m.view == View::Tune && m.tune.running.is_none() => {
            m.tune.selected = (m.tune.selected + 1).min(SHIPPED.len().saturating_sub(1));
        }
        Action::Confirm if m.view == View::Tune => return start_checklist(m),
        Action::Answer(yes) if m.tune.question.is_some() => {
            m.tune.question = None;
            m.tune
                .lines
                .push(format!("  answer: {}", if yes { "yes" } else { "no" }));
            return vec![Effect::Answer(yes)];
        }
        Action::StartStop | Action::Confirm => return start_stop(m, &a),
        Action::TogglePause => toggle_pause(m),
        Action::Up if m.view == View::Control => m.field = m.field.saturating_sub(1),
        Action::Down if m.view == View::Control => {
            m.field = (m.field + 1).min(FIELDS.len() - 1);
        }
        Action::Left | Action::Right if m.view == View::Control => {
            edit(m, if matches!(a, Action::Right) { 1 } else { -1 })
        }
        Action::Up => m.scroll = m.scroll.saturating_sub(1),
        Action::Down => m.scroll = m.scroll.saturating_add(1),
        Action::PageUp => m.scroll = m.scroll.saturating_sub(10),
        Action::PageDown => m.scroll = m.scroll.saturating_add(10),
        Action::Left => move_cursor(m, -1),
        Action::Right => move_cursor(m, 1),
        Action::Home => m.cursor = m.history.front().map(|i| i.seq),
        Action::End => {
            m.cursor = match m.source {
                Source::Live => None,
                Source::Replay(_) => m.history.back().map(|i| i.seq),
            }
        }
        Action::ToggleLog => return toggle_log(m),
        Action::ToggleHelp => m.modal = Modal::Help,
        Action::Close => m.modal = Modal::None,
        // Events: see `event`.
        _ => {}
    }
    Vec::new()
}

/// What the session, the tuning task or the terminal reported; a key the
/// user pressed is returned for [`key`].
fn event(m: &mut Model, a: Action) -> Option<Action> {
    match a {
        Action::Tune(n) => tune_note(m, *n),
        Action::Tick | Action::Resize => {}
        // Shown in the header's probe line and the facts view, never over
        // the key hints.
        Action::Ebpf(e) => m.ebpf = Some(*e),
        Action::Connected { peer } => {
            m.peer_host = Some(peer);
            if m.state == RunState::Connecting {
                m.state = RunState::Idle;
            }
        }
        Action::PointStarted { spec, time } => {
            m.point += 1;
            m.spec = spec.map(|s| *s);
            m.time = time;
            if m.state != RunState::Replay {
                m.state = RunState::Running;
            }
        }
        Action::Interval {
            local,
            peer,
            active,
            ..
        } => interval(m, local, peer, active),
        Action::PointDone { end, summary } => point_done(m, end, summary),
        // A replay's log is read in full: one without intervals says so.
        Action::PlanDone if m.history.is_empty() && matches!(m.source, Source::Replay(_)) => {
            m.message = Some("this log holds no interval (an empty or header-only log)".into());
        }
        Action::PlanDone => {}
        Action::SessionFailed(e) => {
            m.message = Some(e.clone());
            m.state = RunState::Failed(e);
        }
        Action::TestRefused(e) => {
            m.message = Some(format!("cannot run: {e}"));
            m.test_error = Some(e.clone());
            m.state = RunState::Stopped(EndReason::Failed(e));
        }
        Action::LogOpened(p) => m.log = LogState::On(p),
        Action::LogFailed(e) => {
            m.message = Some(format!("log: {e}"));
            m.log = LogState::Failed(e);
        }
        // Keys: see `key`.
        key => return Some(key),
    }
    None
}

fn show(m: &mut Model, v: View) {
    if m.view != v {
        m.view = v;
        m.scroll = 0;
    }
}

/// Enter in the Tune view: run the selected checklist, when nothing else runs.
fn start_checklist(m: &mut Model) -> Vec<Effect> {
    let Some((name, _)) = SHIPPED.get(m.tune.selected) else {
        return Vec::new();
    };
    let refuse = match &m.state {
        RunState::Replay => Some("replay: checklists run on a live pair"),
        RunState::Connecting => Some("still connecting to the agent"),
        s if s.busy() => Some("a test is running; stop it first (s)"),
        _ if m.tune.running.is_some() => Some("a checklist is running"),
        _ => None,
    };
    if let Some(why) = refuse {
        m.message = Some(why.into());
        return Vec::new();
    }
    let c = match crate::tune::checklist::shipped(name) {
        Some(Ok(c)) => c,
        Some(Err(e)) => {
            m.message = Some(format!("checklist {name}: {e}"));
            return Vec::new();
        }
        None => return Vec::new(),
    };
    if let Some(why) = c.unavailable() {
        m.message = Some(format!("checklist {name}: {why}"));
        return Vec::new();
    }
    m.tune.running = Some(name.to_string());
    m.tune.question = None;
    m.tune.lines = vec![format!(
        "checklist {name}: {} check(s), {} round(s) per measurement",
        c.checks.len(),
        c.rounds
    )];
    vec![Effect::Checklist(Box::new(c))]
}

/// What a running checklist said, as lines of the Tune view.
fn tune_note(m: &mut Model, n: super::tune::TuneNote) {
    use super::tune::TuneNote;
    use crate::tune::runner::Record;
    match n {
        TuneNote::Question(q) => {
            m.tune
                .lines
                .extend(crate::face::checklist::question_lines(&q));
            m.tune.question = Some(q);
        }
        TuneNote::Record(r) => {
            m.tune
                .lines
                .extend(crate::face::checklist::record_lines(&r));
            if let Record::Summary(s) = &r {
                if s.kept_local.is_some() || s.kept_peer.is_some() {
                    m.tune.lines.push(
                        "kept changes: `wirescope checklist run` (headless) offers to save them as a profile".into(),
                    );
                }
            }
        }
        TuneNote::Ended(r) => {
            let name = m.tune.running.take().unwrap_or_default();
            m.tune.question = None;
            let line = match r {
                Ok(()) => format!("checklist {name} finished"),
                Err(e) => format!("checklist {name} ended: {e}"),
            };
            m.message = Some(line.clone());
            m.tune.lines.push(line);
        }
    }
}

fn start_stop(m: &mut Model, a: &Action) -> Vec<Effect> {
    if matches!(a, Action::Confirm) && m.view != View::Control {
        return Vec::new();
    }
    match &m.state {
        RunState::Replay => {
            m.message = Some("replay: no live test to start".into());
            Vec::new()
        }
        RunState::Connecting => {
            m.message = Some("still connecting to the agent".into());
            Vec::new()
        }
        RunState::PeerLost(_) | RunState::Failed(_) => {
            m.message = Some("the session is gone; restart wirescope to test again".into());
            Vec::new()
        }
        RunState::Starting | RunState::Running => {
            m.state = RunState::Stopping;
            vec![Effect::Stop]
        }
        RunState::Stopping => Vec::new(),
        // Between a checklist's tests: its own tests come next.
        RunState::Idle | RunState::Stopped(_) if m.tune.running.is_some() => {
            m.message =
                Some("a checklist is running (Tune view); its tests come one after another".into());
            Vec::new()
        }
        RunState::Idle | RunState::Stopped(_) => match m.test.resolve() {
            Ok(plan) => {
                m.test_error = None;
                m.message = None;
                m.state = RunState::Starting;
                m.cursor = None;
                vec![Effect::Start(Box::new(plan))]
            }
            Err(e) => {
                m.message = Some(format!("cannot start: {}", e.0));
                m.test_error = Some(e.0);
                m.view = View::Control;
                Vec::new()
            }
        },
    }
}

fn toggle_pause(m: &mut Model) {
    if m.source != Source::Live {
        return;
    }
    m.cursor = match m.cursor {
        Some(_) => None,
        None => m.history.back().map(|i| i.seq),
    };
}

fn move_cursor(m: &mut Model, step: i64) {
    let Some(cur) = m.current().map(|i| i.seq) else {
        return;
    };
    let pos = m.history.iter().position(|i| i.seq == cur).unwrap_or(0) as i64;
    let last = m.history.len() as i64 - 1;
    let next = (pos + step).clamp(0, last.max(0));
    let seq = m.history.get(next as usize).map(|i| i.seq);
    m.cursor = if m.source == Source::Live && next == last && step > 0 {
        None
    } else {
        seq
    };
}

fn edit(m: &mut Model, step: i32) {
    if m.state.busy() {
        m.message = Some("stop the test (s) before changing it".into());
        return;
    }
    let Some(f) = FIELDS.get(m.field) else { return };
    form::step(*f, &mut m.test, step);
    m.test_error = m.test.resolve().err().map(|e| e.0);
}

fn toggle_log(m: &mut Model) -> Vec<Effect> {
    if m.source != Source::Live {
        m.message = Some("replay: the log is already recorded".into());
        return Vec::new();
    }
    if let LogState::On(_) = m.log {
        m.log = LogState::Off;
        return vec![Effect::CloseLog];
    }
    vec![Effect::OpenLog {
        path: m.log_path.clone(),
    }]
}

fn interval(
    m: &mut Model,
    local: Option<Box<Sample>>,
    peer: Option<Box<Sample>>,
    active: Vec<Finding>,
) {
    let mut local = local.map(|b| *b);
    let mut peer = peer.map(|b| *b);
    if let Some(f) = local.as_mut().and_then(|s| s.facts.take()) {
        m.facts.local = Some(*f);
    }
    if let Some(f) = peer.as_mut().and_then(|s| s.facts.take()) {
        m.facts.peer = Some(*f);
    }
    if m.state == RunState::Starting {
        m.state = RunState::Running;
    }
    let seq = m.next_seq;
    m.next_seq += 1;
    let iv = Interval {
        seq,
        point: m.point,
        local,
        peer,
        findings: active,
        thinned: false,
    };
    m.detail_rows += iv.detail_rows();
    m.history.push_back(iv);
    while m.history.len() > m.capacity {
        if let Some(old) = m.history.pop_front() {
            if !old.thinned {
                m.detail_rows -= old.detail_rows();
            }
        }
    }
    bound_detail(m);
    if let (Some(c), Some(front)) = (m.cursor, m.history.front()) {
        if c < front.seq {
            m.cursor = Some(front.seq);
        }
    }
}

/// Thin the oldest whole intervals until the history's detail fits
/// [`DETAIL_ROWS`](super::model::DETAIL_ROWS); the newest always stays whole.
fn bound_detail(m: &mut Model) {
    let newest = m.history.len().saturating_sub(1);
    for iv in m.history.iter_mut().take(newest) {
        if m.detail_rows <= super::model::DETAIL_ROWS {
            return;
        }
        if iv.thinned {
            continue;
        }
        m.detail_rows -= iv.detail_rows();
        for s in [&mut iv.local, &mut iv.peer].into_iter().flatten() {
            super::model::thin(s);
        }
        iv.thinned = true;
    }
}

fn point_done(m: &mut Model, end: EndReason, summary: Option<Box<Summary>>) {
    if let Some(s) = summary {
        m.summaries.insert(m.point, *s);
        // As many as the history can show intervals of.
        while m.summaries.len() > m.capacity {
            m.summaries.pop_first();
        }
    }
    m.state = match end {
        EndReason::PeerLost(w) => {
            m.message = Some(format!("peer lost: {w}"));
            RunState::PeerLost(w)
        }
        _ if m.state == RunState::Replay => RunState::Replay,
        end => RunState::Stopped(end),
    };
}

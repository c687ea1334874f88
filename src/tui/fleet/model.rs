//! The fleet view's whole state and the only code that changes it:
//! [`update`] applies one [`FleetAction`] (a coordinator's event or a key)
//! and returns the [`FleetEffect`]s the loop carries out. No terminal, no
//! file, no socket, no clock: a state is a pure function of the actions,
//! so tests build one from synthetic [`FleetEvent`]s.
//!
//! What it keeps is bounded by the plan: one matrix cell per direction,
//! one [`PairRecord`] per planned pair (the coordinator keeps the same),
//! one running figure per test of the current round, one fact set per host.

use crate::fleet::analyze::{Matrix, OddFact, SlowLink, SlowNode};
use crate::fleet::coordinator::{self, FleetEvent};
use crate::fleet::log::{Explained, FleetSummary, PairRecord};
use crate::probe::facts::HostFacts;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// Above this many tested links the outliers are found again at each
/// round's start rather than after each pair: [`coordinator::explain`]
/// compares every link with its hosts' others (quadratic in the links), and
/// a round of a big fleet finishes hundreds of pairs.
pub const LIVE_ANALYSIS_LINKS: usize = 4096;

/// Rows or columns the cursor moves on PgUp / PgDn.
pub const PAGE: usize = 10;

/// What the view needs to know about the run before it starts.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// Host names, in matrix order.
    pub hosts: Vec<String>,
    /// `ring`, `all-pairs`, `star`, `pairs`.
    pub pattern: String,
    /// The test of every pair, e.g. `tcp stream`.
    pub test: String,
    /// Seconds per test.
    pub time_s: f64,
    /// Both directions in one test (`--bidir`): the test ran on the pair's first host.
    pub bidir: bool,
    /// Rounds planned.
    pub rounds_planned: usize,
    /// Pairs planned (all rounds).
    pub pairs_planned: usize,
    /// Hosts left out before the run (name, why).
    pub untested: Vec<(String, String)>,
    /// `--log`, when given.
    pub log_path: Option<PathBuf>,
    /// Colours (off with `NO_COLOR`).
    pub color: bool,
}

/// Where the run is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunState {
    /// Asking every agent who it is.
    Checking,
    /// Rounds running.
    Running,
    /// Ctrl-C: the running tests stop and report, no round starts.
    Stopping,
    /// Every round ran.
    Done,
    /// Ended early (Ctrl-C); the matrix is partial.
    Interrupted,
}

/// A host as the check saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostState {
    /// Not checked yet.
    Unknown,
    /// Answered with the fleet's token.
    Up,
    /// Unreachable, refused the token, ...: why.
    Down(String),
}

/// What fills the body: one enum, not a bag of flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Screen {
    /// The heat map and the outliers.
    Matrix,
    /// One pair's test (the pair the cursor's direction belongs to), scrolled.
    Detail {
        /// The direction Enter was pressed on: sender.
        from: usize,
        /// Receiver.
        to: usize,
        /// First line shown.
        scroll: usize,
    },
}

/// One matrix cell as the view shows it.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// A host with itself.
    Diagonal,
    /// Not tested (yet).
    Untested,
    /// Its test runs: the latest interval (bits/s), None before the first.
    Running(Option<f64>),
    /// Measured (bits/s).
    Measured(f64),
    /// The test failed: why.
    Failed(String),
}

/// Everything that changes the state.
#[derive(Debug, Clone)]
pub enum FleetAction {
    /// What the coordinator did.
    Event(Box<FleetEvent>),
    /// The fleet log could not be written (it is closed).
    LogFailed(String),
    /// Cursor up (detail: scroll).
    Up,
    /// Cursor down (detail: scroll).
    Down,
    /// Cursor left.
    Left,
    /// Cursor right.
    Right,
    /// Cursor up a page.
    PageUp,
    /// Cursor down a page.
    PageDown,
    /// Cursor to the first column.
    Home,
    /// Cursor to the last column.
    End,
    /// Enter: the pair's test under the cursor.
    Open,
    /// Esc: back to the matrix.
    Back,
    /// Ctrl-C: stop the run, keep the matrix; again once stopped: leave.
    Interrupt,
    /// q, SIGTERM, SIGHUP: leave (a running fleet is stopped).
    Quit,
}

/// What the loop must do for an action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetEffect {
    /// Cancel the coordinator: running tests stop and report, no round starts.
    Cancel,
}

/// The fleet view's state.
#[derive(Debug, Clone)]
pub struct FleetModel {
    /// The run as planned.
    pub cfg: FleetConfig,
    /// Each host's check.
    pub up: Vec<HostState>,
    /// The round running (from 1; 0 before the first).
    pub round: usize,
    /// Measured directions (bits/s).
    pub matrix: Matrix,
    /// Directions that failed: why.
    pub failed: BTreeMap<(usize, usize), String>,
    /// Running tests: the latest interval (bits/s).
    pub live: BTreeMap<(usize, usize), Option<f64>>,
    /// Finished pairs, in the order they finished.
    pub pairs: Vec<PairRecord>,
    /// Direction (from, to) → its pair in [`Self::pairs`].
    pub pair_of: HashMap<(usize, usize), usize>,
    /// Each host's facts, once seen.
    pub facts: Vec<Option<Box<HostFacts>>>,
    /// The median of the measured links (bits/s): what the heat map compares with.
    pub median: Option<f64>,
    /// Slow nodes of the latest analysis.
    pub slow_nodes: Vec<Explained<SlowNode>>,
    /// Slow links of the latest analysis.
    pub slow_links: Vec<Explained<SlowLink>>,
    /// Odd settings of the latest analysis.
    pub odd: Vec<OddFact>,
    /// Pairs the latest analysis saw.
    pub analyzed_pairs: usize,
    /// The coordinator's summary, once the run is over.
    pub summary: Option<Box<FleetSummary>>,
    /// Where the run is.
    pub state: RunState,
    /// (row = sender, column = receiver).
    pub cursor: (usize, usize),
    /// What the body shows.
    pub screen: Screen,
    /// A one-line answer to the last key (Enter on an untested cell, ...).
    pub note: Option<String>,
    /// Why the log stopped being written.
    pub log_error: Option<String>,
    /// Leave the loop.
    pub quit: bool,
    index: HashMap<String, usize>,
}

impl FleetModel {
    /// Before the check.
    pub fn new(cfg: FleetConfig) -> Self {
        let n = cfg.hosts.len();
        let index = cfg
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (h.clone(), i))
            .collect();
        FleetModel {
            up: vec![HostState::Unknown; n],
            round: 0,
            matrix: Matrix::new(cfg.hosts.clone()),
            failed: BTreeMap::new(),
            live: BTreeMap::new(),
            pairs: Vec::new(),
            pair_of: HashMap::new(),
            facts: vec![None; n],
            median: None,
            slow_nodes: Vec::new(),
            slow_links: Vec::new(),
            odd: Vec::new(),
            analyzed_pairs: 0,
            summary: None,
            state: RunState::Checking,
            cursor: (0, usize::from(n > 1)),
            screen: Screen::Matrix,
            note: None,
            log_error: None,
            quit: false,
            index,
            cfg,
        }
    }

    /// Hosts in the matrix.
    pub fn n(&self) -> usize {
        self.cfg.hosts.len()
    }

    /// Is the coordinator still at work?
    pub fn running(&self) -> bool {
        matches!(self.state, RunState::Checking | RunState::Running)
    }

    /// What the cell (from, to) shows.
    pub fn cell(&self, from: usize, to: usize) -> Cell {
        if from == to {
            return Cell::Diagonal;
        }
        if let Some(l) = self.live.get(&(from, to)) {
            return Cell::Running(*l);
        }
        if let Some(v) = self
            .matrix
            .cells
            .get(from)
            .and_then(|r| r.get(to))
            .copied()
            .flatten()
        {
            return Cell::Measured(v);
        }
        match self.failed.get(&(from, to)) {
            Some(why) => Cell::Failed(why.clone()),
            None => Cell::Untested,
        }
    }

    /// The finished pair a direction belongs to.
    pub fn record(&self, from: usize, to: usize) -> Option<&PairRecord> {
        self.pair_of
            .get(&(from, to))
            .and_then(|i| self.pairs.get(*i))
    }

    /// Hosts up and down (unknown ones count in neither).
    pub fn up_down(&self) -> (usize, usize) {
        let up = self.up.iter().filter(|h| **h == HostState::Up).count();
        let down = self
            .up
            .iter()
            .filter(|h| matches!(h, HostState::Down(_)))
            .count();
        (up, down + self.cfg.untested.len())
    }

    /// Hosts not tested at all: left out before the run, or down at the check.
    pub fn untested(&self) -> Vec<(String, String)> {
        if let Some(s) = &self.summary {
            return s.untested.clone();
        }
        let mut v = self.cfg.untested.clone();
        for (h, s) in self.cfg.hosts.iter().zip(&self.up) {
            if let HostState::Down(why) = s {
                v.push((h.clone(), why.clone()));
            }
        }
        v
    }

    /// Failed directions: from, to, why.
    pub fn failures(&self) -> Vec<(String, String, String)> {
        let name = |i: usize| self.cfg.hosts.get(i).cloned().unwrap_or_default();
        self.failed
            .iter()
            .map(|((f, t), why)| (name(*f), name(*t), why.clone()))
            .collect()
    }

    fn links(&self) -> usize {
        self.matrix.links().count()
    }

    /// The median and the outliers of what ran so far.
    fn analyze(&mut self) {
        self.median = self.matrix.link_median();
        let facts: Vec<Option<&HostFacts>> = self.facts.iter().map(|f| f.as_deref()).collect();
        let (nodes, links, odd) =
            coordinator::explain(&self.matrix, &self.cfg.hosts, &facts, &self.pairs);
        self.slow_nodes = nodes;
        self.slow_links = links;
        self.odd = odd;
        self.analyzed_pairs = self.pairs.len();
    }

    /// After a pair or a host's facts: again now while the fleet is small.
    fn analyze_if_small(&mut self) {
        if self.links() <= LIVE_ANALYSIS_LINKS {
            self.analyze();
        }
    }

    fn event(&mut self, ev: FleetEvent) {
        match ev {
            FleetEvent::Checked(up) => {
                for (slot, r) in self.up.iter_mut().zip(up) {
                    *slot = match r {
                        Ok(_) => HostState::Up,
                        Err(why) => HostState::Down(why.to_string()),
                    };
                }
                if self.state == RunState::Checking {
                    self.state = RunState::Running;
                }
            }
            FleetEvent::RoundStarted { round, .. } => {
                self.round = round;
                if self.analyzed_pairs != self.pairs.len() {
                    self.analyze();
                }
            }
            FleetEvent::TestStarted { from, to } => {
                self.live.insert((from, to), None);
            }
            FleetEvent::TestInterval { from, to, bps } => {
                self.live.insert((from, to), Some(bps));
            }
            FleetEvent::Facts(i, f) => {
                if let Some(slot) = self.facts.get_mut(i) {
                    *slot = Some(f);
                    self.analyze_if_small();
                }
            }
            FleetEvent::PairDone(p) => self.pair_done(*p),
            FleetEvent::Done(s) => {
                self.live.clear();
                self.matrix = s.matrix.clone();
                self.median = self.matrix.link_median();
                self.slow_nodes = s.slow_nodes.clone();
                self.slow_links = s.slow_links.clone();
                self.odd = s.odd_facts.clone();
                self.analyzed_pairs = self.pairs.len();
                self.state = if s.interrupted {
                    RunState::Interrupted
                } else {
                    RunState::Done
                };
                self.summary = Some(s);
            }
        }
    }

    fn pair_done(&mut self, p: PairRecord) {
        let slot = self.pairs.len();
        if let (Some(a), Some(b)) = (self.index.get(&p.a).copied(), self.index.get(&p.b).copied()) {
            self.live.remove(&(a, b));
            self.live.remove(&(b, a));
        }
        for d in &p.directions {
            let (Some(f), Some(t)) = (
                self.index.get(&d.from).copied(),
                self.index.get(&d.to).copied(),
            ) else {
                continue;
            };
            self.live.remove(&(f, t));
            self.pair_of.insert((f, t), slot);
            match (d.bps, &d.error) {
                (Some(bps), None) => self.matrix.set(f, t, bps),
                (_, Some(e)) => {
                    self.failed.insert((f, t), e.clone());
                }
                (None, None) => {}
            }
        }
        self.pairs.push(p);
        self.analyze_if_small();
    }

    fn move_cursor(&mut self, rows: isize, cols: isize) {
        let last = self.n().saturating_sub(1) as isize;
        let step = |v: usize, d: isize| (v as isize + d).clamp(0, last) as usize;
        self.cursor = (step(self.cursor.0, rows), step(self.cursor.1, cols));
    }

    fn open(&mut self) {
        let (from, to) = self.cursor;
        if self.record(from, to).is_some() {
            self.screen = Screen::Detail {
                from,
                to,
                scroll: 0,
            };
            return;
        }
        let name = |i: usize| self.cfg.hosts.get(i).cloned().unwrap_or_default();
        let (a, b) = (name(from), name(to));
        self.note = Some(match self.cell(from, to) {
            Cell::Diagonal => format!("{a}: a host is not tested against itself"),
            Cell::Running(_) => format!("{a} → {b}: running; Enter once its pair is done"),
            _ => format!("{a} → {b}: not tested"),
        });
    }
}

/// Apply one action; the effects are for the loop.
pub fn update(m: &mut FleetModel, a: FleetAction) -> Vec<FleetEffect> {
    let detail = matches!(m.screen, Screen::Detail { .. });
    if !matches!(a, FleetAction::Event(_) | FleetAction::LogFailed(_)) {
        m.note = None;
    }
    match a {
        FleetAction::Event(e) => m.event(*e),
        FleetAction::LogFailed(e) => m.log_error = Some(e),
        // Up and down scroll the detail, or move the cursor over the matrix.
        FleetAction::Up | FleetAction::Down | FleetAction::PageUp | FleetAction::PageDown => {
            let rows = match a {
                FleetAction::Up => -1,
                FleetAction::Down => 1,
                FleetAction::PageUp => -(PAGE as isize),
                _ => PAGE as isize,
            };
            match &mut m.screen {
                Screen::Detail { scroll, .. } => *scroll = scroll.saturating_add_signed(rows),
                Screen::Matrix => m.move_cursor(rows, 0),
            }
        }
        _ if detail
            && !matches!(
                a,
                FleetAction::Back | FleetAction::Interrupt | FleetAction::Quit
            ) => {}
        FleetAction::Left => m.move_cursor(0, -1),
        FleetAction::Right => m.move_cursor(0, 1),
        FleetAction::Home => m.cursor.1 = 0,
        FleetAction::End => m.cursor.1 = m.n().saturating_sub(1),
        FleetAction::Open => m.open(),
        FleetAction::Back => m.screen = Screen::Matrix,
        FleetAction::Interrupt => {
            if m.running() {
                m.state = RunState::Stopping;
                m.note = Some("stopping: the running tests end and report; q leaves".into());
                return vec![FleetEffect::Cancel];
            }
            if m.state != RunState::Stopping {
                m.quit = true;
            }
        }
        FleetAction::Quit => {
            m.quit = true;
            if m.running() {
                m.state = RunState::Stopping;
                return vec![FleetEffect::Cancel];
            }
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::log::DirectionResult;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn cfg(n: usize) -> FleetConfig {
        FleetConfig {
            hosts: (0..n).map(|i| format!("n{i}")).collect(),
            pattern: "all-pairs".into(),
            test: "tcp stream".into(),
            time_s: 2.0,
            bidir: false,
            rounds_planned: n - 1,
            pairs_planned: n * (n - 1) / 2,
            untested: Vec::new(),
            log_path: None,
            color: false,
        }
    }

    fn dir(from: &str, to: &str, gbps: f64) -> DirectionResult {
        DirectionResult {
            from: from.into(),
            to: to.into(),
            bps: Some(gbps * 1e9),
            retransmits: 3,
            busiest_from: Some((1, 50.0)),
            busiest_to: Some((0, 40.0)),
            findings: Vec::new(),
            limited_by: None,
            error: None,
        }
    }

    fn key(code: KeyCode, mods: KeyModifiers) -> FleetAction {
        crate::tui::keys::action_in(super::super::keys::FLEET_KEYS, &KeyEvent::new(code, mods))
            .expect("a bound key")
    }

    fn press(m: &mut FleetModel, code: KeyCode) -> Vec<FleetEffect> {
        update(m, key(code, KeyModifiers::NONE))
    }

    #[test]
    fn arrows_move_the_cursor_within_the_matrix() {
        let mut m = FleetModel::new(cfg(4));
        assert_eq!(m.cursor, (0, 1));
        press(&mut m, KeyCode::Left);
        press(&mut m, KeyCode::Left);
        assert_eq!(m.cursor, (0, 0), "stops at the first column");
        press(&mut m, KeyCode::Up);
        assert_eq!(m.cursor, (0, 0), "stops at the first row");
        for _ in 0..6 {
            press(&mut m, KeyCode::Down);
            press(&mut m, KeyCode::Right);
        }
        assert_eq!(m.cursor, (3, 3), "stops at the last row and column");
        press(&mut m, KeyCode::Home);
        assert_eq!(m.cursor, (3, 0));
        press(&mut m, KeyCode::PageUp);
        assert_eq!(m.cursor, (0, 0));
        press(&mut m, KeyCode::End);
        assert_eq!(m.cursor, (0, 3));
    }

    #[test]
    fn enter_opens_a_tested_pair_and_esc_goes_back() {
        let mut m = FleetModel::new(cfg(4));
        update(
            &mut m,
            FleetAction::Event(Box::new(FleetEvent::Checked(vec![
                Ok(Default::default());
                4
            ]))),
        );
        update(
            &mut m,
            FleetAction::Event(Box::new(FleetEvent::TestStarted { from: 0, to: 1 })),
        );
        // Running: Enter only says so.
        press(&mut m, KeyCode::Enter);
        assert_eq!(m.screen, Screen::Matrix);
        assert!(
            m.note.as_deref().is_some_and(|n| n.contains("running")),
            "{:?}",
            m.note
        );
        let rec = PairRecord {
            round: 1,
            a: "n0".into(),
            b: "n1".into(),
            directions: vec![dir("n0", "n1", 9.0), dir("n1", "n0", 8.0)],
        };
        update(
            &mut m,
            FleetAction::Event(Box::new(FleetEvent::PairDone(Box::new(rec)))),
        );
        assert_eq!(m.cell(0, 1), Cell::Measured(9e9));
        // The reverse direction opens the same pair.
        press(&mut m, KeyCode::Down);
        press(&mut m, KeyCode::Left);
        assert_eq!(m.cursor, (1, 0));
        press(&mut m, KeyCode::Enter);
        assert_eq!(
            m.screen,
            Screen::Detail {
                from: 1,
                to: 0,
                scroll: 0
            }
        );
        // In the detail, arrows scroll and do not move the cursor.
        press(&mut m, KeyCode::Down);
        press(&mut m, KeyCode::Right);
        assert_eq!(
            m.screen,
            Screen::Detail {
                from: 1,
                to: 0,
                scroll: 1
            }
        );
        assert_eq!(m.cursor, (1, 0));
        press(&mut m, KeyCode::Esc);
        assert_eq!(m.screen, Screen::Matrix);
        // An untested cell does not open.
        press(&mut m, KeyCode::Right);
        press(&mut m, KeyCode::Right);
        press(&mut m, KeyCode::Enter);
        assert_eq!(m.screen, Screen::Matrix);
        assert!(
            m.note
                .as_deref()
                .is_some_and(|n| n.contains("n1 → n2: not tested")),
            "{:?}",
            m.note
        );
    }

    #[test]
    fn ctrl_c_stops_the_run_and_keeps_the_matrix_q_leaves() {
        let mut m = FleetModel::new(cfg(4));
        update(
            &mut m,
            FleetAction::Event(Box::new(FleetEvent::Checked(vec![
                Ok(Default::default());
                4
            ]))),
        );
        let eff = update(&mut m, key(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert_eq!(eff, vec![FleetEffect::Cancel]);
        assert_eq!(m.state, RunState::Stopping);
        assert!(!m.quit, "the partial matrix stays on screen");
        // A second Ctrl-C while the tests stop does not leave either.
        assert!(update(&mut m, key(KeyCode::Char('c'), KeyModifiers::CONTROL)).is_empty());
        assert!(!m.quit);
        assert!(
            press(&mut m, KeyCode::Char('q')).is_empty(),
            "already cancelled"
        );
        assert!(m.quit);
        // q while running cancels and leaves.
        let mut m = FleetModel::new(cfg(4));
        assert_eq!(press(&mut m, KeyCode::Char('q')), vec![FleetEffect::Cancel]);
        assert!(m.quit);
    }
}

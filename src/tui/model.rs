//! The TUI's whole state: what the renderers read and [`super::action::update`] changes.
//!
//! The model owns a bounded history of intervals (both hosts' Samples, the
//! findings active after each), the latest host facts, the live diagnosis,
//! the control choices (a [`TestArgs`], validated by the same
//! [`TestArgs::resolve`] as `wirescope run`) and the UI state (view, modal,
//! time cursor, scroll). It never touches the terminal, a file or a socket:
//! whatever needs I/O leaves `update` as an [`super::action::Effect`].

use crate::cli::TestArgs;
use crate::diagnose::Finding;
use crate::probe::facts::HostFacts;
use crate::probe::sample::Sample;
use crate::probe::system::HostInfo;
use crate::record::schema::{EbpfHosts, Summary};
use crate::session::outcome::EndReason;
use crate::traffic::EngineSpec;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

/// Most intervals the history keeps whatever `--history` and `--interval`
/// say (a day at 1 s): both hosts' Samples of each are kept in memory.
pub const MAX_HISTORY: usize = 86_400;

/// Per-row detail (CPUs, queues, NIC counters, softirqs, softnet, eBPF
/// matrices) the history keeps in all: the newest intervals keep theirs,
/// older ones their engine figures (the throughput chart) and findings only.
/// A small host's 600 intervals stay whole (~100 rows each); a 256-core host
/// with 8 NICs of 64 queues (~3,800 rows per interval for both hosts, ~0.7 MB
/// per host) keeps the newest ~26 whole instead of holding ~1 GB over 600
/// intervals, and a day's replay of it stays bounded too.
pub const DETAIL_ROWS: usize = 100_000;

/// The per-row detail of a Sample (what [`thin`] drops).
pub fn detail_rows(s: &Sample) -> usize {
    s.cpus.len()
        + s.queues.len()
        + s.nic_counters.len()
        + s.softirqs.len()
        + s.softnet.len()
        + s.softirq_time.len()
        + s.queue_cpus.len()
        + s.napi.len()
        + s.nstat.len()
}

/// Drop a Sample's per-row detail, keeping what the throughput chart reads
/// (engine figures, interfaces, connections).
pub fn thin(s: &mut Sample) {
    s.cpus = Vec::new();
    s.queues = Vec::new();
    s.nic_counters = Vec::new();
    s.softirqs = Vec::new();
    s.softnet = Vec::new();
    s.softirq_time = Vec::new();
    s.queue_cpus = Vec::new();
    s.napi = Vec::new();
    s.nstat = Default::default();
}

/// The views, in tab order; number keys select them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Throughput chart and both hosts' CPU.
    Dashboard,
    /// Per-core CPU of both hosts, full height.
    Cpu,
    /// Per-queue NIC counters.
    Queues,
    /// Host facts side by side.
    Facts,
    /// Active findings with evidence and fix.
    Findings,
    /// Test options; start and stop.
    Control,
    /// Guided checklists: choose one, answer its questions, see each step.
    Tune,
}

impl View {
    /// Every view in tab order.
    pub const ALL: [View; 7] = [
        View::Dashboard,
        View::Cpu,
        View::Queues,
        View::Facts,
        View::Findings,
        View::Control,
        View::Tune,
    ];

    /// Tab title.
    pub fn title(self) -> &'static str {
        match self {
            View::Dashboard => "Dashboard",
            View::Cpu => "CPU",
            View::Queues => "Queues",
            View::Facts => "Facts",
            View::Findings => "Findings",
            View::Control => "Control",
            View::Tune => "Tune",
        }
    }

    /// Position in [`View::ALL`].
    pub fn index(self) -> usize {
        View::ALL.iter().position(|v| *v == self).unwrap_or(0)
    }

    /// The view `step` tabs away (wrapping).
    pub fn step(self, step: isize) -> View {
        let n = View::ALL.len() as isize;
        let i = (self.index() as isize + step).rem_euclid(n);
        View::ALL[i as usize]
    }
}

/// A window over the views; one at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Modal {
    /// Nothing on top.
    None,
    /// The key list.
    Help,
}

/// Where the session is.
#[derive(Debug, Clone, PartialEq)]
pub enum RunState {
    /// Connecting to the agent.
    Connecting,
    /// Connected, no test running.
    Idle,
    /// Start requested, waiting for the first interval.
    Starting,
    /// A test is running.
    Running,
    /// Stop requested.
    Stopping,
    /// The last test ended (completed, interrupted or failed).
    Stopped(EndReason),
    /// The agent vanished; no more tests on this session.
    PeerLost(String),
    /// The session could not be set up or broke.
    Failed(String),
    /// Showing a recorded log.
    Replay,
}

impl RunState {
    /// One or two words for the header.
    pub fn label(&self) -> &'static str {
        match self {
            RunState::Connecting => "connecting",
            RunState::Idle => "idle",
            RunState::Starting => "starting",
            RunState::Running => "running",
            RunState::Stopping => "stopping",
            RunState::Stopped(EndReason::Completed) => "stopped (done)",
            RunState::Stopped(EndReason::Interrupted) => "stopped (by you)",
            RunState::Stopped(EndReason::PeerLost(_)) | RunState::PeerLost(_) => "peer lost",
            RunState::Stopped(EndReason::Failed(_)) | RunState::Failed(_) => "failed",
            RunState::Replay => "replay",
        }
    }

    /// A test is in flight (start requested, running or stopping).
    pub fn busy(&self) -> bool {
        matches!(
            self,
            RunState::Starting | RunState::Running | RunState::Stopping
        )
    }
}

/// Live session or a recorded log.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// Live data from a controller.
    Live,
    /// A `run --log` file.
    Replay(PathBuf),
}

/// Log recording (`l`).
#[derive(Debug, Clone, PartialEq)]
pub enum LogState {
    /// Not recording.
    Off,
    /// Recording to this file.
    On(PathBuf),
    /// The last attempt failed.
    Failed(String),
}

/// One interval of both hosts as the views show it.
#[derive(Debug, Clone)]
pub struct Interval {
    /// Position in the session (monotonic across points; the time cursor's unit).
    pub seq: u64,
    /// Test point number within the session (from 1).
    pub point: u32,
    /// This host (facts moved out to [`Model::facts`]).
    pub local: Option<Sample>,
    /// The agent's host (facts moved out).
    pub peer: Option<Sample>,
    /// Findings active after this interval, most important first.
    pub findings: Vec<Finding>,
    /// Its per-row detail was dropped to bound the history ([`DETAIL_ROWS`]).
    pub thinned: bool,
}

impl Interval {
    /// Per-row detail both Samples hold.
    pub fn detail_rows(&self) -> usize {
        [&self.local, &self.peer]
            .into_iter()
            .flatten()
            .map(detail_rows)
            .sum()
    }
}

/// Latest host facts of both hosts.
#[derive(Debug, Clone, Default)]
pub struct FactsPair {
    /// This host.
    pub local: Option<HostFacts>,
    /// The agent's host.
    pub peer: Option<HostFacts>,
}

/// Everything the renderers read.
#[derive(Debug)]
pub struct Model {
    /// Live or replay.
    pub source: Source,
    /// Session state.
    pub state: RunState,
    /// This host's identity.
    pub local_host: HostInfo,
    /// The agent's identity, once connected.
    pub peer_host: Option<HostInfo>,
    /// What the eBPF probes of each host do, once connected.
    pub ebpf: Option<EbpfHosts>,
    /// How the pair is built (or which agent).
    pub pair: String,
    /// Control choices: the same options as `wirescope run`.
    pub test: TestArgs,
    /// Why [`Model::test`] does not resolve, if it does not.
    pub test_error: Option<String>,
    /// Spec of the running (or last) point.
    pub spec: Option<EngineSpec>,
    /// Time limit of the running (or last) point.
    pub time: Option<Duration>,
    /// Intervals kept, oldest first (at most [`Model::capacity`]).
    pub history: VecDeque<Interval>,
    /// Per-row detail the unthinned intervals of the history hold.
    pub detail_rows: usize,
    /// Most intervals kept.
    pub capacity: usize,
    /// Latest facts of both hosts.
    pub facts: FactsPair,
    /// Visible view.
    pub view: View,
    /// Modal on top.
    pub modal: Modal,
    /// Pinned interval (`seq`); None follows the newest (live).
    pub cursor: Option<u64>,
    /// Scroll offset of the visible view (rows).
    pub scroll: u16,
    /// Selected field of the control view.
    pub field: usize,
    /// Log recording.
    pub log: LogState,
    /// Where `l` records (None: a timestamped name in the current directory).
    pub log_path: Option<PathBuf>,
    /// Draw with colours (false with NO_COLOR).
    pub color: bool,
    /// One line of news for the footer (last error, hints).
    pub message: Option<String>,
    /// The loop should end.
    pub quit: bool,
    /// Summaries of the points that ended, by point number (bounded like the history).
    pub summaries: std::collections::BTreeMap<u32, Summary>,
    /// The Tune view: the chosen checklist, the one running, its question and what it said.
    pub tune: TuneModel,
    pub(super) next_seq: u64,
    pub(super) point: u32,
}

/// The Tune view's state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TuneModel {
    /// Selected shipped checklist (index into `tune::checklist::SHIPPED`).
    pub selected: usize,
    /// The checklist running, if one is.
    pub running: Option<String>,
    /// The question waiting for `y`/`n`.
    pub question: Option<crate::tune::runner::Question>,
    /// What the checklist reported, oldest first (baseline, steps, summary table).
    pub lines: Vec<String>,
}

/// What [`Model::new`] needs.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// Live or replay.
    pub source: Source,
    /// This host.
    pub local_host: HostInfo,
    /// Pair description.
    pub pair: String,
    /// Initial test options.
    pub test: TestArgs,
    /// History to keep.
    pub history: Duration,
    /// Colours on.
    pub color: bool,
    /// `--log`.
    pub log_path: Option<PathBuf>,
}

impl Model {
    /// A model with no data yet.
    pub fn new(cfg: ModelConfig) -> Self {
        let interval = cfg.test.interval.max(Duration::from_millis(10));
        let capacity =
            ((cfg.history.as_secs_f64() / interval.as_secs_f64()).ceil() as usize).min(MAX_HISTORY);
        let test_error = cfg.test.resolve().err().map(|e| e.0);
        let state = match cfg.source {
            Source::Live => RunState::Connecting,
            Source::Replay(_) => RunState::Replay,
        };
        Model {
            source: cfg.source,
            state,
            local_host: cfg.local_host,
            peer_host: None,
            ebpf: None,
            pair: cfg.pair,
            test: cfg.test,
            test_error,
            spec: None,
            time: None,
            history: VecDeque::new(),
            detail_rows: 0,
            capacity: capacity.max(2),
            facts: FactsPair::default(),
            view: View::Dashboard,
            modal: Modal::None,
            cursor: None,
            scroll: 0,
            field: 0,
            log: LogState::Off,
            log_path: cfg.log_path,
            color: cfg.color,
            message: None,
            quit: false,
            summaries: std::collections::BTreeMap::new(),
            tune: TuneModel::default(),
            next_seq: 0,
            point: 0,
        }
    }

    /// The interval under the cursor (the newest when following live).
    pub fn current(&self) -> Option<&Interval> {
        match self.cursor {
            None => self.history.back(),
            Some(seq) => self
                .history
                .iter()
                .rev()
                .find(|i| i.seq <= seq)
                .or(self.history.front()),
        }
    }

    /// The interval whose per-interval figures (CPU, queues) the views
    /// show: the one under the cursor, or, when that is the short tail that
    /// ends a point (a few ms of /proc/stat ticks read as 0 % or 100 %), the
    /// interval before it in the same point.
    pub fn measured(&self) -> Option<&Interval> {
        let cur = self.current()?;
        if !self.is_tail(cur) {
            return Some(cur);
        }
        self.history
            .iter()
            .rev()
            .find(|i| i.seq < cur.seq && i.point == cur.point)
            .or(Some(cur))
    }

    /// Up to `n` intervals ending at the cursor, oldest first.
    pub fn window(&self, n: usize) -> Vec<&Interval> {
        let end = self.current().map(|c| c.seq).unwrap_or(0);
        let mut v: Vec<&Interval> = self
            .history
            .iter()
            .rev()
            .filter(|i| i.seq <= end)
            .take(n)
            .collect();
        v.reverse();
        v
    }

    /// True when the display is pinned (paused, or moved back in time).
    pub fn paused(&self) -> bool {
        self.cursor.is_some() && self.source == Source::Live
    }

    /// Intervals newer than the cursor (arrived while paused).
    pub fn newer_than_cursor(&self) -> usize {
        match (self.cursor, self.history.back()) {
            (Some(c), Some(last)) => usize::try_from(last.seq.saturating_sub(c)).unwrap_or(0),
            _ => 0,
        }
    }

    /// The result of the point under the cursor, once that point has ended
    /// and the cursor is on its last interval: what the header, the chart's
    /// legend and the dashboard show instead of that (often short) interval.
    pub fn result(&self) -> Option<&Summary> {
        let cur = self.current()?;
        if self.last_of_point(cur) {
            self.summaries.get(&cur.point)
        } else {
            None
        }
    }

    /// True when no later interval of `i`'s point is kept (the history is
    /// ordered by `seq`, and points follow each other: a lookup, not a scan).
    fn last_of_point(&self, i: &Interval) -> bool {
        match self.history.binary_search_by_key(&i.seq, |x| x.seq) {
            Ok(at) => self.history.get(at + 1).is_none_or(|n| n.point != i.point),
            Err(_) => false,
        }
    }

    /// True for the short interval that ends a point (the test stopped a few
    /// milliseconds into it): its rate is noise, so the chart leaves it out.
    pub fn is_tail(&self, i: &Interval) -> bool {
        let span = i
            .local
            .as_ref()
            .or(i.peer.as_ref())
            .map(|s| s.end_s - s.start_s)
            .unwrap_or(0.0);
        span < self.test.interval.as_secs_f64() / 2.0
            && self.summaries.contains_key(&i.point)
            && self.last_of_point(i)
    }

    /// Time limit of the running point as shown (None: byte budget or unknown).
    pub fn total(&self) -> Option<Duration> {
        self.time
    }
}

#[cfg(test)]
mod detail_tests {
    use super::*;
    use crate::probe::ebpf::EbpfUnavailable;
    use crate::probe::sampler::{EbpfLoader, Sampler};
    use crate::probe::synthetic::{Layout, SyntheticHost};
    use crate::tui::action::{update, Action};

    /// One Sample of the synthetic big host (256 CPUs, 8 NICs x 64 queues).
    fn big_sample() -> Sample {
        let mut h = SyntheticHost::in_temp(Layout::default()).unwrap();
        let loader: EbpfLoader =
            Box::new(|_, _| Err(EbpfUnavailable::Disabled("synthetic".into())));
        let mut s = Sampler::with(Box::new(h.source()), None, loader);
        s.set_ifaces(&h.nic_names());
        s.begin(None, Duration::ZERO, Duration::from_secs(1));
        h.advance(1).unwrap();
        s.sample()
    }

    /// A big host's history keeps its newest intervals whole and drops the
    /// per-row detail of the older ones, so it stays bounded in bytes, not
    /// only in intervals; the throughput chart's figures stay.
    #[test]
    fn the_history_of_a_big_host_is_bounded_in_detail() {
        let big = big_sample();
        let per = detail_rows(&big) * 2;
        assert!(per > 3_000, "the synthetic host has big Samples: {per}");
        let mut m = Model::new(ModelConfig {
            source: Source::Live,
            local_host: Default::default(),
            pair: String::new(),
            test: crate::cli::TuiArgs::defaults().test,
            history: Duration::from_secs(600),
            color: false,
            log_path: None,
        });
        let n = (3 * DETAIL_ROWS / per).min(m.capacity);
        for _ in 0..n {
            update(
                &mut m,
                Action::Interval {
                    local: Some(Box::new(big.clone())),
                    peer: Some(Box::new(big.clone())),
                    changes: Vec::new(),
                    active: Vec::new(),
                },
            );
        }
        assert_eq!(m.history.len(), n);
        assert!(m.detail_rows <= DETAIL_ROWS, "{}", m.detail_rows);
        let whole: usize = m
            .history
            .iter()
            .filter(|i| !i.thinned)
            .map(Interval::detail_rows)
            .sum();
        assert_eq!(whole, m.detail_rows, "the running count is the history's");
        assert!(m.history.iter().filter(|i| !i.thinned).count() >= DETAIL_ROWS / per);
        let newest = m.history.back().unwrap();
        assert!(!newest.thinned && newest.detail_rows() == per);
        let oldest = m.history.front().unwrap();
        assert!(oldest.thinned && oldest.detail_rows() == 0);
        let o = oldest.local.as_ref().unwrap();
        assert!(o.cpus.is_empty() && o.queues.is_empty());
        assert_eq!(o.engine, big.engine, "the chart's figures stay");
    }
}

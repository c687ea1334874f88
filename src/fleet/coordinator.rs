//! The coordinator: checks every agent, then runs the rounds. For each pair
//! it connects to the first agent (X) and asks it to test against the
//! second (Y); the data flows X↔Y. What X publishes comes back as the
//! driver's events and goes through one [`Pipeline`] per test, the same
//! pipeline and rules as `wirescope run`, so a fleet's pair says what a
//! `run` between the two would.
//!
//! Failures stay local: an agent that cannot be reached or refuses the
//! token is left out (the summary says why), a test that fails loses that
//! pair's direction, an agent that dies mid-round loses its pair. `cancel`
//! (Ctrl-C) stops the running tests, which still report what they measured,
//! and no further round starts.

use super::analyze::{self, Matrix, OddFact, SlowLink, SlowNode};
use super::hosts::FleetHost;
use super::log::{DirectionResult, Explained, FleetSummary, PairRecord};
use super::rounds::Rounds;
use crate::probe::facts::HostFacts;
use crate::probe::system::HostInfo;
use crate::record::pipeline::{Origin, Output, Pipeline};
use crate::session::auth::Token;
use crate::session::controller::SessionError;
use crate::session::pair::{connect_patiently, PairSpec};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Which directions a pair tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directions {
    /// X→Y, then Y→X (each host runs one test).
    Both,
    /// Both at once (`--bidir`, TCP stream): one test.
    Bidir,
    /// X→Y only.
    One,
}

impl Directions {
    /// As the log says it.
    pub fn name(self) -> &'static str {
        match self {
            Directions::Both => "both",
            Directions::Bidir => "bidir",
            Directions::One => "one",
        }
    }
}

/// What a fleet runs.
#[derive(Debug, Clone)]
pub struct FleetPlan {
    /// The agents, in matrix order.
    pub hosts: Vec<FleetHost>,
    /// Pairs per round.
    pub rounds: Rounds,
    /// The test of every pair.
    pub spec: PairSpec,
    /// Which directions.
    pub directions: Directions,
    /// Tests of a round running at once.
    pub concurrency: usize,
}

/// Why an agent of the fleet is not tested.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CheckError {
    /// Its check did not finish (the task ended early).
    #[error("not checked")]
    NotChecked,
    /// It could not be reached, or refused the fleet's token.
    #[error(transparent)]
    Agent(Arc<SessionError>),
}

/// What happens, in order, for a face.
#[derive(Debug, Clone)]
pub enum FleetEvent {
    /// Every agent was asked who it is: `up[i]` its identity, or why not.
    Checked(Vec<Result<HostInfo, CheckError>>),
    /// A round starts.
    RoundStarted {
        /// From 1.
        round: usize,
        /// Its pairs.
        pairs: Vec<(usize, usize)>,
    },
    /// One direction's test started (from, to: host indices).
    TestStarted {
        /// Sender.
        from: usize,
        /// Receiver.
        to: usize,
    },
    /// One interval of a running test: the receiver's throughput so far.
    TestInterval {
        /// Sender.
        from: usize,
        /// Receiver.
        to: usize,
        /// That interval's throughput (bits/s).
        bps: f64,
    },
    /// A host's facts, first seen.
    Facts(usize, Box<HostFacts>),
    /// A pair is done (both directions).
    PairDone(Box<PairRecord>),
    /// The run is over.
    Done(Box<FleetSummary>),
}

/// Run the fleet; every step goes to `events`. Returns the summary (also
/// sent as [`FleetEvent::Done`]).
pub async fn run(
    plan: FleetPlan,
    token: Token,
    mut untested: Vec<(String, String)>,
    events: mpsc::Sender<FleetEvent>,
    cancel: CancellationToken,
) -> FleetSummary {
    let started = Instant::now();
    // Shared by every pair's task: a plan holds every host and round.
    let plan = Arc::new(plan);
    let n = plan.hosts.len();
    let names: Vec<String> = plan.hosts.iter().map(|h| h.name.clone()).collect();
    let token = Arc::new(token);
    let up = check_all(&plan.hosts, &token).await;
    for (h, r) in plan.hosts.iter().zip(&up) {
        if let Err(why) = r {
            untested.push((h.name.clone(), why.to_string()));
        }
    }
    let _ = events.send(FleetEvent::Checked(up.clone())).await;
    let state = Arc::new(std::sync::Mutex::new(Collected {
        matrix: Matrix::new(names.clone()),
        facts: vec![None; n],
        pairs: Vec::new(),
        failed: Vec::new(),
    }));
    let base = PairCtx {
        plan: Arc::clone(&plan),
        token: Arc::clone(&token),
        events: events.clone(),
        cancel: cancel.clone(),
        state: Arc::clone(&state),
        round: 0,
    };
    let mut rounds_run = 0;
    let mut test_s = 0.0;
    let per_test = plan.spec.time_ms as f64 / 1000.0;
    let tests_per_pair = if plan.directions == Directions::Both {
        2.0
    } else {
        1.0
    };
    for (r, pairs) in plan.rounds.iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        let runnable: Vec<(usize, usize)> = pairs
            .iter()
            .copied()
            .filter(|(a, b)| up[*a].is_ok() && up[*b].is_ok())
            .collect();
        let _ = events
            .send(FleetEvent::RoundStarted {
                round: r + 1,
                pairs: runnable.clone(),
            })
            .await;
        PairCtx {
            round: r + 1,
            ..base.clone()
        }
        .run_round(&runnable)
        .await;
        rounds_run += 1;
        let waves = runnable.len().div_ceil(plan.concurrency.max(1)) as f64;
        test_s += waves * per_test * tests_per_pair;
    }
    let summary = {
        let st = state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let facts: Vec<Option<&HostFacts>> = st.facts.iter().map(|f| f.as_deref()).collect();
        let (slow_nodes, slow_links, odd) = explain(&st.matrix, &names, &facts, &st.pairs);
        FleetSummary {
            matrix: st.matrix.clone(),
            slow_nodes,
            slow_links,
            odd_facts: odd,
            untested,
            failed: st.failed.clone(),
            rounds_run,
            rounds_planned: plan.rounds.len(),
            pairs_run: st.pairs.len(),
            interrupted: cancel.is_cancelled(),
            wall_s: started.elapsed().as_secs_f64(),
            test_s,
        }
    };
    let _ = events
        .send(FleetEvent::Done(Box::new(summary.clone())))
        .await;
    summary
}

/// What the tests gathered.
struct Collected {
    matrix: Matrix,
    facts: Vec<Option<Box<HostFacts>>>,
    pairs: Vec<PairRecord>,
    failed: Vec<(String, String, String)>,
}

/// Agents asked who they are at the same time (a 1,000-node fleet must not
/// open 1,000 connections at once).
const CHECKS_AT_ONCE: usize = 64;

/// Ask every agent who it is ([`CHECKS_AT_ONCE`] at a time); a wrong token or an agent that
/// cannot be reached is reported for that host only.
async fn check_all(hosts: &[FleetHost], token: &Arc<Token>) -> Vec<Result<HostInfo, CheckError>> {
    let mut set = tokio::task::JoinSet::new();
    let sem = Arc::new(tokio::sync::Semaphore::new(CHECKS_AT_ONCE));
    for (i, h) in hosts.iter().enumerate() {
        let (addr, token, sem) = (h.addr, Arc::clone(token), Arc::clone(&sem));
        set.spawn(async move {
            let _permit = sem.acquire_owned().await;
            let r = match connect_patiently(addr, &token).await {
                Ok(ctl) => {
                    let info = ctl.peer.clone();
                    ctl.close().await;
                    Ok(info)
                }
                Err(e) => Err(CheckError::Agent(Arc::new(e))),
            };
            (i, r)
        });
    }
    let mut out = vec![Err(CheckError::NotChecked); hosts.len()];
    while let Some(j) = set.join_next().await {
        if let Ok((i, r)) = j {
            out[i] = r;
        }
    }
    out
}

#[derive(Clone)]
struct PairCtx {
    plan: Arc<FleetPlan>,
    token: Arc<Token>,
    events: mpsc::Sender<FleetEvent>,
    cancel: CancellationToken,
    state: Arc<std::sync::Mutex<Collected>>,
    round: usize,
}

impl PairCtx {
    /// Test `runnable`, the pairs of round [`PairCtx::round`],
    /// [`FleetPlan::concurrency`] at a time; returns when all are done.
    async fn run_round(self, runnable: &[(usize, usize)]) {
        let sem = Arc::new(tokio::sync::Semaphore::new(
            self.plan.concurrency.clamp(1, 1 << 20),
        ));
        let mut set = tokio::task::JoinSet::new();
        for (a, b) in runnable.iter().copied() {
            let (ctx, sem) = (self.clone(), Arc::clone(&sem));
            set.spawn(async move {
                let Ok(_permit) = sem.acquire_owned().await else {
                    return;
                };
                if ctx.cancel.is_cancelled() {
                    return;
                }
                ctx.pair(a, b).await;
            });
        }
        while set.join_next().await.is_some() {}
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Collected> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Test one pair in the directions asked, record it.
    async fn pair(&self, a: usize, b: usize) {
        let tests: Vec<(usize, usize)> = match self.plan.directions {
            Directions::Both => vec![(a, b), (b, a)],
            Directions::Bidir | Directions::One => vec![(a, b)],
        };
        let mut dirs = Vec::new();
        for (x, y) in tests {
            if self.cancel.is_cancelled() && !dirs.is_empty() {
                break;
            }
            dirs.extend(self.direction(x, y).await);
        }
        let record = PairRecord {
            round: self.round,
            a: self.plan.hosts[a].name.clone(),
            b: self.plan.hosts[b].name.clone(),
            directions: dirs,
        };
        {
            let mut st = self.lock();
            for d in &record.directions {
                let (Some(f), Some(t)) = (self.index(&d.from), self.index(&d.to)) else {
                    continue;
                };
                match (d.bps, &d.error) {
                    (Some(bps), None) => st.matrix.set(f, t, bps),
                    (_, Some(e)) => st.failed.push((d.from.clone(), d.to.clone(), e.clone())),
                    (None, None) => {}
                }
            }
            st.pairs.push(record.clone());
        }
        let _ = self
            .events
            .send(FleetEvent::PairDone(Box::new(record)))
            .await;
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.plan.hosts.iter().position(|h| h.name == name)
    }

    /// One test, x running it against y. Returns its direction(s): two for
    /// a bidirectional test.
    async fn direction(&self, x: usize, y: usize) -> Vec<DirectionResult> {
        let (hx, hy) = (&self.plan.hosts[x], &self.plan.hosts[y]);
        let _ = self
            .events
            .send(FleetEvent::TestStarted { from: x, to: y })
            .await;
        let failed = |error: String| DirectionResult {
            from: hx.name.clone(),
            to: hy.name.clone(),
            error: Some(error),
            ..DirectionResult::default()
        };
        let mut ctl = match connect_patiently(hx.addr, &self.token).await {
            Ok(c) => c,
            Err(e) => return vec![failed(e.to_string())],
        };
        let mut pipeline = Pipeline::new(Origin {
            command_line: Vec::new(),
            local: ctl.peer.clone(),
            pair: format!("fleet: {} → {}", hx.name, hy.name),
            netns: None,
        });
        let (tx, mut rx) = mpsc::channel(64);
        let spec = self.plan.spec.clone();
        let cancel = self.cancel.clone();
        let peer_addr = hy.addr;
        let job = tokio::spawn(async move {
            let r = ctl.pair_test(peer_addr, &spec, &tx, &cancel).await;
            ctl.close().await;
            r
        });
        let mut summary = None;
        let mut error = None;
        while let Some(ev) = rx.recv().await {
            let out = match pipeline.handle(ev) {
                Ok(o) => o,
                Err(e) => {
                    error = Some(e.to_string());
                    continue;
                }
            };
            match out {
                Output::Interval { local, peer, .. } => {
                    self.note_facts(x, local.as_deref()).await;
                    self.note_facts(y, peer.as_deref()).await;
                    let bps = [local.as_deref(), peer.as_deref()]
                        .into_iter()
                        .flatten()
                        .map(|s| s.engine.rx_bps.0)
                        .fold(0.0, f64::max);
                    let _ = self
                        .events
                        .send(FleetEvent::TestInterval {
                            from: x,
                            to: y,
                            bps,
                        })
                        .await;
                }
                Output::PointDone { summary: s, .. } => summary = s,
                Output::Failed(e) | Output::Refused(e) => error = Some(e),
                _ => {}
            }
        }
        match job.await {
            Ok(Err(e)) if error.is_none() => error = Some(e.to_string()),
            Err(e) if error.is_none() => error = Some(format!("the pair test's task failed: {e}")),
            _ => {}
        }
        let Some(s) = summary else {
            return vec![failed(
                error.unwrap_or_else(|| "the test ended without a result".into()),
            )];
        };
        directions_of(&s, &hx.name, &hy.name, self.plan.directions, error)
    }

    async fn note_facts(&self, host: usize, s: Option<&crate::probe::sample::Sample>) {
        let Some(f) = s.and_then(|s| s.facts.as_ref()) else {
            return;
        };
        let first = {
            let mut st = self.lock();
            match st.facts.get_mut(host) {
                Some(slot @ None) => {
                    *slot = Some(f.clone());
                    true
                }
                _ => false,
            }
        };
        if first {
            let _ = self.events.send(FleetEvent::Facts(host, f.clone())).await;
        }
    }
}

/// The busiest core of a host in a summary: CPU and busy %.
fn busiest(h: &crate::record::schema::HostCpu) -> Option<(u32, f64)> {
    h.cpus
        .iter()
        .max_by(|a, b| a.busy.total_cmp(&b.busy))
        .map(|c| (c.cpu, (c.busy * 10.0).round() / 10.0))
}

/// A test's summary as one or two directions (`local` ran the test).
fn directions_of(
    s: &crate::record::schema::Summary,
    x: &str,
    y: &str,
    dirs: Directions,
    error: Option<String>,
) -> Vec<DirectionResult> {
    let failed = s.error.clone().or(if s.peer_lost {
        Some(error.clone().unwrap_or_else(|| "the agent vanished".into()))
    } else {
        None
    });
    let one = |from: &str, to: &str, bps: f64, retr: u64, fwd: bool| DirectionResult {
        from: from.to_string(),
        to: to.to_string(),
        bps: failed.is_none().then_some(bps),
        retransmits: retr,
        busiest_from: busiest(if fwd { &s.hosts.local } else { &s.hosts.peer }),
        busiest_to: busiest(if fwd { &s.hosts.peer } else { &s.hosts.local }),
        findings: s.findings.clone(),
        limited_by: s.limited_by.clone(),
        error: failed.clone(),
    };
    if dirs == Directions::Bidir {
        let by = |d: &str| {
            let st: Vec<_> = s.streams.iter().filter(|t| t.direction == d).collect();
            let bytes: u64 = st.iter().map(|t| t.bytes).sum();
            let retr: u64 = st.iter().map(|t| u64::from(t.retransmits)).sum();
            let bps = if s.duration_s > 0.0 {
                bytes as f64 * 8.0 / s.duration_s
            } else {
                0.0
            };
            (bps, retr)
        };
        let (f, fr) = by("local->peer");
        let (r, rr) = by("peer->local");
        return vec![one(x, y, f, fr, true), one(y, x, r, rr, false)];
    }
    let retr: u64 = s.streams.iter().map(|t| u64::from(t.retransmits)).sum();
    vec![one(x, y, s.throughput_bps, retr, true)]
}

/// The outliers of what ran so far, each with its evidence (the findings
/// of its tests, the odd settings of its hosts), and the odd settings:
/// what the summary says, and what the TUI shows while the fleet runs.
/// `facts[i]` belongs to `names[i]`.
pub fn explain(
    matrix: &Matrix,
    names: &[String],
    facts: &[Option<&HostFacts>],
    pairs: &[PairRecord],
) -> (
    Vec<Explained<SlowNode>>,
    Vec<Explained<SlowLink>>,
    Vec<OddFact>,
) {
    let (nodes, links) = analyze::outliers(matrix);
    let odd = analyze::odd_facts(names, facts);
    let odd_of = |host: &str| -> Vec<String> {
        odd.iter()
            .filter_map(|o| {
                o.odd.iter().find(|(h, _)| h == host).map(|(_, v)| {
                    format!(
                        "{host}: {} {v} (the other {} have {})",
                        o.key, o.majority_hosts, o.majority
                    )
                })
            })
            .collect()
    };
    let findings_of = |from: &str, to: &str| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for p in pairs {
            for d in p.directions.iter().filter(|d| d.from == from && d.to == to) {
                for f in d
                    .findings
                    .iter()
                    .filter(|f| f.severity >= crate::diagnose::Severity::Warn)
                {
                    let line = format!("{from} → {to}: {} ({})", f.title, f.id);
                    if !out.contains(&line) {
                        out.push(line);
                    }
                }
                if let Some(l) = &d.limited_by {
                    let line = format!("{from} → {to}: limited by: {l}");
                    if out.len() < 6 && !out.contains(&line) {
                        out.push(line);
                    }
                }
            }
        }
        out
    };
    let slow_nodes: Vec<Explained<SlowNode>> = nodes
        .into_iter()
        .map(|n| {
            let mut evidence = odd_of(&n.host);
            let host = n.host.clone();
            let mut tests: Vec<String> = Vec::new();
            for other in names.iter().filter(|o| **o != host) {
                if n.direction != "receiving" {
                    tests.extend(findings_of(&host, other));
                }
                if n.direction != "sending" {
                    tests.extend(findings_of(other, &host));
                }
            }
            tests.truncate(6);
            evidence.extend(tests);
            Explained { what: n, evidence }
        })
        .collect();
    let slow_links: Vec<Explained<SlowLink>> = links
        .into_iter()
        .map(|l| {
            let mut evidence = findings_of(&l.from, &l.to);
            evidence.extend(odd_of(&l.from));
            evidence.extend(odd_of(&l.to));
            Explained { what: l, evidence }
        })
        .collect();
    (slow_nodes, slow_links, odd)
}

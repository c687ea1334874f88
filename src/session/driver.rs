//! Running a plan, the same way for every face.
//!
//! [`run_plan`] takes anything that can run one point ([`PointRunner`]: the
//! [`Controller`](super::controller::Controller) with an agent, or
//! [`LocalObserver`] for `watch` on this host alone) and publishes what
//! happens as [`SessionEvent`]s, in order: `PlanStarted`, then per point
//! `PointStarted`, its `Interval`s and `PointDone`, then `PlanDone`. The
//! faces (`run`, `watch`, the TUI) never drive the protocol themselves: they
//! consume these events through one pipeline (`record::pipeline`), so
//! headers, records, findings and summaries are built once.

use super::outcome::{EndReason, PointOutcome, RunEvent};
use super::plan::{Plan, PointParams, SweepValue};
use super::point::PendingSamples;
use super::proto::SideResult;
use crate::probe::ebpf::{EbpfHosts, EbpfMode};
use crate::probe::live_host::LiveHost;
use crate::probe::sampler::thread::{SamplerError, SamplerThread};
use crate::probe::system::HostInfo;
use crate::traffic::{EngineSpec, ForeignClient, RunningEngine};
use std::future::Future;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use super::controller::SessionError;

/// Runs one test point and publishes its intervals.
pub trait PointRunner {
    /// Run `p`, sending every interval to `events`; setup failures are
    /// errors, anything after the engines started ends up in the outcome.
    fn run_point(
        &mut self,
        p: &PointParams,
        events: &mpsc::Sender<RunEvent>,
        cancel: &CancellationToken,
    ) -> impl Future<Output = Result<PointOutcome, SessionError>> + Send;

    /// True when both ends of a test run on this host (the local pair).
    fn one_host(&self) -> bool {
        false
    }
}

impl PointRunner for super::controller::Controller {
    fn run_point(
        &mut self,
        p: &PointParams,
        events: &mpsc::Sender<RunEvent>,
        cancel: &CancellationToken,
    ) -> impl Future<Output = Result<PointOutcome, SessionError>> + Send {
        super::controller::Controller::run_point(self, p, events, cancel)
    }

    fn one_host(&self) -> bool {
        self.is_local_pair()
    }
}

/// Where a point stands in its plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PointStart {
    /// 1 for the first point of the plan.
    pub number: u32,
    /// Sweep coordinates.
    pub sweep: Option<SweepValue>,
    /// What runs (None: observing).
    pub spec: Option<EngineSpec>,
    /// Its time limit.
    pub time: Option<Duration>,
}

/// What a session tells its face, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEvent {
    /// Connected: who the far end is and what each host's eBPF probes do.
    Ready {
        /// The agent's host (a default value when observing this host alone).
        peer: Box<HostInfo>,
        /// eBPF status of both hosts.
        ebpf: Box<EbpfHosts>,
    },
    /// A plan begins.
    PlanStarted(Box<Plan>),
    /// A point begins.
    PointStarted(Box<PointStart>),
    /// One interval of both hosts.
    Interval(Box<RunEvent>),
    /// A point ended.
    PointDone(Box<PointOutcome>),
    /// The plan is over (every point ran, or it stopped early).
    PlanDone,
    /// The session cannot go on (connection, setup, engine start).
    Failed(String),
    /// The test as asked cannot run on these hosts (a CPU one does not
    /// have, more threads than the sink's queues, frames above the MTU):
    /// a usage error, found before any traffic of the point.
    Refused(String),
}

impl SessionEvent {
    /// A failure to report: `Refused` when the test as asked cannot run
    /// (a usage error; the session stays), else `Failed`.
    pub fn failure(error: String, usage: bool) -> SessionEvent {
        if usage {
            SessionEvent::Refused(error)
        } else {
            SessionEvent::Failed(error)
        }
    }
}

/// The start of every session with an agent (`run`, `watch --peer`, the
/// TUI): connect and authenticate, set up both hosts' eBPF probes for the
/// observed interfaces, and publish [`SessionEvent::Ready`]. The caller
/// reports an error as [`SessionEvent::Failed`] in its own words.
pub async fn connect_ready(
    target: super::controller::Target,
    token: &super::auth::Token,
    observe: &super::plan::Observe,
    same_kernel: Vec<crate::probe::ebpf::EbpfIface>,
    out: &tokio::sync::mpsc::Sender<SessionEvent>,
) -> Result<super::controller::Controller, SessionError> {
    let mut ctl = super::controller::Controller::connect(target, token).await?;
    let ebpf = ctl
        .configure_ebpf(observe.ebpf, &observe.ifaces, same_kernel)
        .await?;
    let _ = out
        .send(SessionEvent::Ready {
            peer: Box::new(ctl.peer.clone()),
            ebpf: Box::new(ebpf),
        })
        .await;
    Ok(ctl)
}

/// Run every point of `plan` in order, publishing [`SessionEvent`]s to `out`.
/// Stops after a point that did not complete; `cancel` interrupts the
/// running point (it ends as interrupted). Returns how the last point ended;
/// a setup failure is also sent as [`SessionEvent::Failed`].
pub async fn run_plan<R: PointRunner>(
    runner: &mut R,
    plan: &Plan,
    observe: &super::plan::Observe,
    out: &mpsc::Sender<SessionEvent>,
    cancel: &CancellationToken,
) -> Result<EndReason, SessionError> {
    // Both ends on this host: the points say which CPUs keep them apart.
    let plan = &if runner.one_host() {
        plan.clone().on_one_host()
    } else {
        plan.clone()
    };
    let _ = out
        .send(SessionEvent::PlanStarted(Box::new(plan.clone())))
        .await;
    let mut last = EndReason::Completed;
    let points = plan.points();
    let specs: Vec<EngineSpec> = points.iter().filter_map(|(_, s)| s.clone()).collect();
    for (number, (sweep, spec)) in (1u32..).zip(points) {
        let p = PointParams {
            spec: spec.clone(),
            interval: plan.interval(),
            omit: plan.omit(),
            time: plan.time(),
            ifaces: observe.ifaces.clone(),
            peer_ifaces: observe.peer_ifaces.clone(),
            later: if number == 1 {
                specs.iter().skip(1).cloned().collect()
            } else {
                Vec::new()
            },
        };
        let _ = out
            .send(SessionEvent::PointStarted(Box::new(PointStart {
                number,
                sweep,
                spec,
                time: plan.time(),
            })))
            .await;
        let (tx, mut rx) = mpsc::channel::<RunEvent>(64);
        let result = {
            let run = runner.run_point(&p, &tx, cancel);
            tokio::pin!(run);
            loop {
                tokio::select! {
                    r = &mut run => break r,
                    Some(ev) = rx.recv() => { let _ = out.send(SessionEvent::Interval(Box::new(ev))).await; }
                }
            }
        };
        drop(tx);
        while let Some(ev) = rx.recv().await {
            let _ = out.send(SessionEvent::Interval(Box::new(ev))).await;
        }
        match result {
            Ok(outcome) => {
                last = outcome.end.clone();
                let _ = out.send(SessionEvent::PointDone(Box::new(outcome))).await;
                if last != EndReason::Completed || cancel.is_cancelled() {
                    break;
                }
            }
            Err(e) => {
                let _ = out
                    .send(SessionEvent::failure(e.to_string(), e.is_usage()))
                    .await;
                let _ = out.send(SessionEvent::PlanDone).await;
                return Err(e);
            }
        }
    }
    let _ = out.send(SessionEvent::PlanDone).await;
    Ok(last)
}

/// This host alone, without an agent: observing without traffic
/// (`wirescope watch`), or running an engine's client against a foreign
/// server (`run --target`), when the engine has such a client
/// ([`EngineSlice::foreign_client`](crate::traffic::EngineSlice::foreign_client)).
pub struct LocalObserver {
    sampler: SamplerThread,
    /// `HOST:PORT` of the foreign server a point's client calls.
    target: Option<String>,
}

impl LocalObserver {
    /// Sample this host's `ifaces` with the eBPF set `ebpf`.
    pub async fn new(
        ebpf: EbpfMode,
        ifaces: Vec<String>,
    ) -> Result<(Self, EbpfHosts), SessionError> {
        let sampler = SamplerThread::of("ws-sampler", Box::new(LiveHost::default()))
            .map_err(|e| SessionError::Sampler(SamplerError::Spawn(e)))?;
        sampler.set_ebpf(ebpf, Vec::new())?;
        let local = sampler.set_ifaces(ifaces).await?;
        Ok((
            LocalObserver {
                sampler,
                target: None,
            },
            EbpfHosts { local, peer: None },
        ))
    }

    /// Run points' clients against the foreign server at `target`.
    pub fn with_target(mut self, target: String) -> Self {
        self.target = Some(target);
        self
    }

    /// Who this host is, as the "peer" of a one-host session.
    pub fn host() -> HostInfo {
        HostInfo::default()
    }
}

impl PointRunner for LocalObserver {
    async fn run_point(
        &mut self,
        p: &PointParams,
        events: &mpsc::Sender<RunEvent>,
        cancel: &CancellationToken,
    ) -> Result<PointOutcome, SessionError> {
        let (mut engine, words) = against_target(p, self.target.as_ref()).await?.unzip();
        let view = engine
            .as_ref()
            .and_then(crate::probe::sampler::EngineView::of);
        self.sampler.begin(view, p.omit, p.interval).await?;
        if let Some(e) = &engine {
            e.release();
        }
        let t0 = Instant::now();
        let mut pending = PendingSamples::default();
        let mut end = self
            .tick(p, engine.as_ref(), &mut pending, events, cancel, t0)
            .await;
        if let Some(e) = &engine {
            end = self.stop_client(e, &mut pending, end).await;
        }
        for s in pending.drain().await {
            let index = s.index;
            let _ = events
                .send(RunEvent {
                    index,
                    local: Some(s),
                    peer: None,
                })
                .await;
        }
        let local = match (engine.as_mut(), words) {
            (Some(e), Some(words)) => {
                let r = super::point::finish(e, &self.sampler, t0.elapsed().as_secs_f64()).await;
                if let (EndReason::Completed, Some(err)) = (&end, &r.error) {
                    end = EndReason::Failed(format!("{}: {err}", words.client));
                }
                r
            }
            _ => {
                let _ = self.sampler.end().await;
                SideResult {
                    duration_s: t0.elapsed().as_secs_f64(),
                    ..SideResult::default()
                }
            }
        };
        Ok(PointOutcome {
            local,
            peer: None,
            end,
        })
    }
}

impl LocalObserver {
    /// The sampling clock: a Sample per interval until the time limit, the
    /// client's own end, a sampler failure or Ctrl-C.
    async fn tick(
        &self,
        p: &PointParams,
        engine: Option<&RunningEngine>,
        pending: &mut PendingSamples,
        events: &mpsc::Sender<RunEvent>,
        cancel: &CancellationToken,
        t0: Instant,
    ) -> EndReason {
        let start = tokio::time::Instant::now();
        let mut ticker = tokio::time::interval_at(start + p.interval, p.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut end = EndReason::Completed;
        loop {
            tokio::select! {
                _ = ticker.tick() => {
                    if let Err(e) = pending.request(&self.sampler) {
                        end = EndReason::Failed(format!("local sampler: {e}"));
                        break;
                    }
                    // The tick at the time limit still yields its Sample (drained below).
                    if p.time.is_some_and(|t| t0.elapsed().saturating_add(Duration::from_millis(5)) >= t) {
                        break;
                    }
                    // A client that ended by itself (it failed) ends the point.
                    if engine.is_some_and(|e| e.is_finished()) {
                        break;
                    }
                }
                Some(s) = pending.next() => {
                    let index = s.index;
                    let _ = events.send(RunEvent { index, local: Some(s), peer: None }).await;
                }
                _ = cancel.cancelled() => { end = EndReason::Interrupted; break; }
            }
        }
        end
    }

    /// The client finishes its RPCs; their latencies are merged when its
    /// threads end, so the final Sample waits for that (bounded). A closing
    /// (short) Sample covers what the client did after the last tick, as
    /// the controller's does.
    async fn stop_client(
        &self,
        e: &RunningEngine,
        pending: &mut PendingSamples,
        mut end: EndReason,
    ) -> EndReason {
        e.stop();
        let until = tokio::time::Instant::now() + Duration::from_secs(10);
        while !e.is_finished() && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if end == EndReason::Completed && pending.request(&self.sampler).is_err() {
            end = EndReason::Failed("local sampler: the closing Sample could not be taken".into());
        }
        end
    }
}

/// `run --target HOST:PORT`: the point's engine's client against a foreign
/// server (with the engine's words for it), started once its first request
/// proved the server; an engine without such a client needs an agent.
/// None: observing only.
async fn against_target(
    p: &PointParams,
    target: Option<&String>,
) -> Result<Option<(RunningEngine, ForeignClient)>, SessionError> {
    let (Some(spec), Some(addr)) = (&p.spec, target) else {
        return match &p.spec {
            Some(spec) => Err(needs_an_agent(spec)),
            None => Ok(None),
        };
    };
    let Some(words) = crate::traffic::slice(spec.kind()).foreign_client() else {
        return Err(needs_an_agent(spec));
    };
    let (spec, addr) = (spec.clone(), addr.clone());
    // Its first request proves the server before the clock starts.
    let started = tokio::task::spawn_blocking(move || spec.start_against_server(addr))
        .await
        .map_err(|e| SessionError::Local(format!("the {}'s task failed: {e}", words.client)))?;
    Ok(Some((started?, words)))
}

/// A point whose engine has no client for a foreign server, or that runs
/// without one: which engines do (from the registry).
fn needs_an_agent(spec: &EngineSpec) -> SessionError {
    SessionError::Local(format!(
        "{} needs an agent (--peer or the local pair); only {} {} against --target",
        spec.short(),
        crate::traffic::registry::foreign_client_engines(),
        if crate::traffic::registry::foreign_clients().len() == 1 {
            "runs"
        } else {
            "run"
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_without_a_foreign_client_names_the_engines_that_have_one() {
        let spec = crate::session::tests::stream(2);
        assert_eq!(
            needs_an_agent(&spec).to_string(),
            "this host cannot run the test: tcp stream -P 2 needs an agent (--peer or the local pair); only --engine grpc runs against --target"
        );
    }
}

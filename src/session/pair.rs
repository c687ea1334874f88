//! Agent-to-agent tests: the fleet coordinator asks agent X to test against
//! agent Y, X runs the test as Y's controller (with its own token, which is
//! the fleet's), and everything X's controller publishes comes back to the
//! coordinator as [`PairEvent`]s.
//!
//! The data flows X↔Y only; the coordinator receives both hosts' Samples and
//! both sides' totals, and runs them through the same pipeline and rules as
//! `wirescope run` (it rebuilds the [`SessionEvent`]s X's driver published).
//!
//! Messages: coordinator → X `PairTest{peer, test}`; X → coordinator a stream
//! of `PairEvent{event}` ending with [`PairEvent::End`]; the coordinator may
//! send `Stop{}` at any time (the test ends as interrupted and X still sends
//! what it measured). One point per pair test: sweeps stay with `run`.

use super::controller::{Controller, SessionError, Target};
use super::driver::{PointStart, SessionEvent};
use super::outcome::{EndReason, PointOutcome, RunEvent};
use super::plan::{Observe, Plan};
use super::proto::{Msg, ProtoError};
pub use super::proto::{PairEvent, PairSpec, SweepInFleet};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The wire form of a driver event (None: nothing to send).
fn wire(ev: SessionEvent) -> Option<PairEvent> {
    Some(match ev {
        SessionEvent::Ready { peer, ebpf } => PairEvent::Ready { peer, ebpf },
        SessionEvent::Interval(r) => PairEvent::Interval {
            index: r.index,
            local: r.local.map(Box::new),
            peer: r.peer.map(Box::new),
        },
        SessionEvent::PointDone(o) => PairEvent::Done {
            local: Box::new(o.local),
            peer: o.peer.map(Box::new),
            end: o.end,
        },
        SessionEvent::Failed(error) => PairEvent::Failed {
            error,
            usage: false,
        },
        SessionEvent::Refused(error) => PairEvent::Failed { error, usage: true },
        SessionEvent::PlanStarted(_) | SessionEvent::PointStarted(_) | SessionEvent::PlanDone => {
            return None
        }
    })
}

/// What both hosts of a pair test observe: the test's own interfaces.
fn observe(spec: &PairSpec) -> Observe {
    Observe {
        ifaces: Vec::new(),
        peer_ifaces: Vec::new(),
        ebpf: spec.ebpf,
    }
}

/// How long a pair test waits for an agent that still ends its previous
/// session (the coordinator just said bye to it).
pub const BUSY_WAIT: Duration = Duration::from_secs(5);

/// Connect to an agent, waiting up to [`BUSY_WAIT`] while it says it is busy.
pub async fn connect_patiently(
    addr: SocketAddr,
    token: &super::auth::Token,
) -> Result<Controller, SessionError> {
    patiently(|| Controller::connect(Target::Tcp(addr), token)).await
}

/// Try `connect` again while the agent says it is busy, for up to [`BUSY_WAIT`].
async fn patiently<F: std::future::Future<Output = Result<Controller, SessionError>>>(
    mut connect: impl FnMut() -> F,
) -> Result<Controller, SessionError> {
    let started = std::time::Instant::now();
    loop {
        match connect().await {
            Err(e) if e.is_busy() && started.elapsed() < BUSY_WAIT => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            r => return r,
        }
    }
}

/// On agent X: run `spec` against the agent at `peer` as its controller,
/// sending every event to `out` (wire form), then [`PairEvent::End`].
/// `cancel` interrupts the test (it still reports what it measured).
pub async fn serve_pair_test(
    peer: SocketAddr,
    spec: PairSpec,
    token: super::auth::Token,
    out: mpsc::Sender<PairEvent>,
    cancel: CancellationToken,
) {
    let (tx, mut rx) = mpsc::channel::<SessionEvent>(64);
    let job = tokio::spawn(async move {
        let observe = observe(&spec);
        let plan = Plan::Test(Box::new(spec.plan()));
        let connected = patiently(|| {
            super::driver::connect_ready(Target::Tcp(peer), &token, &observe, Vec::new(), &tx)
        });
        match connected.await {
            Ok(mut ctl) => {
                let _ = super::driver::run_plan(&mut ctl, &plan, &observe, &tx, &cancel).await;
                ctl.close().await;
            }
            Err(e) => {
                let error = format!("cannot test against the agent at {peer}: {e}");
                let _ = tx.send(SessionEvent::failure(error, e.is_usage())).await;
            }
        }
    });
    while let Some(ev) = rx.recv().await {
        if let Some(w) = wire(ev) {
            if out.send(w).await.is_err() {
                break;
            }
        }
    }
    let _ = job.await;
    let _ = out.send(PairEvent::End).await;
}

/// Longest time a pair test may stay silent (no interval, no end) before
/// the coordinator gives up on it: setup of both agents plus a few intervals.
fn silence_limit(spec: &PairSpec) -> Duration {
    super::point::SETUP_TIMEOUT.saturating_mul(3) + Duration::from_millis(spec.interval_ms) * 5
}

impl Controller {
    /// On the coordinator: ask this agent (X) to run `spec` against the agent
    /// at `peer` (Y). Publishes what happens as [`SessionEvent`]s in the order
    /// the driver does (`Ready`, `PlanStarted`, `PointStarted`, `Interval`s,
    /// `PointDone`, `PlanDone`), so the caller feeds them to a pipeline as it
    /// would `run`'s. `cancel` stops the test (X reports what it measured).
    pub async fn pair_test(
        &mut self,
        peer: SocketAddr,
        spec: &PairSpec,
        out: &mpsc::Sender<SessionEvent>,
        cancel: &CancellationToken,
    ) -> Result<EndReason, SessionError> {
        self.send_msg(&Msg::PairTest {
            peer: peer.to_string(),
            test: Box::new(spec.clone()),
        })
        .await?;
        let plan = spec.plan();
        let _ = out
            .send(SessionEvent::PlanStarted(Box::new(Plan::Test(Box::new(
                plan.clone(),
            )))))
            .await;
        let _ = out
            .send(SessionEvent::PointStarted(Box::new(PointStart {
                number: 1,
                sweep: None,
                spec: Some(plan.spec.clone()),
                time: plan.time,
            })))
            .await;
        let limit = silence_limit(spec);
        let mut stopped = false;
        let mut last = EndReason::Failed("the agent ended the pair test without a result".into());
        loop {
            let m = tokio::select! {
                m = tokio::time::timeout(limit, self.recv_msg()) => m,
                _ = cancel.cancelled(), if !stopped => {
                    stopped = true;
                    self.send_msg(&Msg::Stop {}).await?;
                    continue;
                }
            };
            let ev = match m {
                Err(_) => return Err(self.proto(ProtoError::Timeout("the pair test's next event"))),
                Ok(Err(e)) => return Err(e),
                Ok(Ok(Msg::PairEvent { event })) => *event,
                // The agent refused the request itself (an older agent
                // does not know it): nothing else follows.
                Ok(Ok(Msg::Failed { error, usage })) => {
                    let error = format!("the agent cannot run fleet tests: {error} (run the same wirescope version on every node)");
                    let _ = out.send(SessionEvent::failure(error.clone(), usage)).await;
                    last = EndReason::Failed(error);
                    break;
                }
                Ok(Ok(other)) => {
                    return Err(self.proto(ProtoError::Unexpected {
                        expected: "pair_event",
                        got: other.kind(),
                    }))
                }
            };
            let sev = match ev {
                PairEvent::End => break,
                PairEvent::Ready { peer, ebpf } => SessionEvent::Ready { peer, ebpf },
                PairEvent::Interval { index, local, peer } => {
                    SessionEvent::Interval(Box::new(RunEvent {
                        index,
                        local: local.map(|s| *s),
                        peer: peer.map(|s| *s),
                    }))
                }
                PairEvent::Done { local, peer, end } => {
                    last = end.clone();
                    SessionEvent::PointDone(Box::new(PointOutcome {
                        local: *local,
                        peer: peer.map(|p| *p),
                        end,
                    }))
                }
                PairEvent::Failed { error, usage } => {
                    last = EndReason::Failed(error.clone());
                    SessionEvent::failure(error, usage)
                }
            };
            let _ = out.send(sev).await;
        }
        let _ = out.send(SessionEvent::PlanDone).await;
        Ok(last)
    }
}

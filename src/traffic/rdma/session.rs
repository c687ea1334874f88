//! The RDMA engine as the session runs it: one [`Engine`] per end whose
//! setup exchange carries the [`RdmaSetup`] (QPNs, PSNs, LID/GID, rkeys,
//! addresses, MTU) inside `Start` / `Accepting` over the authenticated
//! control channel — no extra port — and whose probe turns the QP counters
//! into [`RdmaInterval`]s and the end-of-point [`RdmaOutcome`] into totals.
//!
//! The agent has the controller's setup before it answers, so it connects
//! its QPs first and answers with the setup it made when preparing; the
//! controller connects when `Accepting` arrives. Both ends check the other's
//! setup ([`RdmaSetup::check_remote`]) before a QP moves.
//!
//! [`prepare_on_host`] checks the verbs library and the device and picks
//! the device, port and GID from what the host tells ([`EngineHost`]);
//! [`preflight_on_host`] is the same check before anything else starts.

use super::engine::{interval, Connected, Prepared, RdmaInterval, RdmaOutcome, RdmaResult};
use super::setup::RdmaSetup;
use crate::traffic::{
    ConnSnapshot, Engine, EngineControl, EngineCounters, EngineError, EngineHost, EngineInterval,
    EngineProbe, EngineSetup, EngineTotals, RunningEngine, Side,
};
use hdrhistogram::Histogram;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How `side` names its host in what it says (the controller runs here).
fn here(side: Side) -> &'static str {
    match side {
        Side::Controller => "this host",
        Side::Agent => "the agent's host",
    }
}

/// Check libibverbs and the device on `host` (one line with the fix when
/// either is missing), choose the device, port and GID that route to the
/// other end's address `toward`, create the QPs.
pub fn prepare_on_host(
    spec: &super::RdmaSpec,
    side: Side,
    toward: Option<std::net::IpAddr>,
    host: &dyn EngineHost,
) -> Result<Box<dyn Engine>, EngineError> {
    let here = here(side);
    let provider = super::verbs_provider()
        .map_err(|e| EngineError::Unsupported(format!("rdma on {here}: {e}")))?;
    // Default: the device behind the interface that routes to the peer,
    // and the RoCE v2 GID of the local address on it.
    let (route, local) = toward.map_or((None, None), |t| host.route_to(t));
    host.verbs_preflight(provider, here, route.as_deref())
        .map_err(|e| EngineError::Unsupported(e.to_string()))?;
    let want = match side {
        Side::Controller => &spec.local,
        Side::Agent => &spec.peer,
    };
    let chosen = host
        .verbs_device(want, route.as_deref(), local)
        .map_err(|e| EngineError::Unsupported(format!("rdma on {here}: {e}")))?;
    let prepared = super::prepare(spec, side, provider, &chosen)
        .map_err(|e| EngineError::Unsupported(format!("rdma on {here}: {e}")))?;
    Ok(Box::new(RdmaEngine::new(prepared)))
}

/// An RDMA test needs libibverbs and a device on this host before anything
/// else happens: without either, one line says which is missing and the
/// command that fixes it. `toward`: the peer's address (None: the local
/// pair, over the default route's interface). The agent checks its own
/// host the same way when the test reaches it.
pub fn preflight_on_host(
    host: &dyn EngineHost,
    toward: Option<std::net::IpAddr>,
) -> Result<(), super::preflight::PreflightError> {
    let provider = super::verbs_provider()?;
    let iface = match toward {
        Some(ip) => host.route_iface(ip),
        None => host.default_route_iface(),
    };
    host.verbs_preflight(provider, here(Side::Controller), iface.as_deref())
}

/// One end of an RDMA test, prepared or connected.
pub struct RdmaEngine {
    /// This end's setup, as made when preparing.
    local: RdmaSetup,
    state: State,
}

enum State {
    Prepared(Box<Prepared>),
    Connected(Box<Connected>),
    /// The other end's setup was refused (said by `connect`).
    Refused(String),
}

impl RdmaEngine {
    /// Wrap a prepared end (QPs created, buffers registered).
    pub fn new(p: Prepared) -> Self {
        RdmaEngine {
            local: p.setup().clone(),
            state: State::Prepared(Box::new(p)),
        }
    }
}

impl Engine for RdmaEngine {
    fn setup(&self) -> Option<EngineSetup> {
        Some(EngineSetup::Rdma(self.local.clone()))
    }

    fn connect(&mut self, peer: Option<EngineSetup>) -> Result<(), EngineError> {
        let remote = match peer {
            Some(EngineSetup::Rdma(r)) => r,
            None => {
                return Err(EngineError::Unsupported(
                    "the other end of the rdma test sent no queue-pair setup (an older wirescope?); run the same version on both hosts".into(),
                ))
            }
            Some(_) => {
                return Err(EngineError::Unsupported(
                    "the other end sent the setup of another engine for an rdma test".into(),
                ))
            }
        };
        match std::mem::replace(&mut self.state, State::Refused(String::new())) {
            State::Prepared(p) => match p.connect(&remote) {
                Ok(c) => {
                    self.state = State::Connected(Box::new(c));
                    Ok(())
                }
                Err(e) => {
                    let why = e.to_string();
                    self.state = State::Refused(why.clone());
                    Err(EngineError::Unsupported(why))
                }
            },
            other => {
                self.state = other;
                Err(EngineError::Unsupported(
                    "the rdma queue pairs are connected already".into(),
                ))
            }
        }
    }

    fn start(self: Box<Self>, _conns: Vec<TcpStream>) -> Result<RunningEngine, EngineError> {
        let c = match self.state {
            State::Connected(c) => c,
            State::Refused(why) if !why.is_empty() => {
                return Err(EngineError::Unsupported(why));
            }
            _ => {
                return Err(EngineError::Unsupported(
                    "the rdma test started before the other end's setup arrived".into(),
                ))
            }
        };
        let bidir_requester = c.lingers_after_its_work();
        let (mut engine, result) = c.start_gated()?;
        if bidir_requester {
            // Its worker keeps the QPs after its own iterations (the other
            // end may still write into them) until the session stops it;
            // the session learns the work is done from this watcher.
            let control = engine.control.clone();
            let r = result.clone();
            let h = std::thread::Builder::new()
                .name("ws-rdma-done".into())
                .spawn(move || {
                    signal_done_after_result(&control, &r);
                    Ok(())
                })
                .map_err(|source| EngineError::Spawn {
                    name: "ws-rdma-done".into(),
                    source,
                })?;
            engine.threads.push(h);
        }
        engine.probe = Some(Arc::new(RdmaProbe {
            counters: Arc::clone(&engine.counters),
            prev: Mutex::new(Vec::new()),
            cur: Mutex::new(None),
            result,
        }));
        Ok(engine)
    }
}

/// How long a bidirectional requester that finished its own work waits for
/// the other end's, which started at the same `Go` with the same work,
/// before the session is told this end is done (and stops both).
pub const BIDIR_GRACE: Duration = Duration::from_secs(1);

/// Tell the session this end's work is done once its result is published
/// (plus [`BIDIR_GRACE`]); returns early when the session stops first.
fn signal_done_after_result(control: &EngineControl, result: &RdmaResult) {
    let mut since: Option<Instant> = None;
    while !control.stopping() {
        match since {
            None if result.get().is_some() => since = Some(Instant::now()),
            Some(t) if t.elapsed() >= BIDIR_GRACE => {
                control.done.notify_one();
                return;
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The sampler's view of a running RDMA end: the counters it reads first
/// in an interval are the ones its figures use.
struct RdmaProbe {
    counters: Arc<EngineCounters>,
    prev: Mutex<Vec<ConnSnapshot>>,
    cur: Mutex<Option<Vec<ConnSnapshot>>>,
    result: RdmaResult,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl EngineProbe for RdmaProbe {
    fn counters(&self) -> Option<Vec<ConnSnapshot>> {
        let cur = self.counters.snapshot();
        *lock(&self.cur) = Some(cur.clone());
        Some(cur)
    }

    fn take_latency(&self) -> Option<Histogram<u64>> {
        (!self.counters.latency.is_empty()).then(|| self.counters.take_latency())
    }

    fn interval(&self, secs: f64) -> Option<EngineInterval> {
        let cur = lock(&self.cur)
            .take()
            .unwrap_or_else(|| self.counters.snapshot());
        let mut prev = lock(&self.prev);
        // Latency percentiles travel in the Sample's own latency summary.
        let i: RdmaInterval = interval(&prev, &cur, secs, None);
        *prev = cur;
        Some(EngineInterval::Rdma(i))
    }

    fn totals(&self) -> Option<EngineTotals> {
        self.result
            .get()
            .map(|o: RdmaOutcome| EngineTotals::Rdma(Box::new(o)))
    }
}

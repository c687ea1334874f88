//! One test point on the agent: check it, prepare the engine, collect the
//! data connections, run it with the controller's clock, finish.
//!
//! Nothing is allocated before [`admit`](crate::session::engines::admit)
//! passes: the spec's limits, the memory the engine would take on this host
//! against what is available, and the descriptors the data connections need
//! against the open-file limit. A controller with valid options must not be
//! able to make the agent abort on an allocation.

use super::control::{Ended, Inbox};
use super::{lock, tick_limit, DataWaiter, State};
use crate::probe::sampler::thread::SamplerThread;
use crate::probe::sampler::EngineView;
use crate::session::channel::{SealedWriter, SessionKeys};
use crate::session::point::{
    finish, sleep_until_opt, PendingSamples, DRAIN_TIMEOUT, SETUP_TIMEOUT,
};
use crate::session::proto::{Msg, SideResult, TestParams};
use crate::traffic::{RunningEngine, Side};
use crate::units::MAX_DURATION;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWrite;
use tokio::sync::mpsc;
use tracing::{info, warn};

/// What a test needs of its session.
pub(super) struct Ctx<'a> {
    pub state: &'a State,
    pub sampler: &'a SamplerThread,
    pub controller: Option<std::net::IpAddr>,
    pub keys: &'a Arc<SessionKeys>,
    /// The controller's address (or the unix socket), for the log.
    pub who: &'a str,
}

/// How a point ended before its result was sent, when it did.
enum Stop {
    /// This side refuses or failed: tell the controller why.
    Fail(Failure),
    /// The controller gave up (Stop/Failed), or was already told why.
    Quiet,
    /// The control connection is gone.
    Lost(Ended),
}

/// Why this side cannot run the point, for the controller (a usage error:
/// the command line's mistake).
struct Failure {
    error: String,
    usage: bool,
}

/// A failure of this host (not a usage error).
fn failure(error: String) -> Failure {
    Failure {
        error,
        usage: false,
    }
}

impl From<Ended> for Stop {
    fn from(lost: Ended) -> Stop {
        Stop::Lost(lost)
    }
}

/// Run one test point and log how it ended. Err means the control
/// connection is gone.
pub(super) async fn run<W: AsyncWrite + Unpin>(
    ctx: &Ctx<'_>,
    wr: &mut SealedWriter<W>,
    rx: &mut Inbox,
    test: TestParams,
) -> Result<(), Ended> {
    let (id, who) = (test.id, ctx.who);
    match point(ctx, wr, rx, &test).await {
        Ok(r) => {
            match &r.error {
                None => {
                    info!(target: "agent", "test {id} with {who} ended: ok after {:.1} s", r.duration_s)
                }
                Some(e) => {
                    warn!(target: "agent", "test {id} with {who} ended: error after {:.1} s: {e}", r.duration_s)
                }
            }
            send(wr, Msg::Finished { result: r }).await
        }
        Err(Stop::Fail(f)) => {
            warn!(target: "agent", "test {id} with {who} ended: error: {}", f.error);
            send(
                wr,
                Msg::Failed {
                    error: f.error,
                    usage: f.usage,
                },
            )
            .await
        }
        Err(Stop::Quiet) => {
            info!(target: "agent", "test {id} with {who} ended: stopped by the controller before it ran");
            Ok(())
        }
        Err(Stop::Lost(e)) => {
            warn!(target: "agent", "test {id} with {who} ended: peer gone: {e}");
            Err(e)
        }
    }
}

/// Check, prepare, connect, start and drive one point; its result to send.
async fn point<W: AsyncWrite + Unpin>(
    ctx: &Ctx<'_>,
    wr: &mut SealedWriter<W>,
    rx: &mut Inbox,
    test: &TestParams,
) -> Result<SideResult, Stop> {
    let interval = admit(test).map_err(Stop::Fail)?;
    let n = test.spec.as_ref().map_or(0, |s| s.connection_count());
    match &test.spec {
        Some(spec) => info!(
            target: "agent",
            "test {} with {} started: {} with {n} data connection(s), {} ms intervals",
            test.id,
            ctx.who,
            spec.label(),
            interval.as_millis()
        ),
        None => info!(target: "agent", "test {} with {} started: observing only", test.id, ctx.who),
    }
    let engine = prepare(ctx, test).await.map_err(Stop::Fail)?;
    let setup = engine.as_ref().and_then(|e| e.setup());
    let conns = collect(ctx, wr, rx, test, n, setup).await?;
    watch_ifaces(ctx, test, &conns).await.map_err(Stop::Fail)?;
    send(wr, Msg::DataReady {}).await?;
    match tokio::time::timeout(SETUP_TIMEOUT, rx.recv()).await {
        Ok(Some(Ok(Msg::Go {}))) => {}
        Ok(Some(Ok(_))) => return Err(Stop::Quiet), // controller gave up (Failed/Stop)
        _ => return Err(Stop::Lost(Ended::Closed("before go"))),
    }
    let mut engine = engine
        .map_or_else(|| Ok(RunningEngine::idle()), |e| e.start(conns))
        .map_err(|e| Stop::Fail(failure(format!("agent engine: {e}"))))?;
    let omit = Duration::from_millis(test.omit_ms).min(MAX_DURATION);
    if let Err(e) = ctx
        .sampler
        .begin(EngineView::of(&engine), omit, interval)
        .await
    {
        engine.abort();
        return Err(Stop::Fail(failure(format!("agent sampler: {e}"))));
    }
    // Every worker exists and the clock runs: let them go at once.
    engine.release();
    let _shown = EngineShown::new(ctx, test.spec.as_ref().map(|s| s.kind()));
    drive(ctx, wr, rx, &mut engine, interval)
        .await
        .map_err(Stop::Lost)
}

/// The running test's engine shown to the agent's observer, for as long as it runs.
struct EngineShown<'a>(Option<&'a dyn super::Observer>);

impl<'a> EngineShown<'a> {
    fn new(ctx: &Ctx<'a>, engine: Option<crate::traffic::EngineKind>) -> Self {
        let o = ctx.state.observer.as_deref();
        if let Some(o) = o {
            o.engine(engine);
        }
        EngineShown(o)
    }
}

impl Drop for EngineShown<'_> {
    fn drop(&mut self) {
        if let Some(o) = self.0 {
            o.engine(None);
        }
    }
}

/// A Sample of this host to the agent's observer, if it has one.
fn publish(ctx: &Ctx<'_>, s: &crate::probe::sample::Sample) {
    if let Some(o) = &ctx.state.observer {
        o.sample(s);
    }
}

/// The checks before anything is allocated: CPUs, the spec's limits and
/// memory, the interval. Ok: the interval; Err: the refusal to send.
fn admit(test: &TestParams) -> Result<Duration, Failure> {
    // CPUs this host does not have are the command line's mistake (a usage
    // error), for this point and for the later points the first one lists.
    test.spec
        .iter()
        .chain(&test.later)
        .enumerate()
        .try_for_each(|(i, s)| {
            crate::session::engines::check_cpus(s, Side::Agent, None).map_err(|e| match i {
                0 => e.to_string(),
                i => format!("point {} of the plan: {e}", i + 1),
            })
        })
        .map_err(|e| Failure {
            error: format!("the agent refuses this test: {e}"),
            usage: true,
        })?;
    test.spec
        .iter()
        .try_for_each(|s| crate::session::engines::admit(s, Side::Agent))
        .map_err(|e| failure(format!("the agent refuses this test: {e}")))?;
    Some(Duration::from_millis(test.interval_ms.max(10)))
        .filter(|i| *i <= MAX_DURATION)
        .ok_or_else(|| {
            failure(format!(
                "interval of {} ms is out of range",
                test.interval_ms
            ))
        })
}

/// Prepare the engine (buffers, devices) off the async threads, and take
/// the controller's part of the setup exchange. Ok(None): observing only.
async fn prepare(
    ctx: &Ctx<'_>,
    test: &TestParams,
) -> Result<Option<Box<dyn crate::traffic::Engine>>, Failure> {
    let Some(spec) = &test.spec else {
        return Ok(None);
    };
    let (spec, peer_setup, peer) = (spec.clone(), test.setup.clone(), ctx.controller);
    let prepared = tokio::task::spawn_blocking(move || {
        let mut e =
            crate::session::engines::prepare(&spec, Side::Agent, peer, peer_setup.as_ref())?;
        e.connect(peer_setup)?;
        Ok::<_, crate::traffic::EngineError>(e)
    })
    .await;
    match prepared {
        Ok(Ok(e)) => Ok(Some(e)),
        Ok(Err(e)) => {
            use crate::traffic::EngineError;
            let usage = matches!(e, EngineError::Usage(_) | EngineError::Preflight(_));
            let error = format!("agent engine: {e}");
            Err(Failure { error, usage })
        }
        Err(e) => Err(failure(format!("agent engine setup failed: {e}"))),
    }
}

/// Watch the interface that carries the test: the route back to the
/// controller (its data connections' address, else the test address its
/// setup names, else its control address), and the ones it names.
async fn watch_ifaces(
    ctx: &Ctx<'_>,
    test: &TestParams,
    conns: &[std::net::TcpStream],
) -> Result<(), Failure> {
    let mut ifaces: Vec<String> = conns
        .first()
        .and_then(|c| c.peer_addr().ok())
        .map(|a| a.ip())
        .or_else(|| {
            test.setup
                .as_ref()
                .and_then(crate::traffic::EngineSetup::address)
        })
        .or(ctx.controller)
        .and_then(crate::probe::system::route_iface)
        .into_iter()
        .collect();
    crate::probe::system::check_ifaces(&test.ifaces)
        .map_err(|e| failure(format!("--peer-iface: {e}")))?;
    ifaces.extend(test.ifaces.iter().cloned());
    ctx.sampler
        .set_ifaces(ifaces)
        .await
        .map(|_| ())
        .map_err(|e| failure(format!("agent sampler: {e}")))
}

/// Announce the data port (with this side's setup) and wait for every data
/// connection of the test. Err: the test ended before it started.
async fn collect<W: AsyncWrite + Unpin>(
    ctx: &Ctx<'_>,
    wr: &mut SealedWriter<W>,
    rx: &mut Inbox,
    test: &TestParams,
    n: usize,
    setup: Option<crate::traffic::EngineSetup>,
) -> Result<Vec<std::net::TcpStream>, Stop> {
    let state = ctx.state;
    let (dtx, mut drx) = mpsc::channel(n.clamp(1, 1024));
    *lock(&state.waiter) = Some(DataWaiter {
        test: test.id,
        keys: Arc::clone(ctx.keys),
        tx: dtx,
    });
    // The controller's own data connections pass the limits meant for
    // strangers (rate, per address, in all): -P 1000 opens 1000 at once.
    state.gate.expect_data(ctx.controller, n);
    let accepting = Msg::Accepting {
        data_port: state.data_port,
        setup,
    };
    if let Err(e) = send(wr, accepting).await {
        *lock(&state.waiter) = None;
        state.gate.expect_done();
        return Err(Stop::Lost(e));
    }
    let mut slots: Vec<Option<std::net::TcpStream>> = (0..n).map(|_| None).collect();
    let mut have = 0;
    let deadline = tokio::time::Instant::now() + SETUP_TIMEOUT;
    let result = loop {
        if have == n {
            break Ok(slots.into_iter().flatten().collect());
        }
        tokio::select! {
            c = drx.recv() => if let Some((i, s)) = c {
                if let Some(slot) = slots.get_mut(i as usize) {
                    if slot.is_none() {
                        let _ = crate::session::net::keep_alive(&s);
                        *slot = Some(s);
                        have += 1;
                    }
                }
            },
            m = rx.recv() => match m {
                // The controller gave up.
                Some(Ok(Msg::Stop {})) | Some(Ok(Msg::Failed { .. })) => break Err(Stop::Quiet),
                Some(Ok(_)) => {}
                _ => break Err(Stop::Lost(Ended::Closed("during setup"))),
            },
            _ = tokio::time::sleep_until(deadline) => {
                let why = format!("only {have} of {n} data connections reached the agent within {} s; check that TCP port {} is reachable from the controller", SETUP_TIMEOUT.as_secs(), state.data_port);
                break Err(Stop::Fail(failure(why)));
            }
        }
    };
    *lock(&state.waiter) = None;
    state.gate.expect_done();
    result
}

/// The running point: Ticks from the controller's clock, Samples back, stop and drain.
async fn drive<W: AsyncWrite + Unpin>(
    ctx: &Ctx<'_>,
    wr: &mut SealedWriter<W>,
    rx: &mut Inbox,
    engine: &mut RunningEngine,
    interval: Duration,
) -> Result<SideResult, Ended> {
    let sampler = ctx.sampler;
    let mut pending = PendingSamples::default();
    let t0 = Instant::now();
    let done = Arc::clone(&engine.control.done);
    let silence = tick_limit(interval);
    let mut last_msg = tokio::time::Instant::now();
    // Two deadlines: the engine must drain after Stop, and a Stop must follow
    // an engine that finished on its own (byte budget, error).
    let mut stop_deadline: Option<tokio::time::Instant> = None;
    let mut stopped = false;
    let mut engine_done: Option<f64> = None;
    // The point ends when the engine is done *and* the controller said Stop:
    // the controller sends its last Tick before Stop, but the data sockets
    // can report EOF before that Tick arrives on the control socket.
    let lost = loop {
        if stopped && engine_done.is_some() {
            break None;
        }
        tokio::select! {
            biased;
            m = rx.recv() => {
                last_msg = tokio::time::Instant::now();
                match m {
                    Some(Ok(Msg::Tick {})) => {
                        if let Err(e) = pending.request(sampler) {
                            warn!(target: "agent", "test with {}: interval missed: {e}", ctx.who);
                        }
                    }
                    Some(Ok(Msg::Stop {})) => {
                        engine.stop();
                        stopped = true;
                        if engine_done.is_none() { stop_deadline = Some(tokio::time::Instant::now() + DRAIN_TIMEOUT); }
                    }
                    Some(Ok(Msg::Failed { error, .. })) => { warn!(target: "agent", "test with {}: the controller failed: {error}", ctx.who); engine.abort(); stopped = true; }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => { engine.abort(); break Some(Ended::LostIn { when: "during the test", source: e }); }
                    None => { engine.abort(); break Some(Ended::Closed("during the test")); }
                }
            }
            Some(s) = pending.next() => {
                publish(ctx, &s);
                if let Err(e) = send(wr, Msg::Sample { sample: Box::new(s) }).await { engine.abort(); break Some(e); }
            }
            // The last worker thread to exit signals; nothing polls.
            _ = done.notified(), if engine_done.is_none() => {
                engine_done = Some(t0.elapsed().as_secs_f64());
                stop_deadline = (!stopped).then(|| tokio::time::Instant::now() + DRAIN_TIMEOUT);
            }
            _ = sleep_until_opt(stop_deadline) => {
                stop_deadline = None;
                if engine_done.is_some() { break None; } // no Stop came: finish anyway
                engine.abort();
            }
            // A controller that stops ticking (hung, or its host gone while
            // its kernel state lingers) must not hold the agent.
            _ = tokio::time::sleep_until(last_msg + silence), if !stopped => {
                engine.abort();
                break Some(Ended::Silent { secs: silence.as_secs() });
            }
        }
    };
    let duration_s = engine_done.unwrap_or_else(|| t0.elapsed().as_secs_f64());
    // Always close with a (possibly short) Sample, so the intervals add up to the totals.
    if lost.is_none() {
        let _ = pending.request(sampler);
        for s in pending.drain().await {
            publish(ctx, &s);
            let _ = send(
                wr,
                Msg::Sample {
                    sample: Box::new(s),
                },
            )
            .await;
        }
    }
    let result = finish(engine, sampler, duration_s).await;
    lost.map_or(Ok(result), Err)
}

/// Send to the controller; Err: the control connection is gone.
async fn send<W: AsyncWrite + Unpin>(wr: &mut SealedWriter<W>, m: Msg) -> Result<(), Ended> {
    wr.send(&m).await.map_err(Ended::Send)
}

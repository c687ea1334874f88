//! The packet engine as the session runs it: one [`Engine`] per end, the
//! setup exchange (the sink's [`SinkEnd`] and the generator's
//! [`GeneratorEnd`]), per-interval figures through an [`EngineProbe`], and
//! totals that let the controller tally loss per flow with both ends'
//! numbers.
//!
//! The order of a point, as `lab` runs it in one process, split over the
//! two hosts:
//!
//! * The sink end binds its sockets and attaches XDP *and starts its
//!   threads* when it is prepared — before the generator's host hears `Go` —
//!   so no frame arrives at an unbound queue. It counts nothing until
//!   frames come; the sampler's intervals are deltas.
//! * The generator end looks its interface up when it is prepared, opens
//!   its path (AF_XDP, TX ring or sockets, with fallbacks) when the sink's
//!   setup arrives — so a refused path, or frames too large for the link,
//!   is an error before `Go` — and starts sending when the session releases
//!   its workers, i.e. when both clocks run.
//! * On stop, the generator drains what it queued; the sink keeps reading
//!   until its counts stay still for [`QUIET`] (at most [`DRAIN_LIMIT`]),
//!   so frames in flight when the generator stopped are counted, not lost.
//!
//! One supervisor thread per end owns the running end; it is the engine's
//! only worker as far as the session is concerned, so the session's
//! stop/abort/done machinery applies unchanged.
//!
//! [`prepare_on_host`] prepares an end on the interface that routes to the
//! other end, from what the host tells ([`EngineHost`]): the route, the
//! interface's NUMA node, the counters along the packet path.
//!
//! [`EngineHost`]: crate::traffic::EngineHost

use super::figures::{counted, SinkInterval, SinkSnapshot};
use super::figures::{gen_interval, sink_interval, GenInterval, GenSnapshot, GenTotals};
use super::gen::{self, OpenedGenerator, PreparedGenerator, RunningGenerator};
use super::rx::{self, RunningSink, SinkTotals};
use super::spec::{default_cpus, GeneratorEnd, SinkEnd, SinkSpec};
use crate::traffic::limits::SpecError;
use crate::traffic::paths::PathOpener;
use crate::traffic::EngineSpecOps;
use crate::traffic::{
    spawn_worker, ConnRole, ConnSnapshot, Engine, EngineControl, EngineCounters, EngineError,
    EngineInterval, EngineProbe, EngineSetup, EngineTotals, RunningEngine, Side,
};
use crate::units::CpuId;
use serde::{Deserialize, Serialize};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The sink's counts must stay still this long after a stop before it ends.
pub const QUIET: Duration = Duration::from_millis(300);
/// The sink ends at the latest this long after a stop.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(3);

/// The sink end's figures of one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SinkLive {
    /// The interface it counts on.
    pub iface: String,
    /// The figures.
    pub figures: SinkInterval,
}

/// The generator end's figures of one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GenLive {
    /// The interface it sends on.
    pub iface: String,
    /// The figures.
    pub figures: GenInterval,
}

/// What the sink end reports at the end of a point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SinkEndTotals {
    /// Its setup answer (mode after fallbacks, link speed, refusals).
    pub end: SinkEnd,
    /// Counters when the point's clock started.
    pub first: SinkSnapshot,
    /// Counters after the drain.
    pub last: SinkSnapshot,
    /// Per flow, what it saw (None when its threads failed).
    pub seen: Option<SinkTotals>,
}

/// What the generator end reports at the end of a point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GenEndTotals {
    /// Its setup message.
    pub end: GeneratorEnd,
    /// Counters when it started sending.
    pub first: GenSnapshot,
    /// Counters after its threads drained.
    pub last: GenSnapshot,
    /// Frames sent per flow, the path that ran (None when it failed).
    pub totals: Option<GenTotals>,
}

/// One end of a packet test, prepared.
pub struct PacketEngine {
    spec: SinkSpec,
    end: PreparedEnd,
}

enum PreparedEnd {
    /// The sink, bound and already counting.
    Sink(Box<RunningSink>),
    /// The generator, before the sink's setup arrived.
    Gen(Box<PreparedGenerator>),
    /// The generator with its path open for the sink's end.
    Opened {
        gen: Box<OpenedGenerator>,
        end: GeneratorEnd,
    },
    /// The generator could not open its path (said by `connect`).
    Failed,
}

/// Prepare `side` of a packet test on `host`: on the interface that routes
/// to the other end's test address `toward` (its setup names it; else the
/// control peer's), with default pinning starting on the CPUs of that
/// interface's NUMA node.
pub fn prepare_on_host(
    spec: &SinkSpec,
    side: Side,
    toward: Option<std::net::IpAddr>,
    host: &dyn crate::traffic::EngineHost,
) -> Result<Box<dyn Engine>, EngineError> {
    let Some(target) = toward else {
        return Err(EngineError::Unsupported(format!(
            "the packet test cannot tell which interface leads to the other host (no address known; loopback addresses do not count): {}",
            super::spec::NEEDS_VETH
        )));
    };
    let Some(iface) = host.route_iface(target) else {
        return Err(EngineError::Unsupported(format!(
            "no interface of this host routes to {target}; the packet test sends on the interface that does (check ip route get {target})"
        )));
    };
    let node = host.nic_node_cpus(&iface);
    Ok(Box::new(PacketEngine::prepare(
        spec,
        side,
        &iface,
        &host.path_opener(),
        node.as_deref(),
    )?))
}

impl PacketEngine {
    /// Prepare `side` of `spec` on `iface` (in the calling thread's network
    /// namespace): the sink binds and starts counting, the generator looks
    /// its interface up. `node_cpus` are the CPUs of `iface`'s NUMA node
    /// (None: on no node), where default pinning starts.
    pub fn prepare(
        spec: &SinkSpec,
        side: Side,
        iface: &str,
        paths: &PathOpener,
        node_cpus: Option<&[CpuId]>,
    ) -> Result<Self, EngineError> {
        let spec = &with_default_cpus(spec, side, node_cpus);
        let end = if side == spec.sink_side() {
            PreparedEnd::Sink(Box::new(rx::prepare(spec, side, iface, paths)?.start()?))
        } else {
            PreparedEnd::Gen(Box::new(gen::prepare(spec, side, iface, paths)?))
        };
        Ok(PacketEngine {
            spec: spec.clone(),
            end,
        })
    }
}

/// `spec` with `side`'s CPUs chosen on this host when it has none and
/// default pinning is on: [`default_cpus`] over the CPUs this process may
/// use, those of the interface's NUMA node (`node`) first — the sink from
/// the lowest up, the generator from the highest down. The end says what
/// it chose in its setup.
fn with_default_cpus(spec: &SinkSpec, side: Side, node: Option<&[CpuId]>) -> SinkSpec {
    let mut s = spec.clone();
    if s.default_pinning && s.cpus_for(side).is_empty() {
        let usable = crate::traffic::sched::usable_cpus().unwrap_or_default();
        let sink = side == s.sink_side();
        s.set_cpus(side, default_cpus(&usable, node, s.queues, sink));
    }
    s
}

/// The spec a point ran with: CPU lists an end chose itself (default
/// pinning, said in its setup) filled in from the ends' totals, so the
/// summary names the sink's cores whoever chose them.
pub fn as_run<'a>(spec: &SinkSpec, totals: impl IntoIterator<Item = &'a EngineTotals>) -> SinkSpec {
    let mut s = spec.clone();
    for t in totals {
        let (side, cpus) = match t {
            EngineTotals::Sink(k) => (s.sink_side(), &k.end.cpus),
            EngineTotals::Generator(g) => (s.generator_side(), &g.end.cpus),
            _ => continue,
        };
        if s.cpus_for(side).is_empty() {
            s.set_cpus(side, cpus.clone());
        }
    }
    s
}

/// A unicast IPv4 address the flows can go to or come from.
pub fn is_test_address(ip: std::net::Ipv4Addr) -> bool {
    !(ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() || ip.is_loopback())
}

/// Check a sink's setup answer against the test (it came over the network;
/// whether the frames fit the link is the generator's check when it opens).
fn check_sink_end(s: &SinkEnd) -> Result<(), SpecError> {
    check_ip("sink", s.ip, "receive")?;
    check_mac("sink", &s.mac)?;
    if s.rx_queues == 0 || s.rx_queues > super::spec::MAX_QUEUES {
        return Err(SpecError::Invalid(format!(
            "the sink reports {} rx queues",
            s.rx_queues
        )));
    }
    Ok(())
}

/// Check a generator's setup message against the test.
fn check_gen_end(spec: &SinkSpec, g: &GeneratorEnd) -> Result<(), SpecError> {
    check_ip("generator", g.ip, "send")?;
    if g.flows != spec.flow_count() {
        return Err(SpecError::Invalid(format!(
            "the generator sends {} flows, the test has {}",
            g.flows,
            spec.flow_count()
        )));
    }
    check_mac("generator", &g.mac)
}

/// The address `who` sent: one it can `does` (receive or send) the flows with.
fn check_ip(who: &str, ip: std::net::Ipv4Addr, does: &str) -> Result<(), SpecError> {
    if is_test_address(ip) {
        return Ok(());
    }
    Err(SpecError::Invalid(format!(
        "the {who}'s address {ip} cannot {does} the flows"
    )))
}

/// The MAC address `who` (the sink or the generator) sent.
fn check_mac(who: &str, mac: &str) -> Result<(), SpecError> {
    match mac.parse::<super::frame::Mac>() {
        Ok(_) => Ok(()),
        Err(_) => Err(SpecError::Invalid(format!(
            "the {who}'s MAC address '{mac}' is not one"
        ))),
    }
}

impl Engine for PacketEngine {
    fn setup(&self) -> Option<EngineSetup> {
        match &self.end {
            PreparedEnd::Sink(sink) => Some(EngineSetup::Sink(sink.end().clone())),
            PreparedEnd::Gen(gen) => Some(EngineSetup::Generator(gen.end())),
            PreparedEnd::Opened { end, .. } => Some(EngineSetup::Generator(end.clone())),
            PreparedEnd::Failed => None,
        }
    }

    fn connect(&mut self, peer: Option<EngineSetup>) -> Result<(), EngineError> {
        let bad = |m: String| Err(EngineError::Unsupported(m));
        match (std::mem::replace(&mut self.end, PreparedEnd::Failed), peer) {
            (PreparedEnd::Sink(mut sink), Some(EngineSetup::Generator(g))) => {
                let checked = check_gen_end(&self.spec, &g);
                // Only now does the XDP program know whose frames to take.
                let told = checked.is_ok().then(|| sink.set_generator(g.ip));
                self.end = PreparedEnd::Sink(sink);
                checked.or_else(|e| bad(e.to_string()))?;
                told.transpose()?;
                Ok(())
            }
            (PreparedEnd::Gen(gen), Some(EngineSetup::Sink(s))) => {
                if let Err(e) = check_sink_end(&s) {
                    return bad(e.to_string());
                }
                let end = gen.end();
                let opened = gen.open(&s)?;
                self.end = PreparedEnd::Opened {
                    gen: Box::new(opened),
                    end,
                };
                Ok(())
            }
            (end, peer) => {
                self.end = end;
                match peer {
                    None => bad("the other end of the packet test sent no setup (an older wirescope?); run the same version on both hosts".into()),
                    Some(other) => bad(format!(
                        "the other end of the packet test sent a setup that does not fit this end: {other:?}"
                    )),
                }
            }
        }
    }

    fn start(self: Box<Self>, _conns: Vec<TcpStream>) -> Result<RunningEngine, EngineError> {
        let PacketEngine { spec, end } = *self;
        let control = EngineControl::gated();
        let shared = Arc::new(Shared {
            spec: spec.clone(),
            state: Mutex::new(State::default()),
        });
        let (name, roles, job): (&str, _, Job) = match end {
            PreparedEnd::Sink(sink) => {
                let sink = Arc::new(*sink);
                let first = sink.snapshot();
                // One row (and role) per socket the sink reads: every rx
                // queue of the interface, whatever the thread count.
                let rows = first.queues.len();
                {
                    let mut st = shared.lock();
                    st.iface = sink.end().iface.clone();
                    st.prev = Some(Snap::Sink(first.clone()));
                    st.first = Some(Snap::Sink(first));
                    st.end = Some(EndInfo::Sink(sink.end().clone()));
                    st.sink = Some(Arc::clone(&sink));
                }
                let (sh, c) = (Arc::clone(&shared), control.clone());
                (
                    "ws-sink-main",
                    vec![ConnRole::Receiver; rows],
                    Box::new(move || supervise_sink(&sh, &c, sink)),
                )
            }
            PreparedEnd::Opened { gen, end } => {
                {
                    let mut st = shared.lock();
                    st.iface = end.iface.clone();
                    st.end = Some(EndInfo::Gen(end));
                }
                let (sh, c) = (Arc::clone(&shared), control.clone());
                (
                    "ws-gen-main",
                    vec![ConnRole::Sender; spec.queues as usize],
                    Box::new(move || supervise_gen(&sh, &c, *gen)),
                )
            }
            PreparedEnd::Gen(_) | PreparedEnd::Failed => {
                return Err(EngineError::Unsupported(
                    "the packet generator started before the sink's setup arrived".into(),
                ))
            }
        };
        let thread = spawn_worker(name.into(), None, &control, job)?;
        Ok(RunningEngine {
            threads: vec![thread],
            counters: Arc::new(EngineCounters::new(0, 0)),
            sockets: Vec::new(),
            control,
            roles,
            probe: Some(shared),
        })
    }
}

/// What the supervisor thread runs.
type Job = Box<dyn FnOnce() -> Result<(), EngineError> + Send>;

/// A counter snapshot of either end.
#[derive(Debug, Clone)]
enum Snap {
    Sink(SinkSnapshot),
    Gen(GenSnapshot),
}

#[derive(Debug, Clone)]
enum EndInfo {
    Sink(SinkEnd),
    Gen(GeneratorEnd),
}

#[derive(Default)]
struct State {
    iface: String,
    end: Option<EndInfo>,
    /// The running end (the supervisor holds the other reference); the
    /// sampler reads it without holding the lock.
    sink: Option<Arc<RunningSink>>,
    gen: Option<Arc<RunningGenerator>>,
    first: Option<Snap>,
    /// Taken by the last `counters()` call, consumed by `interval()`.
    cur: Option<Snap>,
    prev: Option<Snap>,
    /// After the end stopped: its last counters.
    last: Option<Snap>,
    sink_totals: Option<SinkTotals>,
    gen_totals: Option<GenTotals>,
}

/// What the supervisor and the sampler share.
struct Shared {
    spec: SinkSpec,
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The counters now: the running end's (read outside the lock: a
    /// snapshot reads host files), else the last ones.
    fn snap(&self) -> Option<Snap> {
        let (sink, gen, done) = {
            let st = self.lock();
            (
                st.sink.clone(),
                st.gen.clone(),
                st.last.clone().or_else(|| st.first.clone()),
            )
        };
        if let Some(s) = sink {
            return Some(Snap::Sink(s.snapshot()));
        }
        if let Some(g) = gen {
            return Some(Snap::Gen(g.snapshot()));
        }
        done
    }
}

/// The sink counts L2 bytes of frames as received bytes, the generator as
/// sent bytes, one row per queue/thread: the figures every engine has.
fn conn_rows(snap: &Snap, spec: &SinkSpec) -> Vec<ConnSnapshot> {
    let fs = u64::from(spec.frame_size);
    match snap {
        Snap::Sink(s) => s
            .queues
            .iter()
            .map(|q| {
                let n = counted(q, s.mode);
                ConnSnapshot {
                    rx_bytes: n.saturating_mul(fs),
                    messages: n,
                    ..Default::default()
                }
            })
            .collect(),
        Snap::Gen(g) => g
            .threads
            .iter()
            .map(|t| ConnSnapshot {
                tx_bytes: t.sent.saturating_mul(fs),
                messages: t.sent,
                ..Default::default()
            })
            .collect(),
    }
}

impl EngineProbe for Shared {
    fn counters(&self) -> Option<Vec<ConnSnapshot>> {
        let snap = self.snap()?;
        let rows = conn_rows(&snap, &self.spec);
        self.lock().cur = Some(snap);
        Some(rows)
    }

    fn interval(&self, _secs: f64) -> Option<EngineInterval> {
        let taken = self.lock().cur.take();
        let cur = match taken {
            Some(c) => c,
            None => self.snap()?,
        };
        let mut st = self.lock();
        let speed = match &st.end {
            Some(EndInfo::Sink(s)) => s.speed_mbps,
            _ => None,
        };
        let iface = st.iface.clone();
        let prev = st.prev.replace(cur.clone())?;
        drop(st);
        let fs = self.spec.frame_size;
        match (prev, cur) {
            (Snap::Sink(a), Snap::Sink(b)) => Some(EngineInterval::Sink(Box::new(SinkLive {
                iface,
                figures: sink_interval(&a, &b, fs, speed),
            }))),
            (Snap::Gen(a), Snap::Gen(b)) => Some(EngineInterval::Generator(Box::new(GenLive {
                iface,
                figures: gen_interval(&a, &b, fs, speed),
            }))),
            _ => None,
        }
    }

    fn totals(&self) -> Option<EngineTotals> {
        let last = self.snap();
        let st = self.lock();
        match (&st.end, st.first.clone(), last) {
            (Some(EndInfo::Sink(end)), Some(Snap::Sink(first)), Some(Snap::Sink(last))) => {
                Some(EngineTotals::Sink(Box::new(SinkEndTotals {
                    end: end.clone(),
                    first,
                    last,
                    seen: st.sink_totals.clone(),
                })))
            }
            (Some(EndInfo::Gen(end)), Some(Snap::Gen(first)), Some(Snap::Gen(last))) => {
                Some(EngineTotals::Generator(Box::new(GenEndTotals {
                    end: end.clone(),
                    first,
                    last,
                    totals: st.gen_totals.clone(),
                })))
            }
            _ => None,
        }
    }
}

/// The only owner of `a` once the sampler let go of the clone it reads
/// (it holds one for the length of a snapshot, never longer).
fn sole<T>(mut a: Arc<T>) -> T {
    loop {
        match Arc::try_unwrap(a) {
            Ok(v) => return v,
            Err(back) => {
                a = back;
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
}

fn supervise_sink(
    sh: &Shared,
    control: &EngineControl,
    sink: Arc<RunningSink>,
) -> Result<(), EngineError> {
    // It counts until stopped — or, when it reads with threads, until they
    // end (an error). The xdp mode has no threads: the kernel counts.
    let workers = sink.control().clone();
    let threads = sink.has_threads();
    while !control.stopping() && (!threads || workers.running.load(Ordering::Acquire) > 0) {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Count what is still in flight: until the queues are quiet.
    let moved =
        (!control.aborted()).then(|| sink.drain(None, QUIET, DRAIN_LIMIT, &|| control.aborted()));
    if control.aborted() {
        sink.abort();
    } else {
        sink.stop();
    }
    {
        let mut last = sink.snapshot();
        let mut st = sh.lock();
        // The quiet tail of the drain is waiting, not receiving: the last
        // interval (and the sink's window) ends when the counts last moved.
        if let Some(at) = moved {
            // Not before a snapshot the sampler already took (its last
            // interval's end, or one it holds for the next).
            let floor = [&st.prev, &st.cur]
                .into_iter()
                .filter_map(|s| match s {
                    Some(Snap::Sink(p)) => Some(p.elapsed_s),
                    _ => None,
                })
                .fold(0.0, f64::max);
            last.elapsed_s = last.elapsed_s.min(at.max(floor));
        }
        st.last = Some(Snap::Sink(last));
        st.sink = None;
    }
    // Joining detaches the XDP program (the sink's threads closed their sockets first).
    let totals = sole(sink).join()?;
    sh.lock().sink_totals = Some(totals);
    Ok(())
}

fn supervise_gen(
    sh: &Shared,
    control: &EngineControl,
    gen: OpenedGenerator,
) -> Result<(), EngineError> {
    if control.aborted() {
        return Ok(());
    }
    let running = Arc::new(gen.start()?);
    let workers = running.control().clone();
    {
        let mut first = running.snapshot();
        // A thread that has not yet said who it is has run for no time.
        for t in &mut first.threads {
            t.cpu_ns.get_or_insert(0);
        }
        let mut st = sh.lock();
        st.prev = Some(Snap::Gen(first.clone()));
        st.first = Some(Snap::Gen(first));
        st.gen = Some(Arc::clone(&running));
    }
    // It sends until stopped, or until its threads end (an error).
    while !control.stopping() && workers.running.load(Ordering::Acquire) > 0 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let last_read = running.snapshot();
    sh.lock().last = Some(Snap::Gen(last_read));
    sh.lock().gen = None;
    let (totals, last) = sole(running).finish(control.aborted())?;
    let mut st = sh.lock();
    st.last = Some(Snap::Gen(last));
    st.gen_totals = Some(totals);
    Ok(())
}

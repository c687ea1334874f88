//! The controller end: connects to an agent, runs test points, and publishes
//! the Samples of both hosts as [`RunEvent`]s.
//!
//! Per point: `Start` → `Accepting{port}` → open the data connections →
//! `DataReady` → start the local engine → `Go`; then, on every tick of the
//! controller's interval clock, ask the local sampler thread for a Sample and
//! send `Tick` to the agent, relay the agent's Samples, and stop at the time
//! limit (or when the byte budget is spent, or on cancel) with `Stop` →
//! `Finished`. Samples of both hosts are paired by interval index
//! (`session::pairing`); each keeps its own measured span.
//!
//! A silent agent is lost only when the kernel says so: the connection
//! failed (keepalive, `TCP_USER_TIMEOUT`, reset) or its kernel stopped
//! acknowledging; an agent whose kernel acknowledges is busy, not gone, and is
//! waited for up to [`HUNG_LIMIT`].

use super::auth::Token;
use super::channel::{spawn_sealed_reader, Direction, SealedWriter, SessionKeys};
use super::outcome::{EndReason, PointOutcome, RunEvent};
use super::pairing::Pairing;
use super::plan::PointParams;
use super::point::{finish, sleep_until_opt, PendingSamples, DRAIN_TIMEOUT, SETUP_TIMEOUT};
use super::proto::{
    read_msg_max, write_msg, DataHello, Msg, ProtoError, SideResult, TestParams,
    MAX_HANDSHAKE_FRAME, PROTOCOL_VERSION,
};
use crate::probe::ebpf::{EbpfHosts, EbpfIface, EbpfMode};
use crate::probe::live_host::LiveHost;
use crate::probe::sample::HostRole;
use crate::probe::sampler::thread::{SamplerError, SamplerThread};
use crate::probe::sampler::EngineView;
use crate::probe::system::HostInfo;
use crate::traffic::{EngineError, EngineSpec, RunningEngine, Side};
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Longest silence of an agent whose kernel still acknowledges (hung, not gone).
/// How long the agent may take to answer a tuning request.
const TUNE_TIMEOUT: Duration = Duration::from_secs(60);

pub const HUNG_LIMIT: Duration = Duration::from_secs(120);

/// Where the agent is.
#[derive(Debug, Clone)]
pub enum Target {
    /// A remote agent: control and data on this address.
    Tcp(SocketAddr),
    /// A local agent: control over a unix socket, data to `data_ip`.
    Unix {
        /// Control socket path.
        path: PathBuf,
        /// Address of the agent's data listener.
        data_ip: IpAddr,
        /// The local pair's veth (None on loopback): sized for each point.
        veth: Option<super::netns::VethPair>,
    },
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Tcp(a) => write!(f, "{a}"),
            Target::Unix { path, data_ip, .. } => {
                write!(f, "{} (data via {data_ip})", path.display())
            }
        }
    }
}

/// Session failures.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Control channel problem.
    #[error("{target}: {source}")]
    Proto {
        /// The agent.
        target: String,
        /// What happened.
        #[source]
        source: ProtoError,
    },
    /// Could not connect the control channel.
    #[error("cannot connect to the agent at {target}: {source}; is `wirescope agent` running there and the port open?")]
    Connect {
        /// The agent.
        target: String,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// A data connection failed.
    #[error("data connection {index} of {count} to {addr}: {source}; check that TCP port {port} on the agent is reachable and that this host has file descriptors to spare (ulimit -n)", port = addr.port())]
    Data {
        /// Index.
        index: usize,
        /// How many the point needs.
        count: usize,
        /// Agent data address.
        addr: SocketAddr,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// The local engine failed to start.
    #[error("local engine: {0}")]
    Engine(EngineError),
    /// The test as asked cannot run on these hosts (a CPU one does not
    /// have, more threads than the sink's queues, frames above the MTU):
    /// a usage error, one line that says what to change.
    #[error("{0}")]
    Usage(String),
    /// The local sampler thread failed.
    #[error("local sampler: {0}")]
    Sampler(#[from] SamplerError),
    /// The agent reported a failure.
    #[error("the agent failed: {0}")]
    Peer(String),
    /// This host cannot run the test (memory, descriptors, limits).
    #[error("this host cannot run the test: {0}")]
    Local(String),
}

impl From<EngineError> for SessionError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Usage(m) => SessionError::Usage(m),
            EngineError::Preflight(p) => SessionError::Usage(p.to_string()),
            e => SessionError::Engine(e),
        }
    }
}

impl SessionError {
    /// True when the agent refused because it serves another controller.
    pub fn is_busy(&self) -> bool {
        matches!(self, SessionError::Proto { source: ProtoError::Refused(r), .. } if r.starts_with("busy"))
    }

    /// True for a usage error: the command line must change (exit 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, SessionError::Usage(_))
    }
}

/// What the agent's `Failed` means for this side.
fn peer_failed(error: String, usage: bool) -> SessionError {
    if usage {
        SessionError::Usage(error)
    } else {
        SessionError::Peer(error)
    }
}

/// A connected, authenticated controller.
pub struct Controller {
    rx: mpsc::Receiver<Result<Msg, ProtoError>>,
    wr: SealedWriter<Box<dyn AsyncWrite + Unpin + Send>>,
    /// The session's keys (data connections are tagged with them).
    keys: std::sync::Arc<SessionKeys>,
    reader: tokio::task::JoinHandle<()>,
    /// The agent's identity.
    pub peer: HostInfo,
    target: Target,
    data_ip: IpAddr,
    /// A duplicate of the TCP control socket, to ask the kernel whether the
    /// agent's host still acknowledges (None over a unix socket).
    link: Option<TcpStream>,
    sampler: SamplerThread,
    next_id: u64,
    /// The peer's interfaces this host's eBPF probes count (local pair).
    shared_ebpf: Vec<String>,
    /// The agent's interfaces when it runs on this kernel (the local pair):
    /// what it watches when no data connection shows it the route.
    same_kernel_ifaces: Vec<String>,
    /// Set from `Start` until a point ends cleanly: after an unclean end the
    /// agent may still send messages of the old point, so the connection is
    /// not reused.
    poisoned: bool,
    /// The local pair's veth MTU now (sized for each point).
    veth_mtu: u32,
}

type Halves = (
    Box<dyn AsyncRead + Unpin + Send>,
    Box<dyn AsyncWrite + Unpin + Send>,
    IpAddr,
    Option<TcpStream>,
);

async fn open(target: &Target) -> Result<Halves, SessionError> {
    let t = target.to_string();
    let connect_err = |source| SessionError::Connect {
        target: t.clone(),
        source,
    };
    match target {
        Target::Tcp(addr) => {
            let s = tokio::time::timeout(SETUP_TIMEOUT, tokio::net::TcpStream::connect(addr))
                .await
                .map_err(|_| connect_err(std::io::ErrorKind::TimedOut.into()))?
                .map_err(connect_err)?;
            let _ = s.set_nodelay(true);
            let _ = super::net::keep_alive(&s);
            let std = s.into_std().map_err(connect_err)?;
            let link = std.try_clone().ok();
            let s = tokio::net::TcpStream::from_std(std).map_err(connect_err)?;
            let (r, w) = s.into_split();
            Ok((Box::new(r), Box::new(w), addr.ip(), link))
        }
        Target::Unix { path, data_ip, .. } => {
            let s = tokio::net::UnixStream::connect(path)
                .await
                .map_err(connect_err)?;
            let (r, w) = s.into_split();
            Ok((Box::new(r), Box::new(w), *data_ip, None))
        }
    }
}

impl Controller {
    /// Connect and authenticate.
    pub async fn connect(target: Target, token: &Token) -> Result<Self, SessionError> {
        let (mut rd, mut wr, data_ip, link) = open(&target).await?;
        let t = target.to_string();
        let proto = |source| SessionError::Proto {
            target: t.clone(),
            source,
        };
        let (peer, keys) = tokio::time::timeout(SETUP_TIMEOUT, handshake(&mut rd, &mut wr, token))
            .await
            .map_err(|_| proto(ProtoError::Timeout("the agent's handshake")))?
            .map_err(proto)?;
        let opener = keys.opener(Direction::ToController);
        let wr = SealedWriter::new(wr, keys.sealer(Direction::ToAgent));
        let (tx, rx) = mpsc::channel(64);
        let reader = spawn_sealed_reader(rd, opener, tx);
        let sampler = SamplerThread::of("ws-sampler", Box::new(LiveHost::default()))
            .map_err(|e| SessionError::Sampler(SamplerError::Spawn(e)))?;
        Ok(Controller {
            rx,
            wr,
            keys: std::sync::Arc::new(keys),
            reader,
            peer,
            target,
            data_ip,
            link,
            sampler,
            next_id: 0,
            shared_ebpf: Vec::new(),
            same_kernel_ifaces: Vec::new(),
            poisoned: false,
            veth_mtu: super::netns::DEFAULT_MTU,
        })
    }

    /// Choose the eBPF probe set of both hosts for this session and load it
    /// now (so the log header can say what runs). `ifaces` are this host's
    /// extra interfaces (`--iface`). `same_kernel` lists the peer's
    /// interfaces when the agent runs on this very kernel (the local pair):
    /// then one set here counts for both, the agent attaches nothing, and
    /// the peer's share moves into its Samples. Returns each host's status.
    pub async fn configure_ebpf(
        &mut self,
        mode: EbpfMode,
        ifaces: &[String],
        same_kernel: Vec<EbpfIface>,
    ) -> Result<EbpfHosts, SessionError> {
        crate::probe::system::check_ifaces(ifaces)
            .map_err(|e| SessionError::Local(format!("--iface: {e}")))?;
        let shared = mode != EbpfMode::Off && !same_kernel.is_empty();
        let agent_mode = if shared { EbpfMode::ByPeer } else { mode };
        self.wr
            .send(&Msg::Configure { ebpf: agent_mode })
            .await
            .map_err(|e| self.proto(e))?;
        let peer_names: Vec<String> = same_kernel.iter().map(|i| i.name.clone()).collect();
        // Mode first, then interfaces: the probes load once.
        self.sampler
            .set_ebpf(mode, if shared { same_kernel } else { Vec::new() })?;
        let local = self
            .sampler
            .set_ifaces(self.local_ifaces(ifaces))
            .await?
            .map(|mut s| {
                s.ifaces.retain(|i| !peer_names.contains(i));
                s
            });
        let Msg::Configured { ebpf: mut peer } =
            self.expect_kind("configured", SETUP_TIMEOUT).await?
        else {
            unreachable!("expect_kind checked the kind")
        };
        self.shared_ebpf.clear();
        self.same_kernel_ifaces = peer_names.clone();
        if let (true, Some(l)) = (shared, local.as_ref()) {
            // The peer's probes are this host's: same status, its interfaces.
            let mut p = l.clone();
            if l.off.is_none() {
                p.ifaces = peer_names.clone();
                self.shared_ebpf = peer_names;
            }
            peer = Some(p);
        }
        Ok(EbpfHosts { local, peer })
    }

    /// The interfaces the agent watches besides the route back to this host:
    /// `--peer-iface`, and when observing the local pair without traffic (no
    /// data connection shows the agent the route), its end of the veth.
    fn peer_ifaces(&self, p: &PointParams) -> Vec<String> {
        let mut ifaces = p.peer_ifaces.clone();
        if p.spec.is_none() {
            for n in &self.same_kernel_ifaces {
                if !ifaces.contains(n) {
                    ifaces.push(n.clone());
                }
            }
        }
        ifaces
    }

    /// The interfaces this host watches: the route to the agent, then `extra`.
    fn local_ifaces(&self, extra: &[String]) -> Vec<String> {
        let mut ifaces: Vec<String> = crate::probe::system::route_iface(self.data_ip)
            .into_iter()
            .collect();
        ifaces.extend(extra.iter().cloned());
        ifaces
    }

    /// Tell the agent this idle session is still wanted (call at least every
    /// [`PING_EVERY`](super::proto::PING_EVERY) between tests; the agent drops
    /// a session silent for [`IDLE_LIMIT`](super::proto::IDLE_LIMIT)).
    pub async fn ping(&mut self) -> Result<(), SessionError> {
        self.wr.send(&Msg::Ping {}).await.map_err(|e| self.proto(e))
    }

    /// True when the agent is the embedded local pair's (a unix socket).
    pub fn is_local_pair(&self) -> bool {
        matches!(self.target, Target::Unix { .. })
    }

    /// The agent's data address (what `@route` resolves towards on this host).
    pub fn data_ip(&self) -> IpAddr {
        self.data_ip
    }

    /// Read or change the agent host's settings (between tests); the
    /// agent's answer, [`TuneResponse::Refused`] when it was started
    /// without `--allow-tuning`.
    ///
    /// [`TuneResponse::Refused`]: crate::tune::peer::TuneResponse::Refused
    pub async fn tune(
        &mut self,
        req: crate::tune::peer::TuneRequest,
    ) -> Result<crate::tune::peer::TuneResponse, SessionError> {
        self.wr
            .send(&Msg::Tune { req: Box::new(req) })
            .await
            .map_err(|e| self.proto(e))?;
        // Ring and channel changes can take the driver a while.
        let Msg::Tuned { resp } = self.expect_kind("tuned", TUNE_TIMEOUT).await? else {
            unreachable!("expect_kind checked the kind")
        };
        Ok(*resp)
    }

    /// Say goodbye and close.
    pub async fn close(mut self) {
        let _ = self.wr.send(&Msg::Bye {}).await;
        self.reader.abort();
    }

    /// Send one control message (sealed).
    pub(super) async fn send_msg(&mut self, m: &Msg) -> Result<(), SessionError> {
        self.wr.send(m).await.map_err(|e| self.proto(e))
    }

    /// The next control message from the agent, however long it takes.
    pub(super) async fn recv_msg(&mut self) -> Result<Msg, SessionError> {
        match self.rx.recv().await {
            None => Err(self.proto(ProtoError::Closed)),
            Some(Err(e)) => Err(self.proto(e)),
            Some(Ok(m)) => Ok(m),
        }
    }

    /// A protocol error on this connection, naming the agent.
    pub(super) fn proto(&self, source: ProtoError) -> SessionError {
        SessionError::Proto {
            target: self.target.to_string(),
            source,
        }
    }

    /// The agent's next message, which must be a `what` within `limit`
    /// (its `Failed` is the error it names).
    async fn expect_kind(
        &mut self,
        what: &'static str,
        limit: Duration,
    ) -> Result<Msg, SessionError> {
        match tokio::time::timeout(limit, self.rx.recv()).await {
            Err(_) => Err(self.proto(ProtoError::Timeout(what))),
            Ok(None) => Err(self.proto(ProtoError::Closed)),
            Ok(Some(Err(e))) => Err(self.proto(e)),
            Ok(Some(Ok(Msg::Failed { error, usage }))) => Err(peer_failed(error, usage)),
            Ok(Some(Ok(m))) if m.kind() == what => Ok(m),
            Ok(Some(Ok(m))) => Err(self.proto(ProtoError::Unexpected {
                expected: what,
                got: m.kind(),
            })),
        }
    }

    async fn fail(&mut self, error: String) {
        let _ = self
            .wr
            .send(&Msg::Failed {
                error,
                usage: false,
            })
            .await;
    }

    /// After this side failed a point whose agent opens no data connections:
    /// the agent's one answer to `Accepting`'s aftermath (`DataReady`, or its
    /// own `Failed`) is read, so the next point starts on a quiet channel.
    /// False when it does not come in time.
    async fn settle_after_failed(&mut self) -> bool {
        let answer = tokio::time::timeout(SETUP_TIMEOUT, self.rx.recv()).await;
        matches!(answer, Ok(Some(Ok(Msg::DataReady {} | Msg::Failed { .. }))))
    }

    /// Run one point. Setup failures are errors; anything after `Go` ends up in the outcome.
    pub async fn run_point(
        &mut self,
        p: &PointParams,
        events: &mpsc::Sender<RunEvent>,
        cancel: &CancellationToken,
    ) -> Result<PointOutcome, SessionError> {
        if self.poisoned {
            return Err(SessionError::Peer("the previous test point on this connection ended uncleanly; reconnect to the agent".into()));
        }
        self.next_id += 1;
        check_local(p)?;
        self.size_veth(p).await?;
        let mut engine = prepare_local(p, self.data_ip).await?;
        let test_id = self.next_id;
        let data_port = self.start_on_agent(p, engine.as_mut(), test_id).await?;
        let conns = self.open_data(p, data_port, test_id).await?;
        let mut engine = self.go(p, engine, conns).await?;
        let run = self.drive(p, &engine, events, cancel).await;
        Ok(self.conclude(&mut engine, run).await)
    }

    /// Start: send the point to the agent, take its data port and setup,
    /// and complete this side's setup with it (a failure tells the agent).
    async fn start_on_agent(
        &mut self,
        p: &PointParams,
        engine: Option<&mut Box<dyn crate::traffic::Engine>>,
        test_id: u64,
    ) -> Result<u16, SessionError> {
        let test = TestParams {
            id: test_id,
            spec: p.spec.clone(),
            interval_ms: u64::try_from(p.interval.as_millis()).unwrap_or(u64::MAX),
            omit_ms: u64::try_from(p.omit.as_millis()).unwrap_or(u64::MAX),
            ifaces: self.peer_ifaces(p),
            setup: engine.as_ref().and_then(|e| e.setup()),
            later: p.later.clone(),
        };
        // Until Start goes out the connection carries nothing of this point:
        // any error above leaves it ready for the next one.
        self.poisoned = true;
        self.wr
            .send(&Msg::Start { test })
            .await
            .map_err(|e| self.proto(e))?;
        let accepting = self.expect_kind("accepting", SETUP_TIMEOUT).await;
        // The agent refused the test as asked before preparing anything:
        // the connection carries nothing of it, and can run the next test.
        if let Err(e) = &accepting {
            self.poisoned = !e.is_usage();
        }
        let Msg::Accepting { data_port, setup } = accepting? else {
            unreachable!("expect_kind checked the kind")
        };
        if let Some(e) = engine {
            if let Err(err) = e.connect(setup) {
                self.fail(format!("controller engine: {err}")).await;
                let err = SessionError::from(err);
                // The agent ends its side when it reads Failed. With data
                // connections to wait for it is still collecting them and
                // sends nothing more; without any (packet, RDMA tests) it has
                // already answered DataReady (or failed): read that answer.
                let clean = p.spec.as_ref().is_none_or(|s| s.connection_count() > 0)
                    || self.settle_after_failed().await;
                self.poisoned = !(err.is_usage() && clean);
                return Err(err);
            }
        }
        Ok(data_port)
    }

    /// Open the point's data connections to the agent's data port (a
    /// failure tells the agent), then wait for its DataReady.
    async fn open_data(
        &mut self,
        p: &PointParams,
        data_port: u16,
        test_id: u64,
    ) -> Result<Vec<TcpStream>, SessionError> {
        let addr = SocketAddr::new(self.data_ip, data_port);
        let spec = p.spec.clone();
        let keys = std::sync::Arc::clone(&self.keys);
        let conns = tokio::task::spawn_blocking(move || match spec {
            Some(spec) => connect_data(&spec, addr, &keys, test_id),
            None => Ok(Vec::new()),
        })
        .await
        .map_err(|e| SessionError::Peer(format!("data connection task failed: {e}")))
        .and_then(|r| r);
        if let Err(e) = &conns {
            self.fail(e.to_string()).await;
        }
        let conns = conns?;
        self.expect_kind("data_ready", SETUP_TIMEOUT).await?;
        Ok(conns)
    }

    /// Go: both ends start their engines and clocks at once; the workers
    /// are released once the sampler runs.
    async fn go(
        &mut self,
        p: &PointParams,
        engine: Option<Box<dyn crate::traffic::Engine>>,
        conns: Vec<TcpStream>,
    ) -> Result<RunningEngine, SessionError> {
        // Everything slow happens before Go; after it, both ends start their
        // engines and clocks at once (the agent on receipt of Go).
        self.sampler
            .set_ifaces(self.local_ifaces(&p.ifaces))
            .await?;
        self.wr.send(&Msg::Go {}).await.map_err(|e| self.proto(e))?;
        let started = engine.map_or_else(|| Ok(RunningEngine::idle()), |e| e.start(conns));
        let engine = match started {
            Ok(e) => e,
            Err(e) => {
                self.fail(format!("controller engine: {e}")).await;
                return Err(e.into());
            }
        };
        let view = EngineView::of(&engine);
        self.sampler.begin(view, p.omit, p.interval).await?;
        // Every worker exists and the clock runs: let them go at once.
        engine.release();
        Ok(engine)
    }

    /// Join this side's engine and say how the point ended: an engine error
    /// on either side turns a completed point into a failed one.
    async fn conclude(&mut self, engine: &mut RunningEngine, run: Driven) -> PointOutcome {
        let mut local = finish(engine, &self.sampler, run.local_done_s).await;
        let mut end = run.end;
        if let (EndReason::Completed, Some(e)) = (&end, &local.error) {
            end = EndReason::Failed(format!("local engine: {e}"));
        }
        if let (EndReason::Completed, Some(e)) =
            (&end, run.peer.as_ref().and_then(|r| r.error.as_ref()))
        {
            end = EndReason::Failed(format!("agent engine: {e}"));
        }
        local.duration_s = run.local_done_s;
        self.poisoned = !(end.clean() && run.peer.is_some());
        PointOutcome {
            local,
            peer: run.peer,
            end,
        }
    }

    /// On the local pair: give the veth the MTU this point needs (a packet
    /// test's frames, else the default) before either end looks at it.
    async fn size_veth(&mut self, p: &PointParams) -> Result<(), SessionError> {
        let Target::Unix {
            veth: Some(veth), ..
        } = &self.target
        else {
            return Ok(());
        };
        let mtu = super::netns::mtu_for(p.spec.as_ref());
        if mtu == self.veth_mtu {
            return Ok(());
        }
        let veth = veth.clone();
        tokio::task::spawn_blocking(move || veth.set_mtu(mtu))
            .await
            .map_err(|e| SessionError::Local(format!("the veth MTU task failed: {e}")))?
            .map_err(|e| {
                SessionError::Local(format!(
                    "cannot set the local pair's veth MTU to {mtu}: {e}"
                ))
            })?;
        self.veth_mtu = mtu;
        Ok(())
    }

    /// The running point: ticks, the agent's messages, stop and drain.
    async fn drive(
        &mut self,
        p: &PointParams,
        engine: &RunningEngine,
        events: &mpsc::Sender<RunEvent>,
        cancel: &CancellationToken,
    ) -> Driven {
        let t0 = Instant::now();
        let mut pairs = Pairing::new(self.shared_ebpf.clone());
        let mut pending = PendingSamples::default();
        let now = tokio::time::Instant::now();
        let mut ticker = tokio::time::interval_at(now + p.interval, p.interval);
        // After a stall, keep the period instead of bursting short intervals.
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let time_limit = p.time.and_then(|t| now.checked_add(t));
        let silence_limit = p
            .interval
            .saturating_mul(2)
            .saturating_add(Duration::from_secs(1));
        let mut last_peer = Instant::now();
        let mut stop_deadline: Option<tokio::time::Instant> = None;
        let mut local_done: Option<f64> = None;
        let mut peer_result: Option<SideResult> = None;
        let mut end = EndReason::Completed;
        let done = std::sync::Arc::clone(&engine.control.done);
        while local_done.is_none() || peer_result.is_none() {
            tokio::select! {
                _ = ticker.tick(), if stop_deadline.is_none() => {
                    if let Err(e) = pending.request(&self.sampler) {
                        end = EndReason::Failed(format!("local sampler: {e}"));
                        engine.abort();
                        break;
                    }
                    if let Err(e) = self.wr.send(&Msg::Tick {}).await {
                        end = EndReason::PeerLost(e.to_string());
                        engine.abort();
                        break;
                    }
                    if let Some(why) = self.lost(last_peer.elapsed(), silence_limit) {
                        end = EndReason::PeerLost(why);
                        engine.abort();
                        break;
                    }
                    if p.time.is_some_and(|t| t0.elapsed().saturating_add(Duration::from_millis(5)) >= t) {
                        stop_deadline = Some(self.begin_stop(engine).await);
                    }
                }
                Some(s) = pending.next() => pairs.local(s, events).await,
                m = self.rx.recv() => {
                    last_peer = Instant::now();
                    match m {
                        Some(Ok(Msg::Sample { mut sample })) => { sample.host = HostRole::Peer; pairs.peer(*sample, events).await; }
                        Some(Ok(Msg::Finished { result })) => peer_result = Some(result),
                        Some(Ok(Msg::Failed { error, .. })) => { end = EndReason::Failed(format!("the agent failed: {error}")); engine.abort(); break; }
                        Some(Ok(_)) => {}
                        Some(Err(e)) => { end = EndReason::PeerLost(e.to_string()); engine.abort(); break; }
                        None => { end = EndReason::PeerLost(ProtoError::Closed.to_string()); engine.abort(); break; }
                    }
                }
                // The last local worker to exit signals (byte budget spent, error, or after stop).
                _ = done.notified(), if local_done.is_none() => {
                    local_done = Some(t0.elapsed().as_secs_f64());
                    if stop_deadline.is_none() { stop_deadline = Some(self.begin_stop(engine).await); }
                }
                _ = sleep_until_opt(stop_deadline) => {
                    end = EndReason::Failed(format!("the test did not finish within {} s after stop", DRAIN_TIMEOUT.as_secs()));
                    engine.abort();
                    break;
                }
                // The time limit ends the point even between ticks; the closing Sample covers the rest.
                _ = sleep_until_opt(time_limit), if stop_deadline.is_none() => {
                    stop_deadline = Some(self.begin_stop(engine).await);
                }
                _ = cancel.cancelled(), if stop_deadline.is_none() => {
                    end = EndReason::Interrupted;
                    stop_deadline = Some(self.begin_stop(engine).await);
                }
            }
        }
        // Always close with a (possibly short) Sample, like the agent does.
        if end.clean() && pending.request(&self.sampler).is_err() {
            end = EndReason::Failed("local sampler: the closing Sample could not be taken".into());
        }
        for s in pending.drain().await {
            pairs.local(s, events).await;
        }
        pairs.flush(events).await;
        Driven {
            local_done_s: local_done.unwrap_or_else(|| t0.elapsed().as_secs_f64()),
            peer: peer_result,
            end,
        }
    }

    /// Why the agent counts as lost after `silence`, if it does: the kernel
    /// stopped hearing from its host, or it has been silent past [`HUNG_LIMIT`].
    fn lost(&self, silence: Duration, limit: Duration) -> Option<String> {
        if silence <= limit {
            return None;
        }
        let secs = silence.as_secs_f64();
        if let Some(link) = &self.link {
            match crate::probe::tcpinfo::liveness(link) {
                Ok(l) if l.acknowledging(limit) => {}
                Ok(l) => {
                    return Some(format!(
                        "no message from the agent for {secs:.1} s and its host stopped acknowledging ({} segments unacknowledged for {:.1} s)",
                        l.unacked,
                        f64::from(l.last_ack_recv_ms) / 1000.0
                    ))
                }
                Err(e) => return Some(format!("no message from the agent for {secs:.1} s; the control connection failed: {e}")),
            }
        }
        (silence > HUNG_LIMIT).then(|| {
            format!("no message from the agent for {secs:.1} s although its host is reachable; the agent seems hung")
        })
    }

    async fn begin_stop(&mut self, engine: &RunningEngine) -> tokio::time::Instant {
        engine.stop();
        let _ = self.wr.send(&Msg::Stop {}).await;
        tokio::time::Instant::now() + DRAIN_TIMEOUT
    }
}

/// What the running part of a point left behind.
struct Driven {
    local_done_s: f64,
    peer: Option<SideResult>,
    end: EndReason,
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// The controller's side of the handshake on a fresh control connection:
/// hello, the agent's challenge (its X25519 key share), this end's share and
/// proof, the agent's proof. Returns who the agent is and the session keys;
/// this end's ephemeral secret is gone when it returns. Any refusal, wrong
/// proof or malformed frame is an error naming it.
pub async fn handshake<R, W>(
    rd: &mut R,
    wr: &mut W,
    token: &Token,
) -> Result<(HostInfo, SessionKeys), ProtoError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    write_msg(
        wr,
        &Msg::Hello {
            version: PROTOCOL_VERSION,
            software: env!("CARGO_PKG_VERSION").into(),
        },
    )
    .await?;
    let share_a = match read_msg_max(rd, MAX_HANDSHAKE_FRAME).await? {
        Msg::Challenge { version, .. } if version != PROTOCOL_VERSION => {
            return Err(ProtoError::Version {
                ours: PROTOCOL_VERSION,
                theirs: version,
            })
        }
        Msg::Challenge { nonce, .. } => super::auth::parse_share(&nonce)
            .map_err(|e| ProtoError::Auth(format!("the agent's challenge is malformed: {e}")))?,
        Msg::Refused { reason } => return Err(ProtoError::Refused(reason)),
        other => {
            return Err(ProtoError::Unexpected {
                expected: "challenge",
                got: other.kind(),
            })
        }
    };
    let ours = super::auth::Ephemeral::generate();
    let share_c = ours.share();
    let mac = hex::encode(token.mac("controller", &share_a, &share_c));
    write_msg(
        wr,
        &Msg::Auth {
            nonce: hex::encode(share_c),
            mac,
        },
    )
    .await?;
    match read_msg_max(rd, MAX_HANDSHAKE_FRAME).await? {
        Msg::Welcome { mac, host } => {
            if !token.verify("agent", &share_c, &share_a, &mac) {
                return Err(ProtoError::Auth("the agent could not prove it knows the token; is something else listening on that port?".into()));
            }
            let shared = ours
                .agree(&share_a)
                .map_err(|e| ProtoError::Auth(format!("the agent's challenge is unusable: {e}")))?;
            Ok((
                host,
                SessionKeys::derive(token, &share_a, &share_c, shared.as_bytes()),
            ))
        }
        Msg::Refused { reason } => Err(ProtoError::Refused(reason)),
        other => Err(ProtoError::Unexpected {
            expected: "welcome",
            got: other.kind(),
        }),
    }
}

/// Open every data connection (blocking; run off the async threads).
fn connect_data(
    spec: &EngineSpec,
    addr: SocketAddr,
    keys: &SessionKeys,
    test: u64,
) -> Result<Vec<TcpStream>, SessionError> {
    let n = spec.connection_count();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let err = |source| SessionError::Data {
            index: i,
            count: n,
            addr,
            source,
        };
        let sock = spec.data_socket(&addr, i)?;
        sock.connect_timeout(&addr.into(), SETUP_TIMEOUT)
            .map_err(err)?;
        let mut s: TcpStream = sock.into();
        let _ = super::net::keep_alive(&s);
        let index = u32::try_from(i).unwrap_or(u32::MAX);
        let hello = DataHello {
            test,
            index,
            tag: keys.data_tag(test, index),
        };
        s.write_all(&hello.encode()).map_err(err)?;
        out.push(s);
    }
    Ok(out)
}

/// This host's CPUs for this point and the later ones (the agent checks its
/// own when the first point starts): a usage error; then its limits and memory.
fn check_local(p: &PointParams) -> Result<(), SessionError> {
    p.spec
        .iter()
        .chain(&p.later)
        .try_for_each(|s| super::engines::check_cpus(s, Side::Controller, None))
        .map_err(|e| SessionError::Usage(e.to_string()))?;
    p.spec
        .iter()
        .try_for_each(|s| super::engines::admit(s, Side::Controller))
        .map_err(|e| SessionError::Local(e.to_string()))
}

/// Prepare this side's engine (buffers, devices) off the async threads.
async fn prepare_local(
    p: &PointParams,
    peer: IpAddr,
) -> Result<Option<Box<dyn crate::traffic::Engine>>, SessionError> {
    let Some(spec) = &p.spec else {
        return Ok(None);
    };
    let spec = spec.clone();
    let prepared = tokio::task::spawn_blocking(move || {
        super::engines::prepare(&spec, Side::Controller, Some(peer), None)
    })
    .await
    .map_err(|e| SessionError::Peer(format!("engine setup task failed: {e}")))??;
    Ok(Some(prepared))
}

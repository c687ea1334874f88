//! The controller end: connects to an agent, runs test points, and publishes
//! the Samples of both hosts as [`RunEvent`]s.
//!
//! Per point: `Start` → `Accepting{port}` → open the data connections →
//! `DataReady` → start the local engine → `Go`; then sample every interval,
//! relay the agent's Samples, and stop at the time limit (or when the byte
//! budget is spent, or on Ctrl-C) with `Stop` → `Finished`. The consumer
//! (headless run, later the TUI) sees every interval once, with both hosts'
//! Samples when they arrived, and an outcome that says how the point ended.

use super::agent::{finish, SETUP_TIMEOUT};
use super::auth::Token;
use super::proto::{
    read_msg, write_msg, DataHello, Msg, ProtoError, SideResult, TestParams, PROTOCOL_VERSION,
};
use crate::probe::ebpf::{drop_peer_share, share_with_peer, EbpfIface, EbpfMode, EbpfStatus};
use crate::probe::sample::{HostRole, Sample};
use crate::probe::sampler::Sampler;
use crate::probe::live_host::LiveHost;
use crate::probe::system::HostInfo;
use crate::traffic::{EngineError, EngineSpec, RunningEngine, Side};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::io::AsyncWrite;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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
    },
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Tcp(a) => write!(f, "{a}"),
            Target::Unix { path, data_ip } => write!(f, "{} (data via {data_ip})", path.display()),
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
    #[error("data connection {index} to {addr}: {source}; check that TCP port {port} on the agent is reachable", port = addr.port())]
    Data {
        /// Index.
        index: usize,
        /// Agent data address.
        addr: SocketAddr,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// The local engine failed to start.
    #[error("local engine: {0}")]
    Engine(#[from] EngineError),
    /// The agent reported a failure.
    #[error("the agent failed: {0}")]
    Peer(String),
}

/// What the consumer receives.
#[derive(Debug, Clone)]
pub enum RunEvent {
    /// One interval: this host's Sample and the agent's (None when it did not arrive).
    Interval {
        /// Interval index.
        index: u32,
        /// This host.
        local: Option<Sample>,
        /// The agent's host.
        peer: Option<Sample>,
    },
}

/// How a point ended.
#[derive(Debug, Clone, PartialEq)]
pub enum EndReason {
    /// Time or byte limit reached.
    Completed,
    /// Ctrl-C / SIGTERM.
    Interrupted,
    /// The agent vanished.
    PeerLost(String),
    /// Something failed (engine, agent).
    Failed(String),
}

/// The result of one point.
#[derive(Debug, Clone)]
pub struct PointOutcome {
    /// This host's totals.
    pub local: SideResult,
    /// The agent's totals, when it delivered them.
    pub peer: Option<SideResult>,
    /// How it ended.
    pub end: EndReason,
}

/// One test point to run.
#[derive(Debug, Clone)]
pub struct PointParams {
    /// Engine parameters; None to observe both hosts without traffic.
    pub spec: Option<EngineSpec>,
    /// Sampling period.
    pub interval: Duration,
    /// Warm-up.
    pub omit: Duration,
    /// Time limit (None: until the byte budget is spent).
    pub time: Option<Duration>,
    /// Interfaces to watch besides the one that routes to the agent.
    pub ifaces: Vec<String>,
    /// Interfaces the agent watches besides the one that routes back to us.
    pub peer_ifaces: Vec<String>,
}

/// A connected, authenticated controller.
pub struct Controller {
    rx: mpsc::Receiver<Result<Msg, ProtoError>>,
    wr: Box<dyn AsyncWrite + Unpin + Send>,
    reader: tokio::task::JoinHandle<()>,
    /// The agent's identity.
    pub peer: HostInfo,
    target: Target,
    data_ip: IpAddr,
    sampler: Sampler,
    next_id: u64,
    /// The peer's interfaces this host's eBPF probes count (local pair).
    shared_ebpf: Vec<String>,
    /// Set from `Start` until a point ends cleanly: after an unclean end the
    /// agent may still send messages of the old point, so the connection is
    /// not reused.
    poisoned: bool,
}

impl Controller {
    /// Connect and authenticate.
    pub async fn connect(target: Target, token: &Token) -> Result<Self, SessionError> {
        let t = target.to_string();
        let (rd, wr, data_ip): (
            Box<dyn tokio::io::AsyncRead + Unpin + Send>,
            Box<dyn AsyncWrite + Unpin + Send>,
            IpAddr,
        ) = match &target {
            Target::Tcp(addr) => {
                let s = tokio::time::timeout(SETUP_TIMEOUT, tokio::net::TcpStream::connect(addr))
                    .await
                    .map_err(|_| SessionError::Connect {
                        target: t.clone(),
                        source: std::io::ErrorKind::TimedOut.into(),
                    })?
                    .map_err(|source| SessionError::Connect {
                        target: t.clone(),
                        source,
                    })?;
                let _ = s.set_nodelay(true);
                let (r, w) = s.into_split();
                (Box::new(r), Box::new(w), addr.ip())
            }
            Target::Unix { path, data_ip } => {
                let s = tokio::net::UnixStream::connect(path)
                    .await
                    .map_err(|source| SessionError::Connect {
                        target: t.clone(),
                        source,
                    })?;
                let (r, w) = s.into_split();
                (Box::new(r), Box::new(w), *data_ip)
            }
        };
        let (mut rd, mut wr) = (rd, wr);
        let proto = |source| SessionError::Proto {
            target: t.clone(),
            source,
        };
        let peer = tokio::time::timeout(SETUP_TIMEOUT, handshake(&mut rd, &mut wr, token))
            .await
            .map_err(|_| proto(ProtoError::Timeout("the agent's handshake")))?
            .map_err(proto)?;
        let (tx, rx) = mpsc::channel(64);
        let reader = tokio::spawn(async move {
            loop {
                let m = read_msg(&mut rd).await;
                let end = m.is_err();
                if tx.send(m).await.is_err() || end {
                    return;
                }
            }
        });
        Ok(Controller {
            rx,
            wr,
            reader,
            peer,
            target,
            data_ip,
            sampler: Sampler::new(Box::new(LiveHost::default())),
            next_id: 0,
            shared_ebpf: Vec::new(),
            poisoned: false,
        })
    }

    /// Choose the eBPF probe set of both hosts for this session and load it
    /// now (so the log header can say what runs). `ifaces` are this host's
    /// extra interfaces (`--iface`). `same_kernel` lists the peer's
    /// interfaces when the agent runs on this very kernel (the local pair):
    /// then one set here counts for both, the agent attaches nothing, and
    /// the peer's share moves into its Samples. Returns (local, peer) status.
    pub async fn configure_ebpf(
        &mut self,
        mode: EbpfMode,
        ifaces: &[String],
        same_kernel: Vec<EbpfIface>,
    ) -> Result<(Option<EbpfStatus>, Option<EbpfStatus>), SessionError> {
        let shared = mode != EbpfMode::Off && !same_kernel.is_empty();
        let agent_mode = if shared { EbpfMode::ByPeer } else { mode };
        write_msg(&mut self.wr, &Msg::Configure { ebpf: agent_mode })
            .await
            .map_err(|e| self.proto(e))?;
        let peer_names: Vec<String> = same_kernel.iter().map(|i| i.name.clone()).collect();
        // Mode first, then interfaces: the probes load once.
        self.sampler
            .set_ebpf(mode, if shared { same_kernel } else { Vec::new() });
        self.sampler.set_ifaces(&self.local_ifaces(ifaces));
        let local = self.sampler.ebpf_status().map(|mut s| {
            s.ifaces.retain(|i| !peer_names.contains(i));
            s
        });
        let mut peer = match self.expect("configured").await? {
            Msg::Configured { ebpf } => ebpf,
            other => {
                return Err(self.proto(ProtoError::Unexpected {
                    expected: "configured",
                    got: other.kind(),
                }))
            }
        };
        self.shared_ebpf.clear();
        if let (true, Some(l)) = (shared, local.as_ref()) {
            // The peer's probes are this host's: same status, its interfaces.
            let mut p = l.clone();
            if l.off.is_none() {
                p.ifaces = peer_names.clone();
                self.shared_ebpf = peer_names;
            }
            peer = Some(p);
        }
        Ok((local, peer))
    }

    /// The interfaces this host watches: the route to the agent, then `extra`.
    fn local_ifaces(&self, extra: &[String]) -> Vec<String> {
        let mut ifaces: Vec<String> = crate::probe::system::route_iface(self.data_ip)
            .into_iter()
            .collect();
        ifaces.extend(extra.iter().cloned());
        ifaces
    }

    /// Say goodbye and close.
    pub async fn close(mut self) {
        let _ = write_msg(&mut self.wr, &Msg::Bye {}).await;
        self.reader.abort();
    }

    fn proto(&self, source: ProtoError) -> SessionError {
        SessionError::Proto {
            target: self.target.to_string(),
            source,
        }
    }

    async fn expect(&mut self, what: &'static str) -> Result<Msg, SessionError> {
        match tokio::time::timeout(SETUP_TIMEOUT, self.rx.recv()).await {
            Err(_) => Err(self.proto(ProtoError::Timeout(what))),
            Ok(None) => Err(self.proto(ProtoError::Closed)),
            Ok(Some(Err(e))) => Err(self.proto(e)),
            Ok(Some(Ok(Msg::Failed { error }))) => Err(SessionError::Peer(error)),
            Ok(Some(Ok(m))) => Ok(m),
        }
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
        self.poisoned = true;
        self.next_id += 1;
        let cookie = super::auth::random_bytes::<16>();
        let test = TestParams {
            id: self.next_id,
            cookie: hex::encode(cookie),
            spec: p.spec.clone(),
            interval_ms: u64::try_from(p.interval.as_millis()).unwrap_or(u64::MAX),
            omit_ms: u64::try_from(p.omit.as_millis()).unwrap_or(u64::MAX),
            ifaces: p.peer_ifaces.clone(),
        };
        write_msg(&mut self.wr, &Msg::Start { test })
            .await
            .map_err(|e| self.proto(e))?;
        let port = match self.expect("accepting").await? {
            Msg::Accepting { data_port } => data_port,
            other => {
                return Err(self.proto(ProtoError::Unexpected {
                    expected: "accepting",
                    got: other.kind(),
                }))
            }
        };
        let addr = SocketAddr::new(self.data_ip, port);
        let spec = p.spec.clone();
        let conns = tokio::task::spawn_blocking(move || match spec {
            Some(spec) => connect_data(&spec, addr, cookie),
            None => Ok(Vec::new()),
        })
        .await
        .map_err(|e| SessionError::Peer(format!("data connection task failed: {e}")))?;
        let conns = match conns {
            Ok(c) => c,
            Err(e) => {
                let _ = write_msg(
                    &mut self.wr,
                    &Msg::Failed {
                        error: e.to_string(),
                    },
                )
                .await;
                return Err(e);
            }
        };
        match self.expect("data_ready").await? {
            Msg::DataReady {} => {}
            other => {
                return Err(self.proto(ProtoError::Unexpected {
                    expected: "data_ready",
                    got: other.kind(),
                }))
            }
        }
        // Everything slow happens before Go; after it, both ends start their
        // engines and clocks at once (the agent on receipt of Go).
        let ifaces = self.local_ifaces(&p.ifaces);
        self.sampler.set_ifaces(&ifaces);
        write_msg(&mut self.wr, &Msg::Go {})
            .await
            .map_err(|e| self.proto(e))?;
        let started = match &p.spec {
            Some(spec) => crate::traffic::start_engine(spec, Side::Controller, conns),
            None => Ok(RunningEngine::idle()),
        };
        let mut engine = match started {
            Ok(e) => e,
            Err(e) => {
                let _ = write_msg(
                    &mut self.wr,
                    &Msg::Failed {
                        error: format!("controller engine: {e}"),
                    },
                )
                .await;
                self.poisoned = true;
                return Err(e.into());
            }
        };
        self.sampler.begin(Some(&engine), p.omit, p.interval);
        let t0 = Instant::now();
        let mut pairs = Pairing {
            shared: self.shared_ebpf.clone(),
            ..Default::default()
        };
        let mut ticker =
            tokio::time::interval_at(tokio::time::Instant::now() + p.interval, p.interval);
        // After a stall, keep the period instead of bursting short intervals.
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let time_limit = p.time.map(|t| tokio::time::Instant::now() + t);
        let silence_limit = p.interval * 2 + Duration::from_secs(1);
        let mut last_peer = Instant::now();
        let mut stop_deadline: Option<tokio::time::Instant> = None;
        let mut local_done: Option<f64> = None;
        let mut peer_result: Option<SideResult> = None;
        let mut end = EndReason::Completed;
        let done = std::sync::Arc::clone(&engine.control.done);
        while local_done.is_none() || peer_result.is_none() {
            tokio::select! {
                _ = ticker.tick(), if stop_deadline.is_none() => {
                    let s = self.sampler.sample();
                    if let Err(e) = write_msg(&mut self.wr, &Msg::Tick {}).await {
                        end = EndReason::PeerLost(e.to_string());
                        engine.abort();
                        break;
                    }
                    pairs.local(s, events).await;
                    if last_peer.elapsed() > silence_limit {
                        end = EndReason::PeerLost(format!("no message from the agent for {:.1} s", last_peer.elapsed().as_secs_f64()));
                        engine.abort();
                        break;
                    }
                    if p.time.is_some_and(|t| t0.elapsed() + Duration::from_millis(5) >= t) {
                        stop_deadline = Some(self.begin_stop(&engine).await);
                    }
                }
                m = self.rx.recv() => {
                    last_peer = Instant::now();
                    match m {
                        Some(Ok(Msg::Sample { mut sample })) => { sample.host = HostRole::Peer; pairs.peer(*sample, events).await; }
                        Some(Ok(Msg::Finished { result })) => peer_result = Some(result),
                        Some(Ok(Msg::Failed { error })) => { end = EndReason::Failed(format!("the agent failed: {error}")); engine.abort(); break; }
                        Some(Ok(_)) => {}
                        Some(Err(e)) => { end = EndReason::PeerLost(e.to_string()); engine.abort(); break; }
                        None => { end = EndReason::PeerLost(ProtoError::Closed.to_string()); engine.abort(); break; }
                    }
                }
                // The last local worker to exit signals (byte budget spent, error, or after stop).
                _ = done.notified(), if local_done.is_none() => {
                    local_done = Some(t0.elapsed().as_secs_f64());
                    if stop_deadline.is_none() { stop_deadline = Some(self.begin_stop(&engine).await); }
                }
                _ = super::agent::sleep_until_opt(stop_deadline) => {
                    end = EndReason::Failed(format!("the test did not finish within {} s after stop", super::agent::DRAIN_TIMEOUT.as_secs()));
                    engine.abort();
                    break;
                }
                // The time limit ends the point even between ticks; the closing Sample covers the rest.
                _ = super::agent::sleep_until_opt(time_limit), if stop_deadline.is_none() => {
                    stop_deadline = Some(self.begin_stop(&engine).await);
                }
                _ = cancel.cancelled(), if stop_deadline.is_none() => {
                    end = EndReason::Interrupted;
                    stop_deadline = Some(self.begin_stop(&engine).await);
                }
            }
        }
        let duration_s = local_done.unwrap_or_else(|| t0.elapsed().as_secs_f64());
        // Always close with a (possibly short) Sample, like the agent does.
        if matches!(end, EndReason::Completed | EndReason::Interrupted) {
            let s = self.sampler.sample();
            pairs.local(s, events).await;
        }
        pairs.flush(events).await;
        let mut local = finish(&mut engine, &mut self.sampler, duration_s).await;
        if let (EndReason::Completed, Some(e)) = (&end, &local.error) {
            end = EndReason::Failed(format!("local engine: {e}"));
        }
        if let (EndReason::Completed, Some(e)) =
            (&end, peer_result.as_ref().and_then(|r| r.error.as_ref()))
        {
            end = EndReason::Failed(format!("agent engine: {e}"));
        }
        local.duration_s = duration_s;
        self.poisoned = !(matches!(end, EndReason::Completed | EndReason::Interrupted)
            && peer_result.is_some());
        Ok(PointOutcome {
            local,
            peer: peer_result,
            end,
        })
    }

    async fn begin_stop(&mut self, engine: &RunningEngine) -> tokio::time::Instant {
        engine.stop();
        let _ = write_msg(&mut self.wr, &Msg::Stop {}).await;
        tokio::time::Instant::now() + super::agent::DRAIN_TIMEOUT
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

async fn handshake<R, W>(rd: &mut R, wr: &mut W, token: &Token) -> Result<HostInfo, ProtoError>
where
    R: tokio::io::AsyncRead + Unpin,
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
    let nonce_a = match read_msg(rd).await? {
        Msg::Challenge { version, .. } if version != PROTOCOL_VERSION => {
            return Err(ProtoError::Version {
                ours: PROTOCOL_VERSION,
                theirs: version,
            })
        }
        Msg::Challenge { nonce, .. } => hex::decode(nonce)
            .map_err(|_| ProtoError::Auth("the agent's nonce is not hex".into()))?,
        Msg::Refused { reason } => return Err(ProtoError::Refused(reason)),
        other => {
            return Err(ProtoError::Unexpected {
                expected: "challenge",
                got: other.kind(),
            })
        }
    };
    let nonce_c = super::auth::random_bytes::<16>();
    let mac = hex::encode(token.mac("controller", &nonce_a, &nonce_c));
    write_msg(
        wr,
        &Msg::Auth {
            nonce: hex::encode(nonce_c),
            mac,
        },
    )
    .await?;
    match read_msg(rd).await? {
        Msg::Welcome { mac, host } => {
            if token.verify("agent", &nonce_c, &nonce_a, &mac) {
                Ok(host)
            } else {
                Err(ProtoError::Auth("the agent could not prove it knows the token; is something else listening on that port?".into()))
            }
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
    cookie: [u8; 16],
) -> Result<Vec<TcpStream>, SessionError> {
    let n = spec.connection_count();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let sock = crate::traffic::prepare_data_socket(spec, &addr)?;
        sock.connect_timeout(&addr.into(), SETUP_TIMEOUT)
            .map_err(|source| SessionError::Data {
                index: i,
                addr,
                source,
            })?;
        let mut s: TcpStream = sock.into();
        let hello = DataHello {
            cookie,
            index: u32::try_from(i).unwrap_or(u32::MAX),
        };
        s.write_all(&hello.encode())
            .map_err(|source| SessionError::Data {
                index: i,
                addr,
                source,
            })?;
        out.push(s);
    }
    Ok(out)
}

/// Pairs local and peer Samples by interval index and emits intervals in
/// index order. A peer Sample more than two intervals late is not waited for;
/// if it still arrives, it is forwarded alone at once. Pending Samples are
/// bounded (a peer that runs ahead cannot grow the map without limit).
#[derive(Default)]
struct Pairing {
    local: BTreeMap<u32, Sample>,
    peer: BTreeMap<u32, Sample>,
    emitted: Option<u32>,
    /// The peer's interfaces counted by this host's eBPF probes (same kernel).
    shared: Vec<String>,
}

/// Most peer Samples kept while waiting for the local ones.
const MAX_PENDING: usize = 64;

impl Pairing {
    async fn local(&mut self, s: Sample, ev: &mpsc::Sender<RunEvent>) {
        self.local.insert(s.index, s);
        self.emit(ev, false).await;
    }

    async fn peer(&mut self, s: Sample, ev: &mpsc::Sender<RunEvent>) {
        if self.emitted.is_some_and(|e| s.index <= e) {
            let _ = ev
                .send(RunEvent::Interval {
                    index: s.index,
                    local: None,
                    peer: Some(s),
                })
                .await;
            return;
        }
        self.peer.insert(s.index, s);
        while self.peer.len() > MAX_PENDING {
            self.peer.pop_first();
        }
        self.emit(ev, false).await;
    }

    /// Emit, oldest first, every local interval whose peer Sample is here or
    /// two intervals late; with `all`, everything left.
    async fn emit(&mut self, ev: &mpsc::Sender<RunEvent>, all: bool) {
        loop {
            let newest = self.local.keys().next_back().copied();
            let Some(k) = self.local.keys().next().copied() else {
                break;
            };
            let ready = all || self.peer.contains_key(&k) || newest.is_some_and(|n| k + 2 <= n);
            if !ready {
                break;
            }
            let (mut local, mut peer) = (self.local.remove(&k), self.peer.remove(&k));
            if !self.shared.is_empty() {
                match (local.as_mut(), peer.as_mut()) {
                    (Some(l), Some(p)) => share_with_peer(l, p, &self.shared),
                    (Some(l), None) => drop_peer_share(l, &self.shared),
                    _ => {}
                }
            }
            let _ = ev
                .send(RunEvent::Interval {
                    index: k,
                    local,
                    peer,
                })
                .await;
            self.emitted = Some(k);
        }
    }

    async fn flush(&mut self, ev: &mpsc::Sender<RunEvent>) {
        self.emit(ev, true).await;
        for (k, p) in std::mem::take(&mut self.peer) {
            let _ = ev
                .send(RunEvent::Interval {
                    index: k,
                    local: None,
                    peer: Some(p),
                })
                .await;
        }
    }
}

//! `wirescope agent`: serves the far end of every engine and streams its host's Samples.
//!
//! One TCP port takes both control connections (which start with a frame
//! length) and data connections (which start with [`DATA_MAGIC`]); the local
//! pair adds a unix socket for control. One controller is served at a time:
//! a second one that authenticates while a session is open is refused with a
//! "busy" reason instead of waiting. A controller that vanishes mid-test makes
//! the agent abort its engine and go back to listening.

use super::auth::Token;
use super::point::{finish, sleep_until_opt, PendingSamples, DRAIN_TIMEOUT, SETUP_TIMEOUT};
use super::proto::{
    read_body, read_msg, read_msg_max, write_msg, DataHello, Msg, ProtoError, TestParams,
    DATA_MAGIC, MAX_HANDSHAKE_FRAME, PROTOCOL_VERSION,
};
use crate::probe::live_host::LiveHost;
use crate::probe::sampler::thread::SamplerThread;
use crate::probe::sampler::EngineView;
use crate::probe::system::HostInfo;
use crate::traffic::{EngineSpec, RunningEngine, Side};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What the agent serves on.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// TCP address for control and data.
    pub listen: SocketAddr,
    /// Extra unix socket for control (the embedded local pair uses it).
    pub unix: Option<PathBuf>,
    /// Shared token.
    pub token: Token,
    /// Exit after the first controller's session.
    pub once: bool,
    /// Where the token came from, for "authentication failed" hints.
    pub token_hint: String,
}

/// Agent start-up failures.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Binding failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address.
        addr: String,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
}

struct DataWaiter {
    cookie: [u8; 16],
    tx: mpsc::Sender<(u32, std::net::TcpStream)>,
}

struct State {
    token: Token,
    token_hint: String,
    host: HostInfo,
    data_port: u16,
    busy: Mutex<Option<String>>,
    waiter: Mutex<Option<DataWaiter>>,
    once: bool,
    shutdown: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Bind the listeners; returns the bound TCP address and a future that serves until `shutdown`.
pub async fn bind(
    cfg: AgentConfig,
    shutdown: CancellationToken,
) -> Result<(SocketAddr, impl std::future::Future<Output = ()>), AgentError> {
    let tcp = TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| AgentError::Bind {
            addr: cfg.listen.to_string(),
            source,
        })?;
    let local = tcp.local_addr().map_err(|source| AgentError::Bind {
        addr: cfg.listen.to_string(),
        source,
    })?;
    let unix = match &cfg.unix {
        Some(p) => {
            // Replace a stale socket of an earlier agent, never any other file.
            use std::os::unix::fs::FileTypeExt;
            if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket()) {
                let _ = std::fs::remove_file(p);
            }
            Some(UnixListener::bind(p).map_err(|source| AgentError::Bind {
                addr: p.display().to_string(),
                source,
            })?)
        }
        None => None,
    };
    let state = Arc::new(State {
        token: cfg.token,
        token_hint: cfg.token_hint,
        host: HostInfo::current(),
        data_port: local.port(),
        busy: Mutex::new(None),
        waiter: Mutex::new(None),
        once: cfg.once,
        shutdown: shutdown.clone(),
    });
    Ok((local, serve(state, tcp, unix)))
}

async fn serve(state: Arc<State>, tcp: TcpListener, unix: Option<UnixListener>) {
    loop {
        tokio::select! {
            _ = state.shutdown.cancelled() => return,
            r = tcp.accept() => match r {
                Ok((s, peer)) => { tokio::spawn(handle_tcp(Arc::clone(&state), s, peer)); }
                Err(e) => { eprintln!("agent: accept failed: {e}"); tokio::time::sleep(Duration::from_millis(100)).await; }
            },
            r = accept_unix(unix.as_ref()) => match r {
                Ok(s) => { tokio::spawn(handle_control(Arc::clone(&state), s, None, None, "local controller (unix socket)".to_string())); }
                Err(e) => { eprintln!("agent: accept on unix socket failed: {e}"); tokio::time::sleep(Duration::from_millis(100)).await; }
            },
        }
    }
}

async fn accept_unix(l: Option<&UnixListener>) -> std::io::Result<tokio::net::UnixStream> {
    match l {
        Some(l) => l.accept().await.map(|(s, _)| s),
        None => std::future::pending().await,
    }
}

async fn handle_tcp(state: Arc<State>, mut s: tokio::net::TcpStream, peer: SocketAddr) {
    let _ = s.set_nodelay(true);
    let mut first = [0u8; 4];
    match tokio::time::timeout(SETUP_TIMEOUT, s.read_exact(&mut first)).await {
        Ok(Ok(_)) => {}
        _ => return, // silent probe or slow client: nothing to answer
    }
    if first == DATA_MAGIC {
        handle_data(&state, s, peer).await;
    } else {
        handle_control(state, s, Some(first), Some(peer.ip()), peer.to_string()).await;
    }
}

async fn handle_data(state: &State, mut s: tokio::net::TcpStream, peer: SocketAddr) {
    let mut rest = [0u8; 20];
    if !matches!(
        tokio::time::timeout(SETUP_TIMEOUT, s.read_exact(&mut rest)).await,
        Ok(Ok(_))
    ) {
        return;
    }
    let hello = DataHello::decode_after_magic(&rest);
    let tx = match lock(&state.waiter).as_ref() {
        Some(w) if w.cookie == hello.cookie => w.tx.clone(),
        _ => {
            eprintln!("agent: refused a data connection from {peer}: it names no test in progress");
            return;
        }
    };
    let Ok(std) = s.into_std() else { return };
    if std.set_nonblocking(false).is_ok() {
        // Wait for room rather than drop a connection of a large test.
        let _ = tokio::time::timeout(SETUP_TIMEOUT, tx.send((hello.index, std))).await;
    }
}

async fn refuse<W: AsyncWrite + Unpin>(w: &mut W, reason: String) {
    let _ = write_msg(w, &Msg::Refused { reason }).await;
    let _ = w.shutdown().await;
}

/// Handshake, busy check, then the session. `first` holds the 4 bytes already read.
async fn handle_control<S>(
    state: Arc<State>,
    s: S,
    first: Option<[u8; 4]>,
    controller: Option<std::net::IpAddr>,
    who: String,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut rd, mut wr) = tokio::io::split(s);
    let hello = tokio::time::timeout(SETUP_TIMEOUT, async {
        match first {
            Some(f) => read_body(&mut rd, f, MAX_HANDSHAKE_FRAME).await,
            None => read_msg_max(&mut rd, MAX_HANDSHAKE_FRAME).await,
        }
    })
    .await;
    let hello = match hello {
        Err(_) => return refuse(&mut wr, "timed out waiting for hello".into()).await,
        Ok(Err(ProtoError::Closed)) => return,
        Ok(Err(e)) => return refuse(&mut wr, e.to_string()).await,
        Ok(Ok(m)) => m,
    };
    match hello {
        Msg::Hello { version, .. } if version == PROTOCOL_VERSION => {}
        Msg::Hello { version, .. } => {
            return refuse(
                &mut wr,
                ProtoError::Version {
                    ours: PROTOCOL_VERSION,
                    theirs: version,
                }
                .to_string(),
            )
            .await
        }
        other => {
            return refuse(
                &mut wr,
                ProtoError::Unexpected {
                    expected: "hello",
                    got: other.kind(),
                }
                .to_string(),
            )
            .await
        }
    }
    let nonce_a = super::auth::random_bytes::<16>();
    if write_msg(
        &mut wr,
        &Msg::Challenge {
            version: PROTOCOL_VERSION,
            nonce: hex::encode(nonce_a),
        },
    )
    .await
    .is_err()
    {
        return;
    }
    let (nonce_c, mac) =
        match tokio::time::timeout(SETUP_TIMEOUT, read_msg_max(&mut rd, MAX_HANDSHAKE_FRAME)).await
        {
            Ok(Ok(Msg::Auth { nonce, mac })) => (nonce, mac),
            Ok(Ok(other)) => {
                return refuse(
                    &mut wr,
                    ProtoError::Unexpected {
                        expected: "auth",
                        got: other.kind(),
                    }
                    .to_string(),
                )
                .await
            }
            Ok(Err(ProtoError::Closed)) => return,
            Ok(Err(e)) => return refuse(&mut wr, e.to_string()).await,
            Err(_) => return refuse(&mut wr, "timed out waiting for auth".into()).await,
        };
    let Ok(nonce_c) = hex::decode(&nonce_c) else {
        return refuse(
            &mut wr,
            "authentication failed: the controller's nonce is not hex".into(),
        )
        .await;
    };
    if !state.token.verify("controller", &nonce_a, &nonce_c, &mac) {
        eprintln!("agent: refused {who}: wrong token");
        return refuse(
            &mut wr,
            format!("authentication failed: the controller's token differs from the agent's ({}); copy the agent's token to the controller", state.token_hint),
        )
        .await;
    }
    let refusal = {
        let mut busy = lock(&state.busy);
        match busy.as_ref() {
            Some(holder) => Some(format!(
                "busy: the agent is serving {holder}; try again when that session ends"
            )),
            None => {
                *busy = Some(format!(
                    "{who} (since {})",
                    humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                ));
                None
            }
        }
    };
    if let Some(reason) = refusal {
        eprintln!("agent: refused {who}: {reason}");
        return refuse(&mut wr, reason).await;
    }
    let _release = BusyGuard(&state);
    let mac_a = hex::encode(state.token.mac("agent", &nonce_c, &nonce_a));
    if write_msg(
        &mut wr,
        &Msg::Welcome {
            mac: mac_a,
            host: state.host.clone(),
        },
    )
    .await
    .is_err()
    {
        return;
    }
    eprintln!("agent: session with {who} started");
    let (tx, mut rx) = mpsc::channel(16);
    let reader = tokio::spawn(async move {
        loop {
            let m = read_msg(&mut rd).await;
            let end = m.is_err();
            if tx.send(m).await.is_err() || end {
                return;
            }
        }
    });
    let why = match SamplerThread::of("ws-agent-sampler", Box::new(LiveHost::default())) {
        Ok(sampler) => session(&state, &mut wr, &mut rx, &sampler, controller).await,
        Err(e) => {
            let error = format!("the agent cannot start its sampler thread: {e}");
            let _ = write_msg(
                &mut wr,
                &Msg::Failed {
                    error: error.clone(),
                },
            )
            .await;
            error
        }
    };
    reader.abort();
    eprintln!("agent: session with {who} ended: {why}");
    if state.once {
        state.shutdown.cancel();
    }
}

struct BusyGuard<'a>(&'a State);
impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        *lock(&self.0.busy) = None;
        *lock(&self.0.waiter) = None;
    }
}

type Inbox = mpsc::Receiver<Result<Msg, ProtoError>>;

async fn session<W: AsyncWrite + Unpin>(
    state: &State,
    wr: &mut W,
    rx: &mut Inbox,
    sampler: &SamplerThread,
    controller: Option<std::net::IpAddr>,
) -> String {
    loop {
        match rx.recv().await {
            None | Some(Err(ProtoError::Closed)) => {
                return "controller closed the connection".into()
            }
            Some(Err(e)) => return e.to_string(),
            Some(Ok(Msg::Bye {})) => return "controller said bye".into(),
            Some(Ok(Msg::Start { test })) => {
                if let Err(e) = run_test(state, wr, rx, sampler, test, controller).await {
                    return e;
                }
            }
            Some(Ok(Msg::Configure { ebpf })) => {
                // Watch the route back to the controller from now on, so the
                // probes load (and say what they do) before the first test.
                let ifaces: Vec<String> = controller
                    .and_then(crate::probe::system::route_iface)
                    .into_iter()
                    .collect();
                let status = match sampler.set_ebpf(ebpf, Vec::new()) {
                    Ok(()) => sampler.set_ifaces(ifaces).await,
                    Err(e) => Err(e),
                };
                let status = match status {
                    Ok(s) => s,
                    Err(e) => return format!("sampler: {e}"),
                };
                if let Some(s) = &status {
                    eprintln!("agent: {}", s.line());
                }
                if let Err(e) = write_msg(wr, &Msg::Configured { ebpf: status }).await {
                    return e.to_string();
                }
            }
            // Late messages of a test that already ended on this side.
            Some(Ok(Msg::Stop {})) | Some(Ok(Msg::Failed { .. })) | Some(Ok(Msg::Tick {})) => {}
            Some(Ok(other)) => {
                let e = ProtoError::Unexpected {
                    expected: "configure, start or bye",
                    got: other.kind(),
                };
                let _ = write_msg(
                    wr,
                    &Msg::Failed {
                        error: e.to_string(),
                    },
                )
                .await;
            }
        }
    }
}

/// Run one test point. Err means the control connection is gone.
async fn run_test<W: AsyncWrite + Unpin>(
    state: &State,
    wr: &mut W,
    rx: &mut Inbox,
    sampler: &SamplerThread,
    test: TestParams,
    controller: Option<std::net::IpAddr>,
) -> Result<(), String> {
    let fail = |e: String| Msg::Failed { error: e };
    let cookie: [u8; 16] = match hex::decode(&test.cookie)
        .ok()
        .and_then(|v| v.try_into().ok())
    {
        Some(c) => c,
        None => return write(wr, fail("the test cookie is not 16 hex bytes".into())).await,
    };
    if let Some(Err(e)) = test.spec.as_ref().map(EngineSpec::validate) {
        return write(wr, fail(format!("the agent refuses this test: {e}"))).await;
    }
    let n = test.spec.as_ref().map_or(0, EngineSpec::connection_count);
    if (test.spec.is_some() && n == 0) || n > 65_536 {
        return write(
            wr,
            fail(format!("{n} data connections requested; allowed: 1-65536")),
        )
        .await;
    }
    match &test.spec {
        Some(spec) => eprintln!(
            "agent: test {}: {} {} with {n} data connection(s)",
            test.id,
            spec.kind().name(),
            spec.mode_name()
        ),
        None => eprintln!("agent: test {}: observing only", test.id),
    }
    // Prepare the engine (buffers, devices) off the async threads, and take
    // the controller's part of the setup exchange.
    let mut engine = match &test.spec {
        Some(spec) => {
            let (spec, peer_setup) = (spec.clone(), test.setup.clone());
            let prepared = tokio::task::spawn_blocking(move || {
                let mut e = super::engines::prepare(&spec, Side::Agent, controller)?;
                e.connect(peer_setup)?;
                Ok::<_, crate::traffic::EngineError>(e)
            })
            .await;
            match prepared {
                Ok(Ok(e)) => Some(e),
                Ok(Err(e)) => return write(wr, fail(format!("agent engine: {e}"))).await,
                Err(e) => return write(wr, fail(format!("agent engine setup failed: {e}"))).await,
            }
        }
        None => None,
    };
    let (dtx, mut drx) = mpsc::channel(n.clamp(1, 1024));
    *lock(&state.waiter) = Some(DataWaiter { cookie, tx: dtx });
    write(
        wr,
        Msg::Accepting {
            data_port: state.data_port,
            setup: engine.as_ref().and_then(|e| e.setup()),
        },
    )
    .await?;
    let mut slots: Vec<Option<std::net::TcpStream>> = (0..n).map(|_| None).collect();
    let mut have = 0;
    let deadline = tokio::time::Instant::now() + SETUP_TIMEOUT;
    while have < n {
        tokio::select! {
            c = drx.recv() => if let Some((i, s)) = c {
                if let Some(slot) = slots.get_mut(i as usize) {
                    if slot.is_none() { *slot = Some(s); have += 1; }
                }
            },
            m = rx.recv() => match m {
                Some(Ok(Msg::Stop {})) | Some(Ok(Msg::Failed { .. })) => { *lock(&state.waiter) = None; return Ok(()); }
                Some(Ok(_)) => {}
                _ => { *lock(&state.waiter) = None; return Err("controller lost during setup".into()); }
            },
            _ = tokio::time::sleep_until(deadline) => {
                *lock(&state.waiter) = None;
                return write(wr, fail(format!("only {have} of {n} data connections reached the agent within {} s; check that TCP port {} is reachable from the controller", SETUP_TIMEOUT.as_secs(), state.data_port))).await;
            }
        }
    }
    *lock(&state.waiter) = None;
    let conns: Vec<std::net::TcpStream> = slots.into_iter().flatten().collect();
    // Watch the interface that carries the test: the route back to the
    // controller (its data connections' address, else its control address).
    let mut ifaces: Vec<String> = conns
        .first()
        .and_then(|c| c.peer_addr().ok())
        .map(|a| a.ip())
        .or(controller)
        .and_then(crate::probe::system::route_iface)
        .into_iter()
        .collect();
    ifaces.extend(test.ifaces.iter().cloned());
    if let Err(e) = sampler.set_ifaces(ifaces).await {
        return write(wr, fail(format!("agent sampler: {e}"))).await;
    }
    write(wr, Msg::DataReady {}).await?;
    match tokio::time::timeout(SETUP_TIMEOUT, rx.recv()).await {
        Ok(Some(Ok(Msg::Go {}))) => {}
        Ok(Some(Ok(_))) => return Ok(()), // controller gave up (Failed/Stop)
        _ => return Err("controller lost before go".into()),
    }
    let started = match engine.take() {
        Some(e) => e.start(conns),
        None => Ok(RunningEngine::idle()),
    };
    let mut engine = match started {
        Ok(e) => e,
        Err(e) => return write(wr, fail(format!("agent engine: {e}"))).await,
    };
    if let Err(e) = sampler
        .begin(
            EngineView::of(&engine),
            Duration::from_millis(test.omit_ms),
            Duration::from_millis(test.interval_ms.max(10)),
        )
        .await
    {
        engine.abort();
        return write(wr, fail(format!("agent sampler: {e}"))).await;
    }
    let mut pending = PendingSamples::default();
    let t0 = Instant::now();
    let done = std::sync::Arc::clone(&engine.control.done);
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
            break false;
        }
        tokio::select! {
            biased;
            m = rx.recv() => match m {
                Some(Ok(Msg::Tick {})) => {
                    if let Err(e) = pending.request(sampler) {
                        eprintln!("agent: interval missed: {e}");
                    }
                }
                Some(Ok(Msg::Stop {})) => {
                    engine.stop();
                    stopped = true;
                    if engine_done.is_none() { stop_deadline = Some(tokio::time::Instant::now() + DRAIN_TIMEOUT); }
                }
                Some(Ok(Msg::Failed { error })) => { eprintln!("agent: controller failed: {error}"); engine.abort(); stopped = true; }
                Some(Ok(_)) => {}
                _ => { engine.abort(); break true; }
            },
            Some(s) = pending.next() => {
                if write(wr, Msg::Sample { sample: Box::new(s) }).await.is_err() { engine.abort(); break true; }
            }
            // The last worker thread to exit signals; nothing polls.
            _ = done.notified(), if engine_done.is_none() => {
                engine_done = Some(t0.elapsed().as_secs_f64());
                stop_deadline = (!stopped).then(|| tokio::time::Instant::now() + DRAIN_TIMEOUT);
            }
            _ = sleep_until_opt(stop_deadline) => {
                stop_deadline = None;
                if engine_done.is_some() { break false; } // no Stop came: finish anyway
                engine.abort();
            }
        }
    };
    let duration_s = engine_done.unwrap_or_else(|| t0.elapsed().as_secs_f64());
    // Always close with a (possibly short) Sample, so the intervals add up to the totals.
    if !lost {
        let _ = pending.request(sampler);
        for s in pending.drain().await {
            let _ = write(
                wr,
                Msg::Sample {
                    sample: Box::new(s),
                },
            )
            .await;
        }
    }
    let result = finish(&mut engine, sampler, duration_s).await;
    if lost {
        return Err("controller lost during the test".into());
    }
    write(wr, Msg::Finished { result }).await
}

async fn write<W: AsyncWrite + Unpin>(wr: &mut W, m: Msg) -> Result<(), String> {
    write_msg(wr, &m)
        .await
        .map_err(|e| format!("controller lost: {e}"))
}

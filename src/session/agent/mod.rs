//! `wirescope agent`: serves the far end of every engine and streams its host's Samples.
//!
//! One TCP port takes both control connections (which start with a frame
//! length) and data connections (which start with [`DATA_MAGIC`]); the local
//! pair adds a unix socket for control. One controller is served at a time:
//! a second one that authenticates while a session is open is refused with a
//! "busy" reason instead of waiting.
//!
//! The agent runs unattended for weeks on production nodes, so it must never
//! die or stay stuck, whatever reaches its port:
//!
//! * unauthenticated connections are admitted by a [`gate::Gate`] (capped in
//!   all and per address, rate-limited, wrong tokens banned with backoff) and
//!   must finish their handshake within [`SETUP_TIMEOUT`];
//! * after the handshake every control frame is sealed ([`super::channel`]);
//!   a data connection is accepted only for the running test, with a tag
//!   derived from the session's keys;
//! * every TCP socket has keepalive and `TCP_USER_TIMEOUT`
//!   ([`super::net`]): a controller whose host vanishes is noticed in about
//!   10 s; a controller that stays silent between tests is dropped after
//!   [`IDLE_LIMIT`](super::proto::IDLE_LIMIT), and one that stops ticking during a test after
//!   [`tick_limit`];
//! * a test is checked before anything is allocated: its spec's limits, the
//!   memory it would take against what the host has, the descriptors it
//!   would open against what the process may ([`test`]);
//! * a tuning request runs on a thread of its own with a deadline; the
//!   controller leaving, the deadline or SIGTERM ends the session at once
//!   (`tuning`);
//! * with `--metrics`, the Samples of its tests are also handed to an
//!   [`Observer`] (the metrics hub, whose endpoint runs on a thread of its
//!   own: a scrape never runs on this runtime).

mod control;
pub mod gate;
mod test;
mod tuning;

use super::auth::Token;
use super::channel::SessionKeys;
use super::point::SETUP_TIMEOUT;
use super::proto::{DataHello, DATA_MAGIC};
use crate::probe::sample::Sample;
use crate::probe::system::HostInfo;
use crate::traffic::EngineKind;
use gate::{Gate, Permit};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
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
    /// Where the token came from (logged here; never told to a caller).
    pub token_hint: String,
    /// Let the controller change this host's settings (`--allow-tuning`).
    pub allow_tuning: bool,
    /// Where tuning backups and journals go (`--state-dir`; default as `profile`).
    pub state_dir: Option<PathBuf>,
    /// Who else sees this host's tests (`--metrics`: the metrics hub).
    pub observer: Option<Arc<dyn Observer>>,
}

/// What else sees the agent's tests besides the controller (the metrics
/// hub of `--metrics`). Called on the session's task: it must only copy.
pub trait Observer: Send + Sync + std::fmt::Debug {
    /// A test of `engine` starts on this host (None: it ended).
    fn engine(&self, engine: Option<EngineKind>);
    /// One interval of this host, as sent to the controller.
    fn sample(&self, sample: &Sample);
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

/// Where the data connections of the running test go.
struct DataWaiter {
    test: u64,
    keys: Arc<SessionKeys>,
    tx: mpsc::Sender<(u32, std::net::TcpStream)>,
}

struct State {
    token: Token,
    token_hint: String,
    host: HostInfo,
    data_port: u16,
    busy: Mutex<Option<String>>,
    waiter: Mutex<Option<DataWaiter>>,
    gate: Arc<Gate>,
    once: bool,
    shutdown: CancellationToken,
    allow_tuning: bool,
    state_dir: crate::tune::state::StateDir,
    /// A tuning request still runs on its thread (see `tuning`).
    tuning: Arc<std::sync::atomic::AtomicBool>,
    observer: Option<Arc<dyn Observer>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How long a controller may go without a Tick during a test at `interval`:
/// five intervals, and at least [`SETUP_TIMEOUT`].
pub fn tick_limit(interval: Duration) -> Duration {
    interval.saturating_mul(5).max(SETUP_TIMEOUT)
}

/// Bind the listeners; returns the bound TCP address and a future that serves until `shutdown`.
pub async fn bind(
    cfg: AgentConfig,
    shutdown: CancellationToken,
) -> Result<(SocketAddr, impl std::future::Future<Output = ()>), AgentError> {
    let bind_err = |addr: String| move |source| AgentError::Bind { addr, source };
    let tcp = TcpListener::bind(cfg.listen)
        .await
        .map_err(bind_err(cfg.listen.to_string()))?;
    let local = tcp.local_addr().map_err(bind_err(cfg.listen.to_string()))?;
    let unix = cfg
        .unix
        .as_ref()
        .map(|p| {
            // Replace a stale socket of an earlier agent, never any other file.
            use std::os::unix::fs::FileTypeExt;
            if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket()) {
                let _ = std::fs::remove_file(p);
            }
            UnixListener::bind(p).map_err(bind_err(p.display().to_string()))
        })
        .transpose()?;
    let (nofile, _) = super::net::nofile_limit();
    let state = Arc::new(State {
        token: cfg.token,
        token_hint: cfg.token_hint,
        host: HostInfo::current(),
        data_port: local.port(),
        busy: Mutex::new(None),
        waiter: Mutex::new(None),
        gate: Gate::new(nofile),
        once: cfg.once,
        shutdown: shutdown.clone(),
        allow_tuning: cfg.allow_tuning,
        state_dir: crate::tune::state::StateDir::resolve(cfg.state_dir.as_deref()),
        tuning: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        observer: cfg.observer,
    });
    Ok((local, serve(state, tcp, unix)))
}

async fn serve(state: Arc<State>, tcp: TcpListener, unix: Option<UnixListener>) {
    // Refusals are summed up, not logged one by one (a flood must not flood the log).
    let mut report = tokio::time::interval(Duration::from_secs(10));
    report.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = state.shutdown.cancelled() => return,
            _ = report.tick() => {
                if let Some(line) = state.gate.take_refusals() {
                    tracing::warn!(target: "agent", "{line}");
                }
            }
            r = tcp.accept() => match r {
                Ok((s, peer)) => match state.gate.admit(Some(peer.ip())) {
                    Ok(permit) => { tokio::spawn(handle_tcp(Arc::clone(&state), s, peer, permit)); }
                    Err(_) => drop(s),
                },
                // Out of descriptors (or another transient error): wait a
                // little instead of spinning on accept.
                Err(e) => { tracing::error!(target: "agent", "accept failed: {e}"); tokio::time::sleep(Duration::from_millis(100)).await; }
            },
            r = accept_unix(unix.as_ref()) => match r {
                Ok(s) => match state.gate.admit(None) {
                    Ok(permit) => { tokio::spawn(control::handle(Arc::clone(&state), s, None, None, "local controller (unix socket)".to_string(), permit)); }
                    Err(_) => drop(s),
                },
                Err(e) => { tracing::error!(target: "agent", "accept on unix socket failed: {e}"); tokio::time::sleep(Duration::from_millis(100)).await; }
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

async fn handle_tcp(
    state: Arc<State>,
    mut s: tokio::net::TcpStream,
    peer: SocketAddr,
    permit: Permit,
) {
    let _ = s.set_nodelay(true);
    let _ = super::net::keep_alive(&s);
    let mut first = [0u8; 4];
    let Ok(Ok(_)) = tokio::time::timeout(SETUP_TIMEOUT, s.read_exact(&mut first)).await else {
        return; // silent probe or slow client: nothing to answer
    };
    if first == DATA_MAGIC {
        handle_data(&state, s, peer, permit).await;
    } else {
        control::handle(
            state,
            s,
            Some(first),
            Some(peer.ip()),
            peer.to_string(),
            permit,
        )
        .await;
    }
}

/// A data connection: it must name the running test and carry the tag the
/// session's keys give its index, within [`SETUP_TIMEOUT`].
async fn handle_data(
    state: &State,
    mut s: tokio::net::TcpStream,
    peer: SocketAddr,
    permit: Permit,
) {
    let mut rest = [0u8; DataHello::REST];
    if !matches!(
        tokio::time::timeout(SETUP_TIMEOUT, s.read_exact(&mut rest)).await,
        Ok(Ok(_))
    ) {
        return;
    }
    let hello = DataHello::decode_after_magic(&rest);
    let tx = match lock(&state.waiter).as_ref() {
        Some(w)
            if w.test == hello.test && w.keys.verify_data_tag(w.test, hello.index, &hello.tag) =>
        {
            w.tx.clone()
        }
        _ => {
            state.gate.auth_failed(Some(peer.ip()));
            return;
        }
    };
    // Authenticated: it no longer counts against the unauthenticated limits.
    drop(permit);
    let Ok(std) = s.into_std() else { return };
    if std.set_nonblocking(false).is_ok() {
        // Wait for room rather than drop a connection of a large test.
        let _ = tokio::time::timeout(SETUP_TIMEOUT, tx.send((hello.index, std))).await;
    }
}

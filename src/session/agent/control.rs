//! A control connection on the agent: the handshake (plain frames, small,
//! bounded in time), then the session (sealed frames) until the controller
//! says bye, goes away or stays silent too long.

use super::gate::Permit;
use super::{lock, test, tuning, State};
use crate::probe::live_host::LiveHost;
use crate::probe::sampler::thread::SamplerThread;
use crate::session::channel::{spawn_sealed_reader, Direction, SealedWriter, SessionKeys};
use crate::session::point::SETUP_TIMEOUT;
use crate::session::proto::{
    read_body, read_msg_max, write_msg, Msg, ProtoError, IDLE_LIMIT, MAX_HANDSHAKE_FRAME,
    PROTOCOL_VERSION,
};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tracing::{info, warn};

/// The inbox of a session: sealed frames, opened, in order.
pub(super) type Inbox = mpsc::Receiver<Result<Msg, ProtoError>>;

/// Why a session ends in the middle of a request: the control connection
/// is gone, or a part the session needs stopped. The agent logs it and is
/// free for the next controller.
#[derive(Debug, thiserror::Error)]
pub(super) enum Ended {
    /// A message could not be sent or read.
    #[error(transparent)]
    Proto(#[from] ProtoError),
    /// A message of a test could not be sent.
    #[error("controller lost: {0}")]
    Send(#[source] ProtoError),
    /// The control connection failed during a test.
    #[error("controller lost {when}: {source}")]
    LostIn {
        /// `during the test`.
        when: &'static str,
        /// The failure.
        #[source]
        source: ProtoError,
    },
    /// The control connection closed at a step of a test.
    #[error("controller lost {0}")]
    Closed(&'static str),
    /// A controller that stopped sending during a test.
    #[error("no message from the controller for {secs} s during the test")]
    Silent {
        /// The silence allowed.
        secs: u64,
    },
    /// The sampler thread is gone.
    #[error("sampler: {0}")]
    Sampler(#[source] crate::probe::sampler::thread::SamplerError),
    /// A tuning request did not finish in time or was interrupted.
    #[error("{0}")]
    Tuning(String),
    /// The coordinator left during a pair test.
    #[error("the coordinator closed the connection during a pair test")]
    CoordinatorLeft,
}

async fn refuse<W: AsyncWrite + Unpin>(w: &mut W, reason: String) {
    let _ = write_msg(w, &Msg::Refused { reason }).await;
    let _ = w.shutdown().await;
}

/// Refuse `who` and log why (the log line says what the caller is told).
async fn refuse_logged<W: AsyncWrite + Unpin>(w: &mut W, who: &str, reason: String) {
    warn!(target: "agent", "refused {who}: {reason}");
    refuse(w, reason).await;
}

/// Handshake, busy check, then the session. `first` holds the 4 bytes already
/// read; `permit` is this connection's place among the unauthenticated ones.
pub(super) async fn handle<S>(
    state: Arc<State>,
    s: S,
    first: Option<[u8; 4]>,
    controller: Option<std::net::IpAddr>,
    who: String,
    permit: Permit,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut rd, mut wr) = tokio::io::split(s);
    let keys = match tokio::time::timeout(
        SETUP_TIMEOUT.saturating_mul(2),
        handshake(&state, &mut rd, &mut wr, first, controller, &who),
    )
    .await
    {
        Ok(Some(k)) => k,
        Ok(None) => return,
        Err(_) => {
            return refuse_logged(&mut wr, &who, "timed out during the handshake".into()).await
        }
    };
    // Authenticated: no longer an unauthenticated connection.
    drop(permit);
    let _release = BusyGuard(&state);
    info!(target: "agent", "session with {who} started");
    let opener = keys.opener(Direction::ToAgent);
    let mut wr = SealedWriter::new(wr, keys.sealer(Direction::ToController));
    let keys = Arc::new(keys);
    let (tx, mut rx) = mpsc::channel(16);
    let reader = spawn_sealed_reader(rd, opener, tx);
    let why = match SamplerThread::of("ws-agent-sampler", Box::new(LiveHost::default())) {
        Ok(sampler) => {
            let ctx = test::Ctx {
                state: &state,
                sampler: &sampler,
                controller,
                keys: &keys,
                who: &who,
            };
            session(&ctx, &mut wr, &mut rx).await
        }
        Err(e) => {
            let error = format!("the agent cannot start its sampler thread: {e}");
            let _ = wr
                .send(&Msg::Failed {
                    error: error.clone(),
                    usage: false,
                })
                .await;
            error
        }
    };
    reader.abort();
    info!(target: "agent", "session with {who} ended: {why}");
    if state.once {
        state.shutdown.cancel();
    }
}

/// Hello, challenge, proof, busy check, welcome. Returns the session keys,
/// or None when the caller was refused (already answered, and logged).
async fn handshake<R, W>(
    state: &State,
    rd: &mut R,
    wr: &mut W,
    first: Option<[u8; 4]>,
    controller: Option<std::net::IpAddr>,
    who: &str,
) -> Option<SessionKeys>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    hello(rd, wr, first, who).await?;
    let (nonce_a, nonce_c, shared) = authenticate(state, rd, wr, controller, who).await?;
    if let Some(reason) = claim(state, who) {
        refuse_logged(wr, who, reason).await;
        return None;
    }
    let welcome = Msg::Welcome {
        mac: hex::encode(state.token.mac("agent", &nonce_c, &nonce_a)),
        host: state.host.clone(),
    };
    if write_msg(wr, &welcome).await.is_err() {
        *lock(&state.busy) = None;
        return None;
    }
    Some(SessionKeys::derive(
        &state.token,
        &nonce_a,
        &nonce_c,
        shared.as_bytes(),
    ))
}

/// The controller's hello, in this protocol version. None: refused or closed.
async fn hello<R, W>(rd: &mut R, wr: &mut W, first: Option<[u8; 4]>, who: &str) -> Option<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let hello = match first {
        Some(f) => read_body(rd, f, MAX_HANDSHAKE_FRAME).await,
        None => read_msg_max(rd, MAX_HANDSHAKE_FRAME).await,
    };
    let e = match hello {
        Err(ProtoError::Closed) => return None,
        Err(e) => e,
        Ok(Msg::Hello { version, .. }) if version == PROTOCOL_VERSION => return Some(()),
        Ok(Msg::Hello { version, .. }) => ProtoError::Version {
            ours: PROTOCOL_VERSION,
            theirs: version,
        },
        Ok(other) => ProtoError::Unexpected {
            expected: "hello",
            got: other.kind(),
        },
    };
    refuse_logged(wr, who, e.to_string()).await;
    None
}

/// Challenge and proof: the controller must know the token. Returns both
/// key shares and the agreed secret; None when refused (a wrong token also
/// bans the address for a while) or closed.
async fn authenticate<R, W>(
    state: &State,
    rd: &mut R,
    wr: &mut W,
    controller: Option<std::net::IpAddr>,
    who: &str,
) -> Option<(Share, Share, x25519_dalek::SharedSecret)>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    // The nonce is this end's ephemeral X25519 key share (forward secrecy).
    let ours = crate::session::auth::Ephemeral::generate();
    let nonce_a = ours.share();
    let challenge = Msg::Challenge {
        version: PROTOCOL_VERSION,
        nonce: hex::encode(nonce_a),
    };
    write_msg(wr, &challenge).await.ok()?;
    let (nonce_c, mac) = match read_msg_max(rd, MAX_HANDSHAKE_FRAME).await {
        Ok(Msg::Auth { nonce, mac }) => (nonce, mac),
        Err(ProtoError::Closed) => return None,
        other => {
            let e = other.map_or_else(
                |e| e,
                |m| ProtoError::Unexpected {
                    expected: "auth",
                    got: m.kind(),
                },
            );
            refuse_logged(wr, who, e.to_string()).await;
            return None;
        }
    };
    let nonce_c = match crate::session::auth::parse_share(&nonce_c) {
        Ok(n) => n,
        Err(e) => {
            let why = format!("authentication failed: the controller's auth is malformed: {e}");
            refuse_logged(wr, who, why).await;
            return None;
        }
    };
    if !state.token.verify("controller", &nonce_a, &nonce_c, &mac) {
        let ban = state.gate.auth_failed(controller);
        warn!(
            target: "agent",
            "refused {who}: authentication failed: wrong token (the agent uses its {}); that address is ignored for {} s",
            state.token_hint,
            ban.as_secs()
        );
        // The caller is told what to do, not where the token lives.
        refuse(
            wr,
            "authentication failed: the controller's token differs from the agent's; copy the agent's token (its path is in the agent's log) to the controller".into(),
        )
        .await;
        return None;
    }
    state.gate.auth_ok(controller);
    match ours.agree(&nonce_c) {
        Ok(shared) => Some((nonce_a, nonce_c, shared)),
        Err(e) => {
            let why = format!("authentication failed: the controller's auth is unusable: {e}");
            refuse_logged(wr, who, why).await;
            None
        }
    }
}

/// An X25519 key share (the handshake's nonce).
type Share = [u8; crate::session::auth::SHARE_LEN];

/// Take the agent for `who`, or the reason it is busy.
fn claim(state: &State, who: &str) -> Option<String> {
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
}

/// `Apply` of `Apply { profile: ... }`: the request's name for the log.
fn short_op(debug: &str) -> &str {
    debug.split([' ', '{']).next().unwrap_or(debug)
}

/// One word for the log line of a tuning answer.
fn tuned_word(r: &crate::tune::peer::TuneResponse) -> &'static str {
    use crate::tune::peer::TuneResponse as R;
    match r {
        R::Saved { .. } => "saved",
        R::Planned { .. } => "planned",
        R::Applied(_) => "applied",
        R::RolledBack(_) => "rolled back",
        R::Status { .. } => "status",
        R::Refused { .. } => "refused (no --allow-tuning)",
        R::Failed { .. } => "failed",
    }
}

/// Frees the agent for the next controller when the session ends, however it ends.
struct BusyGuard<'a>(&'a State);

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        *lock(&self.0.busy) = None;
        *lock(&self.0.waiter) = None;
    }
}

/// The session: configure, tests, pings, bye. Returns why it ended.
async fn session<W: AsyncWrite + Unpin>(
    ctx: &test::Ctx<'_>,
    wr: &mut SealedWriter<W>,
    rx: &mut Inbox,
) -> String {
    loop {
        let Ok(m) = tokio::time::timeout(IDLE_LIMIT, rx.recv()).await else {
            return format!(
                "the controller sent nothing for {} s between tests (idle limit); the agent is free again",
                IDLE_LIMIT.as_secs()
            );
        };
        let step = match m {
            None | Some(Err(ProtoError::Closed)) => {
                return "controller closed the connection".into()
            }
            Some(Err(e)) => return e.to_string(),
            Some(Ok(Msg::Bye {})) => return "controller said bye".into(),
            Some(Ok(Msg::Ping {})) => Ok(()),
            Some(Ok(Msg::Tune { req })) => tune(ctx, wr, rx, req).await,
            Some(Ok(Msg::Start { test })) => test::run(ctx, wr, rx, test).await,
            Some(Ok(Msg::Configure { ebpf })) => configure(ctx, wr, ebpf).await,
            Some(Ok(Msg::PairTest { peer, test })) => pair_test(ctx, wr, rx, peer, *test).await,
            // Late messages of a test that already ended on this side.
            Some(Ok(Msg::Stop {})) | Some(Ok(Msg::Failed { .. })) | Some(Ok(Msg::Tick {})) => {
                Ok(())
            }
            Some(Ok(other)) => {
                let e = ProtoError::Unexpected {
                    expected: "configure, start, tune, pair_test, ping or bye",
                    got: other.kind(),
                };
                let _ = wr
                    .send(&Msg::Failed {
                        error: e.to_string(),
                        usage: false,
                    })
                    .await;
                Ok(())
            }
        };
        if let Err(why) = step {
            return why.to_string();
        }
    }
}

/// A tuning request. Settings are files and ioctls: off the session loop,
/// on a thread of their own, with a deadline (see [`tuning`]). Err: why the
/// session ends.
async fn tune<W: AsyncWrite + Unpin>(
    ctx: &test::Ctx<'_>,
    wr: &mut SealedWriter<W>,
    rx: &mut Inbox,
    req: Box<crate::tune::peer::TuneRequest>,
) -> Result<(), Ended> {
    let (state, controller, who) = (ctx.state, ctx.controller, ctx.who);
    let allow = state.allow_tuning;
    let dir = state.state_dir.clone();
    let what = format!("{req:?}");
    info!(target: "agent", "tuning request {} from {who}", short_op(&what));
    let work = move || {
        crate::tune::peer::serve(
            &req,
            allow,
            &crate::tune::host::Host::live(),
            &dir,
            controller,
        )
    };
    let resp = match tuning::run(
        work,
        rx,
        tuning::TUNE_DEADLINE,
        &state.shutdown,
        &state.tuning,
    )
    .await
    {
        Ok(resp) => resp,
        Err(tuning::Abandoned(why)) => {
            warn!(target: "agent", "tuning request {} from {who}: abandoned: {why}", short_op(&what));
            let _ = wr
                .send(&Msg::Tuned {
                    resp: Box::new(crate::tune::peer::TuneResponse::Failed { error: why.clone() }),
                })
                .await;
            return Err(Ended::Tuning(why));
        }
    };
    info!(
        target: "agent",
        "tuning request {} from {who}: {}",
        short_op(&what),
        tuned_word(&resp)
    );
    wr.send(&Msg::Tuned {
        resp: Box::new(resp),
    })
    .await?;
    Ok(())
}

/// A fleet coordinator's pair test: this agent runs it as the controller
/// of the agent at `peer` ([`crate::session::pair`]) and forwards what
/// happens. A `Stop` from the coordinator, its leaving or SIGTERM interrupt
/// the test. Err: why the session ends.
async fn pair_test<W: AsyncWrite + Unpin>(
    ctx: &test::Ctx<'_>,
    wr: &mut SealedWriter<W>,
    rx: &mut Inbox,
    peer: String,
    spec: crate::session::pair::PairSpec,
) -> Result<(), Ended> {
    use crate::session::pair::PairEvent;
    let Ok(addr) = peer.parse::<std::net::SocketAddr>() else {
        let error = format!("pair test: {peer:?} is not an IP:PORT");
        for event in [PairEvent::Failed { error, usage: true }, PairEvent::End] {
            wr.send(&Msg::PairEvent {
                event: Box::new(event),
            })
            .await?;
        }
        return Ok(());
    };
    info!(target: "agent", "pair test against {addr} for {}", ctx.who);
    let (tx, mut events) = mpsc::channel(64);
    let cancel = tokio_util::sync::CancellationToken::new();
    let job = tokio::spawn(crate::session::pair::serve_pair_test(
        addr,
        spec,
        ctx.state.token.clone(),
        tx,
        cancel.clone(),
    ));
    let mut gone: Option<Ended> = None;
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Some(ev) => {
                    let end = matches!(ev, PairEvent::End);
                    if gone.is_none() {
                        if let Err(e) = wr.send(&Msg::PairEvent { event: Box::new(ev) }).await {
                            cancel.cancel();
                            gone = Some(Ended::Proto(e));
                        }
                    }
                    if end { break; }
                }
                None => break,
            },
            m = rx.recv(), if gone.is_none() => match m {
                Some(Ok(Msg::Stop {})) => cancel.cancel(),
                Some(Ok(_)) => {}
                None | Some(Err(_)) => {
                    cancel.cancel();
                    gone = Some(Ended::CoordinatorLeft);
                }
            },
            _ = ctx.state.shutdown.cancelled(), if !cancel.is_cancelled() => cancel.cancel(),
        }
    }
    let _ = job.await;
    info!(target: "agent", "pair test against {addr} ended");
    gone.map_or(Ok(()), Err)
}

/// Configure: watch the route back to the controller from now on, so the
/// probes load (and say what they do) before the first test. Err: why the
/// session ends.
async fn configure<W: AsyncWrite + Unpin>(
    ctx: &test::Ctx<'_>,
    wr: &mut SealedWriter<W>,
    ebpf: crate::probe::ebpf::EbpfMode,
) -> Result<(), Ended> {
    let ifaces: Vec<String> = ctx
        .controller
        .and_then(crate::probe::system::route_iface)
        .into_iter()
        .collect();
    ctx.sampler
        .set_ebpf(ebpf, Vec::new())
        .map_err(Ended::Sampler)?;
    let status = ctx
        .sampler
        .set_ifaces(ifaces)
        .await
        .map_err(Ended::Sampler)?;
    if let Some(s) = &status {
        info!(target: "agent", "{}", s.line());
    }
    wr.send(&Msg::Configured { ebpf: status }).await?;
    Ok(())
}

//! A control connection on the agent: the handshake (plain frames, small,
//! bounded in time), then the session (sealed frames) until the controller
//! says bye, goes away or stays silent too long.

use super::gate::Permit;
use super::{lock, test, tuning, State};
use crate::probe::live_host::LiveHost;
use crate::probe::sampler::thread::SamplerThread;
use crate::session::channel::{read_sealed, Direction, SealedWriter, SessionKeys};
use crate::session::point::SETUP_TIMEOUT;
use crate::session::proto::{
    read_body, read_msg_max, write_msg, Msg, ProtoError, IDLE_LIMIT, MAX_HANDSHAKE_FRAME,
    PROTOCOL_VERSION,
};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// The inbox of a session: sealed frames, opened, in order.
pub(super) type Inbox = mpsc::Receiver<Result<Msg, ProtoError>>;

async fn refuse<W: AsyncWrite + Unpin>(w: &mut W, reason: String) {
    let _ = write_msg(w, &Msg::Refused { reason }).await;
    let _ = w.shutdown().await;
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
        Err(_) => return refuse(&mut wr, "timed out during the handshake".into()).await,
    };
    // Authenticated: no longer an unauthenticated connection.
    drop(permit);
    let _release = BusyGuard(&state);
    eprintln!("agent: session with {who} started");
    let mut opener = keys.opener(Direction::ToAgent);
    let mut wr = SealedWriter::new(wr, keys.sealer(Direction::ToController));
    let keys = Arc::new(keys);
    let (tx, mut rx) = mpsc::channel(16);
    let reader = tokio::spawn(async move {
        loop {
            let m = read_sealed(&mut rd, &mut opener).await;
            let end = m.is_err();
            if tx.send(m).await.is_err() || end {
                return;
            }
        }
    });
    let why = match SamplerThread::of("ws-agent-sampler", Box::new(LiveHost::default())) {
        Ok(sampler) => session(&state, &mut wr, &mut rx, &sampler, controller, &keys).await,
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
    eprintln!("agent: session with {who} ended: {why}");
    if state.once {
        state.shutdown.cancel();
    }
}

/// Hello, challenge, proof, busy check, welcome. Returns the session keys,
/// or None when the caller was refused (already answered).
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
    let hello = match first {
        Some(f) => read_body(rd, f, MAX_HANDSHAKE_FRAME).await,
        None => read_msg_max(rd, MAX_HANDSHAKE_FRAME).await,
    };
    match hello {
        Err(ProtoError::Closed) => return None,
        Err(e) => {
            refuse(wr, e.to_string()).await;
            return None;
        }
        Ok(Msg::Hello { version, .. }) if version == PROTOCOL_VERSION => {}
        Ok(Msg::Hello { version, .. }) => {
            let e = ProtoError::Version {
                ours: PROTOCOL_VERSION,
                theirs: version,
            };
            refuse(wr, e.to_string()).await;
            return None;
        }
        Ok(other) => {
            let e = ProtoError::Unexpected {
                expected: "hello",
                got: other.kind(),
            };
            refuse(wr, e.to_string()).await;
            return None;
        }
    }
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
        Ok(other) => {
            let e = ProtoError::Unexpected {
                expected: "auth",
                got: other.kind(),
            };
            refuse(wr, e.to_string()).await;
            return None;
        }
        Err(e) => {
            refuse(wr, e.to_string()).await;
            return None;
        }
    };
    let nonce_c = match crate::session::auth::parse_share(&nonce_c) {
        Ok(n) => n,
        Err(e) => {
            refuse(
                wr,
                format!("authentication failed: the controller's auth is malformed: {e}"),
            )
            .await;
            return None;
        }
    };
    if !state.token.verify("controller", &nonce_a, &nonce_c, &mac) {
        let ban = state.gate.auth_failed(controller);
        eprintln!(
            "agent: refused {who}: wrong token (the agent uses its {}); that address is ignored for {} s",
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
    let shared = match ours.agree(&nonce_c) {
        Ok(s) => s,
        Err(e) => {
            refuse(
                wr,
                format!("authentication failed: the controller's auth is unusable: {e}"),
            )
            .await;
            return None;
        }
    };
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
        refuse(wr, reason).await;
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
    state: &State,
    wr: &mut SealedWriter<W>,
    rx: &mut Inbox,
    sampler: &SamplerThread,
    controller: Option<std::net::IpAddr>,
    keys: &Arc<SessionKeys>,
) -> String {
    loop {
        let m = match tokio::time::timeout(IDLE_LIMIT, rx.recv()).await {
            Err(_) => {
                return format!(
                    "the controller sent nothing for {} s between tests (idle limit); the agent is free again",
                    IDLE_LIMIT.as_secs()
                )
            }
            Ok(m) => m,
        };
        match m {
            None | Some(Err(ProtoError::Closed)) => {
                return "controller closed the connection".into()
            }
            Some(Err(e)) => return e.to_string(),
            Some(Ok(Msg::Bye {})) => return "controller said bye".into(),
            Some(Ok(Msg::Ping {})) => {}
            Some(Ok(Msg::Tune { req })) => {
                // Settings are files and ioctls: off the session loop, on a
                // thread of their own, with a deadline (see [`tuning`]).
                let allow = state.allow_tuning;
                let dir = state.state_dir.clone();
                let what = format!("{req:?}");
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
                        eprintln!("agent: tuning request {}: abandoned", short_op(&what));
                        let _ = wr
                            .send(&Msg::Tuned {
                                resp: Box::new(crate::tune::peer::TuneResponse::Failed {
                                    error: why.clone(),
                                }),
                            })
                            .await;
                        return why;
                    }
                };
                eprintln!(
                    "agent: tuning request {}: {}",
                    short_op(&what),
                    tuned_word(&resp)
                );
                if let Err(e) = wr
                    .send(&Msg::Tuned {
                        resp: Box::new(resp),
                    })
                    .await
                {
                    return e.to_string();
                }
            }
            Some(Ok(Msg::Start { test })) => {
                let ctx = test::Ctx {
                    state,
                    sampler,
                    controller,
                    keys,
                };
                if let Err(e) = test::run(&ctx, wr, rx, test).await {
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
                if let Err(e) = wr.send(&Msg::Configured { ebpf: status }).await {
                    return e.to_string();
                }
            }
            // Late messages of a test that already ended on this side.
            Some(Ok(Msg::Stop {})) | Some(Ok(Msg::Failed { .. })) | Some(Ok(Msg::Tick {})) => {}
            Some(Ok(other)) => {
                let e = ProtoError::Unexpected {
                    expected: "configure, start, tune, ping or bye",
                    got: other.kind(),
                };
                let _ = wr
                    .send(&Msg::Failed {
                        error: e.to_string(),
                        usage: false,
                    })
                    .await;
            }
        }
    }
}

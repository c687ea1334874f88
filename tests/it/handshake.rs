//! The control port under hostile or confused clients. In-process agent on
//! loopback, real sockets; no root needed.

use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wirescope::session::agent::{bind, AgentConfig};
use wirescope::session::auth::Token;
use wirescope::session::controller::{Controller, Target};
use wirescope::session::proto::{read_msg, write_msg, Msg, MAX_FRAME};

async fn agent() -> (SocketAddr, tokio_util::sync::CancellationToken) {
    let stop = tokio_util::sync::CancellationToken::new();
    let cfg = AgentConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        unix: None,
        token: Token::from_text("right", "test").unwrap(),
        once: false,
        token_hint: "test token".into(),
        allow_tuning: false,
        state_dir: None,
        observer: None,
    };
    let (addr, serve) = bind(cfg, stop.clone()).await.unwrap();
    tokio::spawn(serve);
    (addr, stop)
}

async fn refusal_after(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    match tokio::time::timeout(Duration::from_secs(5), read_msg(&mut s))
        .await
        .unwrap()
        .unwrap()
    {
        Msg::Refused { reason } => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn right() -> Token {
    Token::from_text("right", "test").unwrap()
}

#[tokio::test]
async fn bad_clients_are_refused_and_the_agent_keeps_serving() {
    let (addr, _stop) = agent().await;

    let mut frame = Vec::new();
    let body = serde_json::to_vec(&Msg::Hello {
        version: 99,
        software: "future".into(),
    })
    .unwrap();
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    let r = refusal_after(addr, &frame).await;
    assert!(r.contains("version mismatch") && r.contains("99"), "{r}");

    let r = refusal_after(addr, b"GET / HTTP/1.1\r\n\r\n").await;
    assert!(r.contains("not a wirescope control connection"), "{r}");

    let r = refusal_after(addr, &(MAX_FRAME * 2).to_be_bytes()).await;
    assert!(r.contains("exceeds"), "{r}");

    let r = refusal_after(addr, &[0, 0, 0, 5, b'{', b'x', b'y', b'z', b'}']).await;
    assert!(r.contains("malformed"), "{r}");

    // Skipping authentication is refused too.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    write_msg(&mut s, &Msg::Bye {}).await.unwrap();
    match read_msg(&mut s).await.unwrap() {
        Msg::Refused { reason } => assert!(reason.contains("hello"), "{reason}"),
        m => panic!("{m:?}"),
    }

    let ok = Controller::connect(Target::Tcp(addr), &right())
        .await
        .expect("a valid controller is served");
    assert!(!ok.peer.hostname.is_empty());
    ok.close().await;

    // A wrong token is refused without naming the agent's token file, and
    // its address is ignored for a while (the next attempt, even with the
    // right token, is dropped without a word); then it is served again.
    let wrong =
        Controller::connect(Target::Tcp(addr), &Token::from_text("wrong", "t").unwrap()).await;
    let e = wrong.err().expect("wrong token refused").to_string();
    assert!(e.contains("authentication failed"), "{e}");
    assert!(
        !e.contains("test token"),
        "the token's origin is not told: {e}"
    );
    let banned = Controller::connect(Target::Tcp(addr), &right()).await;
    assert!(banned.is_err(), "the address is banned for a second");
    let t = std::time::Instant::now();
    let ok = loop {
        if let Ok(c) = Controller::connect(Target::Tcp(addr), &right()).await {
            break c;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "the ban never ended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    ok.close().await;
}

#[tokio::test]
async fn a_data_connection_that_names_no_test_is_dropped() {
    let (addr, _stop) = agent().await;
    let mut d = tokio::net::TcpStream::connect(addr).await.unwrap();
    d.write_all(&wirescope::session::proto::DATA_MAGIC)
        .await
        .unwrap();
    d.write_all(&[0u8; wirescope::session::proto::DataHello::REST])
        .await
        .unwrap();
    let mut buf = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), d.read(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0);
}

#[tokio::test]
async fn a_second_controller_is_told_the_agent_is_busy() {
    let (addr, _stop) = agent().await;
    let first = Controller::connect(Target::Tcp(addr), &right())
        .await
        .unwrap();
    let e = Controller::connect(Target::Tcp(addr), &right())
        .await
        .err()
        .expect("busy")
        .to_string();
    assert!(e.contains("busy"), "{e}");
    first.close().await;
    // Served one after another: once the first leaves, the next gets in.
    let mut ok = None;
    for _ in 0..50 {
        if let Ok(c) = Controller::connect(Target::Tcp(addr), &right()).await {
            ok = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ok.expect("agent serves the next controller").close().await;
}

// ---------------------------------------------------------------------------
// Forward secrecy (protocol version 4): a wiretap's recording of a real
// session, and a token stolen afterwards.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use proptest::prelude::*;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use wirescope::probe::ebpf::EbpfMode;
use wirescope::probe::system::HostInfo;
use wirescope::session::auth::{parse_share, Ephemeral};
use wirescope::session::channel::{read_sealed, Direction, SealedWriter, SessionKeys};
use wirescope::session::controller::handshake;
use wirescope::session::proto::{read_msg_max, ProtoError, PROTOCOL_VERSION};

/// Every byte of one connection, each way, as a wiretap keeps it.
struct Recording {
    to_agent: Vec<u8>,
    to_controller: Vec<u8>,
}

async fn pump(mut r: OwnedReadHalf, mut w: OwnedWriteHalf) -> Vec<u8> {
    let mut rec = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = r.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        rec.extend_from_slice(&buf[..n]);
        if w.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = w.shutdown().await;
    rec
}

/// A relay on loopback in front of the agent at `agent` that records the
/// first connection through it; the recording is complete when both ends
/// have closed.
async fn tap(agent: SocketAddr) -> (SocketAddr, tokio::task::JoinHandle<Recording>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let h = tokio::spawn(async move {
        let (c, _) = l.accept().await.unwrap();
        let a = TcpStream::connect(agent).await.unwrap();
        let (cr, cw) = c.into_split();
        let (ar, aw) = a.into_split();
        let up = tokio::spawn(pump(cr, aw));
        let down = tokio::spawn(pump(ar, cw));
        Recording {
            to_agent: up.await.unwrap(),
            to_controller: down.await.unwrap(),
        }
    });
    (addr, h)
}

/// A real handshake and a few sealed frames each way through a tap: the
/// controller's handshake code, the agent's, then Configure → Configured,
/// Ping, Bye. Returns the recording and the keys the controller held.
async fn recorded_session(agent: SocketAddr) -> (Recording, SessionKeys) {
    let (tap_addr, rec) = tap(agent).await;
    let s = TcpStream::connect(tap_addr).await.unwrap();
    let (mut rd, wr) = s.into_split();
    let mut wr = wr;
    let (_, keys) = handshake(&mut rd, &mut wr, &right()).await.unwrap();
    let mut opener = keys.opener(Direction::ToController);
    let mut w = SealedWriter::new(wr, keys.sealer(Direction::ToAgent));
    w.send(&Msg::Configure {
        ebpf: EbpfMode::Off,
    })
    .await
    .unwrap();
    let m = read_sealed(&mut rd, &mut opener).await.unwrap();
    assert!(matches!(m, Msg::Configured { .. }), "{m:?}");
    w.send(&Msg::Ping {}).await.unwrap();
    w.send(&Msg::Bye {}).await.unwrap();
    w.shutdown().await;
    let mut rest = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(30), rd.read_to_end(&mut rest))
        .await
        .expect("the agent hangs up after bye within 30 s")
        .unwrap();
    assert_eq!(n, 0, "nothing after Configured");
    let rec = tokio::time::timeout(Duration::from_secs(30), rec)
        .await
        .expect("the tap ends within 30 s")
        .unwrap();
    (rec, keys)
}

/// The plain handshake frames (`plain` of them), then the sealed frames as
/// (length prefix, sealed body).
async fn split(mut bytes: &[u8], plain: usize) -> (Vec<Msg>, Vec<([u8; 4], Vec<u8>)>) {
    let mut msgs = Vec::new();
    for _ in 0..plain {
        msgs.push(read_msg(&mut bytes).await.unwrap());
    }
    let mut sealed = Vec::new();
    while !bytes.is_empty() {
        let prefix = [bytes[0], bytes[1], bytes[2], bytes[3]];
        let len = u32::from_be_bytes(prefix) as usize;
        sealed.push((prefix, bytes[4..4 + len].to_vec()));
        bytes = &bytes[4 + len..];
    }
    (msgs, sealed)
}

/// The key schedule of protocol version 3, which this release replaces:
/// HKDF-SHA256 of the token, salted with both public nonces. Whoever held
/// the token could compute it from a recording.
fn v3_keys(token: &str, nonce_a: &[u8], nonce_c: &[u8]) -> [[u8; 32]; 2] {
    let mut salt = Vec::new();
    salt.extend_from_slice(&(nonce_a.len() as u32).to_be_bytes());
    salt.extend_from_slice(nonce_a);
    salt.extend_from_slice(&(nonce_c.len() as u32).to_be_bytes());
    salt.extend_from_slice(nonce_c);
    let hk = hkdf::Hkdf::<sha2::Sha256>::new(Some(&salt), token.as_bytes());
    let mut to_agent = [0u8; 32];
    let mut to_controller = [0u8; 32];
    hk.expand(b"wirescope v3 controller to agent", &mut to_agent)
        .unwrap();
    hk.expand(b"wirescope v3 agent to controller", &mut to_controller)
        .unwrap();
    [to_agent, to_controller]
}

/// Whether `key` opens the first sealed frame of a direction.
fn first_frame_opens(key: &[u8; 32], (prefix, ct): &([u8; 4], Vec<u8>)) -> bool {
    ChaCha20Poly1305::new(Key::from_slice(key))
        .decrypt(
            Nonce::from_slice(&[0u8; 12]),
            Payload {
                msg: ct,
                aad: prefix,
            },
        )
        .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_stays_closed_to_whoever_steals_the_token_later() {
    let (addr, _stop) = agent().await;
    let (rec, keys) = recorded_session(addr).await;
    let (to_agent, sealed_up) = split(&rec.to_agent, 2).await;
    let (to_ctl, sealed_down) = split(&rec.to_controller, 2).await;
    // The recording is complete: the keys the controller held open every
    // sealed frame of it, each way, in order.
    let mut o = keys.opener(Direction::ToAgent);
    let up: Vec<Msg> = sealed_up
        .iter()
        .map(|(p, ct)| o.open(*p, ct).unwrap())
        .collect();
    assert_eq!(
        up,
        vec![
            Msg::Configure {
                ebpf: EbpfMode::Off
            },
            Msg::Ping {},
            Msg::Bye {}
        ]
    );
    let mut o = keys.opener(Direction::ToController);
    assert!(matches!(
        o.open(sealed_down[0].0, &sealed_down[0].1).unwrap(),
        Msg::Configured { .. }
    ));
    assert_eq!(sealed_down.len(), 1);

    // The thief: the token, and every public value of the recording.
    let (Msg::Hello { .. }, Msg::Auth { nonce: nc, mac }) = (&to_agent[0], &to_agent[1]) else {
        panic!("{to_agent:?}")
    };
    let (Msg::Challenge { nonce: na, .. }, Msg::Welcome { .. }) = (&to_ctl[0], &to_ctl[1]) else {
        panic!("{to_ctl:?}")
    };
    let stolen = right();
    let (share_a, share_c) = (parse_share(na).unwrap(), parse_share(nc).unwrap());
    assert!(
        stolen.verify("controller", &share_a, &share_c, mac),
        "the thief's token and public values are the session's"
    );
    // What worked before (protocol 3: token + public nonces) opens nothing.
    let [k_up, k_down] = v3_keys("right", &share_a, &share_c);
    assert!(!first_frame_opens(&k_up, &sealed_up[0]));
    assert!(!first_frame_opens(&k_down, &sealed_down[0]));
    // Nor does today's key schedule with any shared secret the thief can
    // form from public values (the real one needs an ephemeral secret).
    let guesses = [
        [0u8; 32],
        share_a,
        share_c,
        x25519_dalek::x25519(share_a, share_c),
        x25519_dalek::x25519(share_c, share_a),
    ];
    for g in guesses {
        let k = SessionKeys::derive(&stolen, &share_a, &share_c, &g);
        let (p, ct) = &sealed_up[0];
        assert!(k.opener(Direction::ToAgent).open(*p, ct).is_err());
        let (p, ct) = &sealed_down[0];
        assert!(k.opener(Direction::ToController).open(*p, ct).is_err());
    }
    // Every session draws fresh key shares.
    let (rec2, _) = recorded_session(addr).await;
    let (to_agent2, _) = split(&rec2.to_agent, 2).await;
    assert_ne!(to_agent2[1], to_agent[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_handshake_is_refused_by_either_end() {
    let (addr, _stop) = agent().await;
    let (rec, _) = recorded_session(addr).await;
    let (ctl_frames, _) = split(&rec.to_agent, 2).await;

    // The controller's side replayed to the agent: it draws a new share, so
    // the recorded proof does not match.
    let mut s = TcpStream::connect(addr).await.unwrap();
    write_msg(&mut s, &ctl_frames[0]).await.unwrap();
    let Msg::Challenge { nonce, .. } = read_msg(&mut s).await.unwrap() else {
        panic!("challenge expected")
    };
    let Msg::Auth { nonce: old, .. } = &ctl_frames[1] else {
        panic!()
    };
    let Msg::Challenge {
        nonce: recorded_a, ..
    } = split(&rec.to_controller, 1).await.0[0].clone()
    else {
        panic!()
    };
    assert_ne!(nonce, recorded_a, "a fresh challenge");
    assert_ne!(&nonce, old);
    write_msg(&mut s, &ctl_frames[1]).await.unwrap();
    match read_msg(&mut s).await.unwrap() {
        Msg::Refused { reason } => assert!(
            reason.contains("authentication failed") && reason.contains("token"),
            "{reason}"
        ),
        m => panic!("a replayed auth was accepted: {m:?}"),
    }

    // The agent's side replayed to a controller: its new share is not the
    // one the recorded proof covers.
    let fake = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let fake_addr = fake.local_addr().unwrap();
    let agent_bytes = rec.to_controller.clone();
    tokio::spawn(async move {
        let (mut s, _) = fake.accept().await.unwrap();
        let _hello = read_msg(&mut s).await;
        let _ = s.write_all(&agent_bytes).await;
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink).await;
    });
    let s = TcpStream::connect(fake_addr).await.unwrap();
    let (mut rd, mut wr) = s.into_split();
    let e = handshake(&mut rd, &mut wr, &right()).await.unwrap_err();
    assert!(
        matches!(e, ProtoError::Auth(_))
            && e.to_string().contains("could not prove it knows the token"),
        "{e}"
    );
}

/// A fake agent that answers a controller's hello with `challenge`, then
/// (after the controller's auth) with the Welcome `welcome` builds from its
/// own share and the controller's.
async fn fake_agent<F>(challenge_version: u32, welcome: F) -> SocketAddr
where
    F: FnOnce([u8; 32], [u8; 32]) -> Msg + Send + 'static,
{
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let _hello = read_msg(&mut s).await.unwrap();
        let ours = Ephemeral::generate();
        let share_a = ours.share();
        let ch = Msg::Challenge {
            version: challenge_version,
            nonce: hex::encode(share_a),
        };
        write_msg(&mut s, &ch).await.unwrap();
        if let Ok(Msg::Auth { nonce, .. }) = read_msg(&mut s).await {
            let share_c = parse_share(&nonce).unwrap();
            let _ = write_msg(&mut s, &welcome(share_a, share_c)).await;
        }
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink).await;
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_refused_by_either_end() {
    // An agent with another token refuses the controller, and says what to do.
    let stop = tokio_util::sync::CancellationToken::new();
    let cfg = AgentConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        unix: None,
        token: Token::from_text("other", "test").unwrap(),
        once: false,
        token_hint: "test token".into(),
        allow_tuning: false,
        state_dir: None,
        observer: None,
    };
    let (addr, serve) = bind(cfg, stop.clone()).await.unwrap();
    tokio::spawn(serve);
    let e = Controller::connect(Target::Tcp(addr), &right())
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("authentication failed") && e.contains("copy the agent's token"),
        "{e}"
    );
    stop.cancel();

    // A controller refuses an agent whose proof is under another token,
    // though that agent follows the protocol to the letter.
    let addr = fake_agent(PROTOCOL_VERSION, |a, c| Msg::Welcome {
        mac: hex::encode(Token::from_text("other", "t").unwrap().mac("agent", &c, &a)),
        host: HostInfo::default(),
    })
    .await;
    let e = Controller::connect(Target::Tcp(addr), &right())
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("authentication failed") && e.contains("could not prove it knows the token"),
        "{e}"
    );
    // The same agent with the right token's proof is accepted (the fake
    // agent is faithful; only the token differed).
    let addr = fake_agent(PROTOCOL_VERSION, |a, c| Msg::Welcome {
        mac: hex::encode(right().mac("agent", &c, &a)),
        host: HostInfo::default(),
    })
    .await;
    let s = TcpStream::connect(addr).await.unwrap();
    let (mut rd, mut wr) = s.into_split();
    assert!(handshake(&mut rd, &mut wr, &right()).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_peer_is_told_to_upgrade_both_ends() {
    let (addr, _stop) = agent().await;
    // A controller of protocol 3 (before forward secrecy).
    let mut s = TcpStream::connect(addr).await.unwrap();
    write_msg(
        &mut s,
        &Msg::Hello {
            version: 3,
            software: "0.0.3".into(),
        },
    )
    .await
    .unwrap();
    match read_msg(&mut s).await.unwrap() {
        Msg::Refused { reason } => assert!(
            reason.contains("version mismatch")
                && reason.contains(&format!("speaks {PROTOCOL_VERSION}, the peer 3"))
                && reason.contains("upgrade both ends"),
            "{reason}"
        ),
        m => panic!("an old controller was answered: {m:?}"),
    }
    // An agent of protocol 3.
    let addr = fake_agent(3, |_, _| Msg::Bye {}).await;
    let e = Controller::connect(Target::Tcp(addr), &right())
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("version mismatch")
            && e.contains("the peer 3")
            && e.contains("upgrade both ends"),
        "{e}"
    );
}

/// A session with the agent at `addr` once it is free (it may still be
/// ending the previous one): the read half, its opener, the write half and
/// a sealer.
async fn live_session(
    addr: SocketAddr,
) -> (
    OwnedReadHalf,
    wirescope::session::channel::Opener,
    OwnedWriteHalf,
    wirescope::session::channel::Sealer,
) {
    let t = std::time::Instant::now();
    loop {
        let s = TcpStream::connect(addr).await.unwrap();
        let (mut rd, mut wr) = s.into_split();
        match handshake(&mut rd, &mut wr, &right()).await {
            Ok((_, keys)) => {
                return (
                    rd,
                    keys.opener(Direction::ToController),
                    wr,
                    keys.sealer(Direction::ToAgent),
                )
            }
            Err(e) => assert!(t.elapsed() < Duration::from_secs(10), "{e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The agent hangs up (within a generous 30 s; it would otherwise wait 60 s
/// for an idle controller).
async fn hangs_up(rd: &mut OwnedReadHalf) {
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(30), rd.read(&mut buf))
        .await
        .expect("the agent hangs up")
        .unwrap_or(0);
    assert_eq!(n, 0, "the agent answered instead of hanging up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_reordered_or_foreign_frames_end_a_live_session() {
    let (addr, _stop) = agent().await;
    let configure = Msg::Configure {
        ebpf: EbpfMode::Off,
    };

    // In order, a frame is answered; the same frame again ends the session.
    let (mut rd, mut opener, mut wr, mut sealer) = live_session(addr).await;
    let f1 = sealer.seal(&configure).unwrap();
    wr.write_all(&f1).await.unwrap();
    let m = read_sealed(&mut rd, &mut opener).await.unwrap();
    assert!(matches!(m, Msg::Configured { .. }), "{m:?}");
    wr.write_all(&f1).await.unwrap();
    hangs_up(&mut rd).await;

    // The second frame before the first ends it unanswered.
    let (mut rd, _, mut wr, mut sealer) = live_session(addr).await;
    let _f1 = sealer.seal(&Msg::Ping {}).unwrap();
    let f2 = sealer.seal(&configure).unwrap();
    wr.write_all(&f2).await.unwrap();
    hangs_up(&mut rd).await;

    // A frame of an earlier session (sequence 0, like the next one expected)
    // ends it too: every session has its own keys.
    let (mut rd, _, mut wr, _) = live_session(addr).await;
    wr.write_all(&f1).await.unwrap();
    hangs_up(&mut rd).await;
}

// Hostile handshake bytes, both ways: never a panic, never a session
// without the token, always an error that says what was wrong.

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    })
}

fn framed(body: &[u8]) -> Vec<u8> {
    let mut v = (body.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

/// Strings that look like hex, of any length (key shares, proofs).
fn hexish() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9a-f]{0,80}",
        "[0-9a-fA-Fxz ]{60,70}",
        Just(hex::encode([0u8; 32])),
        Just(hex::encode({
            let mut one = [0u8; 32];
            one[0] = 1;
            one
        })),
        Just(hex::encode(Ephemeral::generate().share())),
    ]
}

/// What a hostile controller sends after the agent's challenge.
fn controller_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        (hexish(), hexish()).prop_map(|(nonce, mac)| framed(
            &serde_json::to_vec(&Msg::Auth { nonce, mac }).unwrap()
        )),
        (hexish(), any::<u32>(), 0usize..40).prop_map(|(nonce, len, cut)| {
            let mut v = framed(
                format!(r#"{{"type":"auth","nonce":"{nonce}","mac":"{nonce}"}}"#).as_bytes(),
            );
            v[..4].copy_from_slice(&len.to_be_bytes());
            v.truncate(v.len().saturating_sub(cut));
            v
        }),
    ]
}

/// What a hostile agent answers to the controller's hello.
fn agent_bytes() -> impl Strategy<Value = Vec<u8>> {
    let challenge = (prop_oneof![Just(PROTOCOL_VERSION), any::<u32>()], hexish()).prop_map(
        |(version, nonce)| framed(&serde_json::to_vec(&Msg::Challenge { version, nonce }).unwrap()),
    );
    let second = prop_oneof![
        hexish().prop_map(|mac| framed(
            &serde_json::to_vec(&Msg::Welcome {
                mac,
                host: HostInfo::default()
            })
            .unwrap()
        )),
        proptest::collection::vec(any::<u8>(), 0..200),
    ];
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        (challenge, second).prop_map(|(mut a, b)| {
            a.extend_from_slice(&b);
            a
        }),
    ]
}

/// What the agent sends after its challenge to a controller that sent
/// `bytes` (and then closed its side): the frames, until it hangs up.
async fn agent_answer(path: &std::path::Path, bytes: &[u8]) -> Vec<Msg> {
    let mut s = tokio::net::UnixStream::connect(path).await.unwrap();
    write_msg(
        &mut s,
        &Msg::Hello {
            version: PROTOCOL_VERSION,
            software: "fuzz".into(),
        },
    )
    .await
    .unwrap();
    let ch = read_msg(&mut s).await.unwrap();
    assert!(matches!(ch, Msg::Challenge { .. }), "{ch:?}");
    let _ = s.write_all(bytes).await;
    let _ = s.shutdown().await;
    let mut frames = Vec::new();
    loop {
        match tokio::time::timeout(
            Duration::from_secs(30),
            read_msg_max(&mut s, wirescope::session::proto::MAX_HANDSHAKE_FRAME),
        )
        .await
        .expect("the agent answers or hangs up within 30 s")
        {
            Ok(m) => frames.push(m),
            Err(_) => return frames,
        }
    }
}

#[test]
fn hostile_controller_bytes_get_a_clear_refusal_and_the_agent_keeps_serving() {
    // On a unix socket: no per-address bans, so every case is answered.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.sock");
    let cfg = AgentConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        unix: Some(path.clone()),
        token: right(),
        once: false,
        token_hint: "test token".into(),
        allow_tuning: false,
        state_dir: None,
        observer: None,
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let (_, serve) = runtime().block_on(bind(cfg, stop.clone())).unwrap();
    runtime().spawn(serve);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 96,
        ..ProptestConfig::default()
    });
    runner
        .run(&controller_bytes(), |bytes| {
            let answer = runtime().block_on(agent_answer(&path, &bytes));
            // Nothing when the bytes end mid-frame; else one refusal that
            // says what was wrong. Never a welcome.
            match answer.as_slice() {
                [] => {}
                [Msg::Refused { reason }] => prop_assert!(
                    reason.contains("authentication failed")
                        || reason.contains("malformed")
                        || reason.contains("exceeds")
                        || reason.contains("not a wirescope control connection")
                        || reason.contains("unexpected"),
                    "{}",
                    reason
                ),
                other => prop_assert!(false, "{:?}", other),
            }
            Ok(())
        })
        .unwrap();
    // A controller with the token is still served.
    runtime().block_on(async {
        let c = Controller::connect(
            Target::Unix {
                path: path.clone(),
                data_ip: "127.0.0.1".parse().unwrap(),
                veth: None,
            },
            &right(),
        )
        .await
        .expect("the agent still serves");
        c.close().await;
    });
    stop.cancel();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn hostile_agent_bytes_are_a_clear_error(bytes in agent_bytes()) {
        let mut r = bytes.as_slice();
        let mut w = tokio::io::sink();
        let out = runtime().block_on(handshake(&mut r, &mut w, &right()));
        let e = match out {
            Ok(_) => return Err(TestCaseError::fail("a session without the token")),
            Err(e) => e,
        };
        let text = e.to_string();
        prop_assert!(
            matches!(
                e,
                ProtoError::Closed
                    | ProtoError::TooLarge { .. }
                    | ProtoError::Garbage(_)
                    | ProtoError::BadJson(_)
                    | ProtoError::Unexpected { .. }
                    | ProtoError::Version { .. }
                    | ProtoError::Auth(_)
                    | ProtoError::Refused(_)
            ),
            "{}", text
        );
        prop_assert!(!text.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_low_order_key_share_is_refused_even_with_the_token() {
    // The all-zero point makes the shared secret zero whatever the other
    // end's secret: a session keyed by the token alone again.
    let zero = hex::encode([0u8; 32]);
    let (addr, _stop) = agent().await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    write_msg(
        &mut s,
        &Msg::Hello {
            version: PROTOCOL_VERSION,
            software: "test".into(),
        },
    )
    .await
    .unwrap();
    let Msg::Challenge { nonce, .. } = read_msg(&mut s).await.unwrap() else {
        panic!("challenge expected")
    };
    let share_a = parse_share(&nonce).unwrap();
    let mac = hex::encode(right().mac("controller", &share_a, &[0u8; 32]));
    write_msg(&mut s, &Msg::Auth { nonce: zero, mac })
        .await
        .unwrap();
    match read_msg(&mut s).await.unwrap() {
        Msg::Refused { reason } => assert!(
            reason.contains("authentication failed") && reason.contains("X25519"),
            "{reason}"
        ),
        m => panic!("a low-order share was welcomed: {m:?}"),
    }

    // The same from an agent: the controller refuses it.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let fake = l.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let _hello = read_msg(&mut s).await.unwrap();
        let ch = Msg::Challenge {
            version: PROTOCOL_VERSION,
            nonce: hex::encode([0u8; 32]),
        };
        write_msg(&mut s, &ch).await.unwrap();
        if let Ok(Msg::Auth { nonce, .. }) = read_msg(&mut s).await {
            let share_c = parse_share(&nonce).unwrap();
            let welcome = Msg::Welcome {
                mac: hex::encode(right().mac("agent", &share_c, &[0u8; 32])),
                host: HostInfo::default(),
            };
            let _ = write_msg(&mut s, &welcome).await;
        }
    });
    let s = TcpStream::connect(fake).await.unwrap();
    let (mut rd, mut wr) = s.into_split();
    let e = handshake(&mut rd, &mut wr, &right()).await.unwrap_err();
    assert!(
        matches!(e, ProtoError::Auth(_)) && e.to_string().contains("X25519"),
        "{e}"
    );
}

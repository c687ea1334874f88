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

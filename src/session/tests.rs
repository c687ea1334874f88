//! Controller and agent in one process over loopback: the protocol, the
//! pairing of both hosts' Samples, the end of a point, refusals.

use super::agent::{bind, AgentConfig};
use super::auth::Token;
use super::controller::{Controller, Target};
use super::driver::{run_plan, SessionEvent};
use super::outcome::{EndReason, RunEvent};
use super::plan::{Observe, Plan, PointParams};
use crate::traffic::tcp::{TcpMode, TcpSpec};
use crate::traffic::EngineSpec;
use crate::units::Bytes;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn token() -> Token {
    Token::from_text("unit-test-token-0123456789abcdef", "test").unwrap()
}

async fn agent() -> (std::net::SocketAddr, CancellationToken) {
    let stop = CancellationToken::new();
    let (addr, serve) = bind(
        AgentConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            unix: None,
            token: token(),
            once: false,
            token_hint: "test".into(),
            allow_tuning: false,
            state_dir: None,
            observer: None,
        },
        stop.clone(),
    )
    .await
    .unwrap();
    tokio::spawn(serve);
    (addr, stop)
}

/// A TCP stream test of `streams` streams, unpinned (also for the
/// session's other modules' tests).
pub(super) fn stream(streams: u32) -> EngineSpec {
    EngineSpec::Tcp(TcpSpec {
        mode: TcpMode::Stream,
        streams,
        threads: 1,
        len: Bytes(64 * 1024),
        size: Bytes(64),
        resp_size: Bytes(64),
        depth: 1,
        window: None,
        mss: None,
        congestion: None,
        zerocopy: false,
        skip_rx_copy: false,
        reverse: false,
        bidir: false,
        cpus: Vec::new(),
        peer_cpus: Vec::new(),
        bytes: None,
    })
}

fn point(spec: Option<EngineSpec>) -> PointParams {
    PointParams {
        spec,
        interval: Duration::from_millis(100),
        omit: Duration::ZERO,
        time: Some(Duration::from_millis(450)),
        ifaces: Vec::new(),
        peer_ifaces: Vec::new(),
        later: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_hosts_samples_are_paired_by_index_and_cover_the_point() {
    let (addr, stop) = agent().await;
    let mut ctl = Controller::connect(Target::Tcp(addr), &token())
        .await
        .unwrap();
    let (tx, mut rx) = mpsc::channel(64);
    let outcome = ctl
        .run_point(&point(Some(stream(2))), &tx, &CancellationToken::new())
        .await
        .unwrap();
    drop(tx);
    let mut events: Vec<RunEvent> = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    assert_eq!(outcome.end, EndReason::Completed);
    // Several intervals (how many depends on the machine's load: no timing asserted).
    assert!(events.len() >= 2, "{} intervals", events.len());
    // Local Samples come in index order, none missing; each peer Sample is
    // paired with the local one of its index, or — when it came more than two
    // intervals late (a loaded machine) — forwarded alone right after.
    let locals: Vec<u32> = events
        .iter()
        .filter_map(|e| e.local.as_ref())
        .map(|s| s.index)
        .collect();
    assert_eq!(
        locals,
        (0..locals.len() as u32).collect::<Vec<_>>(),
        "in order, none missing"
    );
    let mut peers: Vec<u32> = events
        .iter()
        .filter_map(|e| e.peer.as_ref())
        .map(|s| s.index)
        .collect();
    peers.sort_unstable();
    assert_eq!(peers, locals, "every interval has the peer's Sample, once");
    for e in &events {
        for s in [e.local.as_ref(), e.peer.as_ref()].into_iter().flatten() {
            assert_eq!(s.index, e.index);
        }
    }
    assert!(
        events.iter().any(|e| e.local.is_some() && e.peer.is_some()),
        "pairs formed"
    );
    // What the agent received is what this side sent, counted at both ends.
    let peer = outcome.peer.unwrap();
    let sent: u64 = outcome.local.conns.iter().map(|c| c.tx_bytes).sum();
    let received: u64 = peer.conns.iter().map(|c| c.rx_bytes).sum();
    assert!(sent > 0);
    assert_eq!(sent, received);
    // The intervals add up to the totals: every byte is in some interval.
    let in_intervals: u64 = events
        .iter()
        .filter_map(|e| e.peer.as_ref())
        .map(|p| p.engine.rx_bytes)
        .sum();
    assert_eq!(in_intervals, received);
    ctl.close().await;
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_publishes_its_events_in_order() {
    let (addr, stop) = agent().await;
    let mut ctl = Controller::connect(Target::Tcp(addr), &token())
        .await
        .unwrap();
    let (tx, mut rx) = mpsc::channel(256);
    let plan = Plan::Observe {
        interval: Duration::from_millis(100),
        time: Some(Duration::from_millis(300)),
    };
    let end = run_plan(
        &mut ctl,
        &plan,
        &Observe::default(),
        &tx,
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    drop(tx);
    assert_eq!(end, EndReason::Completed);
    let mut kinds = Vec::new();
    while let Some(e) = rx.recv().await {
        kinds.push(match e {
            SessionEvent::PlanStarted(_) => "plan",
            SessionEvent::PointStarted(_) => "point",
            SessionEvent::Interval(_) => "interval",
            SessionEvent::PointDone(_) => "done",
            SessionEvent::PlanDone => "end",
            SessionEvent::Ready { .. } | SessionEvent::Failed(_) | SessionEvent::Refused(_) => {
                "other"
            }
        });
    }
    assert_eq!(&kinds[..2], ["plan", "point"]);
    assert_eq!(&kinds[kinds.len() - 2..], ["done", "end"]);
    assert!(kinds[2..kinds.len() - 2].iter().all(|k| *k == "interval"));
    assert!(kinds.len() >= 4 + 3);
    ctl.close().await;
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_outside_the_limits_is_refused_before_anything_is_sent() {
    let (addr, stop) = agent().await;
    let mut ctl = Controller::connect(Target::Tcp(addr), &token())
        .await
        .unwrap();
    let mut bad = stream(1);
    if let Some(t) = bad.as_tcp_mut() {
        t.len = Bytes(0);
    }
    let (tx, _rx) = mpsc::channel(64);
    let e = ctl
        .run_point(&point(Some(bad)), &tx, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(e, super::controller::SessionError::Local(_)),
        "{e}"
    );
    assert!(e.to_string().contains("len 0"), "{e}");
    // The session is still usable: nothing was sent.
    let (tx, _rx) = mpsc::channel(64);
    let ok = ctl
        .run_point(&point(None), &tx, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(ok.end, EndReason::Completed);
    ctl.close().await;
    stop.cancel();
}

/// A controller written by hand: the controller's handshake, then sealed
/// frames of its own.
async fn raw_session(
    addr: std::net::SocketAddr,
) -> (
    tokio::net::tcp::OwnedReadHalf,
    super::channel::Opener,
    super::channel::SealedWriter<tokio::net::tcp::OwnedWriteHalf>,
) {
    use super::channel::{Direction, SealedWriter};
    // The agent may still be closing the previous controller's session
    // (it answers "busy" until then): try again for a while.
    let t = std::time::Instant::now();
    let (rd, wr, keys) = loop {
        let s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut rd, mut wr) = s.into_split();
        match super::controller::handshake(&mut rd, &mut wr, &token()).await {
            Ok((_, keys)) => break (rd, wr, keys),
            Err(e) => assert!(t.elapsed() < Duration::from_secs(5), "{e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    (
        rd,
        keys.opener(Direction::ToController),
        SealedWriter::new(wr, keys.sealer(Direction::ToAgent)),
    )
}

/// Send a raw Start with `spec` and return the agent's refusal (any other
/// answer fails the test); then say Bye and check that the agent serves the
/// next controller.
async fn refused_start(
    addr: std::net::SocketAddr,
    spec: Option<EngineSpec>,
    what: impl std::fmt::Display,
) -> String {
    use super::proto::Msg;
    let (mut rd, mut opener, mut wr) = raw_session(addr).await;
    wr.send(&start(spec)).await.unwrap();
    let m = super::channel::read_sealed(&mut rd, &mut opener)
        .await
        .unwrap();
    wr.send(&Msg::Bye {}).await.unwrap();
    drop((rd, wr));
    serves_the_next_controller(addr).await;
    match m {
        Msg::Failed { error, .. } => error,
        m => panic!("{what}: {m:?}"),
    }
}

/// The agent at `addr` is free for the next controller (after refusing a test).
async fn serves_the_next_controller(addr: std::net::SocketAddr) {
    let t = std::time::Instant::now();
    let ctl = loop {
        match Controller::connect(Target::Tcp(addr), &token()).await {
            Ok(c) => break c,
            Err(e) => assert!(t.elapsed() < Duration::from_secs(5), "{e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    ctl.close().await;
}

fn start(spec: Option<EngineSpec>) -> super::proto::Msg {
    super::proto::Msg::Start {
        test: super::proto::TestParams {
            id: 1,
            spec,
            interval_ms: 100,
            omit_ms: 0,
            ifaces: Vec::new(),
            setup: None,
            later: Vec::new(),
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_refuses_a_spec_outside_its_limits_and_keeps_serving() {
    let (addr, stop) = agent().await;
    let mut bad = stream(1);
    if let Some(t) = bad.as_tcp_mut() {
        t.streams = 70_000;
    }
    let error = refused_start(addr, Some(bad), "streams 70000").await;
    assert!(
        error.contains("the agent refuses this test") && error.contains("streams 70000"),
        "{error}"
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_injected_after_the_handshake_ends_the_session() {
    use super::proto::write_msg;
    use tokio::io::AsyncReadExt;
    let (addr, stop) = agent().await;
    // A man in the middle relayed the handshake and now speaks for the
    // controller: its plain frame fails authentication and the agent hangs up.
    let (mut rd, _opener, wr) = raw_session(addr).await;
    let mut plain = wr.into_inner();
    write_msg(&mut plain, &start(None)).await.unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), rd.read(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "the agent hung up without answering the forged frame");
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_ends_the_point_as_interrupted_with_both_totals() {
    let (addr, stop) = agent().await;
    let mut ctl = Controller::connect(Target::Tcp(addr), &token())
        .await
        .unwrap();
    let (tx, mut rx) = mpsc::channel(64);
    let cancel = CancellationToken::new();
    let mut p = point(Some(stream(1)));
    p.time = None;
    let c2 = cancel.clone();
    let watcher = tokio::spawn(async move {
        // Cancel once the first interval arrived (a marker, not a sleep).
        let first = rx.recv().await;
        c2.cancel();
        while rx.recv().await.is_some() {}
        first
    });
    let outcome = ctl.run_point(&p, &tx, &cancel).await.unwrap();
    drop(tx);
    assert!(watcher.await.unwrap().is_some());
    assert_eq!(outcome.end, EndReason::Interrupted);
    assert!(
        outcome.peer.is_some(),
        "the agent's totals arrive after Stop"
    );
    ctl.close().await;
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rdma_test_is_refused_by_an_agent_without_rdma_and_it_keeps_serving() {
    use crate::traffic::rdma::{RdmaMode, RdmaOp, RdmaSpec};
    let (addr, stop) = agent().await;
    let spec = RdmaSpec::perftest_defaults(RdmaOp::Write, RdmaMode::Bw);
    let error = refused_start(addr, Some(EngineSpec::Rdma(spec)), "rdma").await;
    let has_rdma = std::fs::read_dir("/sys/class/infiniband")
        .map(|mut d| d.next().is_some())
        .unwrap_or(false);
    if has_rdma {
        // A host with a device gets as far as the missing setup.
        assert!(error.contains("setup"), "{error}");
    } else {
        assert!(
            error.contains("RDMA unavailable on the agent's host") && error.contains("modprobe"),
            "{error}"
        );
    }
    stop.cancel();
}

/// Issue 23 item 6: a controller names the sink's UDP port; an agent binds,
/// counts or drops only wirescope's own ports, whatever the raw Start says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_refuses_a_sink_port_outside_wirescopes_range_and_keeps_serving() {
    use crate::traffic::sink::spec::{MAX_DST_PORT, MIN_DST_PORT};
    use crate::traffic::sink::{SinkMode, SinkSpec};
    let (addr, stop) = agent().await;
    let sink = |dst_port: u16| {
        Some(EngineSpec::Sink(SinkSpec {
            mode: SinkMode::Udp,
            fallback: false,
            dst_port,
            ..SinkSpec::default()
        }))
    };
    let answer = |port: u16| refused_start(addr, sink(port), format!("port {port}"));
    for port in [5353, 53, 9, 1, MIN_DST_PORT - 1, MAX_DST_PORT + 1, 65535] {
        let error = answer(port).await;
        assert!(
            error.contains("the agent refuses this test")
                && error.contains(&format!("destination port {port} is outside"))
                && error.contains("5310-5319"),
            "port {port}: {error}"
        );
    }
    // The range's ends pass the agent's check: it goes on to prepare the
    // sink, and fails only for the setup this raw Start does not carry.
    for port in [MIN_DST_PORT, MAX_DST_PORT] {
        let error = answer(port).await;
        assert!(
            !error.contains("refuses this test") && error.contains("sent no setup"),
            "port {port}: {error}"
        );
    }
    stop.cancel();
}

//! Controller and agent in one process over loopback: the protocol, the
//! pairing of both hosts' Samples, the end of a point, refusals.

use super::agent::{bind, AgentConfig};
use super::auth::Token;
use super::controller::{Controller, Target};
use super::driver::{run_plan, SessionEvent};
use super::outcome::{EndReason, RunEvent};
use super::plan::{Observe, Plan, PointParams};
use crate::traffic::{EngineSpec, TcpMode, TcpSpec};
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
        },
        stop.clone(),
    )
    .await
    .unwrap();
    tokio::spawn(serve);
    (addr, stop)
}

fn stream(streams: u32) -> EngineSpec {
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
    assert!(events.len() >= 4, "{} intervals", events.len());
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.index as usize, i, "in order, none missing");
        let (l, p) = (e.local.as_ref().unwrap(), e.peer.as_ref().unwrap());
        assert_eq!((l.index, p.index), (e.index, e.index));
    }
    // What the agent received is what this side sent, counted at both ends.
    let peer = outcome.peer.unwrap();
    let sent: u64 = outcome.local.conns.iter().map(|c| c.tx_bytes).sum();
    let received: u64 = peer.conns.iter().map(|c| c.rx_bytes).sum();
    assert!(sent > 0);
    assert_eq!(sent, received);
    // The intervals add up to the totals: every byte is in some interval.
    let in_intervals: u64 = events
        .iter()
        .map(|e| e.peer.as_ref().unwrap().engine.rx_bytes)
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
            SessionEvent::Ready { .. } | SessionEvent::Failed(_) => "other",
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
async fn the_agent_refuses_a_spec_outside_its_limits_and_keeps_serving() {
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
    assert!(e.to_string().contains("len 0"), "{e}");
    drop(ctl);
    // The agent is free for the next controller.
    let ctl = Controller::connect(Target::Tcp(addr), &token())
        .await
        .unwrap();
    ctl.close().await;
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

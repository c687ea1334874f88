//! The packet engine leaves nothing behind, run as a user runs it
//! (`wirescope run --engine sink` against an agent on the namespace pair):
//! after a normal end, an error after the sink was bound, SIGINT of the
//! run, SIGKILL of the run and SIGKILL of the agent that holds the sink,
//! no XDP program is
//! attached to the sink's interface (`ip -d link`), no packet socket is
//! left in either namespace (`/proc/net/packet`), and a surviving agent is
//! back to the socket descriptors it had before the test.
//!
//! One test function, so the points run one after the other on one pair.
//! Needs root (CI runs as root).

use crate::common;

use common::{stderr, Pair};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Poll (bounded) until `f` holds: the kernel and the agent let go
/// asynchronously (an RCU grace period, the session's end).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Nothing attached or open in either namespace; a live agent has the
/// `agent_sockets` it had before.
fn assert_clean(p: &Pair, agent_sockets: Option<usize>, what: &str) {
    eventually(&format!("{what}: XDP still attached"), || {
        !common::xdp_attached(&p.b, "veth-b")
    });
    for ns in [&p.a, &p.b] {
        eventually(&format!("{what}: packet socket left in {ns}"), || {
            common::packet_sockets(ns) == 0
        });
    }
    if let Some(before) = agent_sockets {
        eventually(&format!("{what}: agent sockets left open"), || {
            common::sockets_of(p.agent_pid()) == before
        });
    }
}

/// Start a paced point of `mode` lasting `time` and wait for its third
/// interval in the log (the marker that the XDP program and the sockets are
/// in place and traffic flows). The caller signals and reaps the child.
#[allow(clippy::zombie_processes)]
fn start(p: &Pair, mode: &str, name: &str, time: &str) -> Child {
    let log = p.log_path(&format!("{name}.jsonl"));
    let child = p
        .run_cmd(&[
            "--engine",
            "sink",
            "--sink",
            mode,
            "--queues",
            "4",
            "--rate",
            "20000",
            "--no-fallback",
            "-t",
            time,
            "-i",
            "200ms",
            "--log",
            log.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_local_samples(&log, 3);
    child
}

/// What holds while a point of `mode` runs.
fn assert_running(p: &Pair, mode: &str) {
    if mode == "tpacket" {
        assert!(
            common::packet_sockets(&p.b) >= 4,
            "one packet socket per queue"
        );
    } else {
        assert!(
            common::xdp_attached(&p.b, "veth-b"),
            "{mode}: XDP attached while running"
        );
    }
}

fn wait_within(mut child: Child, what: &str) -> std::process::Output {
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("{what}: run did not end within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn nothing_is_left_after_normal_end_error_sigint_and_sigkill() {
    let mut p = Pair::new();
    p.start_agent();
    let agent_sockets = common::sockets_of(p.agent_pid());

    // Normal end, for the modes with kernel objects (XDP + AF_XDP, packet rings, XDP alone).
    for mode in ["af-xdp", "tpacket", "xdp"] {
        let child = start(&p, mode, &format!("normal-{mode}"), "2s");
        assert_running(&p, mode);
        let out = wait_within(child, mode);
        assert!(out.status.success(), "{mode}: {}", stderr(&out));
        assert_clean(&p, Some(agent_sockets), mode);
    }

    // Error: the sink is bound (XDP + AF_XDP sockets on the agent), then
    // the generator refuses its path (2 tx queues for 4 threads, no fallback).
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &p.a, "ethtool", "-L", "veth-a", "tx", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "ethtool -L: {}", stderr(&out));
    let out = p.run(&[
        "--engine",
        "sink",
        "--sink",
        "af-xdp",
        "--queues",
        "4",
        "--no-fallback",
        "-t",
        "1s",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("2 tx queues"), "{}", stderr(&out));
    assert_clean(&p, Some(agent_sockets), "error");
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &p.a, "ethtool", "-L", "veth-a", "tx", "4"])
        .output()
        .unwrap();
    assert!(out.status.success(), "ethtool -L: {}", stderr(&out));

    // SIGINT: the summary is printed, the run says it was interrupted,
    // everything is released.
    for mode in ["af-xdp", "tpacket"] {
        let child = start(&p, mode, &format!("sigint-{mode}"), "60s");
        assert_running(&p, mode);
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        let out = wait_within(child, mode);
        assert!(!out.status.success(), "{mode}: an interrupted run says so");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("packets: sink"), "{mode}: no summary: {text}");
        assert!(
            (text.to_string() + &stderr(&out)).contains("interrupted"),
            "{mode}: {text}{}",
            stderr(&out)
        );
        assert_clean(&p, Some(agent_sockets), &format!("SIGINT {mode}"));
    }

    // SIGKILL of the run: the agent hears the control connection close
    // without a word and releases the sink it holds.
    let child = start(&p, "af-xdp", "sigkill-run", "60s");
    assert_running(&p, "af-xdp");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = wait_within(child, "SIGKILL of the run");
    assert_clean(&p, Some(agent_sockets), "SIGKILL of the run");

    // SIGKILL of the agent that holds the sink: no unwinding at all; the
    // kernel drops the BPF link with the process, so the program still
    // goes, and the run ends saying the peer was lost.
    let child = start(&p, "xdp", "sigkill-agent", "60s");
    assert_running(&p, "xdp");
    p.kill_agent();
    let out = wait_within(child, "SIGKILL of the agent");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("peer lost"), "{}", stderr(&out));
    assert_clean(&p, None, "SIGKILL of the agent");
}

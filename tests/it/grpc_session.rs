//! `wirescope run --engine grpc` on the namespace pair: the agent's server and
//! the controller's client on the test's own data connections, sampled,
//! logged and summarized like a TCP test. Needs root (CI runs as root).

use crate::common;

use common::{stderr, Log, Pair};
use wirescope::probe::sample::{HostRole, Sample};

/// (tx, rx, messages) summed over a host's Samples of one point.
fn sums(samples: &[&Sample]) -> (u64, u64, u64) {
    samples.iter().fold((0, 0, 0), |(t, r, m), s| {
        (
            t + s.engine.tx_bytes,
            r + s.engine.rx_bytes,
            m + s.engine.messages,
        )
    })
}

#[test]
fn unary_counts_agree_on_both_ends_and_in_the_summary() {
    let mut pair = Pair::new();
    pair.start_agent();
    let log = pair.log_path("grpc-unary.jsonl");
    let out = pair.run(&[
        "--engine",
        "grpc",
        "--channels",
        "2",
        "--concurrency",
        "16",
        "--size",
        "1000",
        "--resp-size",
        "300",
        "-t",
        "2s",
        "-i",
        "500ms",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}\nagent: {}",
        stderr(&out),
        pair.agent_log()
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("RPC/s"), "{text}");
    let log = Log::read(&log);
    let local = log.samples(HostRole::Local);
    let peer = log.samples(HostRole::Peer);
    assert!(
        local.len() >= 4 && local.len() == peer.len(),
        "{}",
        local.len()
    );
    let (ctx, crx, cmsg) = sums(&local);
    let (stx, srx, smsg) = sums(&peer);
    // Every RPC the client completed, the server answered; each request is
    // 1000 payload bytes and each response 300.
    assert!(cmsg > 0);
    assert_eq!((cmsg, smsg), (cmsg, cmsg), "RPCs on both ends");
    assert_eq!((ctx, srx), (cmsg * 1000, cmsg * 1000), "request bytes");
    assert_eq!((crx, stx), (cmsg * 300, cmsg * 300), "response bytes");
    // Latency travels in the client's Samples, RPC rate in the gRPC figures.
    assert!(local.iter().any(|s| s.engine.latency.is_some()));
    assert!(local.iter().any(|s| matches!(
        &s.engine.extra,
        Some(wirescope::traffic::EngineInterval::Grpc(g)) if g.rpcs_per_sec > 0.0
    )));
    let sums = log.summaries();
    assert_eq!(sums.len(), 1);
    let s = sums[0];
    assert_eq!((s.engine.as_str(), s.mode.as_str()), ("grpc", "unary"));
    assert_eq!(s.messages, cmsg);
    assert_eq!(s.bytes, cmsg * 300, "bytes the client received");
    let g = s
        .sections
        .grpc
        .as_ref()
        .expect("gRPC figures in the summary");
    let req = g.request_bytes_per_s * s.duration_s;
    assert!(
        (req - (cmsg * 1000) as f64).abs() < 1.0,
        "{req} vs {}",
        cmsg * 1000
    );
    assert!(g.errors.is_empty(), "{:?}", g.errors);
    assert!(g.client_peak_rss.is_some() && g.agent_peak_rss.is_some());
    let lat = s.latency_us.expect("latency percentiles");
    assert_eq!(lat.count, cmsg);
    assert!(lat.p50 <= lat.p99 && lat.p99 <= lat.max);
}

#[test]
fn a_stream_size_sweep_runs_one_point_per_size() {
    let mut pair = Pair::new();
    pair.start_agent();
    let log = pair.log_path("grpc-sweep.jsonl");
    let out = pair.run(&[
        "--engine",
        "grpc",
        "--mode",
        "stream",
        "--channels",
        "2",
        "--concurrency",
        "8",
        "--sweep",
        "size=64,4K",
        "-t",
        "1s",
        "-i",
        "500ms",
        "--json",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}\nagent: {}",
        stderr(&out),
        pair.agent_log()
    );
    let log = Log::read(&log);
    let sums = log.summaries();
    assert_eq!(sums.len(), 2, "one summary per size");
    for (s, size) in sums.iter().zip([64u64, 4096]) {
        assert_eq!(s.mode, "stream");
        assert_eq!(s.sweep.as_ref().map(|v| v.value), Some(size));
        assert!(s.messages > 0);
        assert_eq!(s.bytes, s.messages * size, "responses of {size} bytes");
    }
}

#[test]
fn grpc_options_are_checked_before_anything_starts() {
    let pair = Pair::new();
    for (args, needle) in [
        (
            vec!["--engine", "grpc", "--streams", "2"],
            "--streams applies to --engine tcp",
        ),
        (
            vec!["--engine", "grpc", "--channels", "4", "--concurrency", "2"],
            "--concurrency must be at least --channels",
        ),
        (vec!["--engine", "grpc", "--mode", "rr"], "unary or stream"),
        (vec!["--engine", "grpc", "--size", "65M"], "--size"),
        (
            vec!["--channels", "2"],
            "--channels applies to --engine grpc",
        ),
    ] {
        let out = pair.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn the_agent_dying_mid_test_ends_it_with_the_log_intact() {
    let mut pair = Pair::new();
    pair.start_agent();
    let log = pair.log_path("grpc-lost.jsonl");
    let child = pair
        .run_cmd(&[
            "--engine",
            "grpc",
            "--concurrency",
            "8",
            "-t",
            "30s",
            "-i",
            "500ms",
            "--log",
            log.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Three intervals in the log, then the agent goes.
    common::wait_for_local_samples(&log, 3);
    pair.kill_agent();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("peer lost"), "{}", stderr(&out));
    let log = Log::read(&log);
    assert!(log.samples(HostRole::Local).len() >= 3);
    let s = log.summaries();
    assert_eq!(s.len(), 1, "the point still has its summary");
    assert!(s[0].peer_lost);
    assert!(s[0].messages > 0, "the RPCs before the loss are counted");
}

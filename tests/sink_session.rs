//! `wirescope run --engine sink` on the namespace pair: the controller's host
//! generates, the agent's host sinks (or `-R`), through the session — setup
//! exchanged over the control channel, Samples of both ends, the summary's
//! `sink` key, loss per flow, the sweep table, the rules, and nothing left
//! attached afterwards. Needs root (CI runs as root).

mod common;

use common::{stderr, Log, Pair};
use std::time::{Duration, Instant};
use wirescope::probe::sample::HostRole;
use wirescope::record::schema::Summary;
use wirescope::traffic::sink::figures::SinkSummary;
use wirescope::traffic::EngineInterval;

fn run_ok(pair: &Pair, args: &[&str]) -> (String, Log) {
    let log = pair.log_path(&format!(
        "sink-{}.jsonl",
        args.join("_").replace(['/', ' '], "")
    ));
    let mut all: Vec<&str> = vec!["--engine", "sink", "--log", log.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = pair.run(&all);
    assert!(
        out.status.success(),
        "run {}: {}\nagent: {}",
        args.join(" "),
        stderr(&out),
        pair.agent_log()
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        Log::read(&log),
    )
}

fn sink_of(s: &Summary) -> &SinkSummary {
    s.sink
        .as_deref()
        .expect("a packet summary has its sink key")
}

fn assert_lossless(s: &Summary, what: &str) {
    let k = sink_of(s);
    assert!(k.sent > 10_000, "{what}: sent only {}", k.sent);
    assert_eq!(k.messages, k.sent, "{what}: counted == sent ({k:#?})");
    assert_eq!((k.lost, k.duplicates), (0, 0), "{what}");
    let per_queue: u64 = k.per_queue.iter().map(|q| q.counted).sum();
    assert_eq!(per_queue, k.messages, "{what}: queues sum to the total");
    // The summary's common keys are the sink's packets.
    assert_eq!(s.engine, "sink");
    assert_eq!(s.messages, k.messages, "{what}");
    assert!((s.rate_per_s - k.rate_per_s).abs() < 1e-6, "{what}");
    assert!(k.l1_bps.0 > k.l2_bps.0 && k.l2_bps.0 > 0.0, "{what}");
}

#[test]
fn every_sink_mode_counts_every_frame_through_the_session() {
    let mut pair = Pair::new();
    pair.start_agent();
    for mode in ["af-xdp", "xdp", "tpacket", "udp"] {
        let (text, log) = run_ok(
            &pair,
            &[
                "--sink", mode, "--queues", "2", "--rate", "50000", "-t", "2s", "-i", "500ms",
            ],
        );
        assert!(text.contains("packets: sink"), "{text}");
        let sums = log.summaries();
        assert_eq!(sums.len(), 1, "{mode}");
        let k = sink_of(sums[0]);
        assert_eq!(k.mode.name(), mode, "{mode}: no fallback on veth as root");
        assert_lossless(sums[0], mode);
        assert!(k.generator_pps > 0.0, "{mode}");
        // The sink's figures are in the agent's Samples, the generator's in ours.
        let peer = log.samples(HostRole::Peer);
        let local = log.samples(HostRole::Local);
        assert!(peer.iter().any(
            |s| matches!(&s.engine.extra, Some(EngineInterval::Sink(k)) if k.figures.counted > 0)
        ));
        assert!(local.iter().any(
            |s| matches!(&s.engine.extra, Some(EngineInterval::Generator(g)) if g.figures.sent > 0)
        ));
        // Per-interval counts of the sink add up to the point's count.
        let counted: u64 = peer
            .iter()
            .filter_map(|s| match &s.engine.extra {
                Some(EngineInterval::Sink(k)) => Some(k.figures.counted),
                _ => None,
            })
            .sum();
        assert_eq!(counted, k.messages, "{mode}: intervals sum to the total");
        // A paced run that the sink keeps up with names the generator.
        assert!(
            sums[0]
                .findings
                .iter()
                .any(|f| f.id == "sink.generator-bound"),
            "{mode}: {:?}",
            sums[0].findings.iter().map(|f| &f.id).collect::<Vec<_>>()
        );
        // TCP's rules say nothing about a UDP packet test.
        assert!(!sums[0].findings.iter().any(|f| f.id == "nic.tso-off"));
    }
    // Nothing stays attached or open on the agent's side.
    assert!(!common::xdp_attached(&pair.b, "veth-b"));
    assert_eq!(common::packet_sockets(&pair.b), 0);
}

/// The xdp sink has no threads of its own (the kernel counts): it must
/// count for the whole point, longer than its drain limit, on either host.
#[test]
fn an_xdp_sink_counts_for_the_whole_point() {
    let mut pair = Pair::new();
    pair.start_agent();
    for dir in [None, Some("-R")] {
        let mut args = vec!["--sink", "xdp", "--rate", "20000", "-t", "5s"];
        args.extend(dir);
        let (_, log) = run_ok(&pair, &args);
        let s = log.summaries()[0];
        assert_lossless(s, &format!("xdp {dir:?}"));
        let k = sink_of(s);
        // 5 s of sending, all of it counted (the drain limit is 3 s).
        assert!(k.duration_s > 4.0, "{dir:?}: {} s", k.duration_s);
        assert!(k.sent > 80_000, "{dir:?}: sent {}", k.sent);
    }
}

#[test]
fn reverse_sinks_on_this_host() {
    let mut pair = Pair::new();
    pair.start_agent();
    let (_, log) = run_ok(
        &pair,
        &[
            "-R", "--sink", "af-xdp", "--queues", "2", "--rate", "40000", "-t", "2s",
        ],
    );
    let s = log.summaries()[0];
    assert_lossless(s, "reverse");
    assert!(log
        .samples(HostRole::Local)
        .iter()
        .any(|s| matches!(&s.engine.extra, Some(EngineInterval::Sink(_)))));
    assert!(!common::xdp_attached(&pair.a, "veth-a"));
    // The agent's host facts say whether it has RDMA (and this VM has not),
    // and where its cores sit.
    let facts = log
        .samples(HostRole::Peer)
        .into_iter()
        .find_map(|s| s.facts.clone())
        .expect("the agent's facts");
    let rdma = facts.rdma.as_ref().expect("RDMA facts read");
    let has_rdma = std::fs::read_dir("/sys/class/infiniband")
        .map(|mut d| d.next().is_some())
        .unwrap_or(false);
    assert_eq!(rdma.devices.is_empty(), !has_rdma);
    assert_eq!(rdma.none.is_some(), !has_rdma, "{rdma:?}");
    assert!(!facts.cpu_places.is_empty());
}

#[test]
fn loss_on_the_receiver_is_found_per_flow() {
    let mut pair = Pair::new();
    pair.start_agent();
    common::drop_one_percent(&pair.b, "ingress", "veth-b");
    let (text, log) = run_ok(
        &pair,
        &[
            "--sink", "tpacket", "--queues", "2", "--rate", "50000", "-t", "2s", "-i", "500ms",
        ],
    );
    let k = sink_of(log.summaries()[0]);
    let share = k.lost as f64 / k.sent as f64 * 100.0;
    assert!((share - 1.0).abs() <= 0.2, "lost {share:.3} % ({k:#?})");
    assert_eq!(k.messages + k.lost, k.sent);
    assert!(k.flows_with_loss > 0);
    let named: u64 = k.lossy_flows.iter().map(|f| f.lost).sum();
    assert_eq!(named, k.lost, "every lost frame is in a named flow");
    assert!(text.contains("flow(s) lost frames"), "{text}");
    // The gaps showed live, before the end's exact count.
    assert!(log.samples(HostRole::Peer).iter().any(|s| matches!(
        &s.engine.extra,
        Some(EngineInterval::Sink(k)) if k.figures.missing > 0
    )));
}

#[test]
fn a_frame_sweep_gives_one_row_per_size() {
    let mut pair = Pair::new();
    pair.start_agent();
    let (text, log) = run_ok(
        &pair,
        &[
            "--sink",
            "xdp",
            "--rate",
            "20000",
            "-t",
            "1s",
            "--sweep",
            "frame=64,512,1518",
        ],
    );
    let sums = log.summaries();
    assert_eq!(sums.len(), 3);
    for (s, size) in sums.iter().zip([64u32, 512, 1518]) {
        let k = sink_of(s);
        assert_eq!(k.frame_size, size);
        let ratio = k.l1_bps.0 / k.l2_bps.0;
        assert!((ratio - f64::from(size + 20) / f64::from(size)).abs() < 1e-9);
        assert_eq!(k.lost, 0, "{size} B");
        assert_eq!(s.sweep.as_ref().map(|v| v.value), Some(u64::from(size)));
    }
    assert!(text.contains("sweep of frame"), "{text}");
    assert!(text.contains("threads  cores       frame"), "{text}");
}

#[test]
fn a_cores_sweep_pins_the_sink_and_names_the_cores() {
    let mut pair = Pair::new();
    pair.start_agent();
    let (text, log) = run_ok(
        &pair,
        &[
            "--sink",
            "af-xdp",
            "--rate",
            "20000",
            "-t",
            "1s",
            "--sweep",
            "cores=0;1;0,1",
        ],
    );
    let sums = log.summaries();
    assert_eq!(sums.len(), 3);
    let sets: Vec<String> = sums
        .iter()
        .map(|s| {
            s.sweep
                .as_ref()
                .and_then(|v| v.cpus.clone())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(sets, ["0", "1", "0-1"]);
    for s in &sums {
        let k = sink_of(s);
        assert_eq!(k.queues as usize, k.sink_cpus.len());
        assert_eq!(k.lost, 0);
    }
    assert!(text.contains("0-1"), "{text}");
}

#[test]
fn usage_errors_exit_2_with_the_flag_named() {
    let mut pair = Pair::new();
    pair.start_agent();
    for (args, says) in [
        (
            vec!["--engine", "sink", "--frame-size", "40"],
            "frame size 40",
        ),
        (vec!["--engine", "sink", "--queues", "0"], "--queues 0"),
        (vec!["--engine", "sink", "-P", "2"], "--streams"),
        (
            vec!["--engine", "tcp", "--frame-size", "64"],
            "--frame-size applies to --engine sink",
        ),
        (
            vec!["--engine", "sink", "--sweep", "size=64,128"],
            "sink tests sweep frame",
        ),
        (
            vec!["--engine", "sink", "--sweep", "cores=0;x"],
            "not a CPU list",
        ),
    ] {
        let out = pair.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn sigint_ends_the_test_and_the_agent_detaches() {
    let mut pair = Pair::new();
    pair.start_agent();
    let agent_sockets = common::sockets_of(pair.agent_pid());
    let log = pair.log_path("sigint.jsonl");
    let mut child = pair
        .run_cmd(&[
            "--engine",
            "sink",
            "--sink",
            "af-xdp",
            "--queues",
            "2",
            "--rate",
            "30000",
            "-t",
            "60s",
            "-i",
            "200ms",
            "--log",
            log.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    common::wait_for_local_samples(&log, 3);
    assert!(
        common::xdp_attached(&pair.b, "veth-b"),
        "XDP attached while the test runs"
    );
    // `ip netns exec` execs wirescope: the child's pid is wirescope's.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "run did not end after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        !status.success(),
        "an interrupted run says so in its exit status"
    );
    let log = Log::read(&log);
    let s = log.summaries();
    assert_eq!(s.len(), 1);
    assert!(s[0].interrupted);
    // The agent lives on, with its XDP program detached and its sockets closed.
    let t = Instant::now();
    while common::xdp_attached(&pair.b, "veth-b")
        || common::sockets_of(pair.agent_pid()) != agent_sockets
    {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "agent still holds XDP or sockets: {} sockets (before: {agent_sockets})",
            common::sockets_of(pair.agent_pid())
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(common::process_alive(pair.agent_pid()));
    assert_eq!(common::packet_sockets(&pair.b), 0);
}

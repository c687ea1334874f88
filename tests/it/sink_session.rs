//! `wirescope run --engine sink` on the namespace pair: the controller's host
//! generates, the agent's host sinks (or `-R`), through the session — setup
//! exchanged over the control channel, Samples of both ends, the summary's
//! `sink` key, loss per flow, the sweep table, the rules, and nothing left
//! attached afterwards. Needs root (CI runs as root).

use crate::common;

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

/// The CPUs of a small VM: a test that counts every frame pins its sink
/// threads and needs them to run when frames arrive, so these tests take
/// turns (side by side, two AF_XDP sinks on two cores overflowed their
/// rings under the suite's load: 934 of 75 070 frames "ring full"). The
/// lock is shared with the other areas' core-bound tests.
fn shared_cpus() -> common::Cores {
    common::cores()
}

fn sink_of(s: &Summary) -> &SinkSummary {
    s.sections
        .sink
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
    let _cpus = shared_cpus();
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
        // No live gaps while it ran (the generator's threads are pinned).
        assert!(
            peer.iter().all(|s| !matches!(
                &s.engine.extra,
                Some(EngineInterval::Sink(k)) if k.figures.missing > 0
            )),
            "{mode}: gaps while running"
        );
        match mode {
            // veth binds AF_XDP in copy mode and says so.
            "af-xdp" => assert_eq!(k.rx_zero_copy, Some(false), "{mode}"),
            // The XDP program counted on the CPU that ran veth-b's NAPI.
            "xdp" => assert!(k.per_queue.iter().any(|q| q.napi_cpu.is_some()), "{k:#?}"),
            _ => {}
        }
        // A paced run that the sink keeps up with names the generator.
        let bound = sums[0]
            .findings
            .iter()
            .find(|f| f.id == "sink.generator-bound")
            .unwrap_or_else(|| {
                panic!(
                    "{mode}: {:?}",
                    sums[0].findings.iter().map(|f| &f.id).collect::<Vec<_>>()
                )
            });
        assert_eq!(
            (bound.severity, bound.host),
            (wirescope::diagnose::Severity::Info, HostRole::Local),
            "{mode}"
        );
        assert!(bound.title.contains("50000 pps"), "{mode}: {}", bound.title);
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
    let _cpus = shared_cpus();
    let mut pair = Pair::new();
    pair.start_agent();
    for dir in [None, Some("-R")] {
        let mut args = vec!["--sink", "xdp", "--rate", "20000", "-t", "5s"];
        args.extend(dir);
        let (_, log) = run_ok(&pair, &args);
        let s = log.summaries()[0];
        assert_lossless(s, &format!("xdp {dir:?}"));
        let k = sink_of(s);
        // 5 s of sending, all of it counted (the drain limit is 3 s): the
        // sink counted in intervals that start after 3 s too.
        assert!(k.duration_s > 4.0, "{dir:?}: {} s", k.duration_s);
        let late: u64 = [HostRole::Local, HostRole::Peer]
            .into_iter()
            .flat_map(|h| log.samples(h))
            .filter(|s| s.start_s >= 3.5)
            .filter_map(|s| match &s.engine.extra {
                Some(EngineInterval::Sink(k)) => Some(k.figures.counted),
                _ => None,
            })
            .sum();
        assert!(late > 0, "{dir:?}: nothing counted after 3.5 s");
    }
}

#[test]
fn reverse_sinks_on_this_host() {
    let _cpus = shared_cpus();
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
    let _cpus = shared_cpus();
    let mut pair = Pair::new();
    pair.start_agent();
    // netdev ingress runs after XDP and packet taps bound to ETH_P_ALL, but
    // before the tpacket sink (bound to ETH_P_IP) and UDP sockets.
    common::drop_one_percent(&pair.b, "ingress", "veth-b");
    for mode in ["tpacket", "udp"] {
        let (text, log) = run_ok(
            &pair,
            &[
                "--sink", mode, "--queues", "2", "--rate", "50000", "-t", "2s", "-i", "500ms",
            ],
        );
        let k = sink_of(log.summaries()[0]);
        assert_eq!(k.mode.name(), mode);
        let share = k.lost as f64 / k.sent as f64 * 100.0;
        assert!(
            (share - 1.0).abs() <= 0.2,
            "{mode}: lost {share:.3} % ({k:#?})"
        );
        assert_eq!(k.messages + k.lost, k.sent, "{mode}");
        assert!(k.flows_with_loss > 0, "{mode}");
        let named: u64 = k.lossy_flows.iter().map(|f| f.lost).sum();
        assert_eq!(named, k.lost, "{mode}: every lost frame is in a named flow");
        for f in &k.lossy_flows {
            assert_eq!(f.sent - f.received, f.lost, "{mode}: {f:?}");
        }
        assert_eq!(
            k.lossy_flows.len() as u32,
            k.flows_with_loss.min(256),
            "{mode}"
        );
        assert!(text.contains("flow(s) lost frames"), "{mode}: {text}");
        // The gaps showed live, before the end's exact count.
        assert!(
            log.samples(HostRole::Peer).iter().any(|s| matches!(
                &s.engine.extra,
                Some(EngineInterval::Sink(k)) if k.figures.missing > 0
            )),
            "{mode}: no live gap"
        );
    }
}

#[test]
fn a_frame_sweep_gives_one_row_per_size() {
    let _cpus = shared_cpus();
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
    let _cpus = shared_cpus();
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
    let _cpus = shared_cpus();
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

/// `wirescope run --local-pair ARGS` (the embedded pair: this test's own
/// namespaces are not used).
fn run_local(args: &[&str]) -> std::process::Output {
    common::require_root();
    let _turn = common::local_pair_turn();
    std::process::Command::new(common::bin())
        .args(["run", "--local-pair", "--engine", "sink"])
        .args(args)
        .output()
        .unwrap()
}

fn run_fails(pair: &Pair, args: &[&str]) -> (Option<i32>, String) {
    let mut all: Vec<&str> = vec!["--engine", "sink"];
    all.extend_from_slice(args);
    let out = pair.run(&all);
    (out.status.code(), stderr(&out))
}

/// The kernel frees an AF_XDP socket's queue in deferred work after the
/// close: every point of a sweep binds the queues the previous one just
/// released, on both ends, and must get them (no fallback allowed). Flat
/// out, as the release lags most when softirqs keep the CPUs busy (without
/// the wait for a busy queue about one point in three was refused here).
#[test]
fn every_point_of_a_sweep_binds_af_xdp_again() {
    // Flat out: alone.
    let _cpus = shared_cpus();
    let mut pair = Pair::new();
    pair.start_agent();
    let (text, log) = run_ok(
        &pair,
        &[
            "--sink",
            "af-xdp",
            "--tx-path",
            "af-xdp",
            "--no-fallback",
            "-t",
            "1s",
            "--sweep",
            "frame=64,64,64,64,64",
        ],
    );
    let sums = log.summaries();
    assert_eq!(sums.len(), 5, "{text}");
    for s in &sums {
        let k = sink_of(s);
        assert_eq!((k.mode.name(), k.tx_path.name()), ("af-xdp", "af-xdp"));
        // veth has no zero-copy: the generator binds in copy mode, no fallback.
        assert!(
            k.refused.iter().all(|r| r.contains("zero-copy refused")),
            "{:?}",
            k.refused
        );
        assert!(k.messages > 10_000, "{k:#?}");
    }
    // Each row of the table says what ran.
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("threads  cores"))
        .collect();
    assert!(rows[0].contains("sink     generator"), "{text}");
    assert_eq!(
        rows[1..]
            .iter()
            .filter(|r| r.contains("af-xdp   af-xdp copy"))
            .count(),
        5,
        "{text}"
    );
}

/// `--no-fallback` holds for the generator's path as for the sink's mode.
#[test]
fn no_fallback_makes_a_refused_generator_path_an_error() {
    let _cpus = shared_cpus();
    let mut pair = Pair::new();
    pair.start_agent();
    // Two tx queues on the generator's side, four rx queues on the sink's.
    let out = std::process::Command::new("ip")
        .args([
            "netns", "exec", &pair.a, "ethtool", "-L", "veth-a", "tx", "2",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "ethtool -L: {}", stderr(&out));
    let args = [
        "--sink", "xdp", "--queues", "4", "--rate", "20000", "-t", "1s",
    ];
    let mut strict = args.to_vec();
    strict.push("--no-fallback");
    let (code, err) = run_fails(&pair, &strict);
    assert_eq!(code, Some(1), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains(
            "generator path af-xdp copy mode refused on veth-a: 4 threads but 2 tx queues"
        ) && last.contains("--no-fallback"),
        "{err}"
    );
    assert!(!err.contains("agent log"), "{err}");
    // With fallback the TX ring runs and says why AF_XDP did not.
    let (_, log) = run_ok(&pair, &args);
    let k = sink_of(log.summaries()[0]);
    assert_eq!(k.tx_path.name(), "tx-ring");
    assert!(
        k.refused.iter().any(|r| r.contains("2 tx queues")),
        "{:?}",
        k.refused
    );
}

/// More threads than the sink's rx queues, frames above the MTU and CPUs
/// the agent does not have are usage errors (exit 2, one line), found
/// before any point's traffic, in both directions.
#[test]
fn what_the_hosts_cannot_do_is_a_usage_error_before_traffic() {
    let _cpus = shared_cpus();
    let mut pair = Pair::new();
    pair.start_agent();
    let log = pair.log_path("refused.jsonl");
    let log_arg = log.to_str().unwrap();
    let mut sessions = 0;
    for (args, says) in [
        (
            vec!["--queues", "8"],
            "8 sink threads (--queues, or the CPUs of a cores set) but veth-b has 4 rx queue(s)",
        ),
        (
            vec!["-R", "--queues", "8"],
            "8 sink threads (--queues, or the CPUs of a cores set) but veth-a has 4 rx queue(s)",
        ),
        (
            vec!["--frame-size", "9000"],
            "9000 B frames need an MTU of at least 8982 on veth-a and veth-b (now 1500 and 1500)",
        ),
        (
            vec!["-R", "--frame-size", "9000"],
            "9000 B frames need an MTU of at least 8982 on veth-b and veth-a",
        ),
        (
            vec!["--sweep", "cores=0;4095"],
            "point 2 of the plan: --peer-cpus 4095: CPU 4095 cannot be used",
        ),
    ] {
        let mut all = vec!["--log", log_arg, "-t", "1s"];
        all.extend(args.iter().copied());
        let (code, err) = run_fails(&pair, &all);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error")).count(),
            1,
            "{err}"
        );
        // Nothing ran: no point of the plan has a summary.
        let l = Log::read(&log);
        assert!(l.summaries().is_empty(), "{args:?}");
        assert_eq!(l.events("refused"), 1, "{args:?}");
        // The agent serves one session at a time: the next run waits until
        // it says this one ended.
        sessions += 1;
        wait_for_sessions_ended(&pair, sessions);
    }
    // The session was not spoiled: the agent runs the next test.
    let (_, log) = run_ok(&pair, &["--rate", "20000", "-t", "1s"]);
    assert_lossless(log.summaries()[0], "after refusals");
}

/// Wait until the agent's log says `n` sessions ended (at most 10 s).
fn wait_for_sessions_ended(pair: &Pair, n: usize) {
    let t = Instant::now();
    loop {
        let log = pair.agent_log();
        let ended = log
            .lines()
            .filter(|l| l.contains("agent: session with") && l.contains(" ended: "))
            .count();
        if ended >= n {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the agent did not end session {n}:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Without --cpus/--peer-cpus each end pins its threads itself and the
/// summary names the sink's cores; on veth (no NUMA node) the sink starts
/// at the lowest usable CPU.
#[test]
fn ends_pin_their_threads_by_default_and_say_where() {
    let _cpus = shared_cpus();
    let mut pair = Pair::new();
    pair.start_agent();
    let (text, log) = run_ok(&pair, &["--rate", "20000", "-t", "1s"]);
    let k = sink_of(log.summaries()[0]);
    let usable = usable_cpus();
    assert_eq!(k.sink_cpus, vec![usable[0]], "{text}");
    assert!(
        k.per_queue.iter().all(|q| q.cpu == Some(usable[0])),
        "{k:#?}"
    );
    assert!(
        text.contains(
            "sink threads pinned by their end (to its interface's NUMA node, where it can)"
        ),
        "{text}"
    );
}

fn usable_cpus() -> Vec<wirescope::units::CpuId> {
    wirescope::traffic::sched::usable_cpus().unwrap()
}

/// The embedded pair belongs to the tool: its veth takes the MTU a jumbo
/// frame needs (and gives it back for the next point); XDP's limits on
/// veth are the sink's fallback, said in the summary.
#[test]
fn the_local_pair_sizes_its_veth_for_jumbo_frames() {
    let _cpus = shared_cpus();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jumbo.jsonl");
    let out = run_local(&[
        "--rate",
        "20000",
        "-t",
        "1s",
        "--sweep",
        "frame=9000,64",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = Log::read(&log);
    let sums = log.summaries();
    assert_eq!(sums.len(), 2);
    let (jumbo, small) = (sink_of(sums[0]), sink_of(sums[1]));
    assert_eq!((jumbo.frame_size, jumbo.lost), (9000, 0));
    assert!(jumbo.messages > 10_000, "{jumbo:#?}");
    // AF_XDP cannot take 9000 B frames: the sink fell back and says why.
    assert_eq!(jumbo.mode.name(), "tpacket");
    assert!(jumbo
        .refused
        .iter()
        .any(|r| r.contains("9000 B frames do not fit")));
    // The next point is back at 1500: AF_XDP binds again.
    assert_eq!((small.mode.name(), small.lost), ("af-xdp", 0));
}

/// On the embedded pair both ends are this host: CPUs, cores sets and
/// queues are checked before the pair is built, one line, exit 2; the
/// default pinning keeps the ends on cores of their own.
#[test]
fn the_local_pair_checks_the_whole_plan_first_and_pins_apart() {
    let _cpus = shared_cpus();
    for (args, says) in [
        (
            vec!["--cpus", "4095"],
            "--cpus 4095: CPU 4095 cannot be used on this host",
        ),
        (
            vec!["--sweep", "cores=0;4095"],
            "--sweep cores: the set 4095: CPU 4095 cannot be used on this host",
        ),
        (
            vec!["--queues", "8"],
            "--queues 8: the local pair's veth has 4 rx queues",
        ),
    ] {
        let out = run_local(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one line, nothing started: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("pinned.jsonl");
    let out = run_local(&[
        "--rate",
        "20000",
        "-t",
        "1s",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let k = sink_of(Log::read(&log).summaries()[0]).clone();
    let usable = usable_cpus();
    let text = String::from_utf8_lossy(&out.stdout);
    if usable.len() >= 2 {
        let (lo, hi) = (usable[0], usable[usable.len() - 1]);
        assert_eq!(k.sink_cpus, vec![lo]);
        assert!(
            text.contains(&format!(
                "sink threads on CPU {}, generator threads on CPU {}",
                lo.0, hi.0
            )),
            "{text}"
        );
    } else {
        assert!(k.sink_cpus.is_empty());
        assert!(text.contains("threads unpinned"), "{text}");
    }
}

/// A point refused as a usage error after the agent accepted it (frames
/// too large for the sink's MTU: the generator on this side finds out when
/// the sink's setup arrives) leaves the connection ready for the next point,
/// as the TUI and checklists rely on: the agent's answer to the aborted
/// setup is read, not left to confuse the next point.
#[test]
fn a_usage_error_after_accepting_leaves_the_connection_usable() {
    use wirescope::session::auth::Token;
    use wirescope::session::controller::{Controller, Target};
    use wirescope::session::outcome::EndReason;
    use wirescope::session::plan::PointParams;
    use wirescope::traffic::sink::SinkSpec;
    use wirescope::traffic::EngineSpec;
    let _cpus = shared_cpus();
    let mut pair = Pair::new();
    pair.start_agent();
    let ns = format!("/run/netns/{}", pair.a);
    let result = std::thread::spawn(move || {
        let f = std::fs::File::open(&ns).unwrap();
        nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let token = Token::from_text(common::TOKEN, "test").unwrap();
            let target = Target::Tcp("198.18.0.2:5310".parse().unwrap());
            let mut ctl = Controller::connect(target, &token).await.unwrap();
            let point = |(frame_size, queues, reverse)| PointParams {
                spec: Some(EngineSpec::Sink(SinkSpec {
                    frame_size,
                    queues,
                    reverse,
                    rate: 10_000,
                    ..SinkSpec::default()
                })),
                interval: Duration::from_millis(500),
                omit: Duration::ZERO,
                time: Some(Duration::from_secs(1)),
                ifaces: Vec::new(),
                peer_ifaces: Vec::new(),
                later: Vec::new(),
            };
            let cancel = tokio_util::sync::CancellationToken::new();
            let mut outcomes = Vec::new();
            // 9000 B frames (refused after Accepting), then this host sinking
            // with more threads than its veth has queues (refused before
            // Start), then a point that runs.
            for p in [(9000, 1, false), (64, 8, true), (64, 1, false)] {
                let (tx, mut rx) = tokio::sync::mpsc::channel(256);
                let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
                let r = ctl.run_point(&point(p), &tx, &cancel).await;
                drop(tx);
                let _ = drain.await;
                outcomes.push(r.map(|o| o.end).map_err(|e| (e.is_usage(), e.to_string())));
            }
            ctl.close().await;
            outcomes
        })
    })
    .join()
    .unwrap();
    match &result[0] {
        Err((true, e)) => assert!(e.contains("MTU") || e.contains("mtu"), "{e}"),
        other => panic!("9000 B frames on an MTU of 1500: {other:?}"),
    }
    match &result[1] {
        Err((true, e)) => assert!(e.contains("rx queue"), "{e}"),
        other => panic!("8 sink threads on 4 queues: {other:?}"),
    }
    assert!(
        matches!(result[2], Ok(EndReason::Completed)),
        "the next point on the same connection: {:?}\nagent log:\n{}",
        result[2],
        pair.agent_log()
    );
}

/// Issue 23 item 7: the `udp` sink's default port is one of wirescope's,
/// above 1023, so an agent without privileges (uid 65534) runs it: before,
/// the default was port 9 and binding it needed root.
#[test]
fn the_default_udp_sink_runs_on_an_agent_without_privileges() {
    let _cpus = shared_cpus();
    let mut pair = Pair::new();
    pair.start_agent_under(&[
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
    ]);
    let (_, log) = run_ok(
        &pair,
        &[
            "--sink",
            "udp",
            "--no-fallback",
            "--tx-path",
            "sendmmsg",
            "--rate",
            "20000",
            "-t",
            "1s",
            "-i",
            "500ms",
        ],
    );
    let sums = log.summaries();
    assert_eq!(sums.len(), 1);
    let k = sink_of(sums[0]);
    assert_eq!(k.mode.name(), "udp");
    // Every frame arrived (the counted span may start after the first
    // frames, so `messages` can be a few below `sent`).
    assert!(
        k.messages > 0 && k.lost == 0 && k.messages <= k.sent,
        "{k:#?}"
    );
}

/// Issue 23 item 7: without root the local pair is loopback, where a packet
/// test cannot run; it says so before anything starts, and what to do.
#[test]
fn a_packet_test_on_the_unprivileged_local_pair_says_what_to_do() {
    common::require_root(); // to drop privileges, we start as root
    let o = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args([common::bin(), "run", "--engine", "sink", "-t", "1s"])
        .env("HOME", "/tmp")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for says in [
        "without root the local pair is loopback",
        "run as root",
        "--peer HOST",
        "--sink udp --tx-path sendmmsg need no privileges",
    ] {
        assert!(err.contains(says), "{says}: {err}");
    }
    assert!(!err.contains("cannot tell which interface"), "{err}");
}

//! Node pair over real namespaces: an agent process in one namespace,
//! `wirescope run --peer` in the other, every TCP mode.

use crate::common;

use common::{stderr, Log, Pair};
use wirescope::probe::sample::HostRole;

/// Runs a test with a log and checks what every mode must satisfy.
fn run_and_check(pair: &Pair, name: &str, args: &[&str]) -> Log {
    let log = pair.log_path(name);
    let mut full = vec!["-t", "2s", "-i", "500ms", "--log", log.to_str().unwrap()];
    full.extend_from_slice(args);
    let out = pair.run(&full);
    assert!(
        out.status.success(),
        "run {args:?} failed: {}\nagent: {}",
        stderr(&out),
        pair.agent_log()
    );
    let log = Log::read(&log);
    let local = log.samples(HostRole::Local);
    let peer = log.samples(HostRole::Peer);
    assert!(
        local.len() >= 4,
        "expected ≥4 local intervals, got {}",
        local.len()
    );
    let spans = |v: &[&wirescope::probe::sample::Sample]| {
        v.iter()
            .map(|s| {
                (
                    s.index,
                    (s.start_s * 1000.0) as u64,
                    (s.end_s * 1000.0) as u64,
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        local.len(),
        peer.len(),
        "every interval has both hosts: local {:?} peer {:?}\nagent: {}",
        spans(&local),
        spans(&peer),
        pair.agent_log()
    );
    for s in local.iter().chain(peer.iter()) {
        assert!(
            !s.cpus.is_empty(),
            "interval {} of {:?} has no per-core CPU",
            s.index,
            s.host
        );
        for c in &s.cpus {
            let sum = c.busy().0 + c.idle.0 + c.iowait.0;
            assert!(
                (sum - 100.0).abs() < 0.5 || (s.end_s - s.start_s) < 0.05,
                "cpu{} sums to {sum}",
                c.cpu.0
            );
        }
    }
    assert_eq!(log.summaries().len(), 1);
    // What observing cost is in the summary, per host: the sampler's CPU
    // time over the counted intervals (its Samples' sum) and its share of
    // the busy CPU, present and plausible.
    for (h, host) in [
        (&log.summaries()[0].hosts.local, HostRole::Local),
        (&log.summaries()[0].hosts.peer, HostRole::Peer),
    ] {
        let sampled: u64 = log
            .samples(host)
            .iter()
            .filter(|s| !s.omitted && !s.cpus.is_empty())
            .map(|s| s.sampler_cpu_us)
            .sum();
        assert!(sampled > 0, "the sampler measured its own CPU time");
        assert!(
            (h.observer_cpu_ms - sampled as f64 / 1000.0).abs() < 1e-6,
            "{} vs {sampled} us",
            h.observer_cpu_ms
        );
        let share = h.observer_share_pct.expect("a share of the busy CPU");
        assert!(share > 0.0 && share < 50.0, "{share} %");
    }
    log
}

/// Sum of `rx_bytes` of connection `i` over a host's intervals.
fn rx_of(log: &Log, host: HostRole, i: usize) -> u64 {
    log.samples(host)
        .iter()
        .filter_map(|s| s.conns.get(i))
        .map(|c| c.rx_bytes)
        .sum()
}

#[test]
fn stream_forward_one_and_four_streams_reverse_and_bidir() {
    let mut pair = Pair::new();
    pair.start_agent();

    let log = run_and_check(&pair, "s1.jsonl", &[]);
    let s = log.summaries()[0];
    assert!(s.bytes > 0 && s.throughput_bps > 0.0);
    assert_eq!(s.streams.len(), 1);
    assert_eq!(s.streams[0].direction, "local->peer");
    // The summary counts what the receiver (the agent) counted, and the intervals add up to it.
    assert_eq!(s.bytes, rx_of(&log, HostRole::Peer, 0));
    assert_eq!(
        s.streams[0].bytes, s.streams[0].sent_bytes,
        "every byte written was received"
    );

    let log = run_and_check(&pair, "s4.jsonl", &["-P", "4"]);
    let s = log.summaries()[0];
    assert_eq!(s.streams.len(), 4);
    for (i, st) in s.streams.iter().enumerate() {
        assert!(st.bytes > 0, "stream {i} moved nothing");
        assert_eq!(st.bytes, rx_of(&log, HostRole::Peer, i));
    }

    let log = run_and_check(&pair, "rev.jsonl", &["-R", "-P", "2"]);
    let s = log.summaries()[0];
    assert!(s
        .streams
        .iter()
        .all(|x| x.direction == "peer->local" && x.bytes > 0));
    assert_eq!(
        s.bytes,
        rx_of(&log, HostRole::Local, 0) + rx_of(&log, HostRole::Local, 1)
    );

    let log = run_and_check(&pair, "bidir.jsonl", &["--bidir"]);
    let s = log.summaries()[0];
    assert_eq!(s.streams.len(), 2);
    assert_eq!(s.streams[0].direction, "local->peer");
    assert_eq!(s.streams[1].direction, "peer->local");
    assert!(s.streams.iter().all(|x| x.bytes > 0));
    assert_eq!(s.streams[0].bytes, rx_of(&log, HostRole::Peer, 0));
    assert_eq!(s.streams[1].bytes, rx_of(&log, HostRole::Local, 1));
}

#[test]
fn pingpong_and_rr() {
    let mut pair = Pair::new();
    pair.start_agent();

    let log = run_and_check(
        &pair,
        "pp.jsonl",
        &["-m", "pingpong", "--conns", "4", "--size", "4K"],
    );
    let s = log.summaries()[0];
    assert!(s.messages > 0 && s.mib_per_s.unwrap_or(0.0) > 0.0, "{s:?}");
    assert_eq!(s.streams.len(), 4);

    let log = run_and_check(
        &pair,
        "rr.jsonl",
        &[
            "-m",
            "rr",
            "--conns",
            "2",
            "--depth",
            "2",
            "--size",
            "100",
            "--resp-size",
            "1K",
        ],
    );
    let s = log.summaries()[0];
    let lat = s.latency_us.expect("rr reports latency");
    assert!(lat.count > 0 && lat.p50 > 0.0 && lat.p50 <= lat.p99 && lat.p99 <= lat.p999);
    assert!(s.messages > 0);
    assert_eq!(
        lat.count, s.messages,
        "every completed transaction was timed"
    );
    // Each interval of the client carries the interval's percentiles.
    assert!(log
        .samples(HostRole::Local)
        .iter()
        .any(|x| x.engine.latency.is_some()));

    // Sweep: one summary per point, in order.
    let out = pair.run(&["-m", "rr", "-t", "1s", "--sweep", "size=64,1K", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["sweep"]["value"], 1024);
    for key in [
        "engine",
        "mode",
        "duration_s",
        "bytes",
        "throughput_bps",
        "messages",
        "rate_per_s",
        "latency_us",
        "streams",
        "hosts",
    ] {
        assert!(lines[0].get(key).is_some(), "summary lacks {key}");
    }
    assert!(lines[0]["hosts"]["peer"]["cpus"]
        .as_array()
        .is_some_and(|a| !a.is_empty()));
}

#[test]
fn omit_is_logged_but_not_counted() {
    let mut pair = Pair::new();
    pair.start_agent();
    let log = pair.log_path("omit.jsonl");
    let out = pair.run(&[
        "-t",
        "2s",
        "-i",
        "500ms",
        "-O",
        "1s",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = Log::read(&log);
    let peer = log.samples(HostRole::Peer);
    let omitted: u64 = peer
        .iter()
        .filter(|s| s.omitted)
        .map(|s| s.engine.rx_bytes)
        .sum();
    let counted: u64 = peer
        .iter()
        .filter(|s| !s.omitted)
        .map(|s| s.engine.rx_bytes)
        .sum();
    assert!(omitted > 0, "the warm-up intervals are in the log");
    // Omitted by interval number, so both hosts agree: 1 s of 500 ms intervals.
    for host in [HostRole::Local, HostRole::Peer] {
        let n = log.samples(host).iter().filter(|s| s.omitted).count();
        assert_eq!(n, 2, "{host:?} omitted {n} intervals");
    }
    let s = log.summaries()[0];
    assert_eq!(s.bytes, counted);
    assert!(
        s.duration_s < 1.5,
        "duration excludes the warm-up: {}",
        s.duration_s
    );
}

#[test]
fn peer_killed_mid_run_ends_the_run_with_exit_1() {
    let mut pair = Pair::new();
    pair.start_agent();
    let log = pair.log_path("lost.jsonl");
    let child = pair
        .run_cmd(&["-t", "30s", "-i", "500ms", "--log", log.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Kill the agent once three intervals are in the log.
    common::wait_for_local_samples(&log, 3);
    pair.kill_agent();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("peer lost"), "{}", stderr(&out));
    // The loss is noticed from the connection (the kernel closed it), not
    // waited out as silence.
    assert!(
        !stderr(&out).contains("no message from the agent"),
        "{}",
        stderr(&out)
    );
    let log = Log::read(&log);
    let local = log.samples(HostRole::Local);
    assert!(
        local.len() >= 3,
        "intervals measured before the loss are kept: {}",
        local.len()
    );
    assert!(
        local.windows(2).all(|w| w[1].index == w[0].index + 1),
        "no interval is missing"
    );
    assert_eq!(log.events("peer_lost"), 1);
    let s = log.summaries();
    assert_eq!(s.len(), 1);
    assert!(s[0].peer_lost);
    // Partial results: the bytes the agent's Samples reported over the span
    // those Samples cover (not that many bytes over the run's longer time),
    // and the summary says so.
    let peer = log.samples(HostRole::Peer);
    let covered = peer.last().map_or(0.0, |p| p.end_s);
    assert!(s[0].partial.is_some(), "{:?}", s[0]);
    assert!(
        (s[0].duration_s - covered).abs() < 1e-6,
        "duration {} vs the agent's Samples covering {covered}",
        s[0].duration_s
    );
    let reported: u64 = peer.iter().map(|p| p.engine.rx_bytes).sum();
    assert_eq!(s[0].bytes, reported);
}

#[test]
fn pinning_runs_on_the_given_cpus_and_refuses_missing_ones() {
    let mut pair = Pair::new();
    pair.start_agent();
    let out = pair.run(&[
        "-m",
        "rr",
        "-t",
        "1s",
        "--cpus",
        "0",
        "--peer-cpus",
        "1",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = pair.run(&["-t", "1s", "-P", "2", "--cpus", "0-1", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // A CPU this machine does not have: refused before traffic (a usage
    // error), and says why.
    let out = pair.run(&["-t", "1s", "--cpus", "1000"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("CPU 1000 cannot be used"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn stream_options_byte_budget_zerocopy_trunc_window_mss_congestion() {
    let mut pair = Pair::new();
    pair.start_agent();
    // --bytes alone: no time limit, each of 2 streams sends half of 64 MiB.
    let out = pair.run(&["-n", "64M", "-P", "2", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["bytes"], 64 << 20, "exactly the budget arrives");

    let log = pair.log_path("opts.jsonl");
    let out = pair.run(&[
        "-t",
        "2s",
        "--zerocopy",
        "--skip-rx-copy",
        "-w",
        "1M",
        "-M",
        "1200",
        "-C",
        "cubic",
        "--json",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(s["bytes"].as_u64().unwrap() > 0);
    let zc = &s["streams"][0]["zerocopy"];
    assert!(
        zc["completed"].as_u64().unwrap() > 0,
        "zero-copy completions are read: {zc}"
    );
    assert_eq!(
        zc["copied"], zc["completed"],
        "veth always copies, and the report says so"
    );
    let log = Log::read(&log);
    let mss: Vec<u32> = log
        .samples(HostRole::Local)
        .iter()
        .flat_map(|x| x.conns.iter())
        .filter_map(|c| c.tcp.map(|t| t.snd_mss))
        .collect();
    assert!(
        !mss.is_empty() && mss.iter().all(|m| *m <= 1200),
        "TCP_MAXSEG applied: {mss:?}"
    );
}

#[test]
fn unknown_interface_names_are_refused_before_traffic() {
    let mut pair = Pair::new();
    pair.start_agent();
    for (flag, side) in [("--iface", "veth-a"), ("--peer-iface", "veth-b")] {
        let log = pair.log_path(&format!("{flag}.jsonl"));
        let out = pair.run(&["-t", "1s", flag, "nosuch0", "--log", log.to_str().unwrap()]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!("{flag}: no interface 'nosuch0'")) && err.contains(side),
            "{err}"
        );
        // Nothing ran: the log holds no test result.
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(!text.contains("\"type\":\"summary\""), "{text}");
    }
}

#[test]
fn cpus_this_host_does_not_have_are_refused_before_traffic() {
    let mut pair = Pair::new();
    pair.start_agent();
    for (flag, side) in [
        ("--cpus", "cannot be used on this host"),
        ("--peer-cpus", "the agent refuses"),
    ] {
        let out = pair.run(&["-t", "1s", flag, "0,4000"]);
        let err = stderr(&out);
        // A usage error (exit 2), one line.
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error")).count(),
            1,
            "{err}"
        );
        assert!(
            err.contains(&format!("{flag} 0,4000: CPU 4000 cannot be used")) && err.contains(side),
            "{err}"
        );
    }
}

/// iperf3's `-p`: the agent listens on `-p PORT` (all addresses) and `run
/// --peer HOST -p PORT` reaches it there; the default port finds nobody.
#[test]
fn dash_p_sets_the_agents_port_on_both_ends() {
    let mut pair = Pair::new();
    pair.start_agent_with(&[], &["-p", "5391"]);
    let o = pair.run(&["-p", "5391", "-t", "1s", "--json"]);
    assert!(
        o.status.success(),
        "{}\nagent: {}",
        stderr(&o),
        pair.agent_log()
    );
    assert!(pair.agent_log().contains("5391"), "{}", pair.agent_log());
    let o = pair.run(&["-t", "1s"]);
    assert!(!o.status.success(), "nothing listens on the default port");
}

/// The host pid of `pid`'s first child (the process `unshare --fork` runs).
fn child_of(pid: u32) -> u32 {
    for _ in 0..250 {
        let kids =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        if let Some(k) = kids.split_whitespace().next() {
            return k.parse().unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("{pid} has no child");
}

fn sigterm(pid: u32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
}

/// In a container wirescope is PID 1, and PID 1 gets no default action for
/// SIGTERM: only a handler stops it. Both the agent and `run` are PID 1 of
/// their own PID namespace here; SIGTERM ends `run` with exit 143 and its
/// log's summary written, and the agent within a few seconds.
#[test]
fn as_pid_1_sigterm_stops_run_with_its_log_and_the_agent() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let mut pair = Pair::new();
    pair.start_agent_under(&["unshare", "--pid", "--fork"]);
    let agent = child_of(pair.agent_pid());
    let log = pair.log_path("pid1.jsonl");
    let mut c = Command::new("ip")
        .args(["netns", "exec", &pair.a, "unshare", "--pid", "--fork"])
        .args([common::bin(), "run", "--peer", "198.18.0.2", "-t", "30s"])
        .args(["-i", "500ms", "--log", log.to_str().unwrap()])
        .env("WIRESCOPE_TOKEN", common::TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let run = child_of(c.id());
    let mut stdout = std::io::BufReader::new(c.stdout.take().unwrap());
    loop {
        let mut line = String::new();
        let n = stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "the run ended before its first interval");
        if line.starts_with("[SUM]") {
            break;
        }
    }
    sigterm(run);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let out = c.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{}", stderr(&out));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.lines().any(|l| l.contains("\"type\":\"summary\"")),
        "no summary in the log after SIGTERM"
    );
    sigterm(agent);
    let t = Instant::now();
    while common::process_alive(agent) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the agent as PID 1 ignored SIGTERM: {}",
            pair.agent_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_sweep_with_stderr_piped_prints_no_progress_line() {
    // The progress line ("point k of N, ~T left") is for a terminal; a
    // piped stderr (a CI log, a file) gets the table's lines only.
    let mut pair = Pair::new();
    pair.start_agent();
    let out = pair.run(&["-t", "1s", "--sweep", "streams=1,2"]);
    assert!(
        out.status.success(),
        "{}\nagent: {}",
        stderr(&out),
        pair.agent_log()
    );
    let text = stderr(&out);
    assert!(
        !text.contains("point 1 of") && !text.contains('\r'),
        "{text}"
    );
    // The sweep ran both points (so a progress line would have had something to say).
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.matches("streams").count() >= 2, "{table}");
}

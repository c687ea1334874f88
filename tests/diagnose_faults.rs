//! Fault injection on a real namespace pair: break one thing, run a test,
//! and check that the diagnosis names it (in the log, in --json and in the
//! table), ranked first where the issue says so, without false alarms.

mod common;

use common::{stderr, Pair};
use std::process::Command;

/// The CPU-contention faults run one at a time (each brings its own load).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Another process keeping one core busy for as long as it lives (killed
/// and reaped on drop, on every exit path): the rules must hold on a
/// machine with other load, not only on an idle one.
struct Hog(std::process::Child);

impl Hog {
    fn on(cpu: u32) -> Hog {
        let child = Command::new("taskset")
            .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
            .spawn()
            .expect("taskset (util-linux) starts a CPU hog");
        Hog(child)
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ns(pair_ns: &str, args: &[&str]) {
    let o = Command::new("ip")
        .args(["netns", "exec", pair_ns])
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Run with --json and return the ranked findings of the summary.
fn findings(pair: &Pair, args: &[&str]) -> Vec<serde_json::Value> {
    findings_and_limit(pair, args).0
}

/// The ranked findings and the `limited_by` sentence of the summary.
fn findings_and_limit(pair: &Pair, args: &[&str]) -> (Vec<serde_json::Value>, String) {
    let mut full = vec!["-t", "4s", "--json"];
    full.extend_from_slice(args);
    let out = pair.run(&full);
    assert!(
        out.status.success() || out.status.code() == Some(3),
        "{}",
        stderr(&out)
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = s["findings"].as_array().cloned().unwrap_or_default();
    for x in &f {
        for key in ["id", "severity", "host", "title", "evidence", "fix"] {
            assert!(x.get(key).is_some(), "finding lacks {key}: {x}");
        }
    }
    let limit = s["limited_by"]
        .as_str()
        .unwrap_or_else(|| panic!("the summary says what limited the test: {s}"))
        .to_string();
    (f, limit)
}

fn ids(f: &[serde_json::Value]) -> Vec<String> {
    f.iter()
        .map(|x| {
            format!(
                "{}:{}:{}",
                x["severity"].as_str().unwrap_or(""),
                x["host"].as_str().unwrap_or(""),
                x["id"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn everything_on_one_cpu_ranks_the_saturated_core_first() {
    let _serial = serial();
    let mut pair = Pair::new();
    pair.start_agent();
    for (n, dev) in [(&pair.a, "veth-a"), (&pair.b, "veth-b")] {
        for q in 0..4 {
            ns(n, &["sh", "-c", &format!("echo 1 > /sys/class/net/{dev}/queues/rx-{q}/rps_cpus; echo 1 > /sys/class/net/{dev}/queues/tx-{q}/xps_cpus")]);
        }
    }
    // The other core runs someone else's work meanwhile.
    let _hog = Hog::on(1);
    let (f, limit) = findings_and_limit(&pair, &["-P", "2", "--cpus", "0", "--peer-cpus", "0"]);
    assert!(limit.starts_with("limited by one core on the "), "{limit}");
    assert!(limit.contains("cpu0"), "{limit}");
    let first = &f[0];
    assert_eq!(
        first["id"],
        "cpu.single-core-saturated",
        "ranked: {:?}",
        ids(&f)
    );
    assert!(first["title"].as_str().unwrap().contains("cpu0"), "{first}");
    assert!(first["fix"].as_array().is_some_and(|v| !v.is_empty()));
}

#[test]
fn tiny_receive_buffers_are_named() {
    let _serial = serial();
    let mut pair = Pair::new();
    ns(
        &pair.b,
        &["sysctl", "-q", "-w", "net.ipv4.tcp_rmem=4096 16384 32768"],
    );
    ns(
        &pair.b,
        &["sysctl", "-q", "-w", "net.ipv4.tcp_wmem=4096 16384 32768"],
    );
    pair.start_agent();
    let f = findings(&pair, &["-P", "2"]);
    let hit = f
        .iter()
        .find(|x| x["id"] == "tcp.buffer-limited")
        .unwrap_or_else(|| panic!("no tcp.buffer-limited in {:?}", ids(&f)));
    assert_ne!(hit["severity"], "info", "{hit}");
    assert!(
        serde_json::to_string(&hit["fix"])
            .unwrap()
            .contains("tcp_rmem"),
        "{hit}"
    );
}

#[test]
fn gro_off_on_the_receiver_is_named() {
    let _serial = serial();
    let mut pair = Pair::new();
    ns(&pair.b, &["ethtool", "-K", "veth-b", "gro", "off"]);
    pair.start_agent();
    let f = findings(&pair, &["-P", "2"]);
    let hit = f
        .iter()
        .find(|x| x["id"] == "nic.gro-off" && x["host"] == "peer")
        .unwrap_or_else(|| panic!("{:?}", ids(&f)));
    assert!(
        serde_json::to_string(&hit["fix"])
            .unwrap()
            .contains("ethtool -K veth-b gro on"),
        "{hit}"
    );
}

#[test]
fn one_stream_on_a_four_queue_veth_is_a_queue_imbalance_and_nothing_worse() {
    let _serial = serial();
    let mut pair = Pair::new();
    pair.start_agent();
    // veth has no per-queue counters of its own: the eBPF probes give them.
    let f = findings(&pair, &["-P", "1"]);
    let imbalance: Vec<&serde_json::Value> = f
        .iter()
        .filter(|x| x["id"] == "nic.queue-imbalance" && x["host"] == "peer")
        .collect();
    let rx = imbalance
        .iter()
        .find(|x| {
            x["title"]
                .as_str()
                .is_some_and(|t| t.starts_with("veth-b rx queue"))
        })
        .unwrap_or_else(|| panic!("no rx queue imbalance on the receiver: {:?}", ids(&f)));
    assert_eq!(rx["severity"], "info", "{rx}");
    let ev = rx["evidence"].to_string();
    assert!(
        ev.contains("eBPF netif_receive_skb"),
        "evidence names its source: {ev}"
    );
    assert!(
        f.iter().all(|x| x["severity"] != "error"),
        "no error-level finding: {:?}",
        ids(&f)
    );
}

#[test]
fn a_healthy_run_raises_no_warning_and_logs_each_change() {
    let _serial = serial();
    let mut pair = Pair::new();
    pair.start_agent();
    let log = pair.log_path("h.jsonl");
    let (f, limit) = findings_and_limit(
        &pair,
        &[
            "-P",
            "2",
            "--log",
            log.to_str().unwrap(),
            "--fail-on",
            "warn",
        ],
    );
    assert!(
        f.iter().all(|x| x["severity"] == "info"),
        "false alarms: {:?}",
        ids(&f)
    );
    // No warning, so no named limit: what the CPUs say instead.
    assert!(limit.starts_with("no "), "{limit}");
    // Changes during the run are records of their own, raised before they are summarised.
    let text = std::fs::read_to_string(&log).unwrap();
    let changes: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["type"] == "finding")
        .collect();
    assert!(changes
        .iter()
        .all(|c| c["change"] == "raised" || c["change"] == "cleared"));
    assert!(changes
        .iter()
        .filter(|c| c["change"] == "raised")
        .all(|c| c["severity"] == "info"));
}

#[test]
fn fail_on_warn_exits_3_when_a_warning_is_raised() {
    let _serial = serial();
    let mut pair = Pair::new();
    pair.start_agent();
    let out = pair.run(&[
        "-t",
        "4s",
        "-P",
        "2",
        "--cpus",
        "0",
        "--peer-cpus",
        "0",
        "--fail-on",
        "warn",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains(">> finding [warn]"),
        "changes are shown as they happen: {table}"
    );
}

/// The healthy half of the fault suite: every engine and mode, run as a
/// user would on a namespace pair while another process keeps one core
/// busy, raises no warning or error, and its summary says what limited it.
/// (Each case's expectation is listed in assets/rules.md, "Fault suite".)
#[test]
fn healthy_runs_of_every_engine_and_mode_raise_no_warning_on_a_busy_machine() {
    let _serial = serial();
    let mut pair = Pair::new();
    pair.start_agent();
    let _hog = Hog::on(1);
    let cases: &[&[&str]] = &[
        &["-P", "1"],
        &["-P", "2"],
        &["-P", "8"],
        &["-R"],
        &["--bidir"],
        &["-m", "rr"],
        &["-m", "pingpong"],
        &["--engine", "grpc"],
        &["--engine", "grpc", "--channels", "8", "--concurrency", "64"],
        &["--engine", "grpc", "-m", "stream"],
        &["--engine", "grpc", "-m", "stream", "--channels", "8"],
        &["--engine", "sink", "--sink", "xdp", "--rate", "50000"],
        &["--engine", "sink", "--sink", "af-xdp", "--rate", "50000"],
        &["--engine", "sink", "--sink", "tpacket", "--rate", "50000"],
        &["--engine", "sink", "--sink", "udp", "--rate", "50000"],
    ];
    let mut alarms = Vec::new();
    for args in cases {
        let mut full = vec!["-t", "3s", "--json"];
        full.extend_from_slice(args);
        let out = pair.run(&full);
        assert!(
            out.status.success(),
            "{args:?}: {}\nagent: {}",
            stderr(&out),
            pair.agent_log()
        );
        let s: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not one JSON summary ({e})"));
        let f = s["findings"].as_array().cloned().unwrap_or_default();
        let loud: Vec<String> = ids(&f)
            .into_iter()
            .filter(|x| !x.starts_with("info:"))
            .collect();
        if !loud.is_empty() {
            alarms.push(format!("{args:?}: {loud:?}"));
        }
        let limit = s["limited_by"].as_str().unwrap_or("");
        assert!(limit.starts_with("no "), "{args:?}: {limit}");
    }
    assert!(
        alarms.is_empty(),
        "false alarms on healthy runs:\n{}",
        alarms.join("\n")
    );
}

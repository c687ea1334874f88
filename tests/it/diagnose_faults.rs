//! The fault suite: break one thing, run a test, and check that the
//! diagnosis ranks the injected cause first with nothing else at warn or
//! error — on a real namespace pair while another process keeps a core
//! busy, or, for what this machine cannot produce (RDMA devices, NUMA and
//! SMT topology), on captured hosts built from the real fixtures, through
//! the same entry points (`check --from`, `diagnose` on a recorded window).
//! Healthy runs of every engine and mode, and `watch` on an idle pair,
//! raise nothing at warn. assets/rules.md ("Fault suite") lists the cases.

use crate::common;

use common::{stderr, Pair};
use std::process::Command;

/// The CPU-contention faults run one at a time (each brings its own load),
/// and apart from the other areas' tests that load or count on the cores.
fn serial() -> common::Cores {
    common::cores()
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
    // Both ends share cpu0 (one kernel): the same finding on both hosts,
    // and nothing else loud.
    if let Err(e) = first_and_alone(&f, "cpu.single-core-saturated", None) {
        panic!("{e}");
    }
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
    let _hog = Hog::on(1);
    let f = findings(&pair, &["-P", "2"]);
    let hit = f
        .iter()
        .find(|x| x["id"] == "tcp.buffer-limited")
        .unwrap_or_else(|| panic!("no tcp.buffer-limited in {:?}", ids(&f)));
    assert_ne!(hit["severity"], "info", "{hit}");
    if let Err(e) = first_and_alone(&f, "tcp.buffer-limited", Some("peer")) {
        panic!("{e}");
    }
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

// ---------- the fault suite: the injected cause ranked first, alone ----------

/// The expected finding ranked first (on `host` when given), at warn or
/// error, and no other id at warn or error; else what was ranked instead.
fn first_and_alone(f: &[serde_json::Value], id: &str, host: Option<&str>) -> Result<(), String> {
    let first_ok = f.first().is_some_and(|x| {
        x["id"] == id && x["severity"] != "info" && host.is_none_or(|h| x["host"] == h)
    });
    let loud_others = f.iter().any(|x| x["severity"] != "info" && x["id"] != id);
    if first_ok && !loud_others {
        Ok(())
    } else {
        Err(format!(
            "expected {id}{} first and nothing else at warn/error; ranked: {:?}",
            host.map_or(String::new(), |h| format!(" on the {h} host")),
            ids(f)
        ))
    }
}

/// Which namespace of the pair a command runs in.
#[derive(Clone, Copy)]
enum Ns {
    /// The controller's (`wirescope run`, 198.18.0.1, veth-a).
    A,
    /// The agent's (198.18.0.2, veth-b).
    B,
}

/// One injected fault on a namespace pair: shell commands that break one
/// thing (and put it back), the test that shows it, the finding expected
/// first and on which host, and what the summary's `limited_by` sentence
/// (the limit and its first fix) must say.
struct Fault {
    what: &'static str,
    inject: &'static [(Ns, &'static str)],
    undo: &'static [(Ns, &'static str)],
    args: &'static [&'static str],
    id: &'static str,
    host: &'static str,
    says: &'static str,
}

/// `sh -c CMD` in one namespace of the pair; `$WST_DIR` is the pair's
/// temporary directory (where an injection saves what its undo restores).
fn sh(pair: &Pair, at: Ns, cmd: &str) {
    let n = match at {
        Ns::A => &pair.a,
        Ns::B => &pair.b,
    };
    let o = Command::new("ip")
        .args(["netns", "exec", n, "sh", "-c", cmd])
        .env("WST_DIR", pair.dir.path())
        .output()
        .expect("run ip netns exec");
    assert!(
        o.status.success(),
        "{cmd} in {n}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Run each fault on one pair (injected, measured, undone in turn) while
/// another process keeps cpu1 busy; every mismatch is collected, so one
/// run reports them all.
fn run_faults(faults: &[Fault]) {
    let _serial = serial();
    let mut pair = Pair::new();
    pair.start_agent();
    let _hog = Hog::on(1);
    let mut wrong = Vec::new();
    for fault in faults {
        for (at, cmd) in fault.inject {
            sh(&pair, *at, cmd);
        }
        let (f, limit) = findings_and_limit(&pair, fault.args);
        if let Err(e) = first_and_alone(&f, fault.id, Some(fault.host)) {
            let titles: Vec<String> = f
                .iter()
                .filter(|x| x["severity"] != "info")
                .map(|x| format!("{}: {}", x["id"], x["title"]))
                .collect();
            wrong.push(format!(
                "{} ({:?}): {e}\n  {}",
                fault.what,
                fault.args,
                titles.join("\n  ")
            ));
        } else if !limit.starts_with("limited by ") || !limit.contains(fault.says) {
            wrong.push(format!(
                "{}: the summary does not name the limit with {:?}: {limit}",
                fault.what, fault.says
            ));
        }
        for (at, cmd) in fault.undo {
            sh(&pair, *at, cmd);
        }
    }
    assert!(
        wrong.is_empty(),
        "faults not ranked first or not alone:\n{}",
        wrong.join("\n")
    );
}

/// 1 % of the full-sized packets from the controller dropped on the
/// agent's input (data and control share port 5310; the control channel's
/// small messages and the ACKs pass).
const LOSS_INTO_B: &str = "nft add table inet wst_loss \
    && nft 'add chain inet wst_loss c { type filter hook input priority 0 ; }' \
    && nft add rule inet wst_loss c ip saddr 198.18.0.1 ip length gt 1000 numgen random mod 100 lt 1 drop";
/// The same on the controller's input, for data the agent sends (-R).
const LOSS_INTO_A: &str = "nft add table inet wst_loss \
    && nft 'add chain inet wst_loss c { type filter hook input priority 0 ; }' \
    && nft add rule inet wst_loss c ip saddr 198.18.0.2 ip length gt 1000 numgen random mod 100 lt 1 drop";
const NO_LOSS: &str = "nft delete table inet wst_loss";
const TINY_RMEM: &str = "sysctl -n net.ipv4.tcp_rmem > \"$WST_DIR/tcp_rmem\" \
    && sysctl -qw net.ipv4.tcp_rmem='4096 16384 32768'";
const RMEM_BACK: &str = "sysctl -qw net.ipv4.tcp_rmem=\"$(cat \"$WST_DIR/tcp_rmem\")\"";

/// TCP faults on the namespace pair.
#[test]
fn tcp_faults_rank_the_injected_cause_first_on_a_busy_machine() {
    run_faults(&[
        Fault {
            what: "tiny tcp_rmem on the controller, data from the agent (-R)",
            inject: &[(Ns::A, TINY_RMEM)],
            undo: &[(Ns::A, RMEM_BACK)],
            args: &["-P", "2", "-R"],
            id: "tcp.buffer-limited",
            host: "local",
            says: "net.ipv4.tcp_rmem",
        },
        Fault {
            what: "a receive buffer the test sets too small (--window 8K)",
            inject: &[],
            undo: &[],
            args: &["-P", "2", "--window", "8K"],
            id: "tcp.buffer-limited",
            host: "peer",
            says: "try: wirescope run --window",
        },
        Fault {
            what: "1 % random loss into the agent",
            inject: &[(Ns::B, LOSS_INTO_B)],
            undo: &[(Ns::B, NO_LOSS)],
            args: &["-P", "2"],
            id: "tcp.retransmits",
            host: "local",
            says: "retransmissions on the local host",
        },
        Fault {
            what: "1 % random loss into the controller, data from the agent (-R)",
            inject: &[(Ns::A, LOSS_INTO_A)],
            undo: &[(Ns::A, NO_LOSS)],
            args: &["-P", "2", "-R"],
            id: "tcp.retransmits",
            host: "peer",
            says: "retransmissions on the peer host",
        },
        Fault {
            what: "tbf shaping the sender's veth to 200 Mbit/s",
            inject: &[(
                Ns::A,
                "tc qdisc add dev veth-a root tbf rate 200mbit burst 256kb latency 20ms",
            )],
            undo: &[(Ns::A, "tc qdisc del dev veth-a root")],
            args: &["-P", "2"],
            id: "qdisc.shaping",
            host: "local",
            says: "tc -s qdisc show dev veth-a",
        },
        Fault {
            what: "htb shaping the agent's veth to 200 Mbit/s, data from the agent (-R)",
            inject: &[(
                Ns::B,
                "tc qdisc add dev veth-b root handle 1: htb default 10 \
                 && tc class add dev veth-b parent 1: classid 1:10 htb rate 200mbit",
            )],
            undo: &[(Ns::B, "tc qdisc del dev veth-b root")],
            args: &["-P", "2", "-R"],
            id: "qdisc.shaping",
            host: "peer",
            says: "tc -s qdisc show dev veth-b",
        },
        Fault {
            what: "TSO off on the sender",
            inject: &[(Ns::A, "ethtool -K veth-a tso off")],
            undo: &[(Ns::A, "ethtool -K veth-a tso on")],
            args: &["-P", "2"],
            id: "nic.tso-off",
            host: "local",
            says: "ethtool -K veth-a tso on",
        },
        Fault {
            what: "MTU 1400 on the agent's veth, 1500 on the controller's",
            inject: &[(Ns::B, "ip link set dev veth-b mtu 1400")],
            undo: &[(Ns::B, "ip link set dev veth-b mtu 1500")],
            args: &["-P", "2"],
            id: "nic.mtu-small",
            host: "peer",
            says: "mtu 1500",
        },
    ]);
}

/// gRPC and packet-test faults on the namespace pair.
#[test]
fn grpc_and_packet_faults_rank_the_injected_cause_first_on_a_busy_machine() {
    run_faults(&[
        Fault {
            what: "gRPC: tbf shaping the server's veth to 20 Mbit/s (16 KiB responses)",
            inject: &[(
                Ns::B,
                "tc qdisc add dev veth-b root tbf rate 20mbit burst 64kb latency 50ms",
            )],
            undo: &[(Ns::B, "tc qdisc del dev veth-b root")],
            args: &["--engine", "grpc", "--size", "16K"],
            id: "qdisc.shaping",
            host: "peer",
            says: "tc -s qdisc show dev veth-b",
        },
        Fault {
            what: "gRPC: TSO off on the client, 1 MiB requests",
            inject: &[(Ns::A, "ethtool -K veth-a tso off")],
            undo: &[(Ns::A, "ethtool -K veth-a tso on")],
            args: &[
                "--engine",
                "grpc",
                "--size",
                "1M",
                "--resp-size",
                "64",
                "--concurrency",
                "4",
            ],
            id: "nic.tso-off",
            host: "local",
            says: "ethtool -K veth-a tso on",
        },
        Fault {
            what: "packet test: tbf shaping the generator's veth to 10 Mbit/s (sendmmsg goes through the qdisc)",
            inject: &[(
                Ns::A,
                "tc qdisc add dev veth-a root tbf rate 10mbit burst 32kb latency 50ms",
            )],
            undo: &[(Ns::A, "tc qdisc del dev veth-a root")],
            args: &[
                "--engine",
                "sink",
                "--sink",
                "xdp",
                "--tx-path",
                "sendmmsg",
                "--rate",
                "0",
            ],
            id: "qdisc.shaping",
            host: "local",
            says: "tc -s qdisc show dev veth-a",
        },
    ]);
}

// ---------- captured hosts: what this machine cannot produce ----------

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

fn put(root: &std::path::Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn fixture(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

const MLX5: &str = "sys/class/infiniband/mlx5_0";
const HW: &str = "sys/class/infiniband/mlx5_0/ports/1/hw_counters";

/// A captured RoCE host: the real sysfs trees of tests/fixtures/rdma with
/// mlx5_0 port 1 as RoCE on eth0 (MTU 9000), its GID table (index 2/3:
/// the v1/v2 GIDs of 198.18.0.1), one boot, `uptime` seconds up.
fn roce_capture(uptime: f64) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    copy_tree(&fixture("rdma"), root);
    put(root, &format!("{MLX5}/ports/1/link_layer"), "Ethernet\n");
    put(root, &format!("{MLX5}/ports/1/phys_state"), "5: LinkUp\n");
    put(
        root,
        &format!("{MLX5}/ports/1/rate"),
        "25 Gb/sec (1X EDR)\n",
    );
    for (i, (gid, kind)) in [
        ("fe80:0000:0000:0000:0a7f:bcff:fe12:45ef", "IB/RoCE v1"),
        ("fe80:0000:0000:0000:0a7f:bcff:fe12:45ef", "RoCE v2"),
        ("0000:0000:0000:0000:0000:ffff:c612:0001", "IB/RoCE v1"),
        ("0000:0000:0000:0000:0000:ffff:c612:0001", "RoCE v2"),
    ]
    .iter()
    .enumerate()
    {
        put(
            root,
            &format!("{MLX5}/ports/1/gids/{i}"),
            &format!("{gid}\n"),
        );
        put(
            root,
            &format!("{MLX5}/ports/1/gid_attrs/types/{i}"),
            &format!("{kind}\n"),
        );
        put(
            root,
            &format!("{MLX5}/ports/1/gid_attrs/ndevs/{i}"),
            "eth0\n",
        );
    }
    put(root, &format!("{MLX5}/device/net/eth0/ifindex"), "2\n");
    put(root, "sys/class/net/eth0/mtu", "9000\n");
    put(root, "proc/uptime", &format!("{uptime:.2} 9000.00\n"));
    put(
        root,
        "proc/sys/kernel/random/boot_id",
        "6a1e0f62-1d0b-4a57-8f0e-2b1c3d4e5f60\n",
    );
    d
}

/// `wirescope check --json ARGS`: the ranked findings.
fn check(args: &[&str]) -> Vec<serde_json::Value> {
    let out = Command::new(common::bin())
        .arg("check")
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "check {args:?}: {}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["findings"].as_array().cloned().unwrap_or_default()
}

/// RDMA faults on captured hosts (this machine has no RDMA device), through
/// `check --from` (and `--since` for counters that grew between two
/// captures of one boot), and a test's own GID through `diagnose`.
#[test]
fn rdma_faults_on_captured_hosts_rank_the_injected_cause_first() {
    let mut wrong = Vec::new();
    let mut expect = |what: &str, f: &[serde_json::Value], id: &str, host: &str| {
        if let Err(e) = first_and_alone(f, id, Some(host)) {
            wrong.push(format!("{what}: {e}"));
        }
    };
    let path = |d: &tempfile::TempDir| d.path().to_str().unwrap().to_string();
    // The healthy capture: nothing loud, so each fault below is the only change.
    let healthy = roce_capture(5000.0);
    let f = check(&["--from", &path(&healthy)]);
    assert!(
        f.iter().all(|x| x["severity"] == "info"),
        "the healthy RoCE capture: {:?}",
        ids(&f)
    );
    let down = roce_capture(5000.0);
    put(down.path(), &format!("{MLX5}/ports/1/state"), "1: DOWN\n");
    put(
        down.path(),
        &format!("{MLX5}/ports/1/phys_state"),
        "3: Disabled\n",
    );
    expect(
        "port down",
        &check(&["--from", &path(&down)]),
        "rdma.port-down",
        "local",
    );
    let mtu = roce_capture(5000.0);
    put(mtu.path(), "sys/class/net/eth0/mtu", "1500\n");
    expect(
        "RoCE on a 1500-byte netdev",
        &check(&["--from", &path(&mtu)]),
        "rdma.mtu-small",
        "local",
    );
    // Counters that grew over 10 s between two captures of one boot.
    for (what, counters, id) in [
        (
            "CNPs and ECN marks",
            &[
                ("np_cnp_sent", 20_000u64),
                ("np_ecn_marked_roce_packets", 20_000),
            ][..],
            "rdma.congestion",
        ),
        (
            "receive WQEs exhausted",
            &[("out_of_buffer", 5_000)][..],
            "rdma.out-of-buffer",
        ),
        (
            "packets lost and retransmitted",
            &[("out_of_sequence", 400), ("packet_seq_err", 100)][..],
            "rdma.retransmits",
        ),
    ] {
        let (before, after) = (roce_capture(5000.0), roce_capture(5010.0));
        for (name, grew) in counters {
            put(before.path(), &format!("{HW}/{name}"), "1000\n");
            put(
                after.path(),
                &format!("{HW}/{name}"),
                &format!("{}\n", 1000 + grew),
            );
        }
        expect(
            what,
            &check(&["--from", &path(&after), "--since", &path(&before)]),
            id,
            "local",
        );
    }
    // The agent's end of an RDMA test on the RoCE v1 GID of its address
    // (the controller's on the v2 one), both hosts as captured.
    let cap = roce_capture(5000.0);
    let facts = wirescope::probe::system::read_host_facts(
        &wirescope::probe::capture_dir::CaptureDir::new(cap.path()),
        &["eth0".to_string()],
    );
    use wirescope::traffic::rdma::{RdmaMode, RdmaOp, RdmaSpec};
    let mut rdma = RdmaSpec::perftest_defaults(RdmaOp::Write, RdmaMode::Bw);
    rdma.local.ib_dev = Some("mlx5_0".into());
    rdma.local.gid_index = Some(3);
    rdma.peer.ib_dev = Some("mlx5_0".into());
    rdma.peer.gid_index = Some(2);
    let spec = wirescope::traffic::EngineSpec::Rdma(rdma);
    let found = wirescope::diagnose::diagnose(&wirescope::diagnose::Input {
        local: wirescope::diagnose::Window {
            samples: &[],
            facts: Some(&facts),
        },
        peer: wirescope::diagnose::Window {
            samples: &[],
            facts: Some(&facts),
        },
        test: wirescope::diagnose::TestContext { spec: Some(&spec) },
    });
    expect(
        "the test's GID is RoCE v1",
        &serde_json::to_value(&found)
            .unwrap()
            .as_array()
            .cloned()
            .unwrap(),
        "rdma.gid-v1",
        "peer",
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Sink placement faults need a two-socket SMT host: a paced packet test
/// recorded on the namespace pair, whose sink host's topology is the
/// captured two-socket host's (tests/fixtures/topology/2s-smt: node 0 =
/// cpus 0-1,4-5, node 1 = 2-3,6-7, siblings numbered +4, the NIC on node
/// 1), diagnosed with the sink cores a user would give (`--peer-cpus`).
#[test]
fn sink_placement_on_a_captured_two_socket_host_ranks_first() {
    use wirescope::diagnose::{diagnose, Input, TestContext, Window};
    use wirescope::probe::sample::{HostRole, Sample};
    use wirescope::traffic::EngineSpec;
    use wirescope::units::CpuId;
    let _serial = serial();
    let mut pair = Pair::new();
    pair.start_agent();
    let _hog = Hog::on(1);
    let log = pair.log_path("paced-sink.jsonl");
    let out = pair.run(&[
        "-t",
        "3s",
        "--engine",
        "sink",
        "--sink",
        "af-xdp",
        "--queues",
        "2",
        "--rate",
        "50000",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let recorded = common::Log::read(&log);
    let spec = recorded
        .header()
        .spec
        .clone()
        .expect("the header holds the spec");
    let owned = |h: HostRole| -> Vec<Sample> { recorded.samples(h).into_iter().cloned().collect() };
    let (local, peer) = (owned(HostRole::Local), owned(HostRole::Peer));
    let lf = Window::from_samples(&local).facts().cloned();
    let mut pf = Window::from_samples(&peer)
        .facts()
        .cloned()
        .expect("the agent's Samples carry its facts");
    // The captured host, its NIC named as the sink's interface.
    let cap = tempfile::tempdir().unwrap();
    copy_tree(&fixture("topology/2s-smt"), cap.path());
    put(cap.path(), "sys/devices/system/cpu/online", "0-7\n");
    std::fs::rename(
        cap.path().join("sys/class/net/eth0"),
        cap.path().join("sys/class/net/veth-b"),
    )
    .unwrap();
    let host = wirescope::probe::system::read_host_facts(
        &wirescope::probe::capture_dir::CaptureDir::new(cap.path()),
        &["veth-b".to_string()],
    );
    assert_eq!(host.cpu_places.len(), 8, "{host:#?}");
    pf.cpu_places = host.cpu_places.clone();
    pf.numa = host.numa.clone();
    let nic = pf
        .nics
        .iter_mut()
        .find(|n| n.name == "veth-b")
        .expect("the agent's facts describe veth-b");
    nic.numa_node = host.nics[0].numa_node;
    nic.local_cpulist = host.nics[0].local_cpulist.clone();
    let diagnosed = |cpus: &[u32]| {
        let mut spec = spec.clone();
        match &mut spec {
            EngineSpec::Sink(k) => k.peer_cpus = cpus.iter().map(|c| CpuId(*c)).collect(),
            other => panic!("not a packet test: {other:?}"),
        }
        let f = diagnose(&Input {
            local: Window {
                samples: &local,
                facts: lf.as_ref(),
            },
            peer: Window {
                samples: &peer,
                facts: Some(&pf),
            },
            test: TestContext { spec: Some(&spec) },
        });
        serde_json::to_value(&f)
            .unwrap()
            .as_array()
            .cloned()
            .unwrap()
    };
    // Two cores of the NIC's node on separate physical cores: nothing loud.
    let healthy = diagnosed(&[2, 3]);
    assert!(
        healthy.iter().all(|x| x["severity"] == "info"),
        "{:?}\n{healthy:#?}",
        ids(&healthy)
    );
    let mut wrong = Vec::new();
    for (what, cpus, id) in [
        (
            "sink threads on the other socket's cores",
            &[0u32, 1][..],
            "sink.remote-numa",
        ),
        (
            "two sink threads on SMT siblings",
            &[2, 6][..],
            "sink.smt-siblings",
        ),
    ] {
        if let Err(e) = first_and_alone(&diagnosed(cpus), id, Some("peer")) {
            wrong.push(format!("{what}: {e}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The healthy case without traffic: `watch` of both ends of an idle pair
/// (headless, --json) while another process keeps cpu1 busy raises
/// nothing at warn or error.
#[test]
fn watch_on_an_idle_pair_raises_no_warning_on_a_busy_machine() {
    let _serial = serial();
    let mut pair = Pair::new();
    pair.start_agent();
    let _hog = Hog::on(1);
    let out = Command::new("ip")
        .args(["netns", "exec", &pair.a, common::bin(), "watch"])
        .args(["--peer", "198.18.0.2", "-t", "3s", "--json"])
        .env("WIRESCOPE_TOKEN", common::TOKEN)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let records: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for host in ["local", "peer"] {
        let n = records
            .iter()
            .filter(|r| r["type"] == "sample" && r["host"] == host)
            .count();
        assert!(n >= 2, "{n} samples of the {host} host");
    }
    let loud: Vec<String> = records
        .iter()
        .filter(|r| r["type"] == "finding" && r["change"] == "raised" && r["severity"] != "info")
        .map(|r| format!("{}:{}:{}", r["severity"], r["host"], r["id"]))
        .collect();
    assert!(loud.is_empty(), "an idle watch raised {loud:?}");
}

//! Telemetry of both hosts over a real namespace pair with a 4-queue veth,
//! captured hosts, and what an unprivileged user gets.

use crate::common;

use common::{bin, stderr, Log, Pair};
use std::process::Command;
use wirescope::probe::facts::Support;
use wirescope::probe::sample::HostRole;

#[test]
fn both_hosts_report_softirqs_interfaces_and_nic_facts_during_a_run() {
    let mut pair = Pair::new();
    pair.start_agent();
    let log = pair.log_path("t.jsonl");
    let out = pair.run(&["-t", "2s", "-P", "2", "--log", log.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = Log::read(&log);
    let peer = log.samples(HostRole::Peer);
    let local = log.samples(HostRole::Local);

    // The receiving side did NET_RX work.
    let net_rx: u64 = peer
        .iter()
        .flat_map(|s| s.softirqs.iter())
        .map(|c| c.net_rx)
        .sum();
    assert!(net_rx > 0, "no NET_RX softirqs on the receiver");
    assert!(
        peer.iter().all(|s| !s.softnet.is_empty()),
        "softnet per CPU in every interval"
    );

    // The interface that routes to the other host is found and its bytes agree with the engine's.
    let rx_if: u64 = peer
        .iter()
        .flat_map(|s| s.ifaces.iter())
        .filter(|i| i.name == "veth-b")
        .map(|i| i.delta.rx_bytes)
        .sum();
    let rx_engine: u64 = peer.iter().map(|s| s.engine.rx_bytes).sum();
    assert!(rx_engine > 0);
    let ratio = rx_if as f64 / rx_engine as f64;
    assert!(
        (0.98..1.02).contains(&ratio),
        "veth-b rx {rx_if} vs engine {rx_engine}"
    );
    let tx_if: u64 = local
        .iter()
        .flat_map(|s| s.ifaces.iter())
        .filter(|i| i.name == "veth-a")
        .map(|i| i.delta.tx_bytes)
        .sum();
    let tx_engine: u64 = local.iter().map(|s| s.engine.tx_bytes).sum();
    assert!(
        (0.98..1.02).contains(&(tx_if as f64 / tx_engine as f64)),
        "veth-a tx {tx_if} vs engine {tx_engine}"
    );

    // nstat deltas move with the traffic.
    assert!(peer
        .iter()
        .any(|s| s.nstat.get("Tcp.InSegs").is_some_and(|v| *v > 0)));

    // Facts of both hosts, in the first Sample of the point.
    for (host, name) in [(&local, "veth-a"), (&peer, "veth-b")] {
        let facts = host[0]
            .facts
            .as_ref()
            .expect("first Sample carries the facts");
        let nic = facts
            .nics
            .iter()
            .find(|n| n.name == name)
            .expect("the test interface");
        let ch = nic.channels.value().expect("channels");
        assert_eq!((ch.rx, ch.tx), (Some(4), Some(4)), "{name}: 4 queues");
        assert_eq!(
            nic.rings,
            Support::NotSupported {
                driver: "veth".into()
            }
        );
        assert_eq!(nic.drvinfo.value().map(|d| d.driver.as_str()), Some("veth"));
        assert_eq!(nic.rx_queues, Some(4));
        assert_eq!(nic.mtu, Some(1500));
        assert!(nic
            .features
            .value()
            .and_then(|f| f.on("generic-receive-offload"))
            .is_some());
        assert!(facts.sysctls.contains_key("net.ipv4.tcp_rmem"));
        assert!(host[1].facts.is_none(), "unchanged facts are not repeated");
    }
}

#[test]
fn a_capture_reads_back_as_the_same_facts_as_live() {
    let pair = Pair::new();
    let dir = pair.dir.path().join("capture");
    let ns = |args: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", &pair.a, bin()])
            .args(args)
            .output()
            .unwrap()
    };
    let c = ns(&["capture", dir.to_str().unwrap(), "--iface", "veth-a"]);
    assert!(c.status.success(), "{}", stderr(&c));
    for f in [
        "proc/stat",
        "proc/net/softnet_stat",
        "sos_commands/networking/ethtool_-i_veth-a",
        "sos_commands/networking/ethtool_-S_veth-a",
        "sys/class/net/veth-a/mtu",
    ] {
        assert!(dir.join(f).exists(), "capture lacks {f}");
    }
    // The command output files have the real ethtool format: the header line first.
    let l = std::fs::read_to_string(dir.join("sos_commands/networking/ethtool_-l_veth-a")).unwrap();
    assert!(l.starts_with("Channel parameters for veth-a:\n"), "{l}");

    let from = ns(&["watch", "--from", dir.to_str().unwrap(), "--json"]);
    assert!(from.status.success(), "{}", stderr(&from));
    let from: serde_json::Value = serde_json::from_slice(&from.stdout).unwrap();
    let live = ns(&[
        "watch", "-t", "1s", "-i", "500ms", "--json", "--iface", "veth-a",
    ]);
    assert!(live.status.success(), "{}", stderr(&live));
    let live_facts = String::from_utf8_lossy(&live.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find_map(|r| r.get("facts").cloned())
        .expect("a live Sample with facts");
    assert_eq!(from["facts"], live_facts, "captured and live facts differ");
    // Counters are read from the directory too.
    assert!(from["ifaces"]["veth-a"]["tx_packets"].is_u64());
    assert_eq!(
        from["queues"]["veth-a"].as_array().map(Vec::len),
        Some(8),
        "4 rx + 4 tx queues from ethtool -S"
    );
}

#[test]
fn a_directory_that_is_not_one_is_a_usage_error() {
    let o = Command::new(bin())
        .args(["watch", "--from", "/nonexistent-dir"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a directory"));
    let o = Command::new(bin())
        .args(["capture", "/proc"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not empty"), "{}", stderr(&o));
}

#[test]
fn unprivileged_users_get_loopback_and_every_probe_that_needs_no_privilege() {
    common::require_root(); // to drop privileges, we start as root
    let as_nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", bin()])
            .args(args)
            .env("HOME", "/tmp")
            .output()
            .unwrap()
    };
    let o = as_nobody(&["run", "-t", "1s", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("loopback (not root"),
        "the fallback is announced: {}",
        stderr(&o)
    );
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(s["bytes"].as_u64().unwrap_or(0) > 0);
    assert!(!s["hosts"]["peer"]["cpus"].as_array().unwrap().is_empty());

    let o = as_nobody(&[
        "watch", "-t", "1s", "-i", "500ms", "--json", "--iface", "lo",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let samples: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r["type"] == "sample")
        .collect();
    assert!(!samples.is_empty());
    for s in &samples {
        assert!(!s["cpus"].as_array().unwrap().is_empty());
        assert!(
            s.get("probe_errors").is_none(),
            "a probe failed unprivileged: {}",
            s["probe_errors"]
        );
    }
    assert!(samples[0]["facts"]["nics"][0]["name"] == "lo");
}

#[test]
fn watch_streams_both_hosts_without_traffic() {
    let mut pair = Pair::new();
    pair.start_agent();
    let log = pair.log_path("w.jsonl");
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &pair.a,
            bin(),
            "watch",
            "--peer",
            "198.18.0.2",
            "-t",
            "2s",
            "-i",
            "500ms",
            "--json",
            "--log",
            log.to_str().unwrap(),
        ])
        .env("WIRESCOPE_TOKEN", common::TOKEN)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\nagent: {}",
        stderr(&out),
        pair.agent_log()
    );
    let log = Log::read(&log);
    let (local, peer) = (log.samples(HostRole::Local), log.samples(HostRole::Peer));
    assert!(
        local.len() >= 4 && peer.len() >= 4,
        "local {} peer {}",
        local.len(),
        peer.len()
    );
    assert!(peer
        .iter()
        .all(|s| !s.cpus.is_empty() && s.engine.tx_bytes == 0));
    // Each side watches the interface that routes to the other.
    assert!(local[0]
        .facts
        .as_ref()
        .is_some_and(|f| f.nics.iter().any(|n| n.name == "veth-a")));
    assert!(peer[0]
        .facts
        .as_ref()
        .is_some_and(|f| f.nics.iter().any(|n| n.name == "veth-b")));
    assert!(log.summaries().is_empty(), "watch has no test to summarise");
    // The same records went to stdout.
    let lines = String::from_utf8_lossy(&out.stdout).lines().count();
    assert_eq!(lines, log.records.len());
}

/// `watch` runs the same pipeline as `run`: its rules raise findings (here a
/// facts rule: GRO switched off on the watched veth), they are printed
/// between the rows and logged as `finding` records after the samples.
#[test]
fn watch_runs_the_rules_and_logs_what_it_raises() {
    let pair = Pair::new();
    let run = |args: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", &pair.a])
            .args(args)
            .output()
            .unwrap()
    };
    let off = run(&["ethtool", "-K", "veth-a", "gro", "off"]);
    assert!(off.status.success(), "{}", stderr(&off));
    let log = pair.log_path("watch.jsonl");
    let out = run(&[
        bin(),
        "watch",
        "--iface",
        "veth-a",
        "-i",
        "200ms",
        "-t",
        "1s",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains(">> finding [info] local nic.gro-off"),
        "the finding is printed when raised:\n{table}"
    );
    let log = Log::read(&log);
    assert!(log.samples(HostRole::Local).len() >= 4);
    let kinds: Vec<&str> = log
        .records
        .iter()
        .map(|r| match r {
            wirescope::record::schema::Record::Header(_) => "header",
            wirescope::record::schema::Record::Event(_) => "event",
            wirescope::record::schema::Record::Sample(_) => "sample",
            wirescope::record::schema::Record::Finding(_) => "finding",
            wirescope::record::schema::Record::Summary(_) => "summary",
        })
        .collect();
    assert_eq!(&kinds[..2], ["header", "event"], "{kinds:?}");
    assert!(kinds.contains(&"finding"), "{kinds:?}");
}

#[test]
fn expected_absences_go_to_the_manifest_not_to_warnings() {
    // lo has no speed or duplex (EINVAL): normal, not a capture failure.
    let pair = Pair::new();
    let dir = pair.dir.path().join("capture-lo");
    let c = Command::new("ip")
        .args(["netns", "exec", &pair.a, bin()])
        .args(["capture", dir.to_str().unwrap(), "--iface", "lo"])
        .output()
        .unwrap();
    let err = stderr(&c);
    assert!(c.status.success(), "{err}");
    assert!(
        !err.contains("not captured: /sys/class/net/lo/speed"),
        "{err}"
    );
    assert!(err.contains("have no value on this host"), "{err}");
    let manifest = std::fs::read_to_string(dir.join("wirescope-capture.txt")).unwrap();
    assert!(
        manifest.contains("/sys/class/net/lo/speed: Invalid argument"),
        "{manifest}"
    );
}

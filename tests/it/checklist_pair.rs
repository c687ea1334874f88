//! `wirescope checklist run` on the namespace pair: the receiver's TCP
//! buffers are capped in its namespace, the checklist finds
//! tcp.buffer-limited there, raises the buffer on that host only through the
//! agent (`--allow-tuning`), measures the gain and keeps it; `profile
//! rollback --peer` then restores the injected values exactly. Needs root.

use crate::common;

use common::{stderr, Pair};
use std::process::Command;

const CAPPED: &str = "4096 8192 16384";

fn sysctl_in(ns: &str, key: &str) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "sysctl", "-n", key])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn set_in(ns: &str, key: &str, value: &str) {
    let ok = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "sysctl",
            "-q",
            "-w",
            &format!("{key}={value}"),
        ])
        .status()
        .unwrap()
        .success();
    assert!(ok, "sysctl {key}={value} in {ns}");
}

/// The shipped single-stream checklist's first check, with a short test.
const SHORT_CHECKLIST: &str = r#"
name = "short-single-stream"
description = "receive buffer only, short runs"
for = "test"
rounds = 2
min_gain_pct = 1.0

[test]
run = ["--mode", "stream", "--streams", "1", "--time", "2s", "--interval", "500ms"]
metric = "throughput"

[[check]]
rule = "tcp.buffer-limited"
subject = "receive"
title = "Let the receive buffer grow"
[check.change.sysctl]
"net.core.rmem_max" = "268435456"
"net.ipv4.tcp_rmem" = "4096 131072 268435456"
"#;

#[test]
fn a_checklist_raises_the_receivers_buffer_and_rollback_restores_it() {
    let mut pair = Pair::new();
    let peer_state = pair.dir.path().join("peer-state");
    let local_state = pair.dir.path().join("local-state");
    set_in(&pair.b, "net.ipv4.tcp_rmem", CAPPED);
    let local_before = sysctl_in(&pair.a, "net.ipv4.tcp_rmem");
    pair.start_agent_with(
        &[],
        &[
            "--allow-tuning",
            "--state-dir",
            peer_state.to_str().unwrap(),
        ],
    );
    let checklist = pair.dir.path().join("short.toml");
    std::fs::write(&checklist, SHORT_CHECKLIST).unwrap();
    let report = pair.dir.path().join("checklist.html");
    let out = Command::new("ip")
        .args(["netns", "exec", &pair.a, common::bin(), "checklist", "run"])
        .arg(&checklist)
        .args(["--peer", "198.18.0.2", "--yes", "--json", "--state-dir"])
        .arg(&local_state)
        .arg("--report")
        .arg(&report)
        .env("WIRESCOPE_TOKEN", common::TOKEN)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\nagent: {}",
        stderr(&out),
        pair.agent_log()
    );
    let records: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let baseline = records.iter().find(|r| r["type"] == "baseline").unwrap();
    assert!(
        baseline["findings"].as_array().unwrap().iter().any(|f| f
            .as_str()
            .unwrap_or("")
            .starts_with("tcp.buffer-limited peer")),
        "the baseline finds the receiver's buffer: {baseline}"
    );
    let step = records.iter().find(|r| r["type"] == "step").unwrap();
    assert_eq!(step["host"], "peer", "{step}");
    assert_eq!(step["status"], "kept", "{step}");
    let summary = records.iter().find(|r| r["type"] == "summary").unwrap();
    let (before, after) = (
        summary["baseline"].as_f64().unwrap(),
        summary["last"].as_f64().unwrap(),
    );
    assert!(after > before * 1.5, "a large gain: {before} -> {after}");
    // --report: the baseline and the step side by side, each with its
    // own result and charts.
    let html = std::fs::read_to_string(&report).expect("checklist run --report writes the page");
    assert!(
        html.contains("<h2>baseline, round 1</h2>"),
        "no baseline in the report"
    );
    assert!(
        html.contains("<h2>step 1 after (tcp.buffer-limited"),
        "no step in the report"
    );
    assert!(html.matches("throughput per interval").count() >= 2);
    // Changed on the receiver only.
    assert_eq!(
        sysctl_in(&pair.b, "net.ipv4.tcp_rmem"),
        "4096 131072 268435456"
    );
    assert_eq!(sysctl_in(&pair.a, "net.ipv4.tcp_rmem"), local_before);

    // Rolled back exactly, through the agent.
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &pair.a,
            common::bin(),
            "profile",
            "rollback",
        ])
        .args(["--peer", "198.18.0.2"])
        .env("WIRESCOPE_TOKEN", common::TOKEN)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(sysctl_in(&pair.b, "net.ipv4.tcp_rmem"), CAPPED);
}

fn profile_in(ns: &str, args: &[&str]) -> std::process::Output {
    Command::new("ip")
        .args(["netns", "exec", ns, common::bin(), "profile"])
        .args(args)
        .env("WIRESCOPE_TOKEN", common::TOKEN)
        .output()
        .unwrap()
}

#[test]
fn a_peer_without_allow_tuning_refuses_and_says_how() {
    let mut pair = Pair::new();
    set_in(&pair.b, "net.ipv4.tcp_rmem", CAPPED);
    pair.start_agent();
    for args in [
        vec!["rollback", "--peer", "198.18.0.2"],
        vec![
            "apply",
            "throughput-100g",
            "--peer",
            "198.18.0.2",
            "--yes",
            "--skip-unsupported",
        ],
    ] {
        let out = profile_in(&pair.a, &args);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            stderr(&out).contains("--allow-tuning"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // A checklist step there is skipped, says why, and counts as refused.
    let checklist = pair.dir.path().join("short.toml");
    std::fs::write(&checklist, SHORT_CHECKLIST).unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", &pair.a, common::bin(), "checklist", "run"])
        .arg(&checklist)
        .args(["--peer", "198.18.0.2", "--yes", "--json", "--state-dir"])
        .arg(pair.dir.path().join("local-state"))
        .env("WIRESCOPE_TOKEN", common::TOKEN)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let step: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|r| r["type"] == "step")
        .unwrap_or_else(|| panic!("no step record: {stdout}"));
    assert_eq!(
        (&step["status"], &step["refused_by"]),
        (&"skipped".into(), &"peer".into()),
        "{step}"
    );
    assert!(
        step["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("the agent refused:") && d.contains("--allow-tuning")),
        "{step}"
    );
    assert_eq!(
        sysctl_in(&pair.b, "net.ipv4.tcp_rmem"),
        CAPPED,
        "nothing changed"
    );
    // Reading is always allowed: the peer's values, from the agent's namespace.
    let out = profile_in(
        &pair.a,
        &["save", "peer-now", "--peer", "198.18.0.2", "-o", "-"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("\"net.ipv4.tcp_rmem\" = \"{CAPPED}\"")),
        "{text}"
    );
    // And compared with this host's live values.
    let out = profile_in(
        &pair.a,
        &[
            "diff",
            "peer",
            "live",
            "--peer",
            "198.18.0.2",
            "--exit-code",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("net.ipv4.tcp_rmem") && text.contains(CAPPED),
        "{text}"
    );
}

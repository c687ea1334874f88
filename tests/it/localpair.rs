//! `--local-pair` builds namespaces, a veth and an agent process, and removes
//! all of them after a normal end, an error and SIGINT.

use crate::common;

use common::{local_pair_namespaces, process_alive, require_root, stderr};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Each run sweeps the local-pair namespaces of dead processes; the stale
/// ones the second test plants would be swept by another test's runs while
/// `ip netns add` is still mounting them. These tests take turns, with every
/// other area's test that starts a local pair ([`common::local_pair_turn`]).
fn one_pair_at_a_time() -> common::LocalPairTurn {
    common::local_pair_turn()
}

fn agent_pid(stderr: &str) -> u32 {
    let tail = stderr
        .split("agent pid ")
        .nth(1)
        .unwrap_or_else(|| panic!("no agent pid in: {stderr}"));
    tail.split_whitespace().next().unwrap().parse().unwrap()
}

fn assert_clean(run_pid: u32, err: &str) {
    assert!(
        local_pair_namespaces(run_pid).is_empty(),
        "namespaces left behind: {:?}",
        local_pair_namespaces(run_pid)
    );
    let pid = agent_pid(err);
    for _ in 0..50 {
        if !process_alive(pid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("agent process {pid} is still alive");
}

fn start(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .arg("run")
        .arg("--local-pair")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn normal_end_error_and_sigint_leave_nothing_behind() {
    require_root();
    let _turn = one_pair_at_a_time();

    // Normal end.
    let c = start(&["-t", "1s", "-i", "500ms"]);
    let pid = c.id();
    let out = c.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("veth with 4 rx/tx queues"), "{err}");
    assert_clean(pid, &err);

    // Error after setup: an unknown congestion control fails on the first socket.
    let c = start(&["-t", "1s", "--congestion", "nosuchalgo"]);
    let pid = c.id();
    let out = c.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("nosuchalgo") && err.contains("tcp_available_congestion_control"),
        "{err}"
    );
    assert_clean(pid, &err);

    // SIGINT mid-test (once the first interval is printed): the summary is
    // still printed, exit 130, everything removed.
    let mut c = start(&["-t", "30s"]);
    let pid = c.id();
    let mut stdout = std::io::BufReader::new(c.stdout.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        assert!(n > 0, "the run ended before its first interval: {seen}");
        seen.push_str(&line);
        if line.starts_with("[SUM]") {
            break;
        }
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    std::io::Read::read_to_string(&mut stdout, &mut seen).unwrap();
    let out = c.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(seen.contains("interrupted by the user"), "{seen}");
    assert_clean(pid, &err);

    // SIGTERM (a service manager, `timeout`, a batch system): the same
    // graceful stop with the log's summary written, exit 143 as a shell
    // reports a process SIGTERM ended.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("term.jsonl");
    let mut c = start(&["-t", "30s", "--log", log.to_str().unwrap()]);
    let pid = c.id();
    let mut stdout = std::io::BufReader::new(c.stdout.take().unwrap());
    loop {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        assert!(n > 0, "the run ended before its first interval");
        if line.starts_with("[SUM]") {
            break;
        }
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let out = c.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(143), "{err}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.lines().any(|l| l.contains("\"type\":\"summary\"")),
        "no summary in the log after SIGTERM"
    );
    assert_clean(pid, &err);
}

#[test]
fn leftovers_of_a_killed_run_are_removed_by_the_next() {
    require_root();
    let _turn = one_pair_at_a_time();
    // A pid that cannot be alive (above the largest pid_max, 2^22) marks these
    // as stale; ours is added so concurrent test runs do not collide.
    let dead = 4_194_304 + std::process::id();
    let (a, b) = (format!("ws-a-{dead}"), format!("ws-b-{dead}"));
    let stale = [a.as_str(), b.as_str()];
    for n in stale {
        assert!(Command::new("ip")
            .args(["netns", "add", n])
            .status()
            .unwrap()
            .success());
    }
    // The working directory a kill -9 left in $TMPDIR goes too.
    let stale_dir = std::env::temp_dir().join(format!("wirescope-{dead}-killed"));
    std::fs::create_dir_all(&stale_dir).unwrap();
    std::fs::write(stale_dir.join("agent.log"), "left behind").unwrap();
    let out = start(&["-t", "1s"]).wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let dir_left = stale_dir.exists();
    let _ = std::fs::remove_dir_all(&stale_dir);
    assert!(!dir_left, "{} was not removed", stale_dir.display());
    let list = String::from_utf8_lossy(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    for n in stale {
        if list.contains(n) {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
            panic!("stale namespace {n} was not removed");
        }
    }
}

/// The local pair's hosts are namespaces: a finding's command names the
/// namespace of its host (the user's shell has no veth-b), and no
/// per-namespace command is printed bare.
#[test]
fn fixes_on_the_local_pair_run_in_the_hosts_namespace() {
    require_root();
    let _turn = one_pair_at_a_time();
    let c = start(&["-t", "2s", "--json"]);
    let pid = c.id();
    let out = c.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut namespaced = 0;
    for f in s["findings"].as_array().unwrap() {
        let ns = match f["host"].as_str().unwrap() {
            "local" => format!("ws-a-{pid}"),
            _ => format!("ws-b-{pid}"),
        };
        for fix in f["fix"].as_array().unwrap() {
            let fix = fix.as_str().unwrap();
            let first = fix.split_whitespace().next().unwrap_or("");
            assert!(
                !["ethtool", "sysctl", "tc", "echo", "nstat"].contains(&first),
                "a bare per-namespace command: {fix}"
            );
            if fix.starts_with("ip netns exec ") {
                assert!(
                    fix.starts_with(&format!("ip netns exec {ns} ")),
                    "{fix} ({f})"
                );
                namespaced += 1;
            }
        }
    }
    // veth starts with GRO off: its info finding carries an ethtool fix.
    assert!(namespaced > 0, "no namespaced fix in: {s}");
    assert_clean(pid, &err);
}

/// `--log -` streams every record to stdout as it happens (iperf3's
/// `--json-stream`), each line JSON, the header (with its schema version)
/// first and the summary last; the table goes to stderr. With `--json`
/// (both would write stdout) it is a usage error.
#[test]
fn log_dash_streams_the_records_to_stdout_and_the_table_to_stderr() {
    require_root();
    let _turn = one_pair_at_a_time();
    let c = start(&["-t", "2s", "--log", "-"]);
    let pid = c.id();
    let out = c.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let records: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(records.first().unwrap()["type"], "header");
    assert!(records[0]["schema"].as_u64().is_some(), "{}", records[0]);
    assert_eq!(records.last().unwrap()["type"], "summary");
    assert!(records.iter().any(|r| r["type"] == "sample"));
    assert!(err.contains("[SUM]"), "the table goes to stderr: {err}");
    assert_clean(pid, &err);
    assert_valid_log(&out.stdout);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .args(["run", "--local-pair", "--log", "-", "--json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--log - and --json"), "{}", stderr(&o));
}

/// Every line of `log` is valid against docs/log.schema.json, checked by
/// an independent validator (Debian's python3-jsonschema, draft 2020-12).
fn assert_valid_log(log: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("log.jsonl");
    std::fs::write(&file, log).unwrap();
    let schema = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/log.schema.json");
    let check = r#"
import json, sys, jsonschema
v = jsonschema.Draft202012Validator(json.load(open(sys.argv[1])))
bad = [(n, e.message[:200], list(e.absolute_path)[:6])
       for n, line in enumerate(open(sys.argv[2]), 1) for e in v.iter_errors(json.loads(line))]
lines = sum(1 for _ in open(sys.argv[2]))
print(f"{lines} lines, {len(bad)} errors", bad[:5])
sys.exit(1 if bad or lines == 0 else 0)
"#;
    let o = Command::new("python3")
        .args(["-c", check])
        .arg(&schema)
        .arg(&file)
        .output()
        .expect("python3 with jsonschema (Debian: python3-jsonschema) validates the log");
    assert!(
        o.status.success(),
        "the log does not match docs/log.schema.json: {}{}",
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
}

/// A gRPC and an rr run's records match the published schema too: their
/// engine sections, latency and interval figures are the schema's.
#[test]
fn grpc_and_rr_logs_match_the_published_schema() {
    require_root();
    let _turn = one_pair_at_a_time();
    for args in [
        &["--engine", "grpc", "-t", "1s", "--log", "-"][..],
        &["-m", "rr", "-t", "1s", "--log", "-"][..],
    ] {
        let c = start(args);
        let pid = c.id();
        let out = c.wait_with_output().unwrap();
        let err = stderr(&out);
        assert!(out.status.success(), "{args:?}: {err}");
        assert_valid_log(&out.stdout);
        assert_clean(pid, &err);
    }
}

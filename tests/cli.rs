//! The binary's command line: help, usage errors and their exit codes.

use std::process::Command;

fn wirescope(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn help_exits_zero_for_every_subcommand() {
    for args in [
        &["--help"][..],
        &["tui", "--help"],
        &["agent", "--help"],
        &["run", "--help"],
        &["--version"],
    ] {
        let o = wirescope(args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = wirescope(&["run", "--help"]);
    let text = String::from_utf8_lossy(&o.stdout);
    for flag in [
        "--peer",
        "--local-pair",
        "--streams",
        "--zerocopy",
        "--skip-rx-copy",
        "--sweep",
        "--omit",
        "--log",
        "--json",
    ] {
        assert!(text.contains(flag), "run --help lacks {flag}");
    }
}

#[test]
fn bad_values_name_the_flag_and_give_an_example() {
    for (args, flag, example) in [
        (&["run", "--time", "ten"][..], "--time", "10s"),
        (&["run", "--interval", "5q"], "--interval", "500ms"),
        (&["run", "--len", "huge"], "--len", "64K"),
        (&["run", "--window", "lots"], "--window", "64K"),
        (&["run", "--cpus", "2-1"], "--cpus", "0-3,8"),
        (&["run", "--peer-cpus", "x"], "--peer-cpus", "0-3,8"),
        (&["run", "--sweep", "speed=1"], "--sweep", "size=64"),
        (
            &["agent", "--listen", "nowhere"],
            "--listen",
            "0.0.0.0:5310",
        ),
    ] {
        let o = wirescope(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(flag) && err.contains(example),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn impossible_combinations_are_usage_errors() {
    for (args, says) in [
        (&["run", "-m", "rr", "--reverse"][..], "--reverse"),
        (&["run", "-m", "pingpong", "--streams", "2"], "--conns"),
        (&["run", "--omit", "10s", "--time", "5s"], "--omit"),
        (&["run", "--peer", "host:notaport"], "not a port"),
        (
            &["run", "--peer", "a", "--local-pair"],
            "cannot be used with",
        ),
    ] {
        let o = wirescope(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn unreachable_peer_is_a_test_failure_with_a_hint() {
    // Port 1 on loopback: nothing listens, connection refused at once.
    let o = Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .args(["run", "--peer", "127.0.0.1:1", "-t", "1s"])
        .env("WIRESCOPE_TOKEN", "x")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("wirescope agent") && err.contains("127.0.0.1:1"),
        "{err}"
    );
}

#[test]
fn check_audits_a_capture_offline() {
    let dir = |d: &str| format!("{}/tests/fixtures/diagnose/{d}", env!("CARGO_MANIFEST_DIR"));
    let o = wirescope(&[
        "check",
        "--from",
        &dir("inbox-2015"),
        "--json",
        "--fail-on",
        "error",
    ]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = v["findings"].as_array().unwrap();
    assert_eq!(
        f[0]["id"], "driver.mlx5-outdated",
        "the 2015 inbox driver ranks first: {v}"
    );
    assert_eq!(f[0]["severity"], "error");
    assert!(f[0]["title"].as_str().unwrap().contains("inbox"));

    let o = wirescope(&["check", "--from", &dir("ofed-4.3"), "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let inbox = v["findings"].as_array().unwrap().iter().any(|x| {
        x["id"] == "driver.mlx5-outdated" && x["title"].as_str().unwrap_or("").contains("inbox")
    });
    assert!(!inbox, "MLNX_OFED 4.3 is not the inbox driver: {v}");

    let o = wirescope(&["check", "--from", "/nonexistent"]);
    assert_eq!(o.status.code(), Some(2));
}

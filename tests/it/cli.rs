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
    let _share = crate::common::traffic();
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

/// `wirescope completions SHELL` prints a script the shell can load, with
/// the subcommands and their options; an unknown shell is a usage error.
#[test]
fn completions_print_a_script_for_each_shell() {
    let _share = crate::common::traffic();
    for (shell, marker) in [
        ("bash", "complete -F _wirescope"),
        ("zsh", "#compdef wirescope"),
        ("fish", "complete -c wirescope"),
    ] {
        let o = wirescope(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}");
        let script = String::from_utf8_lossy(&o.stdout);
        assert!(
            script.contains(marker),
            "{shell}: {}",
            &script[..script.len().min(300)]
        );
        for word in ["report", "checklist", "peer-cpus"] {
            assert!(script.contains(word), "{shell} lacks {word}");
        }
    }
    let bash = String::from_utf8_lossy(&wirescope(&["completions", "bash"]).stdout).into_owned();
    let check = Command::new("bash")
        .args(["-n", "-c", &bash])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert_eq!(wirescope(&["completions", "tcsh"]).status.code(), Some(2));
}

/// `-p PORT` (iperf3's) needs a peer, and a port given twice must agree.
#[test]
fn dash_p_is_the_port_once() {
    let _share = crate::common::traffic();
    assert_eq!(wirescope(&["run", "-p", "5999"]).status.code(), Some(2));
    let o = wirescope(&["run", "--peer", "127.0.0.1:5310", "-p", "5999"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("give the port once"));
    let o = wirescope(&["agent", "-p", "5999", "--listen", "0.0.0.0:5310"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn bad_values_name_the_flag_and_give_an_example() {
    let _share = crate::common::traffic();
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
    let _share = crate::common::traffic();
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

/// Each engine refuses the others' options and sweeps, whichever engine
/// runs: nothing is silently ignored. `--peer` to a closed port: an option
/// that got through would fail later, with another exit code.
#[test]
fn every_engine_refuses_the_options_of_the_others() {
    let _share = crate::common::traffic();
    let own: [(&str, &[&str], &str); 4] = [
        (
            "grpc",
            &["--channels", "2"],
            "--channels applies to --engine grpc",
        ),
        (
            "grpc",
            &["--sweep", "concurrency=1,2"],
            "sweeps are for --engine grpc",
        ),
        (
            "sink",
            &["--frame-size", "128"],
            "--frame-size applies to --engine sink",
        ),
        ("rdma", &["--qps", "2"], "--qps applies to --engine rdma"),
    ];
    for (owner, flag, says) in own {
        for engine in ["tcp", "grpc", "sink", "rdma"]
            .into_iter()
            .filter(|e| *e != owner)
        {
            let mut args = vec!["run", "--peer", "127.0.0.1:1", "--engine", engine];
            args.extend_from_slice(flag);
            let o = wirescope(&args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains(says), "{args:?}: {err}");
        }
    }
}

#[test]
fn unreachable_peer_is_a_test_failure_with_a_hint() {
    let _share = crate::common::traffic();
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
    let _share = crate::common::traffic();
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
    // It says which interfaces it audited, in JSON and in the text.
    let audited = v["interfaces"]["local"].as_array().unwrap();
    assert!(!audited.is_empty(), "{v}");
    let o = wirescope(&["check", "--from", &dir("inbox-2015")]);
    let text = String::from_utf8_lossy(&o.stdout);
    let first = text.lines().next().unwrap_or("");
    for name in audited {
        assert!(first.contains(name.as_str().unwrap()), "{first}");
    }
    assert!(first.contains("(interface"), "{first}");

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

/// Run `wirescope args`, killing it after `secs` (a hang is a failure, not a stuck CI job).
fn wirescope_within(secs: u64, args: &[&str]) -> std::process::Output {
    let child = Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(secs)) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("wirescope {args:?} did not finish within {secs} s");
        }
    }
}

#[test]
fn a_hostile_capture_cannot_leak_files_or_hang_the_reader() {
    let _share = crate::common::traffic();
    let fixture = format!(
        "{}/tests/fixtures/diagnose/inbox-2015",
        env!("CARGO_MANIFEST_DIR")
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("capture");
    assert!(Command::new("cp")
        .args(["-r", &fixture, dir.to_str().unwrap()])
        .status()
        .unwrap()
        .success());
    // A secret outside the capture, linked from a file the reader wants.
    let secret = tmp.path().join("token");
    std::fs::write(&secret, "s3cret-token-that-must-not-leak\n").unwrap();
    let cmdline = dir.join("proc/cmdline");
    std::fs::remove_file(&cmdline).unwrap();
    std::os::unix::fs::symlink(&secret, &cmdline).unwrap();
    // A FIFO nobody writes to, and a link to an endless device.
    let mtu = dir.join("sys/class/net/eth0/mtu");
    std::fs::remove_file(&mtu).unwrap();
    nix::unistd::mkfifo(&mtu, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let features = dir.join("sos_commands/networking/ethtool_-k_eth0");
    std::fs::remove_file(&features).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &features).unwrap();
    std::fs::create_dir_all(dir.join("proc/net")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("proc/net/dev")).unwrap();

    for args in [
        vec!["check", "--from", dir.to_str().unwrap(), "--json"],
        vec!["watch", "--from", dir.to_str().unwrap(), "--json"],
    ] {
        let o = wirescope_within(60, &args);
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !out.contains("s3cret") && !err.contains("s3cret"),
            "{args:?} leaked the linked file: {out}{err}"
        );
        assert!(
            out.len() < 1 << 20,
            "{args:?} read a device: {} bytes of output",
            out.len()
        );
        let mut skipped = vec![
            "proc/cmdline",
            "sys/class/net/eth0/mtu",
            "sos_commands/networking/ethtool_-k_eth0",
        ];
        if args[0] == "watch" {
            // Only watch reads the counters.
            skipped.push("proc/net/dev");
        }
        for skipped in skipped {
            assert!(
                err.contains(skipped),
                "{args:?} does not say it skipped {skipped}: {err}"
            );
        }
        // What is left is still read: the driver facts give check its finding.
        if args[0] == "check" {
            assert!(out.contains("driver.mlx5-outdated"), "{out}");
        }
    }

    // A directory that is no capture at all is a usage error, not "no findings".
    let o = wirescope_within(60, &["check", "--from", "/etc", "--fail-on", "warn"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn an_unwritable_log_fails_before_any_traffic() {
    let _share = crate::common::traffic();
    // The peer does not exist: were the log opened after connecting, the
    // error would name the peer instead of the log.
    let o = Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .args([
            "run",
            "--peer",
            "127.0.0.1:1",
            "-t",
            "1s",
            "--log",
            "/nonexistent-dir/run.jsonl",
        ])
        .env("WIRESCOPE_TOKEN", "x")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("/nonexistent-dir/run.jsonl"), "{err}");
    assert!(!err.contains("127.0.0.1:1"), "{err}");
}

/// Issue 23 item 7: a numeric flag's error names the flag's real range
/// (never its integer type's), a negative number reaches the flag's check
/// instead of being taken for a flag, and a size limit is said exactly.
#[test]
fn numeric_flags_say_their_real_range() {
    let _share = crate::common::traffic();
    for (args, says) in [
        (
            &["run", "--engine", "sink", "--queues", "4294967296"][..],
            "--queues 4294967296 is out of range; use 1 to 1024",
        ),
        (
            &["run", "--engine", "sink", "--queues", "-1"],
            "--queues -1 is out of range; use 1 to 1024",
        ),
        (
            &["run", "--engine", "sink", "--flows", "99999"],
            "--flows 99999 is out of range; use 1 to 16384",
        ),
        (
            &["run", "--engine", "sink", "--rate", "-1"],
            "rate must be positive: -1",
        ),
        (
            &["run", "--engine", "sink", "--frame-size", "4294967296"],
            "frame size 4294967296 is out of range; use 64 to 9000",
        ),
        (
            &["run", "--streams", "4294967297"],
            "--streams 4294967297 is out of range; use 1 to 65536",
        ),
        (&["run", "-m", "rr", "--conns", "-3"], "use 1 to 65536"),
        (&["run", "--len", "-1"], "'-1' is not a size"),
        (&["run", "--cpus", "-1"], "is not a CPU list"),
        (
            &["run", "--engine", "grpc", "--size", "64M"],
            "use at most 67108832 B (64 MiB - 32 B)",
        ),
        (
            &["run", "-m", "rr", "--size", "65M"],
            "use 1 B to 67108864 B (64 MiB)",
        ),
    ] {
        let o = wirescope(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
        assert!(!err.contains("4294967295"), "{args:?}: {err}");
    }
}

#[test]
fn the_state_dir_variable_shows_in_help_and_an_empty_one_is_unset() {
    let _share = crate::common::traffic();
    let run = |value: &str, args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_wirescope"))
            .args(args)
            .env("WIRESCOPE_STATE_DIR", value)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    for cmd in ["agent", "profile"] {
        // Joined again: the help wraps to the terminal's width.
        let help = run("/srv/ws-state", &[cmd, "--help"])
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            help.contains("[env: WIRESCOPE_STATE_DIR=/srv/ws-state]"),
            "{cmd}: {help}"
        );
    }
    let d = tempfile::tempdir().unwrap();
    let given = run(d.path().to_str().unwrap(), &["profile", "list"]);
    let want = format!("(saved profiles are in {}/profiles)", d.path().display());
    assert!(given.contains(&want), "{given}");
    // Exported but empty: the default, as before clap read the variable.
    let empty = run("", &["profile", "list"]);
    assert!(
        empty.contains("(saved profiles are in /var/lib/wirescope/profiles)"),
        "{empty}"
    );
}

/// A user who is not root keeps profiles under the XDG state directory
/// (`$XDG_STATE_HOME/wirescope`, else `~/.local/state/wirescope`): `profile
/// save` of this host works without /var/lib/wirescope. Needs root to
/// become another user (setpriv from util-linux).
#[test]
fn profile_save_as_a_user_goes_to_the_xdg_state_directory() {
    let _share = crate::common::traffic();
    assert!(
        nix::unistd::geteuid().is_root(),
        "run the tests as root (this one becomes user 65534 with setpriv)"
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        home.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let as_user = |xdg: Option<&std::path::Path>, name: &str| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_wirescope"))
            .args(["profile", "save", name])
            .env("HOME", home.path())
            .env_remove("XDG_STATE_HOME")
            .env_remove("WIRESCOPE_STATE_DIR");
        if let Some(x) = xdg {
            c.env("XDG_STATE_HOME", x);
        }
        c.output().unwrap()
    };
    let o = as_user(None, "mine");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(home
        .path()
        .join(".local/state/wirescope/profiles/mine.toml")
        .is_file());
    let xdg = home.path().join("xdg");
    std::fs::create_dir(&xdg).unwrap();
    std::fs::set_permissions(&xdg, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let o = as_user(Some(&xdg), "other");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(xdg.join("wirescope/profiles/other.toml").is_file());
}

//! Issue 23 on the real binary: remote tuning cannot hold an agent, a
//! planted backup cannot steer a rollback, a local-pair checklist leaves
//! nothing on the host, and the tuning CLI's output is safe to paste and
//! ends quietly on a closed pipe. Tests with namespaces need root.

use crate::common;

use common::{stderr, Pair, TOKEN};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Wait for a child within a liveness bound; kill it and fail past it.
fn wait_within(mut c: Child, limit: Duration, what: &str) -> Output {
    let t = Instant::now();
    while t.elapsed() < limit {
        if c.try_wait().unwrap().is_some() {
            return c.wait_with_output().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = c.kill();
    let o = c.wait_with_output().unwrap();
    panic!(
        "{what} did not finish within {} s: {}",
        limit.as_secs(),
        stderr(&o)
    );
}

/// `wirescope profile ARGS` in namespace `ns`, with the test token.
fn profile_in(ns: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, common::bin(), "profile"])
        .args(args)
        .env("WIRESCOPE_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn profile_within(ns: &str, args: &[&str], limit: Duration) -> Output {
    let c = profile_in(ns, args).spawn().unwrap();
    wait_within(c, limit, &format!("profile {}", args.join(" ")))
}

const LIVENESS: Duration = Duration::from_secs(30);

#[test]
fn a_63_star_glob_does_not_hold_the_agent_and_sigterm_ends_it() {
    let mut pair = Pair::new();
    pair.start_agent();
    let g = pair.dir.path().join("g.toml");
    std::fs::write(
        &g,
        format!(
            "name = \"g\"\n[[interface]]\nmatch = \"{}#\"\nmtu = 1500\n",
            "*".repeat(63)
        ),
    )
    .unwrap();
    let g = g.to_str().unwrap();
    // A plan request (allowed without --allow-tuning): answered, not spun on.
    let o = profile_within(
        &pair.a,
        &["apply", g, "--peer", "198.18.0.2", "--dry-run"],
        LIVENESS,
    );
    assert!(
        stderr(&o).contains("matches no interface"),
        "{}\nagent: {}",
        stderr(&o),
        pair.agent_log()
    );
    // The next controller is served.
    let o = profile_within(
        &pair.a,
        &["save", "now", "--peer", "198.18.0.2", "-o", "-"],
        LIVENESS,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("[sysctl]"));
    // SIGTERM ends the process.
    let pid = pair.agent_pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let t = Instant::now();
    while common::process_alive(pid) {
        assert!(t.elapsed() < LIVENESS, "the agent ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `wirescope ARGS` (no namespace), stdin closed.
fn ws(args: &[&str]) -> Command {
    let mut c = Command::new(common::bin());
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn no_panic(o: &Output) {
    let e = stderr(o);
    assert!(
        !e.contains("panicked") && o.status.code() != Some(101),
        "{e}"
    );
}

/// A state directory as `profile` makes it (0755, root's), with one backup
/// `id` whose journal says it is in effect.
fn state_with(id: &str, backup: serde_json::Value) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let s = tempfile::tempdir().unwrap();
    std::fs::set_permissions(s.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = s.path().join("backups").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("backup.json"), backup.to_string()).unwrap();
    std::fs::write(
        dir.join("journal.jsonl"),
        "{\"event\":\"begin\",\"phase\":\"apply\",\"at\":\"t\"}\n{\"event\":\"end\",\"outcome\":\"applied\",\"at\":\"t\"}\n",
    )
    .unwrap();
    s
}

fn our_namespace() -> String {
    std::fs::read_link("/proc/self/ns/net")
        .unwrap()
        .display()
        .to_string()
}

#[test]
fn a_planted_backup_is_refused_and_its_target_untouched() {
    use std::os::unix::fs::PermissionsExt;
    // The attack of the review: an rps step whose interface climbs out of
    // /sys/class/net into a directory holding a symlink to a root-owned file.
    let t = tempfile::tempdir().unwrap();
    let target = t.path().join("target");
    std::fs::write(&target, "precious\n").unwrap();
    let q = t.path().join("x/evil/queues/rx-0");
    std::fs::create_dir_all(&q).unwrap();
    std::os::unix::fs::symlink(&target, q.join("rps_cpus")).unwrap();
    let iface = format!("../../../..{}/x/evil", t.path().display());
    let id = "2025-01-01T00-00-00.000Z-1";
    let s = state_with(
        id,
        serde_json::json!({
            "version": 1, "id": id, "created": "2025-01-01T00:00:00Z", "hostname": "h",
            "namespace": our_namespace(), "profile": "p", "source": "p.toml",
            "steps": [{"key": {"kind": "rps", "iface": iface, "queue": 0},
                       "before": "ff", "after": "1", "origin": "rps"}],
        }),
    );
    let state = s.path().to_str().unwrap();
    let o = ws(&["profile", "rollback", "--state-dir", state])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("is not an interface name") && stderr(&o).contains("backup.json"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");

    // A state directory others can write is refused before any backup is read.
    let id2 = "2025-01-01T00-00-00.000Z-2";
    let s2 = state_with(
        id2,
        serde_json::json!({
            "version": 1, "id": id2, "created": "c", "hostname": "h",
            "namespace": our_namespace(), "profile": "p", "source": "p.toml",
            "steps": [{"key": {"kind": "sysctl", "name": "net.core.somaxconn"},
                       "before": "1", "after": "2", "origin": "sysctl"}],
        }),
    );
    std::fs::set_permissions(s2.path(), std::fs::Permissions::from_mode(0o775)).unwrap();
    let o = ws(&[
        "profile",
        "rollback",
        "--state-dir",
        s2.path().to_str().unwrap(),
    ])
    .output()
    .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("mode 775") && stderr(&o).contains("chmod 755"),
        "{}",
        stderr(&o)
    );
    no_panic(&o);
}

#[test]
fn a_backup_of_a_namespace_that_is_gone_is_refused_and_can_be_discarded() {
    use std::os::unix::fs::MetadataExt;
    common::require_root();
    let ns = format!("wst-{}-stale", std::process::id());
    let ok = Command::new("ip")
        .args(["netns", "add", &ns])
        .status()
        .unwrap();
    assert!(ok.success());
    struct Del(String);
    impl Drop for Del {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    let _del = Del(ns.clone());
    let m = std::fs::metadata(format!("/run/netns/{ns}")).unwrap();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    // Same inode and device as the namespace, another cookie: a backup of an
    // older namespace whose inode this one reuses.
    let id = "2025-01-01T00-00-00.000Z-3";
    let s = state_with(
        id,
        serde_json::json!({
            "version": 1, "id": id, "created": "2025-01-01T00:00:00Z", "hostname": "h",
            "namespace": format!("net:[{}]", m.ino()), "profile": "kept", "source": "checklist",
            "netns": {"inode": m.ino(), "dev": m.dev(), "cookie": u64::MAX,
                      "boot_id": boot.trim(), "name": "ws-a-13308"},
            "command": "wirescope checklist run single-stream",
            "steps": [{"key": {"kind": "sysctl", "name": "net.core.somaxconn"},
                       "before": "1", "after": "2", "origin": "sysctl"}],
        }),
    );
    let state = s.path().to_str().unwrap();
    let in_ns = |args: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", &ns, common::bin(), "profile"])
            .args(args)
            .args(["--state-dir", state])
            .output()
            .unwrap()
    };
    let somaxconn = || {
        let o = Command::new("ip")
            .args(["netns", "exec", &ns, "sysctl", "-n", "net.core.somaxconn"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let before = somaxconn();
    let o = in_ns(&["rollback"]);
    assert!(
        !o.status.success(),
        "a reused inode was taken for the namespace (kernel without SO_NETNS_COOKIE?)"
    );
    assert!(
        stderr(&o).contains("netns ws-a-13308") && stderr(&o).contains("--discard"),
        "{}",
        stderr(&o)
    );
    assert_eq!(somaxconn(), before, "nothing restored");
    // The listing says where, when and by which command.
    let o = in_ns(&["rollback", "--list"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    for want in [
        id,
        "in effect",
        "2025-01-01T00:00:00Z",
        "netns ws-a-13308",
        "wirescope checklist run single-stream",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
    // The way out.
    let o = in_ns(&["rollback", "--discard"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("discarded backup {id}")));
    assert_eq!(
        std::fs::read_dir(s.path().join("backups")).unwrap().count(),
        0
    );
    let o = in_ns(&["rollback"]);
    assert!(
        stderr(&o).contains("no applied profile to roll back"),
        "{}",
        stderr(&o)
    );
    assert_eq!(somaxconn(), before);
}

#[test]
fn a_local_pair_checklist_leaves_nothing_in_the_host_state_and_head_ends_it_quietly() {
    common::require_root();
    let _turn = common::local_pair_turn();
    let d = tempfile::tempdir().unwrap();
    let host_state = d.path().join("host-state");
    let checklist = d.path().join("gro.toml");
    // GRO is off on the local pair's veth: the check applies a change on
    // this side (ws-a), which the run backs up.
    std::fs::write(
        &checklist,
        r#"
name = "gro-short"
description = "GRO only, short runs"
for = "test"
rounds = 1
min_gain_pct = 1.0

[test]
run = ["--mode", "stream", "--streams", "1", "--time", "2s", "--interval", "500ms"]
metric = "throughput"

[[check]]
rule = "nic.gro-off"
title = "Turn GRO on"
host = "local"
[[check.change.interface]]
match = "@subject"
features = { gro = true }
"#,
    )
    .unwrap();
    // A whole run: the change is tried on this side, nothing lands in the
    // host's state directory.
    let c = Command::new(common::bin())
        .args(["checklist", "run"])
        .arg(&checklist)
        .args(["--local-pair", "--yes"])
        .env("WIRESCOPE_STATE_DIR", &host_state)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_within(c, Duration::from_secs(300), "checklist run");
    assert!(o.status.success(), "{}", stderr(&o));
    // Kept, it reads as the change; rolled back, as what was restored.
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("veth-a feature rx-gro: off -> on")
            || text.contains("veth-a feature rx-gro restored to off"),
        "the change was tried: {text}"
    );
    assert!(
        !host_state.join("backups").exists(),
        "{:?}",
        std::fs::read_dir(host_state.join("backups")).map(|r| r.count())
    );
    // The same with a reader that leaves after the first line.
    let c = Command::new("bash")
        .arg("-c")
        .arg(r#""$0" checklist run "$1" --local-pair --yes 2>"$2" | head -1; exit "${PIPESTATUS[0]}""#)
        .arg(common::bin())
        .arg(&checklist)
        .arg(d.path().join("stderr"))
        .env("WIRESCOPE_STATE_DIR", &host_state)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_within(c, Duration::from_secs(300), "checklist run | head -1");
    let err = std::fs::read_to_string(d.path().join("stderr")).unwrap_or_default();
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 1);
    // Baseline, then a run with the change applied on this side.
    assert!(
        err.matches("wirescope: measured").count() >= 2,
        "the check ran: {err}"
    );
    assert!(
        !host_state.join("backups").exists(),
        "{:?}",
        std::fs::read_dir(host_state.join("backups")).map(|r| r.count())
    );
}

#[test]
fn printed_commands_are_safe_to_paste() {
    let d = tempfile::tempdir().unwrap();
    let pwned = d.path().join("pwned");
    let f = d.path().join("q.toml");
    std::fs::write(
        &f,
        format!(
            "name = \"q\"\n[sysctl]\n\"net.core.default_qdisc\" = \"fq;$(touch {})\"\n",
            pwned.display()
        ),
    )
    .unwrap();
    let o = ws(&["profile", "apply", f.to_str().unwrap(), "--dry-run"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let line = String::from_utf8_lossy(&o.stdout).trim().to_string();
    // What a shell makes of the pasted line: the words, nothing run.
    let words = Command::new("sh")
        .arg("-c")
        .arg(format!("set -- {line}; printf '%s\\n' \"$@\""))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&words.stdout),
        format!(
            "sysctl\n-w\nnet.core.default_qdisc=fq;$(touch {})\n",
            pwned.display()
        )
    );
    assert!(!pwned.exists());
}

#[test]
fn endless_files_are_refused_and_output_errors_do_not_panic() {
    for args in [
        vec!["profile", "show", "/dev/zero"],
        vec!["checklist", "run", "/dev/zero", "--local-pair"],
    ] {
        let c = ws(&args).spawn().unwrap();
        let o = wait_within(c, LIVENESS, &args.join(" "));
        assert!(!o.status.success());
        assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
        no_panic(&o);
    }
    // A full disk behind `>`: a clear error and exit 1.
    let o = ws(&["profile", "show", "throughput-100g"])
        .stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot write to stdout") && stderr(&o).contains("No space left"),
        "{}",
        stderr(&o)
    );
    no_panic(&o);
    // A reader that goes away: quiet, exit 0. The profile is larger than a
    // pipe holds, so printing goes on after `head` has left.
    let d = tempfile::tempdir().unwrap();
    let big = d.path().join("big.toml");
    let mut text = String::from("name = \"big\"\n");
    for i in 0..4000 {
        text.push_str(&format!(
            "# comment line {i}, long enough to fill a pipe buffer\n"
        ));
    }
    text.push_str("[sysctl]\n\"net.core.somaxconn\" = \"4096\"\n");
    std::fs::write(&big, text).unwrap();
    let o = Command::new("bash")
        .arg("-c")
        .arg(r#""$0" profile show "$1" | head -1 >/dev/null; exit "${PIPESTATUS[0]}""#)
        .arg(common::bin())
        .arg(&big)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
}

#[test]
fn profile_finish_peer_completes_an_interrupted_apply_on_the_agent() {
    use std::io::{BufRead, BufReader};
    let mut pair = Pair::new();
    let peer_state = pair.dir.path().join("peer-state");
    let f = pair.dir.path().join("two.toml");
    std::fs::write(
        &f,
        "name = \"two\"\n[sysctl]\n\"net.core.somaxconn\" = \"1234\"\n\"net.ipv4.tcp_rmem\" = \"4096 131072 6291456\"\n",
    )
    .unwrap();
    let ns_b = pair.b.clone();
    let sysctl_b = |key: &str| {
        let o = Command::new("ip")
            .args(["netns", "exec", &ns_b, "sysctl", "-n", key])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    // An apply on the agent's host, killed after its first setting; under a
    // loose umask, which must not make its own backup untrusted.
    let mut child = Command::new("ip")
        .args(["netns", "exec", &pair.b, "sh", "-c"])
        .arg(r#"umask 002; exec "$0" profile apply "$1" --yes --state-dir "$2""#)
        .arg(common::bin())
        .arg(&f)
        .arg(&peer_state)
        .env(wirescope::face::profile::TEST_PAUSE_ENV, "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("paused after 1 of") => break,
            Some(Ok(_)) => continue,
            other => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("apply ended before the test hook: {other:?}");
            }
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_ne!(sysctl_b("net.ipv4.tcp_rmem"), "4096 131072 6291456");
    pair.start_agent_with(
        &[],
        &[
            "--allow-tuning",
            "--state-dir",
            peer_state.to_str().unwrap(),
        ],
    );
    let o = profile_within(
        &pair.a,
        &["finish", "--peer", "198.18.0.2"],
        Duration::from_secs(60),
    );
    assert!(
        o.status.success(),
        "{}\nagent: {}",
        stderr(&o),
        pair.agent_log()
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("finished 1 setting(s)"), "{out}");
    assert_eq!(sysctl_b("net.core.somaxconn"), "1234");
    assert_eq!(sysctl_b("net.ipv4.tcp_rmem"), "4096 131072 6291456");
    let o = profile_within(&pair.a, &["rollback", "--peer", "198.18.0.2"], LIVENESS);
    assert!(o.status.success(), "{}", stderr(&o));
}

//! `wirescope profile` end to end: the real binary inside a namespace this
//! test creates (net.* sysctls are per network namespace; the veth there
//! has channels, GRO, RPS and an MTU), with its state directory in a
//! temporary directory. Namespaces are removed by [`Pair`]'s Drop on every
//! path.

use crate::common;

use common::{bin, Pair};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// One namespace pair, a state directory and a directory for profile files.
struct T {
    pair: Pair,
    state: tempfile::TempDir,
    files: tempfile::TempDir,
}

const INJECTED: &str = "4096 8192 16384";

impl T {
    fn new() -> T {
        let t = T {
            pair: Pair::new(),
            state: tempfile::tempdir().unwrap(),
            files: tempfile::tempdir().unwrap(),
        };
        // The receiver-side limit the issue describes, injected in this namespace only.
        t.sh(&format!("echo '{INJECTED}' > /proc/sys/net/ipv4/tcp_rmem"));
        assert_eq!(t.rmem(), INJECTED);
        t
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.pair.a, bin()])
            .args(args)
            .env("WIRESCOPE_STATE_DIR", self.state.path())
            .env_remove(wirescope::face::profile::TEST_PAUSE_ENV)
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "wirescope {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn sh(&self, script: &str) -> String {
        let o = Command::new("ip")
            .args(["netns", "exec", &self.pair.a, "sh", "-c", script])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// tcp_rmem as the kernel prints it, fields joined by one space.
    fn rmem(&self) -> String {
        self.sh("cat /proc/sys/net/ipv4/tcp_rmem")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn profile(&self, name: &str, text: &str) -> String {
        let p: PathBuf = self.files.path().join(format!("{name}.toml"));
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }

    /// Saved profile `before` against the live namespace: must be identical.
    fn assert_unchanged(&self) {
        let out = self.ok(&["profile", "diff", "before", "live", "--exit-code"]);
        assert!(out.contains("no differences"), "{out}");
        assert_eq!(self.rmem(), INJECTED);
    }

    fn backups(&self) -> usize {
        std::fs::read_dir(self.state.path().join("backups"))
            .map(|d| d.count())
            .unwrap_or(0)
    }
}

/// Raises the receive buffer, halves the channels, turns GRO on, jumbo MTU, RPS on every CPU.
const RAISE: &str = r#"
name = "raise"
[sysctl]
"net.ipv4.tcp_rmem" = "4096 131072 6291456"
[[interface]]
match = "veth-a"
mtu = 9000
channels = { rx = 2, tx = 2 }
features = { gro = true }
rps = "all"
"#;

/// Does the diff output have the row `setting  a  ->  b`?
fn has_row(out: &str, setting: &str, a: &str, b: &str) -> bool {
    out.lines().any(|l| {
        let w: Vec<&str> = l
            .split("  ")
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .collect();
        w == [setting, a, "->", b]
    })
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_profile_whose_third_setting_is_invalid_changes_nothing() {
    let t = T::new();
    t.ok(&["profile", "save", "before", "--iface", "veth-a"]);

    // Refused while validating: reported before anything changes, no backup written.
    let head = "name = \"bad-third\"\n[sysctl]\n\"net.ipv4.tcp_rmem\" = \"4096 131072 6291456\"\n\"net.ipv4.tcp_wmem\" = \"4096 65536 6291456\"\n";
    for (third, named, why) in [
        (
            "\"net.ipv4.tcp_no_such_knob\" = \"1\"\n[[interface]]\nmatch = \"veth-a\"\nmtu = 9000\n",
            "sysctl net.ipv4.tcp_no_such_knob",
            "no such sysctl",
        ),
        (
            "[[interface]]\nmatch = \"veth-a\"\nrings = { rx = 512 }\nmtu = 9000\n",
            "veth-a rings",
            "driver veth does not support rings",
        ),
        (
            "[[interface]]\nmatch = \"veth-a\"\nchannels = { rx = 64 }\nmtu = 9000\n",
            "veth-a channels rx",
            "64 is above the driver's maximum 4",
        ),
    ] {
        let f = t.profile("bad-third", &format!("{head}{third}"));
        let o = t.run(&["profile", "apply", &f, "--yes"]);
        let e = stderr(&o);
        assert!(!o.status.success(), "{e}");
        assert!(e.contains(named) && e.contains(why) && e.contains("nothing was changed"), "{e}");
        assert_eq!(t.backups(), 0, "{e}");
        t.assert_unchanged();
    }

    // Refused by the kernel at the third write: the two before it are restored.
    let f = t.profile(
        "kernel-refuses-third",
        r#"
name = "kernel-refuses-third"
[sysctl]
"net.ipv4.tcp_rmem" = "4096 131072 6291456"
"net.ipv4.tcp_wmem" = "4096 65536 6291456"
"net.ipv4.tcp_congestion_control" = "nosuchcc"
[[interface]]
match = "veth-a"
mtu = 9000
features = { gro = true }
"#,
    );
    let o = t.run(&["profile", "apply", &f, "--yes"]);
    let e = stderr(&o);
    assert!(!o.status.success());
    assert!(
        e.contains("setting 3 of 5 failed: sysctl net.ipv4.tcp_congestion_control = nosuchcc")
            && e.contains("No such file or directory")
            && e.contains("restored the 2 setting(s) changed before it (sysctl net.ipv4.tcp_wmem, sysctl net.ipv4.tcp_rmem)"),
        "{e}"
    );
    t.assert_unchanged();
}

#[test]
fn apply_then_rollback_restores_exactly() {
    let t = T::new();
    t.ok(&["profile", "save", "before", "--iface", "veth-a"]);
    let f = t.profile("raise", RAISE);
    let out = t.ok(&["profile", "apply", &f, "--yes"]);
    assert!(
        out.contains(&format!(
            "sysctl net.ipv4.tcp_rmem  {INJECTED}  ->  4096 131072 6291456"
        )),
        "{out}"
    );
    assert_eq!(t.rmem(), "4096 131072 6291456");
    assert_eq!(t.sh("cat /sys/class/net/veth-a/mtu").trim(), "9000");
    assert!(t
        .sh("ethtool -k veth-a")
        .contains("generic-receive-offload: on"));
    let d = t.ok(&["profile", "diff", &f, "live", "--exit-code"]);
    assert!(d.contains("no differences"), "{d}");

    // The JSON report is the before → after record the log will carry.
    let json = t.ok(&["profile", "rollback", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let rmem = v["restored"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["setting"] == "sysctl net.ipv4.tcp_rmem")
        .unwrap();
    assert_eq!(rmem["before"], "4096 131072 6291456");
    assert_eq!(rmem["after"], INJECTED);
    assert_eq!(rmem["key"]["kind"], "sysctl");
    t.assert_unchanged();

    let o = t.run(&["profile", "rollback"]);
    assert!(
        !o.status.success() && stderr(&o).contains("no applied profile to roll back"),
        "{}",
        stderr(&o)
    );
}

/// Start `apply` with the test hook, wait for its marker, kill it with SIGKILL.
fn kill_apply_after(t: &T, profile: &str, n: usize) {
    let mut child = t
        .cmd(&["profile", "apply", profile, "--yes"])
        .env(wirescope::face::profile::TEST_PAUSE_ENV, n.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let marker = format!("paused after {n} of");
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains(&marker) => break,
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
}

#[test]
fn a_killed_apply_leaves_a_journal_that_the_next_command_finds() {
    let t = T::new();
    t.ok(&["profile", "save", "before", "--iface", "veth-a"]);
    let f = t.profile("raise", RAISE);

    kill_apply_after(&t, &f, 2);
    assert_eq!(
        t.rmem(),
        "4096 131072 6291456",
        "the first setting was written before the kill"
    );
    let o = t.run(&["profile", "apply", &f, "--yes"]);
    let e = stderr(&o);
    assert!(!o.status.success());
    assert!(
        e.contains("was interrupted after 2 of 7 settings")
            && e.contains("wirescope profile rollback")
            && e.contains("wirescope profile finish"),
        "{e}"
    );
    let o = t.run(&["profile", "rollback"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("undoing the interrupted apply of profile raise"),
        "{}",
        stderr(&o)
    );
    t.assert_unchanged();

    // The other way out: finish it.
    kill_apply_after(&t, &f, 1);
    let out = t.ok(&["profile", "finish"]);
    assert!(out.contains("finished 6 setting(s)"), "{out}");
    let d = t.ok(&["profile", "diff", &f, "live", "--exit-code"]);
    assert!(d.contains("no differences"), "{d}");
    t.ok(&["profile", "rollback"]);
    t.assert_unchanged();
}

#[test]
fn diff_of_shipped_profiles_and_of_live_against_a_profile() {
    let t = T::new();
    let o = t.run(&[
        "profile",
        "diff",
        "throughput-100g",
        "defaults",
        "--exit-code",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let line = |s: &str, a: &str, b: &str| has_row(&out, s, a, b);
    assert!(
        line("sysctl net.core.rmem_max", "536870912", "212992"),
        "{out}"
    );
    assert!(
        line(
            "sysctl net.ipv4.tcp_rmem",
            "4096 87380 268435456",
            "4096 131072 6291456"
        ),
        "{out}"
    );
    assert!(line("interface @route mtu", "9000", "(not set)"), "{out}");
    assert!(line("host irqbalance", "stopped", "(not set)"), "{out}");
    assert!(
        line(
            "sysctl net.ipv4.tcp_congestion_control",
            "(not set)",
            "cubic"
        ),
        "{out}"
    );

    let f = t.profile("raise", RAISE);
    let out = t.ok(&["profile", "diff", "live", &f]);
    assert!(out.contains("--- live\n"), "{out}");
    for (s, a, b) in [
        ("sysctl net.ipv4.tcp_rmem", INJECTED, "4096 131072 6291456"),
        ("veth-a mtu", "1500", "9000"),
        ("veth-a channels rx", "4", "2"),
        ("veth-a feature rx-gro", "off", "on"),
    ] {
        assert!(has_row(&out, s, a, b), "{s}: {out}");
    }
}

#[test]
fn save_then_diff_against_live_shows_no_difference() {
    let t = T::new();
    let out = t.ok(&["profile", "save", "now"]);
    assert!(out.contains("saved profile now"), "{out}");
    let saved = std::fs::read_to_string(t.state.path().join("profiles/now.toml")).unwrap();
    assert!(
        saved.contains(&format!("\"net.ipv4.tcp_rmem\" = \"{INJECTED}\"")),
        "{saved}"
    );
    assert!(
        saved.contains("match = \"veth-a\"") && saved.contains("rx-gro = false"),
        "{saved}"
    );
    let o = t.run(&["profile", "diff", "now", "live", "--exit-code"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no differences"));
    assert!(
        t.ok(&["profile", "list"]).contains("now  "),
        "saved profiles are listed"
    );
}

#[test]
fn dry_run_prints_exactly_the_equivalent_commands() {
    let t = T::new();
    t.ok(&["profile", "save", "before", "--iface", "veth-a"]);
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let mask = wirescope::tune::cpuset::format_mask(
        &wirescope::tune::cpuset::parse_list(&online).unwrap(),
    );
    let f = t.profile("raise", RAISE);
    let o = t.run(&["profile", "apply", &f, "--dry-run"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!(
            "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 6291456\"\n\
             ethtool -L veth-a rx 2\n\
             ethtool -L veth-a tx 2\n\
             ip link set dev veth-a mtu 9000\n\
             ethtool -K veth-a rx-gro on\n\
             echo {mask} > /sys/class/net/veth-a/queues/rx-0/rps_cpus\n\
             echo {mask} > /sys/class/net/veth-a/queues/rx-1/rps_cpus\n"
        )
    );
    assert!(
        stderr(&o).contains("7 change(s), 0 already set; nothing was changed"),
        "{}",
        stderr(&o)
    );
    t.assert_unchanged();

    // @route: the interface that routes to the peer's address.
    let f = t.profile(
        "route",
        "name = \"route\"\n[[interface]]\nmatch = \"@route\"\nmtu = 9000\n",
    );
    let o = t.run(&[
        "profile",
        "apply",
        &f,
        "--dry-run",
        "--route-to",
        "198.18.0.2",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "ip link set dev veth-a mtu 9000\n",
        "{}",
        stderr(&o)
    );
    let o = t.run(&["profile", "apply", &f, "--dry-run"]);
    assert!(
        !o.status.success() && stderr(&o).contains("--route-to ADDR"),
        "{}",
        stderr(&o)
    );
}

//! RDMA through the commands, with the real binary: `run --engine rdma` on a
//! host without RDMA (this machine) fails at once with one line and the fix;
//! `watch --from` / `check --from` read captures holding the real sysfs trees
//! (tests/fixtures/rdma) and modified copies of them, where the rules fire;
//! `check --since` compares two captures' counters. A build without the
//! `rdma` cargo feature refuses RDMA tests on both sides with one line.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_wirescope")
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rdma")
}

fn copy_tree(from: &Path, to: &Path) {
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

/// A writable copy of the fixtures, as a capture directory.
fn copy() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    copy_tree(&fixture(), d.path());
    d
}

fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn wirescope(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(bin()).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn check_ids(args: &[&str]) -> Vec<String> {
    let mut all = vec!["check", "--json"];
    all.extend_from_slice(args);
    let (code, out, err) = wirescope(&all);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{} {}",
                f["id"].as_str().unwrap(),
                f["subject"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn has_rdma() -> bool {
    std::fs::read_dir("/sys/class/infiniband")
        .map(|mut d| d.next().is_some())
        .unwrap_or(false)
}

#[cfg(feature = "rdma")]
fn libibverbs_installed() -> bool {
    let out = Command::new("ldconfig").arg("-p").output().unwrap();
    String::from_utf8_lossy(&out.stdout).contains("libibverbs.so.1 ")
}

#[test]
#[cfg(feature = "rdma")]
fn run_engine_rdma_without_rdma_fails_at_once_with_the_fix() {
    let _share = crate::common::traffic();
    let (dev, lib) = (has_rdma(), libibverbs_installed());
    if dev && lib {
        // Nothing is missing: the test then needs a peer and runs (rdma_device).
        let (code, _, err) = wirescope(&["run", "--engine", "rdma", "--peer", "192.0.2.1"]);
        assert!(!err.contains("RDMA unavailable"), "{code}: {err}");
        return;
    }
    for args in [
        vec!["run", "--engine", "rdma"],
        vec![
            "run",
            "--engine",
            "rdma",
            "-m",
            "lat",
            "--op",
            "send",
            "--peer",
            "192.0.2.1",
        ],
    ] {
        let (code, out, err) = wirescope(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "nothing else happens: {out}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "one line: {err}");
        assert!(lines[0].contains("RDMA unavailable on this host"), "{err}");
        assert_eq!(lines[0].contains("no RDMA device"), !dev, "{err}");
        assert_eq!(lines[0].contains("modprobe"), !dev, "{err}");
        assert_eq!(
            lines[0].contains("libibverbs is not installed"),
            !lib,
            "{err}"
        );
    }
}

/// Built without the `rdma` feature, `run --engine rdma` (local pair or
/// peer) stops at once, before any connection, with the one line that says
/// how to get RDMA back.
#[test]
#[cfg(not(feature = "rdma"))]
fn run_engine_rdma_in_a_build_without_rdma_says_so() {
    let _share = crate::common::traffic();
    for args in [
        vec!["run", "--engine", "rdma"],
        vec!["run", "--engine", "rdma", "--peer", "192.0.2.1"],
    ] {
        let (code, out, err) = wirescope(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "nothing else happens: {out}");
        assert_eq!(
            err,
            format!("error: {}\n", wirescope::traffic::rdma::BUILT_WITHOUT_RDMA),
            "{args:?}"
        );
    }
}

/// The agent prepares its side of a point with the same function; in a
/// build without RDMA it answers the controller with the same refusal
/// (naming the agent's host), having allocated nothing.
#[test]
#[cfg(not(feature = "rdma"))]
fn an_agent_built_without_rdma_refuses_an_rdma_point() {
    let _share = crate::common::traffic();
    use wirescope::traffic::rdma::{RdmaMode, RdmaOp, RdmaSpec, BUILT_WITHOUT_RDMA};
    use wirescope::traffic::{EngineSpec, Side};
    let spec = EngineSpec::Rdma(RdmaSpec::perftest_defaults(RdmaOp::Write, RdmaMode::Bw));
    let addr = Some("192.0.2.1".parse().unwrap());
    for (side, host) in [
        (Side::Agent, "the agent's host"),
        (Side::Controller, "this host"),
    ] {
        match wirescope::session::engines::prepare(&spec, side, addr, None) {
            Ok(_) => panic!("{side:?}: an RDMA engine was prepared without the rdma feature"),
            Err(e) => assert_eq!(
                e.to_string(),
                format!("rdma on {host}: {BUILT_WITHOUT_RDMA}"),
                "{side:?}"
            ),
        }
    }
}

#[test]
fn rdma_usage_errors_name_the_flag() {
    let _share = crate::common::traffic();
    for (args, says) in [
        (
            vec!["run", "--engine", "tcp", "--qps", "2"],
            "--qps applies to --engine rdma",
        ),
        (
            vec!["run", "--engine", "rdma", "-m", "pingpong"],
            "not an rdma mode",
        ),
        (
            vec!["run", "--engine", "rdma", "--iters", "10", "--time", "2s"],
            "--iters or --time",
        ),
        (
            vec!["run", "--engine", "rdma", "--size", "16M"],
            "rdma size",
        ),
        (
            vec!["run", "--engine", "rdma", "-m", "lat", "--qps", "2"],
            "one QP",
        ),
        (
            vec!["run", "--engine", "rdma", "--sweep", "streams=1,2"],
            "rdma sweeps size",
        ),
    ] {
        let (code, _, err) = wirescope(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn watch_from_shows_devices_ports_and_counters() {
    let _share = crate::common::traffic();
    let (code, out, err) = wirescope(&["watch", "--from", fixture().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for want in [
        "RDMA mlx5_0: MT4118 fw 14.28.2006",
        "RDMA mlx4_0",
        "port 2: ACTIVE",
        "RDMA hfi1_0",
        "hw_counters/: duplicate_request 41",
        "local_ack_timeout_err 131",
    ] {
        assert!(out.contains(want), "missing {want:?}:\n{out}");
    }
    let (code, out, _) = wirescope(&["watch", "--from", fixture().to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["facts"]["rdma"]["devices"].as_array().unwrap().len(), 3);
    let ports = v["rdma"]["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 4, "hfi1_0 1, mlx4_0 2, mlx5_0 1");
}

#[test]
fn the_rules_fire_on_modified_captures() {
    let _share = crate::common::traffic();
    let base = check_ids(&["--from", fixture().to_str().unwrap()]);
    assert!(
        !base.iter().any(|f| f.starts_with("rdma.")),
        "the healthy fixtures: {base:?}"
    );
    // A port down.
    let c = copy();
    put(
        c.path(),
        "sys/class/infiniband/mlx4_0/ports/2/state",
        "1: DOWN\n",
    );
    put(
        c.path(),
        "sys/class/infiniband/mlx4_0/ports/2/phys_state",
        "3: Disabled\n",
    );
    let ids = check_ids(&["--from", c.path().to_str().unwrap()]);
    assert!(
        ids.contains(&"rdma.port-down mlx4_0 port 2".to_string()),
        "{ids:?}"
    );
    // RoCE with an active MTU of 1024 on a 4096-capable port: the netdev at 1500.
    let c = copy();
    let dev = "sys/class/infiniband/mlx5_0";
    put(c.path(), &format!("{dev}/ports/1/link_layer"), "Ethernet\n");
    put(c.path(), &format!("{dev}/ports/1/active_mtu"), "1024\n");
    put(c.path(), &format!("{dev}/ports/1/max_mtu"), "4096\n");
    put(
        c.path(),
        &format!("{dev}/ports/1/gids/0"),
        "fe80:0000:0000:0000:0a7f:bcff:fe12:45ef\n",
    );
    put(
        c.path(),
        &format!("{dev}/ports/1/gid_attrs/types/0"),
        "RoCE v2\n",
    );
    put(
        c.path(),
        &format!("{dev}/ports/1/gid_attrs/ndevs/0"),
        "eth0\n",
    );
    put(c.path(), &format!("{dev}/device/net/eth0/ifindex"), "2\n");
    put(c.path(), "sys/class/net/eth0/mtu", "1500\n");
    let (_, out, _) = wirescope(&["watch", "--from", c.path().to_str().unwrap()]);
    let ids = check_ids(&["--from", c.path().to_str().unwrap()]);
    assert!(
        ids.iter().any(|f| f.starts_with("rdma.mtu-small")),
        "{ids:?}\n{out}"
    );
}

/// Two captures of one boot, `secs` apart by the kernel's uptime.
fn two_captures(secs: f64) -> (tempfile::TempDir, tempfile::TempDir) {
    let (before, after) = (copy(), copy());
    for (d, up) in [(&before, 5000.0), (&after, 5000.0 + secs)] {
        put(d.path(), "proc/uptime", &format!("{up:.2} 9000.00\n"));
        put(
            d.path(),
            "proc/sys/kernel/random/boot_id",
            "6a1e0f62-1d0b-4a57-8f0e-2b1c3d4e5f60\n",
        );
    }
    (before, after)
}

const HW: &str = "sys/class/infiniband/mlx5_0/ports/1/hw_counters";

fn since(new: &Path, old: &Path) -> Vec<String> {
    check_ids(&[
        "--from",
        new.to_str().unwrap(),
        "--since",
        old.to_str().unwrap(),
    ])
}

#[test]
fn check_since_finds_counters_that_grew_between_two_captures() {
    let _share = crate::common::traffic();
    let (before, after) = two_captures(100.0);
    put(before.path(), &format!("{HW}/out_of_buffer"), "100\n");
    put(after.path(), &format!("{HW}/out_of_buffer"), "5100\n");
    assert!(since(after.path(), before.path())
        .iter()
        .any(|f| f.starts_with("rdma.out-of-buffer")),);
    // The rate is over the captures' real span: 5000 in 100 s.
    let (code, out, err) = wirescope(&[
        "check",
        "--from",
        after.path().to_str().unwrap(),
        "--since",
        before.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("out_of_buffer 50/s"), "{out}");
    assert!(out.contains("(100 s earlier)"), "{out}");
    // One CNP in 100 s is no congestion.
    let (before, after) = two_captures(100.0);
    put(before.path(), &format!("{HW}/np_cnp_sent"), "1000\n");
    put(after.path(), &format!("{HW}/np_cnp_sent"), "1001\n");
    let ids = since(after.path(), before.path());
    assert!(!ids.iter().any(|f| f.starts_with("rdma.")), "{ids:?}");
    // 50 000 CNPs in 100 s is.
    put(after.path(), &format!("{HW}/np_cnp_sent"), "51000\n");
    let ids = since(after.path(), before.path());
    assert!(
        ids.iter().any(|f| f.starts_with("rdma.congestion")),
        "{ids:?}"
    );
}

#[test]
fn check_since_refuses_captures_it_cannot_compare() {
    let _share = crate::common::traffic();
    let refused = |new: &Path, old: &Path, want: &str| {
        let (code, out, err) = wirescope(&[
            "check",
            "--from",
            new.to_str().unwrap(),
            "--since",
            old.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(out.is_empty(), "{out}");
        // Notes on what the capture lacks, then the one error line.
        let last = err.trim().lines().last().unwrap_or_default();
        assert!(
            last.contains(want),
            "want {want:?} in the error line of {err}"
        );
    };
    let (before, after) = two_captures(60.0);
    // Swapped: --from must be the newer one.
    refused(before.path(), after.path(), "swap them");
    // The same capture twice.
    refused(after.path(), after.path(), "same moment");
    // Another adapter under the same name.
    let (b2, a2) = two_captures(60.0);
    put(
        b2.path(),
        "sys/class/infiniband/mlx5_0/node_guid",
        "0c42:a103:0099:0001\n",
    );
    refused(a2.path(), b2.path(), "not the same adapter");
    // Another boot: the counters started again.
    let (b3, a3) = two_captures(60.0);
    put(
        b3.path(),
        "proc/sys/kernel/random/boot_id",
        "00000000-1111-2222-3333-444444444444\n",
    );
    refused(a3.path(), b3.path(), "different boots");
    // No time in a capture (an older capture or a sosreport without it).
    let (b4, a4) = two_captures(60.0);
    std::fs::remove_file(b4.path().join("proc/uptime")).unwrap();
    refused(a4.path(), b4.path(), "no proc/uptime");
    // A capture without RDMA devices.
    let empty = tempfile::tempdir().unwrap();
    refused(after.path(), empty.path(), "has no RDMA device");
}

#[test]
fn check_since_says_which_counters_went_down() {
    let _share = crate::common::traffic();
    let (before, after) = two_captures(30.0);
    put(before.path(), &format!("{HW}/out_of_sequence"), "900000\n");
    put(after.path(), &format!("{HW}/out_of_sequence"), "12\n");
    let (code, _, err) = wirescope(&[
        "check",
        "--json",
        "--from",
        after.path().to_str().unwrap(),
        "--since",
        before.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("went down") && err.contains("hw_counters/out_of_sequence"),
        "{err}"
    );
}

#[test]
fn a_capture_of_this_host_says_whether_it_has_rdma() {
    let _share = crate::common::traffic();
    let d = tempfile::tempdir().unwrap();
    let cap = d.path().join("cap");
    let (code, _, err) = wirescope(&["capture", cap.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = wirescope(&["watch", "--from", cap.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    if has_rdma() {
        assert!(out.contains("RDMA "), "{out}");
    } else {
        assert!(out.contains("RDMA: no RDMA device"), "{out}");
    }
}

//! Real-kernel tests: a multi-queue veth pair in a private namespace, the
//! loopback device and whatever NIC the host has. No mocks; `ethtool(8)` is
//! run side by side as the reference.
//!
//! Tests that create namespaces need root and fail with a message saying so.
//! Every namespace is removed by [`NetnsGuard`] on every exit path.

use super::*;
use crate::probe::facts::{Channels, Coalesce, Features, LinkInfo, Rings, Support};
use crate::session::netns::{ip, NetnsGuard};
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test creates network namespaces and changes a veth inside them: run it as root \
         (e.g. `sudo -E cargo test -p wirescope probe::netlink`)"
    );
}

/// Run `ethtool ARGS` (inside `ns` when given); stdout on success, Err(stderr) on failure.
fn ethtool(ns: Option<&str>, args: &[&str]) -> Result<String, String> {
    let mut cmd = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "ethtool"]);
            c
        }
        None => Command::new("ethtool"),
    };
    let out = cmd.args(args).output().unwrap_or_else(|e| {
        panic!("cannot run ethtool ({e}); these tests compare with it: apt-get install ethtool")
    });
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn unsupported<T>(driver: &str) -> Support<T> {
    Support::NotSupported {
        driver: driver.to_string(),
    }
}

/// A namespace `wsnl-<pid>-<n>` holding veth `va`/`vb`, 4 rx and 4 tx queues each, both up.
struct VethNs {
    name: String,
    _guard: NetnsGuard,
}

fn veth_ns() -> VethNs {
    require_root();
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "wsnl-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let mut guard = NetnsGuard::default();
    guard.add(&name).expect("create namespace");
    let q = ["numtxqueues", "4", "numrxqueues", "4"];
    let mut add = vec!["-n", name.as_str(), "link", "add", "va"];
    add.extend(q);
    add.extend(["type", "veth", "peer", "name", "vb"]);
    add.extend(q);
    ip(&add).expect("create veth");
    for dev in ["va", "vb"] {
        ip(&["-n", &name, "link", "set", dev, "up"]).expect("link up");
    }
    VethNs {
        name,
        _guard: guard,
    }
}

/// Run `f` on a fresh thread that has entered namespace `ns`; sockets opened
/// there stay in `ns` when returned to the caller.
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = ns.to_string();
    std::thread::Builder::new()
        .name(format!("netns-{ns}"))
        .spawn(move || {
            // Only the network namespace: a netlink socket binds to the
            // namespace of the thread that creates it.
            let file = std::fs::File::open(format!("/run/netns/{ns}")).expect("open namespace");
            nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            f()
        })
        .expect("spawn probe thread")
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

fn ethtool_in(ns: &str) -> EthtoolNl {
    in_ns(ns, || EthtoolNl::open().expect("ethtool family"))
}

fn sysfs_u32(ns: Option<&str>, dev: &str, file: &str) -> u32 {
    let path = format!("/sys/class/net/{dev}/{file}");
    let text = match ns {
        None => std::fs::read_to_string(&path).expect("sysfs"),
        Some(ns) => {
            let out = Command::new("ip")
                .args(["netns", "exec", ns, "cat", &path])
                .output()
                .expect("ip netns exec cat");
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    text.trim().parse().expect("number in sysfs")
}

fn driver_of(dev: &str) -> String {
    std::fs::read_link(format!("/sys/class/net/{dev}/device/driver"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

/// `KEY: VALUE` lines of one `ethtool` section (after a line starting with `header`).
fn section(text: &str, header: &str) -> BTreeMap<String, String> {
    text.lines()
        .skip_while(|l| !l.starts_with(header))
        .skip(1)
        .take_while(|l| !l.ends_with(':') || l.contains('\t'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn num(m: &BTreeMap<String, String>, key: &str) -> Option<u32> {
    m.get(key).and_then(|v| v.parse().ok())
}

fn channels_from_text(text: &str) -> Channels {
    let max = section(text, "Pre-set maximums");
    let cur = section(text, "Current hardware settings");
    Channels {
        max_rx: num(&max, "RX"),
        max_tx: num(&max, "TX"),
        max_other: num(&max, "Other"),
        max_combined: num(&max, "Combined"),
        rx: num(&cur, "RX"),
        tx: num(&cur, "TX"),
        other: num(&cur, "Other"),
        combined: num(&cur, "Combined"),
    }
}

fn rings_from_text(text: &str) -> Rings {
    let max = section(text, "Pre-set maximums");
    let cur = section(text, "Current hardware settings");
    Rings {
        max_rx: num(&max, "RX"),
        max_rx_mini: num(&max, "RX Mini"),
        max_rx_jumbo: num(&max, "RX Jumbo"),
        max_tx: num(&max, "TX"),
        rx: num(&cur, "RX"),
        rx_mini: num(&cur, "RX Mini"),
        rx_jumbo: num(&cur, "RX Jumbo"),
        tx: num(&cur, "TX"),
    }
}

fn coalesce_from_text(text: &str) -> Coalesce {
    let onoff = |v: Option<&str>| match v {
        Some("on") => Some(true),
        Some("off") => Some(false),
        _ => None,
    };
    let mut c = Coalesce::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Adaptive RX: ") {
            let mut w = rest.split_whitespace();
            c.adaptive_rx = onoff(w.next());
            c.adaptive_tx = onoff(w.nth(1));
            continue;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let Ok(v) = v.trim().parse::<u32>() else {
            continue;
        };
        match k.trim() {
            "rx-usecs" => c.rx_usecs = Some(v),
            "rx-frames" => c.rx_frames = Some(v),
            "tx-usecs" => c.tx_usecs = Some(v),
            "tx-frames" => c.tx_frames = Some(v),
            other => {
                c.other.insert(other.to_string(), v);
            }
        }
    }
    c
}

/// `ethtool -k` lines as name → (on, fixed, requested), children included.
fn features_from_text(text: &str) -> BTreeMap<String, (bool, bool, Option<bool>)> {
    text.lines()
        .skip(1)
        .filter_map(|l| l.trim().split_once(": "))
        .map(|(name, v)| {
            let requested = if v.contains("[requested on]") {
                Some(true)
            } else if v.contains("[requested off]") {
                Some(false)
            } else {
                None
            };
            (
                name.to_string(),
                (v.starts_with("on"), v.contains("[fixed]"), requested),
            )
        })
        .collect()
}

/// Every feature we read must be shown by `ethtool -k` the same way: under
/// its kernel name, or under its [`FEATURE_ALIASES`] name when that legacy
/// line stands for this one feature, or as a member of a parent line that is
/// on when any member is.
fn assert_features_match(ours: &Features, k_text: &str) {
    let theirs = features_from_text(k_text);
    let alias: BTreeMap<&str, &str> = FEATURE_ALIASES.iter().copied().collect();
    let mut parents: BTreeMap<&str, Vec<bool>> = BTreeMap::new();
    let mut missing = Vec::new();
    for (name, f) in &ours.0 {
        let mine = (f.on, f.fixed, f.requested);
        match (theirs.get(name), alias.get(name.as_str())) {
            (Some(t), _) => assert_eq!(*t, mine, "feature {name}"),
            (None, Some(display)) => match theirs.get(*display) {
                Some(t) if (t.1, t.2) == (mine.1, mine.2) => {
                    assert_eq!(t.0, mine.0, "feature {name} shown as {display}")
                }
                Some(_) => parents.entry(display).or_default().push(f.on),
                None => missing.push(name.clone()),
            },
            (None, None) => missing.push(name.clone()),
        }
    }
    assert!(missing.is_empty(), "not shown by ethtool -k: {missing:?}");
    for (parent, members) in parents {
        let on = theirs.get(parent).map(|t| t.0);
        assert_eq!(on, Some(members.iter().any(|m| *m)), "parent line {parent}");
    }
}

#[test]
fn veth_channels_match_queues_and_follow_ethtool_set() {
    let ns = veth_ns();
    let mut e = ethtool_in(&ns.name);
    let want = Channels {
        max_rx: Some(4),
        max_tx: Some(4),
        rx: Some(4),
        tx: Some(4),
        ..Channels::default()
    };
    assert_eq!(e.channels("va", "veth"), Support::Value(want));
    let text = ethtool(Some(&ns.name), &["-l", "va"]).expect("ethtool -l");
    assert_eq!(
        e.channels("va", "veth"),
        Support::Value(channels_from_text(&text))
    );

    ethtool(Some(&ns.name), &["-L", "va", "rx", "2", "tx", "3"]).expect("ethtool -L");
    let now = e.channels("va", "veth");
    let now = now.value().expect("channels after -L");
    assert_eq!((now.rx, now.tx, now.max_rx), (Some(2), Some(3), Some(4)));
}

#[test]
fn veth_rings_coalesce_pause_are_not_supported() {
    let ns = veth_ns();
    let mut e = ethtool_in(&ns.name);
    assert_eq!(e.rings("va", "veth"), unsupported("veth"));
    assert_eq!(e.coalesce("va", "veth"), unsupported("veth"));
    assert_eq!(e.pause("va", "veth"), unsupported("veth"));
    for opt in ["-g", "-c", "-a"] {
        let err = ethtool(Some(&ns.name), &[opt, "va"]).expect_err("ethtool agrees");
        assert!(
            err.contains("Operation not supported"),
            "ethtool {opt}: {err}"
        );
    }
}

#[test]
fn veth_features_match_ethtool_k_and_follow_gro() {
    let ns = veth_ns();
    let mut e = ethtool_in(&ns.name);
    let f = e.features("va", "veth");
    let f = f.value().expect("features");
    assert!(f.0.len() > 30, "only {} features", f.0.len());
    assert_features_match(
        f,
        &ethtool(Some(&ns.name), &["-k", "va"]).expect("ethtool -k"),
    );
    assert!(f.0["rx-lro"].fixed, "veth has no LRO");

    for (state, want) in [("on", true), ("off", false)] {
        ethtool(Some(&ns.name), &["-K", "va", "gro", state]).expect("ethtool -K");
        let f = e.features("va", "veth");
        let f = f.value().expect("features");
        assert_eq!(f.on("rx-gro"), Some(want), "after gro {state}");
        assert_eq!(f.0["rx-gro"].requested, None);
        assert_features_match(
            f,
            &ethtool(Some(&ns.name), &["-k", "va"]).expect("ethtool -k"),
        );
    }
}

#[test]
fn veth_link_reports_speed_and_follows_peer_carrier() {
    let ns = veth_ns();
    let mut e = ethtool_in(&ns.name);
    let want = LinkInfo {
        speed_mbps: Some(10000),
        duplex: Some("Full".into()),
        autoneg: Some(false),
        link_detected: Some(true),
    };
    assert_eq!(e.link("va", "veth"), Support::Value(want.clone()));
    let text = ethtool(Some(&ns.name), &["va"]).expect("ethtool");
    assert!(text.contains("Speed: 10000Mb/s") && text.contains("Link detected: yes"));

    ip(&["-n", &ns.name, "link", "set", "vb", "down"]).expect("peer down");
    let link = e.link("va", "veth");
    assert_eq!(
        link.value().map(|l| l.link_detected),
        Some(Some(false)),
        "carrier follows the peer: {link:?}"
    );
}

#[test]
fn veth_has_no_qstats() {
    let ns = veth_ns();
    let idx = sysfs_u32(Some(&ns.name), "va", "ifindex");
    let mut n = in_ns(&ns.name, || NetdevNl::open().expect("netdev family"));
    match n.qstats(idx) {
        Err(NlError::NotSupported { op, target }) => {
            assert_eq!(op, "NETDEV_CMD_QSTATS_GET");
            assert_eq!(target, format!("ifindex {idx}"));
        }
        other => panic!("veth qstats on this kernel: {other:?}"),
    }
}

#[test]
fn missing_interface_is_an_error_not_unsupported() {
    let mut e = EthtoolNl::open().expect("ethtool family");
    let r = e.channels("wsnl-nosuch0", "none");
    assert_eq!(r, Support::Error("no such interface wsnl-nosuch0".into()));
    let mut n = NetdevNl::open().expect("netdev family");
    assert!(matches!(
        n.qstats(u32::MAX - 7),
        Err(NlError::NoDevice { .. })
    ));
    assert!(matches!(
        e.features("bad\0name", "none"),
        Support::Error(m) if m.contains("NUL")
    ));
}

#[test]
fn loopback_has_link_state_and_features_only() {
    let mut e = EthtoolNl::open().expect("ethtool family");
    assert_eq!(e.channels("lo", "loopback"), unsupported("loopback"));
    assert_eq!(e.rings("lo", "loopback"), unsupported("loopback"));
    assert_eq!(e.coalesce("lo", "loopback"), unsupported("loopback"));
    assert_eq!(e.pause("lo", "loopback"), unsupported("loopback"));
    assert_eq!(
        e.link("lo", "loopback"),
        Support::Value(LinkInfo {
            link_detected: Some(true),
            ..LinkInfo::default()
        })
    );
    let f = e.features("lo", "loopback");
    let f = f.value().expect("lo features");
    assert_eq!(
        f.0.get("loopback").map(|f| (f.on, f.fixed)),
        Some((true, true))
    );
    assert_features_match(f, &ethtool(None, &["-k", "lo"]).expect("ethtool -k lo"));

    let mut n = NetdevNl::open().expect("netdev family");
    assert!(matches!(
        n.qstats(sysfs_u32(None, "lo", "ifindex")),
        Err(NlError::NotSupported { .. })
    ));
}

/// Our answer against `ethtool OPT DEV` parsed by `parse`, or against its
/// "Operation not supported".
fn compare<T: PartialEq + std::fmt::Debug>(
    dev: &str,
    opt: &str,
    ours: Support<T>,
    parse: fn(&str) -> T,
) {
    match ethtool(None, &[opt, dev]) {
        Ok(text) => assert_eq!(ours, Support::Value(parse(&text)), "{dev} {opt}"),
        Err(err) => {
            assert!(
                err.contains("Operation not supported"),
                "{dev} {opt}: {err}"
            );
            assert!(
                matches!(ours, Support::NotSupported { .. }),
                "{dev} {opt}: {ours:?}"
            );
        }
    }
}

/// Every interface of the host's namespace against `ethtool -l/-g/-c/-k`.
#[test]
fn host_interfaces_match_ethtool() {
    let mut e = EthtoolNl::open().expect("ethtool family");
    let names: Vec<String> = std::fs::read_dir("/sys/class/net")
        .expect("/sys/class/net")
        .flatten()
        .map(|d| d.file_name().to_string_lossy().into_owned())
        .collect();
    for dev in &names {
        compare(dev, "-l", e.channels(dev, "d"), channels_from_text);
        compare(dev, "-g", e.rings(dev, "d"), rings_from_text);
        compare(dev, "-c", e.coalesce(dev, "d"), coalesce_from_text);
        let f = e.features(dev, "d");
        let k = ethtool(None, &["-k", dev]).expect("ethtool -k");
        assert_features_match(f.value().expect("features"), &k);
    }
}

/// qstats on a NIC whose driver has them (virtio_net since 6.10, mlx5, ...):
/// packets sent through it show up on its tx queues.
#[test]
fn host_nic_qstats_agree_with_proc_net_dev() {
    // No traffic is generated: tests send only to loopback or into their own
    // namespaces. The driver's per-queue totals are compared with the
    // interface totals the kernel reports in /proc/net/dev.
    let mut n = NetdevNl::open().expect("netdev family");
    let mut nics: Vec<String> = std::fs::read_dir("/sys/class/net")
        .expect("/sys/class/net")
        .flatten()
        .map(|d| d.file_name().to_string_lossy().into_owned())
        .filter(|d| n.qstats(sysfs_u32(None, d, "ifindex")).is_ok())
        .collect();
    nics.sort();
    let dev = nics.first().expect(
        "no interface on this host reports netdev qstats (virtio_net since Linux 6.10, mlx5, ice, bnxt...); this test needs one",
    );
    let idx = sysfs_u32(None, dev, "ifindex");
    let proc_dev = || -> (u64, u64) {
        let text = std::fs::read_to_string("/proc/net/dev").expect("/proc/net/dev");
        crate::probe::nic::parse_net_dev(&text)
            .expect("/proc/net/dev parses")
            .get(dev)
            .map(|c| (c.rx_packets, c.tx_packets))
            .expect("interface in /proc/net/dev")
    };
    let before = proc_dev();
    let q = n.qstats(idx).expect("qstats");
    let after = proc_dev();
    assert!(q.iter().all(|s| s.ifindex == idx));
    assert!(q.iter().any(|s| s.queue_type == QueueType::Rx));
    let sum = |t: QueueType| -> u64 {
        q.iter()
            .filter(|s| s.queue_type == t)
            .filter_map(|s| s.packets)
            .sum()
    };
    let (rx, tx) = (sum(QueueType::Rx), sum(QueueType::Tx));
    // Same driver counters, read a moment apart; allow what moved meanwhile plus 1 %.
    let near = |v: u64, lo: u64, hi: u64| v + lo / 100 + 16 >= lo && v <= hi + hi / 100 + 16;
    assert!(
        near(rx, before.0, after.0),
        "{dev} ({}): qstats rx {rx}, /proc/net/dev {before:?}..{after:?}",
        driver_of(dev)
    );
    assert!(
        near(tx, before.1, after.1),
        "{dev} ({}): qstats tx {tx}, /proc/net/dev {before:?}..{after:?}",
        driver_of(dev)
    );
}

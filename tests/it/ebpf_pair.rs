//! eBPF probes during a real run over a namespace pair with a 4-queue veth:
//! the deep set's counts agree with the kernel's own counters, the default
//! set's sampled estimates come near them and say they are estimates, and
//! an unprivileged run carries on and says why eBPF is off.

use crate::common;

use common::{bin, stderr, Log, Pair};
use std::process::Command;
use wirescope::probe::ethtool_names::Dir;
use wirescope::probe::sample::{HostRole, QueueSource, Sample};

/// The tests of this file run one at a time: a packet counted by
/// /proc/net/dev when veth hands it over is seen by netif_receive_skb when
/// the backlog runs, so packets in flight at the first and last read skew
/// the comparison, and a second test's traffic on the same two CPUs
/// lengthens that backlog. The lock is [`common::cores`], shared with the other areas' tests that load the cores.
fn serial() -> common::Cores {
    common::cores()
}

fn within(a: u64, b: u64, tol: f64) -> bool {
    let (a, b) = (a as f64, b as f64);
    (a - b).abs() <= tol * b.max(1.0)
}

/// eBPF packets of `iface` in `dir` over the samples: (queue→CPU matrix
/// total, sum of the per-queue rows of `source`, cells with no recorded queue).
pub fn ebpf_packets_of(
    samples: &[&Sample],
    iface: &str,
    dir: Dir,
    source: QueueSource,
) -> (u64, u64, u64) {
    let cells = samples
        .iter()
        .flat_map(|s| s.queue_cpus.iter())
        .filter(|c| c.iface == iface && c.dir == dir);
    let (mut total, mut unrecorded) = (0, 0);
    for c in cells {
        total += c.packets;
        if c.queue.is_none() {
            unrecorded += c.packets;
        }
    }
    let per_queue = samples
        .iter()
        .flat_map(|s| s.queues.iter())
        .filter(|q| q.iface == iface && q.dir == dir && q.source == source)
        .filter_map(|q| q.packets)
        .sum();
    (total, per_queue, unrecorded)
}

/// [`ebpf_packets_of`] the exact counts (deep set).
pub fn ebpf_packets(samples: &[&Sample], iface: &str, dir: Dir) -> (u64, u64, u64) {
    ebpf_packets_of(samples, iface, dir, QueueSource::Ebpf)
}

/// Sum of an interface's /proc/net/dev packet deltas in `dir` over the samples.
fn proc_packets(samples: &[&Sample], iface: &str, dir: Dir) -> u64 {
    samples
        .iter()
        .flat_map(|s| s.ifaces.iter())
        .filter(|i| i.name == iface)
        .map(|i| match dir {
            Dir::Rx => i.delta.rx_packets,
            Dir::Tx => i.delta.tx_packets,
        })
        .sum()
}

#[test]
fn ebpf_counts_match_proc_during_a_run() {
    let _serial = serial();
    let mut pair = Pair::new();
    pair.start_agent();
    let log = pair.log_path("e.jsonl");
    let out = pair.run(&[
        "-t",
        "2s",
        "-P",
        "2",
        "--ebpf",
        "deep",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = Log::read(&log);
    // The receiving interface (the data) within 0.1 %; the sender's
    // interface receives only ACKs, where the same in-flight skew at the
    // edges is a larger share of far fewer packets.
    for (host, iface, tol) in [
        (HostRole::Peer, "veth-b", 0.001),
        (HostRole::Local, "veth-a", 0.005),
    ] {
        let samples = log.samples(host);
        assert!(!samples.is_empty());
        for s in &samples {
            assert_eq!(s.ebpf.as_deref(), Some("on"), "{host:?}: eBPF status");
            assert!(s.probes.iter().any(|p| p == "netif_receive_skb"));
            assert_eq!(s.ebpf_observed, None, "deep counts every skb");
        }
        // Packets: the receiving interface's eBPF count equals /proc/net/dev's.
        let proc_rx = proc_packets(&samples, iface, Dir::Rx);
        let (total, per_queue, unrecorded) = ebpf_packets(&samples, iface, Dir::Rx);
        assert!(
            proc_rx > 1000,
            "{iface}: traffic flowed ({proc_rx} packets)"
        );
        assert!(
            within(total, proc_rx, tol),
            "{iface}: eBPF rx {total} vs /proc/net/dev rx_packets {proc_rx}"
        );
        // Per-queue rows sum to the interface total: on veth every skb's
        // queue is known (it is the sender's tx queue).
        assert_eq!(unrecorded, 0, "{iface}: every rx skb has a queue");
        assert_eq!(per_queue, total, "{iface}: rx queues sum to the total");
        // tx: eBPF tx equals /proc/net/dev tx_packets, and the rows sum to it.
        let proc_tx = proc_packets(&samples, iface, Dir::Tx);
        let (ebpf_tx, tx_rows, _) = ebpf_packets(&samples, iface, Dir::Tx);
        assert!(
            within(ebpf_tx, proc_tx, tol),
            "{iface}: eBPF tx {ebpf_tx} vs /proc/net/dev tx_packets {proc_tx}"
        );
        assert_eq!(tx_rows, ebpf_tx, "{iface}: tx queues sum to the total");

        // Softirq runs equal /proc/softirqs deltas up to the skew between the two reads.
        let proc_net_rx: u64 = samples
            .iter()
            .flat_map(|s| s.softirqs.iter())
            .map(|c| c.net_rx)
            .sum();
        let ebpf_net_rx: u64 = samples
            .iter()
            .flat_map(|s| s.softirq_time.iter())
            .map(|c| c.net_rx_count)
            .sum();
        assert!(proc_net_rx > 100, "NET_RX ran ({proc_net_rx})");
        assert!(
            within(ebpf_net_rx, proc_net_rx, 0.05),
            "{host:?}: eBPF NET_RX runs {ebpf_net_rx} vs /proc/softirqs {proc_net_rx}"
        );
        let ns: u64 = samples
            .iter()
            .flat_map(|s| s.softirq_time.iter())
            .map(|c| c.net_rx_ns)
            .sum();
        assert!(ns > 0, "NET_RX time measured");
    }
}

#[test]
fn the_default_set_samples_and_says_its_counts_are_estimates() {
    let _serial = serial();
    let mut pair = Pair::new();
    pair.start_agent();
    let log = pair.log_path("d.jsonl");
    let out = pair.run(&["-t", "3s", "-P", "2", "--log", log.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = Log::read(&log);
    let header = log.header().ebpf.clone().expect("the header reports eBPF");
    for s in [header.local, header.peer] {
        let s = s.expect("both hosts are live");
        assert_eq!(s.probes, ["netif_receive_skb", "net_dev_start_xmit"]);
        assert_eq!(s.sampled_pct, Some(25));
    }
    // The data's receiving interface: the estimate over the run lands near
    // /proc/net/dev's count. Each interval's window is its first quarter,
    // and a steady bulk transfer looks the same in every quarter; the
    // tolerance covers the start and the end of the transfer, where it is not steady.
    let samples = log.samples(HostRole::Peer);
    assert!(!samples.is_empty());
    for s in &samples {
        let share = s.ebpf_observed.expect("every interval says its share");
        assert!(share > 0.0 && share <= 1.0, "share {share}");
        assert!(
            s.softirq_time.is_empty(),
            "softirq timing is in the deep set"
        );
        assert!(
            s.queues.iter().all(|q| q.source != QueueSource::Ebpf),
            "sampled rows are not called exact"
        );
    }
    let proc_rx = proc_packets(&samples, "veth-b", Dir::Rx);
    let (total, rows, unrecorded) =
        ebpf_packets_of(&samples, "veth-b", Dir::Rx, QueueSource::EbpfSampled);
    assert!(proc_rx > 1000, "traffic flowed ({proc_rx} packets)");
    assert!(
        within(total, proc_rx, 0.25),
        "sampled eBPF rx {total} vs /proc/net/dev rx_packets {proc_rx}"
    );
    assert_eq!((rows, unrecorded), (total, 0), "rows sum to the matrix");
}

#[test]
fn an_unprivileged_run_continues_and_says_why_ebpf_is_off() {
    common::require_root();
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("u.jsonl");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", bin()])
        .args(["run", "-t", "1s", "--log", log.to_str().unwrap()])
        .env("HOME", "/tmp")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let why = "eBPF off: needs CAP_BPF and CAP_PERFMON (run as root)";
    assert!(stderr(&o).contains(why), "{}", stderr(&o));
    let log = Log::read(&log);
    let header = log.header();
    let ebpf = header.ebpf.as_ref().expect("the header reports eBPF");
    for s in [&ebpf.local, &ebpf.peer] {
        let s = s.as_ref().expect("both hosts are live");
        assert_eq!(s.off.as_deref(), Some(why));
        assert!(s.probes.is_empty());
    }
    let local = log.samples(HostRole::Local);
    assert!(!local.is_empty());
    for s in local {
        assert_eq!(
            s.ebpf.as_deref(),
            Some("eBPF off: needs CAP_BPF and CAP_PERFMON (run as root)")
        );
        assert!(s.probes.is_empty() && s.queue_cpus.is_empty() && s.softirq_time.is_empty());
    }
}

#[test]
fn on_the_local_pair_one_set_counts_for_both_ends() {
    common::require_root();
    let _serial = serial();
    let _turn = common::local_pair_turn();
    // Exact by design (the deep set counts every skb): `watch --local-pair` takes its first reading
    // while the link is quiet, the test then sends a fixed burst inside the
    // pair and stops; the last reading comes after the backlog has drained.
    // The deltas of all Samples add up to last minus first reading, for
    // eBPF and for /proc/net/dev alike, so both totals must be equal (a
    // reading taken while packets flow would skew them by the packets that
    // arrive between the two reads).
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lp.jsonl");
    let mut watch = Command::new(bin())
        .args([
            "watch",
            "--local-pair",
            "-t",
            "6s",
            "-i",
            "500ms",
            "--ebpf",
            "deep",
            "--log",
            log.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ns_a = format!("ws-a-{}", watch.id());
    let first_reading = std::time::Instant::now();
    let sent = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text
            .lines()
            .filter(|l| l.contains("\"type\":\"sample\""))
            .count()
            >= 2
        {
            break send_burst(&ns_a, 20_000);
        }
        if first_reading.elapsed() > std::time::Duration::from_secs(20) {
            let _ = watch.kill();
            panic!(
                "watch wrote no Samples: {}",
                stderr(&watch.wait_with_output().unwrap())
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let o = watch.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let log = Log::read(&log);
    let ebpf = log.header().ebpf.clone().expect("the header reports eBPF");
    let (local, peer) = (ebpf.local.unwrap(), ebpf.peer.unwrap());
    assert_eq!(local.off, None, "{local:?}");
    assert_eq!(local.ifaces, vec!["veth-a".to_string()]);
    assert_eq!(peer.ifaces, vec!["veth-b".to_string()]);
    assert_eq!(
        peer.probes, local.probes,
        "the peer's counts come from the same set"
    );
    assert!(local.probes.iter().any(|p| p == "netif_receive_skb"));
    // The agent attached nothing of its own: exactly one set is loaded on
    // this kernel, and each host's Samples carry only its own interface.
    for (host, mine, theirs) in [
        (HostRole::Local, "veth-a", "veth-b"),
        (HostRole::Peer, "veth-b", "veth-a"),
    ] {
        let samples = log.samples(host);
        assert!(samples
            .iter()
            .all(|s| s.queue_cpus.iter().all(|c| c.iface != theirs)));
        let (rx, rows, _) = ebpf_packets(&samples, mine, Dir::Rx);
        let proc_rx = proc_packets(&samples, mine, Dir::Rx);
        assert!(
            rx == proc_rx && rows == rx,
            "{mine}: eBPF rx {rx} (rows {rows}) vs /proc/net/dev {proc_rx}"
        );
        assert!(samples.iter().any(|s| !s.softirq_time.is_empty()));
    }
    let (b_rx, _, _) = ebpf_packets(&log.samples(HostRole::Peer), "veth-b", Dir::Rx);
    assert!(
        b_rx >= sent,
        "veth-b received {b_rx} of the {sent} datagrams sent"
    );
}

/// Send `n` UDP datagrams from inside namespace `ns` (the local pair's
/// controller side) to the agent's address, paced so that the backlog never
/// drops (a drop is counted by /proc/net/dev but never reaches the probes).
fn send_burst(ns: &str, n: u64) -> u64 {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        let f = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
        nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let sock = std::net::UdpSocket::bind("198.18.0.1:0").unwrap();
        for i in 0..n {
            // Port 9 (discard) has no listener: each datagram is received
            // and answered by a (rate-limited) ICMP port unreachable.
            sock.send_to(&[0u8; 64], "198.18.0.2:9").unwrap();
            if i % 200 == 199 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        n
    })
    .join()
    .unwrap()
}

//! eBPF probes during a real run over a namespace pair with a 4-queue veth:
//! their counts agree with the kernel's own counters, and an unprivileged
//! run carries on and says why eBPF is off.

mod common;

use common::{bin, stderr, Log, Pair};
use std::process::Command;
use wirescope::probe::counters::Dir;
use wirescope::probe::ebpf::{EbpfCounters, EbpfIface, IfaceKey};
use wirescope::probe::sample::{HostRole, QueueSource, Sample};

fn within(a: u64, b: u64, tol: f64) -> bool {
    let (a, b) = (a as f64, b as f64);
    (a - b).abs() <= tol * b.max(1.0)
}

/// eBPF rx packets of `iface` over the samples: (matrix total, per-queue total, unrecorded).
fn ebpf_rx(samples: &[&Sample], iface: &str) -> (u64, u64, u64) {
    let cells = samples
        .iter()
        .flat_map(|s| s.queue_cpus.iter())
        .filter(|c| c.iface == iface && c.dir == Dir::Rx);
    let (mut total, mut unrecorded) = (0, 0);
    for c in cells {
        total += c.packets;
        if c.queue.is_none() {
            unrecorded += c.packets;
        }
    }
    let ifaces = [EbpfIface {
        name: iface.into(),
        key: IfaceKey::default(),
        rx_queues: 4,
        tx_queues: 4,
    }];
    let per_queue = samples
        .iter()
        .map(|s| EbpfCounters {
            softirq: Vec::new(),
            queue_cpus: s.queue_cpus.clone(),
        })
        .flat_map(|c| c.queue_samples(&ifaces, 1.0))
        .filter(|q| q.dir == Dir::Rx && q.source == QueueSource::Ebpf)
        .filter_map(|q| q.packets)
        .sum();
    (total, per_queue, unrecorded)
}

#[test]
fn ebpf_counts_match_proc_during_a_run() {
    let mut pair = Pair::new();
    pair.start_agent();
    let log = pair.log_path("e.jsonl");
    let out = pair.run(&["-t", "2s", "-P", "2", "--log", log.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = Log::read(&log);
    for (host, iface) in [(HostRole::Peer, "veth-b"), (HostRole::Local, "veth-a")] {
        let samples = log.samples(host);
        assert!(!samples.is_empty());
        for s in &samples {
            assert_eq!(s.ebpf.as_deref(), Some("on"), "{host:?}: eBPF status");
            assert!(s.probes.iter().any(|p| p == "netif_receive_skb"));
        }
        // Packets: the receiving interface's eBPF count equals /proc/net/dev's.
        let proc_rx: u64 = samples
            .iter()
            .flat_map(|s| s.ifaces.iter())
            .filter(|i| i.name == iface)
            .map(|i| i.delta.rx_packets)
            .sum();
        let (total, per_queue, unrecorded) = ebpf_rx(&samples, iface);
        assert!(
            proc_rx > 1000,
            "{iface}: traffic flowed ({proc_rx} packets)"
        );
        assert!(
            within(total, proc_rx, 0.001),
            "{iface}: eBPF rx {total} vs /proc/net/dev rx_packets {proc_rx}"
        );
        // Per-queue counts sum to the interface total (plus skbs with no recorded rx queue).
        assert_eq!(
            per_queue + unrecorded,
            total,
            "{iface}: queues sum to total"
        );
        // tx on the sending side: eBPF tx equals /proc/net/dev tx_packets.
        let proc_tx: u64 = samples
            .iter()
            .flat_map(|s| s.ifaces.iter())
            .filter(|i| i.name == iface)
            .map(|i| i.delta.tx_packets)
            .sum();
        let ebpf_tx: u64 = samples
            .iter()
            .flat_map(|s| s.queue_cpus.iter())
            .filter(|c| c.iface == iface && c.dir == Dir::Tx)
            .map(|c| c.packets)
            .sum();
        assert!(
            within(ebpf_tx, proc_tx, 0.001),
            "{iface}: eBPF tx {ebpf_tx} vs /proc/net/dev tx_packets {proc_tx}"
        );

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
fn an_unprivileged_run_continues_and_says_why_ebpf_is_off() {
    common::require_root();
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
    let log = Log::read(&log);
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

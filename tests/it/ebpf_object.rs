//! The committed eBPF object: matches its sources, loads on this kernel,
//! and leaves nothing behind when dropped.

use wirescope::probe::ebpf::{source_hash, Ebpf, EbpfMode, OBJECT_SOURCE_HASH};

#[test]
fn the_committed_object_matches_its_sources() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ebpf");
    let hash = source_hash(&dir).expect("read ebpf/ sources");
    assert_eq!(
        OBJECT_SOURCE_HASH.trim(),
        hash,
        "ebpf/wirescope.bpf.o is stale: its sources changed; run `cargo xtask build-ebpf` and commit the object"
    );
}

#[test]
fn both_sets_load_attach_and_unload_on_this_kernel() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root to load eBPF (CI runs as root)"
    );
    for (mode, programs) in [(EbpfMode::Deep, 5), (EbpfMode::Default, 2)] {
        let mut e = Ebpf::load(mode, &[]).unwrap_or_else(|err| panic!("{mode:?}: {err}"));
        let ids: Vec<u32> = e.program_stats().iter().map(|p| p.1).collect();
        assert_eq!(ids.len(), programs, "{mode:?}: {:?}", e.program_stats());
        assert_eq!(e.probes().len(), programs);
        match mode {
            EbpfMode::Deep => deep_times_every_vector(&mut e),
            _ => default_samples_the_packet_probes(&mut e),
        }
        drop(e);
        wait_unloaded(&ids);
    }
}

/// Deep: exact counts (no sampling share), and softirq time of every
/// vector: some softirq (timers, RCU) runs on any host, and a datagram over
/// loopback raises NET_RX; read until the probes timed a vector other than NET_*.
fn deep_times_every_vector(e: &mut Ebpf) {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let t = std::time::Instant::now();
    let mut c = e.read().expect("read maps");
    assert_eq!(c.observed, None, "deep counts every skb");
    loop {
        let other: u64 = c
            .softirq
            .iter()
            .map(|s| s.all_ns - s.net_rx_ns - s.net_tx_ns)
            .sum();
        if other > 0 {
            break;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "deep: no vector other than NET_* timed in 10 s: {:?}",
            c.softirq
        );
        tx.send_to(b"softirq", rx.local_addr().unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let more = e.read().expect("read maps");
        c.softirq.extend(more.softirq);
        c.queue_cpus.extend(more.queue_cpus);
    }
    assert!(c.queue_cpus.is_empty(), "no interface is watched");
}

/// Default: no softirq timing, and the packet probes are attached for a
/// share of each span only. The first window opens at load and closes
/// after a quarter of a second; a read well after that sees it covered part
/// of the span, not all of it (the gate thread runs at real-time priority,
/// so it closes the window on time on a busy host too).
fn default_samples_the_packet_probes(e: &mut Ebpf) {
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let c = e.read().expect("read maps");
    assert!(c.softirq.is_empty() && c.napi.is_empty(), "{c:?}");
    let share = c.observed.expect("the default set is sampled");
    assert!(
        share > 0.0 && share < 0.5,
        "the first window (250 ms) covered {share} of a 1.5 s span"
    );
    assert!(c.queue_cpus.is_empty(), "no interface is watched");
    // The read opened the next window: the next read sees it too.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let c = e.read().expect("read maps");
    assert!(c.observed.is_some_and(|s| s > 0.0), "{c:?}");
}

/// The kernel frees programs after an RCU grace period: poll briefly.
fn wait_unloaded(ids: &[u32]) {
    let t = std::time::Instant::now();
    loop {
        let live: Vec<u32> = aya::programs::loaded_programs()
            .filter_map(|p| p.ok().map(|p| p.id()))
            .collect();
        let left: Vec<u32> = ids.iter().copied().filter(|i| live.contains(i)).collect();
        if left.is_empty() {
            break;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "programs {left:?} still loaded 5 s after drop"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

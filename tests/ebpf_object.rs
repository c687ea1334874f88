//! The committed eBPF object: matches its sources, loads on this kernel,
//! and leaves nothing behind when dropped.

use wirescope::probe::ebpf::{source_hash, Ebpf, OBJECT_SOURCE_HASH};

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
fn the_object_loads_attaches_and_unloads_on_this_kernel() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root to load eBPF (CI runs as root)"
    );
    let mut e = Ebpf::load(&[]).unwrap_or_else(|err| panic!("{err}"));
    let ids: Vec<u32> = e.program_stats().iter().map(|p| p.1).collect();
    assert_eq!(ids.len(), 4, "all programs loaded: {:?}", e.program_stats());
    // Softirqs happen all the time; a short wait shows the probes run.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let c = e.read().expect("read maps");
    assert!(!c.softirq.is_empty(), "softirq probes counted nothing");
    assert!(c.queue_cpus.is_empty(), "no interface is watched");
    drop(e);
    // The kernel frees programs after an RCU grace period: poll briefly.
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

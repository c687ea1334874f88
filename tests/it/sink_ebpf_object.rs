//! The committed XDP object of the packet sink matches its sources (the
//! probes' object is checked by `ebpf_object`).

use wirescope::traffic::sink::xdp::{source_hash, OBJECT_SOURCE_HASH};

#[test]
fn the_committed_sink_object_matches_its_sources() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ebpf");
    let hash = source_hash(&dir).expect("read ebpf/ sources");
    assert_eq!(
        OBJECT_SOURCE_HASH.trim(),
        hash,
        "ebpf/sink.bpf.o is stale: its sources changed; run `cargo xtask build-ebpf` and commit the object"
    );
}

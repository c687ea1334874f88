//! What the eBPF objects of the probes (`probe::ebpf`) and of the packet
//! engine (`traffic::sink::xdp`) share: how clang compiles them and how their
//! sources are hashed, so a committed object that no longer matches its
//! sources is caught by a test. Build plumbing only; nothing is loaded here.

use sha2::{Digest, Sha256};
use std::path::Path;

mod clang;
pub use clang::CLANG_ARGS;

/// Hash of `sources` (relative to `dir`) and the clang flags, hex: the
/// scheme of every committed eBPF object's `.sha256`.
pub fn hash_sources(dir: &Path, sources: &[&str]) -> std::io::Result<String> {
    let mut h = Sha256::new();
    for name in sources {
        let text = std::fs::read(dir.join(name))?;
        h.update(name.as_bytes());
        h.update([0]);
        h.update((text.len() as u64).to_le_bytes());
        h.update(&text);
    }
    h.update(CLANG_ARGS.join(" ").as_bytes());
    Ok(hex::encode(h.finalize()))
}

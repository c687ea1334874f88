//! `cargo xtask build-ebpf`: compile `ebpf/wirescope.bpf.c` (the probes) and
//! `ebpf/sink.bpf.c` (the packet sink's XDP programs) with clang and record
//! the hash of each object's sources next to it.
//!
//! The object is committed, so a machine without clang still builds
//! wirescope; `tests/it/ebpf_object.rs` fails when the committed object no
//! longer matches its sources. The source list, the flags and the hash
//! function are the crate's own (`wirescope::probe::ebpf`), so this task and
//! that test cannot disagree.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;
use wirescope::probe::ebpf::{source_hash, CLANG_ARGS, MAIN_SOURCE, OBJECT_NAME};
use wirescope::traffic::sink::xdp as sink_xdp;

type HashFn = fn(&Path) -> std::io::Result<String>;

/// Compile both objects and write each `.o` and its `.sha256`.
pub fn build() -> Result<()> {
    let objects: [(&str, &str, HashFn); 2] = [
        (MAIN_SOURCE, OBJECT_NAME, source_hash),
        (
            sink_xdp::MAIN_SOURCE,
            sink_xdp::OBJECT_NAME,
            sink_xdp::source_hash,
        ),
    ];
    for (main, object, hash) in objects {
        build_one(main, object, hash)?;
    }
    Ok(())
}

fn build_one(main_source: &str, object_name: &str, hash_fn: HashFn) -> Result<()> {
    let dir = crate::workspace_root().join("ebpf");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // Relative paths from ebpf/ keep the build directory out of the inputs.
    let status = Command::new(&clang)
        .current_dir(&dir)
        .args(CLANG_ARGS)
        .args([main_source, "-o", object_name])
        .status()
        .with_context(|| {
            format!("running {clang} (install it: apt-get install clang, or set CLANG)")
        })?;
    if !status.success() {
        bail!("{clang} failed compiling ebpf/{main_source}: {status}");
    }
    let hash = hash_fn(&dir).context("hashing ebpf/ sources")?;
    let hash_file = dir.join(format!("{object_name}.sha256"));
    std::fs::write(&hash_file, format!("{hash}\n"))
        .with_context(|| format!("writing {}", hash_file.display()))?;
    println!("wrote ebpf/{object_name} (sources {hash})");
    Ok(())
}

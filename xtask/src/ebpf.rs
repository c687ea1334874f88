//! `cargo xtask build-ebpf`: compile `ebpf/wirescope.bpf.c` with clang and
//! record the hash of its sources next to the object.
//!
//! The object is committed, so a machine without clang still builds
//! wirescope; `tests/ebpf_object.rs` fails when the committed object no
//! longer matches its sources. The source list, the flags and the hash
//! function are the crate's own (`wirescope::probe::ebpf`), so this task and
//! that test cannot disagree.

use anyhow::{bail, Context, Result};
use std::process::Command;
use wirescope::probe::ebpf::{source_hash, CLANG_ARGS, MAIN_SOURCE, OBJECT_NAME};

/// Compile the programs and write `ebpf/wirescope.bpf.o` and its `.sha256`.
pub fn build() -> Result<()> {
    let dir = crate::workspace_root().join("ebpf");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // Relative paths from ebpf/ keep the build directory out of the inputs.
    let status = Command::new(&clang)
        .current_dir(&dir)
        .args(CLANG_ARGS)
        .args([MAIN_SOURCE, "-o", OBJECT_NAME])
        .status()
        .with_context(|| {
            format!("running {clang} (install it: apt-get install clang, or set CLANG)")
        })?;
    if !status.success() {
        bail!("{clang} failed compiling ebpf/{MAIN_SOURCE}: {status}");
    }
    let hash = source_hash(&dir).context("hashing ebpf/ sources")?;
    let hash_file = dir.join(format!("{OBJECT_NAME}.sha256"));
    std::fs::write(&hash_file, format!("{hash}\n"))
        .with_context(|| format!("writing {}", hash_file.display()))?;
    println!("wrote ebpf/{OBJECT_NAME} (sources {hash})");
    Ok(())
}

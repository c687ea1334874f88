//! Builds the eBPF object the crate embeds: with clang when it is installed
//! (`$CLANG`, else `clang` on PATH), from `ebpf/wirescope.bpf.c`; otherwise
//! the committed `ebpf/wirescope.bpf.o` is used as is. `tests/ebpf_object.rs`
//! fails when the committed object is stale, so both paths embed the same
//! program. `WIRESCOPE_EBPF_PREBUILT=1` forces the committed object.

use std::path::PathBuf;
use std::process::Command;

include!("src/probe/ebpf/clang.rs");

fn main() {
    for f in [
        "ebpf/wirescope.bpf.c",
        "ebpf/wirescope.h",
        "ebpf/wirescope.bpf.o",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    println!("cargo:rerun-if-changed=src/probe/ebpf/clang.rs");
    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rerun-if-env-changed=WIRESCOPE_EBPF_PREBUILT");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("wirescope.bpf.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let prebuilt = std::env::var_os("WIRESCOPE_EBPF_PREBUILT").is_some_and(|v| v == "1");
    let have_clang = !prebuilt
        && Command::new(&clang)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    if have_clang {
        let o = Command::new(&clang)
            .current_dir("ebpf")
            .args(CLANG_ARGS)
            .arg("wirescope.bpf.c")
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap_or_else(|e| panic!("running {clang}: {e}"));
        if !o.status.success() {
            panic!(
                "{clang} failed compiling ebpf/wirescope.bpf.c (set WIRESCOPE_EBPF_PREBUILT=1 to use the committed object):\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    } else {
        std::fs::copy("ebpf/wirescope.bpf.o", &out)
            .unwrap_or_else(|e| panic!("copying the committed ebpf/wirescope.bpf.o: {e}"));
    }
}

//! Builds the eBPF object the crate embeds: with clang when it is installed
//! (`$CLANG`, else `clang` on PATH), from `ebpf/wirescope.bpf.c`; otherwise
//! the committed `ebpf/wirescope.bpf.o` is used as is. `tests/ebpf_object.rs`
//! fails when the committed object is stale, so both paths embed the same
//! program. `WIRESCOPE_EBPF_PREBUILT=1` forces the committed object.
//! The packet sink's XDP object (`ebpf/sink.bpf.c` → `sink.bpf.o`) is built
//! the same way by [`sink_xdp_object`], checked by `tests/sink_ebpf_object.rs`.

use std::path::PathBuf;
use std::process::Command;

include!("src/traffic/bpf/clang.rs");

fn main() {
    sink_xdp_object();
    for f in [
        "ebpf/wirescope.bpf.c",
        "ebpf/wirescope.h",
        "ebpf/wirescope.bpf.o",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    println!("cargo:rerun-if-changed=src/traffic/bpf/clang.rs");
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

/// The packet sink's XDP programs (`src/traffic/sink/xdp.rs`): compiled from
/// `ebpf/sink.bpf.c` with the same clang and flags as the probes, or the
/// committed `ebpf/sink.bpf.o` copied when clang is missing or
/// `WIRESCOPE_EBPF_PREBUILT=1`. A separate object, because it is loaded on
/// its own (on the sink's interface, only while a sink test runs).
fn sink_xdp_object() {
    for f in ["ebpf/sink.bpf.c", "ebpf/sink.h", "ebpf/sink.bpf.o"] {
        println!("cargo:rerun-if-changed={f}");
    }
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("sink.bpf.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let prebuilt = std::env::var_os("WIRESCOPE_EBPF_PREBUILT").is_some_and(|v| v == "1");
    let have_clang = !prebuilt
        && Command::new(&clang)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    if !have_clang {
        std::fs::copy("ebpf/sink.bpf.o", &out)
            .unwrap_or_else(|e| panic!("copying the committed ebpf/sink.bpf.o: {e}"));
        return;
    }
    let o = Command::new(&clang)
        .current_dir("ebpf")
        .args(CLANG_ARGS)
        .arg("sink.bpf.c")
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap_or_else(|e| panic!("running {clang}: {e}"));
    if !o.status.success() {
        panic!(
            "{clang} failed compiling ebpf/sink.bpf.c (set WIRESCOPE_EBPF_PREBUILT=1 to use the committed object):\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

// Shared by the crate and `build.rs` (through `include!`): how the eBPF
// object is compiled. Part of the sources' hash, so changing a flag makes the
// committed object stale.

/// clang flags for `ebpf/wirescope.bpf.c` (followed by the source, `-o` and the object).
pub const CLANG_ARGS: [&str; 7] = ["-O2", "-g", "-target", "bpf", "-Wall", "-Werror", "-c"];

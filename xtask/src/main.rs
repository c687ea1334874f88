//! `cargo xtask`: project chores that are not part of the `wirescope` binary.
//!
//! * `dist` writes shell completions and man pages generated from the real CLI
//!   definition, so they cannot drift from `wirescope --help`.
//! * `deb` builds the Debian package (binary, man pages, completions, the
//!   systemd unit) with `cargo deb`.
//! * `build-ebpf` compiles `ebpf/` with clang and records the sources' hash.
//! * `bench tcp|rr` runs wirescope and the reference tool (iperf3, iperf2,
//!   sockperf) side by side, alternating, on a throwaway namespace pair, and
//!   prints medians and ratios; `bench ebpf` prices the eBPF probe sets
//!   (throughput with and without them, per-program kernel run time). Benchmarks report numbers; they never pass or
//!   fail on them.
//!
//! This crate only orchestrates external commands; it must not reimplement
//! anything the `wirescope` binary does.

mod bench;
mod cmd;
mod deb;
mod dist;
mod ebpf;
mod netns;

use clap::{Parser, Subcommand};

/// Counts each thread's heap, for `bench scale`'s memory figures.
#[global_allocator]
static ALLOC: bench::alloc::Counting = bench::alloc::Counting;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// wirescope project tasks.
#[derive(Debug, Parser)]
#[command(name = "xtask", bin_name = "cargo xtask", about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Generate shell completions (bash, zsh, fish) and man pages.
    Dist {
        /// Output directory (default: `<workspace>/target/dist`).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Build the Debian package: release build, man pages and completions,
    /// then `cargo deb --no-build` (needs cargo-deb).
    Deb {
        /// Cargo profile to build and package (`release`; `dev` packages an
        /// unoptimized build, as CI does to save a release build).
        #[arg(long, value_name = "NAME", default_value = "release")]
        profile: String,
    },
    /// Compile the eBPF programs (clang) and record the hash of their sources.
    BuildEbpf,
    /// Benchmark wirescope against reference tools on a veth pair (root).
    Bench {
        #[command(subcommand)]
        which: bench::BenchCmd,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Dist { out } => dist::run(&out.unwrap_or_else(|| target_dir().join("dist"))),
        Task::Deb { profile } => deb::run(&profile),
        Task::Bench { which } => bench::run(which),
        Task::BuildEbpf => ebpf::build(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` prints the whole context chain on one line, without a backtrace.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (the parent of this crate's manifest directory).
pub fn workspace_root() -> &'static Path {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    // xtask/ always sits directly under the workspace root (DESIGN.md layout).
    manifest.parent().unwrap_or(manifest)
}

/// Cargo's target directory: `$CARGO_TARGET_DIR`, else `<workspace>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target"),
    }
}

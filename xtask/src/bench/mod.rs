//! `cargo xtask bench`: wirescope next to reference tools, same run, same
//! namespace pair, alternating runs so drift hits both tools alike.
//!
//! Owns the lab (namespace pair, servers in side B, release binary, token) and
//! the common steps; `tcp`, `rr` and `sink` own their measurement loops and
//! tables.
//! Results are printed, never asserted: this is a benchmark, not a test.

pub mod alloc;
mod ebpf;
mod fleet;
mod grpc;
mod lab;
mod observer;
mod parse;
mod rr;
mod sampler;
mod scale;
mod scale_log;
mod sink;
mod stats;
mod table;
mod tcp;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use std::time::Duration;

pub use lab::Lab;

/// Which benchmark.
#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// Bulk TCP throughput: wirescope stream vs iperf3 (and iperf2 if installed).
    Tcp(tcp::TcpArgs),
    /// TCP request/response latency and rate: wirescope rr vs sockperf ping-pong.
    Rr(rr::RrArgs),
    /// Cost of the eBPF probe sets: throughput with --ebpf off/default/deep, per-program run time, observer share of the busy CPU.
    Ebpf(ebpf::EbpfArgs),
    /// gRPC: wirescope's client and server vs ghz and grpc-go's benchmark server (req/s, memory).
    Grpc(grpc::GrpcArgs),
    /// Packet engine: generator vs trafgen (64 B), sink efficiency per mode, frame-size and cores sweeps.
    Sink(sink::SinkArgs),
    /// Sampler CPU per interval on this host (`watch --json`'s sampler_cpu_us); no root needed.
    Sampler(sampler::SamplerArgs),
    /// A fleet of agents in namespaces: all-pairs and ring wall time against the tests' sum (overhead per round), coordinator CPU and memory.
    Fleet(fleet::FleetArgs),
    /// A big host (synthetic: 256 CPUs, 8 NICs x 64 queues): sampler, rules, log bytes and TUI frames per interval; no root needed.
    Scale(scale::ScaleArgs),
}

/// Options every benchmark has.
#[derive(Debug, Args, Clone, Copy)]
pub struct Common {
    /// Runs per tool and point (alternating between tools).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Length of each run, whole seconds (e.g. 5s, 10).
    #[arg(long, short = 't', default_value = "5s", value_parser = parse_whole_secs)]
    pub time: u64,
}

/// Pause between runs so the previous run's server side has settled.
pub const SETTLE: Duration = Duration::from_secs(1);

/// Run one benchmark: check privileges, build, set up the lab, measure.
pub fn run(which: BenchCmd) -> Result<()> {
    if let BenchCmd::Sampler(args) = &which {
        // This host as it is: no namespaces, no root.
        return sampler::run(&lab::build_release()?, args);
    }
    if let BenchCmd::Scale(args) = &which {
        // In process, on a generated host tree: no namespaces, no root.
        return scale::run(args);
    }
    require_root()?;
    let wirescope = lab::build_release()?;
    if let BenchCmd::Fleet(args) = &which {
        // Its own namespaces and agents: no lab needed.
        return fleet::run(&wirescope, args);
    }
    if let BenchCmd::Ebpf(args) = &which {
        // The local pair of `wirescope run` itself: no lab needed.
        return ebpf::run(&wirescope, args);
    }
    if let BenchCmd::Grpc(args) = &which {
        // Its own servers on loopback and/or its own namespace pair: no agent.
        return grpc::run(&wirescope, args);
    }
    let mut lab = Lab::start(wirescope)?;
    match which {
        BenchCmd::Tcp(args) => tcp::run(&mut lab, &args),
        BenchCmd::Rr(args) => rr::run(&mut lab, &args),
        BenchCmd::Sink(args) => sink::run(&lab, &args),
        BenchCmd::Ebpf(_)
        | BenchCmd::Fleet(_)
        | BenchCmd::Grpc(_)
        | BenchCmd::Sampler(_)
        | BenchCmd::Scale(_) => Ok(()),
    }
    // `lab` drops here (also on `?` above): servers killed, namespaces removed.
}

fn require_root() -> Result<()> {
    use procfs_core::FromRead;
    let status = std::fs::read("/proc/self/status")
        .context("reading /proc/self/status to check for root")?;
    let euid = procfs_core::process::Status::from_read(status.as_slice())
        .context("parsing /proc/self/status")?
        .euid;
    if euid != 0 {
        bail!("cargo xtask bench needs root: it creates network namespaces and a veth pair (effective uid is {euid}); run it with sudo -E");
    }
    Ok(())
}

fn parse_whole_secs(s: &str) -> Result<u64, String> {
    let d = wirescope::units::parse_duration(s).map_err(|e| e.to_string())?;
    if d.subsec_nanos() != 0 || d.as_secs() == 0 {
        return Err(format!("'{s}' must be a whole number of seconds, at least 1 (iperf3 and sockperf take seconds)"));
    }
    Ok(d.as_secs())
}

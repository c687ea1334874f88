//! `cargo xtask bench sampler`: what the sampler costs per interval on this
//! host. Runs the release binary's `wirescope watch --json --ebpf off` (the
//! live host, the default route's interface unless `--iface` says another,
//! no traffic) at a short interval, and reads each Sample's
//! `sampler_cpu_us` — the sampler thread's own CPU clock around one
//! `Sampler::sample` (every /proc and sysfs read and parse, the ethtool
//! ioctl, and every tenth interval the host facts). Each round is one run;
//! the table gives the median and the mean (which carries the facts
//! re-reads) of every round, and their medians. No root needed.

use super::stats::{list, median};
use super::Common;
use crate::cmd;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::Path;
use std::time::Duration;

/// `bench sampler` options.
#[derive(Debug, Args)]
pub struct SamplerArgs {
    #[command(flatten)]
    common: Common,
    /// Sampling period of the measured runs.
    #[arg(long, short = 'i', default_value = "100ms", value_parser = wirescope::units::parse_duration)]
    interval: Duration,
    /// Interfaces to watch (repeatable; default: the default route's).
    #[arg(long = "iface", value_name = "IF")]
    ifaces: Vec<String>,
}

/// Run the measurement with the release binary `wirescope`.
pub fn run(wirescope: &Path, args: &SamplerArgs) -> Result<()> {
    let mut medians = Vec::new();
    let mut means = Vec::new();
    let mut counts = Vec::new();
    for round in 1..=args.common.rounds {
        let costs = one_run(wirescope, args)?;
        if costs.is_empty() {
            bail!("round {round}: `wirescope watch --json` printed no sample record");
        }
        medians.push(median(&costs));
        means.push(costs.iter().sum::<f64>() / costs.len() as f64);
        counts.push(costs.len() as f64);
    }
    println!(
        "sampler CPU per interval (µs, thread CPU clock; interval {:?}, {} s per round, eBPF off)",
        args.interval, args.common.time
    );
    println!("  samples per round:  {}", list(&counts, 0));
    println!(
        "  median per round:   {}   → median {:.0} µs",
        list(&medians, 0),
        median(&medians)
    );
    println!(
        "  mean per round:     {}   → median {:.0} µs",
        list(&means, 0),
        median(&means)
    );
    Ok(())
}

/// One `watch` run: `sampler_cpu_us` of every Sample but the first (which
/// follows the point's start).
fn one_run(wirescope: &Path, args: &SamplerArgs) -> Result<Vec<f64>> {
    let mut c = std::process::Command::new(wirescope);
    c.args(["watch", "--json", "--ebpf", "off", "-i"])
        .arg(format!("{}ms", args.interval.as_millis().max(1)))
        .args(["-t", &format!("{}s", args.common.time)]);
    for i in &args.ifaces {
        c.args(["--iface", i]);
    }
    let out = cmd::output(&mut c)?;
    let mut costs = Vec::new();
    for line in out.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("not JSON: {line}"))?;
        if v["type"] != "sample" || v["index"].as_u64() == Some(0) {
            continue;
        }
        let us = v["sampler_cpu_us"]
            .as_f64()
            .with_context(|| format!("a sample record without sampler_cpu_us: {line}"))?;
        costs.push(us);
    }
    Ok(costs)
}

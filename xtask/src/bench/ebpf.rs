//! `cargo xtask bench ebpf`: what the eBPF probes cost. A 2-stream TCP test on
//! the embedded local pair (its veth is the default path; one probe set on
//! this kernel counts for both ends) runs with `--ebpf off`, `default` and
//! `deep`, alternating, and the table gives each set's median throughput
//! against `off`. While the probes run, the kernel's per-program statistics
//! are on (`aya::sys::enable_stats`), and each program's run count and run
//! time are read from the kernel just before the test ends: ns per run and
//! the share of one CPU it took.
//!
//! The statistics add their own clock reads to every run, so those rounds
//! are kept out of the throughput medians: stats rounds are extra rounds.

use super::stats::{list, median};
use super::{table, Common, SETTLE};
use crate::cmd;
use anyhow::{Context, Result};
use clap::Args;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// `bench ebpf` options.
#[derive(Debug, Args)]
pub struct EbpfArgs {
    #[command(flatten)]
    common: Common,
    /// Parallel streams of the test.
    #[arg(long, short = 'P', default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=128))]
    streams: u32,
}

const SETS: [&str; 3] = ["off", "default", "deep"];

/// One program's kernel statistics at the end of a stats round.
#[derive(Debug, Clone, Copy, Default)]
struct ProgStats {
    runs: u64,
    run_time: Duration,
}

/// Run the comparison and print the tables.
pub fn run(wirescope: &Path, args: &EbpfArgs) -> Result<()> {
    let c = args.common;
    let mut gbps: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for round in 1..=c.rounds {
        for set in SETS {
            let bps = throughput(wirescope, set, args.streams, c.time)?;
            eprintln!(
                "xtask: round {round}/{}  --ebpf {set:<7}  {:.2} Gbit/s",
                c.rounds,
                bps / 1e9
            );
            gbps.entry(set).or_default().push(bps / 1e9);
            std::thread::sleep(SETTLE);
        }
    }
    let mut stats = BTreeMap::new();
    for set in ["default", "deep"] {
        let (progs, secs) = with_stats(wirescope, set, args.streams, c.time)?;
        stats.insert(set, (progs, secs));
        std::thread::sleep(SETTLE);
    }
    print_report(wirescope, args, &gbps, &stats);
    Ok(())
}

fn command(wirescope: &Path, set: &str, streams: u32, secs: u64) -> std::process::Command {
    let (n, t) = (streams.to_string(), format!("{secs}s"));
    cmd::command(
        &wirescope.to_string_lossy(),
        ["run", "-P", &n, "-t", &t, "--ebpf", set, "--json"],
    )
}

fn throughput(wirescope: &Path, set: &str, streams: u32, secs: u64) -> Result<f64> {
    let mut run = command(wirescope, set, streams, secs);
    let what = cmd::describe(&run);
    let json = cmd::output(&mut run)?;
    Ok(super::parse::wirescope_summary(&json)
        .with_context(|| format!("reading the summary of `{what}`"))?
        .throughput_bps)
}

/// One run with kernel statistics on; the last reading of every `ws_*`
/// program before it unloads, and the seconds between the first and last reading.
fn with_stats(
    wirescope: &Path,
    set: &str,
    streams: u32,
    secs: u64,
) -> Result<(BTreeMap<String, ProgStats>, f64)> {
    let _stats = aya::sys::enable_stats(aya::sys::Stats::RunTime)
        .context("enabling BPF run-time statistics (needs CAP_SYS_ADMIN)")?;
    let mut child = command(wirescope, set, streams, secs)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("starting wirescope run")?;
    let mut first: BTreeMap<u32, (String, ProgStats, Instant)> = BTreeMap::new();
    let mut last: BTreeMap<u32, (ProgStats, Instant)> = BTreeMap::new();
    while child.try_wait()?.is_none() {
        for p in aya::programs::loaded_programs().flatten() {
            let Some(name) = p.name_as_str().filter(|n| n.starts_with("ws_")) else {
                continue;
            };
            let s = ProgStats {
                runs: p.run_count(),
                run_time: p.run_time(),
            };
            let now = Instant::now();
            first
                .entry(p.id())
                .or_insert_with(|| (name.to_string(), s, now));
            last.insert(p.id(), (s, now));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut out = BTreeMap::new();
    let mut secs_seen: f64 = 0.0;
    for (id, (name, s0, t0)) in first {
        let Some((s1, t1)) = last.get(&id) else {
            continue;
        };
        let e = out.entry(name).or_insert_with(ProgStats::default);
        e.runs += s1.runs - s0.runs;
        e.run_time += s1.run_time.saturating_sub(s0.run_time);
        secs_seen = secs_seen.max(t1.duration_since(t0).as_secs_f64());
    }
    Ok((out, secs_seen))
}

type StatsBySet<'a> = BTreeMap<&'a str, (BTreeMap<String, ProgStats>, f64)>;

fn print_report(
    wirescope: &Path,
    args: &EbpfArgs,
    gbps: &BTreeMap<&str, Vec<f64>>,
    stats: &StatsBySet,
) {
    let c = args.common;
    println!("== bench ebpf: cost of the eBPF probe sets ==");
    println!(
        "pair:    wirescope's local pair ({}; one set counts for both ends)",
        wirescope.display()
    );
    println!(
        "runs:    {} round(s) x {} s of `wirescope run -P {}` per set, alternating off -> default -> deep",
        c.rounds, c.time, args.streams
    );
    println!("cost = 1 - median(set) / median(off)\n");
    let off = median(gbps.get("off").map(Vec::as_slice).unwrap_or(&[]));
    let rows: Vec<Vec<String>> = SETS
        .iter()
        .map(|set| {
            let v = gbps.get(set).map(Vec::as_slice).unwrap_or(&[]);
            let m = median(v);
            vec![
                set.to_string(),
                format!("{m:.2}"),
                if *set == "off" {
                    "-".into()
                } else {
                    format!("{:.1} %", (1.0 - m / off) * 100.0)
                },
                list(v, 2),
            ]
        })
        .collect();
    print!(
        "{}",
        table::render(&["--ebpf", "median Gbit/s", "cost", "rounds Gbit/s"], &rows)
    );
    println!("\nper-program kernel statistics (one extra run per set with BPF_ENABLE_STATS; its throughput is not counted above):");
    let mut rows = Vec::new();
    for (set, (progs, secs)) in stats {
        for (name, s) in progs {
            let ns = s.run_time.as_nanos() as f64;
            rows.push(vec![
                set.to_string(),
                name.clone(),
                format!("{:.0}", s.runs as f64 / secs.max(1e-9)),
                format!("{:.1}", ns / (s.runs.max(1) as f64)),
                format!("{:.2} %", ns / 1e9 / secs.max(1e-9) * 100.0),
            ]);
        }
    }
    print!(
        "{}",
        table::render(
            &[
                "--ebpf",
                "program",
                "runs/s",
                "ns/run",
                "CPU (% of one core)"
            ],
            &rows
        )
    );
}

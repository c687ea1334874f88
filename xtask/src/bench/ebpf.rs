//! `cargo xtask bench ebpf`: what the eBPF probes cost. A 2-stream TCP test on
//! the embedded local pair (its veth is the default path; one probe set on
//! this kernel counts for both ends) runs with `--ebpf off`, `default` and
//! `deep`, alternating (the order reversed every other round), and the table
//! gives each set's median throughput against `off`. Then stats rounds,
//! alternating the same way: the kernel's per-program statistics are on
//! (`aya::sys::enable_stats`), each program's run count and run time are
//! read from the kernel every 100 ms until the test ends (ns per run and the
//! share of one CPU it took), and so are the CPU time of wirescope's own
//! non-engine threads (sampler, agent, runtimes, eBPF gate;
//! /proc/PID/task/TID/schedstat) and the host's busy time (/proc/stat). The
//! observer's cost is their sum as a share of the busy CPU: the figure
//! issue 16 bounds at 1 % for the default set.
//!
//! The statistics add their own clock reads to every run, so those rounds
//! are kept out of the throughput medians: stats rounds are extra rounds.

use super::observer;
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
    /// Rounds with BPF run-time statistics on, per set (medians are reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    stats_rounds: u32,
}

const SETS: [&str; 3] = ["off", "default", "deep"];

/// The sets in round `round`'s order: odd rounds forward, even rounds
/// backward (off, default, deep, deep, default, off, ...), so a drift or a
/// set's after-effect on the next run falls on every set alike.
fn order(round: u32) -> Vec<&'static str> {
    let mut v = SETS.to_vec();
    if round.is_multiple_of(2) {
        v.reverse();
    }
    v
}

/// One program's kernel statistics at the end of a stats round.
#[derive(Debug, Clone, Copy, Default)]
struct ProgStats {
    runs: u64,
    run_time: Duration,
}

/// One stats round of one set: per program, and the observer's totals.
#[derive(Debug, Clone, Default)]
struct StatsRound {
    progs: BTreeMap<String, ProgStats>,
    /// Seconds between the first and the last reading.
    secs: f64,
    /// CPU of wirescope's non-engine threads over those seconds (ns).
    threads_ns: u64,
    /// Busy CPU of all cores over those seconds (ns).
    busy_ns: u64,
}

impl StatsRound {
    fn bpf_ns(&self) -> f64 {
        self.progs
            .values()
            .fold(0.0, |a, p| a + p.run_time.as_nanos() as f64)
    }

    /// % of one core.
    fn core_pct(&self, ns: f64) -> f64 {
        ns / 1e9 / self.secs.max(1e-9) * 100.0
    }

    /// (BPF + observer threads) as % of the busy CPU.
    fn share_pct(&self) -> f64 {
        (self.bpf_ns() + self.threads_ns as f64) / (self.busy_ns as f64).max(1.0) * 100.0
    }
}

/// Run the comparison and print the tables.
pub fn run(wirescope: &Path, args: &EbpfArgs) -> Result<()> {
    let c = args.common;
    let mut gbps: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for round in 1..=c.rounds {
        for set in order(round) {
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
    let mut stats: StatsBySet = BTreeMap::new();
    for round in 1..=args.stats_rounds {
        for set in order(round) {
            let r = with_stats(wirescope, set, args.streams, c.time)?;
            eprintln!(
                "xtask: stats round {round}/{}  --ebpf {set:<7}  BPF {:.2} % + threads {:.2} % of one core, {:.2} % of the busy CPU",
                args.stats_rounds,
                r.core_pct(r.bpf_ns()),
                r.core_pct(r.threads_ns as f64),
                r.share_pct()
            );
            stats.entry(set).or_default().push(r);
            std::thread::sleep(SETTLE);
        }
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

/// One run with kernel statistics on: every `ws_*` program's run count and
/// time, the observer threads' CPU and the host's busy CPU, from the first
/// reading while the engines run (and the programs are loaded) to the last
/// one while they still do: the pair's setup and teardown are not counted.
fn with_stats(wirescope: &Path, set: &str, streams: u32, secs: u64) -> Result<StatsRound> {
    let _stats = aya::sys::enable_stats(aya::sys::Stats::RunTime)
        .context("enabling BPF run-time statistics (needs CAP_SYS_ADMIN)")?;
    let mut child = command(wirescope, set, streams, secs)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("starting wirescope run")?;
    let mut first: BTreeMap<u32, (String, ProgStats)> = BTreeMap::new();
    let mut last: BTreeMap<u32, ProgStats> = BTreeMap::new();
    let mut window: Option<(Instant, observer::Reading)> = None;
    let mut end: Option<(Instant, observer::Reading)> = None;
    let want_programs = set != "off";
    while child.try_wait()?.is_none() {
        let reading = observer::read(child.id());
        let now = Instant::now();
        let progs: Vec<(u32, String, ProgStats)> = aya::programs::loaded_programs()
            .flatten()
            .filter_map(|p| {
                let name = p.name_as_str().filter(|n| n.starts_with("ws_"))?;
                let s = ProgStats {
                    runs: p.run_count(),
                    run_time: p.run_time(),
                };
                Some((p.id(), name.to_string(), s))
            })
            .collect();
        let running = reading.engines > 0 && (!progs.is_empty() || !want_programs);
        if running {
            for (id, name, s) in progs {
                first.entry(id).or_insert_with(|| (name, s));
                last.insert(id, s);
            }
            if window.is_none() {
                window = Some((now, reading));
            } else {
                end = Some((now, reading));
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (Some((t0, r0)), Some((t1, r1))) = (window, end) else {
        anyhow::bail!("`wirescope run --ebpf {set}` ended before two readings");
    };
    let mut progs = BTreeMap::new();
    for (id, (name, s0)) in first {
        let Some(s1) = last.get(&id) else {
            continue;
        };
        let e = progs.entry(name).or_insert_with(ProgStats::default);
        e.runs += s1.runs - s0.runs;
        e.run_time += s1.run_time.saturating_sub(s0.run_time);
    }
    Ok(StatsRound {
        progs,
        secs: t1.duration_since(t0).as_secs_f64(),
        threads_ns: observer::observer_ns(&r0, &r1),
        busy_ns: r1.busy_ns.saturating_sub(r0.busy_ns),
    })
}

type StatsBySet<'a> = BTreeMap<&'a str, Vec<StatsRound>>;

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
        "runs:    {} round(s) x {} s of `wirescope run -P {}` per set, alternating off -> default -> deep -> deep -> default -> off ...",
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
    println!(
        "\nper-program kernel statistics (medians of {} extra run(s) per set with BPF_ENABLE_STATS; their throughput is not counted above):",
        args.stats_rounds
    );
    let mut rows = Vec::new();
    for (set, rounds) in stats {
        let names: std::collections::BTreeSet<&String> =
            rounds.iter().flat_map(|r| r.progs.keys()).collect();
        for name in names {
            let per = |f: &dyn Fn(&StatsRound, &ProgStats) -> f64| -> f64 {
                let v: Vec<f64> = rounds
                    .iter()
                    .filter_map(|r| r.progs.get(name).map(|p| f(r, p)))
                    .collect();
                median(&v)
            };
            rows.push(vec![
                set.to_string(),
                name.clone(),
                format!("{:.0}", per(&|r, p| p.runs as f64 / r.secs.max(1e-9))),
                format!(
                    "{:.1}",
                    per(&|_, p| p.run_time.as_nanos() as f64 / p.runs.max(1) as f64)
                ),
                format!(
                    "{:.2} %",
                    per(&|r, p| r.core_pct(p.run_time.as_nanos() as f64))
                ),
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
    println!("\nobserver cost: BPF run time + wirescope's non-engine threads, as a share of the busy CPU (medians):");
    let rows: Vec<Vec<String>> = stats
        .iter()
        .map(|(set, rounds)| {
            let m =
                |f: &dyn Fn(&StatsRound) -> f64| median(&rounds.iter().map(f).collect::<Vec<_>>());
            vec![
                set.to_string(),
                format!("{:.2} %", m(&|r| r.core_pct(r.bpf_ns()))),
                format!("{:.2} %", m(&|r| r.core_pct(r.threads_ns as f64))),
                format!("{:.2}", m(&|r| r.busy_ns as f64 / 1e9 / r.secs.max(1e-9))),
                format!("{:.2} %", m(&|r| r.share_pct())),
                list(&rounds.iter().map(|r| r.share_pct()).collect::<Vec<_>>(), 2),
            ]
        })
        .collect();
    print!(
        "{}",
        table::render(
            &[
                "--ebpf",
                "BPF (% of one core)",
                "threads (% of one core)",
                "busy cores",
                "share of busy CPU",
                "rounds %"
            ],
            &rows
        )
    );
}

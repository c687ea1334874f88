//! `cargo xtask bench scale`: what the observer costs on a big host — the
//! synthetic one of [`wirescope::probe::synthetic`] (256 CPUs on 2 NUMA
//! nodes, 8 mlx5 NICs × 64 queues, ~1,500 interrupt lines), read by the real
//! [`Sampler`] through `CaptureDir` as `wirescope watch --from DIR` reads it.
//!
//! Prints one line per figure (thread CPU clock, so the machine's other
//! load counts less): the sampler per interval (its mean: the facts'
//! re-reads included) and the heap the agent's sampler keeps over a long
//! run, the rules per interval (the live window of both hosts, as the live
//! diagnosis runs them), the pipeline (rules with hysteresis, the TUI's
//! actions), the log bytes per interval (a log file's, with the big host's
//! detail lines; every line with its rows; zstd) and the implied 24 h
//! log, and the TUI frame render at 200x60 and 80x24 (TestBackend, the
//! dashboard, CPU and queue views of a model fed with the Samples). Then
//! where the sampler's time goes: each read and parse timed alone, outside
//! the sampler. Last, a day of intervals (`--day`) fed through the pipeline
//! without sleeping, the heap it keeps and the zstd log it writes, the TUI
//! model's heap, and the replay's first frame on that log and how fast the
//! rest streams in ([`super::scale_log`]). Always
//! measures a release build: a debug `cargo xtask` runs itself again with
//! `--release`. No root, no network; writes only a temporary directory.

use super::stats::median;
use anyhow::{bail, Context, Result};
use clap::Args;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::time::Duration;
use wirescope::diagnose::{diagnose, diagnose_cached, FactsCache, Input, Window};
use wirescope::probe::capture_dir::CaptureDir;
use wirescope::probe::ebpf::EbpfUnavailable;
use wirescope::probe::ethtool_names::{Class, Dir, NameClasses};
use wirescope::probe::facts::HostFacts;
use wirescope::probe::sample::{HostRole, Sample};
use wirescope::probe::sampler::{EbpfLoader, Sampler};
use wirescope::probe::source::HostSource;
use wirescope::probe::synthetic::{Layout, SyntheticHost};
use wirescope::record::pipeline::{Origin, Pipeline};
use wirescope::session::driver::{PointStart, SessionEvent};
use wirescope::session::outcome::RunEvent;
use wirescope::tui::action::{update, Action};
use wirescope::tui::model::{Model, ModelConfig, Source, View};
use wirescope::units::BitsPerSec;

/// Set in the release re-run, so it does not run itself again.
const INNER: &str = "WIRESCOPE_BENCH_SCALE_RELEASE";

/// `bench scale` options.
#[derive(Debug, Args)]
pub struct ScaleArgs {
    /// Intervals to sample (medians are over these; at least 20).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(20..=10_000))]
    intervals: u32,
    /// Frames rendered per view and size.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(5..=1_000))]
    frames: u32,
    /// Intervals fed through the pipeline for its memory and the day's log
    /// (a day at 1 s by default).
    #[arg(long, default_value_t = 86_400, value_parser = clap::value_parser!(u32).range(1_000..=1_000_000))]
    day: u32,
    /// Intervals fed to the TUI model for its memory (its history keeps 600).
    #[arg(long, default_value_t = 7_200, value_parser = clap::value_parser!(u32).range(1_000..=1_000_000))]
    tui_intervals: u32,
    /// Intervals the agent's sampler runs for its memory (a Sample each, handed on).
    #[arg(long, default_value_t = 3_600, value_parser = clap::value_parser!(u32).range(100..=1_000_000))]
    agent_intervals: u32,
}

/// CPU time of the calling thread (ms).
fn cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec; CLOCK_THREAD_CPUTIME_ID needs nothing else.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

/// CPU ms of one call of `f`, and its result.
fn timed<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let t0 = cpu_ms();
    let v = f();
    (cpu_ms() - t0, v)
}

/// Median CPU ms of `n` calls of `f`.
fn median_of(n: u32, mut f: impl FnMut()) -> f64 {
    let v: Vec<f64> = (0..n).map(|_| timed(&mut f).0).collect();
    median(&v)
}

/// Run the benchmark (in a release build; a debug build runs itself again with `--release`).
pub fn run(args: &ScaleArgs) -> Result<()> {
    if cfg!(debug_assertions) && std::env::var_os(INNER).is_none() {
        eprintln!(
            "bench scale: building and running the release build (debug figures mean nothing)"
        );
        let status =
            std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .args([
                    "run",
                    "--release",
                    "--quiet",
                    "--package",
                    "xtask",
                    "--",
                    "bench",
                    "scale",
                ])
                .args(["--intervals", &args.intervals.to_string()])
                .args(["--frames", &args.frames.to_string()])
                .args(["--day", &args.day.to_string()])
                .args(["--tui-intervals", &args.tui_intervals.to_string()])
                .args(["--agent-intervals", &args.agent_intervals.to_string()])
                .env(INNER, "1")
                .status()
                .context("running cargo run --release --package xtask")?;
        if !status.success() {
            bail!("the release run of bench scale failed ({status})");
        }
        return Ok(());
    }
    let mut host = SyntheticHost::in_temp(Layout::default())
        .context("generating the synthetic host in a temporary directory")?;
    let l = host.layout().clone();
    println!(
        "synthetic host: {} CPUs on {} NUMA nodes, {} NICs x {} queues (mlx5), {} interrupt lines; {} intervals of 1 s",
        l.cpus,
        l.nodes,
        l.nics,
        l.queues,
        host.irq_line_count(),
        args.intervals
    );
    let (sampler_ms, samples) = sample(&mut host, args.intervals)?;
    agent_memory(&mut host, args.agent_intervals)?;
    let peer: Vec<Sample> = samples
        .iter()
        .cloned()
        .map(|mut s| {
            // The same shape, another machine: its own boot (the rules
            // treat two hosts of one boot as the embedded local pair).
            s.host = HostRole::Peer;
            if let Some(f) = s.facts.as_mut() {
                f.boot_id = "synthetic-peer".into();
            }
            s
        })
        .collect();
    let facts = |v: &[Sample]| {
        v.iter()
            .find_map(|s| s.facts.as_deref().cloned())
            .context("no Sample carried the host facts")
    };
    print_sampler(&sampler_ms);
    rules(&samples, &peer, [&facts(&samples)?, &facts(&peer)?])?;
    super::scale_log::log_bytes(&samples, &peer)?;
    let model = pipeline_and_model(&samples, &peer);
    render(model, args.frames)?;
    parts(&host)?;
    let dir = tempfile::tempdir().context("temporary directory for the day's log")?;
    let day = args.day as usize;
    let log = super::scale_log::day(&samples, &peer, day, dir.path())?;
    super::scale_log::tui_memory(&samples, &peer, args.tui_intervals as usize)?;
    super::scale_log::replay_open(&log, day, 1_000)?;
    Ok(())
}

/// The agent's side of a long run: a sampler on the host handing each
/// Sample on (dropped here, as the agent sends it off); the heap it keeps
/// at a quarter, half and all of `n` intervals (facts re-reads included).
fn agent_memory(host: &mut SyntheticHost, n: u32) -> Result<()> {
    let base = super::alloc::live();
    let loader: EbpfLoader =
        Box::new(|_, _| Err(EbpfUnavailable::Disabled("synthetic host".into())));
    let mut s = Sampler::with(Box::new(host.source()), None, loader);
    s.set_ifaces(&host.nic_names());
    s.begin(None, Duration::ZERO, Duration::from_secs(1));
    let marks = [n / 4, n / 2, n];
    let mut at = Vec::new();
    for i in 1..=n {
        host.advance(1)?;
        drop(s.sample());
        if marks.contains(&i) {
            at.push((i, super::alloc::live() - base));
        }
    }
    drop(s);
    let mb = |b: i64| b as f64 / 1e6;
    let grow: Vec<String> = at
        .iter()
        .map(|(i, b)| format!("{:.1} MB after {i}", mb(*b)))
        .collect();
    println!(
        "memory after {n} intervals: the agent's sampler {:.1} MB ({}; goal <= 100 MB)",
        mb(at.last().map_or(0, |x| x.1)),
        grow.join(", ")
    );
    Ok(())
}

/// Sample `n` intervals, moving the host's clock by 1 s before each; the
/// CPU ms of each `Sampler::sample`, and the Samples as a session hands them
/// on (its 1 s interval clock, the engine's figure: the first NIC's traffic).
fn sample(host: &mut SyntheticHost, n: u32) -> Result<(Vec<f64>, Vec<Sample>)> {
    let loader: EbpfLoader =
        Box::new(|_, _| Err(EbpfUnavailable::Disabled("synthetic host".into())));
    let mut s = Sampler::with(Box::new(host.source()), None, loader);
    s.set_ifaces(&host.nic_names());
    s.begin(None, Duration::ZERO, Duration::from_secs(1));
    let mut costs = Vec::new();
    let mut out = Vec::new();
    for i in 0..n {
        host.advance(1)?;
        let (ms, mut x) = timed(|| s.sample());
        if !x.probe_errors.is_empty() {
            bail!(
                "the sampler could not read the synthetic host: {:?}",
                x.probe_errors
            );
        }
        costs.push(ms);
        x.start_s = f64::from(i);
        x.end_s = f64::from(i) + 1.0;
        x.engine.rx_bytes = host.nic_bytes_per_s(0, Dir::Rx);
        x.engine.rx_bps = BitsPerSec::from_bytes(x.engine.rx_bytes, 1.0);
        out.push(x);
    }
    Ok((costs, out))
}

fn print_sampler(ms: &[f64]) {
    // The point's first interval reads the host facts and every CPU's
    // place once; after it the facts are re-read every FACTS_EVERY
    // intervals, or less often where that costs more than the sampler's
    // budget: those are the slow intervals the mean includes.
    let (first, rest) = ms.split_first().map_or((0.0, ms), |(f, r)| (*f, r));
    let mean = rest.iter().sum::<f64>() / rest.len().max(1) as f64;
    let max = rest.iter().copied().fold(0.0, f64::max);
    println!(
        "sampler: {mean:.2} ms per interval (mean over the {} intervals after the point's first, the facts' re-reads included; goal <= 5 ms); median {:.2} ms; the slowest {max:.2} ms (a re-read of the facts); the first {first:.2} ms",
        rest.len(),
        median(rest)
    );
}

/// The rules over the live window (the last 5 Samples of each host, their
/// facts), per interval: as a live diagnosis runs them (what the rules
/// derive from the facts alone kept while the facts stay the same, as they
/// do between re-reads that find no change) and from scratch (a window
/// whose facts are new).
fn rules(local: &[Sample], peer: &[Sample], facts: [&HostFacts; 2]) -> Result<()> {
    let w = wirescope::diagnose::live::WINDOW;
    let cache = FactsCache::default();
    let (mut live, mut fresh) = (Vec::new(), Vec::new());
    let mut found = 0;
    for end in w..=local.len() {
        let input = Input {
            local: Window {
                samples: &local[end - w..end],
                facts: Some(facts[0]),
            },
            peer: Window {
                samples: &peer[end - w..end],
                facts: Some(facts[1]),
            },
            test: Default::default(),
        };
        let (t, f) = timed(|| diagnose_cached(&input, &cache));
        live.push(t);
        let (t, g) = timed(|| diagnose(&input));
        fresh.push(t);
        if f != g {
            bail!("the live diagnosis's findings differ from a fresh diagnosis's (window ending at {end})");
        }
        found = f.len();
    }
    println!(
        "rules: {:.2} ms per interval (median over {} windows of {w} intervals x 2 hosts, as the live diagnosis runs them: the facts-only rules and IRQ steering derived once per facts; {found} findings; goal <= 1 ms); {:.2} ms when the facts are new",
        median(&live),
        live.len(),
        median(&fresh)
    );
    Ok(())
}

/// The TUI's model fed as a live session feeds it: every interval through
/// the pipeline (diagnosis and hysteresis included), its actions into the
/// model. Prints the pipeline's cost per interval.
fn pipeline_and_model(local: &[Sample], peer: &[Sample]) -> Model {
    let mut m = Model::new(ModelConfig {
        source: Source::Live,
        local_host: Default::default(),
        pair: "synthetic host x2".into(),
        test: wirescope::cli::TuiArgs::defaults().test,
        history: Duration::from_secs(600),
        color: true,
        log_path: None,
    });
    let mut p = Pipeline::new(Origin::default());
    update(
        &mut m,
        Action::Connected {
            peer: wirescope::probe::system::HostInfo {
                hostname: "synthetic-peer".into(),
                kernel: "6.8.0-49-generic".into(),
                cpus: local.first().map_or(0, |s| s.cpus.len()),
                ..Default::default()
            },
        },
    );
    let feed = |m: &mut Model, p: &mut Pipeline, ev: SessionEvent| -> f64 {
        let (t, out) = timed(|| p.handle(ev));
        if let Ok(out) = out {
            for a in wirescope::tui::app::actions_of(out) {
                update(m, a);
            }
        }
        t
    };
    feed(
        &mut m,
        &mut p,
        SessionEvent::PointStarted(Box::new(PointStart {
            number: 1,
            sweep: None,
            spec: None,
            time: None,
        })),
    );
    let ms: Vec<f64> = local
        .iter()
        .zip(peer)
        .map(|(l, r)| {
            let ev = SessionEvent::Interval(Box::new(RunEvent {
                index: l.index,
                local: Some(l.clone()),
                peer: Some(r.clone()),
            }));
            feed(&mut m, &mut p, ev)
        })
        .collect();
    println!(
        "pipeline: {:.2} ms per interval (median: rules with hysteresis, summaries, the TUI's actions)",
        median(&ms)
    );
    m
}

fn render(mut m: Model, frames: u32) -> Result<()> {
    for (w, h) in [(200u16, 60u16), (80, 24)] {
        let mut parts = Vec::new();
        for v in [View::Dashboard, View::Cpu, View::Queues, View::Facts] {
            m.view = v;
            let mut t = Terminal::new(TestBackend::new(w, h))?;
            let mut err = None;
            let ms = median_of(frames, || {
                if let Err(e) = t.draw(|f| wirescope::tui::view::draw(f, &m)) {
                    err = Some(e);
                }
            });
            if let Some(e) = err {
                bail!("drawing {} at {w}x{h}: {e}", v.title());
            }
            parts.push(format!("{} {ms:.2} ms", v.title().to_lowercase()));
        }
        println!(
            "TUI frame render at {w}x{h}: {} (median of {frames} frames each; goal <= 10 ms)",
            parts.join(", ")
        );
    }
    Ok(())
}

/// Rows of the breakdown: what, median CPU ms per interval.
type Rows = Vec<(String, f64)>;

/// Reps per part of the breakdown.
const REPS: u32 = 20;

/// Where the sampler's time goes: each read and parse of one interval, alone.
fn parts(host: &SyntheticHost) -> Result<()> {
    let src = host.source();
    let names = host.nic_names();
    let mut rows = parts_procfs(&src)?;
    rows.extend(parts_nics(&src, &names)?);
    rows.extend(parts_facts(&src, &names));
    println!("where the sampler's time goes (each part alone, median of {REPS}; ms per interval):");
    for (what, ms) in rows {
        println!("  {ms:>8.2} ms  {what}");
    }
    Ok(())
}

fn read(src: &CaptureDir, p: &str) -> Result<String> {
    src.read(p)
        .with_context(|| format!("reading {p} of the synthetic host"))
}

/// The host files every interval reads.
fn parts_procfs(src: &CaptureDir) -> Result<Rows> {
    use wirescope::probe::{cpu, netstat, nic, softirq, system};
    let online = system::online_cpu_ids(src);
    let prev = cpu::parse_proc_stat(&read(src, "/proc/stat")?)?;
    let prev_si = softirq::parse_softirqs(&read(src, "/proc/softirqs")?);
    let prev_sn = softirq::parse_softnet(&read(src, "/proc/net/softnet_stat")?, &online);
    let stat = median_of(REPS, || {
        if let Ok(c) = src.read("/proc/stat").map(|t| cpu::parse_proc_stat(&t)) {
            std::hint::black_box(c.map(|c| cpu::cpu_deltas(&prev, &c)).ok());
        }
    });
    let softirqs = median_of(REPS, || {
        if let Ok(t) = src.read("/proc/softirqs") {
            let cur = softirq::parse_softirqs(&t);
            std::hint::black_box(softirq::softirq_deltas(&prev_si, &cur));
        }
    });
    let softnet = median_of(REPS, || {
        if let Ok(t) = src.read("/proc/net/softnet_stat") {
            let cur = softirq::parse_softnet(&t, &online);
            std::hint::black_box(softirq::softnet_deltas(&prev_sn, &cur));
        }
    });
    let snmp = median_of(REPS, || {
        for f in ["/proc/net/snmp", "/proc/net/netstat"] {
            if let Ok(t) = src.read(f) {
                std::hint::black_box(netstat::parse_snmp(&t));
            }
        }
    });
    let dev = median_of(REPS, || {
        if let Ok(t) = src.read("/proc/net/dev") {
            let _ = std::hint::black_box(nic::parse_net_dev(&t));
        }
    });
    Ok(vec![
        ("/proc/stat read+parse+deltas".into(), stat),
        ("/proc/softirqs read+parse+deltas".into(), softirqs),
        ("/proc/net/softnet_stat read+parse+deltas".into(), softnet),
        ("/proc/net/snmp+netstat read+parse".into(), snmp),
        ("/proc/net/dev read+parse".into(), dev),
    ])
}

/// The NICs' counters: ethtool -S, the per-queue split, the device-wide counters.
fn parts_nics(src: &CaptureDir, names: &[String]) -> Result<Rows> {
    use wirescope::probe::capture_dir::ethtool_file;
    use wirescope::probe::ethtool_text::{parse_stats, parse_stats_reusing};
    use wirescope::probe::nic::NicStats;
    use wirescope::probe::queues::QueueProbe;
    let k = names.len();
    let all = median_of(REPS, || {
        for i in names {
            std::hint::black_box(src.ethtool_stats(i));
        }
    });
    let stats: Vec<NicStats> = names
        .iter()
        .map(|i| {
            Ok(NicStats::from(parse_stats(&read(
                src,
                &ethtool_file("-S", i),
            )?)?))
        })
        .collect::<Result<_>>()?;
    // As the sampler parses: the text, sharing the previous reading's names.
    let only_s = median_of(REPS, || {
        for (i, s) in names.iter().zip(&stats) {
            if let Ok(t) = src.read(&ethtool_file("-S", i)) {
                let _ = std::hint::black_box(parse_stats_reusing(&t, Some(&s.names)));
            }
        }
    });
    let mut probes: Vec<QueueProbe> = names.iter().map(|_| QueueProbe::default()).collect();
    let mut split = || {
        for ((p, i), s) in probes.iter_mut().zip(names).zip(&stats) {
            std::hint::black_box(p.read(None, i, None, "mlx5_core", Some(s), 1.0));
        }
    };
    split();
    let split = median_of(REPS, split);
    // As the sampler keeps them: the classes cached per NIC, the previous
    // reading (sharing its names) for the device-wide counters' deltas.
    let mut kept: Vec<(NameClasses, NicStats)> = stats
        .iter()
        .map(|s| (NameClasses::default(), s.clone()))
        .collect();
    let mut keep = || {
        for ((c, prev), s) in kept.iter_mut().zip(&stats) {
            for ((i, (_, v)), class) in s.iter().enumerate().zip(c.get("mlx5_core", &s.names)) {
                if *class == Class::Global && prev.same_names(s) {
                    std::hint::black_box(v.saturating_sub(prev.values[i]));
                }
            }
            prev.clone_from(s);
        }
    };
    keep();
    let keep = median_of(REPS, keep);
    let n = stats.first().map_or(0, NicStats::len);
    Ok(vec![
        (format!("ethtool -S x{k} (CaptureDir::ethtool_stats)"), all),
        (
            format!("  of which ethtool -S x{k} read+parse (the names shared)"),
            only_s,
        ),
        (format!("per-queue split (QueueProbe::read) x{k}"), split),
        (
            format!("NIC counters: keep {n} names x{k} (classes cached)"),
            keep,
        ),
    ])
}

/// What the sampler reads every 10th interval (the host facts).
fn parts_facts(src: &CaptureDir, names: &[String]) -> Rows {
    use wirescope::probe::system;
    let interrupts = median_of(REPS, || {
        if let Ok(t) = src.read("/proc/interrupts") {
            std::hint::black_box(system::parse_interrupts(&t));
        }
    });
    let rows = median_of(REPS, || {
        if let Ok(t) = src.read("/proc/interrupts") {
            let (_, rows) = system::interrupt_rows(&t);
            std::hint::black_box(rows.map(|r| r.name().len()).sum::<usize>());
        }
    });
    let mut cache = system::PlacesCache::default();
    system::read_host_facts_reusing(src, names, &mut cache);
    let cached = median_of(5, || {
        std::hint::black_box(system::read_host_facts_reusing(src, names, &mut cache));
    });
    let first = median_of(3, || {
        std::hint::black_box(system::read_host_facts(src, names));
    });
    vec![
        (
            "/proc/interrupts read+parse (host facts: every 10th)".into(),
            interrupts,
        ),
        (
            "/proc/interrupts read+rows, names only (as the host facts read it)".into(),
            rows,
        ),
        (
            "host facts, places cached (every 10th, /proc/interrupts included)".into(),
            cached,
        ),
        ("host facts, first read (places of every CPU)".into(), first),
    ]
}

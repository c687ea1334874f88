//! `cargo xtask bench rr`: TCP request/response. wirescope `run -m rr
//! --conns 1` against `sockperf ping-pong` (one connection, one message in
//! flight) at each message size, then wirescope alone at many connections.
//!
//! Latencies are round-trip times on both sides: sockperf runs with
//! `--full-rtt`; if its output still says one-way latency, it is doubled.

use super::lab::{tool_version, Lab};
use super::parse::{self, Sockperf, SockperfUnit, WsRun};
use super::stats::{list, median, ratio};
use super::{table, Common, SETTLE};
use crate::cmd;
use crate::netns::ADDR_B;
use anyhow::{Context, Result};
use clap::Args;

const SOCKPERF_PORT: u16 = 11111;

/// `bench rr` options.
#[derive(Debug, Args)]
pub struct RrArgs {
    #[command(flatten)]
    common: Common,
    /// Request (= response) sizes in bytes for the sockperf comparison.
    #[arg(long, value_delimiter = ',', default_value = "64,1024", value_parser = clap::value_parser!(u32).range(14..=65536))]
    sizes: Vec<u32>,
    /// Pin both tools the same way, client on CPU 0 and server on CPU 1
    /// (wirescope `--cpus 0 --peer-cpus 1`, sockperf under `taskset`), so
    /// thread placement is not what the comparison measures.
    #[arg(long)]
    pin: bool,
    /// Connection counts for the wirescope-only scaling runs (64-byte requests).
    #[arg(long, value_delimiter = ',', default_value = "16,256", value_parser = clap::value_parser!(u32).range(1..=65536))]
    conns: Vec<u32>,
}

/// One message size: every round of both tools.
struct SizePoint {
    size: u32,
    wirescope: Vec<WsRun>,
    sockperf: Vec<Sockperf>,
}

/// One connection count: every wirescope round.
struct ConnsPoint {
    conns: u32,
    runs: Vec<WsRun>,
}

/// Run both parts and print their tables.
pub fn run(lab: &mut Lab, args: &RrArgs) -> Result<()> {
    let version =
        tool_version("sockperf").context("sockperf is required (apt install sockperf)")?;
    let port = SOCKPERF_PORT.to_string();
    let mut server = pinned(
        lab.server(if args.pin { "taskset" } else { "sockperf" }),
        args.pin,
        "1",
    );
    server.args(["server", "-i", ADDR_B, "-p", &port, "--tcp"]);
    lab.start_server("sockperf-server", server, SOCKPERF_PORT)?;
    let c = args.common;
    let mut sizes = Vec::new();
    for &size in &args.sizes {
        sizes.push(measure_size(lab, size, c, args.pin)?);
    }
    let mut scaling = Vec::new();
    for &conns in &args.conns {
        // Scaling runs spread over every core: pinning all workers of a side to one core is not what they measure.
        scaling.push(measure_conns(lab, conns, c, false)?);
    }
    print_header(lab, c, &version, &sizes);
    print_comparison(&sizes);
    print_scaling(&scaling);
    Ok(())
}

fn measure_size(lab: &Lab, size: u32, c: Common, pin: bool) -> Result<SizePoint> {
    let mut p = SizePoint {
        size,
        wirescope: vec![],
        sockperf: vec![],
    };
    for round in 1..=c.rounds {
        let ws = wirescope_rr(lab, 1, size, c.time, pin)?;
        progress(
            round,
            c.rounds,
            &format!("size {size} B  wirescope"),
            ws.rate_per_s,
            ws.latency.map(|l| (l.p50, l.p99)),
        );
        p.wirescope.push(ws);
        std::thread::sleep(SETTLE);
        let sp = sockperf(lab, size, c.time, pin)?;
        progress(
            round,
            c.rounds,
            &format!("size {size} B  sockperf "),
            sp.rate_per_s,
            Some((sp.rtt.p50, sp.rtt.p99)),
        );
        p.sockperf.push(sp);
        std::thread::sleep(SETTLE);
    }
    Ok(p)
}

fn measure_conns(lab: &Lab, conns: u32, c: Common, pin: bool) -> Result<ConnsPoint> {
    let mut p = ConnsPoint {
        conns,
        runs: vec![],
    };
    for round in 1..=c.rounds {
        let ws = wirescope_rr(lab, conns, 64, c.time, pin)?;
        progress(
            round,
            c.rounds,
            &format!("conns {conns}  wirescope"),
            ws.rate_per_s,
            ws.latency.map(|l| (l.p50, l.p99)),
        );
        p.runs.push(ws);
        std::thread::sleep(SETTLE);
    }
    Ok(p)
}

fn progress(round: u32, rounds: u32, what: &str, rate: f64, lat: Option<(f64, f64)>) {
    let lat = lat.map_or(String::new(), |(p50, p99)| {
        format!("  p50 {p50:.1} us  p99 {p99:.1} us")
    });
    eprintln!("xtask: round {round}/{rounds}  {what}  {rate:.0} req/s{lat}");
}

/// `taskset -c CPU` in front of sockperf when pinning (`cmd` runs `taskset` then).
fn pinned(mut cmd: std::process::Command, pin: bool, cpu: &str) -> std::process::Command {
    if pin {
        cmd.args(["-c", cpu, "sockperf"]);
    }
    cmd
}

fn wirescope_rr(lab: &Lab, conns: u32, size: u32, secs: u64, pin: bool) -> Result<WsRun> {
    let (n, s, t) = (conns.to_string(), size.to_string(), format!("{secs}s"));
    let mut args = vec!["-m", "rr", "--conns", &n, "--size", &s, "-t", &t];
    if pin {
        args.extend(["--cpus", "0", "--peer-cpus", "1"]);
    }
    let run = lab.wirescope_run(&args)?;
    if run.latency.is_none() {
        anyhow::bail!("wirescope rr summary (--conns {conns} --size {size}) has no latency_us");
    }
    Ok(run)
}

fn sockperf(lab: &Lab, size: u32, secs: u64, pin: bool) -> Result<Sockperf> {
    let (port, m, t) = (
        SOCKPERF_PORT.to_string(),
        size.to_string(),
        secs.to_string(),
    );
    let mut client = pinned(
        lab.client(if pin { "taskset" } else { "sockperf" }),
        pin,
        "0",
    );
    client.args([
        "ping-pong",
        "-i",
        ADDR_B,
        "-p",
        &port,
        "--tcp",
        "-m",
        &m,
        "-t",
        &t,
        "--full-rtt",
    ]);
    let what = cmd::describe(&client);
    let (stdout, stderr) = cmd::capture(&mut client)?;
    parse::sockperf_pingpong(&format!("{stdout}\n{stderr}"))
        .with_context(|| format!("reading the output of `{what}`"))
}

fn print_header(lab: &Lab, c: Common, version: &str, sizes: &[SizePoint]) {
    println!("== bench rr: TCP request/response, wirescope (run -m rr) vs sockperf ping-pong ==");
    println!("pair:     {}", lab.describe());
    println!(
        "runs:     {} round(s) x {} s per tool and point, alternating wirescope -> sockperf",
        c.rounds, c.time
    );
    println!("sockperf: {version}");
    let one_way = sizes
        .iter()
        .flat_map(|p| &p.sockperf)
        .any(|s| s.reported == SockperfUnit::OneWay);
    if one_way {
        println!("latency:  round trip, µs. sockperf reported one-way latency (RTT/2) despite --full-rtt: its percentiles were doubled");
    } else {
        println!("latency:  round trip, µs. sockperf ran with --full-rtt (its default ping-pong figure is one-way = RTT/2) and reported round trips: used as is");
    }
    println!("req/s:    wirescope rate_per_s; sockperf ReceivedMessages / RunTime of its [Valid Duration] (after its warm-up)");
    println!("CPU:      wirescope's mean busy % over all cores (hosts.local / hosts.peer); both namespaces share this machine's cores\n");
}

fn print_comparison(sizes: &[SizePoint]) {
    println!("1 connection, 1 request in flight; ws = wirescope, sp = sockperf; medians over rounds; ratios are ws/sp:");
    let header = [
        "size B",
        "ws p50 µs",
        "sp p50 µs",
        "ratio p50",
        "ws p99 µs",
        "sp p99 µs",
        "ratio p99",
        "ws req/s",
        "sp req/s",
        "ratio req/s",
    ];
    let rows: Vec<Vec<String>> = sizes.iter().map(comparison_row).collect();
    print!("{}", table::render(&header, &rows));
    println!("\nall rounds:");
    let header = ["size B / tool", "p50 µs", "p99 µs", "req/s"];
    let mut rows = Vec::new();
    for p in sizes {
        let ws = Columns::of_wirescope(&p.wirescope);
        let sp = Columns::of_sockperf(&p.sockperf);
        rows.push(vec![
            format!("{} wirescope", p.size),
            list(&ws.p50, 1),
            list(&ws.p99, 1),
            list(&ws.rate, 0),
        ]);
        rows.push(vec![
            format!("{} sockperf", p.size),
            list(&sp.p50, 1),
            list(&sp.p99, 1),
            list(&sp.rate, 0),
        ]);
    }
    print!("{}", table::render(&header, &rows));
}

fn comparison_row(p: &SizePoint) -> Vec<String> {
    let ws = Columns::of_wirescope(&p.wirescope).medians();
    let sp = Columns::of_sockperf(&p.sockperf).medians();
    vec![
        p.size.to_string(),
        format!("{:.1}", ws.p50),
        format!("{:.1}", sp.p50),
        ratio(ws.p50, sp.p50),
        format!("{:.1}", ws.p99),
        format!("{:.1}", sp.p99),
        ratio(ws.p99, sp.p99),
        format!("{:.0}", ws.rate),
        format!("{:.0}", sp.rate),
        ratio(ws.rate, sp.rate),
    ]
}

fn print_scaling(points: &[ConnsPoint]) {
    println!("\nwirescope rr alone, 64-byte requests, 1 in flight per connection (medians over rounds; no reference tool):");
    let header = [
        "conns",
        "req/s",
        "p50 µs",
        "p99 µs",
        "CPU local %",
        "CPU peer %",
        "req/s rounds",
    ];
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            let cols = Columns::of_wirescope(&p.runs);
            let m = cols.medians();
            let cpu = |f: fn(&WsRun) -> f64| median(&p.runs.iter().map(f).collect::<Vec<_>>());
            vec![
                p.conns.to_string(),
                format!("{:.0}", m.rate),
                format!("{:.1}", m.p50),
                format!("{:.1}", m.p99),
                format!("{:.1}", cpu(|r| r.cpu_local)),
                format!("{:.1}", cpu(|r| r.cpu_peer)),
                list(&cols.rate, 0),
            ]
        })
        .collect();
    print!("{}", table::render(&header, &rows));
}

/// Per-round p50, p99 (µs) and rate (req/s) of one tool at one point.
struct Columns {
    p50: Vec<f64>,
    p99: Vec<f64>,
    rate: Vec<f64>,
}

impl Columns {
    fn of_wirescope(runs: &[WsRun]) -> Self {
        // Every run kept has latency (checked in `wirescope_rr`).
        let lat: Vec<_> = runs.iter().filter_map(|r| r.latency).collect();
        Columns {
            p50: lat.iter().map(|l| l.p50).collect(),
            p99: lat.iter().map(|l| l.p99).collect(),
            rate: runs.iter().map(|r| r.rate_per_s).collect(),
        }
    }

    fn of_sockperf(runs: &[Sockperf]) -> Self {
        Columns {
            p50: runs.iter().map(|s| s.rtt.p50).collect(),
            p99: runs.iter().map(|s| s.rtt.p99).collect(),
            rate: runs.iter().map(|s| s.rate_per_s).collect(),
        }
    }

    fn medians(&self) -> Medians {
        Medians {
            p50: median(&self.p50),
            p99: median(&self.p99),
            rate: median(&self.rate),
        }
    }
}

/// Medians over rounds: p50 and p99 in µs, rate in req/s.
struct Medians {
    p50: f64,
    p99: f64,
    rate: f64,
}

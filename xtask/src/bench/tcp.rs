//! `cargo xtask bench tcp`: bulk TCP throughput of `wirescope run` (stream)
//! against iperf3, and iperf2 when installed, over the lab's veth.
//!
//! For each stream count and round the tools run one after the other
//! (wirescope, iperf3, iperf2), so slow drift of the machine affects all.

use super::lab::{tool_version, Lab};
use super::stats::{list, median, ratio};
use super::{parse, table, Common, SETTLE};
use crate::cmd;
use crate::netns::ADDR_B;
use anyhow::{Context, Result};
use clap::Args;

const IPERF3_PORT: u16 = 5201;
const IPERF2_PORT: u16 = 5001;

/// `bench tcp` options.
#[derive(Debug, Args)]
pub struct TcpArgs {
    #[command(flatten)]
    common: Common,
    /// Parallel stream counts to compare, comma separated.
    #[arg(long, short = 'P', value_delimiter = ',', default_value = "1,2", value_parser = clap::value_parser!(u32).range(1..=128))]
    streams: Vec<u32>,
}

/// All rounds of one stream count, Gbit/s.
struct Point {
    streams: u32,
    wirescope: Vec<f64>,
    cpu_local: Vec<f64>,
    cpu_peer: Vec<f64>,
    iperf3: Vec<f64>,
    iperf2: Vec<f64>,
}

/// Run the comparison and print the table.
pub fn run(lab: &mut Lab, args: &TcpArgs) -> Result<()> {
    let iperf3_version =
        tool_version("iperf3").context("iperf3 is required (apt install iperf3)")?;
    let port3 = IPERF3_PORT.to_string();
    let mut server = lab.server("iperf3");
    server.args(["-s", "-p", &port3]);
    lab.start_server("iperf3-server", server, IPERF3_PORT)?;
    let iperf2 = cmd::is_installed("iperf");
    if iperf2 {
        let port2 = IPERF2_PORT.to_string();
        let mut server = lab.server("iperf");
        server.args(["-s", "-p", &port2]);
        lab.start_server("iperf2-server", server, IPERF2_PORT)?;
    }
    let mut points = Vec::new();
    for &n in &args.streams {
        points.push(measure(lab, n, args.common, iperf2)?);
    }
    print_report(lab, args, &iperf3_version, iperf2, &points);
    Ok(())
}

fn measure(lab: &Lab, streams: u32, c: Common, iperf2: bool) -> Result<Point> {
    let mut p = Point {
        streams,
        wirescope: vec![],
        cpu_local: vec![],
        cpu_peer: vec![],
        iperf3: vec![],
        iperf2: vec![],
    };
    for round in 1..=c.rounds {
        let ws = wirescope(lab, streams, c.time)?;
        progress(round, c.rounds, streams, "wirescope", ws.throughput_bps);
        p.wirescope.push(ws.throughput_bps / 1e9);
        p.cpu_local.push(ws.cpu_local);
        p.cpu_peer.push(ws.cpu_peer);
        std::thread::sleep(SETTLE);
        let bps = iperf3(lab, streams, c.time)?;
        progress(round, c.rounds, streams, "iperf3", bps);
        p.iperf3.push(bps / 1e9);
        std::thread::sleep(SETTLE);
        if iperf2 {
            let bps = iperf2_run(lab, streams, c.time)?;
            progress(round, c.rounds, streams, "iperf2", bps);
            p.iperf2.push(bps / 1e9);
            std::thread::sleep(SETTLE);
        }
    }
    Ok(p)
}

fn progress(round: u32, rounds: u32, streams: u32, tool: &str, bps: f64) {
    eprintln!(
        "xtask: round {round}/{rounds}  -P {streams}  {tool:<9}  {:.2} Gbit/s",
        bps / 1e9
    );
}

fn wirescope(lab: &Lab, streams: u32, secs: u64) -> Result<parse::WsRun> {
    let (n, t) = (streams.to_string(), format!("{secs}s"));
    lab.wirescope_run(&["-P", &n, "-t", &t])
}

fn iperf3(lab: &Lab, streams: u32, secs: u64) -> Result<f64> {
    let (n, t, port) = (
        streams.to_string(),
        secs.to_string(),
        IPERF3_PORT.to_string(),
    );
    let mut client = lab.client("iperf3");
    client.args(["-c", ADDR_B, "-p", &port, "-P", &n, "-t", &t, "-J"]);
    let what = cmd::describe(&client);
    let json = cmd::output(&mut client)?;
    parse::iperf3_received_bps(&json).with_context(|| format!("reading the report of `{what}`"))
}

fn iperf2_run(lab: &Lab, streams: u32, secs: u64) -> Result<f64> {
    let (n, t, port) = (
        streams.to_string(),
        secs.to_string(),
        IPERF2_PORT.to_string(),
    );
    let mut client = lab.client("iperf");
    client.args(["-c", ADDR_B, "-p", &port, "-P", &n, "-t", &t, "-y", "C"]);
    let what = cmd::describe(&client);
    let csv = cmd::output(&mut client)?;
    parse::iperf2_csv_bps(&csv).with_context(|| format!("reading the CSV of `{what}`"))
}

fn print_report(lab: &Lab, args: &TcpArgs, iperf3_version: &str, iperf2: bool, points: &[Point]) {
    let c = args.common;
    println!("== bench tcp: bulk TCP throughput, wirescope (run, stream) vs iperf3 ==");
    println!("pair:    {}", lab.describe());
    println!(
        "runs:    {} round(s) x {} s per tool and stream count, alternating wirescope -> iperf3{}",
        c.rounds,
        c.time,
        if iperf2 { " -> iperf2" } else { "" }
    );
    println!("iperf3:  {iperf3_version}");
    match (iperf2, tool_version("iperf")) {
        (true, Ok(v)) => println!("iperf2:  {v}"),
        (true, Err(_)) => println!("iperf2:  installed (version unknown)"),
        (false, _) => println!("iperf2:  not installed, skipped"),
    }
    println!("Gbit/s = bits received per second / 1e9 (wirescope: throughput_bps; iperf3: end.sum_received.bits_per_second)");
    println!("CPU = wirescope's mean busy % over all cores (hosts.local / hosts.peer); both namespaces share this machine's cores\n");
    let mut header = vec![
        "streams",
        "wirescope median Gbit/s",
        "iperf3 median Gbit/s",
        "ratio ws/iperf3",
        "ws CPU local % (median)",
        "ws CPU peer % (median)",
        "wirescope rounds",
        "iperf3 rounds",
    ];
    if iperf2 {
        header.extend(["iperf2 median Gbit/s", "ratio ws/iperf2", "iperf2 rounds"]);
    }
    let rows: Vec<Vec<String>> = points.iter().map(|p| row(p, iperf2)).collect();
    print!("{}", table::render(&header, &rows));
}

fn row(p: &Point, iperf2: bool) -> Vec<String> {
    let (ws, i3) = (median(&p.wirescope), median(&p.iperf3));
    let mut cells = vec![
        p.streams.to_string(),
        format!("{ws:.2}"),
        format!("{i3:.2}"),
        ratio(ws, i3),
        format!("{:.1}", median(&p.cpu_local)),
        format!("{:.1}", median(&p.cpu_peer)),
        list(&p.wirescope, 2),
        list(&p.iperf3, 2),
    ];
    if iperf2 {
        let i2 = median(&p.iperf2);
        cells.extend([format!("{i2:.2}"), ratio(ws, i2), list(&p.iperf2, 2)]);
    }
    cells
}

//! `cargo xtask bench sink`: the packet engine on a throwaway veth pair.
//!
//! 1. Generator, 64 B, one thread pinned to cpu0: wirescope's (each path)
//!    against `trafgen` (netsniff-ng; its fastest mode: PACKET_TX_RING with
//!    the qdisc bypassed, the default), alternating rounds. Both are counted
//!    the same way: by wirescope's `xdp` sink on the receiving veth, which
//!    drops at the earliest point (frames counted / seconds the tool sent).
//! 2. Sink efficiency: every sink mode with the generator flat out, then
//!    at one offered load the generator sustains against every mode (80 %
//!    of the slowest flat-out run), counted against what was sent, what
//!    `xdp` counted, and the interface's rx_packets. On veth the receive side's kernel work (XDP, the
//!    copy into the AF_XDP UMEM or the TPACKET ring) runs in the NAPI poll
//!    on the *sending* core, so a costlier mode slows the generator down:
//!    the flat-out table shows that, and whether the sink still counted
//!    everything that arrived.
//! 3. The frame-size sweep (64-1518) and a `cores=0;1;0,1` sweep, printed
//!    as `wirescope sink-lab --sweep` prints them.
//!
//! The engine is driven through the hidden `wirescope sink-lab` (both ends
//! in one process, each in its namespace: the same engine `run --engine
//! sink` runs over a session, without the control round trips, so trafgen
//! and wirescope's generator are counted the same way). Numbers are
//! printed, never asserted.

use super::stats::{list, median, ratio};
use super::{table, Common, SETTLE};
use crate::cmd::{self, command};
use crate::netns::{NetnsPair, Side};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// `bench sink` options.
#[derive(Debug, Args)]
pub struct SinkArgs {
    #[command(flatten)]
    common: Common,
}

/// What `sink-lab --json` says about one point.
#[derive(Debug, Clone, Copy, Default)]
struct Point {
    counted: f64,
    rate: f64,
    sent: f64,
    gen_pps: f64,
    lost: f64,
    iface_rx: f64,
    cpu: f64,
}

fn parse_summary(json: &str) -> Result<(Point, serde_json::Value)> {
    let line = json
        .lines()
        .rev()
        .find(|l| l.contains("\"type\":\"summary\""))
        .context("sink-lab printed no summary")?;
    let v: serde_json::Value = serde_json::from_str(line).context("parsing the summary")?;
    let f = |k: &str| v.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
    Ok((
        Point {
            counted: f("messages"),
            rate: f("rate_per_s"),
            sent: f("sent"),
            gen_pps: f("generator_pps"),
            lost: f("lost"),
            iface_rx: f("iface_rx_packets"),
            cpu: f("sink_cpu_pct"),
        },
        v,
    ))
}

fn lab(ws: &Path, pair: &NetnsPair, args: &[&str]) -> Command {
    let mut c = command(&ws.to_string_lossy(), ["sink-lab"]);
    c.args([
        "--sink-netns",
        pair.name(Side::B),
        "--sink-iface",
        "veth-b",
        "--json",
    ])
    .args(args);
    c
}

fn with_gen(ws: &Path, pair: &NetnsPair, args: &[&str]) -> Command {
    let mut c = lab(ws, pair, args);
    c.args(["--gen-netns", pair.name(Side::A), "--gen-iface", "veth-a"]);
    c
}

fn run_lab(mut c: Command) -> Result<(Point, serde_json::Value)> {
    let what = cmd::describe(&c);
    parse_summary(&cmd::output(&mut c)?).with_context(|| format!("`{what}`"))
}

/// Run the benchmark and print the tables.
pub fn run(ws: &Path, args: &SinkArgs) -> Result<()> {
    if !cmd::is_installed("trafgen") {
        bail!("trafgen is not installed: apt-get install netsniff-ng");
    }
    let c = args.common;
    let pair = NetnsPair::create()?;
    eprintln!("xtask: namespaces {}", pair.describe());
    let t = format!("{}s", c.time);
    generator_vs_trafgen(ws, &pair, c, &t)?;
    efficiency(ws, &pair, &t)?;
    sweeps(ws, &pair, &t)?;
    Ok(())
}

fn mac(pair: &NetnsPair, side: Side, dev: &str) -> Result<String> {
    let out = cmd::output(&mut command(
        "ip",
        ["-n", pair.name(side), "link", "show", "dev", dev],
    ))?;
    out.split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .map(String::from)
        .with_context(|| format!("no MAC address for {dev}"))
}

/// trafgen for `secs` on cpu0 while an xdp sink counts on veth-b: frames/s.
fn trafgen_round(ws: &Path, pair: &NetnsPair, conf: &Path, secs: u64) -> Result<f64> {
    let sink_time = format!("{}s", secs + 2);
    // The xdp sink counts only frames from the sender it is told, to one of
    // wirescope's ports, that look like its own (the config's "WS" stamp).
    let sink = lab(
        ws,
        pair,
        &["--sink", "xdp", "-t", &sink_time, "--from-ip", "198.18.0.1"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .context("starting the counting sink")?;
    // The sink attaches XDP within milliseconds; give it a moment.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let start = Instant::now();
    let mut tg = pair.command(Side::A, "timeout");
    tg.args([
        "-s",
        "INT",
        &secs.to_string(),
        "trafgen",
        "--dev",
        "veth-a",
        "--conf",
    ])
    .arg(conf)
    .args(["--cpus", "1", "--cpu", "0", "--no-cpu-stats"]);
    let out = tg
        .stdin(Stdio::null())
        .output()
        .context("running trafgen")?;
    let elapsed = start.elapsed().as_secs_f64();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let sink_out = sink.wait_with_output().context("waiting for the sink")?;
    let (p, _) = parse_summary(&String::from_utf8_lossy(&sink_out.stdout))?;
    let sent: f64 = text
        .lines()
        .find(|l| l.contains("packets outgoing"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("trafgen printed no packet count:\n{text}"))?;
    if p.counted < 0.99 * sent {
        eprintln!(
            "xtask: note: the sink counted {} of trafgen's {sent} frames",
            p.counted
        );
    }
    Ok(p.counted / elapsed.min(secs as f64).max(1e-9))
}

fn generator_vs_trafgen(ws: &Path, pair: &NetnsPair, c: Common, t: &str) -> Result<()> {
    let conf = crate::target_dir()
        .join("xtask-bench")
        .join("trafgen-64.cfg");
    std::fs::create_dir_all(conf.parent().unwrap_or(Path::new(".")))?;
    std::fs::write(
        &conf,
        format!(
            "{{\n  eth(da={}, sa={}, type=0x0800),\n  ipv4(sa=198.18.0.1, da=198.18.0.2, ttl=64, df),\n  udp(sp=32768, dp=5310),\n  \"WS\",\n  fill(0x00, 16)\n}}\n",
            mac(pair, Side::B, "veth-b")?,
            mac(pair, Side::A, "veth-a")?
        ),
    )
    .with_context(|| format!("writing {}", conf.display()))?;
    let paths = ["tx-ring", "af-xdp"];
    let mut ours: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
    let mut theirs = Vec::new();
    for round in 1..=c.rounds {
        for (i, path) in paths.iter().enumerate() {
            let (p, _) = run_lab(with_gen(
                ws,
                pair,
                &[
                    "--sink",
                    "xdp",
                    "--tx-path",
                    path,
                    "--queues",
                    "1",
                    "--cpus",
                    "0",
                    "-t",
                    t,
                ],
            ))?;
            eprintln!(
                "xtask: round {round} wirescope {path}: {:.0} pps (sink counted {:.0} of {:.0})",
                p.gen_pps, p.counted, p.sent
            );
            ours[i].push(p.gen_pps);
            std::thread::sleep(SETTLE);
        }
        let tg = trafgen_round(ws, pair, &conf, c.time)?;
        eprintln!("xtask: round {round} trafgen: {tg:.0} pps");
        theirs.push(tg);
        std::thread::sleep(SETTLE);
    }
    let base = median(&theirs);
    println!("== bench sink: generator, 64 B frames, one thread on cpu0, counted by the xdp sink on veth-b ==");
    println!(
        "{} round(s) x {} s, alternating; ratio = median / median(trafgen)\n",
        c.rounds, c.time
    );
    let mut rows: Vec<Vec<String>> = paths
        .iter()
        .zip(&ours)
        .map(|(p, v)| {
            let m = median(v);
            vec![
                format!("wirescope {p}"),
                format!("{m:.0}"),
                ratio(m, base),
                list(v, 0),
            ]
        })
        .collect();
    rows.push(vec![
        "trafgen (TX_RING, qdisc bypass)".into(),
        format!("{base:.0}"),
        "1.00".into(),
        list(&theirs, 0),
    ]);
    print!(
        "{}",
        table::render(&["generator", "median pps", "ratio", "rounds pps"], &rows)
    );
    println!();
    Ok(())
}

fn efficiency(ws: &Path, pair: &NetnsPair, t: &str) -> Result<()> {
    let gen = ["--queues", "1", "--cpus", "0", "--peer-cpus", "1", "-t", t];
    // Flat out first: what the generator reaches against each mode (on veth
    // the receive work runs on the sending core, so it differs per mode).
    let flat = efficiency_table(ws, pair, &gen, None, "the generator flat out")?;
    let floor = flat.iter().cloned().fold(f64::INFINITY, f64::min);
    let rate = ((floor * 0.8) as u64).max(1000).to_string();
    efficiency_table(
        ws,
        pair,
        &gen,
        Some(&rate),
        &format!("the same offered load ({rate} pps = 80 % of the slowest flat-out run above)"),
    )?;
    Ok(())
}

fn efficiency_table(
    ws: &Path,
    pair: &NetnsPair,
    gen: &[&str],
    rate: Option<&str>,
    load: &str,
) -> Result<Vec<f64>> {
    let mut gen_pps = Vec::new();
    let mut rows = Vec::new();
    let mut xdp_counted = 0.0;
    for mode in ["xdp", "af-xdp", "tpacket"] {
        let mut a = vec!["--sink", mode];
        if let Some(r) = rate {
            a.extend(["--rate", r]);
        }
        a.extend(gen);
        let (p, _) = run_lab(with_gen(ws, pair, &a))?;
        if mode == "xdp" {
            xdp_counted = p.rate;
        }
        gen_pps.push(p.gen_pps);
        rows.push(vec![
            mode.to_string(),
            format!("{:.0}", p.rate),
            format!("{:.0}", p.sent),
            format!("{:.0}", p.counted),
            format!("{:.0}", p.lost),
            ratio(p.counted, p.sent),
            ratio(p.rate, xdp_counted),
            ratio(p.counted, p.iface_rx),
            if mode == "xdp" {
                "-".into()
            } else {
                format!("{:.0}", p.cpu)
            },
        ]);
        std::thread::sleep(SETTLE);
    }
    println!("== bench sink: sink efficiency at {load}, 64 B, generator cpu0, sink cpu1 ==\n");
    print!(
        "{}",
        table::render(
            &[
                "sink",
                "pps counted",
                "sent",
                "counted",
                "lost",
                "counted/sent",
                "pps/xdp",
                "counted/rx_packets",
                "sink CPU %"
            ],
            &rows
        )
    );
    println!();
    Ok(gen_pps)
}

fn sweeps(ws: &Path, pair: &NetnsPair, t: &str) -> Result<()> {
    for (title, sweep, extra) in [
        (
            "frame-size sweep, af-xdp sink on cpu1, generator cpu0",
            "frame=64,128,256,512,1024,1280,1518",
            vec!["--cpus", "0", "--peer-cpus", "1"],
        ),
        (
            "cores sweep (sink and generator threads on the listed cores), af-xdp sink, 64 B",
            "cores=0;1;0,1",
            vec![],
        ),
    ] {
        let mut c = with_gen(
            ws,
            pair,
            &[
                &["--sink", "af-xdp", "--sweep", sweep, "-t", t][..],
                &extra[..],
            ]
            .concat(),
        );
        let out = cmd::output(&mut c)?;
        let mut rows = Vec::new();
        for l in out.lines().filter(|l| l.contains("\"type\":\"summary\"")) {
            let v: serde_json::Value = serde_json::from_str(l)?;
            let f = |k: &str| v.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
            let cores = v
                .get("sink_cpus")
                .and_then(|c| c.as_array())
                .map(|a| {
                    a.iter()
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "-".into());
            rows.push(vec![
                format!("{:.0}", f("queues")),
                cores,
                format!("{:.0}", f("frame_size")),
                format!("{:.0}", f("rate_per_s")),
                format!("{:.1}", f("l2_bps") / 1e6),
                format!("{:.1}", f("l1_bps") / 1e6),
                v.get("sink_cpu_pct")
                    .and_then(|c| c.as_f64())
                    .map_or("-".into(), |c| format!("{c:.1}")),
                format!("{:.0}", f("lost")),
                where_lost(&v),
            ]);
        }
        println!("== bench sink: {title} ==\n");
        print!(
            "{}",
            table::render(
                &[
                    "threads", "core ids", "frame", "pps", "L2 Mbps", "L1 Mbps", "CPU %", "lost",
                    "where"
                ],
                &rows
            )
        );
        println!();
        std::thread::sleep(SETTLE);
    }
    Ok(())
}

/// The non-zero drop counters of a summary, `name=count` (or "-").
fn where_lost(v: &serde_json::Value) -> String {
    let mut out = Vec::new();
    if let Some(d) = v.get("drops").and_then(|d| d.as_object()) {
        for (k, x) in d {
            match x {
                serde_json::Value::Number(n) if n.as_u64().unwrap_or(0) > 0 => {
                    out.push(format!("{k}={n}"))
                }
                serde_json::Value::Object(m) => {
                    for (name, n) in m {
                        if n.as_u64().unwrap_or(0) > 0 {
                            out.push(format!("{k}.{name}={n}"));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    if out.is_empty() {
        "-".into()
    } else {
        out.join(" ")
    }
}

//! `cargo xtask bench sink`: the packet engine on the lab's veth pair,
//! driven by `wirescope run --engine sink` against the lab's agent (the
//! generator in side A, the sink in side B), as the other benchmarks drive
//! `run`.
//!
//! 1. Generator, 64 B, one thread pinned to cpu0: wirescope's (each path)
//!    against `trafgen` (netsniff-ng; its fastest mode: PACKET_TX_RING with
//!    the qdisc bypassed, the default), alternating rounds. wirescope's
//!    frames are counted by its `xdp` sink on veth-b, which drops at the
//!    earliest point; trafgen's by an nftables counter at veth-b's ingress
//!    that drops them there (frames counted / seconds the tool sent).
//! 2. Sink efficiency: every sink mode with the generator flat out, then
//!    at one offered load the generator sustains against every mode (80 %
//!    of the slowest flat-out run), counted against what was sent, what
//!    `xdp` counted, and the interface's rx_packets. On veth the receive
//!    side's kernel work (XDP, the copy into the AF_XDP UMEM or the TPACKET
//!    ring) runs in the NAPI poll on the *sending* core, so a costlier mode
//!    slows the generator down: the flat-out table shows that, and whether
//!    the sink still counted everything that arrived.
//! 3. The frame-size sweep (64-1518) and a `cores=0;1;0,1` sweep, one row
//!    per point of `run --sweep`.
//!
//! Numbers are printed, never asserted.

use super::lab::Lab;
use super::stats::{list, median, ratio};
use super::{table, Common, SETTLE};
use crate::cmd;
use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

/// `bench sink` options.
#[derive(Debug, Args)]
pub struct SinkArgs {
    #[command(flatten)]
    common: Common,
}

/// What one point's summary (`run --json`, its `sink` key) says.
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

/// The `sink` object of every point's summary, in order; a summary that
/// carries an error fails.
fn sink_summaries(json: &str) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for line in json.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).context("wirescope --json output is not JSON")?;
        if let Some(err) = v.get("error").and_then(Value::as_str) {
            bail!("wirescope reported an error: {err}");
        }
        out.push(
            v.get("sink")
                .cloned()
                .context("the summary has no sink key")?,
        );
    }
    if out.is_empty() {
        bail!("wirescope printed no summary");
    }
    Ok(out)
}

fn number(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

fn point(v: &Value) -> Point {
    Point {
        counted: number(v, "messages"),
        rate: number(v, "rate_per_s"),
        sent: number(v, "sent"),
        gen_pps: number(v, "generator_pps"),
        lost: number(v, "lost"),
        iface_rx: number(v, "iface_rx_packets"),
        cpu: number(v, "sink_cpu_pct"),
    }
}

/// `wirescope run --engine sink ARGS` on the lab; its one point.
fn run_point(lab: &Lab, args: &[&str]) -> Result<Point> {
    let all = [&["--engine", "sink", "--ebpf", "off"][..], args].concat();
    let (json, what) = lab.wirescope_json(&all)?;
    let sinks = sink_summaries(&json).with_context(|| format!("`{what}`"))?;
    Ok(point(&sinks[0]))
}

/// Run the benchmark and print the tables.
pub fn run(lab: &Lab, args: &SinkArgs) -> Result<()> {
    if !cmd::is_installed("trafgen") {
        bail!("trafgen is not installed: apt-get install netsniff-ng");
    }
    if !cmd::is_installed("nft") {
        bail!("nft is not installed (it counts trafgen's frames): apt-get install nftables");
    }
    let c = args.common;
    let t = format!("{}s", c.time);
    generator_vs_trafgen(lab, c, &t)?;
    efficiency(lab, &t)?;
    sweeps(lab, &t)?;
    Ok(())
}

fn mac(lab: &Lab, side_b: bool, dev: &str) -> Result<String> {
    let mut ip = if side_b {
        lab.server("ip")
    } else {
        lab.client("ip")
    };
    let out = cmd::output(ip.args(["link", "show", "dev", dev]))?;
    out.split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .map(String::from)
        .with_context(|| format!("no MAC address for {dev}"))
}

/// An nftables table in side B that counts and drops the packet test's
/// frames at veth-b's ingress, before the stack (trafgen's frames would
/// otherwise cost an ICMP reply each); removed on drop.
struct IngressCounter<'a> {
    lab: &'a Lab,
}

const NFT_TABLE: &str = "ws_bench_sink";

impl<'a> IngressCounter<'a> {
    fn install(lab: &'a Lab) -> Result<Self> {
        let port = wirescope::traffic::sink::spec::DEFAULT_DST_PORT.to_string();
        let steps: [&[&str]; 3] = [
            &["add", "table", "netdev", NFT_TABLE],
            &[
                "add", "chain", "netdev", NFT_TABLE, "c", "{", "type", "filter", "hook", "ingress",
                "device", "veth-b", "priority", "0", ";", "}",
            ],
            &[
                "add", "rule", "netdev", NFT_TABLE, "c", "udp", "dport", &port, "counter", "drop",
            ],
        ];
        let counter = IngressCounter { lab };
        for args in steps {
            cmd::run(lab.server("nft").args(args)).context("installing the nftables counter")?;
        }
        Ok(counter)
    }

    /// Frames counted (and dropped) so far.
    fn packets(&self) -> Result<f64> {
        let out = cmd::output(
            self.lab
                .server("nft")
                .args(["list", "table", "netdev", NFT_TABLE]),
        )?;
        out.split_whitespace()
            .skip_while(|w| *w != "packets")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("no packet count in the nftables counter:\n{out}"))
    }
}

impl Drop for IngressCounter<'_> {
    fn drop(&mut self) {
        let mut nft = self.lab.server("nft");
        nft.args(["delete", "table", "netdev", NFT_TABLE]);
        let _ = cmd::run(&mut nft);
    }
}

/// trafgen for `secs` on cpu0, counted at veth-b's ingress: frames/s.
fn trafgen_round(lab: &Lab, conf: &Path, secs: u64) -> Result<f64> {
    let counter = IngressCounter::install(lab)?;
    let start = Instant::now();
    let mut tg = lab.client("timeout");
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
    let counted = counter.packets()?;
    let sent: f64 = text
        .lines()
        .find(|l| l.contains("packets outgoing"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("trafgen printed no packet count:\n{text}"))?;
    if counted < 0.99 * sent {
        eprintln!("xtask: note: veth-b counted {counted} of trafgen's {sent} frames");
    }
    Ok(counted / elapsed.min(secs as f64).max(1e-9))
}

/// trafgen's configuration: 64 B frames shaped like wirescope's (a flow's
/// ports, the "WS" stamp), from side A's MAC to side B's.
fn trafgen_conf(lab: &Lab) -> Result<std::path::PathBuf> {
    let conf = crate::target_dir()
        .join("xtask-bench")
        .join("trafgen-64.cfg");
    std::fs::create_dir_all(conf.parent().unwrap_or(Path::new(".")))?;
    std::fs::write(
        &conf,
        format!(
            "{{\n  eth(da={}, sa={}, type=0x0800),\n  ipv4(sa=198.18.0.1, da=198.18.0.2, ttl=64, df),\n  udp(sp=32768, dp=5310),\n  \"WS\",\n  fill(0x00, 16)\n}}\n",
            mac(lab, true, "veth-b")?,
            mac(lab, false, "veth-a")?
        ),
    )
    .with_context(|| format!("writing {}", conf.display()))?;
    Ok(conf)
}

fn generator_vs_trafgen(lab: &Lab, c: Common, t: &str) -> Result<()> {
    let conf = trafgen_conf(lab)?;
    let paths = ["tx-ring", "af-xdp"];
    let mut ours: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
    let mut theirs = Vec::new();
    for round in 1..=c.rounds {
        for (i, path) in paths.iter().enumerate() {
            let args = ["--sink", "xdp", "--tx-path", path, "--queues", "1"];
            let p = run_point(lab, &[&args[..], &["--cpus", "0", "-t", t]].concat())?;
            eprintln!(
                "xtask: round {round} wirescope {path}: {:.0} pps (sink counted {:.0} of {:.0})",
                p.gen_pps, p.counted, p.sent
            );
            ours[i].push(p.gen_pps);
            std::thread::sleep(SETTLE);
        }
        let tg = trafgen_round(lab, &conf, c.time)?;
        eprintln!("xtask: round {round} trafgen: {tg:.0} pps");
        theirs.push(tg);
        std::thread::sleep(SETTLE);
    }
    let base = median(&theirs);
    println!("== bench sink: generator, 64 B frames, one thread on cpu0, counted on arrival at veth-b ==");
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

fn efficiency(lab: &Lab, t: &str) -> Result<()> {
    let gen = ["--queues", "1", "--cpus", "0", "--peer-cpus", "1", "-t", t];
    // Flat out first: what the generator reaches against each mode (on veth
    // the receive work runs on the sending core, so it differs per mode).
    let flat = efficiency_table(lab, &gen, None, "the generator flat out")?;
    let floor = flat.iter().cloned().fold(f64::INFINITY, f64::min);
    let rate = ((floor * 0.8) as u64).max(1000).to_string();
    efficiency_table(
        lab,
        &gen,
        Some(&rate),
        &format!("the same offered load ({rate} pps = 80 % of the slowest flat-out run above)"),
    )?;
    Ok(())
}

fn efficiency_table(lab: &Lab, gen: &[&str], rate: Option<&str>, load: &str) -> Result<Vec<f64>> {
    let mut gen_pps = Vec::new();
    let mut rows = Vec::new();
    let mut xdp_counted = 0.0;
    for mode in ["xdp", "af-xdp", "tpacket"] {
        let mut a = vec!["--sink", mode];
        if let Some(r) = rate {
            a.extend(["--rate", r]);
        }
        a.extend(gen);
        let p = run_point(lab, &a)?;
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
    let header = [
        "sink",
        "pps counted",
        "sent",
        "counted",
        "lost",
        "counted/sent",
        "pps/xdp",
        "counted/rx_packets",
        "sink CPU %",
    ];
    print!("{}", table::render(&header, &rows));
    println!();
    Ok(gen_pps)
}

fn sweeps(lab: &Lab, t: &str) -> Result<()> {
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
        let base = ["--engine", "sink", "--ebpf", "off", "--sink", "af-xdp"];
        let args = [&base[..], &["--sweep", sweep, "-t", t], &extra[..]].concat();
        let (json, what) = lab.wirescope_json(&args)?;
        let rows: Vec<Vec<String>> = sink_summaries(&json)
            .with_context(|| format!("`{what}`"))?
            .iter()
            .map(sweep_row)
            .collect();
        println!("== bench sink: {title} ==\n");
        let header = [
            "threads", "core ids", "frame", "pps", "L2 Mbps", "L1 Mbps", "CPU %", "lost", "where",
        ];
        print!("{}", table::render(&header, &rows));
        println!();
        std::thread::sleep(SETTLE);
    }
    Ok(())
}

/// One sweep point's row.
fn sweep_row(v: &Value) -> Vec<String> {
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
    vec![
        format!("{:.0}", number(v, "queues")),
        cores,
        format!("{:.0}", number(v, "frame_size")),
        format!("{:.0}", number(v, "rate_per_s")),
        format!("{:.1}", number(v, "l2_bps") / 1e6),
        format!("{:.1}", number(v, "l1_bps") / 1e6),
        v.get("sink_cpu_pct")
            .and_then(|c| c.as_f64())
            .map_or("-".into(), |c| format!("{c:.1}")),
        format!("{:.0}", number(v, "lost")),
        where_lost(v),
    ]
}

/// The non-zero drop counters of a summary, `name=count` (or "-").
fn where_lost(v: &Value) -> String {
    let mut out = Vec::new();
    if let Some(d) = v.get("drops").and_then(|d| d.as_object()) {
        for (k, x) in d {
            match x {
                Value::Number(n) if n.as_u64().unwrap_or(0) > 0 => out.push(format!("{k}={n}")),
                Value::Object(m) => {
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

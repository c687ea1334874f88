//! `cargo xtask bench fleet`: what coordinating a fleet costs. Builds
//! `nodes` agents in namespaces on a bridge (and the coordinator in one
//! more), runs `wirescope fleet --pattern all-pairs` (and a ring) over them,
//! and prints the wall time against the sum of the rounds' test lengths —
//! the overhead per round (goal ≤ 1.5 s) — and the coordinator's CPU time
//! and peak memory (its process's rusage). Every node's egress is capped
//! (htb, `--line-rate`) so the figures do not depend on how two shared cores
//! split the tests of a round. Namespaces and agents go away on every exit.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `bench fleet` options.
#[derive(Debug, Args)]
pub struct FleetArgs {
    /// Agents (namespaces).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(2..=64))]
    nodes: u32,
    /// Length of each pair test (wirescope duration, e.g. 2s).
    #[arg(long, short = 't', default_value = "2s")]
    time: String,
    /// Every node's egress cap (tc htb rate).
    #[arg(long, default_value = "1gbit")]
    line_rate: String,
}

const TOKEN: &str = "wirescope-bench-fleet-token-0123456789";

struct Nodes {
    names: Vec<String>,
    agents: Vec<Child>,
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for a in &mut self.agents {
            let _ = a.kill();
            let _ = a.wait();
        }
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn sh(args: &[&str]) -> Result<()> {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .with_context(|| format!("run {}", args.join(" ")))?;
    if !o.status.success() {
        bail!("{}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr));
    }
    Ok(())
}

fn addr(i: usize) -> String {
    format!("10.97.0.{}", i + 1)
}

fn setup(wirescope: &Path, n: usize, rate: &str) -> Result<Nodes> {
    let id = std::process::id();
    let sw = format!("wsb-{id}-sw");
    let coord = format!("wsb-{id}-c");
    let mut nodes = Nodes {
        names: vec![sw.clone()],
        agents: Vec::new(),
    };
    sh(&["ip", "netns", "add", &sw])?;
    sh(&["ip", "-n", &sw, "link", "add", "br0", "type", "bridge"])?;
    sh(&["ip", "-n", &sw, "link", "set", "br0", "up"])?;
    for i in 0..=n {
        let (ns, a) = if i == n {
            (coord.clone(), "10.97.0.254".to_string())
        } else {
            (format!("wsb-{id}-{i}"), addr(i))
        };
        nodes.names.push(ns.clone());
        let port = format!("p{i}");
        sh(&["ip", "netns", "add", &ns])?;
        sh(&[
            "ip", "link", "add", "eth0", "netns", &ns, "type", "veth", "peer", "name", &port,
            "netns", &sw,
        ])?;
        sh(&["ip", "-n", &sw, "link", "set", &port, "master", "br0"])?;
        sh(&["ip", "-n", &sw, "link", "set", &port, "up"])?;
        sh(&[
            "ip",
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{a}/24"),
            "dev",
            "eth0",
        ])?;
        sh(&["ip", "-n", &ns, "link", "set", "eth0", "up"])?;
        sh(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
        if i == n {
            continue;
        }
        sh(&[
            "ip", "netns", "exec", &ns, "tc", "qdisc", "replace", "dev", "eth0", "root", "handle",
            "1:", "htb", "default", "10",
        ])?;
        sh(&[
            "ip", "netns", "exec", &ns, "tc", "class", "replace", "dev", "eth0", "parent", "1:",
            "classid", "1:10", "htb", "rate", rate,
        ])?;
        let child = Command::new("ip")
            .args(["netns", "exec", &ns])
            .arg(wirescope)
            .args(["agent", "-q", "--listen", &format!("{a}:5310")])
            .env("WIRESCOPE_TOKEN", TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("start an agent")?;
        nodes.agents.push(child);
    }
    // Every agent listens before the fleet starts.
    let t = Instant::now();
    for i in 0..n {
        loop {
            let up = Command::new("ip")
                .args(["netns", "exec", &coord, "bash", "-c"])
                .arg(format!("exec 3<>/dev/tcp/{}/5310", addr(i)))
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if up {
                break;
            }
            if t.elapsed() > Duration::from_secs(20) {
                bail!("agent {i} does not listen after 20 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(nodes)
}

/// Wait for `child` and return its rusage (with the descendants it waited
/// for: `ip netns exec` forks the coordinator): CPU seconds and peak RSS
/// (MiB) of the largest.
fn wait_usage(child: &std::process::Child) -> Result<(f64, f64)> {
    // SAFETY: a zeroed rusage is a valid out-parameter for wait4.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let mut status = 0;
    // SAFETY: the pid is our own unwaited child; both pointers are valid.
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    if r < 0 {
        bail!("wait4: {}", std::io::Error::last_os_error());
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok((
        s(ru.ru_utime) + s(ru.ru_stime),
        ru.ru_maxrss as f64 / 1024.0,
    ))
}

fn one(
    wirescope: &Path,
    coord: &str,
    hosts: &str,
    pattern: &str,
    time: &str,
    log: &Path,
) -> Result<()> {
    let t = Instant::now();
    let mut child = Command::new("ip")
        .args(["netns", "exec", coord])
        .arg(wirescope)
        .args(["fleet", "--hosts", hosts, "--pattern", pattern, "-t", time])
        .args(["--ebpf", "off", "--json", "--log"])
        .arg(log)
        .env("WIRESCOPE_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("run wirescope fleet")?;
    let mut stdout = Vec::new();
    if let Some(mut o) = child.stdout.take() {
        std::io::Read::read_to_end(&mut o, &mut stdout).context("read the fleet's summary")?;
    }
    let (cpu, rss) = wait_usage(&child)?;
    let wall = t.elapsed().as_secs_f64();
    let s: serde_json::Value = serde_json::from_slice(&stdout)
        .context("fleet printed no summary (run it by hand to see why)")?;
    let rounds = s["rounds_run"].as_f64().unwrap_or(0.0);
    let tests = s["test_s"].as_f64().unwrap_or(0.0);
    let pairs = s["pairs_run"].as_u64().unwrap_or(0);
    let failed = s["failed"].as_array().map_or(0, Vec::len);
    println!(
        "fleet {pattern}: {pairs} pairs in {rounds:.0} rounds, wall {wall:.1} s, tests {tests:.1} s, overhead {:.2} s per round (goal ≤ 1.5 s); {failed} failed",
        if rounds > 0.0 { (wall - tests) / rounds } else { 0.0 }
    );
    println!(
        "fleet {pattern}: coordinator CPU {cpu:.2} s ({:.1} % of the wall time), peak RSS {rss:.0} MiB",
        100.0 * cpu / wall
    );
    Ok(())
}

/// Run the benchmark.
pub fn run(wirescope: &Path, args: &FleetArgs) -> Result<()> {
    let n = args.nodes as usize;
    let nodes = setup(wirescope, n, &args.line_rate)?;
    let coord = nodes.names.last().cloned().unwrap_or_default();
    let hosts: Vec<String> = (0..n).map(addr).collect();
    let hosts = hosts.join(",");
    let dir = std::env::temp_dir().join(format!("wirescope-bench-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).context("create a temporary directory")?;
    println!(
        "{n} agents in namespaces, egress {} each, {} per test, both directions in turn, eBPF off",
        args.line_rate, args.time
    );
    let r = one(
        wirescope,
        &coord,
        &hosts,
        "all-pairs",
        &args.time,
        &dir.join("all.jsonl"),
    )
    .and_then(|()| {
        one(
            wirescope,
            &coord,
            &hosts,
            "ring",
            &args.time,
            &dir.join("ring.jsonl"),
        )
    });
    drop(nodes);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

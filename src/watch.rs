//! `wirescope watch` and `wirescope capture`: observing without traffic.
//!
//! `watch` samples this host (and with `--peer`, the agent's host through the
//! same tick/sample protocol a test uses, with no engine) and writes the same
//! records as `run`. `watch --from DIR` reads a captured directory or a real
//! sosreport through the same probes and prints facts and counters once
//! (no rates: a snapshot has no interval). `capture DIR` writes that layout.

use crate::cli::{resolve_peer, CaptureArgs, WatchArgs};
use crate::diagnose::live::LiveDiagnosis;
use crate::headless::{out, spawn_signal_handler, EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::probe::ethtool_names::{per_queue, QueueCounters};
use crate::probe::facts::{HostFacts, Support};
use crate::probe::nic::{parse_net_dev, DevCounters};
use crate::probe::sampler::Sampler;
use crate::probe::softirq::{parse_softirqs, parse_softnet, Softnet};
use crate::probe::{capture_dir::CaptureDir, live_host::LiveHost, source::HostSource};
use crate::probe::system::{online_cpu_ids, read_host_facts};
use crate::record::log::LogWriter;
use crate::record::schema::{Header, Hosts, Record, SCHEMA_VERSION};
use crate::record::text;
use crate::session::auth::load_token;
use crate::session::controller::{Controller, EndReason, PointParams, RunEvent, Target};
use crate::units::CpuId;
use anyhow::Context;
use serde::Serialize;
use std::collections::BTreeMap;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The interface of the default route (IPv4 then IPv6), from /proc/net/route
/// and /proc/net/ipv6_route; no packet is sent.
pub fn default_route_iface(src: &dyn HostSource) -> Option<String> {
    let v4 = src.read("/proc/net/route").ok().and_then(|t| {
        t.lines().skip(1).find_map(|l| {
            let w: Vec<&str> = l.split_ascii_whitespace().collect();
            (w.get(1) == Some(&"00000000") && w.get(7) == Some(&"00000000"))
                .then(|| w[0].to_string())
        })
    });
    v4.or_else(|| {
        src.read("/proc/net/ipv6_route").ok().and_then(|t| {
            t.lines().find_map(|l| {
                let w: Vec<&str> = l.split_ascii_whitespace().collect();
                (w.first() == Some(&"00000000000000000000000000000000")
                    && w.get(1) == Some(&"00")
                    && w.get(9) != Some(&"lo"))
                .then(|| w.get(9).map(|s| s.to_string()))?
            })
        })
    })
}

/// A captured host, read once.
#[derive(Debug, Serialize)]
pub struct Snapshot {
    /// Where it was read from.
    pub source: String,
    /// Facts.
    pub facts: HostFacts,
    /// /proc/net/dev per interface under inspection.
    pub ifaces: BTreeMap<String, DevCounters>,
    /// Per-queue counters from `ethtool -S`, per interface.
    pub queues: BTreeMap<String, Vec<QueueCounters>>,
    /// Device-wide (and unrecognised) `ethtool -S` counters, per interface.
    pub nic_counters: BTreeMap<String, Vec<(String, u64)>>,
    /// softnet_stat per CPU.
    pub softnet: Vec<(CpuId, Softnet)>,
    /// /proc/softirqs: vector → count per CPU.
    pub softirqs: BTreeMap<String, Vec<u64>>,
}

/// Interfaces of a directory: the given ones, else every one with a sysfs entry or an `ethtool -i` file.
pub(crate) fn dir_ifaces(dir: &CaptureDir, given: &[String]) -> Vec<String> {
    if !given.is_empty() {
        return given.to_vec();
    }
    let mut v: Vec<String> = dir.list("/sys/class/net").unwrap_or_default();
    if v.is_empty() {
        v = dir
            .list("/sos_commands/networking")
            .unwrap_or_default()
            .iter()
            .filter_map(|f| f.strip_prefix("ethtool_-i_").map(String::from))
            .collect();
    }
    v.retain(|n| n != "lo");
    v
}

/// Read facts and counters of a captured directory.
pub fn snapshot(dir: &CaptureDir, given: &[String]) -> Snapshot {
    let ifaces = dir_ifaces(dir, given);
    let facts = read_host_facts(dir, &ifaces);
    let dev = dir
        .read("/proc/net/dev")
        .map(|t| parse_net_dev(&t))
        .unwrap_or_default();
    let mut s = Snapshot {
        source: dir.describe(),
        ifaces: dev
            .into_iter()
            .filter(|(n, _)| ifaces.contains(n))
            .collect(),
        queues: BTreeMap::new(),
        nic_counters: BTreeMap::new(),
        softnet: dir
            .read("/proc/net/softnet_stat")
            .map(|t| parse_softnet(&t, &online_cpu_ids(dir)))
            .unwrap_or_default(),
        softirqs: dir
            .read("/proc/softirqs")
            .map(|t| parse_softirqs(&t).vectors)
            .unwrap_or_default(),
        facts,
    };
    for n in &s.facts.nics {
        if let Support::Value(stats) = dir.ethtool_stats(&n.name) {
            let driver = n.drvinfo.value().map(|d| d.driver.as_str()).unwrap_or("");
            let (q, g) = per_queue(driver, &stats);
            s.queues.insert(n.name.clone(), q);
            s.nic_counters.insert(n.name.clone(), g);
        }
    }
    s
}

/// `wirescope capture DIR`.
pub fn capture(args: CaptureArgs) -> anyhow::Result<u8> {
    let ifaces = if args.ifaces.is_empty() {
        crate::probe::capture_writer::default_ifaces()
    } else {
        args.ifaces.clone()
    };
    let r = crate::probe::capture_writer::capture(&args.dir, &ifaces)?;
    eprintln!(
        "wirescope: captured {} files for {} into {}",
        r.files,
        if ifaces.is_empty() {
            "no interface".to_string()
        } else {
            ifaces.join(", ")
        },
        args.dir.display()
    );
    for s in &r.skipped {
        eprintln!("  not captured: {s}");
    }
    eprintln!(
        "read it back with: wirescope watch --from {}",
        args.dir.display()
    );
    Ok(EXIT_OK)
}

/// `wirescope watch`.
pub fn watch(args: WatchArgs, argv: Vec<String>) -> anyhow::Result<u8> {
    if let Some(dir) = &args.from {
        if !dir.is_dir() {
            eprintln!("error: --from {}: not a directory; give a `wirescope capture` directory or an unpacked sosreport", dir.display());
            return Ok(EXIT_USAGE);
        }
        let snap = snapshot(&CaptureDir::new(dir), &args.ifaces);
        if args.json {
            out(&format!("{}\n", serde_json::to_string_pretty(&snap)?));
        } else {
            out(&text::facts_block(&snap.source, &snap.facts));
        }
        return Ok(EXIT_OK);
    }
    if args.interval < std::time::Duration::from_millis(10) {
        eprintln!("error: --interval is too short; use at least 10ms");
        return Ok(EXIT_USAGE);
    }
    let target = match &args.peer {
        Some(p) => match resolve_peer(p) {
            Ok(a) => Some(a),
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(EXIT_USAGE);
            }
        },
        None => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ws-runtime")
        .worker_threads(2)
        .build()?;
    rt.block_on(async move {
        let cancel = CancellationToken::new();
        spawn_signal_handler(cancel.clone());
        let mut log = match &args.log {
            Some(p) => Some(LogWriter::create(p)?),
            None => None,
        };
        match target {
            None => watch_local(&args, argv, &mut log, &cancel).await,
            Some(addr) => watch_pair(&args, argv, addr, &mut log, &cancel).await,
        }
    })
}

fn header(
    argv: Vec<String>,
    peer: crate::probe::system::HostInfo,
    pair: String,
    interval: f64,
    time: Option<f64>,
) -> Header {
    Header {
        schema: SCHEMA_VERSION,
        wirescope: env!("CARGO_PKG_VERSION").into(),
        command_line: argv,
        start_time: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        hosts: Hosts {
            local: crate::probe::system::HostInfo::current(),
            peer,
        },
        pair,
        spec: None,
        time_s: time,
        omit_s: 0.0,
        interval_s: interval,
        sweep: None,
        ebpf: None,
    }
}

/// Log (and print) findings raised or cleared in this interval.
fn report_changes(
    log: &mut Option<LogWriter>,
    json: bool,
    changes: Vec<crate::diagnose::Change>,
) -> anyhow::Result<()> {
    for c in changes {
        if !json {
            out(&text::finding_change(&c));
        }
        emit(log, json, &Record::Finding(Box::new(c)))?;
    }
    Ok(())
}

fn emit(log: &mut Option<LogWriter>, json: bool, rec: &Record) -> anyhow::Result<()> {
    if let Some(l) = log.as_mut() {
        l.write(rec)?;
    }
    if json {
        out(&format!("{}\n", serde_json::to_string(rec)?));
    }
    Ok(())
}

async fn watch_local(
    args: &WatchArgs,
    argv: Vec<String>,
    log: &mut Option<LogWriter>,
    cancel: &CancellationToken,
) -> anyhow::Result<u8> {
    let mut ifaces = args.ifaces.clone();
    if ifaces.is_empty() {
        ifaces.extend(default_route_iface(&LiveHost::default()));
    }
    let mut sampler = Sampler::new(Box::new(LiveHost::default()));
    sampler.set_ebpf(args.ebpf, Vec::new());
    sampler.set_ifaces(&ifaces);
    sampler.begin(None, std::time::Duration::ZERO, args.interval);
    let local = sampler.ebpf_status();
    if !args.json {
        crate::headless::report_ebpf(&local, &None);
    }
    let mut h = header(
        argv,
        Default::default(),
        format!("this host only ({})", ifaces.join(", ")),
        args.interval.as_secs_f64(),
        args.time.map(|t| t.as_secs_f64()),
    );
    h.ebpf = Some(Hosts { local, peer: None });
    emit(log, args.json, &Record::Header(Box::new(h)))?;
    if !args.json {
        out(&format!("{}\n", text::watch_header()));
    }
    let mut ticker =
        tokio::time::interval_at(tokio::time::Instant::now() + args.interval, args.interval);
    let started = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                let s = sampler.sample();
                emit(log, args.json, &Record::Sample(Box::new(s.clone())))?;
                if !args.json {
                    out(&text::watch_row(Some(&s), None));
                }
                if args.time.is_some_and(|t| started.elapsed() + std::time::Duration::from_millis(5) >= t) {
                    return Ok(EXIT_OK);
                }
            }
            _ = cancel.cancelled() => return Ok(EXIT_OK),
        }
    }
}

async fn watch_pair(
    args: &WatchArgs,
    argv: Vec<String>,
    addr: std::net::SocketAddr,
    log: &mut Option<LogWriter>,
    cancel: &CancellationToken,
) -> anyhow::Result<u8> {
    let (token, _) = load_token(args.token_file.as_deref(), false)?;
    let mut ctl = Controller::connect(Target::Tcp(addr), &token)
        .await
        .context("cannot watch the peer")?;
    let (local, peer) = ctl
        .configure_ebpf(args.ebpf, &args.ifaces, Vec::new())
        .await
        .context("cannot configure the peer's eBPF probes")?;
    if !args.json {
        crate::headless::report_ebpf(&local, &peer);
    }
    let mut h = header(
        argv,
        ctl.peer.clone(),
        format!("remote agent {addr}"),
        args.interval.as_secs_f64(),
        args.time.map(|t| t.as_secs_f64()),
    );
    h.ebpf = Some(Hosts { local, peer });
    emit(log, args.json, &Record::Header(Box::new(h)))?;
    if !args.json {
        out(&format!("{}\n", text::watch_header()));
    }
    let pp = PointParams {
        spec: None,
        interval: args.interval,
        omit: std::time::Duration::ZERO,
        time: args.time,
        ifaces: args.ifaces.clone(),
        peer_ifaces: args.peer_ifaces.clone(),
    };
    let (tx, mut rx) = mpsc::channel(64);
    let producer = async {
        let r = ctl.run_point(&pp, &tx, cancel).await;
        drop(tx);
        r
    };
    let consumer = async {
        let mut diag = LiveDiagnosis::default();
        while let Some(RunEvent::Interval { local, peer, .. }) = rx.recv().await {
            for s in local.iter().chain(peer.iter()) {
                emit(log, args.json, &Record::Sample(Box::new(s.clone())))?;
            }
            if !args.json {
                out(&text::watch_row(local.as_ref(), peer.as_ref()));
            }
            report_changes(
                log,
                args.json,
                diag.push(local.as_ref(), peer.as_ref(), None),
            )?;
        }
        anyhow::Ok(())
    };
    let (outcome, consumed) = tokio::join!(producer, consumer);
    consumed?;
    let outcome = outcome?;
    ctl.close().await;
    Ok(match outcome.end {
        // Ctrl-C is how a watch without --time ends: not a failure.
        EndReason::Completed | EndReason::Interrupted => EXIT_OK,
        EndReason::PeerLost(e) | EndReason::Failed(e) => {
            eprintln!("error: {e}");
            EXIT_FAILED
        }
    })
}

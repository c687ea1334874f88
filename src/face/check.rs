//! `wirescope check`: the static audit of one or two hosts (facts only, no traffic).
//!
//! Owns the audit command and its human rendering; the rules themselves are
//! in [`crate::diagnose`] (pure), the facts come from the probes (live host,
//! captured directory, or the peer's first Sample).

use super::{out, FaceError, FaceResult, EXIT_FAILED, EXIT_FINDINGS, EXIT_OK};
use crate::diagnose::{self, Finding, HostRole, Severity};
use crate::probe::capture_dir::CaptureDir;
use crate::probe::facts::HostFacts;
use crate::probe::live_host::LiveHost;
use crate::probe::snapshot::dir_ifaces;
use crate::probe::system::{default_route_iface, read_host_facts};
use std::fmt::Write as _;

/// Audit this host and, when given, the peer (also comparing the two); ranked.
pub fn run_check(facts_local: &HostFacts, facts_peer: Option<&HostFacts>) -> Vec<Finding> {
    let mut out = diagnose::check(facts_local, HostRole::Local);
    if let Some(peer) = facts_peer {
        out.extend(diagnose::check(peer, HostRole::Peer));
        out.extend(diagnose::check_pair(facts_local, peer));
    }
    diagnose::rank(out)
}

/// The highest severity among the findings, if any.
pub fn worst(findings: &[Finding]) -> Option<Severity> {
    findings.iter().map(|f| f.severity).max()
}

/// Human text: one block per finding, most important first.
pub fn render(findings: &[Finding]) -> String {
    let mut s = String::new();
    if findings.is_empty() {
        s.push_str("no findings\n");
        return s;
    }
    for (i, f) in findings.iter().enumerate() {
        let host = f.host.name();
        let _ = writeln!(
            s,
            "{}. [{}] {} ({host}): {}",
            i + 1,
            f.severity,
            f.id,
            f.title
        );
        for e in &f.evidence {
            let unit = if e.unit.is_empty() {
                String::new()
            } else {
                format!(" {}", e.unit)
            };
            let _ = writeln!(s, "     {} = {}{unit}   [{}]", e.what, e.value, e.source);
        }
        if !f.why.is_empty() {
            let _ = writeln!(s, "   why: {}", f.why);
        }
        for x in &f.fix {
            let _ = writeln!(s, "   fix: {x}");
        }
        if !f.reference.is_empty() {
            let _ = writeln!(s, "   see: {}", f.reference);
        }
    }
    let count = |sev| findings.iter().filter(|f| f.severity == sev).count();
    let _ = writeln!(
        s,
        "{} finding(s): {} error, {} warn, {} info",
        findings.len(),
        count(Severity::Error),
        count(Severity::Warn),
        count(Severity::Info)
    );
    s
}

/// `wirescope check`: audit facts only (no traffic) of this host, the peer,
/// or a captured directory. Exit codes: 0, 3 with `--fail-on` when a finding
/// of that level is present, 1 when the peer cannot be read, 2 usage.
pub fn command(args: crate::cli::CheckArgs) -> FaceResult {
    let peer_addr = args
        .peer
        .as_deref()
        .map(crate::cli::resolve_peer)
        .transpose()?;
    let (mut source, local) = this_side(&args, peer_addr)?;
    let peer = match peer_addr {
        None => None,
        Some(addr) => match peer_facts(addr, args.token_file.as_deref()) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!(
                    "error: cannot read the peer's facts: {}",
                    super::error_text(e.as_ref())
                );
                return Ok(EXIT_FAILED);
            }
        },
    };
    let mut findings = run_check(&local, peer.as_ref());
    if let (Some(new), Some(old)) = (&args.from, &args.since) {
        findings = since_capture(old, new, &local, &mut source, findings)?;
    }
    print_check(&args, &source, &local, peer.as_ref(), &findings)?;
    super::stdout_result()?;
    match (args.fail_on, worst(&findings)) {
        (Some(level), Some(w)) if w >= level.severity() => Ok(EXIT_FINDINGS),
        _ => Ok(EXIT_OK),
    }
}

/// The host to audit, and how to name it: a captured directory (`--from`),
/// else this host's interfaces (those given, else the route to the peer's,
/// else the default route's).
fn this_side(
    args: &crate::cli::CheckArgs,
    peer_addr: Option<std::net::SocketAddr>,
) -> Result<(String, HostFacts), FaceError> {
    Ok(match &args.from {
        Some(dir) => {
            if !dir.is_dir() {
                return Err(FaceError::Usage(format!("--from {}: not a directory; give a `wirescope capture` directory or an unpacked sosreport", dir.display())));
            }
            let d = CaptureDir::new(dir);
            let ifaces = dir_ifaces(&d, &args.ifaces);
            let facts = read_host_facts(&d, &ifaces);
            super::watch::report_capture(&d, &facts)?;
            (format!("directory {}", dir.display()), facts)
        }
        None => {
            let live = LiveHost::default();
            let mut ifaces = args.ifaces.clone();
            // With --peer, the interface that carries the pair's traffic
            // (the route to the peer), as `watch --peer` watches; else the
            // default route's.
            if ifaces.is_empty() {
                match peer_addr {
                    Some(a) => ifaces.extend(crate::probe::system::route_iface(a.ip())),
                    None => ifaces.extend(default_route_iface(&live)),
                }
            }
            if ifaces.is_empty() {
                eprintln!("warning: this host has no default route, so no interface is audited; name one with --iface IF (the host-wide settings are still checked)");
            }
            ("this host".to_string(), read_host_facts(&live, &ifaces))
        }
    })
}

/// The findings as JSON or as text, with the interfaces each host's rules
/// audited (the host-wide settings are always checked).
fn print_check(
    args: &crate::cli::CheckArgs,
    source: &str,
    local: &HostFacts,
    peer: Option<&HostFacts>,
    findings: &[Finding],
) -> Result<(), FaceError> {
    // Which interfaces each host's rules audited (the host-wide settings
    // are always checked).
    let names = |f: &HostFacts| f.nics.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
    let listed = |v: &[String]| {
        if v.is_empty() {
            "no interface".to_string()
        } else {
            format!(
                "interface{} {}",
                if v.len() == 1 { "" } else { "s" },
                v.join(", ")
            )
        }
    };
    let (local_ifaces, peer_ifaces) = (names(local), peer.map(names));
    if args.json {
        let j = crate::record::schema::versioned_json(
            &serde_json::json!({
                "source": source,
                "interfaces": { "local": local_ifaces, "peer": peer_ifaces },
                "findings": findings
            }),
            true,
        )
        .map_err(anyhow::Error::from)?;
        out(&format!("{j}\n"));
    } else {
        out(&format!(
            "check of {source} ({}){}\n",
            listed(&local_ifaces),
            peer_ifaces
                .as_deref()
                .map_or(String::new(), |p| format!(" and the peer ({})", listed(p)))
        ));
        out(&render(findings));
    }
    Ok(())
}

/// `--since OLD`: the RDMA rules on what the counters did between two
/// captures of one host join the findings (ranked again), and the source
/// says over what span. The span is the difference of the captured
/// kernel's uptimes (one boot, checked by boot_id), so rates are per second
/// of real time; two captures of different hosts, boots or adapters, or
/// given in the wrong order, are refused with what to do instead.
fn since_capture(
    old: &std::path::Path,
    new: &std::path::Path,
    facts: &HostFacts,
    source: &mut String,
    mut findings: Vec<Finding>,
) -> Result<Vec<Finding>, FaceError> {
    let usage = |m: String| Err(FaceError::Usage(m));
    if !old.is_dir() {
        return usage(format!(
            "--since {}: not a directory; give an earlier `wirescope capture` of the same host",
            old.display()
        ));
    }
    let Some(rdma) = facts.rdma.as_ref().filter(|r| !r.devices.is_empty()) else {
        return usage(format!(
            "--since compares RDMA counters, and {} has no RDMA device; leave --since out to audit it",
            new.display()
        ));
    };
    let (od, nd) = (CaptureDir::new(old), CaptureDir::new(new));
    let before = crate::probe::rdma::read_rdma_facts(&od);
    if before.devices.is_empty() {
        return usage(format!(
            "--since {}: this capture has no RDMA device, so there is nothing to compare; give an earlier capture of the host in --from",
            old.display()
        ));
    }
    same_host(old, new, &od, &nd, rdma, &before)?;
    let secs = span_between(old, new, &od, &nd)?;
    let sample = crate::probe::rdma::sample(
        &crate::probe::rdma::read_snapshot(&od, rdma),
        &crate::probe::rdma::read_snapshot(&nd, rdma),
        secs,
    );
    // Counters that went down (cleared or a driver reload), as `dev/port group/name`.
    let resets: Vec<String> = sample
        .ports
        .iter()
        .flat_map(|p| p.resets.iter().map(move |r| format!("{} {r}", p.label())))
        .collect();
    if !resets.is_empty() {
        eprintln!(
            "warning: {} RDMA counter(s) went down between the captures (cleared, or the driver reloaded); they count from zero: {}",
            resets.len(),
            resets.join(", ")
        );
    }
    let _ = write!(
        *source,
        ", RDMA counters since {} ({} earlier)",
        old.display(),
        super::span_text(secs)
    );
    findings.extend(crate::diagnose::rdma_window(
        Some(facts),
        &[&sample],
        HostRole::Local,
    ));
    Ok(crate::diagnose::rank(findings))
}

/// `--since` and `--from` must be one boot of one host: the same boot id
/// and, for the RDMA devices both have (at least one), the same node GUIDs.
fn same_host(
    old: &std::path::Path,
    new: &std::path::Path,
    od: &CaptureDir,
    nd: &CaptureDir,
    rdma: &crate::probe::rdma::RdmaFacts,
    before: &crate::probe::rdma::RdmaFacts,
) -> Result<(), FaceError> {
    let usage = |m: String| Err(FaceError::Usage(m));
    use crate::probe::system::boot_id;
    if let (Some(a), Some(b)) = (boot_id(od), boot_id(nd)) {
        if a != b {
            return usage(format!(
                "--since {} and --from {} come from different boots (boot_id {a} / {b}): the counters started again at the reboot, so their difference means nothing; take both captures within one boot",
                old.display(),
                new.display()
            ));
        }
    }
    let mut common = 0;
    for d in &rdma.devices {
        let Some(o) = before.devices.iter().find(|o| o.name == d.name) else {
            continue;
        };
        common += 1;
        if let (Some(a), Some(b)) = (&o.node_guid, &d.node_guid) {
            if a != b {
                return usage(format!(
                    "{}: node GUID {a} in --since {} but {b} in --from {}: not the same adapter; give two captures of the same host",
                    d.name,
                    old.display(),
                    new.display()
                ));
            }
        }
    }
    if common == 0 {
        return usage(format!(
            "--since {} has none of the RDMA devices of --from {}: give two captures of the same host",
            old.display(),
            new.display()
        ));
    }
    Ok(())
}

/// Seconds between the captures by the kernel's uptime; it must be known and positive.
fn span_between(
    old: &std::path::Path,
    new: &std::path::Path,
    od: &CaptureDir,
    nd: &CaptureDir,
) -> Result<f64, FaceError> {
    let usage = |m: String| Err(FaceError::Usage(m));
    use crate::probe::system::uptime_secs;
    let secs = match (uptime_secs(od), uptime_secs(nd)) {
        (Some(a), Some(b)) => b - a,
        (a, _) => {
            let missing = if a.is_none() { old } else { new };
            return usage(format!(
                "{}: no proc/uptime, so the time between the captures (and the counters' rates) is unknown; take both with `wirescope capture`, which records it",
                missing.display()
            ));
        }
    };
    if secs == 0.0 {
        return usage(format!(
            "--since {} and --from {} were taken at the same moment (same uptime): give an earlier capture of the host in --since",
            old.display(),
            new.display()
        ));
    }
    if secs < 0.0 {
        return usage(format!(
            "--since {} was taken after --from {} ({} later by the kernel's uptime): swap them; --from is the newer capture",
            old.display(),
            new.display(),
            super::span_text(-secs)
        ));
    }
    Ok(secs)
}

/// The peer's facts: a short observe-only point (no traffic), whose first peer Sample carries them.
fn peer_facts(
    addr: std::net::SocketAddr,
    token_file: Option<&std::path::Path>,
) -> anyhow::Result<HostFacts> {
    use crate::session::controller::{Controller, Target};
    use crate::session::outcome::RunEvent;
    use crate::session::plan::PointParams;
    let (token, _) = crate::session::auth::load_token(token_file, false)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut ctl = Controller::connect(Target::Tcp(addr), &token).await?;
        let pp = PointParams {
            spec: None,
            interval: std::time::Duration::from_millis(100),
            omit: std::time::Duration::ZERO,
            time: Some(std::time::Duration::from_millis(100)),
            ifaces: Vec::new(),
            peer_ifaces: Vec::new(),
            later: Vec::new(),
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let cancel = tokio_util::sync::CancellationToken::new();
        let producer = async {
            let r = ctl.run_point(&pp, &tx, &cancel).await;
            drop(tx);
            r
        };
        let consumer = async {
            let mut facts = None;
            while let Some(RunEvent { peer, .. }) = rx.recv().await {
                if facts.is_none() {
                    facts = peer.and_then(|s| s.facts).map(|f| *f);
                }
            }
            facts
        };
        let (r, facts) = tokio::join!(producer, consumer);
        r?;
        ctl.close().await;
        facts.ok_or_else(|| anyhow::anyhow!("the agent sent no facts"))
    })
}

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
    let (source, local) = match &args.from {
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
    };
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
        findings.extend(rdma_between(old, new, &local)?);
        findings = crate::diagnose::rank(findings);
    }
    if args.json {
        let j = serde_json::to_string_pretty(
            &serde_json::json!({ "source": source, "findings": findings }),
        )
        .map_err(anyhow::Error::from)?;
        out(&format!("{j}\n"));
    } else {
        out(&format!(
            "check of {source}{}\n",
            if peer.is_some() { " and the peer" } else { "" }
        ));
        out(&render(&findings));
    }
    super::stdout_result()?;
    match (args.fail_on, worst(&findings)) {
        (Some(level), Some(w)) if w >= level.severity() => Ok(EXIT_FINDINGS),
        _ => Ok(EXIT_OK),
    }
}

/// The RDMA rules on what the counters did between two captures of one
/// host (no clock: the deltas count, not rates).
fn rdma_between(
    old: &std::path::Path,
    new: &std::path::Path,
    facts: &HostFacts,
) -> Result<Vec<Finding>, FaceError> {
    if !old.is_dir() {
        return Err(FaceError::Usage(format!(
            "--since {}: not a directory; give an earlier `wirescope capture` of the same host",
            old.display()
        )));
    }
    let Some(rdma) = facts.rdma.as_ref().filter(|r| !r.devices.is_empty()) else {
        return Ok(Vec::new());
    };
    let mut reader = crate::probe::rdma::RdmaCounterReader::new();
    let _ = reader.push(crate::probe::rdma::read_snapshot(
        &CaptureDir::new(old),
        rdma,
    ));
    let Some(sample) = reader.push(crate::probe::rdma::read_snapshot(
        &CaptureDir::new(new),
        rdma,
    )) else {
        return Ok(Vec::new());
    };
    Ok(crate::diagnose::rdma_window(
        Some(facts),
        &[&sample],
        HostRole::Local,
    ))
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

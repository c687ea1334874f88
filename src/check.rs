//! `wirescope check`: the static audit of one or two hosts (facts only, no traffic).
//!
//! Owns the audit entry point and its human rendering; the rules themselves are
//! in [`crate::diagnose`] (pure). This module does no I/O either: the caller
//! reads the facts (live host or captured directory) and prints the result.

use crate::diagnose::{self, Finding, HostRole, Severity};
use crate::probe::facts::HostFacts;
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
        let host = match f.host {
            HostRole::Local => "local",
            HostRole::Peer => "peer",
        };
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

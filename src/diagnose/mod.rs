//! Diagnosis: name the bottleneck, with the numbers that prove it and the fix.
//!
//! This module owns the rule engine: a window of recent [`Sample`]s of both
//! hosts, their [`HostFacts`] and the test's own context go in, a ranked list
//! of [`Finding`]s comes out. It is **pure**: no file, socket, clock or
//! terminal is touched. The only data it carries is the driver/firmware
//! catalog, embedded at build time from `assets/catalog.toml`. The same code
//! runs in `run`, `watch`, the TUI and `check`, and is unit-tested on fixtures.
//!
//! * [`diagnose`] evaluates every rule on a window (live rules and static ones).
//! * [`check`] evaluates only the facts-only rules of one host (`wirescope check`).
//! * [`Tracker`] adds hysteresis for per-interval use, so findings do not flicker.
//! * [`Thresholds`] holds the numbers of the host and stack rules (an
//!   engine's rule family keeps its own table beside its rules:
//!   `GrpcThresholds`, `SinkThresholds`); [`impact::RULES`] is the one table
//!   of rules (data paths judged, thresholds, prior, limit words, reference);
//!   `assets/rules.md` documents each rule id, its condition, evidence, fix
//!   and reference, and its index is generated from the rule table.
//!
//! # Ranking
//!
//! Each rule sets `score = severity base + 100 × impact`, where the severity base
//! is 0 (info), 100 (warn) or 200 (error) and `impact` ∈ [0, 1] is the rule's
//! estimate of how much of the shortfall it explains: a measured fraction when
//! the rule has one (the busy share of the saturated core, the share of time a
//! connection was receive-window limited, the share of packets on one queue),
//! otherwise a fixed prior per rule (see [`impact`]). Findings are sorted by
//! score, highest first, then by id and host, so the order is deterministic.

pub mod catalog;
mod finding;
pub mod impact;
mod input;
mod limited;
pub mod live;
mod rules;
mod thresholds;
mod tracker;
pub(crate) mod util;

pub use finding::{Evidence, Finding, Severity, Value};
pub use input::{Input, TestContext, Window};
pub use limited::limited_by;
pub use thresholds::{Thresholds, THRESHOLDS};
pub use tracker::{Change, Tracker};

use crate::probe::facts::HostFacts;
pub use crate::probe::sample::HostRole;
#[cfg(doc)]
use crate::probe::sample::Sample;

/// Every rule on a window of both hosts, with the default [`THRESHOLDS`]; ranked.
pub fn diagnose(input: &Input) -> Vec<Finding> {
    diagnose_cached(input, &FactsCache::default())
}

/// What the rules derive from each host's facts alone (facts-only findings,
/// IRQ steering), for a caller that diagnoses window after window of one
/// test: [`diagnose_cached`] derives it on first use and reuses it after.
/// [`FactsCache::forget`] a host when its facts change, and start a new
/// cache when the test spec does ([`live::LiveDiagnosis`] does both).
#[derive(Debug, Default)]
pub struct FactsCache {
    hosts: [rules::FactsDerived; 2],
}

impl FactsCache {
    /// Drop what was derived from `host`'s facts (they changed).
    pub fn forget(&mut self, host: HostRole) {
        self.hosts[host_order(host) as usize] = rules::FactsDerived::default();
    }
}

/// [`diagnose`] reusing what `cache` holds of the facts: the same findings,
/// as long as the cache's facts and spec are the input's.
pub fn diagnose_cached(input: &Input, cache: &FactsCache) -> Vec<Finding> {
    let t = &THRESHOLDS;
    let mut out = Vec::new();
    let mut statics = Vec::new();
    for host in [HostRole::Local, HostRole::Peer] {
        let derived = &cache.hosts[host_order(host) as usize];
        let ctx = rules::HostCtx::with(input, host, t, derived);
        if let Some(facts) = ctx.facts {
            statics.extend_from_slice(derived.statics(facts, host, t, input.test.spec));
        }
        out.extend(rules::window_rules(&ctx, t));
        let me = match host {
            HostRole::Local => input.local,
            HostRole::Peer => input.peer,
        };
        out.extend(rules::rdma_window(ctx.facts, me.samples, host, t));
    }
    // A buffer judged on what the test measured (TCP_INFO) replaces the
    // facts-only audit of the same host and side (an assumed 1 ms RTT).
    statics.retain(|f| {
        f.id != "tcp.buffer-limited" || !out.iter().any(|w: &Finding| w.key() == f.key())
    });
    out.extend(statics);
    if let (Some(l), Some(p)) = (input.local.facts(), input.peer.facts()) {
        out.extend(rules::mtu_mismatch(l, p));
    }
    rules::engine_rules(input, t, &mut out);
    // Each rule judges the tests whose data paths the table names (a packet
    // test has no TCP connection to judge; RDMA bypasses the kernel stack).
    out.retain(|f| impact::applies(&f.id, input.test.spec));
    rank(rules::merge(out))
}

/// True for an RDMA counter that counts trouble (loss, retransmission,
/// congestion, exhausted receive queues, errors), for views that highlight.
pub fn rdma_counter_is_trouble(name: &str) -> bool {
    rules::rdma::RETRANS_COUNTERS.contains(&name)
        || name.contains("err")
        || name.contains("cnp")
        || name.contains("ecn")
        || name == "out_of_buffer"
        || name.contains("discard")
}

/// The RDMA rules on a window of a host's RDMA counters, default
/// thresholds; `check --since` uses it on two captures.
pub fn rdma_window(
    facts: Option<&HostFacts>,
    window: &[&crate::probe::rdma::RdmaSample],
    host: HostRole,
) -> Vec<Finding> {
    rules::rdma::window_rules(
        facts.and_then(|f| f.rdma.as_ref()),
        window,
        host,
        &THRESHOLDS,
    )
}

/// The facts-only rules of one host (what `wirescope check` runs); ranked.
pub fn check(facts: &HostFacts, host: HostRole) -> Vec<Finding> {
    rank(rules::static_rules_for(facts, host, &THRESHOLDS, None))
}

/// The facts-only rules that compare the two hosts (e.g. MTU differs); ranked.
pub fn check_pair(local: &HostFacts, peer: &HostFacts) -> Vec<Finding> {
    rank(rules::mtu_mismatch(local, peer))
}

/// Sort most important first: score descending, then id, host and subject.
pub fn rank(mut findings: Vec<Finding>) -> Vec<Finding> {
    findings.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.id.cmp(&b.id))
            .then_with(|| host_order(a.host).cmp(&host_order(b.host)))
            .then_with(|| a.subject.cmp(&b.subject))
    });
    findings
}

fn host_order(h: HostRole) -> u8 {
    match h {
        HostRole::Local => 0,
        HostRole::Peer => 1,
    }
}

//! The bottleneck of a test point in one sentence (`limited_by` in the
//! summary, its text and JSON): the most important warning or error, said
//! as what held the test back and the first thing to try, or, when no rule
//! found a limit, what the hosts' CPUs say. Pure: findings and two numbers
//! in, a sentence out.

use super::finding::{Finding, Severity};

/// Mean busy % at which a host counts as saturated as a whole.
const HOST_SATURATED_PCT: f64 = 90.0;

/// What held the test back: the rule table's words for the rule
/// ([`super::impact::RuleInfo::limit`]).
fn what(id: &str) -> &'static str {
    super::impact::rule(id).map_or("a condition the rules found", |r| r.limit)
}

/// A fix longer than this is not repeated in the one-sentence summary.
const LONG_FIX: usize = 160;

/// One sentence: what limited the point. `findings` ranked (most important
/// first, as [`super::rank`] leaves them); `local_busy` / `peer_busy` the
/// hosts' mean busy % over the counted intervals, when measured.
pub fn limited_by(findings: &[Finding], local_busy: Option<f64>, peer_busy: Option<f64>) -> String {
    if let Some(f) = findings.iter().find(|f| f.severity >= Severity::Warn) {
        let mut s = format!(
            "limited by {} on the {} host: {}",
            what(&f.id),
            f.host.name(),
            f.title
        );
        match f.fix.first() {
            // A one-line summary: a long command (one loop over 64 IRQs)
            // stays with the finding.
            Some(fix) if fix.len() > LONG_FIX => s.push_str(" — try the finding's fix"),
            Some(fix) => s.push_str(&format!(" — try: {fix}")),
            None => {}
        }
        return s;
    }
    let hot = |b: Option<f64>| b.is_some_and(|b| b >= HOST_SATURATED_PCT);
    let pct = |b: Option<f64>| b.map_or("-".to_string(), |b| format!("{b:.0} %"));
    match (hot(local_busy), hot(peer_busy)) {
        (true, true) => format!(
            "no bottleneck found in this host pair: the test saturates both hosts' CPUs (local {}, peer {} busy)",
            pct(local_busy),
            pct(peer_busy)
        ),
        (true, false) | (false, true) => {
            let (host, busy) = if hot(local_busy) {
                ("local", local_busy)
            } else {
                ("peer", peer_busy)
            };
            format!(
                "no rule found a limit; the {host} host's CPUs are {} busy: the test is CPU-bound there",
                pct(busy)
            )
        }
        (false, false) if local_busy.is_none() || peer_busy.is_none() => {
            let (seen, busy, unseen) = if local_busy.is_some() {
                ("local", local_busy, "peer")
            } else {
                ("peer", peer_busy, "local")
            };
            format!(
                "no bottleneck found on the {seen} host (CPU {} busy); the {unseen} host was not measured",
                pct(busy)
            )
        }
        (false, false) => format!(
            "no bottleneck found on either host (CPU local {}, peer {} busy): what sets the rate is outside them — the path (link, switch, shaping) — or the test itself (its pacing, the requests it keeps in flight)",
            pct(local_busy),
            pct(peer_busy)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::limited_by;
    use crate::diagnose::{Finding, HostRole, Severity};

    #[test]
    fn the_first_warning_is_the_limit_with_its_first_fix() {
        let info = Finding::new(
            "nic.gro-off",
            Severity::Info,
            HostRole::Peer,
            "veth-b",
            "GRO is off on veth-b",
            0.1,
        );
        let warn = Finding::new(
            "cpu.single-core-saturated",
            Severity::Warn,
            HostRole::Peer,
            "cpu1",
            "cpu1 is 100 % busy while the other cores average 12 %",
            0.9,
        )
        .fix("wirescope run -P <number of queues>");
        let s = limited_by(&[warn, info.clone()], Some(40.0), Some(55.0));
        assert_eq!(
            s,
            "limited by one core on the peer host: cpu1 is 100 % busy while the other cores average 12 % — try: wirescope run -P <number of queues>"
        );
        // A long fix (one loop over a big host's 64 IRQs) stays with the finding.
        let loop_fix = format!("for p in {}; do :; done", "201:0 ".repeat(40));
        let irqs = Finding::new(
            "irq.remote-numa",
            Severity::Warn,
            HostRole::Local,
            "ens1f0np0",
            "ens1f0np0: 64 IRQs on 4 cores of node 1 (cpu64-67), outside its NUMA node 0",
            0.4,
        )
        .fix(loop_fix);
        let s = limited_by(&[irqs], None, None);
        assert!(
            s.ends_with("outside its NUMA node 0 — try the finding's fix"),
            "{s}"
        );
        // Info findings are not limits: the CPUs speak.
        let s = limited_by(&[info], Some(99.0), Some(97.0));
        assert!(
            s.starts_with(
                "no bottleneck found in this host pair: the test saturates both hosts' CPUs"
            ),
            "{s}"
        );
        let s = limited_by(&[], Some(20.0), Some(98.0));
        assert!(s.contains("peer host's CPUs are 98 % busy"), "{s}");
        let s = limited_by(&[], Some(20.0), Some(30.0));
        assert!(s.starts_with("no bottleneck found on either host"), "{s}");
        // A host without Samples is not said to be fine.
        let s = limited_by(&[], Some(20.0), None);
        assert!(s.contains("the peer host was not measured"), "{s}");
    }
}

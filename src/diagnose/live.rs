//! Per-interval diagnosis for the consumer of a live session (the pipeline
//! that `run`, `watch` and the TUI share): a bounded window of recent Samples per host, the
//! latest facts of each, and a [`Tracker`] so findings do not flicker.
//!
//! Pure bookkeeping around [`super::diagnose`]: no I/O.

use super::{
    diagnose_cached, Change, FactsCache, Finding, HostRole, Input, Severity, TestContext, Tracker,
    Window,
};
use crate::probe::facts::HostFacts;
use crate::probe::sample::Sample;
use crate::traffic::EngineSpec;

/// Intervals of history each per-interval diagnosis looks at.
pub const WINDOW: usize = 5;
/// Intervals a condition must hold before it is raised, and be gone before it is cleared.
pub const HYSTERESIS: u32 = 2;

/// Running diagnosis of a session.
#[derive(Debug)]
pub struct LiveDiagnosis {
    local: Vec<Sample>,
    peer: Vec<Sample>,
    local_facts: Option<HostFacts>,
    peer_facts: Option<HostFacts>,
    tracker: Tracker,
    worst: Option<Severity>,
    /// What the rules derived from the facts, for `cache_spec`.
    cache: FactsCache,
    cache_spec: Option<EngineSpec>,
}

impl Default for LiveDiagnosis {
    fn default() -> Self {
        LiveDiagnosis {
            local: Vec::new(),
            peer: Vec::new(),
            local_facts: None,
            peer_facts: None,
            tracker: Tracker::new(HYSTERESIS, HYSTERESIS),
            worst: None,
            cache: FactsCache::default(),
            cache_spec: None,
        }
    }
}

/// Add `s` to the window; true when it brought new facts.
fn push(window: &mut Vec<Sample>, facts: &mut Option<HostFacts>, s: Option<&Sample>) -> bool {
    let mut new_facts = false;
    if let Some(s) = s {
        if let Some(f) = &s.facts {
            *facts = Some((**f).clone());
            new_facts = true;
        }
        window.push(s.clone());
        if window.len() > WINDOW {
            window.remove(0);
        }
    }
    new_facts
}

impl LiveDiagnosis {
    /// A new test point: the window and the active findings start over (facts are kept).
    pub fn reset(&mut self) {
        self.local.clear();
        self.peer.clear();
        self.tracker.reset();
    }

    /// Add one interval and return what was raised or cleared.
    pub fn push(
        &mut self,
        local: Option<&Sample>,
        peer: Option<&Sample>,
        spec: Option<&EngineSpec>,
    ) -> Vec<Change> {
        if self.cache_spec.as_ref() != spec {
            self.cache = FactsCache::default();
            self.cache_spec = spec.cloned();
        }
        if push(&mut self.local, &mut self.local_facts, local) {
            self.cache.forget(HostRole::Local);
        }
        if push(&mut self.peer, &mut self.peer_facts, peer) {
            self.cache.forget(HostRole::Peer);
        }
        let input = Input {
            local: Window {
                samples: &self.local,
                facts: self.local_facts.as_ref(),
            },
            peer: Window {
                samples: &self.peer,
                facts: self.peer_facts.as_ref(),
            },
            test: TestContext { spec },
        };
        let changes = self.tracker.update(diagnose_cached(&input, &self.cache));
        for c in &changes {
            if let Change::Raised(f) = c {
                self.worst = self.worst.max(Some(f.severity));
            }
        }
        changes
    }

    /// Findings active now, most important first.
    pub fn active(&self) -> Vec<Finding> {
        self.tracker.active()
    }

    /// Count a severity found outside the per-interval diagnosis (the
    /// closing diagnosis of a point) towards [`LiveDiagnosis::worst_raised`].
    pub fn note_worst(&mut self, s: Option<Severity>) {
        self.worst = self.worst.max(s);
    }

    /// The worst severity raised so far in this session (for `--fail-on`).
    pub fn worst_raised(&self) -> Option<Severity> {
        self.worst
    }

    /// Latest facts of both hosts (local, peer).
    pub fn facts(&self) -> (Option<&HostFacts>, Option<&HostFacts>) {
        (self.local_facts.as_ref(), self.peer_facts.as_ref())
    }
}

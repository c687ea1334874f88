//! Hysteresis: a finding is raised after it held for N intervals and cleared after
//! it was absent for M intervals, so the TUI and the log do not flicker.

use super::finding::Finding;
use crate::probe::sample::HostRole;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A raise or a clearance, as the log records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "change", rename_all = "lowercase")]
pub enum Change {
    /// The finding held for `raise_after` intervals.
    Raised(Finding),
    /// The finding was absent for `clear_after` intervals.
    Cleared {
        /// Rule id.
        id: String,
        /// Host.
        host: HostRole,
        /// Subject (interface, CPU...), as in [`Finding::subject`].
        #[serde(default, skip_serializing_if = "String::is_empty")]
        subject: String,
    },
}

type Key = (String, &'static str, String);

#[derive(Debug, Clone)]
struct Slot {
    finding: Finding,
    seen: u32,
    missed: u32,
    active: bool,
}

/// Keeps the active set of findings across intervals.
#[derive(Debug, Clone)]
pub struct Tracker {
    raise_after: u32,
    clear_after: u32,
    slots: BTreeMap<Key, Slot>,
}

fn key(f: &Finding) -> Key {
    f.key()
}

impl Tracker {
    /// Raise after `raise_after` consecutive intervals present, clear after
    /// `clear_after` consecutive intervals absent (both at least 1).
    pub fn new(raise_after: u32, clear_after: u32) -> Self {
        Tracker {
            raise_after: raise_after.max(1),
            clear_after: clear_after.max(1),
            slots: BTreeMap::new(),
        }
    }

    /// Feed this interval's findings; returns what was raised or cleared now.
    /// Active findings are refreshed with the latest evidence.
    pub fn update(&mut self, now: Vec<Finding>) -> Vec<Change> {
        let mut changes = Vec::new();
        let mut present: BTreeMap<Key, Finding> = now.into_iter().map(|f| (key(&f), f)).collect();
        let keys: Vec<Key> = self.slots.keys().cloned().collect();
        for k in keys {
            let Some(slot) = self.slots.get_mut(&k) else {
                continue;
            };
            if let Some(f) = present.remove(&k) {
                slot.finding = f;
                slot.seen += 1;
                slot.missed = 0;
                if !slot.active && slot.seen >= self.raise_after {
                    slot.active = true;
                    changes.push(Change::Raised(slot.finding.clone()));
                }
            } else {
                slot.missed += 1;
                slot.seen = 0;
                if !slot.active {
                    self.slots.remove(&k);
                } else if slot.missed >= self.clear_after {
                    changes.push(Change::Cleared {
                        id: slot.finding.id.clone(),
                        host: slot.finding.host,
                        subject: slot.finding.subject.clone(),
                    });
                    self.slots.remove(&k);
                }
            }
        }
        for (k, f) in present {
            let active = self.raise_after <= 1;
            if active {
                changes.push(Change::Raised(f.clone()));
            }
            self.slots.insert(
                k,
                Slot {
                    finding: f,
                    seen: 1,
                    missed: 0,
                    active,
                },
            );
        }
        changes
    }

    /// The active findings, ranked most important first.
    pub fn active(&self) -> Vec<Finding> {
        super::rank(
            self.slots
                .values()
                .filter(|s| s.active)
                .map(|s| s.finding.clone())
                .collect(),
        )
    }

    /// Forget everything (a new test point starts).
    pub fn reset(&mut self) {
        self.slots.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::Severity;

    fn f(id: &str) -> Finding {
        Finding::new(id, Severity::Warn, HostRole::Local, "x", "t", 0.5)
    }

    #[test]
    fn flicker_is_suppressed() {
        let mut t = Tracker::new(2, 2);
        assert!(t.update(vec![f("a")]).is_empty());
        assert!(t.update(vec![]).is_empty()); // present once, then gone: never raised
        assert!(t.update(vec![f("a")]).is_empty());
        assert_eq!(t.update(vec![f("a")]).len(), 1);
        assert!(t.update(vec![]).is_empty()); // one absence does not clear
        assert!(t.update(vec![f("a")]).is_empty()); // back: still active, no new raise
        assert_eq!(t.active().len(), 1);
        assert!(t.update(vec![]).is_empty());
        let c = t.update(vec![]);
        assert!(matches!(&c[..], [Change::Cleared { id, .. }] if id == "a"));
        assert!(t.active().is_empty());
    }

    #[test]
    fn raise_after_one_is_immediate_and_serializes() {
        let mut t = Tracker::new(1, 1);
        let c = t.update(vec![f("a")]);
        let v = serde_json::to_value(&c).expect("json");
        assert_eq!(v[0]["change"], "raised");
        assert_eq!(v[0]["id"], "a");
        let c = t.update(vec![]);
        let v = serde_json::to_value(&c).expect("json");
        assert_eq!(v[0]["change"], "cleared");
        assert_eq!(v[0]["host"], "local");
    }
}

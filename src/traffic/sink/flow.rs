//! Per-flow sequence tracking: received, lost, reordered, duplicates.
//!
//! Each sink thread owns one [`FlowTable`] (no sharing, no atomics on the
//! hot path): RSS sends every frame of a flow to the same queue, so one
//! thread sees all of a flow. A flow's state is allocated when its first
//! frame arrives, so memory grows with the flows a queue really gets.
//!
//! # What "lost" means, and when
//!
//! While packets are in flight nobody knows yet whether a gap is a loss or
//! a late arrival. The tracker keeps, per flow, `next` = highest sequence
//! seen + 1, and counts a frame below `next` that it has not seen as
//! *reordered* (and received). So:
//!
//! * **live** (per interval): `missing = Σ next − received` — the gaps
//!   below the highest sequence seen, net of late arrivals so far. It can
//!   shrink when a late frame arrives, and it does not see the tail: frames
//!   after the last one received are not yet known to exist.
//! * **at the end**: the generator reports how many frames it sent per flow
//!   (`sent` = its next sequence number), the sink drains, and
//!   `lost = sent − received` — exact, tail included.
//!
//! Duplicates and reordering are recognised within a window of
//! [`WINDOW`] sequence numbers below `next` (a ring bitmap). A frame older
//! than that is counted as received and reordered ("late"); a duplicate
//! that old cannot be told apart and is counted as a late frame, which can
//! only make `lost` smaller, never hide a loss that is not also followed by
//! such a duplicate. If a flow were split over queues (an RSS table changed
//! mid-test), each thread tracks its part: the end result stays exact
//! (received is summed), the live `missing` overstates.

use serde::{Deserialize, Serialize};

/// Sequence numbers remembered below the highest one seen.
pub const WINDOW: u64 = 1024;
const WORDS: usize = (WINDOW / 64) as usize;

/// The state of one flow on one thread.
#[derive(Debug, Clone)]
pub struct FlowState {
    next: u64,
    received: u64,
    duplicates: u64,
    reordered: u64,
    late: u64,
    bits: [u64; WORDS],
}

impl Default for FlowState {
    fn default() -> Self {
        FlowState {
            next: 0,
            received: 0,
            duplicates: 0,
            reordered: 0,
            late: 0,
            bits: [0; WORDS],
        }
    }
}

/// What one frame was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The next in order, or a jump forward over a gap.
    InOrder,
    /// Below the highest seen and not seen before (counted as received).
    Reordered,
    /// Seen before (not counted as received).
    Duplicate,
    /// Older than the window: counted as received and reordered.
    Late,
}

impl FlowState {
    #[inline]
    fn bit(seq: u64) -> (usize, u64) {
        let s = seq % WINDOW;
        ((s / 64) as usize, 1u64 << (s % 64))
    }

    /// Account one frame with sequence `seq`; returns how far `next`
    /// advanced (to keep the table's running sums) and the verdict.
    #[inline]
    pub fn on_frame(&mut self, seq: u64) -> (u64, Verdict) {
        if seq >= self.next {
            let gap = seq - self.next;
            if gap >= WINDOW {
                self.bits = [0; WORDS];
            } else {
                for s in self.next..seq {
                    let (w, m) = Self::bit(s);
                    self.bits[w] &= !m;
                }
            }
            let (w, m) = Self::bit(seq);
            self.bits[w] |= m;
            let advanced = seq + 1 - self.next;
            self.next = seq + 1;
            self.received += 1;
            return (advanced, Verdict::InOrder);
        }
        if self.next - seq > WINDOW {
            self.late += 1;
            self.reordered += 1;
            self.received += 1;
            return (0, Verdict::Late);
        }
        let (w, m) = Self::bit(seq);
        if self.bits[w] & m != 0 {
            self.duplicates += 1;
            return (0, Verdict::Duplicate);
        }
        self.bits[w] |= m;
        self.reordered += 1;
        self.received += 1;
        (0, Verdict::Reordered)
    }
}

/// Running sums of one thread's table, published to its counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowTotals {
    /// Unique test frames received.
    pub received: u64,
    /// Σ next over flows: frames up to the highest sequence seen.
    pub expected: u64,
    /// Duplicates.
    pub duplicates: u64,
    /// Reordered (late ones included).
    pub reordered: u64,
    /// Frames with a flow id outside the test's flows.
    pub unknown_flow: u64,
}

impl FlowTotals {
    /// Gaps below the highest sequence seen, net of late arrivals so far.
    pub fn missing(&self) -> u64 {
        self.expected.saturating_sub(self.received)
    }
}

/// The flows one sink thread has seen.
#[derive(Debug, Clone, Default)]
pub struct FlowTable {
    flows: Vec<Option<Box<FlowState>>>,
    totals: FlowTotals,
}

impl FlowTable {
    /// A table for flow ids `0..flows`.
    pub fn new(flows: u32) -> Self {
        FlowTable {
            flows: (0..flows).map(|_| None).collect(),
            totals: FlowTotals::default(),
        }
    }

    /// Account one stamped frame.
    #[inline]
    pub fn on_frame(&mut self, flow: u16, seq: u64) -> Option<Verdict> {
        let Some(slot) = self.flows.get_mut(usize::from(flow)) else {
            self.totals.unknown_flow += 1;
            return None;
        };
        let st = slot.get_or_insert_with(Box::default);
        let (advanced, v) = st.on_frame(seq);
        self.totals.expected += advanced;
        match v {
            Verdict::InOrder => self.totals.received += 1,
            Verdict::Reordered | Verdict::Late => {
                self.totals.received += 1;
                self.totals.reordered += 1;
            }
            Verdict::Duplicate => self.totals.duplicates += 1,
        }
        Some(v)
    }

    /// The running sums.
    pub fn totals(&self) -> FlowTotals {
        self.totals
    }

    /// One row per flow this thread saw, tagged with `queue`.
    pub fn rows(&self, queue: u32) -> Vec<FlowSeen> {
        self.flows
            .iter()
            .enumerate()
            .filter_map(|(f, s)| {
                let s = s.as_deref()?;
                Some(FlowSeen {
                    flow: f as u16,
                    queues: vec![queue],
                    received: s.received,
                    next: s.next,
                    duplicates: s.duplicates,
                    reordered: s.reordered,
                    late: s.late,
                })
            })
            .collect()
    }
}

/// What the sink saw of one flow (merged over the threads that saw it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FlowSeen {
    /// Flow id.
    pub flow: u16,
    /// Queues (or sockets) it arrived on.
    pub queues: Vec<u32>,
    /// Unique frames received.
    pub received: u64,
    /// Highest sequence seen + 1.
    pub next: u64,
    /// Duplicates.
    pub duplicates: u64,
    /// Reordered (late included).
    pub reordered: u64,
    /// Older than the duplicate window when they arrived.
    pub late: u64,
}

/// Merge the rows of several threads: one row per flow, counts summed.
pub fn merge(rows: impl IntoIterator<Item = FlowSeen>) -> Vec<FlowSeen> {
    let mut by: std::collections::BTreeMap<u16, FlowSeen> = std::collections::BTreeMap::new();
    for r in rows {
        match by.get_mut(&r.flow) {
            None => {
                by.insert(r.flow, r);
            }
            Some(m) => {
                m.received += r.received;
                m.next = m.next.max(r.next);
                m.duplicates += r.duplicates;
                m.reordered += r.reordered;
                m.late += r.late;
                m.queues.extend(r.queues);
                m.queues.sort_unstable();
                m.queues.dedup();
            }
        }
    }
    by.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(seqs: &[u64]) -> (FlowTable, Vec<Option<Verdict>>) {
        let mut t = FlowTable::new(4);
        let v = seqs.iter().map(|s| t.on_frame(1, *s)).collect();
        (t, v)
    }

    #[test]
    fn in_order_stream_has_nothing_missing() {
        let (t, v) = feed(&(0..5000).collect::<Vec<_>>());
        assert!(v.iter().all(|v| *v == Some(Verdict::InOrder)));
        let tot = t.totals();
        assert_eq!((tot.received, tot.expected, tot.missing()), (5000, 5000, 0));
    }

    #[test]
    fn gap_is_missing_until_the_late_frame_arrives() {
        let (mut t, _) = feed(&[0, 1, 3, 4]);
        assert_eq!(t.totals().missing(), 1, "seq 2 is missing while in flight");
        assert_eq!(t.on_frame(1, 2), Some(Verdict::Reordered));
        let tot = t.totals();
        assert_eq!((tot.missing(), tot.reordered, tot.received), (0, 1, 5));
        assert_eq!(t.on_frame(1, 2), Some(Verdict::Duplicate));
        assert_eq!(t.on_frame(1, 4), Some(Verdict::Duplicate));
        assert_eq!(t.totals().duplicates, 2);
        assert_eq!(t.totals().received, 5);
    }

    #[test]
    fn tail_loss_is_invisible_live_and_exact_at_the_end() {
        let (t, _) = feed(&[0, 1, 2]);
        assert_eq!(
            t.totals().missing(),
            0,
            "the sink cannot know 3 and 4 were sent"
        );
        let rows = t.rows(0);
        let sent = 5u64;
        assert_eq!(
            sent - rows[0].received,
            2,
            "the generator's count finds them"
        );
    }

    #[test]
    fn window_bounds_duplicate_detection() {
        let mut seqs: Vec<u64> = (0..3000).collect();
        seqs.push(10); // far older than the window: late, counted received
        seqs.push(2990); // inside the window and seen: duplicate
        let (t, v) = feed(&seqs);
        assert_eq!(v[3000], Some(Verdict::Late));
        assert_eq!(v[3001], Some(Verdict::Duplicate));
        let tot = t.totals();
        assert_eq!((tot.duplicates, tot.reordered, tot.received), (1, 1, 3001));
    }

    #[test]
    fn big_jumps_clear_the_window() {
        let (mut t, _) = feed(&[0, 5000]);
        assert_eq!(t.totals().missing(), 4999);
        // 4990 was never seen: the jump cleared the bitmap, so it is reordered, not a duplicate.
        assert_eq!(t.on_frame(1, 4990), Some(Verdict::Reordered));
        assert_eq!(t.totals().missing(), 4998);
    }

    #[test]
    fn unknown_flows_are_counted_apart() {
        let mut t = FlowTable::new(2);
        assert_eq!(t.on_frame(7, 0), None);
        assert_eq!(t.totals().unknown_flow, 1);
        assert_eq!(t.totals().received, 0);
    }

    #[test]
    fn merge_sums_threads() {
        let mut a = FlowTable::new(3);
        let mut b = FlowTable::new(3);
        for s in 0..10 {
            a.on_frame(0, s);
        }
        for s in 10..15 {
            b.on_frame(0, s);
        }
        b.on_frame(2, 0);
        let m = merge(a.rows(0).into_iter().chain(b.rows(1)));
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].flow, m[0].received, m[0].next), (0, 15, 15));
        assert_eq!(m[0].queues, vec![0, 1]);
        assert_eq!((m[1].flow, m[1].received), (2, 1));
    }
}

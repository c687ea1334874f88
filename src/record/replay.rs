//! A log read back as the [`Output`]s a live session produced, so the TUI's
//! replay goes through the same path as live data.
//!
//! The log holds everything a face showed: the header (hosts, eBPF, the
//! plan), `point_start` events, both hosts' Samples of each interval (local
//! first), the `finding` records raised or cleared after them, the end
//! events and the point's summary. Findings are the log's own, not
//! recomputed, so a replay shows exactly what the run showed.

use super::pipeline::Output;
use super::schema::{Record, Summary};
use crate::diagnose::{rank, Change, Finding};
use crate::probe::ebpf::EbpfHosts;
use crate::probe::sample::{HostRole, Sample};
use crate::session::driver::PointStart;
use crate::session::outcome::{EndReason, PointOutcome};
use crate::session::proto::SideResult;
use crate::traffic::EngineSpec;
use crate::units::duration_from_secs;

/// The findings active after a sequence of raise/clear changes, ranked.
pub fn apply_change(active: &mut Vec<Finding>, c: &Change) {
    match c {
        Change::Raised(f) => {
            active.retain(|a| !(a.id == f.id && a.host == f.host && a.subject == f.subject));
            active.push(f.clone());
        }
        Change::Cleared { id, host, subject } => {
            active.retain(|a| !(&a.id == id && a.host == *host && &a.subject == subject));
        }
    }
    *active = rank(std::mem::take(active));
}

/// Turns records into outputs one record at a time, for a replay that
/// streams a long log instead of reading it whole ([`outputs`] is the batch
/// form). A finding record amends the interval written before it, so the
/// newest interval is held back until the next record shows it is complete.
#[derive(Default)]
pub struct Replayer {
    out: Vec<Output>,
    spec: Option<EngineSpec>,
    time: Option<std::time::Duration>,
    point: u32,
    in_point: bool,
    end: Option<EndReason>,
    pending: Option<Sample>,
    active: Vec<Finding>,
    /// Each host's latest per-row detail, shown on the lines that left theirs to a later one.
    carry: super::detail::Carry,
}

impl Replayer {
    fn start_point(&mut self) {
        self.point += 1;
        self.in_point = true;
        self.end = None;
        self.active.clear();
        self.out.push(Output::PointStarted(Box::new(PointStart {
            number: self.point,
            sweep: None,
            spec: self.spec.clone(),
            time: self.time,
        })));
    }

    fn end_point(&mut self, summary: Option<Summary>) {
        self.flush();
        if !self.in_point {
            return;
        }
        self.in_point = false;
        let end = self.end.take().unwrap_or(EndReason::Completed);
        self.out.push(Output::PointDone {
            outcome: Box::new(PointOutcome {
                local: SideResult::default(),
                peer: None,
                end,
            }),
            summary: summary.map(Box::new),
        });
    }

    fn interval(&mut self, local: Option<Sample>, peer: Option<Sample>) {
        self.out.push(Output::Interval {
            local: local.map(Box::new),
            peer: peer.map(Box::new),
            changes: Vec::new(),
            active: self.active.clone(),
        });
    }

    /// Samples of one interval are written together (local, then peer); pair them.
    fn sample(&mut self, mut s: Sample) {
        self.carry.fill(&mut s);
        if !self.in_point {
            self.start_point();
        }
        match self.pending.take() {
            Some(p) if p.index == s.index && p.host != s.host => {
                let (l, r) = if p.host == HostRole::Local {
                    (p, s)
                } else {
                    (s, p)
                };
                self.interval(Some(l), Some(r));
            }
            Some(p) => {
                self.one(p);
                self.pending = Some(s);
            }
            None => self.pending = Some(s),
        }
    }

    fn one(&mut self, s: Sample) {
        match s.host {
            HostRole::Local => self.interval(Some(s), None),
            HostRole::Peer => self.interval(None, Some(s)),
        }
    }

    fn flush(&mut self) {
        if let Some(p) = self.pending.take() {
            self.one(p);
        }
    }

    /// A finding record belongs to the interval written before it.
    fn finding(&mut self, c: Change) {
        self.flush();
        apply_change(&mut self.active, &c);
        if let Some(Output::Interval {
            changes, active, ..
        }) = self.out.last_mut()
        {
            changes.push(c);
            *active = self.active.clone();
        }
    }
}

impl Replayer {
    /// Take one record.
    pub fn push(&mut self, rec: Record) {
        let r = self;
        match rec {
            Record::Header(h) => {
                r.spec = h.spec.clone();
                r.time = h.time_s.and_then(duration_from_secs);
                let ebpf = h.ebpf.clone().unwrap_or(EbpfHosts {
                    local: None,
                    peer: None,
                });
                r.out.push(Output::Ready {
                    peer: Box::new(h.hosts.peer.clone()),
                    ebpf: Box::new(ebpf),
                });
                r.out.push(Output::PlanStarted(h));
            }
            Record::Event(e) if e.kind == "point_start" => {
                r.end_point(None);
                r.start_point();
            }
            Record::Event(e) => {
                r.flush();
                r.end = Some(match e.kind.as_str() {
                    "interrupted" => EndReason::Interrupted,
                    "peer_lost" => EndReason::PeerLost(e.message),
                    _ => EndReason::Failed(e.message),
                });
            }
            Record::Sample(s) => r.sample(*s),
            Record::Finding(c) => r.finding(*c),
            Record::Summary(s) => r.end_point(Some(*s)),
        }
    }

    /// The outputs that are complete so far (all but a newest interval,
    /// which a following finding record may still amend).
    pub fn ready(&mut self) -> Vec<Output> {
        let keep = usize::from(matches!(self.out.last(), Some(Output::Interval { .. })));
        let n = self.out.len() - keep;
        self.out.drain(..n).collect()
    }

    /// The log ended: what is left, closed as a live session closes.
    pub fn finish(mut self) -> Vec<Output> {
        self.end_point(None);
        self.out.push(Output::PlanDone);
        self.out
    }
}

/// The outputs a live session would have produced for these records.
pub fn outputs(records: Vec<Record>) -> Vec<Output> {
    let mut r = Replayer::default();
    for rec in records {
        r.push(rec);
    }
    r.finish()
}

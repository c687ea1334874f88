//! The one consumer of a session: [`SessionEvent`]s in; log records,
//! findings and summaries out — the same for `run`, `watch` and the TUI.
//!
//! Per interval it folds both hosts' Samples into the point's running
//! aggregates, runs the live diagnosis (with hysteresis), and writes the
//! `sample` and `finding` records; per point it writes the `point_start`
//! event, the end event, and the summary with the point's findings ranked
//! (diagnosed over a bounded window of the point's last counted intervals).
//! The header is written when a plan starts (or at once when recording
//! starts in the middle of one), from what the session reported: the two
//! hosts, the eBPF probes, the plan.
//!
//! Faces render the [`Output`] it returns and nothing else: a face never
//! builds a header, a record, a finding or a summary itself. It does file
//! I/O (the log), so faces call it from a thread of their own — the main
//! thread for `run` and `watch`, a pipeline thread for the TUI — never from
//! the async runtime or the UI thread. Memory per point is bounded: running
//! sums, plus [`FINAL_WINDOW`] Samples per host for the closing diagnosis,
//! kept as zstd-compressed JSON ([`PackedSample`]): a big host's Sample is
//! some 0.7 MB in memory and 20-40 kB packed, so the window of a host of 256
//! CPUs and 512 queue pairs is a few MB instead of 170.

use super::aggregate::PointAggregate;
use super::log::{LogError, LogWriter};
use super::schema::{Event, Header, Record, Summary, SweepInfo, SCHEMA_VERSION};
use super::summary::{self, PointData};
use crate::diagnose::live::LiveDiagnosis;
use crate::diagnose::{Change, Finding, Input, Severity, TestContext, Window};
use crate::probe::ebpf::EbpfHosts;
use crate::probe::sample::{Hosts, Sample};
use crate::probe::system::HostInfo;
use crate::session::driver::{PointStart, SessionEvent};
use crate::session::outcome::{EndReason, PointOutcome};
use crate::session::plan::Plan;
use std::collections::VecDeque;

/// Counted intervals per host kept for the diagnosis at the end of a point.
pub const FINAL_WINDOW: usize = 120;

/// Who runs the session, for the log header.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    /// argv of this process.
    pub command_line: Vec<String>,
    /// This host.
    pub local: HostInfo,
    /// How the pair is built ("local pair: ...", "remote agent ...", "this host only").
    pub pair: String,
    /// The embedded local pair's namespaces (this end's, the agent's): the
    /// fixes a finding prints run there (`ip netns exec NS ...`).
    pub netns: Option<[String; 2]>,
}

/// What a face renders, one per event.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Connected.
    Ready {
        /// The agent's host.
        peer: Box<HostInfo>,
        /// eBPF status of both hosts.
        ebpf: Box<EbpfHosts>,
    },
    /// A plan began (its header, as logged).
    PlanStarted(Box<Header>),
    /// A point began.
    PointStarted(Box<PointStart>),
    /// One interval, with what the diagnosis raised or cleared and what is active now.
    Interval {
        /// This host's Sample.
        local: Option<Box<Sample>>,
        /// The agent's Sample.
        peer: Option<Box<Sample>>,
        /// Raised or cleared in this interval.
        changes: Vec<Change>,
        /// Active after this interval, most important first.
        active: Vec<Finding>,
    },
    /// A point ended; with a spec it has a summary (findings included).
    PointDone {
        /// How it ended.
        outcome: Box<PointOutcome>,
        /// Its summary (None when observing without traffic).
        summary: Option<Box<Summary>>,
    },
    /// The plan is over.
    PlanDone,
    /// The session failed.
    Failed(String),
    /// The test as asked cannot run on these hosts (a usage error).
    Refused(String),
}

enum Recording {
    Off,
    /// Opened; the header is written when the next plan starts.
    Pending(LogWriter),
    On(LogWriter),
}

struct PointState {
    start: PointStart,
    agg: PointAggregate,
    window: Hosts<VecDeque<PackedSample>>,
    last_end_s: f64,
}

/// A Sample kept for later as zstd-compressed JSON (every field exact):
/// the closing window's form, a twentieth of the Sample in memory.
#[derive(Debug, Clone)]
pub struct PackedSample(Vec<u8>);

impl PackedSample {
    /// zstd level of the window: the fastest (its Samples live two minutes).
    const LEVEL: i32 = 1;

    /// Pack `s`; None when it cannot be encoded (it then is not kept).
    pub fn pack(s: &Sample) -> Option<Self> {
        let json = serde_json::to_vec(s).ok()?;
        let mut z = zstd::bulk::compress(&json, Self::LEVEL).ok()?;
        // Its buffer was sized for the worst case (the input's size).
        z.shrink_to_fit();
        Some(PackedSample(z))
    }

    /// The Sample back.
    pub fn unpack(&self) -> Option<Sample> {
        let json = zstd::stream::decode_all(&self.0[..]).ok()?;
        serde_json::from_slice(&json).ok()
    }

    /// Bytes it takes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never true for a packed Sample (clippy's companion of `len`).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The consumer of one session.
pub struct Pipeline {
    origin: Origin,
    peer: HostInfo,
    ebpf: Option<EbpfHosts>,
    plan: Option<Plan>,
    recording: Recording,
    /// A second copy of every record (`watch --json` on stdout).
    mirror: Recording,
    diag: LiveDiagnosis,
    point: Option<PointState>,
}

fn push_bounded(w: &mut VecDeque<PackedSample>, s: &Sample) {
    if s.omitted {
        return;
    }
    let Some(p) = PackedSample::pack(s) else {
        tracing::warn!(
            "a {} Sample could not be packed for the closing diagnosis",
            s.host.name()
        );
        return;
    };
    w.push_back(p);
    while w.len() > FINAL_WINDOW {
        w.pop_front();
    }
}

impl Pipeline {
    /// A pipeline that does not record (yet).
    pub fn new(origin: Origin) -> Self {
        Pipeline {
            origin,
            peer: HostInfo::default(),
            ebpf: None,
            plan: None,
            recording: Recording::Off,
            mirror: Recording::Off,
            diag: LiveDiagnosis::default(),
            point: None,
        }
    }

    /// On the embedded local pair, a finding's commands run in its host's
    /// namespace ([`super::netns_fix`]).
    fn localize(&self, f: &mut crate::diagnose::Finding) {
        if let Some(ns) = &self.origin.netns {
            super::netns_fix::localize(f, ns);
        }
    }

    /// The findings in force, with their fixes as [`Pipeline::localize`] says.
    fn active(&self) -> Vec<crate::diagnose::Finding> {
        let mut all = self.diag.active();
        for f in &mut all {
            self.localize(f);
        }
        all
    }

    /// Record into `w` from now on: the header is written at once when a
    /// point is running, else when the next plan starts.
    pub fn record_to(&mut self, mut w: LogWriter) -> Result<(), LogError> {
        if self.point.is_some() {
            w.write(&Record::Header(Box::new(self.header())))?;
            self.recording = Recording::On(w);
        } else {
            self.recording = Recording::Pending(w);
        }
        Ok(())
    }

    /// Also write every record to `w` (from the next plan on), e.g. stdout.
    pub fn mirror_to(&mut self, w: LogWriter) {
        self.mirror = Recording::Pending(w);
    }

    /// Stop recording (the file keeps what was written).
    pub fn stop_recording(&mut self) {
        self.recording = Recording::Off;
    }

    /// True while a log is open (written or waiting for its header).
    pub fn recording(&self) -> bool {
        !matches!(self.recording, Recording::Off)
    }

    /// The worst severity raised so far (for `--fail-on`).
    pub fn worst_raised(&self) -> Option<Severity> {
        self.diag.worst_raised()
    }

    /// The header the log has (or would have) now.
    pub fn header(&self) -> Header {
        let plan = self.plan.as_ref();
        Header {
            schema: SCHEMA_VERSION,
            wirescope: env!("CARGO_PKG_VERSION").into(),
            command_line: self.origin.command_line.clone(),
            start_time: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            hosts: Hosts {
                local: self.origin.local.clone(),
                peer: self.peer.clone(),
            },
            pair: self.origin.pair.clone(),
            spec: plan.and_then(|p| p.spec().cloned()),
            time_s: plan.and_then(|p| p.time()).map(|t| t.as_secs_f64()),
            omit_s: plan.map(|p| p.omit().as_secs_f64()).unwrap_or(0.0),
            interval_s: plan.map(|p| p.interval().as_secs_f64()).unwrap_or(0.0),
            sweep: plan.and_then(|p| p.sweep()).map(|s| SweepInfo {
                param: s.param.name().into(),
                values: s.values.clone(),
            }),
            ebpf: self.ebpf.clone(),
        }
    }

    fn write(&mut self, r: &Record) -> Result<(), LogError> {
        let mut first = Ok(());
        for rec in [&mut self.recording, &mut self.mirror] {
            if let Recording::On(w) = rec {
                if let Err(e) = w.write(r) {
                    *rec = Recording::Off;
                    if first.is_ok() {
                        first = Err(e);
                    }
                }
            }
        }
        first
    }

    fn event(&mut self, t: f64, kind: &str, message: String) -> Result<(), LogError> {
        self.write(&Record::Event(Event {
            t,
            kind: kind.into(),
            message,
        }))
    }

    /// Process one event of the session; returns what the face should show.
    /// A log that cannot be written is an error (recording stops; the
    /// session's own state is updated first, so nothing else is lost).
    pub fn handle(&mut self, ev: SessionEvent) -> Result<Output, LogError> {
        match ev {
            SessionEvent::Ready { peer, ebpf } => {
                self.peer = (*peer).clone();
                self.ebpf = Some((*ebpf).clone());
                Ok(Output::Ready { peer, ebpf })
            }
            SessionEvent::PlanStarted(plan) => {
                self.plan = Some(*plan);
                let header = self.header();
                // Sinks waiting for a plan get the header now; one already
                // recording keeps its header (later points have their own
                // `point_start` events).
                let mut first = Ok(());
                let rec = Record::Header(Box::new(header.clone()));
                for sink in [&mut self.recording, &mut self.mirror] {
                    if let Recording::Pending(mut w) = std::mem::replace(sink, Recording::Off) {
                        match w.write(&rec) {
                            Ok(()) => *sink = Recording::On(w),
                            Err(e) if first.is_ok() => first = Err(e),
                            Err(_) => {}
                        }
                    }
                }
                first?;
                Ok(Output::PlanStarted(Box::new(header)))
            }
            SessionEvent::PointStarted(start) => {
                self.diag.reset();
                self.point = Some(PointState {
                    start: (*start).clone(),
                    agg: PointAggregate::default(),
                    window: Hosts {
                        local: VecDeque::new(),
                        peer: VecDeque::new(),
                    },
                    last_end_s: 0.0,
                });
                let label = start
                    .spec
                    .as_ref()
                    .map(|s| s.label())
                    .unwrap_or_else(|| "observe".into());
                self.event(0.0, "point_start", label)?;
                Ok(Output::PointStarted(start))
            }
            SessionEvent::Interval(ev) => self.interval(ev.local, ev.peer),
            SessionEvent::PointDone(outcome) => self.point_done(outcome),
            SessionEvent::PlanDone => Ok(Output::PlanDone),
            SessionEvent::Failed(e) => {
                let t = self.point.as_ref().map(|p| p.last_end_s).unwrap_or(0.0);
                self.point = None;
                self.event(t, "error", e.clone())?;
                Ok(Output::Failed(e))
            }
            SessionEvent::Refused(e) => {
                let t = self.point.as_ref().map(|p| p.last_end_s).unwrap_or(0.0);
                self.point = None;
                self.event(t, "refused", e.clone())?;
                Ok(Output::Refused(e))
            }
        }
    }

    fn interval(
        &mut self,
        local: Option<Sample>,
        peer: Option<Sample>,
    ) -> Result<Output, LogError> {
        let spec = self.point.as_ref().and_then(|p| p.start.spec.clone());
        if let Some(p) = self.point.as_mut() {
            p.agg.push(local.as_ref(), peer.as_ref());
            if let Some(s) = &local {
                push_bounded(&mut p.window.local, s);
                p.last_end_s = p.last_end_s.max(s.end_s);
            }
            if let Some(s) = &peer {
                push_bounded(&mut p.window.peer, s);
            }
        }
        let mut changes = self.diag.push(local.as_ref(), peer.as_ref(), spec.as_ref());
        for c in &mut changes {
            if let crate::diagnose::Change::Raised(f) = c {
                self.localize(f);
            }
        }
        for s in local.iter().chain(peer.iter()) {
            self.write(&Record::Sample(Box::new(s.clone())))?;
        }
        for c in &changes {
            self.write(&Record::Finding(Box::new(c.clone())))?;
        }
        Ok(Output::Interval {
            local: local.map(Box::new),
            peer: peer.map(Box::new),
            changes,
            active: self.active(),
        })
    }

    fn point_done(&mut self, outcome: Box<PointOutcome>) -> Result<Output, LogError> {
        let Some(point) = self.point.take() else {
            return Ok(Output::PointDone {
                outcome,
                summary: None,
            });
        };
        let t_end = point.last_end_s;
        match &outcome.end {
            EndReason::Completed => {}
            EndReason::Interrupted => {
                self.event(t_end, "interrupted", "stopped by the user".into())?
            }
            EndReason::PeerLost(w) => self.event(t_end, "peer_lost", w.clone())?,
            EndReason::Failed(w) => self.event(t_end, "error", w.clone())?,
        }
        // The spec as it ran: what the ends chose themselves (a packet
        // test's default pinning, reported in their totals) filled in.
        let ran = point.start.spec.as_ref().map(|s| {
            s.as_run(
                [Some(&outcome.local), outcome.peer.as_ref()]
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r.extra.as_ref()),
            )
        });
        let summary = match &ran {
            Some(spec) => {
                let mut s = summary::build(&PointData {
                    spec,
                    sweep: point.start.sweep.clone(),
                    outcome: &outcome,
                    agg: &point.agg,
                });
                let unpack = |w: &VecDeque<PackedSample>| -> Vec<Sample> {
                    w.iter().filter_map(PackedSample::unpack).collect()
                };
                let (l, p) = (unpack(&point.window.local), unpack(&point.window.peer));
                let (lf, pf) = self.diag.facts();
                s.findings = crate::diagnose::diagnose(&Input {
                    local: Window {
                        samples: &l,
                        facts: lf,
                    },
                    peer: Window {
                        samples: &p,
                        facts: pf,
                    },
                    test: TestContext { spec: Some(spec) },
                });
                for f in &mut s.findings {
                    self.localize(f);
                }
                let busy = |h: &super::schema::HostCpu| (h.intervals > 0).then_some(h.mean_busy);
                s.limited_by = Some(crate::diagnose::limited_by(
                    &s.findings,
                    busy(&s.hosts.local),
                    busy(&s.hosts.peer),
                ));
                self.diag
                    .note_worst(s.findings.iter().map(|f| f.severity).max());
                self.write(&Record::Summary(Box::new(s.clone())))?;
                Some(Box::new(s))
            }
            None => None,
        };
        Ok(Output::PointDone { outcome, summary })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_sample_unpacks_to_the_very_sample() {
        let log =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tui/run.jsonl");
        let samples: Vec<Sample> = super::super::log::read_log(&log)
            .unwrap()
            .into_iter()
            .filter_map(|r| match r {
                Record::Sample(s) => Some(*s),
                _ => None,
            })
            .collect();
        assert!(samples.len() >= 4);
        for s in samples {
            let p = PackedSample::pack(&s).unwrap();
            assert!(!p.is_empty());
            assert_eq!(p.unpack().unwrap(), s);
        }
    }
}

//! Both ends of a packet test point in one process: the sink's setup runs on
//! a thread inside the sink's network namespace, the generator's inside the
//! generator's, and the setup messages cross between them as JSON, as they
//! do over the session's control channel in `run --engine sink` (see
//! [`super::engine`]). What the benchmark and the engine's own
//! namespace-pair tests drive.
//!
//! It owns the order of a point — sink bound before traffic, generator
//! started with the sink's answer, intervals sampled, generator stopped and
//! drained, sink drained until its queues are quiet, loss tallied — and the
//! release of every kernel object on every path (the ends are dropped, and
//! so detached, inside their own namespaces). It prints nothing: each
//! interval goes to a callback, the point's figures are returned.

use super::engine::{DRAIN_LIMIT, QUIET};
use super::figures::PathOpener;
use super::figures::{
    gen_interval, sink_interval, summarize, tally, FlowRow, GenInterval, GenSnapshot, GenTotals,
    PointInputs, SinkInterval, SinkSnapshot, SinkSummary,
};
use super::gen::{self, RunningGenerator};
use super::rx::{self, RunningSink, SinkTotals};
use super::spec::{GeneratorEnd, SinkEnd, SinkSpec};
use super::sys::enter_netns_thread;
use super::SinkError;
use crate::traffic::Side;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Where one end runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct End {
    /// Network namespace (`/run/netns/NAME`); None = this process's.
    pub netns: Option<String>,
    /// Interface.
    pub iface: String,
}

/// One point to run.
#[derive(Debug, Clone)]
pub struct Point {
    /// The test.
    pub spec: SinkSpec,
    /// The sink's end.
    pub sink: End,
    /// The generator's end; None = sink only (another tool generates).
    pub gen: Option<End>,
    /// Sink only: the address the other tool sends from. Its frames are
    /// counted only when they look like wirescope's (source port
    /// `SRC_PORT_BASE` + flow, the stamp's "WS" at the payload's start);
    /// with a generator here its setup names the address.
    pub sender: Option<std::net::Ipv4Addr>,
    /// How long the generator sends.
    pub time: Duration,
    /// Sampling period.
    pub interval: Duration,
}

/// One interval of both ends.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LabInterval {
    /// Interval number.
    pub index: u32,
    /// The sink.
    pub sink: SinkInterval,
    /// The generator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gen: Option<GenInterval>,
}

/// Everything a point produced.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PointResult {
    /// The sink's setup answer.
    pub sink_end: SinkEnd,
    /// The generator's setup message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gen_end: Option<GeneratorEnd>,
    /// The summary (`--json`).
    pub summary: SinkSummary,
    /// Every flow: sent, received, lost, reordered, duplicates.
    pub flows: Vec<FlowRow>,
    /// The kernel id of the sink's XDP program while it ran (None without XDP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp_program_id: Option<u32>,
}

/// Run `f` on a thread inside `netns` (or this one's when None) and return its result.
pub fn in_netns<T: Send>(
    netns: Option<&str>,
    f: impl FnOnce() -> Result<T, SinkError> + Send,
) -> Result<T, SinkError> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("ws-netns".into())
            .spawn_scoped(s, move || {
                if let Some(n) = netns {
                    enter_netns_thread(n)?;
                }
                f()
            })
            .map_err(|e| SinkError::Unsupported(format!("cannot start a setup thread: {e}")))?
            .join()
            .unwrap_or_else(|_| Err(SinkError::Unsupported("a setup thread panicked".into())))
    })
}

/// A setup message as it crosses the control channel.
fn over_the_wire<T: serde::Serialize + serde::de::DeserializeOwned>(v: &T) -> Result<T, SinkError> {
    serde_json::to_string(v)
        .and_then(|s| serde_json::from_str(&s))
        .map_err(|e| SinkError::Unsupported(format!("setup message does not round-trip: {e}")))
}

/// Sleep up to `d`, returning early (true) when `cancel` is set.
fn sleep_or_cancel(d: Duration, cancel: &AtomicBool) -> bool {
    let end = Instant::now() + d;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return true;
        }
        let now = Instant::now();
        if now >= end {
            return false;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(20)));
    }
}

/// The two running ends; dropped inside their namespaces.
struct Running<'a> {
    p: &'a Point,
    sink: Option<RunningSink>,
    gen: Option<RunningGenerator>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Some(g) = self.gen.take() {
            g.abort();
            let ns = self.p.gen.as_ref().and_then(|e| e.netns.clone());
            let _ = in_netns(ns.as_deref(), move || {
                drop(g);
                Ok(())
            });
        }
        if let Some(s) = self.sink.take() {
            s.abort();
            let _ = in_netns(self.p.sink.netns.as_deref(), move || {
                drop(s);
                Ok(())
            });
        }
    }
}

/// Run one point: intervals go to `each`; `cancel` ends it early (SIGINT).
pub fn run_point(
    p: &Point,
    paths: &PathOpener,
    cancel: &AtomicBool,
    mut each: impl FnMut(&LabInterval),
) -> Result<PointResult, SinkError> {
    let spec = p.spec.clone();
    let sink = in_netns(p.sink.netns.as_deref(), || {
        rx::prepare(&spec, Side::Agent, &p.sink.iface, paths)?.start()
    })?;
    let sink_end = over_the_wire(sink.end())?;
    let xdp_program_id = sink.program_id();
    let mut run = Running {
        p,
        sink: Some(sink),
        gen: None,
    };
    if let (None, Some(ip), Some(s)) = (&p.gen, p.sender, run.sink.as_mut()) {
        s.set_generator(ip)?;
    }
    let s0 = snapshot_sink(&run);
    let mut gen_end = None;
    if let Some(g) = &p.gen {
        let spec = p.spec.clone();
        let se = sink_end.clone();
        let paths = paths.clone();
        let (end, prepared) = in_netns(g.netns.as_deref(), move || {
            let prepared = gen::prepare(&spec, Side::Controller, &g.iface, &paths)?;
            Ok((prepared.end(), prepared))
        })?;
        let end = over_the_wire(&end)?;
        // As the session does: the sink learns whose frames to count
        // before the first one is sent.
        if let Some(s) = run.sink.as_mut() {
            s.set_generator(end.ip)?;
        }
        let running = in_netns(g.netns.as_deref(), move || prepared.start(&se))?;
        gen_end = Some(end);
        run.gen = Some(running);
    }
    let g0 = run.gen.as_ref().map(RunningGenerator::snapshot);
    let (mut ps, mut pg) = (s0.clone(), g0.clone());
    let start = Instant::now();
    let mut index = 0;
    let mut interrupted = false;
    while start.elapsed() < p.time {
        let left = p.time.saturating_sub(start.elapsed()).min(p.interval);
        if sleep_or_cancel(left, cancel) {
            interrupted = true;
            break;
        }
        let (s, g) = (
            snapshot_sink(&run),
            run.gen.as_ref().map(RunningGenerator::snapshot),
        );
        each(&LabInterval {
            index,
            sink: sink_interval(&ps, &s, spec.frame_size, sink_end.speed_mbps),
            gen: pg
                .as_ref()
                .zip(g.as_ref())
                .map(|(a, b)| gen_interval(a, b, spec.frame_size, sink_end.speed_mbps)),
        });
        index += 1;
        (ps, pg) = (s, g);
    }
    let (totals, g1) = finish_generator(&mut run, interrupted)?;
    if !interrupted {
        drain_sink(&run, totals.as_ref(), cancel);
    }
    let s1 = snapshot_sink(&run);
    let seen = finish_sink(&mut run, interrupted)?;
    let mut summary = summarize(
        &spec,
        PointInputs {
            sink: (&s0, &s1),
            gen: g0.as_ref().zip(g1.as_ref()),
            totals: totals.as_ref(),
            seen: &seen.seen,
            speed_mbps: sink_end.speed_mbps,
        },
    );
    summary.interrupted = interrupted || cancel.load(Ordering::Relaxed);
    summary.rx_zero_copy = sink_end.zero_copy;
    let mut refused = sink_end.refused.clone();
    refused.append(&mut summary.refused);
    summary.refused = refused;
    let sent = totals.map(|t| t.sent_per_flow).unwrap_or_default();
    Ok(PointResult {
        flows: tally(&sent, &seen.seen, spec.dst_port).flows,
        sink_end,
        gen_end,
        summary,
        xdp_program_id,
    })
}

fn snapshot_sink(run: &Running) -> SinkSnapshot {
    match &run.sink {
        Some(s) => s.snapshot(),
        None => SinkSnapshot {
            elapsed_s: 0.0,
            mode: run.p.spec.mode,
            queues: Vec::new(),
            path: None,
        },
    }
}

/// Stop the generator (drain unless interrupted); its totals and last snapshot.
fn finish_generator(
    run: &mut Running,
    interrupted: bool,
) -> Result<(Option<GenTotals>, Option<GenSnapshot>), SinkError> {
    let Some(g) = run.gen.take() else {
        return Ok((None, None));
    };
    let ns = run.p.gen.as_ref().and_then(|e| e.netns.clone());
    let (totals, last) = in_netns(ns.as_deref(), move || Ok(g.finish(interrupted)?))?;
    Ok((Some(totals), Some(last)))
}

/// Wait until the sink has counted every frame sent, or its counts stop
/// moving for [`QUIET`], or [`DRAIN_LIMIT`] passes.
fn drain_sink(run: &Running, totals: Option<&GenTotals>, cancel: &AtomicBool) {
    if let Some(s) = &run.sink {
        s.drain(totals.map(GenTotals::sent), QUIET, DRAIN_LIMIT, &|| {
            cancel.load(Ordering::Relaxed)
        });
    }
}

fn finish_sink(run: &mut Running, interrupted: bool) -> Result<SinkTotals, SinkError> {
    let Some(s) = run.sink.take() else {
        return Err(SinkError::Unsupported("the sink is gone".into()));
    };
    if interrupted {
        s.abort();
    } else {
        s.stop();
    }
    in_netns(run.p.sink.netns.as_deref(), move || Ok(s.join()?))
}

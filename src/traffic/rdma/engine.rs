//! The RDMA engine loop: perftest's bandwidth and latency loops as ordinary
//! code over the [`Verbs`] trait.
//!
//! A test point goes through three steps on each host, matching the session's
//! `Start{spec, setup}` / `Accepting{setup}` / `Go`:
//!
//! 1. [`prepare`]: open the chosen port, create the QPs, CQs and registered
//!    buffers, and build this end's [`RdmaSetup`];
//! 2. [`Prepared::connect`]: check the peer's setup and move every QP to RTS
//!    (receives for SEND are posted here, before the peer can send);
//! 3. [`Connected::start`]: one named worker thread runs the loop; it counts
//!    into [`EngineCounters`] (one [`ConnCounters`](crate::traffic::ConnCounters)
//!    per QP, a latency histogram in latency mode) and leaves its
//!    perftest-style result in [`RdmaResult`].
//!
//! Bandwidth: the requester keeps `tx_depth` WRs outstanding per QP and
//! signals one completion every `cq_mod` WRs; every post and completion is
//! timestamped for [`report::bw_report`]. Duration mode counts the operations
//! completed between the margins, like perftest's `-D`. Latency: a ping-pong
//! on one QP — WRITE polls the last byte of the receive region, SEND waits
//! for the receive completion, READ waits for its own completion.
//!
//! The loop ends by itself in iteration mode; `stop` ends it gracefully
//! (no new WRs, outstanding signaled WRs drained for at most
//! [`DRAIN_LIMIT`]), `abort` at once. A side whose peer may still access its
//! memory (a WRITE/READ responder, either side of a bidirectional test)
//! publishes its result and keeps its QPs until it is stopped, so the peer
//! never writes into destroyed memory.

use super::report::{self, BwInput, BwReport, LatDurationReport, LatReport};
use super::setup::{Fabric, QpEndpoint, RdmaSetup, SetupError, SETUP_VERSION};
use super::spec::{limits, RdmaMode, RdmaOp, RdmaSpec};
use super::verbs::{
    wc_status_name, Completion, ConnectAttrs, Cq, QpConfig, SendWr, Verbs, VerbsError,
    VerbsProvider, WrOp,
};
use super::Chosen;
use crate::traffic::EngineSpecOps;
use crate::traffic::{
    new_latency_histogram, spawn_worker, ConnRole, ConnSnapshot, EngineControl, EngineCounters,
    EngineError, RunningEngine, Side,
};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::net::Ipv6Addr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest a graceful stop waits for outstanding completions.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// How long a waiting loop sleeps between checks of the stop flags.
const NAP: Duration = Duration::from_millis(10);
/// Completion events are awaited at most this long before the flags are re-checked.
const EVENT_WAIT: Duration = Duration::from_millis(50);
/// Spins between checks of the stop flags while busy-polling memory.
const SPIN_CHECK: u32 = 4096;

/// Errors of an RDMA test point.
#[derive(Debug, thiserror::Error)]
pub enum RdmaError {
    /// The spec is out of range.
    #[error("invalid rdma test: {0}")]
    Spec(crate::traffic::limits::SpecError),
    /// The verbs boundary failed.
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    /// The peer's setup was refused.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The port cannot be used.
    #[error("{0}")]
    Port(String),
}

/// Step 1 done: QPs exist, this end's setup is ready to send.
pub struct Prepared {
    verbs: Box<dyn Verbs>,
    spec: RdmaSpec,
    side: Side,
    setup: RdmaSetup,
    max_rd_atomic: u8,
}

/// Open the chosen port and create the QPs of `spec` for `side`.
pub fn prepare(
    spec: &RdmaSpec,
    side: Side,
    provider: &dyn VerbsProvider,
    chosen: &Chosen,
) -> Result<Prepared, RdmaError> {
    spec.validate().map_err(RdmaError::Spec)?;
    Prepared::from_verbs(
        spec,
        side,
        provider.open(&chosen.device, chosen.port)?,
        chosen,
    )
}

/// Does `side` need posted receives (SEND responder, SEND latency, bidirectional SEND)?
fn needs_receives(spec: &RdmaSpec, side: Side) -> bool {
    spec.op == RdmaOp::Send && (spec.mode == RdmaMode::Lat || spec.bidir || side == Side::Agent)
}

/// A 24-bit initial PSN.
fn random_psn() -> u32 {
    let mut b = [0u8; 4];
    // A PSN only has to differ between runs; a failed getrandom leaves a fixed one.
    let _ = getrandom::fill(&mut b);
    u32::from_le_bytes(b) & 0x00FF_FFFF
}

impl Prepared {
    /// Create the QPs of `spec` on an opened port (`prepare` opens the real
    /// device; tests pass the verbs test double).
    pub fn from_verbs(
        spec: &RdmaSpec,
        side: Side,
        mut verbs: Box<dyn Verbs>,
        chosen: &Chosen,
    ) -> Result<Self, RdmaError> {
        spec.validate().map_err(RdmaError::Spec)?;
        let info = verbs.port_info()?;
        if !info.active {
            return Err(RdmaError::Port(format!(
                "{} port {} is not ACTIVE: rdma link show {}/{}",
                chosen.device, chosen.port, chosen.device, chosen.port
            )));
        }
        let gid = match chosen.gid_index {
            Some(i) => Some(Ipv6Addr::from(verbs.gid(i)?)),
            None => None,
        };
        if info.fabric == Fabric::Ethernet && gid.is_none_or(|g| g.is_unspecified()) {
            return Err(RdmaError::Port(format!(
                "{} port {} is RoCE but has no usable GID: give its netdev an IP address or pass --gid-index",
                chosen.device, chosen.port
            )));
        }
        let receives = needs_receives(spec, side);
        let cfg = QpConfig {
            qps: spec.qps,
            tx_depth: spec.tx_depth().max(1),
            rx_depth: if receives { spec.rx_depth().max(1) } else { 1 },
            max_inline: if spec.inline() { spec.inline_size } else { 0 },
            buffer_len: spec.buffer_len(),
            use_event: spec.use_event,
        };
        let local = verbs.create(&cfg)?;
        let setup = RdmaSetup {
            version: SETUP_VERSION,
            device: chosen.device.clone(),
            port: chosen.port,
            fabric: info.fabric,
            lid: info.lid,
            gid,
            gid_index: chosen.gid_index,
            mtu: info.active_mtu,
            qps: local
                .iter()
                .map(|l| QpEndpoint {
                    qpn: l.qpn,
                    psn: random_psn(),
                    rkey: l.rkey,
                    addr: l.addr,
                    len: l.len,
                })
                .collect(),
        };
        Ok(Prepared {
            verbs,
            spec: spec.clone(),
            side,
            setup,
            max_rd_atomic: info.max_rd_atomic.clamp(1, 16),
        })
    }

    /// This end's setup, to send to the peer.
    pub fn setup(&self) -> &RdmaSetup {
        &self.setup
    }
}

/// Step 2 done: every QP is in RTS.
pub struct Connected {
    verbs: Box<dyn Verbs>,
    spec: RdmaSpec,
    side: Side,
    local: RdmaSetup,
    remote: RdmaSetup,
    path_mtu: u32,
}

impl Prepared {
    /// Check the peer's setup and connect every QP to it.
    pub fn connect(mut self, remote: &RdmaSetup) -> Result<Connected, RdmaError> {
        let agreed = remote.check_remote(&self.spec, &self.setup)?;
        for (q, (r, l)) in remote.qps.iter().zip(&self.setup.qps).enumerate() {
            self.verbs.connect(
                q,
                &ConnectAttrs {
                    path_mtu: agreed.path_mtu,
                    remote_qpn: r.qpn,
                    remote_psn: r.psn,
                    local_psn: l.psn,
                    remote_lid: remote.lid,
                    remote_gid: remote.gid.map(|g| g.octets()),
                    gid_index: self.setup.gid_index,
                    max_rd_atomic: self.max_rd_atomic,
                },
            )?;
        }
        if needs_receives(&self.spec, self.side) {
            let region = self.spec.region_len();
            let len = u32::try_from(self.spec.size.0).unwrap_or(u32::MAX);
            for q in 0..self.spec.qps as usize {
                for _ in 0..self.spec.rx_depth() {
                    self.verbs.post_recv(q, q as u64, region, len)?;
                }
            }
        }
        Ok(Connected {
            verbs: self.verbs,
            spec: self.spec,
            side: self.side,
            local: self.setup,
            remote: remote.clone(),
            path_mtu: agreed.path_mtu,
        })
    }
}

/// The end-of-point result of one side, in perftest's terms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdmaOutcome {
    /// Which end.
    pub side: Side,
    /// Bandwidth report of this side's requester (None on a pure responder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bw: Option<BwReport>,
    /// Latency report (client side, iteration mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lat: Option<LatReport>,
    /// Latency report in duration mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lat_duration: Option<LatDurationReport>,
    /// Bytes this side sent (WRITE/SEND completed, or pongs).
    pub tx_bytes: u64,
    /// Bytes this side received (SEND received, READ completed).
    pub rx_bytes: u64,
    /// Messages completed.
    pub messages: u64,
    /// Path MTU used.
    pub path_mtu: u32,
    /// Device and port used.
    pub device: String,
    /// GID index used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid_index: Option<u32>,
    /// Stopped or aborted before the iterations were done (no perftest report then).
    #[serde(default)]
    pub stopped_early: bool,
}

/// Where the worker leaves its outcome.
#[derive(Debug, Clone, Default)]
pub struct RdmaResult(Arc<Mutex<Option<RdmaOutcome>>>);

impl RdmaResult {
    /// The outcome, once the side finished its work (it may still hold its QPs until stopped).
    pub fn get(&self) -> Option<RdmaOutcome> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn set(&self, o: RdmaOutcome) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(o);
    }
}

impl Connected {
    /// The agreed path MTU.
    pub fn path_mtu(&self) -> u32 {
        self.path_mtu
    }

    /// Does this end issue work and then keep its QPs until stopped (a
    /// bidirectional bandwidth test: the other end still uses them)?
    pub fn lingers_after_its_work(&self) -> bool {
        self.spec.is_requester(self.side) && self.spec.bidir && self.spec.mode == RdmaMode::Bw
    }

    /// Start the worker. The engine is a [`RunningEngine`] (no sockets; one
    /// connection counter per QP); the result appears in [`RdmaResult`].
    pub fn start(self) -> Result<(RunningEngine, RdmaResult), EngineError> {
        self.start_with(EngineControl::default())
    }

    /// [`Connected::start`] with the worker parked until
    /// [`RunningEngine::release`] (the session starts its clock in between).
    pub fn start_gated(self) -> Result<(RunningEngine, RdmaResult), EngineError> {
        self.start_with(EngineControl::gated())
    }

    fn start_with(
        self,
        control: EngineControl,
    ) -> Result<(RunningEngine, RdmaResult), EngineError> {
        let qps = self.spec.qps as usize;
        let lat = self.spec.mode == RdmaMode::Lat;
        let counters = Arc::new(EngineCounters::new(qps, usize::from(lat)));
        let result = RdmaResult::default();
        let requester = self.spec.is_requester(self.side);
        let role = match (lat, requester) {
            (true, true) => ConnRole::Client,
            (true, false) => ConnRole::Server,
            (false, true) => ConnRole::Sender,
            (false, false) => ConnRole::Receiver,
        };
        let name = format!(
            "ws-rdma-{}",
            match self.side {
                Side::Controller => "ctl",
                Side::Agent => "agt",
            }
        );
        let (c, ctl, res) = (counters.clone(), control.clone(), result.clone());
        let h = spawn_worker(name, None, &control, move || run(self, &c, &ctl, &res))?;
        Ok((
            RunningEngine {
                threads: vec![h],
                counters,
                sockets: Vec::new(),
                control,
                roles: vec![role; qps],
                probe: None,
            },
            result,
        ))
    }
}

/// Why the loop ended without an outcome.
#[derive(Debug, thiserror::Error)]
enum LoopError {
    #[error("aborted")]
    Aborted,
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    #[error("{0}")]
    Failed(String),
}

fn run(
    c: Connected,
    counters: &EngineCounters,
    control: &EngineControl,
    result: &RdmaResult,
) -> Result<(), EngineError> {
    let mut l = Loop::new(c, counters, control);
    let out = match l.spec.mode {
        RdmaMode::Bw => l.bw(),
        RdmaMode::Lat => l.lat(),
    };
    match out {
        Ok(o) => {
            result.set(o);
            if l.must_linger() {
                l.linger();
            }
            Ok(())
        }
        Err(LoopError::Aborted) => Ok(()),
        Err(e) => Err(EngineError::Unsupported(format!(
            "rdma {} on {}: {e}",
            l.spec.label(),
            l.verbs.device()
        ))),
    }
}

/// perftest's tposted / tcompleted, or just the first post and last completion
/// when there are too many operations to keep.
struct Recorder {
    full: bool,
    posted: Vec<u64>,
    completed: Vec<u64>,
    first_post: Option<u64>,
    last_complete: u64,
}

impl Recorder {
    fn new(ops: Option<u64>, keep: u64) -> Self {
        let full = ops.is_some_and(|n| n > 0 && n <= keep);
        let n = if full { ops.unwrap_or(0) as usize } else { 0 };
        Recorder {
            full,
            posted: Vec::with_capacity(n),
            completed: vec![0; n],
            first_post: None,
            last_complete: 0,
        }
    }

    fn post(&mut self, t: u64) {
        self.first_post.get_or_insert(t);
        if self.full && self.posted.len() < self.posted.capacity() {
            self.posted.push(t);
        }
    }

    fn complete(&mut self, totccnt: u64, t: u64) {
        self.last_complete = t;
        if self.full {
            let n = self.completed.len() as u64;
            let i = totccnt.min(n).saturating_sub(1) as usize;
            if let Some(x) = self.completed.get_mut(i) {
                *x = t;
            }
        }
    }
}

/// The duration-mode clock: warm-up margin, sample window, cool-down margin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Warmup,
    Sample,
    Cooldown,
    End,
}

struct Loop<'a> {
    verbs: Box<dyn Verbs>,
    spec: RdmaSpec,
    side: Side,
    remote: Vec<QpEndpoint>,
    local: RdmaSetup,
    path_mtu: u32,
    counters: &'a EngineCounters,
    control: &'a EngineControl,
    origin: Instant,
    sample_start: Option<u64>,
    sample_end: Option<u64>,
    comps: Vec<Completion>,
}

impl<'a> Loop<'a> {
    fn new(c: Connected, counters: &'a EngineCounters, control: &'a EngineControl) -> Self {
        Loop {
            verbs: c.verbs,
            spec: c.spec,
            side: c.side,
            remote: c.remote.qps,
            local: c.local,
            path_mtu: c.path_mtu,
            counters,
            control,
            origin: Instant::now(),
            sample_start: None,
            sample_end: None,
            comps: Vec::with_capacity(64),
        }
    }

    fn ticks(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The duration-mode phase now (Sample forever in iteration mode), recording the window's ends.
    fn phase(&mut self) -> Phase {
        let Some(secs) = self.spec.secs else {
            return Phase::Sample;
        };
        let t = self.origin.elapsed().as_secs_f64();
        let m = self.spec.margin_secs();
        let p = if t < m {
            Phase::Warmup
        } else if t < secs - m {
            Phase::Sample
        } else if t < secs {
            Phase::Cooldown
        } else {
            Phase::End
        };
        if p != Phase::Warmup && self.sample_start.is_none() {
            self.sample_start = Some(self.ticks());
        }
        if matches!(p, Phase::Cooldown | Phase::End) && self.sample_end.is_none() {
            self.sample_end = Some(self.ticks());
        }
        p
    }

    fn requester(&self) -> bool {
        self.spec.is_requester(self.side)
    }

    /// Keep the QPs after finishing: the peer may still access this memory.
    fn must_linger(&self) -> bool {
        let passive_responder = !self.requester() && self.spec.op != RdmaOp::Send;
        self.spec.mode == RdmaMode::Bw && (self.spec.bidir || passive_responder)
            || (self.spec.mode == RdmaMode::Lat
                && !self.requester()
                && self.spec.op == RdmaOp::Read)
    }

    fn linger(&self) {
        while !self.control.stopping() {
            std::thread::park_timeout(NAP);
        }
    }

    fn wr_op(&self, q: usize) -> WrOp {
        let r = self.remote[q];
        let region = self.spec.region_len();
        match self.spec.op {
            // Into the peer's receive region.
            RdmaOp::Write => WrOp::Write {
                remote_addr: r.addr + region,
                rkey: r.rkey,
            },
            // From the peer's send region.
            RdmaOp::Read => WrOp::Read {
                remote_addr: r.addr,
                rkey: r.rkey,
            },
            RdmaOp::Send => WrOp::Send,
        }
    }

    /// Local offset of a send WR: the send region, or the receive region for READ's data.
    fn local_offset(&self) -> u64 {
        if self.spec.op == RdmaOp::Read {
            self.spec.region_len()
        } else {
            0
        }
    }

    fn size32(&self) -> u32 {
        u32::try_from(self.spec.size.0).unwrap_or(u32::MAX)
    }

    fn outcome(&self) -> RdmaOutcome {
        let s = self.counters.snapshot();
        RdmaOutcome {
            side: self.side,
            bw: None,
            lat: None,
            lat_duration: None,
            tx_bytes: s.iter().map(|c| c.tx_bytes).sum(),
            rx_bytes: s.iter().map(|c| c.rx_bytes).sum(),
            messages: s.iter().map(|c| c.messages).sum(),
            path_mtu: self.path_mtu,
            device: format!("{} port {}", self.local.device, self.local.port),
            gid_index: self.local.gid_index,
            stopped_early: false,
        }
    }

    fn count(&self, q: usize, tx: u64, rx: u64, messages: u64) {
        if let Some(c) = self.counters.conns.get(q) {
            c.tx_bytes.fetch_add(tx, Ordering::Relaxed);
            c.rx_bytes.fetch_add(rx, Ordering::Relaxed);
            c.messages.fetch_add(messages, Ordering::Relaxed);
        }
    }

    fn check(&self, c: &Completion, what: &str, done: u64) -> Result<(), LoopError> {
        if c.status == 0 {
            return Ok(());
        }
        Err(LoopError::Failed(format!(
            "{what} completion error on QP {}: {} (status {}) after {done} completions; \
             check the port state, the peer and `rdma statistic show link {}/{}`",
            c.wr_id,
            wc_status_name(c.status),
            c.status,
            self.local.device,
            self.local.port
        )))
    }

    /// Poll `cq` into `self.comps`, dropping WRs flushed while stopping and
    /// failing on any other error status.
    fn reap(&mut self, cq: Cq, ending: bool, what: &str, done: u64) -> Result<(), LoopError> {
        self.comps.clear();
        self.verbs.poll(cq, &mut self.comps)?;
        if ending {
            self.comps.retain(|c| c.status == 0);
        }
        for c in &self.comps {
            self.check(c, what, done)?;
        }
        Ok(())
    }

    /// perftest's `run_iter_bw` and `run_iter_bw_server`, in one loop (bidirectional runs both).
    fn bw(&mut self) -> Result<RdmaOutcome, LoopError> {
        let requester = self.requester();
        let receives = needs_receives(&self.spec, self.side);
        if !requester && !receives {
            // WRITE/READ responder: the peer's NIC does the work; nothing to count here.
            return Ok(self.outcome());
        }
        let mut st = BwCounters::new(&self.spec);
        let stopped_early = self.bw_loop(&mut st, requester, receives)?;
        let mut out = self.outcome();
        out.stopped_early = stopped_early;
        if requester && !stopped_early {
            out.bw = self.bw_figures(&st);
        }
        Ok(out)
    }

    /// Post, reap and re-post until both directions are done; true when it
    /// stopped before the count it was given (or with work outstanding).
    fn bw_loop(
        &mut self,
        st: &mut BwCounters,
        requester: bool,
        receives: bool,
    ) -> Result<bool, LoopError> {
        let total = self.spec.total_ops();
        loop {
            if self.control.aborted() {
                return Err(LoopError::Aborted);
            }
            let phase = self.phase();
            let ending = self.control.stopping() || phase == Phase::End;
            let mut progressed = false;
            if requester && !ending {
                progressed |= self.bw_post_sends(st)?;
            }
            if requester {
                progressed |= self.bw_reap_sends(st, phase, ending)?;
            }
            if receives {
                progressed |= self.bw_reap_receives(st, phase, ending, requester)?;
            }
            let outstanding = st.covers.iter().any(|c| !c.is_empty());
            let req_done = !requester
                || match total {
                    Some(n) if st.totccnt >= n => true,
                    _ => ending && !outstanding,
                };
            // A pure receiver in duration mode keeps its receives posted until it is
            // stopped (or well past its own end), so the sender can drain.
            let rsp_done = !receives
                || match total {
                    Some(n) if st.rcnt >= n => true,
                    _ if requester => ending,
                    _ => {
                        if phase == Phase::End {
                            st.end_seen.get_or_insert_with(Instant::now);
                        }
                        self.control.stopping()
                            || st.end_seen.is_some_and(|e| e.elapsed() > DRAIN_LIMIT)
                    }
                };
            if req_done && rsp_done {
                return Ok(total.is_some_and(|n| {
                    (requester && st.totccnt < n) || (receives && !requester && st.rcnt < n)
                }));
            }
            if ending && requester {
                let since = *st.drain_since.get_or_insert_with(Instant::now);
                if since.elapsed() > DRAIN_LIMIT {
                    // Outstanding WRs never completed (the peer stopped receiving).
                    return Ok(total.is_some());
                }
            }
            if !progressed && self.spec.use_event {
                let cq = if requester { Cq::Send } else { Cq::Recv };
                self.verbs.wait(cq, EVENT_WAIT)?;
            }
        }
    }

    /// Fill every QP's send queue up to the tx depth (and the iteration
    /// count); true when anything was posted.
    fn bw_post_sends(&mut self, st: &mut BwCounters) -> Result<bool, LoopError> {
        let iters = self.spec.iters;
        let cq_mod = u64::from(self.spec.cq_mod());
        let tx_depth = u64::from(self.spec.tx_depth());
        let inline = self.spec.inline();
        let mut progressed = false;
        for q in 0..st.scnt.len() {
            while iters.is_none_or(|i| st.scnt[q] < i) && st.scnt[q] - st.ccnt[q] < tx_depth {
                let signaled =
                    st.scnt[q] % cq_mod == cq_mod - 1 || iters.is_some_and(|i| st.scnt[q] == i - 1);
                let t = self.ticks();
                st.rec.post(t);
                let wr = SendWr {
                    wr_id: q as u64,
                    op: self.wr_op(q),
                    offset: self.local_offset(),
                    len: self.size32(),
                    signaled,
                    inline,
                };
                self.verbs.post_send(q, &wr)?;
                st.scnt[q] += 1;
                st.pending[q] += 1;
                if signaled {
                    st.covers[q].push_back(st.pending[q]);
                    st.pending[q] = 0;
                }
                progressed = true;
            }
        }
        Ok(progressed)
    }

    /// Reap send completions; each covers the unsignaled WRs before it.
    fn bw_reap_sends(
        &mut self,
        st: &mut BwCounters,
        phase: Phase,
        ending: bool,
    ) -> Result<bool, LoopError> {
        let qps = st.scnt.len();
        let cq_mod = u64::from(self.spec.cq_mod());
        let size = self.spec.size.0;
        let read = self.spec.op == RdmaOp::Read;
        self.reap(Cq::Send, ending, "send", st.totccnt)?;
        for i in 0..self.comps.len() {
            let c = self.comps[i];
            let q = (c.wr_id as usize).min(qps - 1);
            let fill = st.covers[q].pop_front().unwrap_or(cq_mod);
            st.ccnt[q] += fill;
            st.totccnt += fill;
            st.rec.complete(st.totccnt, self.ticks());
            if phase == Phase::Sample && self.spec.secs.is_some() {
                st.window_ops += fill;
            }
            if read {
                self.count(q, 0, fill * size, fill);
            } else {
                self.count(q, fill * size, 0, fill);
            }
        }
        Ok(!self.comps.is_empty())
    }

    /// Reap receive completions and post a receive in place of each.
    fn bw_reap_receives(
        &mut self,
        st: &mut BwCounters,
        phase: Phase,
        ending: bool,
        requester: bool,
    ) -> Result<bool, LoopError> {
        let qps = st.scnt.len();
        let iters = self.spec.iters;
        let region = self.spec.region_len();
        self.reap(Cq::Recv, ending, "receive", st.rcnt)?;
        for i in 0..self.comps.len() {
            let c = self.comps[i];
            let q = (c.wr_id as usize).min(qps - 1);
            st.rcnt += 1;
            self.count(q, 0, u64::from(c.byte_len), 1);
            if !requester && phase == Phase::Sample && self.spec.secs.is_some() {
                st.window_ops += 1;
            }
            if !self.control.stopping() && iters.is_none_or(|n| st.posted_recv[q] < n) {
                self.verbs.post_recv(q, q as u64, region, self.size32())?;
                st.posted_recv[q] += 1;
            }
        }
        Ok(!self.comps.is_empty())
    }

    /// The requester's bandwidth figures (perftest's report) from what the
    /// loop recorded: over the iterations, or over the sampled window.
    fn bw_figures(&self, st: &BwCounters) -> Option<BwReport> {
        let size = self.spec.size.0;
        let cq_mod = u64::from(self.spec.cq_mod());
        let rec = &st.rec;
        match (self.spec.total_ops(), self.spec.secs) {
            (Some(n), _) => {
                let peak = rec.full && n <= limits::PEAK_MAX_OPS;
                let first = [rec.first_post.unwrap_or(0)];
                let last = [rec.last_complete];
                report::bw_report(&BwInput {
                    size,
                    ops: n,
                    ticks_per_sec: 1e9,
                    posted: if peak { &rec.posted } else { &first },
                    completed: if peak { &rec.completed } else { &last },
                    cq_mod,
                    peak,
                })
            }
            (None, Some(_)) => report::bw_report_duration(
                size,
                st.window_ops,
                self.sample_start.unwrap_or(0),
                self.sample_end.unwrap_or(0),
                1e9,
            ),
            _ => None,
        }
    }

    /// Busy-poll (or wait on events for) one completion on `cq`.
    fn await_completion(&mut self, cq: Cq, what: &str, done: u64) -> Result<Completion, LoopError> {
        let mut spins = 0u32;
        loop {
            self.comps.clear();
            self.verbs.poll(cq, &mut self.comps)?;
            if let Some(c) = self.comps.first().copied() {
                self.check(&c, what, done)?;
                return Ok(c);
            }
            if self.spec.use_event {
                self.verbs.wait(cq, EVENT_WAIT)?;
            }
            spins += 1;
            if spins.is_multiple_of(SPIN_CHECK) || self.spec.use_event {
                self.interrupted()?;
            }
        }
    }

    /// Stop/abort requested, or the duration is over.
    fn interrupted(&mut self) -> Result<(), LoopError> {
        if self.control.aborted() {
            return Err(LoopError::Aborted);
        }
        if self.control.stopping() || self.phase() == Phase::End {
            return Err(LoopError::Failed("stopped".into()));
        }
        Ok(())
    }

    /// Spin until the last byte of the receive region holds `marker`.
    fn await_marker(&mut self, marker: u8) -> Result<(), LoopError> {
        let at = self.spec.region_len() + self.spec.size.0 - 1;
        let mut spins = 0u32;
        while self.verbs.read_byte(0, at) != marker {
            spins += 1;
            if spins.is_multiple_of(SPIN_CHECK) {
                self.interrupted()?;
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    /// Post the ping/pong of iteration `i`.
    fn post_lat(&mut self, i: u64) -> Result<(), LoopError> {
        let marker = lat_marker(i);
        let last = self.spec.size.0 - 1;
        self.verbs.write_byte(0, last, marker);
        let wr = SendWr {
            wr_id: 0,
            op: self.wr_op(0),
            offset: self.local_offset(),
            len: self.size32(),
            signaled: true,
            inline: self.spec.inline(),
        };
        self.verbs.post_send(0, &wr)?;
        Ok(())
    }

    /// perftest's `run_iter_lat_write` / `run_iter_lat_send` / `run_iter_lat` (read).
    fn lat(&mut self) -> Result<RdmaOutcome, LoopError> {
        let client = self.requester();
        let size = self.spec.size.0;
        let rtt = u64::from(self.spec.rtt_factor());
        let keep = self.spec.recorded_ops() as usize;
        let mut posted: Vec<u64> = Vec::with_capacity(keep);
        let mut hist = new_latency_histogram();
        let mut merged = Instant::now();
        let mut window_ops = 0u64;
        let mut i = 0u64;
        if !client && self.spec.op == RdmaOp::Read {
            return Ok(self.outcome());
        }
        let stopped = loop {
            if self.spec.iters.is_some_and(|n| i >= n) {
                break false;
            }
            match self.interrupted() {
                Ok(()) => {}
                Err(LoopError::Failed(_)) => break self.spec.iters.is_some(),
                Err(e) => return Err(e),
            }
            let t0 = self.ticks();
            let step = if client {
                self.lat_client_step(i)
            } else {
                self.lat_server_step(i)
            };
            match step {
                Ok(()) => {}
                Err(LoopError::Failed(m)) if m == "stopped" => break self.spec.iters.is_some(),
                Err(e) => return Err(e),
            }
            let t1 = self.ticks();
            if posted.len() < keep {
                posted.push(t0);
            }
            if client {
                let _ = hist.record(((t1 - t0) / rtt).max(1));
                let tx = if self.spec.op == RdmaOp::Read {
                    0
                } else {
                    size
                };
                self.count(0, tx, size, 1);
            } else {
                self.count(0, size, size, 1);
            }
            if self.phase() == Phase::Sample && self.spec.secs.is_some() {
                window_ops += 1;
            }
            if merged.elapsed() >= Duration::from_millis(10) {
                self.merge_latency(&mut hist);
                merged = Instant::now();
            }
            i += 1;
        };
        self.merge_latency(&mut hist);
        let mut out = self.outcome();
        out.stopped_early = stopped;
        if client && !stopped {
            let rf = self.spec.rtt_factor();
            match self.spec.secs {
                None => out.lat = report::lat_report(size, &posted, rf, 1000.0),
                Some(_) => {
                    let w = self
                        .sample_end
                        .unwrap_or(0)
                        .saturating_sub(self.sample_start.unwrap_or(0));
                    out.lat_duration = report::lat_report_duration(size, window_ops, w, rf, 1000.0);
                }
            }
        }
        Ok(out)
    }

    fn lat_client_step(&mut self, i: u64) -> Result<(), LoopError> {
        match self.spec.op {
            RdmaOp::Write => {
                self.post_lat(i)?;
                self.await_marker(lat_marker(i))?;
                self.await_completion(Cq::Send, "write", i)?;
            }
            RdmaOp::Send => {
                self.post_lat(i)?;
                self.await_completion(Cq::Recv, "receive", i)?;
                self.repost_recv()?;
                self.await_completion(Cq::Send, "send", i)?;
            }
            RdmaOp::Read => {
                self.post_lat(i)?;
                self.await_completion(Cq::Send, "read", i)?;
            }
        }
        Ok(())
    }

    fn lat_server_step(&mut self, i: u64) -> Result<(), LoopError> {
        match self.spec.op {
            RdmaOp::Write => {
                self.await_marker(lat_marker(i))?;
                self.post_lat(i)?;
                self.await_completion(Cq::Send, "write", i)?;
            }
            RdmaOp::Send => {
                self.await_completion(Cq::Recv, "receive", i)?;
                self.repost_recv()?;
                self.post_lat(i)?;
                self.await_completion(Cq::Send, "send", i)?;
            }
            RdmaOp::Read => {}
        }
        Ok(())
    }

    fn repost_recv(&mut self) -> Result<(), LoopError> {
        let region = self.spec.region_len();
        let len = self.size32();
        self.verbs.post_recv(0, 0, region, len)?;
        Ok(())
    }

    fn merge_latency(&self, hist: &mut Histogram<u64>) {
        if let Some(m) = self.counters.latency.first() {
            let mut g = m.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // Same bounds on both histograms: add cannot fail.
            let _ = g.add(&*hist);
        }
        hist.reset();
    }
}

/// The latency marker of iteration `i`: never 0 (the buffer starts zeroed)
/// and different from the previous iteration's.
pub fn lat_marker(i: u64) -> u8 {
    (i % 255) as u8 + 1
}

/// Per-interval figures of an RDMA engine (for the Sample and the log).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdmaInterval {
    /// Interval length (s).
    pub secs: f64,
    /// Bytes sent per second x 8.
    pub tx_bps: f64,
    /// Bytes received per second x 8.
    pub rx_bps: f64,
    /// Messages completed per second.
    pub msg_per_s: f64,
    /// Per QP: bytes and messages in the interval.
    pub qps: Vec<QpInterval>,
    /// Latency percentiles (µs) of the interval, latency mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lat_p50_us: Option<f64>,
    /// 99th percentile (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lat_p99_us: Option<f64>,
}

/// One QP's interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QpInterval {
    /// QP index.
    pub qp: usize,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Messages.
    pub messages: u64,
}

/// Turn two counter snapshots (`EngineCounters::snapshot`) `secs` apart, and
/// the latencies taken in between, into the interval's figures.
pub fn interval(
    prev: &[ConnSnapshot],
    cur: &[ConnSnapshot],
    secs: f64,
    lat: Option<&Histogram<u64>>,
) -> RdmaInterval {
    let qps: Vec<QpInterval> = cur
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let p = prev.get(i).copied().unwrap_or_default();
            QpInterval {
                qp: i,
                tx_bytes: c.tx_bytes.saturating_sub(p.tx_bytes),
                rx_bytes: c.rx_bytes.saturating_sub(p.rx_bytes),
                messages: c.messages.saturating_sub(p.messages),
            }
        })
        .collect();
    let per_s = |v: u64| if secs > 0.0 { v as f64 / secs } else { 0.0 };
    let lat = lat.filter(|h| !h.is_empty());
    RdmaInterval {
        secs,
        tx_bps: per_s(qps.iter().map(|q| q.tx_bytes).sum()) * 8.0,
        rx_bps: per_s(qps.iter().map(|q| q.rx_bytes).sum()) * 8.0,
        msg_per_s: per_s(qps.iter().map(|q| q.messages).sum()),
        qps,
        lat_p50_us: lat.map(|h| h.value_at_quantile(0.5) as f64 / 1000.0),
        lat_p99_us: lat.map(|h| h.value_at_quantile(0.99) as f64 / 1000.0),
    }
}

/// The bandwidth loop's counters (perftest's names): per QP the sends
/// posted (`scnt`) and completed (`ccnt`), the unsignaled sends waiting for
/// a signaled one (`pending`) and the sends each signaled completion covers
/// (`covers`); in total the completions, the sampled window's operations and
/// the receives; when the drain and the peer's end began.
struct BwCounters {
    rec: Recorder,
    scnt: Vec<u64>,
    ccnt: Vec<u64>,
    pending: Vec<u64>,
    covers: Vec<VecDeque<u64>>,
    totccnt: u64,
    window_ops: u64,
    rcnt: u64,
    posted_recv: Vec<u64>,
    drain_since: Option<Instant>,
    end_seen: Option<Instant>,
}

impl BwCounters {
    fn new(spec: &RdmaSpec) -> BwCounters {
        let qps = spec.qps as usize;
        BwCounters {
            rec: Recorder::new(spec.total_ops(), spec.recorded_ops()),
            scnt: vec![0; qps],
            ccnt: vec![0; qps],
            pending: vec![0; qps],
            covers: vec![VecDeque::new(); qps],
            totccnt: 0,
            window_ops: 0,
            rcnt: 0,
            posted_recv: vec![u64::from(spec.rx_depth()); qps],
            drain_since: None,
            end_seen: None,
        }
    }
}

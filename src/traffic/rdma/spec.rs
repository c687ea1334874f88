//! What an RDMA test point asks for ([`RdmaSpec`]), perftest's defaults and
//! limits, the values derived from it (CQ moderation, buffer layout,
//! timestamps kept) and the bound on what it makes a host allocate.
//!
//! Plain data (its [`EngineSpecOps`] answers hand `prepare` and `preflight`
//! to `session.rs`): an agent runs [`EngineSpecOps::validate`] on a spec
//! received from the network before it allocates anything.

use crate::traffic::limits::{MemoryNeed, SpecError};
use crate::traffic::options::{SweepParam, SweepPoint};
use crate::traffic::{Engine, EngineError, EngineHost, EngineKind, EngineSpecOps, Side};
use crate::units::Bytes;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// The verb the requester posts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RdmaOp {
    /// RDMA WRITE into the peer's buffer (`ib_write_bw` / `ib_write_lat`).
    Write,
    /// RDMA READ from the peer's buffer (`ib_read_bw` / `ib_read_lat`).
    Read,
    /// SEND into the peer's posted receives (`ib_send_bw` / `ib_send_lat`).
    Send,
}

impl RdmaOp {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            RdmaOp::Write => "write",
            RdmaOp::Read => "read",
            RdmaOp::Send => "send",
        }
    }

    /// Does the requester address the peer's memory (needs its rkey)?
    pub fn remote_memory(self) -> bool {
        !matches!(self, RdmaOp::Send)
    }
}

/// Bandwidth or latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RdmaMode {
    /// Streams of `tx_depth` outstanding messages per QP (`*_bw`).
    Bw,
    /// One message in flight, ping-pong (`*_lat`).
    Lat,
}

impl RdmaMode {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            RdmaMode::Bw => "bw",
            RdmaMode::Lat => "lat",
        }
    }
}

/// Device, port and GID chosen on one host; None = the default (the RDMA
/// device behind the interface that routes to the peer, its first ACTIVE
/// port, its RoCE v2 GID of the address in use).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdmaEndpoint {
    /// `--ib-dev` (perftest `-d`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ib_dev: Option<String>,
    /// `--ib-port` (perftest `-i`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ib_port: Option<u8>,
    /// `--gid-index` (perftest `-x`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid_index: Option<u32>,
}

/// perftest's limits (perftest_parameters.h).
pub mod limits {
    /// Smallest message (bytes); the latency marker needs one byte.
    pub const MIN_SIZE: u64 = 2;
    /// `MAX_SIZE`: largest message, and the top of the `-a` sweep (8 MiB).
    pub const MAX_SIZE: u64 = 8 << 20;
    /// `MIN_ITER`.
    pub const MIN_ITERS: u64 = 5;
    /// `MAX_ITER`.
    pub const MAX_ITERS: u64 = 100_000_000;
    /// `MAX_QP_NUM`.
    pub const MAX_QPS: u32 = 16_384;
    /// `MAX_TX`.
    pub const MAX_TX_DEPTH: u32 = 15_000;
    /// `MAX_RX`.
    pub const MAX_RX_DEPTH: u32 = 16_384;
    /// `MAX_INLINE`.
    pub const MAX_INLINE: u32 = 912;
    /// `MAX_CQ_MOD`.
    pub const MAX_CQ_MOD: u32 = 1024;
    /// `DEF_CQ_MOD`.
    pub const DEF_CQ_MOD: u32 = 100;
    /// `MSG_SIZE_CQ_MOD_LIMIT`: above it CQ moderation is off unless asked for.
    pub const CQ_MOD_SIZE_LIMIT: u64 = 8192;
    /// perftest: "default with peak up to iters=20000": the peak is an O(n²/cq_mod) search.
    pub const PEAK_MAX_OPS: u64 = 20_000;
    /// Longest `--time` (s).
    pub const MAX_SECS: f64 = 3600.0;
    /// What one test point may make a host allocate (buffers + timestamps).
    pub const MAX_MEMORY: u64 = 1 << 30;
    /// Per-operation timestamps kept for the perftest arithmetic (16 B each).
    pub const MAX_RECORDED_OPS: u64 = 1 << 22;
    /// The buffer granule (perftest's `cycle_buffer`: one page).
    pub const PAGE: u64 = 4096;
}

/// One RDMA test point. The controller is perftest's client (requester);
/// with `bidir` both ends are requesters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdmaSpec {
    /// Verb.
    pub op: RdmaOp,
    /// Bandwidth or latency.
    pub mode: RdmaMode,
    /// Message size (`-s`); a `--sweep size=all` is one point per [`all_sizes`].
    pub size: Bytes,
    /// QPs (`-q`).
    pub qps: u32,
    /// Outstanding send WRs per QP (`-t`).
    pub tx_depth: u32,
    /// Posted receive WRs per QP for SEND (`-r`).
    pub rx_depth: u32,
    /// Iterations per QP (`-n`); None with `secs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iters: Option<u64>,
    /// Duration (`-D`, seconds); None with `iters`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secs: Option<f64>,
    /// Both directions at once (`-b`, bw only).
    #[serde(default)]
    pub bidir: bool,
    /// Messages up to this size are posted inline (`-I`).
    pub inline_size: u32,
    /// Sleep on completion events instead of busy polling (`-e`).
    #[serde(default)]
    pub use_event: bool,
    /// Signal one completion every this many WRs (`-Q`); None = perftest's rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cq_mod: Option<u32>,
    /// Path MTU to use (`-m`); None = the smaller active MTU of the two ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Part of a `-a` sweep (keeps CQ moderation for large messages, as perftest does).
    #[serde(default)]
    pub sweep: bool,
    /// Controller's device/port/GID.
    #[serde(default)]
    pub local: RdmaEndpoint,
    /// Agent's device/port/GID.
    #[serde(default)]
    pub peer: RdmaEndpoint,
}

/// The sizes of `--sweep size=all` (perftest `-a`): 2 B to 8 MiB, powers of two.
pub fn all_sizes() -> Vec<Bytes> {
    (1..=23).map(|p| Bytes(1u64 << p)).collect()
}

/// Valid IB MTUs (bytes).
pub const IB_MTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];

impl RdmaSpec {
    /// perftest's defaults for an op and mode (`ib_write_bw`: 64 KiB, 5000
    /// iterations, tx depth 128; `*_lat`: 2 B, 1000 iterations, depth 1;
    /// inline 220 B for write latency, 236 B for send latency).
    pub fn perftest_defaults(op: RdmaOp, mode: RdmaMode) -> Self {
        let (size, iters, tx_depth) = match (mode, op) {
            (RdmaMode::Bw, RdmaOp::Write) => (65536, 5000, 128),
            (RdmaMode::Bw, _) => (65536, 1000, 128),
            (RdmaMode::Lat, _) => (2, 1000, 1),
        };
        let inline_size = match (mode, op) {
            (RdmaMode::Lat, RdmaOp::Write) => 220,
            (RdmaMode::Lat, RdmaOp::Send) => 236,
            _ => 0,
        };
        RdmaSpec {
            op,
            mode,
            size: Bytes(size),
            qps: 1,
            tx_depth,
            rx_depth: 512,
            iters: Some(iters),
            secs: None,
            bidir: false,
            inline_size,
            use_event: false,
            cq_mod: None,
            mtu: None,
            sweep: false,
            local: RdmaEndpoint::default(),
            peer: RdmaEndpoint::default(),
        }
    }

    /// CQ moderation as perftest sets it: the request, else 100 — or 1 for
    /// messages above 8 KiB outside a sweep — and never above the tx depth
    /// (nor the iteration count).
    pub fn cq_mod(&self) -> u32 {
        let mut c = match self.cq_mod {
            Some(c) => c,
            None if self.size.0 > limits::CQ_MOD_SIZE_LIMIT && !self.sweep => 1,
            None => limits::DEF_CQ_MOD,
        };
        c = c.min(self.tx_depth());
        c.max(1)
    }

    /// tx depth, capped to the iterations as perftest does.
    pub fn tx_depth(&self) -> u32 {
        match self.iters {
            Some(i) => self.tx_depth.min(u32::try_from(i).unwrap_or(u32::MAX)),
            None => self.tx_depth,
        }
    }

    /// rx depth, capped to the iterations (SEND).
    pub fn rx_depth(&self) -> u32 {
        match self.iters {
            Some(i) => self.rx_depth.min(u32::try_from(i).unwrap_or(u32::MAX)),
            None => self.rx_depth,
        }
    }

    /// One region of a QP's buffer: the message rounded up to a page.
    pub fn region_len(&self) -> u64 {
        self.size.0.div_ceil(limits::PAGE) * limits::PAGE
    }

    /// The registered buffer of one QP: a send region, then a receive region
    /// that the peer writes into, reads from or sends into.
    pub fn buffer_len(&self) -> u64 {
        2 * self.region_len()
    }

    /// Per-operation timestamps this host keeps (perftest's tposted/tcompleted).
    pub fn recorded_ops(&self) -> u64 {
        match (self.mode, self.iters) {
            (_, None) => 0,
            (RdmaMode::Lat, Some(i)) => i.min(limits::MAX_RECORDED_OPS),
            (RdmaMode::Bw, Some(i)) => {
                let n = i.saturating_mul(u64::from(self.qps));
                if n <= limits::MAX_RECORDED_OPS {
                    n
                } else {
                    0
                }
            }
        }
    }

    /// What one host allocates for this point: buffers + 16 B per recorded operation.
    pub fn memory_bytes(&self) -> u64 {
        self.buffer_len()
            .saturating_mul(u64::from(self.qps))
            .saturating_add(self.recorded_ops().saturating_mul(16))
    }

    /// Total operations the requester issues (iterations x QPs), when counted.
    pub fn total_ops(&self) -> Option<u64> {
        self.iters.map(|i| i.saturating_mul(u64::from(self.qps)))
    }

    /// Messages up to the inline size go inline (never for READ).
    pub fn inline(&self) -> bool {
        self.op != RdmaOp::Read && self.size.0 <= u64::from(self.inline_size)
    }

    /// perftest's rtt_factor: write and send latencies are half a round trip, read a whole one.
    pub fn rtt_factor(&self) -> u32 {
        if self.op == RdmaOp::Read {
            1
        } else {
            2
        }
    }

    /// perftest's duration margin: a quarter of the duration, before and after the sample.
    pub fn margin_secs(&self) -> f64 {
        self.secs.map_or(0.0, |s| s / 4.0)
    }

    /// Endpoint choice of a side.
    pub fn endpoint(&self, side: crate::traffic::Side) -> &RdmaEndpoint {
        match side {
            crate::traffic::Side::Controller => &self.local,
            crate::traffic::Side::Agent => &self.peer,
        }
    }

    /// Is `side` a requester (posts the verb)?
    pub fn is_requester(&self, side: crate::traffic::Side) -> bool {
        side == crate::traffic::Side::Controller || self.bidir
    }
}

/// What the session, the plan, the faces and the diagnosis ask of an RDMA
/// spec (see [`EngineSpecOps`]).
impl EngineSpecOps for RdmaSpec {
    fn kind(&self) -> EngineKind {
        EngineKind::Rdma
    }

    fn mode_name(&self) -> &'static str {
        self.mode.name()
    }

    /// `<->` with `--bidir`, `<-` for READ (the requester pulls).
    fn arrow(&self) -> &'static str {
        if self.bidir {
            "<->"
        } else if self.op == RdmaOp::Read {
            "<-"
        } else {
            "->"
        }
    }

    fn with_flows(&self, n: u32) -> String {
        format!(
            "--engine rdma --op {} -m {} --qps {n}",
            self.op.name(),
            self.mode.name()
        )
    }

    fn short(&self) -> String {
        format!(
            "rdma {} {} --qps {}",
            self.op.name(),
            self.mode.name(),
            self.qps
        )
    }

    /// One line for headers: `rdma write bw 65536 B x 5000 iters, 1 QP`.
    fn label(&self) -> String {
        let amount = match (self.iters, self.secs) {
            (Some(i), _) => format!("{i} iters"),
            (None, Some(s)) => format!("{s} s"),
            _ => String::new(),
        };
        format!(
            "rdma {} {} {} B x {amount}, {} QP{}{}",
            self.op.name(),
            match self.mode {
                RdmaMode::Bw => "bw",
                RdmaMode::Lat => "lat",
            },
            self.size.0,
            self.qps,
            if self.qps == 1 { "" } else { "s" },
            if self.bidir { ", bidirectional" } else { "" }
        )
    }

    fn memory_needed(&self, _side: Side) -> MemoryNeed {
        MemoryNeed {
            bytes: Bytes(self.memory_bytes()),
            what: format!("{} QP buffers of {} and timestamps", self.qps, self.size),
            smaller: "use fewer --qps, a smaller --size or fewer --iters".into(),
        }
    }

    /// Work requests over queue pairs, not a byte stream through the stack.
    fn small_packets_by_design(&self, _mtu: f64) -> bool {
        true
    }

    fn prepare(
        &self,
        side: Side,
        toward: Option<IpAddr>,
        host: &dyn EngineHost,
    ) -> Result<Box<dyn Engine>, EngineError> {
        super::session::prepare_on_host(self, side, toward, host)
    }

    fn preflight(&self, host: &dyn EngineHost, toward: Option<IpAddr>) -> Result<(), EngineError> {
        Ok(super::session::preflight_on_host(host, toward)?)
    }

    /// Apply one sweep point: RDMA sweeps the message size only.
    fn apply_sweep(&mut self, p: SweepPoint<'_>) {
        if p.param == SweepParam::Size {
            self.size = Bytes(p.value);
        }
    }

    /// Ranges, combinations and the memory bound, checked by an agent on a
    /// spec received from the network before anything is allocated.
    fn validate(&self) -> Result<(), SpecError> {
        use limits::*;
        let range = |what: &str, v: u64, lo: u64, hi: u64| {
            crate::traffic::limits::check(&format!("rdma {what}"), v, lo, hi)
        };
        range("size", self.size.0, MIN_SIZE, MAX_SIZE)?;
        range("qps", self.qps.into(), 1, MAX_QPS.into())?;
        range("tx depth", self.tx_depth.into(), 1, MAX_TX_DEPTH.into())?;
        range("rx depth", self.rx_depth.into(), 1, MAX_RX_DEPTH.into())?;
        range("inline size", self.inline_size.into(), 0, MAX_INLINE.into())?;
        if let Some(c) = self.cq_mod {
            range("cq moderation", c.into(), 1, MAX_CQ_MOD.into())?;
        }
        match (self.iters, self.secs) {
            (Some(i), None) => range("iterations", i, MIN_ITERS, MAX_ITERS)?,
            (None, Some(s)) if s.is_finite() && (1.0..=MAX_SECS).contains(&s) => {}
            (None, Some(s)) => {
                return Err(SpecError::Invalid(format!(
                    "rdma duration {s} s is outside 1..={MAX_SECS} s"
                )))
            }
            _ => {
                return Err(SpecError::Invalid(
                    "rdma: give exactly one of iterations and duration".into(),
                ))
            }
        }
        if let Some(m) = self.mtu {
            if !IB_MTUS.contains(&m) {
                return Err(SpecError::Invalid(format!(
                    "rdma MTU {m} is not one of 256, 512, 1024, 2048, 4096"
                )));
            }
        }
        if self.mode == RdmaMode::Lat && (self.qps != 1 || self.bidir) {
            return Err(SpecError::Invalid(
                "rdma latency runs on one QP, one direction (like perftest)".into(),
            ));
        }
        if self.op == RdmaOp::Read && self.inline_size > 0 {
            return Err(SpecError::Invalid(
                "rdma read cannot be inline (--inline-size 0)".into(),
            ));
        }
        if self.use_event && self.op == RdmaOp::Write && self.mode == RdmaMode::Lat {
            return Err(SpecError::Invalid(
                "write latency polls memory; --use-event applies to send and read".into(),
            ));
        }
        for (who, e) in [("local", &self.local), ("peer", &self.peer)] {
            if let Some(p) = e.ib_port {
                range(&format!("{who} ib port"), p.into(), 1, 255)?;
            }
            if let Some(g) = e.gid_index {
                range(&format!("{who} gid index"), g.into(), 0, 255)?;
            }
            if let Some(d) = &e.ib_dev {
                if d.is_empty() || d.len() > 64 || d.contains('/') {
                    return Err(SpecError::Invalid(format!(
                        "rdma {who} device name {d:?} is not a device name"
                    )));
                }
            }
        }
        let mem = self.memory_bytes();
        if mem > MAX_MEMORY {
            return Err(SpecError::Invalid(format!(
                "rdma test would allocate {} per host (buffers {} x {} QPs + timestamps), more than {}; use fewer QPs, a smaller size or fewer iterations",
                Bytes(mem),
                Bytes(self.buffer_len()),
                self.qps,
                Bytes(MAX_MEMORY)
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bw() -> RdmaSpec {
        RdmaSpec::perftest_defaults(RdmaOp::Write, RdmaMode::Bw)
    }

    #[test]
    fn defaults_validate_and_match_perftest() {
        for op in [RdmaOp::Write, RdmaOp::Read, RdmaOp::Send] {
            for mode in [RdmaMode::Bw, RdmaMode::Lat] {
                RdmaSpec::perftest_defaults(op, mode).validate().unwrap();
            }
        }
        let s = bw();
        assert_eq!((s.size.0, s.iters, s.tx_depth), (65536, Some(5000), 128));
        // 64 KiB > 8 KiB: CQ moderation off, as perftest does outside -a.
        assert_eq!(s.cq_mod(), 1);
        let mut small = s.clone();
        small.size = Bytes(4096);
        assert_eq!(small.cq_mod(), 100);
        let mut swept = s.clone();
        swept.sweep = true;
        assert_eq!(swept.cq_mod(), 100);
        // Capped by the tx depth.
        small.tx_depth = 16;
        assert_eq!(small.cq_mod(), 16);
        assert_eq!(
            RdmaSpec::perftest_defaults(RdmaOp::Send, RdmaMode::Lat).inline_size,
            236
        );
    }

    #[test]
    fn sweep_is_2_bytes_to_8_mib() {
        let a = all_sizes();
        assert_eq!(a.len(), 23);
        assert_eq!(a[0], Bytes(2));
        assert_eq!(a[22], Bytes(8 << 20));
        for s in a {
            let mut x = bw();
            x.size = s;
            x.validate().unwrap();
        }
    }

    #[test]
    fn refusals() {
        let bad = |f: &dyn Fn(&mut RdmaSpec)| {
            let mut s = bw();
            f(&mut s);
            s.validate().unwrap_err().to_string()
        };
        assert!(bad(&|s| s.size = Bytes(1)).contains("size 1"));
        assert!(bad(&|s| s.size = Bytes((8 << 20) + 1)).contains("size"));
        assert!(bad(&|s| s.qps = 0).contains("qps"));
        assert!(bad(&|s| s.iters = Some(4)).contains("iterations 4"));
        assert!(bad(&|s| {
            s.iters = None;
        })
        .contains("exactly one"));
        assert!(bad(&|s| {
            s.iters = None;
            s.secs = Some(0.5);
        })
        .contains("duration"));
        assert!(bad(&|s| s.mtu = Some(1500)).contains("MTU 1500"));
        assert!(bad(&|s| {
            s.mode = RdmaMode::Lat;
            s.qps = 2;
        })
        .contains("one QP"));
        assert!(bad(&|s| {
            s.op = RdmaOp::Read;
            s.inline_size = 64;
        })
        .contains("inline"));
        assert!(bad(&|s| s.peer.ib_dev = Some("../x".into())).contains("device name"));
        // 8 MiB x 2 regions x 100 QPs = 1.56 GiB: over the bound, refused before allocating.
        let m = bad(&|s| {
            s.size = Bytes(8 << 20);
            s.qps = 100;
        });
        assert!(m.contains("more than 1.00 GiB"), "{m}");
    }

    #[test]
    fn memory_counts_buffers_and_timestamps() {
        let mut s = bw();
        s.size = Bytes(100);
        s.qps = 2;
        s.iters = Some(1000);
        // 2 pages per QP, 2 QPs, 2000 ops x 16 B.
        assert_eq!(s.memory_bytes(), 2 * 8192 + 2000 * 16);
        // Too many ops to record: only the first post and the last completion are kept.
        s.iters = Some(limits::MAX_ITERS);
        assert_eq!(s.recorded_ops(), 0);
        s.validate().unwrap();
    }
}

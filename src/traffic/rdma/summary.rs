//! RDMA's part of the faces: its section of a point's summary in perftest's
//! terms (the requester's report, both directions summed with `--bidir`,
//! and each end's outcome), its closing lines and its live rate.

use super::report::LatDurationReport;
use super::{BwReport, LatReport, RdmaOutcome};
use crate::traffic::options::{OptionError, Resolved, SweepParam};
use crate::traffic::TestOptions;
use crate::traffic::{
    EngineInterval, EngineKind, EngineSlice, EngineTotals, Headline, PointEnds, Sections,
};
use crate::units::Bytes;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// An RDMA point in perftest's terms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdmaSummary {
    /// Bandwidth report of the requester(s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bw: Option<BwReport>,
    /// Latency report (iterations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lat: Option<LatReport>,
    /// Latency report (duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lat_duration: Option<LatDurationReport>,
    /// The controller's outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<RdmaOutcome>,
    /// The agent's outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<RdmaOutcome>,
}

/// The RDMA engine's slice.
pub struct RdmaSlice;

impl EngineSlice for RdmaSlice {
    fn habits(&self) -> &'static [crate::traffic::habits::Habit] {
        super::args::HABITS
    }

    fn kind(&self) -> EngineKind {
        EngineKind::Rdma
    }

    fn named_sweep(&self, param: SweepParam, name: &str) -> Option<Vec<u64>> {
        // perftest -a: every power of two from 2 B to 8 MiB.
        (param == SweepParam::Size && name == "all")
            .then(|| super::all_sizes().iter().map(|b| b.0).collect())
    }

    fn resolve(&self, t: &TestOptions<'_>) -> Result<Resolved, OptionError> {
        super::args::resolve(t)
    }

    fn refuse_elsewhere(&self, t: &TestOptions<'_>) -> Result<(), OptionError> {
        super::args::refuse_elsewhere(t)
    }

    /// The requester's perftest report (both directions summed with
    /// `--bidir`, as perftest's `-b` prints it) and both ends' outcomes. The
    /// rates are perftest's (its report's window, not the loop's set-up);
    /// the counts are the controller's queue pairs'.
    fn summarize(&self, e: &PointEnds<'_>, out: &mut Sections) -> Headline {
        let outcome = |t: Option<&EngineTotals>| match t {
            Some(EngineTotals::Rdma(x)) => Some((**x).clone()),
            _ => None,
        };
        let local = outcome(e.local);
        let peer = outcome(e.peer);
        if local.is_none() && peer.is_none() {
            return Headline::default();
        }
        let bw = match (
            local.as_ref().and_then(|l| l.bw),
            peer.as_ref().and_then(|p| p.bw),
        ) {
            (Some(l), Some(p)) => Some(l.plus(&p)),
            (l, p) => l.or(p),
        };
        let head = Headline {
            counts: local
                .as_ref()
                .map(|l| (e.local_duration_s, l.tx_bytes + l.rx_bytes, l.messages)),
            throughput_bps: bw.map(|b| b.bw_avg_gbps * 1e9),
            rate_per_s: bw.map(|b| b.msg_rate_mpps * 1e6),
        };
        out.rdma = Some(Box::new(RdmaSummary {
            bw,
            lat: local.as_ref().and_then(|l| l.lat),
            lat_duration: local.as_ref().and_then(|l| l.lat_duration),
            local,
            peer,
        }));
        head
    }

    /// perftest's report stands for the point: bytes move over queue pairs,
    /// not data connections.
    fn common_totals(&self, s: &Sections) -> bool {
        s.rdma.is_none()
    }

    fn summary_lines(&self, s: &Sections, _mode: &str) -> String {
        let Some(r) = &s.rdma else {
            return String::new();
        };
        let mut out = String::new();
        if let Some(b) = &r.bw {
            let _ = writeln!(out, "{}\n{}", BwReport::HEADER, b.line());
        }
        if let Some(l) = &r.lat {
            let _ = writeln!(out, "{}\n{}", LatReport::HEADER, l.line());
        }
        if let Some(l) = &r.lat_duration {
            let _ = writeln!(
                out,
                " #bytes #iterations    t_avg[usec]    tps average\n {:<7} {:<10}     {:<7.2}        {:<7.2}",
                l.bytes, l.iterations, l.t_avg_us, l.tps
            );
        }
        for (who, o) in [("local", &r.local), ("peer", &r.peer)] {
            if let Some(o) = o {
                let _ = writeln!(
                    out,
                    "rdma {who}: {} path MTU {}{}, {} messages, {} sent, {} received{}",
                    o.device,
                    o.path_mtu,
                    o.gid_index
                        .map(|g| format!(", GID index {g}"))
                        .unwrap_or_default(),
                    o.messages,
                    Bytes(o.tx_bytes),
                    Bytes(o.rx_bytes),
                    if o.stopped_early {
                        " (stopped early: no perftest report)"
                    } else {
                        ""
                    }
                );
            }
        }
        out
    }

    /// RDMA moves bytes over its queue pairs, not data connections.
    fn interval_bps(&self, figures: Option<&EngineInterval>) -> Option<f64> {
        match figures {
            Some(EngineInterval::Rdma(r)) => Some(r.tx_bps + r.rx_bps),
            _ => None,
        }
    }

    fn paths(&self) -> crate::traffic::DataPaths {
        // Kernel bypass: no kernel network stack, no TCP.
        crate::traffic::DataPaths::VERBS
    }
}

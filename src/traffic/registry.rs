//! The one place that lists the engines, and the trait through which the
//! faces reach what is specific to each: its own part of a point's summary
//! (built from both ends' totals), the lines it adds to the closing block,
//! its sweep table and its live row.
//!
//! The layers above (record, the faces, the TUI) call [`slice()`] with the
//! test's [`EngineKind`] and never match on the engine for these; an engine
//! that adds a figure of its own changes its folder, not theirs. Each engine
//! implements [`EngineSlice`] in its folder's `summary` module.
//!
//! This module sits in the data-plane layer, so it sees only plain figures:
//! the summary's common fields, the engine's totals and interval figures, and
//! the warm-up the caller subtracted. It never reads Samples or hosts.

use super::{EngineInterval, EngineKind, EngineSpec, EngineTotals};
use serde::{Deserialize, Serialize};

/// Each engine's own section of a point's summary, under its own key in the
/// log (`"grpc": {...}`, `"sink": {...}`, `"rdma": {...}`); a TCP point has
/// none. Flattened into the summary record, so the log's keys stay where
/// they were.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sections {
    /// gRPC: RPC rate, payload goodput both ways, statuses and peak memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<super::grpc::summary::GrpcSummary>,
    /// Packet tests: what the sink counted and the generator sent, loss,
    /// reordering and duplicates per flow, where frames were dropped, per
    /// queue (the summary's `rate_per_s` and `messages` are the sink's packets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<Box<super::sink::figures::SinkSummary>>,
    /// RDMA tests: perftest's report (`bw`: `#bytes #iterations BW peak
    /// BW average MsgRate`, both directions summed with `--bidir`; `lat`:
    /// `t_min t_max t_typical t_avg t_stdev 99% 99.9%` in µs) and each end's outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma: Option<Box<super::rdma::summary::RdmaSummary>>,
}

/// What one host's omitted (warm-up) intervals counted, which the figures
/// leave out.
#[derive(Debug, Clone, Copy, Default)]
pub struct Warmup<'a> {
    /// Messages of the omitted intervals.
    pub msgs: u64,
    /// Bytes sent in them.
    pub tx: u64,
    /// Bytes received in them, per connection.
    pub rx: &'a [u64],
    /// Seconds from Go to the end of the last omitted interval.
    pub end_s: f64,
}

impl Warmup<'_> {
    /// Bytes received on `conn` during the warm-up.
    pub fn rx(&self, conn: usize) -> u64 {
        self.rx.get(conn).copied().unwrap_or(0)
    }
}

/// Both ends of a finished point, as an engine builds its section from them.
pub struct PointEnds<'a> {
    /// The spec that ran.
    pub spec: &'a EngineSpec,
    /// The controller's engine totals, when its engine has any.
    pub local: Option<&'a EngineTotals>,
    /// The agent's, when they arrived.
    pub peer: Option<&'a EngineTotals>,
    /// The controller's warm-up.
    pub local_warmup: Warmup<'a>,
    /// The agent's warm-up.
    pub peer_warmup: Warmup<'a>,
    /// Counted seconds of the common figures (after the warm-up).
    pub duration_s: f64,
    /// The controller's own engine seconds (from Go to its end).
    pub local_duration_s: f64,
    /// The user ended the point early.
    pub interrupted: bool,
}

/// Headline figures an engine measures itself instead of the common byte
/// counts of its data connections (a packet sink counts frames, RDMA moves
/// bytes over queue pairs and reports perftest's rates). `None`: the common
/// figure stands.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Headline {
    /// Seconds counted, bytes counted and messages (frames, work requests) counted.
    pub counts: Option<(f64, u64, u64)>,
    /// Rate in bit/s (else bytes × 8 / duration).
    pub throughput_bps: Option<f64>,
    /// Message rate per second (else messages / duration).
    pub rate_per_s: Option<f64>,
}

/// The columns of one point's row in a sweep table that depend on the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct PayloadCells {
    /// MB/s sent.
    pub sent: String,
    /// MB/s received.
    pub received: String,
}

/// One interval's figures an engine may draw its live row from.
pub struct IntervalRow<'a> {
    /// Start and end of the interval (s since Go).
    pub span: (f64, f64),
    /// " (omitted)" during the warm-up, else empty.
    pub omit: &'a str,
    /// Both ends' own interval figures.
    pub figures: [Option<&'a EngineInterval>; 2],
    /// The two hosts' CPU cells, as every row ends.
    pub cpu: [&'a str; 2],
}

/// What an engine adds to the faces beyond the common figures. Every method
/// has the behaviour of an engine without a section of its own (TCP), so an
/// engine implements only what it has.
pub trait EngineSlice: Sync {
    /// The engine.
    fn kind(&self) -> EngineKind;

    /// Builds the engine's section into `out` and returns the headline
    /// figures it measures itself.
    fn summarize(&self, _ends: &PointEnds<'_>, _out: &mut Sections) -> Headline {
        Headline::default()
    }

    /// Whether the data connections' byte counts are one figure for the whole
    /// engine (entry 0: one runtime carries every connection), so the
    /// summary keeps one stream row with every connection's retransmits.
    fn one_counted_stream(&self) -> bool {
        false
    }

    /// Whether the engine's client measures request latency in this spec.
    fn measures_latency(&self, _spec: &EngineSpec) -> bool {
        false
    }

    /// Whether the summary's common `[SUM]` byte line and message line
    /// describe a point with these sections (not when the engine's section
    /// says it counted frames or queue pairs).
    fn common_totals(&self, _s: &Sections) -> bool {
        true
    }

    /// The lines the engine adds to a point's closing block when its section
    /// is there (`mode`: the summary's mode name). Empty otherwise.
    fn summary_lines(&self, _s: &Sections, _mode: &str) -> String {
        String::new()
    }

    /// Whether the closing block shows the agent's CPU line even when no
    /// agent Sample arrived: false only when the engine's section says the
    /// agent reported nothing.
    fn peer_reported(&self, _s: &Sections) -> bool {
        true
    }

    /// The engine's own sweep table, when every swept point has its section.
    fn sweep_table(&self, _points: &[&Sections]) -> Option<String> {
        None
    }

    /// The sent and received cells of a sweep table row, when the point has
    /// the engine's section and it measures its payload itself.
    fn payload_cells(&self, _s: &Sections) -> Option<PayloadCells> {
        None
    }

    /// The live row's column header, when the engine draws its own rows.
    fn interval_header(&self) -> Option<String> {
        None
    }

    /// The engine's own live row for one interval (see [`interval_header`](Self::interval_header)).
    fn interval_row(&self, _row: &IntervalRow<'_>) -> Option<String> {
        None
    }

    /// The unit of the live row's message rate.
    fn rate_unit(&self, _spec: &EngineSpec) -> &'static str {
        "msg/s"
    }

    /// Bit/s of an interval when the engine moves bytes outside the data
    /// connections (RDMA's queue pairs).
    fn interval_bps(&self, _figures: Option<&EngineInterval>) -> Option<f64> {
        None
    }

    /// Text after an interval's row (e.g. the interval's non-OK statuses).
    fn interval_note(&self, _figures: Option<&EngineInterval>) -> String {
        String::new()
    }
}

/// The engine's slice. The one match on the engine for everything above.
pub fn slice(kind: EngineKind) -> &'static dyn EngineSlice {
    match kind {
        EngineKind::Tcp => &super::tcp::TcpSlice,
        EngineKind::Grpc => &super::grpc::summary::GrpcSlice,
        EngineKind::Sink => &super::sink::summary::SinkSlice,
        EngineKind::Rdma => &super::rdma::summary::RdmaSlice,
    }
}

/// "1.23M" / "4.56k" / "789": the short SI form the rows print rates in.
pub fn si(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.2}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_has_its_slice() {
        for k in EngineKind::ALL {
            assert_eq!(slice(k).kind(), k);
        }
    }

    #[test]
    fn sections_keep_their_keys_in_the_log() {
        let s = Sections::default();
        assert_eq!(serde_json::to_string(&s).ok().as_deref(), Some("{}"));
    }
}

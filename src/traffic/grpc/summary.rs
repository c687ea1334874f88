//! gRPC's part of the faces: its section of a point's summary (RPC rate,
//! payload goodput both ways, non-OK statuses, each end's peak memory), its
//! closing lines, its sweep cells and its live rows' unit and statuses.

use super::GrpcMode;
use crate::traffic::options::{OptionError, Resolved};
use crate::traffic::TestOptions;
use crate::traffic::{
    si, EngineInterval, EngineKind, EngineSlice, EngineSpec, EngineTotals, Headline, PayloadCells,
    PointEnds, Sections,
};
use crate::units::{BitsPerSec, Bytes};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;

/// A gRPC point's own figures (the client's counts over the measured span).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GrpcSummary {
    /// RPCs (or stream messages) completed with OK per second.
    pub rpcs_per_s: f64,
    /// Request payload bytes per second (client → server).
    pub request_bytes_per_s: f64,
    /// Response payload bytes per second (server → client).
    pub response_bytes_per_s: f64,
    /// Non-OK statuses by code name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    /// Peak resident memory of the client's process during the point (VmHWM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_peak_rss: Option<Bytes>,
    /// Peak resident memory of the agent during the point (VmHWM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_peak_rss: Option<Bytes>,
}

/// The gRPC engine's slice.
pub struct GrpcSlice;

/// "UNAVAILABLE 3, INTERNAL 1": statuses by code name.
fn status_list(errors: &BTreeMap<String, u64>) -> String {
    let list: Vec<String> = errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
    list.join(", ")
}

impl EngineSlice for GrpcSlice {
    fn habits(&self) -> &'static [crate::traffic::habits::Habit] {
        super::args::HABITS
    }

    fn long_habits(&self) -> &'static [crate::traffic::habits::LongHabit] {
        super::args::LONG_HABITS
    }

    fn sweep_example(&self) -> Option<&'static str> {
        Some("channels=1,2,4,8 or concurrency=1,16,256")
    }

    fn kind(&self) -> EngineKind {
        EngineKind::Grpc
    }

    fn resolve(&self, t: &TestOptions<'_>) -> Result<Resolved, OptionError> {
        super::args::resolve(t)
    }

    fn refuse_elsewhere(&self, t: &TestOptions<'_>) -> Result<(), OptionError> {
        super::args::refuse_elsewhere(t)
    }

    /// Its client runs against any grpc.testing.BenchmarkService server
    /// (grpc-go's, grpc-java's, `wirescope serve grpc`).
    fn foreign_client(&self) -> Option<crate::traffic::ForeignClient> {
        Some(crate::traffic::ForeignClient {
            client: "gRPC client",
            server: "gRPC server",
            any_server: "a BenchmarkService server",
        })
    }

    /// RPC rate and payload goodput both ways over the measured span (the
    /// client's counts less its warm-up), non-OK statuses, and each end's
    /// peak memory.
    fn summarize(&self, e: &PointEnds<'_>, out: &mut Sections) -> Headline {
        fn totals(t: Option<&EngineTotals>) -> Option<&super::GrpcTotals> {
            match t {
                Some(EngineTotals::Grpc(t)) => Some(t),
                _ => None,
            }
        }
        let Some(client) = totals(e.local) else {
            return Headline::default();
        };
        let server = totals(e.peer);
        let per_s = |v: u64| {
            if e.duration_s > 0.0 {
                v as f64 / e.duration_s
            } else {
                0.0
            }
        };
        let w = &e.local_warmup;
        out.grpc = Some(GrpcSummary {
            rpcs_per_s: per_s(client.rpcs.saturating_sub(w.msgs)),
            request_bytes_per_s: per_s(client.tx_payload.saturating_sub(w.tx)),
            response_bytes_per_s: per_s(client.rx_payload.saturating_sub(w.rx(0))),
            errors: client.errors.clone(),
            client_peak_rss: client.peak_rss,
            agent_peak_rss: server.and_then(|s| s.peak_rss),
        });
        Headline::default()
    }

    /// One runtime carries every HTTP/2 connection: the client counts bytes
    /// for the engine, not per connection.
    fn one_counted_stream(&self) -> bool {
        true
    }

    fn measures_latency(&self, _spec: &EngineSpec) -> bool {
        true
    }

    fn summary_lines(&self, s: &Sections, mode: &str) -> String {
        let Some(g) = &s.grpc else {
            return String::new();
        };
        let mut out = String::new();
        let per_s = |b: f64| BitsPerSec(b * 8.0).to_string();
        let _ = write!(
            out,
            "gRPC: {} {}, request payload {}, response payload {}",
            si(g.rpcs_per_s),
            if mode == "stream" { "msg/s" } else { "RPC/s" },
            per_s(g.request_bytes_per_s),
            per_s(g.response_bytes_per_s)
        );
        if !g.errors.is_empty() {
            let _ = write!(out, "; non-OK statuses: {}", status_list(&g.errors));
        }
        out.push('\n');
        let rss = |b: Option<Bytes>| b.map(|b| b.to_string()).unwrap_or_else(|| "-".into());
        let agent = match g.agent_peak_rss {
            Some(b) => format!(", agent {b}"),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "peak resident memory (VmHWM) during the point: client {}{agent}",
            rss(g.client_peak_rss)
        );
        out
    }

    /// The agent reported its peak memory, so it ran (even when none of its
    /// Samples arrived).
    fn peer_reported(&self, s: &Sections) -> bool {
        s.grpc.as_ref().is_none_or(|g| g.agent_peak_rss.is_some())
    }

    fn payload_cells(&self, s: &Sections) -> Option<PayloadCells> {
        s.grpc.as_ref().map(|g| PayloadCells {
            sent: format!("{:.1}", g.request_bytes_per_s / 1e6),
            received: format!("{:.1}", g.response_bytes_per_s / 1e6),
        })
    }

    fn rate_unit(&self, spec: &EngineSpec) -> &'static str {
        match spec {
            EngineSpec::Grpc(g) if g.mode == GrpcMode::Stream => "msg/s",
            _ => "RPC/s",
        }
    }

    /// Non-OK statuses of the interval, after the row.
    fn interval_note(&self, figures: Option<&EngineInterval>) -> String {
        match figures {
            Some(EngineInterval::Grpc(g)) if !g.errors.is_empty() => {
                format!("  errors: {}", status_list(&g.errors))
            }
            _ => String::new(),
        }
    }

    fn paths(&self) -> crate::traffic::DataPaths {
        use crate::traffic::DataPaths;
        // HTTP/2 over kernel TCP connections.
        DataPaths::KERNEL_STACK
            .and(DataPaths::TCP)
            .and(DataPaths::HTTP2)
    }

    fn chart_rate_unit(&self) -> &'static str {
        "RPC/s"
    }
}

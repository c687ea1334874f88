//! gRPC in the TUI's control view ([`EngineForm`]): its modes, channels as
//! the count, RPCs in flight, the request payload as the size. Plain
//! values; no I/O.

use super::GrpcMode;
use crate::traffic::{ladder, EngineArgs, EngineForm, EngineKind, FormDirection, FormOptions};
use crate::units::Bytes;

/// gRPC's part of the control view.
pub struct GrpcForm;

/// The modes, in the order the view cycles through them.
const MODES: [GrpcMode; 2] = [GrpcMode::Unary, GrpcMode::Stream];

/// RPCs in flight the view steps through.
const CONCURRENCY: [u32; 11] = [1, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096];

/// The mode a name from [`GrpcForm::modes`] stands for (unary otherwise).
fn mode_of(name: &str) -> GrpcMode {
    GrpcMode::from_option(Some(name)).unwrap_or(GrpcMode::Unary)
}

/// RPCs in flight: `--concurrency`, else 64 per channel (as the engine's default).
fn concurrency(o: &FormOptions) -> u32 {
    let g = &o.engines.grpc;
    g.concurrency
        .unwrap_or_else(|| g.channels.unwrap_or(1).saturating_mul(64))
}

impl EngineForm for GrpcForm {
    fn kind(&self) -> EngineKind {
        EngineKind::Grpc
    }

    fn modes(&self) -> Vec<&'static str> {
        MODES.map(GrpcMode::name).to_vec()
    }

    fn mode(&self, o: &FormOptions) -> &'static str {
        GrpcMode::from_option(o.mode.as_deref())
            .unwrap_or(GrpcMode::Unary)
            .name()
    }

    fn mode_name(&self, mode: &str) -> String {
        format!("grpc {}", mode_of(mode).name())
    }

    fn select(&self, o: &mut FormOptions, mode: &str, keep: Option<u32>) {
        let mode = mode_of(mode);
        o.mode = (mode != GrpcMode::Unary).then(|| mode.name().to_string());
        o.engines.grpc.channels = keep;
    }

    fn count_label(&self, _mode: &str) -> &'static str {
        "HTTP/2 connections (--channels)"
    }

    fn count(&self, o: &FormOptions, _mode: &str) -> u32 {
        o.engines.grpc.channels.unwrap_or(1)
    }

    fn set_count(&self, o: &mut FormOptions, _mode: &str, n: u32) {
        o.engines.grpc.channels = Some(n);
        // Every channel needs an RPC in flight.
        if concurrency(o) < n {
            o.engines.grpc.concurrency = Some(n);
        }
    }

    fn concurrency(&self, o: &FormOptions) -> Option<u32> {
        Some(concurrency(o))
    }

    fn concurrency_label(&self) -> Option<&'static str> {
        Some("RPCs in flight (--concurrency)")
    }

    fn step_concurrency(&self, o: &mut FormOptions, step: i32) {
        let channels = o.engines.grpc.channels.unwrap_or(1);
        let n = ladder(&CONCURRENCY, concurrency(o), step).max(channels);
        o.engines.grpc.concurrency = Some(n);
    }

    fn size_label(&self, _mode: &str) -> &'static str {
        "request payload (--size)"
    }

    fn size(&self, o: &FormOptions, _mode: &str) -> Bytes {
        o.size.unwrap_or(Bytes(64))
    }

    fn set_size(&self, o: &mut FormOptions, _mode: &str, size: Bytes) {
        o.size = Some(size);
    }

    fn directions(&self, _mode: &str) -> FormDirection {
        FormDirection::BothWays
    }

    fn command_mode(&self, mode: &str) -> Option<String> {
        Some(format!("--engine grpc -m {}", mode_of(mode).name()))
    }

    fn command_flags(&self, e: &EngineArgs) -> Vec<String> {
        let g = &e.grpc;
        let mut v = Vec::new();
        if let Some(n) = g.channels {
            v.push(format!("--channels {n}"));
        }
        if let Some(n) = g.concurrency {
            v.push(format!("--concurrency {n}"));
        }
        v
    }
}

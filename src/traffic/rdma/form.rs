//! RDMA in the TUI's control view ([`EngineForm`]): WRITE bandwidth or
//! latency, queue pairs as the count, the message size and `--bidir`.
//! Plain values; no I/O.

use crate::traffic::{EngineArgs, EngineForm, EngineKind, FormDirection, FormOptions};
use crate::units::Bytes;

/// RDMA's part of the control view.
pub struct RdmaForm;

/// Latency (`-m lat`) rather than bandwidth.
fn latency(mode: &str) -> bool {
    mode == "lat"
}

impl EngineForm for RdmaForm {
    fn kind(&self) -> EngineKind {
        EngineKind::Rdma
    }

    fn modes(&self) -> Vec<&'static str> {
        vec!["bw", "lat"]
    }

    fn mode(&self, o: &FormOptions) -> &'static str {
        if o.mode.as_deref() == Some("lat") {
            "lat"
        } else {
            "bw"
        }
    }

    fn mode_name(&self, mode: &str) -> String {
        format!("rdma write {}", if latency(mode) { "lat" } else { "bw" })
    }

    fn select(&self, o: &mut FormOptions, mode: &str, keep: Option<u32>) {
        let lat = latency(mode);
        o.mode = lat.then(|| "lat".to_string());
        o.engines.rdma.qps = keep.filter(|_| !lat);
    }

    fn count_label(&self, _mode: &str) -> &'static str {
        "queue pairs (--qps)"
    }

    fn count(&self, o: &FormOptions, _mode: &str) -> u32 {
        o.engines.rdma.qps.unwrap_or(1)
    }

    fn set_count(&self, o: &mut FormOptions, mode: &str, n: u32) {
        // Latency runs on one QP, like perftest.
        o.engines.rdma.qps = (!latency(mode)).then_some(n);
    }

    fn size_label(&self, _mode: &str) -> &'static str {
        "message size (--size)"
    }

    fn size(&self, o: &FormOptions, mode: &str) -> Bytes {
        o.size
            .unwrap_or(Bytes(if latency(mode) { 2 } else { 65536 }))
    }

    fn set_size(&self, o: &mut FormOptions, _mode: &str, size: Bytes) {
        o.size = Some(size);
    }

    fn direction_label(&self) -> &'static str {
        "direction (--bidir)"
    }

    fn directions(&self, mode: &str) -> FormDirection {
        if latency(mode) {
            FormDirection::BothWays
        } else {
            FormDirection::Bidir
        }
    }

    fn command_mode(&self, mode: &str) -> Option<String> {
        Some(format!(
            "--engine rdma -m {}",
            if latency(mode) { "lat" } else { "bw" }
        ))
    }

    fn command_flags(&self, e: &EngineArgs) -> Vec<String> {
        e.rdma
            .qps
            .map(|n| vec![format!("--qps {n}")])
            .unwrap_or_default()
    }
}

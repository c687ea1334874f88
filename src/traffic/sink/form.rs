//! Packet tests in the TUI's control view ([`EngineForm`]): the sink's
//! modes, queues as the count, the frame size (RFC 2544's sizes, plus
//! jumbo) and `-R`. Plain values; no I/O.

use super::SinkMode;
use crate::traffic::{EngineArgs, EngineForm, EngineKind, FormDirection, FormOptions};
use crate::units::Bytes;

/// The packet tests' part of the control view.
pub struct SinkForm;

/// The sink modes, in the order the view cycles through them.
const MODES: [SinkMode; 3] = [SinkMode::AfXdp, SinkMode::Xdp, SinkMode::Tpacket];

/// Frame sizes of the packet tests (RFC 2544's, plus jumbo).
const FRAMES: [u64; 8] = [64, 128, 256, 512, 1024, 1280, 1518, 9000];

/// The mode a name stands for (af-xdp otherwise).
fn mode_of(name: &str) -> SinkMode {
    clap::ValueEnum::from_str(name, false).unwrap_or(SinkMode::AfXdp)
}

impl EngineForm for SinkForm {
    fn kind(&self) -> EngineKind {
        EngineKind::Sink
    }

    fn modes(&self) -> Vec<&'static str> {
        MODES.map(SinkMode::name).to_vec()
    }

    fn mode(&self, o: &FormOptions) -> &'static str {
        o.engines.sink.mode.unwrap_or(SinkMode::AfXdp).name()
    }

    fn mode_name(&self, mode: &str) -> String {
        format!("sink {}", mode_of(mode).name())
    }

    fn select(&self, o: &mut FormOptions, mode: &str, keep: Option<u32>) {
        o.mode = None;
        o.engines.sink.mode = Some(mode_of(mode));
        o.engines.sink.queues = keep;
    }

    fn mode_label(&self) -> &'static str {
        "engine, sink mode (--engine, --sink)"
    }

    fn count_label(&self, _mode: &str) -> &'static str {
        "queues, threads per side (--queues)"
    }

    fn count(&self, o: &FormOptions, _mode: &str) -> u32 {
        o.engines.sink.queues.unwrap_or(1)
    }

    fn set_count(&self, o: &mut FormOptions, _mode: &str, n: u32) {
        o.engines.sink.queues = Some(n);
    }

    fn size_label(&self, _mode: &str) -> &'static str {
        "frame size (--frame-size)"
    }

    fn size(&self, o: &FormOptions, _mode: &str) -> Bytes {
        Bytes(u64::from(o.engines.sink.frame_size.unwrap_or(64)))
    }

    fn size_steps(&self) -> Option<&'static [u64]> {
        Some(&FRAMES)
    }

    fn size_in_bytes(&self) -> bool {
        true
    }

    fn set_size(&self, o: &mut FormOptions, _mode: &str, size: Bytes) {
        o.engines.sink.frame_size = u32::try_from(size.0).ok();
    }

    fn direction_label(&self) -> &'static str {
        "direction (-R)"
    }

    fn directions(&self, _mode: &str) -> FormDirection {
        FormDirection::Reverse
    }

    fn command_mode(&self, mode: &str) -> Option<String> {
        Some(format!("--engine sink --sink {}", mode_of(mode).name()))
    }

    fn command_flags(&self, e: &EngineArgs) -> Vec<String> {
        let k = &e.sink;
        let mut v = Vec::new();
        if let Some(n) = k.queues {
            v.push(format!("--queues {n}"));
        }
        if let Some(n) = k.frame_size {
            v.push(format!("--frame-size {n}"));
        }
        v
    }
}

//! TCP in the TUI's control view ([`EngineForm`]): its modes, and what the
//! view's count (`-P` or `--conns`), size (`-l` or `--size`) and direction
//! fields mean in each. Plain values; no I/O.

use super::TcpMode;
use crate::traffic::{EngineForm, EngineKind, FormDirection, FormOptions};
use crate::units::Bytes;

/// TCP's part of the control view.
pub struct TcpForm;

/// The modes, in the order the view cycles through them.
const MODES: [TcpMode; 3] = [TcpMode::Stream, TcpMode::Pingpong, TcpMode::Rr];

/// The mode a name from [`TcpForm::modes`] stands for (stream otherwise).
fn mode_of(name: &str) -> TcpMode {
    TcpMode::from_option(Some(name)).unwrap_or(TcpMode::Stream)
}

impl EngineForm for TcpForm {
    fn kind(&self) -> EngineKind {
        EngineKind::Tcp
    }

    fn modes(&self) -> Vec<&'static str> {
        MODES.map(TcpMode::name).to_vec()
    }

    fn mode(&self, o: &FormOptions) -> &'static str {
        TcpMode::from_option(o.mode.as_deref())
            .unwrap_or(TcpMode::Stream)
            .name()
    }

    fn mode_name(&self, mode: &str) -> String {
        format!("tcp {}", mode_of(mode).name())
    }

    fn select(&self, o: &mut FormOptions, mode: &str, keep: Option<u32>) {
        let mode = mode_of(mode);
        o.mode = (mode != TcpMode::Stream).then(|| mode.name().to_string());
        if mode == TcpMode::Stream {
            o.streams = keep;
        } else {
            o.conns = keep;
        }
    }

    fn count_label(&self, mode: &str) -> &'static str {
        match mode_of(mode) {
            TcpMode::Stream => "streams (-P)",
            _ => "connections (--conns)",
        }
    }

    fn count(&self, o: &FormOptions, mode: &str) -> u32 {
        match mode_of(mode) {
            TcpMode::Stream => o.streams.unwrap_or(1),
            _ => o.conns.unwrap_or(1),
        }
    }

    fn set_count(&self, o: &mut FormOptions, mode: &str, n: u32) {
        match mode_of(mode) {
            TcpMode::Stream => o.streams = Some(n),
            _ => o.conns = Some(n),
        }
    }

    fn size_label(&self, mode: &str) -> &'static str {
        match mode_of(mode) {
            TcpMode::Stream => "write size (-l)",
            _ => "message size (--size)",
        }
    }

    fn size(&self, o: &FormOptions, mode: &str) -> Bytes {
        match mode_of(mode) {
            TcpMode::Stream => o.len.unwrap_or(Bytes(128 << 10)),
            TcpMode::Rr => o.size.unwrap_or(Bytes(64)),
            TcpMode::Pingpong => o.size.unwrap_or(Bytes(16 << 10)),
        }
    }

    fn set_size(&self, o: &mut FormOptions, mode: &str, size: Bytes) {
        match mode_of(mode) {
            TcpMode::Stream => o.len = Some(size),
            _ => o.size = Some(size),
        }
    }

    fn directions(&self, mode: &str) -> FormDirection {
        match mode_of(mode) {
            TcpMode::Stream => FormDirection::ReverseOrBidir,
            _ => FormDirection::BothWays,
        }
    }

    fn command_mode(&self, mode: &str) -> Option<String> {
        match mode_of(mode) {
            TcpMode::Stream => None,
            m => Some(format!("-m {}", m.name())),
        }
    }
}

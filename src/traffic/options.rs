//! What every engine's option checks share, as plain data: the [`Sweep`] a
//! test may run over (and one [`SweepPoint`] of it), what an engine's
//! validation builds ([`Resolved`]) and what it refuses ([`OptionError`]).
//!
//! The options themselves ([`TestOptions`](super::TestOptions)) sit in the
//! registry, beside the engines' own option groups; each engine checks them
//! in its `args` module. Nothing here knows an engine or parses text.

use super::EngineSpec;
use crate::units::CpuId;
use std::time::Duration;

/// A sweep over one parameter: one point per value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweep {
    /// What varies.
    pub param: SweepParam,
    /// Its values, in order (`cores`: the number of CPUs of each set).
    pub values: Vec<u64>,
    /// `cores`: the CPU set of each point (empty for other parameters).
    pub cpu_sets: Vec<Vec<CpuId>>,
}

/// The parameter a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepParam {
    /// stream: --len; rr/pingpong: --size.
    Size,
    /// stream: --streams; rr/pingpong: --conns.
    Streams,
    /// grpc: --channels (HTTP/2 connections).
    Channels,
    /// grpc: --concurrency (RPCs in flight in all).
    Concurrency,
    /// sink: --frame-size.
    Frame,
    /// sink: the sink's CPU set (one thread and queue per CPU).
    Cores,
}

impl SweepParam {
    /// The parameter a `--sweep PARAM=...` names, by its name or the flag
    /// it varies (`len`, `conns`, `frame-size`).
    pub fn from_name(name: &str) -> Option<SweepParam> {
        match name {
            "len" => Some(SweepParam::Size),
            "conns" => Some(SweepParam::Streams),
            "frame-size" => Some(SweepParam::Frame),
            _ => SweepParam::ALL.into_iter().find(|p| p.name() == name),
        }
    }

    /// Every parameter.
    pub const ALL: [SweepParam; 6] = [
        SweepParam::Size,
        SweepParam::Streams,
        SweepParam::Channels,
        SweepParam::Concurrency,
        SweepParam::Frame,
        SweepParam::Cores,
    ];

    /// Name as typed.
    pub fn name(self) -> &'static str {
        match self {
            SweepParam::Size => "size",
            SweepParam::Streams => "streams",
            SweepParam::Channels => "channels",
            SweepParam::Concurrency => "concurrency",
            SweepParam::Frame => "frame",
            SweepParam::Cores => "cores",
        }
    }
}

/// One value of a sweep, as an engine applies it to its spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepPoint<'a> {
    /// What varies.
    pub param: SweepParam,
    /// The point's value.
    pub value: u64,
    /// `cores`: the point's CPU set.
    pub cpus: Option<&'a [CpuId]>,
}

impl Sweep {
    /// Point `i` of the sweep (None past the last).
    pub fn point(&self, i: usize) -> Option<SweepPoint<'_>> {
        Some(SweepPoint {
            param: self.param,
            value: *self.values.get(i)?,
            cpus: self.cpu_sets.get(i).map(Vec::as_slice),
        })
    }
}

/// A combination of options an engine refuses, or a value out of its range.
/// The message names the flag and says what to give instead; the command
/// line shows it as a usage error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OptionError(pub String);

/// Shorthand of the engines' checks: an [`OptionError`] with this text.
pub fn refuse<T>(msg: impl Into<String>) -> Result<T, OptionError> {
    Err(OptionError(msg.into()))
}

/// What an engine's validation builds: the first point's spec and the
/// timing every point runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The spec of the first (or only) point.
    pub spec: EngineSpec,
    /// Time limit per point (None: the engine ends by itself or by bytes).
    pub time: Option<Duration>,
    /// Warm-up.
    pub omit: Duration,
}

/// A byte bound as users read it: exact bytes, and in KiB/MiB/GiB with the
/// remainder (`67108832 B (64 MiB - 32 B)`), so a limit a few bytes under a
/// round size is not mistaken for it. The range text of the size flags.
pub fn exact_bytes(b: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        let (whole, rest) = (b.div_ceil(unit), b % unit);
        if b < unit {
            continue;
        }
        if rest == 0 {
            return format!("{b} B ({} {name})", b / unit);
        }
        // Just under a round size: say how far under.
        let under = whole * unit - b;
        if under < 1024 {
            return format!("{b} B ({whole} {name} - {under} B)");
        }
        return format!("{b} B");
    }
    format!("{b} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_bounds_are_exact() {
        assert_eq!(exact_bytes((64 << 20) - 32), "67108832 B (64 MiB - 32 B)");
        assert_eq!(exact_bytes(64 << 20), "67108864 B (64 MiB)");
        assert_eq!(exact_bytes(1 << 30), "1073741824 B (1 GiB)");
        assert_eq!(exact_bytes(1024), "1024 B (1 KiB)");
        assert_eq!(exact_bytes(1), "1 B");
    }
}

//! `--engine grpc`'s own options: a clap group flattened into the test
//! options of `run` and the TUI (shown under their own heading in `--help`),
//! and the validation of a gRPC test into its [`GrpcSpec`].

use super::{GrpcMode, GrpcSpec, MAX_CONCURRENCY, MAX_MESSAGE, MESSAGE_OVERHEAD};
use crate::traffic::habits::{Habit, LongHabit};
use crate::traffic::options::{exact_bytes, refuse, OptionError, Resolved, SweepParam};
use crate::traffic::EngineSpec;
use crate::traffic::EngineSpecOps;
use crate::traffic::TestOptions;
use crate::units::{count, first_given, Bytes};

/// gRPC's options.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "gRPC (--engine grpc)")]
pub struct GrpcArgs {
    /// grpc: HTTP/2 connections (default 1).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = count::<u32>("--channels", 1, 1024))]
    pub channels: Option<u32>,
    /// grpc: RPCs in flight in all, spread over the channels (default 64 per channel).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = count::<u32>("--concurrency", 1, 65536))]
    pub concurrency: Option<u32>,
    /// grpc: the agent's server threads (default: all its cores).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = count::<u32>("--peer-threads", 1, 1024))]
    pub peer_threads: Option<u32>,
}

impl GrpcArgs {
    /// The first of these options given, by flag (other engines refuse them).
    pub fn given(&self) -> Option<&'static str> {
        first_given([
            (self.channels.is_some(), "--channels"),
            (self.concurrency.is_some(), "--concurrency"),
            (self.peer_threads.is_some(), "--peer-threads"),
        ])
    }
}

impl GrpcMode {
    /// The gRPC mode `--mode` names (unary when absent).
    pub fn from_option(mode: Option<&str>) -> Result<GrpcMode, OptionError> {
        match mode {
            None | Some("unary") => Ok(GrpcMode::Unary),
            Some("stream") => Ok(GrpcMode::Stream),
            Some(other) => refuse(format!(
                "--mode {other} is not a grpc mode; use unary or stream"
            )),
        }
    }
}

/// ghz's letters that wirescope would misread or does not have under `--engine grpc` (see `traffic::habits`).
pub const HABITS: &[Habit] = &[
    Habit {
        letter: 'n',
        anywhere: false,
        tool: "ghz",
        meaning: "the total number of requests",
        instead: "--time DURATION (the gRPC engine runs for a time, closed-loop)",
    },
    Habit {
        letter: 'c',
        anywhere: false,
        tool: "ghz",
        meaning: "the concurrency",
        instead: "--concurrency N",
    },
    Habit {
        letter: 'z',
        anywhere: false,
        tool: "ghz",
        meaning: "the test length",
        instead: "--time DURATION",
    },
];

/// ghz's long options that wirescope does not have.
pub const LONG_HABITS: &[LongHabit] = &[
    LongHabit {
        name: "rps",
        what: "ghz's request rate",
        instead: "--concurrency N (the gRPC engine runs closed-loop)",
    },
    LongHabit {
        name: "connections",
        what: "ghz's connections",
        instead: "--channels N",
    },
];

/// Refuse gRPC's options (and its sweeps) in another engine's test.
pub fn refuse_elsewhere(t: &TestOptions<'_>) -> Result<(), OptionError> {
    if let Some(flag) = t.engines.grpc.given() {
        return refuse(format!("{flag} applies to --engine grpc (gRPC tests)"));
    }
    if matches!(
        t.sweep_param(),
        Some(SweepParam::Channels | SweepParam::Concurrency)
    ) {
        return refuse("channels and concurrency sweeps are for --engine grpc");
    }
    Ok(())
}

/// Check the options of a gRPC test and build its spec.
pub fn resolve(t: &TestOptions<'_>) -> Result<Resolved, OptionError> {
    let mode = GrpcMode::from_option(t.mode)?;
    for (set, flag) in [
        (t.streams.is_some(), "--streams"),
        (t.conns.is_some(), "--conns (use --channels)"),
        (t.depth != 1, "--depth (use --concurrency)"),
        (t.len.is_some(), "--len (use --size)"),
        (t.reverse, "--reverse"),
        (t.bidir, "--bidir"),
        (t.window.is_some(), "--window"),
        (t.mss.is_some(), "--mss"),
        (t.congestion.is_some(), "--congestion"),
        (t.zerocopy, "--zerocopy"),
        (t.skip_rx_copy, "--skip-rx-copy"),
        (t.bytes.is_some(), "--bytes"),
    ] {
        if set {
            return refuse(format!(
                "{flag} applies to --engine tcp; grpc tests take --channels, --concurrency, --size and --resp-size"
            ));
        }
    }
    if t.sweep_param() == Some(SweepParam::Streams) {
        return refuse("grpc sweeps size, channels or concurrency, not streams");
    }
    let time = t.timing()?;
    let spec = spec(t, mode)?;
    let spec = EngineSpec::Grpc(spec);
    // Every point of a sweep must be a valid test too.
    for (p, s) in t.points(&spec) {
        s.validate().map_err(|e| {
            OptionError(format!(
                "sweep point {}: {e}",
                p.map(|v| v.value.to_string()).unwrap_or_default()
            ))
        })?;
    }
    Ok(Resolved {
        spec,
        time,
        omit: t.omit,
    })
}

/// The spec with gRPC's defaults, its message sizes and counts checked.
fn spec(t: &TestOptions<'_>, mode: GrpcMode) -> Result<GrpcSpec, OptionError> {
    let channels = t.engines.grpc.channels.unwrap_or(1);
    let concurrency = t
        .engines
        .grpc
        .concurrency
        .unwrap_or_else(|| channels.saturating_mul(64).min(MAX_CONCURRENCY));
    let size = t.size.unwrap_or(Bytes(64));
    let (cpus, peer_cpus) = t.cpu_lists();
    let spec = GrpcSpec {
        mode,
        channels,
        concurrency,
        size,
        resp_size: t.resp_size.unwrap_or(size),
        threads: t.threads.unwrap_or(0),
        peer_threads: t.engines.grpc.peer_threads.unwrap_or(0),
        peer_cpus,
        cpus,
    };
    let max = (MAX_MESSAGE - MESSAGE_OVERHEAD) as u64;
    for (v, flag) in [(spec.size, "--size"), (spec.resp_size, "--resp-size")] {
        if v.0 > max {
            return refuse(format!(
                "{flag} {v} exceeds the largest gRPC message wirescope sends; use at most {}",
                exact_bytes(max)
            ));
        }
    }
    spec.validate().map_err(|e| {
        OptionError(format!(
            "this grpc test is not valid: {e}; --concurrency must be at least --channels"
        ))
    })?;
    Ok(spec)
}

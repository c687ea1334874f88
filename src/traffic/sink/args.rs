//! `--engine sink`'s own options: a clap group flattened into the test
//! options of `run` and the TUI (shown under their own heading in `--help`),
//! and the validation of a packet test into its [`SinkSpec`].

use super::spec::{MAX_FLOWS, MAX_FRAME, MAX_QUEUES, MAX_RATE, MIN_FRAME};
use super::{SinkMode, SinkSpec, TxPath};
use crate::traffic::habits::{Habit, LongHabit};
use crate::traffic::options::{refuse, OptionError, Resolved, SweepParam};
use crate::traffic::EngineSpec;
use crate::traffic::TestOptions;
use crate::units::{count, first_given, pps};

/// The packet tests' options.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Packet tests (--engine sink)")]
pub struct SinkArgs {
    /// sink: how the receiving end counts: af-xdp (the default; every
    /// frame's sequence checked), xdp (an XDP program counts and drops: the
    /// ceiling), tpacket (TPACKET_V3 + PACKET_FANOUT), udp (sockets).
    #[arg(id = "sink", long = "sink", value_enum, value_name = "MODE")]
    pub mode: Option<SinkMode>,
    /// sink: Ethernet frame size incl. FCS, as RFC 2544 counts (64-9000, default 64).
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true, value_parser = count::<u32>("frame size", MIN_FRAME as u64, MAX_FRAME as u64))]
    pub frame_size: Option<u32>,
    /// sink: generator threads and sink queues, one thread per queue on each side (default 1).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = count::<u32>("--queues", 1, MAX_QUEUES as u64))]
    pub queues: Option<u32>,
    /// sink: distinct UDP flows (default 16 per queue, at least 64).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = count::<u32>("--flows", 1, MAX_FLOWS as u64))]
    pub flows: Option<u32>,
    /// sink: packets per second in all; 0 = as fast as possible (default).
    #[arg(long, value_name = "PPS", allow_negative_numbers = true, value_parser = pps(MAX_RATE))]
    pub rate: Option<u64>,
    /// sink: generator path (auto: AF_XDP, else PACKET_TX_RING, else sendmmsg).
    #[arg(long, value_enum, value_name = "PATH")]
    pub tx_path: Option<TxPath>,
    /// sink: fail instead of falling back to the next sink mode or tx path.
    #[arg(long)]
    pub no_fallback: bool,
}

impl SinkArgs {
    /// The first of these options given, by flag (other engines refuse them).
    pub fn given(&self) -> Option<&'static str> {
        first_given([
            (self.mode.is_some(), "--sink"),
            (self.frame_size.is_some(), "--frame-size"),
            (self.queues.is_some(), "--queues"),
            (self.flows.is_some(), "--flows"),
            (self.rate.is_some(), "--rate"),
            (self.tx_path.is_some(), "--tx-path"),
            (self.no_fallback, "--no-fallback"),
        ])
    }
}

/// iperf3's letters for what the packet sink does (a paced test, UDP), under any engine (see `traffic::habits`).
pub const HABITS: &[Habit] = &[
    Habit {
        letter: 'b',
        anywhere: true,
        tool: "iperf3",
        meaning: "a target bitrate",
        instead: "--engine sink --rate PPS for a paced packet test (the TCP engine does not pace)",
    },
    Habit {
        letter: 'u',
        anywhere: true,
        tool: "iperf3",
        meaning: "UDP",
        instead: "--engine sink (UDP frames with loss and reordering per flow)",
    },
];

/// iperf3's long options for what the packet sink does.
pub const LONG_HABITS: &[LongHabit] = &[
    LongHabit {
        name: "udp",
        what: "iperf3's UDP test",
        instead: "--engine sink",
    },
    LongHabit {
        name: "bitrate",
        what: "iperf3's target bitrate",
        instead: "--engine sink --rate PPS",
    },
];

/// Refuse the packet tests' options (and their sweeps) in another engine's test.
pub fn refuse_elsewhere(t: &TestOptions<'_>) -> Result<(), OptionError> {
    if let Some(flag) = t.engines.sink.given() {
        return refuse(format!("{flag} applies to --engine sink (packet tests)"));
    }
    if matches!(t.sweep_param(), Some(SweepParam::Frame | SweepParam::Cores)) {
        return refuse("frame and cores sweeps are for --engine sink");
    }
    Ok(())
}

/// Check the options of a packet test and build its spec.
pub fn resolve(t: &TestOptions<'_>) -> Result<Resolved, OptionError> {
    if let Some(m) = t.mode {
        return refuse(format!(
            "--mode {m}: packet tests choose how they count with --sink xdp|af-xdp|tpacket|udp"
        ));
    }
    let socket = t.socket_flags().map(|f| (true, f));
    for (set, flag) in socket.into_iter().chain([
        (t.streams.is_some(), "--streams (use --queues)"),
        (t.conns.is_some(), "--conns"),
        (t.threads.is_some(), "--threads (use --queues)"),
        (t.depth != 1, "--depth"),
        (t.size.is_some(), "--size (use --frame-size)"),
        (t.len.is_some(), "--len (use --frame-size)"),
        (t.bidir, "--bidir"),
        (t.bytes.is_some(), "--bytes"),
    ]) {
        if set {
            return refuse(format!(
                "{flag} does not apply to --engine sink; packet tests take --sink, --frame-size, --queues, --flows, --rate and --tx-path"
            ));
        }
    }
    if let Some(sw) = t.sweep {
        if !matches!(sw.param, SweepParam::Frame | SweepParam::Cores) {
            return refuse(format!(
                "sink tests sweep frame=64,512,1518 or cores=\"0;1;0,1\", not {}",
                sw.param.name()
            ));
        }
    }
    let time = t.timing()?;
    let spec = EngineSpec::Sink(spec(t)?);
    for (p, s) in t.points(&spec) {
        s.validate().map_err(|e| {
            let at = p.map_or(String::new(), |v| {
                let cpus = v.cpus.map(crate::units::format_cpu_list);
                format!("sweep point {}: ", cpus.unwrap_or(v.value.to_string()))
            });
            OptionError(format!("{at}this packet test is not valid: {e}"))
        })?;
    }
    Ok(Resolved {
        spec,
        time,
        omit: t.omit,
    })
}

/// The spec with the packet tests' defaults, its frame sizes and counts checked.
fn spec(t: &TestOptions<'_>) -> Result<SinkSpec, OptionError> {
    let frame_size = t.engines.sink.frame_size.unwrap_or(MIN_FRAME);
    let frames = t
        .sweep
        .filter(|s| s.param == SweepParam::Frame)
        .map_or(vec![u64::from(frame_size)], |s| s.values.clone());
    for f in frames {
        if !(u64::from(MIN_FRAME)..=u64::from(MAX_FRAME)).contains(&f) {
            return refuse(format!(
                "frame size {f} is out of range; use {MIN_FRAME} to {MAX_FRAME} (Ethernet frame incl. FCS, as RFC 2544 counts)"
            ));
        }
    }
    let queues = t.engines.sink.queues.unwrap_or(1);
    if queues == 0 || queues > MAX_QUEUES {
        return refuse(format!(
            "--queues {queues} is out of range; use 1 to {MAX_QUEUES}"
        ));
    }
    if let Some(f) = t.engines.sink.flows {
        if f == 0 || f > MAX_FLOWS {
            return refuse(format!("--flows {f} is out of range; use 1 to {MAX_FLOWS}"));
        }
    }
    let (cpus, peer_cpus) = t.cpu_lists();
    Ok(SinkSpec {
        mode: t.engines.sink.mode.unwrap_or(SinkMode::AfXdp),
        fallback: !t.engines.sink.no_fallback,
        tx_path: t.engines.sink.tx_path.unwrap_or(TxPath::Auto),
        frame_size,
        queues,
        flows: t.engines.sink.flows,
        rate: t.engines.sink.rate.unwrap_or(0),
        reverse: t.reverse,
        cpus,
        peer_cpus,
        ..SinkSpec::default()
    })
}

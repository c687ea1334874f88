//! `--engine rdma`'s own options, named after perftest's: a clap group
//! flattened into the test options of `run` and the TUI (shown under their
//! own heading in `--help`), and the validation of an RDMA test into its
//! [`RdmaSpec`] with perftest's defaults.

use super::spec::limits;
use super::{RdmaEndpoint, RdmaMode, RdmaOp, RdmaSpec};
use crate::traffic::habits::Habit;
use crate::traffic::options::{refuse, OptionError, Resolved, SweepParam};
use crate::traffic::EngineSpec;
use crate::traffic::TestOptions;
use crate::units::first_given;
use std::time::Duration;

/// `--op`: the RDMA verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RdmaOpArg {
    /// RDMA WRITE.
    Write,
    /// RDMA READ.
    Read,
    /// SEND/RECV.
    Send,
}

/// RDMA's options.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "RDMA (--engine rdma)")]
pub struct RdmaArgs {
    /// rdma: the verb (perftest's ib_write_*, ib_read_*, ib_send_*); `-m bw|lat` picks bandwidth or latency.
    #[arg(long, value_enum, value_name = "OP")]
    pub op: Option<RdmaOpArg>,
    /// rdma: queue pairs (perftest -q, default 1).
    #[arg(long, value_name = "N")]
    pub qps: Option<u32>,
    /// rdma: outstanding send WRs per QP (perftest -t; default 128 bw, 1 lat).
    #[arg(long, value_name = "N")]
    pub tx_depth: Option<u32>,
    /// rdma: posted receive WRs per QP for send (perftest -r, default 512).
    #[arg(long, value_name = "N")]
    pub rx_depth: Option<u32>,
    /// rdma: iterations per QP (perftest -n; default perftest's); --time instead runs for a duration (-D).
    #[arg(long, value_name = "N")]
    pub iters: Option<u64>,
    /// rdma: messages up to this size are posted inline (perftest -I).
    #[arg(long, value_name = "BYTES")]
    pub inline_size: Option<u32>,
    /// rdma: sleep on completion events instead of busy polling (perftest -e).
    #[arg(long)]
    pub use_event: bool,
    /// rdma: this host's device (perftest -d; default: the one behind the interface towards the peer).
    #[arg(long, value_name = "DEV")]
    pub ib_dev: Option<String>,
    /// rdma: this host's port (perftest -i).
    #[arg(long, value_name = "N")]
    pub ib_port: Option<u8>,
    /// rdma: this host's GID index (perftest -x; default: the RoCE v2 GID of the address in use).
    #[arg(long, value_name = "N")]
    pub gid_index: Option<u32>,
    /// rdma: the agent's device.
    #[arg(long, value_name = "DEV")]
    pub peer_ib_dev: Option<String>,
    /// rdma: the agent's port.
    #[arg(long, value_name = "N")]
    pub peer_ib_port: Option<u8>,
    /// rdma: the agent's GID index.
    #[arg(long, value_name = "N")]
    pub peer_gid_index: Option<u32>,
}

impl RdmaArgs {
    /// Only the options that name the hardware (devices, ports, GIDs): what
    /// stays when the TUI's control view starts another test.
    pub fn hardware_only(&self) -> RdmaArgs {
        RdmaArgs {
            ib_dev: self.ib_dev.clone(),
            ib_port: self.ib_port,
            gid_index: self.gid_index,
            peer_ib_dev: self.peer_ib_dev.clone(),
            peer_ib_port: self.peer_ib_port,
            peer_gid_index: self.peer_gid_index,
            ..Default::default()
        }
    }

    /// The first of these options given, by flag (other engines refuse them).
    pub fn given(&self) -> Option<&'static str> {
        first_given([
            (self.op.is_some(), "--op"),
            (self.qps.is_some(), "--qps"),
            (self.tx_depth.is_some(), "--tx-depth"),
            (self.rx_depth.is_some(), "--rx-depth"),
            (self.iters.is_some(), "--iters"),
            (self.inline_size.is_some(), "--inline-size"),
            (self.use_event, "--use-event"),
            (self.ib_dev.is_some(), "--ib-dev"),
            (self.ib_port.is_some(), "--ib-port"),
            (self.gid_index.is_some(), "--gid-index"),
            (self.peer_ib_dev.is_some(), "--peer-ib-dev"),
            (self.peer_ib_port.is_some(), "--peer-ib-port"),
            (self.peer_gid_index.is_some(), "--peer-gid-index"),
        ])
    }
}

/// Refuse RDMA's options in another engine's test.
pub fn refuse_elsewhere(t: &TestOptions<'_>) -> Result<(), OptionError> {
    match t.engines.rdma.given() {
        Some(flag) => refuse(format!("{flag} applies to --engine rdma")),
        None => Ok(()),
    }
}

/// perftest's letters (ib_write_bw & co.) that wirescope would misread under `--engine rdma` (see `traffic::habits`).
pub const HABITS: &[Habit] = &[
    Habit {
        letter: 't',
        anywhere: false,
        tool: "perftest",
        meaning: "the tx depth",
        instead: "--tx-depth N (wirescope's -t is the test length: --time DURATION)",
    },
    Habit {
        letter: 'n',
        anywhere: false,
        tool: "perftest",
        meaning: "the iterations",
        instead: "--iters N (wirescope's -n is a byte count for tcp streams)",
    },
    Habit {
        letter: 'i',
        anywhere: false,
        tool: "perftest",
        meaning: "the IB port",
        instead: "--ib-port N (wirescope's -i is the sampling interval: --interval DURATION)",
    },
    Habit {
        letter: 's',
        anywhere: false,
        tool: "perftest",
        meaning: "the message size",
        instead: "--size SIZE",
    },
    Habit {
        letter: 'q',
        anywhere: false,
        tool: "perftest",
        meaning: "the queue pairs",
        instead: "--qps N (wirescope's -q is --quiet)",
    },
    Habit {
        letter: 'a',
        anywhere: false,
        tool: "perftest",
        meaning: "every size from 2 B to 8 MiB",
        instead: "--sweep size=all",
    },
    Habit {
        letter: 'd',
        anywhere: false,
        tool: "perftest",
        meaning: "the device",
        instead: "--ib-dev DEV (and --peer-ib-dev DEV for the agent's)",
    },
    Habit {
        letter: 'x',
        anywhere: false,
        tool: "perftest",
        meaning: "the GID index",
        instead: "--gid-index N (and --peer-gid-index N for the agent's)",
    },
    Habit {
        letter: 'F',
        anywhere: false,
        tool: "perftest",
        meaning: "not to fail on a CPU frequency warning",
        instead: "nothing: wirescope times with the monotonic clock, not CPU cycles, so drop -F",
    },
    Habit {
        letter: 'D',
        anywhere: false,
        tool: "perftest",
        meaning: "the test length",
        instead: "--time DURATION",
    },
];

/// Check the options of an RDMA test and build its spec.
pub fn resolve(t: &TestOptions<'_>) -> Result<Resolved, OptionError> {
    let mode = match t.mode {
        None | Some("bw") => RdmaMode::Bw,
        Some("lat") => RdmaMode::Lat,
        Some(other) => {
            return refuse(format!(
                "--mode {other} is not an rdma mode; use bw (bandwidth, like ib_*_bw) or lat (latency, like ib_*_lat)"
            ))
        }
    };
    refuse_shared(t)?;
    if let Some(sw) = t.sweep {
        if sw.param != SweepParam::Size {
            return refuse(format!(
                "rdma sweeps size (size=all for perftest's -a, or size=2,64,64K), not {}",
                sw.param.name()
            ));
        }
    }
    if t.interval < Duration::from_millis(10) {
        return refuse("--interval is too short; use at least 10ms");
    }
    let op = match t.engines.rdma.op.unwrap_or(RdmaOpArg::Write) {
        RdmaOpArg::Write => RdmaOp::Write,
        RdmaOpArg::Read => RdmaOp::Read,
        RdmaOpArg::Send => RdmaOp::Send,
    };
    let spec = spec(t, op, mode)?;
    if let Some(sw) = t.sweep {
        for v in &sw.values {
            if !(limits::MIN_SIZE..=limits::MAX_SIZE).contains(v) {
                return refuse(format!(
                    "sweep size {v} is out of range; rdma messages are {} B to 8M",
                    limits::MIN_SIZE
                ));
            }
        }
    }
    let spec = EngineSpec::Rdma(spec);
    for (_, s) in t.points(&spec) {
        s.validate()
            .map_err(|e| OptionError(format!("this rdma test is not valid: {e}")))?;
    }
    Ok(Resolved {
        spec,
        // The engine ends by itself after its iterations or its duration.
        time: None,
        omit: Duration::ZERO,
    })
}

/// The shared options an RDMA test has no use for, refused by flag.
fn refuse_shared(t: &TestOptions<'_>) -> Result<(), OptionError> {
    let socket = t.socket_flags().map(|f| (true, f));
    for (set, flag) in socket.into_iter().chain([
        (t.streams.is_some(), "--streams (use --qps)"),
        (t.conns.is_some(), "--conns (use --qps)"),
        (t.threads.is_some(), "--threads"),
        (t.depth != 1, "--depth (use --tx-depth)"),
        (t.len.is_some(), "--len (use --size)"),
        (t.reverse, "--reverse"),
        (t.bytes.is_some(), "--bytes (use --iters)"),
        (t.cpus.is_some(), "--cpus"),
        (t.peer_cpus.is_some(), "--peer-cpus"),
        (
            !t.omit.is_zero(),
            "--omit (rdma leaves perftest's margins out by itself)",
        ),
    ]) {
        if set {
            return refuse(format!(
                "{flag} does not apply to --engine rdma; rdma tests take --op, -m bw|lat, --size, --qps, --tx-depth, --iters or --time, --bidir, --inline-size, --use-event and the --ib-dev/--ib-port/--gid-index options"
            ));
        }
    }
    Ok(())
}

/// perftest's defaults for `op` and `mode`, with the options given.
fn spec(t: &TestOptions<'_>, op: RdmaOp, mode: RdmaMode) -> Result<RdmaSpec, OptionError> {
    let a = &t.engines.rdma;
    let mut spec = RdmaSpec::perftest_defaults(op, mode);
    if let Some(s) = t.size {
        spec.size = s;
    }
    if let Some(q) = a.qps {
        spec.qps = q;
    }
    if let Some(d) = a.tx_depth {
        spec.tx_depth = d;
    }
    if let Some(r) = a.rx_depth {
        spec.rx_depth = r;
    }
    if let Some(i) = a.inline_size {
        spec.inline_size = i;
    }
    spec.use_event = a.use_event;
    spec.bidir = t.bidir;
    match (a.iters, t.time) {
        (Some(_), Some(_)) => {
            return refuse("give --iters or --time, not both (perftest: -n or -D)")
        }
        (Some(i), None) => spec.iters = Some(i),
        (None, Some(d)) => {
            spec.iters = None;
            spec.secs = Some(d.as_secs_f64());
        }
        (None, None) => {}
    }
    spec.sweep = t.sweep.is_some();
    spec.local = RdmaEndpoint {
        ib_dev: a.ib_dev.clone(),
        ib_port: a.ib_port,
        gid_index: a.gid_index,
    };
    spec.peer = RdmaEndpoint {
        ib_dev: a.peer_ib_dev.clone(),
        ib_port: a.peer_ib_port,
        gid_index: a.peer_gid_index,
    };
    Ok(spec)
}

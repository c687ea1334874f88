//! `--engine sink`'s own options: a clap group flattened into the test
//! options of `run` and the TUI (shown under their own heading in `--help`).

use super::spec::{MAX_FLOWS, MAX_FRAME, MAX_QUEUES, MAX_RATE, MIN_FRAME};
use super::{SinkMode, TxPath};
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

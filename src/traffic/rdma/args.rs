//! `--engine rdma`'s own options, named after perftest's: a clap group
//! flattened into the test options of `run` and the TUI (shown under their
//! own heading in `--help`).

use crate::units::first_given;

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

//! The boundary to libibverbs: the [`Verbs`] trait (one opened port with its
//! QPs, CQs and registered buffers) and [`VerbsProvider`] (is the library
//! there, which devices does it see, open one).
//!
//! Exactly one implementation talks to libibverbs:
//! [`SidewayVerbs`](super::sideway::SidewayVerbs). The engine loop, the
//! connection setup and the arithmetic are ordinary code over this trait, so
//! everything but that struct is tested on hosts without an RDMA device.
//!
//! Work requests name their QP by index; completions carry the index back in
//! `wr_id` (the engine puts the QP index there, like perftest). Offsets are
//! relative to the start of the QP's registered buffer.

use super::setup::Fabric;
use std::time::Duration;

/// Errors of the verbs boundary. Each names the call and what it was on.
#[derive(Debug, thiserror::Error)]
pub enum VerbsError {
    /// libibverbs.so.1 could not be loaded.
    #[error("libibverbs is not installed ({0}): apt-get install libibverbs1 ibverbs-providers (dnf install libibverbs)")]
    NoLibrary(String),
    /// The named device is not among the verbs devices.
    #[error("RDMA device {name} not found by libibverbs (it sees: {seen}); check `rdma link` and that ibverbs-providers has its driver")]
    NoDevice {
        /// Requested name.
        name: String,
        /// What libibverbs lists.
        seen: String,
    },
    /// A verbs call failed.
    #[error("{call} on {device} failed: {source}")]
    Call {
        /// The verb (`ibv_create_qp`, `ibv_modify_qp RTR`, ...).
        call: &'static str,
        /// Device and port or QP.
        device: String,
        /// errno.
        #[source]
        source: std::io::Error,
    },
    /// The port is not usable.
    #[error("{0}")]
    Port(String),
}

/// What the port says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortInfo {
    /// ACTIVE.
    pub active: bool,
    /// Active MTU (bytes).
    pub active_mtu: u32,
    /// Max MTU (bytes).
    pub max_mtu: u32,
    /// LID (IB).
    pub lid: u16,
    /// Link layer.
    pub fabric: Fabric,
    /// Outstanding RDMA READs a QP may have (device `max_qp_rd_atom`).
    pub max_rd_atomic: u8,
}

/// Resources to create on the opened port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpConfig {
    /// QPs.
    pub qps: u32,
    /// Send queue depth per QP.
    pub tx_depth: u32,
    /// Receive queue depth per QP.
    pub rx_depth: u32,
    /// Max inline data.
    pub max_inline: u32,
    /// Registered buffer per QP (bytes).
    pub buffer_len: u64,
    /// Completion channel for `wait`.
    pub use_event: bool,
}

/// A created QP's local end, for the setup message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalQp {
    /// QP number.
    pub qpn: u32,
    /// rkey of its buffer.
    pub rkey: u32,
    /// Address of its buffer.
    pub addr: u64,
    /// Length of its buffer.
    pub len: u64,
}

/// How to connect one QP to the peer's (INIT → RTR → RTS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectAttrs {
    /// Path MTU (bytes).
    pub path_mtu: u32,
    /// Peer's QPN.
    pub remote_qpn: u32,
    /// Peer's initial PSN (our receive PSN).
    pub remote_psn: u32,
    /// Our initial PSN.
    pub local_psn: u32,
    /// Peer's LID (IB).
    pub remote_lid: u16,
    /// Peer's GID (RoCE, or IB across subnets).
    pub remote_gid: Option<[u8; 16]>,
    /// Our GID index.
    pub gid_index: Option<u32>,
    /// Outstanding RDMA READs (initiator and responder).
    pub max_rd_atomic: u8,
}

/// The verb of a send WR, with the peer's address for WRITE/READ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrOp {
    /// RDMA WRITE.
    Write {
        /// Peer address.
        remote_addr: u64,
        /// Peer rkey.
        rkey: u32,
    },
    /// RDMA READ.
    Read {
        /// Peer address.
        remote_addr: u64,
        /// Peer rkey.
        rkey: u32,
    },
    /// SEND.
    Send,
}

/// One send WR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Verb.
    pub op: WrOp,
    /// Local offset of the data (source of WRITE/SEND, destination of READ).
    pub offset: u64,
    /// Length.
    pub len: u32,
    /// Ask for a completion.
    pub signaled: bool,
    /// Copy the data into the WQE.
    pub inline: bool,
}

/// Which completion queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cq {
    /// Completions of send WRs (WRITE, READ, SEND).
    Send,
    /// Completions of receive WRs.
    Recv,
}

/// One work completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The WR's id.
    pub wr_id: u64,
    /// `IBV_WC_SUCCESS` (0) or the error status.
    pub status: u32,
    /// Bytes received (receive completions).
    pub byte_len: u32,
}

/// Text of a work completion status (`ibv_wc_status_str`), for messages.
pub fn wc_status_name(status: u32) -> &'static str {
    // enum ibv_wc_status (verbs.h).
    const NAMES: [&str; 22] = [
        "success",
        "local length error",
        "local QP operation error",
        "local EE context operation error",
        "local protection error",
        "WR flushed",
        "memory window bind error",
        "bad response",
        "local access error",
        "remote invalid request",
        "remote access error",
        "remote operation error",
        "transport retry counter exceeded",
        "RNR retry counter exceeded",
        "local RDD violation",
        "remote invalid RD request",
        "remote aborted",
        "invalid EE context number",
        "invalid EE context state",
        "fatal error",
        "response timeout",
        "general error",
    ];
    NAMES
        .get(status as usize)
        .copied()
        .unwrap_or("unknown status")
}

/// One opened port with its resources. Implemented by the libibverbs-backed
/// struct (and, in tests, by a test double).
pub trait Verbs: Send {
    /// Device name (for messages).
    fn device(&self) -> &str;
    /// Port attributes.
    fn port_info(&self) -> Result<PortInfo, VerbsError>;
    /// The GID at `index` of the port.
    fn gid(&self, index: u32) -> Result<[u8; 16], VerbsError>;
    /// Create the QPs, CQs and buffers.
    fn create(&mut self, cfg: &QpConfig) -> Result<Vec<LocalQp>, VerbsError>;
    /// Connect QP `qp` to the peer (INIT → RTR → RTS).
    fn connect(&mut self, qp: usize, attrs: &ConnectAttrs) -> Result<(), VerbsError>;
    /// Post one send WR on QP `qp`.
    fn post_send(&mut self, qp: usize, wr: &SendWr) -> Result<(), VerbsError>;
    /// Post one receive WR on QP `qp` for `[offset, offset + len)`.
    fn post_recv(&mut self, qp: usize, wr_id: u64, offset: u64, len: u32)
        -> Result<(), VerbsError>;
    /// Append the completions waiting on `cq` (at most a batch) to `out`.
    fn poll(&mut self, cq: Cq, out: &mut Vec<Completion>) -> Result<(), VerbsError>;
    /// Arm `cq` and sleep until it has a completion or `timeout` passes
    /// (`--use-event`); true when an event arrived.
    fn wait(&mut self, cq: Cq, timeout: Duration) -> Result<bool, VerbsError>;
    /// Read one byte of QP `qp`'s buffer (the peer may write it at any time).
    fn read_byte(&self, qp: usize, offset: u64) -> u8;
    /// Write one byte of QP `qp`'s buffer (the latency marker).
    fn write_byte(&mut self, qp: usize, offset: u64, value: u8);
}

/// The library behind [`Verbs`]: present or not, its devices, and opening one.
pub trait VerbsProvider: Send + Sync {
    /// Is the library loaded (Err: [`VerbsError::NoLibrary`] with why not)?
    fn library(&self) -> Result<(), VerbsError>;
    /// Device names the library sees.
    fn devices(&self) -> Result<Vec<String>, VerbsError>;
    /// Open `device`'s `port`.
    fn open(&self, device: &str, port: u8) -> Result<Box<dyn Verbs>, VerbsError>;
}

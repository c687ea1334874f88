//! The packet engine: a generator and a sink of UDP/IPv4 frames between the
//! pair's addresses, counting per queue, per flow and per CPU — how many
//! packets per second a host receives, at which frame size and on how many
//! cores, and where the rest were dropped.
//!
//! Owns the data plane of packet tests and nothing else: frames
//! ([`frame`]), sequence tracking ([`flow`]), the generator ([`gen`]: AF_XDP,
//! PACKET_TX_RING or sendmmsg), the sink ([`rx`]: XDP, AF_XDP, TPACKET_V3 or
//! UDP sockets), their lock-free counters ([`counters`]) and the pure
//! functions that turn snapshots into per-interval and per-point figures
//! ([`figures`]). It never prints, logs or draws; it never changes the
//! host's configuration (no ethtool -L/-G, no sysctl): a refused mode is
//! reported and the next one tried.
//!
//! How a point runs (the session's part in brackets):
//!
//! 1. \[the controller sends `Start{spec}`\] both ends validate the
//!    [`SinkSpec`]; the sink end calls [`rx::prepare`] (binds its sockets,
//!    attaches XDP — before any traffic) and answers with its [`SinkEnd`];
//!    the generator end calls [`gen::prepare`] and sends its [`GeneratorEnd`].
//! 2. \[`Go`\] the sink starts ([`rx::PreparedSink::start`]), then the
//!    generator ([`gen::PreparedGenerator::open`] with the sink's end, then
//!    [`gen::OpenedGenerator::start`]).
//! 3. \[every interval\] `snapshot()` on each end; [`figures::sink_interval`]
//!    and [`figures::gen_interval`] turn two snapshots into figures.
//! 4. \[stop\] the generator stops and drains, reports [`figures::GenTotals`]
//!    (frames sent per flow); the sink keeps reading until its queues are
//!    quiet, stops, and [`figures::tally`] gives exact loss per flow.
//!
//! The module runs unchanged with each end in another network namespace:
//! every interface fact is read by ioctl/getifaddrs in the calling thread's
//! namespace, and threads inherit the namespace of the thread that starts
//! them.

pub mod args;
pub mod counters;
pub mod engine;
pub mod figures;
pub mod flow;
pub mod form;
pub mod frame;
pub mod gen;
mod pace;
mod ring;
pub mod rx;
pub mod spec;
pub mod summary;
pub mod sys;
pub mod views;
pub mod xdp;
mod xsk;

pub use spec::{GeneratorEnd, SinkEnd, SinkMode, SinkSpec, TxPath};

use crate::traffic::EngineError;

/// Errors of the packet engine; each names the operation and the object.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// An interface fact could not be read.
    #[error("interface {iface}: reading its {what} failed: {reason}")]
    Iface {
        /// Interface.
        iface: String,
        /// What was read (MAC address, MTU, ...).
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// A network namespace could not be entered.
    #[error("cannot enter network namespace {name}: {reason}")]
    Netns {
        /// Namespace.
        name: String,
        /// Why.
        reason: String,
    },
    /// The XDP program could not be loaded or attached.
    #[error("XDP on {iface}: {reason}")]
    XdpRefused {
        /// Interface.
        iface: String,
        /// The kernel's or aya's answer.
        reason: String,
    },
    /// A socket call failed on a queue.
    #[error("{op} on queue {queue} failed: {source}")]
    Io {
        /// Operation.
        op: &'static str,
        /// Queue.
        queue: u32,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// The test asks for something this host or link cannot do.
    #[error("{0}")]
    Unsupported(String),
    /// The test as asked does not fit these interfaces (more threads than
    /// the sink has queues, frames above the MTU): the command line must
    /// change (or the host's settings, as the message says).
    #[error("{0}")]
    Usage(String),
    /// A worker thread could not start or failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl From<SinkError> for EngineError {
    fn from(e: SinkError) -> Self {
        match e {
            SinkError::Engine(e) => e,
            SinkError::Io { op, queue, source } => EngineError::Io {
                op,
                conn: queue as usize,
                source,
            },
            SinkError::Usage(m) => EngineError::Usage(m),
            other => EngineError::Unsupported(other.to_string()),
        }
    }
}

//! Limits shared by the command line (which explains them) and the agent
//! (which enforces them on what arrives over the network), and what a test
//! needs of a host. One place, so the two ends cannot drift apart. A leaf of
//! `traffic`: it imports nothing of the engines.

/// Largest write/message size (bytes).
pub const MAX_MSG: u64 = 64 << 20;
/// Smallest SO_SNDBUF/SO_RCVBUF request (bytes).
pub const MIN_WINDOW: u64 = 1024;
/// Largest SO_SNDBUF/SO_RCVBUF request (bytes; the kernel doubles it).
pub const MAX_WINDOW: u64 = 1 << 30;
/// Most data connections (streams, or connections) of one point.
pub const MAX_CONNS: u64 = 65_536;
/// Most worker threads per side.
pub const MAX_THREADS: u64 = 4096;
/// Most requests in flight per rr connection.
pub const MAX_DEPTH: u64 = 65_536;

/// Why a spec is not a test this build runs: what a peer or a face sent
/// that is out of range or does not fit together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A count or size outside its range.
    #[error("{what} {value} is outside {lo}..={hi}")]
    OutOfRange {
        /// The field (`streams`, `rdma qps`, ...).
        what: String,
        /// Its value.
        value: u64,
        /// The smallest allowed.
        lo: u64,
        /// The largest allowed.
        hi: u64,
    },
    /// A combination or value the engine refuses, with what to do instead.
    #[error("{0}")]
    Invalid(String),
}

/// [`SpecError::OutOfRange`] unless `lo <= v <= hi`.
pub fn check(what: &str, v: u64, lo: u64, hi: u64) -> Result<(), SpecError> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(SpecError::OutOfRange {
            what: what.into(),
            value: v,
            lo,
            hi,
        })
    }
}

/// Memory a test point needs on one host, and how to ask for less.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryNeed {
    /// Bytes the engine allocates.
    pub bytes: crate::units::Bytes,
    /// What they are, for the user (`64 streams x 64 MiB send buffers`).
    pub what: String,
    /// How to need less (`use fewer streams or a smaller --len`).
    pub smaller: String,
}

//! The RDMA engine: RC queue pairs over libibverbs (loaded at run time),
//! RDMA WRITE, READ and SEND/RECV in bandwidth and latency modes, with
//! perftest's defaults, limits, arithmetic and columns.
//!
//! This module owns everything of an RDMA test point except the session:
//!
//! * [`spec`]: what a point asks for ([`RdmaSpec`]), validated by an agent
//!   before it allocates anything;
//! * [`setup`]: the connection-setup message (QPN, PSN, LID/GID, rkey,
//!   address, length, MTU) that travels as the `setup` of `Start` /
//!   `Accepting` over the authenticated control channel, and its checks;
//! * [`preflight`]: why a test cannot start on a host (no libibverbs, no
//!   device, not the device, port or GID asked for), one line with the fix;
//!   `probe::rdma::preflight` reads the host and chooses the device, port
//!   and GID;
//! * [`engine`]: prepare → connect → start, the bandwidth and latency loops,
//!   per-interval figures, the end-of-point outcome;
//! * [`report`]: perftest's formulas as pure functions over timestamps;
//! * [`verbs`]: the [`Verbs`](verbs::Verbs) trait, the only boundary to the
//!   verbs library, and [`sideway`]: the one struct that implements it over
//!   libibverbs.
//!
//! It must not open sockets, read the terminal or log: the session exchanges
//! the setups and drives start/stop; the sampler reads the counters.
//! libibverbs is never linked: `sideway` uses rdma-core-mummy, which
//! `dlopen`s `libibverbs.so.1`, so the binary starts on hosts without rdma-core.
//!
//! `sideway` is compiled only with the `rdma` cargo feature (a default one:
//! its build needs cmake and libclang). [`verbs_provider`] is the one place
//! that picks the verbs library; without the feature it refuses every RDMA
//! test with [`BUILT_WITHOUT_RDMA`], on the controller and on the agent alike.

pub mod args;
pub mod engine;
pub mod form;
pub mod preflight;
pub mod report;
pub mod session;
pub mod setup;
#[cfg(feature = "rdma")]
pub mod sideway;
pub mod spec;
pub mod summary;
pub mod verbs;

#[cfg(test)]
mod test_double;

pub use engine::{
    interval, prepare, Connected, Prepared, RdmaError, RdmaInterval, RdmaOutcome, RdmaResult,
};
pub use report::{BwReport, LatReport};
pub use setup::{QpEndpoint, RdmaSetup, SetupError};
pub use spec::{all_sizes, RdmaEndpoint, RdmaMode, RdmaOp, RdmaSpec};

/// What a wirescope built without the `rdma` cargo feature answers when an
/// RDMA test is asked of it.
pub const BUILT_WITHOUT_RDMA: &str =
    "this wirescope was built without RDMA (cargo feature `rdma`); rebuild with default features";

/// The verbs library of this build: libibverbs through sideway, or, in a
/// build without the `rdma` feature, [`BUILT_WITHOUT_RDMA`].
pub fn verbs_provider() -> Result<&'static dyn verbs::VerbsProvider, preflight::PreflightError> {
    #[cfg(feature = "rdma")]
    {
        Ok(&sideway::SidewayProvider)
    }
    #[cfg(not(feature = "rdma"))]
    {
        Err(preflight::PreflightError::NotBuilt)
    }
}

/// The device, port and GID a host uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    /// Device.
    pub device: String,
    /// Port.
    pub port: u8,
    /// GID index (RoCE; None on InfiniBand: LID addressing).
    pub gid_index: Option<u32>,
    /// The netdev behind the port.
    pub netdev: Option<String>,
}

//! How a test point ended, as plain data: what the controller reports and the
//! faces summarise. Nothing here does I/O.

use super::proto::SideResult;
use crate::probe::sample::Sample;

/// One interval as a point runner publishes it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEvent {
    /// Interval index (the same on both hosts).
    pub index: u32,
    /// This host's Sample (None when it could not be taken).
    pub local: Option<Sample>,
    /// The agent's Sample (None when it did not arrive).
    pub peer: Option<Sample>,
}

pub use super::proto::EndReason;

/// The result of one point.
#[derive(Debug, Clone, PartialEq)]
pub struct PointOutcome {
    /// This host's totals.
    pub local: SideResult,
    /// The agent's totals, when it delivered them.
    pub peer: Option<SideResult>,
    /// How it ended.
    pub end: EndReason,
}

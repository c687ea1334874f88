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

/// How a point ended (a pair test's travels to the coordinator as it is).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "end", content = "why", rename_all = "snake_case")]
pub enum EndReason {
    /// Time or byte limit reached.
    Completed,
    /// Ctrl-C / SIGTERM / stopped by the user (a pair test: by the coordinator).
    Interrupted,
    /// The agent vanished (a pair test: Y).
    PeerLost(String),
    /// Something failed (engine, agent).
    Failed(String),
}

impl EndReason {
    /// True when the point ran to its end or was stopped on purpose.
    pub fn clean(&self) -> bool {
        matches!(self, EndReason::Completed | EndReason::Interrupted)
    }
}

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

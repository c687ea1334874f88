//! What the rules read: a window of recent Samples per host, facts, and the test.

use crate::probe::facts::HostFacts;
use crate::probe::sample::Sample;
use crate::traffic::EngineSpec;

/// Recent Samples of one host (oldest first, latest last) and its facts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Window<'a> {
    /// Recent Samples, latest last. Per-interval use: the last few intervals
    /// (e.g. 5); end of a test point: all of the point's Samples.
    pub samples: &'a [Sample],
    /// The host's facts. When None, the latest `Sample::facts` in `samples` is used.
    pub facts: Option<&'a HostFacts>,
}

impl<'a> Window<'a> {
    /// A window over `samples` whose facts are the latest ones found among them.
    pub fn from_samples(samples: &'a [Sample]) -> Self {
        Window {
            samples,
            facts: None,
        }
    }

    /// The facts: the explicit ones, else the latest carried by a Sample.
    pub fn facts(&self) -> Option<&'a HostFacts> {
        self.facts
            .or_else(|| self.samples.iter().rev().find_map(|s| s.facts.as_deref()))
    }
}

/// The test's own context: what was asked for.
#[derive(Debug, Clone, Copy, Default)]
pub struct TestContext<'a> {
    /// The engine spec (streams, pinning, SO_RCVBUF), when a test runs.
    pub spec: Option<&'a EngineSpec>,
}

/// Everything [`super::diagnose`] reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct Input<'a> {
    /// The controller's host.
    pub local: Window<'a>,
    /// The agent's host.
    pub peer: Window<'a>,
    /// The test.
    pub test: TestContext<'a>,
}

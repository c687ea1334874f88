//! What both ends do around a running engine: wait for the next Sample of the
//! sampler thread, and at the end join the workers and collect the totals.

use super::proto::SideResult;
use crate::probe::sample::Sample;
use crate::probe::sampler::thread::{SamplerError, SamplerThread};
use crate::probe::tcpinfo;
use crate::traffic::RunningEngine;
use std::collections::VecDeque;
use std::time::Duration;
use tokio::sync::oneshot;

/// How long each handshake step and the data-connection setup may take.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an engine may take to drain after Stop.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Samples asked of the sampler thread and not yet delivered, oldest first.
#[derive(Default)]
pub(crate) struct PendingSamples(VecDeque<oneshot::Receiver<Sample>>);

impl PendingSamples {
    /// Ask the sampler for a Sample now; a sampler that is gone or far behind
    /// is reported (the interval is then missing, not wrong).
    pub(crate) fn request(&mut self, sampler: &SamplerThread) -> Result<(), SamplerError> {
        let rx = sampler.request()?;
        self.0.push_back(rx);
        Ok(())
    }

    /// The oldest requested Sample once it is ready; never resolves when none is pending.
    pub(crate) async fn next(&mut self) -> Option<Sample> {
        match self.0.front_mut() {
            Some(rx) => {
                let s = rx.await.ok();
                self.0.pop_front();
                s
            }
            None => std::future::pending().await,
        }
    }

    /// Every pending Sample, in order (the end of a point).
    pub(crate) async fn drain(&mut self) -> Vec<Sample> {
        let mut out = Vec::new();
        while let Some(rx) = self.0.pop_front() {
            if let Ok(s) = rx.await {
                out.push(s);
            }
        }
        out
    }
}

/// Join the engine (off the async threads) and collect its totals.
pub(crate) async fn finish(
    engine: &mut RunningEngine,
    sampler: &SamplerThread,
    duration_s: f64,
) -> SideResult {
    let latency = sampler.end().await.ok().flatten();
    let threads = std::mem::take(&mut engine.threads);
    let joined = tokio::task::spawn_blocking(move || crate::traffic::join_all(threads)).await;
    let error = match joined {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(e) => Some(format!("engine join failed: {e}")),
    };
    let retransmits = engine
        .sockets
        .iter()
        .map(|s| tcpinfo::read(s).map(|t| t.total_retrans).unwrap_or(0))
        .collect();
    let conns = engine.snapshot();
    engine.sockets.clear();
    SideResult {
        conns,
        retransmits,
        duration_s,
        latency,
        error,
        extra: engine.probe.as_ref().and_then(|p| p.totals()),
    }
}

/// Sleep until `d`, or forever when there is no deadline.
pub(crate) async fn sleep_until_opt(d: Option<tokio::time::Instant>) {
    match d {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

//! The RDMA engine as the session runs it: one [`Engine`] per end whose
//! setup exchange carries the [`RdmaSetup`] (QPNs, PSNs, LID/GID, rkeys,
//! addresses, MTU) inside `Start` / `Accepting` over the authenticated
//! control channel — no extra port — and whose probe turns the QP counters
//! into [`RdmaInterval`]s and the end-of-point [`RdmaOutcome`] into totals.
//!
//! The agent has the controller's setup before it answers, so it connects
//! its QPs first and answers with the setup it made when preparing; the
//! controller connects when `Accepting` arrives. Both ends check the other's
//! setup ([`RdmaSetup::check_remote`]) before a QP moves.

use super::engine::{interval, Connected, Prepared, RdmaInterval, RdmaOutcome, RdmaResult};
use super::setup::RdmaSetup;
use crate::traffic::{
    ConnSnapshot, Engine, EngineCounters, EngineError, EngineInterval, EngineProbe, EngineSetup,
    EngineTotals, RunningEngine,
};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};

/// One end of an RDMA test, prepared or connected.
pub struct RdmaEngine {
    /// This end's setup, as made when preparing.
    local: RdmaSetup,
    state: State,
}

enum State {
    Prepared(Box<Prepared>),
    Connected(Box<Connected>),
    /// Only while moving between the two.
    Moving,
}

impl RdmaEngine {
    /// Wrap a prepared end (QPs created, buffers registered).
    pub fn new(p: Prepared) -> Self {
        RdmaEngine {
            local: p.setup().clone(),
            state: State::Prepared(Box::new(p)),
        }
    }
}

impl Engine for RdmaEngine {
    fn setup(&self) -> Option<EngineSetup> {
        Some(EngineSetup::Rdma(self.local.clone()))
    }

    fn connect(&mut self, peer: Option<EngineSetup>) -> Result<(), EngineError> {
        let remote = match peer {
            Some(EngineSetup::Rdma(r)) => r,
            None => {
                return Err(EngineError::Unsupported(
                    "the other end of the rdma test sent no queue-pair setup (an older wirescope?); run the same version on both hosts".into(),
                ))
            }
            Some(_) => {
                return Err(EngineError::Unsupported(
                    "the other end sent the setup of another engine for an rdma test".into(),
                ))
            }
        };
        match std::mem::replace(&mut self.state, State::Moving) {
            State::Prepared(p) => {
                let c = p
                    .connect(&remote)
                    .map_err(|e| EngineError::Unsupported(e.to_string()))?;
                self.state = State::Connected(Box::new(c));
                Ok(())
            }
            other => {
                self.state = other;
                Err(EngineError::Unsupported(
                    "the rdma queue pairs are connected already".into(),
                ))
            }
        }
    }

    fn start(self: Box<Self>, _conns: Vec<TcpStream>) -> Result<RunningEngine, EngineError> {
        let State::Connected(c) = self.state else {
            return Err(EngineError::Unsupported(
                "the rdma test started before the other end's setup arrived".into(),
            ));
        };
        let (mut engine, result) = c.start()?;
        engine.probe = Some(Arc::new(RdmaProbe {
            counters: Arc::clone(&engine.counters),
            prev: Mutex::new(Vec::new()),
            result,
        }));
        Ok(engine)
    }
}

/// The sampler's view of a running RDMA end.
struct RdmaProbe {
    counters: Arc<EngineCounters>,
    prev: Mutex<Vec<ConnSnapshot>>,
    result: RdmaResult,
}

impl EngineProbe for RdmaProbe {
    fn interval(&self, secs: f64) -> Option<EngineInterval> {
        let cur = self.counters.snapshot();
        let mut prev = self.prev.lock().unwrap_or_else(|p| p.into_inner());
        // Latency percentiles travel in the Sample's own latency summary.
        let i: RdmaInterval = interval(&prev, &cur, secs, None);
        *prev = cur;
        Some(EngineInterval::Rdma(i))
    }

    fn totals(&self) -> Option<EngineTotals> {
        self.result
            .get()
            .map(|o: RdmaOutcome| EngineTotals::Rdma(Box::new(o)))
    }
}

//! Guided checklists in the TUI (the Tune view): the same step loop as
//! `wirescope checklist run` ([`crate::tune::runner`]), driven from the TUI's
//! session.
//!
//! The loop is synchronous and asks its
//! [`Driver`] for everything; here it runs on
//! its own thread with a [`RemoteDriver`] that turns each call into
//! a [`DriverReq`] for the session task and waits for the answer. The
//! session task owns the agent's session
//! ([`super::session_task::run_checklist`]): it runs each test with the same
//! driver as `run` (the intervals reach the UI like any test's, the summary
//! gives the metric and the findings), carries out each change on this host
//! (off the async threads) or on the agent's host (through the control
//! connection), and forwards questions and records to the UI as
//! [`TuneNote`]s; the user answers with `y`/`n`, which come back as
//! [`super::session_task::SessionCmd::Answer`]. Stop or quit while a test
//! runs interrupts it, and the loop ends the checklist there.

use crate::diagnose::HostRole;
use crate::tune::decide::Metric;
use crate::tune::runner::{Driver, TuneDone, TuneOp};
use crate::tune::runner::{Question, Record, StepError, TestError, TestOutcome};
use tokio::sync::{mpsc, oneshot};

/// What the Tune view is told while a checklist runs.
#[derive(Debug, Clone, PartialEq)]
pub enum TuneNote {
    /// A question for the user (`y`/`n`).
    Question(Question),
    /// A baseline, a finished step, or the summary.
    Record(Record),
    /// The checklist ended (or could not run: why).
    Ended(Result<(), ChecklistEnd>),
}

/// Why a checklist in the Tune view ended before its summary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChecklistEnd {
    /// It could not run, or its step loop stopped (what it said).
    #[error("{0}")]
    Run(String),
    /// Its thread could not be started.
    #[error("cannot start the checklist: {0}")]
    Spawn(String),
    /// Its thread could not be waited for.
    #[error("the checklist thread failed: {0}")]
    Join(String),
    /// Its thread panicked.
    #[error("the checklist thread panicked")]
    Panicked,
}

/// One call of the step loop, for the session task.
pub enum DriverReq {
    /// Run the checklist's test once.
    RunTest {
        /// `wirescope run` arguments.
        args: Vec<String>,
        /// What is compared.
        metric: Metric,
        /// The answer.
        reply: oneshot::Sender<Result<TestOutcome, TestError>>,
    },
    /// Preview, apply or roll back a change on a host.
    Op {
        /// Which host.
        host: HostRole,
        /// What.
        op: TuneOp,
        /// The answer (a refusal by the agent is [`StepError::Refused`]).
        reply: oneshot::Sender<Result<TuneDone, StepError>>,
    },
    /// Ask the user.
    Confirm {
        /// The question.
        q: Question,
        /// The answer.
        reply: oneshot::Sender<bool>,
    },
    /// Show a record.
    Record(Record),
}

/// The step loop's [`Driver`] on its own
/// thread: every call goes to the session task and waits for its answer.
pub struct RemoteDriver {
    tx: mpsc::Sender<DriverReq>,
}

impl RemoteDriver {
    /// A driver whose calls go to `tx`.
    pub fn new(tx: mpsc::Sender<DriverReq>) -> Self {
        RemoteDriver { tx }
    }

    fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> DriverReq) -> Option<T> {
        let (reply, rx) = oneshot::channel();
        self.tx.blocking_send(make(reply)).ok()?;
        rx.blocking_recv().ok()
    }
}

const GONE: &str = "the TUI's session ended";

impl Driver for RemoteDriver {
    fn op(&mut self, host: HostRole, op: TuneOp) -> Result<TuneDone, StepError> {
        self.ask(|reply| DriverReq::Op { host, op, reply })
            .unwrap_or_else(|| Err(StepError::Failed(GONE.into())))
    }

    fn run_test(&mut self, args: &[String], metric: Metric) -> Result<TestOutcome, TestError> {
        let args = args.to_vec();
        self.ask(|reply| DriverReq::RunTest {
            args,
            metric,
            reply,
        })
        .unwrap_or_else(|| Err(GONE.into()))
    }

    fn confirm(&mut self, q: &Question) -> bool {
        let q = q.clone();
        self.ask(|reply| DriverReq::Confirm { q, reply })
            .unwrap_or(false)
    }

    fn record(&mut self, r: &Record) {
        let _ = self.tx.blocking_send(DriverReq::Record(r.clone()));
    }
}

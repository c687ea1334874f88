//! wirescope: live network-throughput diagnosis on a pair of Linux nodes.
//!
//! The crate is organised by data flow, in layers; a module imports only the
//! layers below it (a test, `tests/it/module_edges.rs`, keeps it so):
//!
//! 1. [`units`] — unit newtypes and their parsers.
//! 2. [`traffic`] — engines generate load and count it into atomics.
//! 3. [`probe`] — observers read the host; the sampler thread turns probes and
//!    engine counters into one [`probe::sample::Sample`] per host per interval.
//! 4. [`diagnose`] — pure rules: Samples and facts in, ranked findings out.
//! 5. [`session`] — the node pair: control protocol, agent, controller, and
//!    the driver that runs a plan and publishes
//!    [`session::driver::SessionEvent`]s.
//! 6. [`record`] — the pipeline every face shares: log records, findings and
//!    summaries from those events; the log's schema and the human table.
//! 7. [`fleet`] — many agents: host discovery (list, Slurm, DNS), rounds of
//!    disjoint pair tests run agent to agent, the matrix, the slow links and
//!    nodes, the odd settings.
//! 8. [`cli`] — command-line types and their validation.
//! 9. [`face`] — `run`, `watch`, `capture`, `check`; then [`tui`], the dashboard.
//!
//! Engines and probes never print; faces only choose what to show of what the
//! pipeline gives them.
//!
//! Beside the layers, [`logging`] holds the process's log subscriber (levels,
//! `-v`/`-q`, `RUST_LOG`); `main` installs it and it imports nothing above.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod cli;
pub mod diagnose;
pub mod face;
pub mod fleet;
pub mod logging;
pub mod probe;
pub mod record;
pub mod session;
pub mod traffic;
pub mod tui;
pub mod tune;
pub mod units;

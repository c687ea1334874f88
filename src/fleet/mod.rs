//! `wirescope fleet`: find the slow node or link among many agents.
//!
//! * [`hosts`] — which agents: a list, a file, the Slurm job, a DNS name;
//! * [`rounds`] — which pairs test together: ring, all-pairs (circle
//!   method), star, a list; in a round every node is in at most one test;
//! * [`coordinator`] — runs the rounds: agent X tests against agent Y
//!   ([`crate::session::pair`]), the results go through the same pipeline
//!   and rules as `run`;
//! * [`analyze`] — pure: the matrix, slow links, slow nodes, odd settings;
//! * [`log`] — the fleet's JSON-lines log.
//! * [`metrics`] — the results as Prometheus gauges (`--metrics`).
//!
//! wirescope starts no daemons across machines: agents are started by what
//! the site runs (systemd, a Kubernetes DaemonSet, `srun`); `fleet` only
//! coordinates.

pub mod analyze;
pub mod coordinator;
pub mod hosts;
pub mod log;
pub mod metrics;
pub mod rounds;

//! Tuning: profiles of host settings (TOML files), applied all-or-nothing
//! with a durable backup and a journal, rolled back exactly, compared with
//! each other and with the live host; and the guided checklists that change
//! one thing at a time and keep it only when a measurement shows it helped.
//!
//! This is the only part of wirescope that changes a host. Everything else
//! (probes, diagnosis, TUI) reads. The layers, bottom up:
//!
//! * [`profile`] parses and checks the file (no host involved); [`glob`]
//!   matches its interface patterns in linear time;
//! * [`host`] reads and writes one [`key::Key`] at a time (procfs/sysfs
//!   files, ethtool netlink, rtnetlink, systemd) on the live host or below a
//!   directory laid out like `/`;
//! * [`resolve`] turns a profile into a [`resolve::Plan`] on a host and finds
//!   every value the host cannot take, before anything changes;
//! * [`state`] keeps backups and journals durably ([`origin`]: which
//!   namespace and command made one); [`apply`] writes a plan
//!   in order, restores on the first failure, rolls back, and finishes or
//!   undoes an apply that a crash interrupted ([`apply::pending`] is what
//!   `wirescope check` calls to notice one);
//! * [`snapshot`] (`profile save`), [`diff`], [`library`] (shipped and saved
//!   profiles), [`peer`] (the request/response the agent serves when started
//!   with `--allow-tuning`), `crate::face::profile` (`wirescope profile ...`);
//! * [`checklist`] (the file format) and [`decide`] (the pure keep-or-roll-back
//!   logic, summary table and kept-changes profile) with [`runner`], the
//!   step loop over a [`runner::Driver`] the session will implement, and
//!   [`side`], which host a step's change belongs on.
//!
//! Nothing here shells out to `ethtool` or `ip`; `--dry-run` prints the
//! commands a person would type for the same changes.

pub mod apply;
pub mod checklist;
pub mod cpuset;
pub mod decide;
pub mod diff;
pub mod error;
pub mod features;
pub mod glob;
pub mod host;
pub mod key;
pub mod library;
pub mod origin;
pub mod peer;
pub mod profile;
pub mod resolve;
pub mod runner;
pub mod side;
pub mod snapshot;
pub mod state;

pub use apply::{ApplyReport, Change, Pending, RollbackReport};
pub use error::TuneError;
pub use host::Host;
pub use key::Key;
pub use profile::{Profile, ProfileError};
pub use resolve::{Plan, ResolveOpts};
pub use state::StateDir;

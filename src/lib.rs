//! wirescope: live network-throughput diagnosis on a pair of Linux nodes.
//!
//! The crate is organised by data flow (see the repository's DESIGN notes):
//! [`traffic`] engines generate load and count it, [`probe`] observers read
//! the host, the sampler turns both into one [`probe::sample::Sample`] per
//! host per interval, [`session`] moves Samples and commands between the two
//! nodes, and [`record`] writes them. Engines and probes never print; the
//! consumers (headless run, later the TUI and the diagnosis rules) only read
//! Samples.

pub mod check;
pub mod cli;
pub mod diagnose;
pub mod headless;
pub mod probe;
pub mod record;
pub mod session;
pub mod sink_lab;
pub mod traffic;
pub mod tui;
pub mod units;
pub mod watch;

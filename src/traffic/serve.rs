//! Servers an engine runs alone for third-party clients
//! (`wirescope serve <name>`): the contract between an engine's server and
//! the face that runs it until Ctrl-C.
//!
//! An engine that offers such a server gives it a clap `Args` struct in its
//! folder implementing [`LoneServer`], and its variant of
//! `registry::ServeWhat`. The face binds it, registers its
//! signal handlers, starts it, and prints what the server hands back as
//! text and values: its banner, one line per interval, the totals as a line
//! or as JSON. Nothing here prints, and the face never knows which engine
//! serves.

use std::time::Duration;

/// How the face shows a server's figures, as its command line says
/// (`--interval`, `--json`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServeOptions {
    /// One line of figures per interval (zero: only the totals at the end).
    pub interval: Duration,
    /// The totals as one JSON line instead of a line of text.
    pub json: bool,
}

/// A server as its command line asks for it, not yet bound.
pub trait LoneServer {
    /// The options common to every server.
    fn options(&self) -> ServeOptions;

    /// Take the address to listen on: the first thing that can fail, before
    /// the face registers its signal handlers.
    fn bind(self: Box<Self>) -> Result<Box<dyn BoundServer>, ServeError>;
}

/// A server that holds its address and takes no connection yet.
pub trait BoundServer {
    /// Start serving. Called once the face can be stopped by a signal:
    /// clients may take every descriptor once it serves.
    fn start(self: Box<Self>) -> Result<Box<dyn RunningServer>, ServeError>;
}

/// A server that serves until it is stopped.
pub trait RunningServer {
    /// The lines that say what serves where, with its limits and who may
    /// use it (for stderr, once, as it starts).
    fn banner(&self) -> Vec<String>;

    /// One line of its figures since the previous line (or since it
    /// started).
    fn interval_line(&mut self) -> String;

    /// Stop it (clients get a moment to finish, then it is cut) and give
    /// its totals and how it ended.
    fn stop(self: Box<Self>) -> Served;
}

/// What a server did, handed back when it stops.
#[derive(Debug)]
pub struct Served {
    /// Its totals as one line of text.
    pub line: String,
    /// Its totals as JSON (`--json`).
    pub json: serde_json::Value,
    /// How it ended: an error of its threads, after the totals are shown.
    pub result: Result<(), ServeError>,
}

/// Why a server could not start, or ended in error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The command line asks for what the server cannot do (exit 2).
    #[error(transparent)]
    Usage(Box<dyn std::error::Error + Send + Sync>),
    /// The server failed (exit 1).
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync>),
    /// A local I/O call around the server failed (exit 1).
    #[error("{op} failed: {source}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl ServeError {
    /// True for errors a user fixes by changing the command line (exit 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, ServeError::Usage(_))
    }
}

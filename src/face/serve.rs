//! `wirescope serve <name>`: a server an engine runs alone, for third-party
//! clients, until Ctrl-C (SIGINT or SIGTERM).
//!
//! Owns this command's terminal output and its exit codes; which servers
//! exist, their arguments and the text of their figures are the engines'
//! ([`crate::traffic::serve`], listed in `traffic::registry::ServeWhat`).
//! This face binds the server, registers the signals before it serves,
//! prints its banner on stderr, one line of figures per `--interval` and
//! its totals (a line, or JSON with `--json`) on stdout, and never knows
//! which engine serves.

use super::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::cli::serve::ServeArgs;
use crate::traffic::serve::{LoneServer, RunningServer, ServeError};
use std::time::Duration;

/// Run `wirescope serve ...`; returns the exit code.
pub fn command(args: ServeArgs) -> anyhow::Result<u8> {
    match serve(args.what.server()) {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("error: {e}");
            Ok(if e.is_usage() {
                EXIT_USAGE
            } else {
                EXIT_FAILED
            })
        }
    }
}

fn serve(server: Box<dyn LoneServer>) -> Result<u8, ServeError> {
    let opts = server.options();
    let bound = server.bind()?;
    // The signal runtime and its handlers first: once clients connect they
    // can take every descriptor (the accept loop waits that out), and a
    // runtime or a signal handler made then could not start.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| ServeError::Io {
            op: "starting the signal runtime",
            source,
        })?;
    let signals = rt.block_on(async { Signals::watch() })?;
    let mut running = bound.start()?;
    for line in running.banner() {
        eprintln!("{line}");
    }
    rt.block_on(wait_for_signal(signals, running.as_mut(), opts.interval));
    let served = running.stop();
    if opts.json {
        outln!("{}", served.json);
    } else {
        outln!("{}", served.line);
    }
    served.result?;
    Ok(EXIT_OK)
}

/// SIGINT and SIGTERM, registered before the server takes connections.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    /// Register both (inside the signal runtime).
    fn watch() -> Result<Signals, ServeError> {
        use tokio::signal::unix::{signal, SignalKind};
        let io = |source| ServeError::Io {
            op: "watching SIGINT and SIGTERM",
            source,
        };
        Ok(Signals {
            int: signal(SignalKind::interrupt()).map_err(io)?,
            term: signal(SignalKind::terminate()).map_err(io)?,
        })
    }
}

/// Print the server's line of figures every `every` (never when zero)
/// until a signal comes.
async fn wait_for_signal(mut sig: Signals, server: &mut dyn RunningServer, every: Duration) {
    let mut tick = tokio::time::interval(if every.is_zero() {
        Duration::from_secs(3600)
    } else {
        every
    });
    tick.tick().await;
    loop {
        tokio::select! {
            _ = sig.int.recv() => return,
            _ = sig.term.recv() => return,
            _ = tick.tick() => {
                if every.is_zero() { continue; }
                outln!("{}", server.interval_line());
            }
        }
    }
}

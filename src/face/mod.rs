//! The headless faces — `run`, `watch`, `capture`, `check` — and what they
//! share: exit codes, the typed error `main` maps to them, stdout that treats
//! only a closed pipe as "enough", signals, and the control runtime.
//!
//! A face chooses what to show; everything it shows comes from below: the
//! session drives the protocol ([`crate::session::driver`]), the pipeline
//! builds records, findings and summaries ([`crate::record::pipeline`]).

/// `println!` through [`out`]: a closed pipe ends the output quietly, any
/// other write error is kept for [`stdout_result`] (never a panic).
macro_rules! outln {
    () => {
        $crate::face::out("\n")
    };
    ($($t:tt)*) => {
        $crate::face::out(&format!("{}\n", format_args!($($t)*)))
    };
}

/// `print!` through [`out`] (see [`outln!`]).
macro_rules! outp {
    ($($t:tt)*) => {
        $crate::face::out(&format!($($t)*))
    };
}

pub mod capture;
pub mod check;
pub mod checklist;
pub mod compare;
pub mod fleet;
pub mod metrics;
pub mod profile;
pub mod progress;
pub mod report;
pub mod run;
pub mod serve;
pub mod watch;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: the test failed (peer lost, engine error, agent unreachable).
pub const EXIT_FAILED: u8 = 1;
/// Exit code: bad command line.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: a finding at or above `--fail-on` was raised.
pub const EXIT_FINDINGS: u8 = 3;
/// Exit code: interrupted by the user.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Why a face did not succeed; `main` prints it and maps it to an exit code.
#[derive(Debug, thiserror::Error)]
pub enum FaceError {
    /// The command line asks for something that cannot work (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The test or the command failed (exit 1).
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

impl FaceError {
    /// The exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            FaceError::Usage(_) => EXIT_USAGE,
            FaceError::Failed(_) => EXIT_FAILED,
        }
    }
}

impl From<crate::cli::UsageError> for FaceError {
    fn from(e: crate::cli::UsageError) -> Self {
        FaceError::Usage(e.0)
    }
}

/// A face's result: an exit code, or an error that names what went wrong.
pub type FaceResult = Result<u8, FaceError>;

/// Set once stdout's reader went away (`wirescope run | head`): a closed
/// pipe means "enough", not an error, so printing just stops.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
/// Any other failure to write stdout (a full disk behind `> file`): kept so
/// the face fails at its end instead of exiting 0 with truncated output.
static STDOUT_ERROR: Mutex<Option<String>> = Mutex::new(None);

/// Write to stdout, stopping quietly once the reader is gone.
pub fn out(text: &str) {
    if HUMAN_TO_STDERR.load(Ordering::Relaxed) {
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
        return;
    }
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            let mut slot = STDOUT_ERROR.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert_with(|| e.to_string());
        }
    }
}

/// "2 h 5 min", "3 min 20 s", "42 s".
pub fn span_text(secs: f64) -> String {
    let s = secs.round() as u64;
    match s {
        0..=119 => format!("{secs:.0} s"),
        120..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// Set when stdout carries the log's records (`--log -`): what [`out`]
/// prints for people goes to stderr instead.
static HUMAN_TO_STDERR: AtomicBool = AtomicBool::new(false);

/// From now on, [`out`] writes to stderr (stdout carries JSON lines).
pub fn human_to_stderr() {
    HUMAN_TO_STDERR.store(true, Ordering::Relaxed);
}

/// Err when writing stdout failed for any reason but a closed pipe.
pub fn stdout_result() -> Result<(), FaceError> {
    let slot = STDOUT_ERROR.lock().unwrap_or_else(|p| p.into_inner());
    match slot.as_ref() {
        Some(e) => Err(FaceError::Failed(anyhow::anyhow!(
            "cannot write to stdout: {e}; the output is incomplete"
        ))),
        None => Ok(()),
    }
}

/// The runtime that carries the control protocol: two named threads at
/// raised priority (see [`crate::traffic::sched`]), so engines that keep every
/// core busy cannot starve the session.
pub fn control_runtime(name: &str) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(name)
        .worker_threads(2)
        .on_thread_start(|| {
            crate::traffic::raise_priority();
        })
        .build()
}

/// The signal that stopped the session (2 SIGINT, 15 SIGTERM; 0 none yet).
static STOPPED_BY: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// The exit code of a session a signal stopped: 128 + the signal, as a
/// shell reports it (130 after Ctrl-C, 143 after SIGTERM; 130 when the
/// stop came another way, e.g. the TUI's `q`).
pub fn interrupted_exit() -> u8 {
    match STOPPED_BY.load(std::sync::atomic::Ordering::Relaxed) {
        0 => EXIT_INTERRUPTED,
        s => 128 + s,
    }
}

/// Ctrl-C or SIGTERM cancels the test gracefully (summary still printed).
pub fn spawn_signal_handler(cancel: CancellationToken) {
    tokio::spawn(async move {
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        let signal = match term {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => 2,
                    _ = term.recv() => 15,
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                2
            }
        };
        STOPPED_BY.store(signal, std::sync::atomic::Ordering::Relaxed);
        cancel.cancel();
    });
}

/// This host alone: sample it through the same driver (with `target`, the
/// plan's engine's client calls that foreign server: `run --target`).
pub(crate) async fn local_session(
    plan: crate::session::plan::Plan,
    observe: crate::session::plan::Observe,
    target: Option<String>,
    tx: tokio::sync::mpsc::Sender<crate::session::driver::SessionEvent>,
    cancel: CancellationToken,
) {
    use crate::session::driver::{run_plan, LocalObserver, SessionEvent};
    spawn_signal_handler(cancel.clone());
    let (obs, ebpf) = match LocalObserver::new(observe.ebpf, observe.ifaces.clone()).await {
        Ok(x) => x,
        Err(e) => {
            let _ = tx.send(SessionEvent::Failed(error_text(&e))).await;
            return;
        }
    };
    let mut obs = match target {
        Some(t) => obs.with_target(t),
        None => obs,
    };
    let _ = tx
        .send(SessionEvent::Ready {
            peer: Box::new(LocalObserver::host()),
            ebpf: Box::new(ebpf),
        })
        .await;
    let _ = run_plan(&mut obs, &plan, &observe, &tx, &cancel).await;
}

/// One stderr line per host on what the eBPF probes do.
pub fn report_ebpf(e: &crate::probe::ebpf::EbpfHosts) {
    for (role, s) in [("local", &e.local), ("peer", &e.peer)] {
        if let Some(s) = s {
            eprintln!("wirescope: {role}: {}", s.line());
        }
    }
}

/// An error and its causes on one line, `: `-separated like anyhow's `{:#}`,
/// without a cause whose text the line already holds (many messages embed
/// their source, and printing it again read "...: the peer closed the
/// control connection: the peer closed the control connection").
pub fn error_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::error_text;

    #[derive(Debug, thiserror::Error)]
    #[error("agent 10.0.0.2:5201: {source}")]
    struct Outer {
        source: crate::session::proto::ProtoError,
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let e = Outer {
            source: crate::session::proto::ProtoError::Closed,
        };
        assert_eq!(
            error_text(&e),
            "agent 10.0.0.2:5201: the peer closed the control connection"
        );
        let a =
            anyhow::Error::new(std::io::Error::other("disk full")).context("cannot write the log");
        assert_eq!(error_text(a.as_ref()), "cannot write the log: disk full");
    }
}

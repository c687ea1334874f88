//! Logs with levels: one `tracing` subscriber for the whole process, set up
//! once by `main` before any face runs.
//!
//! Lines go to stderr with a time, a level and the target; stdout stays for
//! what a face prints (tables, `--log -` JSON lines). The level comes from
//! `RUST_LOG` when it is set, else from `-q`/`-v`/`-vv` around a default
//! that depends on the face: `warn` for the interactive faces, `info` for
//! `wirescope agent` (it runs unattended; its log is its only voice). The
//! `log` crate's records (aya, neli) are bridged into the same subscriber.
//!
//! The TUI owns the terminal: while it runs, lines go to `tui.log` in the
//! state directory instead (opened on the first line, so a quiet run creates
//! nothing); when that file cannot be written, they are dropped.
//!
//! This module only routes and filters; it decides nothing about what is
//! logged. Engines and probes never log (they publish data).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

/// The variable whose filter (e.g. `debug`, `agent=debug,aya=warn`) wins over the flags.
pub const ENV: &str = "RUST_LOG";

/// Which face runs: it sets the default level and where lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Face {
    /// `wirescope agent`: default `info`, to stderr.
    Agent,
    /// The TUI: default `warn`, to `tui.log` in the state directory.
    Tui,
    /// Every other face: default `warn`, to stderr.
    Cli,
}

/// The filter directive for `-v` given `verbose` times, `-q`, the face and
/// `RUST_LOG` (a set, non-empty value wins). `-q` shows errors only; each
/// `-v` is one level more than the face's default (`info`, `debug`, `trace`).
pub fn directive(verbose: u8, quiet: bool, face: Face, rust_log: Option<&str>) -> String {
    if let Some(env) = rust_log.map(str::trim).filter(|v| !v.is_empty()) {
        return env.to_string();
    }
    if quiet {
        return "error".into();
    }
    const LEVELS: [&str; 5] = ["error", "warn", "info", "debug", "trace"];
    let base = match face {
        Face::Agent => 2,
        Face::Tui | Face::Cli => 1,
    };
    LEVELS[(base + usize::from(verbose)).min(LEVELS.len() - 1)].into()
}

/// Install the process's subscriber. `state_dir` is where the TUI's
/// `tui.log` goes. A `RUST_LOG` that does not parse is reported on stderr
/// and the flags' level is used instead.
pub fn init(verbose: u8, quiet: bool, face: Face, state_dir: PathBuf) {
    let env = std::env::var(ENV).ok();
    let wanted = directive(verbose, quiet, face, env.as_deref());
    let filter = EnvFilter::try_new(&wanted).unwrap_or_else(|e| {
        let fallback = directive(verbose, quiet, face, None);
        eprintln!("wirescope: {ENV}={wanted:?} is not a log filter ({e}); using {fallback:?}");
        EnvFilter::new(fallback)
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true);
    // `try_init` also installs the `log` bridge (aya, neli); a second call
    // (tests calling main's setup twice) keeps the first subscriber.
    let _ = match face {
        Face::Tui => builder
            .with_ansi(false)
            .with_writer(LazyFile::new(state_dir.join("tui.log")))
            .try_init(),
        Face::Agent | Face::Cli => builder
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .try_init(),
    };
}

/// A log file opened (appended to, its directory created) on the first
/// line written; lines are dropped when it cannot be opened or written.
struct LazyFile {
    path: PathBuf,
    file: Mutex<Option<std::fs::File>>,
}

impl LazyFile {
    fn new(path: PathBuf) -> LazyFile {
        LazyFile {
            path,
            file: Mutex::new(None),
        }
    }
}

/// One line's writer: holds the file while the line is written.
struct LazyLine<'a>(
    std::sync::MutexGuard<'a, Option<std::fs::File>>,
    &'a LazyFile,
);

impl<'a> MakeWriter<'a> for LazyFile {
    type Writer = LazyLine<'a>;

    fn make_writer(&'a self) -> LazyLine<'a> {
        let guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        LazyLine(guard, self)
    }
}

impl Write for LazyLine<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.is_none() {
            let path = &self.1.path;
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            *self.0 = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .ok();
        }
        if let Some(f) = self.0.as_mut() {
            // A full disk must not end the TUI: the line is lost, not the run.
            let _ = f.write_all(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if let Some(f) = self.0.as_mut() {
            let _ = f.flush();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_set_the_level_around_the_faces_default() {
        assert_eq!(directive(0, false, Face::Cli, None), "warn");
        assert_eq!(directive(0, false, Face::Tui, None), "warn");
        assert_eq!(directive(0, false, Face::Agent, None), "info");
        assert_eq!(directive(1, false, Face::Cli, None), "info");
        assert_eq!(directive(2, false, Face::Cli, None), "debug");
        assert_eq!(directive(1, false, Face::Agent, None), "debug");
        assert_eq!(directive(2, false, Face::Agent, None), "trace");
        assert_eq!(directive(9, false, Face::Agent, None), "trace");
        assert_eq!(directive(0, true, Face::Cli, None), "error");
        assert_eq!(directive(0, true, Face::Agent, None), "error");
    }

    #[test]
    fn rust_log_wins_over_the_flags_unless_empty() {
        for (v, q) in [(0, false), (2, false), (0, true)] {
            assert_eq!(
                directive(v, q, Face::Agent, Some("agent=debug,aya=warn")),
                "agent=debug,aya=warn"
            );
        }
        assert_eq!(directive(0, true, Face::Cli, Some("  ")), "error");
        assert_eq!(directive(1, false, Face::Cli, Some("")), "info");
    }

    #[test]
    fn every_directive_is_a_filter_tracing_accepts() {
        for face in [Face::Agent, Face::Tui, Face::Cli] {
            for v in 0..4 {
                for q in [false, true] {
                    let d = directive(v, q, face, None);
                    assert!(EnvFilter::try_new(&d).is_ok(), "{d}");
                }
            }
        }
    }

    #[test]
    fn the_tui_file_is_created_on_the_first_line_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/tui.log");
        let lazy = LazyFile::new(path.clone());
        drop(lazy.make_writer());
        assert!(!path.exists(), "nothing written, nothing created");
        lazy.make_writer().write_all(b"one\n").unwrap();
        lazy.make_writer().write_all(b"two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\n");
    }
}

//! Running external programs: capture their output with an error that names
//! the command and shows what it printed, and keep background servers under a
//! guard that kills them when dropped.
//!
//! Nothing here knows about namespaces or benchmarks.

use anyhow::{bail, Context, Result};
use std::ffi::OsStr;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// How much of a failed command's output to quote in an error.
const QUOTE_CHARS: usize = 2000;

/// The command line, for messages.
pub fn describe(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}

/// Run to completion and return stdout; fail if it cannot start, exits
/// non-zero, or prints something that is not UTF-8.
pub fn output(cmd: &mut Command) -> Result<String> {
    capture(cmd).map(|(stdout, _)| stdout)
}

/// Run to completion and return (stdout, stderr); fail like [`output`].
pub fn capture(cmd: &mut Command) -> Result<(String, String)> {
    let what = describe(cmd);
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("could not start `{what}`"))?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let said = if stderr.trim().is_empty() {
            &*stdout
        } else {
            &*stderr
        };
        bail!(
            "`{what}` failed ({}):\n{}",
            out.status,
            tail(said.trim(), QUOTE_CHARS)
        );
    }
    let stdout = String::from_utf8(out.stdout)
        .with_context(|| format!("`{what}` printed output that is not UTF-8"))?;
    Ok((stdout, stderr))
}

/// Run to completion, discarding stdout; fail like [`output`].
pub fn run(cmd: &mut Command) -> Result<()> {
    output(cmd).map(drop)
}

/// Run with the terminal attached (for long builds whose progress the user
/// should see); fail if it exits non-zero.
pub fn run_inherit(cmd: &mut Command) -> Result<()> {
    let what = describe(cmd);
    let status = cmd
        .status()
        .with_context(|| format!("could not start `{what}`"))?;
    if !status.success() {
        bail!("`{what}` failed ({status})");
    }
    Ok(())
}

/// Whether `program` is an executable file somewhere on `$PATH`.
pub fn is_installed(program: &str) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| is_executable(&dir.join(program)))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The last `max` characters of `s` (on a char boundary).
fn tail(s: &str, max: usize) -> &str {
    let start = s
        .char_indices()
        .rev()
        .take(max)
        .last()
        .map_or(s.len(), |(i, _)| i);
    &s[start..]
}

/// A long-running child (a server) whose stdout and stderr go to a log file.
/// Dropping it kills and reaps the child.
pub struct Server {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Server {
    /// Start `cmd` with its output in `<log_dir>/<name>.log`.
    pub fn spawn(name: &str, mut cmd: Command, log_dir: &Path) -> Result<Self> {
        let log = log_dir.join(format!("{name}.log"));
        let file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let file2 = file
            .try_clone()
            .with_context(|| format!("duplicating {}", log.display()))?;
        let what = describe(&cmd);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(file2)
            .spawn()
            .with_context(|| format!("could not start {name}: `{what}`"))?;
        Ok(Server {
            name: name.to_string(),
            child,
            log,
        })
    }

    /// Fail, quoting its log, if the server has exited.
    pub fn ensure_running(&mut self) -> Result<()> {
        let status = self
            .child
            .try_wait()
            .with_context(|| format!("checking on {}", self.name))?;
        match status {
            None => Ok(()),
            Some(status) => {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                bail!(
                    "{} exited ({status}); its log {}:\n{}",
                    self.name,
                    self.log.display(),
                    tail(log.trim(), QUOTE_CHARS)
                )
            }
        }
    }

    /// The server's process id (`ip netns exec` execs in place: the server itself).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's name, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // `ip netns exec` execs the program in place, so this pid is the server itself.
        if let Ok(None) = self.child.try_wait() {
            if let Err(e) = self.child.kill() {
                eprintln!(
                    "xtask: could not kill {} (pid {}): {e}",
                    self.name,
                    self.child.id()
                );
            }
        }
        let _ = self.child.wait();
    }
}

/// `Command::new(program)` with `args`.
pub fn command<I, S>(program: &str, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(program);
    cmd.args(args);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_end_on_char_boundaries() {
        assert_eq!(tail("abcdef", 3), "def");
        assert_eq!(tail("ab", 3), "ab");
        assert_eq!(tail("aµµ", 2), "µµ");
    }

    #[test]
    fn failure_names_the_command_and_quotes_stderr() {
        let err = output(&mut command("sh", ["-c", "echo boom >&2; exit 3"])).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("sh -c"), "{msg}");
        assert!(msg.contains("boom"), "{msg}");
    }
}

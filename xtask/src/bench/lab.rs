//! The benchmark lab: a namespace pair, servers running in side B, the
//! freshly built release binary and a random agent token.
//!
//! Field order matters: servers are dropped (killed) before the namespaces
//! they run in are removed.

use super::parse::{self, WsRun};
use crate::cmd::{self, command, Server};
use crate::netns::{NetnsPair, Side, ADDR_B};
use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// Port of `wirescope agent` (control and data).
pub const AGENT_PORT: u16 = 5310;
const READY_TIMEOUT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(100);

/// Namespace pair plus the servers in it.
pub struct Lab {
    servers: Vec<Server>,
    pair: NetnsPair,
    wirescope: PathBuf,
    token: String,
    log_dir: PathBuf,
}

/// `cargo build --release -p wirescope`; returns the binary's path.
pub fn build_release() -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .args(["build", "--release", "-p", "wirescope"])
        .current_dir(crate::workspace_root());
    cmd::run_inherit(&mut build).context("building the release binary")?;
    let bin = crate::target_dir().join("release").join("wirescope");
    if !bin.is_file() {
        bail!(
            "the release build succeeded but {} does not exist",
            bin.display()
        );
    }
    Ok(bin)
}

impl Lab {
    /// Create the pair and start the agent in side B; wait until it listens.
    pub fn start(wirescope: PathBuf) -> Result<Self> {
        let log_dir = crate::target_dir().join("xtask-bench");
        std::fs::create_dir_all(&log_dir)
            .with_context(|| format!("creating {}", log_dir.display()))?;
        let pair = NetnsPair::create()?;
        eprintln!("xtask: namespaces {}", pair.describe());
        let mut lab = Lab {
            servers: Vec::new(),
            pair,
            wirescope,
            token: random_hex(16)?,
            log_dir,
        };
        let listen = format!("{ADDR_B}:{AGENT_PORT}");
        let mut agent = lab.pair.command(Side::B, &lab.wirescope);
        agent
            .args(["agent", "--listen", &listen])
            .env(wirescope::session::auth::TOKEN_ENV, &lab.token);
        lab.start_server("wirescope-agent", agent, AGENT_PORT)?;
        Ok(lab)
    }

    /// Start a server in side B and wait until it listens on TCP `port`.
    pub fn start_server(&mut self, name: &str, cmd: Command, port: u16) -> Result<()> {
        self.servers.push(Server::spawn(name, cmd, &self.log_dir)?);
        let last = self.servers.len() - 1;
        self.wait_listening(last, port)
    }

    fn wait_listening(&mut self, index: usize, port: u16) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            self.servers[index].ensure_running()?;
            if self.listening(port)? {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} is not listening on port {port} after {READY_TIMEOUT:?}",
                    self.servers[index].name()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// Whether something in side B listens on TCP `port` (`ss -Hltn`).
    fn listening(&self, port: u16) -> Result<bool> {
        let mut ss = self.pair.command(Side::B, "ss");
        ss.arg("-Hltn");
        let table = cmd::output(&mut ss).context("listing listening sockets in side B")?;
        let suffix = format!(":{port}");
        Ok(table.lines().any(|l| {
            l.split_whitespace()
                .nth(3)
                .is_some_and(|local| local.ends_with(&suffix))
        }))
    }

    /// A command that runs in side A (the client side).
    pub fn client(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        self.pair.command(Side::A, program)
    }

    /// A command that runs in side B (the server side).
    pub fn server(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        self.pair.command(Side::B, program)
    }

    /// `wirescope run --peer ADDR_B <args> --json` in side A; parsed summary.
    pub fn wirescope_run(&self, args: &[&str]) -> Result<WsRun> {
        let (json, what) = self.wirescope_json(args)?;
        parse::wirescope_summary(&json).with_context(|| format!("reading the summary of `{what}`"))
    }

    /// `wirescope run --peer ADDR_B <args> --json` in side A: its output
    /// (one JSON summary per point) and the command line, for messages.
    pub fn wirescope_json(&self, args: &[&str]) -> Result<(String, String)> {
        let mut run = self.client(&self.wirescope);
        run.args(["run", "--peer", ADDR_B]).args(args).arg("--json");
        run.env(wirescope::session::auth::TOKEN_ENV, &self.token);
        let what = cmd::describe(&run);
        let agent_log = self.log_dir.join("wirescope-agent.log");
        let json = cmd::output(&mut run).with_context(|| {
            format!(
                "wirescope run failed; the agent's log is {}",
                agent_log.display()
            )
        })?;
        Ok((json, what))
    }

    /// One-line description of the pair.
    pub fn describe(&self) -> String {
        self.pair.describe()
    }
}

/// `n` random bytes from /dev/urandom, hex.
fn random_hex(n: usize) -> Result<String> {
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("reading /dev/urandom for the agent token")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// First line of `<program> --version` (some tools print it on stderr).
pub fn tool_version(program: &str) -> Result<String> {
    let (stdout, stderr) = cmd::capture(&mut command(program, ["--version"]))?;
    let text = if stdout.trim().is_empty() {
        stderr
    } else {
        stdout
    };
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
        .with_context(|| format!("`{program} --version` printed nothing"))
}

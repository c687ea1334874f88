//! Command line: clap parses raw arguments, then `resolve` methods validate
//! them into the plain configuration the rest of the program uses.
//!
//! Two stages (like ripgrep's low/high args): clap checks each value's form
//! (a duration, a size, a CPU list) and names the flag in its error; the
//! second stage checks combinations (`--reverse` only for stream, `--omit`
//! shorter than `--time`, ...) and returns a [`UsageError`] that says what to
//! do instead. The TUI's control view edits the same [`TestArgs`] and asks
//! the same [`TestArgs::resolve`], so both faces share one source of truth.
//!
//! This module sits above the session and record layers and below the faces
//! (`face`, `tui`): it only describes and validates; `main` dispatches.

pub mod checklist;
pub mod fleet;
pub mod habits;
pub mod profile;
pub mod serve;
mod target;
mod test;
mod values;

pub use target::{resolve_peer, ObserveArgs, TargetArgs};
pub use test::TestArgs;
pub use values::CpuList;

use crate::probe::ebpf::EbpfMode;
use crate::units::parse_duration;
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use values::{parse_listen, parse_metrics_addr};

/// The variable `--state-dir` falls back to (its help shows it and its value).
pub const STATE_DIR_ENV: &str = crate::tune::state::ENV_DIR;

/// `--state-dir`'s parser: a path, and unlike clap's own path parser it lets
/// an empty value through, so an exported but empty `$WIRESCOPE_STATE_DIR`
/// stays "not set" ([`state_dir_given`] drops it), as it did before clap
/// read the variable.
fn dir_or_empty() -> impl clap::builder::TypedValueParser<Value = PathBuf> {
    use clap::builder::TypedValueParser;
    clap::builder::OsStringValueParser::new().map(PathBuf::from)
}

/// `--state-dir` (or its variable) as given, an empty value being no value.
pub fn state_dir_given(v: Option<&std::path::Path>) -> Option<&std::path::Path> {
    v.filter(|p| !p.as_os_str().is_empty())
}

/// Live network-throughput diagnosis on a pair of Linux nodes.
#[derive(Debug, Parser)]
#[command(name = "wirescope", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to do (default: the interactive TUI).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// More log lines on stderr: -v info, -vv debug (the agent: -v debug, -vv trace). RUST_LOG, when set, wins.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Errors only in the log (stderr). RUST_LOG, when set, wins.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Interactive dashboard on the local pair (default), a real pair (--peer) or a log (--replay).
    Tui(Box<TuiArgs>),
    /// Serve the far end of tests on this node and stream its telemetry.
    Agent(AgentArgs),
    /// Run a test without a terminal UI; print a table or JSON, write a JSON-lines log.
    Run(Box<RunArgs>),
    /// Observe this host (and the peer's) without generating traffic, or read a captured directory.
    Watch(WatchArgs),
    /// Write a snapshot of this host in the sosreport layout, for `watch --from` later.
    Capture(CaptureArgs),
    /// Audit the configuration (driver, firmware, offloads, IRQs, sysctls...) of this host, the peer, or a capture; no traffic.
    Check(CheckArgs),
    /// Tuning profiles: list, show, save, diff, apply (all-or-nothing, backed up), rollback.
    Profile(profile::ProfileArgs),
    /// Guided tuning: a baseline test, then each proposed change measured before and after.
    Checklist(checklist::ChecklistArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(CompletionsArgs),
    /// Draw one or several logs as a self-contained HTML page (charts of throughput, CPU heat maps, queues, findings).
    Report(ReportArgs),
    /// Compare two logs point by point: throughput, CPU cost, findings and facts that changed.
    Compare(CompareArgs),
    /// Test many agents pair by pair (ring, all-pairs, star): the matrix, the slow links and nodes, the odd settings.
    Fleet(Box<fleet::FleetArgs>),
    /// Run a server alone for third-party clients, e.g. `serve grpc` (grpc.testing.BenchmarkService), no token.
    Serve(serve::ServeArgs),
}

/// `wirescope completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell, e.g. `wirescope completions bash > /etc/bash_completion.d/wirescope`.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// `wirescope report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Logs written by `run --log` or `watch --log` (several: side by side).
    #[arg(value_name = "LOG", required = true)]
    pub logs: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(long, short = 'o', value_name = "PATH", default_value = "report.html")]
    pub output: PathBuf,
}

/// `wirescope compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The log before (the baseline).
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The log after.
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `wirescope check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Interfaces to audit (repeatable). Default: the interface of the default route (live), every interface (--from).
    #[arg(long = "iface", value_name = "IF")]
    pub ifaces: Vec<String>,
    /// Also audit this agent's host (and compare the two, e.g. MTU).
    #[arg(long, value_name = "HOST[:PORT]", conflicts_with = "from")]
    pub peer: Option<String>,
    /// Token file shared with the agent (with --peer).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Audit a captured directory or an unpacked sosreport instead of this host.
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// With --from: an earlier capture of the same host; the RDMA counters
    /// that grew between the two (out_of_buffer, retransmissions, CNPs, ...)
    /// are checked too.
    #[arg(long, value_name = "DIR", requires = "from")]
    pub since: Option<PathBuf>,
    /// Print `{"findings": [...]}` as JSON.
    #[arg(long)]
    pub json: bool,
    /// Exit with code 3 when a finding of this level or worse is present.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub fail_on: Option<FailOn>,
}

/// `wirescope watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Also stream the Samples of this agent's host.
    #[arg(long, value_name = "HOST[:PORT]", conflicts_with = "from")]
    pub peer: Option<String>,
    /// Token file shared with the agent (with --peer).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Watch both ends of the embedded local pair (as root: two network
    /// namespaces joined by veth; else loopback) instead of this host: its
    /// telemetry without traffic, or while you send your own into it
    /// (4 queues per veth).
    #[arg(long, conflicts_with_all = ["peer", "from", "token_file"])]
    pub local_pair: bool,
    /// Interfaces to watch (repeatable). Default: the interface of the default route.
    #[arg(long = "iface", value_name = "IF")]
    pub ifaces: Vec<String>,
    /// Interfaces to watch on the peer (repeatable). Default: the route back to this host.
    #[arg(long = "peer-iface", value_name = "IF")]
    pub peer_ifaces: Vec<String>,
    /// eBPF probes on the watched hosts: default, deep or off (see `wirescope run --help`).
    #[arg(
        long,
        value_enum,
        value_name = "SET",
        default_value = "default",
        conflicts_with = "from"
    )]
    pub ebpf: EbpfMode,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, short = 't', value_name = "DURATION", value_parser = parse_duration, conflicts_with = "from")]
    pub time: Option<Duration>,
    /// Sampling period.
    #[arg(long, short = 'i', value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Write the JSON-lines log (same records as `run`); `-` streams them to
    /// stdout (the table goes to stderr).
    #[arg(long, value_name = "PATH", conflicts_with = "from")]
    pub log: Option<PathBuf>,
    /// Print JSON instead of the table: with --from one object, otherwise one record per line.
    #[arg(long)]
    pub json: bool,
    /// Read a captured directory (`wirescope capture`, or a real sosreport) instead of this host.
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// Serve Prometheus metrics (OpenMetrics text) at http://ADDR:PORT/metrics
    /// for as long as this runs: CPU, softirq and softnet counters under
    /// node_exporter's names, per-queue counters, the running test's
    /// throughput, active findings (docs/telemetry.md).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_metrics_addr, conflicts_with = "from")]
    pub metrics: Option<SocketAddr>,
}

/// `wirescope capture`.
#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// New (or empty) directory to write.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Interfaces to capture (repeatable). Default: every interface but lo.
    #[arg(long = "iface", value_name = "IF")]
    pub ifaces: Vec<String>,
}

/// `wirescope tui` (also what `wirescope` without a subcommand runs).
#[derive(Debug, Args)]
pub struct TuiArgs {
    /// Where the agent is.
    #[command(flatten)]
    pub target: TargetArgs,
    /// The test started at launch and by `s`; the control view edits the same options.
    #[command(flatten)]
    pub test: TestArgs,
    /// What to observe besides the test's own interface.
    #[command(flatten)]
    pub observe: ObserveArgs,
    /// Show a JSON-lines log written by `wirescope run --log` instead of live data (left/right move the time cursor).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["peer", "local_pair", "log"])]
    pub replay: Option<PathBuf>,
    /// How much history the charts and the time cursor keep.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    pub history: Duration,
    /// Record the JSON-lines log (same records as `run --log`) from the start; `l` toggles recording.
    #[arg(long, value_name = "PATH")]
    pub log: Option<PathBuf>,
}

impl TuiArgs {
    /// The arguments of a bare `wirescope` (every option at its default).
    pub fn defaults() -> Self {
        use clap::FromArgMatches;
        let cmd = <TuiArgs as Args>::augment_args(clap::Command::new("tui"));
        let m = cmd.get_matches_from(["tui"]);
        // The defaults always parse: every field has a default or is optional.
        <TuiArgs as FromArgMatches>::from_arg_matches(&m)
            .unwrap_or_else(|e| unreachable!("default TUI arguments do not parse: {e}"))
    }
}

/// `wirescope agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Address and port for control and data connections.
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:5310", value_parser = parse_listen)]
    pub listen: SocketAddr,
    /// Port to listen on, all addresses (shorthand for --listen 0.0.0.0:PORT, as iperf3's -p).
    #[arg(long, short = 'p', value_name = "PORT", conflicts_with = "listen")]
    pub port: Option<u16>,
    /// Token file (created 0600 with a random token if missing). Default: $WIRESCOPE_TOKEN, else ~/.config/wirescope/token.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Also accept control connections on this unix socket (used by the local pair).
    #[arg(long, value_name = "PATH", hide = true)]
    pub control_unix: Option<PathBuf>,
    /// Exit after the first controller's session (used by the local pair).
    #[arg(long, hide = true)]
    pub once: bool,
    /// Let the controller change this host's settings (`profile apply --peer`,
    /// `checklist run --peer`); every change is backed up and can be rolled back.
    #[arg(long)]
    pub allow_tuning: bool,
    /// Where tuning backups and journals go (default /var/lib/wirescope as root, else $XDG_STATE_HOME/wirescope or ~/.local/state/wirescope; an empty value is unset).
    #[arg(long, value_name = "DIR", env = STATE_DIR_ENV, value_parser = dir_or_empty())]
    pub state_dir: Option<PathBuf>,
    /// Serve Prometheus metrics (OpenMetrics text) at http://ADDR:PORT/metrics
    /// for as long as this runs: CPU, softirq and softnet counters under
    /// node_exporter's names, per-queue counters, the running test's
    /// throughput, active findings (docs/telemetry.md).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_metrics_addr)]
    pub metrics: Option<SocketAddr>,
}

/// `wirescope run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Where the agent is.
    #[command(flatten)]
    pub target: TargetArgs,
    /// The test.
    #[command(flatten)]
    pub test: TestArgs,
    /// What to observe besides the test's own interface.
    #[command(flatten)]
    pub observe: ObserveArgs,
    /// Write a JSON-lines log (header, one sample per host per interval,
    /// summary); `-` streams the records to stdout as they happen (the
    /// table goes to stderr), like iperf3's --json-stream; a path ending in
    /// `.zst` is written zstd-compressed.
    #[arg(long, value_name = "PATH")]
    pub log: Option<PathBuf>,
    /// --engine grpc: run the client against any grpc.testing.BenchmarkService
    /// server at HOST:PORT (grpc-go's, grpc-java's, `wirescope serve grpc`)
    /// instead of an agent; only this host is observed.
    #[arg(long = "target", value_name = "HOST:PORT", conflicts_with_all = ["peer", "local_pair"])]
    pub foreign_target: Option<String>,
    /// Print the summary as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Exit with code 3 when a finding of this level or worse was raised (for CI pipelines).
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub fail_on: Option<FailOn>,
}

/// `--fail-on` levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// Warnings and errors.
    Warn,
    /// Errors only.
    Error,
}

impl FailOn {
    /// The lowest severity that fails the run.
    pub fn severity(self) -> crate::diagnose::Severity {
        match self {
            FailOn::Warn => crate::diagnose::Severity::Warn,
            FailOn::Error => crate::diagnose::Severity::Error,
        }
    }
}

/// A combination of options that cannot work, with what to do instead.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// `wirescope watch`, validated.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchPlan {
    /// Read a captured directory once.
    Capture {
        /// The directory.
        dir: PathBuf,
        /// Interfaces (empty: every one it holds).
        ifaces: Vec<String>,
    },
    /// Sample this host (and the agent's, with a peer) live.
    Live {
        /// The agent, if any.
        peer: Option<SocketAddr>,
        /// Sampling period and duration.
        plan: Box<crate::session::plan::Plan>,
        /// Interfaces and eBPF set.
        observe: crate::session::plan::Observe,
    },
}

/// Shortest sampling period any face accepts.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

impl WatchArgs {
    /// Check the options and say what to watch.
    pub fn resolve(&self) -> Result<WatchPlan, UsageError> {
        if let Some(dir) = &self.from {
            if !dir.is_dir() {
                return Err(UsageError(format!("--from {}: not a directory; give a `wirescope capture` directory or an unpacked sosreport", dir.display())));
            }
            return Ok(WatchPlan::Capture {
                dir: dir.clone(),
                ifaces: self.ifaces.clone(),
            });
        }
        if self.interval < MIN_INTERVAL {
            return Err(UsageError(format!(
                "--interval {} is too short; use at least 10ms",
                humantime::format_duration(self.interval)
            )));
        }
        if self.time.is_some_and(|t| t.is_zero()) {
            return Err(UsageError(
                "--time must be longer than 0s, e.g. --time 10s".into(),
            ));
        }
        let peer = self.peer.as_deref().map(resolve_peer).transpose()?;
        Ok(WatchPlan::Live {
            peer,
            plan: Box::new(crate::session::plan::Plan::Observe {
                interval: self.interval,
                time: self.time,
            }),
            observe: crate::session::plan::Observe {
                ifaces: self.ifaces.clone(),
                peer_ifaces: self.peer_ifaces.clone(),
                ebpf: self.ebpf,
            },
        })
    }
}

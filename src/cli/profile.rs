//! `wirescope profile ...`: the argument types (the commands are in
//! `face::profile`).

use clap::{Args, Subcommand};
use std::net::IpAddr;
use std::path::PathBuf;

/// `wirescope profile`.
#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ProfileCommand,
    /// State directory: backups, journals, saved profiles (default /var/lib/wirescope as root, else $XDG_STATE_HOME/wirescope or ~/.local/state/wirescope; an empty value is unset).
    #[arg(long, global = true, value_name = "DIR", env = super::STATE_DIR_ENV, value_parser = super::dir_or_empty())]
    pub state_dir: Option<PathBuf>,
}

/// `wirescope profile` subcommands.
#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// List saved and shipped profiles.
    List(ListArgs),
    /// Print a profile (a name, or a file).
    Show(ShowArgs),
    /// Save the current value of every tunable of this host as a profile.
    Save(SaveArgs),
    /// Compare two profiles, or a profile and this host (`live`).
    Diff(DiffArgs),
    /// Apply a profile all-or-nothing: validate everything, back up, apply in order.
    Apply(ApplyArgs),
    /// Restore the values the last apply changed (run again to go further back).
    Rollback(RollbackArgs),
    /// Complete an apply that was interrupted (`rollback` undoes it instead).
    Finish(FinishArgs),
}

/// `profile list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `profile show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Profile name or file.
    #[arg(value_name = "NAME|FILE")]
    pub profile: String,
}

/// `profile save`.
#[derive(Debug, Args)]
pub struct SaveArgs {
    /// Name of the new profile (written to STATE/profiles/NAME.toml unless --output).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Interfaces to record (repeatable). Default: every interface but lo.
    #[arg(long = "iface", value_name = "IF")]
    pub ifaces: Vec<String>,
    /// Write the profile here instead ("-" for stdout).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Overwrite an existing file.
    #[arg(long)]
    pub force: bool,
    /// Record a captured directory (`wirescope capture`, a sosreport) instead of this host.
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// On the agent's host instead (changing it needs `agent --allow-tuning` there).
    #[arg(long, value_name = "HOST[:PORT]", conflicts_with = "from")]
    pub peer: Option<String>,
    /// Token file shared with the agent (with --peer).
    #[arg(long, value_name = "PATH", requires = "peer")]
    pub token_file: Option<PathBuf>,
}

/// Where `@route` points.
#[derive(Debug, Args, Clone, Default)]
pub struct RouteArgs {
    /// The peer's address: `match = "@route"` means the interface that routes to it.
    #[arg(long, value_name = "ADDR")]
    pub route_to: Option<IpAddr>,
}

/// `profile diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// First side: a profile name, a file, `live`, or `peer` (with --peer).
    #[arg(value_name = "A")]
    pub a: String,
    /// Second side: a profile name, a file, `live`, or `peer` (with --peer).
    #[arg(value_name = "B")]
    pub b: String,
    /// The agent whose host `peer` means (its current values, as `save --peer` reads them).
    #[arg(long, value_name = "HOST[:PORT]")]
    pub peer: Option<String>,
    /// Token file shared with the agent (with --peer).
    #[arg(long, value_name = "PATH", requires = "peer")]
    pub token_file: Option<PathBuf>,
    /// Where @route points.
    #[command(flatten)]
    pub route: RouteArgs,
    /// Read `live` from a captured directory instead of this host.
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Exit with 1 when there are differences.
    #[arg(long)]
    pub exit_code: bool,
}

/// `profile apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// Profile name or file.
    #[arg(value_name = "NAME|FILE")]
    pub profile: String,
    /// Print the equivalent commands (sysctl, ethtool, ip, echo > FILE) and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Skip settings this host does not have (no such sysctl, driver without rings, no cpufreq) instead of refusing.
    #[arg(long)]
    pub skip_unsupported: bool,
    /// Where @route points.
    #[command(flatten)]
    pub route: RouteArgs,
    /// Plan against a captured directory (with --dry-run only).
    #[arg(long, value_name = "DIR", requires = "dry_run")]
    pub from: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// On the agent's host instead (changing it needs `agent --allow-tuning` there).
    #[arg(long, value_name = "HOST[:PORT]", conflicts_with = "from")]
    pub peer: Option<String>,
    /// Token file shared with the agent (with --peer).
    #[arg(long, value_name = "PATH", requires = "peer")]
    pub token_file: Option<PathBuf>,
}

/// `profile rollback`.
#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// List the backups (where, when and by which command each was made) and change nothing.
    #[arg(long, conflicts_with_all = ["discard", "peer"])]
    pub list: bool,
    /// Remove a backup without restoring it (one whose namespace is gone): the newest one in effect, or ID.
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "", conflicts_with = "peer")]
    pub discard: Option<String>,
    /// Roll back on the agent's host instead (it must run with `--allow-tuning`).
    #[arg(long, value_name = "HOST[:PORT]")]
    pub peer: Option<String>,
    /// Token file shared with the agent (with --peer).
    #[arg(long, value_name = "PATH", requires = "peer")]
    pub token_file: Option<PathBuf>,
}

/// `profile finish`.
#[derive(Debug, Args)]
pub struct FinishArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Finish on the agent's host instead (it must run with `--allow-tuning`).
    #[arg(long, value_name = "HOST[:PORT]")]
    pub peer: Option<String>,
    /// Token file shared with the agent (with --peer).
    #[arg(long, value_name = "PATH", requires = "peer")]
    pub token_file: Option<PathBuf>,
}

//! `wirescope fleet`: its arguments and their validation into a plan.

use super::TestArgs;
use crate::probe::ebpf::EbpfMode;
use clap::Args;
use std::path::PathBuf;

/// `wirescope fleet`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["hosts", "hosts_file", "slurm", "dns"])))]
pub struct FleetArgs {
    /// The agents: a Slurm-style host list, e.g. `node[01-16],gpu1:5400`.
    #[arg(long, value_name = "LIST")]
    pub hosts: Option<String>,
    /// The agents, one host list per line (`#` comments).
    #[arg(long, value_name = "PATH")]
    pub hosts_file: Option<PathBuf>,
    /// The nodes of the Slurm job this runs in (SLURM_JOB_NODELIST).
    #[arg(long)]
    pub slurm: bool,
    /// Every address this name resolves to (a Kubernetes headless Service).
    #[arg(long, value_name = "NAME")]
    pub dns: Option<String>,
    /// The agents' port where a host names none.
    #[arg(long, short = 'p', value_name = "PORT", default_value_t = crate::session::DEFAULT_PORT)]
    pub port: u16,
    /// The token file every agent of the fleet shares.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Which pairs test: ring (neighbours, 2 rounds), all-pairs (N-1 rounds), star (--hub), pairs (--pairs).
    #[arg(long, value_enum, default_value = "all-pairs")]
    pub pattern: PatternArg,
    /// star: the hub (a host of the list).
    #[arg(long, value_name = "HOST")]
    pub hub: Option<String>,
    /// pairs: a file of pairs, `HOST HOST` per line (`#` comments).
    #[arg(long, value_name = "PATH")]
    pub pairs: Option<PathBuf>,
    /// At most K tests of a round at once (default: the whole round). Not
    /// `--concurrency`: that is the gRPC engine's RPCs in flight.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_tests: Option<u32>,
    /// Test only from the first host of each pair to the second (default: both directions in turn).
    #[arg(long, conflicts_with = "bidir")]
    pub one_way: bool,
    /// The test of every pair (default: TCP stream for 2 s).
    #[command(flatten)]
    pub test: TestArgs,
    /// eBPF probes on both agents of each test (off, default, deep).
    #[arg(long, value_enum, value_name = "SET", default_value = "default")]
    pub ebpf: EbpfMode,
    /// Write the fleet log (JSON lines: header, hosts, one record per pair, the summary).
    #[arg(long, value_name = "PATH")]
    pub log: Option<PathBuf>,
    /// Print the summary as JSON instead of the matrix.
    #[arg(long)]
    pub json: bool,
    /// Print the hosts and the rounds, and exit without testing.
    #[arg(long)]
    pub plan: bool,
    /// Serve the fleet's matrix and outliers as Prometheus gauges at
    /// http://ADDR:PORT/metrics while it runs, and after it until Ctrl-C.
    #[arg(long, value_name = "ADDR:PORT", value_parser = super::values::parse_metrics_addr, conflicts_with = "plan")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Show the run in the TUI's fleet view: the matrix as a heat map filling in, the outliers, each pair's test.
    #[arg(long, conflicts_with_all = ["json", "plan"])]
    pub tui: bool,
}

/// `--pattern`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PatternArg {
    /// Each node with its neighbour.
    Ring,
    /// Every pair once.
    AllPairs,
    /// The hub with every other node.
    Star,
    /// The pairs of --pairs.
    Pairs,
}

impl PatternArg {
    /// As typed.
    pub fn name(self) -> &'static str {
        match self {
            PatternArg::Ring => "ring",
            PatternArg::AllPairs => "all-pairs",
            PatternArg::Star => "star",
            PatternArg::Pairs => "pairs",
        }
    }
}

/// Default length of a fleet's pair test.
pub const FLEET_TIME: std::time::Duration = std::time::Duration::from_secs(2);

impl FleetArgs {
    /// The test plan of every pair (2 s unless -t or --bytes says otherwise).
    pub fn test_plan(&self) -> Result<crate::session::pair::PairSpec, super::UsageError> {
        let mut t = self.test.clone();
        if t.time.is_none() && t.bytes.is_none() {
            t.time = Some(FLEET_TIME);
        }
        let plan = t.resolve()?;
        crate::session::pair::PairSpec::of(&plan, self.ebpf)
            .map_err(|e| super::UsageError(e.to_string()))
    }

    /// The pattern over `names` (hosts in matrix order).
    pub fn pattern(
        &self,
        names: &[String],
    ) -> Result<crate::fleet::rounds::Pattern, super::UsageError> {
        use crate::fleet::rounds::Pattern;
        let find = |h: &str, what: &str| {
            names.iter().position(|n| n == h).ok_or_else(|| {
                super::UsageError(format!(
                    "{what} {h:?} is not one of the fleet's hosts ({})",
                    names.join(", ")
                ))
            })
        };
        match self.pattern {
            PatternArg::Ring => Ok(Pattern::Ring),
            PatternArg::AllPairs => Ok(Pattern::AllPairs),
            PatternArg::Star => {
                let hub = self
                    .hub
                    .as_deref()
                    .ok_or_else(|| super::UsageError("--pattern star needs --hub HOST".into()))?;
                Ok(Pattern::Star {
                    hub: find(hub, "--hub")?,
                })
            }
            PatternArg::Pairs => {
                let path = self.pairs.as_deref().ok_or_else(|| {
                    super::UsageError("--pattern pairs needs --pairs FILE".into())
                })?;
                let text = std::fs::read_to_string(path).map_err(|e| {
                    super::UsageError(format!("cannot read --pairs {}: {e}", path.display()))
                })?;
                let mut pairs = Vec::new();
                for (n, line) in text.lines().enumerate() {
                    let line = line.split('#').next().unwrap_or("").trim();
                    if line.is_empty() {
                        continue;
                    }
                    let at = format!("{}:{}", path.display(), n + 1);
                    let w: Vec<&str> = line.split_whitespace().collect();
                    let [a, b] = w.as_slice() else {
                        return Err(super::UsageError(format!(
                            "{at}: want two hosts, `HOST HOST`, found {line:?}"
                        )));
                    };
                    let (a, b) = (find(a, &at)?, find(b, &at)?);
                    if a == b {
                        return Err(super::UsageError(format!(
                            "{at}: a host cannot test against itself"
                        )));
                    }
                    pairs.push((a, b));
                }
                if pairs.is_empty() {
                    return Err(super::UsageError(format!(
                        "--pairs {}: no pairs in the file",
                        path.display()
                    )));
                }
                Ok(Pattern::Pairs(pairs))
            }
        }
    }
}

//! Command line: clap parses raw arguments, then [`TestArgs::resolve`] and
//! friends validate them into the configuration the rest of the program uses.
//!
//! Two stages (like ripgrep's low/high args): clap checks each value's form
//! (a duration, a size, a CPU list) and names the flag in its error; the
//! second stage checks combinations (`--reverse` only for stream, `--omit`
//! shorter than `--time`, ...) and returns a [`UsageError`] that says what to
//! do instead. The TUI's control panel will build the same [`TestArgs`], so
//! both faces share one source of truth for validation.

use crate::probe::ebpf::EbpfMode;
use crate::record::schema::SweepValue;
use crate::traffic::{EngineKind, EngineSpec, TcpMode};
use crate::units::{parse_cpu_list, parse_duration, parse_size, Bytes, CpuId};
use clap::{Args, Parser, Subcommand};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

/// Live network-throughput diagnosis on a pair of Linux nodes.
#[derive(Debug, Parser)]
#[command(name = "wirescope", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to do (default: the interactive TUI).
    #[command(subcommand)]
    pub command: Option<Command>,
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
    /// Packet test between two interfaces of this host (benchmarks and tests; the session will carry it as `run --engine sink`).
    #[command(hide = true)]
    SinkLab(Box<crate::sink_lab::SinkLabArgs>),
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
    /// Write the JSON-lines log (same records as `run`).
    #[arg(long, value_name = "PATH", conflicts_with = "from")]
    pub log: Option<PathBuf>,
    /// Print JSON instead of the table: with --from one object, otherwise one record per line.
    #[arg(long)]
    pub json: bool,
    /// Read a captured directory (`wirescope capture`, or a real sosreport) instead of this host.
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
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
    /// Token file (created 0600 with a random token if missing). Default: $WIRESCOPE_TOKEN, else ~/.config/wirescope/token.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Also accept control connections on this unix socket (used by the local pair).
    #[arg(long, value_name = "PATH", hide = true)]
    pub control_unix: Option<PathBuf>,
    /// Exit after the first controller's session (used by the local pair).
    #[arg(long, hide = true)]
    pub once: bool,
}

/// Where the far end is.
#[derive(Debug, Args, Default, Clone)]
pub struct TargetArgs {
    /// Agent to test against (`wirescope agent` runs there).
    #[arg(long, value_name = "HOST[:PORT]", conflicts_with = "local_pair")]
    pub peer: Option<String>,
    /// Use the embedded local pair: two network namespaces and a veth as root, loopback otherwise (the default without --peer).
    #[arg(long)]
    pub local_pair: bool,
    /// rx/tx queues of the local pair's veth.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub pair_queues: u32,
    /// Token file shared with the agent. Default: $WIRESCOPE_TOKEN, else ~/.config/wirescope/token.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
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
    /// Write a JSON-lines log (header, one sample per host per interval, summary).
    #[arg(long, value_name = "PATH")]
    pub log: Option<PathBuf>,
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

/// Interfaces to watch. The one that routes to the other host is always watched.
#[derive(Debug, Args, Default, Clone)]
pub struct ObserveArgs {
    /// Also watch this interface on this host (repeatable).
    #[arg(long = "iface", value_name = "IF")]
    pub ifaces: Vec<String>,
    /// Also watch this interface on the agent's host (repeatable).
    #[arg(long = "peer-iface", value_name = "IF")]
    pub peer_ifaces: Vec<String>,
    /// eBPF probes on both hosts, when privileged (CAP_BPF+CAP_PERFMON, kernel BTF).
    /// default: exact NET_RX/NET_TX softirq time per CPU and rx/tx packets per
    /// queue × CPU (measured cost: 2.7 % of a 2-stream TCP test's throughput on
    /// the local pair's veth, `cargo xtask bench ebpf`); deep: also every softirq
    /// vector's time and NAPI polls/budget exhaustion per instance (3.1 %); off.
    /// On the local pair one set counts for both ends.
    #[arg(long, value_enum, value_name = "SET", default_value = "default")]
    pub ebpf: EbpfMode,
}

/// The test itself; shared by `run` and (later) the TUI's control panel.
#[derive(Debug, Args, Clone)]
pub struct TestArgs {
    /// Traffic engine.
    #[arg(long, value_enum, default_value = "tcp")]
    pub engine: EngineKind,
    /// Engine mode: stream (bulk), pingpong (echo, MiB/s), rr (request/response latency).
    #[arg(long, short = 'm', value_enum, default_value = "stream")]
    pub mode: TcpMode,
    /// stream: parallel streams per direction, one thread each.
    #[arg(long, short = 'P', value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub streams: Option<u32>,
    /// rr/pingpong: connections.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub conns: Option<u32>,
    /// rr/pingpong: worker threads per side (default: min(conns, CPUs)).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub threads: Option<u32>,
    /// rr: requests in flight per connection.
    #[arg(long, value_name = "D", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub depth: u32,
    /// rr: request size; pingpong: message size (default rr 64, pingpong 16K).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub size: Option<Bytes>,
    /// rr: response size (default: --size).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub resp_size: Option<Bytes>,
    /// stream: bytes per write (default 128K).
    #[arg(long, short = 'l', value_name = "SIZE", value_parser = parse_size)]
    pub len: Option<Bytes>,
    /// Pin this host's worker threads to these CPUs, round-robin (e.g. 0-3,8).
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub cpus: Option<CpuList>,
    /// Pin the agent's worker threads (default: the --cpus list).
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub peer_cpus: Option<CpuList>,
    /// stream: the agent sends, this host receives.
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// stream: both directions at once.
    #[arg(long)]
    pub bidir: bool,
    /// SO_SNDBUF/SO_RCVBUF of every data socket (the kernel doubles it).
    #[arg(long, short = 'w', value_name = "SIZE", value_parser = parse_size)]
    pub window: Option<Bytes>,
    /// TCP maximum segment size (TCP_MAXSEG).
    #[arg(long, short = 'M', value_name = "BYTES", value_parser = clap::value_parser!(u32).range(88..=65535))]
    pub mss: Option<u32>,
    /// Congestion control algorithm (TCP_CONGESTION), e.g. cubic, bbr.
    #[arg(long, short = 'C', value_name = "ALGO")]
    pub congestion: Option<String>,
    /// stream: send with MSG_ZEROCOPY (completions are read and counted).
    #[arg(long, short = 'Z')]
    pub zerocopy: bool,
    /// stream: receive with MSG_TRUNC, the kernel discards data without copying it.
    #[arg(long)]
    pub skip_rx_copy: bool,
    /// Test length per point.
    #[arg(long, short = 't', value_name = "DURATION", value_parser = parse_duration)]
    pub time: Option<Duration>,
    /// stream: stop after this many bytes per direction (no time limit unless --time is given).
    #[arg(long, short = 'n', value_name = "SIZE", value_parser = parse_size)]
    pub bytes: Option<Bytes>,
    /// Warm-up at the start of each point: shown and logged, not counted in the summary.
    #[arg(long, short = 'O', value_name = "DURATION", default_value = "0s", value_parser = parse_duration)]
    pub omit: Duration,
    /// Sampling period.
    #[arg(long, short = 'i', value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Run one point per value: size=64,1K,64K,1M or streams=1,2,4.
    #[arg(long, value_name = "PARAM=LIST", value_parser = parse_sweep)]
    pub sweep: Option<Sweep>,
}

/// A sweep over one parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    /// What varies.
    pub param: SweepParam,
    /// Its values.
    pub values: Vec<u64>,
}

/// The parameter a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepParam {
    /// stream: --len; rr/pingpong: --size.
    Size,
    /// stream: --streams; rr/pingpong: --conns.
    Streams,
}

impl SweepParam {
    /// Name as typed.
    pub fn name(self) -> &'static str {
        match self {
            SweepParam::Size => "size",
            SweepParam::Streams => "streams",
        }
    }
}

fn parse_sweep(s: &str) -> Result<Sweep, String> {
    let example = "use size=64,1K,64K,1M or streams=1,2,4";
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not a sweep; {example}"))?;
    let param = match k.trim() {
        "size" | "len" => SweepParam::Size,
        "streams" | "conns" => SweepParam::Streams,
        other => return Err(format!("cannot sweep '{other}'; {example}")),
    };
    let mut values = Vec::new();
    for part in v.split(',') {
        let val = match param {
            SweepParam::Size => parse_size(part)?.0,
            SweepParam::Streams => part
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("'{part}' is not a stream count; {example}"))?,
        };
        if val == 0 {
            return Err(format!("sweep values must be at least 1; {example}"));
        }
        values.push(val);
    }
    Ok(Sweep { param, values })
}

/// A CPU list as one value (`0-3,8`). A newtype, because clap reads an
/// `Option<Vec<T>>` field as "several values of T", not as one list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<CpuId>);

fn parse_cpus(s: &str) -> Result<CpuList, String> {
    parse_cpu_list(s).map(CpuList)
}

fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|_| {
        format!("'{s}' is not an address and port; use e.g. 0.0.0.0:5310 or [::]:5310")
    })
}

/// A combination of options that cannot work, with what to do instead.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Validated test plan.
#[derive(Debug, Clone)]
pub struct TestPlan {
    /// The spec of the first (or only) point.
    pub spec: EngineSpec,
    /// Time limit per point.
    pub time: Option<Duration>,
    /// Warm-up.
    pub omit: Duration,
    /// Sampling period.
    pub interval: Duration,
    /// Sweep, if any.
    pub sweep: Option<Sweep>,
}

/// Largest write/message size accepted.
const MAX_MSG: u64 = 64 << 20;

impl TestArgs {
    /// Check combinations and build the plan.
    pub fn resolve(&self) -> Result<TestPlan, UsageError> {
        let u = |m: String| Err(UsageError(m));
        let stream = self.mode == TcpMode::Stream;
        let mode = self.mode.name();
        if !stream {
            for (set, flag) in [
                (self.reverse, "--reverse"),
                (self.bidir, "--bidir"),
                (self.zerocopy, "--zerocopy"),
                (self.skip_rx_copy, "--skip-rx-copy"),
                (self.bytes.is_some(), "--bytes"),
                (self.len.is_some(), "--len"),
            ] {
                if set {
                    return u(format!("{flag} applies to --mode stream only, not {mode}"));
                }
            }
            if self.streams.is_some() {
                return u(format!("--mode {mode} takes --conns N, not --streams"));
            }
        } else {
            for (set, flag) in [
                (self.conns.is_some(), "--conns"),
                (self.threads.is_some(), "--threads"),
                (self.size.is_some(), "--size"),
                (self.resp_size.is_some(), "--resp-size"),
                (self.depth != 1, "--depth"),
            ] {
                if set {
                    return u(format!(
                        "{flag} applies to --mode rr/pingpong; for stream use --streams and --len"
                    ));
                }
            }
        }
        if self.mode == TcpMode::Pingpong && (self.resp_size.is_some() || self.depth != 1) {
            return u(
                "--resp-size and --depth apply to --mode rr only; pingpong echoes --size bytes"
                    .into(),
            );
        }
        if self.reverse && self.bidir {
            return u(
                "--reverse and --bidir exclude each other; --bidir already sends both ways".into(),
            );
        }
        if self.interval < Duration::from_millis(10) {
            return u(format!(
                "--interval {} is too short; use at least 10ms",
                humantime::format_duration(self.interval)
            ));
        }
        let time = match (self.time, self.bytes) {
            (Some(t), _) => Some(t),
            (None, Some(_)) => None,
            (None, None) => Some(Duration::from_secs(10)),
        };
        if let Some(t) = time {
            if t.is_zero() {
                return u("--time must be longer than 0s, e.g. --time 10s".into());
            }
            if self.omit >= t {
                return u(format!(
                    "--omit {} must be shorter than --time {}",
                    humantime::format_duration(self.omit),
                    humantime::format_duration(t)
                ));
            }
        }
        if let Some(b) = self.bytes {
            if b.0 == 0 {
                return u("--bytes must be at least 1, e.g. --bytes 1G".into());
            }
        }
        let len = self.len.unwrap_or(Bytes(128 * 1024));
        let size = self.size.unwrap_or(if self.mode == TcpMode::Rr {
            Bytes(64)
        } else {
            Bytes(16 * 1024)
        });
        for (v, flag) in [
            (len, "--len"),
            (size, "--size"),
            (self.resp_size.unwrap_or(size), "--resp-size"),
        ] {
            if v.0 == 0 || v.0 > MAX_MSG {
                return u(format!(
                    "{flag} {} is out of range; use 1 byte to 64MiB",
                    v.0
                ));
            }
        }
        if let Some(w) = self.window {
            if w.0 < 1024 || w.0 > i32::MAX as u64 / 2 {
                return u(format!("--window {} is out of range; use 1K to 1G (the kernel doubles it and caps it at net.core.rmem_max/wmem_max)", w.0));
            }
        }
        if let Some(cc) = &self.congestion {
            if cc.is_empty()
                || cc.len() > 15
                || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                return u(format!("--congestion '{cc}' is not an algorithm name; see /proc/sys/net/ipv4/tcp_available_congestion_control"));
            }
        }
        let conns = if stream {
            self.streams.unwrap_or(1)
        } else {
            self.conns.unwrap_or(1)
        };
        let cpus = self.cpus.clone().map(|c| c.0).unwrap_or_default();
        let spec = EngineSpec {
            engine: self.engine,
            mode: self.mode,
            streams: conns,
            threads: self.threads.unwrap_or(0),
            len,
            size,
            resp_size: self.resp_size.unwrap_or(size),
            depth: self.depth,
            window: self.window,
            mss: self.mss,
            congestion: self.congestion.clone(),
            zerocopy: self.zerocopy,
            skip_rx_copy: self.skip_rx_copy,
            reverse: self.reverse,
            bidir: self.bidir,
            peer_cpus: self
                .peer_cpus
                .clone()
                .map(|c| c.0)
                .unwrap_or_else(|| cpus.clone()),
            cpus,
            bytes: self.bytes,
        };
        if let Some(sw) = &self.sweep {
            for v in &sw.values {
                if sw.param == SweepParam::Size && *v > MAX_MSG {
                    return u(format!(
                        "sweep size {v} is out of range; use 1 byte to 64MiB"
                    ));
                }
                if sw.param == SweepParam::Streams && *v > 65536 {
                    return u(format!("sweep streams {v} is out of range; use 1 to 65536"));
                }
            }
        }
        Ok(TestPlan {
            spec,
            time,
            omit: self.omit,
            interval: self.interval,
            sweep: self.sweep.clone(),
        })
    }
}

impl TestPlan {
    /// The points to run, in order, with their sweep coordinates.
    pub fn points(&self) -> Vec<(Option<SweepValue>, EngineSpec)> {
        let Some(sw) = &self.sweep else {
            return vec![(None, self.resolved(self.spec.clone()))];
        };
        sw.values
            .iter()
            .map(|&v| {
                let mut s = self.spec.clone();
                match (sw.param, s.mode) {
                    (SweepParam::Size, TcpMode::Stream) => s.len = Bytes(v),
                    (SweepParam::Size, _) => {
                        if s.resp_size == s.size {
                            s.resp_size = Bytes(v);
                        }
                        s.size = Bytes(v);
                    }
                    (SweepParam::Streams, _) => s.streams = u32::try_from(v).unwrap_or(u32::MAX),
                }
                (
                    Some(SweepValue {
                        param: sw.param.name().into(),
                        value: v,
                    }),
                    self.resolved(s),
                )
            })
            .collect()
    }

    /// Fill in what depends on the host (worker threads).
    fn resolved(&self, mut s: EngineSpec) -> EngineSpec {
        if s.threads == 0 {
            let cpus = crate::probe::system::online_cpus() as u32;
            s.threads = s.streams.min(cpus).max(1);
        }
        s
    }
}

/// Where the agent is, resolved.
#[derive(Debug, Clone)]
pub enum TargetChoice {
    /// A remote agent.
    Peer(SocketAddr),
    /// The embedded local pair with this many veth queues.
    LocalPair {
        /// rx/tx queues.
        queues: u32,
    },
}

impl TargetArgs {
    /// Resolve `--peer` (DNS included) or pick the local pair.
    pub fn resolve(&self) -> Result<TargetChoice, UsageError> {
        let Some(p) = &self.peer else {
            return Ok(TargetChoice::LocalPair {
                queues: self.pair_queues,
            });
        };
        resolve_peer(p).map(TargetChoice::Peer)
    }
}

/// `HOST`, `HOST:PORT`, `IPv4`, `[IPv6]:PORT` or bare IPv6 → an address (default port 5310).
pub fn resolve_peer(p: &str) -> Result<SocketAddr, UsageError> {
    let port = crate::session::DEFAULT_PORT;
    if let Ok(a) = p.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = p.parse::<std::net::IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let (host, port) = match p.rsplit_once(':') {
        Some((h, pt)) if !h.contains(':') => (
            h,
            pt.parse::<u16>().map_err(|_| {
                UsageError(format!(
                    "--peer '{p}': '{pt}' is not a port; use HOST or HOST:PORT, e.g. node-b:5310"
                ))
            })?,
        ),
        _ => (p, port),
    };
    (host, port)
        .to_socket_addrs()
        .map_err(|e| UsageError(format!("--peer '{p}': cannot resolve '{host}': {e}")))?
        .next()
        .ok_or_else(|| UsageError(format!("--peer '{p}': '{host}' has no address")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Result<TestPlan, String> {
        let mut v = vec!["wirescope", "run"];
        v.extend_from_slice(extra);
        let cli = Cli::try_parse_from(v).map_err(|e| e.to_string())?;
        match cli.command {
            Some(Command::Run(r)) => r.test.resolve().map_err(|e| e.0),
            _ => Err("not run".into()),
        }
    }

    #[test]
    fn defaults() {
        let p = args(&[]).unwrap();
        assert_eq!(p.spec.mode, TcpMode::Stream);
        assert_eq!(p.spec.streams, 1);
        assert_eq!(p.spec.len, Bytes(131072));
        assert_eq!(p.time, Some(Duration::from_secs(10)));
    }

    #[test]
    fn bad_values_name_the_flag_and_an_example() {
        let e = args(&["--time", "10x"]).unwrap_err();
        assert!(e.contains("--time") && e.contains("10s"), "{e}");
        let e = args(&["--len", "big"]).unwrap_err();
        assert!(e.contains("--len") && e.contains("64K"), "{e}");
        let p = args(&["--cpus", "0-1", "--peer-cpus", "1"]).unwrap();
        assert_eq!(p.spec.cpus, vec![CpuId(0), CpuId(1)]);
        assert_eq!(p.spec.peer_cpus, vec![CpuId(1)]);
        assert_eq!(
            args(&["--cpus", "0"]).unwrap().spec.peer_cpus,
            vec![CpuId(0)],
            "the peer defaults to the same list"
        );
        let e = args(&["--cpus", "3-1"]).unwrap_err();
        assert!(e.contains("--cpus") && e.contains("0-3,8"), "{e}");
        let e = args(&["--sweep", "color=red"]).unwrap_err();
        assert!(e.contains("--sweep") && e.contains("size=64"), "{e}");
    }

    #[test]
    fn combinations_are_checked() {
        assert!(args(&["-m", "rr", "--reverse"])
            .unwrap_err()
            .contains("--reverse"));
        assert!(args(&["-m", "rr", "--streams", "4"])
            .unwrap_err()
            .contains("--conns"));
        assert!(args(&["--omit", "5s", "--time", "5s"])
            .unwrap_err()
            .contains("--omit"));
        assert!(args(&["--reverse", "--bidir"]).is_err());
        let p = args(&["--bytes", "1G"]).unwrap();
        assert_eq!(p.time, None);
    }

    #[test]
    fn sweeps_make_points() {
        let p = args(&["-m", "rr", "--sweep", "size=64,1K"]).unwrap();
        let pts = p.points();
        assert_eq!(pts.len(), 2);
        assert_eq!(pts[1].1.size, Bytes(1024));
        assert_eq!(pts[1].1.resp_size, Bytes(1024));
        let p = args(&["--sweep", "streams=1,2,4"]).unwrap();
        assert_eq!(
            p.points().iter().map(|x| x.1.streams).collect::<Vec<_>>(),
            vec![1, 2, 4]
        );
    }

    #[test]
    fn peers_resolve() {
        assert_eq!(resolve_peer("127.0.0.1").unwrap().port(), 5310);
        assert_eq!(resolve_peer("127.0.0.1:9").unwrap().port(), 9);
        assert_eq!(resolve_peer("::1").unwrap().port(), 5310);
        assert_eq!(resolve_peer("localhost:7").unwrap().port(), 7);
        assert!(resolve_peer("localhost:x")
            .unwrap_err()
            .0
            .contains("not a port"));
    }
}

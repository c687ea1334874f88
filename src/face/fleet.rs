//! `wirescope fleet`: resolve the hosts, plan the rounds, run them through
//! the coordinator, print the matrix and the outliers, write the fleet log.
//!
//! Exit codes: 0 when nothing is named, 3 when a slow node, a slow link or
//! an odd setting is, 1 when no test could run, 2 for usage errors, 130/143
//! when Ctrl-C/SIGTERM ended the run (the partial matrix is still printed
//! and logged).

use super::{out, FaceError, FaceResult};
use crate::cli::fleet::FleetArgs;
use crate::fleet::analyze::{OddFact, SlowLink, SlowNode};
use crate::fleet::coordinator::{self, Directions, FleetEvent, FleetPlan};
use crate::fleet::hosts::{self, FleetHost, Unresolved};
use crate::fleet::log::{
    Explained, FleetHeader, FleetLog, FleetRecord, FleetSummary, HostRecord, FLEET_SCHEMA,
};
use crate::fleet::rounds;
use crate::record::metrics::http::MetricsServer;
use crate::record::metrics::MetricsHub;
use anyhow::Context;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Run `wirescope fleet` (with `--tui`, the fleet view of the TUI).
pub fn fleet(args: FleetArgs, argv: Vec<String>) -> FaceResult {
    let rt = super::control_runtime("ws-fleet").context("cannot start the async runtime")?;
    let Planned { plan, untested } = plan(&args, &rt)?;
    let names: Vec<String> = plan.hosts.iter().map(|h| h.name.clone()).collect();
    if args.plan {
        print_plan(&plan, &args);
        return Ok(0);
    }
    let token = token(&args)?;
    let metrics = start_metrics(&args)?;
    let mut log = open_log(&args, &plan, argv)?;
    eprintln!(
        "wirescope: fleet of {} hosts, {} rounds ({}), {} per test",
        plan.hosts.len(),
        plan.rounds.len(),
        args.pattern.name(),
        super::span_text(plan.spec.time_ms as f64 / 1000.0)
    );
    let cancel = CancellationToken::new();
    let (tx, mut rx) = mpsc::channel(256);
    let task = {
        let cancel = cancel.clone();
        let plan = plan.clone();
        rt.spawn(async move {
            super::spawn_signal_handler(cancel.clone());
            coordinator::run(plan, token, untested, tx, cancel).await
        })
    };
    let mut progress = Progress {
        names: &names,
        rounds: plan.rounds.len(),
        metrics: metrics.as_ref().map(|(hub, _)| hub),
        matrix: crate::fleet::analyze::Matrix::new(names.clone()),
    };
    let mut recorder = Recorder::new(names.clone());
    let log_error = follow(&mut rx, &mut progress, &mut recorder, log.as_mut(), &cancel);
    let summary = rt
        .block_on(task)
        .map_err(|e| FaceError::Failed(anyhow::anyhow!("the fleet coordinator failed: {e}")))?;
    print_summary(&summary, args.json)?;
    if let Some(e) = log_error {
        return Err(FaceError::Failed(anyhow::anyhow!(e)));
    }
    if let Some((hub, server)) = &metrics {
        serve_last_metrics(&rt, hub, server, &summary);
    }
    drop(rt);
    Ok(exit_code(&summary))
}

/// `--metrics ADDR`: the hub and its server, started before the first test.
fn start_metrics(args: &FleetArgs) -> Result<Option<FleetMetrics>, FaceError> {
    let Some(addr) = args.metrics else {
        return Ok(None);
    };
    let hub = MetricsHub::new("fleet");
    let server =
        MetricsServer::start(addr, hub.clone()).map_err(|e| FaceError::Usage(e.to_string()))?;
    Ok(Some((hub, server)))
}

/// The fleet's metrics hub and the server that serves it.
type FleetMetrics = (MetricsHub, MetricsServer);

/// What the terminal shows while the fleet runs, and the matrix `--metrics` serves.
struct Progress<'a> {
    names: &'a [String],
    rounds: usize,
    metrics: Option<&'a MetricsHub>,
    matrix: crate::fleet::analyze::Matrix,
}

impl Progress<'_> {
    /// One event on stderr (and a finished pair into the metrics' matrix).
    fn show(&mut self, ev: FleetEvent) {
        match ev {
            FleetEvent::Checked(up) => {
                for (i, r) in up.into_iter().enumerate() {
                    if let Err(why) = r {
                        eprintln!("wirescope: {}: not tested: {why}", self.names[i]);
                    }
                }
            }
            FleetEvent::RoundStarted { round, pairs } => {
                eprintln!(
                    "wirescope: round {round}/{}: {} pairs",
                    self.rounds,
                    pairs.len()
                );
            }
            FleetEvent::PairDone(p) => {
                if let Some(hub) = self.metrics {
                    for d in &p.directions {
                        let at = |h: &str| self.names.iter().position(|n| n == h);
                        if let (Some(b), Some(f), Some(t)) = (d.bps, at(&d.from), at(&d.to)) {
                            self.matrix.set(f, t, b);
                        }
                    }
                    if let Err(e) = crate::fleet::metrics::publish_matrix(hub, &self.matrix) {
                        eprintln!("wirescope: metrics: {e}");
                    }
                }
                for d in &p.directions {
                    match (&d.bps, &d.error) {
                        (_, Some(e)) => {
                            eprintln!("wirescope:   {} → {}: failed: {e}", d.from, d.to)
                        }
                        (Some(b), None) => {
                            eprintln!("wirescope:   {} → {}: {:.2} Gb/s", d.from, d.to, b / 1e9)
                        }
                        _ => {}
                    }
                }
            }
            FleetEvent::Facts(..)
            | FleetEvent::Done(_)
            | FleetEvent::TestStarted { .. }
            | FleetEvent::TestInterval { .. } => {}
        }
    }
}

/// Follow the coordinator's events until it ends: each shown, and its
/// record written to the log. A log that cannot be written cancels the
/// run; its first error is returned.
fn follow(
    rx: &mut mpsc::Receiver<FleetEvent>,
    progress: &mut Progress<'_>,
    recorder: &mut Recorder,
    mut log: Option<&mut FleetLog>,
    cancel: &CancellationToken,
) -> Option<String> {
    let mut log_error = None;
    while let Some(ev) = rx.blocking_recv() {
        let rec = recorder.record(&ev);
        progress.show(ev);
        if let (Some(l), Some(r)) = (log.as_mut(), rec) {
            if let Err(e) = l.write(&r) {
                if log_error.is_none() {
                    log_error = Some(e.to_string());
                    cancel.cancel();
                }
            }
        }
    }
    log_error
}

/// The fleet summary on stdout: JSON with `--json`, else the text.
fn print_summary(summary: &FleetSummary, json: bool) -> Result<(), FaceError> {
    if json {
        out(&format!(
            "{}\n",
            serde_json::to_string_pretty(summary).context("cannot print the summary")?
        ));
    } else {
        out(&summary_text(summary));
    }
    super::stdout_result()
}

/// `--metrics`: publish the summary, and unless the run was interrupted
/// keep serving the last matrix until Ctrl-C, for Prometheus to scrape.
fn serve_last_metrics(
    rt: &tokio::runtime::Runtime,
    hub: &MetricsHub,
    server: &MetricsServer,
    summary: &FleetSummary,
) {
    if let Err(e) = crate::fleet::metrics::publish_summary(hub, summary) {
        eprintln!("wirescope: metrics: {e}");
    }
    if !summary.interrupted {
        // The last matrix stays on /metrics for Prometheus to scrape.
        eprintln!(
            "wirescope: serving the fleet's metrics on http://{}/metrics until Ctrl-C",
            server.local_addr()
        );
        let stop = CancellationToken::new();
        rt.block_on(async {
            super::spawn_signal_handler(stop.clone());
            stop.cancelled().await;
        });
    }
}

/// A fleet ready to run: the plan, and the hosts left out before it
/// (name, why).
pub(crate) struct Planned {
    /// Hosts, rounds, the test.
    pub plan: FleetPlan,
    /// Hosts that did not resolve.
    pub untested: Vec<(String, String)>,
}

/// Resolve the hosts and plan the rounds: the same for `fleet` and
/// `fleet --tui`. Hosts left out are said on stderr.
pub(crate) fn plan(args: &FleetArgs, rt: &tokio::runtime::Runtime) -> Result<Planned, FaceError> {
    let spec = args.test_plan()?;
    let directions = if args.one_way {
        Directions::One
    } else if spec.spec.both_ways_in_one_run() {
        Directions::Bidir
    } else {
        Directions::Both
    };
    let (hosts, unresolved) = rt.block_on(discover(args))?;
    let untested: Vec<(String, String)> = unresolved
        .iter()
        .map(|u| (u.name.clone(), u.why.clone()))
        .collect();
    for u in &unresolved {
        eprintln!("wirescope: {}: left out: {}", u.name, u.why);
    }
    if hosts.len() < 2 {
        return Err(FaceError::Usage(
            hosts::HostsError::TooFew(format!("{} resolved", hosts.len())).to_string(),
        ));
    }
    let names: Vec<String> = hosts.iter().map(|h| h.name.clone()).collect();
    let pattern = args.pattern(&names)?;
    let plan = FleetPlan {
        rounds: rounds::rounds(&pattern, hosts.len()),
        hosts,
        spec,
        directions,
        concurrency: args.max_tests.map_or(usize::MAX, |k| k as usize),
    };
    Ok(Planned { plan, untested })
}

/// The fleet's token (`--token-file`, `$WIRESCOPE_TOKEN` or the default file).
pub(crate) fn token(args: &FleetArgs) -> Result<crate::session::auth::Token, FaceError> {
    let (token, _) = crate::session::auth::load_token(args.token_file.as_deref(), false)
        .map_err(|e| FaceError::Usage(format!("fleet token: {e}")))?;
    Ok(token)
}

/// Create `--log` and write its header (None without `--log`).
pub(crate) fn open_log(
    args: &FleetArgs,
    plan: &FleetPlan,
    argv: Vec<String>,
) -> Result<Option<FleetLog>, FaceError> {
    let Some(path) = &args.log else {
        return Ok(None);
    };
    let header = FleetHeader {
        schema: FLEET_SCHEMA.into(),
        command_line: argv,
        hosts: plan
            .hosts
            .iter()
            .map(|h| (h.name.clone(), h.addr.to_string()))
            .collect(),
        pattern: args.pattern.name().into(),
        rounds: plan.rounds.clone(),
        test: plan.spec.spec.label(),
        time_s: plan.spec.time_ms as f64 / 1000.0,
        directions: plan.directions.name().into(),
        started: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
    };
    let mut log = FleetLog::create(path).map_err(|e| FaceError::Usage(e.to_string()))?;
    log.write(&FleetRecord::FleetHeader(Box::new(header)))
        .map_err(|e| FaceError::Failed(e.into()))?;
    Ok(Some(log))
}

/// The log record of a coordinator's event, for every face that writes
/// the fleet log: a host's facts (with who it said it is), a pair, the
/// summary.
pub(crate) struct Recorder {
    names: Vec<String>,
    infos: Vec<Option<crate::probe::system::HostInfo>>,
}

impl Recorder {
    /// For hosts `names`, in matrix order.
    pub(crate) fn new(names: Vec<String>) -> Self {
        let infos = vec![None; names.len()];
        Recorder { names, infos }
    }

    /// The record `ev` makes, if any.
    pub(crate) fn record(&mut self, ev: &FleetEvent) -> Option<FleetRecord> {
        match ev {
            FleetEvent::Checked(up) => {
                for (slot, r) in self.infos.iter_mut().zip(up) {
                    *slot = r.as_ref().ok().cloned();
                }
                None
            }
            FleetEvent::Facts(i, facts) => Some(FleetRecord::Host(Box::new(HostRecord {
                host: self.names.get(*i).cloned().unwrap_or_default(),
                info: self.infos.get(*i).cloned().flatten().unwrap_or_default(),
                facts: Some(facts.clone()),
            }))),
            FleetEvent::PairDone(p) => Some(FleetRecord::Pair(p.clone())),
            FleetEvent::Done(s) => Some(FleetRecord::FleetSummary(s.clone())),
            FleetEvent::RoundStarted { .. }
            | FleetEvent::TestStarted { .. }
            | FleetEvent::TestInterval { .. } => None,
        }
    }
}

/// Hosts from the source the user chose, resolved.
async fn discover(args: &FleetArgs) -> Result<(Vec<FleetHost>, Vec<Unresolved>), FaceError> {
    let usage = |e: hosts::HostsError| FaceError::Usage(e.to_string());
    if let Some(name) = &args.dns {
        return Ok((
            hosts::from_dns(name, args.port).await.map_err(usage)?,
            Vec::new(),
        ));
    }
    let names = if let Some(list) = &args.hosts {
        hosts::expand(list).map_err(usage)?
    } else if let Some(f) = &args.hosts_file {
        hosts::read_file(f).map_err(usage)?
    } else {
        hosts::slurm_nodes().map_err(usage)?
    };
    Ok(hosts::resolve(&names, args.port).await)
}

fn print_plan(plan: &FleetPlan, args: &FleetArgs) {
    let mut s = format!("hosts ({}):\n", plan.hosts.len());
    for (i, h) in plan.hosts.iter().enumerate() {
        s += &format!("  {i:>4}  {}  {}\n", h.name, h.addr);
    }
    s += &format!(
        "pattern {}: {} rounds, {} tests of {} ({} each)\n",
        args.pattern.name(),
        plan.rounds.len(),
        plan.rounds.iter().map(Vec::len).sum::<usize>(),
        plan.spec.spec.label(),
        super::span_text(plan.spec.time_ms as f64 / 1000.0)
    );
    for (r, pairs) in plan.rounds.iter().enumerate() {
        let p: Vec<String> = pairs
            .iter()
            .map(|(a, b)| format!("{}-{}", plan.hosts[*a].name, plan.hosts[*b].name))
            .collect();
        s += &format!("  round {}: {}\n", r + 1, p.join(" "));
    }
    out(&s);
}

/// 3 when anything is named, 1 when nothing ran, 130/143 when interrupted.
pub(crate) fn exit_code(s: &FleetSummary) -> u8 {
    if s.interrupted {
        return super::interrupted_exit();
    }
    if s.matrix.cells.iter().flatten().all(Option::is_none) {
        return super::EXIT_FAILED;
    }
    if !s.slow_nodes.is_empty() || !s.slow_links.is_empty() || !s.odd_facts.is_empty() {
        return super::EXIT_FINDINGS;
    }
    0
}

/// Largest fleet whose matrix is printed whole (wider ones: per-node lines).
const MATRIX_MAX: usize = 32;

/// The matrix (Gb/s, rows = sender), then what stands out.
pub fn summary_text(s: &FleetSummary) -> String {
    let m = &s.matrix;
    let mut t = String::new();
    if m.hosts.len() <= MATRIX_MAX {
        let w = m
            .hosts
            .iter()
            .map(String::len)
            .max()
            .unwrap_or(4)
            .clamp(6, 16);
        t += &format!("{:>w$}", "Gb/s →");
        for h in &m.hosts {
            t += &format!(" {:>w$}", trunc(h, w));
        }
        t += "\n";
        for (i, row) in m.cells.iter().enumerate() {
            t += &format!("{:>w$}", trunc(&m.hosts[i], w));
            for (j, c) in row.iter().enumerate() {
                let cell = match c {
                    _ if i == j => "·".to_string(),
                    Some(v) => format!("{:.2}", v / 1e9),
                    None => "-".to_string(),
                };
                t += &format!(" {cell:>w$}");
            }
            t += "\n";
        }
    } else {
        t += "per host (median Gb/s sending / receiving):\n";
        for (i, h) in m.hosts.iter().enumerate() {
            let mut snd: Vec<f64> = m.cells[i].iter().flatten().copied().collect();
            let mut rcv: Vec<f64> = m.cells.iter().filter_map(|r| r[i]).collect();
            let f = |v: Option<f64>| v.map_or("-".into(), |x| format!("{:.2}", x / 1e9));
            t += &format!(
                "  {h}: {} / {}\n",
                f(crate::fleet::analyze::median(&mut snd)),
                f(crate::fleet::analyze::median(&mut rcv))
            );
        }
    }
    t += &format!(
        "\n{} pairs in {}/{} rounds, {} (tests {}){}\n",
        s.pairs_run,
        s.rounds_run,
        s.rounds_planned,
        super::span_text(s.wall_s),
        super::span_text(s.test_s),
        if s.interrupted { ", interrupted" } else { "" }
    );
    for (kind, line) in outlier_lines(
        &s.slow_nodes,
        &s.slow_links,
        &s.odd_facts,
        &s.untested,
        &s.failed,
    ) {
        match kind {
            OutlierLine::Evidence => t += &format!("    {line}\n"),
            _ => t += &format!("{line}\n"),
        }
    }
    t
}

/// What a line of [`outlier_lines`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutlierLine {
    /// A slow node.
    SlowNode,
    /// A slow link.
    SlowLink,
    /// A line of evidence under the node or link above it.
    Evidence,
    /// A setting in which some hosts differ.
    OddSetting,
    /// A host not tested, or a direction that failed.
    NotTested,
    /// Nothing stands out.
    Nothing,
}

/// The outliers, one line each with its evidence under it, then who was
/// not tested and what failed: the summary's text and the TUI's outliers
/// panel say the same.
pub fn outlier_lines(
    nodes: &[Explained<SlowNode>],
    links: &[Explained<SlowLink>],
    odd: &[OddFact],
    untested: &[(String, String)],
    failed: &[(String, String, String)],
) -> Vec<(OutlierLine, String)> {
    fn evidence(ev: &[String]) -> impl Iterator<Item = (OutlierLine, String)> + '_ {
        ev.iter().map(|e| (OutlierLine::Evidence, e.clone()))
    }
    let mut t = Vec::new();
    for n in nodes {
        t.push((
            OutlierLine::SlowNode,
            format!(
                "slow node {}: {} of its {} links {} below half the fleet median (median {:.2} Gb/s, fleet {:.2} Gb/s)",
                n.what.host,
                n.what.slow_links,
                n.what.links,
                n.what.direction,
                n.what.median_bps / 1e9,
                n.what.fleet_median_bps / 1e9
            ),
        ));
        t.extend(evidence(&n.evidence));
    }
    for l in links {
        t.push((
            OutlierLine::SlowLink,
            format!(
                "slow link {} → {}: {:.2} Gb/s, against {:.2} and {:.2} Gb/s on the two hosts' other links",
                l.what.from,
                l.what.to,
                l.what.bps / 1e9,
                l.what.from_median_bps / 1e9,
                l.what.to_median_bps / 1e9
            ),
        ));
        t.extend(evidence(&l.evidence));
    }
    for o in odd {
        t.push((OutlierLine::OddSetting, format!("odd setting {}", o.line())));
    }
    for (h, why) in untested {
        t.push((OutlierLine::NotTested, format!("not tested {h}: {why}")));
    }
    for (a, b, why) in failed {
        t.push((OutlierLine::NotTested, format!("failed {a} → {b}: {why}")));
    }
    if nodes.is_empty() && links.is_empty() && odd.is_empty() {
        t.push((
            OutlierLine::Nothing,
            "no slow node, no slow link, no odd setting".to_string(),
        ));
    }
    t
}

fn trunc(s: &str, w: usize) -> String {
    s.chars().take(w).collect()
}

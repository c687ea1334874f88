//! `wirescope run`: the test without a terminal UI.
//!
//! It consumes the controller's [`RunEvent`]s exactly as the TUI will: it
//! writes every interval of both hosts to the log (flushed per record), prints
//! a table row per interval (or nothing, with `--json`), and turns each point
//! into a summary. Exit codes: 0 ok, 1 the test failed (peer lost, engine
//! error), 2 usage error, 130 interrupted by Ctrl-C/SIGTERM.

use crate::cli::{RunArgs, TestPlan};
use crate::diagnose::live::LiveDiagnosis;
use crate::diagnose::{Input, TestContext, Window};
use crate::probe::sample::Sample;
use crate::probe::system::HostInfo;
use crate::record::log::LogWriter;
use crate::record::schema::{Event, Header, Hosts, Record, SweepInfo, SCHEMA_VERSION};
use crate::record::summary::{self, PointData};
use crate::record::text;
use crate::session::controller::{Controller, EndReason, PointParams, RunEvent, Target};
use anyhow::Context;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Set once stdout's reader went away (`wirescope run | head`): a closed
/// pipe means "enough", not an error, so printing just stops.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Write to stdout, stopping quietly once the reader is gone.
pub fn out(text: &str) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut o = std::io::stdout().lock();
    if o.write_all(text.as_bytes())
        .and_then(|()| o.flush())
        .is_err()
    {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

macro_rules! out {
    ($($t:tt)*) => { out(&format!($($t)*)) };
}

macro_rules! outln {
    ($($t:tt)*) => { out(&format!("{}\n", format_args!($($t)*))) };
}

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: the test failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit code: bad command line.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: a finding at or above `--fail-on` was raised.
pub const EXIT_FINDINGS: u8 = 3;
/// Exit code: interrupted by the user.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Run `wirescope run`. Builds the local pair first (privileged, on the main
/// thread), then the async runtime; the pair is torn down when this returns,
/// whatever happened.
pub fn run(args: RunArgs, argv: Vec<String>) -> anyhow::Result<u8> {
    let plan = match args.test.resolve() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let choice = match args.target.resolve() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let opened = crate::session::open(&choice, args.target.token_file.as_deref())?;
    if let Some(pair) = &opened.pair {
        eprintln!(
            "wirescope: {}; agent pid {}",
            opened.description,
            pair.agent_pid().unwrap_or(0)
        );
    }
    let crate::session::Opened {
        pair,
        target,
        token,
        description: pair_desc,
        same_kernel,
    } = opened;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ws-runtime")
        .worker_threads(2)
        .build()
        .context("cannot start the async runtime")?;
    let r = rt.block_on(run_async(
        &args,
        &plan,
        target,
        token,
        pair_desc,
        same_kernel,
        argv,
    ));
    drop(rt);
    if let (Err(_), Some(p)) = (&r, &pair) {
        eprintln!("wirescope: local agent log: {}", p.agent_log_tail());
    }
    drop(pair);
    r
}

async fn run_async(
    args: &RunArgs,
    plan: &TestPlan,
    target: Target,
    token: crate::session::auth::Token,
    pair: String,
    same_kernel: Vec<crate::probe::ebpf::EbpfIface>,
    argv: Vec<String>,
) -> anyhow::Result<u8> {
    let cancel = CancellationToken::new();
    spawn_signal_handler(cancel.clone());
    let mut ctl = Controller::connect(target, &token).await?;
    let (ebpf_local, ebpf_peer) = ctl
        .configure_ebpf(args.observe.ebpf, &args.observe.ifaces, same_kernel)
        .await?;
    if !args.json {
        report_ebpf(&ebpf_local, &ebpf_peer);
    }
    let mut log = match &args.log {
        Some(p) => Some(LogWriter::create(p)?),
        None => None,
    };
    let header = Header {
        schema: SCHEMA_VERSION,
        wirescope: env!("CARGO_PKG_VERSION").into(),
        command_line: argv,
        start_time: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        hosts: Hosts {
            local: HostInfo::current(),
            peer: ctl.peer.clone(),
        },
        pair,
        spec: Some(plan.spec.clone()),
        time_s: plan.time.map(|t| t.as_secs_f64()),
        omit_s: plan.omit.as_secs_f64(),
        interval_s: plan.interval.as_secs_f64(),
        sweep: plan.sweep.as_ref().map(|s| SweepInfo {
            param: s.param.name().into(),
            values: s.values.clone(),
        }),
        ebpf: Some(Hosts {
            local: ebpf_local,
            peer: ebpf_peer,
        }),
    };
    if let Some(l) = log.as_mut() {
        l.write(&Record::Header(Box::new(header.clone())))?;
    }
    if !args.json {
        outln!(
            "wirescope {}: {} {}, local {} ({}, {} CPUs) -> peer {} ({}, {} CPUs)",
            header.wirescope,
            plan.spec.kind().name(),
            plan.spec.mode_name(),
            header.hosts.local.hostname,
            header.hosts.local.kernel,
            header.hosts.local.cpus,
            header.hosts.peer.hostname,
            header.hosts.peer.kernel,
            header.hosts.peer.cpus
        );
    }
    let mut code = EXIT_OK;
    let mut diag = LiveDiagnosis::default();
    let mut worst = None;
    for (sweep, spec) in plan.points() {
        let pp = PointParams {
            spec: Some(spec.clone()),
            interval: plan.interval,
            omit: plan.omit,
            time: plan.time,
            ifaces: args.observe.ifaces.clone(),
            peer_ifaces: args.observe.peer_ifaces.clone(),
        };
        if !args.json {
            if let Some(s) = &sweep {
                outln!("\n== sweep {} = {} ==", s.param, s.value);
            }
            outln!("{}", text::interval_header(&spec));
        }
        write_event(
            &mut log,
            0.0,
            "point_start",
            spec.label(),
        )?;
        let (tx, rx) = mpsc::channel(64);
        let producer = async {
            let r = ctl.run_point(&pp, &tx, &cancel).await;
            drop(tx);
            r
        };
        diag.reset();
        let consumer = consume(rx, &mut log, &spec, args.json, &mut diag);
        let (outcome, collected) = tokio::join!(producer, consumer);
        let (local, peer) = collected?;
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                write_event(&mut log, 0.0, "error", e.to_string())?;
                eprintln!("error: {e}");
                return Ok(EXIT_FAILED);
            }
        };
        let t_end = local.last().map(|s| s.end_s).unwrap_or(0.0);
        match &outcome.end {
            EndReason::Completed => {}
            EndReason::Interrupted => {
                write_event(&mut log, t_end, "interrupted", "stopped by the user".into())?
            }
            EndReason::PeerLost(w) => write_event(&mut log, t_end, "peer_lost", w.clone())?,
            EndReason::Failed(w) => write_event(&mut log, t_end, "error", w.clone())?,
        }
        let mut s = summary::build(&PointData {
            spec: &spec,
            sweep,
            outcome: &outcome,
            local: &local,
            peer: &peer,
        });
        s.findings = point_findings(&diag, &spec, &s, &local, &peer);
        worst = worst.max(s.findings.iter().map(|f| f.severity).max());
        if let Some(l) = log.as_mut() {
            l.write(&Record::Summary(Box::new(s.clone())))?;
        }
        if args.json {
            outln!("{}", serde_json::to_string(&s)?);
        } else {
            out!("{}", text::summary_block(&s));
        }
        match outcome.end {
            EndReason::Completed => {}
            EndReason::Interrupted => {
                code = EXIT_INTERRUPTED;
                break;
            }
            EndReason::PeerLost(_) | EndReason::Failed(_) => {
                if let Some(e) = &s.error {
                    eprintln!("error: {e}");
                }
                return Ok(EXIT_FAILED);
            }
        }
    }
    ctl.close().await;
    worst = worst.max(diag.worst_raised());
    if let (EXIT_OK, Some(level), Some(w)) = (code, args.fail_on, worst) {
        if w >= level.severity() {
            eprintln!(
                "wirescope: a finding of level {} or worse was raised (--fail-on {})",
                w.name(),
                level.severity().name()
            );
            return Ok(EXIT_FINDINGS);
        }
    }
    Ok(code)
}

/// The point's diagnosis over all its counted intervals, with its summary.
fn point_findings(
    diag: &LiveDiagnosis,
    spec: &crate::traffic::EngineSpec,
    s: &crate::record::schema::Summary,
    local: &[Sample],
    peer: &[Sample],
) -> Vec<crate::diagnose::Finding> {
    let counted = |v: &[Sample]| v.iter().filter(|x| !x.omitted).cloned().collect::<Vec<_>>();
    let (l, p) = (counted(local), counted(peer));
    let (lf, pf) = diag.facts();
    crate::diagnose::diagnose(&Input {
        local: Window {
            samples: &l,
            facts: lf,
        },
        peer: Window {
            samples: &p,
            facts: pf,
        },
        test: TestContext {
            spec: Some(spec),
            summary: Some(s),
        },
    })
}

/// Log and print every interval; return the Samples of both hosts.
async fn consume(
    mut rx: mpsc::Receiver<RunEvent>,
    log: &mut Option<LogWriter>,
    spec: &crate::traffic::EngineSpec,
    json: bool,
    diag: &mut LiveDiagnosis,
) -> anyhow::Result<(Vec<Sample>, Vec<Sample>)> {
    let (mut local, mut peer) = (Vec::new(), Vec::new());
    while let Some(ev) = rx.recv().await {
        let RunEvent::Interval {
            local: l, peer: p, ..
        } = ev;
        if let Some(w) = log.as_mut() {
            for s in l.iter().chain(p.iter()) {
                w.write(&Record::Sample(Box::new(s.clone())))?;
            }
        }
        if !json {
            out!("{}", text::interval_rows(spec, l.as_ref(), p.as_ref()));
        }
        for change in diag.push(l.as_ref(), p.as_ref(), Some(spec)) {
            if !json {
                out!("{}", text::finding_change(&change));
            }
            if let Some(w) = log.as_mut() {
                w.write(&Record::Finding(Box::new(change)))?;
            }
        }
        local.extend(l);
        peer.extend(p);
    }
    Ok((local, peer))
}

fn write_event(
    log: &mut Option<LogWriter>,
    t: f64,
    kind: &str,
    message: String,
) -> anyhow::Result<()> {
    if let Some(l) = log.as_mut() {
        l.write(&Record::Event(Event {
            t,
            kind: kind.into(),
            message,
        }))?;
    }
    Ok(())
}

/// Ctrl-C or SIGTERM cancels the test gracefully (summary still printed).
pub fn spawn_signal_handler(cancel: CancellationToken) {
    tokio::spawn(async move {
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        match term {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        cancel.cancel();
    });
}

/// One stderr line per host on what the eBPF probes do.
pub fn report_ebpf(
    local: &Option<crate::probe::ebpf::EbpfStatus>,
    peer: &Option<crate::probe::ebpf::EbpfStatus>,
) {
    for (role, s) in [("local", local), ("peer", peer)] {
        if let Some(s) = s {
            eprintln!("wirescope: {role}: {}", s.line());
        }
    }
}

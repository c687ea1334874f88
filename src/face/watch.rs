//! `wirescope watch`: observing without traffic.
//!
//! Live, it samples this host (and with `--peer`, the agent's host through the
//! same tick/sample protocol a test uses, with no engine) and feeds the
//! Samples through the same pipeline as `run`: the same records in the log,
//! and the same diagnosis, whose raised and cleared findings are printed
//! between the rows. `--json` prints every record as one line. `--metrics
//! ADDR` also serves both hosts' counters and the active findings to
//! Prometheus ([`crate::record::metrics`]), fed from the same outputs. `--from DIR`
//! reads a captured directory or a real sosreport through the same probes and
//! prints facts and counters once (no rates: a snapshot has no interval).

use super::{out, FaceError, FaceResult, EXIT_OK};
use crate::cli::{WatchArgs, WatchPlan};
use crate::probe::capture_dir::CaptureDir;
use crate::probe::live_host::LiveHost;
use crate::probe::sample::HostRole;
use crate::probe::snapshot::snapshot;
use crate::probe::system::{default_route_iface, HostInfo};
use crate::record::log::LogWriter;
use crate::record::metrics::MetricsHub;
use crate::record::pipeline::{Origin, Output, Pipeline};
use crate::record::text;
use crate::session::auth::load_token;
use crate::session::controller::Target;
use crate::session::outcome::EndReason;
use anyhow::Context;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// `wirescope watch`.
pub fn watch(args: WatchArgs, argv: Vec<String>) -> FaceResult {
    let (peer, plan, mut observe) = match args.resolve()? {
        WatchPlan::Capture { dir, ifaces } => return from_capture(&dir, &ifaces, args.json),
        WatchPlan::Live {
            peer,
            plan,
            observe,
        } => (peer, *plan, observe),
    };
    // Bound before any session or namespace exists: a bad address is the first error.
    let (metrics, endpoint) =
        super::metrics::serve("watch", HostRole::Local.name(), args.metrics)?.unzip();
    if let Some(e) = &endpoint {
        eprintln!(
            "wirescope: serving metrics at http://{}/metrics",
            e.local_addr()
        );
    }
    let log = super::run::open_log(args.log.as_deref(), args.json)?;
    let (opened, token) = open_target(&args, peer)?;
    if opened.is_none() && peer.is_none() && observe.ifaces.is_empty() {
        observe
            .ifaces
            .extend(default_route_iface(&LiveHost::default()));
    }
    let pair = match (&opened, peer) {
        (Some(o), _) => o.description.clone(),
        (None, Some(a)) => format!("remote agent {a}"),
        (None, None) => format!("this host only ({})", observe.ifaces.join(", ")),
    };
    let mut pipeline = Pipeline::new(Origin {
        command_line: argv,
        local: HostInfo::current(),
        pair,
        netns: opened
            .as_ref()
            .and_then(|o| o.pair.as_ref())
            .and_then(|p| p.netns()),
    });
    if let Some(w) = log {
        pipeline.record_to(w).context("cannot write the log")?;
    }
    if args.json {
        pipeline.mirror_to(LogWriter::stdout());
    }
    let rt = super::control_runtime("ws-runtime").context("cannot start the async runtime")?;
    let (tx, rx) = mpsc::channel(64);
    let cancel = CancellationToken::new();
    let (target, same_kernel, _pair) = match opened {
        Some(o) => (Some(o.target), o.same_kernel, o.pair),
        None => (peer.map(Target::Tcp), Vec::new(), None),
    };
    let task = match (target, token) {
        (Some(target), Some(token)) => rt.spawn(super::run::session(
            target,
            token,
            same_kernel,
            plan,
            observe,
            tx,
            cancel.clone(),
        )),
        _ => rt.spawn(super::local_session(
            plan,
            observe,
            None,
            tx,
            cancel.clone(),
        )),
    };
    let (failure, log_error) = consume(rx, &mut pipeline, args.json, &cancel, metrics.as_ref());
    let _ = rt.block_on(task);
    drop(endpoint);
    super::stdout_result()?;
    super::run::went_wrong(log_error, None, failure).unwrap_or(Ok(EXIT_OK))
}

/// The local pair (`--local-pair`) or the peer's token; neither for this host alone.
fn open_target(
    args: &WatchArgs,
    peer: Option<std::net::SocketAddr>,
) -> Result<
    (
        Option<crate::session::Opened>,
        Option<crate::session::auth::Token>,
    ),
    FaceError,
> {
    // The local pair is built here, on the main thread, before any runtime
    // (it moves this thread into the controller's namespace).
    let opened = if args.local_pair {
        Some(crate::session::open(
            &crate::session::plan::TargetChoice::LocalPair { queues: 4 },
            None,
        )?)
    } else {
        None
    };
    let token = match (&opened, peer) {
        (Some(o), _) => Some(o.token.clone()),
        (None, Some(_)) => Some(
            load_token(args.token_file.as_deref(), false)
                .map_err(anyhow::Error::from)?
                .0,
        ),
        (None, None) => None,
    };
    Ok((opened, token))
}

/// Show each event as the pipeline turns it into output, until the session
/// ends; a log that cannot be written cancels it. Returns the session's
/// failure and the log's error, if any.
fn consume(
    mut rx: mpsc::Receiver<crate::session::driver::SessionEvent>,
    pipeline: &mut Pipeline,
    json: bool,
    cancel: &CancellationToken,
    metrics: Option<&MetricsHub>,
) -> (Option<String>, Option<String>) {
    let mut failure = None;
    let mut log_error = None;
    // The consumer is part of the control path (see `run::consume`).
    crate::traffic::raise_priority();
    while let Some(ev) = rx.blocking_recv() {
        match pipeline.handle(ev) {
            Ok(o) => {
                if let Some(m) = metrics {
                    m.publish_output(&o);
                }
                show(&o, json, &mut failure)
            }
            Err(e) => {
                log_error.get_or_insert_with(|| e.to_string());
                cancel.cancel();
            }
        }
    }
    (failure, log_error)
}

fn show(o: &Output, json: bool, failure: &mut Option<String>) {
    match o {
        Output::Ready { ebpf, .. } if !json => super::report_ebpf(ebpf),
        Output::PlanStarted(_) if !json => out(&format!("{}\n", text::WATCH_HEADER)),
        Output::Interval {
            local,
            peer,
            changes,
            ..
        } if !json => {
            out(&text::watch_row(local.as_deref(), peer.as_deref()));
            for c in changes {
                out(&text::finding_change(c));
            }
        }
        // Ctrl-C is how a watch without --time ends: not a failure.
        Output::PointDone { outcome, .. } => match &outcome.end {
            EndReason::Completed | EndReason::Interrupted => {}
            EndReason::PeerLost(e) | EndReason::Failed(e) => {
                failure.get_or_insert_with(|| e.clone());
            }
        },
        Output::Failed(e) | Output::Refused(e) => {
            failure.get_or_insert_with(|| e.clone());
        }
        _ => {}
    }
}

/// What a capture lacks or hid, on stderr; an error when it describes no
/// host at all (an empty or unrelated directory must not pass as healthy).
pub(crate) fn report_capture(
    d: &CaptureDir,
    facts: &crate::probe::facts::HostFacts,
) -> Result<(), FaceError> {
    for s in d.skipped() {
        eprintln!("wirescope: skipped {s}");
    }
    if facts.is_empty() {
        return Err(FaceError::Usage(format!(
            "--from {}: holds none of the files of a host description (proc/, sys/, sos_commands/); give a `wirescope capture` directory or an unpacked sosreport",
            d.root().display()
        )));
    }
    for m in &facts.unavailable {
        eprintln!("wirescope: not in this capture: {m}");
    }
    Ok(())
}

/// `watch --from DIR`: facts (and, with --json, counters) of a capture, once.
fn from_capture(dir: &std::path::Path, ifaces: &[String], json: bool) -> FaceResult {
    let d = CaptureDir::new(dir);
    let snap = snapshot(&d, ifaces);
    report_capture(&d, &snap.facts)?;
    if json {
        let j = crate::record::schema::versioned_json(&snap, true)
            .context("cannot encode the snapshot")?;
        out(&format!("{j}\n"));
    } else {
        out(&text::facts_block(&snap.source, &snap.facts));
        if let Some(r) = &snap.rdma {
            out(&text::rdma_counter_lines(r));
        }
    }
    super::stdout_result()?;
    Ok(EXIT_OK)
}

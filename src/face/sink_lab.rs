//! `wirescope sink-lab` (hidden): a packet test between two interfaces of
//! this host — usually the two ends of a veth in two namespaces — with both
//! ends in this one process. `run --engine sink` runs the same engine on the
//! two nodes of a session; this face stays for what needs both ends in one
//! process: `cargo xtask bench sink` (trafgen and wirescope's generator
//! counted on the same veth) and the engine's own cleanup tests.
//!
//! A face only: it parses, prints (a table or JSON lines) and maps the end
//! to an exit code. Ctrl-C/SIGTERM end the point early; the engine detaches
//! its XDP program and closes its sockets, the summary is still printed and
//! the exit code is 130.

use crate::cli::sink_lab::*;
use crate::traffic::sink::lab::{run_point, End, LabInterval, Point};
use crate::traffic::sink::SinkSpec;
use std::sync::atomic::{AtomicBool, Ordering};

/// Run the command; the exit code.
static CANCEL: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    CANCEL.store(true, Ordering::Relaxed);
}

fn install_signal_handlers() {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let a = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for s in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        let _ = unsafe { sigaction(s, &a) };
    }
}

/// `wirescope sink-lab`.
pub fn command(a: SinkLabArgs) -> anyhow::Result<u8> {
    install_signal_handlers();
    let base = SinkSpec {
        mode: a.sink,
        fallback: !a.no_fallback,
        tx_path: a.tx_path,
        frame_size: a.frame_size,
        queues: a.queues,
        flows: a.flows,
        rate: a.rate,
        cpus: a.cpus.clone().map(|c| c.0).unwrap_or_default(),
        peer_cpus: a.peer_cpus.clone().map(|c| c.0).unwrap_or_default(),
        ..SinkSpec::default()
    };
    let mut specs = points(&a, &base).map_err(anyhow::Error::msg)?;
    // Both ends run on this host: default pinning keeps them on cores of
    // their own, as on the local pair. Without a generator here (another
    // tool sends), the sink's threads stay where the scheduler puts them.
    let usable = crate::traffic::sched::usable_cpus().unwrap_or_default();
    for s in &mut specs {
        s.validate()
            .map_err(|e| anyhow::anyhow!("invalid test: {e}"))?;
        s.one_host = true;
        if a.gen_iface.is_none() {
            s.default_pinning = false;
        }
        let _ = s.pin_on_one_host(&usable);
    }
    let mut rows = Vec::new();
    for spec in specs {
        if !a.json {
            if a.gen_iface.is_some() {
                outln!("{}", spec.pinning_line());
            } else {
                // Another tool sends: only the sink's threads are this run's.
                let c = spec.cpus_for(spec.sink_side());
                outln!(
                    "sink threads {} (no generator here)",
                    if c.is_empty() {
                        "unpinned".to_string()
                    } else {
                        format!("on CPU {}", crate::units::format_cpu_list(c))
                    }
                );
            }
        }
        let p = Point {
            spec: spec.clone(),
            sink: End {
                netns: a.sink_netns.clone(),
                iface: a.sink_iface.clone(),
            },
            gen: a.gen_iface.as_ref().map(|g| End {
                netns: a.gen_netns.clone(),
                iface: g.clone(),
            }),
            sender: a.from_ip,
            time: a.time,
            interval: a.interval,
        };
        let r = run_point(
            &p,
            &crate::probe::sink_path::PathProbe::opener(),
            &CANCEL,
            |i| print_interval(&a, i),
        )?;
        if a.json {
            let mut v = serde_json::to_value(&r.summary)?;
            v["type"] = "summary".into();
            v["sink_end"] = serde_json::to_value(&r.sink_end)?;
            outln!("{v}");
        } else {
            print_summary(&r.summary, &r.sink_end);
        }
        rows.push(r.summary);
        if CANCEL.load(Ordering::Relaxed) {
            break;
        }
    }
    if a.sweep.is_some() && !a.json {
        print_sweep(&rows);
    }
    Ok(if CANCEL.load(Ordering::Relaxed) {
        super::EXIT_INTERRUPTED
    } else {
        super::EXIT_OK
    })
}

fn mpps(pps: f64) -> String {
    format!("{:.3} Mpps", pps / 1e6)
}

fn print_interval(a: &SinkLabArgs, i: &LabInterval) {
    if a.json {
        if let Ok(mut v) = serde_json::to_value(i) {
            v["type"] = "interval".into();
            outln!("{v}");
        }
        return;
    }
    let s = &i.sink;
    let gen = i
        .gen
        .as_ref()
        .map(|g| {
            format!(
                " | gen {} ({}, err {})",
                mpps(g.rates.pps),
                g.path.name(),
                g.errors
            )
        })
        .unwrap_or_default();
    let cpu = s
        .cpu_pct
        .map(|c| format!(" cpu {c:.0}%"))
        .unwrap_or_default();
    outln!(
        "[{:>3}] sink {} L2 {} L1 {}{cpu} missing {} ring-full {}{gen}",
        i.index,
        mpps(s.rates.pps),
        s.rates.l2_bps,
        s.rates.l1_bps,
        s.missing,
        s.drops.ring_full,
    );
}

fn print_summary(
    s: &crate::traffic::sink::figures::SinkSummary,
    end: &crate::traffic::sink::SinkEnd,
) {
    outln!(
        "sink on {} ({} rx queues{})",
        end.iface,
        end.rx_queues,
        match end.zero_copy {
            Some(true) => ", zero-copy",
            Some(false) => ", copy mode",
            None => "",
        },
    );
    outp!("{}", crate::record::text::sink_lines(s));
}

fn print_sweep(rows: &[crate::traffic::sink::figures::SinkSummary]) {
    outp!("{}", crate::record::text::sink_sweep_table(rows));
}

//! The packet sink's rows for the TUI's views, as plain figures the views
//! format: its own count of its queues ([`own_queues`]) and the cores it
//! pins ([`placed_cores`]). Nothing here draws or reads a host.

use super::engine::SinkLive;
use super::figures::QueueFigures;
use super::SinkSpec;
use crate::traffic::EngineSpecOps;
use crate::traffic::{EngineInterval, OwnQueueRow, OwnQueues, PlacedCores};

/// The sink's queues over an interval: what it counted per queue (L2
/// frames), the core of its thread and that thread's CPU, ring-full and
/// NIC drops, and the interval's drops on the path.
pub fn own_queues(k: &SinkLive) -> OwnQueues {
    let f = &k.figures;
    let mut qs: Vec<&QueueFigures> = f.queues.iter().collect();
    qs.sort_by(|a, b| b.counted.cmp(&a.counted).then(a.queue.cmp(&b.queue)));
    let rows = qs
        .iter()
        .filter(|q| q.counted > 0 || q.ring_full > 0 || q.nic_drops.unwrap_or(0) > 0)
        .map(|q| OwnQueueRow {
            dir: "rx",
            queue: q.queue,
            rate_per_s: q.rates.pps,
            bps: q.rates.l2_bps.0,
            layer: "L2",
            drops: q.ring_full + q.nic_drops.unwrap_or(0),
            worker: format!(
                "sink{}{}{}{}",
                q.thread.map(|t| format!(" thread {t}")).unwrap_or_default(),
                q.cpu.map(|c| format!(" {c}")).unwrap_or_default(),
                q.cpu_pct.map(|c| format!(" {c:.0}%")).unwrap_or_default(),
                if q.ring_full > 0 {
                    format!(" ring full {}", q.ring_full)
                } else {
                    String::new()
                }
            ),
        })
        .collect();
    let d = &f.drops;
    let dropped = [
        (d.rx_dropped, "rx drops"),
        (d.softnet_dropped, "softnet"),
        (d.ring_full, "ring full"),
        (d.xdp_no_socket, "no XDP socket"),
    ]
    .into_iter()
    .filter(|(v, _)| *v > 0)
    .map(|(v, n)| format!("{n} {v}"))
    .chain(d.nic.iter().map(|(n, v)| format!("{n} {v}")))
    .collect();
    OwnQueues {
        counter: format!("packet sink ({})", f.mode.name()),
        iface: k.iface.clone(),
        rate_per_s: f.rates.pps,
        missing: f.missing,
        workers: ("sink threads", f.cpu_pct),
        rows,
        dropped,
    }
}

/// A packet test pinned to cores: the sink's, on the sink's host. The
/// spec's list, else the CPUs the sink chose itself (default pinning, from
/// its figures of this interval), with the interface it reads; None when
/// neither names a CPU.
pub fn placed_cores(spec: &SinkSpec, live: [Option<&EngineInterval>; 2]) -> Option<PlacedCores> {
    // The sink's figures of this interval: its interface and, per queue,
    // the CPU of the thread that reads it.
    let live = live.into_iter().flatten().find_map(|x| match x {
        EngineInterval::Sink(k) => Some(k),
        _ => None,
    });
    let side = spec.sink_side();
    let mut cpus = spec.cpus_for(side).to_vec();
    if cpus.is_empty() {
        for c in live
            .iter()
            .flat_map(|l| l.figures.queues.iter().filter_map(|q| q.cpu))
        {
            if !cpus.contains(&c) {
                cpus.push(c);
            }
        }
    }
    if cpus.is_empty() {
        return None;
    }
    Some(PlacedCores {
        label: "sink cores",
        side,
        cpus,
        iface: live.map(|l| l.iface.clone()),
    })
}

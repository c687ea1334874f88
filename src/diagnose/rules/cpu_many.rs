//! cpu.single-core-saturated when a few cores saturate together (a big
//! host whose busy rx queues land on a few of its cores): one finding that
//! names all of them, each core's evidence, and the fixes that spread the
//! work over more cores. The detection lives in [`super::cpu`].

use super::cpu::{net_rx_share, CoreTime, SaturatedWindow};
use super::{index_or_push, HostCtx, QueueTotals};
use crate::diagnose::finding::{Finding, Severity};
use crate::diagnose::impact::prior;
use crate::diagnose::util::{cpu_list, cpus_mask, local_cpus, mean, secs};
use crate::probe::ethtool_names::Dir;
use std::collections::BTreeMap;

/// The rx queues of `iface` busy over the window (at least half the
/// packets of its busiest queue), with their mean packets per second.
fn busy_rx_queues(ctx: &HostCtx, iface: &str) -> Vec<(u32, f64)> {
    let Some(per) = ctx.rx_queue_rates().get(iface) else {
        return Vec::new();
    };
    let k = ctx.active.len().max(1) as f64;
    let top = per.values().copied().fold(0.0, f64::max);
    if top <= 0.0 {
        return Vec::new();
    }
    per.iter()
        .filter(|(_, p)| **p * 2.0 >= top)
        .map(|(q, p)| (*q, p / k))
        .collect()
}

/// Every interface's rx queues with their packets per second summed over
/// the window (one pass over the window's queues, whatever asks). Summed
/// in a column by queue number (a map per insert was a tenth of a big
/// host's rules: 512 rx queues × 5 intervals), then made a map once.
pub(super) fn rx_queue_rates<'a>(ctx: &HostCtx<'a>) -> BTreeMap<&'a str, BTreeMap<u32, f64>> {
    let mut sums: Vec<(&str, QueueTotals<f64>)> = Vec::new();
    for (s, runs) in ctx.queue_runs() {
        for run in runs.iter().filter(|r| r.dir == Dir::Rx) {
            // One search per run of an interface's queues.
            let at = index_or_push(
                &mut sums,
                |e| e.0 == run.iface,
                || (run.iface, QueueTotals::default()),
            );
            for q in run.rows {
                // Packets over the interval's own length (the session's clock).
                let pps = q.packets.map_or(q.pps, |p| p as f64 / secs(s).max(1e-9));
                sums[at].1.add(q.queue, pps);
            }
        }
    }
    sums.into_iter()
        .map(|(iface, sums)| (iface, sums.into_map()))
        .collect()
}

/// The finding for several saturated cores (`cores` ≥ 2).
pub(super) fn many_cores_finding(ctx: &HostCtx, cores: &[(SaturatedWindow, CoreTime)]) -> Finding {
    let mut ids: Vec<u32> = cores.iter().map(|c| c.0.cpu).collect();
    ids.sort_unstable();
    let k = cores.len() as f64;
    let n_cpus = ctx.active.iter().map(|s| s.cpus.len()).max().unwrap_or(0);
    let mean = |f: &dyn Fn(&CoreTime) -> f64| cores.iter().map(|c| f(&c.1)).sum::<f64>() / k;
    let busy = mean(&|c| c.busy);
    let soft = mean(&|c| c.si + c.irq);
    let task = mean(&|c| c.user + c.sys);
    let others = others_mean_busy(ctx, &ids);
    let (kind, pct) = if soft >= task {
        ("softirq", soft)
    } else {
        ("user+sys", task)
    };
    // The IRQs steered to each core alone, by NIC.
    let per_core: Vec<(u32, Vec<(String, u32)>)> =
        ids.iter().map(|c| (*c, ctx.steering().to(*c).0)).collect();
    let by_nic = irqs_by_nic(ctx, &ids);
    // The NIC (of those) whose rx queues carry the most packets: the work.
    let carrier = carrier(ctx, &by_nic);
    let carrying = carrying(&by_nic, carrier.as_ref());
    let cpus = cpu_list(&ids);
    let src = "/proc/stat";
    let mut f = Finding::new(
        "cpu.single-core-saturated",
        Severity::Warn,
        ctx.host,
        format!("cpu{cpus}"),
        format!(
            "{} of {n_cpus} cores saturated ({kind} {pct:.0} %) while the other cores average {others:.0} %: cpu{cpus}{carrying}",
            ids.len()
        ),
        (busy / 100.0) * prior("cpu.single-core-saturated"),
    )
    .num("saturated cores", k, "", src)
    .num("other cores mean busy", others, "%", src)
    .num(
        "intervals saturated",
        cores.iter().map(|c| c.0.n).max().unwrap_or(0) as f64,
        "",
        "window",
    )
    .why("Each of these cores carries work that is serialised on it (a busy rx queue and its IRQ, a flow, a pinned thread): the traffic runs at the speed of these few cores while the others wait.");
    for (sat, time) in cores {
        f = core_evidence(f, sat, time, &per_core);
    }
    for x in fixes(
        ctx,
        &ids,
        carrier.as_ref().map(|c| (c.0.as_str(), &c.1[..])),
    ) {
        f = f.fix(x);
    }
    f
}

/// The mean busy percentage of the cores not in `ids` over the window.
fn others_mean_busy(ctx: &HostCtx, ids: &[u32]) -> f64 {
    let others = ctx.active.iter().flat_map(|s| s.cpus.iter());
    let busy = others
        .filter(|c| !ids.contains(&c.cpu.0))
        .map(|c| c.busy().0);
    mean(busy).unwrap_or(0.0)
}

/// The headline's tail that names what the saturated cores carry (the
/// carrier NIC's busy rx queues, the IRQs by NIC), or nothing.
fn carrying(by_nic: &BTreeMap<String, Vec<u32>>, carrier: Option<&Carrier>) -> String {
    let mut carrying = Vec::new();
    if let Some((nic, qs, pps)) = carrier {
        let q: Vec<u32> = qs.iter().map(|q| q.0).collect();
        carrying.push(format!(
            "{nic} rx queues {} ({:.2} Mpps)",
            cpu_list(&q),
            pps / 1e6
        ));
    }
    if !by_nic.is_empty() {
        let irqs: usize = by_nic.values().map(Vec::len).sum();
        carrying.push(format!(
            "{irqs} IRQs of {}",
            by_nic.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    if carrying.is_empty() {
        String::new()
    } else {
        format!(", carrying {}", carrying.join(" and "))
    }
}

/// One saturated core's evidence: its CPU time split, its share of the
/// NET_RX softirqs and the IRQs whose effective affinity is that core.
fn core_evidence(
    mut f: Finding,
    sat: &SaturatedWindow,
    time: &CoreTime,
    per_core: &[(u32, Vec<(String, u32)>)],
) -> Finding {
    let src = "/proc/stat";
    let c = sat.cpu;
    f = f
        .num(format!("cpu{c} busy"), time.busy, "%", src)
        .num(format!("cpu{c} softirq"), time.si, "%", src)
        .num(format!("cpu{c} irq"), time.irq, "%", src)
        .num(format!("cpu{c} user+sys"), time.user + time.sys, "%", src);
    if let Some(share) = mean(sat.on.iter().filter_map(|s| net_rx_share(s, c))) {
        f = f.num(
            format!("cpu{c} share of NET_RX softirqs"),
            share * 100.0,
            "%",
            "/proc/softirqs",
        );
    }
    let mine: Vec<u32> = per_core
        .iter()
        .find(|p| p.0 == c)
        .map(|p| p.1.iter().map(|i| i.1).collect())
        .unwrap_or_default();
    if !mine.is_empty() {
        f = f.text(
            format!("IRQs with effective affinity cpu{c}"),
            mine.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
            "/proc/irq/N/effective_affinity_list",
        );
    }
    f
}

/// The fixes for receive work held on the `hot` cores: those of
/// [`fixes`] for the NIC whose IRQs run there and whose rx queues carry the
/// most packets.
pub(super) fn spread_fixes(ctx: &HostCtx, hot: &[u32]) -> Vec<String> {
    let carrier = carrier(ctx, &irqs_by_nic(ctx, hot));
    fixes(ctx, hot, carrier.as_ref().map(|c| (c.0.as_str(), &c.1[..])))
}

/// The data IRQs steered to each of `hot` alone, by NIC.
fn irqs_by_nic(ctx: &HostCtx, hot: &[u32]) -> BTreeMap<String, Vec<u32>> {
    let mut by_nic: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for c in hot {
        for (nic, irq) in ctx.steering().to(*c).0 {
            by_nic.entry(nic).or_default().push(irq);
        }
    }
    by_nic
}

/// The NIC (of `by_nic`) whose busy rx queues carry the most packets: its
/// name, those queues and their packets per second in all.
type Carrier = (String, Vec<(u32, f64)>, f64);

fn carrier(ctx: &HostCtx, by_nic: &BTreeMap<String, Vec<u32>>) -> Option<Carrier> {
    by_nic
        .keys()
        .map(|nic| {
            let qs = busy_rx_queues(ctx, nic);
            let pps: f64 = qs.iter().map(|q| q.1).sum();
            (nic.clone(), qs, pps)
        })
        .filter(|c| c.2 > 0.0)
        .max_by(|a, b| a.2.total_cmp(&b.2))
}

/// Spread the busy queues' receive work over more cores: RPS of each busy
/// queue onto NIC-local cores that are not saturated, RSS over more of the
/// NIC's queues, more flows.
fn fixes(ctx: &HostCtx, hot: &[u32], carrier: Option<(&str, &[(u32, f64)])>) -> Vec<String> {
    let mut out = Vec::new();
    let nic = carrier.and_then(|(name, qs)| {
        let facts = ctx.facts?;
        let nic = facts.nics.iter().find(|n| n.name == name)?;
        Some((facts, nic, qs))
    });
    if let Some((facts, nic, qs)) = nic {
        let free: Vec<u32> = local_cpus(nic, facts)
            .into_iter()
            .filter(|c| !hot.contains(c))
            .collect();
        // Each busy queue gets its own group of idle local cores.
        let per = (free.len() / qs.len().max(1)).clamp(1, 8);
        for (i, (q, _)) in qs.iter().enumerate() {
            let group: Vec<u32> = free.iter().copied().skip(i * per).take(per).collect();
            if !group.is_empty() {
                out.push(format!(
                    "echo {} > /sys/class/net/{}/queues/rx-{q}/rps_cpus  # RPS: cpu{} share rx-{q}'s packet processing",
                    cpus_mask(&group),
                    nic.name,
                    cpu_list(&group)
                ));
            }
        }
        if let Some(n) = nic.rx_queues.filter(|n| *n as usize > qs.len()) {
            out.push(format!(
                "ethtool -X {} equal {n}  # RSS over all {n} rx queues (and their IRQs' cores), not {}",
                nic.name,
                qs.len()
            ));
        }
    }
    out.push("wirescope run -P <more flows than saturated cores>  # more flows hash to more queues and cores".into());
    out
}

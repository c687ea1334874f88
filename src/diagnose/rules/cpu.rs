//! CPU and softirq rules on live counters: cpu.single-core-saturated,
//! cpu.all-cores-saturated, softirq.concentrated, softnet.squeeze, softnet.backlog-drops.

use super::HostCtx;
use crate::diagnose::finding::{Finding, Severity};
use crate::diagnose::impact::prior;
use crate::diagnose::thresholds::Thresholds;
use crate::diagnose::util::{cores_mean, cpu_mask, data_irqs, local_cpus, mean, secs, spread};
use crate::probe::facts::HostFacts;
use crate::probe::sample::Sample;
use std::collections::BTreeMap;

/// All CPU/softirq rules of one host.
pub fn rules(ctx: &HostCtx, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(single_core(ctx, t));
    out.extend(all_cores(ctx, t));
    out.extend(softirq_concentrated(ctx, t));
    out.extend(squeeze(ctx, t));
    out.extend(backlog_drops(ctx));
    out
}

/// True when every core of the sample is at or above the saturation mark.
fn all_saturated(s: &Sample, t: &Thresholds) -> bool {
    !s.cpus.is_empty() && s.cpus.iter().all(|c| c.busy().0 >= t.core_saturated_pct)
}

/// cpu.all-cores-saturated: every core ≥ the saturation mark, sustained. The
/// host is CPU-bound as a whole (no single core to relieve): say where the
/// time goes and what buys cycles back.
fn all_cores(ctx: &HostCtx, t: &Thresholds) -> Option<Finding> {
    let on: Vec<&&Sample> = ctx.active.iter().filter(|s| all_saturated(s, t)).collect();
    if on.is_empty() || on.len() < ctx.need(t) {
        return None;
    }
    let cores = on.iter().map(|s| s.cpus.len()).max().unwrap_or(0);
    let n = on.iter().map(|s| s.cpus.len()).sum::<usize>().max(1) as f64;
    let mean = |f: &dyn Fn(&crate::probe::cpu::CpuSample) -> f64| {
        on.iter().flat_map(|s| s.cpus.iter()).map(f).sum::<f64>() / n
    };
    let busy = mean(&|c| c.busy().0);
    let user = mean(&|c| c.user.0 + c.nice.0);
    let sys = mean(&|c| c.system.0);
    let soft = mean(&|c| c.softirq.0 + c.irq.0);
    let gro_off = ctx.facts.is_some_and(|f| {
        f.nics.iter().any(|nic| {
            nic.features
                .value()
                .is_some_and(|fs| fs.on("generic-receive-offload") == Some(false))
        })
    });
    // The local pair's two ends share one kernel and its cores: saturating
    // them is what any fast test there does, not a finding about a host.
    let (sev, also) = if ctx.shares_kernel() {
        (Severity::Info, "; both ends of the pair run on these cores")
    } else {
        (Severity::Warn, "")
    };
    let mut f = Finding::rule(
        "cpu.all-cores-saturated",
        sev,
        ctx.host,
        "",
        format!(
            "all {cores} cores are {busy:.0} % busy: the host is CPU-bound (user {user:.0} %, sys {sys:.0} %, irq+softirq {soft:.0} %){also}"
        ),
    )
    .num("cores", cores as f64, "", "/proc/stat")
    .num("mean busy", busy, "%", "/proc/stat")
    .num("user", user, "%", "/proc/stat")
    .num("sys", sys, "%", "/proc/stat")
    .num("irq+softirq", soft, "%", "/proc/stat")
    .num("saturated intervals", on.len() as f64, "", "window")
    .why("Every core is busy, so no IRQ or thread placement can help: the work per byte must shrink or more cores must do it. sys time is copies and the TCP stack, irq+softirq is packet processing.")
    .fix("run on a host with more cores, or fewer connections than cores so the stack and the copies do not compete");
    if soft >= sys && gro_off {
        f = f.fix("ethtool -K IFACE gro on  # fewer, larger packets through the stack");
    }
    if let Some(fix) = ctx
        .spec
        .and_then(|s| s.send_copy_fix())
        .filter(|_| sys > soft)
    {
        f = f.fix(fix);
    }
    Some(f)
}

/// How many cores of `n` may saturate together and still be "a few
/// cores" that hold the host back while the rest have room: one on a small
/// host, one in sixteen on a big one (8 of 128, 16 of 256).
pub(super) fn few_cores(n: usize) -> usize {
    (n / 16).max(1)
}

/// The saturated cores of a sample: the few cores (see [`few_cores`]) at
/// or above the threshold that run some of the network path while the
/// others have headroom — or, when the test's engine threads are pinned
/// (`--cpus`, or by a packet test's ends themselves) and every core they
/// may use is saturated, the busiest of those: the test cannot use the
/// others, whatever else keeps them busy. An engine that busy-polls its
/// pinned cores saturates them by design: they are left out, and the
/// other cores are judged as usual. Too many saturated cores for "a few":
/// the busiest one alone, judged against all the others (as on a small
/// host).
fn saturated_cores(s: &Sample, t: &Thresholds, pinned: &[u32], busy_polls: bool) -> Vec<u32> {
    if s.cpus.len() < 2 {
        return Vec::new();
    }
    let busy = |cpu: u32| s.cpus.iter().find(|c| c.cpu.0 == cpu).map(|c| c.busy().0);
    let candidate = |c: &&crate::probe::cpu::CpuSample| !(busy_polls && pinned.contains(&c.cpu.0));
    if !busy_polls
        && !pinned.is_empty()
        && pinned.len() < s.cpus.len()
        && pinned
            .iter()
            .all(|c| busy(*c).is_some_and(|b| b >= t.core_saturated_pct))
    {
        // The caller orders them busiest over the window first, so every
        // interval names the same core.
        return pinned.first().copied().into_iter().collect();
    }
    // The cores that run some of the network path (see
    // `kernel_path_min_pct`): a core saturated by user time alone is
    // another process's.
    let hot: Vec<u32> = s
        .cpus
        .iter()
        .filter(candidate)
        .filter(|c| c.kernel().0 >= t.kernel_path_min_pct && c.busy().0 >= t.core_saturated_pct)
        .map(|c| c.cpu.0)
        .collect();
    let others_mean = |set: &[u32]| cores_mean(s, |c| !set.contains(&c), |c| c.busy().0);
    if hot.len() > 1 && hot.len() <= few_cores(s.cpus.len()) {
        return if others_mean(&hot) < t.others_headroom_pct {
            hot
        } else {
            Vec::new()
        };
    }
    let Some(top) = s
        .cpus
        .iter()
        .filter(candidate)
        .filter(|c| c.kernel().0 >= t.kernel_path_min_pct)
        .max_by(|a, b| a.busy().0.total_cmp(&b.busy().0))
    else {
        return Vec::new();
    };
    if top.busy().0 < t.core_saturated_pct || others_mean(&[top.cpu.0]) >= t.others_headroom_pct {
        return Vec::new();
    }
    vec![top.cpu.0]
}

pub(super) fn net_rx_share(s: &Sample, cpu: u32) -> Option<f64> {
    let total: u64 = s.softirqs.iter().map(|c| c.net_rx).sum();
    let mine = s.softirqs.iter().find(|c| c.cpu.0 == cpu)?.net_rx;
    (total > 0).then(|| mine as f64 / total as f64)
}

/// cpu.single-core-saturated: find the cores, judge whose work saturates
/// them, name what runs there, then write the finding — one finding for one
/// core, one finding naming all of them for a few.
fn single_core(ctx: &HostCtx, t: &Thresholds) -> Option<Finding> {
    let cores: Vec<(SaturatedWindow, CoreTime)> = saturated_windows(ctx, t)
        .into_iter()
        .map(|w| {
            let time = CoreTime::mean_over(&w.on, w.cpu);
            (w, time)
        })
        .filter(|(w, time)| saturated_by_the_test(ctx, t, w, time))
        .collect();
    match cores.as_slice() {
        [] => None,
        [(sat, time)] => Some(single_core_finding(ctx, t, sat, time)),
        _ => Some(super::cpu_many::many_cores_finding(ctx, &cores)),
    }
}

/// A core saturated in enough active intervals (at least the rule's
/// count), the intervals it was, and the test's pinned cores busiest first.
pub(super) struct SaturatedWindow<'a> {
    pub(super) cpu: u32,
    pub(super) n: usize,
    pinned: Vec<u32>,
    pub(super) on: Vec<&'a &'a Sample>,
}

/// The saturated cores of the window: the one saturated in the most
/// intervals first, then every other core saturated in enough of them.
fn saturated_windows<'a>(ctx: &'a HostCtx, t: &Thresholds) -> Vec<SaturatedWindow<'a>> {
    let mut pinned = ctx.test_cpus();
    let mean_busy = |cpu: u32| {
        ctx.active
            .iter()
            .filter_map(|s| s.cpus.iter().find(|c| c.cpu.0 == cpu).map(|c| c.busy().0))
            .sum::<f64>()
    };
    pinned.sort_by(|a, b| mean_busy(*b).total_cmp(&mean_busy(*a)));
    let busy_polls = ctx
        .spec
        .is_some_and(|s| crate::traffic::slice(s.kind()).busy_polls());
    let per: Vec<Vec<u32>> = ctx
        .active
        .iter()
        .map(|s| saturated_cores(s, t, &pinned, busy_polls))
        .collect();
    let mut count: BTreeMap<u32, usize> = BTreeMap::new();
    for c in per.iter().flatten() {
        *count.entry(*c).or_insert(0) += 1;
    }
    let Some((&first, &n)) = count.iter().max_by_key(|e| e.1) else {
        return Vec::new();
    };
    if n < ctx.need(t) {
        return Vec::new();
    }
    let cores = std::iter::once(first).chain(
        count
            .iter()
            .filter(|(c, n)| **c != first && **n >= ctx.need(t))
            .map(|(c, _)| *c),
    );
    cores
        .map(|cpu| {
            let on: Vec<&&Sample> = ctx
                .active
                .iter()
                .zip(&per)
                .filter(|(_, p)| p.contains(&cpu))
                .map(|(s, _)| s)
                .collect();
            SaturatedWindow {
                cpu,
                n: on.len(),
                pinned: pinned.clone(),
                on,
            }
        })
        .collect()
}

/// One core's mean time split over the saturated intervals, and the other
/// cores' mean busy.
pub(super) struct CoreTime {
    pub(super) busy: f64,
    pub(super) user: f64,
    pub(super) sys: f64,
    pub(super) si: f64,
    pub(super) irq: f64,
    others: f64,
}

impl CoreTime {
    fn mean_over(on: &[&&Sample], cpu: u32) -> CoreTime {
        let k = on.len() as f64;
        let mean = |f: &dyn Fn(&Sample) -> f64| on.iter().map(|s| f(s)).sum::<f64>() / k;
        let pick = |s: &Sample, f: &dyn Fn(&crate::probe::cpu::CpuSample) -> f64| {
            s.cpus.iter().find(|c| c.cpu.0 == cpu).map(f).unwrap_or(0.0)
        };
        CoreTime {
            busy: mean(&|s| pick(s, &|c| c.busy().0)),
            user: mean(&|s| pick(s, &|c| c.user.0 + c.nice.0)),
            sys: mean(&|s| pick(s, &|c| c.system.0)),
            si: mean(&|s| pick(s, &|c| c.softirq.0)),
            irq: mean(&|s| pick(s, &|c| c.irq.0)),
            others: mean(&|s| cores_mean(s, |c| c != cpu, |c| c.busy().0)),
        }
    }
}

/// Whether the saturation is the test's to explain, not another process's.
fn saturated_by_the_test(
    ctx: &HostCtx,
    t: &Thresholds,
    sat: &SaturatedWindow,
    time: &CoreTime,
) -> bool {
    let (cpu, kernel) = (sat.cpu, time.sys + time.si + time.irq);
    // A core the test's processes could not have kept busy: in the
    // intervals it was saturated they used less than half a core in all (a
    // shaped or paced test on a busy machine), and its time is mostly user
    // time — another process's, not the packet path's softirq and IRQ work
    // nor kernel threads' (threaded NAPI, crypto), which show as system
    // time. A core the test is pinned to stays the test's: it waits for it.
    if !sat.pinned.contains(&cpu)
        && time.user >= kernel
        && time.si + time.irq < t.softirq_heavy_pct
        && ctx
            .test_process_cpu(&sat.on)
            .is_some_and(|p| p < t.test_cpu_min_pct)
    {
        return false;
    }
    // An engine that busy-polls its cores by design (a packet test's sink
    // and generator; its own rules judge those: generator-bound,
    // queue-overrun) leaves the other cores only the kernel's packet
    // path — one saturated by user time runs someone else's work.
    let engine = ctx.spec.map(|s| crate::traffic::slice(s.kind()));
    if engine.is_some_and(|e| e.busy_polls())
        && (sat.pinned.contains(&cpu) || kernel < t.softirq_heavy_pct)
    {
        return false;
    }
    // An engine whose work on a core is kernel work (a TCP test: system
    // calls, copies, softirq): a core it is not pinned to whose time is
    // mostly user time is saturated by another process, which it only shares.
    !(engine.is_some_and(|e| e.works_in_kernel())
        && !sat.pinned.contains(&cpu)
        && time.user > kernel)
}

/// What runs on the saturated core: engine threads, NET_RX softirqs, rx
/// queues (eBPF), IRQs, RPS, the test's one flow.
struct RunsThere {
    what: Vec<String>,
    engine: Vec<u32>,
    rx_share: Option<f64>,
    net_rx_time: Option<f64>,
    queues: Vec<(String, u32, f64)>,
    irqs: Vec<(String, u32)>,
    rps: Vec<(String, u32)>,
    one_flow: bool,
}

impl RunsThere {
    fn gather(ctx: &HostCtx, sat: &SaturatedWindow, time: &CoreTime) -> RunsThere {
        let (cpu, on) = (sat.cpu, &sat.on);
        let rx_share = mean(on.iter().filter_map(|s| net_rx_share(s, cpu)));
        let mut what = Vec::new();
        let engine = ctx.engine_cpus();
        if engine.contains(&cpu) {
            what.push("engine threads (pinned with --cpus)".to_string());
        }
        if let Some(r) = rx_share {
            if r >= 0.5 {
                what.push(format!("{:.0} % of NET_RX softirqs", r * 100.0));
            }
        }
        // eBPF, when present: the rx queues whose packets this core handled
        // (most of them), and its exact NET_RX softirq time.
        let queues = rx_queues_on(on, cpu);
        if !queues.is_empty() {
            what.push(format!(
                "the rx path of {}",
                queues
                    .iter()
                    .map(|(i, q, _)| format!("{i} queue {q}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let net_rx_time = mean(on.iter().filter_map(|s| {
            let t = s.softirq_time.iter().find(|t| t.cpu.0 == cpu)?;
            Some(t.net_rx_ns as f64 / 1e9 / secs(s).max(1e-9) * 100.0)
        }));
        let (irqs, rps) = ctx.steering().to(cpu);
        if !irqs.is_empty() {
            what.push(format!(
                "IRQ {}",
                irqs.iter()
                    .map(|i| i.1.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        if !rps.is_empty() {
            what.push(format!(
                "RPS of {}",
                rps.iter()
                    .map(|r| format!("{} rx-{}", r.0, r.1))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        // One flow into (or out of) this host is hashed to one queue and
        // processed on one core: no setting spreads it, more flows do.
        let one_flow = test_flows(ctx) == Some(1) && engine.is_empty();
        if one_flow {
            what.push("the test's one flow, which one core cannot go past".into());
        }
        if what.is_empty() {
            what.push(if time.user + time.sys >= time.si + time.irq {
                "engine/kernel send-receive path (user+sys)".into()
            } else {
                "softirq work".into()
            });
        }
        RunsThere {
            what,
            engine,
            rx_share,
            net_rx_time,
            queues,
            irqs,
            rps,
            one_flow,
        }
    }
}

/// The data IRQs whose effective affinity is only `cpu`, and the rx queues
/// whose RPS mask is only `cpu`, by interface.
pub(super) type Steered = (Vec<(String, u32)>, Vec<(String, u32)>);

/// The one CPU a sysfs hex mask names, without listing its bits (a 256-CPU
/// mask per rx queue, 512 queues); None for no CPU, several or bad text.
fn one_cpu_of_mask(mask: &str) -> Option<u32> {
    let mut found = None;
    let mut bit = 0u32;
    for word in mask.trim().rsplit(',') {
        for ch in word.chars().rev() {
            let d = ch.to_digit(16)?;
            match (d.count_ones(), found) {
                (0, _) => {}
                (1, None) => found = Some(bit + d.trailing_zeros()),
                _ => return None,
            }
            bit += 4;
        }
    }
    found
}

/// [`Steered`] of every CPU, from one pass over the host's IRQs and RPS
/// masks (8 NICs × 65 IRQs are parsed once, not once per saturated core).
#[derive(Debug, Default)]
pub(super) struct Steering(BTreeMap<u32, Steered>);

impl Steering {
    /// Index the facts' data IRQs and RPS masks by the one CPU they name.
    pub(super) fn of(facts: Option<&HostFacts>) -> Steering {
        let mut by: BTreeMap<u32, Steered> = BTreeMap::new();
        for nic in facts.iter().flat_map(|f| &f.nics) {
            for (i, c) in data_irqs(nic) {
                if let [cpu] = c[..] {
                    by.entry(cpu).or_default().0.push((nic.name.clone(), i.irq));
                }
            }
            for m in &nic.rps {
                if let Some(cpu) = one_cpu_of_mask(&m.mask) {
                    by.entry(cpu)
                        .or_default()
                        .1
                        .push((nic.name.clone(), m.queue));
                }
            }
        }
        Steering(by)
    }

    /// What is steered to `cpu` alone.
    pub(super) fn to(&self, cpu: u32) -> Steered {
        self.0.get(&cpu).cloned().unwrap_or_default()
    }
}

fn single_core_finding(
    ctx: &HostCtx,
    t: &Thresholds,
    sat: &SaturatedWindow,
    time: &CoreTime,
) -> Finding {
    let runs = RunsThere::gather(ctx, sat, time);
    let (cpu, on) = (sat.cpu, &sat.on);
    let CoreTime {
        busy,
        user,
        sys,
        si,
        irq,
        others,
    } = *time;
    let src = "/proc/stat";
    let mut f = Finding::new(
        "cpu.single-core-saturated",
        Severity::Warn,
        ctx.host,
        format!("cpu{cpu}"),
        if others >= t.others_headroom_pct {
            format!("cpu{cpu} is {busy:.0} % busy and the test is pinned there (the other cores, {others:.0} % busy, run other work): runs {}", runs.what.join("; "))
        } else {
            format!("cpu{cpu} is {busy:.0} % busy while the other cores average {others:.0} %: runs {}", runs.what.join("; "))
        },
        (busy / 100.0) * prior("cpu.single-core-saturated") + 0.1 * runs.rx_share.unwrap_or(0.0),
    )
    .num(format!("cpu{cpu} busy"), busy, "%", src)
    .num(format!("cpu{cpu} user"), user, "%", src)
    .num(format!("cpu{cpu} system"), sys, "%", src)
    .num(format!("cpu{cpu} softirq"), si, "%", src)
    .num(format!("cpu{cpu} irq"), irq, "%", src)
    .num("other cores mean busy", others, "%", src)
    .num("intervals saturated", sat.n as f64, "", "window")
    .why("Work that is serialised on one core (one flow, one queue, one IRQ or a pinned thread) runs at that core's speed, whatever the other cores could do.");
    if let Some(r) = runs.rx_share {
        f = f.num(
            format!("cpu{cpu} share of NET_RX softirqs"),
            r * 100.0,
            "%",
            "/proc/softirqs",
        );
    }
    if let Some(p) = runs.net_rx_time {
        f = f.num(
            format!("cpu{cpu} NET_RX softirq time"),
            p,
            "%",
            "eBPF softirq_entry/exit (exact)",
        );
    }
    let matrix_src = if on.iter().any(|s| s.ebpf_observed.is_some()) {
        "eBPF netif_receive_skb (sampled)"
    } else {
        "eBPF netif_receive_skb"
    };
    for (iface, q, share) in &runs.queues {
        f = f.num(
            format!("{iface} rx queue {q} packets handled on cpu{cpu}"),
            share * 100.0,
            "%",
            matrix_src,
        );
    }
    for (nic, irq) in &runs.irqs {
        f = f.text(
            format!("IRQ {irq} ({nic}) effective affinity"),
            format!("cpu{cpu}"),
            format!("/proc/irq/{irq}/effective_affinity_list"),
        );
    }
    let engine = &runs.engine;
    if !engine.is_empty() {
        f = f.text(
            "engine threads pinned to",
            crate::diagnose::util::cpu_list(engine),
            "test spec --cpus",
        );
    }
    if runs.one_flow {
        f = f.fix(format!(
            "wirescope run -P {}  # one flow runs on one core; more flows spread over the queues and cores",
            flows_to_try(ctx.facts)
        ));
    }
    for x in fixes(ctx.facts, cpu, &runs.irqs, &runs.rps, !engine.is_empty()) {
        if !(runs.one_flow && x.starts_with("wirescope run -P")) {
            f = f.fix(x);
        }
    }
    f
}

/// How many flows to try when one flow is held to one core: one per rx
/// queue of the busiest NIC, no more than the host's cores, 2 to 8.
fn flows_to_try(facts: Option<&HostFacts>) -> usize {
    let Some(f) = facts else { return 4 };
    let queues = f.nics.iter().filter_map(|n| n.rx_queues).max().unwrap_or(4) as usize;
    queues.min(f.cpus.max(2)).clamp(2, 8)
}

fn fixes(
    facts: Option<&HostFacts>,
    cpu: u32,
    irqs: &[(String, u32)],
    rps: &[(String, u32)],
    pinned: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    let others: Vec<u32> = facts
        .map(|f| (0..f.cpus as u32).filter(|c| *c != cpu).collect())
        .unwrap_or_default();
    if let Some(facts) = facts {
        for nic in &facts.nics {
            let mine: Vec<u32> = irqs
                .iter()
                .filter(|i| i.0 == nic.name)
                .map(|i| i.1)
                .collect();
            if mine.len() > 1 {
                let local = local_cpus(nic, facts);
                for (irq, c) in mine.iter().zip(spread(mine.len(), &local)) {
                    out.push(format!("echo {c} > /proc/irq/{irq}/smp_affinity_list"));
                }
            }
            let qs: Vec<u32> = rps
                .iter()
                .filter(|r| r.0 == nic.name)
                .map(|r| r.1)
                .collect();
            for (q, c) in qs.iter().zip(spread(qs.len(), &others)) {
                out.push(format!(
                    "echo {} > /sys/class/net/{}/queues/rx-{q}/rps_cpus",
                    cpu_mask(c),
                    nic.name
                ));
            }
        }
    }
    if pinned {
        out.push("wirescope run --cpus <cores other than the IRQ/softirq cores>".into());
    }
    out.push("wirescope run -P <number of queues>  # spread flows over queues and cores".into());
    out
}

/// softirq.concentrated: NET_RX softirqs held on a few cores while the NIC
/// has several queues — ≥ 90 % of them on one core, or (a big host, see
/// [`few_cores`]) at least `net_rx_group_share` of them on a few cores that
/// are all saturated with softirq work.
fn softirq_concentrated(ctx: &HostCtx, t: &Thresholds) -> Option<Finding> {
    let facts = ctx.facts?;
    let queues = facts
        .nics
        .iter()
        .map(|n| n.rx_queues.unwrap_or(1))
        .max()
        .unwrap_or(1);
    if queues < 2 || facts.cpus < 2 {
        return None;
    }
    let (cores, share) = net_rx_concentrated_on(ctx, t)?;
    // The mean load of the cores NET_RX concentrates on (`mine`), and of
    // the others: per interval over the cores, then over the intervals.
    let mean_of = |f: &dyn Fn(&crate::probe::cpu::CpuSample) -> f64, mine: bool| {
        mean(
            ctx.active
                .iter()
                .map(|s| cores_mean(s, |c| cores.contains(&c) == mine, f)),
        )
        .unwrap_or(0.0)
    };
    let busy = mean_of(&|c| c.busy().0, true);
    let softirq = mean_of(&|c| c.softirq.0, true);
    let others = mean_of(&|c| c.busy().0, false);
    // It limits the test when that core is saturated, softirq work is a
    // large part of what saturates it, and other cores have room to take
    // some of it (IRQ affinity, RPS). Otherwise it is worth knowing only.
    let sev = if busy >= t.core_saturated_pct
        && softirq >= t.softirq_heavy_pct
        && others < t.others_headroom_pct
    {
        Severity::Warn
    } else {
        Severity::Info
    };
    let on = format!("cpu{}", crate::diagnose::util::cpu_list(&cores));
    let n_cpus = ctx
        .active
        .iter()
        .map(|s| s.cpus.len())
        .max()
        .unwrap_or(facts.cpus);
    let title = if cores.len() == 1 {
        format!(
            "{:.0} % of NET_RX softirqs run on {on} although the NIC has {queues} queues",
            share * 100.0
        )
    } else {
        format!(
            "{:.0} % of NET_RX softirqs run on {on}, {} of {n_cpus} cores, all saturated ({softirq:.0} % softirq), although the NIC has {queues} queues",
            share * 100.0,
            cores.len()
        )
    };
    let mut f = Finding::new(
        "softirq.concentrated",
        sev,
        ctx.host,
        on.clone(),
        title,
        share * prior("softirq.concentrated") * if sev == Severity::Info { 0.5 } else { 1.0 },
    )
    .num(
        format!("{on} share of NET_RX"),
        share * 100.0,
        "%",
        "/proc/softirqs",
    )
    .num(format!("{on} busy"), busy, "%", "/proc/stat")
    .num(format!("{on} softirq"), softirq, "%", "/proc/stat")
    .num("other cores mean busy", others, "%", "/proc/stat")
    .num("rx queues", queues as f64, "", "sysfs queues/");
    // The why and fixes: for one core, or for a few.
    if cores.len() == 1 {
        f = f.why("Receive processing of every queue lands on one core (IRQs or RPS steer there): that core caps the receive rate.");
        f.fix.extend(spread_fixes(facts));
    } else {
        f = f.why("The receive traffic reaches only a few queues, whose IRQs and softirqs run on a few cores: those cores cap the receive rate while the others idle.");
        f.fix.extend(super::cpu_many::spread_fixes(ctx, &cores));
    }
    Some(f)
}

/// The cores NET_RX softirqs concentrate on in enough busy intervals, and
/// their mean share of them there: the one core with ≥ `net_rx_share`, or
/// a few saturated ones with ≥ `net_rx_group_share`. None when the test has
/// one flow (hashed to one queue and one core by design: nothing to spread,
/// nothing to report).
fn net_rx_concentrated_on(ctx: &HostCtx, t: &Thresholds) -> Option<(Vec<u32>, f64)> {
    let mut count: BTreeMap<Vec<u32>, usize> = BTreeMap::new();
    let mut share_sum: BTreeMap<Vec<u32>, f64> = BTreeMap::new();
    for s in &ctx.active {
        let total: u64 = s.softirqs.iter().map(|c| c.net_rx).sum();
        if s.softirqs.len() < 2 || (total as f64) / secs(s).max(1e-9) < t.net_rx_min_per_s {
            continue;
        }
        let Some(top) = s.softirqs.iter().max_by_key(|c| c.net_rx) else {
            continue;
        };
        let share = top.net_rx as f64 / total as f64;
        let (cores, share) = if share >= t.net_rx_share {
            (vec![top.cpu.0], share)
        } else {
            let hot = softirq_saturated(s, t);
            let mine: u64 = s
                .softirqs
                .iter()
                .filter(|c| hot.contains(&c.cpu.0))
                .map(|c| c.net_rx)
                .sum();
            let share = mine as f64 / total as f64;
            if hot.len() < 2
                || hot.len() > few_cores(s.softirqs.len())
                || share < t.net_rx_group_share
            {
                continue;
            }
            (hot, share)
        };
        *count.entry(cores.clone()).or_insert(0) += 1;
        *share_sum.entry(cores).or_insert(0.0) += share;
    }
    let (cores, &n) = count.iter().max_by_key(|e| e.1)?;
    if n < ctx.need(t) {
        return None;
    }
    let flows = test_flows(ctx);
    if flows.is_some_and(|f| f < 2) {
        return None;
    }
    Some((
        cores.clone(),
        share_sum.get(cores).copied().unwrap_or(0.0) / n as f64,
    ))
}

/// The cores of a sample saturated (≥ `core_saturated_pct`) with at least
/// `softirq_heavy_pct` softirq time.
fn softirq_saturated(s: &Sample, t: &Thresholds) -> Vec<u32> {
    s.cpus
        .iter()
        .filter(|c| c.busy().0 >= t.core_saturated_pct && c.softirq.0 >= t.softirq_heavy_pct)
        .map(|c| c.cpu.0)
        .collect()
}

/// Commands that spread receive processing: each NIC's data IRQs over its
/// local cores, or (a NIC without IRQs) its RPS masks over all cores.
fn spread_fixes(facts: &HostFacts) -> Vec<String> {
    let mut out = Vec::new();
    for nic in &facts.nics {
        let irqs = data_irqs(nic);
        let local = local_cpus(nic, facts);
        for ((irq, _), c) in irqs.iter().zip(spread(irqs.len(), &local)) {
            out.push(format!(
                "echo {c} > /proc/irq/{}/smp_affinity_list",
                irq.irq
            ));
        }
        if irqs.is_empty() {
            let all: Vec<u32> = (0..facts.cpus as u32).collect();
            for (m, c) in nic.rps.iter().zip(spread(nic.rps.len(), &all)) {
                out.push(format!(
                    "echo {} > /sys/class/net/{}/queues/rx-{}/rps_cpus",
                    cpu_mask(c),
                    nic.name,
                    m.queue
                ));
            }
        }
    }
    out
}

/// The test's flows that this host receives (data connections; a host that
/// only sends receives its flows' ACKs, so all of them count). None without
/// a test (`watch`) or for engines without data connections.
fn test_flows(ctx: &HostCtx) -> Option<usize> {
    let spec = ctx.spec?;
    let roles = spec.conn_roles(ctx.side());
    if roles.is_empty() {
        return None;
    }
    let received = roles
        .iter()
        .filter(|r| **r == crate::traffic::ConnRole::Receiver)
        .count();
    Some(if received > 0 { received } else { roles.len() })
}

/// softnet.squeeze: time_squeeze rising (net_rx_action ran out of budget).
fn squeeze(ctx: &HostCtx, t: &Thresholds) -> Option<Finding> {
    let mut n = 0;
    let mut total = 0u64;
    for s in &ctx.active {
        let sq: u64 = s.softnet.iter().map(|c| c.delta.time_squeeze as u64).sum();
        total += sq;
        if sq as f64 / secs(s).max(1e-9) >= t.squeeze_per_s {
            n += 1;
        }
    }
    if n < ctx.need(t) {
        return None;
    }
    let secs_all: f64 = ctx.active.iter().map(|s| secs(s)).sum::<f64>().max(1e-9);
    let budget = sysctl(ctx, "net.core.netdev_budget", 300);
    let usecs = sysctl(ctx, "net.core.netdev_budget_usecs", 2000);
    Some(
        Finding::rule(
            "softnet.squeeze",
            Severity::Warn,
            ctx.host,
            "",
            format!("time_squeeze rising: {:.0}/s (netdev_budget {budget})", total as f64 / secs_all),
        )
        .num("time_squeeze", total as f64 / secs_all, "/s", "/proc/net/softnet_stat")
        .num("net.core.netdev_budget", budget as f64, "packets", "sysctl")
        .num("net.core.netdev_budget_usecs", usecs as f64, "us", "sysctl")
        .why("The receive softirq stopped with work left (budget or time exhausted); packets wait for the next round or for ksoftirqd.")
        .fix(format!("sysctl -w net.core.netdev_budget={} net.core.netdev_budget_usecs={}", budget * 2, usecs * 2)),
    )
}

/// A numeric sysctl of the host, or `dflt` when the facts do not say.
fn sysctl(ctx: &HostCtx, name: &str, dflt: u64) -> u64 {
    ctx.facts
        .and_then(|f| f.sysctls.get(name))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(dflt)
}

/// softnet.backlog-drops: softnet `dropped` rising (netdev_max_backlog overflow).
fn backlog_drops(ctx: &HostCtx) -> Option<Finding> {
    let mut per: BTreeMap<u32, u64> = BTreeMap::new();
    for s in &ctx.active {
        for c in &s.softnet {
            *per.entry(c.cpu.0).or_insert(0) += c.delta.dropped as u64;
        }
    }
    let total: u64 = per.values().sum();
    if total == 0 {
        return None;
    }
    let backlog = sysctl(ctx, "net.core.netdev_max_backlog", 1000);
    let mut f = Finding::rule(
        "softnet.backlog-drops",
        Severity::Warn,
        ctx.host,
        "",
        format!("{total} packets dropped at the per-CPU backlog (netdev_max_backlog {backlog})"),
    )
    .num("net.core.netdev_max_backlog", backlog as f64, "packets", "sysctl")
    .why("The per-CPU input queue (RPS / non-NAPI / veth path) overflowed: packets are lost before TCP sees them.")
    .fix(format!("sysctl -w net.core.netdev_max_backlog={}", (backlog * 4).max(4096)));
    for (cpu, d) in per.iter().filter(|e| *e.1 > 0) {
        f = f.num(
            format!("cpu{cpu} dropped"),
            *d as f64,
            "packets",
            "/proc/net/softnet_stat",
        );
    }
    Some(f)
}

/// Rx queues (iface, queue, share) of which `cpu` handled at least half of the
/// packets over `samples`, busiest first (eBPF queue→CPU matrix).
fn rx_queues_on(samples: &[&&Sample], cpu: u32) -> Vec<(String, u32, f64)> {
    use crate::probe::ethtool_names::Dir;
    use std::collections::BTreeMap;
    let mut per: BTreeMap<(String, u32), (u64, u64)> = BTreeMap::new();
    for c in samples.iter().flat_map(|s| &s.queue_cpus) {
        if let (Dir::Rx, Some(q)) = (c.dir, c.queue) {
            let e = per.entry((c.iface.clone(), q)).or_default();
            e.1 += c.packets;
            if c.cpu.0 == cpu {
                e.0 += c.packets;
            }
        }
    }
    let mut out: Vec<(String, u32, f64)> = per
        .into_iter()
        .filter(|(_, (mine, all))| *all > 0 && *mine * 2 >= *all)
        .map(|((i, q), (mine, all))| (i, q, mine as f64 / all as f64))
        .collect();
    out.sort_by(|a, b| b.2.total_cmp(&a.2));
    out
}

#[cfg(test)]
mod mask_tests {
    use super::one_cpu_of_mask;
    use crate::diagnose::util::{cpu_mask, mask_cpus};

    #[test]
    fn one_cpu_of_a_mask_agrees_with_the_full_parse() {
        for m in [
            "0",
            "00000000,00000000",
            "f",
            "00000010",
            "1,00000000",
            "80000000,00000000,00000000",
            "3",
            "x1",
            "",
            "00000004,00000004",
        ] {
            let full = mask_cpus(m);
            let want = match full[..] {
                [one] => Some(one),
                _ => None,
            };
            assert_eq!(one_cpu_of_mask(m), want, "{m:?}: {full:?}");
        }
        for cpu in [0, 5, 31, 32, 200, 255] {
            assert_eq!(one_cpu_of_mask(&cpu_mask(cpu)), Some(cpu));
        }
    }
}

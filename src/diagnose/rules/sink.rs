//! Packet-sink rules: sink.remote-numa, sink.smt-siblings,
//! sink.queue-overrun, sink.generator-bound, and nic.rx-missed per queue.
//!
//! Pure functions over the packet engine's own figures
//! ([`SinkInterval`], [`GenInterval`]) and the sink cores' topology
//! ([`CoreTopology`]), plus the sink host's per-core busy share over the
//! window (from its Samples' `/proc/stat`). [`session_rules`] builds a
//! [`SinkRuleInput`] from a window of both hosts' Samples of a packet test;
//! nothing here reads a file or a clock.

use crate::diagnose::finding::{Finding, Severity};
use crate::diagnose::thresholds::Thresholds;
use crate::probe::sample::HostRole;
use crate::probe::topology::CoreTopology;
use crate::traffic::sink::figures::{GenInterval, QueueFigures, SinkInterval};
use crate::traffic::sink::SinkMode;
use crate::traffic::EngineSpecOps;
use crate::units::CpuId;
use std::collections::BTreeMap;

/// The sink rules' own numbers (documented in `assets/rules.md`).
#[derive(Debug, Clone, PartialEq)]
pub struct SinkThresholds {
    /// sink.generator-bound: a sink thread (or NAPI core, in xdp mode) below
    /// this CPU % had idle time.
    pub sink_idle_pct: f64,
    /// sink.generator-bound: the sink counted at least this share of what
    /// the generator sent (nothing lost on the way).
    pub counted_share: f64,
}

/// The shipped table.
pub const SINK_THRESHOLDS: SinkThresholds = SinkThresholds {
    sink_idle_pct: 80.0,
    counted_share: 0.99,
};

/// One window of a packet test, as the sink rules read it.
#[derive(Debug, Clone, Copy)]
pub struct SinkRuleInput<'a> {
    /// The host that sinks.
    pub host: HostRole,
    /// The host that generates.
    pub gen_host: HostRole,
    /// The sink's interface.
    pub iface: &'a str,
    /// The mode that ran.
    pub mode: SinkMode,
    /// Packets per second asked for (0 = flat out).
    pub rate_asked: u64,
    /// The sink's intervals in the window (active, full-length).
    pub sink: &'a [SinkInterval],
    /// The generator's intervals of the same window.
    pub gen: &'a [GenInterval],
    /// The sink cores' topology.
    pub topology: Option<&'a CoreTopology>,
    /// Mean busy % per core of the sink host over the window (/proc/stat).
    pub core_busy: &'a [(CpuId, f64)],
}

impl SinkRuleInput<'_> {
    fn busy(&self, cpu: CpuId) -> Option<f64> {
        self.core_busy.iter().find(|c| c.0 == cpu).map(|c| c.1)
    }
}

/// One host's packet figures, from its Samples of a window (warm-up left out).
fn figures_of(
    samples: &[crate::probe::sample::Sample],
) -> (Vec<SinkInterval>, Vec<GenInterval>, Option<String>) {
    use crate::traffic::EngineInterval;
    let (mut sink, mut gen, mut iface) = (Vec::new(), Vec::new(), None);
    for s in samples.iter().filter(|s| !s.omitted) {
        match &s.engine.extra {
            Some(EngineInterval::Sink(k)) => {
                iface = Some(k.iface.clone());
                sink.push(k.figures.clone());
            }
            Some(EngineInterval::Generator(g)) => gen.push(g.figures.clone()),
            _ => {}
        }
    }
    (sink, gen, iface)
}

/// Busy % of each core of the sink host while the sink received: a
/// Sample's busy core-seconds over the part of it the sink counted in (its
/// figures' span — the last interval's quiet drain tail is waiting, not
/// work), capped at 100 %.
fn active_core_busy(samples: &[crate::probe::sample::Sample]) -> Vec<(CpuId, f64)> {
    use crate::traffic::EngineInterval;
    let mut acc: BTreeMap<u32, (f64, f64)> = BTreeMap::new();
    for s in samples.iter().filter(|s| !s.omitted) {
        let Some(EngineInterval::Sink(k)) = &s.engine.extra else {
            continue;
        };
        let span = s.end_s - s.start_s;
        let active = k.figures.secs.min(span);
        if span <= 0.0 || active <= 0.0 {
            continue;
        }
        for c in &s.cpus {
            let e = acc.entry(c.cpu.0).or_default();
            e.0 += c.busy().0 / 100.0 * span;
            e.1 += active;
        }
    }
    acc.into_iter()
        .map(|(c, (busy, secs))| (CpuId(c), (busy / secs * 100.0).min(100.0)))
        .collect()
}

/// The packet tests' entry of the engines' rules (see
/// `rules::engine_rules`): on a packet test's window, drops what the
/// test's design explains and adds the sink rules. Nothing on other tests.
pub fn test_rules(input: &crate::diagnose::Input, t: &Thresholds, out: &mut Vec<Finding>) {
    let Some(k) = input.test.spec.and_then(|s| s.as_sink()) else {
        return;
    };
    // With one queue asked for, one busy queue and softirq core are
    // the test's design.
    if k.queues == 1 {
        out.retain(|f| {
            !matches!(
                f.id.as_str(),
                "nic.queue-imbalance" | "softirq.concentrated"
            )
        });
    }
    out.extend(session_rules(k, input, t));
}

/// The sink rules on a window of a packet test: the sink's figures come
/// from the host that sinks, the generator's from the other one, the
/// sink cores' topology from the sink host's facts.
pub fn session_rules(
    spec: &crate::traffic::sink::SinkSpec,
    input: &crate::diagnose::Input,
    t: &Thresholds,
) -> Vec<Finding> {
    let (host, gen_host) = match spec.sink_side() {
        crate::traffic::Side::Agent => (HostRole::Peer, HostRole::Local),
        crate::traffic::Side::Controller => (HostRole::Local, HostRole::Peer),
    };
    let window = |h: HostRole| match h {
        HostRole::Local => input.local,
        HostRole::Peer => input.peer,
    };
    let (sink, _, iface) = figures_of(window(host).samples);
    let (_, gen, _) = figures_of(window(gen_host).samples);
    let Some(iface) = iface else {
        return Vec::new();
    };
    let cpus = spec.cpus_for(spec.sink_side());
    let topology = window(host)
        .facts()
        .filter(|_| !cpus.is_empty())
        .map(|f| CoreTopology::from_facts(f, cpus, Some(&iface)));
    let busy = active_core_busy(window(host).samples);
    let i = SinkRuleInput {
        host,
        gen_host,
        iface: &iface,
        mode: sink.last().map_or(spec.mode, |s| s.mode),
        rate_asked: spec.rate,
        sink: &sink,
        gen: &gen,
        topology: topology.as_ref(),
        core_busy: &busy,
    };
    rules(&i, t, &SINK_THRESHOLDS)
}

/// Every sink rule on one window.
pub fn rules(i: &SinkRuleInput, t: &Thresholds, st: &SinkThresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(topo) = i.topology {
        out.extend(remote_numa(i, topo));
        out.extend(smt_siblings(i, topo));
    }
    out.extend(queue_overrun(i, t, st));
    out.extend(rx_missed(i, t));
    out.extend(generator_bound(i, st));
    out
}

/// sink.remote-numa: sink cores on another NUMA node than the NIC.
pub fn remote_numa(i: &SinkRuleInput, topo: &CoreTopology) -> Option<Finding> {
    let remote = topo.remote();
    let nic_node = topo.nic_numa_node?;
    if remote.is_empty() {
        return None;
    }
    let cpus: Vec<CpuId> = remote.iter().map(|p| p.cpu).collect();
    let mut f = Finding::new(
        "sink.remote-numa",
        Severity::Warn,
        i.host,
        i.iface.to_string(),
        format!(
            "sink cores {} are on another NUMA node than {} (node {nic_node})",
            cpus.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            i.iface
        ),
        remote.len() as f64 / topo.cpus.len().max(1) as f64 * 0.5,
    )
    .num(
        format!("{} NUMA node", i.iface),
        f64::from(nic_node),
        "",
        format!("/sys/class/net/{}/device/numa_node", i.iface),
    );
    for p in &remote {
        if let Some(n) = p.numa_node {
            f = f.num(
                format!("{} NUMA node", p.cpu),
                f64::from(n),
                "",
                "/sys/devices/system/node/nodeN/cpulist",
            );
        }
    }
    f = f.why("Every frame the NIC writes into memory of its own node is read across the socket interconnect by a remote core: published receive benchmarks lose 10-20 % of the packet rate this way.");
    if let Some(local) = &topo.nic_local_cpus {
        f = f
            .text(
                format!("{} local CPUs", i.iface),
                local.clone(),
                format!("/sys/class/net/{}/device/local_cpulist", i.iface),
            )
            .fix(format!(
                "wirescope run --engine sink --peer-cpus <cores from {local}>  # sink threads on the NIC's node"
            ));
    }
    Some(f)
}

/// sink.smt-siblings: two sink threads on one physical core.
pub fn smt_siblings(i: &SinkRuleInput, topo: &CoreTopology) -> Option<Finding> {
    let pairs = topo.shared_cores();
    if pairs.is_empty() {
        return None;
    }
    let names: Vec<String> = pairs.iter().map(|(a, b)| format!("{a}+{b}")).collect();
    let mut f = Finding::new(
        "sink.smt-siblings",
        Severity::Warn,
        i.host,
        names.join(","),
        format!(
            "sink threads share physical cores: {} are SMT siblings",
            names.join(", ")
        ),
        pairs.len() as f64 / topo.cpus.len().max(1) as f64,
    );
    for (a, b) in &pairs {
        f = f.text(
            format!("{a} thread siblings"),
            format!("{a},{b}"),
            format!(
                "/sys/devices/system/cpu/cpu{}/topology/thread_siblings_list",
                a.0
            ),
        );
    }
    Some(f
        .why("SMT siblings share one core's execution units and L1/L2 caches: two sink threads there get far less than two cores' packet rate (10-20 % less than on separate cores in published receive benchmarks).")
        .fix("wirescope run --engine sink --peer-cpus <one thread per physical core>  # see thread_siblings_list"))
}

/// Per queue over the window: intervals with ring drops, their sum, the
/// thread's mean CPU and its core.
#[derive(Default)]
struct QueueAcc {
    intervals: usize,
    drops: u64,
    counted: u64,
    counter: &'static str,
    cpu: Option<CpuId>,
    thread_cpu: Vec<f64>,
    napi: Option<CpuId>,
}

fn ring_counter(mode: SinkMode) -> &'static str {
    match mode {
        SinkMode::AfXdp => "AF_XDP rx_ring_full + rx_dropped (XDP_STATISTICS)",
        SinkMode::Tpacket => "TPACKET tp_drops (PACKET_STATISTICS)",
        SinkMode::Udp => "socket drops (SO_MEMINFO)",
        SinkMode::Xdp => "-",
    }
}

/// CPU % of the thread that reads `q` (its CPU is on the thread's first row).
fn thread_cpu_of(s: &SinkInterval, q: &QueueFigures) -> Option<f64> {
    q.cpu_pct.or_else(|| {
        let t = q.thread?;
        s.queues
            .iter()
            .find(|r| r.thread == Some(t) && r.cpu_pct.is_some())?
            .cpu_pct
    })
}

/// sink.queue-overrun: a queue's socket ring overflows, sustained: while
/// the core that drains it is saturated (it cannot keep up), or, with that
/// core idle part of the time, losing more than `1 - counted_share` of the
/// queue's frames (the ring fills in bursts or while its thread sleeps).
pub fn queue_overrun(i: &SinkRuleInput, t: &Thresholds, st: &SinkThresholds) -> Vec<Finding> {
    let need = t.sustain_intervals.min(i.sink.len()).max(1);
    queue_drops(i)
        .into_iter()
        .filter(|(_, a)| a.intervals >= need)
        .filter_map(|(queue, a)| {
            let o = Overrun::judge(i, t, st, &a)?;
            Some(overrun_finding(i, queue, &a, &o))
        })
        .collect()
}

/// Per queue over the window: ring drops, frames counted, cores.
fn queue_drops(i: &SinkRuleInput) -> BTreeMap<u32, QueueAcc> {
    let mut acc: BTreeMap<u32, QueueAcc> = BTreeMap::new();
    for s in i.sink {
        for q in &s.queues {
            let a = acc.entry(q.queue).or_default();
            a.counter = ring_counter(i.mode);
            a.cpu = a.cpu.or(q.cpu);
            a.napi = a.napi.or(q.napi_cpu);
            if let Some(c) = thread_cpu_of(s, q) {
                a.thread_cpu.push(c);
            }
            a.counted += q.counted;
            if q.ring_full > 0 {
                a.intervals += 1;
                a.drops += q.ring_full;
            }
        }
    }
    acc
}

/// What drained a queue whose ring overflowed: its thread's and core's busy
/// share, and whether either was saturated; None when neither a saturated
/// core nor a measured, part-idle one with heavy loss explains it.
struct Overrun {
    thread: Option<f64>,
    core: Option<crate::units::CpuId>,
    core_busy: Option<f64>,
    saturated: bool,
    lost: f64,
    measured: Option<f64>,
}

impl Overrun {
    fn judge(
        i: &SinkRuleInput,
        t: &Thresholds,
        st: &SinkThresholds,
        a: &QueueAcc,
    ) -> Option<Overrun> {
        let thread = crate::diagnose::util::mean(a.thread_cpu.iter().copied());
        let core = a.cpu.or(a.napi);
        let core_busy = core.and_then(|c| i.busy(c));
        let saturated = thread.is_some_and(|c| c >= t.core_saturated_pct)
            || core_busy.is_some_and(|c| c >= t.core_saturated_pct);
        let lost = a.drops as f64 / (a.drops + a.counted).max(1) as f64;
        // Without a saturated core, the burst case needs a measured one
        // that had idle time (no figure: nothing to say about it).
        let measured = thread.or(core_busy);
        if !saturated && (lost <= 1.0 - st.counted_share || measured.is_none()) {
            return None;
        }
        Some(Overrun {
            thread,
            core,
            core_busy,
            saturated,
            lost,
            measured,
        })
    }
}

fn overrun_finding(i: &SinkRuleInput, queue: u32, a: &QueueAcc, o: &Overrun) -> Finding {
    let Overrun {
        thread,
        core,
        core_busy,
        saturated,
        lost,
        measured,
    } = *o;
    let core_name = core.map_or("its core".to_string(), |c| c.to_string());
    let secs: f64 = i.sink.iter().map(|s| s.secs).sum();
    let title = if saturated {
        format!(
            "{} queue {queue}: its socket ring overflowed ({} frames, {:.1} % of the queue's) while {core_name} was saturated",
            i.iface,
            a.drops,
            lost * 100.0
        )
    } else {
        format!(
            "{} queue {queue}: its socket ring overflowed ({} frames, {:.1} % of the queue's) while {} was {:.0} % busy: the ring fills in bursts or while the thread sleeps",
            i.iface,
            a.drops,
            lost * 100.0,
            if thread.is_some() { "the thread that drains it".to_string() } else { core_name.clone() },
            measured.unwrap_or(0.0)
        )
    };
    let mut f = Finding::new(
        "sink.queue-overrun",
        Severity::Warn,
        i.host,
        format!("{} queue {queue}", i.iface),
        title,
        if saturated { 0.8 } else { lost.max(0.3) },
    )
    .num(
        format!("queue {queue} frames lost to a full ring"),
        lost * 100.0,
        "%",
        a.counter,
    )
    .num(
        format!("queue {queue} ring drops"),
        a.drops as f64 / secs.max(1e-9),
        "/s",
        a.counter,
    )
    .num("intervals with drops", a.intervals as f64, "", "window");
    if let Some(c) = thread {
        f = f.num(
            format!("sink thread of queue {queue} CPU"),
            c,
            "%",
            "/proc/self/task/TID/schedstat",
        );
    }
    if let (Some(c), Some(b)) = (core, core_busy) {
        f = f.num(format!("{c} busy"), b, "%", "/proc/stat");
    }
    if !saturated {
        return f.why("The kernel drops each frame that finds the ring full. The thread that drains it had idle time, so it is not too slow on average: the ring fills during bursts or while the thread waits to be woken or scheduled (another task on its core, wake-up latency).")
                .fix("wirescope run --engine sink --peer-cpus <a core of its own on the NIC's node>  # nothing else scheduled there")
                .fix("wirescope run --engine sink --queues <more>  # shorter bursts per ring")
                .fix("sysctl -w net.core.rmem_max=67108864  # --sink udp: a larger socket buffer absorbs bursts");
    }
    f.why("The thread (or softirq) that drains this queue's ring cannot keep up: the kernel drops each frame that finds the ring full. More queues and threads on more cores, or a cheaper mode, raise the ceiling; a bigger ring only absorbs bursts.")
            .fix("wirescope run --engine sink --queues <more> --peer-cpus <more cores on the NIC's node>")
            .fix(format!("ethtool -L {} combined <more>  # more queues spread the flows", i.iface))
}

/// nic.rx-missed: the NIC dropped frames of a queue (per-queue drop
/// counters), or NIC-wide (rx_missed_errors, rx_out_of_buffer, ...).
pub fn rx_missed(i: &SinkRuleInput, t: &Thresholds) -> Vec<Finding> {
    let mut per_q: BTreeMap<u32, (usize, u64, Option<CpuId>)> = BTreeMap::new();
    let mut nic: BTreeMap<String, u64> = BTreeMap::new();
    for s in i.sink {
        for q in &s.queues {
            if let Some(d) = q.nic_drops.filter(|d| *d > 0) {
                let e = per_q.entry(q.queue).or_default();
                e.0 += 1;
                e.1 += d;
                e.2 = e.2.or(q.napi_cpu).or(q.cpu);
            }
        }
        for (k, v) in &s.drops.nic {
            *nic.entry(k.clone()).or_default() += v;
        }
    }
    let secs: f64 = i.sink.iter().map(|s| s.secs).sum::<f64>().max(1e-9);
    let need = t.sustain_intervals.min(i.sink.len()).max(1);
    let mut out = Vec::new();
    for (queue, (n, drops, core)) in per_q {
        if n < need {
            continue;
        }
        let mut f = Finding::new(
            "nic.rx-missed",
            Severity::Warn,
            i.host,
            format!("{} rx queue {queue}", i.iface),
            format!(
                "{} rx queue {queue}: the NIC dropped {drops} frames before the host saw them",
                i.iface
            ),
            0.7,
        )
        .num(
            format!("rx queue {queue} drops"),
            drops as f64 / secs,
            "/s",
            format!("ethtool -S {} (per-queue drop counter)", i.iface),
        );
        if let Some(c) = core {
            f = f.text(
                format!("queue {queue} processed on"),
                c.to_string(),
                "XDP counters by CPU / sink thread pinning",
            );
            if let Some(b) = i.busy(c) {
                f = f.num(format!("{c} busy"), b, "%", "/proc/stat");
            }
        }
        out.push(f
            .why("The queue's descriptor ring was empty when frames arrived: the core polling it (NAPI) did not refill it in time. The frames never reach the host; no socket or softnet counter sees them.")
            .fix(format!("ethtool -G {} rx <max from ethtool -g>", i.iface))
            .fix(format!("ethtool -L {} combined <more>; spread the queues' IRQs over more cores", i.iface)));
    }
    let total: u64 = nic.values().sum();
    if total > 0 && out.is_empty() {
        let mut f = Finding::new(
            "nic.rx-missed",
            Severity::Warn,
            i.host,
            i.iface.to_string(),
            format!(
                "{}: the NIC dropped {total} frames before the host saw them",
                i.iface
            ),
            0.7,
        );
        for (k, v) in &nic {
            f = f.num(
                k.clone(),
                *v as f64 / secs,
                "/s",
                format!("ethtool -S {}", i.iface),
            );
        }
        out.push(f
            .why("The NIC ran out of receive descriptors or buffer: the cores polling its queues did not keep up.")
            .fix(format!("ethtool -G {} rx <max from ethtool -g>", i.iface)));
    }
    out
}

/// The sink's busiest worker over the window, % of one core, and what it
/// was: its threads and the cores they run on (two threads on one core
/// share it), the NAPI cores its XDP program ran on, and — for `tpacket`
/// and `udp`, whose receive work runs in softirq on cores the sink cannot
/// name — the host's busiest core.
fn busiest_sink_worker(i: &SinkRuleInput) -> Option<(f64, String, &'static str)> {
    let mut best: Option<(f64, String, &'static str)> = None;
    let mut take = |v: f64, what: String, src: &'static str| {
        if best.as_ref().is_none_or(|b| v > b.0) {
            best = Some((v, what, src));
        }
    };
    let live = i
        .sink
        .iter()
        .flat_map(|s| s.queues.iter().map(move |q| (s, q)));
    for (s, q) in live {
        if let Some(c) = thread_cpu_of(s, q) {
            take(c, "sink thread".into(), "/proc/self/task/TID/schedstat");
        }
        for c in [q.cpu, q.napi_cpu.filter(|_| q.counted > 0)]
            .into_iter()
            .flatten()
        {
            if let Some(b) = i.busy(c) {
                take(b, format!("{c} (sink thread or NAPI core)"), "/proc/stat");
            }
        }
    }
    if matches!(i.mode, SinkMode::Tpacket | SinkMode::Udp) {
        if let Some((c, b)) = i.core_busy.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
            take(
                *b,
                format!("{c} (busiest core: the receive softirq)"),
                "/proc/stat",
            );
        }
    }
    best
}

/// sink.generator-bound: the sink counted what arrived, dropped nothing and
/// had idle time, so the rate measured is the sender's, not the sink's
/// ceiling.
pub fn generator_bound(i: &SinkRuleInput, st: &SinkThresholds) -> Option<Finding> {
    if i.sink.is_empty() || i.gen.is_empty() {
        return None;
    }
    let counted: u64 = i.sink.iter().map(|s| s.counted).sum();
    let sent: u64 = i.gen.iter().map(|g| g.sent).sum();
    if sent == 0 || (counted as f64) < st.counted_share * sent as f64 {
        return None;
    }
    // A frame of the test dropped on the sink's host (its rings, no socket,
    // the NIC) means the sink was short somewhere: not the generator's
    // limit. Host-wide drops of other traffic do not count.
    if i.sink.iter().any(|s| s.drops.by_the_test() > 0) {
        return None;
    }
    let (busiest, worker, busiest_src) = busiest_sink_worker(i)?;
    // Paced, the rate is the one asked for whatever else keeps the cores
    // busy; flat out, only a sink with idle time is not the limit.
    let paced = i.rate_asked > 0;
    if !paced && busiest >= st.sink_idle_pct {
        return None;
    }
    let secs: f64 = i.gen.iter().map(|g| g.secs).sum::<f64>().max(1e-9);
    let pps = sent as f64 / secs;
    let gen_cpu = i
        .gen
        .iter()
        .flat_map(|g| g.threads.iter())
        .filter_map(|t| t.cpu_pct)
        .fold(0.0f64, f64::max);
    let (sev, title) = if paced {
        (
            Severity::Info,
            format!(
                "the rate is the one asked for ({} pps): the sink counted all of it, its busiest worker ({worker}) at {busiest:.0} %",
                i.rate_asked,
            ),
        )
    } else {
        (
            Severity::Warn,
            format!(
                "the generator limits the rate ({pps:.0} pps): the sink dropped nothing and its busiest worker ({worker}) was only {busiest:.0} % busy",
            ),
        )
    };
    let path = i.gen.last().map_or("?", |g| g.path.name());
    let mut f = Finding::new(
        "sink.generator-bound",
        sev,
        i.gen_host,
        "generator".to_string(),
        title,
        if paced { 0.1 } else { 0.9 },
    )
    .num("generator rate", pps, "pps", format!("generator ({path})"))
    .num(
        "counted by the sink",
        counted as f64 / sent as f64 * 100.0,
        "% of sent",
        format!("sink ({})", i.mode.name()),
    )
    .num(
        format!("busiest sink worker: {worker}"),
        busiest,
        "%",
        busiest_src,
    )
    .num("busiest generator thread", gen_cpu, "%", "/proc/self/task/TID/schedstat")
    .why("A sink that counts everything sent and still has idle time is not the bottleneck: the number measured is the generator's rate, and the sink's ceiling is higher.");
    if paced {
        f = f.fix("wirescope run --engine sink --rate 0  # flat out, to find the sink's ceiling");
    } else {
        f = f
            .fix("wirescope run --engine sink --queues <more generator threads>")
            .fix("generate from a NIC with AF_XDP zero-copy, or from more hosts");
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::thresholds::THRESHOLDS;
    use crate::probe::topology::CpuPlace;
    use crate::traffic::sink::figures::{Drops, GenThreadFigures, QueueFigures, Rates};
    use crate::traffic::sink::TxPath;

    fn q(queue: u32, counted: u64, ring_full: u64, cpu_pct: f64) -> QueueFigures {
        QueueFigures {
            queue,
            cpu: Some(CpuId(queue)),
            counted,
            rates: Rates::default(),
            duplicates: 0,
            reordered: 0,
            missing_delta: 0,
            ring_full,
            nic_drops: Some(0),
            thread: Some(queue),
            cpu_pct: Some(cpu_pct),
            napi_cpu: None,
        }
    }

    fn sink(queues: Vec<QueueFigures>) -> SinkInterval {
        let counted = queues.iter().map(|q| q.counted).sum();
        SinkInterval {
            secs: 1.0,
            mode: SinkMode::AfXdp,
            counted,
            rates: Rates::default(),
            duplicates: 0,
            reordered: 0,
            missing: 0,
            missing_delta: 0,
            cpu_pct: None,
            iface_rx_packets: Some(counted),
            drops: Drops::default(),
            queues,
        }
    }

    fn gen(sent: u64, cpu: f64) -> GenInterval {
        GenInterval {
            secs: 1.0,
            path: TxPath::TxRing,
            sent,
            rates: Rates::default(),
            errors: 0,
            tx_dropped: Some(0),
            cpu_pct: Some(cpu),
            threads: vec![GenThreadFigures {
                thread: 0,
                queue: None,
                cpu: Some(CpuId(1)),
                sent,
                rates: Rates::default(),
                errors: 0,
                ring_full: 0,
                cpu_pct: Some(cpu),
            }],
        }
    }

    fn input<'a>(
        s: &'a [SinkInterval],
        g: &'a [GenInterval],
        topo: Option<&'a CoreTopology>,
        rate: u64,
        busy: &'a [(CpuId, f64)],
    ) -> SinkRuleInput<'a> {
        SinkRuleInput {
            host: HostRole::Peer,
            gen_host: HostRole::Local,
            iface: "eth0",
            mode: SinkMode::AfXdp,
            rate_asked: rate,
            sink: s,
            gen: g,
            topology: topo,
            core_busy: busy,
        }
    }

    fn place(cpu: u32, node: u32, siblings: &[u32]) -> CpuPlace {
        CpuPlace {
            cpu: CpuId(cpu),
            numa_node: Some(node),
            l3: None,
            l3_id: None,
            smt_siblings: siblings.iter().map(|c| CpuId(*c)).collect(),
            core_id: Some(cpu % 4),
            package: Some(node),
        }
    }

    fn topo(cpus: Vec<CpuPlace>, nic_node: Option<u32>) -> CoreTopology {
        CoreTopology {
            cpus,
            nic: Some("eth0".into()),
            nic_numa_node: nic_node,
            nic_local_cpus: Some("0-3".into()),
            unavailable: vec![],
        }
    }

    #[test]
    fn remote_numa_fires_only_for_cores_off_the_nic_node() {
        let t = topo(vec![place(0, 0, &[]), place(8, 1, &[])], Some(0));
        let i = input(&[], &[], Some(&t), 0, &[]);
        let f = remote_numa(&i, &t).expect("cpu8 is remote");
        assert!(
            f.title.contains("cpu8") && !f.title.contains("cpu0"),
            "{}",
            f.title
        );
        assert!(f.fix[0].contains("0-3"));
        let local = topo(vec![place(0, 0, &[]), place(1, 0, &[])], Some(0));
        assert!(remote_numa(&i, &local).is_none());
        let unknown = topo(vec![place(8, 1, &[])], None);
        assert!(
            remote_numa(&i, &unknown).is_none(),
            "virtual NIC: no node, no finding"
        );
    }

    #[test]
    fn smt_siblings_fires_for_threads_on_one_core() {
        let t = topo(
            vec![place(0, 0, &[4]), place(4, 0, &[0]), place(1, 0, &[5])],
            Some(0),
        );
        let i = input(&[], &[], Some(&t), 0, &[]);
        let f = smt_siblings(&i, &t).unwrap();
        assert_eq!(f.subject, "cpu0+cpu4");
        let apart = topo(vec![place(0, 0, &[4]), place(1, 0, &[5])], Some(0));
        assert!(smt_siblings(&i, &apart).is_none());
    }

    #[test]
    fn queue_overrun_needs_drops_and_a_saturated_core() {
        let hot = vec![sink(vec![q(0, 100, 0, 20.0), q(3, 100, 50, 99.0)]); 3];
        let i = input(&hot, &[], None, 0, &[]);
        let f = queue_overrun(&i, &THRESHOLDS, &SINK_THRESHOLDS);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].subject, "eth0 queue 3");
        assert!(f[0].title.contains("cpu3"), "{}", f[0].title);
        assert!(f[0]
            .evidence
            .iter()
            .any(|e| e.source.contains("XDP_STATISTICS")));
        // A few drops with an idle core: a burst, not worth a warning.
        let idle = vec![sink(vec![q(3, 100_000, 50, 30.0)]); 3];
        assert!(queue_overrun(
            &input(&idle, &[], None, 0, &[]),
            &THRESHOLDS,
            &SINK_THRESHOLDS
        )
        .is_empty());
        // A fifth of the frames lost with the thread a third busy (a sweep
        // point said "findings: none"): the ring fills in bursts.
        let lossy = vec![sink(vec![q(3, 100, 25, 34.0)]); 3];
        let f = queue_overrun(
            &input(&lossy, &[], None, 0, &[]),
            &THRESHOLDS,
            &SINK_THRESHOLDS,
        );
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(
            f[0].title.contains("20.0 %") && f[0].title.contains("34 % busy"),
            "{}",
            f[0].title
        );
        assert!(!f[0].title.contains("saturated"), "{}", f[0].title);
        // No CPU figure at all: nothing to say about bursts.
        let mut blind = lossy.clone();
        for s in &mut blind {
            for q in &mut s.queues {
                q.cpu_pct = None;
                q.thread = None;
            }
        }
        assert!(queue_overrun(
            &input(&blind, &[], None, 0, &[]),
            &THRESHOLDS,
            &SINK_THRESHOLDS
        )
        .is_empty());
        // ... unless /proc/stat shows the core saturated (softirq on it).
        let busy = [(CpuId(3), 100.0)];
        assert_eq!(
            queue_overrun(
                &input(&idle, &[], None, 0, &busy),
                &THRESHOLDS,
                &SINK_THRESHOLDS
            )
            .len(),
            1
        );
        // One interval is not sustained.
        let once = vec![
            sink(vec![q(3, 1, 0, 99.0)]),
            sink(vec![q(3, 1, 9, 99.0)]),
            sink(vec![q(3, 1, 0, 99.0)]),
        ];
        assert!(queue_overrun(
            &input(&once, &[], None, 0, &[]),
            &THRESHOLDS,
            &SINK_THRESHOLDS
        )
        .is_empty());
    }

    #[test]
    fn rx_missed_names_the_queue() {
        let mut w = vec![sink(vec![q(0, 100, 0, 20.0), q(2, 100, 0, 20.0)]); 3];
        for s in &mut w {
            s.queues[1].nic_drops = Some(40);
        }
        let f = rx_missed(&input(&w, &[], None, 0, &[]), &THRESHOLDS);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].subject, "eth0 rx queue 2");
        assert_eq!(f[0].evidence[0].value, crate::diagnose::Value::Num(40.0));
        // NIC-wide counters when no queue says where.
        let mut g = vec![sink(vec![q(0, 100, 0, 20.0)]); 3];
        g[1].drops.nic.insert("rx_missed_errors".into(), 7);
        let f = rx_missed(&input(&g, &[], None, 0, &[]), &THRESHOLDS);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].subject, "eth0");
        let clean = vec![sink(vec![q(0, 100, 0, 20.0)]); 3];
        assert!(rx_missed(&input(&clean, &[], None, 0, &[]), &THRESHOLDS).is_empty());
    }

    #[test]
    fn generator_bound_when_the_sink_counted_all_and_idled() {
        let s = vec![sink(vec![q(0, 500_000, 0, 35.0), q(1, 500_000, 0, 40.0)]); 3];
        let g = vec![gen(1_000_000, 100.0); 3];
        let f = generator_bound(&input(&s, &g, None, 0, &[]), &SINK_THRESHOLDS).unwrap();
        assert_eq!((f.severity, f.host), (Severity::Warn, HostRole::Local));
        assert!(f.title.contains("40 %"), "{}", f.title);
        // Paced: expected, info.
        let f = generator_bound(&input(&s, &g, None, 1_000_000, &[]), &SINK_THRESHOLDS).unwrap();
        assert_eq!(f.severity, Severity::Info);
        // A saturated sink thread: the sink may be the limit.
        let hot = vec![sink(vec![q(0, 500_000, 0, 99.0), q(1, 500_000, 0, 40.0)]); 3];
        assert!(generator_bound(&input(&hot, &g, None, 0, &[]), &SINK_THRESHOLDS).is_none());
        // Frames lost on the way: not generator-bound.
        let lossy = vec![sink(vec![q(0, 400_000, 0, 35.0), q(1, 400_000, 0, 40.0)]); 3];
        assert!(generator_bound(&input(&lossy, &g, None, 0, &[]), &SINK_THRESHOLDS).is_none());
    }

    #[test]
    fn generator_bound_not_when_the_sink_dropped_shared_a_core_or_worked_in_softirq() {
        let g = vec![gen(1_000_000, 100.0); 3];
        // 99.5 % counted, but its rings overflowed: the sink is short.
        let mut dropped = vec![sink(vec![q(0, 497_500, 2_500, 35.0), q(1, 500_000, 0, 40.0)]); 3];
        for s in &mut dropped {
            s.drops.ring_full = 2_500;
        }
        assert!(generator_bound(&input(&dropped, &g, None, 0, &[]), &SINK_THRESHOLDS).is_none());
        // Two threads at 40 % each, both on cpu0, which is 86 % busy.
        let mut shared = vec![sink(vec![q(0, 500_000, 0, 40.0), q(1, 500_000, 0, 40.0)]); 3];
        for s in &mut shared {
            for q in &mut s.queues {
                q.cpu = Some(CpuId(0));
            }
        }
        let busy = [(CpuId(0), 86.0), (CpuId(1), 99.0)];
        assert!(generator_bound(&input(&shared, &g, None, 0, &busy), &SINK_THRESHOLDS).is_none());
        // tpacket: the thread idles at 3 %, the receive softirq saturates a core.
        let mut tp = vec![sink(vec![q(0, 1_000_000, 0, 3.0)]); 3];
        for s in &mut tp {
            s.mode = SinkMode::Tpacket;
            s.queues[0].cpu = None;
        }
        let mut i = input(&tp, &g, None, 0, &[]);
        i.mode = SinkMode::Tpacket;
        assert!(
            generator_bound(&i, &SINK_THRESHOLDS).is_some(),
            "no /proc/stat: the thread"
        );
        let busy = [(CpuId(0), 20.0), (CpuId(1), 100.0)];
        i.core_busy = &busy;
        assert!(generator_bound(&i, &SINK_THRESHOLDS).is_none());
        // Paced, the rate is the one asked for even on busy cores: info.
        i.rate_asked = 1_000_000;
        let f = generator_bound(&i, &SINK_THRESHOLDS).unwrap();
        assert_eq!(f.severity, Severity::Info);
    }

    #[test]
    fn generator_bound_in_xdp_mode_reads_the_napi_cores() {
        let mut s = vec![sink(vec![q(0, 1000, 0, 0.0)]); 2];
        for x in &mut s {
            x.mode = SinkMode::Xdp;
            x.queues[0].cpu_pct = None;
            x.queues[0].napi_cpu = Some(CpuId(1));
        }
        let g = vec![gen(1000, 50.0); 2];
        let mut i = input(&s, &g, None, 0, &[]);
        i.mode = SinkMode::Xdp;
        assert!(
            generator_bound(&i, &SINK_THRESHOLDS).is_none(),
            "no /proc/stat: cannot tell"
        );
        let busy = [(CpuId(1), 30.0)];
        i.core_busy = &busy;
        assert!(generator_bound(&i, &SINK_THRESHOLDS).is_some());
        let busy = [(CpuId(1), 97.0)];
        i.core_busy = &busy;
        assert!(generator_bound(&i, &SINK_THRESHOLDS).is_none());
    }

    #[test]
    fn all_rules_together() {
        let t = topo(vec![place(8, 1, &[12]), place(12, 1, &[8])], Some(0));
        let s = vec![sink(vec![q(0, 10, 0, 10.0)]); 3];
        let g = vec![gen(10, 10.0); 3];
        let ids: Vec<String> = rules(
            &input(&s, &g, Some(&t), 0, &[]),
            &THRESHOLDS,
            &SINK_THRESHOLDS,
        )
        .into_iter()
        .map(|f| f.id)
        .collect();
        assert_eq!(
            ids,
            vec![
                "sink.remote-numa",
                "sink.smt-siblings",
                "sink.generator-bound"
            ]
        );
    }
}

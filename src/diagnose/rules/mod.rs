//! The rules, one file per family. Each rule is a plain function from data to
//! `Vec<Finding>`; none of them does I/O.
//!
//! * static (facts only, also used by `wirescope check`): [`nic`] configuration,
//!   [`driver`], [`platform`], the check-only buffer audit of [`tcp`];
//! * window (live counters of one host): [`cpu`], [`nic_live`], [`tcp`];
//! * pair (both hosts): MTU mismatch, receive-window limits seen by the sender;
//! * an engine's own (a test of that engine): [`grpc`], [`sink`], registered
//!   in [`ENGINE_RULES`].

mod cpu;
mod cpu_many;
mod driver;
pub mod grpc;
mod nic;
/// The facts-only rule that compares the two hosts.
pub(super) use nic::mtu_mismatch;
mod nic_live;
mod platform;
// Pure RDMA rules, wired into static_rules_for (with the test's device,
// port and GID) and rdma_window.
pub mod rdma;
pub mod sink;
mod tcp;

use super::finding::Finding;
use super::input::Input;
use super::thresholds::Thresholds;
use super::util::secs;
use crate::probe::facts::HostFacts;
use crate::probe::sample::{HostRole, Sample};
use crate::traffic::{EngineSpec, Side};

/// One host's view for the window rules.
pub struct HostCtx<'a> {
    /// Which host.
    pub host: HostRole,
    /// Its facts.
    pub facts: Option<&'a HostFacts>,
    /// The other host's facts.
    pub other_facts: Option<&'a HostFacts>,
    /// Samples of the window while traffic ran (full-length, not warm-up).
    pub active: Vec<&'a Sample>,
    /// The test spec.
    pub spec: Option<&'a EngineSpec>,
    /// The other host's Samples of the window while traffic ran: its
    /// engine's cores and process CPU when both share a kernel (see
    /// [`HostCtx::test_cpus`], [`HostCtx::test_process_cpu`]).
    other_active: Vec<&'a Sample>,
    /// What the rules derive from this host's facts alone (its IRQ
    /// steering), kept by the caller while the facts stay the same.
    derived: &'a FactsDerived,
    /// Each interface's rx queues and their packets per second over the
    /// window, summed on first use.
    rx_rates: std::cell::OnceCell<
        std::collections::BTreeMap<&'a str, std::collections::BTreeMap<u32, f64>>,
    >,
    /// Each active sample's queue rows in runs of one (interface,
    /// direction), split on first use.
    queue_runs: std::cell::OnceCell<Vec<Vec<QueueRun<'a>>>>,
}

/// Consecutive queue rows of one sample with the same interface and
/// direction (the sampler lists each interface's queues together). The
/// queue rules walk runs: a big host's 1,024 rows × 5 intervals compared
/// their interface names row by row in each of three passes, a third of
/// its rules.
pub(super) struct QueueRun<'a> {
    /// The interface.
    pub iface: &'a str,
    /// The direction.
    pub dir: crate::probe::ethtool_names::Dir,
    /// The rows, in the sample's order.
    pub rows: &'a [crate::probe::sample::QueueSample],
}

/// Sums per queue number over a window: a dense column for the queue
/// numbers an interface has (a big host's 64 per NIC), a map for any number
/// beyond. Summing 1,024 queues × 5 intervals through a map was a quarter
/// of a big host's rules.
#[derive(Default)]
pub(super) struct QueueTotals<T> {
    dense: Vec<Option<T>>,
    sparse: std::collections::BTreeMap<u32, T>,
}

impl<T: Copy + Default + std::ops::AddAssign> QueueTotals<T> {
    /// Queue numbers below this are summed in the dense column.
    const DENSE: u32 = 1 << 12;

    /// Add `v` to queue `q`'s sum.
    pub(super) fn add(&mut self, q: u32, v: T) {
        if q < Self::DENSE {
            let i = q as usize;
            if self.dense.len() <= i {
                self.dense.resize(i + 1, None);
            }
            *self.dense[i].get_or_insert(T::default()) += v;
        } else {
            *self.sparse.entry(q).or_default() += v;
        }
    }

    /// Queue `q`'s sum (zero when it had none).
    pub(super) fn get(&self, q: u32) -> T {
        let v = if q < Self::DENSE {
            self.dense.get(q as usize).copied().flatten()
        } else {
            self.sparse.get(&q).copied()
        };
        v.unwrap_or_default()
    }

    /// The sum over every queue.
    pub(super) fn sum(&self) -> T {
        let mut total = T::default();
        for v in self.dense.iter().flatten().chain(self.sparse.values()) {
            total += *v;
        }
        total
    }

    /// The sums of the queues that had one, by queue number.
    pub(super) fn into_map(self) -> std::collections::BTreeMap<u32, T> {
        let mut m = self.sparse;
        m.extend(
            self.dense
                .into_iter()
                .enumerate()
                .filter_map(|(q, v)| Some((q as u32, v?))),
        );
        m
    }
}

/// `s`'s queue rows split into runs.
fn queue_runs(s: &Sample) -> Vec<QueueRun<'_>> {
    let qs = &s.queues;
    let mut runs = Vec::new();
    let mut start = 0;
    for i in 1..=qs.len() {
        let (first, end) = (&qs[start], qs.get(i));
        if end.is_none_or(|q| q.dir != first.dir || q.iface != first.iface) {
            runs.push(QueueRun {
                iface: &first.iface,
                dir: first.dir,
                rows: &qs[start..i],
            });
            start = i;
        }
    }
    runs
}

fn active<'a>(samples: &'a [Sample], t: &Thresholds) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|s| {
            !s.omitted
                && secs(s) >= t.min_interval_s
                && s.engine.tx_bps.0 + s.engine.rx_bps.0 >= t.active_bps
        })
        .collect()
}

/// What the rules derive from one host's facts alone: its facts-only
/// findings and the IRQs and RPS masks steered to each CPU. A host of 8
/// NICs has some 1,500 IRQs and 512 RPS masks to parse and index; the
/// facts change rarely (they are re-read every 10 s and sent on when they
/// differ), so a live diagnosis keeps this while they stay the same
/// ([`crate::diagnose::FactsCache`]) instead of deriving it every interval.
#[derive(Debug, Default)]
pub struct FactsDerived {
    statics: std::cell::OnceCell<Vec<Finding>>,
    steering: std::cell::OnceCell<cpu::Steering>,
}

impl FactsDerived {
    /// The facts-only findings of `facts` for the test `spec`, made on first use.
    pub fn statics(
        &self,
        facts: &HostFacts,
        host: HostRole,
        t: &Thresholds,
        spec: Option<&EngineSpec>,
    ) -> &[Finding] {
        self.statics
            .get_or_init(|| static_rules_for(facts, host, t, spec))
    }
}

impl<'a> HostCtx<'a> {
    /// Build with explicit thresholds; `derived` holds (or will hold) what
    /// the rules derive from this host's facts alone.
    pub fn with(
        input: &Input<'a>,
        host: HostRole,
        t: &Thresholds,
        derived: &'a FactsDerived,
    ) -> Self {
        let (me, other) = match host {
            HostRole::Local => (input.local, input.peer),
            HostRole::Peer => (input.peer, input.local),
        };
        HostCtx {
            host,
            facts: me.facts(),
            other_facts: other.facts(),
            active: active(me.samples, t),
            other_active: active(other.samples, t),
            spec: input.test.spec,
            derived,
            rx_rates: std::cell::OnceCell::new(),
            queue_runs: std::cell::OnceCell::new(),
        }
    }

    /// Each interface's rx queues with their packets per second summed
    /// over the window (built once per host and diagnosis).
    fn rx_queue_rates(
        &self,
    ) -> &std::collections::BTreeMap<&'a str, std::collections::BTreeMap<u32, f64>> {
        self.rx_rates.get_or_init(|| cpu_many::rx_queue_rates(self))
    }

    /// Each active sample (in `active`'s order) with its queue rows in runs
    /// of one interface and direction (split once per host and diagnosis).
    fn queue_runs(&self) -> impl Iterator<Item = (&'a Sample, &[QueueRun<'a>])> {
        let runs = self
            .queue_runs
            .get_or_init(|| self.active.iter().map(|s| queue_runs(s)).collect());
        self.active
            .iter()
            .copied()
            .zip(runs.iter().map(Vec::as_slice))
    }

    /// The data IRQs and RPS masks of this host's facts by the one CPU they
    /// name (built once per host and facts, whatever asks).
    fn steering(&self) -> &cpu::Steering {
        self.derived
            .steering
            .get_or_init(|| cpu::Steering::of(self.facts))
    }

    /// Intervals a sustained condition must hold: min(sustain, active samples).
    pub fn need(&self, t: &Thresholds) -> usize {
        t.sustain_intervals.min(self.active.len()).max(1)
    }

    /// This host's side of the test (the controller is the local host).
    pub fn side(&self) -> Side {
        match self.host {
            HostRole::Local => Side::Controller,
            HostRole::Peer => Side::Agent,
        }
    }

    /// CPUs the engine threads of this host are pinned to.
    pub fn engine_cpus(&self) -> Vec<u32> {
        self.spec
            .map(|s| s.cpus_for(self.side()).iter().map(|c| c.0).collect())
            .unwrap_or_default()
    }

    /// True when both hosts run on one kernel (the embedded local pair:
    /// the same boot id), so both ends' threads share its cores.
    pub fn shares_kernel(&self) -> bool {
        match (self.facts, self.other_facts) {
            (Some(a), Some(b)) => !a.boot_id.is_empty() && a.boot_id == b.boot_id,
            _ => false,
        }
    }

    /// The CPU the test's processes used on this host's cores over the
    /// intervals `on` (% of one core, their mean): this end's engine
    /// process, plus the other end's in the same interval when both share a
    /// kernel. None when a Sample does not say (an older log, an older
    /// agent), or `on` is empty.
    pub fn test_process_cpu(&self, on: &[&&Sample]) -> Option<f64> {
        let shared = self.shares_kernel();
        let mut sum = 0.0;
        for s in on {
            let other = match shared {
                true => {
                    let o = self.other_active.iter().find(|o| o.index == s.index)?;
                    o.engine.process_cpu_pct?
                }
                false => 0.0,
            };
            sum += s.engine.process_cpu_pct? + other;
        }
        (!on.is_empty()).then(|| sum / on.len() as f64)
    }

    /// CPUs the test's engine threads may run on, on this host's cores:
    /// this end's pinning (the spec's CPUs, else the ones its threads
    /// report: a packet test's ends pin themselves), and the other end's
    /// too when both share a kernel (empty when this end is not pinned).
    pub fn test_cpus(&self) -> Vec<u32> {
        let other = match self.side() {
            Side::Controller => Side::Agent,
            Side::Agent => Side::Controller,
        };
        let pinned = |side: Side, samples: &[&Sample]| -> Vec<u32> {
            let given: Vec<u32> = self
                .spec
                .map(|s| s.cpus_for(side).iter().map(|c| c.0).collect())
                .unwrap_or_default();
            if given.is_empty() {
                thread_cores(samples)
            } else {
                given
            }
        };
        let mut v = pinned(self.side(), &self.active);
        if !v.is_empty() && self.shares_kernel() {
            v.extend(pinned(other, &self.other_active));
            v.sort_unstable();
            v.dedup();
        }
        v
    }
}

/// The cores a host's engine threads reported over the window
/// ([`crate::traffic::EngineInterval::thread_cores`]).
fn thread_cores(samples: &[&Sample]) -> Vec<u32> {
    let mut v: Vec<u32> = samples
        .iter()
        .filter_map(|s| s.engine.extra.as_ref())
        .flat_map(|e| e.thread_cores())
        .map(|c| c.0)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The index of the first element of `v` that `is` matches; `new()` is
/// pushed first when none does (a short list searched in order).
fn index_or_push<T>(v: &mut Vec<T>, is: impl FnMut(&T) -> bool, new: impl FnOnce() -> T) -> usize {
    v.iter().position(is).unwrap_or_else(|| {
        v.push(new());
        v.len() - 1
    })
}

/// Facts-only rules of one host, for the test `spec` runs (None: no test,
/// `check`): an RDMA test asked of a host without a device is told what to
/// load, its own port and GID are judged as the ones in use, and GRO off is
/// only worth knowing when the messages fit in one packet.
pub fn static_rules_for(
    facts: &HostFacts,
    host: HostRole,
    t: &Thresholds,
    spec: Option<&EngineSpec>,
) -> Vec<Finding> {
    // The test's own RDMA device: one it asks of a host without any.
    let rdma_test = spec.is_some_and(|s| {
        crate::traffic::slice(s.kind())
            .paths()
            .meets(crate::traffic::DataPaths::VERBS)
    });
    let small = spec.is_some_and(|s| s.small_packets_by_design(1500.0));
    let mut out = Vec::new();
    out.extend(nic::rules(facts, host, t, small));
    out.extend(driver::rules(facts, host));
    out.extend(platform::rules(facts, host));
    out.extend(tcp::check_rules(facts, host, t));
    if let Some(r) = &facts.rdma {
        let used = rdma::rdma_use(spec, host, r);
        out.extend(rdma::static_rules(
            r,
            &facts.nics,
            rdma_test,
            used.as_ref(),
            host,
        ));
    }
    out
}

/// The RDMA rules on a host's window: the ports' counters of every counted
/// interval (traffic or not: RDMA may come from another application).
pub fn rdma_window(
    facts: Option<&HostFacts>,
    samples: &[Sample],
    host: HostRole,
    t: &Thresholds,
) -> Vec<Finding> {
    let window: Vec<&crate::probe::rdma::RdmaSample> = samples
        .iter()
        .filter(|s| !s.omitted)
        .filter_map(|s| s.rdma.as_ref())
        .collect();
    if window.is_empty() {
        return Vec::new();
    }
    rdma::window_rules(facts.and_then(|f| f.rdma.as_ref()), &window, host, t)
}

/// Live rules of one host on its window.
pub fn window_rules(ctx: &HostCtx, t: &Thresholds) -> Vec<Finding> {
    if ctx.active.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    out.extend(cpu::rules(ctx, t));
    out.extend(nic_live::rules(ctx, t));
    out.extend(tcp::window_rules(ctx, t));
    let engine = ctx.engine_cpus();
    // Cores the engine's own rules place are theirs to judge (a packet
    // test's sink cores: sink.remote-numa, with the sink's own evidence and
    // `--peer-cpus` fix): one cause, one finding.
    let judged = ctx.spec.is_some_and(|s| s.judges_own_numa(ctx.side()));
    if let (Some(facts), false) = (ctx.facts, engine.is_empty() || judged) {
        for nic in &facts.nics {
            out.extend(platform::remote_numa(facts, nic, ctx.host, &engine));
        }
    }
    out
}

/// Each engine's own rules, one entry per engine that has a rules file
/// (registering one is this one line). An entry acts only on a test of its
/// engine: it may drop findings the test's design explains and adds its own.
const ENGINE_RULES: &[fn(&Input, &Thresholds, &mut Vec<Finding>)] =
    &[grpc::test_rules, sink::test_rules];

/// The engine rule families' own threshold tables, printed: the rule
/// table's test finds every threshold a rule names in them or in
/// [`Thresholds`].
#[cfg(test)]
pub fn family_thresholds() -> String {
    format!("{:?} {:?}", grpc::GRPC_THRESHOLDS, sink::SINK_THRESHOLDS)
}

/// The engines' own rules on the window of a test (see [`ENGINE_RULES`]),
/// after every other rule ran into `out`.
pub fn engine_rules(input: &Input, t: &Thresholds, out: &mut Vec<Finding>) {
    for rules in ENGINE_RULES {
        rules(input, t, out);
    }
}

/// One finding per key (id, host, subject): the highest-scored one. Window rules
/// may restate a static finding with live evidence and a higher severity
/// (e.g. nic.gro-off on veth when packets arrive unaggregated).
pub fn merge(mut out: Vec<Finding>) -> Vec<Finding> {
    let mut seen = std::collections::BTreeSet::new();
    out.sort_by(|a, b| b.score.total_cmp(&a.score));
    out.retain(|f| seen.insert(f.key()));
    out
}

#[cfg(test)]
mod tests {
    use super::HostCtx;
    use crate::diagnose::thresholds::THRESHOLDS;
    use crate::diagnose::{Input, TestContext, Window};
    use crate::probe::facts::{HostFacts, NicFacts, NumaNode};
    use crate::probe::sample::{HostRole, Sample};
    use crate::traffic::sink::SinkSpec;
    use crate::traffic::EngineSpec;
    use crate::units::CpuId;
    use serde_json::json;

    /// A two-node host whose NIC eth0 sits on node 1 (cpus 2-3).
    fn two_nodes() -> HostFacts {
        HostFacts {
            numa: vec![
                NumaNode {
                    node: 0,
                    cpulist: "0-1".into(),
                },
                NumaNode {
                    node: 1,
                    cpulist: "2-3".into(),
                },
            ],
            nics: vec![NicFacts {
                name: "eth0".into(),
                numa_node: Some(1),
                local_cpulist: Some("2-3".into()),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// Three 1-s intervals with traffic.
    fn busy() -> Vec<Sample> {
        (0..3u32)
            .map(|i| {
                serde_json::from_value(json!({
                    "host": "peer", "index": i, "start_s": f64::from(i), "end_s": f64::from(i) + 1.0,
                    "omitted": false,
                    "engine": {"tx_bytes": 0, "rx_bytes": 125_000_000u64, "tx_bps": 0.0,
                               "rx_bps": 1e9, "messages": 0, "msgs_per_s": 0.0},
                    "cpus": [], "softirqs": [], "softnet": [], "ifaces": [], "nstat": {}
                }))
                .expect("sample json")
            })
            .collect()
    }

    fn irq_remote_numa(spec: &EngineSpec) -> bool {
        let (facts, samples) = (two_nodes(), busy());
        let input = Input {
            local: Window::default(),
            peer: Window {
                samples: &samples,
                facts: Some(&facts),
            },
            test: TestContext { spec: Some(spec) },
        };
        let derived = super::FactsDerived::default();
        let ctx = HostCtx::with(&input, HostRole::Peer, &THRESHOLDS, &derived);
        super::window_rules(&ctx, &THRESHOLDS)
            .iter()
            .any(|f| f.id == "irq.remote-numa")
    }

    #[test]
    fn a_packet_tests_remote_sink_cores_are_one_finding_not_two() {
        // The agent's sink threads on node 0, the NIC on node 1: the sink
        // rules say so (sink.remote-numa); irq.remote-numa said it again.
        let sink = SinkSpec {
            peer_cpus: vec![CpuId(0), CpuId(1)],
            ..Default::default()
        };
        assert!(!irq_remote_numa(&EngineSpec::Sink(sink.clone())));
        // The generator's end of a reverse test is not the sink's.
        let reverse = SinkSpec {
            reverse: true,
            ..sink
        };
        assert!(irq_remote_numa(&EngineSpec::Sink(reverse)));
    }
}

//! The sampler: once per interval, every probe plus the engine counters → one Sample.
//!
//! [`Sampler`] is the synchronous core; [`thread::SamplerThread`] runs it on a
//! named thread of its own, so blocking reads (procfs, ioctl, netlink, BPF
//! maps) never run inside the async runtime that carries the control protocol,
//! and a starved runtime cannot distort intervals. The session drives it with
//! its interval clock (the period is a setting of the session, not of the
//! sampler).
//!
//! Every counter is timestamped where it is read and turned into a rate over
//! its own span: the engine's counters first (relaxed atomic loads, the
//! interval's `start_s`/`end_s`), then the cheap host files (/proc/stat,
//! /proc/softirqs, softnet_stat, snmp, netstat), then the eBPF maps right
//! before /proc/net/dev (so both cover the same window), then the slower
//! ones (one `ETHTOOL_GSTATS` per interface, names read once; netdev qstats;
//! one `getsockopt(TCP_INFO)` per connection). Host facts (netlink and sysfs
//! queries) are read when a point begins and re-checked every
//! [`FACTS_EVERY`] intervals — less often on a host where that re-read
//! costs more than [`FACTS_BUDGET_US`] per interval (a host of 8 NICs reads
//! some 2,000 sysfs and procfs files for them); a Sample carries them only
//! when they changed.
//! The sampler never blocks the engines: their counters are relaxed atomics
//! and the latency histograms are swapped under a lock the workers hold for
//! microseconds every 10 ms.
//!
//! Its kernel boundaries are traits so it runs on recorded inputs in tests:
//! files through [`HostSource`], netdev qstats through [`QstatsSource`], the
//! eBPF maps through [`EbpfSource`] (loaded by an [`EbpfLoader`]). On the live
//! host, when privileged, the eBPF probes are loaded for the interfaces under
//! test at [`Sampler::set_ifaces`]; otherwise every Sample says why eBPF is off.

mod engine;
pub mod thread;

pub use engine::EngineView;

use super::cpu::{cpu_deltas, parse_proc_stat, CpuTicks};
use super::ebpf::{
    Ebpf, EbpfCounters, EbpfIface, EbpfMode, EbpfReadError, EbpfStatus, EbpfUnavailable, IfaceKey,
};
use super::ethtool_names::Class;
use super::facts::{HostFacts, Support};
use super::netlink::NetdevNl;
use super::netstat::{parse_snmp, snmp_deltas};
use super::nic::{parse_net_dev, DevCounters, NicStats};
pub use super::queues::QstatsSource;
use super::queues::QueueProbe;
use super::sample::{
    EngineSample, HostRole, IfaceSample, LatencySummary, NicCounter, QueueSample, Sample,
};
use super::softirq::{
    parse_softirqs, parse_softnet, softirq_deltas, softnet_deltas, Softirqs, Softnet,
};
use super::source::HostSource;
use super::system::{online_cpu_ids, read_host_facts_reusing, PlacesCache};
use crate::traffic::new_latency_histogram;
use crate::units::{BitsPerSec, CpuId};
use hdrhistogram::Histogram;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// CPU time consumed by the calling thread (µs).
fn thread_cpu_us() -> u64 {
    cpu_clock_us(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time consumed by this process, all its threads (µs).
fn process_cpu_us() -> u64 {
    cpu_clock_us(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// A CPU-time clock's reading (µs); 0 if it cannot be read.
fn cpu_clock_us(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec; the CPU-time clocks need nothing else.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000
        + u64::try_from(ts.tv_nsec).unwrap_or(0) / 1000
}

/// Set to `off` to keep the eBPF probes unloaded whatever `--ebpf` says (on
/// an agent this is the host owner's veto; `cargo xtask bench ebpf` uses it).
pub const EBPF_ENV: &str = "WIRESCOPE_EBPF";

/// eBPF status before the first interfaces are set.
const EBPF_PENDING: &str = "eBPF off: no interfaces set yet";

/// Facts are re-read every this many intervals to notice changes.
pub const FACTS_EVERY: u32 = 10;

/// The CPU time per interval the facts' re-check may cost on average: a
/// re-read that took longer waits that many more intervals before the
/// next (still at a multiple of [`FACTS_EVERY`], at most [`FACTS_MAX_EVERY`]).
pub const FACTS_BUDGET_US: u64 = 500;

/// The longest wait between two re-reads of the facts, in intervals.
pub const FACTS_MAX_EVERY: u32 = 60;

/// Intervals until the facts are due again after a re-read that cost
/// `cost_us` of CPU time: [`FACTS_EVERY`], or more when that keeps the
/// re-reads within [`FACTS_BUDGET_US`] per interval.
pub fn facts_stride(cost_us: u64) -> u32 {
    let need = cost_us.div_ceil(FACTS_BUDGET_US);
    u32::try_from(need)
        .unwrap_or(u32::MAX)
        .clamp(FACTS_EVERY, FACTS_MAX_EVERY)
}

/// Loaded eBPF probes: what they count and their counts since the last read.
pub trait EbpfSource: Send {
    /// What runs (set, tracepoints, interfaces).
    fn status(&self) -> EbpfStatus;
    /// The interfaces counted, in the order the programs know them.
    fn ifaces(&self) -> &[EbpfIface];
    /// Attached tracepoints.
    fn probes(&self) -> Vec<String>;
    /// Counts since the previous read.
    fn read(&mut self) -> Result<EbpfCounters, EbpfReadError>;
    /// The sampling interval from now on (sizes the default set's windows).
    fn set_interval(&mut self, _interval: Duration) {}
}

impl EbpfSource for Ebpf {
    fn status(&self) -> EbpfStatus {
        Ebpf::status(self)
    }
    fn ifaces(&self) -> &[EbpfIface] {
        Ebpf::ifaces(self)
    }
    fn probes(&self) -> Vec<String> {
        Ebpf::probes(self)
    }
    fn read(&mut self) -> Result<EbpfCounters, EbpfReadError> {
        Ebpf::read(self)
    }
    fn set_interval(&mut self, interval: Duration) {
        Ebpf::set_interval(self, interval);
    }
}

/// Loads an eBPF probe set for some interfaces (the live host: aya).
pub type EbpfLoader =
    Box<dyn Fn(EbpfMode, &[EbpfIface]) -> Result<Box<dyn EbpfSource>, EbpfUnavailable> + Send>;

fn load_kernel_probes(
    mode: EbpfMode,
    ifaces: &[EbpfIface],
) -> Result<Box<dyn EbpfSource>, EbpfUnavailable> {
    Ebpf::load(mode, ifaces).map(|e| Box::new(e) as Box<dyn EbpfSource>)
}

#[derive(Default)]
struct IfaceState {
    name: String,
    ifindex: Option<u32>,
    driver: String,
    prev_dev: Option<DevCounters>,
    /// The previous `ethtool -S` reading (for the device-wide counters' deltas).
    prev_stats: Option<NicStats>,
    queues: QueueProbe,
}

/// Cumulative host counters, kept between Samples.
#[derive(Default)]
struct HostState {
    online: Vec<CpuId>,
    cpu: Vec<(CpuId, CpuTicks)>,
    softirqs: Option<Softirqs>,
    softnet: Vec<(CpuId, Softnet)>,
    snmp: BTreeMap<String, i64>,
    rdma: super::rdma::RdmaCounterReader,
    /// The RDMA devices whose counters each Sample reads (read at `begin`).
    rdma_facts: Option<super::rdma::RdmaFacts>,
    /// The cores' places, read again only when the online CPUs change.
    places: PlacesCache,
}

/// The eBPF probes of this sampler.
enum EbpfState {
    /// Not loaded yet (no `set_ifaces` so far).
    Pending,
    /// The source is not the running host: eBPF does not apply.
    NotLive,
    /// Off, with the one-line reason.
    Off(String),
    /// Loaded and attached.
    On(Box<dyn EbpfSource>),
}

/// The eBPF fields of one Sample.
#[derive(Debug, Default)]
struct EbpfPart {
    status: Option<String>,
    probes: Vec<String>,
    softirq_time: Vec<super::ebpf::SoftirqTime>,
    queue_cpus: Vec<super::ebpf::QueueCpu>,
    observed: Option<f64>,
    napi: Vec<super::ebpf::NapiSample>,
    queues: Vec<QueueSample>,
}

/// eBPF settings of a [`Sampler`].
#[derive(Debug, Clone, Default)]
struct EbpfConfig {
    mode: EbpfMode,
    /// Interfaces of the peer on this same kernel, counted on its behalf.
    peer: Vec<EbpfIface>,
}

/// Produces Samples for this host.
pub struct Sampler {
    ebpf: EbpfState,
    ebpf_config: EbpfConfig,
    ebpf_loader: EbpfLoader,
    source: Box<dyn HostSource>,
    netdev: Option<Box<dyn QstatsSource>>,
    host: HostState,
    ifaces: Vec<IfaceState>,
    facts: Option<HostFacts>,
    facts_due: bool,
    /// The first interval index the facts may be re-read at (see [`facts_stride`]).
    facts_next: u32,
    engine: Option<EngineView>,
    index: u32,
    /// When the point began.
    t0: Instant,
    /// When the engine counters were last read (an interval's boundary).
    last_engine: Instant,
    /// This process's CPU time then (µs), for the interval's share.
    last_process_cpu_us: u64,
    /// When /proc/net/dev and the queue counters were last read.
    last_ifaces: Instant,
    /// When the eBPF maps were last read.
    last_ebpf: Instant,
    omit_intervals: u64,
    latency_total: Histogram<u64>,
}

impl Sampler {
    /// A sampler of the host `source` describes; on the live host it asks
    /// the kernel's netdev netlink for queue counters and loads the eBPF
    /// probes with aya. Takes the first snapshots now.
    pub fn new(source: Box<dyn HostSource>) -> Self {
        let netdev = if source.is_live() {
            NetdevNl::open()
                .ok()
                .map(|n| Box::new(n) as Box<dyn QstatsSource>)
        } else {
            None
        };
        Self::with(source, netdev, Box::new(load_kernel_probes))
    }

    /// A sampler with explicit kernel boundaries (tests feed recorded data).
    pub fn with(
        source: Box<dyn HostSource>,
        netdev: Option<Box<dyn QstatsSource>>,
        ebpf_loader: EbpfLoader,
    ) -> Self {
        let now = Instant::now();
        let mut s = Sampler {
            ebpf_loader,
            ebpf: if source.is_live() {
                EbpfState::Pending
            } else {
                EbpfState::NotLive
            },
            ebpf_config: EbpfConfig::default(),
            host: HostState {
                online: online_cpu_ids(source.as_ref()),
                ..Default::default()
            },
            source,
            netdev,
            ifaces: Vec::new(),
            facts: None,
            facts_due: true,
            facts_next: 0,
            engine: None,
            index: 0,
            t0: now,
            last_engine: now,
            last_process_cpu_us: process_cpu_us(),
            last_ifaces: now,
            last_ebpf: now,
            omit_intervals: 0,
            latency_total: new_latency_histogram(),
        };
        s.read_host(&mut Vec::new());
        s
    }

    /// Watch these interfaces from now on (counters, queues, facts).
    pub fn set_ifaces(&mut self, names: &[String]) {
        let mut names: Vec<String> = names.to_vec();
        names.dedup();
        if names.iter().ne(self.ifaces.iter().map(|i| &i.name)) {
            let src = self.source.as_ref();
            self.ifaces = names
                .into_iter()
                .map(|name| IfaceState {
                    ifindex: src
                        .read(&format!("/sys/class/net/{name}/ifindex"))
                        .ok()
                        .and_then(|t| t.trim().parse().ok()),
                    name,
                    ..Default::default()
                })
                .collect();
            self.facts_due = true;
            self.read_ifaces(&mut Vec::new(), &mut Vec::new(), &mut Vec::new());
            if !matches!(self.ebpf, EbpfState::NotLive) {
                self.ebpf = EbpfState::Pending;
            }
        }
        if matches!(self.ebpf, EbpfState::Pending) {
            self.load_ebpf();
        }
    }

    /// Choose the eBPF probe set, and the peer's interfaces on this same
    /// kernel to count on its behalf (local pair). Takes effect now if
    /// interfaces are set, else at [`Sampler::set_ifaces`].
    pub fn set_ebpf(&mut self, mode: EbpfMode, peer: Vec<EbpfIface>) {
        if matches!(self.ebpf, EbpfState::NotLive) {
            return;
        }
        if self.ebpf_config.mode == mode
            && self.ebpf_config.peer == peer
            && !matches!(self.ebpf, EbpfState::Pending)
        {
            return;
        }
        self.ebpf_config = EbpfConfig { mode, peer };
        self.ebpf = EbpfState::Pending;
        if !self.ifaces.is_empty() {
            self.load_ebpf();
        }
    }

    /// What the eBPF probes do (None when the source is not the running host).
    pub fn ebpf_status(&self) -> Option<EbpfStatus> {
        let mode = self.ebpf_config.mode;
        match &self.ebpf {
            EbpfState::NotLive => None,
            EbpfState::Pending => Some(EbpfStatus::off(mode, EBPF_PENDING)),
            EbpfState::Off(why) => Some(EbpfStatus::off(mode, why.clone())),
            EbpfState::On(e) => Some(e.status()),
        }
    }

    /// Load the eBPF probes for the current interfaces (replacing any loaded ones).
    fn load_ebpf(&mut self) {
        // Unload first: the old set must not count in between.
        self.ebpf = EbpfState::Pending;
        let mode = self.ebpf_config.mode;
        if mode == EbpfMode::ByPeer {
            self.ebpf = EbpfState::Off(
                "eBPF off here: the controller's probes on this same kernel count for both ends"
                    .into(),
            );
            return;
        }
        if std::env::var_os(EBPF_ENV).is_some_and(|v| v == "off") {
            self.ebpf = EbpfState::Off(
                EbpfUnavailable::Disabled(format!("disabled by {EBPF_ENV}=off")).to_string(),
            );
            return;
        }
        if mode == EbpfMode::Off {
            self.ebpf = EbpfState::Off(EbpfUnavailable::Disabled("--ebpf off".into()).to_string());
            return;
        }
        let netns = std::fs::metadata("/proc/thread-self/ns/net")
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m) as u32)
            .unwrap_or(0);
        let src = self.source.as_ref();
        let ethtool = super::nic::EthtoolIoctl::open().ok();
        let mut ifaces: Vec<EbpfIface> = self
            .ifaces
            .iter()
            .filter_map(|st| {
                let q = src
                    .list(&format!("/sys/class/net/{}/queues", st.name))
                    .unwrap_or_default();
                let n = |p: &str| q.iter().filter(|e| e.starts_with(p)).count() as u32;
                Some(EbpfIface {
                    name: st.name.clone(),
                    key: IfaceKey {
                        ifindex: st.ifindex?,
                        netns,
                    },
                    rx_queues: n("rx-"),
                    tx_queues: n("tx-"),
                    rx_mapping_is_queue: ethtool
                        .as_ref()
                        .and_then(|e| e.drvinfo(&st.name).ok())
                        .is_some_and(|d| d.driver == "veth"),
                })
            })
            .collect();
        ifaces.extend(self.ebpf_config.peer.iter().cloned());
        self.ebpf = match (self.ebpf_loader)(mode, &ifaces) {
            Ok(e) => EbpfState::On(e),
            Err(e) => EbpfState::Off(e.to_string()),
        };
    }

    /// eBPF status and this interval's eBPF fields (rates over the span
    /// since the maps were last read).
    fn read_ebpf(&mut self, errors: &mut Vec<String>) -> EbpfPart {
        let now = Instant::now();
        let secs = now.duration_since(self.last_ebpf).as_secs_f64();
        self.last_ebpf = now;
        match &mut self.ebpf {
            EbpfState::NotLive => EbpfPart::default(),
            EbpfState::Pending => EbpfPart {
                status: Some(EBPF_PENDING.into()),
                ..Default::default()
            },
            EbpfState::Off(why) => EbpfPart {
                status: Some(why.clone()),
                ..Default::default()
            },
            EbpfState::On(e) => {
                let mut part = EbpfPart {
                    status: Some("on".into()),
                    probes: e.probes(),
                    ..Default::default()
                };
                match e.read() {
                    Ok(c) => {
                        part.queues = c.queue_samples(e.ifaces(), secs);
                        part.softirq_time = c.softirq;
                        part.queue_cpus = c.queue_cpus;
                        part.observed = c.observed;
                        part.napi = c.napi;
                    }
                    Err(err) => errors.push(err.to_string()),
                }
                part
            }
        }
    }

    /// Start a new test point: interval numbering restarts, the engine (if
    /// any) is watched, and the first Sample carries the host facts.
    /// Intervals are omitted by number (those that end within `omit`, at
    /// `interval` each), so both hosts mark the same ones whatever their clocks.
    pub fn begin(&mut self, engine: Option<EngineView>, omit: Duration, interval: Duration) {
        if let EbpfState::On(e) = &mut self.ebpf {
            e.set_interval(interval);
        }
        self.read_host(&mut Vec::new());
        self.read_ebpf(&mut Vec::new());
        self.read_ifaces(&mut Vec::new(), &mut Vec::new(), &mut Vec::new());
        let now = Instant::now();
        self.t0 = now;
        self.last_engine = now;
        self.last_process_cpu_us = process_cpu_us();
        self.index = 0;
        self.omit_intervals =
            u64::try_from(omit.as_nanos() / interval.as_nanos().max(1)).unwrap_or(u64::MAX);
        // RDMA counters count from here: the devices now, and a first read.
        self.host.rdma = Default::default();
        self.host.rdma_facts = Some(super::rdma::read_rdma_facts(self.source.as_ref()));
        let _ = self.read_rdma();
        self.facts = None;
        self.facts_due = true;
        self.latency_total.reset();
        self.engine = engine;
    }

    /// Stop watching the engine and release the socket duplicates.
    pub fn end(&mut self) {
        self.engine = None;
    }

    /// Take one Sample covering the time since the previous one.
    pub fn sample(&mut self) -> Sample {
        let cpu0 = thread_cpu_us();
        // The engine's counters first, timestamped where they are read: they
        // define the interval, and nothing slow may stretch it.
        let engine_read = self.engine.as_ref().map(EngineView::read);
        let now = Instant::now();
        let secs = now.duration_since(self.last_engine).as_secs_f64();
        let start_s = self.last_engine.duration_since(self.t0).as_secs_f64();
        let end_s = now.duration_since(self.t0).as_secs_f64();
        self.last_engine = now;
        let process_cpu = process_cpu_us();
        let process_cpu_pct = (secs > 0.0)
            .then(|| process_cpu.saturating_sub(self.last_process_cpu_us) as f64 / (secs * 1e4));
        self.last_process_cpu_us = process_cpu;
        let omitted = u64::from(self.index) < self.omit_intervals;
        let mut errors = Vec::new();
        let (cpus, softirqs, softnet, nstat) = self.read_host(&mut errors);
        let mut nic_counters = Vec::new();
        let mut queues = Vec::new();
        // eBPF maps right before /proc/net/dev: both windows end within
        // microseconds of each other (ethtool reads come after both).
        let ebpf = self.read_ebpf(&mut errors);
        let ifaces = self.read_ifaces(&mut nic_counters, &mut queues, &mut errors);
        queues.extend(ebpf.queues);
        let (engine, conns) = match (self.engine.as_mut(), engine_read) {
            (Some(v), Some(r)) => {
                let (mut e, conns) = v.interval(r, secs, omitted, &mut self.latency_total);
                e.process_cpu_pct = process_cpu_pct;
                (e, conns)
            }
            _ => (EngineSample::default(), Vec::new()),
        };
        let facts = self.facts_if_changed();
        let rdma = self.read_rdma();
        let s = Sample {
            host: HostRole::Local,
            index: self.index,
            start_s,
            end_s,
            omitted,
            engine,
            cpus,
            conns,
            softirqs,
            softnet,
            ifaces,
            queues,
            nic_counters,
            nstat,
            facts,
            sampler_cpu_us: 0,
            probe_errors: errors,
            ebpf: ebpf.status,
            probes: ebpf.probes,
            softirq_time: ebpf.softirq_time,
            queue_cpus: ebpf.queue_cpus,
            ebpf_observed: ebpf.observed,
            napi: ebpf.napi,
            rdma,
            detail: Default::default(),
        };
        self.index += 1;
        Sample {
            sampler_cpu_us: thread_cpu_us().saturating_sub(cpu0),
            ..s
        }
    }

    /// The RDMA ports' counters since the previous Sample (hosts with a device only).
    fn read_rdma(&mut self) -> Option<super::rdma::RdmaSample> {
        let facts = self.host.rdma_facts.as_ref()?;
        if facts.devices.is_empty() {
            return None;
        }
        self.host.rdma.read(self.source.as_ref(), facts)
    }

    fn facts_if_changed(&mut self) -> Option<Box<HostFacts>> {
        let periodic = self.index.is_multiple_of(FACTS_EVERY) && self.index >= self.facts_next;
        if !self.facts_due && !periodic {
            return None;
        }
        self.facts_due = false;
        let names: Vec<String> = self.ifaces.iter().map(|i| i.name.clone()).collect();
        let cpu0 = thread_cpu_us();
        let f = read_host_facts_reusing(self.source.as_ref(), &names, &mut self.host.places);
        let stride = facts_stride(thread_cpu_us().saturating_sub(cpu0));
        self.facts_next = self.index.saturating_add(stride);
        for st in &mut self.ifaces {
            st.queues.retry_qstats();
            if let Some(n) = f.nics.iter().find(|n| n.name == st.name) {
                st.driver = n.drvinfo.driver();
                st.ifindex = n.ifindex.or(st.ifindex);
            }
        }
        if self.facts.as_ref() == Some(&f) {
            return None;
        }
        self.facts = Some(f.clone());
        Some(Box::new(f))
    }

    #[allow(clippy::type_complexity)]
    fn read_host(
        &mut self,
        errors: &mut Vec<String>,
    ) -> (
        Vec<super::cpu::CpuSample>,
        Vec<super::softirq::SoftirqCpu>,
        Vec<super::softirq::SoftnetCpu>,
        BTreeMap<String, u64>,
    ) {
        let src = self.source.as_ref();
        let h = &mut self.host;
        let cpus = match src
            .read("/proc/stat")
            .map_err(|e| e.to_string())
            .and_then(|t| parse_proc_stat(&t).map_err(|e| e.to_string()))
        {
            Ok(cur) => {
                let d = cpu_deltas(&h.cpu, &cur);
                h.cpu = cur;
                d
            }
            Err(e) => {
                errors.push(format!("cpu: /proc/stat: {e}"));
                Vec::new()
            }
        };
        // A file that cannot be read is said, prefixed by its probe.
        let mut read = |probe: &str, f: &str| {
            src.read(f)
                .map_err(|e| errors.push(format!("{probe}: {f}: {e}")))
                .ok()
        };
        let softirqs = read("softirq", "/proc/softirqs")
            .map(|t| {
                let cur = parse_softirqs(&t);
                let d = h.softirqs.as_ref().map(|p| softirq_deltas(p, &cur));
                h.softirqs = Some(cur);
                d.unwrap_or_default()
            })
            .unwrap_or_default();
        let softnet = read("softnet", "/proc/net/softnet_stat")
            .map(|t| {
                let cur = parse_softnet(&t, &h.online);
                let d = softnet_deltas(&h.softnet, &cur);
                h.softnet = cur;
                d
            })
            .unwrap_or_default();
        let mut snmp = BTreeMap::new();
        for f in ["/proc/net/snmp", "/proc/net/netstat"] {
            snmp.extend(read("nstat", f).map(|t| parse_snmp(&t)).unwrap_or_default());
        }
        let nstat = if h.snmp.is_empty() {
            BTreeMap::new()
        } else {
            snmp_deltas(&h.snmp, &snmp)
        };
        h.snmp = snmp;
        (cpus, softirqs, softnet, nstat)
    }

    /// Interface and queue counters, as rates over the span since they were last read.
    fn read_ifaces(
        &mut self,
        nic_counters: &mut Vec<NicCounter>,
        queues: &mut Vec<QueueSample>,
        errors: &mut Vec<String>,
    ) -> Vec<IfaceSample> {
        if self.ifaces.is_empty() {
            return Vec::new();
        }
        let src = self.source.as_ref();
        // A host without the file has no interface counters (as before); a
        // file that does not parse is said.
        let dev = match src.read("/proc/net/dev").map(|t| parse_net_dev(&t)) {
            Ok(Ok(d)) => d,
            Ok(Err(e)) => {
                errors.push(format!("nic: {e}"));
                BTreeMap::new()
            }
            Err(_) => BTreeMap::new(),
        };
        let now = Instant::now();
        let secs = now.duration_since(self.last_ifaces).as_secs_f64();
        self.last_ifaces = now;
        let mut out = Vec::new();
        for st in &mut self.ifaces {
            if let Some(cur) = dev.get(&st.name) {
                if let Some(prev) = st.prev_dev {
                    let d = cur.delta(&prev);
                    out.push(IfaceSample {
                        name: st.name.clone(),
                        rx_bps: BitsPerSec::from_bytes(d.rx_bytes, secs),
                        tx_bps: BitsPerSec::from_bytes(d.tx_bytes, secs),
                        delta: d,
                    });
                }
                st.prev_dev = Some(*cur);
            }
            let stats = match src.ethtool_stats(&st.name) {
                Support::Value(v) => Some(v),
                _ => None,
            };
            queues.extend(st.queues.read(
                self.netdev.as_deref_mut(),
                &st.name,
                st.ifindex,
                &st.driver,
                stats.as_ref(),
                secs,
            ));
            let Some(stats) = stats else { continue };
            // The classes are cached per NIC (classified again only when the
            // names change). Per-queue counters are in `queues`; the rest (and
            // names no pattern knows) here.
            let classes = st.queues.classes(&st.driver, &stats);
            if let Some(prev) = &st.prev_stats {
                global_deltas(&st.name, prev, &stats, classes, nic_counters);
            }
            st.prev_stats = Some(stats);
        }
        out
    }

    /// Latency over every non-omitted interval of the current point.
    pub fn latency_total(&self) -> Option<LatencySummary> {
        LatencySummary::from_histogram(&self.latency_total)
    }
}

/// The device-wide counters (class [`Class::Global`]) of `iface` that grew
/// from `prev` to `cur`: by index while both list the same names (shared
/// between readings: known at once), by name after the driver's set changed
/// (a name new in `cur` has nothing to grow from).
fn global_deltas(
    iface: &str,
    prev: &NicStats,
    cur: &NicStats,
    classes: &[Class],
    out: &mut Vec<NicCounter>,
) {
    let mut push = |name: &str, before: u64, now: u64| {
        if now > before {
            out.push(NicCounter {
                iface: iface.to_owned(),
                name: name.to_owned(),
                delta: now - before,
            });
        }
    };
    let globals = cur
        .iter()
        .zip(classes)
        .enumerate()
        .filter(|(_, (_, c))| **c == Class::Global);
    if prev.same_names(cur) {
        for (i, ((name, now), _)) in globals {
            if let Some(b) = prev.values.get(i) {
                push(name, *b, now);
            }
        }
    } else {
        // A name listed twice: its k-th listing against the k-th before.
        let mut before: HashMap<&str, Vec<u64>> = HashMap::new();
        for (name, v) in prev.iter() {
            before.entry(name).or_default().push(v);
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (_, ((name, now), _)) in globals {
            let k = seen.entry(name).or_insert(0);
            if let Some(b) = before.get(name).and_then(|v| v.get(*k)) {
                push(name, *b, now);
            }
            *k += 1;
        }
    }
}

#[cfg(test)]
mod tests;

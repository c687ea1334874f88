//! The Sample: everything known about one host for one interval.
//!
//! A Sample is plain owned data: the sampler produces it, the control channel
//! carries the peer's, the log serialises it, and the TUI and the
//! diagnosis rules read it. New telemetry is added as new optional fields
//! (`#[serde(default)]`), so logs written by older versions still parse.

use super::cpu::CpuSample;
use super::ethtool_names::Dir;
use super::facts::HostFacts;
use super::nic::DevCounters;
use super::softirq::{SoftirqCpu, SoftnetCpu};
use super::tcpinfo::TcpInfo;
use crate::traffic::ConnRole;
pub use crate::traffic::LatencySummary;
use crate::units::{BitsPerSec, CpuId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Which end of the pair a Sample describes, from the controller's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HostRole {
    /// The host running `wirescope run` / the TUI.
    Local,
    /// The host running `wirescope agent`.
    Peer,
}

impl HostRole {
    /// `local` or `peer`, as in logs and JSON.
    pub fn name(self) -> &'static str {
        match self {
            HostRole::Local => "local",
            HostRole::Peer => "peer",
        }
    }
}

/// A pair of per-host values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hosts<T> {
    /// The controller's host.
    pub local: T,
    /// The agent's host.
    pub peer: T,
}

/// One host, one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sample {
    /// Which host.
    pub host: HostRole,
    /// Interval number, from 0 at the start of the test point.
    pub index: u32,
    /// Interval start, seconds since the test point started.
    pub start_s: f64,
    /// Interval end, seconds since the test point started.
    pub end_s: f64,
    /// True during the `--omit` warm-up: shown and logged, not summarised.
    pub omitted: bool,
    /// What the engine on this host did.
    pub engine: EngineSample,
    /// Per-core CPU of this host, from /proc/stat.
    pub cpus: Vec<CpuSample>,
    /// Per-connection counters and TCP_INFO.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conns: Vec<ConnSample>,
    /// Softirqs raised per CPU (/proc/softirqs deltas).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub softirqs: Vec<SoftirqCpu>,
    /// softnet counters per CPU (/proc/net/softnet_stat deltas).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub softnet: Vec<SoftnetCpu>,
    /// Interfaces under test (/proc/net/dev deltas and rates).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ifaces: Vec<IfaceSample>,
    /// Per-queue counters of the interfaces under test, each with its source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<QueueSample>,
    /// NIC counters that are not per queue (`ethtool -S`), non-zero deltas only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nic_counters: Vec<NicCounter>,
    /// nstat-style deltas of /proc/net/snmp and /proc/net/netstat (non-zero only).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nstat: BTreeMap<String, u64>,
    /// Host facts: present in the first Sample of a point and whenever they change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<Box<HostFacts>>,
    /// CPU time the sampler itself spent producing this Sample (µs, thread CPU
    /// clock): the observer's cost, measured rather than assumed.
    #[serde(default)]
    pub sampler_cpu_us: u64,
    /// Probes that could not read this interval, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probe_errors: Vec<String>,
    /// eBPF status: `on`, or the one-line reason it is off (`eBPF off: ...`).
    /// Absent when the host is a captured directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebpf: Option<String>,
    /// Active eBPF probes, by tracepoint (empty when eBPF is off).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<String>,
    /// Exact softirq handler time per CPU (eBPF `softirq_entry`/`exit`, deep
    /// set), CPUs that ran a softirq in the interval. Absent otherwise: the
    /// softirq time is then `cpus`' softirq column (/proc/stat).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub softirq_time: Vec<SoftirqTime>,
    /// The queue→CPU matrix (eBPF): packets and bytes of each queue of the
    /// interfaces under test by the CPU that processed them; non-zero cells.
    /// Their sums over CPUs are in `queues` with source `ebpf`, or
    /// `ebpf_sampled` when `ebpf_observed` is set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queue_cpus: Vec<QueueCpu>,
    /// The share of the interval (0..=1) the packet probes were attached
    /// when the default set samples them: `queue_cpus` and the
    /// `ebpf_sampled` queue rows are what they counted, scaled by its
    /// inverse. Absent when they count every skb (`--ebpf deep`) or are off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebpf_observed: Option<f64>,
    /// NAPI polls, work and budget-exhausted counts per instance and CPU (eBPF, deep set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub napi: Vec<NapiSample>,
    /// RDMA ports of the host over the interval: `counters/` and
    /// `hw_counters/` deltas and rates, the netdev's pause counters (only on
    /// hosts with an RDMA device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma: Option<super::rdma::RdmaSample>,
    /// Which span the per-row figures (`cpus`, `softirqs`, `softnet`,
    /// `queues`, `nic_counters`, `softirq_time`, `queue_cpus`, `napi`)
    /// cover: this interval, unless a log kept them every few intervals
    /// (a big host's log, [`crate::record::detail`]).
    #[serde(default, skip_serializing_if = "Detail::is_own")]
    pub detail: Detail,
}

/// Where a [`Sample`]'s per-row figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Detail {
    /// Its own interval (a live Sample, and every line of a small host's log).
    #[default]
    Own,
    /// Summed over several intervals, from `start_s` to `end_s` of the
    /// session clock (counts summed, CPU times and rates their means): a
    /// log's detail line, or the latest one a reader shows for a later line.
    Span {
        /// Start of the first interval summed.
        start_s: f64,
        /// End of the last.
        end_s: f64,
    },
    /// Left to a later detail line of the log, which sums this interval's
    /// rows with its neighbours' (the arrays are empty in the line).
    Later,
}

impl Detail {
    /// True for [`Detail::Own`] (left out of the log).
    pub fn is_own(&self) -> bool {
        matches!(self, Detail::Own)
    }
}

/// Engine totals of one host for one interval.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EngineSample {
    /// Bytes this host wrote during the interval.
    pub tx_bytes: u64,
    /// Bytes this host read during the interval.
    pub rx_bytes: u64,
    /// tx rate.
    pub tx_bps: BitsPerSec,
    /// rx rate.
    pub rx_bps: BitsPerSec,
    /// Messages completed during the interval (rr: transactions; pingpong: messages echoed).
    pub messages: u64,
    /// Message rate.
    pub msgs_per_s: f64,
    /// rr latency of the transactions completed in this interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
    /// The engine's own figures for this interval (gRPC statuses, RDMA
    /// completions, sink losses...), when it has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<crate::traffic::EngineInterval>,
    /// CPU time of the process that runs this end's engine over the
    /// interval, all its threads (the engine's, the sampler's, a face's), %
    /// of one core (CLOCK_PROCESS_CPUTIME_ID). The diagnosis judges with it
    /// whether a saturated core can be the test's; absent when the sampler
    /// watches no engine (`watch` of this host alone, captures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_cpu_pct: Option<f64>,
}

/// One interface for one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IfaceSample {
    /// Interface name.
    pub name: String,
    /// Counter deltas over the interval.
    #[serde(flatten)]
    pub delta: DevCounters,
    /// Receive rate.
    pub rx_bps: BitsPerSec,
    /// Transmit rate.
    pub tx_bps: BitsPerSec,
}

/// Where a per-queue number came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueSource {
    /// netdev generic netlink `qstats-get`.
    Qstats,
    /// The driver's private `ethtool -S` counters.
    Ethtool,
    /// eBPF probes, counting every skb (`--ebpf deep`).
    Ebpf,
    /// eBPF probes attached for a share of the interval (the default set):
    /// what they counted, scaled to the interval (the share is the Sample's
    /// `ebpf_observed`).
    EbpfSampled,
}

impl QueueSource {
    /// Short name for tables (`qstats`, `ethtool -S`, `eBPF`, `eBPF sampled`).
    pub fn name(self) -> &'static str {
        match self {
            QueueSource::Qstats => "qstats",
            QueueSource::Ethtool => "ethtool -S",
            QueueSource::Ebpf => "eBPF",
            QueueSource::EbpfSampled => "eBPF sampled",
        }
    }

    /// True for the eBPF probes' counts, exact or sampled.
    pub fn is_ebpf(self) -> bool {
        matches!(self, QueueSource::Ebpf | QueueSource::EbpfSampled)
    }
}

/// One NIC queue for one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueSample {
    /// Interface.
    // Inline (no allocation per row): a big host's Sample has 1,024 rows.
    pub iface: smol_str::SmolStr,
    /// Direction.
    pub dir: Dir,
    /// Queue index.
    pub queue: u32,
    /// Packets in the interval (None when the source has no packet count for this queue).
    pub packets: Option<u64>,
    /// Bytes in the interval.
    pub bytes: Option<u64>,
    /// Drops in the interval.
    pub drops: Option<u64>,
    /// Packets per second.
    pub pps: f64,
    /// Bits per second.
    pub bps: BitsPerSec,
    /// Which counters these are.
    pub source: QueueSource,
    /// Other counters of this queue that moved, by their source's name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other: BTreeMap<String, u64>,
}

/// A NIC counter (by its `ethtool -S` name) that moved during the interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NicCounter {
    /// Interface.
    pub iface: String,
    /// Counter name as the driver reports it (e.g. `rx_out_of_buffer`).
    pub name: String,
    /// Increase over the interval.
    pub delta: u64,
}

/// Per-connection figures for one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConnSample {
    /// Connection index (the same on both hosts).
    pub id: usize,
    /// What this host does on it.
    pub role: ConnRole,
    /// Bytes written in the interval.
    pub tx_bytes: u64,
    /// Bytes read in the interval.
    pub rx_bytes: u64,
    /// Retransmitted segments in the interval (TCP_INFO delta).
    pub retransmits: u32,
    /// TCP_INFO at the end of the interval (absent once the socket is gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpInfo>,
}

impl Sample {
    /// The busiest core of this host in this interval.
    pub fn busiest_cpu(&self) -> Option<&CpuSample> {
        self.cpus
            .iter()
            .max_by(|a, b| a.busy().0.total_cmp(&b.busy().0))
    }

    /// The seconds the per-row figures cover: the detail span of a log's
    /// detail line (or of the one a replay shows), else the interval.
    pub fn rows_secs(&self) -> f64 {
        match self.detail {
            Detail::Span { start_s, end_s } => end_s - start_s,
            Detail::Own | Detail::Later => self.end_s - self.start_s,
        }
    }

    /// Mean busy percentage over all cores.
    pub fn mean_busy(&self) -> f64 {
        if self.cpus.is_empty() {
            return 0.0;
        }
        self.cpus.iter().map(|c| c.busy().0).sum::<f64>() / self.cpus.len() as f64
    }
}

/// Exact softirq handler time of one CPU over an interval (eBPF
/// `softirq_entry`/`exit`, deep set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SoftirqTime {
    /// CPU.
    pub cpu: CpuId,
    /// NET_RX handler time (ns).
    pub net_rx_ns: u64,
    /// NET_TX handler time (ns).
    pub net_tx_ns: u64,
    /// NET_RX handler runs (comparable to /proc/softirqs NET_RX).
    pub net_rx_count: u64,
    /// NET_TX handler runs.
    pub net_tx_count: u64,
    /// All vectors' handler time (ns).
    pub all_ns: u64,
}

/// One cell of the queue→CPU matrix (eBPF): what `cpu` handled of one queue in an interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueCpu {
    /// Interface.
    pub iface: String,
    /// Direction: rx = `netif_receive_skb`, tx = `net_dev_start_xmit`.
    pub dir: Dir,
    /// Queue; None for received skbs with no recorded rx queue (`skb_rx_queue_recorded` false).
    pub queue: Option<u32>,
    /// The CPU that ran the hook.
    pub cpu: CpuId,
    /// skbs (a GSO/GRO skb counts once, as in /proc/net/dev); an estimate
    /// when the Sample's `ebpf_observed` is set.
    pub packets: u64,
    /// Bytes (`skb->len`), likewise.
    pub bytes: u64,
}

/// One NAPI instance of a watched interface over an interval (eBPF
/// `napi_poll`, deep set): how often the CPU polled it and how often the poll
/// used its whole budget — "this queue's CPU cannot keep up".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NapiSample {
    /// Interface.
    pub iface: String,
    /// The kernel's NAPI id (netdev netlink `queue-get` maps it to a queue).
    pub napi_id: u32,
    /// The CPU that polled.
    pub cpu: CpuId,
    /// Polls.
    pub polls: u64,
    /// Packets processed.
    pub work: u64,
    /// Polls that exhausted their budget.
    pub exhausted: u64,
}

//! A captured host read once (`watch --from`, `check --from`): its facts,
//! interface and per-queue counters, softnet and softirqs — the same parsers
//! as the live sampler, without rates (a snapshot has no interval).

use super::capture_dir::CaptureDir;
use super::ethtool_names::{per_queue, QueueCounters};
use super::facts::{HostFacts, Support};
use super::nic::{parse_net_dev, DevCounters};
use super::softirq::{parse_softirqs, parse_softnet, Softnet};
use super::source::HostSource;
use super::system::{online_cpu_ids, read_host_facts};
use crate::units::CpuId;
use serde::Serialize;
use std::collections::BTreeMap;

/// A captured host, read once.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Snapshot {
    /// Where it was read from.
    pub source: String,
    /// Facts.
    pub facts: HostFacts,
    /// /proc/net/dev per interface under inspection.
    pub ifaces: BTreeMap<String, DevCounters>,
    /// Per-queue counters from `ethtool -S`, per interface.
    pub queues: BTreeMap<String, Vec<QueueCounters>>,
    /// Device-wide (and unrecognised) `ethtool -S` counters, per interface.
    pub nic_counters: BTreeMap<String, Vec<(String, u64)>>,
    /// softnet_stat per CPU.
    pub softnet: Vec<(CpuId, Softnet)>,
    /// /proc/softirqs: vector → count per CPU.
    pub softirqs: BTreeMap<String, Vec<u64>>,
    /// RDMA ports' `counters/` and `hw_counters/` (hosts with a device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma: Option<super::rdma::RdmaSnapshot>,
}

/// Interfaces of a directory: the given ones, else every one with a sysfs entry or an `ethtool -i` file.
pub fn dir_ifaces(dir: &CaptureDir, given: &[String]) -> Vec<String> {
    if !given.is_empty() {
        return given.to_vec();
    }
    let mut v: Vec<String> = dir.list("/sys/class/net").unwrap_or_default();
    if v.is_empty() {
        v = dir
            .list("/sos_commands/networking")
            .unwrap_or_default()
            .iter()
            .filter_map(|f| f.strip_prefix("ethtool_-i_").map(String::from))
            .collect();
    }
    v.retain(|n| n != "lo");
    v
}

/// Read facts and counters of a captured directory.
pub fn snapshot(dir: &CaptureDir, given: &[String]) -> Snapshot {
    let ifaces = dir_ifaces(dir, given);
    let facts = read_host_facts(dir, &ifaces);
    let dev = dir
        .read("/proc/net/dev")
        .ok()
        .and_then(|t| parse_net_dev(&t).ok())
        .unwrap_or_default();
    let mut s = Snapshot {
        source: dir.describe(),
        ifaces: dev
            .into_iter()
            .filter(|(n, _)| ifaces.contains(n))
            .collect(),
        queues: BTreeMap::new(),
        nic_counters: BTreeMap::new(),
        softnet: dir
            .read("/proc/net/softnet_stat")
            .map(|t| parse_softnet(&t, &online_cpu_ids(dir)))
            .unwrap_or_default(),
        softirqs: dir
            .read("/proc/softirqs")
            .map(|t| parse_softirqs(&t).vectors)
            .unwrap_or_default(),
        rdma: facts
            .rdma
            .as_ref()
            .filter(|r| !r.devices.is_empty())
            .map(|r| super::rdma::read_snapshot(dir, r)),
        facts,
    };
    for n in &s.facts.nics {
        if let Support::Value(stats) = dir.ethtool_stats(&n.name) {
            let driver = n.drvinfo.value().map(|d| d.driver.as_str()).unwrap_or("");
            let (q, g) = per_queue(driver, &stats.to_pairs());
            s.queues.insert(n.name.clone(), q);
            s.nic_counters.insert(n.name.clone(), g);
        }
    }
    s
}

//! Host and NIC facts: what is configured, read at start and when it changes.
//!
//! These types are filled from several sources that must agree: ethtool
//! generic netlink and the SIOCETHTOOL ioctl on a live host, `ethtool -i/-l/
//! -g/-k/-c` text in a captured directory or a sosreport, and sysfs/procfs
//! files in both. A query the driver does not implement is recorded as
//! [`Support::NotSupported`] naming the driver (e.g. rings on veth), never as
//! an error, so the diagnosis can tell "off" from "unknown".

use crate::units::CpuId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub mod rdma;

/// The answer to one query about a NIC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Support<T> {
    /// The value.
    Value(T),
    /// The driver does not implement this query (EOPNOTSUPP).
    NotSupported {
        /// Driver name, when known.
        driver: String,
    },
    /// The query failed for another reason (no privileges, no such device...).
    Error(String),
    /// Not read (for example not present in a captured directory).
    #[default]
    Unknown,
}

impl<T> Support<T> {
    /// The value, if there is one.
    pub fn value(&self) -> Option<&T> {
        match self {
            Support::Value(v) => Some(v),
            _ => None,
        }
    }

    /// The value made another by `f`; the other answers as they are.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Support<U> {
        match self {
            Support::Value(v) => Support::Value(f(v)),
            Support::NotSupported { driver } => Support::NotSupported { driver },
            Support::Error(e) => Support::Error(e),
            Support::Unknown => Support::Unknown,
        }
    }
}

impl Support<DrvInfo> {
    /// The driver's name (`driver:` of `ethtool -i`), empty when unknown.
    pub fn driver(&self) -> String {
        self.value().map(|d| d.driver.clone()).unwrap_or_default()
    }

    /// The device's bus address (`bus-info:`), empty when unknown.
    pub fn bus_info(&self) -> String {
        self.value().map(|d| d.bus_info.clone()).unwrap_or_default()
    }
}

/// `ethtool -i`: ETHTOOL_GDRVINFO.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DrvInfo {
    /// e.g. `mlx5_core`.
    pub driver: String,
    /// e.g. `5.8-1.0.1`, or the kernel version for inbox drivers.
    pub version: String,
    /// e.g. `16.35.2000 (MT_0000000012)`; empty when the driver reports none.
    pub firmware: String,
    /// Expansion ROM version.
    pub expansion_rom: String,
    /// PCI address (`0000:3b:00.0`), empty for virtual devices.
    pub bus_info: String,
    /// `supports-statistics` (ETHTOOL_GSTATS available).
    pub supports_statistics: bool,
    /// `supports-test`.
    pub supports_test: bool,
    /// `supports-eeprom-access`.
    pub supports_eeprom_access: bool,
    /// `supports-register-dump`.
    pub supports_register_dump: bool,
    /// `supports-priv-flags`.
    pub supports_priv_flags: bool,
}

/// `ethtool -l`: channel counts; None where ethtool prints `n/a`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Channels {
    /// Maximum rx-only channels.
    pub max_rx: Option<u32>,
    /// Maximum tx-only channels.
    pub max_tx: Option<u32>,
    /// Maximum other channels.
    pub max_other: Option<u32>,
    /// Maximum combined channels.
    pub max_combined: Option<u32>,
    /// Current rx-only channels.
    pub rx: Option<u32>,
    /// Current tx-only channels.
    pub tx: Option<u32>,
    /// Current other channels.
    pub other: Option<u32>,
    /// Current combined channels.
    pub combined: Option<u32>,
}

/// `ethtool -g`: ring sizes; None where ethtool prints `n/a`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rings {
    /// Maximum rx ring.
    pub max_rx: Option<u32>,
    /// Maximum rx mini ring.
    pub max_rx_mini: Option<u32>,
    /// Maximum rx jumbo ring.
    pub max_rx_jumbo: Option<u32>,
    /// Maximum tx ring.
    pub max_tx: Option<u32>,
    /// Current rx ring.
    pub rx: Option<u32>,
    /// Current rx mini ring.
    pub rx_mini: Option<u32>,
    /// Current rx jumbo ring.
    pub rx_jumbo: Option<u32>,
    /// Current tx ring.
    pub tx: Option<u32>,
}

/// One offload feature as `ethtool -k` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Feature {
    /// Active (`on`).
    pub on: bool,
    /// Cannot be changed (`[fixed]`).
    pub fixed: bool,
    /// Requested differs from active (`[requested on]`/`[requested off]`): the requested state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<bool>,
}

/// `ethtool -k`: every feature by its ethtool name (e.g. `generic-receive-offload`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Features(pub BTreeMap<String, Feature>);

impl Features {
    /// Is the feature with this ethtool name on? None when not listed.
    pub fn on(&self, name: &str) -> Option<bool> {
        self.0.get(name).map(|f| f.on)
    }
}

/// `ethtool -c`: interrupt coalescing; None where not reported / `n/a`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Coalesce {
    /// Adaptive RX moderation.
    pub adaptive_rx: Option<bool>,
    /// Adaptive TX moderation.
    pub adaptive_tx: Option<bool>,
    /// rx-usecs.
    pub rx_usecs: Option<u32>,
    /// rx-frames.
    pub rx_frames: Option<u32>,
    /// tx-usecs.
    pub tx_usecs: Option<u32>,
    /// tx-frames.
    pub tx_frames: Option<u32>,
    /// Every other field `ethtool -c` printed with a number, by its name (e.g. `rx-usecs-irq`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other: BTreeMap<String, u32>,
}

/// Link settings (ethtool LINKMODES/LINKINFO, or `ethtool IF`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkInfo {
    /// Mb/s; None when unknown (e.g. link down, or veth without a speed).
    pub speed_mbps: Option<u32>,
    /// `Full` / `Half`.
    pub duplex: Option<String>,
    /// Autonegotiation on.
    pub autoneg: Option<bool>,
    /// Carrier up (`Link detected`).
    pub link_detected: Option<bool>,
}

/// Pause frame settings (`ethtool -a`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Pause {
    /// Autonegotiated pause.
    pub autoneg: bool,
    /// RX pause (we honour the peer's pause frames).
    pub rx: bool,
    /// TX pause (we send pause frames when congested).
    pub tx: bool,
}

/// PCIe link of the NIC (sysfs `current_link_speed`/`max_link_speed`/widths).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PcieLink {
    /// e.g. `8.0 GT/s PCIe`.
    pub current_speed: String,
    /// e.g. 16.
    pub current_width: Option<u32>,
    /// Maximum speed of the device.
    pub max_speed: String,
    /// Maximum width of the device.
    pub max_width: Option<u32>,
}

/// One interrupt line of a NIC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IrqFact {
    /// IRQ number.
    pub irq: u32,
    /// Name from /proc/interrupts (e.g. `mlx5_comp3@pci:0000:3b:00.0`).
    pub name: String,
    /// /proc/irq/N/effective_affinity_list (or smp_affinity_list when that is absent).
    pub affinity: String,
}

/// Per-queue steering masks from sysfs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueMask {
    /// Queue index.
    pub queue: u32,
    /// Hex CPU mask as sysfs prints it (`rps_cpus` / `xps_cpus`).
    pub mask: String,
}

impl HostFacts {
    /// True when nothing at all was learned: a directory that holds none of
    /// the files of a host description (not a capture, not a sosreport).
    pub fn is_empty(&self) -> bool {
        self.kernel.is_empty()
            && self.cpus == 0
            && self.sysctls.is_empty()
            && self.numa.is_empty()
            && self
                .nics
                .iter()
                .all(|n| n.mtu.is_none() && n.ifindex.is_none() && n.drvinfo.value().is_none())
            && self.rdma.as_ref().is_none_or(|r| r.devices.is_empty())
    }
}

/// Everything configured on one interface.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NicFacts {
    /// Interface name.
    pub name: String,
    /// ifindex.
    pub ifindex: Option<u32>,
    /// MTU.
    pub mtu: Option<u32>,
    /// operstate (`up`, `down`, ...).
    pub operstate: Option<String>,
    /// `ethtool -i`.
    pub drvinfo: Support<DrvInfo>,
    /// `ethtool -l`.
    pub channels: Support<Channels>,
    /// `ethtool -g`.
    pub rings: Support<Rings>,
    /// `ethtool -k`.
    pub features: Support<Features>,
    /// `ethtool -c`.
    pub coalesce: Support<Coalesce>,
    /// Speed, duplex, autoneg.
    pub link: Support<LinkInfo>,
    /// `ethtool -a`.
    pub pause: Support<Pause>,
    /// NUMA node of the device (-1: none).
    pub numa_node: Option<i32>,
    /// CPUs local to the device.
    pub local_cpulist: Option<String>,
    /// PCIe link (physical devices only).
    pub pcie: Option<PcieLink>,
    /// Interrupts of the device.
    pub irqs: Vec<IrqFact>,
    /// RPS masks per rx queue.
    pub rps: Vec<QueueMask>,
    /// XPS masks per tx queue.
    pub xps: Vec<QueueMask>,
    /// Root qdisc kind (`noqueue`, `fq_codel`, `mq`, `tbf`, ...).
    pub qdisc: Option<String>,
    /// Number of rx / tx queues the kernel exposes (sysfs `queues/`).
    pub rx_queues: Option<u32>,
    /// Number of tx queues.
    pub tx_queues: Option<u32>,
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NumaNode {
    /// Node number.
    pub node: u32,
    /// Its CPUs (kernel list form).
    pub cpulist: String,
}

/// Everything configured on the host.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostFacts {
    /// `uname -r`.
    pub kernel: String,
    /// Model name from /proc/cpuinfo.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: usize,
    /// NUMA nodes.
    pub numa: Vec<NumaNode>,
    /// RDMA devices (`/sys/class/infiniband`): firmware, ports, GIDs; empty
    /// with the reason in `none` on a host without any. None: not read
    /// (logs and captures made before wirescope read them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma: Option<rdma::RdmaFacts>,
    /// Each online core's place: NUMA node, L3 domain, SMT siblings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_places: Vec<CpuPlace>,
    /// Interfaces under test.
    pub nics: Vec<NicFacts>,
    /// irqbalance running.
    pub irqbalance: Option<bool>,
    /// Frequency governor per CPU as `governor -> cpu list` (empty without cpufreq).
    pub governors: BTreeMap<String, String>,
    /// Relevant sysctls by dotted name.
    pub sysctls: BTreeMap<String, String>,
    /// Kernel command line.
    pub cmdline: String,
    /// `/proc/sys/kernel/random/boot_id`: equal on both ends exactly when
    /// they share one kernel (the local pair's namespaces), so its cores too.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub boot_id: String,
    /// Facts that could not be read, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<String>,
}

/// One core's place in the machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuPlace {
    /// The CPU.
    pub cpu: CpuId,
    /// Its NUMA node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// CPUs sharing its L3 cache (itself included), kernel list form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l3: Option<String>,
    /// The L3 instance id (`cache/index3/id`), when the kernel gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l3_id: Option<u32>,
    /// Its SMT siblings (itself excluded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub smt_siblings: Vec<CpuId>,
    /// Physical core id within the package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_id: Option<u32>,
    /// Package (socket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<u32>,
}

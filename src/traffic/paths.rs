//! The data paths a test's traffic takes through a host ([`DataPaths`]),
//! and the counters along a packet's path through an interface, where a
//! packet test accounts for its loss ([`PathCounters`], read through a
//! [`PathSource`] the caller opens: `probe::packet_path` implements it).
//!
//! Each engine declares the paths it uses ([`super::EngineSlice::paths`]),
//! so the layers above ask what a test goes through ("the kernel's TCP
//! stack", "an RDMA device's queue pairs") instead of which engine it is:
//! the diagnosis's rule table names the paths each rule judges, and a new
//! engine that uses the same paths is judged by the same rules without
//! touching them. Plain data; it knows no engine.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A set of data paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataPaths(u8);

impl DataPaths {
    /// The kernel's network stack: IP, NET_RX softirqs, RSS/RPS, GRO, the
    /// NIC's kernel driver queues.
    pub const KERNEL_STACK: DataPaths = DataPaths(1);
    /// Kernel TCP connections: socket buffers, retransmits, segmentation
    /// offloads.
    pub const TCP: DataPaths = DataPaths(2);
    /// HTTP/2 channels with their flow-control windows and RPC statuses
    /// (gRPC's transport).
    pub const HTTP2: DataPaths = DataPaths(4);
    /// Raw frames from a packet generator to a sink's packet rings
    /// (AF_PACKET, AF_XDP), one thread per queue.
    pub const PACKET_RINGS: DataPaths = DataPaths(8);
    /// Queue pairs of an RDMA device through libibverbs (kernel bypass).
    pub const VERBS: DataPaths = DataPaths(16);

    /// Both sets.
    pub const fn and(self, other: DataPaths) -> DataPaths {
        DataPaths(self.0 | other.0)
    }

    /// True when the two sets share a path.
    pub const fn meets(self, other: DataPaths) -> bool {
        self.0 & other.0 != 0
    }
}

/// Where packets can be lost on one interface, read when asked (the host's
/// counters: `/proc/net/dev`, `ethtool -S`, softnet). The engine is handed an
/// opener of these by its caller (`probe::packet_path` implements it), so the
/// data plane never reads the host itself.
pub trait PathSource: Send + std::fmt::Debug {
    /// The counters now (what cannot be read stays 0 / absent).
    fn read(&mut self) -> PathCounters;
}

/// Opens a [`PathSource`] for (interface, driver) in the calling thread's
/// network namespace.
pub type PathOpener = std::sync::Arc<dyn Fn(&str, &str) -> Box<dyn PathSource> + Send + Sync>;

/// Maps keyed by queue number, with the keys as JSON strings (`{"3": 10}`)
/// read back from strings explicitly: inside the session's internally
/// tagged messages serde buffers the map and no longer turns `"3"` into 3.
pub(crate) mod queue_keys {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(m: &BTreeMap<u32, u64>, s: S) -> Result<S::Ok, S::Error> {
        m.iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect::<BTreeMap<String, u64>>()
            .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<u32, u64>, D::Error> {
        BTreeMap::<String, u64>::deserialize(d)?
            .into_iter()
            .map(|(k, v)| {
                k.parse::<u32>()
                    .map(|k| (k, v))
                    .map_err(|_| serde::de::Error::custom(format!("'{k}' is not a queue number")))
            })
            .collect()
    }
}

/// Where packets can be lost on a host, cumulative (kernel counters), from
/// a [`PathSource`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PathCounters {
    /// Interface.
    pub iface: String,
    /// `/proc/net/dev` rx packets.
    pub rx_packets: u64,
    /// `/proc/net/dev` rx drop column (rx_dropped + rx_missed_errors).
    pub rx_dropped: u64,
    /// `/proc/net/dev` tx packets.
    pub tx_packets: u64,
    /// `/proc/net/dev` tx drops.
    pub tx_dropped: u64,
    /// Drops per rx queue (`ethtool -S` per-queue drop counters), by queue.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        with = "queue_keys"
    )]
    #[schemars(with = "BTreeMap<String, u64>")]
    pub rx_queue_drops: BTreeMap<u32, u64>,
    /// NIC-wide loss counters by their `ethtool -S` name (rx_missed_errors,
    /// rx_out_of_buffer, rx_discards_phy, rx_fifo_errors, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nic: BTreeMap<String, u64>,
    /// Σ softnet `dropped` over CPUs (backlog full).
    pub softnet_dropped: u64,
}

/// `ethtool -S` names that count frames a NIC lost before the host saw them.
pub const NIC_LOSS_COUNTERS: [&str; 9] = [
    "rx_missed_errors",
    "rx_out_of_buffer",
    "rx_discards_phy",
    "rx_fifo_errors",
    "rx_no_buffer_count",
    "rx_dropped",
    "rx_buff_alloc_err",
    "rx_queue_full",
    "xdp_drops",
];

impl PathCounters {
    /// Field-wise increase since `prev` (counters that went back count 0).
    pub fn delta(&self, prev: &PathCounters) -> PathCounters {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        fn map<K: Ord + Clone>(a: &BTreeMap<K, u64>, b: &BTreeMap<K, u64>) -> BTreeMap<K, u64> {
            a.iter()
                .map(|(k, v)| (k.clone(), v.saturating_sub(b.get(k).copied().unwrap_or(*v))))
                .filter(|(_, v)| *v > 0)
                .collect()
        }
        PathCounters {
            iface: self.iface.clone(),
            rx_packets: d(self.rx_packets, prev.rx_packets),
            rx_dropped: d(self.rx_dropped, prev.rx_dropped),
            tx_packets: d(self.tx_packets, prev.tx_packets),
            tx_dropped: d(self.tx_dropped, prev.tx_dropped),
            rx_queue_drops: map(&self.rx_queue_drops, &prev.rx_queue_drops),
            nic: map(&self.nic, &prev.nic),
            softnet_dropped: d(self.softnet_dropped, prev.softnet_dropped),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DataPaths;

    #[test]
    fn sets_meet_on_a_shared_path() {
        let tcp = DataPaths::KERNEL_STACK.and(DataPaths::TCP);
        assert!(tcp.meets(DataPaths::TCP));
        assert!(tcp.meets(DataPaths::KERNEL_STACK.and(DataPaths::VERBS)));
        assert!(!tcp.meets(DataPaths::VERBS));
        assert!(!DataPaths::HTTP2.meets(DataPaths::PACKET_RINGS));
    }
}

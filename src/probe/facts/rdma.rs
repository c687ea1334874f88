//! The facts of RDMA devices as data: devices, ports, GIDs, MTUs (read from
//! `/sys/class/infiniband` by `probe::rdma`, which re-exports them). Kept
//! here with the other host facts, so [`super::HostFacts`] can hold them
//! without the facts depending on the readers.

use super::PcieLink;
use serde::{Deserialize, Serialize};

/// Where the kernel lists RDMA devices.
pub const SYSFS_ROOT: &str = "/sys/class/infiniband";

/// RDMA facts of one host.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdmaFacts {
    /// Every RDMA device, by name.
    pub devices: Vec<RdmaDeviceFacts>,
    /// Set when the host has no RDMA device: "no RDMA device", what was
    /// looked at and what to load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub none: Option<String>,
}

impl RdmaFacts {
    /// The device with this name.
    pub fn device(&self, name: &str) -> Option<&RdmaDeviceFacts> {
        self.devices.iter().find(|d| d.name == name)
    }

    /// The (device, port) whose netdev is `iface`, RoCE ports first.
    pub fn port_of_netdev(&self, iface: &str) -> Option<(&RdmaDeviceFacts, &RdmaPortFacts)> {
        self.devices.iter().find_map(|d| {
            d.ports
                .iter()
                .find(|p| p.netdev.as_deref() == Some(iface))
                .map(|p| (d, p))
        })
    }
}

/// One RDMA device (`/sys/class/infiniband/DEV`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdmaDeviceFacts {
    /// Device name (`mlx5_0`, `rxe0`).
    pub name: String,
    /// `node_type` (`1: CA`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_type: Option<String>,
    /// `fw_ver` (`14.28.2006`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fw_ver: Option<String>,
    /// `hca_type` (`MT4118`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hca_type: Option<String>,
    /// `board_id` (the PSID on NVIDIA cards: `MT_0000000080`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board_id: Option<String>,
    /// `node_guid` (`0a7f:bc12:45ef:d23b`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_guid: Option<String>,
    /// `sys_image_guid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sys_image_guid: Option<String>,
    /// Kernel driver of the device (`device/driver` link: `mlx5_core`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// PCI address (`device` link: `0000:3b:00.0`); None for virtual devices (rxe, siw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
    /// NUMA node of the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<i32>,
    /// PCIe link (physical devices only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie: Option<PcieLink>,
    /// Ports, by number.
    pub ports: Vec<RdmaPortFacts>,
}

impl RdmaDeviceFacts {
    /// Is this an NVIDIA/Mellanox ConnectX (mlx5) device, whose firmware the catalog knows?
    pub fn is_mlx5(&self) -> bool {
        self.driver.as_deref() == Some("mlx5_core") || self.name.starts_with("mlx5_")
    }

    /// Sysfs directory of the device.
    pub fn sysfs(&self) -> String {
        format!("{SYSFS_ROOT}/{}", self.name)
    }
}

/// A value file of the form `N: NAME` (`4: ACTIVE`, `5: LinkUp`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CodeName {
    /// The number.
    pub code: u32,
    /// The name.
    pub name: String,
}

impl CodeName {
    /// Parse `4: ACTIVE`; a bare name gets code 0.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        if s.is_empty() {
            return None;
        }
        match s.split_once(':') {
            Some((c, n)) => Some(CodeName {
                code: c.trim().parse().ok()?,
                name: n.trim().to_string(),
            }),
            None => Some(CodeName {
                code: 0,
                name: s.to_string(),
            }),
        }
    }
}

/// The `rate` file: `100 Gb/sec (4X EDR)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PortRate {
    /// Gb/s.
    pub gbps: f64,
    /// The whole text.
    pub text: String,
}

impl PortRate {
    /// Parse the sysfs `rate` text.
    pub fn parse(s: &str) -> Option<Self> {
        let text = s.trim().to_string();
        let gbps = text.split_whitespace().next()?.parse().ok()?;
        Some(PortRate { gbps, text })
    }
}

/// The link layer of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LinkLayer {
    /// InfiniBand (LIDs, subnet manager).
    Infiniband,
    /// Ethernet: RoCE (GIDs are IP addresses).
    Ethernet,
    /// Anything else the kernel prints.
    Other,
}

impl LinkLayer {
    /// As the kernel spells it in `link_layer`.
    pub fn name(self) -> &'static str {
        match self {
            LinkLayer::Infiniband => "InfiniBand",
            LinkLayer::Ethernet => "Ethernet",
            LinkLayer::Other => "other link layer",
        }
    }

    pub fn parse(s: &str) -> Self {
        match s.trim() {
            "InfiniBand" => LinkLayer::Infiniband,
            "Ethernet" => LinkLayer::Ethernet,
            _ => LinkLayer::Other,
        }
    }
}

/// RoCE / IB type of a GID (`gid_attrs/types/N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GidType {
    /// `IB/RoCE v1`: IB on an IB port, RoCE v1 (not routable) on Ethernet.
    IbRoceV1,
    /// `RoCE v2`: UDP/IP encapsulated, routable, ECN-capable.
    RoceV2,
    /// Type file missing or unknown text.
    Unknown,
}

impl GidType {
    pub fn parse(s: &str) -> Self {
        match s.trim() {
            "IB/RoCE v1" => GidType::IbRoceV1,
            "RoCE v2" => GidType::RoceV2,
            _ => GidType::Unknown,
        }
    }
}

/// One populated entry of a port's GID table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GidEntry {
    /// GID index (`gids/N`).
    pub index: u32,
    /// The GID as sysfs prints it (`0000:0000:0000:0000:0000:ffff:c612:0001`).
    pub gid: String,
    /// Its type.
    pub kind: GidType,
    /// The netdev it belongs to (`gid_attrs/ndevs/N`), for RoCE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ndev: Option<String>,
}

impl GidEntry {
    /// The 16 bytes of the GID, if it parses.
    pub fn bytes(&self) -> Option<[u8; 16]> {
        parse_gid(&self.gid)
    }

    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`), as RoCE v2 uses for IPv4.
    pub fn ipv4(&self) -> Option<std::net::Ipv4Addr> {
        let b = self.bytes()?;
        std::net::Ipv6Addr::from(b).to_ipv4_mapped()
    }
}

/// Parse a sysfs GID (`fe80:0000:...`, 8 groups of 4 hex digits).
pub fn parse_gid(s: &str) -> Option<[u8; 16]> {
    let groups: Vec<&str> = s.trim().split(':').collect();
    if groups.len() != 8 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, g) in groups.iter().enumerate() {
        let v = u16::from_str_radix(g, 16).ok()?;
        out[2 * i..2 * i + 2].copy_from_slice(&v.to_be_bytes());
    }
    Some(out)
}

/// One port of an RDMA device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdmaPortFacts {
    /// Port number (from 1).
    pub port: u32,
    /// `state` (`4: ACTIVE`, `1: DOWN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<CodeName>,
    /// `phys_state` (`5: LinkUp`, `3: Disabled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phys_state: Option<CodeName>,
    /// `rate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<PortRate>,
    /// `link_layer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_layer: Option<LinkLayer>,
    /// `lid` (InfiniBand; 0 on RoCE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lid: Option<u32>,
    /// Populated GID entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gids: Vec<GidEntry>,
    /// The netdev behind the port (RoCE; IPoIB for IB when present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdev: Option<String>,
    /// That netdev's MTU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdev_mtu: Option<u32>,
    /// Active MTU (bytes) and where it came from: the verbs query when the
    /// engine ran, else derived for RoCE from the netdev MTU as the kernel does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_mtu: Option<u32>,
    /// Largest MTU the port supports (bytes), when known (4096 on RoCE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_mtu: Option<u32>,
    /// Source of `active_mtu` / `max_mtu`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mtu_source: String,
    /// Names present in `counters/` (values are in `probe::rdma::counters`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<String>,
    /// Names present in `hw_counters/`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hw_counters: Vec<String>,
}

impl RdmaPortFacts {
    /// Port state is ACTIVE (4).
    pub fn is_active(&self) -> bool {
        self.state.as_ref().is_some_and(|s| s.code == 4)
    }

    /// RoCE (Ethernet link layer).
    pub fn is_roce(&self) -> bool {
        self.link_layer == Some(LinkLayer::Ethernet)
    }

    /// The default GID for a test: the RoCE v2 GID of `ip` if given, else
    /// the first RoCE v2 GID with an IPv4-mapped address, else the first v2,
    /// else index 0 (IB).
    pub fn default_gid(&self, ip: Option<std::net::IpAddr>) -> Option<&GidEntry> {
        let v2 = || self.gids.iter().filter(|g| g.kind == GidType::RoceV2);
        if let Some(ip) = ip {
            let want = match ip {
                std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
                std::net::IpAddr::V6(v6) => v6.octets(),
            };
            if let Some(g) = v2().find(|g| g.bytes() == Some(want)) {
                return Some(g);
            }
        }
        v2().find(|g| g.ipv4().is_some())
            .or_else(|| v2().next())
            .or_else(|| self.gids.iter().find(|g| g.index == 0))
    }
}

/// The RoCE active MTU the kernel derives from a netdev MTU (`iboe_get_mtu`):
/// the largest IB MTU that fits after the RoCE v2 headers (GRH 40 + UDP 8 +
/// BTH 12 + XRC 4 + AtomicETH 28 + ICRC 4 = 96 bytes).
pub fn roce_mtu_for(netdev_mtu: u32) -> Option<u32> {
    let room = netdev_mtu.checked_sub(96)?;
    [4096, 2048, 1024, 512, 256]
        .into_iter()
        .find(|m| *m <= room)
}

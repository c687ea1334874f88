//! RDMA devices of a host: what `/sys/class/infiniband` says about them.
//!
//! This module owns the facts of RDMA devices (firmware, board, node GUID,
//! PCIe link, and per port: state, rate, link layer, MTU, GID table with
//! RoCE v1/v2 types and the netdev behind each GID) and, in [`counters`], the
//! per-interval deltas of their `counters/` and `hw_counters/` plus the PFC
//! pause counters of the netdev behind each port. It reads only through
//! [`HostSource`], so a live host, a `wirescope capture` and a test fixture
//! are parsed by the same code.
//!
//! It must not open the verbs library or the device: a host without
//! rdma-core, or a captured directory, has facts too. Missing files are
//! normal (mlx4 has no `hw_counters/`, virtual devices no PCIe link, no
//! kernel exposes the port MTU in sysfs); a host without
//! `/sys/class/infiniband` is "no RDMA device", which is information, never
//! an error. Counter names this code does not know are kept as they are.

pub mod capture;
pub mod counters;
pub mod preflight;
#[cfg(test)]
pub(crate) mod testdata;

use super::facts::PcieLink;
use super::source::HostSource;
use serde::{Deserialize, Serialize};

pub use counters::{
    port_sample, read_snapshot, CounterDelta, PfcPrio, RdmaCounterReader, RdmaPortCounters,
    RdmaPortSample, RdmaSample, RdmaSnapshot,
};

/// Where the kernel lists RDMA devices.
pub const SYSFS_ROOT: &str = "/sys/class/infiniband";

/// RDMA facts of one host.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RdmaFacts {
    /// Every RDMA device, by name.
    pub devices: Vec<RdmaDeviceFacts>,
    /// Set when the host has no RDMA device: what was looked at and what to load.
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
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    fn parse(s: &str) -> Self {
        match s.trim() {
            "InfiniBand" => LinkLayer::Infiniband,
            "Ethernet" => LinkLayer::Ethernet,
            _ => LinkLayer::Other,
        }
    }
}

/// RoCE / IB type of a GID (`gid_attrs/types/N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    fn parse(s: &str) -> Self {
        match s.trim() {
            "IB/RoCE v1" => GidType::IbRoceV1,
            "RoCE v2" => GidType::RoceV2,
            _ => GidType::Unknown,
        }
    }
}

/// One populated entry of a port's GID table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Names present in `counters/` (values are in [`counters`]).
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

fn read_trim(src: &dyn HostSource, path: &str) -> Option<String> {
    src.read(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Read the RDMA facts of a host. Never fails: a host without
/// `/sys/class/infiniband` (or with it empty) gets `none` set.
pub fn read_rdma_facts(src: &dyn HostSource) -> RdmaFacts {
    let mut names = src.list(SYSFS_ROOT).unwrap_or_default();
    names.sort();
    let devices: Vec<RdmaDeviceFacts> = names.iter().map(|n| read_device(src, n)).collect();
    let none = devices.is_empty().then(|| {
        format!(
            "no RDMA device ({SYSFS_ROOT} is {} on {}): load the driver of the NIC \
             (modprobe mlx5_ib for ConnectX) or create a soft-RoCE device \
             (modprobe rdma_rxe && rdma link add rxe0 type rxe netdev IF)",
            if src.list(SYSFS_ROOT).is_ok() {
                "empty"
            } else {
                "absent"
            },
            src.describe()
        )
    });
    RdmaFacts { devices, none }
}

/// Facts of one device.
pub fn read_device(src: &dyn HostSource, name: &str) -> RdmaDeviceFacts {
    let base = format!("{SYSFS_ROOT}/{name}");
    let f = |file: &str| read_trim(src, &format!("{base}/{file}"));
    let pci = src
        .link_name(&format!("{base}/device"))
        .ok()
        .filter(|p| looks_like_pci(p));
    let pcie = f("device/current_link_speed").map(|current_speed| PcieLink {
        current_speed,
        current_width: f("device/current_link_width").and_then(|v| v.parse().ok()),
        max_speed: f("device/max_link_speed").unwrap_or_default(),
        max_width: f("device/max_link_width").and_then(|v| v.parse().ok()),
    });
    let device_netdevs = src.list(&format!("{base}/device/net")).unwrap_or_default();
    let mut ports: Vec<u32> = src
        .list(&format!("{base}/ports"))
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.parse().ok())
        .collect();
    ports.sort_unstable();
    let parent = f("parent");
    let nports = ports.len();
    RdmaDeviceFacts {
        name: name.to_string(),
        node_type: f("node_type"),
        fw_ver: f("fw_ver"),
        hca_type: f("hca_type"),
        board_id: f("board_id"),
        node_guid: f("node_guid"),
        sys_image_guid: f("sys_image_guid"),
        driver: src.link_name(&format!("{base}/device/driver")).ok(),
        pci,
        numa_node: f("device/numa_node").and_then(|v| v.parse().ok()),
        pcie,
        ports: ports
            .into_iter()
            .map(|p| read_port(src, &base, p, nports, &device_netdevs, parent.as_deref()))
            .collect(),
    }
}

fn looks_like_pci(s: &str) -> bool {
    // 0000:3b:00.0
    let b = s.as_bytes();
    b.len() == 12 && b[4] == b':' && b[7] == b':' && b[10] == b'.'
}

fn read_port(
    src: &dyn HostSource,
    dev_base: &str,
    port: u32,
    nports: usize,
    device_netdevs: &[String],
    parent: Option<&str>,
) -> RdmaPortFacts {
    let base = format!("{dev_base}/ports/{port}");
    let f = |file: &str| read_trim(src, &format!("{base}/{file}"));
    let gids = read_gids(src, &base);
    let netdev = gids
        .iter()
        .find_map(|g| g.ndev.clone())
        .or_else(|| netdev_of_port(src, port, nports, device_netdevs))
        .or_else(|| parent.map(str::to_string));
    let netdev_mtu = netdev
        .as_ref()
        .and_then(|n| read_trim(src, &format!("/sys/class/net/{n}/mtu")))
        .and_then(|v| v.parse().ok());
    let link_layer = f("link_layer").map(|s| LinkLayer::parse(&s));
    let (active_mtu, max_mtu, mtu_source) = match (link_layer, netdev_mtu) {
        (Some(LinkLayer::Ethernet), Some(m)) => (
            roce_mtu_for(m),
            Some(4096),
            format!("derived from the MTU {m} of {} as the kernel does (iboe_get_mtu); RoCE maximum 4096", netdev.as_deref().unwrap_or("?")),
        ),
        _ => (None, None, String::new()),
    };
    let names = |dir: &str| {
        let mut v = src.list(&format!("{base}/{dir}")).unwrap_or_default();
        v.sort();
        v
    };
    RdmaPortFacts {
        port,
        state: f("state").and_then(|s| CodeName::parse(&s)),
        phys_state: f("phys_state").and_then(|s| CodeName::parse(&s)),
        rate: f("rate").and_then(|s| PortRate::parse(&s)),
        link_layer,
        lid: f("lid").and_then(|v| parse_int(&v)),
        gids,
        netdev,
        netdev_mtu,
        active_mtu,
        max_mtu,
        mtu_source,
        counters: names("counters"),
        hw_counters: names("hw_counters"),
    }
}

/// `0x5` or `5`.
fn parse_int(s: &str) -> Option<u32> {
    match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Which of the PCI device's netdevs is this port's: the only one, or the one
/// whose `dev_port` is `port - 1` (mlx4 puts both ports on one PCI function).
fn netdev_of_port(
    src: &dyn HostSource,
    port: u32,
    nports: usize,
    device_netdevs: &[String],
) -> Option<String> {
    if device_netdevs.len() == 1 && nports == 1 {
        return device_netdevs.first().cloned();
    }
    device_netdevs
        .iter()
        .find(|n| {
            read_trim(src, &format!("/sys/class/net/{n}/dev_port"))
                .and_then(|v| parse_int(&v))
                .is_some_and(|d| d + 1 == port)
        })
        .cloned()
}

const ZERO_GID: &str = "0000:0000:0000:0000:0000:0000:0000:0000";

fn read_gids(src: &dyn HostSource, port_base: &str) -> Vec<GidEntry> {
    let mut idx: Vec<u32> = src
        .list(&format!("{port_base}/gids"))
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    idx.sort_unstable();
    idx.into_iter()
        .filter_map(|i| {
            let gid = read_trim(src, &format!("{port_base}/gids/{i}"))?;
            if gid == ZERO_GID {
                return None;
            }
            let kind = read_trim(src, &format!("{port_base}/gid_attrs/types/{i}"))
                .map_or(GidType::Unknown, |t| GidType::parse(&t));
            let ndev = read_trim(src, &format!("{port_base}/gid_attrs/ndevs/{i}"));
            Some(GidEntry {
                index: i,
                gid,
                kind,
                ndev,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_names_and_rates() {
        assert_eq!(
            CodeName::parse("4: ACTIVE"),
            Some(CodeName {
                code: 4,
                name: "ACTIVE".into()
            })
        );
        assert_eq!(CodeName::parse("5: LinkUp").map(|c| c.code), Some(5));
        assert_eq!(CodeName::parse(""), None);
        let r = PortRate::parse("100 Gb/sec (4X EDR)\n").unwrap();
        assert_eq!(r.gbps, 100.0);
        assert_eq!(PortRate::parse("2.5 Gb/sec (1X SDR)").unwrap().gbps, 2.5);
    }

    #[test]
    fn gids_parse_and_map_ipv4() {
        let g = GidEntry {
            index: 3,
            gid: "0000:0000:0000:0000:0000:ffff:c612:0001".into(),
            kind: GidType::RoceV2,
            ndev: Some("eth0".into()),
        };
        assert_eq!(g.ipv4(), Some("198.18.0.1".parse().unwrap()));
        assert_eq!(parse_gid("fe80::1"), None);
        let ll = parse_gid("fe80:0000:0000:0000:0a7f:bcff:fe12:45ef").unwrap();
        assert_eq!(ll[0], 0xfe);
        assert_eq!(ll[15], 0xef);
    }

    #[test]
    fn roce_mtu_follows_the_kernel() {
        // iboe_get_mtu: netdev MTU minus 96 bytes of headers, rounded down to an IB MTU.
        assert_eq!(roce_mtu_for(1500), Some(1024));
        assert_eq!(roce_mtu_for(4191), Some(2048));
        assert_eq!(roce_mtu_for(4192), Some(4096));
        assert_eq!(roce_mtu_for(9000), Some(4096));
        assert_eq!(roce_mtu_for(300), None);
    }

    #[test]
    fn roce_copy_reads_gids_netdev_mtu_and_pcie() {
        let c = testdata::roce_copy(1500);
        let f = read_rdma_facts(&crate::probe::capture_dir::CaptureDir::new(c.root()));
        let d = f.device("mlx5_0").unwrap();
        assert_eq!(d.pci.as_deref(), Some("0000:3b:00.0"));
        assert_eq!(d.driver.as_deref(), Some("mlx5_core"));
        assert!(d.is_mlx5());
        assert_eq!(d.pcie.as_ref().unwrap().current_width, Some(8));
        let p = &d.ports[0];
        assert!(p.is_roce() && p.is_active());
        // The zero GID (index 4) is not an entry.
        assert_eq!(p.gids.len(), 4);
        assert_eq!(p.gids[3].kind, GidType::RoceV2);
        assert_eq!(p.netdev.as_deref(), Some("eth0"));
        assert_eq!(p.netdev_mtu, Some(1500));
        assert_eq!((p.active_mtu, p.max_mtu), (Some(1024), Some(4096)));
        assert!(p.mtu_source.contains("iboe_get_mtu"));
        assert_eq!(p.lid, Some(0));
        // Default GID: the RoCE v2 one of the address that routes to the peer.
        let ip = "198.18.0.1".parse().ok();
        assert_eq!(p.default_gid(ip).map(|g| g.index), Some(3));
        assert_eq!(p.default_gid(None).map(|g| g.index), Some(3));
        assert_eq!(
            f.port_of_netdev("eth0").map(|(d, _)| d.name.as_str()),
            Some("mlx5_0")
        );
    }
}

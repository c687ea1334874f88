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

use super::source::{read_pcie, read_trim, HostSource};

pub use counters::{
    port_sample, read_snapshot, sample, CounterDelta, PfcPrio, RdmaCounterReader, RdmaPortCounters,
    RdmaPortSample, RdmaSample, RdmaSnapshot,
};

pub use super::facts::rdma::{
    parse_gid, roce_mtu_for, CodeName, GidEntry, GidType, LinkLayer, PortRate, RdmaDeviceFacts,
    RdmaFacts, RdmaPortFacts, SYSFS_ROOT,
};

/// Read the RDMA facts of a host. Never fails: a host without
/// `/sys/class/infiniband` (or with it empty) gets `none` set.
pub fn read_rdma_facts(src: &dyn HostSource) -> RdmaFacts {
    let mut names = src.list(SYSFS_ROOT).unwrap_or_default();
    names.sort();
    let devices: Vec<RdmaDeviceFacts> = names.iter().map(|n| read_device(src, n)).collect();
    let none = devices.is_empty().then(|| {
        format!(
            "no RDMA device ({SYSFS_ROOT} is {}): load the NIC's RDMA driver \
             (modprobe mlx5_ib for ConnectX) or create a soft-RoCE device \
             (modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <interface>)",
            sysfs_state(src),
        )
    });
    RdmaFacts { devices, none }
}

/// Why a host has no RDMA device: its `/sys/class/infiniband` is `empty`
/// or `absent`.
fn sysfs_state(src: &dyn HostSource) -> &'static str {
    if src.list(SYSFS_ROOT).is_ok() {
        "empty"
    } else {
        "absent"
    }
}

/// Facts of one device.
pub fn read_device(src: &dyn HostSource, name: &str) -> RdmaDeviceFacts {
    let base = format!("{SYSFS_ROOT}/{name}");
    let f = |file: &str| read_trim(src, &format!("{base}/{file}"));
    let pci = src
        .link_name(&format!("{base}/device"))
        .ok()
        .filter(|p| looks_like_pci(p));
    let device_netdevs = src.list(&format!("{base}/device/net")).unwrap_or_default();
    let ports = numbered(src, &format!("{base}/ports"));
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
        pcie: read_pcie(src, &format!("{base}/device")),
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

/// The numbered entries of the directory `dir` (ports, GID indices), sorted;
/// other names are not entries.
fn numbered(src: &dyn HostSource, dir: &str) -> Vec<u32> {
    let mut ids: Vec<u32> = src
        .list(dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    ids.sort_unstable();
    ids
}

const ZERO_GID: &str = "0000:0000:0000:0000:0000:0000:0000:0000";

fn read_gids(src: &dyn HostSource, port_base: &str) -> Vec<GidEntry> {
    let idx = numbered(src, &format!("{port_base}/gids"));
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

//! RDMA telemetry on real sysfs trees (tests/fixtures/rdma: mlx5_0 with
//! hw_counters, mlx4_0 with two ports, hfi1_0): facts and counters as JSON
//! snapshots, and a host without RDMA.

use std::path::{Path, PathBuf};
use wirescope::probe::capture_dir::CaptureDir;
use wirescope::probe::rdma::{read_rdma_facts, read_snapshot, GidType, LinkLayer};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rdma")
}

#[test]
fn facts_of_the_real_fixtures() {
    let f = read_rdma_facts(&CaptureDir::new(root()));
    assert!(f.none.is_none());
    let names: Vec<&str> = f.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["hfi1_0", "mlx4_0", "mlx5_0"]);
    let mlx4 = f.device("mlx4_0").unwrap();
    assert_eq!(mlx4.ports.len(), 2);
    assert!(mlx4.ports.iter().all(|p| p.is_active()));
    assert_eq!(mlx4.ports[1].rate.as_ref().unwrap().gbps, 40.0);
    let mlx5 = f.device("mlx5_0").unwrap();
    assert_eq!(mlx5.fw_ver.as_deref(), Some("14.28.2006"));
    assert_eq!(mlx5.node_guid.as_deref(), Some("0a7f:bc12:45ef:d23b"));
    assert_eq!(mlx5.ports[0].link_layer, Some(LinkLayer::Infiniband));
    assert!(mlx5.ports[0]
        .hw_counters
        .contains(&"out_of_buffer".to_string()));
    // No GID table, netdev or MTU in these trees: nothing is invented.
    assert!(mlx5.ports[0]
        .gids
        .iter()
        .all(|g| g.kind != GidType::Unknown));
    assert_eq!(mlx5.ports[0].active_mtu, None);
    let hfi = f.device("hfi1_0").unwrap();
    assert_eq!(hfi.hca_type, None);
    assert!(hfi.ports[0].hw_counters.is_empty());
    insta::assert_json_snapshot!("rdma_facts", f);
}

#[test]
fn counters_of_the_real_fixtures() {
    let src = CaptureDir::new(root());
    let f = read_rdma_facts(&src);
    let s = read_snapshot(&src, &f);
    assert_eq!(s.ports.len(), 4);
    let mlx5 = s.ports.iter().find(|p| p.device == "mlx5_0").unwrap();
    assert_eq!(mlx5.hw_counters["out_of_buffer"], 0);
    assert_eq!(mlx5.hw_counters["roce_adp_retrans"], 99);
    assert_eq!(mlx5.counters["port_xmit_data"], 2_880_761_508_848);
    let mlx4 = s.ports.iter().filter(|p| p.device == "mlx4_0").count();
    assert_eq!(mlx4, 2);
    insta::assert_json_snapshot!("rdma_counters", s);
}

#[test]
fn a_host_without_rdma_says_so() {
    let empty = tempfile::tempdir().unwrap();
    let f = read_rdma_facts(&CaptureDir::new(empty.path()));
    assert!(f.devices.is_empty());
    let none = f.none.unwrap();
    assert!(none.starts_with("no RDMA device"), "{none}");
    assert!(none.contains("absent"), "{none}");
    assert!(none.contains("modprobe mlx5_ib"), "{none}");
    assert!(
        none.contains("rdma link add rxe0 type rxe netdev"),
        "{none}"
    );
    // An empty class directory (RDMA core loaded, no device) is "empty".
    std::fs::create_dir_all(empty.path().join("sys/class/infiniband")).unwrap();
    let f = read_rdma_facts(&CaptureDir::new(empty.path()));
    assert!(f.none.unwrap().contains("is empty"));
}

#[test]
fn the_live_host_reads_without_error() {
    // This machine has no RDMA in the kernel; a host with devices lists them.
    let f = read_rdma_facts(&wirescope::probe::live_host::LiveHost::default());
    assert_eq!(f.devices.is_empty(), f.none.is_some());
    let present = Path::new("/sys/class/infiniband")
        .read_dir()
        .map(|mut d| d.next().is_some())
        .unwrap_or(false);
    assert_eq!(!f.devices.is_empty(), present);
}

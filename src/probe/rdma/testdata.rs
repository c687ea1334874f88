//! Modified copies of the real RDMA sysfs fixtures (tests/fixtures/rdma),
//! for tests of the probe and the rules. The real trees have no GID table, no
//! netdev and an InfiniBand link layer on mlx5_0; a RoCE copy adds what a
//! ConnectX on Ethernet shows (GIDs of both types, the netdev, the PCIe link),
//! and each test then changes one thing (port DOWN, MTU 1500, counters).

use std::path::{Path, PathBuf};

/// The real fixture root.
pub fn fixture_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rdma")
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let dst = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_tree(&e.path(), &dst)?;
        } else {
            std::fs::copy(e.path(), &dst)?;
        }
    }
    Ok(())
}

/// A writable copy of a fixture tree.
pub struct Copy {
    /// Holds the directory.
    pub dir: tempfile::TempDir,
}

impl Copy {
    /// Root to give to `Dir::new`.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Write (create or replace) a file below the root.
    pub fn put(&self, rel: &str, content: &str) {
        let p = self.dir.path().join(rel.trim_start_matches('/'));
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir in test copy");
        }
        std::fs::write(&p, content).expect("write in test copy");
    }
}

/// An unchanged copy of the real fixtures.
pub fn real_copy() -> Copy {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_tree(&fixture_root(), dir.path()).expect("copy fixtures");
    Copy { dir }
}

/// mlx5_0 as RoCE on `eth0` (MTU `mtu`): GIDs 0/1 link-local v1/v2,
/// 2/3 `::ffff:198.18.0.1` v1/v2, PCIe 8 GT/s x8 of x8, driver mlx5_core.
pub fn roce_copy(mtu: u32) -> Copy {
    let c = real_copy();
    let dev = "sys/class/infiniband/mlx5_0";
    c.put(&format!("{dev}/ports/1/link_layer"), "Ethernet\n");
    c.put(&format!("{dev}/ports/1/phys_state"), "5: LinkUp\n");
    c.put(&format!("{dev}/ports/1/rate"), "25 Gb/sec (1X EDR)\n");
    c.put(&format!("{dev}/ports/1/lid"), "0x0\n");
    c.put(&format!("{dev}/node_type"), "1: CA\n");
    let gids = [
        ("fe80:0000:0000:0000:0a7f:bcff:fe12:45ef", "IB/RoCE v1"),
        ("fe80:0000:0000:0000:0a7f:bcff:fe12:45ef", "RoCE v2"),
        ("0000:0000:0000:0000:0000:ffff:c612:0001", "IB/RoCE v1"),
        ("0000:0000:0000:0000:0000:ffff:c612:0001", "RoCE v2"),
        ("0000:0000:0000:0000:0000:0000:0000:0000", ""),
    ];
    for (i, (gid, kind)) in gids.iter().enumerate() {
        c.put(&format!("{dev}/ports/1/gids/{i}"), &format!("{gid}\n"));
        if !kind.is_empty() {
            c.put(
                &format!("{dev}/ports/1/gid_attrs/types/{i}"),
                &format!("{kind}\n"),
            );
            c.put(&format!("{dev}/ports/1/gid_attrs/ndevs/{i}"), "eth0\n");
        }
    }
    // Captured directories store symlink targets as `NAME.link` files.
    c.put(&format!("{dev}/device.link"), "0000:3b:00.0\n");
    c.put(&format!("{dev}/device/driver.link"), "mlx5_core\n");
    c.put(&format!("{dev}/device/net/eth0/ifindex"), "2\n");
    c.put(&format!("{dev}/device/numa_node"), "0\n");
    c.put(
        &format!("{dev}/device/current_link_speed"),
        "8.0 GT/s PCIe\n",
    );
    c.put(&format!("{dev}/device/current_link_width"), "8\n");
    c.put(&format!("{dev}/device/max_link_speed"), "8.0 GT/s PCIe\n");
    c.put(&format!("{dev}/device/max_link_width"), "8\n");
    c.put("sys/class/net/eth0/mtu", &format!("{mtu}\n"));
    c
}

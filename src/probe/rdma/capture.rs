//! The RDMA part of `wirescope capture DIR`: copy what [`read_rdma_facts`]
//! and the counter reader read (`/sys/class/infiniband/DEV/...`, the MTU and
//! `dev_port` of each port's netdev) to the same paths below DIR, and store
//! symlink targets (`device`, `device/driver`) as `NAME.link` files, which is
//! how [`CaptureDir`](crate::probe::capture_dir::CaptureDir) reads links. Reading the capture
//! back gives the same facts as the live host.
//!
//! Only reads the host (through [`HostSource`]); writes only below DIR.
//!
//! [`read_rdma_facts`]: super::read_rdma_facts

use super::SYSFS_ROOT;
use crate::probe::source::HostSource;
use std::path::Path;

/// Device attribute files.
const DEVICE_FILES: &[&str] = &[
    "node_type",
    "fw_ver",
    "hca_type",
    "board_id",
    "node_guid",
    "sys_image_guid",
    "parent",
    "device/numa_node",
    "device/current_link_speed",
    "device/current_link_width",
    "device/max_link_speed",
    "device/max_link_width",
];

/// Port attribute files.
const PORT_FILES: &[&str] = &["state", "phys_state", "rate", "link_layer", "lid"];

/// What was captured.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Captured {
    /// Files written.
    pub files: usize,
    /// Paths that could not be read (other than absent ones), with the reason.
    pub skipped: Vec<String>,
}

struct Out<'a> {
    root: &'a Path,
    src: &'a dyn HostSource,
    done: Captured,
}

impl Out<'_> {
    fn write(&mut self, path: &str, content: &str) -> std::io::Result<()> {
        let p = self.root.join(path.trim_start_matches('/'));
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, content)?;
        self.done.files += 1;
        Ok(())
    }

    /// Copy a file if it can be read (absent or unreadable counters are normal).
    fn copy(&mut self, path: &str) -> std::io::Result<()> {
        match self.src.read(path) {
            Ok(t) => self.write(path, &t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            // An empty GID's type reads EINVAL: not worth a line.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
            Err(e) => {
                self.done.skipped.push(format!("{path}: {e}"));
                Ok(())
            }
        }
    }

    fn link(&mut self, path: &str) -> std::io::Result<()> {
        if let Ok(name) = self.src.link_name(path) {
            self.write(&format!("{path}.link"), &format!("{name}\n"))?;
        }
        Ok(())
    }

    fn dir(&mut self, path: &str) -> Vec<String> {
        let mut v = self.src.list(path).unwrap_or_default();
        v.sort();
        v
    }
}

/// Copy the RDMA sysfs of `src` below `root`.
pub fn capture_rdma(src: &dyn HostSource, root: &Path) -> std::io::Result<Captured> {
    let mut o = Out {
        root,
        src,
        done: Captured::default(),
    };
    // An empty class directory (RDMA core loaded, no device) reads back as such.
    if src.list(SYSFS_ROOT).is_ok() {
        std::fs::create_dir_all(root.join(SYSFS_ROOT.trim_start_matches('/')))?;
    }
    for dev in o.dir(SYSFS_ROOT) {
        let base = format!("{SYSFS_ROOT}/{dev}");
        for f in DEVICE_FILES {
            o.copy(&format!("{base}/{f}"))?;
        }
        o.link(&format!("{base}/device"))?;
        o.link(&format!("{base}/device/driver"))?;
        let mut netdevs = Vec::new();
        for n in o.dir(&format!("{base}/device/net")) {
            std::fs::create_dir_all(
                root.join(format!("{}/device/net/{n}", base.trim_start_matches('/'))),
            )?;
            netdevs.push(n);
        }
        for port in o.dir(&format!("{base}/ports")) {
            let pb = format!("{base}/ports/{port}");
            for f in PORT_FILES {
                o.copy(&format!("{pb}/{f}"))?;
            }
            for i in o.dir(&format!("{pb}/gids")) {
                o.copy(&format!("{pb}/gids/{i}"))?;
                o.copy(&format!("{pb}/gid_attrs/types/{i}"))?;
                let nd = format!("{pb}/gid_attrs/ndevs/{i}");
                o.copy(&nd)?;
                if let Ok(n) = src.read(&nd) {
                    let n = n.trim().to_string();
                    if !n.is_empty() && !netdevs.contains(&n) {
                        netdevs.push(n);
                    }
                }
            }
            for group in ["counters", "hw_counters"] {
                for c in o.dir(&format!("{pb}/{group}")) {
                    o.copy(&format!("{pb}/{group}/{c}"))?;
                }
            }
        }
        if let Ok(p) = src.read(&format!("{base}/parent")) {
            netdevs.push(p.trim().to_string());
        }
        for n in netdevs {
            o.copy(&format!("/sys/class/net/{n}/mtu"))?;
            o.copy(&format!("/sys/class/net/{n}/dev_port"))?;
        }
    }
    Ok(o.done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::capture_dir::CaptureDir as Dir;
    use crate::probe::rdma::{read_rdma_facts, read_snapshot, testdata};

    #[test]
    fn a_capture_reads_back_as_the_same_facts_and_counters() {
        let c = testdata::roce_copy(1500);
        let src = Dir::new(c.root());
        let out = tempfile::tempdir().unwrap();
        let got = capture_rdma(&src, out.path()).unwrap();
        assert!(got.files > 100, "{got:?}");
        assert!(got.skipped.is_empty(), "{got:?}");
        let back = Dir::new(out.path());
        let (a, b) = (read_rdma_facts(&src), read_rdma_facts(&back));
        assert_eq!(a, b);
        assert_eq!(
            b.device("mlx5_0").unwrap().pci.as_deref(),
            Some("0000:3b:00.0")
        );
        let (mut sa, mut sb) = (read_snapshot(&src, &a), read_snapshot(&back, &b));
        sa.at = None;
        sb.at = None;
        assert_eq!(sa, sb);
    }

    #[test]
    fn a_host_without_rdma_captures_nothing() {
        let empty = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let got = capture_rdma(&Dir::new(empty.path()), out.path()).unwrap();
        assert_eq!(got, Captured::default());
    }
}

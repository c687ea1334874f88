//! Where probes read a host from: the live host or a captured directory.
//!
//! Paths are given as the kernel exposes them (`/proc/stat`). The live source
//! reads them directly; a directory source (a `wirescope capture`, a real
//! sosreport, a test fixture) reads the same relative path below its root.
//! What only a command can tell (ethtool's queries, the qdisc, the process
//! list) is a method too: live it asks the kernel (netlink, ioctl, /proc),
//! from a directory it parses the text the command printed into
//! `sos_commands/...`, so parsers and everything after them are shared.

use super::facts::{Channels, Coalesce, DrvInfo, Features, LinkInfo, Pause, Rings, Support};
use std::io;
use std::path::{Path, PathBuf};

/// Everything ethtool can say about one interface.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EthtoolView {
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
    /// `ethtool IF`.
    pub link: Support<LinkInfo>,
    /// `ethtool -a`.
    pub pause: Support<Pause>,
    /// `ethtool -S`.
    pub stats: Support<Vec<(String, u64)>>,
}

/// A readable view of a host.
pub trait HostSource: Send + Sync {
    /// Read a whole file given by its absolute path on the host (e.g. `/proc/stat`).
    fn read(&self, path: &str) -> io::Result<String>;
    /// Entry names of a directory (e.g. `/sys/class/net`).
    fn list(&self, path: &str) -> io::Result<Vec<String>>;
    /// Last component of a symlink's target (e.g. `/sys/class/net/eth0/device` → `virtio2`).
    fn link_name(&self, path: &str) -> io::Result<String>;
    /// ethtool's view of an interface.
    fn ethtool(&self, iface: &str) -> EthtoolView;
    /// `ethtool -S` now (live: names are read once and cached, values each call).
    fn ethtool_stats(&self, iface: &str) -> Support<Vec<(String, u64)>>;
    /// Kind of the root qdisc of an interface.
    fn qdisc(&self, iface: &str) -> Option<String>;
    /// Command names of running processes; None when unknown.
    fn processes(&self) -> Option<Vec<String>>;
    /// A short description for messages ("live host", "directory /tmp/x").
    fn describe(&self) -> String;
}

/// The running host. Holds the ioctl socket and the per-interface counter
/// names, so sampling does per interval only what must be per interval.
#[derive(Debug, Default)]
pub struct Live {
    stats: std::sync::Mutex<super::live::StatsCache>,
}

fn list_dir(p: &Path) -> io::Result<Vec<String>> {
    let mut v: Vec<String> = std::fs::read_dir(p)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    Ok(v)
}

fn link_last(p: &Path) -> io::Result<String> {
    let t = std::fs::read_link(p)?;
    Ok(t.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default())
}

impl HostSource for Live {
    fn read(&self, path: &str) -> io::Result<String> {
        std::fs::read_to_string(path)
    }
    fn list(&self, path: &str) -> io::Result<Vec<String>> {
        list_dir(Path::new(path))
    }
    fn link_name(&self, path: &str) -> io::Result<String> {
        link_last(Path::new(path))
    }
    fn ethtool(&self, iface: &str) -> EthtoolView {
        super::live::ethtool(iface)
    }
    fn ethtool_stats(&self, iface: &str) -> Support<Vec<(String, u64)>> {
        let mut cache = self
            .stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.read(iface)
    }
    fn qdisc(&self, iface: &str) -> Option<String> {
        super::live::qdisc(iface)
    }
    fn processes(&self) -> Option<Vec<String>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").ok()?.flatten() {
            let name = e.file_name();
            if name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
                if let Ok(c) = std::fs::read_to_string(e.path().join("comm")) {
                    out.push(c.trim().to_string());
                }
            }
        }
        Some(out)
    }
    fn describe(&self) -> String {
        "live host".into()
    }
}

/// A directory laid out like the host's root (`DIR/proc/stat`), with command
/// outputs under `DIR/sos_commands/` as sosreport stores them.
#[derive(Debug, Clone)]
pub struct Dir {
    root: PathBuf,
}

impl Dir {
    /// A source rooted at `root`.
    pub fn new(root: impl AsRef<Path>) -> Self {
        Dir {
            root: root.as_ref().to_path_buf(),
        }
    }

    /// Path below the root.
    pub fn path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// Text of a command output file, e.g. `sos_commands/networking/ethtool_-i_eth0`.
    pub fn command(&self, rel: &str) -> io::Result<String> {
        std::fs::read_to_string(self.root.join(rel))
    }
}

impl HostSource for Dir {
    fn read(&self, path: &str) -> io::Result<String> {
        std::fs::read_to_string(self.path(path))
    }
    fn list(&self, path: &str) -> io::Result<Vec<String>> {
        list_dir(&self.path(path))
    }
    fn link_name(&self, path: &str) -> io::Result<String> {
        let p = self.path(path);
        link_last(&p).or_else(|_| {
            std::fs::read_to_string(p.with_extension("link")).map(|s| s.trim().to_string())
        })
    }
    fn ethtool(&self, iface: &str) -> EthtoolView {
        super::captured::ethtool(self, iface)
    }
    fn ethtool_stats(&self, iface: &str) -> Support<Vec<(String, u64)>> {
        super::captured::ethtool(self, iface).stats
    }
    fn qdisc(&self, iface: &str) -> Option<String> {
        super::captured::qdisc(self, iface)
    }
    fn processes(&self) -> Option<Vec<String>> {
        super::captured::processes(self)
    }
    fn describe(&self) -> String {
        format!("directory {}", self.root.display())
    }
}

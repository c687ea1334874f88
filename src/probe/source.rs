//! Where probes read a host from: the live host or a captured directory.
//!
//! Paths are given as the kernel exposes them (`/proc/stat`). The live source
//! reads them directly; a directory source (a `wirescope capture`, a real
//! sosreport, a test fixture) reads the same relative path below its root.
//! What only a command can tell (ethtool's queries, the qdisc, the process
//! list) is a method too: live it asks the kernel (netlink, ioctl, /proc),
//! from a directory it parses the text the command printed into
//! `sos_commands/...`, so parsers and everything after them are shared.

use super::facts::{
    Channels, Coalesce, DrvInfo, Features, LinkInfo, Pause, PcieLink, Rings, Support,
};
use super::nic::NicStats;
use std::io;
use std::path::Path;

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
    /// ethtool's view of an interface without its counters (`stats` is
    /// Unknown): what the host facts keep. A big host's `ethtool -S` is some
    /// 2,500 names a NIC that the facts would read and drop.
    fn ethtool_facts(&self, iface: &str) -> EthtoolView {
        EthtoolView {
            stats: Support::Unknown,
            ..self.ethtool(iface)
        }
    }
    /// `ethtool -S` now (live: names are read once and cached, values each call).
    fn ethtool_stats(&self, iface: &str) -> Support<NicStats>;
    /// Kind of the root qdisc of an interface.
    fn qdisc(&self, iface: &str) -> Option<String>;
    /// Command names of running processes; None when unknown.
    fn processes(&self) -> Option<Vec<String>>;
    /// A short description for messages ("live host", "directory /tmp/x").
    fn describe(&self) -> String;
    /// True when this is the running host (its kernel can be probed live, e.g. by eBPF).
    fn is_live(&self) -> bool {
        false
    }
}

/// A file of `src` without its surrounding white space; None when it cannot
/// be read or holds nothing.
pub(super) fn read_trim(src: &dyn HostSource, path: &str) -> Option<String> {
    src.read(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The PCIe link of the device at `device` (its sysfs directory); None when
/// it has no `current_link_speed` (a virtual device).
pub(super) fn read_pcie(src: &dyn HostSource, device: &str) -> Option<PcieLink> {
    let f = |file: &str| read_trim(src, &format!("{device}/{file}"));
    Some(PcieLink {
        current_speed: f("current_link_speed")?,
        current_width: f("current_link_width").and_then(|v| v.parse().ok()),
        max_speed: f("max_link_speed").unwrap_or_default(),
        max_width: f("max_link_width").and_then(|v| v.parse().ok()),
    })
}

/// The entry names of the directory `p`, sorted.
pub(super) fn list_dir(p: &Path) -> io::Result<Vec<String>> {
    let mut v: Vec<String> = std::fs::read_dir(p)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    Ok(v)
}

pub(super) fn link_last(p: &Path) -> io::Result<String> {
    let t = std::fs::read_link(p)?;
    Ok(t.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default())
}

//! [`LiveHost`]: the running host as a [`HostSource`]. Files are read where the
//! kernel exposes them; the command-shaped questions are answered live:
//! ethtool through the ioctl (driver info, private stats) and generic netlink
//! (everything else), the qdisc through rtnetlink.

use super::ethtool_text::features_from_kernel;
use super::facts::Support;
use super::netlink::{EthtoolNl, NlError};
use super::nic::{EthtoolIoctl, NicStats, StatsReader};
use super::source::{link_last, list_dir, EthtoolView, HostSource};
use std::collections::HashMap;
use std::io;
use std::path::Path;

/// The ioctl socket and `ethtool -S` names per interface, kept between intervals.
#[derive(Debug, Default)]
pub struct StatsCache {
    io: Option<EthtoolIoctl>,
    /// ethtool netlink, for the counter names (None where the kernel has none).
    nl: Option<EthtoolNl>,
    nl_tried: bool,
    readers: HashMap<String, (String, StatsReader)>,
}

impl StatsCache {
    /// `ethtool -S IF` values now.
    pub fn read(&mut self, iface: &str) -> Support<NicStats> {
        if self.io.is_none() {
            match EthtoolIoctl::open() {
                Ok(io) => self.io = Some(io),
                Err(e) => return Support::Error(format!("cannot open an ioctl socket: {e}")),
            }
        }
        if !self.nl_tried {
            self.nl_tried = true;
            self.nl = EthtoolNl::open().ok();
        }
        let Some(io) = self.io.as_ref() else {
            return Support::Unknown;
        };
        let (driver, reader) = self.readers.entry(iface.to_string()).or_insert_with(|| {
            let driver = io.drvinfo(iface).map(|d| d.driver).unwrap_or_default();
            (driver, StatsReader::default())
        });
        reader.read(io, self.nl.as_mut(), iface, driver)
    }
}

/// Everything ethtool can say about `iface`, asked of the kernel: driver
/// info and private counters by ioctl, the rest by ethtool generic netlink.
/// Feature names are converted to the ones `ethtool -k` prints, so live and
/// captured facts compare equal. The private counters only when `stats`
/// (the host facts keep none of them).
fn view(iface: &str, stats: bool) -> EthtoolView {
    let io = match EthtoolIoctl::open() {
        Ok(io) => io,
        Err(e) => {
            let err = format!("cannot open an ioctl socket: {e}");
            return EthtoolView {
                drvinfo: Support::Error(err),
                ..Default::default()
            };
        }
    };
    let drvinfo = match io.drvinfo(iface) {
        Ok(d) => Support::Value(d),
        Err(e) if e.not_supported() => Support::NotSupported {
            driver: String::new(),
        },
        Err(e) => Support::Error(e.to_string()),
    };
    let driver = drvinfo.driver();
    let mut nl = EthtoolNl::open();
    let stats = if stats {
        StatsReader::default()
            .read(&io, nl.as_mut().ok(), iface, &driver)
            .map(|s| s.to_pairs())
    } else {
        Support::Unknown
    };
    // Every netlink query fails the same way: say so once per field.
    EthtoolView {
        drvinfo,
        stats,
        channels: ask(&mut nl, |n| n.channels(iface, &driver)),
        rings: ask(&mut nl, |n| n.rings(iface, &driver)),
        features: ask(&mut nl, |n| n.features(iface, &driver)).map(|k| features_from_kernel(&k)),
        coalesce: ask(&mut nl, |n| n.coalesce(iface, &driver)),
        link: ask(&mut nl, |n| n.link(iface, &driver)),
        pause: ask(&mut nl, |n| n.pause(iface, &driver)),
    }
}

/// One netlink query, or the error that opening netlink gave.
fn ask<T>(
    nl: &mut Result<EthtoolNl, NlError>,
    query: impl FnOnce(&mut EthtoolNl) -> Support<T>,
) -> Support<T> {
    match nl {
        Ok(nl) => query(nl),
        Err(e) => Support::Error(format!("ethtool netlink: {e}")),
    }
}

/// The running host. Holds the ioctl socket and the per-interface counter
/// names, so sampling does per interval only what must be per interval.
#[derive(Debug, Default)]
pub struct LiveHost {
    stats: std::sync::Mutex<StatsCache>,
}

impl HostSource for LiveHost {
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
        view(iface, true)
    }
    fn ethtool_facts(&self, iface: &str) -> EthtoolView {
        view(iface, false)
    }
    fn ethtool_stats(&self, iface: &str) -> Support<NicStats> {
        let mut cache = self
            .stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.read(iface)
    }
    /// Root qdisc kind of `iface`, from `tc qdisc show dev IF` parsed by the
    /// same code that reads a sosreport's `tc -s qdisc show` (None when tc is
    /// missing or the interface has none).
    fn qdisc(&self, iface: &str) -> Option<String> {
        let out = std::process::Command::new("tc")
            .args(["qdisc", "show", "dev", iface])
            .stdin(std::process::Stdio::null())
            .output()
            .ok()?;
        out.status.success().then(|| {
            super::capture_dir::parse_tc_root(&String::from_utf8_lossy(&out.stdout), iface)
        })?
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
    fn is_live(&self) -> bool {
        true
    }
}

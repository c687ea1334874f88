//! Live answers to the command-shaped questions of [`HostSource`](super::source::HostSource):
//! ethtool through the ioctl (driver info, private stats) and generic netlink
//! (everything else), the qdisc through rtnetlink.

use super::facts::Support;
use super::nic::{EthtoolIoctl, StatsReader};
use super::source::EthtoolView;
use std::collections::HashMap;

/// The ioctl socket and `ethtool -S` names per interface, kept between intervals.
#[derive(Debug, Default)]
pub struct StatsCache {
    io: Option<EthtoolIoctl>,
    readers: HashMap<String, (String, StatsReader)>,
}

impl StatsCache {
    /// `ethtool -S IF` values now.
    pub fn read(&mut self, iface: &str) -> Support<Vec<(String, u64)>> {
        if self.io.is_none() {
            match EthtoolIoctl::open() {
                Ok(io) => self.io = Some(io),
                Err(e) => return Support::Error(format!("cannot open an ioctl socket: {e}")),
            }
        }
        let Some(io) = self.io.as_ref() else {
            return Support::Unknown;
        };
        let (driver, reader) = self.readers.entry(iface.to_string()).or_insert_with(|| {
            let driver = io.drvinfo(iface).map(|d| d.driver).unwrap_or_default();
            (driver, StatsReader::default())
        });
        reader.read(io, iface, driver)
    }
}

/// Everything ethtool can say about `iface`, asked of the kernel.
pub fn ethtool(iface: &str) -> EthtoolView {
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
    let driver = drvinfo
        .value()
        .map(|d| d.driver.clone())
        .unwrap_or_default();
    let stats = StatsReader::default().read(&io, iface, &driver);
    EthtoolView {
        drvinfo,
        stats,
        ..Default::default()
    }
}

/// Root qdisc kind of `iface`.
pub fn qdisc(_iface: &str) -> Option<String> {
    None
}

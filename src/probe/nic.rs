//! NIC counters through the SIOCETHTOOL ioctl and /proc/net/dev.
//!
//! * ETHTOOL_GDRVINFO: driver, version, firmware, bus-info (`ethtool -i`).
//! * ETHTOOL_GSSET_INFO (the count, first), the names once (and again only
//!   when the count changes) and ETHTOOL_GSTATS each interval: the driver's
//!   private counters (`ethtool -S`). The GSTRINGS and GSTATS ioctls write as
//!   many entries as the driver has *at that moment*, whatever length the
//!   caller passed, so a driver that grows between the count and the read
//!   (channels added) could overrun a buffer sized from the count alone.
//!   Names therefore come from ethtool netlink (`STRSET_GET`, a reply the
//!   kernel sizes) when the kernel has it, GSTRINGS otherwise; both GSTRINGS
//!   and GSTATS buffers get generous headroom ([`headroom`]), and a result
//!   larger than the count read first is discarded and read again.
//! * /proc/net/dev: per-interface bytes, packets, drops and errors, parsed
//!   by procfs-core ([`super::procfs`]).
//!
//! The ioctl socket belongs to the network namespace of the thread that
//! creates it; open it on the thread (or in the process) that will sample.

use super::facts::{DrvInfo, Support};
use super::netlink::cstr;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

#[repr(C)]
struct RawDrvInfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// Errors of the ethtool ioctl.
#[derive(Debug, thiserror::Error)]
pub enum IoctlError {
    /// The interface name does not fit IFNAMSIZ.
    #[error("interface name '{0}' is longer than 15 bytes")]
    Name(String),
    /// The ioctl failed.
    #[error("ethtool {op} on {iface}: {source}")]
    Os {
        /// The command.
        op: &'static str,
        /// Interface.
        iface: String,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
}

impl IoctlError {
    /// EOPNOTSUPP: the driver does not implement this command.
    pub fn not_supported(&self) -> bool {
        matches!(self, IoctlError::Os { source, .. } if source.raw_os_error() == Some(libc::EOPNOTSUPP))
    }
}

/// An AF_INET datagram socket used only for SIOCETHTOOL.
#[derive(Debug)]
pub struct EthtoolIoctl {
    fd: OwnedFd,
}

impl EthtoolIoctl {
    /// Open the socket (in the calling thread's network namespace).
    pub fn open() -> std::io::Result<Self> {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
        Ok(EthtoolIoctl { fd: s.into() })
    }

    fn call(
        &self,
        iface: &str,
        op: &'static str,
        data: *mut libc::c_void,
    ) -> Result<(), IoctlError> {
        let bytes = iface.as_bytes();
        if bytes.len() >= libc::IFNAMSIZ {
            return Err(IoctlError::Name(iface.into()));
        }
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            data,
            _pad: [0; 16],
        };
        for (d, s) in req.name.iter_mut().zip(bytes) {
            *d = *s as libc::c_char;
        }
        // SAFETY: req is a valid ifreq whose data points at a buffer sized for the command.
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), SIOCETHTOOL, &mut req as *mut IfReq) };
        if r < 0 {
            return Err(IoctlError::Os {
                op,
                iface: iface.into(),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(())
    }

    /// ETHTOOL_GDRVINFO.
    pub fn drvinfo(&self, iface: &str) -> Result<DrvInfo, IoctlError> {
        // SAFETY: RawDrvInfo is plain old data; all-zero is valid.
        let mut d: RawDrvInfo = unsafe { std::mem::zeroed() };
        d.cmd = ETHTOOL_GDRVINFO;
        self.call(iface, "GDRVINFO", (&mut d as *mut RawDrvInfo).cast())?;
        Ok(DrvInfo {
            driver: cstr(&d.driver),
            version: cstr(&d.version),
            firmware: cstr(&d.fw_version),
            expansion_rom: cstr(&d.erom_version),
            bus_info: cstr(&d.bus_info),
            supports_statistics: d.n_stats > 0,
            supports_test: d.testinfo_len > 0,
            supports_eeprom_access: d.eedump_len > 0,
            supports_register_dump: d.regdump_len > 0,
            supports_priv_flags: d.n_priv_flags > 0,
        })
    }

    /// Number of private statistics (ETHTOOL_GSSET_INFO for ETH_SS_STATS).
    pub fn stats_count(&self, iface: &str) -> Result<usize, IoctlError> {
        // cmd, reserved, sset_mask (u64), data[1] (u32)
        let mut buf = [0u32; 6];
        buf[0] = ETHTOOL_GSSET_INFO;
        buf[2] = 1 << ETH_SS_STATS; // low half of the little-endian u64 mask
        self.call(iface, "GSSET_INFO", buf.as_mut_ptr().cast())?;
        let mask = u64::from(buf[2]) | (u64::from(buf[3]) << 32);
        Ok(if mask & (1 << ETH_SS_STATS) != 0 {
            buf[4] as usize
        } else {
            0
        })
    }

    /// The names of the private statistics (ETHTOOL_GSTRINGS). The kernel
    /// writes as many names as the driver has at that moment, whatever length
    /// we pass, so the buffer has [`headroom`] beyond `count`.
    pub fn stats_names(&self, iface: &str, count: usize) -> Result<Vec<String>, IoctlError> {
        let room = headroom(count);
        let words = 3 + (room * ETH_GSTRING_LEN).div_ceil(4);
        let mut buf = vec![0u32; words];
        buf[0] = ETHTOOL_GSTRINGS;
        buf[1] = ETH_SS_STATS;
        buf[2] = u32::try_from(count).unwrap_or(u32::MAX);
        self.call(iface, "GSTRINGS", buf.as_mut_ptr().cast())?;
        let n = buf[2] as usize;
        if n > room {
            return Err(count_changed("GSTRINGS", iface));
        }
        // SAFETY: the u32 buffer holds 12 + room*32 bytes and n <= room.
        let bytes = unsafe {
            std::slice::from_raw_parts(buf.as_ptr().cast::<u8>().add(12), n * ETH_GSTRING_LEN)
        };
        Ok(bytes.chunks(ETH_GSTRING_LEN).map(cstr).collect())
    }

    /// The values of the private statistics (ETHTOOL_GSTATS), at most `cap` of them.
    pub fn stats_values(&self, iface: &str, cap: usize) -> Result<Vec<u64>, IoctlError> {
        // Headroom: the driver may have grown between GSSET_INFO and now.
        let room = headroom(cap);
        let mut buf = vec![0u64; 1 + room];
        buf[0] = u64::from(ETHTOOL_GSTATS); // cmd (u32) + n_stats (u32) in the first u64
        self.call(iface, "GSTATS", buf.as_mut_ptr().cast())?;
        let n = (buf[0] >> 32) as usize;
        if n > room {
            return Err(count_changed("GSTATS", iface));
        }
        buf.truncate(1 + n);
        buf.remove(0);
        Ok(buf)
    }
}

/// A GSTRINGS/GSTATS result larger than its buffer's room.
fn count_changed(op: &'static str, iface: &str) -> IoctlError {
    IoctlError::Os {
        op,
        iface: iface.into(),
        source: std::io::Error::other("the statistics count changed while reading"),
    }
}

/// Entries a GSTRINGS/GSTATS buffer has room for when the driver reported
/// `count`: four times as many, and at least 4096 more (mlx5 adds about 30
/// counters per channel; going from 16 to 128 channels adds some 3400).
pub fn headroom(count: usize) -> usize {
    count.saturating_mul(4).max(count.saturating_add(4096))
}

/// One `ethtool -S` reading: the counter names, in printed order, and their
/// values. The names are shared between the readings of one interface while
/// the driver's counter set stays the same (a big host's 8 NICs list some
/// 20,000 names each interval): copying a reading copies no name, and a
/// reader that kept the previous names knows a same list by
/// [`NicStats::same_names`] without comparing them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NicStats {
    /// The names, in printed order (duplicates kept).
    pub names: Arc<[String]>,
    /// The value of each name.
    pub values: Vec<u64>,
}

impl NicStats {
    /// Counters in printed order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, u64)> {
        self.names
            .iter()
            .map(String::as_str)
            .zip(self.values.iter().copied())
    }

    /// How many counters.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// No counter at all.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// True when both list the same names (at once when they share them).
    pub fn same_names(&self, other: &NicStats) -> bool {
        Arc::ptr_eq(&self.names, &other.names) || self.names == other.names
    }

    /// `(name, value)` pairs, as `ethtool -S` prints them.
    pub fn to_pairs(&self) -> Vec<(String, u64)> {
        self.iter().map(|(n, v)| (n.to_owned(), v)).collect()
    }
}

impl From<Vec<(String, u64)>> for NicStats {
    fn from(pairs: Vec<(String, u64)>) -> Self {
        let (names, values): (Vec<String>, Vec<u64>) = pairs.into_iter().unzip();
        NicStats {
            names: names.into(),
            values,
        }
    }
}

/// Names read once, values each interval.
#[derive(Debug, Default)]
pub struct StatsReader {
    names: Arc<[String]>,
}

impl StatsReader {
    /// `ethtool -S` of `iface`: every private counter by name.
    pub fn read(
        &mut self,
        io: &EthtoolIoctl,
        nl: Option<&mut super::netlink::EthtoolNl>,
        iface: &str,
        driver: &str,
    ) -> Support<NicStats> {
        let count = match io.stats_count(iface) {
            Ok(c) if c > 0 => c,
            Err(e) if !e.not_supported() => return Support::Error(e.to_string()),
            // EOPNOTSUPP, or no private counter at all.
            _ => {
                return Support::NotSupported {
                    driver: driver.into(),
                }
            }
        };
        if count != self.names.len() {
            let by_netlink = nl
                .and_then(|nl| nl.stats_strings(iface).ok())
                .filter(|n| n.len() == count);
            match by_netlink {
                Some(n) => self.names = n.into(),
                None => match io.stats_names(iface, count) {
                    Ok(n) => self.names = n.into(),
                    Err(e) => return Support::Error(e.to_string()),
                },
            }
        }
        match io.stats_values(iface, count) {
            Ok(v) if v.len() == self.names.len() => Support::Value(NicStats {
                names: Arc::clone(&self.names),
                values: v,
            }),
            Ok(_) => {
                self.names = Arc::from([]); // re-read next time
                Support::Error(format!("ethtool -S {iface}: the counter list changed while reading; retrying next interval"))
            }
            Err(e) => Support::Error(e.to_string()),
        }
    }
}

/// One line of /proc/net/dev.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct DevCounters {
    /// Received bytes.
    pub rx_bytes: u64,
    /// Received packets.
    pub rx_packets: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Receive drops.
    pub rx_dropped: u64,
    /// Transmitted bytes.
    pub tx_bytes: u64,
    /// Transmitted packets.
    pub tx_packets: u64,
    /// Transmit errors.
    pub tx_errors: u64,
    /// Transmit drops.
    pub tx_dropped: u64,
}

impl DevCounters {
    /// Field-wise difference (counters that went backwards count as 0).
    pub fn delta(&self, prev: &DevCounters) -> DevCounters {
        DevCounters {
            rx_bytes: self.rx_bytes.saturating_sub(prev.rx_bytes),
            rx_packets: self.rx_packets.saturating_sub(prev.rx_packets),
            rx_errors: self.rx_errors.saturating_sub(prev.rx_errors),
            rx_dropped: self.rx_dropped.saturating_sub(prev.rx_dropped),
            tx_bytes: self.tx_bytes.saturating_sub(prev.tx_bytes),
            tx_packets: self.tx_packets.saturating_sub(prev.tx_packets),
            tx_errors: self.tx_errors.saturating_sub(prev.tx_errors),
            tx_dropped: self.tx_dropped.saturating_sub(prev.tx_dropped),
        }
    }
}

impl From<&procfs_core::net::DeviceStatus> for DevCounters {
    fn from(d: &procfs_core::net::DeviceStatus) -> Self {
        DevCounters {
            rx_bytes: d.recv_bytes,
            rx_packets: d.recv_packets,
            rx_errors: d.recv_errs,
            rx_dropped: d.recv_drop,
            tx_bytes: d.sent_bytes,
            tx_packets: d.sent_packets,
            tx_errors: d.sent_errs,
            tx_dropped: d.sent_drop,
        }
    }
}

/// Parse /proc/net/dev (procfs-core) into counters per interface. A line
/// that is not the kernel's fails the whole file, naming it (so does an old
/// kernel's line with no space between the colon and a wide byte count).
pub fn parse_net_dev(
    text: &str,
) -> Result<BTreeMap<String, DevCounters>, super::procfs::ParseError> {
    let all: procfs_core::net::InterfaceDeviceStatus = super::procfs::parse("/proc/net/dev", text)?;
    Ok(all
        .0
        .into_iter()
        .map(|(name, d)| (name, DevCounters::from(&d)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_net_dev() {
        let t = include_str!("../../tests/fixtures/proc/net-dev");
        let d = parse_net_dev(t).unwrap();
        let lo = d.iter().find(|(n, _)| *n == "lo").map(|(_, c)| *c).unwrap();
        assert!(lo.rx_packets > 0);
        assert_eq!(lo.rx_bytes, lo.tx_bytes, "loopback receives what it sends");
    }

    #[test]
    fn net_dev_lines_that_are_not_the_kernels_fail_naming_the_file() {
        let head = "Inter-|   Receive |  Transmit\n face |bytes packets|bytes packets\n";
        let ok = format!("{head}  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n");
        let c = parse_net_dev(&ok).unwrap()["eth0"];
        assert_eq!(
            (
                c.rx_bytes,
                c.rx_packets,
                c.rx_dropped,
                c.tx_bytes,
                c.tx_dropped
            ),
            (1, 2, 4, 9, 12)
        );
        for bad in [
            format!("{head}  eth0: 1 2 3\n"),
            format!("{head}  eth0: 1 x 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"),
            // An old kernel's wide byte count glued to the colon.
            format!("{head}  eth0:123456789 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"),
        ] {
            let e = parse_net_dev(&bad).unwrap_err().to_string();
            assert!(
                e.starts_with("/proc/net/dev is not in the kernel's format ("),
                "{e}"
            );
            assert!(!e.contains("procfs bug"), "{e}");
        }
    }

    #[test]
    fn loopback_ioctl() {
        let io = EthtoolIoctl::open().unwrap();
        // lo has no driver info on many kernels; either way it must not be a crash or garbage.
        match io.drvinfo("lo") {
            Ok(d) => assert!(!d.driver.is_empty() || d.bus_info.is_empty()),
            Err(e) => assert!(e.not_supported(), "{e}"),
        }
        assert!(matches!(
            io.drvinfo("no-such-if0"),
            Err(IoctlError::Os { .. })
        ));
        assert!(matches!(
            io.drvinfo("a-very-long-interface-name"),
            Err(IoctlError::Name(_))
        ));
    }
}

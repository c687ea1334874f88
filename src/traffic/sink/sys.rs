//! The few kernel calls the packet engine needs besides its sockets:
//! interface facts by ioctl and getifaddrs (they answer for the calling
//! thread's network namespace, unlike a sysfs mounted for another one) and
//! the check, shared by the sink and the generator, that a spec can run on
//! an interface; memory mappings that unmap themselves, capability checks,
//! and entering a named network namespace from one thread.
//!
//! Every `unsafe` block here is a plain syscall on memory this module owns;
//! each says why it is sound.

use super::frame::Mac;
use super::spec::SinkSpec;
use super::SinkError;
use crate::traffic::EngineSpecOps;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const SIOCGIFHWADDR: libc::c_ulong = 0x8927;
const SIOCGIFMTU: libc::c_ulong = 0x8921;
const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSET: u32 = 0x01;
const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETHTOOL_GDRVINFO: u32 = 0x03;
const CAP_NET_ADMIN: u32 = 12;
const CAP_NET_RAW: u32 = 13;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_BPF: u32 = 39;

/// What the engine needs to know about an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfaceInfo {
    /// Name.
    pub name: String,
    /// Index in the calling thread's namespace.
    pub ifindex: u32,
    /// MAC address.
    pub mac: Mac,
    /// MTU.
    pub mtu: u32,
    /// First IPv4 address and its prefix length.
    pub ipv4: Option<(Ipv4Addr, u8)>,
    /// Receive queues.
    pub rx_queues: u32,
    /// Transmit queues.
    pub tx_queues: u32,
    /// Link speed in Mb/s, when the driver reports a real one (None for
    /// veth, whose 10000 is a placeholder).
    pub speed_mbps: Option<u32>,
    /// Driver (`ethtool -i`).
    pub driver: String,
}

impl IfaceInfo {
    /// True when `ip` is in this interface's IPv4 subnet (reachable on the link).
    pub fn on_link(&self, ip: Ipv4Addr) -> bool {
        let Some((mine, prefix)) = self.ipv4 else {
            return false;
        };
        let mask = if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(prefix.min(32)))
        };
        u32::from(mine) & mask == u32::from(ip) & mask
    }
}

#[repr(C)]
struct IfReq {
    name: [u8; 16],
    data: [u8; 24],
}

fn ifreq(iface: &str) -> Result<IfReq, SinkError> {
    let mut r = IfReq {
        name: [0; 16],
        data: [0; 24],
    };
    let b = iface.as_bytes();
    if b.is_empty() || b.len() > 15 {
        return Err(SinkError::Iface {
            iface: iface.into(),
            what: "name",
            reason: "interface names have 1 to 15 bytes".into(),
        });
    }
    r.name[..b.len()].copy_from_slice(b);
    Ok(r)
}

fn ioctl(fd: RawFd, req: libc::c_ulong, r: &mut IfReq) -> std::io::Result<()> {
    // SAFETY: r is a valid, writable ifreq-sized buffer for the whole call.
    if unsafe { libc::ioctl(fd, req, r as *mut IfReq) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// SIOCETHTOOL with `cmd` pointing at `buf` (whose first u32 is the command).
fn ethtool<T>(fd: RawFd, iface: &str, buf: &mut T) -> Result<(), SinkError> {
    let mut r = ifreq(iface)?;
    let p = buf as *mut T as usize;
    r.data[..8].copy_from_slice(&p.to_ne_bytes());
    ioctl(fd, SIOCETHTOOL, &mut r).map_err(|e| SinkError::Iface {
        iface: iface.into(),
        what: "ethtool ioctl",
        reason: e.to_string(),
    })
}

/// Validate `spec` and look up `iface` for a test on it: the facts, or an
/// error when the interface has no IPv4 address for the test's flows.
pub fn checked_iface(spec: &SinkSpec, iface: &str) -> Result<IfaceInfo, SinkError> {
    spec.validate()
        .map_err(|e| SinkError::Unsupported(e.to_string()))?;
    let info = iface_info(iface)?;
    if info.ipv4.is_none() {
        return Err(SinkError::Iface {
            iface: iface.into(),
            what: "IPv4 address",
            reason: "none configured; the test's flows are IPv4/UDP".into(),
        });
    }
    Ok(info)
}

/// Interface facts, as the calling thread's network namespace sees them.
pub fn iface_info(iface: &str) -> Result<IfaceInfo, SinkError> {
    let err = |what: &'static str, e: std::io::Error| SinkError::Iface {
        iface: iface.into(),
        what,
        reason: e.to_string(),
    };
    let ifindex = nix::net::if_::if_nametoindex(iface)
        .map_err(|e| err("index", std::io::Error::from_raw_os_error(e as i32)))?;
    let fd = socket(libc::AF_INET, libc::SOCK_DGRAM, 0).map_err(|e| err("ioctl socket", e))?;
    let mut r = ifreq(iface)?;
    ioctl(fd.as_raw_fd(), SIOCGIFHWADDR, &mut r).map_err(|e| err("MAC address", e))?;
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&r.data[2..8]); // sockaddr: family (2 B), then the address
    let mut r = ifreq(iface)?;
    ioctl(fd.as_raw_fd(), SIOCGIFMTU, &mut r).map_err(|e| err("MTU", e))?;
    let mtu = i32::from_ne_bytes([r.data[0], r.data[1], r.data[2], r.data[3]]).max(0) as u32;
    // ethtool_drvinfo: cmd (u32), then driver[32] (the rest is not needed here).
    let mut drv = [0u32; 49];
    drv[0] = ETHTOOL_GDRVINFO;
    let driver = match ethtool(fd.as_raw_fd(), iface, &mut drv) {
        Ok(()) => {
            let bytes: Vec<u8> = drv[1..9].iter().flat_map(|w| w.to_ne_bytes()).collect();
            let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
            String::from_utf8_lossy(&bytes[..end]).into_owned()
        }
        Err(_) => String::new(),
    };
    // ethtool_channels: cmd, max_rx, max_tx, max_other, max_combined, rx, tx, other, combined.
    let mut ch = [0u32; 9];
    ch[0] = ETHTOOL_GCHANNELS;
    let (rx_queues, tx_queues) = match ethtool(fd.as_raw_fd(), iface, &mut ch) {
        Ok(()) => (ch[5] + ch[8], ch[6] + ch[8]),
        Err(_) => sysfs_queues(iface),
    };
    // ethtool_cmd (legacy GSET): speed is u16 at 12, speed_hi u16 at 28.
    let mut cmd = [0u8; 44];
    cmd[..4].copy_from_slice(&ETHTOOL_GSET.to_ne_bytes());
    let speed_mbps = ethtool(fd.as_raw_fd(), iface, &mut cmd)
        .ok()
        .and_then(|()| {
            let lo = u32::from(u16::from_ne_bytes([cmd[12], cmd[13]]));
            let hi = u32::from(u16::from_ne_bytes([cmd[28], cmd[29]]));
            let s = lo | hi << 16;
            (s != 0 && s != u32::MAX && s != 0xffff && driver != "veth").then_some(s)
        });
    let ipv4 = nix::ifaddrs::getifaddrs().ok().and_then(|addrs| {
        addrs.filter(|a| a.interface_name == iface).find_map(|a| {
            let ip = a.address?.as_sockaddr_in()?.ip();
            let mask = a.netmask.and_then(|m| m.as_sockaddr_in().map(|m| m.ip()));
            Some((ip, mask.map_or(32, |m| u32::from(m).count_ones() as u8)))
        })
    });
    Ok(IfaceInfo {
        name: iface.into(),
        ifindex,
        mac: Mac(mac),
        mtu,
        ipv4,
        rx_queues: rx_queues.max(1),
        tx_queues: tx_queues.max(1),
        speed_mbps,
        driver,
    })
}

fn sysfs_queues(iface: &str) -> (u32, u32) {
    let count = |prefix: &str| {
        std::fs::read_dir(format!("/sys/class/net/{iface}/queues"))
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                    .count() as u32
            })
            .unwrap_or(1)
    };
    (count("rx-"), count("tx-"))
}

/// Effective capabilities of this process (`/proc/self/status`, parsed by procfs-core).
fn cap_eff() -> u64 {
    use procfs_core::FromRead;
    std::fs::read("/proc/self/status")
        .ok()
        .and_then(|s| procfs_core::process::Status::from_read(s.as_slice()).ok())
        .map_or(0, |s| s.capeff)
}

fn has_cap(bit: u32) -> bool {
    cap_eff() & (1u64 << bit) != 0
}

/// May open AF_PACKET and AF_XDP sockets.
pub fn can_raw() -> bool {
    has_cap(CAP_NET_RAW)
}

/// May load and attach XDP programs.
pub fn can_xdp() -> bool {
    (has_cap(CAP_BPF) && has_cap(CAP_NET_ADMIN)) || has_cap(CAP_SYS_ADMIN)
}

/// An anonymous or file-backed mapping, unmapped on drop.
#[derive(Debug)]
pub struct Mmap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory; access is coordinated by its owners
// (one worker thread, and the kernel through the ring protocol).
unsafe impl Send for Mmap {}
// SAFETY: as above; shared readers only read atomics inside it.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Private anonymous memory of `len` bytes (zeroed, page-aligned).
    pub fn anonymous(len: usize) -> std::io::Result<Mmap> {
        Self::map(len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    }

    /// A shared mapping of `fd` at `offset` (a socket's ring).
    pub fn socket(fd: RawFd, len: usize, offset: u64) -> std::io::Result<Mmap> {
        Self::map(len, libc::MAP_SHARED, fd, offset)
    }

    /// mmap(2) of `len` bytes, read-write and populated, with `flags`.
    fn map(len: usize, flags: libc::c_int, fd: RawFd, offset: u64) -> std::io::Result<Mmap> {
        // SAFETY: a fresh mapping (anonymous, or a kernel ring of `len`
        // bytes); checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags | libc::MAP_POPULATE,
                fd,
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mmap { ptr: p.cast(), len })
    }

    /// Start of the mapping.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for an empty mapping (never: mmap refuses length 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; nobody uses them after drop.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// setsockopt with a plain value.
pub fn setsockopt<T>(fd: RawFd, level: i32, name: i32, v: &T) -> std::io::Result<()> {
    // SAFETY: v points at size_of::<T>() readable bytes for the call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// getsockopt into a plain value; returns the length the kernel wrote.
pub fn getsockopt<T>(fd: RawFd, level: i32, name: i32, v: &mut T) -> std::io::Result<usize> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: v points at size_of::<T>() writable bytes; len says so.
    let r = unsafe { libc::getsockopt(fd, level, name, (v as *mut T).cast(), &mut len) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(len as usize)
}

/// A socket(2) owned at once.
pub fn socket(domain: i32, ty: i32, proto: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: plain socket(2); checked, then owned.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Wait for `events` on `fd` for at most `ms` milliseconds; true when ready.
pub fn poll_fd(fd: RawFd, events: i16, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the call.
    unsafe { libc::poll(&mut p, 1, ms) > 0 }
}

/// CLOCK_REALTIME in ns (the frames' send time).
#[inline]
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// Sleep precision for pacing: 1 µs of timer slack instead of the default 50.
pub fn tight_timer_slack() {
    // SAFETY: prctl with integer arguments only affects the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
}

/// Move the calling thread (only) into the network namespace `/run/netns/NAME`.
/// Sockets it opens and threads it spawns afterwards live there.
pub fn enter_netns_thread(name: &str) -> Result<(), SinkError> {
    let err = |reason: String| SinkError::Netns {
        name: name.into(),
        reason,
    };
    let f = std::fs::File::open(format!("/run/netns/{name}")).map_err(|e| err(e.to_string()))?;
    nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| err(e.to_string()))
}

/// Raise the soft open-files limit to the hard one when `need` more are wanted.
pub fn ensure_fds(need: u64) -> Result<(), SinkError> {
    let mut lim = libc::rlimit {
        rlim_cur: 1024,
        rlim_max: 1024,
    };
    // SAFETY: writes one rlimit we own.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    let open = std::fs::read_dir("/proc/self/fd").map_or(64, |d| d.count() as u64);
    if open + need + 64 <= lim.rlim_cur {
        return Ok(());
    }
    if open + need + 64 > lim.rlim_max {
        return Err(SinkError::Unsupported(format!(
            "{need} sockets would exceed the open-files limit ({}); use fewer --flows or raise `ulimit -n`",
            lim.rlim_max
        )));
    }
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: reads one rlimit we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } < 0 {
        return Err(SinkError::Unsupported(format!(
            "cannot raise the open-files limit to {}: {}",
            lim.rlim_max,
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_facts() {
        let lo = iface_info("lo").unwrap();
        assert!(lo.ifindex > 0 && lo.mtu >= 1500);
        assert_eq!(lo.mac, Mac([0; 6]));
        assert_eq!(lo.ipv4.map(|a| a.0), Some(Ipv4Addr::LOCALHOST));
        assert!(lo.on_link(Ipv4Addr::new(127, 1, 2, 3)));
        assert!(!lo.on_link(Ipv4Addr::new(198, 18, 0, 2)));
        let e = iface_info("no-such-if0").unwrap_err().to_string();
        assert!(e.contains("no-such-if0"), "{e}");
    }

    #[test]
    fn anonymous_mapping_is_zeroed_and_writable() {
        let m = Mmap::anonymous(8192).unwrap();
        // SAFETY: within the mapping.
        unsafe {
            assert_eq!(*m.ptr().add(4096), 0);
            *m.ptr().add(4096) = 7;
            assert_eq!(*m.ptr().add(4096), 7);
        }
        assert_eq!(m.len(), 8192);
    }
}

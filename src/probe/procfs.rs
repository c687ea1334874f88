//! The /proc files that procfs-core parses, and the ones it does not.
//!
//! procfs-core only parses: it takes bytes and returns its typed view of a
//! file. Every file reaches it through a [`super::source::HostSource`] —
//! the live host's kernel, or a capture's copy through the untrusted reader
//! ([`super::untrusted`]: `openat2` beneath the capture, size-capped) — so
//! a live host and `watch --from`/`check --from` parse the same bytes with
//! the same code. procfs-core never opens a file here. A few files of this
//! process alone (`/proc/self/status`, a thread's `schedstat`) are read
//! directly and parsed the same way.
//!
//! | file | parser | why |
//! |---|---|---|
//! | `/proc/net/dev` | procfs-core `InterfaceDeviceStatus` ([`super::nic::parse_net_dev`]) | |
//! | `/proc/net/route` | procfs-core `RouteEntries` ([`super::system::default_route_iface`]) | |
//! | `/proc/uptime` | procfs-core `Uptime` ([`super::system::uptime_secs`]) | |
//! | `/proc/meminfo` | procfs-core `Meminfo` ([`super::system::mem_available`]) | |
//! | `/proc/self/status` | procfs-core `Status` (VmHWM/VmRSS, VmSize, CapEff) | |
//! | `/proc/self/task/TID/schedstat` | procfs-core `Schedstat` | |
//! | `/proc/stat` | ours ([`super::cpu`]) | `KernelStats` returns a list without CPU numbers: with offline CPUs, position and id disagree |
//! | `/proc/softirqs`, `/proc/interrupts` | ours ([`super::softirq`], [`super::system::parse_interrupts`]) | not in procfs-core |
//! | `/proc/net/softnet_stat` | ours ([`super::softirq`]) | not in procfs-core |
//! | `/proc/net/snmp`, `/proc/net/netstat` | ours ([`super::netstat`]) | procfs-core's `Snmp` has fixed fields (counters of newer kernels are lost) and no `netstat` (`TcpExt`, `IpExt`) |
//! | `/proc/net/ipv6_route` | ours ([`super::system::default_route_iface`]) | not in procfs-core |
//! | `/proc/cpuinfo` | ours ([`super::system`]) | `CpuInfo` keeps only lines inside `processor` blocks: ARM's `Model` (after the blocks) and old ARM's `Processor` (before them) are dropped |
//!
//! procfs-core calls a line it cannot parse an internal error ("please
//! report this procfs bug"); in a capture it is a file that is not what the
//! kernel writes, and [`ParseError`] says so, naming the file.

use procfs_core::FromRead;

/// A file was not in the format the kernel writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path} is not in the kernel's format ({why})")]
pub struct ParseError {
    /// The file, as the host names it (`/proc/net/dev`).
    pub path: String,
    /// What procfs-core found wrong.
    pub why: String,
}

/// Parse the text of `path` (already read, live or captured) with procfs-core.
pub fn parse<T: FromRead>(path: &str, text: &str) -> Result<T, ParseError> {
    T::from_read(text.as_bytes()).map_err(|e| ParseError {
        path: path.to_string(),
        why: reason(&e),
    })
}

/// What procfs-core found wrong, without its "bug at FILE:LINE (please
/// report this procfs bug)" wrapping (nested when one parse calls another).
pub fn reason(e: &procfs_core::ProcError) -> String {
    let procfs_core::ProcError::InternalError(i) = e else {
        return e.to_string();
    };
    let last = i.msg.lines().last().unwrap_or("");
    let mut why = last;
    while let Some(rest) = why.strip_prefix("Internal Unwrap Error: ") {
        why = rest;
    }
    if why == "NoneError" || why.is_empty() {
        "a line ends before its last field".to_string()
    } else {
        why.to_string()
    }
}

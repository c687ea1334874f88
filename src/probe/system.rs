//! Host identity: name, kernel, CPU count, wirescope version.
//!
//! The telemetry issue extends this with NUMA, IRQ affinity, sysctls and the
//! rest of the host facts; for now it is what the log header and the control
//! handshake need to name each host.

use serde::{Deserialize, Serialize};

/// Who a host is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct HostInfo {
    /// `uname -n`.
    pub hostname: String,
    /// `uname -r`.
    pub kernel: String,
    /// Online CPUs.
    pub cpus: usize,
    /// wirescope version running there.
    pub wirescope: String,
    /// True when the process can create namespaces, pin IRQs, load eBPF (euid 0).
    pub privileged: bool,
}

impl HostInfo {
    /// Read this host.
    pub fn current() -> Self {
        let uts = nix::sys::utsname::uname().ok();
        let s = |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
            uts.as_ref()
                .map(|u| f(u).to_string_lossy().into_owned())
                .unwrap_or_else(|| "unknown".into())
        };
        HostInfo {
            hostname: s(nix::sys::utsname::UtsName::nodename),
            kernel: s(nix::sys::utsname::UtsName::release),
            cpus: online_cpus(),
            wirescope: env!("CARGO_PKG_VERSION").to_string(),
            privileged: nix::unistd::geteuid().is_root(),
        }
    }
}

/// Online CPUs (not the affinity mask of this process).
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|n| *n > 0).unwrap_or(1)
}

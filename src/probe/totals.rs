//! The host's cumulative counters since boot, as the kernel keeps them: CPU
//! time by mode (/proc/stat, in seconds), softirqs raised (/proc/softirqs)
//! and softnet (/proc/net/softnet_stat) per CPU.
//!
//! This is what an exporter serves ([`crate::record::metrics`]): the same
//! files and parsers the sampler reads, without the deltas. It owns no state
//! and never changes the host; reading it costs three small procfs files.

use super::cpu::{parse_proc_stat, CpuTicks};
use super::softirq::{parse_softirqs, parse_softnet, Softirqs, Softnet};
use super::source::HostSource;
use super::system::online_cpu_ids;
use crate::units::CpuId;

/// Cumulative counters of one host; a file that cannot be read leaves its
/// part empty and says why in `errors`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostTotals {
    /// Ticks of each CPU by mode (/proc/stat `cpuN` lines).
    pub cpus: Vec<(CpuId, CpuTicks)>,
    /// Kernel clock ticks per second of those ticks (`USER_HZ`).
    pub ticks_per_s: u64,
    /// Softirqs raised per vector and CPU.
    pub softirqs: Softirqs,
    /// softnet_stat rows (32-bit counters: they wrap).
    pub softnet: Vec<(CpuId, Softnet)>,
    /// Files that could not be read or parsed, with the reason.
    pub errors: Vec<String>,
}

/// `USER_HZ` of the running kernel (`sysconf(_SC_CLK_TCK)`); 100, the
/// value every Linux architecture uses, when the call fails.
pub fn user_hz() -> u64 {
    // SAFETY: sysconf only reads a constant of the C library.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(v).ok().filter(|v| *v > 0).unwrap_or(100)
}

impl HostTotals {
    /// Read the three files through `src` (live or captured); `ticks_per_s`
    /// is the kernel's `USER_HZ` ([`user_hz`] on the live host).
    pub fn read(src: &dyn HostSource, ticks_per_s: u64) -> HostTotals {
        let mut errors = Vec::new();
        let cpus = match src.read("/proc/stat") {
            Ok(t) => parse_proc_stat(&t).unwrap_or_else(|e| {
                errors.push(e.to_string());
                Vec::new()
            }),
            Err(e) => {
                errors.push(format!("cannot read /proc/stat: {e}"));
                Vec::new()
            }
        };
        let mut read = |f: &str| {
            src.read(f)
                .map_err(|e| errors.push(format!("cannot read {f}: {e}")))
                .ok()
        };
        let softirqs = read("/proc/softirqs")
            .map(|t| parse_softirqs(&t))
            .unwrap_or_default();
        let softnet = read("/proc/net/softnet_stat")
            .map(|t| parse_softnet(&t, &online_cpu_ids(src)))
            .unwrap_or_default();
        HostTotals {
            cpus,
            ticks_per_s: ticks_per_s.max(1),
            softirqs,
            softnet,
            errors,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::synthetic::{Layout, SyntheticHost, USER_HZ};

    #[test]
    fn reads_what_the_synthetic_host_wrote() {
        let layout = Layout {
            cpus: 4,
            nodes: 1,
            nics: 1,
            queues: 2,
            nvme: 0,
            nvme_queues: 0,
            hot_cpus: vec![0],
        };
        let h = SyntheticHost::in_temp(layout).unwrap();
        let t = HostTotals::read(&h.source(), USER_HZ);
        assert!(t.errors.is_empty(), "{:?}", t.errors);
        assert_eq!(t.cpus.len(), 4);
        assert_eq!(t.softnet.len(), 4);
        assert_eq!(t.softirqs.cpus.len(), 4);
        assert!(t.softirqs.vectors.contains_key("NET_RX"));
    }

    #[test]
    fn a_missing_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let t = HostTotals::read(&crate::probe::capture_dir::CaptureDir::new(dir.path()), 0);
        assert_eq!(t.errors.len(), 3, "{:?}", t.errors);
        assert!(t.errors[0].contains("/proc/stat"));
        assert_eq!(t.ticks_per_s, 1);
    }
}

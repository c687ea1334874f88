//! What observing costs outside the eBPF programs, read from /proc while a
//! `wirescope run` goes on: the CPU time of wirescope's own threads that are
//! not engine workers (the sampler, the agent's sampler, the async runtimes,
//! the eBPF gate, the main thread) in the run's process tree, and the CPU
//! time the host's cores were busy. Readings only; the caller takes deltas.
//!
//! procfs-core parses the files (`schedstat`, `stat`, `/proc/stat`); this
//! module walks /proc. sysinfo, the other candidate, reads a thread's CPU
//! time from its `stat` in clock ticks (10 ms at USER_HZ 100): a sampler
//! thread that runs a few ms per second would read as 0 or 10 ms, where
//! `schedstat` has nanoseconds.

use procfs_core::process::{Schedstat, Stat};
use procfs_core::{ExplicitSystemInfo, FromRead, FromReadSI, KernelStats};
use std::collections::{BTreeMap, BTreeSet};

/// Thread-name prefixes of engine workers: the traffic under test, not the observer.
const ENGINE_THREADS: [&str; 6] = [
    "ws-tx-", "ws-rx-", "ws-gen-", "ws-sink-", "ws-rdma-", "ws-grpc-",
];

/// One reading.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// Per thread id: its name and on-CPU time (ns, /proc/PID/task/TID/schedstat).
    pub threads: BTreeMap<u32, (String, u64)>,
    /// Busy time of all cores since boot (ns, /proc/stat: everything but idle and iowait).
    pub busy_ns: u64,
    /// Engine worker threads alive: the test is running.
    pub engines: usize,
}

/// Read the observer threads of `root`'s process tree and the host's busy time.
pub fn read(root: u32) -> Reading {
    let mut threads = BTreeMap::new();
    let mut engines = 0;
    for pid in tree(root) {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let path = t.path();
            let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            let name = name.trim().to_string();
            if ENGINE_THREADS.iter().any(|p| name.starts_with(p)) {
                engines += 1;
                continue;
            }
            let ns = std::fs::read(path.join("schedstat"))
                .ok()
                .and_then(|s| Schedstat::from_read(s.as_slice()).ok())
                .map(|s| s.sum_exec_runtime);
            if let Some(ns) = ns {
                threads.insert(tid, (name, ns));
            }
        }
    }
    Reading {
        threads,
        busy_ns: busy_ns().unwrap_or(0),
        engines,
    }
}

/// Observer CPU (ns) between two readings: threads seen in both, and those
/// that appeared in between (counted from zero).
pub fn observer_ns(first: &Reading, last: &Reading) -> u64 {
    last.threads
        .iter()
        .map(|(tid, (_, ns))| ns.saturating_sub(first.threads.get(tid).map_or(0, |t| t.1)))
        .sum()
}

/// `root` and every process descending from it.
fn tree(root: u32) -> BTreeSet<u32> {
    let mut parent: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let ppid = Stat::from_read(stat.as_slice())
                .ok()
                .and_then(|s| u32::try_from(s.ppid).ok());
            if let Some(ppid) = ppid {
                parent.push((pid, ppid));
            }
        }
    }
    let mut out = BTreeSet::from([root]);
    loop {
        let before = out.len();
        for (pid, ppid) in &parent {
            if out.contains(ppid) {
                out.insert(*pid);
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

/// All cores' busy time since boot (ns).
fn busy_ns() -> Option<u64> {
    // SAFETY: sysconf has no memory arguments.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|h| *h > 0)?;
    let stat = std::fs::read("/proc/stat").ok()?;
    busy_of(&stat, hz)
}

/// Busy ticks of the aggregate `cpu` line of a /proc/stat text, in ns at `hz`
/// ticks per second: user nice system irq softirq steal (guest is inside user).
fn busy_of(stat: &[u8], hz: u64) -> Option<u64> {
    let si = ExplicitSystemInfo {
        boot_time_secs: 0,
        ticks_per_second: hz,
        page_size: 4096,
        is_little_endian: cfg!(target_endian = "little"),
    };
    let t = KernelStats::from_read(stat, &si).ok()?.total;
    let busy = t.user
        + t.nice
        + t.system
        + t.irq.unwrap_or(0)
        + t.softirq.unwrap_or(0)
        + t.steal.unwrap_or(0);
    Some(busy * (1_000_000_000 / hz))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_of_a_real_proc_stat() {
        let stat = include_bytes!("../../../tests/fixtures/proc/stat-a");
        let text = std::str::from_utf8(stat).unwrap();
        let v: Vec<u64> = text.lines().next().unwrap()[3..]
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        let ticks = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        assert_eq!(busy_of(stat, 100), Some(ticks * 10_000_000));
        assert_eq!(busy_of(b"garbage\n", 100), None);
    }

    #[test]
    fn this_process_is_in_its_own_tree_with_its_threads() {
        let me = std::process::id();
        let r = read(me);
        assert!(r.threads.contains_key(&me), "{:?}", r.threads);
        assert!(r.busy_ns > 0);
    }
}

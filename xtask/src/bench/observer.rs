//! What observing costs outside the eBPF programs, read from /proc while a
//! `wirescope run` goes on: the CPU time of wirescope's own threads that are
//! not engine workers (the sampler, the agent's sampler, the async runtimes,
//! the eBPF gate, the main thread) in the run's process tree, and the CPU
//! time the host's cores were busy. Readings only; the caller takes deltas.

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
            let ns = std::fs::read_to_string(path.join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok());
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
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // The name is in parentheses and may hold spaces: fields after the last ')'.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
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
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest is inside user).
    let busy = v.first()? + v.get(1)? + v.get(2)? + v.get(5)? + v.get(6)? + v.get(7)?;
    // SAFETY: sysconf has no memory arguments.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|h| *h > 0)?;
    Some(busy * (1_000_000_000 / hz))
}

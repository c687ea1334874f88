//! Per-core CPU time from /proc/stat, as percentages of an interval.
//!
//! We parse the `cpuN` lines ourselves rather than through procfs's
//! `KernelStats`: that type returns a plain list and drops the CPU number, and
//! the kernel omits offline CPUs, so list position and CPU id disagree on
//! hosts with offline or isolated-then-offlined cores. Older kernels print
//! fewer columns (no steal/guest); missing columns count as zero. (The files
//! procfs-core does parse go through it: [`super::procfs`].)

use crate::units::{CpuId, Percent};
use serde::{Deserialize, Serialize};

/// Cumulative ticks of one CPU, in /proc/stat column order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// user (includes guest).
    pub user: u64,
    /// nice (includes guest_nice).
    pub nice: u64,
    /// system.
    pub system: u64,
    /// idle.
    pub idle: u64,
    /// iowait.
    pub iowait: u64,
    /// hard interrupts.
    pub irq: u64,
    /// softirqs (NET_RX, NET_TX, ... all vectors).
    pub softirq: u64,
    /// stolen by the hypervisor.
    pub steal: u64,
}

impl CpuTicks {
    fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }
}

/// One CPU's share of an interval, in percent of that interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuSample {
    /// Kernel CPU number.
    pub cpu: CpuId,
    /// User mode (not niced).
    pub user: Percent,
    /// Niced user mode.
    pub nice: Percent,
    /// Kernel mode (syscalls: socket copies happen here).
    pub system: Percent,
    /// Hard interrupt handlers.
    pub irq: Percent,
    /// Softirqs (NET_RX does the receive path here).
    pub softirq: Percent,
    /// Waiting for I/O.
    pub iowait: Percent,
    /// Stolen by the hypervisor.
    pub steal: Percent,
    /// Idle.
    pub idle: Percent,
}

impl CpuSample {
    /// Kernel work: system+irq+softirq.
    pub fn kernel(&self) -> Percent {
        Percent(self.system.0 + self.irq.0 + self.softirq.0)
    }

    /// Everything but idle and iowait.
    pub fn busy(&self) -> Percent {
        Percent(
            self.user.0 + self.nice.0 + self.system.0 + self.irq.0 + self.softirq.0 + self.steal.0,
        )
    }

    /// Every time of the row (user, nice, system, irq, softirq, iowait,
    /// steal, idle), to scale or round in place.
    pub fn times_mut(&mut self) -> [&mut Percent; 8] {
        [
            &mut self.user,
            &mut self.nice,
            &mut self.system,
            &mut self.irq,
            &mut self.softirq,
            &mut self.iowait,
            &mut self.steal,
            &mut self.idle,
        ]
    }
}

/// Errors reading /proc/stat.
#[derive(Debug, thiserror::Error)]
pub enum CpuError {
    /// A `cpuN` line did not parse.
    #[error("/proc/stat line {line}: {why}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        why: String,
    },
}

/// Parse the per-CPU lines (`cpu0 ...`, not the aggregate `cpu ...`) of /proc/stat.
pub fn parse_proc_stat(text: &str) -> Result<Vec<(CpuId, CpuTicks)>, CpuError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let Some(rest) = line.strip_prefix("cpu") else {
            continue;
        };
        if !rest.as_bytes().first().is_some_and(u8::is_ascii_digit) {
            continue; // the aggregate "cpu  ..." line
        }
        let mut it = rest.split_ascii_whitespace();
        let Some(id) = it.next() else { continue };
        let bad = |why: String| CpuError::Parse { line: n + 1, why };
        let id: u32 = id
            .parse()
            .map_err(|_| bad(format!("CPU number '{id}' is not a number")))?;
        let mut v = [0u64; 8];
        for (i, f) in it.take(8).enumerate() {
            v[i] = f.parse().map_err(|_| {
                bad(format!(
                    "column {} of cpu{id} is '{f}', not a number",
                    i + 1
                ))
            })?;
        }
        let t = CpuTicks {
            user: v[0],
            nice: v[1],
            system: v[2],
            idle: v[3],
            iowait: v[4],
            irq: v[5],
            softirq: v[6],
            steal: v[7],
        };
        out.push((CpuId(id), t));
    }
    Ok(out)
}

/// Percentages for every CPU present in both snapshots.
pub fn cpu_deltas(prev: &[(CpuId, CpuTicks)], cur: &[(CpuId, CpuTicks)]) -> Vec<CpuSample> {
    cur.iter()
        .filter_map(|(id, c)| {
            let (_, p) = prev.iter().find(|(pid, _)| pid == id)?;
            let total = c.total().saturating_sub(p.total());
            let pct = |a: u64, b: u64| {
                if total == 0 {
                    Percent(0.0)
                } else {
                    Percent(a.saturating_sub(b) as f64 * 100.0 / total as f64)
                }
            };
            Some(CpuSample {
                cpu: *id,
                user: pct(c.user, p.user),
                nice: pct(c.nice, p.nice),
                system: pct(c.system, p.system),
                irq: pct(c.irq, p.irq),
                softirq: pct(c.softirq, p.softirq),
                iowait: pct(c.iowait, p.iowait),
                steal: pct(c.steal, p.steal),
                idle: if total == 0 {
                    Percent(100.0)
                } else {
                    pct(c.idle, p.idle)
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_A: &str = include_str!("../../tests/fixtures/proc/stat-a");
    const STAT_B: &str = include_str!("../../tests/fixtures/proc/stat-b");

    #[test]
    fn parses_real_proc_stat() {
        let a = parse_proc_stat(STAT_A).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].0, CpuId(0));
        assert!(a[1].1.user > 0);
    }

    #[test]
    fn deltas_sum_to_100() {
        let a = parse_proc_stat(STAT_A).unwrap();
        let b = parse_proc_stat(STAT_B).unwrap();
        let d = cpu_deltas(&a, &b);
        assert_eq!(d.len(), 2);
        for s in &d {
            let sum = s.busy().0 + s.idle.0 + s.iowait.0;
            assert!((sum - 100.0).abs() < 1e-6, "{s:?}");
        }
    }

    #[test]
    fn offline_cpus_keep_their_ids_and_old_kernels_have_fewer_columns() {
        let prev = "cpu  1 2 3 4\ncpu0 10 0 10 80\ncpu3 5 0 5 90\n";
        let cur = "cpu  1 2 3 4\ncpu0 20 0 20 160\ncpu3 5 0 5 190\n";
        let d = cpu_deltas(
            &parse_proc_stat(prev).unwrap(),
            &parse_proc_stat(cur).unwrap(),
        );
        assert_eq!(d[1].cpu, CpuId(3));
        assert_eq!(d[1].idle, Percent(100.0));
        assert!((d[0].user.0 - 10.0).abs() < 1e-9);
    }

    #[test]
    fn garbage_names_the_line() {
        let e = parse_proc_stat("cpu  1\ncpu0 1 x 3\n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
    }
}

//! Scheduling of the process's own threads: pinning engine workers to CPUs,
//! and keeping the observer (sampler, control protocol) runnable when the
//! engines keep every core busy.
//!
//! A test with 1000 streams on 2 cores gives each thread 1/1000 of a core
//! under the fair scheduler; the sampler and the control connection then
//! miss their ticks and the numbers go wrong. [`raise_priority`] puts such a
//! thread in `SCHED_FIFO` at the lowest real-time level with
//! `SCHED_RESET_ON_FORK`, so threads it spawns (engine workers, blocking
//! pools) start as ordinary threads again. The observer threads sleep almost
//! all the time, so real-time priority costs the engines nothing; the
//! kernel's real-time throttling (`kernel.sched_rt_runtime_us`) bounds them
//! anyway. Without the privilege it falls back to `nice -10`, then to
//! nothing, and says which.

use super::EngineError;
use crate::units::CpuId;

/// Pin the calling thread to `cpu` (no-op error-free when the list is empty).
pub fn pin_current_thread(cpu: CpuId) -> Result<(), EngineError> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu.0 as usize).map_err(|e| {
        EngineError::Unsupported(format!(
            "cannot pin to {cpu}: {e} (the CPU number is too large for this system)"
        ))
    })?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).map_err(|e| {
        EngineError::Unsupported(format!("cannot pin a worker to {cpu}: {e}; check the CPU exists and is online (see /sys/devices/system/cpu/online)"))
    })
}

/// What [`raise_priority`] obtained for the calling thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// SCHED_FIFO, priority 1 (reset on fork).
    RealTime,
    /// SCHED_OTHER at nice -10 (reset on fork).
    Nice,
    /// Unchanged: not permitted (no CAP_SYS_NICE and RLIMIT_RTPRIO/RLIMIT_NICE are 0).
    Unchanged,
}

impl Priority {
    /// A few words for logs.
    pub fn describe(self) -> &'static str {
        match self {
            Priority::RealTime => "real-time (SCHED_FIFO 1)",
            Priority::Nice => "nice -10",
            Priority::Unchanged => "normal (no permission to raise it)",
        }
    }
}

/// Raise the calling thread's scheduling priority so busy engine threads
/// cannot starve it; children it spawns start at normal priority.
pub fn raise_priority() -> Priority {
    let fifo = libc::sched_param { sched_priority: 1 };
    // SAFETY: pid 0 names the calling thread; `fifo` is a valid sched_param
    // that outlives the call; the kernel only reads it.
    let rt =
        unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &fifo) };
    if rt == 0 {
        return Priority::RealTime;
    }
    let other = libc::sched_param { sched_priority: 0 };
    // SAFETY: as above, with the normal policy (always permitted).
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_OTHER | libc::SCHED_RESET_ON_FORK, &other);
    }
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = unsafe { libc::gettid() };
    // SAFETY: PRIO_PROCESS with a thread id sets that thread's nice value;
    // plain integers, nothing is borrowed.
    let nice = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -10) };
    if nice == 0 {
        Priority::Nice
    } else {
        Priority::Unchanged
    }
}

/// The CPUs this process may run on (its affinity mask: online CPUs of
/// its cgroup's cpuset), in order.
pub fn usable_cpus() -> std::io::Result<Vec<CpuId>> {
    let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .map_err(std::io::Error::from)?;
    Ok((0..nix::sched::CpuSet::count())
        .filter(|&c| allowed.is_set(c).unwrap_or(false))
        .filter_map(|c| u32::try_from(c).ok().map(CpuId))
        .collect())
}

/// The CPUs of `cpus` this process may not run on (offline, absent, or
/// outside its cgroup's cpuset / affinity mask); empty when all are usable.
pub fn unusable_cpus(cpus: &[CpuId]) -> std::io::Result<Vec<CpuId>> {
    if cpus.is_empty() {
        return Ok(Vec::new());
    }
    let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .map_err(std::io::Error::from)?;
    Ok(cpus
        .iter()
        .copied()
        .filter(|c| !allowed.is_set(c.0 as usize).unwrap_or(false))
        .collect())
}

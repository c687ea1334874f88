//! Preparing an engine for one side of a point, and what this host admits
//! before anything is allocated (the spec's limits, memory, descriptors,
//! CPUs, a loopback pair). Each engine prepares itself from its spec and
//! the live host ([`EngineSpecOps::prepare`] with [`LiveEngineHost`]); this
//! module names no engine. Runs off the async threads: preparing may
//! allocate large buffers or open devices.
//!
//! [`EngineSpecOps::prepare`]: crate::traffic::EngineSpecOps::prepare

use crate::probe::engine_host::LiveEngineHost;
use crate::session::plan::{SweepParam, TestPlan};
use crate::traffic::{Engine, EngineError, EngineSetup, EngineSpec, Side};
use crate::units::Bytes;
use std::net::IpAddr;

/// Prepare `side` of `spec` on this host (each engine prepares itself,
/// [`EngineSpecOps::prepare`]); `peer` is the other host's address as this
/// side sees it, `peer_setup` what the other side already told (the agent
/// has the controller's before it prepares; it still hands it to
/// [`Engine::connect`] afterwards). The other end's test address (its setup
/// names it) is where an engine that picks an interface or device looks;
/// else the control peer's.
///
/// [`EngineSpecOps::prepare`]: crate::traffic::EngineSpecOps::prepare
pub fn prepare(
    spec: &EngineSpec,
    side: Side,
    peer: Option<IpAddr>,
    peer_setup: Option<&EngineSetup>,
) -> Result<Box<dyn Engine>, EngineError> {
    let toward = peer_setup.and_then(EngineSetup::address).or(peer);
    spec.prepare(side, toward, &LiveEngineHost::default())
}

/// Why this host refuses a test before anything is allocated: one line
/// naming what does not fit and what to change.
#[derive(Debug, thiserror::Error)]
pub enum AdmitError {
    /// A test whose frames need two interfaces on one link, on a loopback
    /// pair: what to do instead.
    #[error("{0}")]
    Loopback(&'static str),
    /// The spec is outside the engine's limits.
    #[error("{detail} (out of the allowed range)")]
    Limits {
        /// What the engine's validation said.
        detail: String,
    },
    /// The buffers would take more memory than this host may give.
    #[error("the test would allocate {need} on this host ({what}) but only {may} is available (80 % of MemAvailable {avail}); {smaller}")]
    Memory {
        /// What the test would allocate.
        need: Bytes,
        /// What the memory is for.
        what: String,
        /// What the test may take.
        may: Bytes,
        /// MemAvailable.
        avail: Bytes,
        /// How to need less.
        smaller: String,
    },
    /// More descriptors than RLIMIT_NOFILE leaves.
    #[error("the test needs about {fds} file descriptors on this host but only {more} more may be opened (RLIMIT_NOFILE {limit}, {open} open); use fewer connections or raise the limit (ulimit -n, LimitNOFILE=)")]
    Descriptors {
        /// Descriptors the test opens.
        fds: u64,
        /// Descriptors that may still be opened.
        more: u64,
        /// RLIMIT_NOFILE.
        limit: u64,
        /// Descriptors open now.
        open: u64,
    },
    /// This process's CPU affinity could not be read.
    #[error("cannot read this process's CPU affinity: {source}")]
    Affinity {
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// CPUs that cannot be used.
    #[error("{label}: CPU {bad} cannot be used on this host (offline, absent or outside this process's cpuset){usable}")]
    Cpus {
        /// The flag and its list, or the sweep's set.
        label: String,
        /// The CPUs that cannot be used, as a CPU list.
        bad: String,
        /// `; this host has LIST`, or nothing when unknown.
        usable: String,
    },
}

/// Why `plan` cannot run on a loopback pair (None: it can): a packet test
/// cannot, because its flows go between two interfaces on one link
/// (`is_test_address` refuses loopback addresses, so a peer can never point
/// a generator at a host's own loopback services).
pub fn check_plan_loopback(plan: &crate::session::plan::TestPlan) -> Result<(), AdmitError> {
    plan.points()
        .iter()
        .find_map(|p| p.spec.loopback_refusal())
        .map_or(Ok(()), |why| Err(AdmitError::Loopback(why)))
}

/// Share of the available memory a test may take (the rest is the host's).
const MEMORY_SHARE: f64 = 0.8;
/// Descriptors kept free besides what a test needs.
const FD_MARGIN: u64 = 64;

/// Why this host cannot run `side` of `spec` (None: it can), checked before
/// anything is allocated: the spec's limits, the memory its buffers take
/// against what this process may still allocate, and the descriptors it opens.
pub fn admit(spec: &EngineSpec, side: Side) -> Result<(), AdmitError> {
    spec.validate().map_err(|e| AdmitError::Limits {
        detail: e.to_string(),
    })?;
    check_cpus(spec, side, None)?;
    let need = spec.memory_needed(side);
    if let Some(avail) = crate::probe::system::mem_available() {
        let may = (avail.0 as f64 * MEMORY_SHARE) as u64;
        if need.bytes.0 > may {
            return Err(AdmitError::Memory {
                need: need.bytes,
                what: need.what.to_string(),
                may: Bytes(may),
                avail,
                smaller: need.smaller.to_string(),
            });
        }
    }
    let (limit, _) = crate::session::net::nofile_limit();
    let open = crate::session::net::open_fds().unwrap_or(0);
    let fds = spec.descriptors_needed();
    if fds.saturating_add(open).saturating_add(FD_MARGIN) > limit {
        return Err(AdmitError::Descriptors {
            fds,
            more: limit.saturating_sub(open).saturating_sub(FD_MARGIN),
            limit,
            open,
        });
    }
    Ok(())
}

/// The flag that gives `side`'s CPU list.
fn cpus_flag(side: Side) -> &'static str {
    match side {
        Side::Controller => "--cpus",
        Side::Agent => "--peer-cpus",
    }
}

/// Why `side`'s CPU list of `spec` cannot be used on this host, if it
/// cannot (offline, absent, or outside this process's cpuset): one line
/// naming `label` (default: the flag that gives the list) and the CPUs
/// this process may use.
pub fn check_cpus(spec: &EngineSpec, side: Side, label: Option<&str>) -> Result<(), AdmitError> {
    let cpus = spec.cpus_for(side);
    let bad = crate::traffic::sched::unusable_cpus(cpus)
        .map_err(|source| AdmitError::Affinity { source })?;
    if bad.is_empty() {
        return Ok(());
    }
    let label = label.map_or_else(
        || {
            format!(
                "{} {}",
                cpus_flag(side),
                crate::units::format_cpu_list(cpus)
            )
        },
        String::from,
    );
    let usable = crate::traffic::sched::usable_cpus()
        .map(|c| format!("; this host has {}", crate::units::format_cpu_list(&c)))
        .unwrap_or_default();
    Err(AdmitError::Cpus {
        label,
        bad: crate::units::format_cpu_list(&bad),
        usable,
    })
}

/// Check the CPU lists of `sides` in every point of `plan` against this
/// host before anything starts (the local pair: both sides are this host;
/// a remote agent: the controller's side, the agent checks its own): one
/// line naming the flag, or the sweep's CPU set that cannot be used.
pub fn check_plan_cpus(plan: &TestPlan, sides: &[Side]) -> Result<(), AdmitError> {
    for p in plan.points() {
        for &side in sides {
            let from_sweep = p.sweep.as_ref().and_then(|v| {
                let cores = v.param == SweepParam::Cores.name();
                let swept = p.spec.cores_sweep_side();
                (cores && swept == Some(side)).then(|| {
                    format!(
                        "--sweep cores: the set {}",
                        v.cpus.clone().unwrap_or_default()
                    )
                })
            });
            check_cpus(&p.spec, side, from_sweep.as_deref())?;
        }
    }
    Ok(())
}

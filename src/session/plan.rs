//! What a session runs, as plain data: the validated [`TestPlan`] (its points,
//! with their sweep coordinates), what to observe besides the test's own
//! interface ([`Observe`]), where the far end is ([`TargetChoice`]) and the
//! parameters of one point ([`PointParams`]).
//!
//! The command line and the TUI's control view build these (after checking
//! them); the session layer only reads them. Nothing here parses arguments or
//! touches a socket.

use crate::probe::ebpf::EbpfMode;
use crate::traffic::EngineSpec;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;

pub use crate::traffic::options::{Sweep, SweepParam};

/// Sweep coordinates of one point (in its summary).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SweepValue {
    /// `size` or `streams`.
    pub param: String,
    /// Value (`cores`: how many).
    pub value: u64,
    /// `cores`: the CPUs, kernel list form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
}

/// Validated test plan: every point runs the same way but for the swept value.
#[derive(Debug, Clone, PartialEq)]
pub struct TestPlan {
    /// The spec of the first (or only) point.
    pub spec: EngineSpec,
    /// Time limit per point (None: until the byte budget is spent).
    pub time: Option<Duration>,
    /// Warm-up, shown and logged but not summarised.
    pub omit: Duration,
    /// Sampling period.
    pub interval: Duration,
    /// Sweep, if any.
    pub sweep: Option<Sweep>,
}

/// One point of a plan: its sweep coordinates and its spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Sweep coordinates (None without a sweep).
    pub sweep: Option<SweepValue>,
    /// What runs.
    pub spec: EngineSpec,
}

impl TestPlan {
    /// The points to run, in order.
    pub fn points(&self) -> Vec<Point> {
        let Some(sw) = &self.sweep else {
            return vec![Point {
                sweep: None,
                spec: resolved(self.spec.clone()),
            }];
        };
        (0..sw.values.len())
            .filter_map(|i| sw.point(i))
            .map(|p| {
                let mut s = self.spec.clone();
                s.apply_sweep(p);
                Point {
                    sweep: Some(SweepValue {
                        param: p.param.name().into(),
                        value: p.value,
                        cpus: p.cpus.map(crate::units::format_cpu_list),
                    }),
                    spec: resolved(s),
                }
            })
            .collect()
    }
}

/// Fill in what depends on the host (worker threads: one per connection,
/// at most one per CPU; a packet test with both ends on this host: the
/// CPUs that keep them apart).
fn resolved(mut s: EngineSpec) -> EngineSpec {
    s.settle_on_host(&crate::probe::system::online_cpus, &|| {
        crate::traffic::sched::usable_cpus().unwrap_or_default()
    });
    s
}

/// What to observe besides the interface that carries the test.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observe {
    /// Extra interfaces on this host.
    pub ifaces: Vec<String>,
    /// Extra interfaces on the agent's host.
    pub peer_ifaces: Vec<String>,
    /// eBPF probe set of both hosts.
    pub ebpf: EbpfMode,
}

/// Where the agent is, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetChoice {
    /// A remote agent.
    Peer(SocketAddr),
    /// The embedded local pair with this many veth queues.
    LocalPair {
        /// rx/tx queues.
        queues: u32,
    },
}

/// One test point to run.
#[derive(Debug, Clone, PartialEq)]
pub struct PointParams {
    /// Engine parameters; None to observe both hosts without traffic.
    pub spec: Option<EngineSpec>,
    /// Sampling period.
    pub interval: Duration,
    /// Warm-up.
    pub omit: Duration,
    /// Time limit (None: until the byte budget is spent, or until stopped).
    pub time: Option<Duration>,
    /// Interfaces to watch besides the one that routes to the agent.
    pub ifaces: Vec<String>,
    /// Interfaces the agent watches besides the one that routes back to us.
    pub peer_ifaces: Vec<String>,
    /// The first point of a plan: the specs of the points after it, which
    /// the agent checks with this one before anything runs.
    pub later: Vec<EngineSpec>,
}

/// What a session runs: a test plan, or observing both hosts without traffic
/// (`wirescope watch`), which is one point with no engine.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Traffic.
    Test(Box<TestPlan>),
    /// No traffic: sample every `interval` until `time` (or until stopped).
    Observe {
        /// Sampling period.
        interval: Duration,
        /// How long (None: until stopped).
        time: Option<Duration>,
    },
}

impl Plan {
    /// Sampling period.
    pub fn interval(&self) -> Duration {
        match self {
            Plan::Test(t) => t.interval,
            Plan::Observe { interval, .. } => *interval,
        }
    }

    /// Time limit per point.
    pub fn time(&self) -> Option<Duration> {
        match self {
            Plan::Test(t) => t.time,
            Plan::Observe { time, .. } => *time,
        }
    }

    /// Warm-up.
    pub fn omit(&self) -> Duration {
        match self {
            Plan::Test(t) => t.omit,
            Plan::Observe { .. } => Duration::ZERO,
        }
    }

    /// The spec as requested (the first point's when sweeping).
    pub fn spec(&self) -> Option<&EngineSpec> {
        match self {
            Plan::Test(t) => Some(&t.spec),
            Plan::Observe { .. } => None,
        }
    }

    /// The sweep, if any.
    pub fn sweep(&self) -> Option<&Sweep> {
        match self {
            Plan::Test(t) => t.sweep.as_ref(),
            Plan::Observe { .. } => None,
        }
    }

    /// The plan with both ends on this host (the local pair): an engine
    /// that pins its ends keeps them apart
    /// ([`EngineSpecOps::put_ends_on_one_host`]).
    ///
    /// [`EngineSpecOps::put_ends_on_one_host`]: crate::traffic::EngineSpecOps::put_ends_on_one_host
    pub fn on_one_host(mut self) -> Self {
        if let Plan::Test(t) = &mut self {
            t.spec.put_ends_on_one_host();
        }
        self
    }

    /// The points, in order (observing is one point without a spec).
    pub fn points(&self) -> Vec<(Option<SweepValue>, Option<EngineSpec>)> {
        match self {
            Plan::Test(t) => t
                .as_ref()
                .points()
                .into_iter()
                .map(|p| (p.sweep, Some(p.spec)))
                .collect(),
            Plan::Observe { .. } => vec![(None, None)],
        }
    }
}

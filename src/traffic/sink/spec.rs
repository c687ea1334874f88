//! What a packet test point is ([`SinkSpec`]) and what the two ends tell each
//! other before it starts ([`SinkEnd`], [`GeneratorEnd`]).
//!
//! Plain serde data, no I/O (its [`EngineSpecOps`] answers hand `prepare`
//! to `engine.rs`): the controller's CLI builds a spec, the agent runs
//! [`EngineSpecOps::validate`] on the copy it received from the network
//! before it allocates anything, and both ends derive the same flows, ports
//! and frame layout from it with the helpers here, so they cannot disagree.

use crate::traffic::limits::{MemoryNeed, SpecError};
use crate::traffic::options::{SweepParam, SweepPoint};
use crate::traffic::RxQueues;
use crate::traffic::{
    Engine, EngineError, EngineHost, EngineInterval, EngineKind, EngineSpec, EngineSpecOps,
    EngineTotals, PlacedCores, Side,
};
use crate::units::CpuId;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// Smallest Ethernet frame, with FCS (RFC 2544).
pub const MIN_FRAME: u32 = 64;
/// Largest frame accepted (jumbo, with FCS).
pub const MAX_FRAME: u32 = 9000;
/// Queues (threads per side) at most.
pub const MAX_QUEUES: u32 = 1024;
/// Flows at most: the flow id is 16 bits in the payload and each flow has
/// its own source port in `[SRC_PORT_BASE, SRC_PORT_BASE + MAX_FLOWS)`.
pub const MAX_FLOWS: u32 = 16_384;
/// Source port of flow 0; flow `f` uses `SRC_PORT_BASE + f`.
pub const SRC_PORT_BASE: u16 = 32_768;
/// Lowest of wirescope's UDP ports for packet tests. A sink binds, counts
/// or drops only a destination port in [`MIN_DST_PORT`]`..=`[`MAX_DST_PORT`],
/// so a peer cannot point it at another service's port (DNS, mDNS, ...).
pub const MIN_DST_PORT: u16 = 5310;
/// Highest of wirescope's UDP ports for packet tests.
pub const MAX_DST_PORT: u16 = 5319;
/// Default destination UDP port: the first of wirescope's range, above
/// 1023 so the `udp` sink binds it without privileges.
pub const DEFAULT_DST_PORT: u16 = MIN_DST_PORT;
/// Packets per second at most (`--rate`).
pub const MAX_RATE: u64 = 1_000_000_000;
/// Memory one test may ask a host to map for its rings and UMEMs.
pub const MAX_MEMORY: u64 = 4 << 30;
/// Bytes a frame carries on the wire besides itself: preamble + SFD (8) and
/// the minimum inter-frame gap (12). L1 rate = (frame + 20) × 8 × pps.
pub const L1_OVERHEAD: u32 = 20;
/// The FCS the NIC appends; frames are sized with it, written without it.
pub const FCS: u32 = 4;

/// How the receiving end counts.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum SinkMode {
    /// An XDP program counts per queue and CPU and drops: the ceiling of
    /// what reaches the host (no sequence checks, per-flow counts only).
    Xdp,
    /// XDP redirect into one AF_XDP socket per queue; user space reads
    /// every frame and checks its sequence.
    AfXdp,
    /// AF_PACKET TPACKET_V3 rings, one per queue in a PACKET_FANOUT group.
    Tpacket,
    /// Kernel UDP sockets (SO_REUSEPORT, recvmmsg), one per thread: the
    /// unprivileged last resort; rows are per socket, not per queue.
    Udp,
}

impl SinkMode {
    /// Name as on the command line and in logs.
    pub fn name(self) -> &'static str {
        match self {
            SinkMode::Xdp => "xdp",
            SinkMode::AfXdp => "af-xdp",
            SinkMode::Tpacket => "tpacket",
            SinkMode::Udp => "udp",
        }
    }

    /// The mode tried when this one is refused.
    pub fn fallback(self) -> Option<SinkMode> {
        match self {
            SinkMode::Xdp | SinkMode::AfXdp => Some(SinkMode::Tpacket),
            SinkMode::Tpacket => Some(SinkMode::Udp),
            SinkMode::Udp => None,
        }
    }
}

/// How the generator transmits.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum TxPath {
    /// The fastest the interface accepts, tried in order: AF_XDP
    /// zero-copy, PACKET_TX_RING with PACKET_QDISC_BYPASS, sendmmsg.
    #[default]
    Auto,
    /// AF_XDP transmit (zero-copy where the driver supports it, else copy mode).
    AfXdp,
    /// AF_PACKET PACKET_TX_RING with PACKET_QDISC_BYPASS.
    TxRing,
    /// sendmmsg on kernel UDP sockets (no privileges needed; goes through
    /// the qdisc, netfilter and tc like any application traffic).
    Sendmmsg,
}

impl TxPath {
    /// Name as on the command line and in logs.
    pub fn name(self) -> &'static str {
        match self {
            TxPath::Auto => "auto",
            TxPath::AfXdp => "af-xdp",
            TxPath::TxRing => "tx-ring",
            TxPath::Sendmmsg => "sendmmsg",
        }
    }
}

/// Everything both ends need to know to run one packet test point. Sent to
/// the agent verbatim inside the session's `Start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SinkSpec {
    /// How the receiving end counts.
    pub mode: SinkMode,
    /// Try the next mode when this one is refused (no privileges, no XDP,
    /// AF_XDP refused), and say why; false makes a refusal an error.
    #[serde(default = "yes")]
    pub fallback: bool,
    /// Generator path (`auto` picks the fastest the interface accepts).
    #[serde(default)]
    pub tx_path: TxPath,
    /// Ethernet frame size including the FCS, as RFC 2544 counts (64–9000).
    pub frame_size: u32,
    /// Generator threads and sink queues, one thread per queue on each side.
    pub queues: u32,
    /// Distinct 5-tuples; None = [`SinkSpec::default_flows`], enough to
    /// spread over every queue by RSS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<u32>,
    /// Packets per second in total over all generator threads; 0 = as fast as possible.
    pub rate: u64,
    /// Destination UDP port of every flow.
    #[serde(default = "default_dst_port")]
    pub dst_port: u16,
    /// The agent generates and the controller sinks.
    #[serde(default)]
    pub reverse: bool,
    /// CPUs for the controller's threads (round-robin); empty = unpinned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<CpuId>,
    /// CPUs for the agent's threads; empty = unpinned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peer_cpus: Vec<CpuId>,
    /// An end whose CPU list is empty pins its threads itself
    /// ([`default_cpus`]: the sink from the lowest CPU of its interface's
    /// NUMA node up, the generator from the highest down); false leaves
    /// them unpinned.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub default_pinning: bool,
    /// Both ends run on one host (the embedded local pair): the default
    /// pinning is decided for both at once ([`SinkSpec::pin_on_one_host`])
    /// so they do not share a core.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub one_host: bool,
}

fn yes() -> bool {
    true
}

fn is_yes(b: &bool) -> bool {
    *b
}

fn default_dst_port() -> u16 {
    DEFAULT_DST_PORT
}

impl Default for SinkSpec {
    fn default() -> Self {
        SinkSpec {
            mode: SinkMode::AfXdp,
            fallback: true,
            tx_path: TxPath::Auto,
            frame_size: MIN_FRAME,
            queues: 1,
            flows: None,
            rate: 0,
            dst_port: DEFAULT_DST_PORT,
            reverse: false,
            cpus: Vec::new(),
            peer_cpus: Vec::new(),
            default_pinning: true,
            one_host: false,
        }
    }
}

/// The CPUs `n` threads of one end are pinned to by default: the CPUs of
/// its interface's NUMA node (`node`; None for a virtual interface: every
/// CPU) that this process may use, then its other usable CPUs — the sink
/// (`ascending`) from the lowest up, the generator from the highest down,
/// so on one host they meet last. Empty (unpinned) when there are fewer
/// usable CPUs than threads: two busy threads on one core measure the
/// core, not the path.
pub fn default_cpus(
    usable: &[CpuId],
    node: Option<&[CpuId]>,
    n: u32,
    ascending: bool,
) -> Vec<CpuId> {
    let n = n as usize;
    if n == 0 || usable.len() < n {
        return Vec::new();
    }
    let mut order: Vec<CpuId> = usable.to_vec();
    order.sort_unstable();
    if !ascending {
        order.reverse();
    }
    let near = |c: &CpuId| node.is_none_or(|l| l.contains(c));
    let (mut first, rest): (Vec<CpuId>, Vec<CpuId>) = order.into_iter().partition(near);
    first.extend(rest);
    first.truncate(n);
    first
}

/// Frames each sink queue's UMEM or ring holds.
pub const RING_FRAMES: u32 = 4096;

/// What a packet test on a loopback pair is told: its frames need two
/// interfaces on one link, which the local pair builds only as root.
pub const NEEDS_VETH: &str = "packet tests (--engine sink) need two interfaces on one link, and without root the local pair is loopback: run as root (sudo wirescope run --engine sink ...) for the local pair's veth, or start `wirescope agent` on another host and add --peer HOST, where --sink udp --tx-path sendmmsg need no privileges";

/// What the session, the plan, the faces and the diagnosis ask of a packet
/// spec (see [`EngineSpecOps`]).
impl EngineSpecOps for SinkSpec {
    fn kind(&self) -> EngineKind {
        EngineKind::Sink
    }

    fn mode_name(&self) -> &'static str {
        self.mode.name()
    }

    /// `<-` when the controller's host sinks (`--reverse`).
    fn arrow(&self) -> &'static str {
        match self.sink_side() {
            Side::Controller => "<-",
            Side::Agent => "->",
        }
    }

    fn with_flows(&self, n: u32) -> String {
        format!(
            "--engine sink --sink {} --queues {n} --frame-size {}",
            self.mode.name(),
            self.frame_size
        )
    }

    fn short(&self) -> String {
        format!(
            "sink {} {} B --queues {}",
            self.mode.name(),
            self.frame_size,
            self.queues
        )
    }

    fn label(&self) -> String {
        format!(
            "sink {} frame_size={} queues={} flows={} rate={}{}",
            self.mode.name(),
            self.frame_size,
            self.queues,
            self.flow_count(),
            self.rate,
            if self.reverse { " reverse" } else { "" }
        )
    }

    fn memory_needed(&self, _side: Side) -> MemoryNeed {
        MemoryNeed {
            bytes: crate::units::Bytes(self.memory_bound()),
            what: format!(
                "{} queue rings of {} B frames",
                self.queues, self.frame_size
            ),
            smaller: "use fewer --queues or a smaller --frame-size".into(),
        }
    }

    /// A socket (and an XDP map entry) per queue, per flow with sendmmsg.
    fn descriptors_needed(&self) -> u64 {
        u64::from(self.queues)
            .saturating_add(u64::from(self.flow_count()))
            .saturating_add(8)
    }

    fn prepare(
        &self,
        side: Side,
        toward: Option<IpAddr>,
        host: &dyn EngineHost,
    ) -> Result<Box<dyn Engine>, EngineError> {
        super::engine::prepare_on_host(self, side, toward, host)
    }

    /// Frames, not a byte stream: nothing for GRO to aggregate.
    fn small_packets_by_design(&self, _mtu: f64) -> bool {
        true
    }

    fn cores_sweep_side(&self) -> Option<Side> {
        Some(self.sink_side())
    }

    fn frame_mtu(&self) -> Option<u32> {
        Some(self.ip_mtu())
    }

    fn pinning_line(&self) -> Option<String> {
        Some(SinkSpec::pinning_line(self))
    }

    fn chosen_by_ends(&self, totals: &[&EngineTotals]) -> Option<EngineSpec> {
        Some(EngineSpec::Sink(super::engine::as_run(
            self,
            totals.iter().copied(),
        )))
    }

    fn placed_cores(&self, live: [Option<&EngineInterval>; 2]) -> Option<PlacedCores> {
        super::views::placed_cores(self, live)
    }

    /// Both ends run on this host (the local pair): settling pins them apart.
    fn put_ends_on_one_host(&mut self) {
        self.one_host = true;
    }

    /// With both ends on this host, the CPUs that keep them apart (from
    /// the `usable` ones); too few leaves the threads unpinned, and
    /// [`Self::pinning_line`] says so.
    fn settle_on_host(&mut self, _online: &dyn Fn() -> usize, usable: &dyn Fn() -> Vec<CpuId>) {
        if self.one_host {
            let _ = self.pin_on_one_host(&usable());
        }
    }

    /// Frames go between two interfaces on one link, never over loopback:
    /// what a packet test on a loopback pair is told.
    fn loopback_refusal(&self) -> Option<&'static str> {
        Some(NEEDS_VETH)
    }

    /// The sink's threads, one per rx queue (every mode but `udp`, which
    /// reads sockets).
    fn rx_queues_needed(&self) -> Option<RxQueues> {
        (self.mode != SinkMode::Udp).then_some(RxQueues {
            threads: self.queues,
            flag: "--queues",
        })
    }

    /// Apply one sweep point: the frame size, or the sink's CPU set (one
    /// queue per CPU, on whichever end sinks).
    fn apply_sweep(&mut self, p: SweepPoint<'_>) {
        match p.param {
            SweepParam::Frame => self.frame_size = u32::try_from(p.value).unwrap_or(u32::MAX),
            SweepParam::Cores => {
                if let Some(cpus) = p.cpus {
                    self.queues = u32::try_from(cpus.len()).unwrap_or(u32::MAX);
                    self.set_cpus(self.sink_side(), cpus.to_vec());
                }
            }
            // Refused for sink tests by their validation.
            _ => {}
        }
    }

    /// CPUs of `side`'s threads.
    fn cpus_for(&self, side: Side) -> &[CpuId] {
        match side {
            Side::Controller => &self.cpus,
            Side::Agent => &self.peer_cpus,
        }
    }

    /// Limits a receiving agent enforces on a spec that came over the
    /// network (the CLI checks the same ranges, with friendlier messages).
    fn validate(&self) -> Result<(), SpecError> {
        use crate::traffic::limits::check;
        check(
            "frame size",
            u64::from(self.frame_size),
            u64::from(MIN_FRAME),
            u64::from(MAX_FRAME),
        )?;
        check("queues", u64::from(self.queues), 1, u64::from(MAX_QUEUES))?;
        let flows = self.flow_count();
        check("flows", u64::from(flows), 1, u64::from(MAX_FLOWS))?;
        if flows < self.queues {
            return Err(SpecError::Invalid(format!(
                "{flows} flows cannot feed {} queues: use at least one flow per queue (--flows {})",
                self.queues, self.queues
            )));
        }
        check("rate", self.rate, 0, MAX_RATE)?;
        if !(MIN_DST_PORT..=MAX_DST_PORT).contains(&self.dst_port) {
            return Err(SpecError::Invalid(format!(
                "destination port {} is outside wirescope's packet-test ports {MIN_DST_PORT}-{MAX_DST_PORT} (UDP); the sink binds or counts no other port, so pick one of these (and run the same wirescope version on both hosts)",
                self.dst_port
            )));
        }
        for c in self.cpus.iter().chain(&self.peer_cpus) {
            check("cpu", u64::from(c.0), 0, 8191)?;
        }
        let mem = self.memory_bound();
        if mem > MAX_MEMORY {
            return Err(SpecError::Invalid(format!(
                "{} queues of {} B frames need up to {} MiB of rings, more than the {} MiB allowed",
                self.queues,
                self.frame_size,
                mem >> 20,
                MAX_MEMORY >> 20
            )));
        }
        Ok(())
    }

    /// True when `side` runs the sink, whose own rules judge where its
    /// cores sit (sink.remote-numa, with the sink's evidence and fix).
    fn judges_own_numa(&self, side: Side) -> bool {
        self.sink_side() == side
    }
}

impl SinkSpec {
    /// The IP packet of the test's frames: the frame less 14 B of Ethernet
    /// header and 4 B of FCS.
    pub fn ip_mtu(&self) -> u32 {
        self.frame_size.saturating_sub(18)
    }

    /// Flows when `--flows` is not given: 16 per queue, at least 64 (at
    /// most [`MAX_FLOWS`]). With a hash that spreads flows uniformly over Q
    /// queues, some queue stays empty with probability Q·(1 − 1/Q)^F ≈
    /// Q·e⁻¹⁶ ≈ Q·10⁻⁷: 4·10⁻⁷ at 4 queues, 10⁻⁴ at 1024.
    pub fn default_flows(queues: u32) -> u32 {
        (queues.saturating_mul(16)).clamp(64, MAX_FLOWS)
    }

    /// The number of flows this test uses.
    pub fn flow_count(&self) -> u32 {
        self.flows
            .unwrap_or_else(|| Self::default_flows(self.queues))
    }

    /// Which end generates.
    pub fn generator_side(&self) -> Side {
        if self.reverse {
            Side::Agent
        } else {
            Side::Controller
        }
    }

    /// Which end sinks.
    pub fn sink_side(&self) -> Side {
        match self.generator_side() {
            Side::Controller => Side::Agent,
            Side::Agent => Side::Controller,
        }
    }

    /// Set the CPUs of `side`'s threads.
    pub fn set_cpus(&mut self, side: Side, cpus: Vec<CpuId>) {
        match side {
            Side::Controller => self.cpus = cpus,
            Side::Agent => self.peer_cpus = cpus,
        }
    }

    /// Both ends on one host with `usable` CPUs: fill the lists not given
    /// so the ends do not share a core — the sink from the lowest CPU up,
    /// the generator from the highest down, each avoiding the other's
    /// CPUs. When the CPUs are too few for that, the lists not given stay
    /// empty, default pinning is turned off (threads unpinned) and the
    /// reason is returned.
    pub fn pin_on_one_host(&mut self, usable: &[CpuId]) -> Result<(), SpecError> {
        if !self.default_pinning {
            return Ok(());
        }
        let (sink, gen) = (self.sink_side(), self.generator_side());
        let pick = |taken: &[CpuId], ascending: bool| {
            let free: Vec<CpuId> = usable
                .iter()
                .filter(|c| !taken.contains(c))
                .copied()
                .collect();
            default_cpus(&free, None, self.queues, ascending)
        };
        let mut s = self.cpus_for(sink).to_vec();
        let mut g = self.cpus_for(gen).to_vec();
        if s.is_empty() {
            s = pick(&g, true);
        }
        if g.is_empty() {
            g = pick(&s, false);
        }
        if s.is_empty() || g.is_empty() {
            self.default_pinning = false;
            return Err(SpecError::Invalid(format!(
                "threads unpinned: {} usable CPU(s) cannot keep {n} sink and {n} generator thread(s) on cores of their own (--cpus and --peer-cpus pin them)",
                usable.len(),
                n = self.queues
            )));
        }
        self.set_cpus(sink, s);
        self.set_cpus(gen, g);
        Ok(())
    }

    /// One line on where the threads run: the CPU lists, or how they are
    /// chosen when the ends choose them.
    pub fn pinning_line(&self) -> String {
        let none = self.cpus.is_empty() && self.peer_cpus.is_empty();
        if self.one_host && !self.default_pinning && none {
            return format!(
                "threads unpinned: this host's CPUs cannot keep {n} sink and {n} generator thread(s) on cores of their own (--cpus and --peer-cpus pin them)",
                n = self.queues
            );
        }
        let list = |side: Side| {
            let c = self.cpus_for(side);
            if !c.is_empty() {
                format!("on CPU {}", crate::units::format_cpu_list(c))
            } else if self.default_pinning {
                "pinned by their end (to its interface's NUMA node, where it can)".to_string()
            } else {
                "unpinned".to_string()
            }
        };
        format!(
            "sink threads {}, generator threads {}",
            list(self.sink_side()),
            list(self.generator_side())
        )
    }

    /// The CPU thread `i` of `side` is pinned to (round-robin), if any.
    pub fn cpu_of(&self, side: Side, i: usize) -> Option<CpuId> {
        let c = self.cpus_for(side);
        (!c.is_empty()).then(|| c[i % c.len()])
    }

    /// Bytes written per frame (the FCS is the NIC's).
    pub fn wire_len(&self) -> usize {
        (self.frame_size - FCS) as usize
    }

    /// The rate each generator thread paces to (0 = unpaced); the
    /// remainder goes to the first threads so the sum is exact.
    pub fn thread_rate(&self, thread: u32) -> u64 {
        if self.rate == 0 {
            return 0;
        }
        let q = u64::from(self.queues.max(1));
        self.rate / q + u64::from(u64::from(thread) < self.rate % q)
    }

    /// Flows generator thread `t` sends: `t, t + queues, t + 2·queues, ...`.
    pub fn flows_of_thread(&self, t: u32) -> Vec<u16> {
        (t..self.flow_count())
            .step_by(self.queues.max(1) as usize)
            .map(|f| f as u16)
            .collect()
    }

    /// Upper bound of what one side maps for rings and UMEMs (bytes).
    pub fn memory_bound(&self) -> u64 {
        // A UMEM or ring of RING_FRAMES frames of at most 16 KiB, twice
        // (AF_XDP: fill/rx and tx/completion share one UMEM of that size).
        let frame = u64::from(self.frame_size.next_power_of_two().max(2048)).min(16 << 10);
        let umem = u64::from(RING_FRAMES) * frame * 2;
        // A TPACKET_V3 ring: at least 256 blocks of 64 KiB (see `ring.rs`).
        let tpacket = (256u64 * (64 << 10)).max(u64::from(RING_FRAMES) * frame * 2);
        u64::from(self.queues) * umem.max(tpacket)
    }
}

/// The sink's side of the setup exchange: where to send, and what it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SinkEnd {
    /// Interface the sink listens on.
    pub iface: String,
    /// Its MAC address (`aa:bb:cc:dd:ee:ff`): the generator's destination.
    pub mac: String,
    /// Its IPv4 address: the destination of every flow.
    pub ip: std::net::Ipv4Addr,
    /// Receive queues of the interface.
    pub rx_queues: u32,
    /// Its MTU.
    pub mtu: u32,
    /// Link speed (Mb/s) when the driver reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_mbps: Option<u32>,
    /// The mode that runs (after any fallback).
    pub mode: SinkMode,
    /// One line per refused mode, saying why (empty when the asked mode runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    /// af-xdp: zero-copy (true) or copy mode (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_copy: Option<bool>,
    /// CPUs its threads are pinned to, in thread order (empty: unpinned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<CpuId>,
}

/// The generator's side of the setup exchange.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GeneratorEnd {
    /// Interface the generator sends on.
    pub iface: String,
    /// Its MAC address: the frames' source.
    pub mac: String,
    /// Its IPv4 address: the source of every flow.
    pub ip: std::net::Ipv4Addr,
    /// Flows it sends (ids `0..flows`, source port `SRC_PORT_BASE + id`).
    pub flows: u32,
    /// Transmit queues of the interface.
    pub tx_queues: u32,
    /// CPUs its threads are pinned to, in thread order (empty: unpinned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<CpuId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_flows_spread_and_are_bounded() {
        assert_eq!(SinkSpec::default_flows(1), 64);
        assert_eq!(SinkSpec::default_flows(4), 64);
        assert_eq!(SinkSpec::default_flows(16), 256);
        assert_eq!(SinkSpec::default_flows(1024), MAX_FLOWS);
        // Probability that a queue stays empty stays small at every size.
        for q in [2u32, 4, 8, 64, 512, 1024] {
            let f = f64::from(SinkSpec::default_flows(q));
            let q = f64::from(q);
            assert!(q * (1.0 - 1.0 / q).powf(f) < q * 2e-7, "q={q}");
        }
    }

    #[test]
    fn validate_checks_ranges_and_memory() {
        let ok = SinkSpec {
            queues: 4,
            ..SinkSpec::default()
        };
        ok.validate().unwrap();
        // The port range's ends are wirescope's; the default is in it and unprivileged.
        for dst_port in [MIN_DST_PORT, MAX_DST_PORT, DEFAULT_DST_PORT] {
            SinkSpec {
                dst_port,
                ..ok.clone()
            }
            .validate()
            .unwrap();
        }
        const { assert!(DEFAULT_DST_PORT >= 1024) };
        for (bad, needle) in [
            (
                SinkSpec {
                    frame_size: 63,
                    ..ok.clone()
                },
                "frame size",
            ),
            (
                SinkSpec {
                    frame_size: 9001,
                    ..ok.clone()
                },
                "frame size",
            ),
            (
                SinkSpec {
                    queues: 0,
                    ..ok.clone()
                },
                "queues",
            ),
            (
                SinkSpec {
                    flows: Some(2),
                    ..ok.clone()
                },
                "at least one flow per queue",
            ),
            (
                SinkSpec {
                    flows: Some(MAX_FLOWS + 1),
                    ..ok.clone()
                },
                "flows",
            ),
            (
                SinkSpec {
                    dst_port: 0,
                    ..ok.clone()
                },
                "port",
            ),
            (
                SinkSpec {
                    dst_port: 5353,
                    ..ok.clone()
                },
                "destination port 5353 is outside wirescope's packet-test ports 5310-5319",
            ),
            (
                SinkSpec {
                    dst_port: 9,
                    ..ok.clone()
                },
                "5310-5319",
            ),
            (
                SinkSpec {
                    dst_port: MIN_DST_PORT - 1,
                    ..ok.clone()
                },
                "5310-5319",
            ),
            (
                SinkSpec {
                    dst_port: MAX_DST_PORT + 1,
                    ..ok.clone()
                },
                "5310-5319",
            ),
            (
                SinkSpec {
                    queues: 1024,
                    frame_size: 9000,
                    ..ok.clone()
                },
                "MiB of rings",
            ),
        ] {
            let e = bad.validate().unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }

    #[test]
    fn rates_and_flows_split_exactly_over_threads() {
        let s = SinkSpec {
            queues: 3,
            rate: 100,
            flows: Some(8),
            ..SinkSpec::default()
        };
        let rates: Vec<u64> = (0..3).map(|t| s.thread_rate(t)).collect();
        assert_eq!(rates, vec![34, 33, 33]);
        let all: Vec<u16> = (0..3).flat_map(|t| s.flows_of_thread(t)).collect();
        let mut sorted = all.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..8).collect::<Vec<u16>>());
        assert_eq!(s.flows_of_thread(1), vec![1, 4, 7]);
    }

    #[test]
    fn sides_and_pinning() {
        let mut s = SinkSpec {
            cpus: vec![CpuId(2), CpuId(3)],
            ..SinkSpec::default()
        };
        assert_eq!(s.sink_side(), Side::Agent);
        assert_eq!(s.cpu_of(Side::Controller, 3), Some(CpuId(3)));
        assert_eq!(s.cpu_of(Side::Agent, 0), None);
        s.reverse = true;
        assert_eq!(s.generator_side(), Side::Agent);
    }

    fn ids(v: &[u32]) -> Vec<CpuId> {
        v.iter().copied().map(CpuId).collect()
    }

    #[test]
    fn default_cpus_start_at_the_nics_node_from_each_end() {
        let usable = ids(&[0, 1, 2, 3, 4, 5, 6, 7]);
        let node1 = ids(&[2, 3, 6, 7]);
        // The sink from the node's lowest CPU up, the generator from its highest down.
        assert_eq!(
            default_cpus(&usable, Some(&node1), 3, true),
            ids(&[2, 3, 6])
        );
        assert_eq!(
            default_cpus(&usable, Some(&node1), 3, false),
            ids(&[7, 6, 3])
        );
        // More threads than the node has CPUs: the other node's CPUs follow.
        assert_eq!(
            default_cpus(&usable, Some(&node1), 6, true),
            ids(&[2, 3, 6, 7, 0, 1])
        );
        // A virtual interface: every usable CPU; an unusable one is skipped.
        assert_eq!(default_cpus(&ids(&[0, 2, 3]), None, 2, false), ids(&[3, 2]));
        // Fewer usable CPUs than threads: unpinned.
        assert!(default_cpus(&ids(&[0, 1]), None, 3, true).is_empty());
    }

    #[test]
    fn one_host_keeps_the_ends_on_cores_of_their_own_or_unpinned() {
        let base = SinkSpec {
            queues: 2,
            ..SinkSpec::default()
        };
        let mut s = base.clone();
        s.pin_on_one_host(&ids(&[0, 1, 2, 3, 4])).unwrap();
        // The sink is the agent by default; the generator this host.
        assert_eq!(
            (s.peer_cpus.clone(), s.cpus.clone()),
            (ids(&[0, 1]), ids(&[4, 3]))
        );
        assert!(
            s.pinning_line().contains("sink threads on CPU 0-1"),
            "{}",
            s.pinning_line()
        );
        // A given list is kept and avoided (a cores sweep's sink set).
        let mut s = SinkSpec {
            peer_cpus: ids(&[3]),
            queues: 1,
            ..base.clone()
        };
        s.pin_on_one_host(&ids(&[0, 1, 2, 3])).unwrap();
        assert_eq!(
            (s.peer_cpus.clone(), s.cpus.clone()),
            (ids(&[3]), ids(&[2]))
        );
        // Reverse: the sink is this host.
        let mut s = SinkSpec {
            reverse: true,
            ..base.clone()
        };
        s.pin_on_one_host(&ids(&[0, 1, 2, 3])).unwrap();
        assert_eq!(
            (s.cpus.clone(), s.peer_cpus.clone()),
            (ids(&[0, 1]), ids(&[3, 2]))
        );
        // Two CPUs for two threads per end: unpinned, and said so.
        let mut s = base.clone();
        let why = s.pin_on_one_host(&ids(&[0, 1])).unwrap_err().to_string();
        assert!(why.contains("2 usable CPU(s)"), "{why}");
        assert!(!s.default_pinning && s.cpus.is_empty() && s.peer_cpus.is_empty());
        assert!(
            s.pinning_line().contains("unpinned"),
            "{}",
            s.pinning_line()
        );
        // Once off, it stays off.
        s.pin_on_one_host(&ids(&[0, 1, 2, 3, 4, 5])).unwrap();
        assert!(s.cpus.is_empty());
    }

    #[test]
    fn spec_and_setup_round_trip_through_json() {
        let s = SinkSpec {
            mode: SinkMode::Tpacket,
            tx_path: TxPath::TxRing,
            flows: Some(12),
            ..SinkSpec::default()
        };
        let j = serde_json::to_value(&s).unwrap();
        assert_eq!(j["mode"], "tpacket");
        assert_eq!(j["tx_path"], "tx-ring");
        assert_eq!(serde_json::from_value::<SinkSpec>(j).unwrap(), s);
        // Old or minimal specs fill in defaults.
        let min: SinkSpec =
            serde_json::from_str(r#"{"mode":"af-xdp","frame_size":64,"queues":2,"rate":0}"#)
                .unwrap();
        assert!(min.fallback && min.dst_port == DEFAULT_DST_PORT);
        assert!(min.default_pinning && !min.one_host);
        let end = SinkEnd {
            iface: "veth-b".into(),
            mac: "02:00:00:00:00:02".into(),
            ip: "198.18.0.2".parse().unwrap(),
            rx_queues: 4,
            mtu: 1500,
            speed_mbps: Some(10_000),
            mode: SinkMode::Xdp,
            refused: vec![],
            zero_copy: None,
            cpus: vec![CpuId(0)],
        };
        let back: SinkEnd = serde_json::from_str(&serde_json::to_string(&end).unwrap()).unwrap();
        assert_eq!(back, end);
    }
}

//! The one place that lists the engines, and the contract through which
//! the layers above reach what is specific to each.
//!
//! * The list: [`EngineKind`], the enums that carry each engine's spec,
//!   setup, interval figures and totals over the wire and into the log
//!   ([`EngineSpec`], [`EngineSetup`], [`EngineInterval`],
//!   [`EngineTotals`]), each engine's section of a point's summary
//!   ([`Sections`]) and options ([`EngineArgs`]), and the matches on the
//!   engine that find its spec's behaviour ([`EngineSpecOps`], through
//!   `EngineSpec`'s `Deref`), its slice ([`slice()`]) and its part of the
//!   TUI's control view ([`form()`]).
//! * The contract: what an engine adds to the faces beyond the common
//!   figures ([`EngineSlice`]: the check of its options into its spec
//!   ([`resolve`]), its own part of a point's summary (built from both
//!   ends' totals), the lines it adds to the closing block, its sweep table
//!   and its live row), its part of the control view ([`EngineForm`]), the
//!   options of a test as given ([`TestOptions`]), and the plain figures
//!   they hand over. The contract and the list share this file because each
//!   needs the other: a slice fills [`Sections`], and [`slice()`] returns a
//!   slice.
//! * Also here, one variant or arm per engine that has one: the servers
//!   engines run alone ([`ServeWhat`], `wirescope serve <name>`); and the
//!   list of the engines whose client runs against a foreign server
//!   ([`foreign_clients`], `run --target`, from each slice's
//!   [`EngineSlice::foreign_client`]).
//!
//! The layers above (record, the faces, the TUI, the session) call
//! [`slice()`] with the test's [`EngineKind`], or ask the spec, and never
//! match on the engine; an engine that adds a figure of its own changes its
//! folder, not theirs. Each engine implements [`EngineSpecOps`] in its
//! folder's `spec` module (gRPC's in `engine.rs`), [`EngineSlice`] in its
//! `summary` module (TCP's in its `mod.rs`), with its options' checks in its
//! `args` module. An engine joins by adding its arms here and its `pub mod`
//! in `traffic/mod.rs` (see docs/architecture.md, "Where to add an
//! engine").
//!
//! This module sits in the data-plane layer, so it sees only plain figures:
//! the summary's common fields, the engine's totals and interval figures, and
//! the warm-up the caller subtracted. It never reads Samples or hosts.

use super::grpc::args::GrpcArgs;
use super::grpc::{GrpcInterval, GrpcSpec};
use super::options::{refuse, OptionError, Resolved, Sweep, SweepParam, SweepPoint};
use super::rdma::args::RdmaArgs;
use super::rdma::{RdmaInterval, RdmaOutcome, RdmaSetup, RdmaSpec};
use super::sink::args::SinkArgs;
use super::sink::engine::{GenEndTotals, GenLive, SinkEndTotals, SinkLive};
use super::sink::{GeneratorEnd, SinkEnd, SinkSpec};
use super::spec::EngineSpecOps;
use super::tcp::TcpSpec;
use super::DataPaths;
use crate::units::{first_given, Bytes, CpuId};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Which engine generates the traffic.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Kernel TCP sockets.
    Tcp,
    /// gRPC (grpc.testing.BenchmarkService) over HTTP/2.
    Grpc,
    /// UDP/IPv4 frames, packet generator to packet sink.
    Sink,
    /// RDMA verbs (RC queue pairs): WRITE, READ, SEND.
    Rdma,
}

impl EngineKind {
    /// Every engine, in the order the docs list them.
    pub const ALL: [EngineKind; 4] = [
        EngineKind::Tcp,
        EngineKind::Grpc,
        EngineKind::Sink,
        EngineKind::Rdma,
    ];

    /// The engine of a test that names none (`--engine`'s default).
    pub const DEFAULT: EngineKind = EngineKind::Tcp;

    /// Lower-case name as used on the command line and in logs.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Tcp => "tcp",
            EngineKind::Grpc => "grpc",
            EngineKind::Sink => "sink",
            EngineKind::Rdma => "rdma",
        }
    }
}

/// Everything both ends need to know to run one test point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "engine", rename_all = "lowercase")]
pub enum EngineSpec {
    /// Kernel TCP sockets: stream, pingpong, rr.
    Tcp(TcpSpec),
    /// grpc.testing.BenchmarkService: unary calls or ping-pong streams.
    Grpc(GrpcSpec),
    /// UDP/IPv4 frames from a packet generator to a packet sink.
    Sink(SinkSpec),
    /// RC queue pairs over libibverbs: RDMA WRITE, READ or SEND.
    Rdma(RdmaSpec),
}

impl std::ops::Deref for EngineSpec {
    type Target = dyn EngineSpecOps;

    /// The engine's answers for this spec: `spec.validate()`,
    /// `spec.frame_mtu()`, ... ask the engine that runs it.
    fn deref(&self) -> &Self::Target {
        match self {
            EngineSpec::Tcp(t) => t,
            EngineSpec::Grpc(g) => g,
            EngineSpec::Sink(s) => s,
            EngineSpec::Rdma(r) => r,
        }
    }
}

impl std::ops::DerefMut for EngineSpec {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match self {
            EngineSpec::Tcp(t) => t,
            EngineSpec::Grpc(g) => g,
            EngineSpec::Sink(s) => s,
            EngineSpec::Rdma(r) => r,
        }
    }
}

impl EngineSpec {
    /// The TCP arm, when this is a TCP test.
    pub fn as_tcp(&self) -> Option<&TcpSpec> {
        match self {
            EngineSpec::Tcp(t) => Some(t),
            _ => None,
        }
    }

    /// The RDMA arm, when this is an RDMA test.
    pub fn as_rdma(&self) -> Option<&RdmaSpec> {
        match self {
            EngineSpec::Rdma(r) => Some(r),
            _ => None,
        }
    }

    /// The packet arm, when this is a packet test.
    pub fn as_sink(&self) -> Option<&SinkSpec> {
        match self {
            EngineSpec::Sink(s) => Some(s),
            _ => None,
        }
    }

    /// The gRPC arm, when this is a gRPC test.
    pub fn as_grpc(&self) -> Option<&GrpcSpec> {
        match self {
            EngineSpec::Grpc(g) => Some(g),
            _ => None,
        }
    }

    /// Mutable TCP arm.
    pub fn as_tcp_mut(&mut self) -> Option<&mut TcpSpec> {
        match self {
            EngineSpec::Tcp(t) => Some(t),
            _ => None,
        }
    }
}

/// What one end tells the other before a point starts, when its engine needs
/// more than data connections (RDMA: queue pairs, keys, addresses; a packet
/// sink: MACs and queues). The controller sends its own in `Start`, the agent
/// answers with its own in `Accepting`; both check what they receive. Each
/// engine that exchanges anything adds its variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "engine", rename_all = "lowercase")]
pub enum EngineSetup {
    /// A packet sink: where to send (MAC, address), its queues and mode.
    Sink(SinkEnd),
    /// A packet generator: its MAC, address and flows.
    Generator(GeneratorEnd),
    /// RDMA queue pairs: QPNs, PSNs, LID/GID, rkeys, addresses, MTU.
    Rdma(RdmaSetup),
}

impl EngineSetup {
    /// The test address of the end that sent this setup, when it names one
    /// (the interface or device that carries the test routes to it; the
    /// control connection may use another network).
    pub fn address(&self) -> Option<std::net::IpAddr> {
        match self {
            EngineSetup::Sink(e) => Some(std::net::IpAddr::V4(e.ip)),
            EngineSetup::Generator(e) => Some(std::net::IpAddr::V4(e.ip)),
            EngineSetup::Rdma(r) => r
                .gid
                .and_then(|g| g.to_ipv4_mapped())
                .map(std::net::IpAddr::V4),
        }
        .filter(|ip| match ip {
            std::net::IpAddr::V4(v4) => super::sink::engine::is_test_address(*v4),
            std::net::IpAddr::V6(_) => false,
        })
    }
}

/// An engine's own figures for one interval, beyond the byte and message
/// counters every engine has (`EngineSample::extra`). Each engine with
/// figures of its own adds its variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "engine", rename_all = "lowercase")]
pub enum EngineInterval {
    /// The gRPC end's RPC rate, payload goodput, latency and statuses.
    Grpc(GrpcInterval),
    /// A packet sink's counts per queue, rates and drops.
    Sink(Box<SinkLive>),
    /// A packet generator's counts per thread and rates.
    Generator(Box<GenLive>),
    /// An RDMA end's bytes and messages per QP.
    Rdma(RdmaInterval),
}

impl EngineInterval {
    /// The span (s) this engine's figures cover when it is not the whole
    /// interval: a packet sink's last interval ends when its counts last
    /// moved (the quiet tail of the drain is waiting, not receiving), so its
    /// rates, and the Sample's message rate, are over that span.
    pub fn own_span_s(&self) -> Option<f64> {
        match self {
            EngineInterval::Sink(k) => Some(k.figures.secs),
            EngineInterval::Generator(g) => Some(g.figures.secs),
            EngineInterval::Grpc(_) | EngineInterval::Rdma(_) => None,
        }
    }

    /// The change over the interval of the messages the receiving end
    /// finds missing (a packet sink's gaps below the highest sequence seen;
    /// negative when late frames filled more gaps than opened), when the
    /// engine counts them.
    pub fn missing_in_interval(&self) -> Option<i64> {
        match self {
            EngineInterval::Sink(k) => Some(k.figures.missing_delta),
            _ => None,
        }
    }

    /// True when this end's message rate is the test's whichever host it
    /// runs on (a packet sink counts the frames that arrived; the
    /// generator's count is what it sent).
    pub fn counts_the_tests_rate(&self) -> bool {
        matches!(self, EngineInterval::Sink(_))
    }

    /// This end's own count of its queues (a packet sink's), for the queues
    /// view; None when the engine counts no queues of its own.
    pub fn own_queues(&self) -> Option<super::OwnQueues> {
        match self {
            EngineInterval::Sink(k) => Some(super::sink::views::own_queues(k)),
            _ => None,
        }
    }

    /// The CPUs this end's engine threads report they ran on (a packet
    /// sink's queue threads, a generator's threads, which pin themselves
    /// when the spec names no CPUs), one per thread; empty when its
    /// figures name none.
    pub fn thread_cores(&self) -> Vec<CpuId> {
        match self {
            EngineInterval::Sink(k) => k.figures.queues.iter().filter_map(|q| q.cpu).collect(),
            EngineInterval::Generator(g) => {
                g.figures.threads.iter().filter_map(|t| t.cpu).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// An engine's own totals at the end of a point (`SideResult::extra`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "engine", rename_all = "lowercase")]
pub enum EngineTotals {
    /// The gRPC end's figures over the whole point and its peak memory.
    Grpc(super::grpc::GrpcTotals),
    /// A packet sink's counters at both ends of the point and what it saw per flow.
    Sink(Box<SinkEndTotals>),
    /// A packet generator's counters and what it sent per flow.
    Generator(Box<GenEndTotals>),
    /// An RDMA end's perftest-style result.
    Rdma(Box<RdmaOutcome>),
}

/// What one host's omitted (warm-up) intervals counted, which the figures
/// leave out.
#[derive(Debug, Clone, Copy, Default)]
pub struct Warmup<'a> {
    /// Messages of the omitted intervals.
    pub msgs: u64,
    /// Bytes sent in them.
    pub tx: u64,
    /// Bytes received in them, per connection.
    pub rx: &'a [u64],
    /// Seconds from Go to the end of the last omitted interval.
    pub end_s: f64,
}

impl Warmup<'_> {
    /// Bytes received on `conn` during the warm-up.
    pub fn rx(&self, conn: usize) -> u64 {
        self.rx.get(conn).copied().unwrap_or(0)
    }
}

/// Both ends of a finished point, as an engine builds its section from them.
pub struct PointEnds<'a> {
    /// The spec that ran.
    pub spec: &'a EngineSpec,
    /// The controller's engine totals, when its engine has any.
    pub local: Option<&'a EngineTotals>,
    /// The agent's, when they arrived.
    pub peer: Option<&'a EngineTotals>,
    /// The controller's warm-up.
    pub local_warmup: Warmup<'a>,
    /// The agent's warm-up.
    pub peer_warmup: Warmup<'a>,
    /// Counted seconds of the common figures (after the warm-up).
    pub duration_s: f64,
    /// The controller's own engine seconds (from Go to its end).
    pub local_duration_s: f64,
    /// The user ended the point early.
    pub interrupted: bool,
}

/// Headline figures an engine measures itself instead of the common byte
/// counts of its data connections (a packet sink counts frames, RDMA moves
/// bytes over queue pairs and reports perftest's rates). `None`: the common
/// figure stands.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Headline {
    /// Seconds counted, bytes counted and messages (frames, work requests) counted.
    pub counts: Option<(f64, u64, u64)>,
    /// Rate in bit/s (else bytes × 8 / duration).
    pub throughput_bps: Option<f64>,
    /// Message rate per second (else messages / duration).
    pub rate_per_s: Option<f64>,
}

/// The columns of one point's row in a sweep table that depend on the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct PayloadCells {
    /// MB/s sent.
    pub sent: String,
    /// MB/s received.
    pub received: String,
}

/// One interval's figures an engine may draw its live row from.
pub struct IntervalRow<'a> {
    /// Start and end of the interval (s since Go).
    pub span: (f64, f64),
    /// " (omitted)" during the warm-up, else empty.
    pub omit: &'a str,
    /// Both ends' own interval figures.
    pub figures: [Option<&'a EngineInterval>; 2],
    /// The two hosts' CPU cells, as every row ends.
    pub cpu: [&'a str; 2],
}

/// An engine's own count of one end's receive queues over an interval, as
/// the queues view draws it below the NIC's queues (a packet sink counts
/// the frames each queue's thread read). Plain figures: the view formats.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnQueues {
    /// What counted, for the heading (`packet sink (af_xdp)`).
    pub counter: String,
    /// The interface whose queues it read.
    pub iface: String,
    /// Messages per second it counted over all queues.
    pub rate_per_s: f64,
    /// Messages it finds missing so far.
    pub missing: u64,
    /// Who works the queues (`sink threads`) and their CPU, % of one core.
    pub workers: (&'static str, Option<f64>),
    /// One row per queue that counted or dropped anything, busiest first.
    pub rows: Vec<OwnQueueRow>,
    /// The interval's drops on the path by where (`rx drops 5`); empty
    /// when nothing dropped.
    pub dropped: Vec<String>,
}

/// One queue of [`OwnQueues`].
#[derive(Debug, Clone, PartialEq)]
pub struct OwnQueueRow {
    /// Direction (`rx`).
    pub dir: &'static str,
    /// Queue index.
    pub queue: u32,
    /// Messages per second.
    pub rate_per_s: f64,
    /// Bit/s at `layer`.
    pub bps: f64,
    /// The layer the bits are counted at (`L2`).
    pub layer: &'static str,
    /// Messages this queue dropped in the interval.
    pub drops: u64,
    /// What worked the queue (`sink thread 1 cpu3 97% ring full 5`).
    pub worker: String,
}

/// The cores a test pins its busiest threads to on one host, for the facts
/// view to place against that host's topology.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacedCores {
    /// The row's name (`sink cores`).
    pub label: &'static str,
    /// The host, by its side of the test.
    pub side: super::Side,
    /// The CPUs (never empty).
    pub cpus: Vec<CpuId>,
    /// The interface the threads serve, when the figures name it.
    pub iface: Option<String>,
}

/// What an engine adds to the faces beyond the common figures. Every method
/// has the behaviour of an engine without a section of its own (TCP), so an
/// engine implements only what it has.
pub trait EngineSlice: Sync {
    /// The engine.
    fn kind(&self) -> EngineKind;

    // What the command line asks of an engine before it knows the test's
    // engine.

    /// The values a named sweep list stands for (`--sweep size=all`), when
    /// this engine names one.
    fn named_sweep(&self, _param: SweepParam, _name: &str) -> Option<Vec<u64>> {
        None
    }

    /// The letters users of other tools type by habit that a test refuses
    /// (see [`super::habits`]): this engine's users' (under this engine),
    /// and the ones that mean this engine (under any).
    fn habits(&self) -> &'static [super::habits::Habit] {
        &[]
    }

    /// Long options of other tools that mean this engine; refused under
    /// any engine.
    fn long_habits(&self) -> &'static [super::habits::LongHabit] {
        &[]
    }

    /// A `--sweep` of each parameter only this engine varies, for the
    /// errors of `--sweep` (`channels=1,2,4,8 or concurrency=1,16,256`);
    /// the first engine's are the common ones.
    fn sweep_example(&self) -> Option<&'static str> {
        None
    }

    /// Checks a test's options for this engine (what it refuses, the ranges
    /// of its values) and builds its spec with its defaults.
    fn resolve(&self, t: &TestOptions<'_>) -> Result<Resolved, OptionError>;

    /// Refuses this engine's own options (and sweeps) when another engine
    /// runs the test.
    fn refuse_elsewhere(&self, _t: &TestOptions<'_>) -> Result<(), OptionError> {
        Ok(())
    }

    /// Builds the engine's section into `out` and returns the headline
    /// figures it measures itself.
    fn summarize(&self, _ends: &PointEnds<'_>, _out: &mut Sections) -> Headline {
        Headline::default()
    }

    /// Whether the data connections' byte counts are one figure for the whole
    /// engine (entry 0: one runtime carries every connection), so the
    /// summary keeps one stream row with every connection's retransmits.
    fn one_counted_stream(&self) -> bool {
        false
    }

    /// Whether the engine's client measures request latency in this spec.
    fn measures_latency(&self, _spec: &EngineSpec) -> bool {
        false
    }

    /// Whether the summary's common `[SUM]` byte line and message line
    /// describe a point with these sections (not when the engine's section
    /// says it counted frames or queue pairs).
    fn common_totals(&self, _s: &Sections) -> bool {
        true
    }

    /// The lines the engine adds to a point's closing block when its section
    /// is there (`mode`: the summary's mode name). Empty otherwise.
    fn summary_lines(&self, _s: &Sections, _mode: &str) -> String {
        String::new()
    }

    /// Whether the closing block shows the agent's CPU line even when no
    /// agent Sample arrived: false only when the engine's section says the
    /// agent reported nothing.
    fn peer_reported(&self, _s: &Sections) -> bool {
        true
    }

    /// The engine's own sweep table, when every swept point has its section.
    fn sweep_table(&self, _points: &[&Sections]) -> Option<String> {
        None
    }

    /// The sent and received cells of a sweep table row, when the point has
    /// the engine's section and it measures its payload itself.
    fn payload_cells(&self, _s: &Sections) -> Option<PayloadCells> {
        None
    }

    /// The live row's column header, when the engine draws its own rows.
    fn interval_header(&self) -> Option<String> {
        None
    }

    /// The engine's own live row for one interval (see [`interval_header`](Self::interval_header)).
    fn interval_row(&self, _row: &IntervalRow<'_>) -> Option<String> {
        None
    }

    /// The unit of the live row's message rate.
    fn rate_unit(&self, _spec: &EngineSpec) -> &'static str {
        "msg/s"
    }

    /// Bit/s of an interval when the engine moves bytes outside the data
    /// connections (RDMA's queue pairs).
    fn interval_bps(&self, _figures: Option<&EngineInterval>) -> Option<f64> {
        None
    }

    /// Text after an interval's row (e.g. the interval's non-OK statuses).
    fn interval_note(&self, _figures: Option<&EngineInterval>) -> String {
        String::new()
    }

    /// The data paths the engine's traffic takes through a host: the rules
    /// that judge those paths judge its tests.
    fn paths(&self) -> DataPaths;

    /// Whether the engine's threads busy-poll the cores they run on by
    /// design (a packet sink and generator), so a core saturated by them
    /// is the engine's own rules' to judge, not a bottleneck.
    fn busy_polls(&self) -> bool {
        false
    }

    /// Whether the engine's work on a core is kernel work only (system
    /// calls, copies, softirq: kernel TCP sockets), so a core it is not
    /// pinned to that spends most of its time in user space runs another
    /// process's work.
    fn works_in_kernel(&self) -> bool {
        false
    }

    /// Whether this engine's client can run against a foreign
    /// (third-party) server without an agent (`run --target`), and how
    /// messages name that client and server; None: it needs an agent.
    fn foreign_client(&self) -> Option<super::ForeignClient> {
        None
    }

    /// Whether a point of this engine is judged by its rate (frames per
    /// second), not its throughput in bits, in the report and `compare`.
    fn judged_by_rate(&self) -> bool {
        false
    }

    /// The unit of the message rate under the TUI's throughput chart.
    fn chart_rate_unit(&self) -> &'static str {
        "msg/s"
    }
}

/// The options of a test the TUI's control view edits, as plain values:
/// the shared ones its fields step and each engine's own group. The view
/// copies them out of the command line's options and back.
#[derive(Debug, Clone, Default)]
pub struct FormOptions {
    /// `--mode`.
    pub mode: Option<String>,
    /// `--streams`.
    pub streams: Option<u32>,
    /// `--conns`.
    pub conns: Option<u32>,
    /// `--len`.
    pub len: Option<Bytes>,
    /// `--size`.
    pub size: Option<Bytes>,
    /// `--reverse`.
    pub reverse: bool,
    /// `--bidir`.
    pub bidir: bool,
    /// Each engine's own options.
    pub engines: EngineArgs,
}

/// Which ways a mode's data can go, as the control view's direction field
/// steps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormDirection {
    /// Both ways by design (request and response): nothing to choose.
    BothWays,
    /// `-R` turns it round.
    Reverse,
    /// `--bidir` adds the other way.
    Bidir,
    /// normal, `-R` or `--bidir`.
    ReverseOrBidir,
}

/// What an engine shows in the TUI's control view: its modes, and what the
/// view's count, size and direction fields mean for each (their label, the
/// option they edit, its default). The view holds the fields every engine
/// has and never matches on the engine. Each engine implements it in its
/// folder's `form` module. `mode` is always one of [`Self::modes`] or the
/// one [`Self::mode`] found.
pub trait EngineForm: Sync {
    /// The engine.
    fn kind(&self) -> EngineKind;
    /// The modes the view cycles through, in order.
    fn modes(&self) -> Vec<&'static str>;
    /// The mode `o` selects.
    fn mode(&self, o: &FormOptions) -> &'static str;
    /// What the mode field shows for `mode` (`tcp stream`, `rdma write lat`).
    fn mode_name(&self, mode: &str) -> String;
    /// Select `mode` in `o` (whose options are reset for a new test),
    /// carrying the count over when `keep` has one.
    fn select(&self, o: &mut FormOptions, mode: &str, keep: Option<u32>);
    /// The mode field's label.
    fn mode_label(&self) -> &'static str {
        "engine, mode (--engine, -m)"
    }
    /// The count field's label.
    fn count_label(&self, mode: &str) -> &'static str;
    /// The count field's value (its default when unset).
    fn count(&self, o: &FormOptions, mode: &str) -> u32;
    /// Set the count field.
    fn set_count(&self, o: &mut FormOptions, mode: &str, n: u32);
    /// RPCs in flight, when the engine has them.
    fn concurrency(&self, _o: &FormOptions) -> Option<u32> {
        None
    }
    /// The concurrency field's label, when the engine has the field.
    fn concurrency_label(&self) -> Option<&'static str> {
        None
    }
    /// Step RPCs in flight by one (+1 up, -1 down).
    fn step_concurrency(&self, _o: &mut FormOptions, _step: i32) {}
    /// The size field's label.
    fn size_label(&self, mode: &str) -> &'static str;
    /// The size field's value (its default when unset).
    fn size(&self, o: &FormOptions, mode: &str) -> Bytes;
    /// The sizes the field steps through, when not the view's usual ladder.
    fn size_steps(&self) -> Option<&'static [u64]> {
        None
    }
    /// Whether the size shows in bytes (`64 B`) rather than short (`64K`).
    fn size_in_bytes(&self) -> bool {
        false
    }
    /// Set the size field.
    fn set_size(&self, o: &mut FormOptions, mode: &str, size: Bytes);
    /// The direction field's label.
    fn direction_label(&self) -> &'static str {
        "direction (-R/--bidir)"
    }
    /// Which ways `mode` can send.
    fn directions(&self, mode: &str) -> FormDirection;
    /// The options that select `mode` on the command line (none for the
    /// default engine's default mode).
    fn command_mode(&self, mode: &str) -> Option<String>;
    /// This engine's own options given in `e`, as command-line words, in the
    /// order the view lists them.
    fn command_flags(&self, _e: &EngineArgs) -> Vec<String> {
        Vec::new()
    }
}

/// The next value on a ladder in direction `step` (+1 up, -1 down), clamped.
pub fn ladder<T: Copy + PartialOrd>(values: &[T], cur: T, step: i32) -> T {
    if step > 0 {
        values.iter().copied().find(|v| *v > cur)
    } else {
        values.iter().rev().copied().find(|v| *v < cur)
    }
    .unwrap_or(cur)
}

/// The options of one test as given (unset options are `None`), before
/// any engine's defaults.
#[derive(Debug, Clone, Copy)]
pub struct TestOptions<'a> {
    /// `--mode`.
    pub mode: Option<&'a str>,
    /// `--streams`.
    pub streams: Option<u32>,
    /// `--conns`.
    pub conns: Option<u32>,
    /// `--threads`.
    pub threads: Option<u32>,
    /// `--depth` (1 unless given).
    pub depth: u32,
    /// `--size`.
    pub size: Option<Bytes>,
    /// `--resp-size`.
    pub resp_size: Option<Bytes>,
    /// `--len`.
    pub len: Option<Bytes>,
    /// `--cpus`.
    pub cpus: Option<&'a [CpuId]>,
    /// `--peer-cpus`.
    pub peer_cpus: Option<&'a [CpuId]>,
    /// `--reverse`.
    pub reverse: bool,
    /// `--bidir`.
    pub bidir: bool,
    /// `--window`.
    pub window: Option<Bytes>,
    /// `--mss`.
    pub mss: Option<u32>,
    /// `--congestion`.
    pub congestion: Option<&'a str>,
    /// `--zerocopy`.
    pub zerocopy: bool,
    /// `--skip-rx-copy`.
    pub skip_rx_copy: bool,
    /// `--time`.
    pub time: Option<Duration>,
    /// `--bytes`.
    pub bytes: Option<Bytes>,
    /// `--omit` (zero unless given).
    pub omit: Duration,
    /// `--interval`.
    pub interval: Duration,
    /// `--sweep`.
    pub sweep: Option<&'a Sweep>,
    /// Each engine's own options.
    pub engines: &'a EngineArgs,
}

impl TestOptions<'_> {
    /// The TCP socket and gRPC options given, by flag: packet and RDMA tests
    /// open no TCP data connection and refuse them.
    pub fn socket_flags(&self) -> Option<&'static str> {
        self.engines.socket_flag().or_else(|| {
            first_given([
                (self.resp_size.is_some(), "--resp-size"),
                (self.window.is_some(), "--window"),
                (self.mss.is_some(), "--mss"),
                (self.congestion.is_some(), "--congestion"),
                (self.zerocopy, "--zerocopy"),
                (self.skip_rx_copy, "--skip-rx-copy"),
            ])
        })
    }

    /// The sweep's parameter, if there is a sweep.
    pub fn sweep_param(&self) -> Option<SweepParam> {
        self.sweep.map(|s| s.param)
    }

    /// The time limit (10 s unless --time or, for tcp stream, --bytes),
    /// checked with --interval and --omit: the same rules for every engine.
    pub fn timing(&self) -> Result<Option<Duration>, OptionError> {
        if self.interval < Duration::from_millis(10) {
            return refuse(format!(
                "--interval {} is too short; use at least 10ms",
                humantime::format_duration(self.interval)
            ));
        }
        let time = match (self.time, self.bytes) {
            (Some(t), _) => Some(t),
            (None, Some(_)) => None,
            (None, None) => Some(Duration::from_secs(10)),
        };
        if let Some(t) = time {
            if t.is_zero() {
                return refuse("--time must be longer than 0s, e.g. --time 10s");
            }
            if !self.omit.is_zero() && self.omit < self.interval {
                return refuse(format!(
                    "--omit {} is shorter than --interval {}: whole intervals are omitted, so nothing would be; use --omit {} (or a shorter --interval)",
                    humantime::format_duration(self.omit),
                    humantime::format_duration(self.interval),
                    humantime::format_duration(self.interval)
                ));
            }
            if self.omit >= t {
                return refuse(format!(
                    "--omit {} must be shorter than --time {}",
                    humantime::format_duration(self.omit),
                    humantime::format_duration(t)
                ));
            }
        }
        Ok(time)
    }

    /// `--cpus` and `--peer-cpus` (which defaults to the `--cpus` list).
    pub fn cpu_lists(&self) -> (Vec<CpuId>, Vec<CpuId>) {
        let cpus = self.cpus.map(<[CpuId]>::to_vec).unwrap_or_default();
        let peer = self
            .peer_cpus
            .map_or_else(|| cpus.clone(), <[CpuId]>::to_vec);
        (cpus, peer)
    }

    /// Every point's spec: the first point's with each sweep value applied
    /// (just the spec without a sweep), with the point's sweep value.
    pub fn points<'s>(
        &'s self,
        spec: &'s EngineSpec,
    ) -> impl Iterator<Item = (Option<SweepPoint<'s>>, EngineSpec)> + 's {
        let n = self.sweep.map_or(1, |s| s.values.len());
        (0..n).map(move |i| {
            let p = self.sweep.and_then(|s| s.point(i));
            let mut s = spec.clone();
            if let Some(p) = p {
                s.apply_sweep(p);
            }
            (p, s)
        })
    }
}

/// "1.23M" / "4.56k" / "789": the short SI form the rows print rates in.
pub fn si(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.2}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// Each engine's own section of a point's summary, under its own key in the
/// log (`"grpc": {...}`, `"sink": {...}`, `"rdma": {...}`); a TCP point has
/// none. Flattened into the summary record, so the log's keys stay where
/// they were.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sections {
    /// gRPC: RPC rate, payload goodput both ways, statuses and peak memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<super::grpc::summary::GrpcSummary>,
    /// Packet tests: what the sink counted and the generator sent, loss,
    /// reordering and duplicates per flow, where frames were dropped, per
    /// queue (the summary's `rate_per_s` and `messages` are the sink's packets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<Box<super::sink::figures::SinkSummary>>,
    /// RDMA tests: perftest's report (`bw`: `#bytes #iterations BW peak
    /// BW average MsgRate`, both directions summed with `--bidir`; `lat`:
    /// `t_min t_max t_typical t_avg t_stdev 99% 99.9%` in µs) and each end's outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma: Option<Box<super::rdma::summary::RdmaSummary>>,
}

/// The engine's slice: the match on the engine for everything above.
pub fn slice(kind: EngineKind) -> &'static dyn EngineSlice {
    match kind {
        EngineKind::Tcp => &super::tcp::TcpSlice,
        EngineKind::Grpc => &super::grpc::summary::GrpcSlice,
        EngineKind::Sink => &super::sink::summary::SinkSlice,
        EngineKind::Rdma => &super::rdma::summary::RdmaSlice,
    }
}

/// Each engine's own options, flattened into a test's command line (and
/// the TUI's control view) in the order of [`EngineKind::ALL`], each group
/// under its own help heading.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EngineArgs {
    /// gRPC's own options.
    #[command(flatten)]
    pub grpc: GrpcArgs,
    /// The packet tests' own options.
    #[command(flatten)]
    pub sink: SinkArgs,
    /// RDMA's own options.
    #[command(flatten)]
    pub rdma: RdmaArgs,
}

impl EngineArgs {
    /// The gRPC options given (`--concurrency`, ...), by flag: they are
    /// socket options too, which packet and RDMA tests refuse.
    pub fn socket_flag(&self) -> Option<&'static str> {
        self.grpc.given()
    }

    /// The options a new test starts from when the TUI's control view
    /// switches engine or mode: none of any engine's, but what names the
    /// hardware (RDMA's devices, ports and GIDs) stays.
    pub fn for_next_test(&self) -> EngineArgs {
        EngineArgs {
            grpc: GrpcArgs::default(),
            sink: SinkArgs::default(),
            rdma: self.rdma.hardware_only(),
        }
    }
}

/// The engine's part of the TUI's control view.
pub fn form(kind: EngineKind) -> &'static dyn EngineForm {
    match kind {
        EngineKind::Tcp => &super::tcp::form::TcpForm,
        EngineKind::Grpc => &super::grpc::form::GrpcForm,
        EngineKind::Sink => &super::sink::form::SinkForm,
        EngineKind::Rdma => &super::rdma::form::RdmaForm,
    }
}

/// What a `--sweep` looks like, said after every sweep error: the first
/// engine's parameters, then each engine's own (`for grpc channels=...`).
pub fn sweep_example() -> String {
    let mut parts = Vec::new();
    for (i, k) in EngineKind::ALL.into_iter().enumerate() {
        match slice(k).sweep_example() {
            Some(ex) if i == 0 => parts.push(ex.to_string()),
            Some(ex) => parts.push(format!("for {} {ex}", k.name())),
            None => {}
        }
    }
    format!("use {}", parts.join(", "))
}

/// Servers `wirescope serve` can run: one variant per server an engine
/// runs alone, with its arguments from the engine's folder (see
/// [`super::serve`]).
#[derive(Debug, clap::Subcommand)]
pub enum ServeWhat {
    /// grpc.testing.BenchmarkService (UnaryCall, StreamingCall) without a token, until Ctrl-C.
    Grpc(super::grpc::serve::ServeGrpcArgs),
}

impl ServeWhat {
    /// The server asked for, ready to bind.
    pub fn server(self) -> Box<dyn super::serve::LoneServer> {
        match self {
            ServeWhat::Grpc(a) => Box::new(a),
        }
    }
}

/// The words of each engine whose client runs against a foreign server
/// without an agent (`run --target`), in the order of [`EngineKind::ALL`].
pub fn foreign_clients() -> Vec<(EngineKind, super::ForeignClient)> {
    EngineKind::ALL
        .into_iter()
        .filter_map(|k| slice(k).foreign_client().map(|w| (k, w)))
        .collect()
}

/// The options that choose those engines (`--engine grpc`, joined by
/// "or"), for the messages that send a user to them.
pub fn foreign_client_engines() -> String {
    foreign_clients()
        .iter()
        .map(|(k, _)| format!("--engine {}", k.name()))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// The values of a named sweep list (`--sweep size=all`, perftest's `-a`),
/// when an engine names one.
pub fn named_sweep(param: SweepParam, name: &str) -> Option<Vec<u64>> {
    EngineKind::ALL
        .into_iter()
        .find_map(|k| slice(k).named_sweep(param, name))
}

/// Checks a test's options for `kind` and builds its spec: first every other
/// engine refuses its own options (RDMA's, the packet tests', then gRPC's:
/// the order of [`EngineKind::ALL`] reversed), then `kind` checks the rest.
pub fn resolve(kind: EngineKind, t: &TestOptions<'_>) -> Result<Resolved, OptionError> {
    for other in EngineKind::ALL.into_iter().rev().filter(|k| *k != kind) {
        slice(other).refuse_elsewhere(t)?;
    }
    slice(kind).resolve(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_example_names_each_engines_own_parameters() {
        assert_eq!(
            sweep_example(),
            "use size=64,1K,64K,1M, streams=1,2,4, for grpc channels=1,2,4,8 or concurrency=1,16,256, for sink frame=64,512,1518 or cores=0;1;0,1"
        );
    }

    #[test]
    fn every_engine_has_its_slice() {
        for k in EngineKind::ALL {
            assert_eq!(slice(k).kind(), k);
        }
    }

    #[test]
    fn only_the_grpc_client_runs_against_foreign_servers() {
        let kinds: Vec<EngineKind> = foreign_clients().into_iter().map(|(k, _)| k).collect();
        assert_eq!(kinds, vec![EngineKind::Grpc]);
        assert_eq!(foreign_client_engines(), "--engine grpc");
    }

    #[test]
    fn sections_keep_their_keys_in_the_log() {
        let s = Sections::default();
        assert_eq!(serde_json::to_string(&s).ok().as_deref(), Some("{}"));
    }

    #[test]
    fn the_arrow_follows_the_data() {
        let sink = |reverse| {
            EngineSpec::Sink(SinkSpec {
                reverse,
                ..SinkSpec::default()
            })
        };
        assert_eq!(sink(false).arrow(), "->");
        assert_eq!(sink(true).arrow(), "<-");
        use crate::traffic::rdma::{RdmaMode, RdmaOp};
        let rdma = |op| RdmaSpec::perftest_defaults(op, RdmaMode::Bw);
        assert_eq!(EngineSpec::Rdma(rdma(RdmaOp::Write)).arrow(), "->");
        assert_eq!(EngineSpec::Rdma(rdma(RdmaOp::Read)).arrow(), "<-");
        let bidir = RdmaSpec {
            bidir: true,
            ..rdma(RdmaOp::Write)
        };
        assert_eq!(EngineSpec::Rdma(bidir).arrow(), "<->");
    }
}

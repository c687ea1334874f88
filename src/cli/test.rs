//! The test itself ([`TestArgs`]): the options `run` and the TUI share, and
//! their validation into a [`TestPlan`].

use super::values::{count, exact_bytes, parse_cpus, parse_sweep, CpuList};
use super::UsageError;
use crate::session::plan::{Sweep, SweepParam, TestPlan};
use crate::traffic::grpc::{
    GrpcMode, GrpcSpec, MAX_CONCURRENCY, MAX_MESSAGE as GRPC_MAX_MESSAGE, MESSAGE_OVERHEAD,
};
use crate::traffic::limits::{MAX_CONNS, MAX_MSG, MAX_WINDOW, MIN_WINDOW};
use crate::traffic::sink::spec::{MAX_FLOWS, MAX_FRAME, MAX_QUEUES, MIN_FRAME};
use crate::traffic::sink::{SinkMode, SinkSpec, TxPath};
use crate::traffic::{EngineKind, EngineSpec, TcpMode, TcpSpec};
use crate::units::{first_given, parse_duration, parse_size, Bytes};
use clap::Args;
use std::time::Duration;

/// The test itself; shared by `run` and the TUI's control view.
#[derive(Debug, Args, Clone)]
pub struct TestArgs {
    /// Traffic engine.
    #[arg(long, value_enum, default_value = "tcp")]
    pub engine: EngineKind,
    /// Engine mode. tcp: stream (bulk, the default), pingpong (echo, MiB/s), rr
    /// (request/response latency); grpc: unary (the default) or stream (ping-pong
    /// on one bidi stream per concurrency slot).
    #[arg(long, short = 'm', value_name = "MODE")]
    pub mode: Option<String>,
    /// stream: parallel streams per direction, one thread each.
    #[arg(long, short = 'P', value_name = "N", allow_negative_numbers = true, value_parser = count::<u32>("--streams", 1, 65536))]
    pub streams: Option<u32>,
    /// rr/pingpong: connections.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = count::<u32>("--conns", 1, 65536))]
    pub conns: Option<u32>,
    /// rr/pingpong: worker threads per side (default: min(conns, CPUs)); grpc: client threads (default: all cores).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = count::<u32>("--threads", 1, 4096))]
    pub threads: Option<u32>,
    /// rr: requests in flight per connection.
    #[arg(long, value_name = "D", default_value_t = 1, allow_negative_numbers = true, value_parser = count::<u32>("--depth", 1, 65536))]
    pub depth: u32,
    /// rr: request size; pingpong: message size (default rr 64, pingpong 16K);
    /// grpc: request payload (default 64).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, allow_negative_numbers = true)]
    pub size: Option<Bytes>,
    /// rr: response size (default: --size).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, allow_negative_numbers = true)]
    pub resp_size: Option<Bytes>,
    /// stream: bytes per write (default 128K).
    #[arg(long, short = 'l', value_name = "SIZE", value_parser = parse_size, allow_negative_numbers = true)]
    pub len: Option<Bytes>,
    /// Pin this host's worker threads to these CPUs, round-robin (e.g. 0-3,8).
    #[arg(long, value_name = "LIST", value_parser = parse_cpus, allow_negative_numbers = true)]
    pub cpus: Option<CpuList>,
    /// Pin the agent's worker threads (default: the --cpus list).
    #[arg(long, value_name = "LIST", value_parser = parse_cpus, allow_negative_numbers = true)]
    pub peer_cpus: Option<CpuList>,
    /// stream: the agent sends, this host receives.
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// stream: both directions at once.
    #[arg(long)]
    pub bidir: bool,
    /// SO_SNDBUF/SO_RCVBUF of every data socket (the kernel doubles it).
    #[arg(long, short = 'w', value_name = "SIZE", value_parser = parse_size, allow_negative_numbers = true)]
    pub window: Option<Bytes>,
    /// TCP maximum segment size (TCP_MAXSEG).
    #[arg(long, short = 'M', value_name = "BYTES", allow_negative_numbers = true, value_parser = count::<u32>("--mss", 88, 65535))]
    pub mss: Option<u32>,
    /// Congestion control algorithm (TCP_CONGESTION), e.g. cubic, bbr.
    #[arg(long, short = 'C', value_name = "ALGO")]
    pub congestion: Option<String>,
    /// stream: send with MSG_ZEROCOPY (completions are read and counted).
    #[arg(long, short = 'Z')]
    pub zerocopy: bool,
    /// stream: receive with MSG_TRUNC, the kernel discards data without copying it.
    #[arg(long)]
    pub skip_rx_copy: bool,
    /// Test length per point.
    #[arg(long, short = 't', value_name = "DURATION", value_parser = parse_duration)]
    pub time: Option<Duration>,
    /// stream: stop after this many bytes per direction (no time limit unless --time is given).
    #[arg(long, short = 'n', value_name = "SIZE", value_parser = parse_size, allow_negative_numbers = true)]
    pub bytes: Option<Bytes>,
    /// Warm-up at the start of each point: shown and logged, not counted in the summary.
    #[arg(long, short = 'O', value_name = "DURATION", default_value = "0s", value_parser = parse_duration)]
    pub omit: Duration,
    /// Sampling period.
    #[arg(long, short = 'i', value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Run one point per value: size=64,1K,64K,1M or streams=1,2,4 (grpc:
    /// size, channels=1,2,4,8 or concurrency=1,16,256; sink:
    /// frame=64,128,256,512,1024,1280,1518 or cores="8;8,9;8-11", one CPU set per point).
    #[arg(long, value_name = "PARAM=LIST", value_parser = parse_sweep)]
    pub sweep: Option<Sweep>,
    /// gRPC's own options.
    #[command(flatten)]
    pub grpc: crate::traffic::grpc::args::GrpcArgs,
    /// Packet tests' own options.
    #[command(flatten)]
    pub sink: crate::traffic::sink::args::SinkArgs,
    /// RDMA's own options.
    #[command(flatten)]
    pub rdma: crate::traffic::rdma::args::RdmaArgs,
}

pub use crate::traffic::rdma::args::RdmaOpArg;

impl TestArgs {
    /// The TCP mode `--mode` names (stream when absent).
    pub fn tcp_mode(&self) -> Result<TcpMode, UsageError> {
        match self.mode.as_deref() {
            None | Some("stream") => Ok(TcpMode::Stream),
            Some("pingpong") => Ok(TcpMode::Pingpong),
            Some("rr") => Ok(TcpMode::Rr),
            Some(other) => Err(UsageError(format!(
                "--mode {other} is not a tcp mode; use stream, pingpong or rr"
            ))),
        }
    }

    /// The packet-test options given, by flag (refused by other engines).
    fn sink_flags(&self) -> Option<&'static str> {
        self.sink.given()
    }

    /// The TCP socket and gRPC options given, by flag: packet and RDMA tests
    /// open no TCP data connection and refuse them.
    fn socket_flags(&self) -> Option<&'static str> {
        self.grpc.given().or_else(|| {
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

    /// The RDMA options given, by flag (refused by other engines).
    fn rdma_flags(&self) -> Option<&'static str> {
        self.rdma.given()
    }

    /// Check combinations and build the plan.
    pub fn resolve(&self) -> Result<TestPlan, UsageError> {
        if self.engine != EngineKind::Rdma {
            if let Some(flag) = self.rdma_flags() {
                return Err(UsageError(format!("{flag} applies to --engine rdma")));
            }
        }
        if self.engine != EngineKind::Sink {
            if let Some(flag) = self.sink_flags() {
                return Err(UsageError(format!(
                    "{flag} applies to --engine sink (packet tests)"
                )));
            }
            if self
                .sweep
                .as_ref()
                .is_some_and(|s| matches!(s.param, SweepParam::Frame | SweepParam::Cores))
            {
                return Err(UsageError(
                    "frame and cores sweeps are for --engine sink".into(),
                ));
            }
        }
        match self.engine {
            EngineKind::Tcp => {
                if let Some(flag) = self.grpc.given() {
                    return Err(UsageError(format!(
                        "{flag} applies to --engine grpc; tcp tests take --streams or --conns"
                    )));
                }
                if self.sweep.as_ref().is_some_and(|s| {
                    matches!(s.param, SweepParam::Channels | SweepParam::Concurrency)
                }) {
                    return Err(UsageError(
                        "tcp sweeps size or streams; channels and concurrency are grpc's".into(),
                    ));
                }
                self.resolve_tcp()
            }
            EngineKind::Grpc => self.resolve_grpc(),
            EngineKind::Sink => self.resolve_sink(),
            EngineKind::Rdma => self.resolve_rdma(),
        }
    }

    /// perftest's defaults for `op` and `mode`, with the options given.
    fn rdma_spec(
        &self,
        op: crate::traffic::rdma::RdmaOp,
        mode: crate::traffic::rdma::RdmaMode,
    ) -> Result<crate::traffic::rdma::RdmaSpec, UsageError> {
        use crate::traffic::rdma::{RdmaEndpoint, RdmaSpec};
        let u = |m: String| Err(UsageError(m));
        let mut spec = RdmaSpec::perftest_defaults(op, mode);
        if let Some(s) = self.size {
            spec.size = s;
        }
        if let Some(q) = self.rdma.qps {
            spec.qps = q;
        }
        if let Some(t) = self.rdma.tx_depth {
            spec.tx_depth = t;
        }
        if let Some(r) = self.rdma.rx_depth {
            spec.rx_depth = r;
        }
        if let Some(i) = self.rdma.inline_size {
            spec.inline_size = i;
        }
        spec.use_event = self.rdma.use_event;
        spec.bidir = self.bidir;
        match (self.rdma.iters, self.time) {
            (Some(_), Some(_)) => {
                return u("give --iters or --time, not both (perftest: -n or -D)".into())
            }
            (Some(i), None) => spec.iters = Some(i),
            (None, Some(t)) => {
                spec.iters = None;
                spec.secs = Some(t.as_secs_f64());
            }
            (None, None) => {}
        }
        spec.sweep = self.sweep.is_some();
        spec.local = RdmaEndpoint {
            ib_dev: self.rdma.ib_dev.clone(),
            ib_port: self.rdma.ib_port,
            gid_index: self.rdma.gid_index,
        };
        spec.peer = RdmaEndpoint {
            ib_dev: self.rdma.peer_ib_dev.clone(),
            ib_port: self.rdma.peer_ib_port,
            gid_index: self.rdma.peer_gid_index,
        };
        Ok(spec)
    }

    fn resolve_rdma(&self) -> Result<TestPlan, UsageError> {
        use crate::traffic::rdma::spec::limits;
        use crate::traffic::rdma::{RdmaMode, RdmaOp};
        let u = |m: String| Err(UsageError(m));
        let mode = match self.mode.as_deref() {
            None | Some("bw") => RdmaMode::Bw,
            Some("lat") => RdmaMode::Lat,
            Some(other) => {
                return u(format!(
                    "--mode {other} is not an rdma mode; use bw (bandwidth, like ib_*_bw) or lat (latency, like ib_*_lat)"
                ))
            }
        };
        if let Some(flag) = self.sink_flags() {
            return u(format!("{flag} applies to --engine sink, not rdma"));
        }
        let socket = self.socket_flags().map(|f| (true, f));
        for (set, flag) in socket.into_iter().chain([
            (self.streams.is_some(), "--streams (use --qps)"),
            (self.conns.is_some(), "--conns (use --qps)"),
            (self.threads.is_some(), "--threads"),
            (self.depth != 1, "--depth (use --tx-depth)"),
            (self.len.is_some(), "--len (use --size)"),
            (self.reverse, "--reverse"),
            (self.bytes.is_some(), "--bytes (use --iters)"),
            (self.cpus.is_some(), "--cpus"),
            (self.peer_cpus.is_some(), "--peer-cpus"),
            (
                !self.omit.is_zero(),
                "--omit (rdma leaves perftest's margins out by itself)",
            ),
        ]) {
            if set {
                return u(format!(
                    "{flag} does not apply to --engine rdma; rdma tests take --op, -m bw|lat, --size, --qps, --tx-depth, --iters or --time, --bidir, --inline-size, --use-event and the --ib-dev/--ib-port/--gid-index options"
                ));
            }
        }
        if let Some(sw) = &self.sweep {
            if sw.param != SweepParam::Size {
                return u(format!(
                    "rdma sweeps size (size=all for perftest's -a, or size=2,64,64K), not {}",
                    sw.param.name()
                ));
            }
        }
        if self.interval < Duration::from_millis(10) {
            return u("--interval is too short; use at least 10ms".into());
        }
        let op = match self.rdma.op.unwrap_or(RdmaOpArg::Write) {
            RdmaOpArg::Write => RdmaOp::Write,
            RdmaOpArg::Read => RdmaOp::Read,
            RdmaOpArg::Send => RdmaOp::Send,
        };
        let spec = self.rdma_spec(op, mode)?;
        if let Some(sw) = &self.sweep {
            for v in &sw.values {
                if !(limits::MIN_SIZE..=limits::MAX_SIZE).contains(v) {
                    return u(format!(
                        "sweep size {v} is out of range; rdma messages are {} B to 8M",
                        limits::MIN_SIZE
                    ));
                }
            }
        }
        let plan = TestPlan {
            spec: EngineSpec::Rdma(spec),
            // The engine ends by itself after its iterations or its duration.
            time: None,
            omit: Duration::ZERO,
            interval: self.interval,
            sweep: self.sweep.clone(),
        };
        for p in plan.points() {
            p.spec
                .validate()
                .map_err(|e| UsageError(format!("this rdma test is not valid: {e}")))?;
        }
        Ok(plan)
    }

    fn resolve_sink(&self) -> Result<TestPlan, UsageError> {
        let u = |m: String| Err(UsageError(m));
        if let Some(m) = &self.mode {
            return u(format!(
                "--mode {m}: packet tests choose how they count with --sink xdp|af-xdp|tpacket|udp"
            ));
        }
        let socket = self.socket_flags().map(|f| (true, f));
        for (set, flag) in socket.into_iter().chain([
            (self.streams.is_some(), "--streams (use --queues)"),
            (self.conns.is_some(), "--conns"),
            (self.threads.is_some(), "--threads (use --queues)"),
            (self.depth != 1, "--depth"),
            (self.size.is_some(), "--size (use --frame-size)"),
            (self.len.is_some(), "--len (use --frame-size)"),
            (self.bidir, "--bidir"),
            (self.bytes.is_some(), "--bytes"),
        ]) {
            if set {
                return u(format!(
                    "{flag} does not apply to --engine sink; packet tests take --sink, --frame-size, --queues, --flows, --rate and --tx-path"
                ));
            }
        }
        if let Some(sw) = &self.sweep {
            if !matches!(sw.param, SweepParam::Frame | SweepParam::Cores) {
                return u(format!(
                    "sink tests sweep frame=64,512,1518 or cores=\"0;1;0,1\", not {}",
                    sw.param.name()
                ));
            }
        }
        let time = self.timing()?;
        let frame_size = self.sink.frame_size.unwrap_or(MIN_FRAME);
        let frames = self
            .sweep
            .as_ref()
            .filter(|s| s.param == SweepParam::Frame)
            .map_or(vec![u64::from(frame_size)], |s| s.values.clone());
        for f in frames {
            if !(u64::from(MIN_FRAME)..=u64::from(MAX_FRAME)).contains(&f) {
                return u(format!(
                    "frame size {f} is out of range; use {MIN_FRAME} to {MAX_FRAME} (Ethernet frame incl. FCS, as RFC 2544 counts)"
                ));
            }
        }
        let queues = self.sink.queues.unwrap_or(1);
        if queues == 0 || queues > MAX_QUEUES {
            return u(format!(
                "--queues {queues} is out of range; use 1 to {MAX_QUEUES}"
            ));
        }
        if let Some(f) = self.sink.flows {
            if f == 0 || f > MAX_FLOWS {
                return u(format!("--flows {f} is out of range; use 1 to {MAX_FLOWS}"));
            }
        }
        let (cpus, peer_cpus) = self.cpu_lists();
        let spec = SinkSpec {
            mode: self.sink.mode.unwrap_or(SinkMode::AfXdp),
            fallback: !self.sink.no_fallback,
            tx_path: self.sink.tx_path.unwrap_or(TxPath::Auto),
            frame_size,
            queues,
            flows: self.sink.flows,
            rate: self.sink.rate.unwrap_or(0),
            dst_port: crate::traffic::sink::spec::DEFAULT_DST_PORT,
            reverse: self.reverse,
            cpus,
            peer_cpus,
            default_pinning: true,
            one_host: false,
        };
        let plan = TestPlan {
            spec: EngineSpec::Sink(spec),
            time,
            omit: self.omit,
            interval: self.interval,
            sweep: self.sweep.clone(),
        };
        for p in plan.points() {
            p.spec.validate().map_err(|e| {
                let at = p.sweep.map_or(String::new(), |v| {
                    format!("sweep point {}: ", v.cpus.unwrap_or(v.value.to_string()))
                });
                UsageError(format!("{at}this packet test is not valid: {e}"))
            })?;
        }
        Ok(plan)
    }

    /// The time limit (10 s unless --time or, for tcp stream, --bytes),
    /// checked with --interval and --omit: the same rules for every engine.
    fn timing(&self) -> Result<Option<Duration>, UsageError> {
        let u = |m: String| Err(UsageError(m));
        if self.interval < Duration::from_millis(10) {
            return u(format!(
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
                return u("--time must be longer than 0s, e.g. --time 10s".into());
            }
            if !self.omit.is_zero() && self.omit < self.interval {
                return u(format!(
                    "--omit {} is shorter than --interval {}: whole intervals are omitted, so nothing would be; use --omit {} (or a shorter --interval)",
                    humantime::format_duration(self.omit),
                    humantime::format_duration(self.interval),
                    humantime::format_duration(self.interval)
                ));
            }
            if self.omit >= t {
                return u(format!(
                    "--omit {} must be shorter than --time {}",
                    humantime::format_duration(self.omit),
                    humantime::format_duration(t)
                ));
            }
        }
        Ok(time)
    }

    /// `--cpus` and `--peer-cpus` (which defaults to the `--cpus` list).
    fn cpu_lists(&self) -> (Vec<crate::units::CpuId>, Vec<crate::units::CpuId>) {
        let cpus = self.cpus.clone().map(|c| c.0).unwrap_or_default();
        let peer = self.peer_cpus.clone().map_or_else(|| cpus.clone(), |c| c.0);
        (cpus, peer)
    }

    /// The gRPC mode `--mode` names (unary when absent).
    pub fn grpc_mode(&self) -> Result<GrpcMode, UsageError> {
        match self.mode.as_deref() {
            None | Some("unary") => Ok(GrpcMode::Unary),
            Some("stream") => Ok(GrpcMode::Stream),
            Some(other) => Err(UsageError(format!(
                "--mode {other} is not a grpc mode; use unary or stream"
            ))),
        }
    }

    fn resolve_grpc(&self) -> Result<TestPlan, UsageError> {
        let u = |m: String| Err(UsageError(m));
        let mode = self.grpc_mode()?;
        for (set, flag) in [
            (self.streams.is_some(), "--streams"),
            (self.conns.is_some(), "--conns (use --channels)"),
            (self.depth != 1, "--depth (use --concurrency)"),
            (self.len.is_some(), "--len (use --size)"),
            (self.reverse, "--reverse"),
            (self.bidir, "--bidir"),
            (self.window.is_some(), "--window"),
            (self.mss.is_some(), "--mss"),
            (self.congestion.is_some(), "--congestion"),
            (self.zerocopy, "--zerocopy"),
            (self.skip_rx_copy, "--skip-rx-copy"),
            (self.bytes.is_some(), "--bytes"),
        ] {
            if set {
                return u(format!(
                    "{flag} applies to --engine tcp; grpc tests take --channels, --concurrency, --size and --resp-size"
                ));
            }
        }
        if self
            .sweep
            .as_ref()
            .is_some_and(|s| s.param == SweepParam::Streams)
        {
            return u("grpc sweeps size, channels or concurrency, not streams".into());
        }
        let time = self.timing()?;
        let channels = self.grpc.channels.unwrap_or(1);
        let concurrency = self
            .grpc
            .concurrency
            .unwrap_or_else(|| channels.saturating_mul(64).min(MAX_CONCURRENCY));
        let size = self.size.unwrap_or(Bytes(64));
        let (cpus, peer_cpus) = self.cpu_lists();
        let spec = GrpcSpec {
            mode,
            channels,
            concurrency,
            size,
            resp_size: self.resp_size.unwrap_or(size),
            threads: self.threads.unwrap_or(0),
            peer_threads: self.grpc.peer_threads.unwrap_or(0),
            peer_cpus,
            cpus,
        };
        let max = (GRPC_MAX_MESSAGE - MESSAGE_OVERHEAD) as u64;
        for (v, flag) in [(spec.size, "--size"), (spec.resp_size, "--resp-size")] {
            if v.0 > max {
                return u(format!(
                    "{flag} {v} exceeds the largest gRPC message wirescope sends; use at most {}",
                    exact_bytes(max)
                ));
            }
        }
        spec.validate().map_err(|e| {
            UsageError(format!(
                "this grpc test is not valid: {e}; --concurrency must be at least --channels"
            ))
        })?;
        let plan = TestPlan {
            spec: EngineSpec::Grpc(spec),
            time,
            omit: self.omit,
            interval: self.interval,
            sweep: self.sweep.clone(),
        };
        // Every point of a sweep must be a valid test too.
        for p in plan.points() {
            p.spec.validate().map_err(|e| {
                UsageError(format!(
                    "sweep point {}: {e}",
                    p.sweep.map(|v| v.value.to_string()).unwrap_or_default()
                ))
            })?;
        }
        Ok(plan)
    }

    /// The options that do not fit this TCP mode, refused by flag.
    fn tcp_flags(&self, tcp_mode: TcpMode) -> Result<(), UsageError> {
        let u = |m: String| Err(UsageError(m));
        let stream = tcp_mode == TcpMode::Stream;
        let mode = tcp_mode.name();
        if !stream {
            for (set, flag) in [
                (self.reverse, "--reverse"),
                (self.bidir, "--bidir"),
                (self.zerocopy, "--zerocopy"),
                (self.skip_rx_copy, "--skip-rx-copy"),
                (self.bytes.is_some(), "--bytes"),
                (self.len.is_some(), "--len"),
            ] {
                if set {
                    return u(format!("{flag} applies to --mode stream only, not {mode}"));
                }
            }
            if self.streams.is_some() {
                return u(format!("--mode {mode} takes --conns N, not --streams"));
            }
        } else {
            for (set, flag) in [
                (self.conns.is_some(), "--conns"),
                (self.threads.is_some(), "--threads"),
                (self.size.is_some(), "--size"),
                (self.resp_size.is_some(), "--resp-size"),
                (self.depth != 1, "--depth"),
            ] {
                if set {
                    return u(format!(
                        "{flag} applies to --mode rr/pingpong; for stream use --streams and --len"
                    ));
                }
            }
        }
        if tcp_mode == TcpMode::Pingpong && (self.resp_size.is_some() || self.depth != 1) {
            return u(
                "--resp-size and --depth apply to --mode rr only; pingpong echoes --size bytes"
                    .into(),
            );
        }
        if self.reverse && self.bidir {
            return u(
                "--reverse and --bidir exclude each other; --bidir already sends both ways".into(),
            );
        }
        Ok(())
    }

    /// The TCP sizes (bytes per write, message size) with their defaults,
    /// and the socket options' values, each checked against its range.
    fn tcp_sizes(&self, tcp_mode: TcpMode) -> Result<(Bytes, Bytes), UsageError> {
        let u = |m: String| Err(UsageError(m));
        if let Some(b) = self.bytes {
            if b.0 == 0 {
                return u("--bytes must be at least 1, e.g. --bytes 1G".into());
            }
        }
        let len = self.len.unwrap_or(Bytes(128 * 1024));
        let size = self.size.unwrap_or(if tcp_mode == TcpMode::Rr {
            Bytes(64)
        } else {
            Bytes(16 * 1024)
        });
        for (v, flag) in [
            (len, "--len"),
            (size, "--size"),
            (self.resp_size.unwrap_or(size), "--resp-size"),
        ] {
            if v.0 == 0 || v.0 > MAX_MSG {
                return u(format!(
                    "{flag} {} is out of range; use 1 B to {}",
                    v.0,
                    exact_bytes(MAX_MSG)
                ));
            }
        }
        if let Some(w) = self.window {
            if w.0 < MIN_WINDOW || w.0 > MAX_WINDOW {
                return u(format!("--window {} is out of range; use 1K to 1G (the kernel doubles it and caps it at net.core.rmem_max/wmem_max)", w.0));
            }
        }
        if let Some(cc) = &self.congestion {
            if cc.is_empty()
                || cc.len() > 15
                || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                return u(format!("--congestion '{cc}' is not an algorithm name; see /proc/sys/net/ipv4/tcp_available_congestion_control"));
            }
        }
        Ok((len, size))
    }

    fn resolve_tcp(&self) -> Result<TestPlan, UsageError> {
        let u = |m: String| Err(UsageError(m));
        let tcp_mode = self.tcp_mode()?;
        let stream = tcp_mode == TcpMode::Stream;
        self.tcp_flags(tcp_mode)?;
        let time = self.timing()?;
        let (len, size) = self.tcp_sizes(tcp_mode)?;
        let conns = if stream {
            self.streams.unwrap_or(1)
        } else {
            self.conns.unwrap_or(1)
        };
        let (cpus, peer_cpus) = self.cpu_lists();
        let spec = EngineSpec::Tcp(TcpSpec {
            mode: tcp_mode,
            streams: conns,
            threads: self.threads.unwrap_or(0),
            len,
            size,
            resp_size: self.resp_size.unwrap_or(size),
            depth: self.depth,
            window: self.window,
            mss: self.mss,
            congestion: self.congestion.clone(),
            zerocopy: self.zerocopy,
            skip_rx_copy: self.skip_rx_copy,
            reverse: self.reverse,
            bidir: self.bidir,
            peer_cpus,
            cpus,
            bytes: self.bytes,
        });
        if let Some(sw) = &self.sweep {
            for v in &sw.values {
                if sw.param == SweepParam::Size && *v > MAX_MSG {
                    return u(format!(
                        "sweep size {v} is out of range; use 1 B to {}",
                        exact_bytes(MAX_MSG)
                    ));
                }
                if sw.param == SweepParam::Streams && *v > MAX_CONNS {
                    return u(format!(
                        "sweep streams {v} is out of range; use 1 to {MAX_CONNS}"
                    ));
                }
            }
        }
        Ok(TestPlan {
            spec,
            time,
            omit: self.omit,
            interval: self.interval,
            sweep: self.sweep.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{resolve_peer, Cli, Command};
    use crate::units::CpuId;
    use clap::Parser;

    fn tcp(s: &EngineSpec) -> &TcpSpec {
        s.as_tcp().unwrap()
    }

    fn args(extra: &[&str]) -> Result<TestPlan, String> {
        let mut v = vec!["wirescope", "run"];
        v.extend_from_slice(extra);
        let cli = Cli::try_parse_from(v).map_err(|e| e.to_string())?;
        match cli.command {
            Some(Command::Run(r)) => r.test.resolve().map_err(|e| e.0),
            _ => Err("not run".into()),
        }
    }

    #[test]
    fn defaults() {
        let p = args(&[]).unwrap();
        assert_eq!(tcp(&p.spec).mode, TcpMode::Stream);
        assert_eq!(tcp(&p.spec).streams, 1);
        assert_eq!(tcp(&p.spec).len, Bytes(131072));
        assert_eq!(p.time, Some(Duration::from_secs(10)));
    }

    #[test]
    fn bad_values_name_the_flag_and_an_example() {
        let e = args(&["--time", "10x"]).unwrap_err();
        assert!(e.contains("--time") && e.contains("10s"), "{e}");
        let e = args(&["--len", "big"]).unwrap_err();
        assert!(e.contains("--len") && e.contains("64K"), "{e}");
        let p = args(&["--cpus", "0-1", "--peer-cpus", "1"]).unwrap();
        assert_eq!(tcp(&p.spec).cpus, vec![CpuId(0), CpuId(1)]);
        assert_eq!(tcp(&p.spec).peer_cpus, vec![CpuId(1)]);
        assert_eq!(
            args(&["--cpus", "0"])
                .unwrap()
                .spec
                .as_tcp()
                .unwrap()
                .peer_cpus,
            vec![CpuId(0)],
            "the peer defaults to the same list"
        );
        let e = args(&["--cpus", "3-1"]).unwrap_err();
        assert!(e.contains("--cpus") && e.contains("0-3,8"), "{e}");
        let e = args(&["--sweep", "color=red"]).unwrap_err();
        assert!(e.contains("--sweep") && e.contains("size=64"), "{e}");
    }

    #[test]
    fn combinations_are_checked() {
        assert!(args(&["-m", "rr", "--reverse"])
            .unwrap_err()
            .contains("--reverse"));
        assert!(args(&["-m", "rr", "--streams", "4"])
            .unwrap_err()
            .contains("--conns"));
        let e = args(&["--omit", "500ms", "-i", "1s"]).unwrap_err();
        assert!(e.contains("nothing would be"), "{e}");
        assert!(args(&["--omit", "1s", "-i", "1s"]).is_ok());
        assert!(args(&["--omit", "5s", "--time", "5s"])
            .unwrap_err()
            .contains("--omit"));
        assert!(args(&["--reverse", "--bidir"]).is_err());
        let p = args(&["--bytes", "1G"]).unwrap();
        assert_eq!(p.time, None);
    }

    #[test]
    fn sweeps_make_points() {
        let p = args(&["-m", "rr", "--sweep", "size=64,1K"]).unwrap();
        let pts: Vec<(Option<crate::session::plan::SweepValue>, EngineSpec)> =
            p.points().into_iter().map(|x| (x.sweep, x.spec)).collect();
        assert_eq!(pts.len(), 2);
        assert_eq!(tcp(&pts[1].1).size, Bytes(1024));
        assert_eq!(tcp(&pts[1].1).resp_size, Bytes(1024));
        let p = args(&["--sweep", "streams=1,2,4"]).unwrap();
        assert_eq!(
            p.points()
                .iter()
                .map(|x| tcp(&x.spec).streams)
                .collect::<Vec<_>>(),
            vec![1, 2, 4]
        );
    }

    #[test]
    fn peers_resolve() {
        assert_eq!(resolve_peer("127.0.0.1").unwrap().port(), 5310);
        assert_eq!(resolve_peer("127.0.0.1:9").unwrap().port(), 9);
        assert_eq!(resolve_peer("::1").unwrap().port(), 5310);
        assert_eq!(resolve_peer("localhost:7").unwrap().port(), 7);
        assert!(resolve_peer("localhost:x")
            .unwrap_err()
            .0
            .contains("not a port"));
    }
}

//! The control view's fields: each edits the [`TestArgs`] that `wirescope run`
//! parses, so [`TestArgs::resolve`] stays the one source of truth for what
//! is a valid test. Pure functions; no I/O.

use crate::cli::TestArgs;
use crate::traffic::grpc::GrpcMode;
use crate::traffic::sink::SinkMode;
use crate::traffic::{EngineKind, TcpMode};
use crate::units::Bytes;
use std::time::Duration;

/// One editable option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `--mode`.
    Mode,
    /// `--streams` (stream), `--conns` (rr/pingpong) or `--channels` (grpc).
    Count,
    /// grpc: `--concurrency` (RPCs in flight in all).
    Concurrency,
    /// `--len` (stream) or `--size` (rr/pingpong).
    Size,
    /// `--time`.
    Time,
    /// stream: normal, `--reverse` or `--bidir`.
    Direction,
}

/// Fields in display order.
pub const FIELDS: [Field; 6] = [
    Field::Mode,
    Field::Count,
    Field::Concurrency,
    Field::Size,
    Field::Time,
    Field::Direction,
];

const COUNTS: [u32; 10] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 1024];
const SIZES: [u64; 11] = [
    64,
    512,
    1 << 10,
    4 << 10,
    16 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
];
const TIMES: [u64; 9] = [3, 5, 10, 20, 30, 60, 120, 300, 600];
const CONCURRENCY: [u32; 11] = [1, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096];

/// Engine and mode together: what the mode field cycles through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    Tcp(TcpMode),
    Grpc(GrpcMode),
    Sink(SinkMode),
    /// rdma write; true = latency (`-m lat`), false = bandwidth.
    Rdma(bool),
}

const CHOICES: [Choice; 10] = [
    Choice::Tcp(TcpMode::Stream),
    Choice::Tcp(TcpMode::Pingpong),
    Choice::Tcp(TcpMode::Rr),
    Choice::Grpc(GrpcMode::Unary),
    Choice::Grpc(GrpcMode::Stream),
    Choice::Sink(SinkMode::AfXdp),
    Choice::Sink(SinkMode::Xdp),
    Choice::Sink(SinkMode::Tpacket),
    Choice::Rdma(false),
    Choice::Rdma(true),
];
/// Frame sizes of the packet tests (RFC 2544's, plus jumbo).
const FRAMES: [u64; 8] = [64, 128, 256, 512, 1024, 1280, 1518, 9000];

fn choice(t: &TestArgs) -> Choice {
    match t.engine {
        EngineKind::Tcp => Choice::Tcp(t.tcp_mode().unwrap_or(TcpMode::Stream)),
        EngineKind::Grpc => Choice::Grpc(t.grpc_mode().unwrap_or(GrpcMode::Unary)),
        EngineKind::Sink => Choice::Sink(t.sink.mode.unwrap_or(SinkMode::AfXdp)),
        EngineKind::Rdma => Choice::Rdma(t.mode.as_deref() == Some("lat")),
    }
}

fn choice_name(c: Choice) -> String {
    match c {
        Choice::Tcp(m) => format!("tcp {}", m.name()),
        Choice::Grpc(m) => format!("grpc {}", m.name()),
        Choice::Sink(m) => format!("sink {}", m.name()),
        Choice::Rdma(lat) => format!("rdma write {}", if lat { "lat" } else { "bw" }),
    }
}

fn concurrency(t: &TestArgs) -> u32 {
    t.grpc
        .concurrency
        .unwrap_or_else(|| t.grpc.channels.unwrap_or(1).saturating_mul(64))
}

/// Label of a field for the current mode.
pub fn label(f: Field, t: &TestArgs) -> &'static str {
    let c = choice(t);
    let stream = c == Choice::Tcp(TcpMode::Stream);
    let grpc = matches!(c, Choice::Grpc(_));
    let sink = matches!(c, Choice::Sink(_));
    match f {
        Field::Mode if sink => "engine, sink mode (--engine, --sink)",
        Field::Mode => "engine, mode (--engine, -m)",
        Field::Count if grpc => "HTTP/2 connections (--channels)",
        Field::Count if sink => "queues, threads per side (--queues)",
        Field::Count if matches!(c, Choice::Rdma(_)) => "queue pairs (--qps)",
        Field::Size if matches!(c, Choice::Rdma(_)) => "message size (--size)",
        Field::Direction if matches!(c, Choice::Rdma(_)) => "direction (--bidir)",
        Field::Size if sink => "frame size (--frame-size)",
        Field::Direction if sink => "direction (-R)",
        Field::Count if stream => "streams (-P)",
        Field::Count => "connections (--conns)",
        Field::Concurrency => "RPCs in flight (--concurrency)",
        Field::Size if stream => "write size (-l)",
        Field::Size if grpc => "request payload (--size)",
        Field::Size => "message size (--size)",
        Field::Time => "duration (-t)",
        Field::Direction => "direction (-R/--bidir)",
    }
}

/// Value of a field as shown.
pub fn value(f: Field, t: &TestArgs) -> String {
    let c = choice(t);
    let stream = c == Choice::Tcp(TcpMode::Stream);
    match f {
        Field::Mode => choice_name(c),
        Field::Count => count(t).to_string(),
        Field::Concurrency if matches!(c, Choice::Grpc(_)) => concurrency(t).to_string(),
        Field::Concurrency => "n/a (grpc only)".into(),
        Field::Size if matches!(c, Choice::Sink(_)) => format!("{} B", size(t).0),
        Field::Size => short_size(size(t)),
        Field::Time => match t.time {
            Some(d) => humantime::format_duration(d).to_string(),
            None if t.bytes.is_some() => "until --bytes".into(),
            None => "10s".into(),
        },
        Field::Direction if matches!(c, Choice::Sink(_)) => direction(t).into(),
        Field::Direction if c == Choice::Rdma(false) => direction(t).into(),
        Field::Direction if !stream => "n/a (both ways)".into(),
        Field::Direction => direction(t).into(),
    }
}

fn count(t: &TestArgs) -> u32 {
    match choice(t) {
        Choice::Tcp(TcpMode::Stream) => t.streams.unwrap_or(1),
        Choice::Tcp(_) => t.conns.unwrap_or(1),
        Choice::Grpc(_) => t.grpc.channels.unwrap_or(1),
        Choice::Sink(_) => t.sink.queues.unwrap_or(1),
        Choice::Rdma(_) => t.rdma.qps.unwrap_or(1),
    }
}

fn size(t: &TestArgs) -> Bytes {
    match choice(t) {
        Choice::Tcp(TcpMode::Stream) => t.len.unwrap_or(Bytes(128 << 10)),
        Choice::Tcp(TcpMode::Rr) | Choice::Grpc(_) => t.size.unwrap_or(Bytes(64)),
        Choice::Tcp(TcpMode::Pingpong) => t.size.unwrap_or(Bytes(16 << 10)),
        Choice::Sink(_) => Bytes(u64::from(t.sink.frame_size.unwrap_or(64))),
        Choice::Rdma(lat) => t.size.unwrap_or(Bytes(if lat { 2 } else { 65536 })),
    }
}

fn direction(t: &TestArgs) -> &'static str {
    match (t.reverse, t.bidir) {
        (true, _) => "reverse (peer sends)",
        (_, true) => "bidir",
        _ => "normal (this host sends)",
    }
}

/// The next value on a ladder in direction `step` (+1 up, -1 down), clamped.
fn ladder<T: Copy + PartialOrd>(values: &[T], cur: T, step: i32) -> T {
    if step > 0 {
        values.iter().copied().find(|v| *v > cur)
    } else {
        values.iter().rev().copied().find(|v| *v < cur)
    }
    .unwrap_or(cur)
}

/// Change field `f` by one step. Mode changes carry the count over and reset
/// what only the old mode accepts, so the result resolves when the old one did.
pub fn step(f: Field, t: &mut TestArgs, step: i32) {
    let c = choice(t);
    let stream = c == Choice::Tcp(TcpMode::Stream);
    let grpc = matches!(c, Choice::Grpc(_));
    let sink = matches!(c, Choice::Sink(_));
    match f {
        Field::Mode => {
            let i = CHOICES.iter().position(|m| *m == c).unwrap_or(0) as i32;
            let next = CHOICES[(i + step).rem_euclid(CHOICES.len() as i32) as usize];
            set_mode(t, next);
        }
        Field::Count => {
            let n = ladder(&COUNTS, count(t), step);
            if sink {
                t.sink.queues = Some(n);
            } else if matches!(c, Choice::Rdma(_)) {
                // Latency runs on one QP, like perftest.
                t.rdma.qps = (c == Choice::Rdma(false)).then_some(n);
            } else if grpc {
                t.grpc.channels = Some(n);
                // Every channel needs an RPC in flight.
                if concurrency(t) < n {
                    t.grpc.concurrency = Some(n);
                }
            } else if stream {
                t.streams = Some(n);
            } else {
                t.conns = Some(n);
            }
        }
        Field::Concurrency if grpc => {
            let n = ladder(&CONCURRENCY, concurrency(t), step).max(count(t));
            t.grpc.concurrency = Some(n);
        }
        Field::Concurrency => {}
        Field::Size if sink => {
            t.sink.frame_size = u32::try_from(ladder(&FRAMES, size(t).0, step)).ok();
        }
        Field::Size => {
            let s = Bytes(ladder(&SIZES, size(t).0, step));
            if stream {
                t.len = Some(s);
            } else {
                t.size = Some(s);
            }
        }
        Field::Time => {
            let cur = t.time.map(|d| d.as_secs()).unwrap_or(10);
            t.time = Some(Duration::from_secs(ladder(&TIMES, cur, step)));
        }
        Field::Direction if sink => t.reverse = !t.reverse,
        Field::Direction if c == Choice::Rdma(false) => t.bidir = !t.bidir,
        Field::Direction if matches!(c, Choice::Rdma(_)) => {}
        Field::Direction if stream => {
            let (r, b) = match (t.reverse, t.bidir, step > 0) {
                (false, false, true) | (false, true, false) => (true, false),
                (true, _, true) | (false, false, false) => (false, true),
                _ => (false, false),
            };
            t.reverse = r;
            t.bidir = b;
        }
        Field::Direction => {}
    }
}

fn set_mode(t: &mut TestArgs, next: Choice) {
    let n = count(t);
    t.streams = None;
    t.conns = None;
    t.grpc = Default::default();
    t.len = None;
    t.size = None;
    t.resp_size = None;
    t.threads = None;
    t.depth = 1;
    t.reverse = false;
    t.bidir = false;
    t.zerocopy = false;
    t.skip_rx_copy = false;
    t.bytes = None;
    t.window = None;
    t.mss = None;
    t.congestion = None;
    t.sink = Default::default();
    // The devices, ports and GIDs stay: they name the hardware, not the test.
    t.rdma = crate::traffic::rdma::args::RdmaArgs {
        ib_dev: t.rdma.ib_dev.take(),
        ib_port: t.rdma.ib_port,
        gid_index: t.rdma.gid_index,
        peer_ib_dev: t.rdma.peer_ib_dev.take(),
        peer_ib_port: t.rdma.peer_ib_port,
        peer_gid_index: t.rdma.peer_gid_index,
        ..Default::default()
    };
    let keep = (n > 1).then_some(n);
    match next {
        Choice::Tcp(mode) => {
            t.engine = EngineKind::Tcp;
            t.mode = (mode != TcpMode::Stream).then(|| mode.name().to_string());
            if mode == TcpMode::Stream {
                t.streams = keep;
            } else {
                t.conns = keep;
            }
        }
        Choice::Grpc(mode) => {
            t.engine = EngineKind::Grpc;
            t.mode = (mode != GrpcMode::Unary).then(|| mode.name().to_string());
            t.grpc.channels = keep;
        }
        Choice::Rdma(lat) => {
            t.engine = EngineKind::Rdma;
            t.mode = lat.then(|| "lat".to_string());
            t.rdma.qps = keep.filter(|_| !lat);
        }
        Choice::Sink(mode) => {
            t.engine = EngineKind::Sink;
            t.mode = None;
            t.sink.mode = Some(mode);
            t.sink.queues = keep;
        }
    }
}

/// The `wirescope run` command line that runs the same test.
pub fn command_line(t: &TestArgs) -> String {
    let mut v = vec!["wirescope run".to_string()];
    match choice(t) {
        Choice::Tcp(TcpMode::Stream) => {}
        Choice::Tcp(m) => v.push(format!("-m {}", m.name())),
        Choice::Grpc(m) => v.push(format!("--engine grpc -m {}", m.name())),
        Choice::Sink(m) => v.push(format!("--engine sink --sink {}", m.name())),
        Choice::Rdma(lat) => v.push(format!(
            "--engine rdma -m {}",
            if lat { "lat" } else { "bw" }
        )),
    }
    if let Some(n) = t.sink.queues {
        v.push(format!("--queues {n}"));
    }
    if let Some(n) = t.rdma.qps {
        v.push(format!("--qps {n}"));
    }
    if let Some(n) = t.sink.frame_size {
        v.push(format!("--frame-size {n}"));
    }
    if let Some(n) = t.grpc.channels {
        v.push(format!("--channels {n}"));
    }
    if let Some(n) = t.grpc.concurrency {
        v.push(format!("--concurrency {n}"));
    }
    if let Some(n) = t.streams {
        v.push(format!("-P {n}"));
    }
    if let Some(n) = t.conns {
        v.push(format!("--conns {n}"));
    }
    if let Some(n) = t.len {
        v.push(format!("-l {}", short_size(n)));
    }
    if let Some(n) = t.size {
        v.push(format!("--size {}", short_size(n)));
    }
    if t.reverse {
        v.push("-R".into());
    }
    if t.bidir {
        v.push("--bidir".into());
    }
    if let Some(d) = t.time {
        v.push(format!("-t {}", humantime::format_duration(d)));
    }
    v.join(" ")
}

fn short_size(b: Bytes) -> String {
    match b.0 {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}K", n >> 10),
        n => n.to_string(),
    }
}

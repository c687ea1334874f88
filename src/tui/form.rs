//! The control view's fields: each edits the [`TestArgs`] that `wirescope run`
//! parses, so [`TestArgs::resolve`] stays the one source of truth for what
//! is a valid test. Pure functions; no I/O.

use crate::cli::TestArgs;
use crate::traffic::TcpMode;
use crate::units::Bytes;
use std::time::Duration;

/// One editable option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `--mode`.
    Mode,
    /// `--streams` (stream) or `--conns` (rr/pingpong).
    Count,
    /// `--len` (stream) or `--size` (rr/pingpong).
    Size,
    /// `--time`.
    Time,
    /// stream: normal, `--reverse` or `--bidir`.
    Direction,
}

/// Fields in display order.
pub const FIELDS: [Field; 5] = [
    Field::Mode,
    Field::Count,
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

/// Label of a field for the current mode.
pub fn label(f: Field, t: &TestArgs) -> &'static str {
    let stream = t.tcp_mode().unwrap_or(TcpMode::Stream) == TcpMode::Stream;
    match f {
        Field::Mode => "mode (-m)",
        Field::Count if stream => "streams (-P)",
        Field::Count => "connections (--conns)",
        Field::Size if stream => "write size (-l)",
        Field::Size => "message size (--size)",
        Field::Time => "duration (-t)",
        Field::Direction => "direction (-R/--bidir)",
    }
}

/// Value of a field as shown.
pub fn value(f: Field, t: &TestArgs) -> String {
    let stream = t.tcp_mode().unwrap_or(TcpMode::Stream) == TcpMode::Stream;
    match f {
        Field::Mode => t.tcp_mode().unwrap_or(TcpMode::Stream).name().to_string(),
        Field::Count => count(t).to_string(),
        Field::Size => short_size(size(t)),
        Field::Time => match t.time {
            Some(d) => humantime::format_duration(d).to_string(),
            None if t.bytes.is_some() => "until --bytes".into(),
            None => "10s".into(),
        },
        Field::Direction if !stream => "n/a (both ways)".into(),
        Field::Direction => direction(t).into(),
    }
}

fn count(t: &TestArgs) -> u32 {
    if t.tcp_mode().unwrap_or(TcpMode::Stream) == TcpMode::Stream {
        t.streams.unwrap_or(1)
    } else {
        t.conns.unwrap_or(1)
    }
}

fn size(t: &TestArgs) -> Bytes {
    match t.tcp_mode().unwrap_or(TcpMode::Stream) {
        TcpMode::Stream => t.len.unwrap_or(Bytes(128 << 10)),
        TcpMode::Rr => t.size.unwrap_or(Bytes(64)),
        TcpMode::Pingpong => t.size.unwrap_or(Bytes(16 << 10)),
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
    let stream = t.tcp_mode().unwrap_or(TcpMode::Stream) == TcpMode::Stream;
    match f {
        Field::Mode => {
            const MODES: [TcpMode; 3] = [TcpMode::Stream, TcpMode::Pingpong, TcpMode::Rr];
            let i = MODES
                .iter()
                .position(|m| t.tcp_mode().is_ok_and(|x| x == *m))
                .unwrap_or(0) as i32;
            let next = MODES[(i + step).rem_euclid(MODES.len() as i32) as usize];
            set_mode(t, next);
        }
        Field::Count => {
            let n = ladder(&COUNTS, count(t), step);
            if stream {
                t.streams = Some(n);
            } else {
                t.conns = Some(n);
            }
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

fn set_mode(t: &mut TestArgs, mode: TcpMode) {
    let n = count(t);
    t.mode = (mode != TcpMode::Stream).then(|| mode.name().to_string());
    t.streams = None;
    t.conns = None;
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
    if mode == TcpMode::Stream {
        t.streams = (n > 1).then_some(n);
    } else {
        t.conns = (n > 1).then_some(n);
    }
}

/// The `wirescope run` command line that runs the same test.
pub fn command_line(t: &TestArgs) -> String {
    let mut v = vec!["wirescope run".to_string()];
    if t.tcp_mode().unwrap_or(TcpMode::Stream) != TcpMode::Stream {
        v.push(format!(
            "-m {}",
            t.tcp_mode().unwrap_or(TcpMode::Stream).name()
        ));
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

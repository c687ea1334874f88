//! `--engine tcp`'s validation: TCP has no option group of its own (its
//! flags are the shared ones: streams, sizes, the socket options), so this
//! module checks which of them fit the mode and builds the [`TcpSpec`].

use super::{TcpMode, TcpSpec};
use crate::traffic::limits::{MAX_CONNS, MAX_MSG, MAX_WINDOW, MIN_WINDOW};
use crate::traffic::options::{exact_bytes, refuse, OptionError, Resolved, SweepParam};
use crate::traffic::EngineSpec;
use crate::traffic::TestOptions;
use crate::units::Bytes;

impl TcpMode {
    /// The TCP mode `--mode` names (stream when absent).
    pub fn from_option(mode: Option<&str>) -> Result<TcpMode, OptionError> {
        match mode {
            None | Some("stream") => Ok(TcpMode::Stream),
            Some("pingpong") => Ok(TcpMode::Pingpong),
            Some("rr") => Ok(TcpMode::Rr),
            Some(other) => refuse(format!(
                "--mode {other} is not a tcp mode; use stream, pingpong or rr"
            )),
        }
    }
}

/// Check the options of a TCP test and build its spec.
pub fn resolve(t: &TestOptions<'_>) -> Result<Resolved, OptionError> {
    let tcp_mode = TcpMode::from_option(t.mode)?;
    let stream = tcp_mode == TcpMode::Stream;
    check_flags(t, tcp_mode)?;
    let time = t.timing()?;
    let (len, size) = sizes(t, tcp_mode)?;
    let conns = if stream {
        t.streams.unwrap_or(1)
    } else {
        t.conns.unwrap_or(1)
    };
    let (cpus, peer_cpus) = t.cpu_lists();
    let spec = EngineSpec::Tcp(TcpSpec {
        mode: tcp_mode,
        streams: conns,
        threads: t.threads.unwrap_or(0),
        len,
        size,
        resp_size: t.resp_size.unwrap_or(size),
        depth: t.depth,
        window: t.window,
        mss: t.mss,
        congestion: t.congestion.map(str::to_owned),
        zerocopy: t.zerocopy,
        skip_rx_copy: t.skip_rx_copy,
        reverse: t.reverse,
        bidir: t.bidir,
        peer_cpus,
        cpus,
        bytes: t.bytes,
    });
    if let Some(sw) = t.sweep {
        for v in &sw.values {
            if sw.param == SweepParam::Size && *v > MAX_MSG {
                return refuse(format!(
                    "sweep size {v} is out of range; use 1 B to {}",
                    exact_bytes(MAX_MSG)
                ));
            }
            if sw.param == SweepParam::Streams && *v > MAX_CONNS {
                return refuse(format!(
                    "sweep streams {v} is out of range; use 1 to {MAX_CONNS}"
                ));
            }
        }
    }
    Ok(Resolved {
        spec,
        time,
        omit: t.omit,
    })
}

/// The options that do not fit this TCP mode, refused by flag.
fn check_flags(t: &TestOptions<'_>, tcp_mode: TcpMode) -> Result<(), OptionError> {
    let stream = tcp_mode == TcpMode::Stream;
    let mode = tcp_mode.name();
    if !stream {
        for (set, flag) in [
            (t.reverse, "--reverse"),
            (t.bidir, "--bidir"),
            (t.zerocopy, "--zerocopy"),
            (t.skip_rx_copy, "--skip-rx-copy"),
            (t.bytes.is_some(), "--bytes"),
            (t.len.is_some(), "--len"),
        ] {
            if set {
                return refuse(format!("{flag} applies to --mode stream only, not {mode}"));
            }
        }
        if t.streams.is_some() {
            return refuse(format!("--mode {mode} takes --conns N, not --streams"));
        }
    } else {
        for (set, flag) in [
            (t.conns.is_some(), "--conns"),
            (t.threads.is_some(), "--threads"),
            (t.size.is_some(), "--size"),
            (t.resp_size.is_some(), "--resp-size"),
            (t.depth != 1, "--depth"),
        ] {
            if set {
                return refuse(format!(
                    "{flag} applies to --mode rr/pingpong; for stream use --streams and --len"
                ));
            }
        }
    }
    if tcp_mode == TcpMode::Pingpong && (t.resp_size.is_some() || t.depth != 1) {
        return refuse(
            "--resp-size and --depth apply to --mode rr only; pingpong echoes --size bytes",
        );
    }
    if t.reverse && t.bidir {
        return refuse("--reverse and --bidir exclude each other; --bidir already sends both ways");
    }
    Ok(())
}

/// The TCP sizes (bytes per write, message size) with their defaults,
/// and the socket options' values, each checked against its range.
fn sizes(t: &TestOptions<'_>, tcp_mode: TcpMode) -> Result<(Bytes, Bytes), OptionError> {
    if let Some(b) = t.bytes {
        if b.0 == 0 {
            return refuse("--bytes must be at least 1, e.g. --bytes 1G");
        }
    }
    let len = t.len.unwrap_or(Bytes(128 * 1024));
    let size = t.size.unwrap_or(if tcp_mode == TcpMode::Rr {
        Bytes(64)
    } else {
        Bytes(16 * 1024)
    });
    for (v, flag) in [
        (len, "--len"),
        (size, "--size"),
        (t.resp_size.unwrap_or(size), "--resp-size"),
    ] {
        if v.0 == 0 || v.0 > MAX_MSG {
            return refuse(format!(
                "{flag} {} is out of range; use 1 B to {}",
                v.0,
                exact_bytes(MAX_MSG)
            ));
        }
    }
    if let Some(w) = t.window {
        if w.0 < MIN_WINDOW || w.0 > MAX_WINDOW {
            return refuse(format!("--window {} is out of range; use 1K to 1G (the kernel doubles it and caps it at net.core.rmem_max/wmem_max)", w.0));
        }
    }
    if let Some(cc) = t.congestion {
        if cc.is_empty()
            || cc.len() > 15
            || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return refuse(format!("--congestion '{cc}' is not an algorithm name; see /proc/sys/net/ipv4/tcp_available_congestion_control"));
        }
    }
    Ok((len, size))
}

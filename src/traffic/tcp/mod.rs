//! The TCP engine: `stream`, `pingpong` and `rr` over kernel TCP sockets.
//!
//! Data sockets are made by the session layer (the controller connects, the
//! agent accepts); this module sets their options ([`prepare_socket`],
//! [`configure_stream`]) and runs the workers. Stream mode uses one blocking
//! thread per connection, which is what the kernel path rewards: one
//! `write`/`read` per large buffer, no event loop. pingpong and rr multiplex
//! connections over a few threads with mio; a thread that owns exactly one rr
//! connection with depth 1 uses blocking calls, which saves an `epoll_wait`
//! per round trip and is what latency-oriented tools (sockperf) do.

pub mod args;
mod echo;
pub mod form;
mod spec;
mod stream;
mod zerocopy;

pub use spec::{TcpMode, TcpSpec};

use super::{ConnRole, Engine, EngineControl, EngineCounters, EngineError, RunningEngine, Side};
use crate::traffic::EngineSpecOps;
use socket2::{Domain, Protocol, Socket, Type};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

/// TCP's slice: the common figures (bytes the receiver counted, streams,
/// retransmits) are its own; rr measures latency and counts transactions.
pub struct TcpSlice;

impl super::EngineSlice for TcpSlice {
    fn sweep_example(&self) -> Option<&'static str> {
        Some("size=64,1K,64K,1M, streams=1,2,4")
    }

    fn kind(&self) -> super::EngineKind {
        super::EngineKind::Tcp
    }

    fn resolve(
        &self,
        t: &super::TestOptions<'_>,
    ) -> Result<super::options::Resolved, super::options::OptionError> {
        args::resolve(t)
    }

    fn measures_latency(&self, spec: &super::EngineSpec) -> bool {
        spec.as_tcp().is_some_and(|t| t.mode == TcpMode::Rr)
    }

    fn rate_unit(&self, spec: &super::EngineSpec) -> &'static str {
        match spec.as_tcp() {
            Some(t) if t.mode == TcpMode::Rr => "trans/s",
            _ => "msg/s",
        }
    }

    fn paths(&self) -> super::DataPaths {
        super::DataPaths::KERNEL_STACK.and(super::DataPaths::TCP)
    }

    fn works_in_kernel(&self) -> bool {
        true
    }
}

/// How long a blocking worker call may wait before it re-checks the stop flags.
pub(crate) const WAKE_INTERVAL: Duration = Duration::from_millis(100);

/// The TCP engine for one side of one test point.
#[derive(Debug, Clone)]
pub struct TcpEngine {
    spec: TcpSpec,
    side: Side,
}

impl TcpEngine {
    /// `side` of a point running `spec` (already validated).
    pub fn new(spec: TcpSpec, side: Side) -> Self {
        TcpEngine { spec, side }
    }
}

/// A fresh TCP socket for `addr` with the options that must be set before
/// `connect` (buffer sizes decide the window scale in the SYN; MSS is
/// advertised in the SYN).
pub fn prepare_socket(
    spec: &TcpSpec,
    addr: &SocketAddr,
    conn: usize,
) -> Result<Socket, EngineError> {
    let sock = Socket::new(
        Domain::for_address(*addr),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(|source| EngineError::Io {
        op: "socket",
        conn,
        source,
    })?;
    apply_options(&sock, spec, conn)?;
    Ok(sock)
}

/// Options for an established data connection (accepted by the agent, or
/// connected by the controller): everything [`prepare_socket`] sets, plus
/// TCP_NODELAY for the message modes.
pub fn configure_stream(
    stream: &TcpStream,
    spec: &TcpSpec,
    conn: usize,
) -> Result<(), EngineError> {
    let sock = socket2::SockRef::from(stream);
    apply_options(&sock, spec, conn)?;
    if spec.mode != TcpMode::Stream {
        sock.set_tcp_nodelay(true)
            .map_err(|source| EngineError::Io {
                op: "setsockopt TCP_NODELAY",
                conn,
                source,
            })?;
    }
    Ok(())
}

fn apply_options(sock: &Socket, spec: &TcpSpec, conn: usize) -> Result<(), EngineError> {
    if let Some(w) = spec.window {
        let w = w.as_usize();
        sock.set_send_buffer_size(w)
            .map_err(|source| EngineError::Io {
                op: "setsockopt SO_SNDBUF",
                conn,
                source,
            })?;
        sock.set_recv_buffer_size(w)
            .map_err(|source| EngineError::Io {
                op: "setsockopt SO_RCVBUF",
                conn,
                source,
            })?;
    }
    if let Some(mss) = spec.mss {
        sock.set_tcp_mss(mss).map_err(|source| EngineError::Io {
            op: "setsockopt TCP_MAXSEG",
            conn,
            source,
        })?;
    }
    if let Some(cc) = &spec.congestion {
        sock.set_tcp_congestion(cc.as_bytes()).map_err(|source| {
            if source.raw_os_error() == Some(libc::ENOENT) {
                EngineError::Unsupported(format!(
                    "congestion control '{cc}' is not available on this host; see /proc/sys/net/ipv4/tcp_available_congestion_control (try: modprobe tcp_{cc})"
                ))
            } else {
                EngineError::Io { op: "setsockopt TCP_CONGESTION", conn, source }
            }
        })?;
    }
    if spec.zerocopy {
        zerocopy::enable(sock.as_raw_fd()).map_err(|source| EngineError::Io {
            op: "setsockopt SO_ZEROCOPY",
            conn,
            source,
        })?;
    }
    Ok(())
}

impl Engine for TcpEngine {
    fn start(self: Box<Self>, conns: Vec<TcpStream>) -> Result<RunningEngine, EngineError> {
        let side = self.side;
        let spec = &self.spec;
        let roles = spec.conn_roles(side);
        if roles.len() != conns.len() {
            return Err(EngineError::Unsupported(format!(
                "the test needs {} data connections but {} were established",
                roles.len(),
                conns.len()
            )));
        }
        let mut sockets = Vec::with_capacity(conns.len());
        for (i, c) in conns.iter().enumerate() {
            configure_stream(c, spec, i)?;
            c.set_read_timeout(Some(WAKE_INTERVAL))
                .map_err(|source| EngineError::Io {
                    op: "setsockopt SO_RCVTIMEO",
                    conn: i,
                    source,
                })?;
            c.set_write_timeout(Some(WAKE_INTERVAL))
                .map_err(|source| EngineError::Io {
                    op: "setsockopt SO_SNDTIMEO",
                    conn: i,
                    source,
                })?;
            sockets.push(c.try_clone().map_err(|source| EngineError::Io {
                op: "dup",
                conn: i,
                source,
            })?);
        }
        // Workers wait at the gate until the session releases them, so the
        // spawning (slow with hundreds of streams) is not measured.
        let control = EngineControl::gated();
        let cpus = spec.cpus_for(side).to_vec();
        // A starter token keeps `running` above zero until every worker is
        // spawned, so an early-exiting first worker cannot signal "done".
        let starter = control.starter();
        let spawned: Result<_, EngineError> = (|| {
            Ok(match spec.mode {
                TcpMode::Stream => {
                    let counters = Arc::new(EngineCounters::new(conns.len(), 0));
                    let t = stream::spawn(spec, &roles, conns, &cpus, &counters, &control)?;
                    (t, counters)
                }
                TcpMode::Pingpong | TcpMode::Rr => {
                    let workers = (spec.threads.max(1) as usize).min(conns.len().max(1));
                    let measuring =
                        if roles.first() == Some(&ConnRole::Client) && spec.mode == TcpMode::Rr {
                            workers
                        } else {
                            0
                        };
                    let counters = Arc::new(EngineCounters::new(conns.len(), measuring));
                    let t = echo::spawn(spec, &roles, conns, workers, &cpus, &counters, &control)?;
                    (t, counters)
                }
            })
        })();
        if spawned.is_err() {
            // Workers already started must not outlive the failed start.
            control
                .abort
                .store(true, std::sync::atomic::Ordering::Relaxed);
            control
                .stop
                .store(true, std::sync::atomic::Ordering::Relaxed);
            control.gate.open();
        }
        drop(starter);
        let (threads, counters) = spawned?;
        Ok(RunningEngine {
            threads,
            counters,
            sockets,
            control,
            roles,
            probe: None,
        })
    }
}

/// True for the errors a blocking call with SO_RCVTIMEO/SO_SNDTIMEO returns on timeout.
pub(crate) fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

/// True for the errors that mean the peer closed or reset the connection.
pub(crate) fn is_disconnect(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::UnexpectedEof
    )
}

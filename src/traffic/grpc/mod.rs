//! The gRPC engine: `grpc.testing.BenchmarkService` between the pair, or
//! against any BenchmarkService server, with bounded memory at any message size.
//!
//! Owns the data plane of gRPC tests: the service definition ([`proto`]), a
//! tonic server ([`server`]) that the agent feeds with the test's accepted
//! data connections or that `wirescope serve grpc` feeds from its own
//! listener, a client ([`client`]) with `channels` HTTP/2 connections x
//! `concurrency` RPCs in flight (unary, or one ping-pong bidi stream per
//! slot), the counters and interval figures ([`counters`]) and the peak
//! resident memory of a point ([`memory`]). `wirescope serve grpc` is this
//! engine's server run alone ([`serve`]: its arguments, its start from its
//! own listener, and the text of its figures, which the face prints); its
//! client against a foreign server is [`engine::GrpcEngine::against`]. It
//! never prints, logs or draws.
//!
//! # Where the memory goes, and how it is bounded
//!
//! A stock gRPC stack holds one buffer per RPC on both ends: tonic's client
//! encodes each request into its own buffer before HTTP/2 flow control lets
//! any of it out, and its server collects each request whole before the
//! handler runs and encodes each response into its own buffer. At 4 MiB x 8
//! channels x 256 in flight that is 2048 x 4 MiB = 8 GiB per side. wirescope
//! bounds each end differently, because it controls its client completely but
//! its server must accept any client (ghz, grpc-go, grpc-java):
//!
//! * **Client: a hand-written hot path on hyper's HTTP/2 client** (tonic's
//!   `Channel` always encodes into a per-RPC buffer and collects responses
//!   whole). A request is a ~10-byte header plus one shared, reference-counted
//!   payload ([`proto::RequestTemplate`]): h2 queues reference clones, so 2048
//!   requests in flight cost one payload. Responses are counted by
//!   [`proto::ResponseScanner`] as DATA frames arrive and dropped at once;
//!   nothing waits for a whole message. What is left is what h2 itself
//!   buffers, bounded by the windows below.
//! * **Server: tonic with a byte budget** ([`budget`]) for `UnaryCall`: each
//!   request message is admitted against a shared budget (96 MiB by default)
//!   before tonic's decoder sees its prefix (it reserves the whole message on
//!   it), streams that wait are held by HTTP/2 flow control after one 64 KiB
//!   stream window, responses hold budget until h2 has taken their last
//!   64 KiB slice, and the request is dropped before the response is made.
//!   `StreamingCall` is answered at the HTTP/2 body level ([`stream_call`]):
//!   tonic's streaming decoder keeps a buffer as large as the largest message
//!   for each stream's whole life (2048 ping-pong streams x 4 MiB = 8 GiB
//!   pinned), so requests are parsed as they arrive and never assembled.
//!   Response payloads are one shared body per size. No connection holds
//!   more than its fair share of the budget, and none holds it past the body
//!   and response timeouts; how many connections and streams exist, and how
//!   long a handshake may take, is bounded in [`conn`].
//!
//! Measured (`cargo xtask bench grpc`, 4 MiB unary, 8 x 256): client peak RSS
//! 47 MB, server VmHWM 214-246 MB; ghz 1.5 GB and grpc-go 1.4-2.3 GB.
//!
//! # Flow-control windows (a fixed, bounded budget, not auto-tuning)
//!
//! * The server advertises a 64 KiB stream window (h2's and grpc-go's default)
//!   and a connection window of `max_streams x 64 KiB` (16 MiB at 256
//!   streams): enough that a waiting stream can never starve an admitted one
//!   (no deadlock), and what bounds the bytes h2 buffers per connection.
//! * The client reads every byte as it arrives, so its receive windows cost
//!   no memory; they are sized for rate: 64 MiB in all, split over the
//!   channels (at least 1 MiB each), and a stream window of one response
//!   (64 KiB .. 8 MiB). 8 MiB per connection covers 100 Gbit/s x 0.6 ms RTT.
//!   [`client::Windows`] reports them so the rule `grpc.flow-control-limited`
//!   can compare them with rate x RTT.

pub mod args;
pub mod budget;
pub mod client;
pub mod conn;
pub mod counters;
pub mod engine;
pub mod form;
pub mod memory;
pub mod proto;
pub mod serve;
pub mod server;
pub mod stream_call;
pub mod summary;

use crate::traffic::EngineError;
use crate::units::{Bytes, CpuId};
use serde::{Deserialize, Serialize};

pub use client::{ClientConfig, GrpcClient, Target, Windows};
pub use counters::{interval, GrpcCounters, GrpcInterval, GrpcSnapshot};
pub use engine::{GrpcEngine, GrpcProbe, GrpcTotals};
pub use server::{GrpcServer, Incoming, ServerConfig};

/// Largest message (request or response payload plus framing) either end accepts.
pub const MAX_MESSAGE: usize = 64 << 20;
/// Room for the fields around a payload within [`MAX_MESSAGE`].
pub const MESSAGE_OVERHEAD: usize = 32;
/// Most HTTP/2 connections of one test.
pub const MAX_CHANNELS: u32 = 1024;
/// Most RPCs in flight in all.
pub const MAX_CONCURRENCY: u32 = 65_536;

/// Unary calls or ping-pong on bidi streams.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum GrpcMode {
    /// `UnaryCall`: one RPC per request.
    Unary,
    /// `StreamingCall`: one bidi stream per concurrency slot, one message in flight on each.
    Stream,
}

impl GrpcMode {
    /// Lower-case name as used on the command line and in logs.
    pub fn name(self) -> &'static str {
        match self {
            GrpcMode::Unary => "unary",
            GrpcMode::Stream => "stream",
        }
    }
}

/// Everything both ends need to know to run one gRPC test point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GrpcSpec {
    /// Unary or stream.
    pub mode: GrpcMode,
    /// HTTP/2 connections (one data connection each).
    pub channels: u32,
    /// RPCs in flight in all, spread round-robin over the channels.
    pub concurrency: u32,
    /// Request payload bytes.
    pub size: Bytes,
    /// Response payload bytes.
    pub resp_size: Bytes,
    /// Client runtime threads; 0 = one per core.
    pub threads: u32,
    /// Server runtime threads on the agent (`--peer-threads`); 0 = one per core.
    pub peer_threads: u32,
    /// CPUs for the client's threads; empty = unpinned.
    pub cpus: Vec<CpuId>,
    /// CPUs for the agent's server threads; empty = unpinned.
    pub peer_cpus: Vec<CpuId>,
}

impl GrpcSpec {
    /// RPCs in flight per channel (the busiest channel's share).
    pub fn per_channel(&self) -> u32 {
        self.concurrency.div_ceil(self.channels.max(1))
    }

    /// The agent's server for this point: enough streams per connection for
    /// the client's share, the default budget.
    pub fn server_config(&self) -> ServerConfig {
        let mut c = ServerConfig::new(threads_or_cores(self.peer_threads));
        c.cpus = self.peer_cpus.clone();
        c.max_streams = self.per_channel().clamp(1, 1024);
        c
    }

    /// The controller's client for this point.
    pub fn client_config(&self) -> ClientConfig {
        ClientConfig {
            mode: self.mode,
            channels: self.channels as usize,
            concurrency: self.concurrency as usize,
            size: self.size.as_usize(),
            resp_size: self.resp_size.as_usize(),
            threads: threads_or_cores(self.threads),
            cpus: self.cpus.clone(),
            response_status: None,
        }
    }
}

/// Wait for a started thread's word that it runs: its error (after
/// `join`), or — when it ended without a word — what `join` says, `ended`
/// when that is nothing.
fn await_ready<E>(
    ready: &std::sync::mpsc::Receiver<Result<(), E>>,
    join: impl FnOnce() -> Result<(), E>,
    ended: impl FnOnce() -> E,
) -> Result<(), E> {
    match ready.recv() {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => {
            let _ = join();
            Err(e)
        }
        // The thread ended without a word: its own error (or panic) says why.
        Err(_) => join().and_then(|()| Err(ended())),
    }
}

/// `n`, or the number of cores this process may run on when `n` is 0.
pub fn threads_or_cores(n: u32) -> usize {
    if n > 0 {
        return n as usize;
    }
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// Errors of the gRPC engine; each says what to change.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    /// A knob is out of range (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The target could not be reached.
    #[error("cannot connect to {target}: {source}; check that a BenchmarkService server listens there (e.g. `wirescope serve grpc --listen {target}`)")]
    Connect {
        /// HOST:PORT.
        target: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The target answers, but not as a gRPC server.
    #[error("{target} is not a gRPC server ({detail}); point --target at a grpc.testing.BenchmarkService server")]
    NotGrpc {
        /// HOST:PORT.
        target: String,
        /// What it did instead.
        detail: String,
    },
    /// The server does not implement the method.
    #[error("{target} answered UNIMPLEMENTED for {method} ({message}); it does not serve grpc.testing.BenchmarkService{hint}")]
    Unimplemented {
        /// HOST:PORT.
        target: String,
        /// The gRPC path.
        method: String,
        /// The server's grpc-message.
        message: String,
        /// Extra advice (e.g. try --mode unary).
        hint: String,
    },
    /// A message exceeds the server's limit.
    #[error("{target} refused a {what} of {size} bytes as too large ({message}); use a smaller --{flag} or raise the server's max message size")]
    TooLarge {
        /// HOST:PORT.
        target: String,
        /// "request" or "response".
        what: &'static str,
        /// The flag to change.
        flag: &'static str,
        /// Payload bytes asked for.
        size: usize,
        /// The server's grpc-message.
        message: String,
    },
    /// The first RPC failed with an unexpected status.
    #[error("{target} answered the first RPC with {code} ({message})")]
    Status {
        /// HOST:PORT.
        target: String,
        /// Status name.
        code: &'static str,
        /// The server's grpc-message.
        message: String,
    },
    /// A connection failed during the test.
    #[error("HTTP/2 connection {channel} to {target} failed: {detail}")]
    Transport {
        /// HOST:PORT.
        target: String,
        /// Channel index.
        channel: usize,
        /// hyper's error.
        detail: String,
    },
    /// A local I/O call failed.
    #[error("{op} failed: {source}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Threads or pinning.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl GrpcError {
    /// True for errors a user fixes by changing the command line (exit 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            GrpcError::Usage(_)
                | GrpcError::NotGrpc { .. }
                | GrpcError::TooLarge { .. }
                | GrpcError::Unimplemented { .. }
        ) || matches!(self, GrpcError::Engine(EngineError::Unsupported(_)))
    }
}

/// Every CPU in `cpus` must be one this process may run on.
pub fn check_cpus(cpus: &[CpuId]) -> Result<(), GrpcError> {
    let unusable = crate::traffic::sched::unusable_cpus(cpus).map_err(|source| GrpcError::Io {
        op: "reading this process's CPU affinity",
        source,
    })?;
    match unusable.first() {
        Some(c) => Err(GrpcError::Usage(format!(
            "{c} is not a CPU this process may run on; pick CPUs from /sys/devices/system/cpu/online (and the cgroup's cpuset)"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::EngineSpecOps;

    pub(crate) fn spec() -> GrpcSpec {
        GrpcSpec {
            mode: GrpcMode::Unary,
            channels: 8,
            concurrency: 256,
            size: Bytes(64),
            resp_size: Bytes(64),
            threads: 0,
            peer_threads: 0,
            cpus: vec![],
            peer_cpus: vec![],
        }
    }

    #[test]
    fn validate_bounds() {
        assert!(spec().validate().is_ok());
        let mut s = spec();
        s.concurrency = 0;
        assert!(s
            .validate()
            .unwrap_err()
            .to_string()
            .contains("concurrency 0"));
        let mut s = spec();
        s.size = Bytes(MAX_MESSAGE as u64);
        assert!(s.validate().unwrap_err().to_string().contains("size"));
        let mut s = spec();
        s.concurrency = 4;
        assert!(s
            .validate()
            .unwrap_err()
            .to_string()
            .contains("below channels"));
    }

    #[test]
    fn spec_round_trips_and_derives_configs() {
        let s = spec();
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<GrpcSpec>(&json).unwrap(), s);
        assert_eq!(s.per_channel(), 32);
        assert_eq!(s.server_config().max_streams, 32);
        assert_eq!(s.client_config().concurrency, 256);
    }

    #[test]
    fn cpu_check_names_the_cpu() {
        let e = check_cpus(&[CpuId(100_000)]).unwrap_err();
        assert!(e.to_string().contains("cpu100000"), "{e}");
        assert!(e.is_usage());
        check_cpus(&[CpuId(0)]).unwrap();
    }
}

//! `wirescope serve ...`: the argument types (the commands are in `face::serve`).

use super::values::ValueError;
use crate::units::{parse_cpu_list, parse_duration, parse_size, Bytes, CpuId};
use clap::{Args, Subcommand};
use std::time::Duration;

/// `wirescope serve ...`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// What to serve.
    #[command(subcommand)]
    pub what: ServeWhat,
}

/// Servers `wirescope serve` can run.
#[derive(Debug, Subcommand)]
pub enum ServeWhat {
    /// grpc.testing.BenchmarkService (UnaryCall, StreamingCall) without a token, until Ctrl-C.
    Grpc(ServeGrpcArgs),
}

/// `wirescope serve grpc`.
#[derive(Debug, Args)]
pub struct ServeGrpcArgs {
    /// Address and port to listen on.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:50051")]
    pub listen: std::net::SocketAddr,
    /// Server worker threads (default: one per core).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub threads: u32,
    /// Pin the worker threads to these CPUs (e.g. 0-3,8).
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub cpus: Option<Cpus>,
    /// Largest request or response message accepted.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = parse_size)]
    pub max_message: Bytes,
    /// Bytes of messages held at once, over all connections.
    #[arg(long, value_name = "SIZE", default_value = "96M", value_parser = parse_size)]
    pub memory_budget: Bytes,
    /// Concurrent streams per HTTP/2 connection.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_streams: u32,
    /// Connections open at once; more are closed as they arrive.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// Calls in flight over all connections; more are answered RESOURCE_EXHAUSTED.
    #[arg(long, value_name = "N", default_value_t = 16384, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub max_calls: u32,
    /// Time a new connection has to send the HTTP/2 preface before it is closed.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    pub handshake_timeout: Duration,
    /// A request whose bytes stop coming this long (or that arrives slower
    /// than 1 MiB/s after it) fails with DEADLINE_EXCEEDED and frees its memory.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    pub body_timeout: Duration,
    /// A response its client leaves unread this long resets its connection.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_timeout)]
    pub response_timeout: Duration,
    /// Print one line of figures per interval (0 = only at the end).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Print the totals at the end as one JSON line (`{"totals": ..., "vm_hwm_bytes": ...}`).
    #[arg(long)]
    pub json: bool,
}

/// A CPU list (`0-3,8`) as one value (a bare `Vec` would make clap expect several).
#[derive(Debug, Clone, PartialEq)]
pub struct Cpus(pub Vec<CpuId>);

/// A timeout: a duration above zero.
fn parse_timeout(s: &str) -> Result<Duration, ValueError> {
    let d = parse_duration(s).map_err(|e| ValueError::Value(e.to_string()))?;
    if d.is_zero() {
        return Err(ValueError::ZeroTimeout);
    }
    Ok(d)
}

fn parse_cpus(s: &str) -> Result<Cpus, ValueError> {
    parse_cpu_list(s)
        .map(Cpus)
        .map_err(|e| ValueError::Value(e.to_string()))
}

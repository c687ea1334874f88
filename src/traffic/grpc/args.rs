//! `--engine grpc`'s own options: a clap group flattened into the test
//! options of `run` and the TUI (shown under their own heading in `--help`).

use crate::units::{count, first_given};

/// gRPC's options.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "gRPC (--engine grpc)")]
pub struct GrpcArgs {
    /// grpc: HTTP/2 connections (default 1).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = count::<u32>("--channels", 1, 1024))]
    pub channels: Option<u32>,
    /// grpc: RPCs in flight in all, spread over the channels (default 64 per channel).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = count::<u32>("--concurrency", 1, 65536))]
    pub concurrency: Option<u32>,
    /// grpc: the agent's server threads (default: all its cores).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = count::<u32>("--peer-threads", 1, 1024))]
    pub peer_threads: Option<u32>,
}

impl GrpcArgs {
    /// The first of these options given, by flag (other engines refuse them).
    pub fn given(&self) -> Option<&'static str> {
        first_given([
            (self.channels.is_some(), "--channels"),
            (self.concurrency.is_some(), "--concurrency"),
            (self.peer_threads.is_some(), "--peer-threads"),
        ])
    }
}

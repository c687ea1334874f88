//! The test itself ([`TestArgs`]): the options `run` and the TUI share, and
//! their validation into a [`TestPlan`]. Each engine checks its own options
//! in its folder (`traffic/<engine>/args.rs`, reached through the registry);
//! this module only hands them over and turns a refusal into a usage error.

use super::values::{count, parse_cpus, parse_sweep, CpuList};
use super::UsageError;
use crate::session::plan::TestPlan;
use crate::traffic::options::OptionError;
use crate::traffic::options::Sweep;
use crate::traffic::registry::EngineArgs;
use crate::traffic::EngineKind;
use crate::traffic::TestOptions;
use crate::units::{parse_duration, parse_size, Bytes};
use clap::Args;
use std::time::Duration;

/// The test itself; shared by `run` and the TUI's control view.
#[derive(Debug, Args, Clone)]
pub struct TestArgs {
    /// Traffic engine.
    #[arg(long, value_enum, default_value_t = EngineKind::DEFAULT)]
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
    /// Each engine's own options (its folder's `args` module).
    #[command(flatten)]
    pub engines: EngineArgs,
}

impl From<OptionError> for UsageError {
    fn from(e: OptionError) -> Self {
        UsageError(e.0)
    }
}

impl TestArgs {
    /// The options as every engine reads them.
    fn options(&self) -> TestOptions<'_> {
        TestOptions {
            mode: self.mode.as_deref(),
            streams: self.streams,
            conns: self.conns,
            threads: self.threads,
            depth: self.depth,
            size: self.size,
            resp_size: self.resp_size,
            len: self.len,
            cpus: self.cpus.as_ref().map(|c| c.0.as_slice()),
            peer_cpus: self.peer_cpus.as_ref().map(|c| c.0.as_slice()),
            reverse: self.reverse,
            bidir: self.bidir,
            window: self.window,
            mss: self.mss,
            congestion: self.congestion.as_deref(),
            zerocopy: self.zerocopy,
            skip_rx_copy: self.skip_rx_copy,
            time: self.time,
            bytes: self.bytes,
            omit: self.omit,
            interval: self.interval,
            sweep: self.sweep.as_ref(),
            engines: &self.engines,
        }
    }

    /// Check combinations and build the plan: the engine's own folder checks
    /// its options (through the registry) and builds its spec.
    pub fn resolve(&self) -> Result<TestPlan, UsageError> {
        let r = crate::traffic::registry::resolve(self.engine, &self.options())?;
        Ok(TestPlan {
            spec: r.spec,
            time: r.time,
            omit: r.omit,
            interval: self.interval,
            sweep: self.sweep.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{resolve_peer, Cli, Command};
    use crate::traffic::tcp::{TcpMode, TcpSpec};
    use crate::traffic::EngineSpec;
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

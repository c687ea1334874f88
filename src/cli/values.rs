//! Value parsers for clap: each names what it expected and gives an example.

use crate::traffic::options::{Sweep, SweepParam};
use crate::units::{parse_cpu_list, parse_size, CpuId};
use std::net::SocketAddr;

pub(super) fn parse_sweep(s: &str) -> Result<Sweep, String> {
    let example = "use size=64,1K,64K,1M, streams=1,2,4, for grpc channels=1,2,4,8 or concurrency=1,16,256, for sink frame=64,512,1518 or cores=0;1;0,1";
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not a sweep; {example}"))?;
    let param = match k.trim() {
        "size" | "len" => SweepParam::Size,
        "streams" | "conns" => SweepParam::Streams,
        "channels" => SweepParam::Channels,
        "concurrency" => SweepParam::Concurrency,
        "frame" | "frame-size" => SweepParam::Frame,
        "cores" => SweepParam::Cores,
        other => return Err(format!("cannot sweep '{other}'; {example}")),
    };
    if param == SweepParam::Cores {
        let mut sets = Vec::new();
        for part in v.split(';') {
            let set = parse_cpu_list(part.trim())
                .map_err(|e| format!("cores: '{part}' is not a CPU list ({e}); {example}"))?;
            if set.is_empty() {
                return Err(format!("cores: an empty CPU set; {example}"));
            }
            sets.push(set);
        }
        return Ok(Sweep {
            param,
            values: sets.iter().map(|s| s.len() as u64).collect(),
            cpu_sets: sets,
        });
    }
    if param == SweepParam::Size && v.trim() == "all" {
        // perftest -a: every power of two from 2 B to 8 MiB.
        return Ok(Sweep {
            param,
            values: crate::traffic::rdma::all_sizes()
                .iter()
                .map(|b| b.0)
                .collect(),
            cpu_sets: Vec::new(),
        });
    }
    let mut values = Vec::new();
    for part in v.split(',') {
        let val = match param {
            SweepParam::Size => parse_size(part)?.0,
            SweepParam::Streams
            | SweepParam::Channels
            | SweepParam::Concurrency
            | SweepParam::Frame
            | SweepParam::Cores => part
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("'{part}' is not a count; {example}"))?,
        };
        if val == 0 {
            return Err(format!("sweep values must be at least 1; {example}"));
        }
        values.push(val);
    }
    Ok(Sweep {
        param,
        values,
        cpu_sets: Vec::new(),
    })
}

/// A CPU list as one value (`0-3,8`). A newtype, because clap reads an
/// `Option<Vec<T>>` field as "several values of T", not as one list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<CpuId>);

pub(super) fn parse_cpus(s: &str) -> Result<CpuList, String> {
    parse_cpu_list(s).map(CpuList)
}

pub(super) fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|_| {
        format!("'{s}' is not an address and port; use e.g. 0.0.0.0:5310 or [::]:5310")
    })
}

/// The address of `--metrics`.
pub(super) fn parse_metrics_addr(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|_| {
        format!("'{s}' is not an address and port; use e.g. 127.0.0.1:9464 or 0.0.0.0:9464")
    })
}

pub(super) use crate::units::count;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::pps;

    #[test]
    fn counts_name_the_flags_range_whatever_is_typed() {
        let q = count::<u32>("--queues", 1, 1024);
        assert_eq!(q("4"), Ok(4));
        assert_eq!(q("1024"), Ok(1024));
        for bad in ["0", "1025", "4294967296", "-1", "99999999999999999999999"] {
            let e = q(bad).unwrap_err();
            assert!(e.contains("use 1 to 1024"), "{bad}: {e}");
            assert!(
                e.starts_with("--queues ") || e.contains("not a whole"),
                "{e}"
            );
        }
        assert!(q("four").unwrap_err().contains("not a whole number"));
        assert_eq!(
            q("0").unwrap_err(),
            "--queues 0 is out of range; use 1 to 1024"
        );
        let port = count::<u8>("--ib-port", 1, 255);
        assert!(port("256").unwrap_err().contains("use 1 to 255"));
    }

    #[test]
    fn rates_must_be_positive_and_in_range() {
        let r = pps(1_000_000_000);
        assert_eq!(r("0"), Ok(0));
        assert_eq!(r("1000000000"), Ok(1_000_000_000));
        let e = r("-1").unwrap_err();
        assert!(e.starts_with("rate must be positive: -1"), "{e}");
        assert!(r("1000000001").unwrap_err().contains("to 1000000000"));
    }
}

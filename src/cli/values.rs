//! Value parsers for clap: each names what it expected and gives an example.

use crate::traffic::options::{Sweep, SweepParam};
use crate::traffic::registry::sweep_example;
use crate::units::{parse_cpu_list, parse_size, CpuId};
use std::net::SocketAddr;

/// A command-line value that is not what its flag takes. Each message
/// names what was given and shows the form the flag wants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ValueError {
    /// `--sweep` without `PARAM=`.
    #[error("'{0}' is not a sweep; {ex}", ex = sweep_example())]
    NotASweep(String),
    /// `--sweep` of a parameter nothing varies.
    #[error("cannot sweep '{0}'; {ex}", ex = sweep_example())]
    NotSweepable(String),
    /// A `cores` sweep's set that is not a CPU list.
    #[error("cores: '{part}' is not a CPU list ({reason}); {ex}", ex = sweep_example())]
    SweepCpus {
        /// The set as typed.
        part: String,
        /// Why it is not a list.
        reason: String,
    },
    /// A `cores` sweep's empty set.
    #[error("cores: an empty CPU set; {ex}", ex = sweep_example())]
    EmptyCpuSet,
    /// A sweep value that is not a count.
    #[error("'{0}' is not a count; {ex}", ex = sweep_example())]
    NotACount(String),
    /// A sweep value of 0.
    #[error("sweep values must be at least 1; {ex}", ex = sweep_example())]
    Zero,
    /// Not an address and port.
    #[error("'{given}' is not an address and port; use e.g. {example}")]
    NotAnAddress {
        /// What was typed.
        given: String,
        /// Two addresses the flag takes.
        example: &'static str,
    },
    /// A size, duration or CPU list the shared parsers refused (their
    /// message names the value and gives an example).
    #[error("{0}")]
    Value(String),
}

pub(super) fn parse_sweep(s: &str) -> Result<Sweep, ValueError> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| ValueError::NotASweep(s.into()))?;
    let param =
        SweepParam::from_name(k.trim()).ok_or_else(|| ValueError::NotSweepable(k.trim().into()))?;
    if param == SweepParam::Cores {
        let mut sets = Vec::new();
        for part in v.split(';') {
            let set = parse_cpu_list(part.trim()).map_err(|reason| ValueError::SweepCpus {
                part: part.into(),
                reason: reason.to_string(),
            })?;
            if set.is_empty() {
                return Err(ValueError::EmptyCpuSet);
            }
            sets.push(set);
        }
        return Ok(Sweep {
            param,
            values: sets.iter().map(|s| s.len() as u64).collect(),
            cpu_sets: sets,
        });
    }
    if let Some(values) = crate::traffic::registry::named_sweep(param, v.trim()) {
        return Ok(Sweep {
            param,
            values,
            cpu_sets: Vec::new(),
        });
    }
    let mut values = Vec::new();
    for part in v.split(',') {
        let val = match param {
            SweepParam::Size => {
                parse_size(part)
                    .map_err(|e| ValueError::Value(e.to_string()))?
                    .0
            }
            SweepParam::Streams
            | SweepParam::Channels
            | SweepParam::Concurrency
            | SweepParam::Frame
            | SweepParam::Cores => part
                .trim()
                .parse::<u64>()
                .map_err(|_| ValueError::NotACount(part.into()))?,
        };
        if val == 0 {
            return Err(ValueError::Zero);
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

pub(super) fn parse_cpus(s: &str) -> Result<CpuList, ValueError> {
    parse_cpu_list(s)
        .map(CpuList)
        .map_err(|e| ValueError::Value(e.to_string()))
}

pub(super) fn parse_listen(s: &str) -> Result<SocketAddr, ValueError> {
    s.parse().map_err(|_| ValueError::NotAnAddress {
        given: s.into(),
        example: "0.0.0.0:5310 or [::]:5310",
    })
}

/// The address of `--metrics`.
pub(super) fn parse_metrics_addr(s: &str) -> Result<SocketAddr, ValueError> {
    s.parse().map_err(|_| ValueError::NotAnAddress {
        given: s.into(),
        example: "127.0.0.1:9464 or 0.0.0.0:9464",
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
            let e = q(bad).unwrap_err().to_string();
            assert!(e.contains("use 1 to 1024"), "{bad}: {e}");
            assert!(
                e.starts_with("--queues ") || e.contains("not a whole"),
                "{e}"
            );
        }
        assert!(q("four")
            .unwrap_err()
            .to_string()
            .contains("not a whole number"));
        assert_eq!(
            q("0").unwrap_err().to_string(),
            "--queues 0 is out of range; use 1 to 1024"
        );
        let port = count::<u8>("--ib-port", 1, 255);
        assert!(port("256")
            .unwrap_err()
            .to_string()
            .contains("use 1 to 255"));
    }

    #[test]
    fn rates_must_be_positive_and_in_range() {
        let r = pps(1_000_000_000);
        assert_eq!(r("0"), Ok(0));
        assert_eq!(r("1000000000"), Ok(1_000_000_000));
        let e = r("-1").unwrap_err().to_string();
        assert!(e.starts_with("rate must be positive: -1"), "{e}");
        assert!(r("1000000001")
            .unwrap_err()
            .to_string()
            .contains("to 1000000000"));
    }
}

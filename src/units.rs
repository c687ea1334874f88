//! Unit newtypes and the parsers for user-typed quantities.
//!
//! Every number a user sees carries its unit; these types make the unit part
//! of the type so a byte count cannot be passed where bits per second are
//! expected. The parsers accept what network engineers type (`10s`, `500ms`,
//! `64K`, `8MiB`, `0-3,8`) and return an error that shows an example,
//! because clap prints that message next to the flag's name.
//!
//! Conventions: sizes are binary (`64K` = 65536 bytes, like iperf3 and
//! ethtool), rates are decimal (`10 Gbit/s` = 10^10 bit/s, like link speeds).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// A byte count.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    Default,
    schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct Bytes(pub u64);

/// A rate in bits per second.
#[derive(
    Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct BitsPerSec(pub f64);

/// A percentage, 0–100 (may exceed 100 only for sums over several CPUs).
#[derive(
    Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct Percent(pub f64);

/// A duration or latency in nanoseconds.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    Default,
    schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct Nanos(pub u64);

/// A logical CPU number as the kernel numbers it (`cpuN` in /proc/stat).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct CpuId(pub u32);

impl Bytes {
    /// The count as `usize`, saturating on 32-bit targets.
    pub fn as_usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

impl BitsPerSec {
    /// Rate of `bytes` moved in `secs` seconds (0 when no time elapsed).
    pub fn from_bytes(bytes: u64, secs: f64) -> Self {
        if secs > 0.0 {
            BitsPerSec(bytes as f64 * 8.0 / secs)
        } else {
            BitsPerSec(0.0)
        }
    }
}

/// `v` divided by `base` while it is at least `base`, at most `units - 1`
/// times: the value to print and the index of its unit.
fn scale(mut v: f64, base: f64, units: usize) -> (f64, usize) {
    let mut i = 0;
    while v >= base && i + 1 < units {
        v /= base;
        i += 1;
    }
    (v, i)
}

impl fmt::Display for Bytes {
    /// IEC units like iperf3's "Transfer" column: `3.25 GiB`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
        let (v, i) = scale(self.0 as f64, 1024.0, UNITS.len());
        if i == 0 {
            write!(f, "{} B", self.0)
        } else {
            write!(f, "{v:.2} {}", UNITS[i])
        }
    }
}

impl fmt::Display for BitsPerSec {
    /// Decimal units like link speeds: `27.53 Gbit/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["bit/s", "Kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"];
        let (v, i) = scale(self.0, 1000.0, UNITS.len());
        write!(f, "{v:.2} {}", UNITS[i])
    }
}

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1}%", self.0)
    }
}

impl fmt::Display for Nanos {
    /// Microseconds with one decimal below 10 ms, milliseconds above.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = self.0 as f64 / 1000.0;
        if us < 10_000.0 {
            write!(f, "{us:.1} us")
        } else {
            write!(f, "{:.2} ms", us / 1000.0)
        }
    }
}

impl fmt::Display for CpuId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cpu{}", self.0)
    }
}

/// A user-typed quantity that does not parse: the text as typed, what was
/// expected and an example, because clap prints the message next to the
/// flag's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// Not a duration.
    #[error("'{text}' is not a duration; use a number with a unit, e.g. 10s, 500ms or 1m30s")]
    Duration {
        /// The text as typed.
        text: String,
    },
    /// A duration longer than [`MAX_DURATION`].
    #[error("'{text}' is longer than wirescope handles; use at most 366 days (e.g. 30d)")]
    DurationTooLong {
        /// The text as typed.
        text: String,
    },
    /// Not a size.
    #[error("'{text}' is not a size; use bytes with an optional unit, e.g. 1500, 64K, 1M or 8MiB")]
    Size {
        /// The text as typed.
        text: String,
    },
    /// Not a CPU list.
    #[error("'{text}' is not a CPU list ({why}); use numbers and ranges, e.g. 0-3,8")]
    CpuList {
        /// The text as typed.
        text: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A count that is not a whole number.
    #[error("'{text}' is not a whole number; use {lo} to {hi}")]
    NotWhole {
        /// The text as typed.
        text: String,
        /// The smallest value accepted.
        lo: u64,
        /// The largest value accepted.
        hi: u64,
    },
    /// A count outside its flag's range.
    #[error("{what} {text} is out of range; use {lo} to {hi}")]
    CountRange {
        /// What the value is (the flag's name).
        what: &'static str,
        /// The text as typed, trimmed.
        text: String,
        /// The smallest value accepted.
        lo: u64,
        /// The largest value accepted.
        hi: u64,
    },
    /// A packet rate that is not a whole number.
    #[error("'{text}' is not a rate; use 0 (as fast as possible) to {hi} packets per second, e.g. 100000")]
    PpsNotNumber {
        /// The text as typed.
        text: String,
        /// The largest rate accepted.
        hi: u64,
    },
    /// A negative packet rate.
    #[error(
        "rate must be positive: {value}; use 0 (as fast as possible) to {hi} packets per second"
    )]
    PpsNegative {
        /// The rate as read.
        value: i128,
        /// The largest rate accepted.
        hi: u64,
    },
    /// A packet rate above the flag's limit.
    #[error("{value} is out of range; use 0 (as fast as possible) to {hi} packets per second")]
    PpsRange {
        /// The rate as read.
        value: i128,
        /// The largest rate accepted.
        hi: u64,
    },
}

/// Parse a duration: `10s`, `500ms`, `1m30s`, or a bare number of seconds (`10`, `0.5`).
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let t = s.trim();
    let err = || UnitError::Duration {
        text: s.to_string(),
    };
    if t.is_empty() {
        return Err(err());
    }
    let d = match t.parse::<f64>() {
        Ok(secs) => Duration::try_from_secs_f64(secs).map_err(|_| err())?,
        Err(_) => humantime::parse_duration(t).map_err(|_| err())?,
    };
    if d > MAX_DURATION {
        return Err(UnitError::DurationTooLong {
            text: s.to_string(),
        });
    }
    Ok(d)
}

/// Longest duration any option takes (a year and a day): long enough for a
/// soak test, short enough that deadlines computed from it never overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// Seconds read from a file or the network as a duration, if it is one
/// wirescope would accept (finite, not negative, at most [`MAX_DURATION`]).
pub fn duration_from_secs(secs: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| *d <= MAX_DURATION)
}

/// Parse a size in bytes: `64K`, `1M`, `8MiB`, `1500`. K/M/G are binary.
pub fn parse_size(s: &str) -> Result<Bytes, UnitError> {
    let cfg = parse_size::Config::new().with_binary();
    cfg.parse_size(s.trim())
        .map(Bytes)
        .map_err(|_| UnitError::Size {
            text: s.to_string(),
        })
}

/// Parse a CPU list as the kernel prints it: `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> Result<Vec<CpuId>, UnitError> {
    let err = |why: &'static str| UnitError::CpuList {
        text: s.to_string(),
        why,
    };
    let mut out = Vec::new();
    for part in s.trim().split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(err("empty element"));
        }
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let a: u32 = a.parse().map_err(|_| err("not a number"))?;
        let b: u32 = b.parse().map_err(|_| err("not a number"))?;
        if b < a {
            return Err(err("range goes backwards"));
        }
        if b - a > 4095 {
            return Err(err("range too large"));
        }
        out.extend((a..=b).map(CpuId));
    }
    Ok(out)
}

/// Format CPU ids back into the kernel's compact list form.
pub fn format_cpu_list(cpus: &[CpuId]) -> String {
    let mut ids: Vec<u32> = cpus.iter().map(|c| c.0).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let start = ids[i];
        let mut end = start;
        while i + 1 < ids.len() && ids[i + 1] == end + 1 {
            i += 1;
            end = ids[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// The first flag of `flags` that was given: what a usage error names
/// when options of another engine or mode are given.
pub fn first_given<const N: usize>(flags: [(bool, &'static str); N]) -> Option<&'static str> {
    flags
        .into_iter()
        .find_map(|(set, flag)| set.then_some(flag))
}

/// A whole number in `lo..=hi`, for the count flags (`--queues`, `--flows`,
/// `--streams`, ...): one parser for every count, so whatever is typed —
/// negative, or beyond the field's integer type — is answered with the
/// flag's real range, never the type's. Pair it with
/// `allow_negative_numbers = true`, or clap takes `-1` for a flag.
/// `what` names the value in the message (`--queues 0 is out of range; use
/// 1 to 1024`).
pub fn count<T>(
    what: &'static str,
    lo: u64,
    hi: u64,
) -> impl Fn(&str) -> Result<T, UnitError> + Clone + Send + Sync + 'static
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
{
    move |s: &str| {
        let out = || UnitError::CountRange {
            what,
            text: s.trim().to_string(),
            lo,
            hi,
        };
        let v: i128 = s.trim().parse().map_err(|_| UnitError::NotWhole {
            text: s.to_string(),
            lo,
            hi,
        })?;
        if v < i128::from(lo) || v > i128::from(hi) {
            return Err(out());
        }
        u64::try_from(v)
            .ok()
            .and_then(|v| T::try_from(v).ok())
            .ok_or_else(out)
    }
}

/// A packet rate in packets per second, `0..=hi` (0: as fast as possible):
/// the parser of the rate flags. A negative rate says so.
pub fn pps(hi: u64) -> impl Fn(&str) -> Result<u64, UnitError> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let v: i128 = s.trim().parse().map_err(|_| UnitError::PpsNotNumber {
            text: s.to_string(),
            hi,
        })?;
        if v < 0 {
            return Err(UnitError::PpsNegative { value: v, hi });
        }
        u64::try_from(v)
            .ok()
            .filter(|v| *v <= hi)
            .ok_or(UnitError::PpsRange { value: v, hi })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("0.25").unwrap(), Duration::from_millis(250));
        let e = parse_duration("10x").unwrap_err().to_string();
        assert!(e.contains("e.g. 10s"), "{e}");
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-1").is_err());
    }

    #[test]
    fn sizes_are_binary() {
        assert_eq!(parse_size("64K").unwrap(), Bytes(65536));
        assert_eq!(parse_size("1M").unwrap(), Bytes(1 << 20));
        assert_eq!(parse_size("8MiB").unwrap(), Bytes(8 << 20));
        assert_eq!(parse_size("1500").unwrap(), Bytes(1500));
        let e = parse_size("lots").unwrap_err().to_string();
        assert!(e.contains("64K"), "{e}");
    }

    #[test]
    fn cpu_lists() {
        let c = parse_cpu_list("0-3,8").unwrap();
        assert_eq!(c, vec![CpuId(0), CpuId(1), CpuId(2), CpuId(3), CpuId(8)]);
        assert_eq!(format_cpu_list(&c), "0-3,8");
        assert!(parse_cpu_list("3-1")
            .unwrap_err()
            .to_string()
            .contains("backwards"));
        assert!(parse_cpu_list("a").is_err());
        assert!(parse_cpu_list("1,,2").is_err());
    }

    #[test]
    fn display_units() {
        assert_eq!(Bytes(1536).to_string(), "1.50 KiB");
        assert_eq!(BitsPerSec(27.5e9).to_string(), "27.50 Gbit/s");
        assert_eq!(Nanos(12_345).to_string(), "12.3 us");
    }
}

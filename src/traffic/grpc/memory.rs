//! Peak resident memory of this process during a test point.
//!
//! Owns reading `VmHWM`/`VmRSS` from `/proc/self/status` and resetting the
//! peak (`echo 5 > /proc/self/clear_refs`, Linux >= 4.0). The engine calls
//! [`reset_peak`] when a point starts and [`peak_resident`] when it ends, so a
//! point's figure is its own, not the process's lifetime maximum.

use crate::units::Bytes;
use std::path::Path;

/// Where the memory of this process cannot be read or reset.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// Reading or writing a procfs file failed.
    #[error("{op} {path} failed: {source}")]
    Io {
        /// What was done.
        op: &'static str,
        /// The file.
        path: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file has no such line.
    #[error("{path} has no {field} line (not Linux, or a kernel without it)")]
    Missing {
        /// The file.
        path: &'static str,
        /// The field.
        field: &'static str,
    },
}

const STATUS: &str = "/proc/self/status";
const CLEAR_REFS: &str = "/proc/self/clear_refs";

/// Reset the peak resident size to the current one.
pub fn reset_peak() -> Result<(), MemoryError> {
    std::fs::write(Path::new(CLEAR_REFS), b"5").map_err(|source| MemoryError::Io {
        op: "writing 5 to",
        path: CLEAR_REFS,
        source,
    })
}

/// Peak resident size since the process started or since [`reset_peak`].
pub fn peak_resident() -> Result<Bytes, MemoryError> {
    status_field("VmHWM")
}

/// Current resident size.
pub fn resident() -> Result<Bytes, MemoryError> {
    status_field("VmRSS")
}

fn status_field(field: &'static str) -> Result<Bytes, MemoryError> {
    let text = std::fs::read_to_string(STATUS).map_err(|source| MemoryError::Io {
        op: "reading",
        path: STATUS,
        source,
    })?;
    parse_status_kib(&text, field).ok_or(MemoryError::Missing {
        path: STATUS,
        field,
    })
}

/// `VmHWM:     12345 kB` → bytes.
pub fn parse_status_kib(text: &str, field: &str) -> Option<Bytes> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        let mut parts = rest.split_whitespace();
        let kib: u64 = parts.next()?.parse().ok()?;
        (parts.next() == Some("kB")).then_some(Bytes(kib * 1024))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_lines() {
        let t = "Name:\tx\nVmPeak:\t  2000 kB\nVmHWM:\t    1536 kB\nVmRSS:\t 1024 kB\n";
        assert_eq!(parse_status_kib(t, "VmHWM"), Some(Bytes(1536 * 1024)));
        assert_eq!(parse_status_kib(t, "VmRSS"), Some(Bytes(1024 * 1024)));
        assert_eq!(parse_status_kib(t, "VmSwap"), None);
    }

    #[test]
    fn peak_follows_reset() {
        let before = peak_resident().unwrap();
        assert!(before.0 > 0);
        reset_peak().unwrap();
        // After a reset the peak restarts from the current size (other tests
        // in this process may allocate meanwhile, so only its presence is checked).
        assert!(peak_resident().unwrap().0 > 0);
        assert!(resident().unwrap().0 > 0);
    }
}

//! Peak resident memory of this process during a test point.
//!
//! Owns reading `VmHWM`/`VmRSS` from `/proc/self/status` (parsed by
//! procfs-core: this module sits below `probe`, so it uses the crate
//! directly) and resetting the
//! peak (`echo 5 > /proc/self/clear_refs`, Linux >= 4.0). The engine calls
//! [`reset_peak`] when a point starts and [`peak_resident`] when it ends, so a
//! point's figure is its own, not the process's lifetime maximum.

use crate::units::Bytes;
use procfs_core::process::Status;
use procfs_core::FromRead;
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
    /// The file is not what the kernel writes.
    #[error("{path} is not in the kernel's format ({why})")]
    Parse {
        /// The file.
        path: &'static str,
        /// What procfs-core found wrong.
        why: String,
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
    own_status().and_then(|s| kib(s.vmhwm, "VmHWM"))
}

/// Current resident size.
pub fn resident() -> Result<Bytes, MemoryError> {
    own_status().and_then(|s| kib(s.vmrss, "VmRSS"))
}

fn own_status() -> Result<Status, MemoryError> {
    let text = std::fs::read_to_string(STATUS).map_err(|source| MemoryError::Io {
        op: "reading",
        path: STATUS,
        source,
    })?;
    parse_status(&text)
}

fn kib(v: Option<u64>, field: &'static str) -> Result<Bytes, MemoryError> {
    v.map(|k| Bytes(k.saturating_mul(1024)))
        .ok_or(MemoryError::Missing {
            path: STATUS,
            field,
        })
}

/// A `/proc/PID/status` text, parsed by procfs-core (`vmhwm`, `vmrss`, ... in KiB).
pub fn parse_status(text: &str) -> Result<Status, MemoryError> {
    Status::from_read(text.as_bytes()).map_err(|e| MemoryError::Parse {
        path: STATUS,
        why: match e {
            // "bug at FILE:LINE (please report this procfs bug)\n...": the last line says what.
            procfs_core::ProcError::InternalError(i) => {
                i.msg.lines().last().unwrap_or_default().to_string()
            }
            other => other.to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_real_status_file() {
        let t = include_str!("../../../tests/fixtures/proc/self-status");
        let s = parse_status(t).unwrap();
        assert_eq!(s.vmhwm, Some(1720));
        assert_eq!(s.vmrss, Some(1720));
        assert_eq!(kib(s.vmhwm, "VmHWM").unwrap(), Bytes(1720 * 1024));
        // A kernel thread's status has no Vm lines.
        assert!(matches!(
            kib(None, "VmHWM"),
            Err(MemoryError::Missing { field: "VmHWM", .. })
        ));
        let e = parse_status("Name:\tx\nVmHWM:\t1 kB\n").unwrap_err();
        assert!(e.to_string().contains("not in the kernel's format"), "{e}");
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

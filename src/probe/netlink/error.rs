//! Errors of the netlink probes, and how they become a [`Support`] answer.

use super::wire::WireError;
use crate::probe::facts::Support;
use std::io;

/// A failed netlink query, naming the operation and the interface.
#[derive(Debug, thiserror::Error)]
pub enum NlError {
    /// The netlink socket could not be opened, configured, written or read.
    #[error("{op}: netlink socket error: {source}")]
    Socket {
        /// What was being done (`open ethtool socket`, `ETHTOOL_MSG_RINGS_GET`...).
        op: &'static str,
        /// OS error.
        #[source]
        source: io::Error,
    },
    /// The generic netlink family is not registered in this kernel.
    #[error(
        "generic netlink family \"{family}\" is not available; it needs Linux {needs} or newer"
    )]
    FamilyMissing {
        /// Family name (`ethtool`, `netdev`).
        family: &'static str,
        /// First kernel version that has it.
        needs: &'static str,
    },
    /// The request could not be encoded (for example an interface name with a NUL byte).
    #[error("{op} on {target}: cannot encode the request: {detail}")]
    Encode {
        /// Operation.
        op: &'static str,
        /// Interface name or `ifindex N`.
        target: String,
        /// What went wrong.
        detail: String,
    },
    /// The driver does not implement the query (EOPNOTSUPP); for qstats also
    /// a driver that exports no per-queue statistics (the kernel answers with
    /// an empty dump).
    #[error("{op} on {target}: not supported by the driver")]
    NotSupported {
        /// Operation.
        op: &'static str,
        /// Interface name or `ifindex N`.
        target: String,
    },
    /// The interface does not exist in this network namespace (ENODEV).
    #[error("{op}: no such interface {target}")]
    NoDevice {
        /// Operation.
        op: &'static str,
        /// Interface name or `ifindex N`.
        target: String,
    },
    /// The kernel refused the query for lack of privileges (EPERM/EACCES).
    #[error("{op} on {target}: permission denied; the query needs CAP_NET_ADMIN")]
    Permission {
        /// Operation.
        op: &'static str,
        /// Interface name or `ifindex N`.
        target: String,
    },
    /// Any other error the kernel returned.
    #[error("{op} on {target}: {}", errno_text(*errno, message.as_deref()))]
    Kernel {
        /// Operation.
        op: &'static str,
        /// Interface name or `ifindex N`.
        target: String,
        /// Positive errno.
        errno: i32,
        /// The kernel's extended-ack message, when it sent one.
        message: Option<String>,
    },
    /// The reply does not have the expected layout.
    #[error("{op} on {target}: malformed reply from the kernel: {detail}")]
    Malformed {
        /// Operation.
        op: &'static str,
        /// Interface name or `ifindex N`.
        target: String,
        /// What was wrong.
        detail: String,
    },
    /// The reply does not have the layout the kernel documents.
    #[error("{op} on {target}: malformed reply from the kernel: {source}")]
    Reply {
        /// Operation.
        op: &'static str,
        /// Interface name or `ifindex N`.
        target: String,
        /// What was wrong.
        #[source]
        source: WireError,
    },
    /// The kernel did not answer in time.
    #[error("{op} on {target}: no reply from the kernel within {secs} s")]
    Timeout {
        /// Operation.
        op: &'static str,
        /// Interface name or `ifindex N`.
        target: String,
        /// The timeout.
        secs: u64,
    },
}

fn errno_text(errno: i32, message: Option<&str>) -> String {
    let base = io::Error::from_raw_os_error(errno).to_string();
    match message {
        Some(m) if !m.is_empty() => format!("{base} ({m})"),
        _ => base,
    }
}

impl NlError {
    /// Classify a negative-errno answer from the kernel.
    pub(super) fn from_errno(
        op: &'static str,
        target: &str,
        errno: i32,
        message: Option<String>,
    ) -> NlError {
        let target = target.to_string();
        match errno {
            libc::EOPNOTSUPP => NlError::NotSupported { op, target },
            libc::ENODEV => NlError::NoDevice { op, target },
            libc::EPERM | libc::EACCES => NlError::Permission { op, target },
            _ => NlError::Kernel {
                op,
                target,
                errno,
                message,
            },
        }
    }

    /// The [`Support`] answer for this failure: EOPNOTSUPP becomes
    /// [`Support::NotSupported`] naming `driver`, everything else an
    /// [`Support::Error`] with a short reason.
    pub(super) fn into_support<T>(self, driver: &str) -> Support<T> {
        match self {
            NlError::NotSupported { .. } => Support::NotSupported {
                driver: driver.to_string(),
            },
            NlError::NoDevice { target, .. } => {
                Support::Error(format!("no such interface {target}"))
            }
            NlError::Permission { .. } => Support::Error("needs CAP_NET_ADMIN".to_string()),
            other => Support::Error(other.to_string()),
        }
    }
}

/// `Ok(v)` → [`Support::Value`], `Err(e)` → [`NlError::into_support`].
pub(super) fn to_support<T>(r: Result<T, NlError>, driver: &str) -> Support<T> {
    r.map_or_else(|e| e.into_support(driver), Support::Value)
}

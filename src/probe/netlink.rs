//! ethtool and netdev generic netlink (neli): NIC facts and per-queue qstats.
//!
//! Owns the live, netlink side of the NIC facts in [`super::facts`]:
//! [`EthtoolNl`] answers `ethtool -l/-g/-k/-c/-a` and link questions with
//! ethtool netlink `*_GET` requests, [`NetdevNl`] reads per-queue counters
//! with the netdev family's `NETDEV_CMD_QSTATS_GET` dump. It only ever sends
//! GET requests and dumps: it never changes the host.
//!
//! A socket belongs to the network namespace of the thread that opened it,
//! so a caller that wants another namespace opens the probe on a thread that
//! has entered it and may then use it from anywhere. A query the driver does
//! not implement is [`Support::NotSupported`](super::facts::Support) naming
//! the driver, not an error. Replies are parsed defensively: a malformed
//! reply is an [`NlError::Malformed`] or an [`NlError::Reply`] carrying the
//! [`WireError`] that names the part, never a panic.

mod consts;
mod error;
mod ethtool;
pub mod ethtool_set;
mod features;
mod genl;
pub mod link;
mod netdev;
#[cfg(test)]
mod tests;
mod wire;

pub use error::NlError;
pub use ethtool::EthtoolNl;
pub use features::FEATURE_ALIASES;
pub use netdev::{NetdevNl, QueueStat, QueueType};
pub use wire::WireError;

/// The text of a NUL-terminated (or NUL-padded) byte string, lossy UTF-8.
pub(super) fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

//! rtnetlink link requests for the MTU: read it with its driver limits
//! (`RTM_GETLINK`: `IFLA_MTU`, `IFLA_MIN_MTU`, `IFLA_MAX_MTU`) and change it
//! (`RTM_NEWLINK` with `IFLA_MTU`, what `ip link set dev IF mtu N` sends).
//!
//! Like [`super::ethtool_set`] this exists for [`crate::tune`] only: the
//! read-only probes take the MTU from sysfs. sysfs has no maximum, and the
//! tuning code must reject an MTU above the driver's limit before it changes
//! anything, so the read goes through rtnetlink too. Replies are walked with
//! the same length-checked parser as the generic netlink replies.

use super::error::NlError;
use super::wire::{split_messages, Attrs, Kind, WireError};
use neli::{
    consts::{
        nl::NlmF,
        rtnl::{Arphrd, Iff, Ifla, RtAddrFamily, Rtm},
        socket::{Msg, NlFamily},
    },
    nl::{NlPayload, NlmsghdrBuilder},
    rtnl::{IfinfomsgBuilder, RtattrBuilder},
    socket::NlSocket,
    types::RtBuffer,
    utils::Groups,
    Size, ToBytes,
};
use std::io::{self, Cursor};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// How long one reply may take.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// Size of `struct ifinfomsg`.
const IFINFOMSG_LEN: usize = 16;

/// MTU of an interface and the range its driver accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MtuInfo {
    /// ifindex.
    pub ifindex: u32,
    /// Current MTU.
    pub mtu: u32,
    /// Smallest MTU the driver takes (`IFLA_MIN_MTU`, Linux 4.10+).
    pub min: Option<u32>,
    /// Largest MTU the driver takes (`IFLA_MAX_MTU`).
    pub max: Option<u32>,
}

/// A NETLINK_ROUTE socket in the network namespace of the thread that opened it.
pub struct LinkNl {
    sock: NlSocket,
    seq: u32,
}

impl std::fmt::Debug for LinkNl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkNl").finish_non_exhaustive()
    }
}

impl LinkNl {
    /// Open the socket (extended ACK on, receive timeout set).
    pub fn open() -> Result<Self, NlError> {
        let op = "open rtnetlink socket";
        let err = |source| NlError::Socket { op, source };
        let sock = NlSocket::connect(NlFamily::Route, None, Groups::empty()).map_err(err)?;
        sock.enable_ext_ack(true).map_err(err)?;
        // SAFETY: the descriptor belongs to `sock`, which outlives this borrow.
        let fd = unsafe { BorrowedFd::borrow_raw(sock.as_raw_fd()) };
        let tv = nix::sys::time::TimeVal::new(REPLY_TIMEOUT.as_secs() as _, 0);
        nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::ReceiveTimeout, &tv)
            .map_err(|e| err(io::Error::from(e)))?;
        Ok(LinkNl { sock, seq: 0 })
    }

    /// MTU and its limits (`ip -d link show IF`: `mtu`, `minmtu`, `maxmtu`).
    pub fn mtu(&mut self, ifname: &str) -> Result<MtuInfo, NlError> {
        let op = "RTM_GETLINK";
        let index = ifindex(op, ifname)?;
        let replies = self.request(op, ifname, Rtm::Getlink, index, None)?;
        let bad = |source: WireError| NlError::Reply {
            op,
            target: ifname.to_string(),
            source,
        };
        let payload = match replies.as_slice() {
            [one] => one,
            other => {
                return Err(NlError::Malformed {
                    op,
                    target: ifname.to_string(),
                    detail: format!("{} replies, expected 1", other.len()),
                })
            }
        };
        let attrs = Attrs::parse(payload.get(IFINFOMSG_LEN..).unwrap_or(&[])).map_err(bad)?;
        let mtu = attrs
            .u32(libc::IFLA_MTU)
            .map_err(bad)?
            .ok_or_else(|| bad(WireError::missing("IFLA_MTU")))?;
        Ok(MtuInfo {
            ifindex: index,
            mtu,
            min: attrs.u32(libc::IFLA_MIN_MTU).map_err(bad)?,
            max: attrs.u32(libc::IFLA_MAX_MTU).map_err(bad)?,
        })
    }

    /// `ip link set dev IF mtu N`.
    pub fn set_mtu(&mut self, ifname: &str, mtu: u32) -> Result<(), NlError> {
        let op = "RTM_NEWLINK (mtu)";
        let index = ifindex(op, ifname)?;
        self.request(op, ifname, Rtm::Newlink, index, Some(mtu))?;
        Ok(())
    }

    /// One acknowledged request about `index`; the payloads of the data replies.
    fn request(
        &mut self,
        op: &'static str,
        ifname: &str,
        cmd: Rtm,
        index: u32,
        mtu: Option<u32>,
    ) -> Result<Vec<Vec<u8>>, NlError> {
        let encode = |d: String| NlError::Encode {
            op,
            target: ifname.to_string(),
            detail: d,
        };
        let mut attrs = RtBuffer::new();
        if let Some(m) = mtu {
            attrs.push(
                RtattrBuilder::default()
                    .rta_type(Ifla::Mtu)
                    .rta_payload(m)
                    .build()
                    .map_err(|e| encode(e.to_string()))?,
            );
        }
        let info = IfinfomsgBuilder::default()
            .ifi_family(RtAddrFamily::Unspecified)
            .ifi_type(Arphrd::from(0))
            .ifi_index(i32::try_from(index).map_err(|e| encode(e.to_string()))?)
            .ifi_flags(Iff::empty())
            .ifi_change(Iff::empty())
            .rtattrs(attrs)
            .build()
            .map_err(|e| encode(e.to_string()))?;
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let msg = NlmsghdrBuilder::default()
            .nl_type(cmd)
            .nl_flags(NlmF::REQUEST | NlmF::ACK)
            .nl_seq(seq)
            .nl_payload(NlPayload::Payload(info))
            .build()
            .map_err(|e| encode(e.to_string()))?;
        let mut buf = Cursor::new(vec![0u8; msg.padded_size()]);
        msg.to_bytes(&mut buf).map_err(|e| encode(e.to_string()))?;
        let io_err = |source| NlError::Socket { op, source };
        self.sock
            .send(buf.get_ref(), Msg::empty())
            .map_err(io_err)?;
        let mut out = Vec::new();
        loop {
            let datagram = self.recv(op, ifname)?;
            let msgs = split_messages(&datagram).map_err(|source| NlError::Reply {
                op,
                target: ifname.to_string(),
                source,
            })?;
            for m in msgs {
                if m.seq != seq {
                    continue;
                }
                match m.kind {
                    Kind::Noop => {}
                    Kind::Ack | Kind::Done => return Ok(out),
                    Kind::Error { errno, message } => {
                        return Err(NlError::from_errno(op, ifname, errno, message))
                    }
                    Kind::Overrun => {
                        return Err(NlError::Malformed {
                            op,
                            target: ifname.to_string(),
                            detail: "NLMSG_OVERRUN".into(),
                        })
                    }
                    Kind::Data { payload, .. } => out.push(payload.to_vec()),
                }
            }
        }
    }

    fn recv(&self, op: &'static str, ifname: &str) -> Result<Vec<u8>, NlError> {
        loop {
            let mut empty: [u8; 0] = [];
            let peeked = self.sock.recv(&mut empty[..], Msg::PEEK | Msg::TRUNC);
            let len = match peeked {
                Ok((len, _)) => len,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(recv_error(op, ifname, e)),
            };
            let mut buf = vec![0u8; len];
            match self.sock.recv(&mut buf[..], Msg::TRUNC) {
                Ok((n, _)) if n == len => return Ok(buf),
                Ok((n, _)) => {
                    return Err(NlError::Malformed {
                        op,
                        target: ifname.to_string(),
                        detail: format!("datagram of {n} bytes, peeked {len}"),
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(recv_error(op, ifname, e)),
            }
        }
    }
}

fn recv_error(op: &'static str, ifname: &str, e: io::Error) -> NlError {
    if matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    ) {
        NlError::Timeout {
            op,
            target: ifname.to_string(),
            secs: REPLY_TIMEOUT.as_secs(),
        }
    } else {
        NlError::Socket { op, source: e }
    }
}

fn ifindex(op: &'static str, ifname: &str) -> Result<u32, NlError> {
    nix::net::if_::if_nametoindex(ifname).map_err(|_| NlError::NoDevice {
        op,
        target: ifname.to_string(),
    })
}

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
use super::genl::{exchange, open_socket, Ctx};
use super::wire::{Attrs, WireError};
use neli::{
    consts::{
        nl::NlmF,
        rtnl::{Arphrd, Iff, Ifla, RtAddrFamily, Rtm},
        socket::NlFamily,
    },
    nl::{NlPayload, NlmsghdrBuilder},
    rtnl::{IfinfomsgBuilder, RtattrBuilder},
    socket::NlSocket,
    types::RtBuffer,
};

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
        let sock = open_socket(NlFamily::Route, "open rtnetlink socket")?;
        Ok(LinkNl { sock, seq: 0 })
    }

    /// MTU and its limits (`ip -d link show IF`: `mtu`, `minmtu`, `maxmtu`).
    pub fn mtu(&mut self, ifname: &str) -> Result<MtuInfo, NlError> {
        let op = "RTM_GETLINK";
        let index = ifindex(op, ifname)?;
        let replies = self.request(op, ifname, Rtm::Getlink, index, None)?;
        let ctx = Ctx { op, target: ifname };
        let bad = |source: WireError| ctx.reply(source);
        let [payload] = replies.as_slice() else {
            return Err(ctx.malformed(format!("{} replies, expected 1", replies.len())));
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
        let ctx = Ctx { op, target: ifname };
        let mut attrs = RtBuffer::new();
        if let Some(m) = mtu {
            attrs.push(
                RtattrBuilder::default()
                    .rta_type(Ifla::Mtu)
                    .rta_payload(m)
                    .build()
                    .map_err(|e| ctx.encode(e))?,
            );
        }
        let info = IfinfomsgBuilder::default()
            .ifi_family(RtAddrFamily::Unspecified)
            .ifi_type(Arphrd::from(0))
            .ifi_index(i32::try_from(index).map_err(|e| ctx.encode(e))?)
            .ifi_flags(Iff::empty())
            .ifi_change(Iff::empty())
            .rtattrs(attrs)
            .build()
            .map_err(|e| ctx.encode(e))?;
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let msg = NlmsghdrBuilder::default()
            .nl_type(cmd)
            .nl_flags(NlmF::REQUEST | NlmF::ACK)
            .nl_seq(seq)
            .nl_payload(NlPayload::Payload(info))
            .build()
            .map_err(|e| ctx.encode(e))?;
        exchange(&self.sock, &ctx, &msg, seq, |_, payload| {
            Ok(payload.to_vec())
        })
    }
}

fn ifindex(op: &'static str, ifname: &str) -> Result<u32, NlError> {
    nix::net::if_::if_nametoindex(ifname).map_err(|_| NlError::NoDevice {
        op,
        target: ifname.to_string(),
    })
}

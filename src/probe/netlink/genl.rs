//! One generic netlink socket: family lookup, requests encoded with neli,
//! and a reply loop that reads until the kernel says it is finished.
//!
//! The termination rules matter: a `do` request is acknowledged
//! (`NLM_F_ACK`) and ends at the ACK, a dump ends only at `NLMSG_DONE`. The
//! netdev family sends its dump parts without `NLM_F_MULTI`, so that flag is
//! never used to decide that a dump is over.

use super::error::NlError;
use super::wire::{split_messages, Kind, Reply, WireError};
use neli::{
    consts::{
        nl::NlmF,
        socket::{Msg, NlFamily},
    },
    genl::{AttrTypeBuilder, GenlmsghdrBuilder, Nlattr, NlattrBuilder},
    nl::{NlPayload, NlmsghdrBuilder},
    socket::NlSocket,
    types::{Buffer, GenlBuffer},
    utils::Groups,
    Size, ToBytes,
};
use std::io::{self, Cursor};
use std::os::unix::io::AsRawFd;
use std::time::Duration;

/// How long one reply may take before the query fails with a timeout.
pub(super) const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// Version of the nlctrl family's messages.
const CTRL_VERSION: u8 = 2;

/// What a query is, for error messages.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ctx<'a> {
    /// The operation (`ETHTOOL_MSG_RINGS_GET`).
    pub op: &'static str,
    /// The interface name or `ifindex N`.
    pub target: &'a str,
}

impl Ctx<'_> {
    /// A [`NlError::Malformed`] for this query.
    pub fn malformed(&self, detail: impl Into<String>) -> NlError {
        NlError::Malformed {
            op: self.op,
            target: self.target.to_string(),
            detail: detail.into(),
        }
    }

    /// A [`NlError::Reply`] for this query: the reply's layout is wrong.
    pub fn reply(&self, source: WireError) -> NlError {
        NlError::Reply {
            op: self.op,
            target: self.target.to_string(),
            source,
        }
    }

    /// A [`NlError::Encode`] for this query.
    pub(super) fn encode(&self, detail: impl ToString) -> NlError {
        NlError::Encode {
            op: self.op,
            target: self.target.to_string(),
            detail: detail.to_string(),
        }
    }

    /// A socket error of this query: a reply that took longer than
    /// [`REPLY_TIMEOUT`] is [`NlError::Timeout`].
    pub(super) fn io(&self, source: io::Error) -> NlError {
        if matches!(
            source.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ) {
            return NlError::Timeout {
                op: self.op,
                target: self.target.to_string(),
                secs: REPLY_TIMEOUT.as_secs(),
            };
        }
        NlError::Socket {
            op: self.op,
            source,
        }
    }
}

/// A generic netlink socket talking to one family.
pub(super) struct GenlSocket {
    sock: NlSocket,
    family_id: u16,
    version: u8,
    seq: u32,
}

/// The socket itself has nothing to show: the owners' `Debug` derives stay
/// opaque.
impl std::fmt::Debug for GenlSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenlSocket").finish_non_exhaustive()
    }
}

impl GenlSocket {
    /// Open a NETLINK_GENERIC socket in the calling thread's network
    /// namespace and resolve `family` once.
    pub fn open(family: &'static str, version: u8, needs: &'static str) -> Result<Self, NlError> {
        let sock = open_socket(NlFamily::Generic, "open generic netlink socket")?;
        let mut s = GenlSocket {
            sock,
            family_id: libc::GENL_ID_CTRL as u16,
            version: CTRL_VERSION,
            seq: 0,
        };
        s.family_id = s.resolve(family, needs)?;
        s.version = version;
        Ok(s)
    }

    fn resolve(&mut self, family: &'static str, needs: &'static str) -> Result<u16, NlError> {
        let ctx = Ctx {
            op: "CTRL_CMD_GETFAMILY",
            target: family,
        };
        let attrs = [attr_str(&ctx, libc::CTRL_ATTR_FAMILY_NAME as u16, family)?];
        let replies = match self.request(&ctx, libc::CTRL_CMD_GETFAMILY as u8, attrs, false) {
            Err(NlError::Kernel { errno, .. }) if errno == libc::ENOENT => {
                return Err(NlError::FamilyMissing { family, needs })
            }
            r => r?,
        };
        let reply = single(&ctx, replies, libc::CTRL_CMD_NEWFAMILY as u8)?;
        reply
            .attrs
            .u16(libc::CTRL_ATTR_FAMILY_ID as u16)
            .map_err(|e| ctx.reply(e))?
            .ok_or_else(|| ctx.malformed("no CTRL_ATTR_FAMILY_ID"))
    }

    /// Send one request of this family and collect the replies: a `do`
    /// request (acknowledged) or, with `dump`, a dump read to `NLMSG_DONE`.
    pub fn request(
        &mut self,
        ctx: &Ctx<'_>,
        cmd: u8,
        attrs: impl IntoIterator<Item = Nlattr<u16, Buffer>>,
        dump: bool,
    ) -> Result<Vec<Reply>, NlError> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let genl = GenlmsghdrBuilder::default()
            .cmd(cmd)
            .version(self.version)
            .attrs(attrs.into_iter().collect::<GenlBuffer<u16, Buffer>>())
            .build()
            .map_err(|e| ctx.encode(e))?;
        let flags = if dump {
            NlmF::REQUEST | NlmF::DUMP
        } else {
            NlmF::REQUEST | NlmF::ACK
        };
        let msg = NlmsghdrBuilder::default()
            .nl_type(self.family_id)
            .nl_flags(flags)
            .nl_seq(seq)
            .nl_payload(NlPayload::Payload(genl))
            .build()
            .map_err(|e| ctx.encode(e))?;
        let family_id = self.family_id;
        exchange(&self.sock, ctx, &msg, seq, |nl_type, payload| {
            if nl_type != family_id {
                return Err(ctx.malformed(format!(
                    "message type {nl_type}, expected family id {family_id}"
                )));
            }
            Reply::parse(payload).map_err(|e| ctx.reply(e))
        })
    }
}

/// A netlink socket of `family` in the calling thread's network namespace,
/// with extended ACK on (it turns "Invalid argument" into the kernel's
/// reason) and replies bounded by [`REPLY_TIMEOUT`]; `op` names the step in
/// errors.
pub(super) fn open_socket(family: NlFamily, op: &'static str) -> Result<NlSocket, NlError> {
    let socket_err = |source| NlError::Socket { op, source };
    let sock = NlSocket::connect(family, None, Groups::empty()).map_err(socket_err)?;
    sock.enable_ext_ack(true).map_err(socket_err)?;
    // SAFETY: the descriptor is owned by `sock` and open for the whole call.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(sock.as_raw_fd()) };
    socket2::SockRef::from(&fd)
        .set_read_timeout(Some(REPLY_TIMEOUT))
        .map_err(socket_err)?;
    Ok(sock)
}

/// Send the request `msg` (sequence number `seq`) and collect the answers
/// to it until the kernel's ACK or DONE; `data` turns each data message
/// (its type and payload) into an item, or fails the request.
pub(super) fn exchange<M: Size + ToBytes, T>(
    sock: &NlSocket,
    ctx: &Ctx<'_>,
    msg: &M,
    seq: u32,
    mut data: impl FnMut(u16, &[u8]) -> Result<T, NlError>,
) -> Result<Vec<T>, NlError> {
    let mut buf = Cursor::new(vec![0u8; msg.padded_size()]);
    msg.to_bytes(&mut buf).map_err(|e| ctx.encode(e))?;
    sock.send(buf.get_ref(), Msg::empty())
        .map_err(|e| ctx.io(e))?;
    let mut out = Vec::new();
    loop {
        let datagram = recv_datagram(sock, ctx)?;
        for m in split_messages(&datagram).map_err(|e| ctx.reply(e))? {
            if m.seq != seq {
                continue; // a late answer to an earlier request that timed out
            }
            match m.kind {
                Kind::Noop => {}
                Kind::Ack | Kind::Done => return Ok(out),
                Kind::Error { errno, message } => {
                    return Err(NlError::from_errno(ctx.op, ctx.target, errno, message))
                }
                Kind::Overrun => return Err(ctx.malformed("NLMSG_OVERRUN")),
                Kind::Data { nl_type, payload } => out.push(data(nl_type, payload)?),
            }
        }
    }
}

/// Read one datagram, sized exactly by peeking first.
fn recv_datagram(sock: &NlSocket, ctx: &Ctx<'_>) -> Result<Vec<u8>, NlError> {
    loop {
        let mut empty: [u8; 0] = [];
        let len = match sock.recv(&mut empty[..], Msg::PEEK | Msg::TRUNC) {
            Ok((len, _)) => len,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ctx.io(e)),
        };
        let mut buf = vec![0u8; len];
        match sock.recv(&mut buf[..], Msg::TRUNC) {
            Ok((n, _)) if n == len => return Ok(buf),
            Ok((n, _)) => return Err(ctx.malformed(format!("datagram of {n} bytes, peeked {len}"))),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ctx.io(e)),
        }
    }
}

/// The one reply of a `do` request, which must carry `cmd`.
pub(super) fn single(ctx: &Ctx<'_>, replies: Vec<Reply>, cmd: u8) -> Result<Reply, NlError> {
    let n = replies.len();
    let mut it = replies.into_iter();
    match (it.next(), n) {
        (Some(r), 1) if r.cmd == cmd => Ok(r),
        (Some(r), 1) => Err(ctx.malformed(format!("reply command {}, expected {cmd}", r.cmd))),
        _ => Err(ctx.malformed(format!("{n} replies, expected 1"))),
    }
}

/// An attribute with a NUL-terminated string payload.
pub(super) fn attr_str(ctx: &Ctx<'_>, ty: u16, s: &str) -> Result<Nlattr<u16, Buffer>, NlError> {
    if s.contains('\0') {
        return Err(ctx.encode("string contains a NUL byte"));
    }
    attr(ctx, ty, s)
}

/// An attribute with a fixed-size payload (`u32`...).
pub(super) fn attr<P: Size + ToBytes>(
    ctx: &Ctx<'_>,
    ty: u16,
    payload: P,
) -> Result<Nlattr<u16, Buffer>, NlError> {
    NlattrBuilder::default()
        .nla_type(
            AttrTypeBuilder::default()
                .nla_type(ty)
                .build()
                .map_err(|e| ctx.encode(e))?,
        )
        .nla_payload(payload)
        .build()
        .map_err(|e| ctx.encode(e))
}

/// A nested attribute (NLA_F_NESTED set) holding `inner`.
pub(super) fn nest(
    ctx: &Ctx<'_>,
    ty: u16,
    inner: &[Nlattr<u16, Buffer>],
) -> Result<Nlattr<u16, Buffer>, NlError> {
    let mut outer = NlattrBuilder::default()
        .nla_type(
            AttrTypeBuilder::default()
                .nla_type(ty)
                .nla_nested(true)
                .build()
                .map_err(|e| ctx.encode(e))?,
        )
        .nla_payload(Vec::<u8>::new())
        .build()
        .map_err(|e| ctx.encode(e))?;
    for a in inner {
        outer = outer.nest(a).map_err(|e| ctx.encode(e))?;
    }
    Ok(outer)
}

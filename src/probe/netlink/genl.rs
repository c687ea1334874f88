//! One generic netlink socket: family lookup, requests encoded with neli,
//! and a reply loop that reads until the kernel says it is finished.
//!
//! neli supplies the socket, the `Nlmsghdr`/`Genlmsghdr`/`Nlattr`
//! serialization of requests and the attribute parsing of replies. The outer
//! netlink headers of replies are walked here, with every length checked,
//! because the termination rules matter: a `do` request is acknowledged
//! (`NLM_F_ACK`) and ends at the ACK, a dump ends only at `NLMSG_DONE`; the
//! netdev family sends its dump parts without `NLM_F_MULTI`, so that flag is
//! never used to decide that a dump is over.

use super::error::NlError;
use neli::{
    consts::{
        nl::NlmF,
        socket::{Msg, NlFamily},
    },
    genl::{AttrTypeBuilder, Genlmsghdr, GenlmsghdrBuilder, Nlattr, NlattrBuilder},
    nl::{NlPayload, NlmsghdrBuilder},
    socket::NlSocket,
    types::{Buffer, GenlBuffer},
    utils::Groups,
    FromBytesWithInput, Size, ToBytes,
};
use std::io::{self, Cursor};
use std::os::unix::io::AsRawFd;
use std::time::Duration;

/// How long one reply may take before the query fails with a timeout.
pub(super) const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

const NLMSG_HDRLEN: usize = 16;
const NLMSG_NOOP: u16 = libc::NLMSG_NOOP as u16;
const NLMSG_ERROR: u16 = libc::NLMSG_ERROR as u16;
const NLMSG_DONE: u16 = libc::NLMSG_DONE as u16;
const NLMSG_OVERRUN: u16 = libc::NLMSG_OVERRUN as u16;
const NLM_F_CAPPED: u16 = libc::NLM_F_CAPPED as u16;
const NLM_F_ACK_TLVS: u16 = libc::NLM_F_ACK_TLVS as u16;
/// `NLMSGERR_ATTR_MSG` (`include/uapi/linux/netlink.h`).
const NLMSGERR_ATTR_MSG: u16 = 1;
/// `NLMSGERR_ATTR_MISS_TYPE`: the type of a missing required attribute.
const NLMSGERR_ATTR_MISS_TYPE: u16 = 5;
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
    pub fn malformed(&self, detail: impl Into<String>) -> NlError {
        NlError::Malformed {
            op: self.op,
            target: self.target.to_string(),
            detail: detail.into(),
        }
    }

    fn encode(&self, detail: impl ToString) -> NlError {
        NlError::Encode {
            op: self.op,
            target: self.target.to_string(),
            detail: detail.to_string(),
        }
    }

    fn io(&self, source: io::Error) -> NlError {
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

/// One parsed generic netlink reply message.
#[derive(Debug)]
pub(super) struct Reply {
    /// Generic netlink command of the reply.
    pub cmd: u8,
    /// Its top-level attributes.
    pub attrs: Attrs,
}

/// A generic netlink socket talking to one family.
pub(super) struct GenlSocket {
    sock: NlSocket,
    family_id: u16,
    version: u8,
    seq: u32,
}

impl GenlSocket {
    /// Open a NETLINK_GENERIC socket in the calling thread's network
    /// namespace and resolve `family` once.
    pub fn open(family: &'static str, version: u8, needs: &'static str) -> Result<Self, NlError> {
        let op = "open generic netlink socket";
        let socket_err = |source| NlError::Socket { op, source };
        let sock =
            NlSocket::connect(NlFamily::Generic, None, Groups::empty()).map_err(socket_err)?;
        // Extended ACK turns "Invalid argument" into the kernel's reason.
        sock.enable_ext_ack(true).map_err(socket_err)?;
        set_recv_timeout(&sock, REPLY_TIMEOUT).map_err(socket_err)?;
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
            .map_err(|e| ctx.malformed(e))?
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
        let mut buf = Cursor::new(vec![0u8; msg.padded_size()]);
        msg.to_bytes(&mut buf).map_err(|e| ctx.encode(e))?;
        self.sock
            .send(buf.get_ref(), Msg::empty())
            .map_err(|e| ctx.io(e))?;

        let mut replies = Vec::new();
        loop {
            let datagram = self.recv(ctx)?;
            for m in split_messages(&datagram).map_err(|e| ctx.malformed(e))? {
                if m.seq != seq {
                    continue; // a late answer to an earlier request that timed out
                }
                match m.kind {
                    Kind::Noop => {}
                    Kind::Ack | Kind::Done => return Ok(replies),
                    Kind::Error { errno, message } => {
                        return Err(NlError::from_errno(ctx.op, ctx.target, errno, message))
                    }
                    Kind::Overrun => return Err(ctx.malformed("NLMSG_OVERRUN")),
                    Kind::Data { nl_type, payload } => {
                        if nl_type != self.family_id {
                            return Err(ctx.malformed(format!(
                                "message type {nl_type}, expected family id {}",
                                self.family_id
                            )));
                        }
                        replies.push(parse_genl(payload).map_err(|e| ctx.malformed(e))?);
                    }
                }
            }
        }
    }

    /// Read one datagram, sized exactly by peeking first.
    fn recv(&self, ctx: &Ctx<'_>) -> Result<Vec<u8>, NlError> {
        loop {
            let mut empty: [u8; 0] = [];
            let len = match self.sock.recv(&mut empty[..], Msg::PEEK | Msg::TRUNC) {
                Ok((len, _)) => len,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ctx.io(e)),
            };
            let mut buf = vec![0u8; len];
            match self.sock.recv(&mut buf[..], Msg::TRUNC) {
                Ok((n, _)) if n == len => return Ok(buf),
                Ok((n, _)) => {
                    return Err(ctx.malformed(format!("datagram of {n} bytes, peeked {len}")))
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ctx.io(e)),
            }
        }
    }
}

fn set_recv_timeout(sock: &NlSocket, d: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: d.as_secs() as libc::time_t,
        tv_usec: d.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: the descriptor is owned by `sock` and open for the whole call;
    // `tv` is an initialised timeval and its exact size is passed.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
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

#[derive(Debug, PartialEq)]
enum Kind<'a> {
    Noop,
    Ack,
    Done,
    Overrun,
    Error { errno: i32, message: Option<String> },
    Data { nl_type: u16, payload: &'a [u8] },
}

#[derive(Debug, PartialEq)]
struct RawMsg<'a> {
    seq: u32,
    kind: Kind<'a>,
}

fn ne_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn ne_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn align4(n: usize) -> usize {
    n.saturating_add(3) & !3
}

/// Split one datagram into netlink messages, checking every length.
fn split_messages(buf: &[u8]) -> Result<Vec<RawMsg<'_>>, String> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < buf.len() {
        let rest = &buf[off..];
        let len = ne_u32(rest, 0).ok_or("truncated nlmsghdr")? as usize;
        if len < NLMSG_HDRLEN || len > rest.len() {
            return Err(format!("nlmsg_len {len} with {} bytes left", rest.len()));
        }
        let nl_type = ne_u16(rest, 4).ok_or("truncated nlmsghdr")?;
        let flags = ne_u16(rest, 6).ok_or("truncated nlmsghdr")?;
        let seq = ne_u32(rest, 8).ok_or("truncated nlmsghdr")?;
        let payload = &rest[NLMSG_HDRLEN..len];
        let kind = match nl_type {
            NLMSG_NOOP => Kind::Noop,
            NLMSG_OVERRUN => Kind::Overrun,
            NLMSG_ERROR => error_kind(payload, flags)?,
            NLMSG_DONE => match payload.get(..4) {
                // A dump that failed part-way reports its errno in DONE.
                Some(b) if i32::from_ne_bytes(b.try_into().map_err(|_| "DONE")?) < 0 => {
                    done_error(payload, flags)?
                }
                _ => Kind::Done,
            },
            _ => Kind::Data { nl_type, payload },
        };
        out.push(RawMsg { seq, kind });
        off += align4(len).min(rest.len());
    }
    Ok(out)
}

/// NLMSG_ERROR: errno 0 is an ACK; otherwise the echoed request header (or
/// whole request) follows, then extended-ack attributes when flagged.
fn error_kind(payload: &[u8], flags: u16) -> Result<Kind<'static>, String> {
    let code = ne_u32(payload, 0).ok_or("truncated nlmsgerr")? as i32;
    if code == 0 {
        return Ok(Kind::Ack);
    }
    let echoed = if flags & NLM_F_CAPPED != 0 {
        NLMSG_HDRLEN
    } else {
        ne_u32(payload, 4).ok_or("truncated nlmsgerr")? as usize
    };
    let message = if flags & NLM_F_ACK_TLVS != 0 {
        let tlv_at = 4usize.saturating_add(align4(echoed));
        ext_ack_message(payload.get(tlv_at..).unwrap_or(&[]))
    } else {
        None
    };
    Ok(Kind::Error {
        errno: code.saturating_neg(),
        message,
    })
}

fn done_error(payload: &[u8], flags: u16) -> Result<Kind<'static>, String> {
    let code = ne_u32(payload, 0).ok_or("truncated NLMSG_DONE")? as i32;
    let message = if flags & NLM_F_ACK_TLVS != 0 {
        ext_ack_message(payload.get(4..).unwrap_or(&[]))
    } else {
        None
    };
    Ok(Kind::Error {
        errno: code.saturating_neg(),
        message,
    })
}

/// The extended ACK's text, or a note naming a missing attribute.
fn ext_ack_message(tlvs: &[u8]) -> Option<String> {
    let attrs = Attrs::parse(tlvs).ok()?;
    if let Ok(Some(m)) = attrs.string(NLMSGERR_ATTR_MSG) {
        return Some(m);
    }
    let missing = attrs.u32(NLMSGERR_ATTR_MISS_TYPE).ok().flatten()?;
    Some(format!("missing attribute {missing}"))
}

fn parse_genl(payload: &[u8]) -> Result<Reply, String> {
    let msg =
        Genlmsghdr::<u8, u16>::from_bytes_with_input(&mut Cursor::new(payload), payload.len())
            .map_err(|e| format!("generic netlink message: {e}"))?;
    Ok(Reply {
        cmd: *msg.cmd(),
        attrs: Attrs(msg.attrs().clone()),
    })
}

/// A parsed attribute list (neli's [`GenlBuffer`]) with typed accessors.
///
/// Accessors return `Ok(None)` for an absent attribute and `Err` for one
/// whose payload has the wrong size, so a malformed reply is an error and
/// never a panic.
#[derive(Debug)]
pub(super) struct Attrs(GenlBuffer<u16, Buffer>);

impl Attrs {
    /// Parse a run of attributes.
    pub fn parse(bytes: &[u8]) -> Result<Attrs, String> {
        GenlBuffer::<u16, Buffer>::from_bytes_with_input(&mut Cursor::new(bytes), bytes.len())
            .map(Attrs)
            .map_err(|e| format!("attributes: {e}"))
    }

    /// Every attribute as (type without flags, payload).
    pub fn iter(&self) -> impl Iterator<Item = (u16, &[u8])> {
        self.0
            .iter()
            .map(|a| (*a.nla_type().nla_type(), a.nla_payload().as_ref()))
    }

    /// Payload of the first attribute of type `ty`.
    pub fn get(&self, ty: u16) -> Option<&[u8]> {
        self.iter().find(|(t, _)| *t == ty).map(|(_, p)| p)
    }

    /// Whether a flag attribute is present.
    pub fn flag(&self, ty: u16) -> bool {
        self.get(ty).is_some()
    }

    /// A u8 attribute.
    pub fn u8(&self, ty: u16) -> Result<Option<u8>, String> {
        self.get(ty)
            .map(|p| fixed::<1>(ty, p).map(|b| b[0]))
            .transpose()
    }

    /// A u16 attribute.
    pub fn u16(&self, ty: u16) -> Result<Option<u16>, String> {
        self.get(ty)
            .map(|p| fixed::<2>(ty, p).map(u16::from_ne_bytes))
            .transpose()
    }

    /// A u32 attribute.
    pub fn u32(&self, ty: u16) -> Result<Option<u32>, String> {
        self.get(ty)
            .map(|p| fixed::<4>(ty, p).map(u32::from_ne_bytes))
            .transpose()
    }

    /// A u8 attribute read as a boolean (non-zero is true).
    pub fn bool(&self, ty: u16) -> Result<Option<bool>, String> {
        Ok(self.u8(ty)?.map(|v| v != 0))
    }

    /// A string attribute (trailing NULs removed, lossy UTF-8).
    pub fn string(&self, ty: u16) -> Result<Option<String>, String> {
        Ok(self.get(ty).map(payload_string))
    }

    /// A nested attribute list.
    pub fn nested(&self, ty: u16) -> Result<Option<Attrs>, String> {
        self.get(ty)
            .map(|p| Attrs::parse(p).map_err(|e| format!("attribute {ty}: {e}")))
            .transpose()
    }

    /// All attributes of type `ty`, each parsed as a nested list.
    pub fn nested_all(&self, ty: u16) -> Result<Vec<Attrs>, String> {
        self.iter()
            .filter(|(t, _)| *t == ty)
            .map(|(_, p)| Attrs::parse(p).map_err(|e| format!("attribute {ty}: {e}")))
            .collect()
    }
}

/// A netlink "uint": 4 or 8 bytes, host order.
pub(super) fn uint(ty: u16, p: &[u8]) -> Result<u64, String> {
    match p.len() {
        4 => fixed::<4>(ty, p).map(|b| u32::from_ne_bytes(b).into()),
        8 => fixed::<8>(ty, p).map(u64::from_ne_bytes),
        n => Err(format!("attribute {ty}: {n} bytes, expected 4 or 8")),
    }
}

fn fixed<const N: usize>(ty: u16, p: &[u8]) -> Result<[u8; N], String> {
    p.try_into()
        .map_err(|_| format!("attribute {ty}: {} bytes, expected {N}", p.len()))
}

fn payload_string(p: &[u8]) -> String {
    let end = p.iter().position(|&b| b == 0).unwrap_or(p.len());
    String::from_utf8_lossy(&p[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nlmsg(nl_type: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let len = (NLMSG_HDRLEN + payload.len()) as u32;
        let mut v = Vec::new();
        v.extend_from_slice(&len.to_ne_bytes());
        v.extend_from_slice(&nl_type.to_ne_bytes());
        v.extend_from_slice(&flags.to_ne_bytes());
        v.extend_from_slice(&seq.to_ne_bytes());
        v.extend_from_slice(&0u32.to_ne_bytes());
        v.extend_from_slice(payload);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    #[test]
    fn dump_without_multi_is_read_to_done() {
        // Two data parts without NLM_F_MULTI, then DONE: all are kept.
        let mut d = nlmsg(0x20, 0, 7, &[12, 0, 0, 0, 4, 0, 1, 0, 5, 0, 0, 0]);
        d.extend(nlmsg(0x20, 0, 7, &[12, 0, 0, 0]));
        d.extend(nlmsg(NLMSG_DONE, 0, 7, &0i32.to_ne_bytes()));
        let m = split_messages(&d).expect("well-formed");
        assert_eq!(m.len(), 3);
        assert!(matches!(m[0].kind, Kind::Data { nl_type: 0x20, .. }));
        assert_eq!(m[2].kind, Kind::Done);
    }

    #[test]
    fn error_and_done_carry_negative_errno() {
        let mut e = (-libc::EOPNOTSUPP).to_ne_bytes().to_vec();
        e.extend(nlmsg(0x20, 1, 3, &[]).iter().take(NLMSG_HDRLEN));
        let d = nlmsg(NLMSG_ERROR, NLM_F_CAPPED, 3, &e);
        let m = split_messages(&d).expect("ok");
        assert_eq!(
            m[0].kind,
            Kind::Error {
                errno: libc::EOPNOTSUPP,
                message: None
            }
        );
        let d = nlmsg(NLMSG_DONE, 0, 3, &(-libc::ENODEV).to_ne_bytes());
        let m = split_messages(&d).expect("ok");
        assert!(matches!(m[0].kind, Kind::Error { errno, .. } if errno == libc::ENODEV));
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        // Every prefix and a few corruptions of a valid datagram.
        let mut good = nlmsg(0x20, 0, 1, &[1, 2, 0, 0, 8, 0, 2, 0, 1, 2, 3, 4]);
        good.extend(nlmsg(NLMSG_DONE, 0, 1, &0i32.to_ne_bytes()));
        for cut in 0..good.len() {
            let part = &good[..cut];
            if let Ok(msgs) = split_messages(part) {
                for m in msgs {
                    if let Kind::Data { payload, .. } = m.kind {
                        let _ = parse_genl(payload);
                    }
                }
            }
        }
        let mut bad = good.clone();
        bad[0] = 0xff; // nlmsg_len beyond the datagram
        assert!(split_messages(&bad).is_err());
        let mut bad = good.clone();
        bad[20] = 0xff; // attribute length beyond the message
        let msgs = split_messages(&bad).expect("outer headers are fine");
        let Kind::Data { payload, .. } = msgs[0].kind else {
            panic!("data expected")
        };
        assert!(parse_genl(payload).is_err());
        // Attribute payload of the wrong size.
        let a = Attrs::parse(&[6, 0, 1, 0, 9, 9, 0, 0]).expect("one attribute");
        assert!(a.u32(1).is_err());
        assert_eq!(a.u16(1), Ok(Some(u16::from_ne_bytes([9, 9]))));
        assert_eq!(a.u32(2), Ok(None));
        assert!(uint(1, &[1, 2, 3]).is_err());
    }
}

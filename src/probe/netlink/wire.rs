//! The wire format of replies: netlink message headers walked with every
//! length checked, generic netlink messages and attributes parsed with neli.
//!
//! Nothing here trusts a length from the kernel: a malformed datagram is an
//! `Err` naming what was wrong, never a panic or an out-of-bounds read.

use neli::{
    err::DeError,
    genl::Genlmsghdr,
    types::{Buffer, GenlBuffer},
    FromBytesWithInput,
};
use std::io::Cursor;

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

/// A reply whose layout is not what the kernel documents: which part was
/// wrong and how. The query wraps it in an `NlError::Reply` naming the
/// operation and the interface.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// A header or an error payload shorter than its fixed size.
    #[error("truncated {what}")]
    Truncated {
        /// The structure (`nlmsghdr`, `nlmsgerr`, `NLMSG_DONE`).
        what: &'static str,
    },
    /// A message length that is too small or runs past the datagram.
    #[error("nlmsg_len {len} with {left} bytes left")]
    Length {
        /// The length in the header.
        len: usize,
        /// The bytes left in the datagram.
        left: usize,
    },
    /// The generic netlink header or its attributes do not decode.
    #[error("generic netlink message: {source}")]
    Genl {
        /// neli's decoding error.
        #[source]
        source: DeError,
    },
    /// A run of attributes does not decode.
    #[error("attributes: {source}")]
    Attrs {
        /// neli's decoding error.
        #[source]
        source: DeError,
    },
    /// A nested attribute whose contents are malformed.
    #[error("attribute {ty}: {source}")]
    Nested {
        /// The attribute type.
        ty: u16,
        /// What is wrong inside it.
        #[source]
        source: Box<WireError>,
    },
    /// A fixed-size attribute of the wrong size.
    #[error("attribute {ty}: {len} bytes, expected {expected}")]
    Size {
        /// The attribute type.
        ty: u16,
        /// Its payload size.
        len: usize,
        /// The size its type has.
        expected: usize,
    },
    /// A netlink "uint" that is neither 4 nor 8 bytes.
    #[error("attribute {ty}: {len} bytes, expected 4 or 8")]
    UintSize {
        /// The attribute type.
        ty: u16,
        /// Its payload size.
        len: usize,
    },
    /// A required attribute is absent.
    #[error("no {attr}")]
    Missing {
        /// The attribute's name (`NETDEV_A_QSTATS_IFINDEX`).
        attr: &'static str,
    },
    /// Attributes present in a combination the kernel does not send.
    #[error("{0}")]
    Layout(&'static str),
    /// A malformed part of a larger reply, named.
    #[error("{what}: {source}")]
    In {
        /// The part (`ETHTOOL_A_FEATURES_HW`).
        what: &'static str,
        /// What is wrong in it.
        #[source]
        source: Box<WireError>,
    },
}

impl WireError {
    /// A required attribute is absent.
    pub fn missing(attr: &'static str) -> WireError {
        WireError::Missing { attr }
    }

    /// This error, inside the part `what` of a larger reply.
    pub fn within(self, what: &'static str) -> WireError {
        WireError::In {
            what,
            source: Box::new(self),
        }
    }

    fn truncated(what: &'static str) -> impl Fn() -> WireError {
        move || WireError::Truncated { what }
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

impl Reply {
    /// Parse the payload of a netlink message of the family (genlmsghdr + attributes).
    pub fn parse(payload: &[u8]) -> Result<Reply, WireError> {
        let msg =
            Genlmsghdr::<u8, u16>::from_bytes_with_input(&mut Cursor::new(payload), payload.len())
                .map_err(|source| WireError::Genl { source })?;
        Ok(Reply {
            cmd: *msg.cmd(),
            attrs: Attrs(msg.attrs().clone()),
        })
    }
}

/// What one netlink message means to the reply loop.
#[derive(Debug, PartialEq)]
pub(super) enum Kind<'a> {
    /// NLMSG_NOOP: ignore.
    Noop,
    /// NLMSG_ERROR with errno 0: the request is complete.
    Ack,
    /// NLMSG_DONE without an error: the dump is complete.
    Done,
    /// NLMSG_OVERRUN: data was lost.
    Overrun,
    /// NLMSG_ERROR, or NLMSG_DONE of a dump that failed part-way.
    Error {
        /// Positive errno.
        errno: i32,
        /// Extended-ack text.
        message: Option<String>,
    },
    /// A message of the family.
    Data {
        /// nlmsg_type (the family id).
        nl_type: u16,
        /// Everything after the netlink header.
        payload: &'a [u8],
    },
}

/// One netlink message of a datagram.
#[derive(Debug, PartialEq)]
pub(super) struct RawMsg<'a> {
    /// Sequence number of the request it answers.
    pub seq: u32,
    /// Its meaning.
    pub kind: Kind<'a>,
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
pub(super) fn split_messages(buf: &[u8]) -> Result<Vec<RawMsg<'_>>, WireError> {
    let mut out = Vec::new();
    let mut off = 0;
    let header = WireError::truncated("nlmsghdr");
    while off < buf.len() {
        let rest = &buf[off..];
        let len = ne_u32(rest, 0).ok_or_else(&header)? as usize;
        if len < NLMSG_HDRLEN || len > rest.len() {
            return Err(WireError::Length {
                len,
                left: rest.len(),
            });
        }
        let nl_type = ne_u16(rest, 4).ok_or_else(&header)?;
        let flags = ne_u16(rest, 6).ok_or_else(&header)?;
        let seq = ne_u32(rest, 8).ok_or_else(&header)?;
        let payload = &rest[NLMSG_HDRLEN..len];
        let kind = match nl_type {
            NLMSG_NOOP => Kind::Noop,
            NLMSG_OVERRUN => Kind::Overrun,
            NLMSG_ERROR => error_kind(payload, flags)?,
            // A dump that failed part-way reports its errno in DONE.
            NLMSG_DONE if ne_u32(payload, 0).is_some_and(|c| (c as i32) < 0) => {
                done_error(payload, flags)?
            }
            NLMSG_DONE => Kind::Done,
            _ => Kind::Data { nl_type, payload },
        };
        out.push(RawMsg { seq, kind });
        off += align4(len).min(rest.len());
    }
    Ok(out)
}

/// NLMSG_ERROR: errno 0 is an ACK; otherwise the echoed request header (or
/// whole request) follows, then extended-ack attributes when flagged.
fn error_kind(payload: &[u8], flags: u16) -> Result<Kind<'static>, WireError> {
    let truncated = WireError::truncated("nlmsgerr");
    let code = ne_u32(payload, 0).ok_or_else(&truncated)? as i32;
    if code == 0 {
        return Ok(Kind::Ack);
    }
    let echoed = if flags & NLM_F_CAPPED != 0 {
        NLMSG_HDRLEN
    } else {
        ne_u32(payload, 4).ok_or_else(truncated)? as usize
    };
    let tlv_at = 4usize.saturating_add(align4(echoed));
    Ok(error(code, flags, payload.get(tlv_at..)))
}

fn done_error(payload: &[u8], flags: u16) -> Result<Kind<'static>, WireError> {
    let code = ne_u32(payload, 0).ok_or_else(WireError::truncated("NLMSG_DONE"))? as i32;
    Ok(error(code, flags, payload.get(4..)))
}

/// The failure `code` (a negative errno), with the extended-ack text of
/// `tlvs` when the flags say it is there.
fn error(code: i32, flags: u16, tlvs: Option<&[u8]>) -> Kind<'static> {
    let message = if flags & NLM_F_ACK_TLVS != 0 {
        ext_ack_message(tlvs.unwrap_or(&[]))
    } else {
        None
    };
    Kind::Error {
        errno: code.saturating_neg(),
        message,
    }
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

/// A parsed attribute list (neli's [`GenlBuffer`]) with typed accessors.
///
/// Accessors return `Ok(None)` for an absent attribute and `Err` for one
/// whose payload has the wrong size, so a malformed reply is an error and
/// never a panic.
#[derive(Debug)]
pub(super) struct Attrs(GenlBuffer<u16, Buffer>);

impl Attrs {
    /// Parse a run of attributes.
    pub fn parse(bytes: &[u8]) -> Result<Attrs, WireError> {
        GenlBuffer::<u16, Buffer>::from_bytes_with_input(&mut Cursor::new(bytes), bytes.len())
            .map(Attrs)
            .map_err(|source| WireError::Attrs { source })
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
    pub fn u8(&self, ty: u16) -> Result<Option<u8>, WireError> {
        self.get(ty)
            .map(|p| fixed::<1>(ty, p).map(|b| b[0]))
            .transpose()
    }

    /// A u16 attribute.
    pub fn u16(&self, ty: u16) -> Result<Option<u16>, WireError> {
        self.get(ty)
            .map(|p| fixed::<2>(ty, p).map(u16::from_ne_bytes))
            .transpose()
    }

    /// A u32 attribute.
    pub fn u32(&self, ty: u16) -> Result<Option<u32>, WireError> {
        self.get(ty)
            .map(|p| fixed::<4>(ty, p).map(u32::from_ne_bytes))
            .transpose()
    }

    /// A u8 attribute read as a boolean (non-zero is true).
    pub fn bool(&self, ty: u16) -> Result<Option<bool>, WireError> {
        Ok(self.u8(ty)?.map(|v| v != 0))
    }

    /// A string attribute (trailing NULs removed, lossy UTF-8).
    pub fn string(&self, ty: u16) -> Result<Option<String>, WireError> {
        Ok(self.get(ty).map(super::cstr))
    }

    /// A nested attribute list.
    pub fn nested(&self, ty: u16) -> Result<Option<Attrs>, WireError> {
        self.get(ty).map(|p| nested(ty, p)).transpose()
    }

    /// All attributes of type `ty`, each parsed as a nested list.
    pub fn nested_all(&self, ty: u16) -> Result<Vec<Attrs>, WireError> {
        self.iter()
            .filter(|(t, _)| *t == ty)
            .map(|(_, p)| nested(ty, p))
            .collect()
    }
}

/// The payload `p` of attribute `ty` parsed as a nested list.
fn nested(ty: u16, p: &[u8]) -> Result<Attrs, WireError> {
    Attrs::parse(p).map_err(|e| WireError::Nested {
        ty,
        source: Box::new(e),
    })
}

/// A netlink "uint": 4 or 8 bytes, host order.
pub(super) fn uint(ty: u16, p: &[u8]) -> Result<u64, WireError> {
    match p.len() {
        4 => fixed::<4>(ty, p).map(|b| u32::from_ne_bytes(b).into()),
        8 => fixed::<8>(ty, p).map(u64::from_ne_bytes),
        len => Err(WireError::UintSize { ty, len }),
    }
}

fn fixed<const N: usize>(ty: u16, p: &[u8]) -> Result<[u8; N], WireError> {
    p.try_into().map_err(|_| WireError::Size {
        ty,
        len: p.len(),
        expected: N,
    })
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
                        let _ = Reply::parse(payload);
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
        assert!(Reply::parse(payload).is_err());
        // Attribute payload of the wrong size.
        let a = Attrs::parse(&[6, 0, 1, 0, 9, 9, 0, 0]).expect("one attribute");
        assert!(a.u32(1).is_err());
        assert_eq!(
            a.u16(1).expect("two bytes"),
            Some(u16::from_ne_bytes([9, 9]))
        );
        assert_eq!(a.u32(2).expect("absent"), None);
        assert!(uint(1, &[1, 2, 3]).is_err());
    }
}

//! The netdev generic netlink family: per-queue statistics (qstats).

use super::consts::{self as c, qstats as q};
use super::error::NlError;
use super::genl::{attr, Ctx, GenlSocket};
use super::wire::{uint, Attrs, WireError};
use crate::probe::ethtool_names::Dir;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Direction of a queue (NETDEV_QUEUE_TYPE_RX / _TX): the same direction
/// as the ethtool counters' [`Dir`], so a queue keeps one key whatever
/// source counted it.
pub type QueueType = Dir;

/// Counters of one queue from NETDEV_CMD_QSTATS_GET, cumulative since the
/// driver's statistics were created. `None` where the driver does not report
/// the counter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueStat {
    /// Interface index.
    pub ifindex: u32,
    /// Rx or Tx.
    pub queue_type: QueueType,
    /// Queue index within its direction.
    pub queue_id: u32,
    /// `rx-packets` or `tx-packets`.
    pub packets: Option<u64>,
    /// `rx-bytes` or `tx-bytes`.
    pub bytes: Option<u64>,
    /// `rx-hw-drops` or `tx-hw-drops`.
    pub drops: Option<u64>,
    /// `rx-alloc-fail` (rx queues).
    pub alloc_fail: Option<u64>,
    /// `tx-stop`: times the queue was stopped because it was full (tx queues).
    pub stop: Option<u64>,
    /// `tx-wake`: times a stopped queue was woken (tx queues).
    pub wake: Option<u64>,
    /// Every other counter by its name in the netdev spec
    /// (`rx-csum-unnecessary`, `tx-needs-csum`...); a counter newer than this
    /// table appears as `attr-N`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other: BTreeMap<String, u64>,
}

/// A NETLINK_GENERIC socket with the `netdev` family resolved, bound to the
/// network namespace of the thread that opened it.
#[derive(Debug)]
pub struct NetdevNl {
    sock: GenlSocket,
}

impl NetdevNl {
    /// Open the socket and resolve the family; [`NlError::FamilyMissing`] on
    /// kernels before 6.5.
    pub fn open() -> Result<Self, NlError> {
        Ok(NetdevNl {
            sock: GenlSocket::open(c::NETDEV_FAMILY, c::NETDEV_VERSION, "6.5")?,
        })
    }

    /// Per-queue stats of one interface: NETDEV_CMD_QSTATS_GET dump with
    /// NETDEV_A_QSTATS_IFINDEX and NETDEV_A_QSTATS_SCOPE = queue, sorted rx
    /// before tx, then by queue id.
    ///
    /// A driver without queue statistics (no `netdev_stat_ops`) makes the
    /// kernel answer with an empty dump rather than an error; that, and an
    /// explicit EOPNOTSUPP (kernels before 6.10 have no QSTATS_GET), are
    /// returned as [`NlError::NotSupported`], never as `Ok` with an empty list.
    /// An unknown ifindex is [`NlError::NoDevice`].
    pub fn qstats(&mut self, ifindex: u32) -> Result<Vec<QueueStat>, NlError> {
        let target = format!("ifindex {ifindex}");
        let ctx = Ctx {
            op: "NETDEV_CMD_QSTATS_GET",
            target: &target,
        };
        let request = [
            attr(&ctx, q::IFINDEX, ifindex)?,
            attr(&ctx, q::SCOPE, q::SCOPE_QUEUE)?,
        ];
        let replies = self
            .sock
            .request(&ctx, c::NETDEV_CMD_QSTATS_GET, request, true)?;
        let mut out = Vec::with_capacity(replies.len());
        for r in replies {
            if r.cmd != c::NETDEV_CMD_QSTATS_GET {
                return Err(ctx.malformed(format!("reply command {}", r.cmd)));
            }
            if let Some(s) = parse_queue_stat(&r.attrs).map_err(|e| ctx.reply(e))? {
                if s.ifindex == ifindex {
                    out.push(s);
                }
            }
        }
        if out.is_empty() {
            return Err(NlError::NotSupported { op: ctx.op, target });
        }
        out.sort_by_key(|s| (s.queue_type, s.queue_id));
        Ok(out)
    }
}

/// One dump message → one queue. `Ok(None)` for a queue type this code does
/// not know (a newer kernel), so such queues are skipped rather than failing
/// the whole dump.
fn parse_queue_stat(a: &Attrs) -> Result<Option<QueueStat>, WireError> {
    let ifindex = a
        .u32(q::IFINDEX)?
        .ok_or(WireError::missing("NETDEV_A_QSTATS_IFINDEX"))?;
    let queue_type = match a
        .u32(q::QUEUE_TYPE)?
        .ok_or(WireError::missing("NETDEV_A_QSTATS_QUEUE_TYPE"))?
    {
        q::QUEUE_TYPE_RX => QueueType::Rx,
        q::QUEUE_TYPE_TX => QueueType::Tx,
        _ => return Ok(None),
    };
    let queue_id = a
        .u32(q::QUEUE_ID)?
        .ok_or(WireError::missing("NETDEV_A_QSTATS_QUEUE_ID"))?;
    let mut s = QueueStat {
        ifindex,
        queue_type,
        queue_id,
        packets: None,
        bytes: None,
        drops: None,
        alloc_fail: None,
        stop: None,
        wake: None,
        other: BTreeMap::new(),
    };
    for (ty, payload) in a.iter() {
        if matches!(ty, q::IFINDEX | q::QUEUE_TYPE | q::QUEUE_ID | q::SCOPE) {
            continue;
        }
        let v = uint(ty, payload)?;
        let name = q::NAMES
            .iter()
            .find(|(t, _)| *t == ty)
            .map(|(_, n)| (*n).to_string())
            .unwrap_or_else(|| format!("attr-{ty}"));
        let slot = match (queue_type, name.as_str()) {
            (QueueType::Rx, "rx-packets") | (QueueType::Tx, "tx-packets") => &mut s.packets,
            (QueueType::Rx, "rx-bytes") | (QueueType::Tx, "tx-bytes") => &mut s.bytes,
            (QueueType::Rx, "rx-hw-drops") | (QueueType::Tx, "tx-hw-drops") => &mut s.drops,
            (QueueType::Rx, "rx-alloc-fail") => &mut s.alloc_fail,
            (QueueType::Tx, "tx-stop") => &mut s.stop,
            (QueueType::Tx, "tx-wake") => &mut s.wake,
            _ => {
                s.other.insert(name, v);
                continue;
            }
        };
        *slot = Some(v);
    }
    Ok(Some(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nla(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = ((4 + payload.len()) as u16).to_ne_bytes().to_vec();
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(payload);
        while !v.len().is_multiple_of(4) {
            v.push(0);
        }
        v
    }

    /// The counter table against the netdev spec: unknown counters are kept
    /// by number, unknown queue types are skipped, both uint widths parse.
    #[test]
    fn queue_stat_fields_and_unknowns() {
        let mut b = nla(q::IFINDEX, &7u32.to_ne_bytes());
        b.extend(nla(q::QUEUE_TYPE, &q::QUEUE_TYPE_TX.to_ne_bytes()));
        b.extend(nla(q::QUEUE_ID, &3u32.to_ne_bytes()));
        b.extend(nla(10, &5u32.to_ne_bytes())); // tx-packets, 4 bytes
        b.extend(nla(11, &(1u64 << 40).to_ne_bytes())); // tx-bytes, 8 bytes
        b.extend(nla(33, &2u32.to_ne_bytes())); // tx-stop
        b.extend(nla(27, &9u32.to_ne_bytes())); // tx-needs-csum
        b.extend(nla(99, &1u32.to_ne_bytes())); // newer than the table
        let s = parse_queue_stat(&Attrs::parse(&b).expect("attrs"))
            .expect("valid")
            .expect("known type");
        assert_eq!((s.ifindex, s.queue_type, s.queue_id), (7, QueueType::Tx, 3));
        assert_eq!(
            (s.packets, s.bytes, s.stop),
            (Some(5), Some(1 << 40), Some(2))
        );
        assert_eq!(s.other.get("tx-needs-csum"), Some(&9));
        assert_eq!(s.other.get("attr-99"), Some(&1));
        assert_eq!(s.drops, None);

        let mut b = nla(q::IFINDEX, &7u32.to_ne_bytes());
        b.extend(nla(q::QUEUE_TYPE, &5u32.to_ne_bytes()));
        b.extend(nla(q::QUEUE_ID, &0u32.to_ne_bytes()));
        assert_eq!(
            parse_queue_stat(&Attrs::parse(&b).expect("attrs")).expect("valid"),
            None
        );
        let b = nla(q::QUEUE_TYPE, &0u32.to_ne_bytes());
        assert!(parse_queue_stat(&Attrs::parse(&b).expect("attrs")).is_err());
    }
}

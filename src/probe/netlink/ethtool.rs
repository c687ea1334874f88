//! The ethtool generic netlink family: channels, rings, features, coalesce,
//! link and pause of one interface, read with `*_GET` requests only.

use super::consts::{self as c, header, msg, reply};
use super::error::{to_support, NlError};
use super::features::{combine, parse_bitset};
use super::genl::{attr, attr_str, nest, single, Ctx, GenlSocket};
use super::wire::{Attrs, WireError};
use crate::probe::facts::{Channels, Coalesce, Features, LinkInfo, Pause, Rings, Support};
use std::collections::BTreeMap;

/// A NETLINK_GENERIC socket with the `ethtool` family resolved, bound to the
/// network namespace of the thread that opened it.
///
/// Every query takes the interface name and its driver name; the driver is
/// only used to fill [`Support::NotSupported`] when the driver answers
/// EOPNOTSUPP.
#[derive(Debug)]
pub struct EthtoolNl {
    sock: GenlSocket,
    /// `ETH_SS_FEATURES`: global, read once.
    feature_strings: Option<BTreeMap<u32, String>>,
}

impl EthtoolNl {
    /// Open the socket and resolve the family; [`NlError::FamilyMissing`] on
    /// kernels before 5.6, which have no ethtool netlink interface.
    pub fn open() -> Result<Self, NlError> {
        Ok(EthtoolNl {
            sock: GenlSocket::open(c::ETHTOOL_FAMILY, c::ETHTOOL_VERSION, "5.6")?,
            feature_strings: None,
        })
    }

    /// `ethtool -l`: ETHTOOL_MSG_CHANNELS_GET. A count the driver does not
    /// report (ethtool's `n/a`) is `None`.
    pub fn channels(&mut self, ifname: &str, driver: &str) -> Support<Channels> {
        to_support(self.try_channels(ifname), driver)
    }

    /// `ethtool -g`: ETHTOOL_MSG_RINGS_GET (veth: NotSupported).
    pub fn rings(&mut self, ifname: &str, driver: &str) -> Support<Rings> {
        to_support(self.try_rings(ifname), driver)
    }

    /// `ethtool -k`: ETHTOOL_MSG_FEATURES_GET with verbose bitsets.
    ///
    /// Keys are the kernel's feature names (`rx-gro`, not
    /// `generic-receive-offload`); see [`super::FEATURE_ALIASES`]. `on` is
    /// ETHTOOL_A_FEATURES_ACTIVE; `fixed` is "not in ETHTOOL_A_FEATURES_HW or
    /// in ETHTOOL_A_FEATURES_NOCHANGE"; `requested` is
    /// ETHTOOL_A_FEATURES_WANTED when it differs from active on a feature
    /// that is not fixed: the rules `ethtool -k` prints `[fixed]` and
    /// `[requested on/off]` by.
    pub fn features(&mut self, ifname: &str, driver: &str) -> Support<Features> {
        to_support(self.try_features(ifname), driver)
    }

    /// `ethtool -c`: ETHTOOL_MSG_COALESCE_GET. Parameters the driver does not
    /// support are absent from the reply and stay `None` / out of `other`.
    pub fn coalesce(&mut self, ifname: &str, driver: &str) -> Support<Coalesce> {
        to_support(self.try_coalesce(ifname), driver)
    }

    /// Speed, duplex and autoneg (ETHTOOL_MSG_LINKMODES_GET) and carrier
    /// (ETHTOOL_MSG_LINKSTATE_GET).
    ///
    /// Speed 0 or SPEED_UNKNOWN and an unknown duplex are `None`. When only
    /// one of the two requests is supported (loopback has a link state but
    /// no link modes) the other half stays `None`; NotSupported only when
    /// neither is.
    pub fn link(&mut self, ifname: &str, driver: &str) -> Support<LinkInfo> {
        let modes = self.try_linkmodes(ifname);
        let state = self.try_linkstate(ifname);
        match (modes, state) {
            (Ok(mut info), Ok(link)) => {
                info.link_detected = link;
                Support::Value(info)
            }
            (Ok(info), Err(NlError::NotSupported { .. })) => Support::Value(info),
            (Err(NlError::NotSupported { .. }), Ok(link)) => Support::Value(LinkInfo {
                link_detected: link,
                ..LinkInfo::default()
            }),
            (Err(NlError::NotSupported { .. }), Err(e)) | (Err(e), _) | (Ok(_), Err(e)) => {
                e.into_support(driver)
            }
        }
    }

    /// `ethtool -a`: ETHTOOL_MSG_PAUSE_GET.
    pub fn pause(&mut self, ifname: &str, driver: &str) -> Support<Pause> {
        to_support(self.try_pause(ifname), driver)
    }

    /// One `do` request with the standard header; the single reply's attributes.
    fn get(
        &mut self,
        op: &'static str,
        ifname: &str,
        cmd: u8,
        reply_cmd: u8,
        flags: u32,
    ) -> Result<Attrs, NlError> {
        let ctx = Ctx { op, target: ifname };
        if ifname.is_empty() {
            return Err(NlError::NoDevice {
                op,
                target: "\"\"".into(),
            });
        }
        let mut hdr = vec![attr_str(&ctx, header::DEV_NAME, ifname)?];
        if flags != 0 {
            hdr.push(attr(&ctx, header::FLAGS, flags)?);
        }
        let request = [nest(&ctx, c::A_HEADER, &hdr)?];
        let replies = self.sock.request(&ctx, cmd, request, false)?;
        Ok(single(&ctx, replies, reply_cmd)?.attrs)
    }

    fn try_channels(&mut self, ifname: &str) -> Result<Channels, NlError> {
        use c::channels as a;
        let op = "ETHTOOL_MSG_CHANNELS_GET";
        let r = self.get(op, ifname, msg::CHANNELS_GET, reply::CHANNELS_GET_REPLY, 0)?;
        let bad = |e| Ctx { op, target: ifname }.reply(e);
        Ok(Channels {
            max_rx: r.u32(a::RX_MAX).map_err(bad)?,
            max_tx: r.u32(a::TX_MAX).map_err(bad)?,
            max_other: r.u32(a::OTHER_MAX).map_err(bad)?,
            max_combined: r.u32(a::COMBINED_MAX).map_err(bad)?,
            rx: r.u32(a::RX_COUNT).map_err(bad)?,
            tx: r.u32(a::TX_COUNT).map_err(bad)?,
            other: r.u32(a::OTHER_COUNT).map_err(bad)?,
            combined: r.u32(a::COMBINED_COUNT).map_err(bad)?,
        })
    }

    fn try_rings(&mut self, ifname: &str) -> Result<Rings, NlError> {
        use c::rings as a;
        let op = "ETHTOOL_MSG_RINGS_GET";
        let r = self.get(op, ifname, msg::RINGS_GET, reply::RINGS_GET_REPLY, 0)?;
        let bad = |e| Ctx { op, target: ifname }.reply(e);
        Ok(Rings {
            max_rx: r.u32(a::RX_MAX).map_err(bad)?,
            max_rx_mini: r.u32(a::RX_MINI_MAX).map_err(bad)?,
            max_rx_jumbo: r.u32(a::RX_JUMBO_MAX).map_err(bad)?,
            max_tx: r.u32(a::TX_MAX).map_err(bad)?,
            rx: r.u32(a::RX).map_err(bad)?,
            rx_mini: r.u32(a::RX_MINI).map_err(bad)?,
            rx_jumbo: r.u32(a::RX_JUMBO).map_err(bad)?,
            tx: r.u32(a::TX).map_err(bad)?,
        })
    }

    fn try_coalesce(&mut self, ifname: &str) -> Result<Coalesce, NlError> {
        use c::coalesce as a;
        let op = "ETHTOOL_MSG_COALESCE_GET";
        let r = self.get(op, ifname, msg::COALESCE_GET, reply::COALESCE_GET_REPLY, 0)?;
        let bad = |e| Ctx { op, target: ifname }.reply(e);
        let mut other = BTreeMap::new();
        for (ty, name) in a::OTHER_U32 {
            if let Some(v) = r.u32(*ty).map_err(bad)? {
                other.insert((*name).to_string(), v);
            }
        }
        Ok(Coalesce {
            adaptive_rx: r.bool(a::USE_ADAPTIVE_RX).map_err(bad)?,
            adaptive_tx: r.bool(a::USE_ADAPTIVE_TX).map_err(bad)?,
            rx_usecs: r.u32(a::RX_USECS).map_err(bad)?,
            rx_frames: r.u32(a::RX_MAX_FRAMES).map_err(bad)?,
            tx_usecs: r.u32(a::TX_USECS).map_err(bad)?,
            tx_frames: r.u32(a::TX_MAX_FRAMES).map_err(bad)?,
            other,
        })
    }

    fn try_pause(&mut self, ifname: &str) -> Result<Pause, NlError> {
        use c::pause as a;
        let op = "ETHTOOL_MSG_PAUSE_GET";
        let r = self.get(op, ifname, msg::PAUSE_GET, reply::PAUSE_GET_REPLY, 0)?;
        let ctx = Ctx { op, target: ifname };
        let need = |ty: u16, what: &str| -> Result<bool, NlError> {
            r.bool(ty)
                .map_err(|e| ctx.reply(e))?
                .ok_or_else(|| ctx.malformed(format!("no {what}")))
        };
        Ok(Pause {
            autoneg: need(a::AUTONEG, "ETHTOOL_A_PAUSE_AUTONEG")?,
            rx: need(a::RX, "ETHTOOL_A_PAUSE_RX")?,
            tx: need(a::TX, "ETHTOOL_A_PAUSE_TX")?,
        })
    }

    fn try_linkmodes(&mut self, ifname: &str) -> Result<LinkInfo, NlError> {
        use c::link as a;
        let op = "ETHTOOL_MSG_LINKMODES_GET";
        // Compact bitsets: the link-mode masks are not used, keep them small.
        let r = self.get(
            op,
            ifname,
            msg::LINKMODES_GET,
            reply::LINKMODES_GET_REPLY,
            header::FLAG_COMPACT_BITSETS,
        )?;
        let bad = |e| Ctx { op, target: ifname }.reply(e);
        let speed = r.u32(a::MODES_SPEED).map_err(bad)?;
        let duplex = r.u8(a::MODES_DUPLEX).map_err(bad)?;
        Ok(LinkInfo {
            speed_mbps: speed.filter(|s| *s != 0 && *s != a::SPEED_UNKNOWN),
            duplex: duplex.and_then(|d| match d {
                a::DUPLEX_HALF => Some("Half".to_string()),
                a::DUPLEX_FULL => Some("Full".to_string()),
                _ => None,
            }),
            autoneg: r.bool(a::MODES_AUTONEG).map_err(bad)?,
            link_detected: None,
        })
    }

    fn try_linkstate(&mut self, ifname: &str) -> Result<Option<bool>, NlError> {
        let op = "ETHTOOL_MSG_LINKSTATE_GET";
        let r = self.get(
            op,
            ifname,
            msg::LINKSTATE_GET,
            reply::LINKSTATE_GET_REPLY,
            0,
        )?;
        r.bool(c::link::STATE_LINK)
            .map_err(|e| Ctx { op, target: ifname }.reply(e))
    }

    fn try_features(&mut self, ifname: &str) -> Result<Features, NlError> {
        use c::features as a;
        let op = "ETHTOOL_MSG_FEATURES_GET";
        let r = self.get(op, ifname, msg::FEATURES_GET, reply::FEATURES_GET_REPLY, 0)?;
        let ctx = Ctx { op, target: ifname };
        let set = |ty: u16, what: &'static str| {
            let nested = r
                .nested(ty)
                .map_err(|e| ctx.reply(e))?
                .ok_or_else(|| ctx.malformed(format!("no {what}")))?;
            parse_bitset(&nested).map_err(|e| ctx.reply(e.within(what)))
        };
        let hw = set(a::HW, "ETHTOOL_A_FEATURES_HW")?;
        let wanted = set(a::WANTED, "ETHTOOL_A_FEATURES_WANTED")?;
        let active = set(a::ACTIVE, "ETHTOOL_A_FEATURES_ACTIVE")?;
        let nochange = set(a::NOCHANGE, "ETHTOOL_A_FEATURES_NOCHANGE")?;
        let strings = self.feature_strings()?;
        Ok(combine(strings, &hw, &wanted, &active, &nochange))
    }

    /// The global `ETH_SS_FEATURES` string set (names of every netdev
    /// feature bit), fetched on first use.
    fn feature_strings(&mut self) -> Result<&BTreeMap<u32, String>, NlError> {
        let strings = match self.feature_strings.take() {
            Some(s) => s,
            None => self.strings("", c::strset::ETH_SS_FEATURES, "ETH_SS_FEATURES")?,
        };
        Ok(self.feature_strings.insert(strings))
    }

    /// The names of `ifname`'s private statistics (`ethtool -S`), in the
    /// order ETHTOOL_GSTATS reports the values. Unlike the GSTRINGS ioctl,
    /// whose buffer the kernel fills with however many names the driver has
    /// at that moment, the netlink reply is sized by the kernel.
    pub fn stats_strings(&mut self, ifname: &str) -> Result<Vec<String>, NlError> {
        if ifname.is_empty() {
            return Err(NlError::NoDevice {
                op: "ETHTOOL_MSG_STRSET_GET",
                target: "\"\"".into(),
            });
        }
        let m = self.strings(ifname, c::strset::ETH_SS_STATS, ifname)?;
        // Indices are 0..n; a gap would misalign names and values.
        if m.keys().copied().eq(0..m.len() as u32) {
            Ok(m.into_values().collect())
        } else {
            Err(NlError::Malformed {
                op: "ETHTOOL_MSG_STRSET_GET",
                target: ifname.into(),
                detail: "the statistics names are not numbered 0..n".into(),
            })
        }
    }

    /// One string set: global (`ifname` empty) or of a device.
    fn strings(
        &mut self,
        ifname: &str,
        set_id: u32,
        target: &str,
    ) -> Result<BTreeMap<u32, String>, NlError> {
        use c::strset as s;
        let ctx = Ctx {
            op: "ETHTOOL_MSG_STRSET_GET",
            target,
        };
        let id = attr(&ctx, s::STRINGSET_ID, set_id)?;
        let set = nest(&ctx, s::STRINGSETS_STRINGSET, &[id])?;
        // The kernel requires the header nest even for a global string set;
        // an empty one means "no device".
        let header = if ifname.is_empty() {
            Vec::new()
        } else {
            vec![attr_str(&ctx, header::DEV_NAME, ifname)?]
        };
        let request = [
            nest(&ctx, c::A_HEADER, &header)?,
            nest(&ctx, s::STRINGSETS, &[set])?,
        ];
        let replies = self.sock.request(&ctx, msg::STRSET_GET, request, false)?;
        let r = single(&ctx, replies, reply::STRSET_GET_REPLY)?.attrs;
        let parse = || -> Result<BTreeMap<u32, String>, WireError> {
            let sets = r
                .nested(s::STRINGSETS)?
                .ok_or(WireError::missing("ETHTOOL_A_STRSET_STRINGSETS"))?;
            let mut out = BTreeMap::new();
            for set in sets.nested_all(s::STRINGSETS_STRINGSET)? {
                if set.u32(s::STRINGSET_ID)? != Some(set_id) {
                    continue;
                }
                let Some(strings) = set.nested(s::STRINGSET_STRINGS)? else {
                    continue;
                };
                for st in strings.nested_all(s::STRINGS_STRING)? {
                    let idx = st
                        .u32(s::STRING_INDEX)?
                        .ok_or(WireError::Layout("string without index"))?;
                    out.insert(idx, st.string(s::STRING_VALUE)?.unwrap_or_default());
                }
            }
            Ok(out)
        };
        parse().map_err(|e| ctx.reply(e))
    }
}

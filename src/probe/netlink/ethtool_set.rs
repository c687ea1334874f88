//! ethtool netlink `*_SET` requests: the one place outside the read-only
//! probes that changes a NIC (`ethtool -L/-G/-C/-K/-A` without the ethtool
//! binary).
//!
//! It exists for [`crate::tune`], which validates every value against what
//! the matching `*_GET` reported, backs it up and journals it before calling
//! here; nothing in the probes or the sampler uses it. Each call sends one
//! acknowledged request carrying only the attributes given, so the kernel
//! leaves every other parameter as it is (the same partial-update semantics
//! as `ethtool -L eth0 rx 4`). Replies are suppressed with
//! `ETHTOOL_FLAG_OMIT_REPLY`; the caller reads the value back with the GET
//! request to confirm what the driver actually took.
//!
//! Errors carry the kernel's extended-ack text (for example "requested
//! channel count exceeds maximum"), classified like the GET errors:
//! EOPNOTSUPP is [`NlError::NotSupported`], ENODEV [`NlError::NoDevice`],
//! EPERM [`NlError::Permission`].

use super::consts::{self as c, bitset, header};
use super::error::NlError;
use super::genl::{attr, attr_str, nest, Ctx, GenlSocket};
use neli::{genl::Nlattr, types::Buffer, Size, ToBytes};
use serde::{Deserialize, Serialize};

/// `ETHTOOL_MSG_*_SET` request numbers (`include/uapi/linux/ethtool_netlink.h`).
mod msg {
    /// `ETHTOOL_MSG_FEATURES_SET`.
    pub const FEATURES_SET: u8 = 12;
    /// `ETHTOOL_MSG_RINGS_SET`.
    pub const RINGS_SET: u8 = 16;
    /// `ETHTOOL_MSG_CHANNELS_SET`.
    pub const CHANNELS_SET: u8 = 18;
    /// `ETHTOOL_MSG_COALESCE_SET`.
    pub const COALESCE_SET: u8 = 20;
    /// `ETHTOOL_MSG_PAUSE_SET`.
    pub const PAUSE_SET: u8 = 22;
}

/// `ETHTOOL_FLAG_OMIT_REPLY`: no `*_SET_REPLY` (FEATURES_SET would send one).
const FLAG_OMIT_REPLY: u32 = 1 << 1;

/// One kind enum of an ethtool parameter: its variants, `ALL` in ethtool's
/// order, the word ethtool takes and the attribute the `*_SET` request
/// carries for it. The serde name comes from `rename_all = "kebab-case"`;
/// a test keeps it equal to the word.
macro_rules! ethtool_kind {
    ($(#[$doc:meta])* $name:ident, $tool:literal, $attrs:ident {
        $($(#[$vdoc:meta])* $v:ident = $word:literal => $attr:ident,)+
    }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[derive(schemars::JsonSchema)]
        #[serde(rename_all = "kebab-case")]
        pub enum $name {
            $($(#[$vdoc])* $v,)+
        }

        impl $name {
            #[doc = concat!("Every kind, in `", $tool, "` order.")]
            pub const ALL: [$name; [$($word),+].len()] = [$($name::$v),+];

            #[doc = concat!("The word `", $tool, "` takes.")]
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$v => $word,)+
                }
            }

            /// The attribute type of this kind in the `*_SET` request.
            fn attr(self) -> u16 {
                match self {
                    $($name::$v => c::$attrs::$attr,)+
                }
            }
        }
    };
}

ethtool_kind! {
    /// A channel count (`ethtool -L IF KIND N`).
    ChannelKind, "ethtool -L", channels {
        /// rx-only channels.
        Rx = "rx" => RX_COUNT,
        /// tx-only channels.
        Tx = "tx" => TX_COUNT,
        /// Other channels (link interrupts, SR-IOV coordination).
        Other = "other" => OTHER_COUNT,
        /// Combined rx+tx channels.
        Combined = "combined" => COMBINED_COUNT,
    }
}

ethtool_kind! {
    /// A ring size (`ethtool -G IF KIND N`).
    RingKind, "ethtool -G", rings {
        /// rx ring.
        Rx = "rx" => RX,
        /// rx mini ring.
        RxMini = "rx-mini" => RX_MINI,
        /// rx jumbo ring.
        RxJumbo = "rx-jumbo" => RX_JUMBO,
        /// tx ring.
        Tx = "tx" => TX,
    }
}

ethtool_kind! {
    /// A pause (flow control) parameter (`ethtool -A IF KIND on|off`).
    PauseKind, "ethtool -A", pause {
        /// Autonegotiate pause.
        Autoneg = "autoneg" => AUTONEG,
        /// Honour received pause frames.
        Rx = "rx" => RX,
        /// Send pause frames.
        Tx = "tx" => TX,
    }
}

/// One coalescing parameter, by the name `ethtool -C` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoalesceValue {
    /// `adaptive-rx` / `adaptive-tx` (u8 attributes).
    Flag(bool),
    /// Every other parameter (u32 attributes).
    Num(u32),
}

/// The coalescing parameters [`crate::probe::facts::Coalesce`] names: the
/// name, the attribute type and whether it is a flag.
const COALESCE_NAMED: [(&str, u16, bool); 6] = [
    ("adaptive-rx", c::coalesce::USE_ADAPTIVE_RX, true),
    ("adaptive-tx", c::coalesce::USE_ADAPTIVE_TX, true),
    ("rx-usecs", c::coalesce::RX_USECS, false),
    ("rx-frames", c::coalesce::RX_MAX_FRAMES, false),
    ("tx-usecs", c::coalesce::TX_USECS, false),
    ("tx-frames", c::coalesce::TX_MAX_FRAMES, false),
];

/// Every coalescing parameter: name, attribute type, whether it is a flag.
fn coalesce_params() -> impl Iterator<Item = (&'static str, u16, bool)> {
    let others = c::coalesce::OTHER_U32.iter().map(|&(ty, n)| (n, ty, false));
    COALESCE_NAMED.into_iter().chain(others)
}

/// Attribute type of a coalescing parameter and whether it is a flag, or
/// None for a name the ethtool netlink interface does not have.
pub fn coalesce_attr(name: &str) -> Option<(u16, bool)> {
    coalesce_params()
        .find(|(n, ..)| *n == name)
        .map(|(_, ty, flag)| (ty, flag))
}

/// Every coalescing parameter name [`coalesce_attr`] knows.
pub fn coalesce_names() -> Vec<&'static str> {
    coalesce_params().map(|(n, ..)| n).collect()
}

/// A NETLINK_GENERIC socket for ethtool SET requests, bound to the network
/// namespace of the thread that opened it.
#[derive(Debug)]
pub struct EthtoolSet {
    sock: GenlSocket,
}

impl EthtoolSet {
    /// Open the socket and resolve the family ([`NlError::FamilyMissing`]
    /// before Linux 5.6).
    pub fn open() -> Result<Self, NlError> {
        Ok(EthtoolSet {
            sock: GenlSocket::open(c::ETHTOOL_FAMILY, c::ETHTOOL_VERSION, "5.6")?,
        })
    }

    /// `ethtool -L IF KIND N`: ETHTOOL_MSG_CHANNELS_SET with one count.
    pub fn set_channel(&mut self, ifname: &str, kind: ChannelKind, n: u32) -> Result<(), NlError> {
        self.set_one(
            "ETHTOOL_MSG_CHANNELS_SET",
            msg::CHANNELS_SET,
            ifname,
            kind.attr(),
            n,
        )
    }

    /// `ethtool -G IF KIND N`: ETHTOOL_MSG_RINGS_SET with one size.
    pub fn set_ring(&mut self, ifname: &str, kind: RingKind, n: u32) -> Result<(), NlError> {
        self.set_one(
            "ETHTOOL_MSG_RINGS_SET",
            msg::RINGS_SET,
            ifname,
            kind.attr(),
            n,
        )
    }

    /// `ethtool -C IF NAME VALUE`: ETHTOOL_MSG_COALESCE_SET with one
    /// parameter; `name` as [`coalesce_attr`] knows it.
    pub fn set_coalesce(
        &mut self,
        ifname: &str,
        name: &str,
        value: CoalesceValue,
    ) -> Result<(), NlError> {
        let ctx = Ctx {
            op: "ETHTOOL_MSG_COALESCE_SET",
            target: ifname,
        };
        let body = match (coalesce_attr(name), value) {
            (Some((ty, true)), CoalesceValue::Flag(on)) => attr(&ctx, ty, u8::from(on))?,
            (Some((ty, false)), CoalesceValue::Num(n)) => attr(&ctx, ty, n)?,
            (Some((_, flag)), _) => {
                let takes = if flag { "on/off" } else { "a number" };
                return Err(ctx.encode(format!("{name} takes {takes}")));
            }
            (None, _) => return Err(ctx.encode(format!("unknown coalescing parameter {name}"))),
        };
        self.set(&ctx, msg::COALESCE_SET, vec![body])
    }

    /// `ethtool -A IF KIND on|off`: ETHTOOL_MSG_PAUSE_SET with one flag.
    pub fn set_pause(&mut self, ifname: &str, kind: PauseKind, on: bool) -> Result<(), NlError> {
        self.set_one(
            "ETHTOOL_MSG_PAUSE_SET",
            msg::PAUSE_SET,
            ifname,
            kind.attr(),
            u8::from(on),
        )
    }

    /// `ethtool -K IF NAME on|off ...`: ETHTOOL_MSG_FEATURES_SET with a
    /// verbose `ETHTOOL_A_FEATURES_WANTED` bitset that lists only these
    /// features (the mask), by their kernel names (`rx-gro`), each with
    /// `ETHTOOL_A_BITSET_BIT_VALUE` when it is wanted on.
    ///
    /// The kernel may accept the request and still leave a feature as it
    /// was (a dependency, the driver refusing in `ndo_fix_features`); read
    /// the features back to know.
    pub fn set_features(&mut self, ifname: &str, wanted: &[(&str, bool)]) -> Result<(), NlError> {
        let ctx = Ctx {
            op: "ETHTOOL_MSG_FEATURES_SET",
            target: ifname,
        };
        let mut bits = Vec::with_capacity(wanted.len());
        for (name, on) in wanted {
            let mut inner = vec![attr_str(&ctx, bitset::BIT_NAME, name)?];
            if *on {
                inner.push(attr(&ctx, bitset::BIT_VALUE, Vec::<u8>::new())?);
            }
            bits.push(nest(&ctx, bitset::BITS_BIT, &inner)?);
        }
        let set = nest(&ctx, bitset::BITS, &bits)?;
        let body = nest(&ctx, c::features::WANTED, &[set])?;
        self.set(&ctx, msg::FEATURES_SET, vec![body])
    }

    /// A SET request `op` (`cmd`) that carries one attribute `ty` = `value`.
    fn set_one<P: Size + ToBytes>(
        &mut self,
        op: &'static str,
        cmd: u8,
        ifname: &str,
        ty: u16,
        value: P,
    ) -> Result<(), NlError> {
        let ctx = Ctx { op, target: ifname };
        let body = attr(&ctx, ty, value)?;
        self.set(&ctx, cmd, vec![body])
    }

    /// One acknowledged SET request: header (device, OMIT_REPLY) + `body`.
    fn set(
        &mut self,
        ctx: &Ctx<'_>,
        cmd: u8,
        body: Vec<Nlattr<u16, Buffer>>,
    ) -> Result<(), NlError> {
        if ctx.target.is_empty() {
            return Err(NlError::NoDevice {
                op: ctx.op,
                target: "\"\"".into(),
            });
        }
        let hdr = [
            attr_str(ctx, header::DEV_NAME, ctx.target)?,
            attr(ctx, header::FLAGS, FLAG_OMIT_REPLY)?,
        ];
        let mut request = vec![nest(ctx, c::A_HEADER, &hdr)?];
        request.extend(body);
        self.sock.request(ctx, cmd, request, false)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kinds_serde_name_is_the_word_ethtool_takes() {
        let json = |v: serde_json::Value| v.as_str().unwrap_or_default().to_string();
        for k in ChannelKind::ALL {
            assert_eq!(json(serde_json::to_value(k).unwrap()), k.name());
        }
        for k in RingKind::ALL {
            assert_eq!(json(serde_json::to_value(k).unwrap()), k.name());
        }
        for k in PauseKind::ALL {
            assert_eq!(json(serde_json::to_value(k).unwrap()), k.name());
        }
        assert_eq!(RingKind::RxJumbo.attr(), c::rings::RX_JUMBO);
        assert_eq!(ChannelKind::Combined.attr(), c::channels::COMBINED_COUNT);
    }

    #[test]
    fn coalesce_names_map_to_attributes() {
        for n in coalesce_names() {
            assert!(coalesce_attr(n).is_some(), "{n}");
        }
        assert_eq!(coalesce_attr("adaptive-rx"), Some((11, true)));
        assert_eq!(coalesce_attr("rx-usecs"), Some((2, false)));
        assert_eq!(coalesce_attr("rx-usecs-irq"), Some((4, false)));
        assert_eq!(coalesce_attr("rx-usec"), None);
    }
}

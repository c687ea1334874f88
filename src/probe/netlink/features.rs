//! ETHTOOL_MSG_FEATURES_GET: netdev feature bitsets → [`Features`].
//!
//! Features are stored under the kernel's netdev feature names exactly as the
//! verbose (non-compact) bitsets and the `ETH_SS_FEATURES` string set give
//! them (`rx-gro`, `tx-tcp-segmentation`, `rx-checksum`...). `ethtool -k`
//! shows some of them under legacy names instead; [`FEATURE_ALIASES`] maps
//! one to the other.

use super::consts::bitset as bs;
use super::wire::{Attrs, WireError};
use crate::probe::facts::{Feature, Features};
use std::collections::{BTreeMap, BTreeSet};

/// Kernel feature name → the line `ethtool -k` shows it on.
///
/// From ethtool's `off_flag_def` table (`common.c`) and its netlink
/// `dump_features`: a legacy flag whose kernel pattern matches exactly one
/// feature is printed under the legacy long name *instead of* the kernel name
/// (`rx-gro` appears only as `generic-receive-offload`). A legacy flag that
/// matches several features (`tx-checksum-*`, `tx-scatter-gather*`,
/// `tx-tcp*-segmentation`) is printed as a parent line that is `on` when any
/// member is on, followed by each member indented under its own kernel name;
/// for those the alias names the parent, which aggregates rather than equals
/// the feature. Features outside the table are printed under their kernel
/// names (the identity rows below are listed so callers need no fallback for
/// them).
pub const FEATURE_ALIASES: &[(&str, &str)] = &[
    ("rx-checksum", "rx-checksumming"),
    ("tx-checksum-ip-generic", "tx-checksumming"),
    ("tx-checksum-ipv4", "tx-checksumming"),
    ("tx-checksum-ipv6", "tx-checksumming"),
    ("tx-checksum-sctp", "tx-checksumming"),
    ("tx-checksum-fcoe-crc", "tx-checksumming"),
    ("tx-scatter-gather", "scatter-gather"),
    ("tx-scatter-gather-fraglist", "scatter-gather"),
    ("tx-tcp-segmentation", "tcp-segmentation-offload"),
    ("tx-tcp-ecn-segmentation", "tcp-segmentation-offload"),
    ("tx-tcp-mangleid-segmentation", "tcp-segmentation-offload"),
    ("tx-tcp6-segmentation", "tcp-segmentation-offload"),
    ("tx-tcp-accecn-segmentation", "tcp-segmentation-offload"),
    ("tx-udp-fragmentation", "udp-fragmentation-offload"),
    ("tx-generic-segmentation", "generic-segmentation-offload"),
    ("rx-gro", "generic-receive-offload"),
    ("rx-lro", "large-receive-offload"),
    ("rx-vlan-hw-parse", "rx-vlan-offload"),
    ("tx-vlan-hw-insert", "tx-vlan-offload"),
    ("rx-ntuple-filter", "ntuple-filters"),
    ("rx-hashing", "receive-hashing"),
    ("rx-gro-hw", "rx-gro-hw"),
    ("tx-nocache-copy", "tx-nocache-copy"),
];

/// One bitset as the kernel sent it.
#[derive(Debug, Default)]
pub(super) struct Bitset {
    /// Bit index → name, for every bit listed.
    pub names: BTreeMap<u32, String>,
    /// Indices of the bits that are set.
    pub set: BTreeSet<u32>,
}

/// Parse a verbose bitset (`ETHTOOL_A_BITSET_BITS`). With
/// `ETHTOOL_A_BITSET_NOMASK` (list form) every listed bit is set; otherwise
/// a bit is set when it carries `ETHTOOL_A_BITSET_BIT_VALUE`.
pub(super) fn parse_bitset(a: &Attrs) -> Result<Bitset, WireError> {
    let list = a.flag(bs::NOMASK);
    if a.get(bs::BITS).is_none() && a.u32(bs::SIZE)?.unwrap_or(0) > 0 {
        return Err(WireError::Layout(
            "compact bitset where a verbose one was requested",
        ));
    }
    let mut out = Bitset::default();
    let Some(bits) = a.nested(bs::BITS)? else {
        return Ok(out);
    };
    for bit in bits.nested_all(bs::BITS_BIT)? {
        let idx = bit.u32(bs::BIT_INDEX)?.ok_or(WireError::Layout(
            "bitset bit without ETHTOOL_A_BITSET_BIT_INDEX",
        ))?;
        if let Some(name) = bit.string(bs::BIT_NAME)? {
            out.names.insert(idx, name);
        }
        if list || bit.flag(bs::BIT_VALUE) {
            out.set.insert(idx);
        }
    }
    Ok(out)
}

/// Combine the four feature bitsets the way `ethtool -k` does: `fixed` when
/// the bit is not in `hw` or is in `nochange`; otherwise `requested` when
/// `wanted` differs from `active` (a fixed feature never shows a request). `strings` (the `ETH_SS_FEATURES` set) supplies the
/// names of features that appear in none of the bitsets.
pub(super) fn combine(
    strings: &BTreeMap<u32, String>,
    hw: &Bitset,
    wanted: &Bitset,
    active: &Bitset,
    nochange: &Bitset,
) -> Features {
    let mut names = strings.clone();
    for b in [hw, wanted, active, nochange] {
        for (i, n) in &b.names {
            names.entry(*i).or_insert_with(|| n.clone());
        }
    }
    let map = names
        .into_iter()
        .filter(|(_, n)| !n.is_empty())
        .map(|(i, name)| {
            let on = active.set.contains(&i);
            let want = wanted.set.contains(&i);
            let fixed = !hw.set.contains(&i) || nochange.set.contains(&i);
            let feature = Feature {
                on,
                fixed,
                requested: (!fixed && on != want).then_some(want),
            };
            (name, feature)
        })
        .collect();
    Features(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[(u32, &str)], on: &[u32]) -> Bitset {
        Bitset {
            names: names.iter().map(|(i, n)| (*i, n.to_string())).collect(),
            set: on.iter().copied().collect(),
        }
    }

    #[test]
    fn fixed_and_requested_follow_ethtool_rules() {
        let strings: BTreeMap<u32, String> =
            [(0, "rx-gro"), (1, "rx-lro"), (2, ""), (3, "highdma")]
                .iter()
                .map(|(i, n)| (*i, n.to_string()))
                .collect();
        let hw = set(&[(0, "rx-gro"), (3, "highdma")], &[0, 3]);
        let wanted = set(&[(0, "rx-gro")], &[0]);
        let active = set(&[(3, "highdma")], &[3]);
        let nochange = set(&[(3, "highdma")], &[3]);
        let f = combine(&strings, &hw, &wanted, &active, &nochange);
        let gro = f.0["rx-gro"];
        assert!(!gro.on && !gro.fixed);
        assert_eq!(gro.requested, Some(true));
        assert_eq!(
            f.0["rx-lro"],
            Feature {
                on: false,
                fixed: true,
                requested: None
            }
        );
        assert_eq!(
            f.0["highdma"],
            Feature {
                on: true,
                fixed: true,
                requested: None
            }
        );
        assert_eq!(f.0.len(), 3, "the empty name is skipped");
    }

    #[test]
    fn aliases_have_unique_kernel_names() {
        let mut seen = BTreeSet::new();
        for (k, _) in FEATURE_ALIASES {
            assert!(seen.insert(*k), "{k} listed twice");
        }
    }
}

//! Offload feature names: the short words `ethtool -K` takes (`gro`), the
//! lines `ethtool -k` prints (`generic-receive-offload`) and the kernel's
//! names (`rx-gro`) that ethtool netlink reads and writes.
//!
//! A profile may use any of the three. Writes always go by kernel name, and
//! a legacy name that stands for a group (`tso` = every
//! `tx-tcp*-segmentation`) sets each member the device has, as `ethtool -K`
//! does. The groups come from [`FEATURE_ALIASES`], the table the probes use
//! to print `ethtool -k`, so both agree on what a legacy name means.

use crate::probe::facts::Features;
use crate::probe::netlink::FEATURE_ALIASES;

/// `ethtool -K` short words → the `ethtool -k` line they toggle (ethtool's `off_flag_def`).
pub const SHORT_NAMES: &[(&str, &str)] = &[
    ("rx", "rx-checksumming"),
    ("tx", "tx-checksumming"),
    ("sg", "scatter-gather"),
    ("tso", "tcp-segmentation-offload"),
    ("ufo", "udp-fragmentation-offload"),
    ("gso", "generic-segmentation-offload"),
    ("gro", "generic-receive-offload"),
    ("lro", "large-receive-offload"),
    ("rxvlan", "rx-vlan-offload"),
    ("txvlan", "tx-vlan-offload"),
    ("ntuple", "ntuple-filters"),
    ("rxhash", "receive-hashing"),
];

/// The `ethtool -k` line of a short word (`gro`), else the name as it is.
fn long_name(name: &str) -> &str {
    SHORT_NAMES
        .iter()
        .find(|(s, _)| *s == name)
        .map_or(name, |(_, l)| *l)
}

/// Kernel names a profile's feature name stands for (one name, or a group's members).
pub fn kernel_names(name: &str) -> Vec<&str> {
    let long = long_name(name);
    let members: Vec<&str> = FEATURE_ALIASES
        .iter()
        .filter(|(k, l)| *l == long && *k != long)
        .map(|(k, _)| *k)
        .collect();
    if members.is_empty() {
        vec![long]
    } else {
        members
    }
}

/// One name per feature for comparing profiles: the kernel name when the
/// profile's name stands for exactly one, else the `ethtool -k` group line.
pub fn canonical_name(name: &str) -> String {
    match kernel_names(name).as_slice() {
        [one] => (*one).to_string(),
        _ => long_name(name).to_string(),
    }
}

/// Features as ethtool netlink names them, from an `ethtool -k` view (a
/// captured directory): single-member legacy lines back to their kernel
/// name, group lines dropped (their members are listed by kernel name).
pub fn kernel_from_shown(shown: &Features) -> Features {
    let mut out = std::collections::BTreeMap::new();
    for (name, f) in &shown.0 {
        let members: Vec<&str> = FEATURE_ALIASES
            .iter()
            .filter(|(_, l)| *l == name)
            .map(|(k, _)| *k)
            .collect();
        let kernel = match members.as_slice() {
            [] => name.clone(),
            [one] => (*one).to_string(),
            _ => continue,
        };
        out.insert(kernel, *f);
    }
    Features(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_expand_like_ethtool() {
        assert_eq!(kernel_names("gro"), vec!["rx-gro"]);
        assert_eq!(kernel_names("generic-receive-offload"), vec!["rx-gro"]);
        assert_eq!(kernel_names("rx-gro"), vec!["rx-gro"]);
        let tso = kernel_names("tso");
        assert!(tso.contains(&"tx-tcp-segmentation") && tso.contains(&"tx-tcp6-segmentation"));
        assert_eq!(kernel_names("highdma"), vec!["highdma"]);
        assert_eq!(canonical_name("gro"), "rx-gro");
        assert_eq!(canonical_name("tso"), "tcp-segmentation-offload");
    }

    #[test]
    fn shown_features_map_back_to_kernel_names() {
        let text = include_str!("../../tests/fixtures/ethtool/k/veth");
        let shown = crate::probe::ethtool_text::parse_features(text).unwrap();
        let k = kernel_from_shown(&shown);
        assert!(k.0.contains_key("rx-gro"), "{:?}", k.0.keys());
        assert!(!k.0.contains_key("generic-receive-offload"));
        assert!(!k.0.contains_key("tcp-segmentation-offload"));
        assert!(k.0.contains_key("tx-tcp-segmentation"));
    }
}

//! The facts table of hosts with many NICs: instead of one row per NIC and
//! fact (8 NICs × 18 facts), each fact once per host — its value when all
//! the host's NICs share it, else one row per distinct value with the NICs
//! that have it (the odd one out stands out), and a value each NIC has its
//! own of (PCI addresses) in one row.
//!
//! Pure layout of the host facts: no I/O.

use super::facts::{host_rows, sysctl_rows, NIC_ROWS};
use crate::probe::facts::{HostFacts, NicFacts};

/// A host's NICs grouped by one fact: (value, the NICs that have it), in
/// the order the NICs are listed.
fn by_value(nics: &[NicFacts], get: fn(&NicFacts) -> String) -> Vec<(String, Vec<&str>)> {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for n in nics {
        let v = get(n);
        match groups.iter_mut().find(|g| g.0 == v) {
            Some(g) => g.1.push(n.name.as_str()),
            None => groups.push((v, vec![n.name.as_str()])),
        }
    }
    groups
}

/// The cells of one fact on one host: one cell when its NICs agree, one
/// per distinct value (`value: nic nic`) when they do not, or one listing
/// a value per NIC when every NIC has its own.
fn cells(h: Option<&HostFacts>, get: fn(&NicFacts) -> String) -> Vec<String> {
    let Some(h) = h.filter(|h| !h.nics.is_empty()) else {
        return vec!["-".into()];
    };
    let groups = by_value(&h.nics, get);
    match groups.as_slice() {
        [(v, _)] => vec![v.clone()],
        g if g.len() == h.nics.len() && g.len() > 2 => vec![format!(
            "one per NIC: {}",
            g.iter()
                .map(|(v, _)| v.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )],
        g => g
            .iter()
            .map(|(v, nics)| format!("{v}: {}", nics.join(" ")))
            .collect(),
    }
}

/// `8 NICs: ens1f0np0 ens1f1np1 ...` (or the one NIC's name).
fn interfaces(h: Option<&HostFacts>) -> String {
    match h.map(|h| h.nics.as_slice()) {
        None | Some([]) => "-".into(),
        Some([one]) => one.name.clone(),
        Some(nics) => format!(
            "{} NICs: {}",
            nics.len(),
            nics.iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

/// (fact, local, peer) rows with each host's NICs grouped.
pub fn fact_rows(l: Option<&HostFacts>, p: Option<&HostFacts>) -> Vec<(String, String, String)> {
    let mut rows = host_rows(l, p);
    rows.push(("interface".into(), interfaces(l), interfaces(p)));
    for (k, get) in NIC_ROWS.iter().filter(|(k, _)| *k != "interface") {
        let (a, b) = (cells(l, *get), cells(p, *get));
        for i in 0..a.len().max(b.len()) {
            let key = if i == 0 {
                (*k).to_string()
            } else {
                format!("{k} ({})", i + 1)
            };
            let cell = |v: &[String]| v.get(i).cloned().unwrap_or_default();
            rows.push((key, cell(&a), cell(&b)));
        }
    }
    rows.extend(sysctl_rows(l, p));
    rows
}

#[cfg(test)]
mod tests {
    use super::fact_rows;
    use crate::probe::facts::{HostFacts, NicFacts};

    fn host(nodes: &[i32]) -> HostFacts {
        HostFacts {
            nics: nodes
                .iter()
                .enumerate()
                .map(|(i, n)| NicFacts {
                    name: format!("eth{i}"),
                    numa_node: Some(*n),
                    mtu: Some(9000),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn row<'a>(rows: &'a [(String, String, String)], k: &str) -> &'a (String, String, String) {
        rows.iter()
            .find(|r| r.0 == k)
            .unwrap_or_else(|| panic!("no row {k}: {rows:#?}"))
    }

    #[test]
    fn shared_values_once_and_differences_one_row_per_value() {
        let (l, p) = (host(&[0, 0, 1, 1]), host(&[0, 0, 0]));
        let rows = fact_rows(Some(&l), Some(&p));
        assert_eq!(row(&rows, "interface").1, "4 NICs: eth0 eth1 eth2 eth3");
        assert_eq!(row(&rows, "interface").2, "3 NICs: eth0 eth1 eth2");
        // All agree: one row, the value alone.
        let mtu = row(&rows, "MTU");
        assert_eq!((mtu.1.as_str(), mtu.2.as_str()), ("9000", "9000"));
        assert!(rows.iter().all(|r| r.0 != "MTU (2)"));
        // The local NICs split over two nodes: a row per node naming them.
        assert_eq!(row(&rows, "NUMA node of NIC").1, "0: eth0 eth1");
        assert_eq!(row(&rows, "NUMA node of NIC").2, "0");
        assert_eq!(row(&rows, "NUMA node of NIC (2)").1, "1: eth2 eth3");
        assert_eq!(row(&rows, "NUMA node of NIC (2)").2, "");
        // No per-NIC rows.
        assert!(rows.iter().all(|r| !r.0.starts_with("nic1 ")), "{rows:#?}");
    }
}

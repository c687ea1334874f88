//! Where cores sit: NUMA node, L3 domain (an AMD CCX, an Intel socket's
//! LLC), SMT siblings — and a NIC's NUMA node — for the cores a test pins
//! its busiest threads to (a packet sink's). Read through [`HostSource`], so a captured directory or a
//! sosreport gives the same answer as the live host.
//!
//! Sources (sysfs): `cpu/cpuN/topology/thread_siblings_list`, `core_id`,
//! `physical_package_id`; `cpu/cpuN/cache/indexK/{level,shared_cpu_list,id}`
//! for the L3; `node/nodeK/cpulist` for NUMA; `class/net/IF/device/numa_node`
//! for the NIC (-1, or no `device`, means none: a virtual interface).
//! Reading only; a file that is missing leaves its fact unknown (None) and
//! says so in `unavailable`, never an error.

use super::source::HostSource;
use crate::units::{format_cpu_list, parse_cpu_list, CpuId};
use serde::{Deserialize, Serialize};

pub use super::facts::CpuPlace;

/// The cores a test pins its busiest threads to, and the NIC they serve.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CoreTopology {
    /// The chosen cores, in the order given.
    pub cpus: Vec<CpuPlace>,
    /// The NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<String>,
    /// Its NUMA node (None: not on one, or virtual).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_numa_node: Option<u32>,
    /// CPUs local to the NIC (`device/local_cpulist`), kernel list form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_local_cpus: Option<String>,
    /// What could not be read, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<String>,
}

fn num(src: &dyn HostSource, path: &str) -> Option<i64> {
    src.read(path).ok()?.trim().parse().ok()
}

fn list(src: &dyn HostSource, path: &str) -> Option<Vec<CpuId>> {
    parse_cpu_list(src.read(path).ok()?.trim()).ok()
}

/// The NUMA node of `cpu`: the `nodeK` entry in its sysfs directory, else
/// the node whose `cpulist` holds it.
fn numa_of(src: &dyn HostSource, cpu: CpuId) -> Option<u32> {
    let dir = format!("/sys/devices/system/cpu/cpu{}", cpu.0);
    if let Ok(entries) = src.list(&dir) {
        if let Some(n) = entries
            .iter()
            .find_map(|e| e.strip_prefix("node").and_then(|n| n.parse().ok()))
        {
            return Some(n);
        }
    }
    let nodes = src.list("/sys/devices/system/node").ok()?;
    nodes.iter().find_map(|e| {
        let n: u32 = e.strip_prefix("node")?.parse().ok()?;
        list(src, &format!("/sys/devices/system/node/{e}/cpulist"))?
            .contains(&cpu)
            .then_some(n)
    })
}

/// The L3 of `cpu`: the cache index whose `level` is 3.
fn l3_of(src: &dyn HostSource, cpu: CpuId) -> (Option<String>, Option<u32>) {
    let base = format!("/sys/devices/system/cpu/cpu{}/cache", cpu.0);
    let Ok(indices) = src.list(&base) else {
        return (None, None);
    };
    for i in indices.iter().filter(|i| i.starts_with("index")) {
        if num(src, &format!("{base}/{i}/level")) == Some(3) {
            let cpus = list(src, &format!("{base}/{i}/shared_cpu_list"));
            let id = num(src, &format!("{base}/{i}/id")).and_then(|v| u32::try_from(v).ok());
            return (cpus.map(|c| format_cpu_list(&c)), id);
        }
    }
    (None, None)
}

/// One core's place.
pub fn cpu_place(src: &dyn HostSource, cpu: CpuId) -> CpuPlace {
    let t = format!("/sys/devices/system/cpu/cpu{}/topology", cpu.0);
    let (l3, l3_id) = l3_of(src, cpu);
    CpuPlace {
        cpu,
        numa_node: numa_of(src, cpu),
        l3,
        l3_id,
        smt_siblings: list(src, &format!("{t}/thread_siblings_list"))
            .unwrap_or_default()
            .into_iter()
            .filter(|c| *c != cpu)
            .collect(),
        core_id: num(src, &format!("{t}/core_id")).and_then(|v| u32::try_from(v).ok()),
        package: num(src, &format!("{t}/physical_package_id")).and_then(|v| u32::try_from(v).ok()),
    }
}

/// The CPUs of `nic`'s NUMA node (`node/nodeK/cpulist` of its
/// `device/numa_node`); None when it is on no node (a virtual interface,
/// numa_node -1, a single-node host that does not say) or the list is
/// unreadable.
pub fn nic_node_cpus(src: &dyn HostSource, nic: &str) -> Option<Vec<CpuId>> {
    let node = num(src, &format!("/sys/class/net/{nic}/device/numa_node"))?;
    let node = u32::try_from(node).ok()?;
    list(src, &format!("/sys/devices/system/node/node{node}/cpulist")).filter(|l| !l.is_empty())
}

/// The places of `cpus` and the NUMA node of `nic`.
pub fn read(src: &dyn HostSource, cpus: &[CpuId], nic: Option<&str>) -> CoreTopology {
    let mut t = CoreTopology {
        cpus: cpus.iter().map(|c| cpu_place(src, *c)).collect(),
        nic: nic.map(String::from),
        ..Default::default()
    };
    for p in &t.cpus {
        if p.core_id.is_none() {
            t.unavailable.push(format!(
                "{}: no topology in {} (offline CPU, or not captured)",
                p.cpu,
                src.describe()
            ));
        }
    }
    if let Some(n) = nic {
        t.nic_local_cpus = list(src, &format!("/sys/class/net/{n}/device/local_cpulist"))
            .map(|c| format_cpu_list(&c));
        match num(src, &format!("/sys/class/net/{n}/device/numa_node")) {
            Some(v) if v >= 0 => t.nic_numa_node = u32::try_from(v).ok(),
            Some(_) => t
                .unavailable
                .push(format!("{n}: the device is on no NUMA node (numa_node -1)")),
            None => t
                .unavailable
                .push(format!("{n}: no device/numa_node (a virtual interface)")),
        }
    }
    t
}

impl CoreTopology {
    /// The topology of `cpus` and `nic` from a host's facts (what the
    /// rules and the views read; [`read`] is the same from the sysfs files).
    pub fn from_facts(f: &super::facts::HostFacts, cpus: &[CpuId], nic: Option<&str>) -> Self {
        let mut t = CoreTopology {
            nic: nic.map(String::from),
            ..Default::default()
        };
        for c in cpus {
            match f.cpu_places.iter().find(|p| p.cpu == *c) {
                Some(p) => t.cpus.push(p.clone()),
                None => {
                    t.unavailable
                        .push(format!("{c}: no topology in the host's facts"));
                    t.cpus.push(CpuPlace {
                        cpu: *c,
                        numa_node: None,
                        l3: None,
                        l3_id: None,
                        smt_siblings: Vec::new(),
                        core_id: None,
                        package: None,
                    });
                }
            }
        }
        if let Some(n) = nic.and_then(|n| f.nics.iter().find(|x| x.name == n)) {
            t.nic_numa_node = n.numa_node.and_then(|v| u32::try_from(v).ok());
            t.nic_local_cpus = n.local_cpulist.clone();
        }
        t
    }

    /// One line: each chosen core's NUMA node, L3 domain and SMT siblings,
    /// then the NIC's node (`cpu8 node 0, L3 8-15, SMT 72; NIC eth0 node 0`).
    pub fn describe(&self) -> String {
        let opt = |v: Option<u32>| v.map_or("?".to_string(), |v| v.to_string());
        let mut parts: Vec<String> = self
            .cpus
            .iter()
            .map(|p| {
                format!(
                    "{} node {}, L3 {}, SMT {}",
                    p.cpu,
                    opt(p.numa_node),
                    p.l3.as_deref().unwrap_or("?"),
                    if p.smt_siblings.is_empty() {
                        "none".to_string()
                    } else {
                        format_cpu_list(&p.smt_siblings)
                    }
                )
            })
            .collect();
        if let Some(n) = &self.nic {
            parts.push(format!(
                "NIC {n} node {}",
                self.nic_numa_node
                    .map_or("none (virtual or no NUMA)".to_string(), |v| v.to_string())
            ));
        }
        parts.join("; ")
    }

    /// Chosen cores on another NUMA node than the NIC.
    pub fn remote(&self) -> Vec<&CpuPlace> {
        let Some(nic) = self.nic_numa_node else {
            return Vec::new();
        };
        self.cpus
            .iter()
            .filter(|p| p.numa_node.is_some_and(|n| n != nic))
            .collect()
    }

    /// Pairs of chosen cores that are SMT siblings (one physical core).
    pub fn shared_cores(&self) -> Vec<(CpuId, CpuId)> {
        let mut out = Vec::new();
        for (i, a) in self.cpus.iter().enumerate() {
            for b in &self.cpus[i + 1..] {
                if a.cpu != b.cpu && a.smt_siblings.contains(&b.cpu) {
                    out.push((a.cpu, b.cpu));
                }
            }
        }
        out
    }

    /// The chosen cores grouped by L3 domain (list form of the domain → cores).
    pub fn l3_domains(&self) -> Vec<(String, Vec<CpuId>)> {
        let mut out: Vec<(String, Vec<CpuId>)> = Vec::new();
        for p in &self.cpus {
            let key = p.l3.clone().unwrap_or_else(|| "unknown".into());
            match out.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(p.cpu),
                None => out.push((key, vec![p.cpu])),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::capture_dir::CaptureDir as Dir;
    use crate::probe::live_host::LiveHost as Live;
    use std::path::Path;

    fn fixture(name: &str) -> Dir {
        Dir::new(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/topology")
                .join(name),
        )
    }

    #[test]
    fn two_socket_smt_host() {
        // 2 packages x 2 cores x 2 threads; node 0 = cpus 0-1,4-5; the NIC on node 1.
        let src = fixture("2s-smt");
        let t = read(
            &src,
            &[CpuId(0), CpuId(4), CpuId(2), CpuId(1)],
            Some("eth0"),
        );
        assert!(t.unavailable.is_empty(), "{:?}", t.unavailable);
        assert_eq!(t.nic_numa_node, Some(1));
        assert_eq!(t.nic_local_cpus.as_deref(), Some("2-3,6-7"));
        let p0 = &t.cpus[0];
        assert_eq!(
            (p0.numa_node, p0.core_id, p0.package),
            (Some(0), Some(0), Some(0))
        );
        assert_eq!(p0.smt_siblings, vec![CpuId(4)]);
        assert_eq!(p0.l3.as_deref(), Some("0-1,4-5"));
        assert_eq!(t.cpus[2].numa_node, Some(1));
        assert_eq!(t.shared_cores(), vec![(CpuId(0), CpuId(4))]);
        let remote: Vec<CpuId> = t.remote().iter().map(|p| p.cpu).collect();
        assert_eq!(remote, vec![CpuId(0), CpuId(4), CpuId(1)]);
        let domains = t.l3_domains();
        assert_eq!(domains.len(), 2);
        assert_eq!(domains[0].1, vec![CpuId(0), CpuId(4), CpuId(1)]);
    }

    #[test]
    fn a_nics_node_cpus_come_from_its_numa_node() {
        // The NIC is on node 1 (cpus 2-3,6-7); the VM's virtio NIC says no node.
        let want: Vec<CpuId> = [2, 3, 6, 7].into_iter().map(CpuId).collect();
        assert_eq!(nic_node_cpus(&fixture("2s-smt"), "eth0"), Some(want));
        assert_eq!(nic_node_cpus(&fixture("vm-2cpu"), "eth0"), None);
        assert_eq!(
            nic_node_cpus(&Live::default(), "lo"),
            None,
            "lo has no device"
        );
    }

    #[test]
    fn this_vm_captured() {
        // A real 2-vCPU VM: one node, one L3, no SMT, a virtio NIC without numa_node.
        let src = fixture("vm-2cpu");
        let t = read(&src, &[CpuId(0), CpuId(1)], Some("eth0"));
        assert_eq!(t.cpus[0].numa_node, Some(0));
        assert_eq!(t.cpus[1].l3.as_deref(), Some("0-1"));
        assert!(t.shared_cores().is_empty());
        assert!(t.remote().is_empty(), "unknown NIC node: nothing is remote");
        assert!(
            t.unavailable.iter().any(|u| u.contains("eth0")),
            "{:?}",
            t.unavailable
        );
    }

    #[test]
    fn live_host_reads_the_same_files() {
        let t = read(&Live::default(), &[CpuId(0)], Some("lo"));
        assert_eq!(t.cpus.len(), 1);
        assert!(t.cpus[0].core_id.is_some());
        assert!(t.nic_numa_node.is_none(), "lo has no device");
        let j = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<CoreTopology>(&j).unwrap(), t);
    }

    #[test]
    fn from_facts_matches_the_sysfs_reading_and_describes_it() {
        use crate::probe::facts::{HostFacts, NicFacts};
        let place = |cpu: u32, node: u32, sib: u32| CpuPlace {
            cpu: CpuId(cpu),
            numa_node: Some(node),
            l3: Some("0-3".into()),
            l3_id: Some(0),
            smt_siblings: vec![CpuId(sib)],
            core_id: Some(cpu % 2),
            package: Some(0),
        };
        let f = HostFacts {
            cpu_places: vec![place(0, 0, 2), place(1, 1, 3), place(2, 0, 0)],
            nics: vec![NicFacts {
                name: "eth0".into(),
                numa_node: Some(0),
                local_cpulist: Some("0,2".into()),
                ..NicFacts::default()
            }],
            ..HostFacts::default()
        };
        let t =
            CoreTopology::from_facts(&f, &[CpuId(0), CpuId(2), CpuId(1), CpuId(9)], Some("eth0"));
        assert_eq!(t.nic_numa_node, Some(0));
        assert_eq!(t.remote().len(), 1, "cpu1 is on node 1");
        assert_eq!(t.shared_cores(), vec![(CpuId(0), CpuId(2))]);
        assert_eq!(t.unavailable.len(), 1, "cpu9 has no place");
        let d = t.describe();
        assert!(d.starts_with("cpu0 node 0, L3 0-3, SMT 2;"), "{d}");
        assert!(d.ends_with("NIC eth0 node 0"), "{d}");
    }
}

//! Rule ids, their impact priors (for ranking) and their references.
//!
//! A rule with a measured impact (a fraction of time, of packets, of a core)
//! uses it; otherwise it uses the prior below. Priors are small for settings
//! that cost a few percent (MTU, governor) and large for ones known to halve
//! throughput (an inbox 2015 driver). `assets/rules.md` has the full text.

/// One rule: id, impact prior in [0, 1], reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RuleInfo {
    /// Stable id.
    pub id: &'static str,
    /// Impact used when the rule has no measured fraction.
    pub prior: f64,
    /// Kernel doc or vendor guide.
    pub reference: &'static str,
}

const SCALING: &str = "kernel Documentation/networking/scaling.rst (RSS, RPS, XPS, IRQ affinity)";
const IRQ: &str = "kernel Documentation/core-api/irq/irq-affinity.rst; NVIDIA \"Performance Tuning for Mellanox Adapters\"";
const ETHTOOL: &str = "ethtool(8); NVIDIA \"Performance Tuning for Mellanox Adapters\"";
const MLX5_COUNTERS: &str = "NVIDIA \"Understanding mlx5 ethtool Counters\"";
const SYSCTL_NET: &str = "kernel Documentation/admin-guide/sysctl/net.rst";
const RDMA_COUNTERS: &str = "NVIDIA \"Understanding mlx5 Linux Counters and Status Parameters\" (hw_counters); kernel Documentation/ABI/stable/sysfs-class-infiniband";
const ROCE: &str =
    "NVIDIA \"RoCE Configuration for ConnectX\" (PFC, ECN/DCQCN, RoCE v2); IBTA RoCEv2 annex A17";
const TCP: &str = "kernel Documentation/networking/ip-sysctl.rst (tcp_rmem, tcp_wmem); ESnet fasterdata \"Linux Tuning\"";

const NUMA: &str = "kernel Documentation/admin-guide/mm/numa_memory_policy.rst; Documentation/networking/scaling.rst";
const XDP: &str =
    "kernel Documentation/networking/af_xdp.rst; Documentation/networking/packet_mmap.rst";
const NIC_QUEUES: &str = "ethtool(8) -G/-L; NVIDIA \"Understanding mlx5 ethtool Counters\"";

const GRPC: &str = "grpc.io \"Performance Best Practices\" (one connection per few cores, keep channels busy); RFC 9113 section 5.2 (HTTP/2 flow control)";

/// Every rule this engine implements.
pub const RULES: &[RuleInfo] = &[
    RuleInfo {
        id: "cpu.single-core-saturated",
        prior: 0.9,
        reference: SCALING,
    },
    RuleInfo {
        id: "cpu.all-cores-saturated",
        prior: 0.7,
        reference: SCALING,
    },
    RuleInfo {
        id: "softirq.concentrated",
        prior: 0.6,
        reference: SCALING,
    },
    RuleInfo {
        id: "irq.single-cpu",
        prior: 0.5,
        reference: IRQ,
    },
    RuleInfo {
        id: "irq.remote-numa",
        prior: 0.4,
        reference: IRQ,
    },
    RuleInfo {
        id: "irqbalance.conflict",
        prior: 0.2,
        reference: IRQ,
    },
    RuleInfo {
        id: "nic.few-queues",
        prior: 0.4,
        reference: ETHTOOL,
    },
    RuleInfo {
        id: "nic.queue-imbalance",
        prior: 0.5,
        reference: SCALING,
    },
    RuleInfo {
        id: "nic.ring-small",
        prior: 0.5,
        reference: ETHTOOL,
    },
    RuleInfo {
        id: "nic.rx-out-of-buffer",
        prior: 0.6,
        reference: MLX5_COUNTERS,
    },
    RuleInfo {
        id: "nic.discards-phy",
        prior: 0.6,
        reference: MLX5_COUNTERS,
    },
    RuleInfo {
        id: "nic.pause-frames",
        prior: 0.5,
        reference: MLX5_COUNTERS,
    },
    RuleInfo {
        id: "nic.gro-off",
        prior: 0.3,
        reference: "kernel Documentation/networking/segmentation-offloads.rst; ethtool(8) -K",
    },
    RuleInfo {
        id: "nic.tso-off",
        prior: 0.4,
        reference: "kernel Documentation/networking/segmentation-offloads.rst; ethtool(8) -K",
    },
    RuleInfo {
        id: "nic.mtu-small",
        prior: 0.1,
        reference: "ip-link(8) mtu; NVIDIA \"Performance Tuning for Mellanox Adapters\"",
    },
    RuleInfo {
        id: "softnet.squeeze",
        prior: 0.3,
        reference: SYSCTL_NET,
    },
    RuleInfo {
        id: "softnet.backlog-drops",
        prior: 0.5,
        reference: SYSCTL_NET,
    },
    RuleInfo {
        id: "tcp.buffer-limited",
        prior: 0.6,
        reference: TCP,
    },
    RuleInfo {
        id: "tcp.retransmits",
        prior: 0.5,
        reference: "RFC 6298; kernel Documentation/networking/snmp_counter.rst",
    },
    RuleInfo {
        id: "qdisc.shaping",
        prior: 0.7,
        reference: "tc(8), tc-tbf(8), tc-htb(8), tc-fq(8)",
    },
    RuleInfo {
        id: "pcie.link-downgraded",
        prior: 0.6,
        reference: "kernel Documentation/ABI/testing/sysfs-bus-pci (current_link_speed); lspci(8)",
    },
    RuleInfo {
        id: "cpu.governor",
        prior: 0.1,
        reference: "kernel Documentation/admin-guide/pm/cpufreq.rst",
    },
    RuleInfo {
        id: "driver.mlx5-outdated",
        prior: 0.8,
        reference:
            "assets/catalog.toml (driver.mlx5_core); NVIDIA MLNX_OFED / DOCA-OFED release notes",
    },
    RuleInfo {
        id: "firmware.outdated",
        prior: 0.3,
        reference: "assets/catalog.toml (firmware); NVIDIA ConnectX firmware release notes",
    },
    RuleInfo {
        id: "platform.iommu",
        prior: 0.3,
        reference: "kernel Documentation/admin-guide/kernel-parameters.txt (iommu=pt, intel_iommu)",
    },
    RuleInfo {
        id: "rdma.no-device",
        prior: 0.0,
        reference: "rdma-core: rdma link, ibv_devinfo(1); kernel drivers/infiniband (mlx5_ib, rdma_rxe)",
    },
    RuleInfo {
        id: "rdma.port-down",
        prior: 0.9,
        reference: "kernel Documentation/ABI/stable/sysfs-class-infiniband (state, phys_state); ibstat(8), opensm(8)",
    },
    RuleInfo {
        id: "rdma.mtu-small",
        prior: 0.4,
        reference: "kernel include/rdma/ib_addr.h iboe_get_mtu (RoCE MTU from the netdev MTU); NVIDIA \"RoCE MTU\"",
    },
    RuleInfo {
        id: "rdma.gid-v1",
        prior: 0.3,
        reference: ROCE,
    },
    RuleInfo {
        id: "rdma.out-of-buffer",
        prior: 0.6,
        reference: RDMA_COUNTERS,
    },
    RuleInfo {
        id: "rdma.retransmits",
        prior: 0.7,
        reference: RDMA_COUNTERS,
    },
    RuleInfo {
        id: "rdma.congestion",
        prior: 0.5,
        reference: ROCE,
    },
    RuleInfo {
        id: "grpc.connection-bound",
        prior: 0.6,
        reference: GRPC,
    },
    RuleInfo {
        id: "grpc.flow-control-limited",
        prior: 0.5,
        reference: GRPC,
    },
    RuleInfo {
        id: "grpc.errors",
        prior: 0.8,
        reference: GRPC,
    },
    RuleInfo {
        id: "sink.remote-numa",
        prior: 0.4,
        reference: NUMA,
    },
    RuleInfo {
        id: "sink.smt-siblings",
        prior: 0.3,
        reference: NUMA,
    },
    RuleInfo {
        id: "sink.queue-overrun",
        prior: 0.8,
        reference: XDP,
    },
    RuleInfo {
        id: "sink.generator-bound",
        prior: 0.5,
        reference: XDP,
    },
    RuleInfo {
        id: "nic.rx-missed",
        prior: 0.6,
        reference: NIC_QUEUES,
    },
];

/// The rule's entry, if the id is known.
pub fn rule(id: &str) -> Option<&'static RuleInfo> {
    RULES.iter().find(|r| r.id == id)
}

/// The impact prior of a rule (0.3 for an unknown id).
pub fn prior(id: &str) -> f64 {
    rule(id).map(|r| r.prior).unwrap_or(0.3)
}

/// The reference of a rule, with a pointer to `assets/rules.md`.
pub fn reference(id: &str) -> &'static str {
    rule(id).map(|r| r.reference).unwrap_or("assets/rules.md")
}

#[cfg(test)]
mod tests {
    use super::RULES;
    use std::collections::BTreeSet;

    /// The rule families (the part of an id before the dot).
    fn families() -> BTreeSet<&'static str> {
        RULES
            .iter()
            .filter_map(|r| r.id.split_once('.').map(|(f, _)| f))
            .collect()
    }

    /// String literals of a source file that have the shape of a rule id
    /// of a known family (`nic.rx-missed`).
    fn ids_in(src: &str, fams: &BTreeSet<&str>) -> BTreeSet<String> {
        src.split('"')
            .skip(1)
            .step_by(2)
            .filter(|lit| {
                lit.split_once('.').is_some_and(|(f, rest)| {
                    fams.contains(f)
                        && !rest.is_empty()
                        && rest
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                })
            })
            .map(str::to_string)
            .collect()
    }

    const SOURCES: &[(&str, &str)] = &[
        ("cpu.rs", include_str!("rules/cpu.rs")),
        ("driver.rs", include_str!("rules/driver.rs")),
        ("grpc.rs", include_str!("rules/grpc.rs")),
        ("mod.rs", include_str!("rules/mod.rs")),
        ("nic.rs", include_str!("rules/nic.rs")),
        ("nic_live.rs", include_str!("rules/nic_live.rs")),
        ("platform.rs", include_str!("rules/platform.rs")),
        ("rdma.rs", include_str!("rules/rdma.rs")),
        ("sink.rs", include_str!("rules/sink.rs")),
        ("tcp.rs", include_str!("rules/tcp.rs")),
    ];

    #[test]
    fn every_id_a_rule_emits_is_ranked_and_documented() {
        let doc = include_str!("../../assets/rules.md");
        let fams = families();
        let mut seen = BTreeSet::new();
        for (file, src) in SOURCES {
            for id in ids_in(src, &fams) {
                assert!(
                    super::rule(&id).is_some(),
                    "rules/{file} emits {id}, which is not in impact::RULES (it would rank with a default prior)"
                );
                seen.insert(id);
            }
        }
        for r in RULES {
            assert!(
                doc.contains(&format!("| {} |", r.id)),
                "{} is not documented in assets/rules.md",
                r.id
            );
            assert!(
                (0.0..=1.0).contains(&r.prior),
                "{}: prior {}",
                r.id,
                r.prior
            );
        }
        let ids: BTreeSet<&str> = RULES.iter().map(|r| r.id).collect();
        assert_eq!(ids.len(), RULES.len(), "an id is listed twice in RULES");
        // The scan found the rules (it did not silently match nothing).
        assert!(seen.len() >= 30, "only {} ids found: {seen:?}", seen.len());
    }

    #[test]
    fn every_rules_file_is_scanned() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/diagnose/rules");
        let on_disk: BTreeSet<String> = std::fs::read_dir(&dir)
            .expect("src/diagnose/rules")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".rs"))
            .collect();
        let scanned: BTreeSet<String> = SOURCES.iter().map(|(f, _)| f.to_string()).collect();
        assert_eq!(on_disk, scanned, "add the new rules file to SOURCES");
    }
}

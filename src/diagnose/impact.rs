//! The rule table: one entry per rule id with what it judges (the host, or
//! the data paths whose traffic it judges, so the engines that declare them),
//! the thresholds it reads, what it limits (the words of `limited_by`), its
//! impact prior (for ranking) and its reference.
//! It names no engine: an engine's [`crate::traffic::EngineSlice::paths`]
//! decides which rules judge its tests.
//!
//! Everything that needs to know about a rule reads this one table:
//! [`crate::diagnose::diagnose`] drops findings of rules that do not apply to
//! the test's engine ([`applies`]), the ranking uses [`prior`] when a rule has
//! no measured fraction, a finding's reference comes from [`reference()`], and
//! the index table of `assets/rules.md` is generated from it (a test fails
//! when the document, the table and the rule sources disagree).
//!
//! A rule with a measured impact (a fraction of time, of packets, of a core)
//! uses it; otherwise it uses the prior below. Priors are small for settings
//! that cost a few percent (MTU, governor) and large for ones known to halve
//! throughput (an inbox 2015 driver). `assets/rules.md` has the full text.

use crate::traffic::{slice, DataPaths, EngineKind, EngineSpec};

/// What a rule judges: a condition of the host that any test meets, or
/// the traffic of the data paths it names ([`DataPaths`]). A test's engine
/// declares the paths it uses, so a rule applies to every engine that uses
/// one of its paths. With no test running (`watch`, `check`, a capture)
/// every rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judges {
    /// Host-wide conditions (a core, the driver, the platform): every test.
    Host,
    /// Tests whose traffic takes one of these paths.
    Paths(DataPaths),
}

impl Judges {
    /// True when the rule judges tests of `kind`.
    pub fn contains(self, kind: EngineKind) -> bool {
        match self {
            Judges::Host => true,
            Judges::Paths(p) => p.meets(slice(kind).paths()),
        }
    }

    /// The names of the engines it judges in a fixed order (`tcp, grpc,
    /// sink, rdma`), or `all`.
    pub fn names(self) -> String {
        if EngineKind::ALL.iter().all(|k| self.contains(*k)) {
            return "all".into();
        }
        EngineKind::ALL
            .iter()
            .filter(|k| self.contains(**k))
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Every test: host-wide conditions (a core, the driver, the platform).
pub const ALL: Judges = Judges::Host;
/// Traffic through the kernel's network stack (not RDMA's kernel bypass).
pub const KERNEL: Judges = Judges::Paths(DataPaths::KERNEL_STACK);
/// TCP connections (gRPC runs on them): buffers, retransmits, segmentation offloads.
pub const TCP_STACK: Judges = Judges::Paths(DataPaths::TCP);
/// HTTP/2 channels (gRPC tests).
pub const HTTP2: Judges = Judges::Paths(DataPaths::HTTP2);
/// Frames into packet rings (packet tests).
pub const PACKET_RINGS: Judges = Judges::Paths(DataPaths::PACKET_RINGS);
/// RDMA queue pairs (RDMA tests).
pub const VERBS: Judges = Judges::Paths(DataPaths::VERBS);

/// One rule of the table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RuleInfo {
    /// Stable id: `family.name`.
    pub id: &'static str,
    /// The tests the rule judges: any (host-wide conditions), or those
    /// whose engine uses one of its data paths.
    pub judges: Judges,
    /// The names of the threshold fields it reads: of
    /// [`crate::diagnose::Thresholds`], or of its family's own table beside
    /// its rules (an engine's rule family keeps its numbers there).
    pub thresholds: &'static [&'static str],
    /// What held the test back when this rule's finding is the most
    /// important one: the words of [`crate::diagnose::limited_by`]'s sentence
    /// (`limited by {limit} on the local host: ...`).
    pub limit: &'static str,
    /// Impact used when the rule has no measured fraction.
    pub prior: f64,
    /// Kernel doc or vendor guide.
    pub reference: &'static str,
}

impl RuleInfo {
    /// The family: the part of the id before the dot (`cpu`, `nic`, ...).
    pub fn family(&self) -> &'static str {
        self.id.split_once('.').map_or(self.id, |(f, _)| f)
    }
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

const GRPC_GUIDE: &str = "grpc.io \"Performance Best Practices\" (one connection per few cores, keep channels busy); RFC 9113 section 5.2 (HTTP/2 flow control)";

/// Every rule this engine implements.
pub const RULES: &[RuleInfo] = &[
    RuleInfo {
        id: "cpu.single-core-saturated",
        limit: "one core",
        judges: ALL,
        thresholds: &[
            "sustain_intervals",
            "core_saturated_pct",
            "others_headroom_pct",
            "kernel_path_min_pct",
            "test_cpu_min_pct",
            "softirq_heavy_pct",
        ],
        prior: 0.9,
        reference: SCALING,
    },
    RuleInfo {
        id: "cpu.all-cores-saturated",
        limit: "the CPU",
        judges: ALL,
        thresholds: &["sustain_intervals", "core_saturated_pct"],
        prior: 0.7,
        reference: SCALING,
    },
    RuleInfo {
        id: "softirq.concentrated",
        limit: "receive processing on one core",
        judges: KERNEL,
        thresholds: &["sustain_intervals", "net_rx_share", "net_rx_group_share", "net_rx_min_per_s", "softirq_heavy_pct", "core_saturated_pct", "others_headroom_pct"],
        prior: 0.6,
        reference: SCALING,
    },
    RuleInfo {
        id: "irq.single-cpu",
        limit: "IRQ placement",
        judges: ALL,
        thresholds: &[],
        prior: 0.5,
        reference: IRQ,
    },
    RuleInfo {
        id: "irq.remote-numa",
        limit: "IRQ placement",
        judges: ALL,
        thresholds: &[],
        prior: 0.4,
        reference: IRQ,
    },
    RuleInfo {
        id: "irqbalance.conflict",
        limit: "IRQ placement",
        judges: ALL,
        thresholds: &[],
        prior: 0.2,
        reference: IRQ,
    },
    RuleInfo {
        id: "nic.few-queues",
        limit: "the NIC's settings",
        judges: KERNEL,
        thresholds: &["fast_link_mbps", "max_useful_channels"],
        prior: 0.4,
        reference: ETHTOOL,
    },
    RuleInfo {
        id: "nic.queue-imbalance",
        limit: "the NIC's settings",
        judges: KERNEL,
        thresholds: &["queue_share", "queue_min_pps"],
        prior: 0.5,
        reference: SCALING,
    },
    RuleInfo {
        id: "nic.ring-small",
        limit: "the NIC's settings",
        judges: KERNEL,
        thresholds: &[],
        prior: 0.5,
        reference: ETHTOOL,
    },
    RuleInfo {
        id: "nic.rx-out-of-buffer",
        limit: "the NIC's settings",
        judges: KERNEL,
        thresholds: &[],
        prior: 0.6,
        reference: MLX5_COUNTERS,
    },
    RuleInfo {
        id: "nic.discards-phy",
        limit: "the NIC's settings",
        judges: ALL,
        thresholds: &[],
        prior: 0.6,
        reference: MLX5_COUNTERS,
    },
    RuleInfo {
        id: "nic.pause-frames",
        limit: "the NIC's settings",
        judges: ALL,
        thresholds: &[],
        prior: 0.5,
        reference: MLX5_COUNTERS,
    },
    RuleInfo {
        id: "nic.gro-off",
        limit: "the NIC's settings",
        judges: TCP_STACK,
        thresholds: &["unaggregated_factor"],
        prior: 0.3,
        reference: "kernel Documentation/networking/segmentation-offloads.rst; ethtool(8) -K",
    },
    RuleInfo {
        id: "nic.tso-off",
        limit: "the NIC's settings",
        judges: TCP_STACK,
        thresholds: &[],
        prior: 0.4,
        reference: "kernel Documentation/networking/segmentation-offloads.rst; ethtool(8) -K",
    },
    RuleInfo {
        id: "nic.mtu-small",
        limit: "the NIC's settings",
        judges: ALL,
        thresholds: &["fast_link_mbps", "jumbo_mtu"],
        prior: 0.1,
        reference: "ip-link(8) mtu; NVIDIA \"Performance Tuning for Mellanox Adapters\"",
    },
    RuleInfo {
        id: "softnet.squeeze",
        limit: "the kernel's receive budget",
        judges: KERNEL,
        thresholds: &["sustain_intervals", "squeeze_per_s"],
        prior: 0.3,
        reference: SYSCTL_NET,
    },
    RuleInfo {
        id: "softnet.backlog-drops",
        limit: "the kernel's receive budget",
        judges: KERNEL,
        thresholds: &[],
        prior: 0.5,
        reference: SYSCTL_NET,
    },
    RuleInfo {
        id: "tcp.buffer-limited",
        limit: "a TCP buffer",
        judges: TCP_STACK,
        thresholds: &["limited_share", "assumed_rtt_us", "fast_link_mbps"],
        prior: 0.6,
        reference: TCP,
    },
    RuleInfo {
        id: "tcp.retransmits",
        limit: "retransmissions",
        judges: TCP_STACK,
        thresholds: &["retrans_ratio", "retrans_min_segs", "loss_bound_share"],
        prior: 0.5,
        reference: "RFC 6298; kernel Documentation/networking/snmp_counter.rst",
    },
    RuleInfo {
        id: "qdisc.shaping",
        limit: "a condition the rules found",
        judges: KERNEL,
        thresholds: &[],
        prior: 0.7,
        reference: "tc(8), tc-tbf(8), tc-htb(8), tc-fq(8)",
    },
    RuleInfo {
        id: "pcie.link-downgraded",
        limit: "the PCIe link",
        judges: ALL,
        thresholds: &[],
        prior: 0.6,
        reference: "kernel Documentation/ABI/testing/sysfs-bus-pci (current_link_speed); lspci(8)",
    },
    RuleInfo {
        id: "cpu.governor",
        limit: "the CPU's settings",
        judges: ALL,
        thresholds: &[],
        prior: 0.1,
        reference: "kernel Documentation/admin-guide/pm/cpufreq.rst",
    },
    RuleInfo {
        id: "driver.mlx5-outdated",
        limit: "the driver or firmware",
        judges: ALL,
        thresholds: &[],
        prior: 0.8,
        reference:
            "assets/catalog.toml (driver.mlx5_core); NVIDIA MLNX_OFED / DOCA-OFED release notes",
    },
    RuleInfo {
        id: "firmware.outdated",
        limit: "the driver or firmware",
        judges: ALL,
        thresholds: &[],
        prior: 0.3,
        reference: "assets/catalog.toml (firmware); NVIDIA ConnectX firmware release notes",
    },
    RuleInfo {
        id: "platform.iommu",
        limit: "a condition the rules found",
        judges: ALL,
        thresholds: &[],
        prior: 0.3,
        reference: "kernel Documentation/admin-guide/kernel-parameters.txt (iommu=pt, intel_iommu)",
    },
    RuleInfo {
        id: "rdma.no-device",
        limit: "the RDMA path",
        judges: VERBS,
        thresholds: &[],
        prior: 0.0,
        reference: "rdma-core: rdma link, ibv_devinfo(1); kernel drivers/infiniband (mlx5_ib, rdma_rxe)",
    },
    RuleInfo {
        id: "rdma.port-down",
        limit: "the RDMA path",
        judges: VERBS,
        thresholds: &[],
        prior: 0.9,
        reference: "kernel Documentation/ABI/stable/sysfs-class-infiniband (state, phys_state); ibstat(8), opensm(8)",
    },
    RuleInfo {
        id: "rdma.mtu-small",
        limit: "the RDMA path",
        judges: VERBS,
        thresholds: &[],
        prior: 0.4,
        reference: "kernel include/rdma/ib_addr.h iboe_get_mtu (RoCE MTU from the netdev MTU); NVIDIA \"RoCE MTU\"",
    },
    RuleInfo {
        id: "rdma.gid-v1",
        limit: "the RDMA path",
        judges: VERBS,
        thresholds: &[],
        prior: 0.3,
        reference: ROCE,
    },
    RuleInfo {
        id: "rdma.out-of-buffer",
        limit: "the RDMA path",
        judges: VERBS,
        thresholds: &[],
        prior: 0.6,
        reference: RDMA_COUNTERS,
    },
    RuleInfo {
        id: "rdma.retransmits",
        limit: "the RDMA path",
        judges: VERBS,
        thresholds: &["sustain_intervals", "rdma_retrans_min"],
        prior: 0.7,
        reference: RDMA_COUNTERS,
    },
    RuleInfo {
        id: "rdma.congestion",
        limit: "the RDMA path",
        judges: VERBS,
        thresholds: &["sustain_intervals", "rdma_cnp_per_s"],
        prior: 0.5,
        reference: ROCE,
    },
    RuleInfo {
        id: "grpc.connection-bound",
        limit: "too few gRPC connections",
        judges: HTTP2,
        thresholds: &[
            "grpc_core_saturated_pct",
            "grpc_others_idle_pct",
            "grpc_cores_per_connection",
            "kernel_path_min_pct",
            "test_cpu_min_pct",
        ],
        prior: 0.6,
        reference: GRPC_GUIDE,
    },
    RuleInfo {
        id: "grpc.flow-control-limited",
        limit: "HTTP/2 flow control",
        judges: HTTP2,
        thresholds: &["grpc_window_share"],
        prior: 0.5,
        reference: GRPC_GUIDE,
    },
    RuleInfo {
        id: "grpc.errors",
        limit: "failing RPCs",
        judges: HTTP2,
        thresholds: &["grpc_error_share"],
        prior: 0.8,
        reference: GRPC_GUIDE,
    },
    RuleInfo {
        id: "sink.remote-numa",
        limit: "the packet path",
        judges: PACKET_RINGS,
        thresholds: &[],
        prior: 0.4,
        reference: NUMA,
    },
    RuleInfo {
        id: "sink.smt-siblings",
        limit: "the packet path",
        judges: PACKET_RINGS,
        thresholds: &[],
        prior: 0.3,
        reference: NUMA,
    },
    RuleInfo {
        id: "sink.queue-overrun",
        limit: "a sink queue's ring",
        judges: PACKET_RINGS,
        thresholds: &["sustain_intervals", "core_saturated_pct", "counted_share"],
        prior: 0.8,
        reference: XDP,
    },
    RuleInfo {
        id: "sink.generator-bound",
        limit: "the generator",
        judges: PACKET_RINGS,
        thresholds: &["counted_share", "sink_idle_pct"],
        prior: 0.5,
        reference: XDP,
    },
    RuleInfo {
        id: "nic.rx-missed",
        limit: "the NIC's settings",
        judges: PACKET_RINGS,
        thresholds: &["sustain_intervals"],
        prior: 0.6,
        reference: NIC_QUEUES,
    },
];

/// The rule's entry, if the id is known.
pub fn rule(id: &str) -> Option<&'static RuleInfo> {
    RULES.iter().find(|r| r.id == id)
}

/// True when the rule `id` judges tests of `spec`'s engine (every rule does
/// when no test runs; an unknown id is kept, so nothing is silently lost).
pub fn applies(id: &str, spec: Option<&EngineSpec>) -> bool {
    match (rule(id), spec) {
        (Some(r), Some(spec)) => r.judges.contains(spec.kind()),
        _ => true,
    }
}

/// The impact prior of a rule (0.3 for an unknown id).
pub fn prior(id: &str) -> f64 {
    rule(id).map(|r| r.prior).unwrap_or(0.3)
}

/// The reference of a rule, with a pointer to `assets/rules.md`.
pub fn reference(id: &str) -> &'static str {
    rule(id).map(|r| r.reference).unwrap_or("assets/rules.md")
}

/// The index of `assets/rules.md`: one row per rule of the table.
pub fn markdown_index() -> String {
    let mut out = String::from(
        "| id | family | engines | thresholds | prior | reference |\n|---|---|---|---|---|---|\n",
    );
    for r in RULES {
        let th = if r.thresholds.is_empty() {
            "—".to_string()
        } else {
            r.thresholds
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.1} | {} |\n",
            r.id,
            r.family(),
            r.judges.names(),
            th,
            r.prior,
            r.reference.replace('|', "\\|")
        ));
    }
    out
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
        ("cpu_many.rs", include_str!("rules/cpu_many.rs")),
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
        // Documented in the conditions tables, not only in the generated index.
        let full = include_str!("../../assets/rules.md");
        let doc = match (full.find(BEGIN), full.find(END)) {
            (Some(b), Some(e)) => format!("{}{}", &full[..b], &full[e..]),
            _ => full.to_string(),
        };
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

    const BEGIN: &str = "<!-- rule table: generated from src/diagnose/impact.rs RULES -->\n";
    const END: &str = "<!-- end of rule table -->";

    /// The index in assets/rules.md is the table's (regenerate it with
    /// `WIRESCOPE_BLESS=1 cargo test --lib diagnose::impact`).
    #[test]
    fn the_documents_index_is_the_rule_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/rules.md");
        let doc = std::fs::read_to_string(&path).expect("assets/rules.md");
        let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) else {
            panic!("assets/rules.md lacks the generated rule table markers");
        };
        let now = &doc[b + BEGIN.len()..e];
        let want = super::markdown_index();
        if now != want && std::env::var_os("WIRESCOPE_BLESS").is_some() {
            let new = format!("{}{}{}", &doc[..b + BEGIN.len()], want, &doc[e..]);
            std::fs::write(&path, new).expect("write assets/rules.md");
            return;
        }
        assert_eq!(
            now, want,
            "assets/rules.md's rule table is stale: WIRESCOPE_BLESS=1 cargo test --lib diagnose::impact"
        );
    }

    /// Every threshold a rule names is a field of the thresholds tables and
    /// is read where the rule is implemented (its own file or the shared
    /// window code in rules/mod.rs): the table cannot name a number the
    /// rule does not use.
    #[test]
    fn every_threshold_a_rule_names_exists_and_is_read_by_it() {
        let fields = format!(
            "{:?} {}",
            crate::diagnose::THRESHOLDS,
            crate::diagnose::rules::family_thresholds()
        );
        let shared = include_str!("rules/mod.rs");
        for r in RULES {
            let files: Vec<&str> = SOURCES
                .iter()
                .filter(|(_, src)| src.contains(r.id))
                .map(|(_, src)| *src)
                .collect();
            assert!(!files.is_empty(), "no rules file names {}", r.id);
            for t in r.thresholds {
                assert!(
                    fields.contains(&format!(" {t}: ")),
                    "{}: {t} is not a threshold",
                    r.id
                );
                let read = |src: &str| src.contains(&format!(".{t}"));
                assert!(
                    files.iter().any(|s| read(s)) || read(shared),
                    "{}: names {t}, which its rules file does not read",
                    r.id
                );
            }
        }
    }

    #[test]
    fn engines_of_a_rule_decide_where_it_applies() {
        use crate::traffic::EngineKind;
        let tcp = super::rule("tcp.retransmits").unwrap().judges;
        assert!(tcp.contains(EngineKind::Tcp) && tcp.contains(EngineKind::Grpc));
        assert!(!tcp.contains(EngineKind::Sink) && !tcp.contains(EngineKind::Rdma));
        assert_eq!(tcp.names(), "tcp, grpc");
        assert_eq!(super::ALL.names(), "all");
        assert!(super::applies("tcp.retransmits", None));
        assert!(super::applies("no.such-rule", None));
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

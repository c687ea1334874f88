//! Platform rules (facts only): irq.single-cpu, irq.remote-numa, irqbalance.conflict,
//! qdisc.shaping, pcie.link-downgraded, cpu.governor, platform.iommu.

use crate::diagnose::finding::{Finding, Severity};
use crate::diagnose::impact::prior;
use crate::diagnose::util::{cpu_list, cpus, data_irqs, driver, local_cpus, spread};
use crate::probe::facts::{HostFacts, NicFacts, PcieLink};
use crate::probe::sample::HostRole;
use std::collections::BTreeMap;

/// All platform rules of one host.
pub fn rules(facts: &HostFacts, host: HostRole) -> Vec<Finding> {
    let mut out = Vec::new();
    for nic in &facts.nics {
        out.extend(irq_single_cpu(facts, nic, host));
        out.extend(remote_numa(facts, nic, host, &[]));
        out.extend(irqbalance(facts, nic, host));
        out.extend(qdisc(nic, host));
        out.extend(pcie(nic, host));
    }
    out.extend(governor(facts, host));
    out.extend(iommu(facts, host));
    out
}

/// Each data IRQ of `nic` with the CPU of `local` it should move to (spread
/// one per core, in IRQ order).
fn spread_over(nic: &NicFacts, local: &[u32]) -> Vec<(u32, u32)> {
    let irqs = data_irqs(nic);
    irqs.iter()
        .zip(spread(irqs.len(), local))
        .map(|((i, _), c)| (i.irq, c))
        .collect()
}

/// More IRQs than this are moved by one command (a big host's NIC has 64).
const ONE_COMMAND_ABOVE: usize = 8;

/// The commands that pin each `(irq, cpu)`: one `echo` each, or one loop
/// over `irq:cpu` pairs for more than [`ONE_COMMAND_ABOVE`] of them.
fn affinity_commands(moves: &[(u32, u32)]) -> Vec<String> {
    if moves.len() <= ONE_COMMAND_ABOVE {
        return moves
            .iter()
            .map(|(irq, c)| format!("echo {c} > /proc/irq/{irq}/smp_affinity_list"))
            .collect();
    }
    let pairs: Vec<String> = moves.iter().map(|(i, c)| format!("{i}:{c}")).collect();
    vec![format!(
        "for p in {}; do echo ${{p#*:}} > /proc/irq/${{p%:*}}/smp_affinity_list; done  # {} IRQs, one core each",
        pairs.join(" "),
        moves.len()
    )]
}

/// Where `cpus` (outside the NIC's local CPUs) sit, as the title names
/// it: `of node 1`, `of nodes 1, 2`, `of node 1 and elsewhere` (some on no
/// other node the facts list: the NIC's own node beyond its local CPUs, or
/// unknown), or nothing when none is on another node.
fn nodes_of(facts: &HostFacts, own: i32, cpus: &[u32]) -> String {
    let others: Vec<(u32, Vec<u32>)> = facts
        .numa
        .iter()
        .filter(|n| i64::from(n.node) != i64::from(own))
        .map(|n| (n.node, crate::diagnose::util::cpus(&n.cpulist)))
        .collect();
    let nodes: Vec<String> = others
        .iter()
        .filter(|(_, on)| cpus.iter().any(|c| on.contains(c)))
        .map(|(n, _)| n.to_string())
        .collect();
    let elsewhere = cpus
        .iter()
        .any(|c| !others.iter().any(|(_, on)| on.contains(c)));
    if nodes.is_empty() {
        return String::new();
    }
    format!(
        " of node{} {}{}",
        if nodes.len() == 1 { "" } else { "s" },
        nodes.join(", "),
        if elsewhere { " and elsewhere" } else { "" }
    )
}

/// `n one` or `n many`.
fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

/// A CPU list for a title: at most [`TITLE_LIST`] characters, cut at a
/// comma with `…` (the evidence has every CPU).
fn short_list(cpus: &[u32]) -> String {
    let l = cpu_list(cpus);
    if l.len() <= TITLE_LIST {
        return l;
    }
    let cut = l[..TITLE_LIST].rfind(',').unwrap_or(TITLE_LIST);
    format!("{},…", &l[..cut])
}

/// The longest CPU list a title shows.
const TITLE_LIST: usize = 32;

/// irq.single-cpu: every data IRQ of the NIC effectively on one CPU.
fn irq_single_cpu(facts: &HostFacts, nic: &NicFacts, host: HostRole) -> Option<Finding> {
    let irqs = data_irqs(nic);
    if irqs.len() < 2 || facts.cpus < 2 {
        return None;
    }
    let first = irqs[0].1.clone();
    if first.len() != 1 || irqs.iter().any(|(_, c)| *c != first) {
        return None;
    }
    let cpu = first[0];
    let mut f = Finding::rule(
        "irq.single-cpu",
        Severity::Warn,
        host,
        nic.name.clone(),
        format!("all {} data IRQs of {} are served by cpu{cpu}", irqs.len(), nic.name),
    )
    .num("data IRQs", irqs.len() as f64, "", "/proc/interrupts")
    .text("effective affinity of all of them", format!("cpu{cpu}"), "/proc/irq/N/effective_affinity_list")
    .why("Every queue's interrupt and its NAPI poll run on one core: that core caps the packet rate of the whole NIC.");
    f.fix.extend(affinity_commands(&spread_over(
        nic,
        &local_cpus(nic, facts),
    )));
    Some(f)
}

/// irq.remote-numa: data IRQs (or engine threads) on CPUs outside the NIC's local_cpulist.
pub fn remote_numa(
    facts: &HostFacts,
    nic: &NicFacts,
    host: HostRole,
    engine: &[u32],
) -> Option<Finding> {
    if facts.numa.len() < 2 || nic.numa_node.unwrap_or(-1) < 0 {
        return None;
    }
    let local = cpus(nic.local_cpulist.as_deref()?);
    if local.is_empty() {
        return None;
    }
    let remote_irqs: Vec<(u32, Vec<u32>)> = data_irqs(nic)
        .into_iter()
        .filter(|(_, c)| !c.is_empty() && c.iter().any(|x| !local.contains(x)))
        .map(|(i, c)| (i.irq, c))
        .collect();
    let remote_engine: Vec<u32> = engine
        .iter()
        .copied()
        .filter(|c| !local.contains(c))
        .collect();
    if remote_irqs.is_empty() && remote_engine.is_empty() {
        return None;
    }
    let node = nic.numa_node.unwrap_or(-1);
    let mut f = Finding::rule(
        "irq.remote-numa",
        Severity::Warn,
        host,
        nic.name.clone(),
        remote_title(facts, nic, node, &local, &remote_irqs, &remote_engine),
    )
    .text("NIC-local CPUs", nic.local_cpulist.clone().unwrap_or_default(), format!("/sys/class/net/{}/device/local_cpulist", nic.name))
    .why("Packets DMA'd into one socket's memory and processed on the other cross the inter-socket link: more latency, less bandwidth, cache misses.");
    f = remote_irq_evidence(f, &remote_irqs);
    if !remote_engine.is_empty() {
        // The controller pins its own threads with --cpus, the agent's
        // with --peer-cpus (both given on the controller's command line).
        let flag = match host {
            HostRole::Local => "--cpus",
            HostRole::Peer => "--peer-cpus",
        };
        f = f
            .text(
                "engine threads pinned to remote CPUs",
                format!("{remote_engine:?}"),
                format!("test spec {flag}"),
            )
            .fix(format!(
                "wirescope run {flag} {}  # NIC-local cores",
                nic.local_cpulist.clone().unwrap_or_default()
            ));
    }
    let moves: Vec<(u32, u32)> = spread_over(nic, &local)
        .into_iter()
        .filter(|(irq, _)| remote_irqs.iter().any(|r| r.0 == *irq))
        .collect();
    f.fix.extend(affinity_commands(&moves));
    Some(f)
}

/// irq.remote-numa's title: how many IRQs sit on how many cores of which
/// node (a big host's "64 IRQs on 4 cores of node 1"), and the engine's
/// remote CPUs.
fn remote_title(
    facts: &HostFacts,
    nic: &NicFacts,
    node: i32,
    local: &[u32],
    remote_irqs: &[(u32, Vec<u32>)],
    remote_engine: &[u32],
) -> String {
    let mut parts = Vec::new();
    if !remote_irqs.is_empty() {
        let mut on: Vec<u32> = remote_irqs
            .iter()
            .flat_map(|(_, c)| c.iter().copied())
            .filter(|c| !local.contains(c))
            .collect();
        on.sort_unstable();
        on.dedup();
        // An IRQ allowed on local CPUs too (an affinity mask spanning both
        // nodes) is only partly outside.
        let partly = remote_irqs
            .iter()
            .filter(|(_, c)| c.iter().any(|x| local.contains(x)))
            .count();
        let partly = match partly {
            0 => String::new(),
            n if n == remote_irqs.len() => ", each also allowed on local CPUs".to_string(),
            n => format!(", {n} of them also allowed on local CPUs"),
        };
        parts.push(format!(
            "{} on {}{} (cpu{}){partly}",
            plural(remote_irqs.len(), "IRQ", "IRQs"),
            plural(on.len(), "core", "cores"),
            nodes_of(facts, node, &on),
            short_list(&on)
        ));
    }
    if !remote_engine.is_empty() {
        parts.push(format!(
            "{} (cpu{})",
            plural(
                remote_engine.len(),
                "engine thread CPU",
                "engine thread CPUs"
            ),
            short_list(remote_engine)
        ));
    }
    format!(
        "{}: {}, outside its NUMA node {node}",
        nic.name,
        parts.join("; ")
    )
}

/// Each group of remote IRQs that share a CPU list, as one evidence line
/// (at most [`ONE_COMMAND_ABOVE`] lines; the rest counted in one more).
fn remote_irq_evidence(mut f: Finding, remote_irqs: &[(u32, Vec<u32>)]) -> Finding {
    let mut by_cpus: BTreeMap<&[u32], Vec<u32>> = BTreeMap::new();
    for (irq, c) in remote_irqs {
        by_cpus.entry(c).or_default().push(*irq);
    }
    // The biggest groups first (stable: equal ones in CPU-list order).
    let mut groups: Vec<(&[u32], Vec<u32>)> = by_cpus.into_iter().collect();
    groups.sort_by_key(|g| std::cmp::Reverse(g.1.len()));
    let src = "/proc/irq/N/effective_affinity_list";
    for (c, irqs) in groups.iter().take(ONE_COMMAND_ABOVE) {
        let (label, src) = match irqs.as_slice() {
            [one] => (
                format!("IRQ {one} effective affinity"),
                format!("/proc/irq/{one}/effective_affinity_list"),
            ),
            many => (
                format!("IRQs {} effective affinity", cpu_list(many)),
                src.to_string(),
            ),
        };
        f = f.text(label, cpu_list(c), src);
    }
    let rest: usize = groups
        .iter()
        .skip(ONE_COMMAND_ABOVE)
        .map(|g| g.1.len())
        .sum();
    if rest > 0 {
        f = f.text(
            "more IRQs outside the node",
            format!("{rest} on other CPU lists"),
            src,
        );
    }
    f
}

/// irqbalance.conflict: irqbalance runs on a host whose NIC has data IRQs (info).
fn irqbalance(facts: &HostFacts, nic: &NicFacts, host: HostRole) -> Option<Finding> {
    if facts.irqbalance != Some(true) || data_irqs(nic).is_empty() {
        return None;
    }
    let mlx5 = driver(nic) == "mlx5_core";
    Some(
        Finding::rule(
            "irqbalance.conflict",
            Severity::Info,
            host,
            nic.name.clone(),
            format!("irqbalance is running and may move the IRQs of {}", nic.name),
        )
        .text("irqbalance", "running", "process list")
        .text("driver", driver(nic), format!("ethtool -i {}", nic.name))
        .why(if mlx5 {
            "irqbalance rewrites IRQ affinity every 10 s, undoing manual pinning (set_irq_affinity); irqbalance 1.8.0 does not balance mlx5 IRQs at all."
        } else {
            "irqbalance rewrites IRQ affinity every 10 s, undoing manual pinning."
        })
        .fix("systemctl stop irqbalance && systemctl disable irqbalance  # then pin the IRQs")
        .fix("irqbalance --version  # 1.8.0 does not balance mlx5"),
    )
}

/// The interface's root qdisc when it is a shaper (rate-limiting).
pub fn shaper(nic: &NicFacts) -> Option<&str> {
    nic.qdisc
        .as_deref()
        .filter(|q| ["tbf", "htb", "cbq", "hfsc", "cake"].contains(q))
}

/// qdisc.shaping: a rate-limiting root qdisc on the interface.
fn qdisc(nic: &NicFacts, host: HostRole) -> Option<Finding> {
    let q = shaper(nic)?;
    Some(
        Finding::rule(
            "qdisc.shaping",
            Severity::Warn,
            host,
            nic.name.clone(),
            format!("{} has a shaping root qdisc: {q}", nic.name),
        )
        .text("root qdisc", q, format!("tc qdisc show dev {}", nic.name))
        .why("A shaper caps the interface at its configured rate, whatever the link could do.")
        .fix(format!(
            "tc -s qdisc show dev {}  # read the rate",
            nic.name
        ))
        .fix(format!("tc qdisc del dev {} root", nic.name)),
    )
}

fn gts(s: &str) -> Option<f64> {
    s.split_whitespace().next()?.parse().ok()
}

/// pcie.link-downgraded: current PCIe speed or width below the device's maximum.
fn pcie(nic: &NicFacts, host: HostRole) -> Option<Finding> {
    let p = nic.pcie.as_ref()?;
    let pci = nic
        .drvinfo
        .value()
        .map(|d| d.bus_info.as_str())
        .filter(|b| !b.is_empty());
    pcie_link(
        &nic.name,
        p,
        &format!("/sys/class/net/{}/device", nic.name),
        pci,
        host,
    )
}

/// pcie.link-downgraded for any PCI device (`subject`: interface or RDMA device
/// name; `base`: its sysfs `device` directory, named in the evidence; `pci`:
/// its PCI address when known, for the fix's `lspci -s`).
pub(super) fn pcie_link(
    subject: &str,
    p: &PcieLink,
    base: &str,
    pci: Option<&str>,
    host: HostRole,
) -> Option<Finding> {
    let slot = pci.map_or_else(|| format!("$(basename $(readlink {base}))"), str::to_string);
    let (cs, ms) = (gts(&p.current_speed), gts(&p.max_speed));
    let slow = matches!((cs, ms), (Some(c), Some(m)) if c < m);
    let narrow = matches!((p.current_width, p.max_width), (Some(c), Some(m)) if c < m);
    if !slow && !narrow {
        return None;
    }
    let ratio = cs.unwrap_or(1.0) / ms.unwrap_or(1.0).max(1e-9)
        * p.current_width.unwrap_or(1) as f64
        / p.max_width.unwrap_or(1).max(1) as f64;
    Some(
        Finding::new(
            "pcie.link-downgraded",
            Severity::Warn,
            host,
            subject.to_string(),
            format!(
                "{subject} PCIe link runs at {} x{} of {} x{}",
                p.current_speed,
                p.current_width.unwrap_or(0),
                p.max_speed,
                p.max_width.unwrap_or(0)
            ),
            (1.0 - ratio).clamp(0.2, 1.0) * prior("pcie.link-downgraded") / 0.6,
        )
        .text("current link speed", p.current_speed.clone(), format!("{base}/current_link_speed"))
        .num("current link width", p.current_width.unwrap_or(0) as f64, "lanes", format!("{base}/current_link_width"))
        .text("max link speed", p.max_speed.clone(), format!("{base}/max_link_speed"))
        .num("max link width", p.max_width.unwrap_or(0) as f64, "lanes", format!("{base}/max_link_width"))
        .why("The PCIe link carries less than the device was built for: the NIC cannot move line rate to memory.")
        .fix(format!("lspci -vv -s {slot} | grep -E 'LnkCap|LnkSta'  # reseat in a full-width slot / check BIOS link settings")),
    )
}

/// cpu.governor: a frequency governor other than `performance`.
fn governor(facts: &HostFacts, host: HostRole) -> Option<Finding> {
    let other: Vec<(&String, &String)> = facts
        .governors
        .iter()
        .filter(|(g, _)| g.as_str() != "performance")
        .collect();
    if other.is_empty() {
        return None;
    }
    let mut f = Finding::rule(
        "cpu.governor",
        Severity::Warn,
        host,
        "",
        format!(
            "CPU frequency governor is {} (not performance)",
            other.iter().map(|(g, c)| format!("{g} on {c}")).collect::<Vec<_>>().join(", ")
        ),
    )
    .why("Power-saving governors lower the clock between bursts; packet processing pays the ramp-up in latency and peak rate.")
    .fix("cpupower frequency-set -g performance");
    for (g, c) in other {
        f = f.text(
            format!("governor of cpus {c}"),
            g.clone(),
            "/sys/devices/system/cpu/cpuN/cpufreq/scaling_governor",
        );
    }
    Some(f)
}

/// platform.iommu: intel_iommu=on without iommu=pt.
fn iommu(facts: &HostFacts, host: HostRole) -> Option<Finding> {
    let args: Vec<&str> = facts
        .cmdline
        .split_whitespace()
        .take_while(|a| *a != "--")
        .collect();
    if !args.contains(&"intel_iommu=on") || args.contains(&"iommu=pt") {
        return None;
    }
    Some(
        Finding::rule(
            "platform.iommu",
            Severity::Warn,
            host,
            "",
            "intel_iommu=on without iommu=pt: every DMA is translated",
        )
        .text("kernel command line", facts.cmdline.clone(), "/proc/cmdline")
        .why("With the IOMMU in translation mode every receive buffer is mapped and unmapped: CPU cost and IOTLB misses at high packet rates.")
        .fix("grubby --update-kernel=ALL --args=iommu=pt  # or add iommu=pt to GRUB_CMDLINE_LINUX, then reboot"),
    )
}

//! NIC configuration rules (facts only): nic.few-queues, nic.gro-off, nic.tso-off,
//! nic.mtu-small (fast link, and the two hosts differing).

use crate::diagnose::finding::{Finding, Severity};
use crate::diagnose::impact::prior;
use crate::diagnose::thresholds::Thresholds;
use crate::diagnose::util::{driver, is_virtual, local_cpus, speed_mbps};
use crate::probe::facts::{HostFacts, NicFacts};
use crate::probe::sample::HostRole;

/// All facts-only NIC rules of one host.
/// `small`: the test's messages fit in one packet (see
/// [`crate::traffic::EngineSpecOps::small_packets_by_design`]), so GRO
/// off is worth knowing, not a limit.
pub fn rules(facts: &HostFacts, host: HostRole, t: &Thresholds, small: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    for nic in &facts.nics {
        out.extend(few_queues(facts, nic, host, t));
        out.extend(gro_off(nic, host, None, small));
        out.extend(tso_off(nic, host));
        out.extend(mtu_small(nic, host, t));
    }
    out
}

fn src(nic: &NicFacts, what: &str) -> String {
    format!("{what} {}", nic.name)
}

/// nic.few-queues: combined channels < min(NIC-local cores, 32) on a fast link.
fn few_queues(
    facts: &HostFacts,
    nic: &NicFacts,
    host: HostRole,
    t: &Thresholds,
) -> Option<Finding> {
    let speed = speed_mbps(nic)?;
    if speed < t.fast_link_mbps {
        return None;
    }
    let ch = nic.channels.value()?;
    let current = ch.combined.or(ch.rx)?;
    let max = ch.max_combined.or(ch.max_rx).unwrap_or(current);
    let local = local_cpus(nic, facts).len() as u32;
    let want = local.min(t.max_useful_channels).min(max);
    if current >= want {
        return None;
    }
    let flag = if ch.combined.is_some() {
        "combined"
    } else {
        "rx"
    };
    Some(
        Finding::rule(
            "nic.few-queues",
            Severity::Warn,
            host,
            nic.name.clone(),
            format!(
                "{} uses {current} of {max} queues on a {} Gb/s link with {local} NIC-local cores",
                nic.name,
                speed / 1000
            ),
        )
        .num(format!("{flag} channels"), current as f64, "", src(nic, "ethtool -l"))
        .num("maximum channels", max as f64, "", src(nic, "ethtool -l"))
        .num("NIC-local cores", local as f64, "", "sysfs device/local_cpulist")
        .num("link speed", speed as f64, "Mb/s", src(nic, "ethtool"))
        .why("Each queue is served by one core; too few queues cap the packet rate the host can process in parallel.")
        .fix(format!("ethtool -L {} {flag} {want}", nic.name)),
    )
}

/// nic.gro-off. `unaggregated`: the average received packet size (B) when the
/// window shows packets arriving no larger than the MTU (turns veth's info into a warning).
pub fn gro_off(
    nic: &NicFacts,
    host: HostRole,
    unaggregated: Option<f64>,
    small: bool,
) -> Option<Finding> {
    let f = nic.features.value()?;
    let gro = f.0.get("generic-receive-offload")?;
    if gro.on {
        return None;
    }
    let veth = driver(nic) == "veth";
    let sev = if small || (veth && unaggregated.is_none()) {
        Severity::Info
    } else {
        Severity::Warn
    };
    let mut fnd = Finding::new(
        "nic.gro-off",
        sev,
        host,
        nic.name.clone(),
        if small {
            format!(
                "GRO is off on {} (this test's messages fit in one packet: nothing for GRO to merge)",
                nic.name
            )
        } else {
            format!("GRO is off on {}", nic.name)
        },
        prior("nic.gro-off") * if sev == Severity::Info { 0.3 } else { 1.0 },
    )
    .text("generic-receive-offload", if gro.fixed { "off [fixed]" } else { "off" }, src(nic, "ethtool -k"))
    .why(if veth && unaggregated.is_none() {
        "Without GRO every received packet climbs the stack alone. On veth GRO is off by default and costs little while the sender's TSO/GSO hands over 64 KiB packets."
    } else {
        "Without GRO every received packet climbs the stack alone: many times more per-packet work on the receiving core."
    });
    if let Some(avg) = unaggregated {
        fnd = fnd.num(
            "average received packet",
            avg,
            "B",
            "/proc/net/dev rx_bytes/rx_packets",
        );
    }
    if !gro.fixed {
        fnd = fnd.fix(format!("ethtool -K {} gro on", nic.name));
    }
    Some(fnd)
}

/// nic.tso-off: TCP segmentation offload off.
fn tso_off(nic: &NicFacts, host: HostRole) -> Option<Finding> {
    let f = nic.features.value()?;
    let tso = f.0.get("tcp-segmentation-offload")?;
    if tso.on {
        return None;
    }
    let mut fnd = Finding::rule(
        "nic.tso-off",
        Severity::Warn,
        host,
        nic.name.clone(),
        format!("TSO is off on {}", nic.name),
    )
    .text("tcp-segmentation-offload", if tso.fixed { "off [fixed]" } else { "off" }, src(nic, "ethtool -k"))
    .why("Without TSO the sending host cuts every segment itself: more per-packet CPU on the sender.");
    if let Some(gso) = f.0.get("generic-segmentation-offload") {
        fnd = fnd.text(
            "generic-segmentation-offload",
            if gso.on { "on" } else { "off" },
            src(nic, "ethtool -k"),
        );
    }
    if !tso.fixed {
        fnd = fnd.fix(format!("ethtool -K {} tso on gso on", nic.name));
    }
    Some(fnd)
}

/// nic.mtu-small: MTU < 9000 on a ≥ 25 Gb/s physical link (info).
fn mtu_small(nic: &NicFacts, host: HostRole, t: &Thresholds) -> Option<Finding> {
    let mtu = nic.mtu?;
    let speed = speed_mbps(nic)?;
    if mtu >= t.jumbo_mtu || speed < t.fast_link_mbps || is_virtual(nic) {
        return None;
    }
    Some(
        Finding::rule(
            "nic.mtu-small",
            Severity::Info,
            host,
            nic.name.clone(),
            format!("MTU {mtu} on a {} Gb/s link", speed / 1000),
        )
        .num("mtu", mtu as f64, "B", format!("sysfs /sys/class/net/{}/mtu", nic.name))
        .num("link speed", speed as f64, "Mb/s", src(nic, "ethtool"))
        .why("Six times more packets per byte than with 9000-byte frames; only if every hop and the peer support jumbo frames.")
        .fix(format!("ip link set dev {} mtu {}", nic.name, t.jumbo_mtu)),
    )
}

/// nic.mtu-small (warn): the interfaces under test have different MTUs on the two hosts.
pub fn mtu_mismatch(local: &HostFacts, peer: &HostFacts) -> Vec<Finding> {
    let (Some(l), Some(p)) = (local.nics.first(), peer.nics.first()) else {
        return Vec::new();
    };
    let (Some(lm), Some(pm)) = (l.mtu, p.mtu) else {
        return Vec::new();
    };
    // A loopback device says nothing about the path between the hosts
    // (65536 is no MTU to copy onto a NIC).
    if lm == pm || l.name == "lo" || p.name == "lo" {
        return Vec::new();
    }
    let (host, small, big, big_name) = if lm < pm {
        (HostRole::Local, l, pm, &p.name)
    } else {
        (HostRole::Peer, p, lm, &l.name)
    };
    vec![Finding::new(
        "nic.mtu-small",
        Severity::Warn,
        host,
        format!("{} mtu mismatch", small.name),
        format!("MTU differs between the hosts: {lm} (local {}) vs {pm} (peer {})", l.name, p.name),
        0.5,
    )
    .num(format!("local {} mtu", l.name), lm as f64, "B", "sysfs (local)")
    .num(format!("peer {} mtu", p.name), pm as f64, "B", "sysfs (peer)")
    .why("Frames larger than the smaller MTU are dropped or fragmented; TCP falls back to the smaller MSS or stalls on PMTU black holes.")
    .fix(format!("ip link set dev {} mtu {big}  # match {big_name}, if every hop carries it", small.name))]
}

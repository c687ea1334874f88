//! RDMA rules: rdma.no-device, rdma.port-down, rdma.mtu-small, rdma.gid-v1
//! (facts), rdma.out-of-buffer, rdma.retransmits, rdma.congestion (a window
//! of per-interval RDMA counters), and pcie.link-downgraded /
//! firmware.outdated applied to RDMA devices.
//!
//! Pure functions over [`RdmaFacts`] and a window of [`RdmaSample`]s; they do
//! no I/O and know nothing of the sampler. [`static_rules`] is for `check` and
//! every interval, [`window_rules`] for the intervals of a run or a watch.

use super::driver::{firmware_of, not_in_catalog_of};
use super::platform::pcie_link;
use crate::diagnose::finding::{Finding, Severity};
use crate::diagnose::thresholds::Thresholds;
use crate::probe::facts::NicFacts;
use crate::probe::rdma::{
    GidType, LinkLayer, RdmaDeviceFacts, RdmaFacts, RdmaPortFacts, RdmaPortSample, RdmaSample,
    SYSFS_ROOT,
};
use crate::probe::sample::HostRole;
use std::collections::BTreeMap;

/// What an RDMA test on this host uses (from its spec and connection setup).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RdmaUse {
    /// Device (`mlx5_0`).
    pub device: String,
    /// Port.
    pub port: u32,
    /// GID index of the local end, when one is used (RoCE).
    pub gid_index: Option<u32>,
}

/// The RDMA device, port and GID index an RDMA test uses on `host`: its
/// `--ib-dev` (else the host's only device), `--ib-port` (else 1, as
/// perftest) and `--gid-index`; None when the test names no device and
/// the host has several.
pub fn rdma_use(
    spec: Option<&crate::traffic::EngineSpec>,
    host: HostRole,
    rdma: &RdmaFacts,
) -> Option<RdmaUse> {
    let r = spec?.as_rdma()?;
    let end = match host {
        HostRole::Local => &r.local,
        HostRole::Peer => &r.peer,
    };
    let device = match (&end.ib_dev, rdma.devices.as_slice()) {
        (Some(d), _) => d.clone(),
        (None, [only]) => only.name.clone(),
        (None, _) => return None,
    };
    Some(RdmaUse {
        device,
        port: end.ib_port.map_or(1, u32::from),
        gid_index: end.gid_index,
    })
}

/// Facts-only RDMA rules of one host.
///
/// `nics`: the interfaces under test (their own pcie/firmware rules cover an
/// RDMA device on the same PCI function, so those are not repeated);
/// `rdma_test`: an RDMA test is asked for on this host; `used`: the
/// device/port/GID it uses, when known.
pub fn static_rules(
    rdma: &RdmaFacts,
    nics: &[NicFacts],
    rdma_test: bool,
    used: Option<&RdmaUse>,
    host: HostRole,
) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(no_device(rdma, nics, rdma_test, host));
    for d in &rdma.devices {
        let in_use = |p: &RdmaPortFacts| {
            used.is_some_and(|u| u.device == d.name && u.port == p.port)
                || p.netdev
                    .as_ref()
                    .is_some_and(|n| nics.iter().any(|x| &x.name == n))
        };
        for p in &d.ports {
            out.extend(port_down(d, p, in_use(p), host));
            out.extend(mtu_small(d, p, host));
        }
        let covered = d.pci.as_ref().is_some_and(|pci| {
            nics.iter().any(|n| {
                n.drvinfo
                    .value()
                    .is_some_and(|i| &i.bus_info == pci && !i.firmware.is_empty())
            })
        });
        if !covered {
            out.extend(device_platform(d, host));
        }
    }
    if let Some(u) = used {
        out.extend(gid_v1(rdma, u, host));
    }
    out
}

/// The RDMA kernel module that goes with a NIC driver (None: no RDMA function known).
pub fn rdma_module_for(driver: &str) -> Option<&'static str> {
    Some(match driver {
        "mlx5_core" => "mlx5_ib",
        "mlx4_en" | "mlx4_core" => "mlx4_ib",
        "bnxt_en" => "bnxt_re",
        "ice" | "i40e" => "irdma",
        "qede" => "qedr",
        "cxgb4" => "iw_cxgb4",
        "hns3" => "hns_roce_hw_v2",
        "erdma" => "erdma",
        _ => return None,
    })
}

/// rdma.no-device: no RDMA device, on a host whose NIC could have one or that
/// is asked to run an RDMA test (info: what to load).
fn no_device(
    rdma: &RdmaFacts,
    nics: &[NicFacts],
    rdma_test: bool,
    host: HostRole,
) -> Option<Finding> {
    if !rdma.devices.is_empty() {
        return None;
    }
    let capable: Vec<(&str, &str, &'static str)> = nics
        .iter()
        .filter_map(|n| {
            let d = n.drvinfo.value()?;
            Some((
                n.name.as_str(),
                d.driver.as_str(),
                rdma_module_for(&d.driver)?,
            ))
        })
        .collect();
    if capable.is_empty() && !rdma_test {
        return None;
    }
    let iface = nics.first().map_or("IF", |n| n.name.as_str());
    let mut f = Finding::rule(
        "rdma.no-device",
        Severity::Info,
        host,
        "",
        match capable.first() {
            Some((i, d, m)) => format!("no RDMA device although {i} ({d}) has an RDMA function: modprobe {m}"),
            None => "no RDMA device: RDMA tests cannot run on this host".to_string(),
        },
    )
    .text(
        "RDMA devices",
        // "no RDMA device (/sys/class/infiniband is absent)": what to load is the fix below.
        rdma.none
            .as_deref()
            .and_then(|n| n.split_once(": ").map(|(what, _)| what))
            .unwrap_or("none"),
        SYSFS_ROOT,
    )
    .why("RDMA needs the RDMA driver of the NIC (or soft-RoCE) loaded; without it only TCP can be measured on this host.");
    for (i, d, m) in &capable {
        f = f
            .text(format!("driver of {i}"), *d, format!("ethtool -i {i}"))
            .fix(format!("modprobe {m}  # RDMA function of {d} ({i})"));
    }
    if capable.is_empty() {
        f = f.fix("modprobe mlx5_ib  # ConnectX; other NICs: bnxt_re, irdma, qedr; AWS with an EFA interface: efa");
    }
    Some(
        f.fix(format!(
            "modprobe rdma_rxe && rdma link add rxe0 type rxe netdev {iface}  # soft-RoCE: functional tests only, not performance"
        ))
        .fix("apt-get install rdma-core ibverbs-utils && ibv_devinfo"),
    )
}

fn port_src(d: &RdmaDeviceFacts, p: &RdmaPortFacts, file: &str) -> String {
    format!("{}/ports/{}/{file}", d.sysfs(), p.port)
}

/// rdma.port-down: a port that is not ACTIVE (error when it is the one in use).
fn port_down(
    d: &RdmaDeviceFacts,
    p: &RdmaPortFacts,
    in_use: bool,
    host: HostRole,
) -> Option<Finding> {
    let state = p.state.as_ref()?;
    if state.code == 4 {
        return None;
    }
    let phys = p.phys_state.as_ref();
    let link_up = phys.is_some_and(|s| s.code == 5);
    let sev = if in_use {
        Severity::Error
    } else {
        Severity::Warn
    };
    let mut f = Finding::rule(
        "rdma.port-down",
        sev,
        host,
        format!("{} port {}", d.name, p.port),
        format!(
            "{} port {} is {} (physical link {})",
            d.name,
            p.port,
            state.name,
            phys.map_or("unknown", |s| s.name.as_str())
        ),
    )
    .text(
        "state",
        format!("{}: {}", state.code, state.name),
        port_src(d, p, "state"),
    );
    if let Some(s) = phys {
        f = f.text(
            "phys_state",
            format!("{}: {}", s.code, s.name),
            port_src(d, p, "phys_state"),
        );
    }
    let ib = p.link_layer == Some(LinkLayer::Infiniband);
    f = f.why(if ib && link_up {
        "The physical link is up but the port is not ACTIVE: on InfiniBand no subnet manager has configured it (no LID, no traffic)."
    } else if ib {
        "The port has no physical link: cable, transceiver, switch port or the peer's port is down. No RDMA traffic can pass."
    } else {
        "The RoCE port follows its netdev: the Ethernet link is down, so no RDMA traffic can pass."
    });
    if ib && link_up {
        f = f
            .fix("systemctl enable --now opensm  # or enable the subnet manager on the switch")
            .fix(format!("ibstat {} {}", d.name, p.port));
    } else {
        if let Some(n) = &p.netdev {
            f = f.fix(format!("ip link set dev {n} up")).fix(format!(
                "ethtool {n}  # speed, link detected; check cable and switch port"
            ));
        }
        f = f.fix(format!("rdma link show {}/{}", d.name, p.port));
    }
    Some(f)
}

/// rdma.mtu-small: active MTU ≤ 1024 on a port that can do 4096.
fn mtu_small(d: &RdmaDeviceFacts, p: &RdmaPortFacts, host: HostRole) -> Option<Finding> {
    let (active, max) = (p.active_mtu?, p.max_mtu?);
    if active > 1024 || max < 4096 {
        return None;
    }
    let mut f = Finding::rule(
        "rdma.mtu-small",
        Severity::Warn,
        host,
        format!("{} port {}", d.name, p.port),
        format!("{} port {}: active RDMA MTU {active} of {max}", d.name, p.port),
    )
    .num("active MTU", active as f64, "B", p.mtu_source.clone())
    .num("max MTU", max as f64, "B", p.mtu_source.clone())
    .why("Every RDMA message is cut into MTU-sized packets with their own headers and ACK/PSN processing: 1024-byte packets cost about 4x the packet rate of 4096 and lose bandwidth on the link and in the NIC.");
    if let (Some(n), Some(m)) = (&p.netdev, p.netdev_mtu) {
        f = f
            .num(
                format!("{n} MTU"),
                m as f64,
                "B",
                format!("/sys/class/net/{n}/mtu"),
            )
            .fix(format!("ip link set dev {n} mtu 9000  # RoCE needs a netdev MTU >= 4200 for 4096; on both hosts and every switch port"));
    } else {
        f = f.fix("set the subnet's MTU to 4096 (opensm: mtu in the partitions file) and check the switch");
    }
    Some(f)
}

/// rdma.gid-v1: the test uses a RoCE v1 GID where the same address has a v2 GID.
fn gid_v1(rdma: &RdmaFacts, u: &RdmaUse, host: HostRole) -> Option<Finding> {
    let d = rdma.device(&u.device)?;
    let p = d.ports.iter().find(|p| p.port == u.port)?;
    let gi = u.gid_index?;
    let g = p.gids.iter().find(|g| g.index == gi)?;
    if g.kind != GidType::IbRoceV1 || !p.is_roce() {
        return None;
    }
    let v2 = p
        .gids
        .iter()
        .find(|x| x.kind == GidType::RoceV2 && x.gid == g.gid)?;
    Some(
        Finding::rule(
            "rdma.gid-v1",
            Severity::Warn,
            host,
            format!("{} port {}", d.name, p.port),
            format!(
                "{} port {}: the test uses RoCE v1 GID index {gi}; index {} is the RoCE v2 GID of the same address",
                d.name, p.port, v2.index
            ),
        )
        .text(format!("GID {gi}"), format!("{} ({})", g.gid, "IB/RoCE v1"), port_src(d, p, &format!("gid_attrs/types/{gi}")))
        .text(format!("GID {}", v2.index), format!("{} ({})", v2.gid, "RoCE v2"), port_src(d, p, &format!("gid_attrs/types/{}", v2.index)))
        .why("RoCE v1 is a raw Ethernet frame: it is not routed, carries no IP ECN bits (so no DCQCN congestion control) and many switches give it no lossless class.")
        .fix(format!("wirescope run --engine rdma --gid-index {}  # perftest: -x {}", v2.index, v2.index)),
    )
}

/// pcie.link-downgraded and firmware.outdated of an RDMA device.
fn device_platform(d: &RdmaDeviceFacts, host: HostRole) -> Vec<Finding> {
    let mut out = Vec::new();
    let base = format!("{}/device", d.sysfs());
    if let Some(p) = &d.pcie {
        out.extend(pcie_link(&d.name, p, &base, d.pci.as_deref(), host));
    }
    if let (Some(fw), Some(pci)) = (&d.fw_ver, &d.pci) {
        let source = format!("{}/fw_ver", d.sysfs());
        if d.is_mlx5() {
            out.extend(firmware_of(&d.name, fw, pci, &source, host));
        } else {
            out.push(not_in_catalog_of(
                "firmware.outdated",
                &d.name,
                host,
                format!(
                    "firmware {fw} of {}",
                    d.hca_type.as_deref().unwrap_or("this device")
                ),
            ));
        }
    }
    out
}

/// Live RDMA rules of one host on a window of its intervals (oldest first).
pub fn window_rules(
    rdma: Option<&RdmaFacts>,
    window: &[&RdmaSample],
    host: HostRole,
    t: &Thresholds,
) -> Vec<Finding> {
    let need = t.sustain_intervals.min(window.len()).max(1);
    let mut out = Vec::new();
    for (key, ports) in by_port(window) {
        let facts = rdma
            .and_then(|f| f.device(&key.0))
            .and_then(|d| d.ports.iter().find(|p| p.port == key.1));
        out.extend(out_of_buffer(&ports, host));
        out.extend(retransmits(&ports, need, host, t));
        out.extend(congestion(&ports, facts, need, host, t));
    }
    out
}

fn by_port<'a>(window: &[&'a RdmaSample]) -> BTreeMap<(String, u32), Vec<&'a RdmaPortSample>> {
    let mut m: BTreeMap<(String, u32), Vec<&RdmaPortSample>> = BTreeMap::new();
    for s in window {
        for p in &s.ports {
            m.entry((p.device.clone(), p.port)).or_default().push(p);
        }
    }
    m
}

fn secs(ports: &[&RdmaPortSample]) -> f64 {
    ports.iter().map(|p| p.secs).sum::<f64>().max(1e-9)
}

fn hw_src(p: &RdmaPortSample, name: &str) -> String {
    format!(
        "{SYSFS_ROOT}/{}/ports/{}/hw_counters/{name}",
        p.device, p.port
    )
}

/// rdma.out-of-buffer: `out_of_buffer` increased (receive WQEs exhausted).
fn out_of_buffer(ports: &[&RdmaPortSample], host: HostRole) -> Option<Finding> {
    let last = ports.last()?;
    let n: u64 = ports.iter().map(|p| p.delta("out_of_buffer")).sum();
    if n == 0 {
        return None;
    }
    let rate = n as f64 / secs(ports);
    let rnr: u64 = ports.iter().map(|p| p.delta("rnr_nak_retry_err")).sum();
    let mut f = Finding::rule(
        "rdma.out-of-buffer",
        Severity::Warn,
        host,
        last.label(),
        format!("{}: {n} packets found no receive WQE (out_of_buffer {rate:.0}/s)", last.label()),
    )
    .num("out_of_buffer", n as f64, "", hw_src(last, "out_of_buffer"))
    .num("out_of_buffer rate", rate, "/s", hw_src(last, "out_of_buffer"))
    .why("A SEND arrived while the receiver had no receive buffer posted: the sender is told to back off (RNR NAK) and retries, so the receiver's posting rate, not the link, sets the pace.");
    if rnr > 0 {
        f = f.num(
            "rnr_nak_retry_err",
            rnr as f64,
            "",
            hw_src(last, "rnr_nak_retry_err"),
        );
    }
    Some(
        f.fix("wirescope run --engine rdma --op send --rx-depth 1024  # more receive WQEs per QP (perftest: -r)")
            .fix("post receives in batches ahead of the sender, or use an SRQ shared by the QPs"),
    )
}

/// Counters that mean packets were lost or reordered and retransmitted.
pub const RETRANS_COUNTERS: &[&str] = &[
    "out_of_sequence",
    "packet_seq_err",
    "local_ack_timeout_err",
    "implied_nak_seq_err",
    "roce_adp_retrans",
    "roce_adp_retrans_to",
    "roce_slow_restart",
];

/// rdma.retransmits: loss/retransmission counters growing.
fn retransmits(
    ports: &[&RdmaPortSample],
    need: usize,
    host: HostRole,
    t: &Thresholds,
) -> Option<Finding> {
    let last = ports.last()?;
    let moving = ports
        .iter()
        .filter(|p| RETRANS_COUNTERS.iter().any(|c| p.delta(c) > 0))
        .count();
    let totals: Vec<(&str, u64)> = RETRANS_COUNTERS
        .iter()
        .map(|c| (*c, ports.iter().map(|p| p.delta(c)).sum()))
        .filter(|(_, n)| *n > 0)
        .collect();
    let total: u64 = totals.iter().map(|e| e.1).sum();
    if moving < need || total < t.rdma_retrans_min {
        return None;
    }
    let s = secs(ports);
    let mut f = Finding::rule(
        "rdma.retransmits",
        Severity::Warn,
        host,
        last.label(),
        format!(
            "{}: {total} RDMA retransmission events in {moving} interval(s) ({})",
            last.label(),
            totals.iter().map(|(c, n)| format!("{c} {n}")).collect::<Vec<_>>().join(", ")
        ),
    )
    .why("RC transport recovers a lost packet by go-back-N: the sender resends everything after it, or waits for the ACK timeout. A few losses per second cut RoCE throughput sharply; the fabric is not lossless (PFC) or ECN is not reacting early enough.");
    for (c, n) in &totals {
        f = f.num(*c, *n as f64, "", hw_src(last, c)).num(
            format!("{c} rate"),
            *n as f64 / s,
            "/s",
            hw_src(last, c),
        );
    }
    if let Some(n) = &last.netdev {
        f = f.fix(format!("ethtool -S {n} | grep -E 'prio[0-9]_pause|discard|out_of_buffer'  # where packets are lost"));
        f = f.fix(format!("mlnx_qos -i {n} --pfc 0,0,0,1,0,0,0,0  # lossless priority 3 for RoCE, matching the switch"));
    }
    Some(f.fix(format!(
        "rdma statistic show link {}/{}",
        last.device, last.port
    )))
}

/// CNP / ECN counters: (name, what it means).
pub const CONGESTION_COUNTERS: &[(&str, &str)] = &[
    (
        "np_ecn_marked_roce_packets",
        "ECN-marked RoCE packets received (a switch queue is filling)",
    ),
    ("np_cnp_sent", "CNPs sent back to the senders"),
    (
        "rp_cnp_handled",
        "CNPs received: this host's senders slowed down",
    ),
];

/// rdma.congestion: CNPs / ECN marks growing; names the RoCE priority and PFC.
fn congestion(
    ports: &[&RdmaPortSample],
    facts: Option<&RdmaPortFacts>,
    need: usize,
    host: HostRole,
    t: &Thresholds,
) -> Option<Finding> {
    let last = ports.last()?;
    let s = secs(ports);
    let busy = ports
        .iter()
        .filter(|p| {
            let n: u64 = CONGESTION_COUNTERS.iter().map(|(c, _)| p.delta(c)).sum();
            n as f64 / p.secs.max(1e-9) >= t.rdma_cnp_per_s
        })
        .count();
    if busy < need {
        return None;
    }
    let pr = Priorities::of(ports);
    let nd = last
        .netdev
        .as_deref()
        .or(facts.and_then(|p| p.netdev.as_deref()));
    Some(congestion_finding(ports, last, s, busy, host, &pr, nd))
}

/// The RoCE priority (the one whose netdev traffic counters moved most),
/// and the priorities with PFC pauses (rx, tx), with their sentences.
struct Priorities {
    busiest: Option<(u8, (u64, u64, u64))>,
    paused: Vec<(u8, u64, u64)>,
    prio_text: String,
    pfc_text: String,
}

impl Priorities {
    fn of(ports: &[&RdmaPortSample]) -> Priorities {
        let mut prio: BTreeMap<u8, (u64, u64, u64)> = BTreeMap::new();
        for p in ports {
            for q in &p.pfc {
                let e = prio.entry(q.prio).or_default();
                e.0 += q.rx_bytes + q.tx_bytes;
                e.1 += q.rx_pause;
                e.2 += q.tx_pause;
            }
        }
        let busiest = prio.iter().max_by_key(|(_, v)| v.0).map(|(k, v)| (*k, *v));
        let paused: Vec<(u8, u64, u64)> = prio
            .iter()
            .filter(|(_, v)| v.1 + v.2 > 0)
            .map(|(k, v)| (*k, v.1, v.2))
            .collect();
        let prio_text = match busiest {
            Some((p, v)) if v.0 > 0 => format!("RoCE traffic on priority {p}"),
            _ if prio.is_empty() => {
                "priority unknown (the netdev has no per-priority counters)".to_string()
            }
            _ => "priority unknown (no priority's byte counters moved)".to_string(),
        };
        let pfc_text = if paused.is_empty() {
            "no PFC pauses".to_string()
        } else {
            format!(
                "PFC pauses too ({})",
                paused
                    .iter()
                    .map(|(p, rx, tx)| format!("prio {p}: rx {rx} tx {tx}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        Priorities {
            busiest,
            paused,
            prio_text,
            pfc_text,
        }
    }
}

fn congestion_finding(
    ports: &[&RdmaPortSample],
    last: &RdmaPortSample,
    s: f64,
    busy: usize,
    host: HostRole,
    pr: &Priorities,
    nd: Option<&str>,
) -> Finding {
    let (busiest, paused, prio_text, pfc_text) =
        (pr.busiest, &pr.paused, &pr.prio_text, &pr.pfc_text);
    let mut f = Finding::rule(
        "rdma.congestion",
        Severity::Warn,
        host,
        last.label(),
        format!("{}: CNPs / ECN marks growing, {prio_text}, {pfc_text}", last.label()),
    )
    .num("intervals with CNP/ECN activity", busy as f64, "", "window")
    .why("ECN marks and CNPs mean a queue in the fabric is filling: DCQCN lowers the senders' rate. With PFC pauses as well the priority is being stopped hop by hop, which spreads congestion (head-of-line blocking) to other flows.");
    for (c, meaning) in CONGESTION_COUNTERS {
        let n: u64 = ports.iter().map(|p| p.delta(c)).sum();
        if n > 0 {
            f = f.num(
                format!("{c} rate ({meaning})"),
                n as f64 / s,
                "/s",
                hw_src(last, c),
            );
        }
    }
    for (p, rx, tx) in paused {
        let src = nd.map_or("ethtool -S".to_string(), |n| format!("ethtool -S {n}"));
        f = f
            .num(format!("rx_prio{p}_pause"), *rx as f64, "", src.clone())
            .num(format!("tx_prio{p}_pause"), *tx as f64, "", src);
    }
    if let Some((p, v)) = busiest.filter(|b| b.1 .0 > 0) {
        f = f.num(
            format!("prio {p} bytes"),
            v.0 as f64,
            "B",
            nd.map_or("ethtool -S".to_string(), |n| format!("ethtool -S {n}")),
        );
    }
    if let Some(n) = nd {
        f = f.fix(format!("ethtool -S {n} | grep -E 'prio[0-9]_(pause|bytes)'  # which priority carries RoCE and who pauses"));
    }
    f.fix("check the switch's ECN thresholds and buffer for the RoCE class; fewer flows per link (fan-in) or a lower rate per QP")
        .fix(format!("rdma statistic show link {}/{}", last.device, last.port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::thresholds::THRESHOLDS;
    use crate::probe::capture_dir::CaptureDir as Dir;
    use crate::probe::facts::{DrvInfo, Support};
    use crate::probe::rdma::{read_rdma_facts, testdata, RdmaCounterReader};

    fn ids(f: &[Finding]) -> Vec<&str> {
        f.iter().map(|x| x.id.as_str()).collect()
    }

    /// The finding `id` (the test fails naming it when absent).
    fn one<'a>(f: &'a [Finding], id: &str) -> &'a Finding {
        f.iter()
            .find(|x| x.id == id)
            .unwrap_or_else(|| panic!("no {id} in {f:#?}"))
    }

    fn nic(name: &str, driver: &str) -> NicFacts {
        NicFacts {
            name: name.into(),
            drvinfo: Support::Value(DrvInfo {
                driver: driver.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn check(c: &testdata::Copy) -> Vec<Finding> {
        let f = read_rdma_facts(&Dir::new(c.root()));
        static_rules(&f, &[], false, None, HostRole::Local)
    }

    #[test]
    fn real_fixtures_raise_only_catalog_findings() {
        let f = check(&testdata::real_copy());
        // Every port is ACTIVE, no MTU is known: no port/MTU finding.
        assert!(f.iter().all(|x| !x.id.starts_with("rdma.")), "{f:#?}");
    }

    #[test]
    fn healthy_roce_port_raises_nothing() {
        let f = check(&testdata::roce_copy(9000));
        assert!(!ids(&f).contains(&"rdma.mtu-small"), "{f:#?}");
        assert!(!ids(&f).contains(&"rdma.port-down"));
        assert!(!ids(&f).contains(&"pcie.link-downgraded"));
    }

    #[test]
    fn port_down_fires_on_a_modified_copy() {
        let c = testdata::roce_copy(9000);
        c.put("sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n");
        c.put(
            "sys/class/infiniband/mlx5_0/ports/1/phys_state",
            "3: Disabled\n",
        );
        let f = check(&c);
        let d: Vec<_> = f.iter().filter(|x| x.id == "rdma.port-down").collect();
        assert_eq!(d.len(), 1, "{f:#?}");
        assert_eq!(d[0].severity, Severity::Warn);
        assert_eq!(d[0].subject, "mlx5_0 port 1");
        assert!(d[0].title.contains("DOWN"));
        assert!(d[0].fix.contains(&"ip link set dev eth0 up".to_string()));
        // In use by the test (its netdev is under test): an error.
        let facts = read_rdma_facts(&Dir::new(c.root()));
        let f = static_rules(
            &facts,
            &[nic("eth0", "mlx5_core")],
            true,
            None,
            HostRole::Peer,
        );
        let d = f.iter().find(|x| x.id == "rdma.port-down").unwrap();
        assert_eq!((d.severity, d.host), (Severity::Error, HostRole::Peer));
    }

    #[test]
    fn ib_port_up_without_subnet_manager() {
        let c = testdata::real_copy();
        c.put("sys/class/infiniband/mlx4_0/ports/2/state", "2: INIT\n");
        let f = check(&c);
        let d = f.iter().find(|x| x.id == "rdma.port-down").unwrap();
        assert_eq!(d.subject, "mlx4_0 port 2");
        assert!(d.why.contains("subnet manager"));
        assert!(d.fix[0].contains("opensm"));
    }

    #[test]
    fn mtu_1024_fires_and_names_the_netdev() {
        let f = check(&testdata::roce_copy(1500));
        let m = one(&f, "rdma.mtu-small");
        assert!(
            m.title.contains("active RDMA MTU 1024 of 4096"),
            "{}",
            m.title
        );
        assert!(m.fix[0].starts_with("ip link set dev eth0 mtu 9000"));
        // 4200 on the netdev gives 4096: nothing.
        assert!(!ids(&check(&testdata::roce_copy(4200))).contains(&"rdma.mtu-small"));
    }

    #[test]
    fn gid_v1_fires_only_for_a_v1_gid_in_use() {
        let c = testdata::roce_copy(9000);
        let facts = read_rdma_facts(&Dir::new(c.root()));
        let use_gid = |i| RdmaUse {
            device: "mlx5_0".into(),
            port: 1,
            gid_index: Some(i),
        };
        let f = static_rules(&facts, &[], true, Some(&use_gid(2)), HostRole::Local);
        let g = f.iter().find(|x| x.id == "rdma.gid-v1").expect("gid-v1");
        assert!(
            g.title.contains("index 3 is the RoCE v2 GID"),
            "{}",
            g.title
        );
        assert!(g.fix[0].contains("--gid-index 3"));
        let f = static_rules(&facts, &[], true, Some(&use_gid(3)), HostRole::Local);
        assert!(!ids(&f).contains(&"rdma.gid-v1"));
    }

    #[test]
    fn an_rdma_tests_own_gid_and_port_are_judged_through_its_spec() {
        use crate::probe::facts::HostFacts;
        use crate::traffic::rdma::{RdmaMode, RdmaOp, RdmaSpec};
        use crate::traffic::EngineSpec;
        let c = testdata::roce_copy(9000);
        let rules = |spec: &RdmaSpec| {
            let facts = HostFacts {
                rdma: Some(read_rdma_facts(&Dir::new(c.root()))),
                ..Default::default()
            };
            super::super::static_rules_for(
                &facts,
                HostRole::Peer,
                &THRESHOLDS,
                Some(&EngineSpec::Rdma(spec.clone())),
            )
        };
        // The agent's end asks for mlx5_0 GID 2, the RoCE v1 GID of its
        // address. Before, no caller passed the test's device and GID, so
        // the rule never ran outside unit tests.
        let mut spec = RdmaSpec::perftest_defaults(RdmaOp::Write, RdmaMode::Bw);
        spec.peer.ib_dev = Some("mlx5_0".into());
        spec.peer.gid_index = Some(2);
        assert_eq!(one(&rules(&spec), "rdma.gid-v1").host, HostRole::Peer);
        // The controller's GID is not the agent's.
        let mut other = spec.clone();
        other.peer.gid_index = None;
        other.local.gid_index = Some(2);
        assert!(!ids(&rules(&other)).contains(&"rdma.gid-v1"));
        // The test's own port down is an error, another device's a warning.
        c.put("sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n");
        assert_eq!(
            one(&rules(&spec), "rdma.port-down").severity,
            Severity::Error
        );
        other.peer.ib_dev = Some("mlx4_0".into());
        assert_eq!(
            one(&rules(&other), "rdma.port-down").severity,
            Severity::Warn
        );
        // Without --ib-dev: the host's only device (perftest's first), port 1.
        spec.peer.ib_dev = None;
        assert_eq!(
            one(&rules(&spec), "rdma.port-down").severity,
            Severity::Warn,
            "three devices: which one is unknown"
        );
        for d in ["mlx4_0", "hfi1_0"] {
            std::fs::remove_dir_all(c.root().join("sys/class/infiniband").join(d))
                .expect("remove device");
        }
        let f = rules(&spec);
        assert_eq!(
            one(&f, "rdma.port-down").severity,
            Severity::Error,
            "{f:#?}"
        );
        assert!(ids(&f).contains(&"rdma.gid-v1"), "{f:#?}");
    }

    #[test]
    fn no_device_names_the_module_or_soft_roce() {
        let empty = tempfile::tempdir().unwrap();
        let facts = read_rdma_facts(&Dir::new(empty.path()));
        // A TCP-only host with a virtio NIC: nothing to say.
        assert!(static_rules(
            &facts,
            &[nic("eth0", "virtio_net")],
            false,
            None,
            HostRole::Local
        )
        .is_empty());
        // A ConnectX without mlx5_ib.
        let f = static_rules(
            &facts,
            &[nic("eth0", "mlx5_core")],
            false,
            None,
            HostRole::Local,
        );
        assert_eq!(ids(&f), ["rdma.no-device"]);
        assert_eq!(f[0].severity, Severity::Info);
        assert!(f[0].title.contains("modprobe mlx5_ib"), "{}", f[0].title);
        // An RDMA test asked for on a host whose NIC has no RDMA function: soft-RoCE.
        let f = static_rules(&facts, &[nic("veth-b", "veth")], true, None, HostRole::Peer);
        assert!(
            f[0].fix
                .iter()
                .any(|x| x.contains("rdma link add rxe0 type rxe netdev veth-b")),
            "{:?}",
            f[0].fix
        );
        assert_eq!(rdma_module_for("bnxt_en"), Some("bnxt_re"));
        assert_eq!(rdma_module_for("some_new_driver"), None);
    }

    #[test]
    fn rdma_device_pcie_and_firmware() {
        let c = testdata::roce_copy(9000);
        c.put(
            "sys/class/infiniband/mlx5_0/device/current_link_width",
            "4\n",
        );
        let f = check(&c);
        let p = one(&f, "pcie.link-downgraded");
        assert_eq!(p.subject, "mlx5_0");
        assert!(p.evidence[0]
            .source
            .starts_with("/sys/class/infiniband/mlx5_0/device"));
        // ConnectX-4 Lx firmware 14.28.2006 is below the catalog floor 14.32.1010.
        let fw = f
            .iter()
            .find(|x| x.id == "firmware.outdated" && x.subject == "mlx5_0")
            .expect("fw");
        assert_eq!(fw.severity, Severity::Warn);
        assert!(fw.title.contains("ConnectX-4 Lx"));
        assert!(fw.fix[0].contains("0000:3b:00.0"));
        // The same PCI function under test as a NIC (ethtool -i has the firmware): not repeated.
        let facts = read_rdma_facts(&Dir::new(c.root()));
        let mut n = nic("eth0", "mlx5_core");
        if let Support::Value(d) = &mut n.drvinfo {
            d.bus_info = "0000:3b:00.0".into();
            d.firmware = "14.28.2006 (MT_0000000080)".into();
        }
        let f = static_rules(&facts, &[n], true, None, HostRole::Local);
        assert!(!f
            .iter()
            .any(|x| x.subject == "mlx5_0" && x.id == "firmware.outdated"));
    }

    /// Two reads of a modified copy, `secs` apart, as the sampler makes them.
    fn window_of(c: &testdata::Copy, change: impl Fn(&testdata::Copy, u64)) -> Vec<RdmaSample> {
        let src = Dir::new(c.root());
        let facts = read_rdma_facts(&src);
        let mut r = RdmaCounterReader::new();
        let mut out = Vec::new();
        for i in 0..4u64 {
            change(c, i);
            let mut snap = crate::probe::rdma::read_snapshot(&src, &facts);
            snap.at = None;
            if let Some(mut s) = r.push(snap) {
                for p in &mut s.ports {
                    p.secs = 1.0;
                }
                out.push(s);
            }
        }
        out
    }

    fn live(samples: &[RdmaSample]) -> Vec<Finding> {
        let w: Vec<&RdmaSample> = samples.iter().collect();
        window_rules(None, &w, HostRole::Local, &THRESHOLDS)
    }

    const HW: &str = "sys/class/infiniband/mlx5_0/ports/1/hw_counters";

    #[test]
    fn out_of_buffer_growing_between_reads_fires() {
        let c = testdata::roce_copy(9000);
        let quiet = window_of(&c, |_, _| {});
        assert!(live(&quiet).is_empty(), "{:#?}", live(&quiet));
        let w = window_of(&c, |c, i| {
            c.put(&format!("{HW}/out_of_buffer"), &format!("{}\n", i * 500))
        });
        let f = live(&w);
        let o = one(&f, "rdma.out-of-buffer");
        assert!(o.title.contains("1500 packets"), "{}", o.title);
        assert_eq!(o.evidence[1].value, crate::diagnose::Value::Num(500.0));
    }

    #[test]
    fn retransmits_need_sustained_growth() {
        let c = testdata::roce_copy(9000);
        // Real fixture values: out_of_sequence 1, local_ack_timeout_err 131, roce_adp_retrans 99.
        let w = window_of(&c, |c, i| {
            c.put(
                &format!("{HW}/out_of_sequence"),
                &format!("{}\n", 1 + 20 * i),
            );
            c.put(
                &format!("{HW}/roce_adp_retrans"),
                &format!("{}\n", 99 + 5 * i),
            );
        });
        let f = live(&w);
        let r = one(&f, "rdma.retransmits");
        assert!(
            r.title
                .contains("75 RDMA retransmission events in 3 interval(s)"),
            "{}",
            r.title
        );
        // One burst in one interval of three is not sustained.
        let w = window_of(&c, |c, i| {
            c.put(
                &format!("{HW}/out_of_sequence"),
                if i >= 2 { "500\n" } else { "1\n" },
            );
        });
        assert!(!ids(&live(&w)).contains(&"rdma.retransmits"));
    }

    #[test]
    fn congestion_names_the_priority_and_pfc() {
        let mk = |pause: bool| {
            let ports = (0..3)
                .map(|_| RdmaSample {
                    ports: vec![RdmaPortSample {
                        device: "mlx5_0".into(),
                        port: 1,
                        netdev: Some("eth0".into()),
                        secs: 1.0,
                        counters: vec![crate::probe::rdma::CounterDelta {
                            group: "hw_counters".into(),
                            name: "np_cnp_sent".into(),
                            delta: 5000,
                            per_s: 5000.0,
                        }],
                        pfc: vec![
                            crate::probe::rdma::PfcPrio {
                                prio: 0,
                                rx_bytes: 10,
                                ..Default::default()
                            },
                            crate::probe::rdma::PfcPrio {
                                prio: 3,
                                rx_bytes: 1 << 30,
                                rx_pause: if pause { 40 } else { 0 },
                                ..Default::default()
                            },
                        ],
                        ..Default::default()
                    }],
                })
                .collect::<Vec<_>>();
            live(&ports)
        };
        let f = mk(true);
        let c = one(&f, "rdma.congestion");
        assert!(
            c.title.contains("RoCE traffic on priority 3"),
            "{}",
            c.title
        );
        assert!(
            c.title.contains("PFC pauses too (prio 3: rx 120 tx 0)"),
            "{}",
            c.title
        );
        let f = mk(false);
        let c = f.iter().find(|x| x.id == "rdma.congestion").unwrap();
        assert!(c.title.contains("no PFC pauses"), "{}", c.title);
        // Below the rate threshold: nothing.
        let t = Thresholds {
            rdma_cnp_per_s: 10_000.0,
            ..THRESHOLDS
        };
        let w = [RdmaSample::default()];
        assert!(window_rules(None, &w.iter().collect::<Vec<_>>(), HostRole::Local, &t).is_empty());
    }
}

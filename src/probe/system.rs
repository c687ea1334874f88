//! Host identity: name, kernel, CPU count, wirescope version.
//!
//! The telemetry issue extends this with NUMA, IRQ affinity, sysctls and the
//! rest of the host facts; for now it is what the log header and the control
//! handshake need to name each host.
//!
//! `/proc/net/route`, `/proc/uptime`, `/proc/meminfo` and `/proc/self/status`
//! are parsed by procfs-core ([`super::procfs`]). Three files keep a parser
//! here: `/proc/interrupts` and `/proc/net/ipv6_route`, which procfs-core
//! does not have, and `/proc/cpuinfo`, whose procfs-core `CpuInfo` keeps
//! only the lines inside `processor` blocks — the CPU model of a Raspberry
//! Pi (`Model`, after the blocks) and of old 32-bit ARM (`Processor`, before
//! them) would be lost.

use serde::{Deserialize, Serialize};

/// Who a host is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct HostInfo {
    /// `uname -n`.
    pub hostname: String,
    /// `uname -r`.
    pub kernel: String,
    /// Online CPUs.
    pub cpus: usize,
    /// wirescope version running there.
    pub wirescope: String,
    /// True when the process can create namespaces, pin IRQs, load eBPF (euid 0).
    pub privileged: bool,
}

impl HostInfo {
    /// Read this host.
    pub fn current() -> Self {
        let uts = nix::sys::utsname::uname().ok();
        let s = |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
            uts.as_ref()
                .map(|u| f(u).to_string_lossy().into_owned())
                .unwrap_or_else(|| "unknown".into())
        };
        HostInfo {
            hostname: s(nix::sys::utsname::UtsName::nodename),
            kernel: s(nix::sys::utsname::UtsName::release),
            cpus: online_cpus(),
            wirescope: env!("CARGO_PKG_VERSION").to_string(),
            privileged: nix::unistd::geteuid().is_root(),
        }
    }
}

/// Online CPUs (not the affinity mask of this process).
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|n| *n > 0).unwrap_or(1)
}

use super::facts::{HostFacts, IrqFact, NicFacts, NumaNode, QueueMask};
use super::source::{read_pcie, read_trim, HostSource};
use crate::units::{format_cpu_list, parse_cpu_list, CpuId};
use std::collections::BTreeMap;
use std::path::Path;

/// Sysctls a throughput diagnosis looks at (dotted names).
pub const SYSCTLS: &[&str] = &[
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.core.netdev_budget",
    "net.core.netdev_budget_usecs",
    "net.core.netdev_max_backlog",
    "net.core.default_qdisc",
    "net.core.rps_sock_flow_entries",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_mem",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_moderate_rcvbuf",
];

/// One line of /proc/interrupts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrqLine {
    /// IRQ number (numeric lines only).
    pub irq: u32,
    /// Count per CPU column.
    pub counts: Vec<u64>,
    /// The text after the counts (chip, hwirq, name).
    pub desc: String,
}

impl IrqLine {
    /// The action name (last word), e.g. `mlx5_comp3@pci:0000:3b:00.0`.
    pub fn name(&self) -> &str {
        self.desc.split_ascii_whitespace().last().unwrap_or("")
    }
}

/// Parse the numeric lines of /proc/interrupts; returns the CPU columns and the lines.
pub fn parse_interrupts(text: &str) -> (Vec<CpuId>, Vec<IrqLine>) {
    let (cpus, rows) = interrupt_rows(text);
    let lines = rows.map(|r| r.to_line()).collect();
    (cpus, lines)
}

/// One numeric line of /proc/interrupts, borrowed from the text: nothing is
/// allocated for it, and its counts are parsed only when asked for (the
/// host facts need the names only: on a 256-CPU host that skips some
/// 400,000 numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IrqRow<'a> {
    /// IRQ number.
    pub irq: u32,
    /// The count columns (as many words as the header has CPUs, or fewer).
    counts: &'a str,
    /// The text after the counts, as printed (chip, hwirq, name).
    desc: &'a str,
}

impl<'a> IrqRow<'a> {
    /// Count per CPU column, parsed in place (a word that is no number counts 0).
    pub fn counts(&self) -> impl Iterator<Item = u64> + 'a {
        self.counts
            .split_ascii_whitespace()
            .map(|w| w.parse().unwrap_or(0))
    }

    /// The action name (last word), e.g. `mlx5_comp3@pci:0000:3b:00.0`.
    pub fn name(&self) -> &'a str {
        self.desc.split_ascii_whitespace().last().unwrap_or("")
    }

    /// The owned line (counts parsed, the description's words joined by one space).
    pub fn to_line(&self) -> IrqLine {
        IrqLine {
            irq: self.irq,
            counts: self.counts().collect(),
            desc: self
                .desc
                .split_ascii_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// Skip `n` whitespace-separated words of `s`: the text they span, and the rest.
fn split_words(s: &str, n: usize) -> (&str, &str) {
    let b = s.as_bytes();
    let mut i = 0;
    for _ in 0..n {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == b.len() {
            break;
        }
        while i < b.len() && !b[i].is_ascii_whitespace() {
            i += 1;
        }
    }
    // `i` is at an ASCII byte or the end: a char boundary.
    (&s[..i], &s[i..])
}

/// The CPU columns of /proc/interrupts and its numeric lines, borrowed.
pub fn interrupt_rows(text: &str) -> (Vec<CpuId>, impl Iterator<Item = IrqRow<'_>>) {
    let mut lines = text.lines();
    let cpus = super::softirq::parse_cpu_header(lines.next().unwrap_or(""));
    let n = cpus.len();
    let rows = lines.filter_map(move |l| {
        let (num, rest) = l.split_once(':')?;
        let irq = num.trim().parse::<u32>().ok()?;
        let (counts, desc) = split_words(rest, n);
        Some(IrqRow { irq, counts, desc })
    });
    (cpus, rows)
}

/// A line of /proc/interrupts as [`nic_irqs`] matches it: owned or borrowed.
pub trait IrqNamed {
    /// IRQ number.
    fn irq(&self) -> u32;
    /// The action name (last word).
    fn name(&self) -> &str;
    /// The text after the counts.
    fn desc(&self) -> &str;
}

impl IrqNamed for IrqLine {
    fn irq(&self) -> u32 {
        self.irq
    }
    fn name(&self) -> &str {
        IrqLine::name(self)
    }
    fn desc(&self) -> &str {
        &self.desc
    }
}

impl IrqNamed for IrqRow<'_> {
    fn irq(&self) -> u32 {
        self.irq
    }
    fn name(&self) -> &str {
        IrqRow::name(self)
    }
    fn desc(&self) -> &str {
        self.desc
    }
}

/// The running kernel's boot id (`/proc/sys/kernel/random/boot_id`):
/// equal for two reads exactly when they come from one boot.
pub fn boot_id(src: &dyn HostSource) -> Option<String> {
    read_trim(src, "/proc/sys/kernel/random/boot_id")
}

/// The kernel's uptime in seconds (`/proc/uptime`, which captures record;
/// procfs-core parses it).
pub fn uptime_secs(src: &dyn HostSource) -> Option<f64> {
    let text = src.read("/proc/uptime").ok()?;
    super::procfs::parse::<procfs_core::Uptime>("/proc/uptime", &text)
        .ok()
        .map(|u| u.uptime)
        .filter(|s| s.is_finite() && *s >= 0.0)
}

/// Online CPUs of a host as its sysfs says (falls back to /proc/stat's cpuN lines).
pub fn online_cpu_ids(src: &dyn HostSource) -> Vec<CpuId> {
    online_cpus_with_source(src).0
}

/// The online CPUs and the file they were read from, taken from the first
/// of these that has them (a sosreport holds some, a capture all): sysfs
/// `cpu/online`, `/proc/stat`, `/proc/cpuinfo` (`processor` lines), the CPU
/// columns of `/proc/interrupts`, `lscpu` output ("On-line CPU(s) list").
pub fn online_cpus_with_source(src: &dyn HostSource) -> (Vec<CpuId>, &'static str) {
    if let Some(v) = read_trim(src, "/sys/devices/system/cpu/online")
        .and_then(|l| parse_cpu_list(&l).ok())
        .filter(|v| !v.is_empty())
    {
        return (v, "/sys/devices/system/cpu/online");
    }
    if let Some(v) = src
        .read("/proc/stat")
        .ok()
        .and_then(|t| super::cpu::parse_proc_stat(&t).ok())
        .map(|v| v.into_iter().map(|(c, _)| c).collect::<Vec<_>>())
        .filter(|v| !v.is_empty())
    {
        return (v, "/proc/stat");
    }
    if let Ok(t) = src.read("/proc/cpuinfo") {
        let v: Vec<CpuId> = values_of(&t, "processor")
            .filter_map(|v| v.parse().ok().map(CpuId))
            .collect();
        if !v.is_empty() {
            return (v, "/proc/cpuinfo");
        }
    }
    if let Ok(t) = src.read("/proc/interrupts") {
        let (v, _) = parse_interrupts(&t);
        if !v.is_empty() {
            return (v, "/proc/interrupts");
        }
    }
    for f in [
        "/sos_commands/processor/lscpu",
        "/sos_commands/processor/lscpu_-ae",
    ] {
        if let Some(v) = src
            .read(f)
            .ok()
            .and_then(|t| values_of(&t, "On-line CPU(s) list").find_map(|v| parse_cpu_list(v).ok()))
        {
            return (v, "lscpu");
        }
    }
    (Vec::new(), "")
}

/// The values of the `key: value` lines of `text` whose key is `key`, trimmed.
fn values_of<'a>(text: &'a str, key: &'a str) -> impl Iterator<Item = &'a str> {
    text.lines().filter_map(move |l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

fn cpu_model(cpuinfo: &str) -> String {
    ["model name", "Model", "cpu model", "Processor"]
        .into_iter()
        .find_map(|key| values_of(cpuinfo, key).next())
        .unwrap_or_default()
        .to_string()
}

/// Read the host-wide facts and, for each interface, the sysfs/procfs part of its facts.
/// The ethtool part comes from [`HostSource::ethtool`].
pub fn read_host_facts(src: &dyn HostSource, ifaces: &[String]) -> HostFacts {
    read_host_facts_reusing(src, ifaces, &mut PlacesCache::default())
}

/// Where the online cores sit, kept between reads of a host's facts: the
/// topology does not change while the same CPUs are online, and reading it
/// is about fifteen sysfs files per CPU.
#[derive(Debug, Default)]
pub struct PlacesCache {
    online: Vec<CpuId>,
    places: Vec<super::facts::CpuPlace>,
}

/// [`read_host_facts`], reading the cores' places only when the online
/// CPUs changed since the last call with `cache`.
pub fn read_host_facts_reusing(
    src: &dyn HostSource,
    ifaces: &[String],
    cache: &mut PlacesCache,
) -> HostFacts {
    let mut f = HostFacts::default();
    let mut missing = Vec::new();
    f.kernel = kernel_release(src, &mut missing);
    let online = read_cpus(src, cache, &mut f, &mut missing);
    f.governors = governors(src, &online);
    read_sysctls(src, &mut f, &mut missing);
    f.cmdline = read_trim(src, "/proc/cmdline").unwrap_or_default();
    f.boot_id = boot_id(src).unwrap_or_default();
    f.irqbalance = src.processes().map(|p| p.iter().any(|c| c == "irqbalance"));
    // Names only: the rows borrow the text and their counts stay unparsed.
    let text = src.read("/proc/interrupts").unwrap_or_default();
    let interrupts: Vec<IrqRow<'_>> = interrupt_rows(&text).1.collect();
    for iface in ifaces {
        f.nics.push(nic_facts(src, iface, &interrupts));
    }
    f.unavailable = missing;
    f
}

/// The kernel release: osrelease, else `/proc/version`, else a captured `uname -a`.
fn kernel_release(src: &dyn HostSource, missing: &mut Vec<String>) -> String {
    read_trim(src, "/proc/sys/kernel/osrelease")
        .or_else(|| {
            // `Linux version 6.1.0-18-amd64 (...)`, or `uname -a`'s third word.
            let v = src.read("/proc/version").ok()?;
            v.split_whitespace().nth(2).map(String::from)
        })
        .or_else(|| {
            let u = src.read("/sos_commands/kernel/uname_-a").ok()?;
            u.split_whitespace().nth(2).map(String::from)
        })
        .unwrap_or_else(|| {
            missing.push(
                "kernel release (/proc/sys/kernel/osrelease, /proc/version, uname -a)".to_string(),
            );
            String::new()
        })
}

/// The CPU model, the online CPUs, the NUMA nodes, RDMA, and where each core
/// sits (read again only when the online CPUs changed). Returns the online CPUs.
fn read_cpus(
    src: &dyn HostSource,
    cache: &mut PlacesCache,
    f: &mut HostFacts,
    missing: &mut Vec<String>,
) -> Vec<CpuId> {
    f.cpu_model = src
        .read("/proc/cpuinfo")
        .map(|t| cpu_model(&t))
        .unwrap_or_default();
    let (online, _) = online_cpus_with_source(src);
    f.cpus = online.len();
    if online.is_empty() {
        missing.push(
            "CPUs (/sys/devices/system/cpu/online, /proc/stat, /proc/cpuinfo, /proc/interrupts, lscpu)"
                .to_string(),
        );
    }
    let mut nodes: Vec<u32> = src
        .list("/sys/devices/system/node")
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.strip_prefix("node").and_then(|x| x.parse().ok()))
        .collect();
    nodes.sort_unstable();
    f.numa = nodes
        .into_iter()
        .filter_map(|n| {
            read_trim(src, &format!("/sys/devices/system/node/node{n}/cpulist"))
                .map(|cpulist| NumaNode { node: n, cpulist })
        })
        .collect();
    f.rdma = Some(super::rdma::read_rdma_facts(src));
    // Where each core sits (NUMA node, L3, SMT siblings): the packet
    // rules check the sink's cores against it.
    if cache.online != online || cache.places.is_empty() {
        cache.places = online
            .iter()
            .map(|c| super::topology::cpu_place(src, *c))
            .filter(|p| p.core_id.is_some() || p.l3.is_some() || p.numa_node.is_some())
            .collect();
        cache.online.clone_from(&online);
    }
    f.cpu_places.clone_from(&cache.places);
    online
}

/// Each cpufreq governor in use and the CPUs that use it.
fn governors(src: &dyn HostSource, online: &[CpuId]) -> BTreeMap<String, String> {
    let mut gov: BTreeMap<String, Vec<CpuId>> = BTreeMap::new();
    for c in online {
        if let Some(g) = read_trim(
            src,
            &format!(
                "/sys/devices/system/cpu/cpu{}/cpufreq/scaling_governor",
                c.0
            ),
        ) {
            gov.entry(g).or_default().push(*c);
        }
    }
    gov.into_iter()
        .map(|(g, c)| (g, format_cpu_list(&c)))
        .collect()
}

/// The sysctls wirescope judges; one hidden in this network namespace is said so.
fn read_sysctls(src: &dyn HostSource, f: &mut HostFacts, missing: &mut Vec<String>) {
    for name in SYSCTLS {
        let path = format!("/proc/sys/{}", name.replace('.', "/"));
        match read_trim(src, &path) {
            Some(v) => {
                f.sysctls.insert(
                    (*name).to_string(),
                    v.split_ascii_whitespace().collect::<Vec<_>>().join(" "),
                );
            }
            // Some net.core sysctls exist only in the initial network
            // namespace; inside another one (the local pair) they are hidden.
            None if name.starts_with("net.core.")
                && read_trim(src, "/proc/sys/net/core/somaxconn").is_some() =>
            {
                missing.push(format!(
                    "sysctl {name} (global: not visible inside this network namespace)"
                ))
            }
            None => missing.push(format!("sysctl {name}")),
        }
    }
}

fn parse_num<T: std::str::FromStr>(s: Option<String>) -> Option<T> {
    s.and_then(|v| v.parse().ok())
}

/// sysfs + /proc/interrupts + ethtool facts of one interface.
pub fn nic_facts<L: IrqNamed>(src: &dyn HostSource, iface: &str, interrupts: &[L]) -> NicFacts {
    let base = format!("/sys/class/net/{iface}");
    let eth = src.ethtool_facts(iface);
    let queues = src.list(&format!("{base}/queues")).unwrap_or_default();
    // One direction's queue count (None without queues to count) and its
    // queues' CPU masks (`file`), by queue.
    let per_dir = |prefix: &str, file: &str| {
        let ids: Vec<(u32, &String)> = queues
            .iter()
            .filter_map(|q| Some((q.strip_prefix(prefix)?.parse().ok()?, q)))
            .collect();
        let mut masks: Vec<QueueMask> = ids
            .iter()
            .filter_map(|&(queue, q)| {
                let mask = read_trim(src, &format!("{base}/queues/{q}/{file}"))?;
                Some(QueueMask { queue, mask })
            })
            .collect();
        masks.sort_by_key(|m| m.queue);
        ((!queues.is_empty()).then_some(ids.len() as u32), masks)
    };
    let (rx_queues, rps) = per_dir("rx-", "rps_cpus");
    let (tx_queues, xps) = per_dir("tx-", "xps_cpus");
    let bus = eth.drvinfo.bus_info();
    let devname = src.link_name(&format!("{base}/device")).unwrap_or_default();
    NicFacts {
        name: iface.to_string(),
        ifindex: parse_num(read_trim(src, &format!("{base}/ifindex"))),
        mtu: parse_num(read_trim(src, &format!("{base}/mtu"))),
        operstate: read_trim(src, &format!("{base}/operstate")),
        numa_node: parse_num(read_trim(src, &format!("{base}/device/numa_node"))),
        local_cpulist: read_trim(src, &format!("{base}/device/local_cpulist")),
        qdisc: src.qdisc(iface),
        pcie: read_pcie(src, &format!("{base}/device")),
        irqs: nic_irqs(src, iface, &bus, &devname, interrupts),
        rps,
        xps,
        rx_queues,
        tx_queues,
        drvinfo: eth.drvinfo,
        channels: eth.channels,
        rings: eth.rings,
        features: eth.features,
        coalesce: eth.coalesce,
        link: eth.link,
        pause: eth.pause,
    }
}

/// Interrupts that belong to the NIC: named after it (`eth0-TxRx-3`,
/// `i40e-eth0-TxRx-3`), after its PCI address (`mlx5_comp3@pci:0000:3b:00.0`,
/// or the MSI-X chip column `PCI-MSIX-0000:00:03.0`), or after its virtio
/// device (`virtio2-input.0`).
pub fn nic_irqs<L: IrqNamed>(
    src: &dyn HostSource,
    iface: &str,
    bus: &str,
    devname: &str,
    interrupts: &[L],
) -> Vec<IrqFact> {
    let virtio = devname.starts_with("virtio");
    interrupts
        .iter()
        .filter(|l| {
            let name = l.name();
            name.contains(iface)
                || (!bus.is_empty() && l.desc().contains(bus))
                || (virtio
                    && name
                        .strip_prefix(devname)
                        .is_some_and(|r| r.starts_with('-')))
        })
        .map(|l| IrqFact {
            irq: l.irq(),
            name: l.name().to_string(),
            affinity: read_trim(
                src,
                &format!("/proc/irq/{}/effective_affinity_list", l.irq()),
            )
            .or_else(|| read_trim(src, &format!("/proc/irq/{}/smp_affinity_list", l.irq())))
            .unwrap_or_default(),
        })
        .collect()
}

/// An interface name the user typed that this host does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no interface '{name}' on this host (it has {})", have_text(have))]
pub struct UnknownIface {
    /// The name as typed.
    pub name: String,
    /// The interfaces the host has, sorted.
    pub have: Vec<String>,
}

fn have_text(have: &[String]) -> String {
    if have.is_empty() {
        "none".to_string()
    } else {
        have.join(", ")
    }
}

/// Check interface names the user typed (`--iface`, `--peer-iface`) against
/// this host's network namespace. `Err` names the first unknown one and
/// lists what the host has, so the user can correct the spelling.
pub fn check_ifaces(names: &[String]) -> Result<(), UnknownIface> {
    check_ifaces_in(Path::new("/sys/class/net"), names)
}

fn check_ifaces_in(class_net: &Path, names: &[String]) -> Result<(), UnknownIface> {
    for n in names {
        let valid = !n.is_empty()
            && n.len() < 16
            && n != "."
            && n != ".."
            && !n.contains(['/', '\0'])
            && !n.chars().any(char::is_whitespace);
        if valid && class_net.join(n).exists() {
            continue;
        }
        let mut have: Vec<String> = std::fs::read_dir(class_net)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        have.sort();
        return Err(UnknownIface {
            name: n.clone(),
            have,
        });
    }
    Ok(())
}

/// The local interface and address that route to `peer` (a UDP socket is
/// connected, no packet is sent).
pub fn route_to(peer: std::net::IpAddr) -> (Option<String>, Option<std::net::IpAddr>) {
    (route_iface(peer), local_addr_to(peer))
}

/// The local address the kernel chooses toward `peer` (a UDP socket is
/// connected, no packet is sent).
fn local_addr_to(peer: std::net::IpAddr) -> Option<std::net::IpAddr> {
    let bind = if peer.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let s = std::net::UdpSocket::bind(bind).ok()?;
    s.connect((peer, 9)).ok()?;
    Some(s.local_addr().ok()?.ip())
}

/// The interface that carries traffic to `peer`: connect a UDP socket (no
/// packet is sent), take the local address the kernel chose, find the
/// interface that holds it.
pub fn route_iface(peer: std::net::IpAddr) -> Option<String> {
    let local = local_addr_to(peer)?;
    if local.is_loopback() {
        return Some("lo".into());
    }
    let addrs = nix::ifaddrs::getifaddrs().ok()?;
    for a in addrs {
        let Some(sa) = a.address else { continue };
        let ip = sa
            .as_sockaddr_in()
            .map(|x| std::net::IpAddr::V4(x.ip()))
            .or_else(|| sa.as_sockaddr_in6().map(|x| std::net::IpAddr::V6(x.ip())));
        if ip == Some(local) {
            return Some(a.interface_name);
        }
    }
    None
}

/// The interface of the default route (IPv4 then IPv6), from /proc/net/route
/// (procfs-core) and /proc/net/ipv6_route (ours: procfs-core has no IPv6
/// routes); no packet is sent. procfs-core reads the RefCnt and Use columns
/// as 16-bit numbers: kernels since 3.6 print 0 there; an older kernel's
/// busy route cache could overflow them, and then only IPv6 is tried.
pub fn default_route_iface(src: &dyn HostSource) -> Option<String> {
    let v4 = src.read("/proc/net/route").ok().and_then(|t| {
        let routes: procfs_core::net::RouteEntries =
            super::procfs::parse("/proc/net/route", &t).ok()?;
        routes
            .0
            .into_iter()
            .find(|r| r.destination.is_unspecified() && r.mask.is_unspecified())
            .map(|r| r.iface)
    });
    v4.or_else(|| {
        src.read("/proc/net/ipv6_route").ok().and_then(|t| {
            t.lines().find_map(|l| {
                let w: Vec<&str> = l.split_ascii_whitespace().collect();
                (w.first() == Some(&"00000000000000000000000000000000")
                    && w.get(1) == Some(&"00")
                    && w.get(9) != Some(&"lo"))
                .then(|| w.get(9).map(|s| s.to_string()))?
            })
        })
    })
}

/// Memory this process may still allocate: the least of the kernel's
/// `MemAvailable`, the room left under its memory cgroup's limit (v2
/// `memory.max − memory.current`, v1 `memory.limit_in_bytes −
/// memory.usage_in_bytes`) and `RLIMIT_AS` minus its `VmSize` (None when
/// none of these can be read).
pub fn mem_available() -> Option<crate::units::Bytes> {
    let host = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| parse_mem_available(&t).ok().flatten())
        .map(|b| b.0);
    [host, cgroup_room(), address_space_room()]
        .into_iter()
        .flatten()
        .min()
        .map(crate::units::Bytes)
}

/// Room under this process's memory cgroup limit, if it has one.
fn cgroup_room() -> Option<u64> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let read = |p: String| -> Option<u64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
    for line in cg.lines() {
        let mut f = line.splitn(3, ':');
        let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        let (max, cur) = if ctrl.is_empty() {
            let d = format!("/sys/fs/cgroup{path}");
            (
                read(format!("{d}/memory.max")),
                read(format!("{d}/memory.current")),
            )
        } else if ctrl.split(',').any(|c| c == "memory") {
            let d = format!("/sys/fs/cgroup/memory{path}");
            (
                read(format!("{d}/memory.limit_in_bytes")),
                read(format!("{d}/memory.usage_in_bytes")),
            )
        } else {
            continue;
        };
        // "max" (v2) does not parse: no limit. v1 reports "no limit" as a huge number.
        if let (Some(max), Some(cur)) = (max, cur) {
            if max < (1 << 60) {
                return Some(max.saturating_sub(cur));
            }
        }
    }
    None
}

/// Room under `RLIMIT_AS`, if it is set.
fn address_space_room() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit the kernel writes into.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut r) } != 0 || r.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = super::procfs::parse::<procfs_core::process::Status>("/proc/self/status", &status)
        .ok()?
        .vmsize?;
    Some(r.rlim_cur.saturating_sub(kib.saturating_mul(1024)))
}

/// `MemAvailable` of a /proc/meminfo text (procfs-core; None on kernels
/// before 3.14, which do not have it).
pub fn parse_mem_available(
    text: &str,
) -> Result<Option<crate::units::Bytes>, super::procfs::ParseError> {
    let m: procfs_core::Meminfo = super::procfs::parse("/proc/meminfo", text)?;
    Ok(m.mem_available.map(crate::units::Bytes))
}

#[cfg(test)]
mod facts_tests {
    use super::*;

    /// The parser as it was before it borrowed: every column parsed, the
    /// description joined from its words (the reference for the new one).
    fn parse_interrupts_before(text: &str) -> (Vec<CpuId>, Vec<IrqLine>) {
        let mut lines = text.lines();
        let cpus = crate::probe::softirq::parse_cpu_header(lines.next().unwrap_or(""));
        let mut out = Vec::new();
        for l in lines {
            let Some((num, rest)) = l.split_once(':') else {
                continue;
            };
            let Ok(irq) = num.trim().parse::<u32>() else {
                continue;
            };
            let mut words = rest.split_ascii_whitespace();
            let counts: Vec<u64> = words
                .by_ref()
                .take(cpus.len())
                .map(|w| w.parse().unwrap_or(0))
                .collect();
            let desc = words.collect::<Vec<_>>().join(" ");
            out.push(IrqLine { irq, counts, desc });
        }
        (cpus, out)
    }

    /// The borrowed rows give the lines of the old parser, and the NIC
    /// interrupts found from them are the ones found from owned lines.
    fn same_as_before(text: &str) -> usize {
        let before = parse_interrupts_before(text);
        assert_eq!(parse_interrupts(text), before);
        let (cpus, rows) = interrupt_rows(text);
        let rows: Vec<IrqRow<'_>> = rows.collect();
        assert_eq!(cpus, before.0);
        assert_eq!(rows.len(), before.1.len());
        for (r, l) in rows.iter().zip(&before.1) {
            assert_eq!(r.irq, l.irq);
            assert_eq!(r.name(), l.name());
            assert_eq!(r.counts().collect::<Vec<_>>(), l.counts);
        }
        before.1.len()
    }

    #[test]
    fn borrowed_interrupts_parse_as_before() {
        // Odd cells: a non-number, a '+', an overflow, a short line, no description.
        let odd = "           CPU0       CPU1       CPU2\n  0:   12 x +7   IO-APIC   2-edge      timer\n  1: 99999999999999999999999 3\n  2:\n NMI:  1 2 3   Non-maskable interrupts\nERR:          0\n  9:  1  2  3  PCI-MSIX-0000:00:03.0   0-edge     virtio2-input.0\n";
        assert_eq!(same_as_before(odd), 4);
        assert_eq!(
            same_as_before(include_str!("../../tests/fixtures/proc/interrupts")),
            parse_interrupts(include_str!("../../tests/fixtures/proc/interrupts"))
                .1
                .len()
        );
        // This machine's own file.
        if let Ok(t) = std::fs::read_to_string("/proc/interrupts") {
            assert!(same_as_before(&t) > 0);
        }
        // The synthetic 256-CPU host: its lines, and each NIC's interrupts.
        let host = crate::probe::synthetic::SyntheticHost::in_temp(Default::default()).unwrap();
        let src = host.source();
        let text = src.read("/proc/interrupts").unwrap();
        assert_eq!(same_as_before(&text), host.irq_line_count());
        let lines = parse_interrupts_before(&text).1;
        let rows: Vec<IrqRow<'_>> = interrupt_rows(&text).1.collect();
        for (i, iface) in host.nic_names().iter().enumerate() {
            let bus = host.nic_bus(i as u32);
            let from_rows = nic_irqs(&src, iface, &bus, "", &rows);
            assert!(from_rows.len() >= 64, "{iface}: {}", from_rows.len());
            assert_eq!(
                from_rows,
                nic_irqs(&src, iface, &bus, "", &lines),
                "{iface}"
            );
        }
        // virtio names are matched on the device name and a dash only.
        let virtio = "  CPU0\n 9: 1 PCI-MSIX-0000:00:03.0 0-edge virtio2-input.0\n10: 1 PCI-MSIX-0000:00:04.0 0-edge virtio21-input.0\n";
        let rows: Vec<IrqRow<'_>> = interrupt_rows(virtio).1.collect();
        let found = nic_irqs(&src, "eth0", "", "virtio2", &rows);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].name, "virtio2-input.0");
    }

    #[test]
    fn interrupts_fixture() {
        let (cpus, lines) = parse_interrupts(include_str!("../../tests/fixtures/proc/interrupts"));
        assert_eq!(cpus.len(), 2);
        let l = lines.iter().find(|l| l.name() == "virtio1-req.0").unwrap();
        assert_eq!(l.counts.len(), 2);
        assert!(l.desc.contains("PCI-MSIX-0000:00:02.0"));
    }

    #[test]
    fn route_to_loopback_is_lo() {
        assert_eq!(
            route_iface("127.0.0.1".parse().unwrap()).as_deref(),
            Some("lo")
        );
    }

    /// A live-capture-shaped source over a map of files.
    struct Files(Vec<(&'static str, &'static str)>);

    impl HostSource for Files {
        fn read(&self, path: &str) -> std::io::Result<String> {
            self.0
                .iter()
                .find(|(p, _)| *p == path)
                .map(|(_, t)| t.to_string())
                .ok_or_else(|| std::io::ErrorKind::NotFound.into())
        }
        fn list(&self, _: &str) -> std::io::Result<Vec<String>> {
            Ok(Vec::new())
        }
        fn link_name(&self, _: &str) -> std::io::Result<String> {
            Err(std::io::ErrorKind::NotFound.into())
        }
        fn ethtool(&self, _: &str) -> crate::probe::source::EthtoolView {
            Default::default()
        }
        fn ethtool_stats(
            &self,
            _: &str,
        ) -> crate::probe::facts::Support<crate::probe::nic::NicStats> {
            crate::probe::facts::Support::Unknown
        }
        fn qdisc(&self, _: &str) -> Option<String> {
            None
        }
        fn processes(&self) -> Option<Vec<String>> {
            None
        }
        fn describe(&self) -> String {
            "test files".into()
        }
    }

    #[test]
    fn default_route_from_a_real_route_table() {
        let t = include_str!("../../tests/fixtures/proc/net-route");
        let src = Files(vec![("/proc/net/route", t)]);
        assert_eq!(default_route_iface(&src).as_deref(), Some("eth0"));
        // Only a route to 0.0.0.0/0 is the default one: a host route to
        // 0.0.0.0 with a /24 mask is not.
        let no_default =
            "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
                          eth1\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                          eth2\t00000000\t010200C0\t0003\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        let src = Files(vec![("/proc/net/route", no_default)]);
        assert_eq!(default_route_iface(&src), None);
        let with_v6 = Files(vec![
            ("/proc/net/route", no_default),
            (
                "/proc/net/ipv6_route",
                "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003 eth3\n",
            ),
        ]);
        assert_eq!(default_route_iface(&with_v6).as_deref(), Some("eth3"));
    }

    #[test]
    fn uptime_from_the_file_and_garbage_is_none() {
        let t = include_str!("../../tests/fixtures/proc/uptime");
        let want: f64 = t.split_whitespace().next().unwrap().parse().unwrap();
        assert_eq!(uptime_secs(&Files(vec![("/proc/uptime", t)])), Some(want));
        assert_eq!(
            uptime_secs(&Files(vec![("/proc/uptime", "12.5 3.0\n")])),
            Some(12.5)
        );
        for bad in ["", "up 3\n", "-4.0 1.0\n", "NaN 1.0\n"] {
            assert_eq!(
                uptime_secs(&Files(vec![("/proc/uptime", bad)])),
                None,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn mem_available_in_bytes_and_garbage_named() {
        let t = include_str!("../../tests/fixtures/proc/meminfo");
        let kib: u64 = t
            .lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap();
        assert_eq!(
            parse_mem_available(t).unwrap(),
            Some(crate::units::Bytes(kib * 1024))
        );
        let e = parse_mem_available("MemTotal: lots kB\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/proc/meminfo is not in the kernel's format"),
            "{e}"
        );
        assert!(!e.to_string().contains("procfs bug"), "{e}");
    }

    #[test]
    fn cpuinfo_keeps_the_model_procfs_drops() {
        use procfs_core::FromRead;
        let pi = include_str!("../../tests/fixtures/proc/cpuinfo-rpi4");
        assert_eq!(cpu_model(pi), "Raspberry Pi 4 Model B Rev 1.1");
        let src = Files(vec![("/proc/cpuinfo", pi)]);
        assert_eq!(
            online_cpus_with_source(&src),
            (vec![CpuId(0), CpuId(1)], "/proc/cpuinfo")
        );
        // Why this parser stays: procfs-core's CpuInfo has no `Model` for it.
        let theirs = procfs_core::CpuInfo::from_read(pi.as_bytes()).unwrap();
        assert_eq!(theirs.get_field(0, "Model"), None);
        let x86 = include_str!("../../tests/fixtures/proc/cpuinfo");
        let model = x86
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).trim())
            .unwrap();
        assert_eq!(cpu_model(x86), model);
    }

    #[test]
    fn cpu_model_from_cpuinfo() {
        assert_eq!(
            cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 7B13\n"),
            "AMD EPYC 7B13"
        );
    }
}

#[cfg(test)]
mod iface_tests {
    use super::check_ifaces_in;

    #[test]
    fn unknown_interface_names_are_refused_with_what_the_host_has() {
        let d = tempfile::tempdir().unwrap();
        for n in ["eth0", "lo"] {
            std::fs::create_dir(d.path().join(n)).unwrap();
        }
        assert!(check_ifaces_in(d.path(), &["eth0".into(), "lo".into()]).is_ok());
        let e = check_ifaces_in(d.path(), &["eth0".into(), "eht0".into()])
            .unwrap_err()
            .to_string();
        assert_eq!(e, "no interface 'eht0' on this host (it has eth0, lo)");
        for bad in ["../etc", "", "a/b", ".."] {
            assert!(check_ifaces_in(d.path(), &[bad.into()]).is_err(), "{bad}");
        }
    }
}

//! eBPF probes: the per-CPU × per-queue packet matrix, and in the deep set
//! exact softirq time per CPU and NAPI polls.
//!
//! This module owns the userspace half of the programs in `ebpf/` (C, CO-RE,
//! built by `cargo xtask build-ebpf`): the `#[repr(C)]` mirrors of the types
//! shared with `ebpf/wirescope.h`, the embedded object and the hash of its
//! sources, the probe sets ([`EbpfMode`]), the loader ([`Ebpf`]), the
//! sampling window of the default set (`gate`) and the conversion of the
//! kernel's cumulative per-CPU counters into per-interval Sample fields.
//!
//! What it gives that /proc cannot: `netif_receive_skb`/`net_dev_start_xmit`
//! say which CPU handled which queue — the queue→CPU matrix behind "one core
//! does all the work" — on interfaces that have no per-queue counters at all
//! (veth, many VFs). And with `--ebpf deep`: `/proc/stat`'s softirq column
//! is tick-sampled on kernels without IRQ time accounting; `softirq_entry`/
//! `exit` timing is exact, and `napi_poll` says which NAPI instance used its
//! whole budget.
//!
//! Cost: what a program costs is mostly its invocation, not its body (an
//! empty program on these tracepoints takes 70-90 ns a run), so the default
//! set saves by running less: the two packet programs are attached for a
//! quarter of each interval only and their counts scaled to the interval
//! (queue rows say `source: ebpf_sampled`, Samples carry the share in
//! `ebpf_observed`), and the per-event softirq and NAPI programs are in the
//! deep set, which keeps every program attached and every count exact. The
//! interface filter is a compare against constants the loader writes into
//! the object's read-only data (the verifier sees them). On a host that runs
//! both ends (the local pair) one set counts for both: see
//! [`EbpfMode::ByPeer`] and [`share_with_peer`].
//!
//! It observes only: programs are attached for as long as an [`Ebpf`] lives
//! (at most), nothing is pinned, and dropping it detaches and unloads
//! everything. It never changes the host otherwise, and when it cannot load
//! (no privileges, no BTF, a kernel that refuses) it says why in one line and
//! the sampler carries on without it.

mod gate;
mod kernel;

pub use gate::SHARE as SAMPLED_SHARE;

pub use kernel::{privileged, Ebpf, EbpfCounters, EbpfReadError};

use super::ethtool_names::Dir;
use super::queues::queue_sample;
use super::sample::{Hosts, QueueSample, QueueSource, Sample};
pub use super::sample::{NapiSample, QueueCpu, SoftirqTime};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The compiled programs: built by `build.rs` with clang when installed,
/// else the object committed next to the sources.
pub static OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/wirescope.bpf.o"));
/// The recorded hash of the sources [`OBJECT`] was built from (`ebpf/wirescope.bpf.o.sha256`).
pub const OBJECT_SOURCE_HASH: &str = include_str!("../../ebpf/wirescope.bpf.o.sha256");
/// Source files of the object, relative to `ebpf/`, in hashing order.
pub const SOURCES: [&str; 2] = ["wirescope.bpf.c", "wirescope.h"];
/// The C file clang compiles.
pub const MAIN_SOURCE: &str = "wirescope.bpf.c";
/// The object file name, relative to `ebpf/`.
pub const OBJECT_NAME: &str = "wirescope.bpf.o";
pub use crate::traffic::bpf::{hash_sources, CLANG_ARGS};
/// The programs, by ELF function name, and the BTF tracepoint each attaches
/// to: the default set's first.
pub const PROGRAMS: [(&str, &str); 5] = [
    ("ws_netif_receive_skb", "netif_receive_skb"),
    ("ws_net_dev_start_xmit", "net_dev_start_xmit"),
    ("ws_softirq_entry", "softirq_entry"),
    ("ws_softirq_exit", "softirq_exit"),
    ("ws_napi_poll", "napi_poll"),
];

/// Which probes to attach. `default` and `deep` are user choices
/// (`--ebpf`); `by-peer` is what the local pair tells its agent, because the
/// controller's set on the same kernel already counts for both ends.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum EbpfMode {
    /// No probes.
    Off,
    /// netif_receive_skb and net_dev_start_xmit, attached for a quarter of
    /// each interval: the queue→CPU matrix and per-queue counts, estimated
    /// (scaled to the interval). Softirq time comes from /proc/stat.
    #[default]
    Default,
    /// Every probe, always attached: exact per-queue counts, exact softirq
    /// time of every vector (softirq_entry/exit), and napi_poll (polls, work
    /// and budget-exhausted counts per NAPI instance).
    Deep,
    /// Counted by the controller's probes on the same kernel (local pair).
    #[value(skip)]
    ByPeer,
}

impl EbpfMode {
    /// The mode's name as written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            EbpfMode::Off => "off",
            EbpfMode::Default => "default",
            EbpfMode::Deep => "deep",
            EbpfMode::ByPeer => "by-peer",
        }
    }

    /// The programs this mode attaches (ELF name, tracepoint).
    pub fn programs(self) -> &'static [(&'static str, &'static str)] {
        match self {
            EbpfMode::Off | EbpfMode::ByPeer => &[],
            EbpfMode::Default => &PROGRAMS[..2],
            EbpfMode::Deep => &PROGRAMS,
        }
    }

    /// True when the mode's programs are attached for a share of each
    /// interval only ([`SAMPLED_SHARE`]) and their counts are estimates.
    pub fn sampled(self) -> bool {
        self == EbpfMode::Default
    }
}

/// What a host's eBPF probes are doing, for the log header and the TUI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EbpfStatus {
    /// The requested set.
    pub mode: EbpfMode,
    /// Attached tracepoints (empty when off).
    pub probes: Vec<String>,
    /// Interfaces counted by the packet probes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ifaces: Vec<String>,
    /// Why the probes are off, when they are (one line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off: Option<String>,
    /// The share of each interval (%) the probes are attached when they
    /// are sampled (default set); absent when they count everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_pct: Option<u32>,
}

impl EbpfStatus {
    /// Off, with the reason.
    pub fn off(mode: EbpfMode, why: impl Into<String>) -> Self {
        EbpfStatus {
            mode,
            probes: Vec::new(),
            ifaces: Vec::new(),
            off: Some(why.into()),
            sampled_pct: None,
        }
    }

    /// One line for the terminal: `eBPF default: netif_receive_skb, ...
    /// (sampled: 25 % of each interval) on veth-a` or the reason it is off.
    pub fn line(&self) -> String {
        match &self.off {
            Some(why) => why.clone(),
            None => format!(
                "eBPF {}: {}{} on {}",
                self.mode.name(),
                self.probes.join(", "),
                match self.sampled_pct {
                    Some(p) => format!(" (sampled: {p} % of each interval)"),
                    None => String::new(),
                },
                if self.ifaces.is_empty() {
                    "no interface".to_string()
                } else {
                    self.ifaces.join(", ")
                }
            ),
        }
    }
}

/// Interfaces watched at once (`WS_MAX_IFACES`).
pub const MAX_IFACES: usize = 8;
/// Queue slots per (interface, direction) (`WS_QSTRIDE`): slot 0 = queue not
/// recorded, slot 1 + q = queue q.
pub const QSTRIDE: u32 = 257;
/// Softirq vectors (`WS_NR_SOFTIRQS`).
pub const NR_SOFTIRQS: u32 = 10;
/// `NET_TX_SOFTIRQ` vector number.
pub const NET_TX: usize = 2;
/// `NET_RX_SOFTIRQ` vector number.
pub const NET_RX: usize = 3;
/// NAPI instances counted at once (`WS_MAX_NAPIS`).
pub const MAX_NAPIS: u32 = 1024;

/// How the kernel identifies an interface to the filter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IfaceKey {
    /// Interface index in its namespace.
    pub ifindex: u32,
    /// Inode number of the network namespace (`/proc/PID/ns/net`).
    pub netns: u32,
}

/// Key of `ws_napi` (`struct ws_napi_key`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct NapiKey {
    /// Filter slot of the interface.
    pub slot: u32,
    /// The kernel's NAPI id.
    pub napi_id: u32,
}

/// One NAPI instance on one CPU (`struct ws_napi`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NapiCount {
    /// napi_poll calls.
    pub polls: u64,
    /// Packets those polls processed.
    pub work: u64,
    /// Polls that used their whole budget.
    pub exhausted: u64,
}

/// Packets and bytes of one queue slot on one CPU (`struct ws_count`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCount {
    /// skbs seen.
    pub packets: u64,
    /// Sum of `skb->len`.
    pub bytes: u64,
}

/// One softirq vector on one CPU (`struct ws_softirq`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SoftirqSlot {
    /// Handler time (ns), summed.
    pub ns: u64,
    /// Handler runs.
    pub count: u64,
    /// Entry timestamp of a running handler (kernel scratch).
    pub start: u64,
}

// SAFETY: plain #[repr(C)] integer structs without padding; any bit pattern is valid.
unsafe impl aya::Pod for NapiKey {}
// SAFETY: as above.
unsafe impl aya::Pod for NapiCount {}
// SAFETY: as above.
unsafe impl aya::Pod for QueueCount {}
// SAFETY: as above.
unsafe impl aya::Pod for SoftirqSlot {}

/// An interface to count, as the kernel identifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EbpfIface {
    /// Name (for the Samples).
    pub name: String,
    /// The kernel's identity of the interface.
    pub key: IfaceKey,
    /// rx queues (`/sys/class/net/NAME/queues/rx-*`).
    pub rx_queues: u32,
    /// tx queues.
    pub tx_queues: u32,
    /// The received skb's `queue_mapping` is the rx queue itself, not rx
    /// queue + 1: veth delivers to the peer's rx queue with the index of the
    /// sender's tx queue and leaves that index in `queue_mapping` without
    /// `skb_record_rx_queue` (its non-NAPI path, the one TCP takes). Real
    /// drivers record rx queue + 1.
    pub rx_mapping_is_queue: bool,
}

/// Why eBPF is off. Display is the one line the user sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EbpfUnavailable {
    /// Missing capabilities.
    #[error("eBPF off: needs CAP_BPF and CAP_PERFMON (run as root)")]
    NotPrivileged,
    /// The kernel exposes no BTF.
    #[error("eBPF off: the kernel has no BTF (/sys/kernel/btf/vmlinux missing; needs CONFIG_DEBUG_INFO_BTF)")]
    NoBtf,
    /// Too many interfaces for the filter.
    #[error("eBPF off: {0} interfaces, at most {MAX_IFACES} can be watched")]
    TooManyIfaces(usize),
    /// Switched off by the user (`--ebpf off`, or `WIRESCOPE_EBPF=off`).
    #[error("eBPF off: {0}")]
    Disabled(String),
    /// Loading the object or a program failed.
    #[error("eBPF off: loading {what} failed: {reason}")]
    Load {
        /// The object or the program.
        what: String,
        /// The kernel's or aya's answer.
        reason: String,
    },
    /// Attaching a program failed.
    #[error("eBPF off: attaching {program} to {tracepoint} failed: {reason}")]
    Attach {
        /// Program name.
        program: String,
        /// Tracepoint.
        tracepoint: String,
        /// The kernel's answer.
        reason: String,
    },
}

/// eBPF status of both hosts (None for a host whose source is not live).
pub type EbpfHosts = Hosts<Option<EbpfStatus>>;

/// Move what one eBPF set on a shared kernel counted for the peer's
/// interfaces from `local` into `peer` (both Samples of the same interval),
/// and give the peer the kernel-wide parts (softirq time, sampling share,
/// status). Used by the local pair, where the controller's probes count for
/// both ends.
pub fn share_with_peer(local: &mut Sample, peer: &mut Sample, peer_ifaces: &[String]) {
    let (queue_cpus, napi, queues) = take_peer_share(local, peer_ifaces);
    peer.queue_cpus = queue_cpus;
    peer.napi = napi;
    peer.queues.retain(|q| !q.source.is_ebpf());
    peer.queues.extend(queues);
    peer.softirq_time = local.softirq_time.clone();
    peer.ebpf_observed = local.ebpf_observed;
    peer.ebpf = local.ebpf.clone();
    peer.probes = local.probes.clone();
}

/// Drop what a shared eBPF set counted for the peer's interfaces from a
/// local Sample whose peer Sample never came.
pub fn drop_peer_share(local: &mut Sample, peer_ifaces: &[String]) {
    take_peer_share(local, peer_ifaces);
}

/// Remove the eBPF parts of `peer_ifaces` from `local` and return them.
fn take_peer_share(
    local: &mut Sample,
    peer_ifaces: &[String],
) -> (Vec<QueueCpu>, Vec<NapiSample>, Vec<QueueSample>) {
    let theirs = |iface: &str| peer_ifaces.iter().any(|p| p == iface);
    fn split<T>(v: &mut Vec<T>, take: impl Fn(&T) -> bool) -> Vec<T> {
        let (taken, kept) = std::mem::take(v).into_iter().partition(|x| take(x));
        *v = kept;
        taken
    }
    (
        split(&mut local.queue_cpus, |c| theirs(&c.iface)),
        split(&mut local.napi, |c| theirs(&c.iface)),
        split(&mut local.queues, |q| {
            q.source.is_ebpf() && theirs(&q.iface)
        }),
    )
}

/// Hash of the object's sources in `dir` (normally `ebpf/`) and the clang flags, hex.
pub fn source_hash(dir: &Path) -> std::io::Result<String> {
    hash_sources(dir, &SOURCES)
}

/// Index into `ws_queues` of (interface slot, direction, queue slot).
pub fn queue_index(slot: usize, dir: Dir, qslot: u32) -> u32 {
    let d = match dir {
        Dir::Rx => 0,
        Dir::Tx => 1,
    };
    (slot as u32 * 2 + d) * QSTRIDE + qslot
}

impl EbpfCounters {
    /// Per-queue Samples (every queue of every watched interface, summed
    /// over CPUs) with rates over `secs`: source `ebpf`, or `ebpf_sampled`
    /// when the counts are estimates; none when the sampled probes saw
    /// nothing of the interval (no window in it).
    pub fn queue_samples(&self, ifaces: &[EbpfIface], secs: f64) -> Vec<QueueSample> {
        let source = match self.observed {
            None => QueueSource::Ebpf,
            Some(share) if share > 0.0 => QueueSource::EbpfSampled,
            Some(_) => return Vec::new(),
        };
        let mut sums: BTreeMap<(&str, Dir, u32), QueueCount> = BTreeMap::new();
        for i in ifaces {
            for (dir, n) in [(Dir::Rx, i.rx_queues), (Dir::Tx, i.tx_queues)] {
                for q in 0..n {
                    sums.insert((&i.name, dir, q), QueueCount::default());
                }
            }
        }
        for c in &self.queue_cpus {
            if let Some(q) = c.queue {
                let s = sums.entry((&c.iface, c.dir, q)).or_default();
                s.packets += c.packets;
                s.bytes += c.bytes;
            }
        }
        sums.into_iter()
            .map(|((iface, dir, queue), c)| {
                queue_sample(
                    iface,
                    dir,
                    queue,
                    Some(c.packets),
                    Some(c.bytes),
                    None,
                    BTreeMap::new(),
                    source,
                    secs,
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{BitsPerSec, CpuId};

    #[test]
    fn shared_types_match_the_c_layout() {
        let h = CHeader::read();
        for (name, v) in [
            ("WS_MAX_IFACES", MAX_IFACES as u64),
            ("WS_QSTRIDE", u64::from(QSTRIDE)),
            ("WS_NR_SOFTIRQS", u64::from(NR_SOFTIRQS)),
            ("WS_NET_TX", NET_TX as u64),
            ("WS_NET_RX", NET_RX as u64),
            ("WS_MAX_NAPIS", u64::from(MAX_NAPIS)),
        ] {
            assert_eq!(h.define(name), v, "{name} in ebpf/wirescope.h");
        }
        macro_rules! same_layout {
            ($c:literal, $t:ty, [$($f:ident),+]) => {{
                let c = h.layout($c);
                let rust: Vec<(&str, usize)> =
                    vec![$((stringify!($f), std::mem::offset_of!($t, $f))),+];
                assert_eq!(c.fields, rust, "fields and offsets of struct {}", $c);
                assert_eq!(c.size, std::mem::size_of::<$t>(), "size of struct {}", $c);
            }};
        }
        same_layout!("ws_napi_key", NapiKey, [slot, napi_id]);
        same_layout!("ws_napi", NapiCount, [polls, work, exhausted]);
        same_layout!("ws_count", QueueCount, [packets, bytes]);
        same_layout!("ws_softirq", SoftirqSlot, [ns, count, start]);
        assert_eq!(queue_index(0, Dir::Rx, 0), 0);
        assert_eq!(queue_index(0, Dir::Tx, 1), QSTRIDE + 1);
        assert_eq!(
            queue_index(MAX_IFACES - 1, Dir::Tx, QSTRIDE - 1),
            MAX_IFACES as u32 * 2 * QSTRIDE - 1
        );
    }

    /// The shared part of `ebpf/wirescope.h`, read as the C compiler lays it out.
    struct CHeader(String);

    struct CLayout {
        fields: Vec<(&'static str, usize)>,
        size: usize,
    }

    impl CHeader {
        fn read() -> Self {
            let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ebpf/wirescope.h");
            CHeader(std::fs::read_to_string(p).unwrap())
        }

        fn define(&self, name: &str) -> u64 {
            let line = self
                .0
                .lines()
                .find(|l| l.split_whitespace().take(2).eq(["#define", name]))
                .unwrap_or_else(|| panic!("#define {name} not found"));
            line.split_whitespace().nth(2).unwrap().parse().unwrap()
        }

        /// Field names with their offsets (natural alignment of `__uNN`
        /// fields, as clang lays out a C struct), and the padded size.
        fn layout(&self, name: &str) -> CLayout {
            let start = self
                .0
                .find(&format!("struct {name} {{"))
                .unwrap_or_else(|| panic!("struct {name} not found"));
            let body = &self.0[start..];
            let body = &body[body.find('{').unwrap() + 1..body.find("};").unwrap()];
            let (mut fields, mut off, mut align) = (Vec::new(), 0usize, 1usize);
            for decl in body.split(';') {
                let decl = decl
                    .lines()
                    .map(|l| l.split("/*").next().unwrap_or(""))
                    .collect::<String>();
                let mut w = decl.split_whitespace();
                let (Some(ty), Some(field)) = (w.next(), w.next()) else {
                    continue;
                };
                let size = match ty {
                    "__u8" => 1,
                    "__u16" => 2,
                    "__u32" => 4,
                    "__u64" => 8,
                    other => panic!("struct {name}: type {other} is not an integer"),
                };
                off = off.div_ceil(size) * size;
                let field: &'static str = Box::leak(field.to_string().into_boxed_str());
                fields.push((field, off));
                off += size;
                align = align.max(size);
            }
            CLayout {
                fields,
                size: off.div_ceil(align) * align,
            }
        }
    }

    #[test]
    fn queue_samples_cover_every_queue_and_sum_over_cpus() {
        let ifaces = [EbpfIface {
            name: "veth-b".into(),
            key: IfaceKey::default(),
            rx_queues: 2,
            tx_queues: 1,
            rx_mapping_is_queue: false,
        }];
        let cell = |queue, cpu, packets| QueueCpu {
            iface: "veth-b".into(),
            dir: Dir::Rx,
            queue,
            cpu: CpuId(cpu),
            packets,
            bytes: packets * 100,
        };
        let mut c = EbpfCounters {
            softirq: Vec::new(),
            queue_cpus: vec![cell(Some(1), 0, 3), cell(Some(1), 1, 4), cell(None, 0, 9)],
            napi: Vec::new(),
            observed: None,
        };
        let q = c.queue_samples(&ifaces, 2.0);
        assert_eq!(q.len(), 3);
        assert!(q.iter().all(|s| s.source == QueueSource::Ebpf));
        let rx1 = q.iter().find(|s| s.dir == Dir::Rx && s.queue == 1).unwrap();
        assert_eq!((rx1.packets, rx1.bytes, rx1.pps), (Some(7), Some(700), 3.5));
        let rx0 = q.iter().find(|s| s.dir == Dir::Rx && s.queue == 0).unwrap();
        assert_eq!(rx0.packets, Some(0));
        // Sampled: the same (already scaled) counts, said to be estimates.
        c.observed = Some(0.25);
        let sampled = c.queue_samples(&ifaces, 2.0);
        assert!(sampled.iter().all(|s| s.source == QueueSource::EbpfSampled));
        assert_eq!(
            sampled.iter().map(|s| s.packets).collect::<Vec<_>>(),
            q.iter().map(|s| s.packets).collect::<Vec<_>>()
        );
        // A span no window covered has no rows at all, not rows of zero.
        c.observed = Some(0.0);
        c.queue_cpus.clear();
        assert!(c.queue_samples(&ifaces, 2.0).is_empty());
    }

    #[test]
    fn modes_attach_what_they_say() {
        assert_eq!(EbpfMode::Off.programs().len(), 0);
        assert_eq!(EbpfMode::ByPeer.programs().len(), 0);
        let default: Vec<&str> = EbpfMode::Default.programs().iter().map(|p| p.1).collect();
        assert_eq!(default, ["netif_receive_skb", "net_dev_start_xmit"]);
        assert!(EbpfMode::Default.sampled() && !EbpfMode::Deep.sampled());
        let deep: Vec<&str> = EbpfMode::Deep.programs().iter().map(|p| p.1).collect();
        assert!(deep.contains(&"napi_poll") && deep.contains(&"softirq_entry"));
        assert_eq!(deep.len(), PROGRAMS.len());
        let off = EbpfStatus::off(EbpfMode::Default, "eBPF off: why");
        assert_eq!(off.line(), "eBPF off: why");
        let on = EbpfStatus {
            mode: EbpfMode::Default,
            probes: default.iter().map(|p| p.to_string()).collect(),
            ifaces: vec!["veth-a".into()],
            off: None,
            sampled_pct: Some(25),
        };
        assert_eq!(
            on.line(),
            "eBPF default: netif_receive_skb, net_dev_start_xmit (sampled: 25 % of each interval) on veth-a"
        );
    }

    #[test]
    fn a_shared_set_gives_the_peer_its_interfaces_and_the_kernel_wide_parts() {
        let cell = |iface: &str| QueueCpu {
            iface: iface.into(),
            dir: Dir::Rx,
            queue: Some(0),
            cpu: CpuId(1),
            packets: 5,
            bytes: 500,
        };
        let row = |iface: &str, source| QueueSample {
            iface: iface.into(),
            dir: Dir::Rx,
            queue: 0,
            packets: Some(5),
            bytes: Some(500),
            drops: None,
            pps: 5.0,
            bps: BitsPerSec(4000.0),
            source,
            other: BTreeMap::new(),
        };
        let blank: Sample = serde_json::from_value(serde_json::json!({
            "host": "local", "index": 0, "start_s": 0.0, "end_s": 1.0, "omitted": false,
            "engine": {"tx_bytes": 0, "rx_bytes": 0, "tx_bps": 0.0, "rx_bps": 0.0,
                       "messages": 0, "msgs_per_s": 0.0},
            "cpus": [], "softirqs": [], "softnet": [], "ifaces": [], "nstat": {},
        }))
        .expect("a minimal Sample");
        let mut local = blank.clone();
        local.ebpf = Some("on".into());
        local.ebpf_observed = Some(0.25);
        local.probes = vec!["netif_receive_skb".into()];
        local.queue_cpus = vec![cell("veth-a"), cell("veth-b")];
        local.queues = vec![
            row("veth-a", QueueSource::EbpfSampled),
            row("veth-b", QueueSource::EbpfSampled),
            row("veth-a", QueueSource::Ethtool),
        ];
        local.softirq_time = vec![SoftirqTime {
            cpu: CpuId(0),
            net_rx_ns: 7,
            net_tx_ns: 0,
            net_rx_count: 1,
            net_tx_count: 0,
            all_ns: 7,
        }];
        let mut peer = blank;
        peer.ebpf = Some("eBPF off here".into());
        peer.queues = vec![row("veth-b", QueueSource::Ethtool)];
        let mut lonely = local.clone();
        share_with_peer(&mut local, &mut peer, &["veth-b".to_string()]);
        assert!(local.queue_cpus.iter().all(|c| c.iface == "veth-a"));
        assert!(peer.queue_cpus.iter().all(|c| c.iface == "veth-b") && peer.queue_cpus.len() == 1);
        assert_eq!(local.queues.len(), 2, "veth-a's eBPF and ethtool rows stay");
        assert_eq!(
            peer.queues.len(),
            2,
            "veth-b's ethtool row and the moved eBPF row"
        );
        assert_eq!(peer.softirq_time, local.softirq_time);
        assert_eq!(peer.ebpf_observed, Some(0.25), "the share is kernel-wide");
        assert_eq!((peer.ebpf.as_deref(), peer.probes.len()), (Some("on"), 1));
        drop_peer_share(&mut lonely, &["veth-b".to_string()]);
        assert!(lonely.queue_cpus.iter().all(|c| c.iface == "veth-a"));
        assert_eq!(lonely.queues.len(), 2);
    }
}

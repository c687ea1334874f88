//! The aya side of the eBPF probes: write the configuration (the interface
//! filter) into the object's read-only data, load and attach the mode's
//! programs, read the per-CPU maps as deltas — scaled up to the whole
//! interval when the default set's sampling window ([`super::gate`]) covered
//! only part of it. Owns the kernel objects; dropping [`Ebpf`] detaches every
//! program and closes every map (nothing is pinned).

use super::gate::{self, Gate};
use super::{
    queue_index, EbpfIface, EbpfMode, EbpfStatus, EbpfUnavailable, NapiCount, NapiKey, NapiSample,
    QueueCount, QueueCpu, SoftirqSlot, SoftirqTime, MAX_IFACES, NET_RX, NET_TX, NR_SOFTIRQS,
    OBJECT, QSTRIDE,
};
use crate::probe::ethtool_names::Dir;
use crate::units::CpuId;
use aya::maps::{MapData, PerCpuArray, PerCpuHashMap};
use aya::programs::tp_btf::BtfTracePointLinkId;
use aya::programs::BtfTracePoint;
use aya::{Btf, EbpfLoader};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Capability bits (linux/capability.h).
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Loaded and attached probes.
pub struct Ebpf {
    programs: Programs,
    maps: Maps,
    /// Kernel ids of the loaded programs, by name.
    ids: Vec<(&'static str, u32)>,
    mode: EbpfMode,
    ifaces: Vec<EbpfIface>,
    prev_queues: HashMap<u32, Vec<QueueCount>>,
    prev_softirq: Vec<Vec<SoftirqSlot>>,
    prev_napi: HashMap<NapiKey, Vec<NapiCount>>,
    /// When the maps were last read (load counts as a read).
    last_read: Instant,
    /// The sampler's interval, when it said (sizes the sampling windows).
    interval: Option<Duration>,
}

/// Who holds the programs (and so their links).
enum Programs {
    /// Attached for as long as the [`Ebpf`] lives (deep: exact counts).
    /// Held, never read: dropping it detaches and unloads the programs.
    Always(#[allow(dead_code)] aya::Ebpf),
    /// Attached during a window of each interval by the gate thread (default).
    Gated(Gate),
}

/// The maps, taken out of the object: the reader owns them, the programs
/// (wherever they are) keep writing to them.
struct Maps {
    queues: PerCpuArray<MapData, QueueCount>,
    softirq: PerCpuArray<MapData, SoftirqSlot>,
    napi: PerCpuHashMap<MapData, NapiKey, NapiCount>,
}

impl std::fmt::Debug for Ebpf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ebpf")
            .field("mode", &self.mode)
            .field("ifaces", &self.ifaces)
            .finish()
    }
}

/// What the probes counted since the previous [`Ebpf::read`] (non-zero cells only).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EbpfCounters {
    /// Softirq handler time per CPU (deep set).
    pub softirq: Vec<SoftirqTime>,
    /// The queue→CPU matrix; estimates when `observed` is set.
    pub queue_cpus: Vec<QueueCpu>,
    /// NAPI polls per instance and CPU (deep set).
    pub napi: Vec<NapiSample>,
    /// The share of the span (0..=1) the packet programs were attached when
    /// they are sampled (default set): `queue_cpus` holds what they counted
    /// scaled by its inverse, and nothing when it is 0. None: they counted
    /// every skb.
    pub observed: Option<f64>,
}

/// The maps could not be read, or the sampled probes could not be attached.
#[derive(Debug, thiserror::Error)]
pub enum EbpfReadError {
    /// A map read failed.
    #[error("ebpf: reading map {map}: {reason}")]
    Map {
        /// Map name.
        map: &'static str,
        /// aya's answer.
        reason: String,
    },
    /// A sampling window could not open.
    #[error("ebpf: attaching the sampled probes failed, this interval has no eBPF counts: {0}")]
    Window(String),
}

/// True when the effective capabilities allow loading tracing programs.
pub fn privileged() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let eff =
        crate::probe::procfs::parse::<procfs_core::process::Status>("/proc/self/status", &status)
            .map_or(0, |s| s.capeff);
    let has = |bit: u32| eff & (1u64 << bit) != 0;
    (has(CAP_BPF) && has(CAP_PERFMON)) || has(CAP_SYS_ADMIN)
}

fn load_err(what: &str, e: impl std::fmt::Display) -> EbpfUnavailable {
    EbpfUnavailable::Load {
        what: what.to_string(),
        reason: e.to_string(),
    }
}

/// The previous reading of `cpu` (zero before the first one).
fn prev_of<T: Copy + Default>(prev: Option<&[T]>, cpu: usize) -> T {
    prev.and_then(|p| p.get(cpu)).copied().unwrap_or_default()
}

fn read_err(map: &'static str, e: impl std::fmt::Display) -> EbpfReadError {
    EbpfReadError::Map {
        map,
        reason: e.to_string(),
    }
}

/// Take `name` out of `bpf` as the typed map `M`.
fn take_map<M>(bpf: &mut aya::Ebpf, name: &'static str) -> Result<M, EbpfUnavailable>
where
    M: TryFrom<aya::maps::Map>,
    M::Error: std::fmt::Display,
{
    bpf.take_map(name)
        .ok_or_else(|| load_err(name, "not in the object"))?
        .try_into()
        .map_err(|e| load_err(name, e))
}

/// The embedded object with the interface filter written into its
/// read-only data, maps created, no program loaded yet.
fn object(ifaces: &[EbpfIface], btf: &Btf) -> Result<aya::Ebpf, EbpfUnavailable> {
    let mut ifindex = [0u32; MAX_IFACES];
    let mut netns = [0u32; MAX_IFACES];
    for (slot, i) in ifaces.iter().enumerate() {
        ifindex[slot] = i.key.ifindex;
        netns[slot] = i.key.netns;
    }
    let n = ifaces.len() as u32;
    EbpfLoader::new()
        .btf(Some(btf))
        .override_global("ws_nifaces", &n, true)
        .override_global("ws_ifindex", &ifindex, true)
        .override_global("ws_netns", &netns, true)
        .load(OBJECT)
        .map_err(|e| load_err("ebpf/wirescope.bpf.o", e))
}

/// Attach `mode`'s (loaded) programs; their links, by program name.
fn attach(
    bpf: &mut aya::Ebpf,
    mode: EbpfMode,
) -> Result<Vec<(&'static str, BtfTracePointLinkId)>, EbpfUnavailable> {
    let mut links = Vec::new();
    for (name, tracepoint_name) in mode.programs() {
        let id = tracepoint(bpf, name)?
            .attach()
            .map_err(|e| EbpfUnavailable::Attach {
                program: name.to_string(),
                tracepoint: tracepoint_name.to_string(),
                reason: e.to_string(),
            })?;
        links.push((*name, id));
    }
    Ok(links)
}

/// The program `name` in `bpf`, typed.
fn tracepoint<'a>(
    bpf: &'a mut aya::Ebpf,
    name: &str,
) -> Result<&'a mut BtfTracePoint, EbpfUnavailable> {
    bpf.program_mut(name)
        .ok_or_else(|| load_err(name, "not in the object"))?
        .try_into()
        .map_err(|e| load_err(name, e))
}

impl Ebpf {
    /// Load the embedded object with `mode`'s programs attached, counting `ifaces`.
    pub fn load(mode: EbpfMode, ifaces: &[EbpfIface]) -> Result<Self, EbpfUnavailable> {
        if mode.programs().is_empty() {
            return Err(EbpfUnavailable::Disabled(format!(
                "--ebpf {} attaches no probe on this host",
                mode.name()
            )));
        }
        if ifaces.len() > MAX_IFACES {
            return Err(EbpfUnavailable::TooManyIfaces(ifaces.len()));
        }
        if !privileged() {
            return Err(EbpfUnavailable::NotPrivileged);
        }
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            return Err(EbpfUnavailable::NoBtf);
        }
        let btf = Btf::from_sys_fs().map_err(|e| load_err("kernel BTF", e))?;
        let mut bpf = object(ifaces, &btf)?;
        let mut ids = Vec::new();
        for (name, tracepoint_name) in mode.programs() {
            let p = tracepoint(&mut bpf, name)?;
            p.load(tracepoint_name, &btf)
                .map_err(|e| load_err(name, e))?;
            ids.push((*name, p.info().map_err(|e| load_err(name, e))?.id()));
        }
        let maps = Maps {
            queues: take_map(&mut bpf, "ws_queues")?,
            softirq: take_map(&mut bpf, "ws_softirq")?,
            napi: take_map(&mut bpf, "ws_napi")?,
        };
        let start = Instant::now();
        let links = attach(&mut bpf, mode)?;
        let programs = if mode.sampled() {
            let names = mode.programs().iter().map(|p| p.0).collect();
            Programs::Gated(
                Gate::start(bpf, names, links, gate::midpoint(start))
                    .map_err(|e| load_err("the ws-ebpf-gate thread", e))?,
            )
        } else {
            Programs::Always(bpf)
        };
        Ok(Ebpf {
            programs,
            maps,
            ids,
            mode,
            ifaces: ifaces.to_vec(),
            prev_queues: HashMap::new(),
            prev_softirq: Vec::new(),
            prev_napi: HashMap::new(),
            last_read: start,
            interval: None,
        })
    }

    /// What is attached, for the log header.
    pub fn status(&self) -> EbpfStatus {
        EbpfStatus {
            mode: self.mode,
            probes: self.probes(),
            ifaces: self.ifaces.iter().map(|i| i.name.clone()).collect(),
            off: None,
            sampled_pct: self
                .mode
                .sampled()
                .then(|| (gate::SHARE * 100.0).round() as u32),
        }
    }

    /// The interfaces counted, in filter slot order.
    pub fn ifaces(&self) -> &[EbpfIface] {
        &self.ifaces
    }

    /// The attached probes, by tracepoint.
    pub fn probes(&self) -> Vec<String> {
        self.mode
            .programs()
            .iter()
            .map(|(_, tp)| tp.to_string())
            .collect()
    }

    /// Per program: name, kernel id, run time and run count. The kernel
    /// accumulates these only while run-time statistics are enabled
    /// (`aya::sys::enable_stats`), otherwise they stay zero.
    pub fn program_stats(&self) -> Vec<(String, u32, std::time::Duration, u64)> {
        let mut out: Vec<_> = aya::programs::loaded_programs()
            .flatten()
            .filter_map(|p| {
                let (name, id) = self.ids.iter().find(|(_, id)| *id == p.id())?;
                Some((name.to_string(), *id, p.run_time(), p.run_count()))
            })
            .collect();
        out.sort_by_key(|p| p.1);
        out
    }

    /// The sampling interval from now on: the default set's window after
    /// each read is a share of it (until set, of the time between reads).
    pub fn set_interval(&mut self, interval: Duration) {
        self.interval = Some(interval);
    }

    /// Counts since the previous read (the first read: since load). In the
    /// default set the packet programs' counts are scaled to the span, and
    /// the next sampling window opens.
    pub fn read(&mut self) -> Result<EbpfCounters, EbpfReadError> {
        let deep = self.mode == EbpfMode::Deep;
        let mut queue_cpus = self.read_queues()?;
        let now = Instant::now();
        let span = now.saturating_duration_since(self.last_read);
        self.last_read = now;
        let observed = match &self.programs {
            Programs::Always(_) => None,
            Programs::Gated(g) => {
                let seen = g.observed(now);
                g.open(gate::window_after(self.interval.unwrap_or(span)));
                if let Some(e) = seen.error {
                    return Err(EbpfReadError::Window(e));
                }
                let share = (seen.attached.as_secs_f64() / span.as_secs_f64().max(1e-9)).min(1.0);
                scale(&mut queue_cpus, share);
                Some(share)
            }
        };
        Ok(EbpfCounters {
            softirq: if deep {
                self.read_softirq()?
            } else {
                Vec::new()
            },
            queue_cpus,
            napi: if deep { self.read_napi()? } else { Vec::new() },
            observed,
        })
    }

    fn read_napi(&mut self) -> Result<Vec<NapiSample>, EbpfReadError> {
        let mut out = Vec::new();
        for entry in self.maps.napi.iter() {
            let (k, v) = entry.map_err(|e| read_err("ws_napi", e))?;
            let cur = v.to_vec();
            let prev = self.prev_napi.insert(k, cur.clone());
            let Some(iface) = self.ifaces.get(k.slot as usize) else {
                continue;
            };
            for (cpu, c) in cur.iter().enumerate() {
                let p = prev_of(prev.as_deref(), cpu);
                let polls = c.polls.wrapping_sub(p.polls);
                if polls == 0 {
                    continue;
                }
                out.push(NapiSample {
                    iface: iface.name.clone(),
                    napi_id: k.napi_id,
                    cpu: CpuId(cpu as u32),
                    polls,
                    work: c.work.wrapping_sub(p.work),
                    exhausted: c.exhausted.wrapping_sub(p.exhausted),
                });
            }
        }
        out.sort_by_key(|n| (n.iface.clone(), n.napi_id, n.cpu));
        Ok(out)
    }

    fn read_softirq(&mut self) -> Result<Vec<SoftirqTime>, EbpfReadError> {
        let mut cur = Vec::with_capacity(NR_SOFTIRQS as usize);
        for vec in 0..NR_SOFTIRQS {
            let v = self
                .maps
                .softirq
                .get(&vec, 0)
                .map_err(|e| read_err("ws_softirq", e))?;
            cur.push(v.to_vec());
        }
        let prev = std::mem::replace(&mut self.prev_softirq, cur);
        let cur = &self.prev_softirq;
        let ncpu = cur.first().map_or(0, Vec::len);
        let delta = |vec: usize, cpu: usize| {
            let c = cur[vec][cpu];
            let p = prev_of(prev.get(vec).map(Vec::as_slice), cpu);
            (c.ns.wrapping_sub(p.ns), c.count.wrapping_sub(p.count))
        };
        let mut out = Vec::new();
        for cpu in 0..ncpu {
            let (net_rx_ns, net_rx_count) = delta(NET_RX, cpu);
            let (net_tx_ns, net_tx_count) = delta(NET_TX, cpu);
            let (all_ns, all_count) = (0..cur.len())
                .map(|v| delta(v, cpu))
                .fold((0u64, 0u64), |a, d| (a.0 + d.0, a.1 + d.1));
            if all_ns > 0 || all_count > 0 {
                out.push(SoftirqTime {
                    cpu: CpuId(cpu as u32),
                    net_rx_ns,
                    net_tx_ns,
                    net_rx_count,
                    net_tx_count,
                    all_ns,
                });
            }
        }
        Ok(out)
    }

    fn read_queues(&mut self) -> Result<Vec<QueueCpu>, EbpfReadError> {
        let map = &self.maps.queues;
        let mut out = Vec::new();
        for (slot, i) in self.ifaces.iter().enumerate() {
            for (dir, n) in [(Dir::Rx, i.rx_queues), (Dir::Tx, i.tx_queues)] {
                // Slot 0: no recorded/in-range queue; 1 + q: queue q; or
                // slot q: queue q where queue_mapping holds the rx queue itself.
                let raw = dir == Dir::Rx && i.rx_mapping_is_queue;
                for qslot in 0..=n.min(QSTRIDE - 1) {
                    let idx = queue_index(slot, dir, qslot);
                    let cur = map
                        .get(&idx, 0)
                        .map_err(|e| read_err("ws_queues", e))?
                        .to_vec();
                    let prev = self.prev_queues.insert(idx, cur.clone());
                    for (cpu, c) in cur.iter().enumerate() {
                        let p = prev_of(prev.as_deref(), cpu);
                        let packets = c.packets.wrapping_sub(p.packets);
                        if packets == 0 {
                            continue;
                        }
                        out.push(QueueCpu {
                            iface: i.name.clone(),
                            dir,
                            queue: if raw {
                                Some(qslot).filter(|q| *q < n)
                            } else {
                                qslot.checked_sub(1)
                            },
                            cpu: CpuId(cpu as u32),
                            packets,
                            bytes: c.bytes.wrapping_sub(p.bytes),
                        });
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Scale what the packet programs counted during `share` of a span to the
/// whole span (nothing is left when they covered none of it).
fn scale(cells: &mut Vec<QueueCpu>, share: f64) {
    if share <= 0.0 {
        cells.clear();
        return;
    }
    let k = 1.0 / share;
    for c in cells.iter_mut() {
        c.packets = (c.packets as f64 * k).round() as u64;
        c.bytes = (c.bytes as f64 * k).round() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_counts_are_scaled_to_the_span_and_dropped_when_unseen() {
        let cell = |packets| QueueCpu {
            iface: "veth-b".into(),
            dir: Dir::Rx,
            queue: Some(0),
            cpu: CpuId(1),
            packets,
            bytes: packets * 1500,
        };
        let mut cells = vec![cell(250), cell(1)];
        scale(&mut cells, 0.25);
        assert_eq!(cells, vec![cell(1000), cell(4)]);
        scale(&mut cells, 1.0);
        assert_eq!(cells, vec![cell(1000), cell(4)]);
        scale(&mut cells, 0.0);
        assert!(cells.is_empty());
    }
}

//! The aya side of the eBPF probes: write the configuration (the interface
//! filter) into the object's read-only data, load and attach
//! the mode's programs, read the per-CPU maps as deltas. Owns the kernel
//! objects; dropping [`Ebpf`] detaches every program and closes every map
//! (nothing is pinned).

use super::{
    queue_index, EbpfIface, EbpfMode, EbpfStatus, EbpfUnavailable, NapiCount, NapiKey, NapiSample,
    QueueCount, QueueCpu, SoftirqSlot, SoftirqTime, MAX_IFACES, NET_RX, NET_TX, NR_SOFTIRQS,
    OBJECT, QSTRIDE,
};
use crate::probe::ethtool_names::Dir;
use crate::units::CpuId;
use aya::maps::{MapData, PerCpuArray, PerCpuHashMap};
use aya::programs::BtfTracePoint;
use aya::{Btf, EbpfLoader};
use std::collections::HashMap;

/// Capability bits (linux/capability.h).
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Loaded and attached probes.
pub struct Ebpf {
    bpf: aya::Ebpf,
    mode: EbpfMode,
    ifaces: Vec<EbpfIface>,
    prev_queues: HashMap<u32, Vec<QueueCount>>,
    prev_softirq: Vec<Vec<SoftirqSlot>>,
    prev_napi: HashMap<NapiKey, Vec<NapiCount>>,
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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EbpfCounters {
    /// Softirq handler time per CPU (deep set).
    pub softirq: Vec<SoftirqTime>,
    /// The queue→CPU matrix.
    pub queue_cpus: Vec<QueueCpu>,
    /// NAPI polls per instance and CPU (deep set).
    pub napi: Vec<NapiSample>,
}

/// A map could not be read.
#[derive(Debug, thiserror::Error)]
#[error("ebpf: reading map {map}: {reason}")]
pub struct EbpfReadError {
    /// Map name.
    pub map: &'static str,
    /// aya's answer.
    pub reason: String,
}

/// True when the effective capabilities allow loading tracing programs.
pub fn privileged() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let has = |bit: u32| eff & (1u64 << bit) != 0;
    (has(CAP_BPF) && has(CAP_PERFMON)) || has(CAP_SYS_ADMIN)
}

fn load_err(what: &str, e: impl std::fmt::Display) -> EbpfUnavailable {
    EbpfUnavailable::Load {
        what: what.to_string(),
        reason: e.to_string(),
    }
}

/// The map `name` of `bpf` as the typed view `M`.
fn map<'a, M>(bpf: &'a aya::Ebpf, name: &'static str) -> Result<M, EbpfReadError>
where
    M: TryFrom<&'a aya::maps::Map>,
    M::Error: std::fmt::Display,
{
    bpf.map(name)
        .ok_or_else(|| read_err(name, "missing"))?
        .try_into()
        .map_err(|e| read_err(name, e))
}

/// The previous reading of `cpu` (zero before the first one).
fn prev_of<T: Copy + Default>(prev: Option<&[T]>, cpu: usize) -> T {
    prev.and_then(|p| p.get(cpu)).copied().unwrap_or_default()
}

fn read_err(map: &'static str, e: impl std::fmt::Display) -> EbpfReadError {
    EbpfReadError {
        map,
        reason: e.to_string(),
    }
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
        let mut ifindex = [0u32; MAX_IFACES];
        let mut netns = [0u32; MAX_IFACES];
        for (slot, i) in ifaces.iter().enumerate() {
            ifindex[slot] = i.key.ifindex;
            netns[slot] = i.key.netns;
        }
        let n = ifaces.len() as u32;
        let mut bpf = EbpfLoader::new()
            .btf(Some(&btf))
            .override_global("ws_nifaces", &n, true)
            .override_global("ws_ifindex", &ifindex, true)
            .override_global("ws_netns", &netns, true)
            .load(OBJECT)
            .map_err(|e| load_err("ebpf/wirescope.bpf.o", e))?;
        for (name, tracepoint) in mode.programs() {
            let p: &mut BtfTracePoint = bpf
                .program_mut(name)
                .ok_or_else(|| load_err(name, "not in the object"))?
                .try_into()
                .map_err(|e| load_err(name, e))?;
            p.load(tracepoint, &btf).map_err(|e| load_err(name, e))?;
            p.attach().map_err(|e| EbpfUnavailable::Attach {
                program: name.to_string(),
                tracepoint: tracepoint.to_string(),
                reason: e.to_string(),
            })?;
        }
        Ok(Ebpf {
            bpf,
            mode,
            ifaces: ifaces.to_vec(),
            prev_queues: HashMap::new(),
            prev_softirq: Vec::new(),
            prev_napi: HashMap::new(),
        })
    }

    /// What is attached, for the log header.
    pub fn status(&self) -> EbpfStatus {
        EbpfStatus {
            mode: self.mode,
            probes: self.probes(),
            ifaces: self.ifaces.iter().map(|i| i.name.clone()).collect(),
            off: None,
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
        self.bpf
            .programs()
            .filter_map(|(n, p)| {
                let i = p.info().ok()?;
                Some((n.to_string(), i.id(), i.run_time(), i.run_count()))
            })
            .collect()
    }

    /// Counts since the previous read (the first read: since load).
    pub fn read(&mut self) -> Result<EbpfCounters, EbpfReadError> {
        let deep = self.mode == EbpfMode::Deep;
        Ok(EbpfCounters {
            softirq: if deep {
                self.read_softirq()?
            } else {
                Vec::new()
            },
            queue_cpus: self.read_queues()?,
            napi: if deep { self.read_napi()? } else { Vec::new() },
        })
    }

    fn read_napi(&mut self) -> Result<Vec<NapiSample>, EbpfReadError> {
        let map: PerCpuHashMap<&MapData, NapiKey, NapiCount> = map(&self.bpf, "ws_napi")?;
        let mut out = Vec::new();
        for entry in map.iter() {
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
        let map: PerCpuArray<&MapData, SoftirqSlot> = map(&self.bpf, "ws_softirq")?;
        let mut cur = Vec::with_capacity(NR_SOFTIRQS as usize);
        for vec in 0..NR_SOFTIRQS {
            let v = map.get(&vec, 0).map_err(|e| read_err("ws_softirq", e))?;
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
        let map: PerCpuArray<&MapData, QueueCount> = map(&self.bpf, "ws_queues")?;
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

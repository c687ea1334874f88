//! The sink's XDP programs (`ebpf/sink.bpf.c`), loaded with aya: attach to
//! the sink's interface, read the per-queue × per-CPU counters, put AF_XDP
//! sockets into the XSKMAP, and tell the program the generator's address
//! once its setup arrives ([`SinkXdp::set_generator`]): until then no frame
//! matches, and afterwards only the test generator's stamped frames do.
//!
//! A separate object from the probes' (`ebpf/wirescope.bpf.o`): it is loaded
//! only while a sink test runs, on one interface, with its own
//! configuration, and changing one must not make the other's committed
//! object stale.
//!
//! Detaching: the program is attached through a BPF link (aya uses
//! `bpf_link_create` on kernels ≥ 5.9, netlink before), owned by
//! [`SinkXdp`]. Dropping it — on normal end, error, panic unwinding —
//! detaches and unloads; and because nothing is pinned, the kernel removes
//! a link-attached program by itself when the process dies without
//! unwinding (SIGKILL). `tests/it/sink_pair.rs` checks both.

use super::counters::XdpQueueSnap;
use super::SinkError;
use crate::units::CpuId;
use aya::maps::{Array, MapData, PerCpuArray, XskMap};
use aya::programs::{Xdp, XdpMode};
use aya::EbpfLoader;
use std::net::Ipv4Addr;
use std::os::fd::RawFd;
use std::path::Path;

/// The compiled programs: built by `build.rs` with clang when installed,
/// else the object committed next to the sources.
pub static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/sink.bpf.o"));
/// The recorded hash of the sources [`OBJECT`] was built from.
pub const OBJECT_SOURCE_HASH: &str = include_str!("../../../ebpf/sink.bpf.o.sha256");
/// Source files, relative to `ebpf/`, in hashing order.
pub const SOURCES: [&str; 2] = ["sink.bpf.c", "sink.h"];
/// The C file clang compiles.
pub const MAIN_SOURCE: &str = "sink.bpf.c";
/// The object file name, relative to `ebpf/`.
pub const OBJECT_NAME: &str = "sink.bpf.o";
/// Queues counted one by one (`WS_SINK_MAX_QUEUES`); higher ones share one slot.
pub const MAX_QUEUES: u32 = 1024;
/// Flow ids counted per flow (`WS_SINK_MAX_FLOWS`).
pub const MAX_FLOWS: u32 = 16_384;

/// Per CPU, per queue (`struct ws_sink_count`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkCount {
    /// Test frames.
    pub packets: u64,
    /// Their bytes without FCS.
    pub bytes: u64,
    /// af-xdp: no socket on the queue.
    pub no_socket: u64,
    /// Other frames passed on.
    pub passed: u64,
}

// SAFETY: #[repr(C)] u64 fields only; any bit pattern is valid.
unsafe impl aya::Pod for SinkCount {}

/// Hash of the object's sources in `dir` (normally `ebpf/`) and the clang
/// flags, hex: the same scheme as the probes' object.
pub fn source_hash(dir: &Path) -> std::io::Result<String> {
    crate::traffic::bpf::hash_sources(dir, &SOURCES)
}

/// Which program to attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// Count and drop (`xdp` mode).
    Drop,
    /// Count and redirect into the XSKMAP (`af-xdp` mode).
    Redirect,
}

impl Program {
    fn elf_name(self) -> &'static str {
        match self {
            Program::Drop => "ws_sink_drop",
            Program::Redirect => "ws_sink_xsk",
        }
    }
}

/// What the filter matches: IPv4/UDP from the generator's address (set
/// later, [`SinkXdp::set_generator`]) and source ports to these ports (and
/// this address), with the stamp's magic at the start of the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filter {
    /// Lowest destination port.
    pub port_lo: u16,
    /// Highest destination port.
    pub port_hi: u16,
    /// Lowest source port (the generator's flow 0).
    pub src_port_lo: u16,
    /// Highest source port (its last flow).
    pub src_port_hi: u16,
    /// Destination address; None = any.
    pub dst_ip: Option<Ipv4Addr>,
    /// Count per flow as well (`xdp` mode).
    pub per_flow: bool,
}

/// The loaded, attached program and its maps.
pub struct SinkXdp {
    counts: PerCpuArray<MapData, SinkCount>,
    flows: PerCpuArray<MapData, u64>,
    gen: Array<MapData, u32>,
    xsks: Option<XskMap<MapData>>,
    program: Program,
    /// Why driver mode was refused, when it was (generic mode runs).
    native_refused: Option<String>,
    // Last: dropping the Ebpf detaches the link and unloads the program.
    _bpf: aya::Ebpf,
}

impl std::fmt::Debug for SinkXdp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkXdp")
            .field("program", &self.program)
            .field("native", &self.native())
            .finish()
    }
}

fn refused(iface: &str, e: impl std::fmt::Display) -> SinkError {
    SinkError::XdpRefused {
        iface: iface.into(),
        reason: e.to_string(),
    }
}

/// Map `m` of the loaded object, typed.
fn take_map<T>(bpf: &mut aya::Ebpf, iface: &str, m: &str) -> Result<T, SinkError>
where
    T: TryFrom<aya::maps::Map, Error: std::fmt::Display>,
{
    let map = bpf
        .take_map(m)
        .ok_or_else(|| refused(iface, format!("map {m} missing from the object")))?;
    T::try_from(map).map_err(|e| refused(iface, e))
}

impl SinkXdp {
    /// Load the object and attach `program` to `iface` (index in the calling
    /// thread's namespace): native (driver) mode, else generic (skb) mode.
    pub fn attach(
        iface: &str,
        ifindex: u32,
        program: Program,
        filter: Filter,
    ) -> Result<SinkXdp, SinkError> {
        if !super::sys::can_xdp() {
            return Err(refused(
                iface,
                "needs CAP_BPF and CAP_NET_ADMIN (run as root)",
            ));
        }
        let ip = filter
            .dst_ip
            .map_or(0u32, |a| u32::from_ne_bytes(a.octets()));
        let per_flow = u32::from(filter.per_flow);
        let mut bpf = EbpfLoader::new()
            .override_global("ws_port_lo", &filter.port_lo, true)
            .override_global("ws_port_hi", &filter.port_hi, true)
            .override_global("ws_dst_ip", &ip, true)
            .override_global("ws_sport_lo", &filter.src_port_lo, true)
            .override_global("ws_sport_hi", &filter.src_port_hi, true)
            .override_global("ws_per_flow", &per_flow, true)
            .load(OBJECT)
            .map_err(|e| refused(iface, format!("loading ebpf/sink.bpf.o: {e}")))?;
        let name = program.elf_name();
        let p: &mut Xdp = bpf
            .program_mut(name)
            .ok_or_else(|| refused(iface, format!("{name} is not in the object")))?
            .try_into()
            .map_err(|e| refused(iface, e))?;
        p.load()
            .map_err(|e| refused(iface, format!("loading {name}: {e}")))?;
        let native_refused = match p.attach_to_if_index(ifindex, XdpMode::Driver) {
            Ok(_) => None,
            Err(native_err) => {
                p.attach_to_if_index(ifindex, XdpMode::Skb).map_err(|e| {
                    refused(
                        iface,
                        format!("attaching {name}: driver mode: {native_err}; generic mode: {e}"),
                    )
                })?;
                Some(native_err.to_string())
            }
        };
        let counts = take_map(&mut bpf, iface, "ws_sink_counts")?;
        let flows = take_map(&mut bpf, iface, "ws_sink_flows")?;
        let gen = take_map(&mut bpf, iface, "ws_sink_gen")?;
        let xsks = match program {
            Program::Redirect => Some(take_map(&mut bpf, iface, "ws_sink_xsks")?),
            Program::Drop => None,
        };
        Ok(SinkXdp {
            counts,
            flows,
            gen,
            xsks,
            program,
            native_refused,
            _bpf: bpf,
        })
    }

    /// True when attached in driver (native) mode, false for generic (skb) mode.
    pub fn native(&self) -> bool {
        self.native_refused.is_none()
    }

    /// Why the driver refused native mode, when the program runs in
    /// generic mode (veth: an MTU above what its XDP takes, about 3.5 KiB).
    pub fn native_refused(&self) -> Option<&str> {
        self.native_refused.as_deref()
    }

    /// The test's generator sends from `ip` (its setup said so): from now
    /// on its stamped frames are counted (and dropped or redirected);
    /// before, every frame passes. `ip` must be a unicast address.
    pub fn set_generator(&mut self, ip: Ipv4Addr) -> Result<(), SinkError> {
        if !super::engine::is_test_address(ip) {
            return Err(SinkError::Unsupported(format!(
                "the generator's address {ip} cannot send the flows"
            )));
        }
        self.gen
            .set(0, u32::from_ne_bytes(ip.octets()), 0)
            .map_err(|e| SinkError::Io {
                op: "ws_sink_gen update (the generator's address)",
                queue: 0,
                source: std::io::Error::other(e.to_string()),
            })
    }

    /// Route queue `queue`'s test frames to the AF_XDP socket `fd`.
    pub fn add_socket(&mut self, queue: u32, fd: RawFd) -> Result<(), SinkError> {
        let m = self.xsks.as_mut().ok_or_else(|| {
            SinkError::Unsupported("the count-and-drop program has no socket map".into())
        })?;
        m.set(queue, fd, 0).map_err(|e| SinkError::Io {
            op: "XSKMAP update",
            queue,
            source: std::io::Error::other(e.to_string()),
        })
    }

    /// Counters of queues `0..queues`, summed over CPUs, with the busiest CPU.
    pub fn queue_counts(&self, queues: u32) -> Vec<XdpQueueSnap> {
        (0..queues.min(MAX_QUEUES))
            .map(|q| {
                let Ok(per_cpu) = self.counts.get(&q, 0) else {
                    return XdpQueueSnap::default();
                };
                let mut s = XdpQueueSnap::default();
                let mut top: Option<(CpuId, u64)> = None;
                for (cpu, c) in per_cpu.iter().enumerate() {
                    s.packets += c.packets;
                    s.bytes += c.bytes;
                    s.no_socket += c.no_socket;
                    s.passed += c.passed;
                    if c.packets > 0 && top.is_none_or(|t| c.packets > t.1) {
                        top = Some((CpuId(cpu as u32), c.packets));
                    }
                }
                s.top_cpu = top;
                s
            })
            .collect()
    }

    /// Frames per flow `0..flows` (xdp mode, per-flow counting on).
    pub fn flow_counts(&self, flows: u32) -> Vec<u64> {
        (0..flows.min(MAX_FLOWS))
            .map(|f| self.flows.get(&f, 0).map(|v| v.iter().sum()).unwrap_or(0))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_types_match_the_c_layout() {
        assert_eq!(std::mem::size_of::<SinkCount>(), 32);
        assert_eq!(MAX_FLOWS, super::super::spec::MAX_FLOWS);
        const { assert!(MAX_QUEUES >= super::super::spec::MAX_QUEUES) };
    }

    #[test]
    fn sources_hash_includes_the_flags() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("ebpf");
        let a = source_hash(&dir).unwrap();
        assert_eq!(a.len(), 64);
        assert_eq!(a, source_hash(&dir).unwrap());
    }
}

//! The sink: counts what arrives, per receive queue, in one of four modes,
//! falling back to the next when a mode is refused (and saying why).
//!
//! * `xdp` — the count-and-drop XDP program; no user-space thread. The
//!   ceiling of what reaches the host; counts per queue, CPU and flow.
//! * `af-xdp` — the redirect program plus one AF_XDP socket per rx queue
//!   (zero-copy when the driver binds so, copy mode otherwise); threads
//!   read every frame and check its sequence.
//! * `tpacket` — one TPACKET_V3 ring per rx queue in a `PACKET_FANOUT_QM`
//!   group, so member *m* gets the frames of queue *m*.
//! * `udp` — kernel UDP sockets in a SO_REUSEPORT group (no privileges).
//!
//! Sockets cover every rx queue of the interface, because RSS may put a
//! flow on any of them; `queues` threads serve them round-robin (queue *q*
//! by thread *q mod threads*), pinned to the sink side's CPUs.
//!
//! Kernel objects are owned here and released on every path: sockets by
//! their threads (closed when a thread returns), the XDP program by
//! [`RunningSink`]/[`PreparedSink`] (detached when dropped, after the
//! threads are joined).

use super::counters::{current_tid, SinkQueueCounters, SinkQueueSnap};
use super::figures::SinkSnapshot;
use super::flow::{merge, FlowSeen, FlowTable};
use super::frame::{parse_frame, parse_payload};
use super::ring::{fanout_group_id, RingError, RxRing, PACKET_FANOUT_QM};
use super::spec::{SinkEnd, SinkMode, SinkSpec, RING_FRAMES};
use super::sys::{self, IfaceInfo};
use super::xdp::{Filter, Program, SinkXdp};
use super::xsk::{XdpDesc, Xsk, XskConfig, XskError, XDP_PACKET_HEADROOM};
use super::SinkError;
use crate::traffic::paths::{PathOpener, PathSource};
use crate::traffic::workers::Workers;
use crate::traffic::EngineSpecOps;
use crate::traffic::{EngineControl, EngineError, Side};
use crate::units::CpuId;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One receive socket.
enum Rx {
    Xsk(Box<Xsk>),
    Packet(Box<RxRing>),
    Udp(OwnedFd),
}

impl Rx {
    fn fd(&self) -> RawFd {
        match self {
            Rx::Xsk(x) => x.fd(),
            Rx::Packet(r) => r.fd(),
            Rx::Udp(f) => f.as_raw_fd(),
        }
    }
}

/// A sink with its sockets bound and XDP attached, before traffic starts.
pub struct PreparedSink {
    spec: SinkSpec,
    side: Side,
    info: IfaceInfo,
    mode: SinkMode,
    refused: Vec<String>,
    zero_copy: Option<bool>,
    rxs: Vec<Rx>,
    labels: Vec<u32>,
    probe: Box<dyn PathSource>,
    // Last: detached after the sockets are closed.
    xdp: Option<SinkXdp>,
}

impl std::fmt::Debug for PreparedSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedSink")
            .field("mode", &self.mode)
            .field("iface", &self.info.name)
            .field("sockets", &self.rxs.len())
            .finish()
    }
}

/// What a mode opened.
#[derive(Default)]
struct Opened {
    rxs: Vec<Rx>,
    labels: Vec<u32>,
    xdp: Option<SinkXdp>,
    zero_copy: Option<bool>,
}

/// Bind the sink on `iface` (in the calling thread's namespace) for `spec`,
/// run by `side`; tries the asked mode, then its fallbacks.
pub fn prepare(
    spec: &SinkSpec,
    side: Side,
    iface: &str,
    paths: &PathOpener,
) -> Result<PreparedSink, SinkError> {
    let info = sys::checked_iface(spec, iface)?;
    if let Some(why) = too_many_threads(spec, &info) {
        return Err(SinkError::Usage(why));
    }
    let mut refused = Vec::new();
    let mut mode = spec.mode;
    loop {
        match open_mode(spec, &info, mode) {
            Ok(o) => {
                // Generic XDP counts the same frames, slower: say why.
                if let Some(why) = o.xdp.as_ref().and_then(SinkXdp::native_refused) {
                    let hint = if info.driver == "veth" {
                        " (veth's driver mode takes an MTU of about 3.5 KiB at most)"
                    } else {
                        ""
                    };
                    refused.push(format!(
                        "XDP driver mode refused on {iface} (MTU {}{hint}): {why}; the program runs in generic mode",
                        info.mtu
                    ));
                }
                let probe = paths(iface, &info.driver);
                return Ok(PreparedSink {
                    spec: spec.clone(),
                    side,
                    info,
                    mode,
                    refused,
                    zero_copy: o.zero_copy,
                    rxs: o.rxs,
                    labels: o.labels,
                    probe,
                    xdp: o.xdp,
                });
            }
            Err(why) => {
                let next = mode.fallback().filter(|_| spec.fallback);
                let tail =
                    next.map_or(String::new(), |n| format!("; falling back to {}", n.name()));
                refused.push(format!("{} refused on {iface}: {why}{tail}", mode.name()));
                match next {
                    Some(n) => mode = n,
                    None => return Err(SinkError::Unsupported(refused.join("; "))),
                }
            }
        }
    }
}

/// Why `spec` asks for more sink threads than `info` has rx queues, if it
/// does. Every mode but `udp` (which reads sockets, not queues, and runs
/// without the privilege the others need) serves one queue per thread:
/// threads beyond the queues would have nothing to read, and the test
/// would claim a scaling it never ran.
fn too_many_threads(spec: &SinkSpec, info: &IfaceInfo) -> Option<String> {
    let (n, rx) = (spec.queues, info.rx_queues);
    if spec.mode == SinkMode::Udp || !sys::can_raw() || n <= rx {
        return None;
    }
    let iface = &info.name;
    Some(format!(
        "{n} sink threads (--queues, or the CPUs of a cores set) but {iface} has {rx} rx queue(s): the sink runs one thread per queue; use --queues {rx} or fewer, or give {iface} more queues (ethtool -L {iface} combined {n})"
    ))
}

fn filter(spec: &SinkSpec, info: &IfaceInfo, per_flow: bool) -> Filter {
    let flows = spec.flow_count().clamp(1, super::spec::MAX_FLOWS);
    Filter {
        port_lo: spec.dst_port,
        port_hi: spec.dst_port,
        src_port_lo: super::frame::ports(0, spec.dst_port).0,
        src_port_hi: super::frame::ports((flows - 1) as u16, spec.dst_port).0,
        dst_ip: info.ipv4.map(|a| a.0),
        per_flow,
    }
}

/// Why one sink mode could not open on the interface (the next mode may).
#[derive(Debug, thiserror::Error)]
enum ModeRefused {
    /// Raw sockets and XDP need CAP_NET_RAW.
    #[error("needs CAP_NET_RAW (run as root)")]
    NeedsRoot,
    /// A frame too big for an AF_XDP chunk.
    #[error("{frame} B frames do not fit a {chunk} B chunk after {XDP_PACKET_HEADROOM} B of headroom (AF_XDP multi-buffer is not used)")]
    FrameTooBig {
        /// The frame size.
        frame: u32,
        /// The chunk it would go in.
        chunk: u32,
    },
    /// The XDP program did not attach, or did not take a socket.
    #[error(transparent)]
    Xdp(Box<SinkError>),
    /// A TPACKET_V3 ring did not open.
    #[error(transparent)]
    Ring(#[from] RingError),
    /// An AF_XDP socket did not open.
    #[error(transparent)]
    Xsk(#[from] XskError),
    /// A UDP socket did not bind.
    #[error("binding UDP {ip}:{port}: {source}")]
    Udp {
        /// The address.
        ip: std::net::Ipv4Addr,
        /// The port.
        port: u16,
        /// The kernel's answer.
        source: std::io::Error,
    },
}

impl From<SinkError> for ModeRefused {
    fn from(e: SinkError) -> Self {
        ModeRefused::Xdp(Box::new(e))
    }
}

fn open_mode(spec: &SinkSpec, info: &IfaceInfo, mode: SinkMode) -> Result<Opened, ModeRefused> {
    let n = info.rx_queues;
    match mode {
        SinkMode::Xdp => {
            let x = SinkXdp::attach(
                &info.name,
                info.ifindex,
                Program::Drop,
                filter(spec, info, true),
            )?;
            Ok(Opened {
                labels: (0..n).collect(),
                xdp: Some(x),
                ..Opened::default()
            })
        }
        SinkMode::AfXdp => open_xsks(spec, info),
        SinkMode::Tpacket => {
            if !sys::can_raw() {
                return Err(ModeRefused::NeedsRoot);
            }
            let group = fanout_group_id();
            let mut rxs = Vec::new();
            for _ in 0..n {
                let r = RxRing::open(
                    info.ifindex,
                    RING_FRAMES,
                    spec.wire_len(),
                    group,
                    PACKET_FANOUT_QM,
                )?;
                rxs.push(Rx::Packet(Box::new(r)));
            }
            Ok(Opened {
                rxs,
                labels: fanout_labels(n),
                ..Opened::default()
            })
        }
        SinkMode::Udp => {
            let ip = info.ipv4.map_or(std::net::Ipv4Addr::UNSPECIFIED, |a| a.0);
            let mut rxs = Vec::new();
            for _ in 0..spec.queues {
                rxs.push(Rx::Udp(udp_socket(ip, spec.dst_port).map_err(
                    |source| ModeRefused::Udp {
                        ip,
                        port: spec.dst_port,
                        source,
                    },
                )?));
            }
            Ok(Opened {
                rxs,
                labels: (0..spec.queues).collect(),
                ..Opened::default()
            })
        }
    }
}

/// Queue of each fanout member. PACKET_FANOUT_QM picks member
/// `skb_get_rx_queue() % members`; drivers record the rx queue (veth
/// records the peer's tx queue as its rx queue in `veth_xmit`), so member
/// *m* gets the frames of queue *m* when there is a member per queue.
fn fanout_labels(n: u32) -> Vec<u32> {
    (0..n).collect()
}

fn open_xsks(spec: &SinkSpec, info: &IfaceInfo) -> Result<Opened, ModeRefused> {
    if !sys::can_raw() {
        return Err(ModeRefused::NeedsRoot);
    }
    let need = spec.wire_len() as u32 + XDP_PACKET_HEADROOM;
    let chunk = if need <= 2048 { 2048 } else { 4096 };
    if need > chunk {
        return Err(ModeRefused::FrameTooBig {
            frame: spec.frame_size,
            chunk,
        });
    }
    let mut xdp = SinkXdp::attach(
        &info.name,
        info.ifindex,
        Program::Redirect,
        filter(spec, info, false),
    )?;
    let mut rxs = Vec::new();
    let mut zero_copy = xdp.native();
    // The previous point's sockets may still hold these queues for a moment
    // after they closed: one wait for the whole set, not one per queue.
    let until = Instant::now() + super::xsk::BUSY_WAIT;
    for q in 0..info.rx_queues {
        let mut cfg = XskConfig {
            frames: RING_FRAMES,
            chunk,
            rx: true,
            tx: false,
            zero_copy,
        };
        let x = match Xsk::open_waiting(info.ifindex, q, cfg, until) {
            Ok(x) => x,
            // A busy queue is busy in copy mode too: only a refusal of
            // zero-copy falls back to copy mode.
            Err(e) if zero_copy && !e.still_busy() => {
                zero_copy = false;
                cfg.zero_copy = false;
                Xsk::open_waiting(info.ifindex, q, cfg, until)?
            }
            Err(e) => return Err(e.into()),
        };
        let mut x = Box::new(x);
        let addrs: Vec<u64> = (0..u64::from(RING_FRAMES))
            .map(|i| i * u64::from(chunk))
            .collect();
        x.fill(&addrs);
        xdp.add_socket(q, x.fd())?;
        rxs.push(Rx::Xsk(x));
    }
    Ok(Opened {
        rxs,
        labels: (0..info.rx_queues).collect(),
        xdp: Some(xdp),
        zero_copy: Some(zero_copy),
    })
}

fn udp_socket(ip: std::net::Ipv4Addr, port: u16) -> std::io::Result<OwnedFd> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
    s.set_reuse_port(true)?;
    let _ = s.set_recv_buffer_size(4 << 20);
    s.set_nonblocking(true)?;
    s.bind(&std::net::SocketAddrV4::new(ip, port).into())?;
    Ok(s.into())
}

impl PreparedSink {
    /// The setup message for the generator's end.
    pub fn end(&self) -> SinkEnd {
        SinkEnd {
            iface: self.info.name.clone(),
            mac: self.info.mac.to_string(),
            ip: self
                .info
                .ipv4
                .map_or(std::net::Ipv4Addr::UNSPECIFIED, |a| a.0),
            rx_queues: self.info.rx_queues,
            mtu: self.info.mtu,
            speed_mbps: self.info.speed_mbps,
            mode: self.mode,
            refused: self.refused.clone(),
            zero_copy: self.zero_copy,
            cpus: self.spec.cpus_for(self.side).to_vec(),
        }
    }

    /// Start the threads.
    pub fn start(mut self) -> Result<RunningSink, SinkError> {
        let end = self.end();
        let rows = self.labels.len();
        let threads_n = (self.spec.queues as usize).min(self.rxs.len()).max(1);
        let counters: Arc<Vec<SinkQueueCounters>> =
            Arc::new((0..rows).map(|_| SinkQueueCounters::default()).collect());
        let mut workers = Workers::default();
        let control = workers.control().clone();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut per_thread: Vec<Vec<(usize, Rx)>> = (0..threads_n).map(|_| Vec::new()).collect();
        for (r, rx) in std::mem::take(&mut self.rxs).into_iter().enumerate() {
            per_thread[r % threads_n].push((r, rx));
        }
        let mut cpus = vec![None; rows];
        let starter = control.starter();
        if !per_thread.iter().all(Vec::is_empty) {
            for (t, mine) in per_thread.into_iter().enumerate() {
                let cpu = self.spec.cpu_of(self.side, t);
                for (r, _) in &mine {
                    cpus[*r] = cpu;
                }
                let w = SinkWorker {
                    mine,
                    labels: self.labels.clone(),
                    flows: self.spec.flow_count(),
                    dst_port: self.spec.dst_port,
                    control: control.clone(),
                    counters: counters.clone(),
                    seen: seen.clone(),
                };
                workers.spawn(format!("ws-sink-{t}"), cpu, move || w.run())?;
            }
        }
        drop(starter);
        let threads_n = workers.len();
        if threads_n > 0 {
            super::counters::wait_for_tids(counters.iter().map(|c| &c.tid));
        }
        Ok(RunningSink {
            workers,
            counters,
            labels: self.labels,
            threads_n,
            cpus,
            end,
            flows: self.spec.flow_count(),
            seen,
            started: Instant::now(),
            probe: Mutex::new(self.probe),
            xdp: self.xdp,
        })
    }
}

/// One sink thread: its sockets (row index, socket) and a flow table per socket.
struct SinkWorker {
    mine: Vec<(usize, Rx)>,
    labels: Vec<u32>,
    flows: u32,
    dst_port: u16,
    control: EngineControl,
    counters: Arc<Vec<SinkQueueCounters>>,
    seen: Arc<Mutex<Vec<FlowSeen>>>,
}

/// Per-socket state of a sink thread.
struct Slot {
    row: usize,
    rx: Rx,
    table: FlowTable,
    drops: u64,
}

impl SinkWorker {
    fn run(self) -> Result<(), EngineError> {
        let tid = current_tid();
        let mut slots: Vec<Slot> = self
            .mine
            .into_iter()
            .map(|(row, rx)| Slot {
                row,
                rx,
                table: FlowTable::new(self.flows),
                drops: 0,
            })
            .collect();
        for s in &slots {
            self.counters[s.row].tid.store(tid, Ordering::Release);
        }
        let mut pfds: Vec<libc::pollfd> = slots
            .iter()
            .map(|s| libc::pollfd {
                fd: s.rx.fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let mut scratch = Scratch::new();
        let mut rounds = 0u32;
        loop {
            if self.control.aborted() {
                break;
            }
            let mut got = 0;
            for s in &mut slots {
                got += drain(s, &mut scratch, self.dst_port, &self.counters[s.row]);
            }
            rounds = rounds.wrapping_add(1);
            if got == 0 || rounds.is_multiple_of(256) {
                for s in &mut slots {
                    update_drops(s, &self.counters[s.row]);
                }
            }
            if got == 0 {
                if self.control.stopping() {
                    break;
                }
                // SAFETY: pfds is a valid array of pollfd for the call.
                unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 10) };
            }
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        for s in &slots {
            seen.extend(
                s.table
                    .rows(self.labels.get(s.row).copied().unwrap_or(s.row as u32)),
            );
        }
        Ok(())
    }
}

/// Buffers reused across batches.
struct Scratch {
    descs: Vec<XdpDesc>,
    back: Vec<u64>,
    bufs: Vec<Vec<u8>>,
}

impl Scratch {
    fn new() -> Self {
        Scratch {
            descs: Vec::with_capacity(64),
            back: Vec::with_capacity(64),
            bufs: Vec::new(),
        }
    }
}

/// Per-batch accumulation, published once per batch.
#[derive(Default)]
struct Batch {
    frames: u64,
    bytes: u64,
    foreign: u64,
}

impl Batch {
    #[inline]
    fn frame(&mut self, table: &mut FlowTable, stamp: Option<super::frame::Stamp>, len: usize) {
        match stamp {
            Some(st) => {
                self.frames += 1;
                self.bytes += len as u64;
                table.on_frame(st.flow, st.seq);
            }
            None => self.foreign += 1,
        }
    }

    fn publish(&self, table: &FlowTable, c: &SinkQueueCounters) {
        c.frames.fetch_add(self.frames, Ordering::Relaxed);
        c.bytes.fetch_add(self.bytes, Ordering::Relaxed);
        c.foreign.fetch_add(self.foreign, Ordering::Relaxed);
        let t = table.totals();
        c.received.store(t.received, Ordering::Relaxed);
        c.expected.store(t.expected, Ordering::Relaxed);
        c.duplicates.store(t.duplicates, Ordering::Relaxed);
        c.reordered.store(t.reordered, Ordering::Relaxed);
        c.unknown_flow.store(t.unknown_flow, Ordering::Relaxed);
    }
}

/// Read what one socket has; returns the frames handled.
fn drain(s: &mut Slot, sc: &mut Scratch, port: u16, c: &SinkQueueCounters) -> usize {
    let mut b = Batch::default();
    let n = match &mut s.rx {
        Rx::Xsk(x) => {
            let mask = !(u64::from(x.chunk()) - 1);
            let n = x.rx_peek(&mut sc.descs, 64);
            sc.back.clear();
            for d in &sc.descs {
                let data = x.data(d.addr, d.len);
                b.frame(&mut s.table, parse_frame(data, port), data.len());
                sc.back.push(d.addr & mask);
            }
            x.rx_release(n);
            x.fill(&sc.back);
            n as usize
        }
        Rx::Packet(r) => {
            let table = &mut s.table;
            let mut n = 0;
            for _ in 0..4 {
                let k = r.next_block(|f| b.frame(table, parse_frame(f, port), f.len()));
                if k == 0 {
                    break;
                }
                n += k as usize;
            }
            n
        }
        Rx::Udp(fd) => recv_udp(fd.as_raw_fd(), sc, &mut s.table, &mut b),
    };
    if n > 0 {
        b.publish(&s.table, c);
    }
    n
}

fn recv_udp(fd: RawFd, sc: &mut Scratch, table: &mut FlowTable, b: &mut Batch) -> usize {
    const N: usize = 64;
    if sc.bufs.is_empty() {
        sc.bufs = (0..N).map(|_| vec![0u8; 9216]).collect();
    }
    let mut iov: Vec<libc::iovec> = sc
        .bufs
        .iter_mut()
        .map(|v| libc::iovec {
            iov_base: v.as_mut_ptr().cast(),
            iov_len: v.len(),
        })
        .collect();
    // SAFETY: mmsghdr is plain data; all-zero is valid.
    let mut msgs: Vec<libc::mmsghdr> = (0..N).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: msgs point at live iovecs and buffers for the call.
    let r = unsafe {
        libc::recvmmsg(
            fd,
            msgs.as_mut_ptr(),
            N as u32,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if r <= 0 {
        return 0;
    }
    for (m, buf) in msgs.iter().zip(&sc.bufs).take(r as usize) {
        let len = (m.msg_len as usize).min(buf.len());
        // The wire length: UDP payload + 42 B of headers.
        b.frame(
            table,
            parse_payload(&buf[..len]),
            len + super::frame::HEADERS,
        );
    }
    r as usize
}

/// Refresh the kernel's drop counters of one socket.
fn update_drops(s: &mut Slot, c: &SinkQueueCounters) {
    match &s.rx {
        Rx::Xsk(x) => {
            if let Ok(st) = x.stats() {
                c.ring_drops
                    .store(st.rx_dropped + st.rx_ring_full, Ordering::Relaxed);
                c.fill_empty
                    .store(st.rx_fill_ring_empty_descs, Ordering::Relaxed);
            }
        }
        Rx::Packet(r) => {
            s.drops += r.take_drops();
            c.ring_drops.store(s.drops, Ordering::Relaxed);
        }
        Rx::Udp(fd) => {
            let mut m = [0u32; 9];
            if sys::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_MEMINFO, &mut m).is_ok() {
                c.ring_drops.store(u64::from(m[8]), Ordering::Relaxed);
            }
        }
    }
}

/// A running sink.
pub struct RunningSink {
    // First: dropped (aborted and joined, sockets closed) before the XDP program.
    workers: Workers,
    counters: Arc<Vec<SinkQueueCounters>>,
    labels: Vec<u32>,
    cpus: Vec<Option<CpuId>>,
    threads_n: usize,
    end: SinkEnd,
    flows: u32,
    seen: Arc<Mutex<Vec<FlowSeen>>>,
    started: Instant,
    probe: Mutex<Box<dyn PathSource>>,
    // Last: detached after the threads (and their sockets) are gone.
    xdp: Option<SinkXdp>,
}

impl std::fmt::Debug for RunningSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningSink")
            .field("end", &self.end)
            .field("threads", &self.workers.len())
            .finish()
    }
}

/// What the sink reports at the end of a point (serde: it crosses the
/// control channel to whichever end computes the tally).
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct SinkTotals {
    /// The mode that ran.
    pub mode: SinkMode,
    /// Per flow, merged over queues.
    pub seen: Vec<FlowSeen>,
}

impl RunningSink {
    /// The setup message it answered with.
    pub fn end(&self) -> &SinkEnd {
        &self.end
    }
    /// Stop flags and the done signal.
    pub fn control(&self) -> &EngineControl {
        self.workers.control()
    }

    /// The generator's setup arrived: its address is the source the XDP
    /// program (xdp, af-xdp) counts; until now it let every frame pass.
    /// The socket modes need nothing (they bind the test's port).
    pub fn set_generator(&mut self, ip: std::net::Ipv4Addr) -> Result<(), SinkError> {
        match self.xdp.as_mut() {
            Some(x) => x.set_generator(ip),
            None => Ok(()),
        }
    }

    /// The counters now, with the host's loss counters.
    pub fn snapshot(&self) -> SinkSnapshot {
        let xdp = self
            .xdp
            .as_ref()
            .map(|x| x.queue_counts(self.labels.iter().max().map_or(0, |m| m + 1)));
        let path = self.probe.lock().unwrap_or_else(|p| p.into_inner()).read();
        let elapsed_s = self.started.elapsed().as_secs_f64();
        let queues = self
            .counters
            .iter()
            .enumerate()
            .map(|(r, c)| {
                let q = self.labels.get(r).copied().unwrap_or(r as u32);
                let mut s: SinkQueueSnap = c.snapshot(q, self.cpus.get(r).copied().flatten());
                s.thread = (self.threads_n > 0).then(|| (r % self.threads_n) as u32);
                s.xdp = xdp.as_ref().and_then(|v| v.get(q as usize).copied());
                s
            })
            .collect();
        SinkSnapshot {
            elapsed_s,
            mode: self.end.mode,
            queues,
            path: Some(path),
        }
    }

    /// (frames seen in all, unique test frames) from the counters alone
    /// (atomics and the XDP map; none of the host files `snapshot` reads).
    fn seen(&self) -> (u64, u64) {
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let user: u64 = self
            .counters
            .iter()
            .map(|c| load(&c.frames) + load(&c.foreign))
            .sum();
        let unique: u64 = self.counters.iter().map(|c| load(&c.received)).sum();
        let xdp: u64 = self.xdp.as_ref().map_or(0, |x| {
            x.queue_counts(self.labels.iter().max().map_or(0, |m| m + 1))
                .iter()
                .map(|q| q.packets)
                .sum()
        });
        let unique = if self.end.mode == SinkMode::Xdp {
            xdp
        } else {
            unique
        };
        (user + xdp, unique)
    }

    /// After the generator stopped: keep counting until every frame `sent`
    /// was counted, or nothing new arrived for `quiet`, or `limit` passed,
    /// or `cancel` says so — frames in flight are counted, not lost.
    ///
    /// Returns when the counts last moved, in seconds on the snapshots'
    /// clock (the drain's start when nothing more came): after that the
    /// sink only waited, so a rate's span ends there.
    pub fn drain(
        &self,
        sent: Option<u64>,
        quiet: Duration,
        limit: Duration,
        cancel: &dyn Fn() -> bool,
    ) -> f64 {
        let deadline = Instant::now() + limit;
        let (mut last, _) = self.seen();
        let mut still = Instant::now();
        let moved = |at: Instant| at.duration_since(self.started).as_secs_f64();
        while Instant::now() < deadline && !cancel() {
            std::thread::sleep(Duration::from_millis(20));
            let (all, unique) = self.seen();
            if all != last {
                last = all;
                still = Instant::now();
            }
            if sent.is_some_and(|n| unique >= n) || still.elapsed() > quiet {
                break;
            }
        }
        moved(still)
    }

    /// Does the sink read with user-space threads (all modes but `xdp`)?
    pub fn has_threads(&self) -> bool {
        self.threads_n > 0
    }

    /// Finish: threads read what is queued, then return.
    pub fn stop(&self) {
        self.workers.stop();
    }
    /// Return at once.
    pub fn abort(&self) {
        self.workers.abort();
    }

    /// Wait for the threads (after [`RunningSink::stop`]); per-flow results.
    /// The XDP program is detached when this returns.
    /// (A sink dropped while running aborts and joins its threads, then detaches XDP.)
    pub fn join(mut self) -> Result<SinkTotals, EngineError> {
        self.workers.join()?;
        let mut seen = std::mem::take(&mut *self.seen.lock().unwrap_or_else(|p| p.into_inner()));
        if self.end.mode == SinkMode::Xdp {
            if let Some(x) = &self.xdp {
                seen = x
                    .flow_counts(self.flows)
                    .into_iter()
                    .enumerate()
                    .filter(|(_, n)| *n > 0)
                    .map(|(f, n)| FlowSeen {
                        flow: f as u16,
                        queues: Vec::new(),
                        received: n,
                        next: n,
                        duplicates: 0,
                        reordered: 0,
                        late: 0,
                    })
                    .collect();
            }
        }
        Ok(SinkTotals {
            mode: self.end.mode,
            seen: merge(seen),
        })
    }
}

//! The generator: one pinned thread per queue, each sending its share of
//! the flows on the fastest path the interface accepts, paced or flat out.
//!
//! Paths, fastest first (`TxPath::Auto` tries them in this order and says
//! why each faster one was refused; without fallback it is AF_XDP alone,
//! and a refused path is the error, as a refused sink mode is):
//!
//! 1. AF_XDP: one socket per thread, bound to tx queue = thread index, in
//!    zero-copy mode where the driver binds so (the NIC reads the UMEM
//!    directly), else in copy mode (the kernel builds an skb per frame and
//!    hands it straight to the driver). Copy mode still beats the TX ring:
//!    on this project's veth pair it sent 1.4-1.6x trafgen's rate against
//!    0.8-1.0x for the TX ring (`cargo xtask bench sink`), because the
//!    descriptors are 16 bytes in a lock-free ring and the queue is fixed.
//! 2. AF_PACKET `PACKET_TX_RING` with `PACKET_QDISC_BYPASS`: frames are
//!    written into a shared ring, one `send()` hands a whole batch to the
//!    driver without the qdisc. The kernel picks the tx queue (XPS, else
//!    the sending CPU). Used when AF_XDP is refused
//!    (more threads than tx queues, frames above 4 KiB, an old kernel).
//! 3. `sendmmsg` on kernel UDP sockets, one per flow: no privileges, goes
//!    through routing, netfilter and the qdisc like any application.
//!
//! Every frame of a thread's flows comes from one template written into
//! every slot once: per frame only the source port, the flow id, the
//! sequence number and the send time change (18 bytes).
//!
//! `sent` counts frames handed to the kernel. A frame the kernel then
//! drops on transmit (a full veth peer, a driver error) is counted where
//! the kernel counts it (`errors`, interface tx drops) and shows up as lost
//! at the sink — which is where the loss accounting attributes it.

use super::counters::{current_tid, GenThreadCounters, GenThreadSnap};
use super::figures::{GenSnapshot, GenTotals};
use super::frame::{ports, stamp_frame, stamp_payload, write_stamp_header, FrameBuilder, Mac};
use super::pace::Pacer;
use super::ring::TxRing;
use super::spec::{GeneratorEnd, SinkEnd, SinkSpec, TxPath, RING_FRAMES};
use super::sys::{self, IfaceInfo};
use super::xsk::{XdpDesc, Xsk, XskConfig};
use super::SinkError;
use crate::traffic::paths::{PathCounters, PathOpener, PathSource};
use crate::traffic::workers::Workers;
use crate::traffic::EngineSpecOps;
use crate::traffic::{EngineControl, EngineError, Side};
use crate::units::CpuId;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A generator whose interface is known, before the sink's setup arrives.
#[derive(Debug)]
pub struct PreparedGenerator {
    spec: SinkSpec,
    side: Side,
    info: IfaceInfo,
    probe: Box<dyn PathSource>,
}

/// Look up `iface` (in the calling thread's namespace) for `spec`, run by `side`.
pub fn prepare(
    spec: &SinkSpec,
    side: Side,
    iface: &str,
    paths: &PathOpener,
) -> Result<PreparedGenerator, SinkError> {
    let info = sys::checked_iface(spec, iface)?;
    let probe = paths(iface, &info.driver);
    Ok(PreparedGenerator {
        spec: spec.clone(),
        side,
        info,
        probe,
    })
}

/// What one thread transmits with.
enum Tx {
    Xsk(Box<Xsk>),
    Ring(Box<TxRing>),
    Udp(Vec<(u16, OwnedFd)>),
}

impl PreparedGenerator {
    /// The setup message for the sink's end.
    pub fn end(&self) -> GeneratorEnd {
        GeneratorEnd {
            iface: self.info.name.clone(),
            mac: self.info.mac.to_string(),
            ip: self
                .info
                .ipv4
                .map_or(std::net::Ipv4Addr::UNSPECIFIED, |a| a.0),
            flows: self.spec.flow_count(),
            tx_queues: self.info.tx_queues,
            cpus: self.spec.cpus_for(self.side).to_vec(),
        }
    }

    /// Open every thread's socket for `sink` (falling back as allowed),
    /// sending nothing yet: a refused path or a link the frames cannot
    /// cross is an error here, before any clock runs.
    pub fn open(self, sink: &SinkEnd) -> Result<OpenedGenerator, SinkError> {
        let b = self.builder(sink)?;
        let (path, txs, refused, zero_copy) = self.open_path(&b)?;
        Ok(OpenedGenerator {
            gen: self,
            builder: b,
            path,
            txs,
            refused,
            zero_copy,
        })
    }
}

/// A generator with its sockets open, not sending yet.
pub struct OpenedGenerator {
    gen: PreparedGenerator,
    builder: FrameBuilder,
    path: TxPath,
    txs: Vec<Tx>,
    refused: Vec<String>,
    zero_copy: Option<bool>,
}

impl std::fmt::Debug for OpenedGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedGenerator")
            .field("path", &self.path)
            .field("threads", &self.txs.len())
            .finish()
    }
}

impl OpenedGenerator {
    /// Start one pinned thread per queue, sending.
    pub fn start(self) -> Result<RunningGenerator, SinkError> {
        let OpenedGenerator {
            gen,
            builder: b,
            path,
            txs,
            refused,
            zero_copy,
        } = self;
        let spec = gen.spec;
        let n = spec.queues as usize;
        let mut workers = Workers::default();
        let control = workers.control().clone();
        let counters: Arc<Vec<GenThreadCounters>> =
            Arc::new((0..n).map(|_| GenThreadCounters::default()).collect());
        let sent = Arc::new(Mutex::new(vec![0u64; spec.flow_count() as usize]));
        let mut meta = Vec::new();
        let starter = control.starter();
        for (t, tx) in txs.into_iter().enumerate() {
            let cpu = spec.cpu_of(gen.side, t);
            let queue = matches!(tx, Tx::Xsk(_)).then_some(t as u32 % gen.info.tx_queues);
            meta.push((queue, cpu));
            let w = Worker {
                t,
                tx,
                flows: spec.flows_of_thread(t as u32),
                rate: spec.thread_rate(t as u32),
                builder: b.clone(),
                control: control.clone(),
                counters: counters.clone(),
                sent: sent.clone(),
            };
            workers.spawn(format!("ws-gen-{t}"), cpu, move || w.run())?;
        }
        drop(starter);
        super::counters::wait_for_tids(counters.iter().map(|c| &c.tid));
        Ok(RunningGenerator {
            workers,
            counters,
            meta,
            path,
            refused,
            zero_copy,
            sent,
            started: Instant::now(),
            probe: Mutex::new(gen.probe),
        })
    }
}

impl PreparedGenerator {
    fn builder(&self, sink: &SinkEnd) -> Result<FrameBuilder, SinkError> {
        let (src_ip, _) = self
            .info
            .ipv4
            .unwrap_or((std::net::Ipv4Addr::UNSPECIFIED, 32));
        if !self.info.on_link(sink.ip) {
            return Err(SinkError::Unsupported(format!(
                "{} ({}) is not on the subnet of {} ({src_ip}): the packet test needs the two interfaces on one link",
                sink.iface, sink.ip, self.info.name
            )));
        }
        let ip_len = self.spec.frame_size - 18;
        let mtu = self.info.mtu.min(sink.mtu);
        if ip_len > mtu {
            return Err(SinkError::Usage(format!(
                "{} B frames need an MTU of at least {ip_len} on {} and {} (now {} and {}): ip link set dev IF mtu {ip_len} on both hosts, or a smaller --frame-size",
                self.spec.frame_size, self.info.name, sink.iface, self.info.mtu, sink.mtu
            )));
        }
        let dst_mac: Mac = sink.mac.parse().map_err(SinkError::Unsupported)?;
        Ok(FrameBuilder {
            src_mac: self.info.mac,
            dst_mac,
            src_ip,
            dst_ip: sink.ip,
            dst_port: self.spec.dst_port,
            wire_len: self.spec.wire_len(),
        })
    }

    /// The paths to try, in order, for the asked one. AF_XDP is one path
    /// (zero-copy where the driver binds so, else copy mode); without
    /// fallback (`--no-fallback`) `auto` is AF_XDP alone, as the sink's
    /// asked mode is the only one it tries.
    fn candidates(&self) -> Vec<(TxPath, bool)> {
        match self.spec.tx_path {
            TxPath::Auto if self.spec.fallback => vec![
                (TxPath::AfXdp, true),
                (TxPath::AfXdp, false),
                (TxPath::TxRing, true),
                (TxPath::Sendmmsg, true),
            ],
            TxPath::Auto | TxPath::AfXdp => vec![(TxPath::AfXdp, true), (TxPath::AfXdp, false)],
            p => vec![(p, true)],
        }
    }

    /// The error when every path tried was refused (`refused`: one line
    /// each, `mode refused on IF: why`). Without fallback it is
    /// one line naming the path and why — the copy-mode reason for AF_XDP,
    /// as a driver without zero-copy is the usual case, not the news.
    fn refusal(&self, refused: &[String]) -> SinkError {
        if self.spec.fallback {
            return SinkError::Unsupported(format!(
                "no transmit path works: {}",
                refused.join("; ")
            ));
        }
        let why = refused.last().map_or("not tried", String::as_str);
        let next = match self.spec.tx_path {
            TxPath::Auto | TxPath::AfXdp => Some("tx-ring"),
            TxPath::TxRing => Some("sendmmsg"),
            TxPath::Sendmmsg => None,
        };
        let tail = next.map_or(String::new(), |n| {
            format!("; --no-fallback keeps it from falling back to {n}")
        });
        SinkError::Unsupported(format!("generator path {why}{tail}"))
    }

    #[allow(clippy::type_complexity)]
    fn open_path(
        &self,
        b: &FrameBuilder,
    ) -> Result<(TxPath, Vec<Tx>, Vec<String>, Option<bool>), SinkError> {
        let mut refused = Vec::new();
        for (path, strict) in self.candidates() {
            let r = match path {
                TxPath::AfXdp => self.open_xsk(b, strict),
                TxPath::TxRing => self.open_rings(b),
                TxPath::Sendmmsg => self.open_udp(b),
                TxPath::Auto => continue,
            };
            match r {
                Ok(txs) => {
                    let zc = txs.first().and_then(|t| match t {
                        Tx::Xsk(x) => Some(x.zero_copy()),
                        _ => None,
                    });
                    return Ok((path, txs, refused, zc));
                }
                Err(why) => {
                    let mode = match (path, strict) {
                        (TxPath::AfXdp, true) => "af-xdp zero-copy",
                        (TxPath::AfXdp, false) => "af-xdp copy mode",
                        _ => path.name(),
                    };
                    refused.push(format!("{mode} refused on {}: {why}", self.info.name));
                }
            }
        }
        Err(self.refusal(&refused))
    }

    fn open_xsk(&self, b: &FrameBuilder, zero_copy: bool) -> Result<Vec<Tx>, Refused> {
        let n = self.spec.queues;
        if !sys::can_raw() {
            return Err(Refused::NoRaw);
        }
        if n > self.info.tx_queues {
            return Err(Refused::TooFewQueues {
                threads: n,
                queues: self.info.tx_queues,
            });
        }
        let chunk = if b.wire_len <= 2048 { 2048 } else { 4096 };
        if b.wire_len > chunk as usize {
            return Err(Refused::FrameTooBig {
                len: b.wire_len,
                chunk,
            });
        }
        let mut out = Vec::new();
        // The previous point's sockets may still hold these queues for a
        // moment after they closed (see `xsk`): one wait for the whole set.
        let until = Instant::now() + super::xsk::BUSY_WAIT;
        for t in 0..n {
            let cfg = XskConfig {
                frames: RING_FRAMES,
                chunk,
                rx: false,
                tx: true,
                zero_copy,
            };
            let x = Xsk::open_waiting(self.info.ifindex, t, cfg, until).map_err(|e| {
                if zero_copy && matches!(e.errno(), Some(libc::EOPNOTSUPP | libc::EPROTONOSUPPORT))
                {
                    let driver = self.info.driver.clone();
                    Refused::NoZeroCopy { source: e, driver }
                } else {
                    Refused::Xsk(e)
                }
            })?;
            out.push(Tx::Xsk(Box::new(x)));
        }
        if zero_copy && !out.iter().all(|t| matches!(t, Tx::Xsk(x) if x.zero_copy())) {
            return Err(Refused::CopyMode {
                driver: self.info.driver.clone(),
            });
        }
        Ok(out)
    }

    fn open_rings(&self, b: &FrameBuilder) -> Result<Vec<Tx>, Refused> {
        if !sys::can_raw() {
            return Err(Refused::NoRaw);
        }
        let template = b.template(0);
        let mut out = Vec::new();
        for _ in 0..self.spec.queues {
            let r = TxRing::open(self.info.ifindex, RING_FRAMES, &template, true)?;
            if !r.bypass() {
                return Err(Refused::NoBypass);
            }
            out.push(Tx::Ring(Box::new(r)));
        }
        Ok(out)
    }

    fn open_udp(&self, b: &FrameBuilder) -> Result<Vec<Tx>, Refused> {
        let flows = self.spec.flow_count();
        sys::ensure_fds(u64::from(flows))?;
        let mut out = Vec::new();
        for t in 0..self.spec.queues {
            let mut socks = Vec::new();
            for f in self.spec.flows_of_thread(t) {
                let sock = udp_socket(b, f).map_err(|source| Refused::Flow { flow: f, source })?;
                socks.push((f, sock));
            }
            out.push(Tx::Udp(socks));
        }
        Ok(out)
    }
}

/// Why one transmit path could not be opened; [`PreparedGenerator`] tries
/// the next one or names every refusal.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("needs CAP_NET_RAW (run as root)")]
    NoRaw,
    #[error("{threads} threads but {queues} tx queues (one AF_XDP socket per queue)")]
    TooFewQueues { threads: u32, queues: u32 },
    #[error("{len} B frames do not fit a {chunk} B UMEM chunk")]
    FrameTooBig { len: usize, chunk: u32 },
    #[error(transparent)]
    Xsk(super::xsk::XskError),
    #[error("{source} (driver {driver} has no AF_XDP zero-copy)")]
    NoZeroCopy {
        source: super::xsk::XskError,
        driver: String,
    },
    #[error("the kernel bound driver {driver} in copy mode")]
    CopyMode { driver: String },
    #[error(transparent)]
    Ring(#[from] super::ring::RingError),
    #[error("PACKET_QDISC_BYPASS refused by the kernel")]
    NoBypass,
    #[error(transparent)]
    Fds(#[from] SinkError),
    #[error("flow {flow}: {source}")]
    Flow { flow: u16, source: std::io::Error },
}

/// A UDP socket from (src ip, flow's port) connected to the sink.
fn udp_socket(b: &FrameBuilder, flow: u16) -> std::io::Result<OwnedFd> {
    let (sport, dport) = ports(flow, b.dst_port);
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
    s.set_reuse_address(true)?;
    let _ = s.set_send_buffer_size(1 << 20);
    s.bind(&std::net::SocketAddrV4::new(b.src_ip, sport).into())?;
    s.connect(&std::net::SocketAddrV4::new(b.dst_ip, dport).into())?;
    s.set_write_timeout(Some(Duration::from_millis(100)))?;
    Ok(s.into())
}

/// One thread's state.
struct Worker {
    t: usize,
    tx: Tx,
    flows: Vec<u16>,
    rate: u64,
    builder: FrameBuilder,
    control: EngineControl,
    counters: Arc<Vec<GenThreadCounters>>,
    sent: Arc<Mutex<Vec<u64>>>,
}

/// Round-robin over a thread's flows with their next sequence numbers.
struct Cursor {
    flows: Vec<u16>,
    seqs: Vec<u64>,
    i: usize,
}

impl Cursor {
    #[inline]
    fn next(&mut self) -> (u16, u64) {
        let i = self.i;
        self.i = if i + 1 == self.flows.len() { 0 } else { i + 1 };
        let s = self.seqs[i];
        self.seqs[i] += 1;
        (self.flows[i], s)
    }
}

/// Write the per-frame fields into a frame made from the template.
#[inline]
fn fill(frame: &mut [u8], flow: u16, seq: u64, ts: u64, dst_port: u16) {
    frame[34..36].copy_from_slice(&ports(flow, dst_port).0.to_be_bytes());
    frame[44..46].copy_from_slice(&flow.to_le_bytes());
    stamp_frame(frame, seq, ts);
}

impl Worker {
    fn run(mut self) -> Result<(), EngineError> {
        let c = &self.counters[self.t];
        c.tid.store(current_tid(), Ordering::Release);
        sys::tight_timer_slack();
        let mut cur = Cursor {
            seqs: vec![0; self.flows.len()],
            flows: std::mem::take(&mut self.flows),
            i: 0,
        };
        let mut pacer = Pacer::new(self.rate);
        let r = match &mut self.tx {
            Tx::Xsk(x) => xsk_loop(x, &mut cur, &mut pacer, &self.builder, &self.control, c),
            Tx::Ring(r) => ring_loop(r, &mut cur, &mut pacer, &self.builder, &self.control, c),
            Tx::Udp(s) => udp_loop(s, &mut cur, &mut pacer, &self.builder, &self.control, c),
        };
        let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
        for (f, s) in cur.flows.iter().zip(&cur.seqs) {
            if let Some(x) = sent.get_mut(usize::from(*f)) {
                *x = *s;
            }
        }
        r
    }
}

const DRAIN: Duration = Duration::from_secs(1);

fn xsk_loop(
    x: &mut Xsk,
    cur: &mut Cursor,
    pacer: &mut Pacer,
    b: &FrameBuilder,
    ctl: &EngineControl,
    c: &GenThreadCounters,
) -> Result<(), EngineError> {
    let chunk = u64::from(x.chunk());
    let template = b.template(cur.flows[0]);
    for i in 0..x.frames() {
        x.chunk_mut(i)[..template.len()].copy_from_slice(&template);
    }
    let mut free: Vec<u64> = (0..u64::from(x.frames())).map(|i| i * chunk).collect();
    let mut descs = Vec::with_capacity(super::pace::BATCH);
    let outstanding = |free: &Vec<u64>, x: &Xsk| x.frames() as usize - free.len();
    while !ctl.stopping() {
        x.completions(&mut free);
        let n = pacer.batch().min(free.len());
        if n == 0 {
            c.ring_full.fetch_add(1, Ordering::Relaxed);
            kick(x, c);
            sys::poll_fd(x.fd(), libc::POLLOUT, 1);
            continue;
        }
        pacer.wait(|| ctl.stopping());
        let ts = sys::realtime_ns();
        descs.clear();
        for _ in 0..n {
            let addr = free.pop().unwrap_or(0);
            let (flow, seq) = cur.next();
            fill(
                x.chunk_mut((addr / chunk) as u32),
                flow,
                seq,
                ts,
                b.dst_port,
            );
            descs.push(XdpDesc {
                addr,
                len: template.len() as u32,
                options: 0,
            });
        }
        let pushed = x.tx_push(&descs);
        debug_assert_eq!(pushed, n, "the tx ring is as large as the UMEM");
        kick(x, c);
        count_sent(pacer, c, n as u64, template.len() as u64);
    }
    if ctl.aborted() {
        return Ok(());
    }
    let end = Instant::now() + DRAIN;
    while outstanding(&free, x) > 0 && Instant::now() < end {
        kick(x, c);
        x.completions(&mut free);
        sys::poll_fd(x.fd(), libc::POLLOUT, 1);
    }
    if let Ok(s) = x.stats() {
        c.kernel_drops.store(s.tx_invalid_descs, Ordering::Relaxed);
    }
    Ok(())
}

/// `n` frames of `len` bytes went out: tell the pacer and the thread's counters.
fn count_sent(pacer: &mut Pacer, c: &GenThreadCounters, n: u64, len: u64) {
    pacer.sent(n);
    c.sent.fetch_add(n, Ordering::Relaxed);
    c.bytes.fetch_add(n * len, Ordering::Relaxed);
}

/// Have the kernel process the tx ring: zero-copy when it asks for a
/// wakeup; copy mode transmits a few dozen frames per call, so kick until
/// the ring is empty (bounded).
fn kick(x: &Xsk, c: &GenThreadCounters) {
    if x.zero_copy() && !x.tx_needs_wakeup() {
        return;
    }
    for _ in 0..8 {
        match x.kick_tx() {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                // Copy mode: the driver dropped one frame (NET_XMIT_DROP).
                c.errors.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                c.errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        if x.zero_copy() || x.tx_pending() == 0 {
            return;
        }
    }
}

fn ring_loop(
    r: &mut TxRing,
    cur: &mut Cursor,
    pacer: &mut Pacer,
    b: &FrameBuilder,
    ctl: &EngineControl,
    c: &GenThreadCounters,
) -> Result<(), EngineError> {
    let mut wrong = 0u64;
    let len = b.wire_len as u64;
    while !ctl.stopping() {
        let n = pacer.batch();
        pacer.wait(|| ctl.stopping());
        let ts = sys::realtime_ns();
        let mut q = 0;
        while q < n {
            match r.next_free(&mut wrong) {
                Some(i) => {
                    let (flow, seq) = cur.next();
                    fill(r.frame_mut(i), flow, seq, ts, b.dst_port);
                    r.queue(i);
                    q += 1;
                }
                None => {
                    c.ring_full.fetch_add(1, Ordering::Relaxed);
                    flush(r, c);
                    r.wait(1);
                    if ctl.stopping() {
                        break;
                    }
                }
            }
        }
        flush(r, c);
        count_sent(pacer, c, q as u64, len);
        if wrong > 0 {
            c.errors.fetch_add(wrong, Ordering::Relaxed);
            wrong = 0;
        }
    }
    if ctl.aborted() {
        return Ok(());
    }
    let end = Instant::now() + DRAIN;
    while r.in_flight() > 0 && Instant::now() < end {
        flush(r, c);
        r.wait(1);
    }
    Ok(())
}

fn flush(r: &TxRing, c: &GenThreadCounters) {
    match r.flush() {
        Ok(()) => {}
        // Backpressure: the frames stay queued and go with the next flush.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::ENOBUFS)) => {}
        Err(_) => {
            c.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn udp_loop(
    socks: &mut [(u16, OwnedFd)],
    cur: &mut Cursor,
    pacer: &mut Pacer,
    b: &FrameBuilder,
    ctl: &EngineControl,
    c: &GenThreadCounters,
) -> Result<(), EngineError> {
    const B: usize = 32;
    let plen = b.payload_len();
    let mut bufs: Vec<Vec<u8>> = (0..B).map(|_| vec![0u8; plen]).collect();
    let mut iov: Vec<libc::iovec> = bufs
        .iter_mut()
        .map(|v| libc::iovec {
            iov_base: v.as_mut_ptr().cast(),
            iov_len: v.len(),
        })
        .collect();
    // SAFETY: mmsghdr is plain data; all-zero is valid.
    let mut msgs: Vec<libc::mmsghdr> = (0..B).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    let mut k = 0usize;
    while !ctl.stopping() {
        let (flow, fd) = (socks[k].0, socks[k].1.as_raw_fd());
        let fi = k;
        k = (k + 1) % socks.len();
        let n = pacer.batch().min(B);
        pacer.wait(|| ctl.stopping());
        let ts = sys::realtime_ns();
        let base = cur.seqs[fi];
        for (j, buf) in bufs.iter_mut().take(n).enumerate() {
            write_stamp_header(buf, flow);
            stamp_payload(buf, base + j as u64, ts);
        }
        // SAFETY: msgs[..n] point at live iovecs and buffers owned here.
        let r = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), n as u32, 0) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => {
                    c.ring_full.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    c.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            continue;
        }
        let sent = r as u64;
        cur.seqs[fi] += sent;
        count_sent(pacer, c, sent, b.wire_len as u64);
    }
    Ok(())
}

/// A running generator.
#[derive(Debug)]
pub struct RunningGenerator {
    workers: Workers,
    counters: Arc<Vec<GenThreadCounters>>,
    meta: Vec<(Option<u32>, Option<CpuId>)>,
    path: TxPath,
    refused: Vec<String>,
    zero_copy: Option<bool>,
    sent: Arc<Mutex<Vec<u64>>>,
    started: Instant,
    probe: Mutex<Box<dyn PathSource>>,
}

impl RunningGenerator {
    /// Stop flags and the done signal.
    pub fn control(&self) -> &EngineControl {
        self.workers.control()
    }

    /// The counters now, with the host's tx drops.
    pub fn snapshot(&self) -> GenSnapshot {
        let host: PathCounters = self.probe.lock().unwrap_or_else(|p| p.into_inner()).read();
        GenSnapshot {
            elapsed_s: self.started.elapsed().as_secs_f64(),
            path: self.path,
            threads: self
                .counters
                .iter()
                .zip(&self.meta)
                .enumerate()
                .map(|(t, (c, (q, cpu)))| c.snapshot(t as u32, *q, *cpu))
                .collect::<Vec<GenThreadSnap>>(),
            host: Some(host),
        }
    }

    /// Finish: threads drain what they queued, then return.
    pub fn stop(&self) {
        self.workers.stop();
    }
    /// Return at once.
    pub fn abort(&self) {
        self.workers.abort();
    }

    /// End the point: stop (drain what was queued) or abort, wait for the
    /// threads, and return the totals with the last counters — read after
    /// the drain, so they count every frame, and with each thread's CPU time
    /// as it was while the thread still existed.
    pub fn finish(self, abort: bool) -> Result<(GenTotals, GenSnapshot), EngineError> {
        let cpu: Vec<Option<u64>> = self.snapshot().threads.iter().map(|t| t.cpu_ns).collect();
        if abort {
            self.abort();
        } else {
            self.stop();
        }
        while self.control().running.load(Ordering::Acquire) > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut last = self.snapshot();
        for (t, c) in last.threads.iter_mut().zip(cpu) {
            if t.cpu_ns.is_none() {
                t.cpu_ns = c;
            }
        }
        Ok((self.join()?, last))
    }

    /// Wait for every thread; the totals (per-flow sent counts) of the point.
    /// (A generator dropped while running aborts and joins its threads.)
    pub fn join(mut self) -> Result<GenTotals, EngineError> {
        self.workers.join()?;
        let sent = self.sent.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Ok(GenTotals {
            path: self.path,
            zero_copy: self.zero_copy,
            refused: self.refused.clone(),
            sent_per_flow: sent,
            errors: self
                .counters
                .iter()
                .map(|c| c.errors.load(Ordering::Relaxed))
                .sum(),
        })
    }
}

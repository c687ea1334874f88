//! AF_XDP sockets, hand-written: the UMEM, the four rings, bind, statistics.
//!
//! Why not a crate: `xsk-rs` and `afxdp` link libbpf/libxdp (C, at build
//! time); `xdpilone` is pure Rust but EUPL-1.2, a copyleft licence that
//! does not fit this MIT/Apache crate; `xdp` (Quilkin's) calls itself early
//! days and shaped by one application. The kernel interface is small and
//! stable (`Documentation/networking/af_xdp.rst`): a few setsockopts, four
//! mmap'd single-producer/single-consumer rings of u64 or `xdp_desc`, and
//! acquire/release on their producer and consumer indices. That is all
//! this file does; the BPF side (the XSKMAP) belongs to [`super::xdp`].
//!
//! One [`Xsk`] = one socket on one (interface, queue) with its own UMEM,
//! used by exactly one thread. Dropping it unmaps the rings, closes the
//! socket (the kernel unbinds it from the queue) and then frees the UMEM.
//!
//! The kernel lets go of the queue itself later: the socket's buffer pool
//! is released in deferred work after the close (`xp_release_deferred`),
//! and until then a bind to that queue fails with EBUSY. A test point that
//! binds right after the previous point closed its sockets would be refused
//! for a queue that is about to be free, so [`Xsk::open_waiting`] retries a
//! busy bind for up to [`BUSY_WAIT`] before it gives up.

use super::sys::{getsockopt, setsockopt, socket, Mmap};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a bind waits for a queue the kernel still holds for a socket
/// that was closed (EBUSY until its deferred release ran; on the project's
/// VM that took up to a few hundred ms after a test point).
pub const BUSY_WAIT: Duration = Duration::from_secs(2);
/// Pause between two binds of a busy queue.
const BUSY_STEP: Duration = Duration::from_millis(20);
/// The step named when a queue stayed busy for all of [`BUSY_WAIT`].
const STILL_BUSY: &str = "bind (the queue stayed busy for 2 s: another AF_XDP socket holds it)";

const AF_XDP: i32 = 44;
const SOL_XDP: i32 = 283;
const XDP_MMAP_OFFSETS: i32 = 1;
const XDP_RX_RING: i32 = 2;
const XDP_TX_RING: i32 = 3;
const XDP_UMEM_REG: i32 = 4;
const XDP_UMEM_FILL_RING: i32 = 5;
const XDP_UMEM_COMPLETION_RING: i32 = 6;
const XDP_STATISTICS: i32 = 7;
const XDP_OPTIONS: i32 = 8;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;
const XDP_PGOFF_RX_RING: u64 = 0;
const XDP_PGOFF_TX_RING: u64 = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: u64 = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: u64 = 0x1_8000_0000;
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const XDP_RING_NEED_WAKEUP: u32 = 1;
/// Headroom the kernel leaves before received data in every chunk.
pub const XDP_PACKET_HEADROOM: u32 = 256;

#[repr(C)]
#[derive(Default)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// One frame descriptor of the rx and tx rings (`struct xdp_desc`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct XdpDesc {
    /// Offset of the data in the UMEM.
    pub addr: u64,
    /// Length.
    pub len: u32,
    /// Options (0).
    pub options: u32,
}

/// The kernel's per-socket statistics (`struct xdp_statistics`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct XskStats {
    /// Dropped for other reasons than a full ring (e.g. too long).
    pub rx_dropped: u64,
    /// Invalid rx descriptors.
    pub rx_invalid_descs: u64,
    /// Invalid tx descriptors.
    pub tx_invalid_descs: u64,
    /// Dropped because the rx ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when a buffer was needed.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the tx ring was empty when the kernel looked.
    pub tx_ring_empty_descs: u64,
}

/// Errors opening an AF_XDP socket, by step.
#[derive(Debug, thiserror::Error)]
#[error("AF_XDP {step} on ifindex {ifindex} queue {queue}: {source}")]
pub struct XskError {
    /// The step that failed.
    pub step: &'static str,
    /// Interface index.
    pub ifindex: u32,
    /// Queue.
    pub queue: u32,
    /// The kernel's answer.
    #[source]
    pub source: std::io::Error,
}

impl XskError {
    /// The errno, when there is one.
    pub fn errno(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
    /// The queue stayed held by another socket for the whole wait.
    pub fn still_busy(&self) -> bool {
        self.step == STILL_BUSY
    }
}

/// A single-producer/single-consumer ring shared with the kernel.
struct Ring<T> {
    _map: Mmap,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut T,
    mask: u32,
    size: u32,
    /// Our copy of the index we own (producer for fill/tx, consumer for rx/comp).
    local: u32,
    /// Last value seen of the index the kernel owns.
    cached: u32,
}

// SAFETY: a Ring is used by one thread at a time (moved with its Xsk).
unsafe impl<T> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Map a ring; `ours_is_producer` for fill and tx (we produce), false for rx and completion.
    fn map(
        fd: RawFd,
        off: RingOffset,
        size: u32,
        pgoff: u64,
        ours_is_producer: bool,
    ) -> std::io::Result<Self> {
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        let map = Mmap::socket(fd, len, pgoff)?;
        let base = map.ptr();
        // SAFETY: the offsets come from the kernel (XDP_MMAP_OFFSETS) and lie
        // within the mapping of `len` bytes; the indices are u32 aligned.
        let (producer, consumer, flags, desc) = unsafe {
            (
                base.add(off.producer as usize) as *const AtomicU32,
                base.add(off.consumer as usize) as *const AtomicU32,
                base.add(off.flags as usize) as *const AtomicU32,
                base.add(off.desc as usize) as *mut T,
            )
        };
        // SAFETY: both indices are valid atomics inside the mapping.
        let (p, c) = unsafe {
            (
                (*producer).load(Ordering::Acquire),
                (*consumer).load(Ordering::Acquire),
            )
        };
        // A fresh ring starts at 0/0; take whatever the kernel says anyway.
        let (local, cached) = if ours_is_producer { (p, c) } else { (c, p) };
        Ok(Ring {
            _map: map,
            producer,
            consumer,
            flags,
            desc,
            mask: size - 1,
            size,
            local,
            cached,
        })
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: flags lies in the mapping.
        unsafe { (*self.flags).load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0 }
    }

    // ---- producer side (fill, tx): `local` = our producer, `cached` = kernel consumer ----

    fn free(&mut self) -> u32 {
        // SAFETY: the consumer index lies in the mapping.
        self.cached = unsafe { (*self.consumer).load(Ordering::Acquire) };
        self.size - self.local.wrapping_sub(self.cached)
    }

    /// Entries we produced that the kernel has not consumed yet.
    fn pending(&self) -> u32 {
        // SAFETY: the consumer index lies in the mapping.
        let c = unsafe { (*self.consumer).load(Ordering::Acquire) };
        self.local.wrapping_sub(c)
    }

    /// Write as many of `items` as there is room for and publish them;
    /// returns how many.
    fn produce(&mut self, items: &[T]) -> usize {
        let n = (self.free() as usize).min(items.len());
        for v in &items[..n] {
            let i = (self.local & self.mask) as usize;
            // SAFETY: i < size, within the descriptor array; free() made room.
            unsafe { self.desc.add(i).write(*v) };
            self.local = self.local.wrapping_add(1);
        }
        // SAFETY: the producer index lies in the mapping; Release publishes the writes.
        unsafe { (*self.producer).store(self.local, Ordering::Release) };
        n
    }

    // ---- consumer side (rx, completion): `local` = our consumer, `cached` = kernel producer ----

    fn available(&mut self) -> u32 {
        // SAFETY: the producer index lies in the mapping; Acquire sees the entries.
        self.cached = unsafe { (*self.producer).load(Ordering::Acquire) };
        self.cached.wrapping_sub(self.local)
    }

    /// Append up to `max` published entries to `out`, still ours to
    /// release; returns how many.
    fn peek(&mut self, out: &mut Vec<T>, max: u32) -> u32 {
        let n = self.available().min(max);
        for k in 0..n {
            let i = (self.local.wrapping_add(k) & self.mask) as usize;
            // SAFETY: i < size; the entry was published by the kernel (available()).
            out.push(unsafe { self.desc.add(i).read() });
        }
        n
    }

    fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        // SAFETY: the consumer index lies in the mapping; Release hands the entries back.
        unsafe { (*self.consumer).store(self.local, Ordering::Release) };
    }
}

/// What to open.
#[derive(Debug, Clone, Copy)]
pub struct XskConfig {
    /// Chunks in the UMEM (power of two).
    pub frames: u32,
    /// Bytes per chunk (2048 or 4096).
    pub chunk: u32,
    /// Open an rx ring (and a fill ring).
    pub rx: bool,
    /// Open a tx ring (and a completion ring).
    pub tx: bool,
    /// Ask for zero-copy (true) or copy mode (false).
    pub zero_copy: bool,
}

/// One AF_XDP socket with its UMEM and rings.
pub struct Xsk {
    /// First: fields drop in declaration order, and the rings' mappings
    /// reference the socket, which goes before the UMEM.
    rings: Rings,
    fd: OwnedFd,
    umem: Mmap,
    chunk: u32,
    frames: u32,
    zero_copy: bool,
}

/// The interface queue a socket is for: the context of its errors.
#[derive(Debug, Clone, Copy)]
struct Queue {
    ifindex: u32,
    queue: u32,
}

impl Queue {
    /// The error of `step` failing on this queue.
    fn err(self, step: &'static str) -> impl Fn(std::io::Error) -> XskError {
        move |source| XskError {
            step,
            ifindex: self.ifindex,
            queue: self.queue,
            source,
        }
    }
}

/// The four rings of a socket, mapped (None: the direction is not used).
struct Rings {
    rx: Option<Ring<XdpDesc>>,
    tx: Option<Ring<XdpDesc>>,
    fill: Option<Ring<u64>>,
    comp: Option<Ring<u64>>,
}

/// The fill ring's size when the socket does not receive: the kernel wants
/// a fill ring on every UMEM's first socket, a small one does.
fn idle_fill(n: u32) -> u32 {
    1u32.max(n.min(64)).next_power_of_two()
}

/// The completion ring's size when the socket does not send.
const IDLE_COMPLETION: u32 = 64;

/// Phase 1: allocate the UMEM, register it and size the rings.
fn register_umem(raw: RawFd, cfg: XskConfig, at: Queue) -> Result<Mmap, XskError> {
    let umem = Mmap::anonymous(cfg.frames as usize * cfg.chunk as usize)
        .map_err(at.err("UMEM allocation"))?;
    let reg = UmemReg {
        addr: umem.ptr() as u64,
        len: umem.len() as u64,
        chunk_size: cfg.chunk,
        ..Default::default()
    };
    setsockopt(raw, SOL_XDP, XDP_UMEM_REG, &reg).map_err(at.err("UMEM registration"))?;
    let n = cfg.frames;
    if cfg.rx {
        setsockopt(raw, SOL_XDP, XDP_UMEM_FILL_RING, &n).map_err(at.err("fill ring"))?;
        setsockopt(raw, SOL_XDP, XDP_RX_RING, &n).map_err(at.err("rx ring"))?;
    }
    if cfg.tx {
        setsockopt(raw, SOL_XDP, XDP_UMEM_COMPLETION_RING, &n)
            .map_err(at.err("completion ring"))?;
        setsockopt(raw, SOL_XDP, XDP_TX_RING, &n).map_err(at.err("tx ring"))?;
    }
    if !cfg.rx {
        let one = idle_fill(n);
        setsockopt(raw, SOL_XDP, XDP_UMEM_FILL_RING, &one).map_err(at.err("fill ring"))?;
    }
    if !cfg.tx {
        setsockopt(raw, SOL_XDP, XDP_UMEM_COMPLETION_RING, &IDLE_COMPLETION)
            .map_err(at.err("completion ring"))?;
    }
    Ok(umem)
}

/// Phase 2: map the rings the kernel sized.
fn map_rings(raw: RawFd, cfg: XskConfig, at: Queue) -> Result<Rings, XskError> {
    let n = cfg.frames;
    let mut off = MmapOffsets::default();
    getsockopt(raw, SOL_XDP, XDP_MMAP_OFFSETS, &mut off).map_err(at.err("ring offsets"))?;
    let fill_n = if cfg.rx { n } else { idle_fill(n) };
    let comp_n = if cfg.tx { n } else { IDLE_COMPLETION };
    let fill = Some(
        Ring::<u64>::map(raw, off.fr, fill_n, XDP_UMEM_PGOFF_FILL_RING, true)
            .map_err(at.err("fill ring mmap"))?,
    );
    let comp = Some(
        Ring::<u64>::map(raw, off.cr, comp_n, XDP_UMEM_PGOFF_COMPLETION_RING, false)
            .map_err(at.err("completion ring mmap"))?,
    );
    let rx = if cfg.rx {
        Some(Ring::map(raw, off.rx, n, XDP_PGOFF_RX_RING, false).map_err(at.err("rx ring mmap"))?)
    } else {
        None
    };
    let tx = if cfg.tx {
        Some(Ring::map(raw, off.tx, n, XDP_PGOFF_TX_RING, true).map_err(at.err("tx ring mmap"))?)
    } else {
        None
    };
    Ok(Rings { rx, tx, fill, comp })
}

/// Phase 3: bind to the queue, retrying while it is busy until `until`.
fn bind_queue(
    raw: RawFd,
    cfg: XskConfig,
    at: Queue,
    until: Option<Instant>,
) -> Result<(), XskError> {
    let sa = SockaddrXdp {
        family: AF_XDP as u16,
        flags: XDP_USE_NEED_WAKEUP
            | if cfg.zero_copy {
                XDP_ZEROCOPY
            } else {
                XDP_COPY
            },
        ifindex: at.ifindex,
        queue_id: at.queue,
        shared_umem_fd: 0,
    };
    let bind = || {
        // SAFETY: sa is a valid sockaddr_xdp for the call.
        let r = unsafe {
            libc::bind(
                raw,
                (&sa as *const SockaddrXdp).cast(),
                std::mem::size_of::<SockaddrXdp>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(at.err("bind")(std::io::Error::last_os_error()));
        }
        Ok(())
    };
    match until {
        Some(until) => retry_busy(until, bind, Instant::now, std::thread::sleep),
        None => bind(),
    }
}

impl std::fmt::Debug for Xsk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Xsk")
            .field("fd", &self.fd.as_raw_fd())
            .field("frames", &self.frames)
            .field("zero_copy", &self.zero_copy)
            .finish()
    }
}

/// Run `attempt` until it succeeds, fails with anything but a busy bind,
/// or `until` has passed (`now` and `sleep` are the clock, injected so the
/// rule is tested without one). A bind still busy at the end is named so.
fn retry_busy<T>(
    until: Instant,
    mut attempt: impl FnMut() -> Result<T, XskError>,
    now: impl Fn() -> Instant,
    sleep: impl Fn(Duration),
) -> Result<T, XskError> {
    loop {
        match attempt() {
            Err(e) if e.step == "bind" && e.errno() == Some(libc::EBUSY) => {
                let t = now();
                if t >= until {
                    return Err(XskError {
                        step: STILL_BUSY,
                        ..e
                    });
                }
                sleep(BUSY_STEP.min(until - t));
            }
            r => return r,
        }
    }
}

impl Xsk {
    /// Open and bind a socket on (`ifindex`, `queue`); a bind the kernel
    /// answers with EBUSY (the queue's previous socket is still being
    /// released) is tried again until `until`.
    /// Only the bind is repeated: the socket, its UMEM and rings stay.
    pub fn open_waiting(
        ifindex: u32,
        queue: u32,
        cfg: XskConfig,
        until: Instant,
    ) -> Result<Xsk, XskError> {
        Self::open_until(ifindex, queue, cfg, Some(until))
    }

    /// Open and bind a socket on (`ifindex`, `queue`), once.
    #[cfg(test)]
    pub fn open(ifindex: u32, queue: u32, cfg: XskConfig) -> Result<Xsk, XskError> {
        Self::open_until(ifindex, queue, cfg, None)
    }

    fn open_until(
        ifindex: u32,
        queue: u32,
        cfg: XskConfig,
        until: Option<Instant>,
    ) -> Result<Xsk, XskError> {
        let at = Queue { ifindex, queue };
        let fd = socket(AF_XDP, libc::SOCK_RAW, 0).map_err(at.err("socket"))?;
        let raw = fd.as_raw_fd();
        let umem = register_umem(raw, cfg, at)?;
        let rings = map_rings(raw, cfg, at)?;
        bind_queue(raw, cfg, at, until)?;
        let mut opts = 0u32;
        let zero_copy = getsockopt(raw, SOL_XDP, XDP_OPTIONS, &mut opts).is_ok()
            && opts & XDP_OPTIONS_ZEROCOPY != 0;
        Ok(Xsk {
            rings,
            fd,
            umem,
            chunk: cfg.chunk,
            frames: cfg.frames,
            zero_copy,
        })
    }

    /// The socket (for the XSKMAP and poll).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
    /// True when bound in zero-copy mode.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }
    /// Bytes per chunk.
    pub fn chunk(&self) -> u32 {
        self.chunk
    }
    /// Chunks in the UMEM.
    pub fn frames(&self) -> u32 {
        self.frames
    }

    /// The UMEM bytes of chunk-relative address `addr`, `len` long.
    ///
    /// # Panics
    /// Never for addresses the kernel handed back for this UMEM; a bad one is clamped.
    pub fn data(&self, addr: u64, len: u32) -> &[u8] {
        let start = (addr as usize).min(self.umem.len());
        let len = (len as usize).min(self.umem.len() - start);
        // SAFETY: start + len is within the UMEM mapping; the kernel does not
        // write a chunk while it is on the rx ring (owned by user space).
        unsafe { std::slice::from_raw_parts(self.umem.ptr().add(start), len) }
    }

    /// Mutable bytes of chunk `i` (tx frames the kernel does not own).
    pub fn chunk_mut(&mut self, i: u32) -> &mut [u8] {
        let start = (i.min(self.frames - 1) as usize) * self.chunk as usize;
        // SAFETY: the chunk lies within the UMEM; &mut self makes it exclusive
        // on our side, and the caller only writes chunks not on a kernel ring.
        unsafe { std::slice::from_raw_parts_mut(self.umem.ptr().add(start), self.chunk as usize) }
    }

    /// Put chunk addresses on the fill ring (as many as fit); returns how many.
    pub fn fill(&mut self, addrs: &[u64]) -> usize {
        self.rings.fill.as_mut().map_or(0, |f| f.produce(addrs))
    }

    /// Up to `max` received descriptors; call [`Xsk::rx_release`] with the count after use.
    pub fn rx_peek(&mut self, out: &mut Vec<XdpDesc>, max: u32) -> u32 {
        out.clear();
        self.rings.rx.as_mut().map_or(0, |r| r.peek(out, max))
    }

    /// Hand `n` rx descriptors back.
    pub fn rx_release(&mut self, n: u32) {
        if let Some(r) = self.rings.rx.as_mut() {
            r.release(n);
        }
    }

    /// Queue frames for transmission (as many as fit); returns how many.
    pub fn tx_push(&mut self, descs: &[XdpDesc]) -> usize {
        self.rings.tx.as_mut().map_or(0, |t| t.produce(descs))
    }

    /// Frames on the tx ring the kernel has not taken yet.
    pub fn tx_pending(&self) -> u32 {
        self.rings.tx.as_ref().map_or(0, |t| t.pending())
    }

    /// True when the kernel asks for a sendto() to process the tx ring.
    pub fn tx_needs_wakeup(&self) -> bool {
        self.rings.tx.as_ref().is_some_and(|t| t.needs_wakeup())
    }

    /// Kick the kernel to transmit. An error of EAGAIN/EBUSY means "busy,
    /// kick again"; in copy mode EBUSY can also mean one frame was dropped
    /// by the driver (counted by the caller as a generator error).
    pub fn kick_tx(&self) -> std::io::Result<()> {
        // SAFETY: sendto with no data and no address is the AF_XDP wakeup.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r >= 0 {
            return Ok(());
        }
        Err(std::io::Error::last_os_error())
    }

    /// Completed tx chunk addresses (appended to `out`).
    pub fn completions(&mut self, out: &mut Vec<u64>) -> u32 {
        let Some(c) = self.rings.comp.as_mut() else {
            return 0;
        };
        let n = c.peek(out, u32::MAX);
        c.release(n);
        n
    }

    /// The kernel's statistics of this socket.
    pub fn stats(&self) -> std::io::Result<XskStats> {
        let mut s = XskStats::default();
        getsockopt(self.fd.as_raw_fd(), SOL_XDP, XDP_STATISTICS, &mut s)?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_struct_sizes() {
        assert_eq!(std::mem::size_of::<UmemReg>(), 32);
        assert_eq!(std::mem::size_of::<RingOffset>(), 32);
        assert_eq!(std::mem::size_of::<MmapOffsets>(), 128);
        assert_eq!(std::mem::size_of::<SockaddrXdp>(), 16);
        assert_eq!(std::mem::size_of::<XdpDesc>(), 16);
        assert_eq!(std::mem::size_of::<XskStats>(), 48);
    }

    fn busy(step: &'static str) -> XskError {
        XskError {
            step,
            ifindex: 2,
            queue: 3,
            source: std::io::Error::from_raw_os_error(libc::EBUSY),
        }
    }

    /// A fake clock: `sleep` moves it on.
    struct Clock(std::cell::Cell<Instant>);

    impl Clock {
        fn now(&self) -> Instant {
            self.0.get()
        }
        fn sleep(&self, d: Duration) {
            self.0.set(self.0.get() + d);
        }
    }

    #[test]
    fn a_busy_bind_is_tried_again_until_the_queue_is_free() {
        let clock = Clock(std::cell::Cell::new(Instant::now()));
        let until = clock.now() + BUSY_WAIT;
        let mut tries = 0;
        let r = retry_busy(
            until,
            || {
                tries += 1;
                if tries < 5 {
                    Err(busy("bind"))
                } else {
                    Ok(tries)
                }
            },
            || clock.now(),
            |d| clock.sleep(d),
        );
        assert_eq!(r.unwrap(), 5);
        assert!(clock.now() < until);
    }

    #[test]
    fn a_queue_busy_past_the_wait_is_refused_and_other_errors_at_once() {
        let clock = Clock(std::cell::Cell::new(Instant::now()));
        let until = clock.now() + BUSY_WAIT;
        let mut tries = 0u32;
        let e = retry_busy::<()>(
            until,
            || {
                tries += 1;
                Err(busy("bind"))
            },
            || clock.now(),
            |d| clock.sleep(d),
        )
        .unwrap_err();
        assert_eq!(e.step, STILL_BUSY);
        assert!(e.to_string().contains("stayed busy for 2 s"), "{e}");
        assert!(clock.now() >= until);
        assert_eq!(
            u128::from(tries),
            BUSY_WAIT.as_millis() / BUSY_STEP.as_millis() + 1
        );
        // EBUSY from another step, or another errno, is not waited for.
        for e in [
            busy("UMEM registration"),
            XskError {
                source: std::io::Error::from_raw_os_error(libc::EINVAL),
                ..busy("bind")
            },
        ] {
            let mut n = 0;
            let step = e.step;
            let mut once = Some(e);
            let r = retry_busy::<()>(
                until,
                || {
                    n += 1;
                    Err(once.take().unwrap_or_else(|| busy("again")))
                },
                || clock.now(),
                |d| clock.sleep(d),
            );
            assert_eq!((n, r.unwrap_err().step), (1, step));
        }
    }

    #[test]
    fn binding_to_a_missing_interface_names_the_step() {
        let cfg = XskConfig {
            frames: 64,
            chunk: 2048,
            rx: true,
            tx: false,
            zero_copy: false,
        };
        match Xsk::open(999_999, 0, cfg) {
            Ok(_) => panic!("bound to ifindex 999999"),
            Err(e) => {
                // Unprivileged: the socket call itself fails; root: bind does.
                assert!(e.step == "bind" || e.step == "socket", "{e}");
                assert!(e.to_string().contains("ifindex 999999"), "{e}");
            }
        }
    }
}

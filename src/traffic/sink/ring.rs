//! AF_PACKET rings: `PACKET_TX_RING` (TPACKET_V2) with `PACKET_QDISC_BYPASS`
//! for the generator, and `PACKET_RX_RING` (TPACKET_V3, block-based) in a
//! `PACKET_FANOUT` group for the sink. Hand-written over libc because the
//! ring protocol is a handful of status words in shared memory, and the
//! hot path must not allocate or copy more than the frame.
//!
//! Each ring is used by one thread. Dropping it unmaps the ring and closes
//! the socket (which leaves the fanout group).

use super::sys::{getsockopt, setsockopt, socket, Mmap};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};

const SOL_PACKET: i32 = 263;
const PACKET_RX_RING: i32 = 5;
const PACKET_STATISTICS: i32 = 6;
const PACKET_VERSION: i32 = 10;
const PACKET_TX_RING: i32 = 13;
const PACKET_LOSS: i32 = 14;
const PACKET_FANOUT: i32 = 18;
const PACKET_QDISC_BYPASS: i32 = 20;
const TPACKET_V2: i32 = 1;
const TPACKET_V3: i32 = 2;
/// Fanout by the receive queue the driver recorded.
pub const PACKET_FANOUT_QM: u32 = 5;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_WRONG_FORMAT: u32 = 4;
const TP_STATUS_USER: u32 = 1;
/// Data offset in a TPACKET_V2 tx slot: TPACKET_ALIGN(sizeof(tpacket2_hdr)).
const TX_DATA_OFF: usize = 32;
const ETH_P_IP: u16 = 0x0800;

#[repr(C)]
struct Req {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
}

#[repr(C)]
struct Req3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

/// Errors of a packet ring, by step.
#[derive(Debug, thiserror::Error)]
#[error("AF_PACKET {step} on ifindex {ifindex}: {source}")]
pub struct RingError {
    /// The step that failed.
    pub step: &'static str,
    /// Interface index.
    pub ifindex: u32,
    /// The kernel's answer.
    #[source]
    pub source: std::io::Error,
}

impl RingError {
    /// The error of `step` failing on `ifindex`.
    fn at(ifindex: u32, step: &'static str) -> impl Fn(std::io::Error) -> RingError {
        move |source| RingError {
            step,
            ifindex,
            source,
        }
    }
}

fn bind_ll(fd: RawFd, ifindex: u32, proto: u16) -> std::io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is valid.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_protocol = proto.to_be();
    sa.sll_ifindex = ifindex as i32;
    // SAFETY: sa is a valid sockaddr_ll for the call.
    let r = unsafe {
        libc::bind(
            fd,
            (&sa as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A transmit ring: fixed slots, each holding one frame.
pub struct TxRing {
    map: Mmap,
    fd: OwnedFd,
    slot: usize,
    slots: u32,
    next: u32,
    bypass: bool,
}

impl std::fmt::Debug for TxRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxRing")
            .field("slots", &self.slots)
            .field("bypass", &self.bypass)
            .finish()
    }
}

impl TxRing {
    /// Open a TX ring of `slots` slots for frames of `wire_len` bytes on
    /// `ifindex`, every slot pre-filled with `template`. `bypass` asks for
    /// PACKET_QDISC_BYPASS (refused quietly by old kernels: see [`TxRing::bypass`]).
    pub fn open(
        ifindex: u32,
        slots: u32,
        template: &[u8],
        bypass: bool,
    ) -> Result<TxRing, RingError> {
        let err = |step| RingError::at(ifindex, step);
        // Protocol 0: this socket never receives.
        let fd = socket(libc::AF_PACKET, libc::SOCK_RAW, 0).map_err(err("socket"))?;
        let raw = fd.as_raw_fd();
        setsockopt(raw, SOL_PACKET, PACKET_VERSION, &TPACKET_V2).map_err(err("PACKET_VERSION"))?;
        let bypass = bypass && setsockopt(raw, SOL_PACKET, PACKET_QDISC_BYPASS, &1i32).is_ok();
        // Skip a malformed slot instead of stopping the ring on it.
        let _ = setsockopt(raw, SOL_PACKET, PACKET_LOSS, &1i32);
        let slot = (TX_DATA_OFF + template.len()).next_power_of_two().max(128);
        let block = slot.max(1 << 16);
        let per_block = (block / slot) as u32;
        let blocks = slots.div_ceil(per_block).max(1);
        let req = Req {
            block_size: block as u32,
            block_nr: blocks,
            frame_size: slot as u32,
            frame_nr: blocks * per_block,
        };
        setsockopt(raw, SOL_PACKET, PACKET_TX_RING, &req).map_err(err("PACKET_TX_RING"))?;
        let map = Mmap::socket(raw, block * blocks as usize, 0).map_err(err("ring mmap"))?;
        bind_ll(raw, ifindex, 0).map_err(err("bind"))?;
        let mut r = TxRing {
            map,
            fd,
            slot,
            slots: req.frame_nr,
            next: 0,
            bypass,
        };
        for i in 0..r.slots {
            r.frame_mut(i)[..template.len()].copy_from_slice(template);
            r.set_len(i, template.len() as u32);
        }
        Ok(r)
    }

    /// True when PACKET_QDISC_BYPASS is on.
    pub fn bypass(&self) -> bool {
        self.bypass
    }

    fn base(&self, i: u32) -> *mut u8 {
        // SAFETY: i < slots, each slot lies in the mapping.
        unsafe { self.map.ptr().add(i as usize * self.slot) }
    }

    fn status(&self, i: u32) -> &AtomicU32 {
        // SAFETY: tp_status is the first, 4-aligned u32 of the slot.
        unsafe { &*(self.base(i) as *const AtomicU32) }
    }

    fn set_len(&mut self, i: u32, len: u32) {
        // SAFETY: tp_len (u32 at 4) and tp_snaplen (u32 at 8) lie in the slot we own.
        unsafe {
            (self.base(i).add(4) as *mut u32).write(len);
            (self.base(i).add(8) as *mut u32).write(len);
        }
    }

    /// The frame bytes of slot `i`.
    pub fn frame_mut(&mut self, i: u32) -> &mut [u8] {
        // SAFETY: the data area of slot i lies in the mapping; &mut self
        // makes it ours, and callers only touch slots the kernel released.
        unsafe {
            std::slice::from_raw_parts_mut(self.base(i).add(TX_DATA_OFF), self.slot - TX_DATA_OFF)
        }
    }

    /// The next slot when the kernel is done with it (None: the ring is full).
    /// A slot the kernel marked malformed counts in `wrong`.
    pub fn next_free(&mut self, wrong: &mut u64) -> Option<u32> {
        let i = self.next;
        let s = self.status(i).load(Ordering::Acquire);
        if s == TP_STATUS_WRONG_FORMAT {
            *wrong += 1;
            self.status(i).store(TP_STATUS_AVAILABLE, Ordering::Relaxed);
            return Some(i);
        }
        (s == TP_STATUS_AVAILABLE).then_some(i)
    }

    /// Hand slot `i` (the one [`TxRing::next_free`] returned) to the kernel.
    pub fn queue(&mut self, i: u32) {
        self.status(i)
            .store(TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.next = (i + 1) % self.slots;
    }

    /// Ask the kernel to send what is queued; never blocks.
    pub fn flush(&self) -> std::io::Result<()> {
        // SAFETY: send with no buffer is the TX_RING doorbell.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Slots the kernel still owns (queued or in flight).
    pub fn in_flight(&self) -> u32 {
        (0..self.slots)
            .filter(|i| self.status(*i).load(Ordering::Acquire) != TP_STATUS_AVAILABLE)
            .count() as u32
    }

    /// Wait until the ring has room (POLLOUT) for at most `ms`.
    pub fn wait(&self, ms: i32) {
        super::sys::poll_fd(self.fd.as_raw_fd(), libc::POLLOUT, ms);
    }
}

/// A TPACKET_V3 receive ring in a fanout group.
pub struct RxRing {
    map: Mmap,
    fd: OwnedFd,
    block: usize,
    blocks: u32,
    next: u32,
}

impl std::fmt::Debug for RxRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxRing")
            .field("blocks", &self.blocks)
            .finish()
    }
}

/// A fanout group id for this process: unique enough among the groups of one host.
pub fn fanout_group_id() -> u16 {
    static N: AtomicU16 = AtomicU16::new(0);
    (std::process::id() as u16)
        .rotate_left(5)
        .wrapping_add(N.fetch_add(1, Ordering::Relaxed).wrapping_mul(7919))
}

/// Size of one TPACKET_V3 block (bytes), unless a frame needs more.
pub const TPACKET_BLOCK: usize = 64 << 10;
/// Fewest blocks per receive ring (256 x 4 ms retire timeout: about a second).
pub const TPACKET_MIN_BLOCKS: usize = 256;
/// Most blocks per receive ring.
pub const TPACKET_MAX_BLOCKS: usize = 1024;

impl RxRing {
    /// Open a receive ring for IPv4 frames on `ifindex`, able to hold
    /// `frames` frames of `wire_len` bytes, and join fanout `group` (`mode`
    /// in the high 16 bits, as PACKET_FANOUT takes it).
    ///
    /// Bound to ETH_P_IP, not ETH_P_ALL, so the socket receives after the
    /// host's tc and netfilter ingress hooks (drops there are upstream of
    /// the sink, like a NIC's) and never sees non-IP traffic.
    pub fn open(
        ifindex: u32,
        frames: u32,
        wire_len: usize,
        group: u16,
        mode: u32,
    ) -> Result<RxRing, RingError> {
        let err = |step| RingError::at(ifindex, step);
        let fd = socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(ETH_P_IP.to_be()))
            .map_err(err("socket"))?;
        let raw = fd.as_raw_fd();
        setsockopt(raw, SOL_PACKET, PACKET_VERSION, &TPACKET_V3).map_err(err("PACKET_VERSION"))?;
        // 48 B tpacket3_hdr + MAC padding; frames are packed in a block.
        // Blocks retire after `retire_blk_tov` ms even when nearly empty, so
        // at low rates the ring holds blocks x 4 ms of traffic: many small
        // blocks (at least TPACKET_MIN_BLOCKS, about a second) keep a sink
        // thread that is descheduled for a while on a busy host from losing
        // frames, while large frames still get `frames` of room.
        let per_frame = (wire_len + 96).next_power_of_two();
        let block = TPACKET_BLOCK.max(per_frame * 4);
        let blocks = ((frames as usize * per_frame).div_ceil(block))
            .clamp(TPACKET_MIN_BLOCKS, TPACKET_MAX_BLOCKS) as u32;
        let req = Req3 {
            block_size: block as u32,
            block_nr: blocks,
            frame_size: 2048.min(block as u32),
            frame_nr: (block as u32 / 2048.min(block as u32)) * blocks,
            retire_blk_tov: 4,
            sizeof_priv: 0,
            feature_req_word: 0,
        };
        setsockopt(raw, SOL_PACKET, PACKET_RX_RING, &req).map_err(err("PACKET_RX_RING"))?;
        let map = Mmap::socket(raw, block * blocks as usize, 0).map_err(err("ring mmap"))?;
        bind_ll(raw, ifindex, ETH_P_IP).map_err(err("bind"))?;
        let arg = u32::from(group) | (mode << 16);
        setsockopt(raw, SOL_PACKET, PACKET_FANOUT, &arg).map_err(err("PACKET_FANOUT"))?;
        Ok(RxRing {
            map,
            fd,
            block,
            blocks,
            next: 0,
        })
    }

    fn block_ptr(&self, i: u32) -> *mut u8 {
        // SAFETY: i < blocks; each block lies in the mapping.
        unsafe { self.map.ptr().add(i as usize * self.block) }
    }

    fn block_status(&self, i: u32) -> &AtomicU32 {
        // SAFETY: hdr.block_status is the u32 at offset 8 of the block descriptor.
        unsafe { &*(self.block_ptr(i).add(8) as *const AtomicU32) }
    }

    /// Visit every frame of the next ready block (if any) and give the block
    /// back; returns the number of frames, 0 when no block is ready.
    pub fn next_block(&mut self, mut f: impl FnMut(&[u8])) -> u32 {
        let i = self.next;
        if self.block_status(i).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
            return 0;
        }
        let b = self.block_ptr(i);
        let rd = |off: usize| -> u32 {
            // SAFETY: off is inside this block (kernel-provided offsets, checked below).
            unsafe { (b.add(off) as *const u32).read_unaligned() }
        };
        let n = rd(12);
        let mut off = rd(16) as usize;
        for _ in 0..n {
            if off + 48 > self.block {
                break;
            }
            let next = rd(off) as usize;
            let snap = rd(off + 12) as usize;
            // SAFETY: tp_mac is a u16 at 24 of the packet header.
            let mac = unsafe { (b.add(off + 24) as *const u16).read_unaligned() } as usize;
            if off + mac + snap <= self.block {
                // SAFETY: the frame lies within the block, which is ours until released.
                f(unsafe { std::slice::from_raw_parts(b.add(off + mac), snap) });
            }
            if next == 0 {
                break;
            }
            off += next;
        }
        self.block_status(i).store(0, Ordering::Release);
        self.next = (i + 1) % self.blocks;
        n
    }

    /// The socket.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Frames the kernel dropped since the last call (the counter resets on read).
    pub fn take_drops(&self) -> u64 {
        let mut s = [0u32; 3];
        match getsockopt(self.fd.as_raw_fd(), SOL_PACKET, PACKET_STATISTICS, &mut s) {
            Ok(_) => u64::from(s[1]),
            Err(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_struct_sizes() {
        assert_eq!(std::mem::size_of::<Req>(), 16);
        assert_eq!(std::mem::size_of::<Req3>(), 28);
    }

    #[test]
    fn fanout_ids_differ() {
        assert_ne!(fanout_group_id(), fanout_group_id());
    }
}

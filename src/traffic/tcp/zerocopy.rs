//! MSG_ZEROCOPY sends and their completion notifications.
//!
//! With SO_ZEROCOPY the kernel pins the user pages instead of copying them and
//! later reports, on the socket's error queue, which sends it is done with
//! (a range of send sequence numbers). Until then the buffer must not change:
//! ours never does, but every notification must still be read, or the socket's
//! option memory fills up and `send` fails with ENOBUFS. The notification also
//! says whether the kernel copied after all (SO_EE_CODE_ZEROCOPY_COPIED): it
//! always does for loopback and veth, and users should know that.

use crate::traffic::{ConnCounters, EngineControl};
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;

const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;
/// Outstanding sends before the error queue is read.
const DRAIN_BATCH: u64 = 64;
/// Outstanding notifications before we stop and wait for the kernel.
const MAX_OUTSTANDING: u64 = 1024;

/// Turn on SO_ZEROCOPY (Linux ≥ 4.14).
pub(super) fn enable(fd: RawFd) -> std::io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: valid fd, option value points to a c_int of the stated size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ZEROCOPY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Per-socket bookkeeping of zero-copy sends.
#[derive(Debug, Default)]
pub(super) struct Tracker {
    sent: u64,
    completed: u64,
    copied: u64,
}

impl Tracker {
    /// One `send(MSG_ZEROCOPY)`; waits for notifications first when too many are outstanding.
    pub(super) fn send(&mut self, fd: RawFd, buf: &[u8]) -> std::io::Result<usize> {
        if self.sent.saturating_sub(self.completed) >= MAX_OUTSTANDING {
            self.wait(fd, 100);
        }
        // SAFETY: buf is valid for its length and is never modified while the kernel holds it.
        let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_ZEROCOPY) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOBUFS) {
                // Option memory full of notifications: read them and retry later.
                self.wait(fd, 100);
                return Err(std::io::Error::from(std::io::ErrorKind::WouldBlock));
            }
            return Err(e);
        }
        self.sent += 1;
        // Read notifications in batches, not after every send (one recvmsg per write would double the syscalls).
        if self.sent.saturating_sub(self.completed) >= DRAIN_BATCH {
            self.drain(fd);
        }
        Ok(n as usize)
    }

    /// Wait up to `ms` for the error queue to become readable, then drain it.
    fn wait(&mut self, fd: RawFd, ms: i32) {
        let mut p = libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        };
        // SAFETY: one valid pollfd. POLLERR is always reported.
        unsafe { libc::poll(&mut p, 1, ms) };
        self.drain(fd);
    }

    /// Read every pending notification without blocking.
    fn drain(&mut self, fd: RawFd) {
        loop {
            let mut control = [0u8; 128];
            // SAFETY: msghdr is a plain C struct of integers and pointers for
            // which all-zero bytes are a valid value (null pointers, zero lengths).
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = control.len() as _;
            // SAFETY: msghdr points at a live control buffer; no data iovecs.
            let r = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
            if r < 0 {
                return;
            }
            // SAFETY: iterate the cmsgs the kernel wrote inside `control`.
            let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
            while !cmsg.is_null() {
                // SAFETY: cmsg is non-null and was returned by CMSG_FIRSTHDR or
                // CMSG_NXTHDR for `msg`, so it points at a complete cmsghdr
                // inside `control`, which outlives this borrow.
                let h = unsafe { &*cmsg };
                let is_recverr = (h.cmsg_level == libc::SOL_IP && h.cmsg_type == libc::IP_RECVERR)
                    || (h.cmsg_level == libc::SOL_IPV6 && h.cmsg_type == libc::IPV6_RECVERR);
                if is_recverr {
                    // SAFETY: IP_RECVERR payload is a sock_extended_err.
                    let ee: libc::sock_extended_err =
                        unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
                    if ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY && ee.ee_errno == 0 {
                        let n = u64::from(ee.ee_data.wrapping_sub(ee.ee_info)) + 1;
                        self.completed += n;
                        if ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0 {
                            self.copied += n;
                        }
                    }
                }
                // SAFETY: `msg` describes `control` (still alive) and `cmsg` is a
                // header inside it; CMSG_NXTHDR returns the next one or null.
                cmsg = unsafe { libc::CMSG_NXTHDR(&msg, cmsg) };
            }
        }
    }

    /// After the last send: collect the remaining notifications (bounded wait).
    pub(super) fn drain_all(&mut self, fd: RawFd, control: &EngineControl) {
        for _ in 0..20 {
            if self.completed >= self.sent || control.aborted() {
                break;
            }
            self.wait(fd, 50);
        }
    }

    /// Copy the totals into the shared counters.
    pub(super) fn publish(&self, ctr: &ConnCounters) {
        ctr.zc_completed.store(self.completed, Ordering::Relaxed);
        ctr.zc_copied.store(self.copied, Ordering::Relaxed);
    }
}

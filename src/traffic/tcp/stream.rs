//! Stream mode: one blocking thread per connection, sender or receiver.
//!
//! The hot loops do one syscall per buffer and one relaxed atomic store of the
//! running total; nothing else. Blocking calls wake every
//! [`WAKE_INTERVAL`](super::WAKE_INTERVAL) (SO_SNDTIMEO/SO_RCVTIMEO) so the stop
//! flags are honoured even when the peer stalls.

use super::{is_disconnect, is_timeout, zerocopy, TcpSpec};
use crate::traffic::{
    spawn_worker, ConnCounters, ConnRole, EngineControl, EngineCounters, EngineError,
};
use crate::units::CpuId;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Smallest receive buffer: large reads amortise the syscall; the kernel
/// hands over whatever is queued, up to this much, per `read`.
pub(crate) const MIN_RECV_BUF: usize = 256 * 1024;

type Worker = JoinHandle<Result<(), EngineError>>;

pub(super) fn spawn(
    spec: &TcpSpec,
    roles: &[ConnRole],
    conns: Vec<TcpStream>,
    cpus: &[CpuId],
    counters: &Arc<EngineCounters>,
    control: &EngineControl,
) -> Result<Vec<Worker>, EngineError> {
    let senders = roles
        .iter()
        .filter(|r| **r == ConnRole::Sender)
        .count()
        .max(1) as u64;
    // --bytes is a total per direction, split evenly over that direction's streams.
    let quota = spec.bytes.map(|b| b.0.div_ceil(senders));
    let mut threads = Vec::with_capacity(conns.len());
    for (i, (conn, role)) in conns.into_iter().zip(roles.iter().copied()).enumerate() {
        let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
        let counters = Arc::clone(counters);
        let ctl = control.clone();
        let len = spec.len.as_usize().max(1);
        let (zc, skip) = (spec.zerocopy, spec.skip_rx_copy);
        let t = match role {
            ConnRole::Sender => spawn_worker(format!("ws-tx-{i}"), cpu, control, move || {
                send_loop(&conn, i, &counters.conns[i], &ctl, len, quota, zc)
            })?,
            _ => spawn_worker(format!("ws-rx-{i}"), cpu, control, move || {
                recv_loop(&conn, i, &counters.conns[i], &ctl, len, skip)
            })?,
        };
        threads.push(t);
    }
    Ok(threads)
}

fn send_loop(
    sock: &TcpStream,
    conn: usize,
    ctr: &ConnCounters,
    control: &EngineControl,
    len: usize,
    quota: Option<u64>,
    zc: bool,
) -> Result<(), EngineError> {
    let buf = super::super::alloc_buf(len, 0x5A, "a send buffer")?;
    let mut zc_state = zc.then(zerocopy::Tracker::default);
    let mut sent: u64 = 0;
    let mut w = sock;
    while !control.stopping() {
        let want = match quota {
            Some(q) if sent >= q => break,
            Some(q) => len.min(usize::try_from(q - sent).unwrap_or(len)),
            None => len,
        };
        let r = match zc_state.as_mut() {
            Some(t) => t.send(sock.as_raw_fd(), &buf[..want]),
            None => w.write(&buf[..want]),
        };
        match r {
            Ok(n) => {
                sent += n as u64;
                ctr.tx_bytes.store(sent, Ordering::Relaxed);
            }
            Err(e) if is_timeout(&e) => {}
            Err(e) if is_disconnect(&e) && control.stopping() => break,
            Err(source) => {
                return Err(EngineError::Io {
                    op: "write",
                    conn,
                    source,
                })
            }
        }
        if let Some(t) = zc_state.as_mut() {
            t.publish(ctr);
        }
    }
    if let Some(t) = zc_state.as_mut() {
        t.drain_all(sock.as_raw_fd(), control);
        t.publish(ctr);
    }
    // FIN after the queued data: the receiver counts everything we wrote, then sees EOF.
    match sock.shutdown(Shutdown::Write) {
        Ok(()) => Ok(()),
        Err(e) if is_disconnect(&e) || e.kind() == std::io::ErrorKind::NotConnected => Ok(()),
        Err(source) => Err(EngineError::Io {
            op: "shutdown",
            conn,
            source,
        }),
    }
}

fn recv_loop(
    sock: &TcpStream,
    conn: usize,
    ctr: &ConnCounters,
    control: &EngineControl,
    len: usize,
    skip_copy: bool,
) -> Result<(), EngineError> {
    let mut buf = super::super::alloc_buf(len.max(MIN_RECV_BUF), 0, "a receive buffer")?;
    let mut got: u64 = 0;
    let mut r = sock;
    loop {
        let res = if skip_copy {
            recv_trunc(sock, &mut buf)
        } else {
            r.read(&mut buf)
        };
        match res {
            Ok(0) => return Ok(()),
            Ok(n) => {
                got += n as u64;
                ctr.rx_bytes.store(got, Ordering::Relaxed);
            }
            Err(e) if is_timeout(&e) => {
                if control.aborted() {
                    return Ok(());
                }
            }
            Err(e) if is_disconnect(&e) && control.stopping() => return Ok(()),
            Err(source) => {
                return Err(EngineError::Io {
                    op: "read",
                    conn,
                    source,
                })
            }
        }
    }
}

/// `recv(MSG_TRUNC)`: on TCP the kernel drops up to `buf.len()` bytes without
/// copying them and returns how many it dropped.
fn recv_trunc(sock: &TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    // SAFETY: buf is valid for buf.len() bytes; the kernel does not write into it with MSG_TRUNC on TCP.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_TRUNC,
        )
    };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

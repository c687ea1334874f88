//! pingpong and rr: connections multiplexed over a few worker threads.
//!
//! Both modes are the same state machine with different accounting:
//! * rr client: keeps `depth` requests of `size` bytes in flight per
//!   connection; each complete `resp_size` response ends the oldest request
//!   and its latency goes into the thread's histogram.
//! * rr server: for every complete request, owes one response.
//! * pingpong (both ends): owes back every byte it reads; the client starts
//!   by writing one message (muduo's pingpong benchmark).
//!
//! Payload bytes are never inspected, so the "echo" writes zeros of the owed
//! length: same byte count on the wire, no buffer copies.
//!
//! A worker that owns exactly one rr connection with depth 1 runs a blocking
//! `write`/`read` loop instead of mio (one syscall less per round trip).

use super::{is_disconnect, is_timeout, TcpMode, TcpSpec, WAKE_INTERVAL};
use crate::traffic::{
    alloc_buf, new_latency_histogram, spawn_worker, ConnRole, EngineControl, EngineCounters,
    EngineError,
};
use crate::units::CpuId;
use hdrhistogram::Histogram;
use mio::{Events, Interest, Poll, Token};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a closing client waits for the server's FIN before giving up.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(3);
/// How often a worker merges its private latency histogram into the shared one.
const HIST_FLUSH: Duration = Duration::from_millis(10);
pub(crate) const IO_BUF: usize = 256 * 1024;

#[derive(Debug, Clone, Copy)]
enum Behaviour {
    RrClient { req: u64, resp: u64, depth: u32 },
    RrServer { req: u64, resp: u64 },
    Echo { client: bool, size: u64 },
}

type Worker = JoinHandle<Result<(), EngineError>>;

pub(super) fn spawn(
    spec: &TcpSpec,
    roles: &[ConnRole],
    conns: Vec<TcpStream>,
    workers: usize,
    cpus: &[CpuId],
    counters: &Arc<EngineCounters>,
    control: &EngineControl,
) -> Result<Vec<Worker>, EngineError> {
    let client = roles.first() == Some(&ConnRole::Client);
    let behaviour = match (spec.mode, client) {
        (TcpMode::Rr, true) => Behaviour::RrClient {
            req: spec.size.0.max(1),
            resp: spec.resp_size.0.max(1),
            depth: spec.depth.max(1),
        },
        (TcpMode::Rr, false) => Behaviour::RrServer {
            req: spec.size.0.max(1),
            resp: spec.resp_size.0.max(1),
        },
        _ => Behaviour::Echo {
            client,
            size: spec.size.0.max(1),
        },
    };
    let mut groups: Vec<Vec<(usize, TcpStream)>> = (0..workers).map(|_| Vec::new()).collect();
    for (i, c) in conns.into_iter().enumerate() {
        groups[i % workers].push((i, c));
    }
    let mut threads = Vec::with_capacity(workers);
    for (w, group) in groups.into_iter().enumerate() {
        let cpu = (!cpus.is_empty()).then(|| cpus[w % cpus.len()]);
        let counters = Arc::clone(counters);
        let ctl = control.clone();
        let name = format!("ws-{}-{w}", if client { "cli" } else { "srv" });
        let blocking = group.len() == 1
            && matches!(
                behaviour,
                Behaviour::RrClient { depth: 1, .. } | Behaviour::RrServer { .. }
            )
            && spec.depth == 1;
        threads.push(spawn_worker(name, cpu, control, move || {
            let mut w = WorkerCtx {
                counters: &counters,
                control: &ctl,
                worker: w,
                hist: new_latency_histogram(),
                last_flush: Instant::now(),
            };
            let r = if blocking {
                let (idx, sock) = group
                    .into_iter()
                    .next()
                    .ok_or_else(|| EngineError::Unsupported("empty worker".into()))?;
                w.blocking(idx, &sock, behaviour)
            } else {
                w.event_loop(group, behaviour)
            };
            w.flush_hist(true);
            r
        })?);
    }
    Ok(threads)
}

struct WorkerCtx<'a> {
    counters: &'a EngineCounters,
    control: &'a EngineControl,
    worker: usize,
    hist: Histogram<u64>,
    last_flush: Instant,
}

struct Conn {
    idx: usize,
    sock: mio::net::TcpStream,
    rx: u64,
    tx: u64,
    owed: u64,
    done: u64,
    inflight: VecDeque<Instant>,
    closing: bool,
    eof: bool,
}

enum Xfer {
    Done,
    Eof,
    Aborted,
}

impl WorkerCtx<'_> {
    fn record(&mut self, started: Instant, now: Instant) {
        let ns = u64::try_from(now.duration_since(started).as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        self.hist.saturating_record(ns);
        if now.duration_since(self.last_flush) >= HIST_FLUSH {
            self.last_flush = now;
            self.flush_hist(false);
        }
    }

    fn flush_hist(&mut self, force: bool) {
        if self.hist.is_empty() && !force {
            return;
        }
        if let Some(shared) = self.counters.latency.get(self.worker) {
            let mut g = match shared.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            let _ = g.add(&self.hist);
        }
        self.hist.reset();
    }

    /// Blocking loop for one rr connection with depth 1.
    fn blocking(&mut self, idx: usize, sock: &TcpStream, b: Behaviour) -> Result<(), EngineError> {
        let ctr = &self.counters.conns[idx];
        let io = |op, source| EngineError::Io {
            op,
            conn: idx,
            source,
        };
        match b {
            Behaviour::RrClient { req, resp, .. } => {
                let out = alloc_buf(req as usize, 0, "a request buffer")?;
                let mut inb = alloc_buf(resp as usize, 0, "a response buffer")?;
                let mut n: u64 = 0;
                while !self.control.stopping() {
                    let t0 = Instant::now();
                    match write_full(sock, &out, self.control).map_err(|e| io("write", e))? {
                        Xfer::Done => {}
                        Xfer::Eof | Xfer::Aborted => return Ok(()),
                    }
                    match read_full(sock, &mut inb, self.control).map_err(|e| io("read", e))? {
                        Xfer::Done => {}
                        Xfer::Eof if self.control.stopping() => return Ok(()),
                        Xfer::Eof => {
                            return Err(io(
                                "read",
                                std::io::Error::new(
                                    std::io::ErrorKind::UnexpectedEof,
                                    "the server closed the connection mid-test",
                                ),
                            ))
                        }
                        Xfer::Aborted => return Ok(()),
                    }
                    self.record(t0, Instant::now());
                    n += 1;
                    ctr.tx_bytes.store(n * req, Ordering::Relaxed);
                    ctr.rx_bytes.store(n * resp, Ordering::Relaxed);
                    ctr.messages.store(n, Ordering::Relaxed);
                }
                close_and_drain(sock, self.control);
                Ok(())
            }
            Behaviour::RrServer { req, resp } => {
                let mut inb = alloc_buf(req as usize, 0, "a request buffer")?;
                let out = alloc_buf(resp as usize, 0, "a response buffer")?;
                let mut n: u64 = 0;
                while let Xfer::Done =
                    read_full(sock, &mut inb, self.control).map_err(|e| io("read", e))?
                {
                    match write_full(sock, &out, self.control).map_err(|e| io("write", e))? {
                        Xfer::Done => {}
                        Xfer::Eof | Xfer::Aborted => break,
                    }
                    n += 1;
                    ctr.rx_bytes.store(n * req, Ordering::Relaxed);
                    ctr.tx_bytes.store(n * resp, Ordering::Relaxed);
                    ctr.messages.store(n, Ordering::Relaxed);
                }
                let _ = sock.shutdown(Shutdown::Write);
                Ok(())
            }
            Behaviour::Echo { .. } => Err(EngineError::Unsupported(
                "pingpong has no blocking path".into(),
            )),
        }
    }

    /// mio loop over this worker's connections.
    fn event_loop(
        &mut self,
        group: Vec<(usize, TcpStream)>,
        b: Behaviour,
    ) -> Result<(), EngineError> {
        let mut poll = Poll::new().map_err(|source| EngineError::Io {
            op: "epoll_create",
            conn: 0,
            source,
        })?;
        let mut conns = register(&poll, group, b)?;
        let zeros = alloc_buf(IO_BUF, 0, "an I/O buffer")?;
        let mut buf = alloc_buf(IO_BUF, 0, "an I/O buffer")?;
        for c in conns.iter_mut() {
            self.flush(c, &zeros)?;
        }
        self.poll_until_done(&mut poll, &mut conns, b, &zeros, &mut buf)
    }

    /// Read and write whatever is ready until every connection is at EOF,
    /// the drain after stop runs out, or the engine is aborted.
    fn poll_until_done(
        &mut self,
        poll: &mut Poll,
        conns: &mut [Conn],
        b: Behaviour,
        zeros: &[u8],
        buf: &mut [u8],
    ) -> Result<(), EngineError> {
        let mut events = Events::with_capacity(256);
        let mut drain_deadline: Option<Instant> = None;
        loop {
            if self.control.aborted() {
                return Ok(());
            }
            let client = matches!(
                b,
                Behaviour::RrClient { .. } | Behaviour::Echo { client: true, .. }
            );
            if client && self.control.stopping() && drain_deadline.is_none() {
                drain_deadline = Some(Instant::now() + DRAIN_TIMEOUT);
                for c in conns.iter_mut() {
                    if matches!(b, Behaviour::Echo { .. }) {
                        c.owed = 0;
                    }
                    maybe_close(c);
                }
            }
            if conns.iter().all(|c| c.eof) {
                return Ok(());
            }
            if drain_deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(());
            }
            if let Err(e) = poll.poll(&mut events, Some(WAKE_INTERVAL)) {
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(EngineError::Io {
                    op: "epoll_wait",
                    conn: 0,
                    source: e,
                });
            }
            for ev in events.iter() {
                let Some(c) = conns.get_mut(ev.token().0) else {
                    continue;
                };
                if c.eof {
                    continue;
                }
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.read_ready(c, b, buf)?;
                }
                if !c.eof {
                    self.flush(c, zeros)?;
                }
            }
        }
    }

    fn read_ready(
        &mut self,
        c: &mut Conn,
        b: Behaviour,
        buf: &mut [u8],
    ) -> Result<(), EngineError> {
        let stopping = self.control.stopping();
        let ctr = &self.counters.conns[c.idx];
        loop {
            let n = match c.sock.read(buf) {
                Ok(0) => {
                    c.eof = true;
                    let _ = c.sock.shutdown(Shutdown::Write);
                    return Ok(());
                }
                Ok(n) => n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e)
                    if is_disconnect(&e)
                        && (stopping || !matches!(b, Behaviour::RrClient { .. })) =>
                {
                    c.eof = true;
                    return Ok(());
                }
                Err(source) => {
                    return Err(EngineError::Io {
                        op: "read",
                        conn: c.idx,
                        source,
                    })
                }
            };
            c.rx += n;
            ctr.rx_bytes.store(c.rx, Ordering::Relaxed);
            match b {
                Behaviour::RrClient { req, resp, .. } => {
                    let total = c.rx / resp;
                    let now = Instant::now();
                    for _ in c.done..total {
                        if let Some(t0) = c.inflight.pop_front() {
                            self.record(t0, now);
                        }
                        if !stopping {
                            c.owed += req;
                            c.inflight.push_back(now);
                        }
                    }
                    c.done = total;
                    ctr.messages.store(total, Ordering::Relaxed);
                    if stopping {
                        maybe_close(c);
                    }
                }
                Behaviour::RrServer { req, resp } => {
                    let total = c.rx / req;
                    c.owed += (total - c.done) * resp;
                    c.done = total;
                    ctr.messages.store(total, Ordering::Relaxed);
                }
                Behaviour::Echo { client, size } => {
                    if !(client && stopping) {
                        c.owed += n;
                    }
                    ctr.messages.store(c.rx / size, Ordering::Relaxed);
                }
            }
        }
    }

    fn flush(&mut self, c: &mut Conn, zeros: &[u8]) -> Result<(), EngineError> {
        let ctr = &self.counters.conns[c.idx];
        while c.owed > 0 && !c.closing {
            let want = usize::try_from(c.owed)
                .unwrap_or(usize::MAX)
                .min(zeros.len());
            match c.sock.write(&zeros[..want]) {
                Ok(n) => {
                    c.owed -= n as u64;
                    c.tx += n as u64;
                    ctr.tx_bytes.store(c.tx, Ordering::Relaxed);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if is_disconnect(&e) => {
                    c.eof = true;
                    if self.control.stopping() {
                        return Ok(());
                    }
                    return Err(EngineError::Io {
                        op: "write",
                        conn: c.idx,
                        source: e,
                    });
                }
                Err(source) => {
                    return Err(EngineError::Io {
                        op: "write",
                        conn: c.idx,
                        source,
                    })
                }
            }
        }
        Ok(())
    }
}

/// Each connection non-blocking and registered with `poll` (its token is its
/// place in the group), with what it owes first: a client's first requests
/// (all of its depth) or an echo client's first message.
fn register(
    poll: &Poll,
    group: Vec<(usize, TcpStream)>,
    b: Behaviour,
) -> Result<Vec<Conn>, EngineError> {
    let mut conns = Vec::with_capacity(group.len());
    for (k, (idx, s)) in group.into_iter().enumerate() {
        s.set_nonblocking(true).map_err(|source| EngineError::Io {
            op: "set O_NONBLOCK",
            conn: idx,
            source,
        })?;
        let mut sock = mio::net::TcpStream::from_std(s);
        poll.registry()
            .register(&mut sock, Token(k), Interest::READABLE | Interest::WRITABLE)
            .map_err(|source| EngineError::Io {
                op: "epoll_ctl",
                conn: idx,
                source,
            })?;
        let mut c = Conn {
            idx,
            sock,
            rx: 0,
            tx: 0,
            owed: 0,
            done: 0,
            inflight: VecDeque::new(),
            closing: false,
            eof: false,
        };
        let now = Instant::now();
        match b {
            Behaviour::RrClient { req, depth, .. } => {
                c.owed = req * u64::from(depth);
                c.inflight.extend(std::iter::repeat_n(now, depth as usize));
            }
            Behaviour::Echo { client: true, size } => c.owed = size,
            _ => {}
        }
        conns.push(c);
    }
    Ok(conns)
}

/// A stopping client closes its write side once nothing is owed or in flight.
fn maybe_close(c: &mut Conn) {
    if !c.closing && c.owed == 0 && c.inflight.is_empty() {
        c.closing = true;
        let _ = c.sock.shutdown(Shutdown::Write);
    }
}

fn read_full(sock: &TcpStream, buf: &mut [u8], control: &EngineControl) -> std::io::Result<Xfer> {
    let mut r = sock;
    full(buf.len(), control, |off| r.read(&mut buf[off..]))
}

fn write_full(sock: &TcpStream, buf: &[u8], control: &EngineControl) -> std::io::Result<Xfer> {
    let mut w = sock;
    // A write that takes nothing is an error (as in `write_all`), not the
    // peer's end: only a read of 0 bytes is.
    full(buf.len(), control, |off| match w.write(&buf[off..]) {
        Ok(0) => Err(std::io::ErrorKind::WriteZero.into()),
        r => r,
    })
}

/// Move `len` bytes by calls of `step(offset)` (a read or a write): a
/// timeout only ends it when the test is aborted, the peer going away
/// (a read of 0 bytes) is [`Xfer::Eof`].
fn full(
    len: usize,
    control: &EngineControl,
    mut step: impl FnMut(usize) -> std::io::Result<usize>,
) -> std::io::Result<Xfer> {
    let mut off = 0;
    while off < len {
        match step(off) {
            Ok(0) => return Ok(Xfer::Eof),
            Ok(n) => off += n,
            Err(e) if is_timeout(&e) => {
                if control.aborted() {
                    return Ok(Xfer::Aborted);
                }
            }
            Err(e) if is_disconnect(&e) => return Ok(Xfer::Eof),
            Err(e) => return Err(e),
        }
    }
    Ok(Xfer::Done)
}

/// Close our write side and read until the peer's FIN (bounded).
fn close_and_drain(sock: &TcpStream, control: &EngineControl) {
    let _ = sock.shutdown(Shutdown::Write);
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    let mut buf = [0u8; 4096];
    let mut r = sock;
    while Instant::now() < deadline && !control.aborted() {
        match r.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {}
            Err(_) => return,
        }
    }
}

//! The gRPC server's connections, below HTTP/2: accepting them and guarding
//! each one.
//!
//! Owns the accept loop of `wirescope serve grpc` ([`accept`]: at most
//! `max_connections` open, extras closed at once; when the process is out of
//! descriptors or memory it waits 100 ms between attempts instead of
//! spinning, says so at most once a second, and keeps serving the open
//! connections), the socket wrapper every connection runs on ([`Guarded`]:
//! counted in [`Live`], closed when the HTTP/2 client preface has not arrived
//! within the handshake timeout, or when one of its responses holds budget
//! unread past the response timeout: closing the connection resets its
//! streams, and h2 drops what it buffered for them), the [`ConnInfo`]
//! that tonic puts in every request's extensions, and giving the heap back
//! to the kernel after connections close ([`trim_after_closes`]).
//!
//! It does not speak HTTP/2 (tonic, hyper and h2 do, above it) and holds no
//! message bytes; the budget's accounting is in [`super::budget`].

use super::budget::ConnShare;
use futures_util::task::AtomicWaker;
use futures_util::Stream;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tonic::transport::server::Connected;

/// Length of the HTTP/2 client connection preface (`PRI * HTTP/2.0...`).
pub const PREFACE_LEN: usize = 24;
/// Pause between accept attempts when descriptors or memory are exhausted.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Per-connection limits of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Connections open at once (listener mode); extras are closed on accept.
    pub max_connections: usize,
    /// Time for a new connection's client preface to arrive.
    pub handshake_timeout: Duration,
    /// Time a response may hold budget without its client reading any of it.
    pub response_timeout: Duration,
}

/// Open connections of a server; notifies when the last one closes.
#[derive(Debug, Default)]
pub struct Live {
    open: AtomicUsize,
    closed: tokio::sync::Notify,
    /// Connections closed so far.
    ended: AtomicU64,
}

impl Live {
    /// Resolves once no connection is open.
    pub async fn all_closed(&self) {
        loop {
            let wait = self.closed.notified();
            if self.open.load(Ordering::Acquire) == 0 {
                return;
            }
            wait.await;
        }
    }
    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }
}

/// What one request knows of its connection (a request extension, put there by tonic).
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// The connection's part of the memory budget.
    pub share: Arc<ConnShare>,
}

/// State a connection shares with its watchdog.
#[derive(Debug)]
struct Guard {
    share: Arc<ConnShare>,
    killed: AtomicBool,
    preface_read: AtomicUsize,
    read: AtomicWaker,
    write: AtomicWaker,
}

impl Guard {
    fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.read.wake();
        self.write.wake();
    }
    fn killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }
}

/// A server connection: counted in [`Live`] while it exists, closed by its
/// watchdog on the handshake or response timeout.
pub struct Guarded {
    inner: TcpStream,
    live: Arc<Live>,
    guard: Arc<Guard>,
    gone: CancellationToken,
}

impl Guarded {
    /// Guard `inner` (call inside the server's runtime: it starts the watchdog).
    pub fn new(inner: TcpStream, live: &Arc<Live>, limits: &ConnLimits) -> Self {
        live.open.fetch_add(1, Ordering::AcqRel);
        let guard = Arc::new(Guard {
            share: ConnShare::new(),
            killed: AtomicBool::new(false),
            preface_read: AtomicUsize::new(0),
            read: AtomicWaker::new(),
            write: AtomicWaker::new(),
        });
        let gone = CancellationToken::new();
        tokio::spawn(watchdog(Arc::clone(&guard), *limits, gone.clone()));
        Guarded {
            inner,
            live: Arc::clone(live),
            guard,
            gone,
        }
    }

    fn dead() -> io::Error {
        io::Error::new(
            io::ErrorKind::TimedOut,
            "closed by the server: no HTTP/2 preface within the handshake timeout, or a response left unread past the response timeout",
        )
    }
}

/// Checks a connection's deadlines until it closes.
async fn watchdog(guard: Arc<Guard>, limits: ConnLimits, gone: CancellationToken) {
    let shortest = limits.handshake_timeout.min(limits.response_timeout);
    let tick = (shortest / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let start = Instant::now();
    loop {
        tokio::select! {
            _ = gone.cancelled() => return,
            _ = tokio::time::sleep(tick) => {}
        }
        let no_preface = guard.preface_read.load(Ordering::Acquire) < PREFACE_LEN
            && start.elapsed() >= limits.handshake_timeout;
        if no_preface || guard.share.stalled_response(limits.response_timeout) {
            guard.kill();
            return;
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.gone.cancel();
        self.live.ended.fetch_add(1, Ordering::Relaxed);
        if self.live.open.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.live.closed.notify_waiters();
        }
    }
}

impl Connected for Guarded {
    type ConnectInfo = ConnInfo;
    fn connect_info(&self) -> ConnInfo {
        ConnInfo {
            share: Arc::clone(&self.guard.share),
        }
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.guard.read.register(cx.waker());
        if this.guard.killed() {
            return Poll::Ready(Err(Self::dead()));
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 && this.guard.preface_read.load(Ordering::Relaxed) < PREFACE_LEN {
            this.guard.preface_read.fetch_add(n, Ordering::AcqRel);
        }
        r
    }
}

impl Guarded {
    fn check(&self, cx: &Context<'_>) -> io::Result<()> {
        self.guard.write.register(cx.waker());
        if self.guard.killed() {
            return Err(Self::dead());
        }
        Ok(())
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// How often [`trim_after_closes`] looks.
const TRIM_EVERY: Duration = Duration::from_secs(5);

/// Gives the heap's free memory back to the kernel after connections have
/// closed (at most every 5 s). What closed connections held (HTTP/2 stream
/// state, buffered frames) is freed by Rust at once, but glibc keeps freed
/// pages in its arenas, so without this a burst of connections would keep
/// the process's RSS at its peak. Runs until its task is dropped.
pub async fn trim_after_closes(live: Arc<Live>) {
    let mut seen = live.ended.load(Ordering::Relaxed);
    loop {
        tokio::time::sleep(TRIM_EVERY).await;
        let ended = live.ended.load(Ordering::Relaxed);
        if ended != seen {
            seen = ended;
            // Walks the arenas: a blocking call, off the workers.
            let _ = tokio::task::spawn_blocking(trim_heap).await;
        }
    }
}

/// Return free heap pages to the kernel (glibc only; elsewhere nothing to do).
fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free memory of the allocator; it
    // takes the arena locks itself and touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// What an accept error means for the loop.
#[derive(Debug, PartialEq, Eq)]
enum AcceptError {
    /// That one connection failed before we got it: try the next at once.
    Connection,
    /// Out of descriptors or memory (or anything else): wait before trying again.
    Exhausted,
}

fn classify(e: &io::Error) -> AcceptError {
    match e.raw_os_error() {
        Some(libc::ECONNABORTED | libc::ECONNRESET | libc::EINTR | libc::EPROTO | libc::EPERM) => {
            AcceptError::Connection
        }
        _ => AcceptError::Exhausted,
    }
}

/// Says what the accept loop is waiting for, at most once a second.
#[derive(Debug, Default)]
struct Throttled {
    last: Option<Instant>,
    since: u64,
}

impl Throttled {
    fn note(&mut self, e: &io::Error, open: usize) {
        self.since += 1;
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        eprintln!(
            "wirescope serve grpc: accepting a connection failed {} time(s): {e}; serving the {open} open connection(s), retrying every {} ms (raise `ulimit -n` or lower --max-connections)",
            self.since,
            ACCEPT_BACKOFF.as_millis()
        );
        self.last = Some(Instant::now());
        self.since = 0;
    }
}

/// The connections of `listener`, guarded, at most `limits.max_connections`
/// open at once. Never yields an error: failures are waited out (see the module doc).
pub fn accept(
    listener: TcpListener,
    live: Arc<Live>,
    limits: ConnLimits,
) -> impl Stream<Item = io::Result<Guarded>> {
    let state = (listener, live, limits, Throttled::default());
    futures_util::stream::unfold(state, |(l, live, limits, mut log)| async move {
        loop {
            match l.accept().await {
                Ok((s, _)) => {
                    if live.open() >= limits.max_connections {
                        drop(s);
                        continue;
                    }
                    let _ = s.set_nodelay(true);
                    let g = Guarded::new(s, &live, &limits);
                    return Some((Ok(g), (l, live, limits, log)));
                }
                Err(e) if classify(&e) == AcceptError::Connection => continue,
                Err(e) => {
                    log.note(&e, live.open());
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_exhaustion_waits_and_a_lost_connection_does_not() {
        for errno in [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM] {
            let e = io::Error::from_raw_os_error(errno);
            assert_eq!(classify(&e), AcceptError::Exhausted, "{e}");
        }
        let e = io::Error::from_raw_os_error(libc::ECONNABORTED);
        assert_eq!(classify(&e), AcceptError::Connection);
    }
}

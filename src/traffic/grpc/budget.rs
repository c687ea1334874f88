//! The server's memory budget: HTTP/2 bodies that take and give back bytes of
//! one shared budget, so that whatever the clients send, the bytes of
//! messages held at once stay bounded, and no client can hold all of it.
//!
//! Owns the budget with its per-connection fair share ([`Budget`],
//! [`ConnShare`], [`Held`]) and two body adapters around tonic's request and
//! response bodies:
//!
//! * [`AdmittedBody`] reads each request message's 5-byte gRPC prefix as it
//!   passes and, before letting the byte that completes the prefix through
//!   to tonic's decoder (which reserves the whole message as soon as it has
//!   a prefix), takes the message's length from the budget. The permit
//!   goes into a [`PermitQueue`] that the handler pops (and drops) when it is
//!   done with the message. A stream that cannot be admitted stops being read,
//!   so HTTP/2 flow control stops its sender after one stream window
//!   (64 KiB): memory per waiting stream is one window, not one message.
//!   The adapter delivers the tail of message N before it asks for N+1's
//!   bytes, so a message is never held back by its own successor. A request
//!   whose bytes stop coming for the body timeout, or whose admitted message
//!   has not arrived by its deadline, fails with DEADLINE_EXCEEDED and gives
//!   its bytes back ([`BodyTimeout`]).
//! * [`SlicedBody`] cuts the encoded response (tonic yields one message as one
//!   buffer) into zero-copy slices and holds the response's permit until the
//!   last slice is handed to h2: h2 then buffers one slice per stream, not
//!   the whole message. Its [`PermitQueue`] records when it last moved, so
//!   the connection's watchdog can reset a connection whose client leaves a
//!   response unread.
//!
//! # Fair share
//!
//! A connection may hold at most `budget / (H + 1)`, `H` being the number of
//! connections that hold (or wait for) part of the budget, itself included:
//! one connection alone gets half, two get a third each, and the `+ 1` keeps
//! room for a connection that arrives. A connection that holds nothing may
//! always take one message, however large (up to the whole budget), so one
//! big legitimate message still passes. A message over the share waits for
//! its own connection's bytes to come back, without queueing on the budget
//! (where it would stand in front of other connections' messages).
//! What one silent client can hold is therefore its share for at most the
//! body timeout; several connections together are bounded by the same timeout.
//!
//! Deadlock freedom: a waiting stream holds at most its stream window of
//! connection window, and the server's connection window is
//! `max_streams x stream_window`, so admitted streams always have window to
//! finish; a handler gives its request's bytes back before it asks for its
//! response's. A message larger than the whole budget takes the whole budget.

use bytes::{Buf, Bytes};
use futures_util::future::BoxFuture;
use http_body::{Body, Frame, SizeHint};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tonic::Status;

use super::counters::GrpcCounters;
use super::proto::{ResponseScanner, PREFIX_LEN};

/// Budget granularity: permits are KiB.
const UNIT: usize = 1024;
/// Slice length of response bodies handed to h2.
pub const SLICE: usize = 64 * 1024;
/// Slowest average rate an admitted request message may arrive at, bytes/s:
/// a message of N bytes must be complete within `idle + N / MIN_RATE`.
pub const MIN_RATE: u64 = 1 << 20;

/// A byte budget shared by all connections of a server.
#[derive(Debug, Clone)]
pub struct Budget {
    sem: Arc<Semaphore>,
    units: u32,
    fair: Arc<Fair>,
}

/// Who holds the budget.
#[derive(Debug, Default)]
struct Fair {
    /// Connections holding (or waiting for) part of the budget.
    holders: AtomicU32,
    /// Woken whenever a connection gives bytes back.
    changed: Notify,
}

/// One connection's part of a [`Budget`] (made per connection, shared by its streams).
#[derive(Debug, Default)]
pub struct ConnShare {
    /// Units held or reserved by this connection's streams.
    held: AtomicU32,
    /// Response queues of this connection, for [`ConnShare::stalled_response`].
    responses: Mutex<Vec<Weak<QueueInner>>>,
}

impl ConnShare {
    /// A new connection's share.
    pub fn new() -> Arc<Self> {
        Arc::new(ConnShare::default())
    }

    /// Bytes this connection holds now.
    pub fn held_bytes(&self) -> usize {
        self.held.load(Ordering::Acquire) as usize * UNIT
    }

    /// True when one of this connection's responses holds budget and has not
    /// moved for `timeout` (its client does not read it). Forgets finished ones.
    pub fn stalled_response(&self, timeout: Duration) -> bool {
        let now = now_ms();
        let limit = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let mut list = self.responses.lock().unwrap_or_else(|e| e.into_inner());
        list.retain(|w| w.strong_count() > 0);
        list.iter()
            .filter_map(Weak::upgrade)
            .any(|q| q.holds() && now.saturating_sub(q.touched.load(Ordering::Acquire)) >= limit)
    }

    fn watch(&self, q: &PermitQueue) {
        let mut list = self.responses.lock().unwrap_or_else(|e| e.into_inner());
        if list.len() >= 64 {
            list.retain(|w| w.strong_count() > 0);
        }
        list.push(Arc::downgrade(&q.0));
    }
}

/// Milliseconds since the first call (a monotonic clock in an atomic).
fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let e = *EPOCH.get_or_init(Instant::now);
    u64::try_from(e.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Bytes of the budget held by one stream of one connection; given back on drop.
#[derive(Debug)]
pub struct Held {
    permit: Option<OwnedSemaphorePermit>,
    units: u32,
    conn: Arc<ConnShare>,
    fair: Arc<Fair>,
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(self.permit.take());
        if self.conn.held.fetch_sub(self.units, Ordering::AcqRel) == self.units {
            self.fair.holders.fetch_sub(1, Ordering::AcqRel);
        }
        self.fair.changed.notify_waiters();
    }
}

impl Budget {
    /// A budget of `bytes` (at least 1 MiB).
    pub fn new(bytes: usize) -> Self {
        let units = u32::try_from(bytes.max(1 << 20) / UNIT).unwrap_or(u32::MAX >> 4);
        Budget {
            sem: Arc::new(Semaphore::new(units as usize)),
            units,
            fair: Arc::new(Fair::default()),
        }
    }

    /// Permits for `bytes`, capped at the whole budget.
    fn units_for(&self, bytes: usize) -> u32 {
        let u = bytes.div_ceil(UNIT);
        u32::try_from(u).unwrap_or(u32::MAX).min(self.units)
    }

    /// Reserve `n` units of `conn`'s share, if the fair-share rule lets it.
    fn try_reserve(&self, conn: &ConnShare, n: u32) -> bool {
        let mut h = conn.held.load(Ordering::Acquire);
        loop {
            if h != 0 {
                let holders = self.fair.holders.load(Ordering::Acquire).max(1);
                let share = self.units / holders.saturating_add(1);
                if h.saturating_add(n) > share {
                    return false;
                }
            }
            match conn.held.compare_exchange_weak(
                h,
                h.saturating_add(n),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if h == 0 {
                        self.fair.holders.fetch_add(1, Ordering::AcqRel);
                    }
                    return true;
                }
                Err(cur) => h = cur,
            }
        }
    }

    /// Wait for `bytes` of the budget within `conn`'s fair share (None for
    /// an empty message).
    pub async fn acquire(&self, conn: &Arc<ConnShare>, bytes: usize) -> Option<Held> {
        let n = self.units_for(bytes);
        if n == 0 {
            return None;
        }
        loop {
            let notified = self.fair.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.try_reserve(conn, n) {
                break;
            }
            notified.await;
        }
        // Reserved: from here on a drop (the stream went away) gives it back.
        let mut held = Held {
            permit: None,
            units: n,
            conn: Arc::clone(conn),
            fair: Arc::clone(&self.fair),
        };
        held.permit = Arc::clone(&self.sem).acquire_many_owned(n).await.ok();
        Some(held)
    }

    /// Bytes of the budget free now.
    pub fn available(&self) -> usize {
        self.sem.available_permits() * UNIT
    }

    /// Bytes of the budget held now.
    pub fn held(&self) -> usize {
        (self.units as usize).saturating_sub(self.sem.available_permits()) * UNIT
    }

    /// Connections holding or waiting for part of the budget now.
    pub fn holders(&self) -> u32 {
        self.fair.holders.load(Ordering::Acquire)
    }
}

#[derive(Debug, Default)]
struct QueueInner {
    q: Mutex<VecDeque<Option<Held>>>,
    /// [`now_ms`] when the queue last moved.
    touched: AtomicU64,
}

impl QueueInner {
    fn holds(&self) -> bool {
        self.q
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(Option::is_some)
    }
}

/// Permits of messages admitted and not yet done with, in arrival order.
#[derive(Debug, Clone, Default)]
pub struct PermitQueue(Arc<QueueInner>);

impl PermitQueue {
    /// Hold `p` until one message more has been handled.
    pub fn push(&self, p: Option<Held>) {
        let mut q = self.0.q.lock().unwrap_or_else(|e| e.into_inner());
        if q.is_empty() {
            self.touch();
        }
        q.push_back(p);
    }
    /// Give back the bytes of the oldest admitted message.
    pub fn release_one(&self) {
        let p = self
            .0
            .q
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front();
        self.touch();
        drop(p);
    }
    /// Give back everything held.
    pub fn release_all(&self) {
        let all = std::mem::take(&mut *self.0.q.lock().unwrap_or_else(|e| e.into_inner()));
        drop(all);
    }
    /// Record progress now.
    pub fn touch(&self) {
        self.0.touched.store(now_ms(), Ordering::Release);
    }
}

/// How long a request body may take (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyTimeout {
    /// Longest time without a byte while a request is incomplete.
    pub idle: Duration,
}

impl BodyTimeout {
    /// When an admitted message of `len` bytes must be complete, from `now`.
    pub fn message_deadline(&self, now: tokio::time::Instant, len: usize) -> tokio::time::Instant {
        let secs = len as f64 / MIN_RATE as f64;
        now + self.idle + Duration::from_secs_f64(secs)
    }
}

/// A request body that admits each gRPC message against the [`Budget`].
pub struct AdmittedBody<B> {
    inner: B,
    budget: Budget,
    conn: Arc<ConnShare>,
    queue: PermitQueue,
    counters: Arc<GrpcCounters>,
    timeout: BodyTimeout,
    /// Fires when the client has sent nothing for `idle` (or the message's deadline passed).
    timer: Pin<Box<Sleep>>,
    /// When the message being received must be complete.
    deadline: Option<tokio::time::Instant>,
    /// Bytes of the message waiting for budget.
    need: Option<usize>,
    acquiring: Option<BoxFuture<'static, Option<Held>>>,
    /// Unread rest of a chunk split at a message boundary.
    pending: Option<Bytes>,
    prefix: [u8; PREFIX_LEN],
    prefix_have: usize,
    /// Bytes of the current message still to pass.
    remaining: usize,
    /// The message whose prefix is being read holds its permit.
    admitted: bool,
    failed: bool,
}

impl<B> AdmittedBody<B> {
    /// Wrap `inner`; permits of `conn`'s share go to `queue`; a request that
    /// times out is counted as DEADLINE_EXCEEDED in `counters`.
    pub fn new(
        inner: B,
        budget: &Budget,
        conn: &Arc<ConnShare>,
        queue: PermitQueue,
        counters: &Arc<GrpcCounters>,
        timeout: BodyTimeout,
    ) -> Self {
        AdmittedBody {
            inner,
            budget: budget.clone(),
            conn: Arc::clone(conn),
            queue,
            counters: Arc::clone(counters),
            timeout,
            timer: Box::pin(tokio::time::sleep(timeout.idle)),
            deadline: None,
            need: None,
            acquiring: None,
            pending: None,
            prefix: [0; PREFIX_LEN],
            prefix_have: 0,
            remaining: 0,
            admitted: false,
            failed: false,
        }
    }

    /// Walk `chunk`; returns how many leading bytes may pass now. The byte
    /// that completes a message's prefix never passes before the message is
    /// admitted: tonic reserves the whole message as soon as it reads a prefix.
    fn scan(&mut self, chunk: &[u8]) -> usize {
        let mut pos = 0;
        while pos < chunk.len() {
            if self.remaining > 0 {
                let take = self.remaining.min(chunk.len() - pos);
                self.remaining -= take;
                pos += take;
                continue;
            }
            // At a message boundary: let the previous message's tail through first.
            if self.prefix_have == 0 && pos > 0 {
                return pos;
            }
            let missing = PREFIX_LEN - self.prefix_have;
            if chunk.len() - pos < missing {
                // A partial prefix tells tonic nothing yet; it may pass.
                let n = chunk.len() - pos;
                self.prefix[self.prefix_have..self.prefix_have + n].copy_from_slice(&chunk[pos..]);
                self.prefix_have += n;
                return chunk.len();
            }
            let mut p = self.prefix;
            p[self.prefix_have..].copy_from_slice(&chunk[pos..pos + missing]);
            let len = u32::from_be_bytes([p[1], p[2], p[3], p[4]]) as usize;
            if !self.admitted {
                if self.budget.units_for(len) > 0 {
                    self.need = Some(len);
                    return pos;
                }
                self.queue.push(None);
            }
            self.admitted = false;
            self.prefix_have = 0;
            self.remaining = len;
            pos += missing;
        }
        pos
    }

    /// Restart the timer: `idle` from now, or the message's deadline if sooner.
    fn progress(&mut self) {
        let now = tokio::time::Instant::now();
        let mut at = now + self.timeout.idle;
        if let Some(d) = self.deadline {
            at = at.min(d);
        }
        self.timer.as_mut().reset(at);
    }

    /// The request failed: give every byte back, count it, say why.
    fn expire(&mut self) -> Status {
        self.failed = true;
        self.need = None;
        self.acquiring = None;
        self.queue.release_all();
        self.counters
            .record_error(tonic::Code::DeadlineExceeded as i32);
        let idle = humantime::format_duration(self.timeout.idle);
        match self.deadline {
            Some(d) if tokio::time::Instant::now() >= d => Status::deadline_exceeded(format!(
                "the request message did not arrive in time: after the first {idle} (--body-timeout) it must come at 1 MiB/s or faster"
            )),
            _ => Status::deadline_exceeded(format!(
                "the request body stopped: no bytes for {idle} (--body-timeout)"
            )),
        }
    }
}

impl<B> Body for AdmittedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        loop {
            if let Some(len) = this.need {
                let fut = this.acquiring.get_or_insert_with(|| {
                    let (b, c) = (this.budget.clone(), Arc::clone(&this.conn));
                    Box::pin(async move { b.acquire(&c, len).await })
                });
                // Waiting for budget is not the client's delay: no timer.
                let held = ready!(fut.as_mut().poll(cx));
                this.acquiring = None;
                this.queue.push(held);
                this.need = None;
                this.admitted = true;
                this.deadline = Some(
                    this.timeout
                        .message_deadline(tokio::time::Instant::now(), len),
                );
                this.progress();
            }
            let mut chunk = match this.pending.take() {
                Some(c) => c,
                None => match Pin::new(&mut this.inner).poll_frame(cx) {
                    Poll::Pending => {
                        ready!(this.timer.as_mut().poll(cx));
                        return Poll::Ready(Some(Err(this.expire())));
                    }
                    Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                        Ok(data) => {
                            this.progress();
                            data
                        }
                        Err(frame) => return Poll::Ready(Some(Ok(frame))),
                    },
                    Poll::Ready(Some(Err(e))) => {
                        return Poll::Ready(Some(Err(Status::from_error(e.into()))))
                    }
                    Poll::Ready(None) => return Poll::Ready(None),
                },
            };
            let pass = this.scan(&chunk);
            if pass < chunk.len() {
                this.pending = Some(chunk.split_off(pass));
            }
            if this.remaining == 0 && this.prefix_have == 0 && this.need.is_none() {
                // Between messages: only the idle limit applies.
                this.deadline = None;
            }
            if !chunk.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(chunk))));
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || (self.pending.is_none() && self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// The permits of a call's responses, in order (a request extension the
/// handlers push to; the call's [`SlicedBody`] gives them back).
#[derive(Debug, Clone, Default)]
pub struct ResponsePermits(pub PermitQueue);

/// A response body handed to h2 in [`SLICE`]-byte zero-copy slices. It gives
/// back one response permit each time the last slice of a message has been
/// handed over, so encoded responses waiting for the client count against
/// the budget.
pub struct SlicedBody<B> {
    inner: B,
    rest: Bytes,
    permits: PermitQueue,
    framing: ResponseScanner,
}

impl<B> SlicedBody<B> {
    /// Wrap `inner`, giving back `permits` message by message; `conn`'s
    /// watchdog sees when it stops moving.
    pub fn new(inner: B, permits: PermitQueue, conn: &ConnShare) -> Self {
        conn.watch(&permits);
        SlicedBody {
            inner,
            rest: Bytes::new(),
            permits,
            framing: ResponseScanner::default(),
        }
    }
}

impl<B> Body for SlicedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if this.rest.is_empty() {
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => this.rest = data,
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                other => return Poll::Ready(other),
            }
        }
        let n = SLICE.min(this.rest.remaining());
        let slice = this.rest.split_to(n);
        let permits = &this.permits;
        permits.touch();
        // Our own encoder's framing; a malformed frame only stops the accounting.
        let _ = this.framing.feed(&slice, |_| permits.release_one());
        Poll::Ready(Some(Ok(Frame::data(slice))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && self.inner.is_end_stream()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;
    use http_body_util::{BodyExt, StreamBody};

    type TestBody = StreamBody<
        futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, std::io::Error>>>,
    >;

    const IDLE: BodyTimeout = BodyTimeout {
        idle: Duration::from_secs(10),
    };

    fn body(chunks: Vec<Vec<u8>>) -> TestBody {
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = chunks
            .into_iter()
            .map(|c| Ok(Frame::data(Bytes::from(c))))
            .collect();
        StreamBody::new(futures_util::stream::iter(frames))
    }

    fn msg(len: usize) -> Vec<u8> {
        let mut v = vec![0u8];
        v.extend_from_slice(&(len as u32).to_be_bytes());
        v.extend(std::iter::repeat_n(7u8, len));
        v
    }

    fn admitted<B>(
        b: B,
        budget: &Budget,
        conn: &Arc<ConnShare>,
        q: &PermitQueue,
    ) -> AdmittedBody<B> {
        AdmittedBody::new(b, budget, conn, q.clone(), &GrpcCounters::new(1), IDLE)
    }

    #[tokio::test]
    async fn admits_each_message_and_splits_at_boundaries() {
        let budget = Budget::new(4 << 20);
        let q = PermitQueue::default();
        // Two messages in one chunk, the third's prefix split over two chunks.
        let mut wire = msg(3000);
        wire.extend(msg(10));
        let third = msg(2048);
        wire.extend_from_slice(&third[..3]);
        let conn = ConnShare::new();
        let mut b = admitted(body(vec![wire, third[3..].to_vec()]), &budget, &conn, &q);
        let mut sizes = vec![];
        while let Some(f) = b.frame().await {
            sizes.push(f.unwrap().into_data().unwrap().len());
        }
        // A message passes whole once admitted, its tail before the next
        // prefix; a partial prefix passes, its completing byte waits.
        assert_eq!(sizes, vec![3005, 15, 3, 2050]);
        let full = 4 << 20;
        assert_eq!(budget.available(), full - 3 * 1024 - 1024 - 2048);
        assert_eq!(conn.held_bytes(), 3 * 1024 + 1024 + 2048);
        for _ in 0..3 {
            q.release_one();
        }
        assert_eq!(budget.available(), full);
        assert_eq!((conn.held_bytes(), budget.holders()), (0, 0));
    }

    #[tokio::test]
    async fn waits_for_budget_before_passing_a_message() {
        let budget = Budget::new(1 << 20);
        let other = ConnShare::new();
        let hold = budget.acquire(&other, 1 << 20).await;
        let q = PermitQueue::default();
        let mut b = admitted(body(vec![msg(100)]), &budget, &ConnShare::new(), &q);
        // Not even the prefix passes (tonic would reserve the message for it).
        assert!(
            b.frame().now_or_never().is_none(),
            "must wait while the budget is taken"
        );
        drop(hold);
        let all = b.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(all.len(), PREFIX_LEN + 100);
    }

    #[tokio::test]
    async fn one_connection_cannot_take_more_than_its_share() {
        // 96 MiB: the 64 MiB + 32 MiB on one connection.
        let budget = Budget::new(96 << 20);
        let greedy = ConnShare::new();
        // A connection that holds nothing may take one message of any size.
        let big = budget.acquire(&greedy, 64 << 20).await.expect("held");
        // Its second message is over its share (96 / 2) and waits...
        let mut second = Box::pin(budget.acquire(&greedy, 32 << 20));
        assert!(second.as_mut().now_or_never().is_none());
        // ...while another connection is served from what is left.
        let polite = ConnShare::new();
        let small = budget.acquire(&polite, 1 << 20).now_or_never();
        assert!(matches!(small, Some(Some(_))), "another connection waits");
        assert_eq!(budget.holders(), 2);
        drop(small);
        // Once its own bytes come back, the greedy connection goes on.
        drop(big);
        let got = second.await.expect("held");
        assert_eq!(greedy.held_bytes(), 32 << 20);
        drop(got);
        assert_eq!((budget.available(), budget.holders()), (96 << 20, 0));
    }

    #[tokio::test]
    async fn a_cancelled_wait_gives_its_reservation_back() {
        let budget = Budget::new(2 << 20);
        let other = ConnShare::new();
        let hold = budget.acquire(&other, 2 << 20).await;
        let conn = ConnShare::new();
        let waiting = budget.acquire(&conn, 1 << 20).now_or_never();
        assert!(waiting.is_none());
        assert_eq!((conn.held_bytes(), budget.holders()), (0, 1));
        drop(hold);
        assert_eq!(budget.available(), 2 << 20);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_whose_body_stops_fails_and_gives_its_bytes_back() {
        let budget = Budget::new(96 << 20);
        let conn = ConnShare::new();
        let q = PermitQueue::default();
        // A prefix declaring 64 MiB, then nothing (the stream stays open).
        let (tx, rx) =
            tokio::sync::mpsc::unbounded_channel::<Result<Frame<Bytes>, std::io::Error>>();
        let rx = tokio_stream::wrappers::UnboundedReceiverStream::new(rx);
        tx.send(Ok(Frame::data(Bytes::from(
            msg(64 << 20)[..PREFIX_LEN].to_vec(),
        ))))
        .unwrap();
        let counters = GrpcCounters::new(1);
        let mut b = AdmittedBody::new(
            StreamBody::new(rx),
            &budget,
            &conn,
            q.clone(),
            &counters,
            IDLE,
        );
        let first = b.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first.len(), PREFIX_LEN);
        assert_eq!(conn.held_bytes(), 64 << 20);
        let t0 = tokio::time::Instant::now();
        let err = b.frame().await.unwrap().unwrap_err();
        assert_eq!(err.code(), tonic::Code::DeadlineExceeded, "{err}");
        assert!(err.message().contains("--body-timeout"), "{err}");
        assert_eq!(tokio::time::Instant::now() - t0, IDLE.idle);
        assert_eq!((conn.held_bytes(), budget.available()), (0, 96 << 20));
        assert_eq!(counters.snapshot().errors[4], 1);
        assert!(b.frame().await.is_none());
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickled_message_fails_at_its_deadline() {
        let budget = Budget::new(8 << 20);
        let conn = ConnShare::new();
        let q = PermitQueue::default();
        let (tx, rx) =
            tokio::sync::mpsc::unbounded_channel::<Result<Frame<Bytes>, std::io::Error>>();
        let rx = tokio_stream::wrappers::UnboundedReceiverStream::new(rx);
        let wire = msg(4 << 20);
        tx.send(Ok(Frame::data(Bytes::from(wire[..PREFIX_LEN].to_vec()))))
            .unwrap();
        let mut b = admitted(StreamBody::new(rx), &budget, &conn, &q);
        b.frame().await.unwrap().unwrap();
        let t0 = tokio::time::Instant::now();
        // One byte every 5 s: never idle for 10 s, never done.
        let trickle = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                if tx.send(Ok(Frame::data(Bytes::from_static(&[7])))).is_err() {
                    return;
                }
            }
        });
        let err = loop {
            match b.frame().await.unwrap() {
                Ok(_) => continue,
                Err(e) => break e,
            }
        };
        // 10 s + 4 MiB at 1 MiB/s.
        assert_eq!(tokio::time::Instant::now() - t0, Duration::from_secs(14));
        assert!(err.message().contains("did not arrive in time"), "{err}");
        assert_eq!(conn.held_bytes(), 0);
        trickle.abort();
    }

    #[tokio::test]
    async fn sliced_body_gives_back_each_message_after_its_last_slice() {
        let budget = Budget::new(1 << 20);
        let conn = ConnShare::new();
        let q = PermitQueue::default();
        q.push(budget.acquire(&conn, 150 * 1024).await);
        q.push(budget.acquire(&conn, 1024).await);
        let mut wire = msg(150 * 1024 - PREFIX_LEN);
        wire.extend(msg(100));
        let mut b = SlicedBody::new(body(vec![wire]), q, &conn);
        let mut seen = vec![];
        while let Some(f) = b.frame().await {
            let len = f.unwrap().into_data().unwrap().len();
            seen.push((len, budget.available() / 1024));
        }
        // Held through the first message's slices; each message's bytes come
        // back once its last byte has been handed over.
        assert_eq!(
            seen,
            vec![
                (SLICE, 1024 - 151),
                (SLICE, 1024 - 151),
                (150 * 1024 - 2 * SLICE + 105, 1024)
            ]
        );
        assert!(!conn.stalled_response(Duration::ZERO), "nothing held");
    }

    #[tokio::test]
    async fn an_unread_response_is_seen_as_stalled() {
        let budget = Budget::new(1 << 20);
        let conn = ConnShare::new();
        let q = PermitQueue::default();
        let _b = SlicedBody::new(body(vec![]), q.clone(), &conn);
        q.push(budget.acquire(&conn, 4096).await);
        assert!(conn.stalled_response(Duration::ZERO));
        assert!(!conn.stalled_response(Duration::from_secs(3600)));
        q.release_one();
        assert!(!conn.stalled_response(Duration::ZERO));
    }
}

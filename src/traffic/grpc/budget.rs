//! The server's memory budget: HTTP/2 bodies that take and give back bytes of
//! one shared budget, so that whatever the clients send, the bytes of
//! messages held at once stay bounded.
//!
//! Owns two body adapters around tonic's request and response bodies:
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
//!   bytes, so a message is never held back by its own successor.
//! * [`SlicedBody`] cuts the encoded response (tonic yields one message as one
//!   buffer) into zero-copy slices and holds the response's permit until the
//!   last slice is handed to h2: h2 then buffers one slice per stream, not
//!   the whole message.
//!
//! Deadlock freedom: a waiting stream holds at most its stream window of
//! connection window, and the server's connection window is
//! `max_streams x stream_window`, so admitted streams always have window to
//! finish; a handler gives its request's bytes back before it asks for its
//! response's. A message larger than the whole budget takes the whole budget.

use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::PollSemaphore;

use super::proto::{ResponseScanner, PREFIX_LEN};

/// Budget granularity: permits are KiB.
const UNIT: usize = 1024;
/// Slice length of response bodies handed to h2.
pub const SLICE: usize = 64 * 1024;

/// A byte budget shared by all connections of a server.
#[derive(Debug, Clone)]
pub struct Budget {
    sem: Arc<Semaphore>,
    units: u32,
}

impl Budget {
    /// A budget of `bytes` (at least 1 MiB).
    pub fn new(bytes: usize) -> Self {
        let units = u32::try_from(bytes.max(1 << 20) / UNIT).unwrap_or(u32::MAX >> 4);
        Budget {
            sem: Arc::new(Semaphore::new(units as usize)),
            units,
        }
    }

    /// Permits for `bytes`, capped at the whole budget.
    fn units_for(&self, bytes: usize) -> u32 {
        let u = bytes.div_ceil(UNIT);
        u32::try_from(u).unwrap_or(u32::MAX).min(self.units)
    }

    /// Wait for `bytes` of the budget (None for an empty message).
    pub async fn acquire(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let n = self.units_for(bytes);
        if n == 0 {
            return None;
        }
        Arc::clone(&self.sem).acquire_many_owned(n).await.ok()
    }

    /// Bytes of the budget free now.
    pub fn available(&self) -> usize {
        self.sem.available_permits() * UNIT
    }
}

/// Permits of request messages admitted and not yet handled, in arrival order.
#[derive(Debug, Clone, Default)]
pub struct PermitQueue(Arc<Mutex<VecDeque<Option<OwnedSemaphorePermit>>>>);

impl PermitQueue {
    /// Hold `p` until one message more has been handled.
    pub fn push(&self, p: Option<OwnedSemaphorePermit>) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(p);
    }
    /// Give back the bytes of the oldest admitted message.
    pub fn release_one(&self) {
        let p = self.0.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
        drop(p);
    }
}

/// A request body that admits each gRPC message against the [`Budget`].
pub struct AdmittedBody<B> {
    inner: B,
    budget: Budget,
    sem: PollSemaphore,
    queue: PermitQueue,
    /// Permits to take before more bytes pass.
    need: Option<u32>,
    /// Unread rest of a chunk split at a message boundary.
    pending: Option<Bytes>,
    prefix: [u8; PREFIX_LEN],
    prefix_have: usize,
    /// Bytes of the current message still to pass.
    remaining: usize,
    /// The message whose prefix is being read holds its permit.
    admitted: bool,
}

impl<B> AdmittedBody<B> {
    /// Wrap `inner`; admitted permits go to `queue`.
    pub fn new(inner: B, budget: &Budget, queue: PermitQueue) -> Self {
        AdmittedBody {
            inner,
            budget: budget.clone(),
            sem: PollSemaphore::new(Arc::clone(&budget.sem)),
            queue,
            need: None,
            pending: None,
            prefix: [0; PREFIX_LEN],
            prefix_have: 0,
            remaining: 0,
            admitted: false,
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
                let units = self.budget.units_for(len);
                if units > 0 {
                    self.need = Some(units);
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
}

impl<B> Body for AdmittedBody<B>
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
        loop {
            if let Some(n) = this.need {
                let permit = ready!(this.sem.poll_acquire_many(cx, n));
                this.queue.push(permit);
                this.need = None;
                this.admitted = true;
            }
            let mut chunk = match this.pending.take() {
                Some(c) => c,
                None => match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                    Some(Ok(frame)) => match frame.into_data() {
                        Ok(data) => data,
                        Err(frame) => return Poll::Ready(Some(Ok(frame))),
                    },
                    other => return Poll::Ready(other),
                },
            };
            let pass = this.scan(&chunk);
            if pass < chunk.len() {
                this.pending = Some(chunk.split_off(pass));
            }
            if !chunk.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(chunk))));
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_none() && self.inner.is_end_stream()
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
    /// Wrap `inner`, giving back `permits` message by message.
    pub fn new(inner: B, permits: PermitQueue) -> Self {
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
    use http_body_util::{BodyExt, StreamBody};

    type TestBody = StreamBody<
        futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, std::io::Error>>>,
    >;

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

    #[tokio::test]
    async fn admits_each_message_and_splits_at_boundaries() {
        let budget = Budget::new(4 << 20);
        let q = PermitQueue::default();
        // Two messages in one chunk, the third's prefix split over two chunks.
        let mut wire = msg(3000);
        wire.extend(msg(10));
        let third = msg(2048);
        wire.extend_from_slice(&third[..3]);
        let mut b = AdmittedBody::new(body(vec![wire, third[3..].to_vec()]), &budget, q.clone());
        let mut sizes = vec![];
        while let Some(f) = b.frame().await {
            sizes.push(f.unwrap().into_data().unwrap().len());
        }
        // A message passes whole once admitted, its tail before the next
        // prefix; a partial prefix passes, its completing byte waits.
        assert_eq!(sizes, vec![3005, 15, 3, 2050]);
        let full = 4 << 20;
        assert_eq!(budget.available(), full - 3 * 1024 - 1024 - 2048);
        for _ in 0..3 {
            q.release_one();
        }
        assert_eq!(budget.available(), full);
    }

    #[tokio::test]
    async fn waits_for_budget_before_passing_a_message() {
        let budget = Budget::new(1 << 20);
        let hold = budget.acquire(1 << 20).await;
        let q = PermitQueue::default();
        let mut b = AdmittedBody::new(body(vec![msg(100)]), &budget, q.clone());
        // Not even the prefix passes (tonic would reserve the message for it).
        use futures_util::FutureExt;
        assert!(
            b.frame().now_or_never().is_none(),
            "must wait while the budget is taken"
        );
        drop(hold);
        let all = b.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(all.len(), PREFIX_LEN + 100);
    }

    #[tokio::test]
    async fn sliced_body_gives_back_each_message_after_its_last_slice() {
        let budget = Budget::new(1 << 20);
        let q = PermitQueue::default();
        q.push(budget.acquire(150 * 1024).await);
        q.push(budget.acquire(1024).await);
        let mut wire = msg(150 * 1024 - PREFIX_LEN);
        wire.extend(msg(100));
        let mut b = SlicedBody::new(body(vec![wire]), q);
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
    }
}

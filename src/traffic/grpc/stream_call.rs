//! `StreamingCall` on the server, written at the HTTP/2 body level.
//!
//! Owns the parse of `SimpleRequest`s as their bytes arrive
//! ([`RequestWalker`]: the fields a benchmark uses are read, the payload is
//! counted and skipped) and the response body that answers each request with
//! a shared header and the shared payload of its size ([`StreamCallBody`]).
//!
//! Why not tonic's `server::Grpc::streaming`: tonic's decoder reserves a
//! buffer as large as the largest message on a stream and keeps it for the
//! stream's whole life, so 2048 ping-pong streams of 4 MiB pin 8 GiB however
//! the bytes are admitted. Here nothing is assembled: a stream costs its
//! HTTP/2 window and a few bytes of parse state, and the response is read
//! from the request only when h2 asks for more response data, so a client
//! that stops reading stops its own requests (flow control end to end).
//! tonic still runs the connection (HTTP/2 settings, routing, shutdown).
//!
//! A call whose first request, or a request it has started, stops arriving
//! for the body timeout ends with DEADLINE_EXCEEDED; a call idle between
//! requests is left alone (it holds no message bytes).

use super::counters::GrpcCounters;
use super::proto::{body_len_in_payload, fill_prefix, EchoStatus, PREFIX_LEN};
use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame};
use prost::Message;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::time::Sleep;
use tonic::Status;

/// Bytes of a payload's start kept to find its body's length.
const PAYLOAD_HEAD: usize = 16;
/// Longest `response_status` accepted.
const MAX_STATUS: usize = 4096;

/// What a benchmark request asks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedRequest {
    /// `response_size`.
    pub response_size: i32,
    /// `response_status`, when set.
    pub status: Option<EchoStatus>,
    /// Payload body bytes received.
    pub payload_len: usize,
}

#[derive(Debug)]
enum Pb {
    Key,
    Varint(u64),
    Len(u64),
    Skip(usize),
    PayloadHead { left: usize, total: usize },
    Status { left: usize },
}

/// Parses gRPC-framed `SimpleRequest`s incrementally, keeping no payload.
#[derive(Debug)]
pub struct RequestWalker {
    max_message: usize,
    prefix: [u8; PREFIX_LEN],
    prefix_have: usize,
    in_message: bool,
    message_left: usize,
    state: Pb,
    varint: u64,
    shift: u32,
    head: Vec<u8>,
    current: ParsedRequest,
}

impl RequestWalker {
    /// A walker that refuses messages above `max_message` bytes.
    pub fn new(max_message: usize) -> Self {
        RequestWalker {
            max_message,
            prefix: [0; PREFIX_LEN],
            prefix_have: 0,
            in_message: false,
            message_left: 0,
            state: Pb::Key,
            varint: 0,
            shift: 0,
            head: Vec::new(),
            current: ParsedRequest::default(),
        }
    }

    /// True between messages.
    pub fn at_boundary(&self) -> bool {
        !self.in_message && self.prefix_have == 0
    }

    /// Feed one DATA chunk; complete requests are appended to `done`.
    pub fn feed(
        &mut self,
        mut data: &[u8],
        done: &mut VecDeque<ParsedRequest>,
    ) -> Result<(), Status> {
        while !data.is_empty() {
            if !self.in_message {
                fill_prefix(&mut self.prefix, &mut self.prefix_have, &mut data);
                if self.prefix_have == PREFIX_LEN {
                    self.start_message()?;
                    if self.message_left == 0 {
                        self.finish(done)?;
                    }
                }
                continue;
            }
            let n = data.len().min(self.message_left);
            self.walk(&data[..n])?;
            self.message_left -= n;
            data = &data[n..];
            if self.message_left == 0 {
                self.finish(done)?;
            }
        }
        Ok(())
    }

    fn start_message(&mut self) -> Result<(), Status> {
        let p = self.prefix;
        self.prefix_have = 0;
        if p[0] != 0 {
            return Err(Status::unimplemented(
                "compressed requests are not supported; send them uncompressed",
            ));
        }
        let len = u32::from_be_bytes([p[1], p[2], p[3], p[4]]) as usize;
        if len > self.max_message {
            return Err(Status::out_of_range(format!(
                "Error, decoded message length too large: found {len} bytes, the limit is: {} bytes",
                self.max_message
            )));
        }
        self.in_message = true;
        self.message_left = len;
        self.state = Pb::Key;
        self.current = ParsedRequest::default();
        Ok(())
    }

    fn finish(&mut self, done: &mut VecDeque<ParsedRequest>) -> Result<(), Status> {
        if !matches!(self.state, Pb::Key) || self.shift != 0 {
            return Err(Status::invalid_argument(
                "a grpc.testing.SimpleRequest ended inside a field",
            ));
        }
        self.in_message = false;
        done.push_back(std::mem::take(&mut self.current));
        Ok(())
    }

    /// Bytes of one message's protobuf encoding.
    fn walk(&mut self, mut b: &[u8]) -> Result<(), Status> {
        while !b.is_empty() {
            match self.state {
                Pb::Key | Pb::Varint(_) | Pb::Len(_) => {
                    let byte = b[0];
                    b = &b[1..];
                    if self.shift > 63 {
                        return Err(Status::invalid_argument("a varint is too long"));
                    }
                    self.varint |= u64::from(byte & 0x7f) << self.shift;
                    self.shift += 7;
                    if byte & 0x80 == 0 {
                        let v = std::mem::take(&mut self.varint);
                        self.shift = 0;
                        self.varint_done(v)?;
                    }
                }
                Pb::Skip(left) => {
                    let k = left.min(b.len());
                    b = &b[k..];
                    self.state = if left == k {
                        Pb::Key
                    } else {
                        Pb::Skip(left - k)
                    };
                }
                Pb::PayloadHead { left, total } => {
                    let k = left.min(b.len());
                    let keep = (PAYLOAD_HEAD - self.head.len().min(PAYLOAD_HEAD)).min(k);
                    self.head.extend_from_slice(&b[..keep]);
                    b = &b[k..];
                    if left == k {
                        self.current.payload_len += body_len_in_payload(&self.head, total);
                        self.state = Pb::Key;
                    } else {
                        self.state = Pb::PayloadHead {
                            left: left - k,
                            total,
                        };
                    }
                }
                Pb::Status { left } => {
                    let k = left.min(b.len());
                    self.head.extend_from_slice(&b[..k]);
                    b = &b[k..];
                    if left == k {
                        let st = EchoStatus::decode(self.head.as_slice()).map_err(|e| {
                            Status::invalid_argument(format!(
                                "response_status is not an EchoStatus: {e}"
                            ))
                        })?;
                        self.current.status = Some(st);
                        self.state = Pb::Key;
                    } else {
                        self.state = Pb::Status { left: left - k };
                    }
                }
            }
        }
        Ok(())
    }

    fn varint_done(&mut self, v: u64) -> Result<(), Status> {
        self.state = match self.state {
            Pb::Key => match (v >> 3, v & 7) {
                (_, 0) => Pb::Varint(v >> 3),
                (_, 1) => Pb::Skip(8),
                (_, 5) => Pb::Skip(4),
                (_, 2) => Pb::Len(v >> 3),
                (f, w) => {
                    return Err(Status::invalid_argument(format!(
                        "field {f} has wire type {w}, which a SimpleRequest never uses"
                    )))
                }
            },
            Pb::Varint(field) => {
                if field == 2 {
                    // int32: negative values arrive as 64-bit two's complement.
                    self.current.response_size = v as i64 as i32;
                }
                Pb::Key
            }
            Pb::Len(field) => {
                let n = usize::try_from(v).unwrap_or(usize::MAX);
                self.head.clear();
                match field {
                    _ if n == 0 => Pb::Key,
                    3 => Pb::PayloadHead { left: n, total: n },
                    7 if n <= MAX_STATUS => Pb::Status { left: n },
                    7 => {
                        return Err(Status::invalid_argument(format!(
                            "response_status of {n} bytes is longer than {MAX_STATUS}"
                        )))
                    }
                    _ => Pb::Skip(n),
                }
            }
            _ => Pb::Key,
        };
        Ok(())
    }
}

/// How a server answers one parsed request: header and shared payload, or a status.
pub trait Answer: Send + Sync + 'static {
    /// The response chunks and payload size, or the status to end the call with.
    fn answer(&self, req: &ParsedRequest) -> Result<(Bytes, Bytes, usize), Status>;
    /// Counters to count into.
    fn counters(&self) -> &GrpcCounters;
}

/// The response body of one `StreamingCall`: reads requests from `req` as h2
/// asks for response data, answers each in order, ends with the status.
pub struct StreamCallBody<B, A> {
    req: B,
    answer: Arc<A>,
    walker: RequestWalker,
    ready: VecDeque<ParsedRequest>,
    out: VecDeque<Bytes>,
    done: bool,
    /// Body timeout: fires when an awaited request stops arriving.
    idle: Duration,
    timer: Pin<Box<Sleep>>,
    /// A whole request has arrived on this call.
    seen_request: bool,
}

impl<B, A> StreamCallBody<B, A> {
    /// Answer the requests of `req` with `answer`; a request that stops
    /// arriving for `idle` ends the call (call inside a tokio runtime).
    pub fn new(req: B, answer: Arc<A>, max_message: usize, idle: Duration) -> Self {
        StreamCallBody {
            req,
            answer,
            walker: RequestWalker::new(max_message),
            ready: VecDeque::new(),
            out: VecDeque::new(),
            done: false,
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
            seen_request: false,
        }
    }
}

/// The trailers that end a call with `st`.
pub fn status_trailers(st: &Status) -> HeaderMap {
    // tonic writes grpc-status and the percent-encoded grpc-message.
    let (parts, ()) = st.clone().into_http::<()>().into_parts();
    let mut h = parts.headers;
    h.remove(http::header::CONTENT_TYPE);
    h
}

impl<B, A> Body for StreamCallBody<B, A>
where
    B: Body<Data = Bytes> + Unpin,
    A: Answer,
{
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        loop {
            if let Some(b) = this.out.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(b))));
            }
            if this.done {
                return Poll::Ready(None);
            }
            if let Some(r) = this.ready.pop_front() {
                match this.answer.answer(&r) {
                    Ok((head, body, size)) => {
                        this.answer
                            .counters()
                            .record_ok(size as u64, r.payload_len as u64, None);
                        this.out.push_back(head);
                        if !body.is_empty() {
                            this.out.push_back(body);
                        }
                    }
                    Err(st) => return Poll::Ready(Some(Ok(this.end(st)))),
                }
                continue;
            }
            let polled = Pin::new(&mut this.req).poll_frame(cx);
            if polled.is_pending() {
                // Between requests a call may idle; a request under way may not.
                if this.seen_request && this.walker.at_boundary() {
                    return Poll::Pending;
                }
                ready!(this.timer.as_mut().poll(cx));
                let st = Status::deadline_exceeded(format!(
                    "the request stopped: no bytes for {} (--body-timeout)",
                    humantime::format_duration(this.idle)
                ));
                return Poll::Ready(Some(Ok(this.end(st))));
            }
            match ready!(polled) {
                Some(Ok(frame)) => {
                    let at = tokio::time::Instant::now() + this.idle;
                    this.timer.as_mut().reset(at);
                    if let Ok(data) = frame.into_data() {
                        if let Err(st) = this.walker.feed(&data, &mut this.ready) {
                            // Answer what completed before the error, then end with it.
                            this.ready.clear();
                            return Poll::Ready(Some(Ok(this.end(st))));
                        }
                        this.seen_request |= !this.ready.is_empty();
                    }
                }
                Some(Err(_)) => {
                    return Poll::Ready(Some(Ok(
                        this.end(Status::cancelled("the client's request stream failed"))
                    )))
                }
                None if this.ready.is_empty() => {
                    let st = if this.walker.at_boundary() {
                        Status::new(tonic::Code::Ok, "")
                    } else {
                        Status::internal("the request stream ended inside a message")
                    };
                    return Poll::Ready(Some(Ok(this.end(st))));
                }
                None => {}
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.out.is_empty()
    }
}

impl<B, A: Answer> StreamCallBody<B, A> {
    fn end(&mut self, st: Status) -> Frame<Bytes> {
        if st.code() != tonic::Code::Ok {
            self.answer.counters().record_error(st.code() as i32);
        }
        self.done = true;
        Frame::trailers(status_trailers(&st))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::grpc::proto::{
        framed, payload_body, Payload, RequestTemplate, SimpleRequest,
    };

    #[test]
    fn walks_requests_split_anywhere() {
        let st = EchoStatus {
            code: 5,
            message: "x".into(),
        };
        let reqs = [
            SimpleRequest {
                response_type: 0,
                response_size: 64,
                payload: Some(Payload {
                    r#type: 0,
                    body: payload_body(64),
                }),
                response_status: None,
            },
            SimpleRequest {
                response_type: 0,
                response_size: 0,
                payload: None,
                response_status: Some(st.clone()),
            },
            SimpleRequest {
                response_type: 0,
                response_size: -1,
                payload: Some(Payload {
                    r#type: 0,
                    body: payload_body(70_000),
                }),
                response_status: Some(st.clone()),
            },
        ];
        let mut wire: Vec<u8> = reqs.iter().flat_map(framed).collect();
        // And one made by the client's template, empty message too.
        let t = RequestTemplate::new(payload_body(3), 9, None);
        wire.extend(t.chunks().iter().flat_map(|c| c.to_vec()));
        wire.extend([0, 0, 0, 0, 0]);
        for chunk in [1usize, 2, 5, 9, 100, wire.len()] {
            let mut w = RequestWalker::new(1 << 20);
            let mut done = VecDeque::new();
            for c in wire.chunks(chunk) {
                w.feed(c, &mut done).unwrap();
            }
            let got: Vec<_> = done.into_iter().collect();
            assert_eq!(got.len(), 5, "chunk {chunk}");
            assert_eq!((got[0].response_size, got[0].payload_len), (64, 64));
            assert_eq!(got[1].status, Some(st.clone()));
            assert_eq!((got[2].response_size, got[2].payload_len), (-1, 70_000));
            assert_eq!((got[3].response_size, got[3].payload_len), (9, 3));
            assert_eq!(got[4], ParsedRequest::default());
            assert!(w.at_boundary());
        }
    }

    #[test]
    fn refuses_large_compressed_and_truncated_messages() {
        let mut done = VecDeque::new();
        let e = RequestWalker::new(10)
            .feed(&[0, 0, 0, 0, 11], &mut done)
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::OutOfRange);
        let e = RequestWalker::new(10)
            .feed(&[1, 0, 0, 0, 1, 0], &mut done)
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unimplemented);
        // A message of 2 bytes holding a varint key whose value never ends.
        let e = RequestWalker::new(10)
            .feed(&[0, 0, 0, 0, 2, 0x10, 0x80], &mut done)
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
    }
}

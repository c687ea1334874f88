//! The wire format of `grpc.testing.BenchmarkService`, written by hand.
//!
//! Owns the protobuf messages (prost derive structs with the package, message
//! and field names and numbers of gRPC's own `grpc/testing/messages.proto` and
//! `benchmark_service.proto`), the gRPC length-prefixed framing, and the two
//! zero-copy helpers of the hot path: [`RequestTemplate`] (a request is a small
//! header followed by one shared, reference-counted payload) and
//! [`ResponseScanner`] (counts a response's payload bytes as frames arrive,
//! without keeping the message). It does no I/O.
//!
//! Only the fields the benchmark uses are declared; protobuf skips the others
//! (`fill_username`, `orca_per_query_report`, ...), so any BenchmarkService
//! peer interoperates. `tests/fixtures/grpc/bench.protoset` (written by
//! grpc-go's own descriptors) checks the numbers in a unit test.

use bytes::{BufMut, Bytes, BytesMut};

/// gRPC package and service name.
pub const SERVICE: &str = "grpc.testing.BenchmarkService";
/// HTTP/2 path of `UnaryCall`.
pub const UNARY_PATH: &str = "/grpc.testing.BenchmarkService/UnaryCall";
/// HTTP/2 path of `StreamingCall`.
pub const STREAMING_PATH: &str = "/grpc.testing.BenchmarkService/StreamingCall";
/// gRPC message prefix: compressed flag (1 byte) + big-endian length (4 bytes).
pub const PREFIX_LEN: usize = 5;

/// `grpc.testing.Payload`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Payload {
    /// `PayloadType type = 1` (only COMPRESSABLE = 0 exists).
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    /// `bytes body = 2`.
    #[prost(bytes = "bytes", tag = "2")]
    pub body: Bytes,
}

/// `grpc.testing.EchoStatus`: the status a request asks the server to answer with.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EchoStatus {
    /// `int32 code = 1`.
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// `string message = 2`.
    #[prost(string, tag = "2")]
    pub message: String,
}

/// `grpc.testing.SimpleRequest` (the fields a benchmark uses).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SimpleRequest {
    /// `PayloadType response_type = 1`.
    #[prost(int32, tag = "1")]
    pub response_type: i32,
    /// `int32 response_size = 2`: payload bytes the server answers with.
    #[prost(int32, tag = "2")]
    pub response_size: i32,
    /// `Payload payload = 3`.
    #[prost(message, optional, tag = "3")]
    pub payload: Option<Payload>,
    /// `EchoStatus response_status = 7`: answer with this status instead of OK.
    #[prost(message, optional, tag = "7")]
    pub response_status: Option<EchoStatus>,
}

/// `grpc.testing.SimpleResponse` (the field a benchmark uses).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SimpleResponse {
    /// `Payload payload = 1`.
    #[prost(message, optional, tag = "1")]
    pub payload: Option<Payload>,
}

impl SimpleRequest {
    /// Payload body bytes carried.
    pub fn payload_len(&self) -> usize {
        self.payload.as_ref().map_or(0, |p| p.body.len())
    }
}

fn varint_len(v: u64) -> usize {
    prost::encoding::encoded_len_varint(v)
}

/// A request of fixed shape: `[prefix + fields + payload header][payload body]`.
/// The body is one shared [`Bytes`] per size; every request clones the
/// reference, so a thousand requests in flight cost one payload of memory.
#[derive(Debug, Clone)]
pub struct RequestTemplate {
    head: Bytes,
    body: Bytes,
}

impl RequestTemplate {
    /// A request with `body` as payload asking for `response_size` bytes back
    /// (and for `status` instead of OK when given).
    pub fn new(body: Bytes, response_size: u32, status: Option<&EchoStatus>) -> Self {
        let size = body.len() as u64;
        // Payload { body = 2 } (type 0 is the default and not written).
        let payload_msg = if size > 0 {
            1 + varint_len(size) + body.len()
        } else {
            0
        };
        let mut fields = BytesMut::with_capacity(64);
        if response_size > 0 {
            prost::encoding::int32::encode(2, &(response_size as i32), &mut fields);
        }
        if let Some(st) = status {
            prost::encoding::message::encode(7, st, &mut fields);
        }
        // Field 3 (payload), length-delimited, then the body's own field header.
        fields.put_u8(0x1A);
        prost::encoding::encode_varint(payload_msg as u64, &mut fields);
        if size > 0 {
            fields.put_u8(0x12);
            prost::encoding::encode_varint(size, &mut fields);
        }
        let msg_len = fields.len() + body.len();
        let mut head = BytesMut::with_capacity(PREFIX_LEN + fields.len());
        head.put_u8(0);
        head.put_u32(msg_len as u32);
        head.put_slice(&fields);
        RequestTemplate {
            head: head.freeze(),
            body,
        }
    }

    /// The chunks of one request message: header, then the shared payload.
    pub fn chunks(&self) -> [Bytes; 2] {
        [self.head.clone(), self.body.clone()]
    }

    /// Length of the framed message (prefix included).
    pub fn framed_len(&self) -> usize {
        self.head.len() + self.body.len()
    }
}

/// `msg` as one length-prefixed gRPC message (uncompressed).
pub fn framed(msg: &impl prost::Message) -> Vec<u8> {
    let body = msg.encode_to_vec();
    let mut v = Vec::with_capacity(PREFIX_LEN + body.len());
    v.push(0);
    v.extend_from_slice(&(body.len() as u32).to_be_bytes());
    v.extend_from_slice(&body);
    v
}

/// One payload body of `size` bytes (a repeating pattern, like grpc-go's zeros
/// but not compressible to nothing by accident in a capture).
pub fn payload_body(size: usize) -> Bytes {
    Bytes::from((0..size).map(|i| (i % 251) as u8).collect::<Vec<u8>>())
}

/// What [`ResponseScanner`] reports for each complete message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScannedMessage {
    /// Protobuf-encoded message length (prefix excluded).
    pub message_len: usize,
    /// Payload body bytes (`SimpleResponse.payload.body`).
    pub payload_len: usize,
}

/// Bytes of a message's start kept to find its payload header.
const HEAD_KEEP: usize = 64;

/// Walks gRPC-framed bytes as they arrive and reports each complete message's
/// payload length. Keeps at most 64 bytes of a message, never the
/// message itself.
#[derive(Debug, Default)]
pub struct ResponseScanner {
    prefix: [u8; PREFIX_LEN],
    prefix_have: usize,
    /// Bytes of the current message still to come (after the prefix).
    remaining: usize,
    message_len: usize,
    head: Vec<u8>,
    in_message: bool,
}

/// Move bytes from the front of `data` into a message prefix of which `have`
/// bytes are there, until it is complete or `data` is used up.
pub(super) fn fill_prefix(prefix: &mut [u8; PREFIX_LEN], have: &mut usize, data: &mut &[u8]) {
    let take = (PREFIX_LEN - *have).min(data.len());
    prefix[*have..*have + take].copy_from_slice(&data[..take]);
    *have += take;
    *data = &data[take..];
}

/// The stream is not valid gRPC framing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FramingError(pub String);

impl ResponseScanner {
    /// Feed one DATA chunk; `on_message` is called for every message it completes.
    pub fn feed(
        &mut self,
        mut data: &[u8],
        mut on_message: impl FnMut(ScannedMessage),
    ) -> Result<(), FramingError> {
        while !data.is_empty() {
            if !self.in_message {
                fill_prefix(&mut self.prefix, &mut self.prefix_have, &mut data);
                if self.prefix_have < PREFIX_LEN {
                    return Ok(());
                }
                if self.prefix[0] != 0 {
                    return Err(FramingError(
                        "the server sent a compressed message, which wirescope does not request"
                            .into(),
                    ));
                }
                let len = u32::from_be_bytes([
                    self.prefix[1],
                    self.prefix[2],
                    self.prefix[3],
                    self.prefix[4],
                ]) as usize;
                self.prefix_have = 0;
                self.in_message = true;
                self.message_len = len;
                self.remaining = len;
                self.head.clear();
            }
            let take = self.remaining.min(data.len());
            if self.head.len() < HEAD_KEEP {
                let keep = (HEAD_KEEP - self.head.len()).min(take);
                self.head.extend_from_slice(&data[..keep]);
            }
            self.remaining -= take;
            data = &data[take..];
            if self.remaining == 0 {
                self.in_message = false;
                on_message(ScannedMessage {
                    message_len: self.message_len,
                    payload_len: payload_len_from_head(&self.head, self.message_len),
                });
            }
        }
        Ok(())
    }

    /// True when the bytes so far end exactly at a message boundary.
    pub fn at_boundary(&self) -> bool {
        !self.in_message && self.prefix_have == 0
    }
}

/// Read a varint from `b` at `*pos`.
fn read_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Find `SimpleResponse.payload(1).body(2)` in the first bytes of a message.
/// When the header is not within them (a peer that writes large fields first),
/// the whole message counts as payload: an over-count of a few bytes.
fn payload_len_from_head(head: &[u8], message_len: usize) -> usize {
    let whole = |end: usize| end <= head.len();
    match find_len_field(head, 1) {
        None if whole(message_len) => 0,
        None => message_len,
        Some((start, plen)) => {
            let end = start.saturating_add(plen);
            match find_len_field(&head[start..end.min(head.len())], 2) {
                Some((_, len)) => len,
                None if whole(end) => 0,
                None => plen,
            }
        }
    }
}

/// Payload body bytes in a `Payload` message of `content_len` bytes whose
/// first bytes are `head` (the body's own field header is among them).
pub fn body_len_in_payload(head: &[u8], content_len: usize) -> usize {
    match find_len_field(head, 2) {
        Some((_, len)) => len,
        None if content_len <= head.len() => 0,
        None => content_len,
    }
}

/// The framed `SimpleResponse` header that precedes a `size`-byte payload
/// body: prefix, `payload` field header, `body` field header.
pub fn response_head(size: usize) -> Bytes {
    let size64 = size as u64;
    let payload_msg = if size > 0 {
        1 + varint_len(size64) + size
    } else {
        0
    };
    let msg_len = 1 + varint_len(payload_msg as u64) + payload_msg;
    let mut head = BytesMut::with_capacity(PREFIX_LEN + 12);
    head.put_u8(0);
    head.put_u32(msg_len as u32);
    head.put_u8(0x0A);
    prost::encoding::encode_varint(payload_msg as u64, &mut head);
    if size > 0 {
        head.put_u8(0x12);
        prost::encoding::encode_varint(size64, &mut head);
    }
    head.freeze()
}

/// Offset of the content of the first length-delimited field `field` in `b`
/// (at top level), and its declared length.
fn find_len_field(b: &[u8], field: u64) -> Option<(usize, usize)> {
    let mut pos = 0;
    while pos < b.len() {
        let key = read_varint(b, &mut pos)?;
        let (num, wire) = (key >> 3, key & 7);
        match wire {
            0 => {
                read_varint(b, &mut pos)?;
            }
            1 => pos += 8,
            5 => pos += 4,
            2 => {
                let len = usize::try_from(read_varint(b, &mut pos)?).ok()?;
                if num == field {
                    return Some((pos, len));
                }
                pos = pos.checked_add(len)?;
            }
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn template_is_what_prost_encodes() {
        for (size, resp) in [(0usize, 0u32), (64, 64), (1000, 0), (300_000, 7)] {
            let body = payload_body(size);
            let t = RequestTemplate::new(body.clone(), resp, None);
            let wire: Vec<u8> = t.chunks().iter().flat_map(|c| c.to_vec()).collect();
            let want = SimpleRequest {
                response_type: 0,
                response_size: resp as i32,
                payload: Some(Payload { r#type: 0, body }),
                response_status: None,
            };
            assert_eq!(wire, framed(&want), "size {size}");
            assert_eq!(t.framed_len(), wire.len());
            let back = SimpleRequest::decode(&wire[PREFIX_LEN..]).unwrap();
            assert_eq!(back, want);
        }
    }

    #[test]
    fn template_carries_status() {
        let st = EchoStatus {
            code: 9,
            message: "nope".into(),
        };
        let t = RequestTemplate::new(payload_body(10), 10, Some(&st));
        let wire: Vec<u8> = t.chunks().iter().flat_map(|c| c.to_vec()).collect();
        let back = SimpleRequest::decode(&wire[PREFIX_LEN..]).unwrap();
        assert_eq!(back.response_status, Some(st));
        assert_eq!(back.payload_len(), 10);
    }

    #[test]
    fn scanner_counts_payload_across_any_split() {
        let msgs: Vec<SimpleResponse> = [0usize, 1, 64, 200, 70_000]
            .iter()
            .map(|&n| SimpleResponse {
                payload: Some(Payload {
                    r#type: 0,
                    body: payload_body(n),
                }),
            })
            .collect();
        let wire: Vec<u8> = msgs.iter().flat_map(framed).collect();
        for chunk in [1usize, 3, 5, 7, 1000, wire.len()] {
            let mut s = ResponseScanner::default();
            let mut got = vec![];
            for c in wire.chunks(chunk) {
                s.feed(c, |m| got.push(m.payload_len)).unwrap();
            }
            assert_eq!(got, vec![0, 1, 64, 200, 70_000], "chunk {chunk}");
            assert!(s.at_boundary());
        }
    }

    #[test]
    fn response_head_is_what_prost_encodes() {
        for size in [0usize, 1, 127, 128, 70_000] {
            let body = payload_body(size);
            let mut wire = response_head(size).to_vec();
            wire.extend_from_slice(&body);
            let want = SimpleResponse {
                payload: Some(Payload { r#type: 0, body }),
            };
            assert_eq!(wire, framed(&want), "size {size}");
        }
        assert_eq!(body_len_in_payload(&[0x12, 0x05], 7), 5);
        assert_eq!(body_len_in_payload(&[0x08, 0x00], 2), 0);
        assert_eq!(body_len_in_payload(&[0x08], 300), 300);
    }

    #[test]
    fn scanner_handles_empty_message_and_rejects_compression() {
        let mut s = ResponseScanner::default();
        let mut n = 0;
        s.feed(&[0, 0, 0, 0, 0], |m| {
            assert_eq!(m.payload_len, 0);
            n += 1;
        })
        .unwrap();
        assert_eq!(n, 1);
        assert!(s.feed(&[1, 0, 0, 0, 1, 0], |_| {}).is_err());
    }
}

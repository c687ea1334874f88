//! The BenchmarkService server: tonic, on its own runtime of N worker threads.
//!
//! Owns the service glue (written by hand: a tower service that routes
//! `UnaryCall` to tonic's `server::Grpc` with a prost codec, `StreamingCall`
//! to [`super::stream_call`], and answers any other path UNIMPLEMENTED), the
//! handlers, and the runner that serves either data
//! connections the session already accepted or its own listener
//! (`wirescope serve grpc`). It never keeps a message past its handler: the
//! request is dropped (and its budget given back) before the response is
//! made; a response's payload is one shared, reference-counted body per size.
//!
//! Memory: see [`super::budget`]. Per connection the server advertises
//! `max_streams` concurrent streams, a 64 KiB stream window, a connection
//! window of `max_streams x 64 KiB` and a 16 KiB header list, so at most
//! `budget + max_connections x max_streams x 64 KiB` bytes of messages are
//! held at once; no connection holds more than its fair share of the budget,
//! and none holds it longer than the body and response timeouts allow.
//! Connections (how many, the handshake timeout, the accept loop): see
//! [`super::conn`].

use super::budget::{
    AdmittedBody, BodyTimeout, Budget, ConnShare, PermitQueue, ResponsePermits, SlicedBody,
};
use super::conn::{ConnInfo, ConnLimits, Guarded, Live};
use super::counters::GrpcCounters;
use super::proto::{
    response_head, EchoStatus, Payload, SimpleRequest, SimpleResponse, SERVICE, STREAMING_PATH,
    UNARY_PATH,
};
use super::stream_call::{Answer, ParsedRequest, StreamCallBody};
use super::GrpcError;
use crate::traffic::workers::Workers;
use crate::traffic::{pin_current_thread, EngineControl, EngineError};
use crate::units::CpuId;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use prost::Message;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tonic::body::Body;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::{NamedService, UnaryService};
use tonic::{Code, Request, Response, Status};

/// Per-stream receive window the server advertises (h2's default).
pub const STREAM_WINDOW: u32 = 64 * 1024;
/// How often the runtime looks at the stop/abort flags.
const FLAG_POLL: Duration = Duration::from_millis(10);
/// Payload sizes kept shared at once (more distinct sizes are built per response).
const PAYLOAD_CACHE_ENTRIES: usize = 8;
/// Largest request header list accepted (SETTINGS_MAX_HEADER_LIST_SIZE).
pub const MAX_HEADER_LIST: u32 = 16 * 1024;

/// How the server runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Runtime worker threads (at least 1).
    pub threads: usize,
    /// CPUs for the worker threads, round-robin; empty = unpinned.
    pub cpus: Vec<CpuId>,
    /// Largest request or response message accepted, bytes.
    pub max_message: usize,
    /// Bytes of messages held at once (see [`super::budget`]).
    pub memory_budget: usize,
    /// Concurrent streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS);
    /// h2 refuses more with REFUSED_STREAM.
    pub max_streams: u32,
    /// Connections open at once (listener mode); extras are closed on accept.
    pub max_connections: usize,
    /// Calls in flight over all connections; more are answered RESOURCE_EXHAUSTED
    /// at once (each costs some KiB of HTTP/2 stream state outside the budget).
    pub max_calls: usize,
    /// Time a new connection has to send the HTTP/2 client preface.
    pub handshake_timeout: Duration,
    /// Time a request may go without a byte while incomplete (see [`BodyTimeout`]).
    pub body_timeout: Duration,
    /// Time a response may hold budget unread before its connection is reset.
    pub response_timeout: Duration,
}

impl ServerConfig {
    /// Defaults for `threads` workers: 64 MiB messages, 96 MiB budget, 256
    /// streams, 1024 connections, twice [`super::MAX_CONCURRENCY`] calls,
    /// 10 s handshake and body timeouts, 30 s response timeout.
    pub fn new(threads: usize) -> Self {
        ServerConfig {
            threads: threads.max(1),
            cpus: Vec::new(),
            max_message: super::MAX_MESSAGE,
            memory_budget: 96 << 20,
            max_streams: 256,
            max_connections: 1024,
            // The agent's only client is the test's, at most MAX_CONCURRENCY in flight.
            max_calls: 2 * super::MAX_CONCURRENCY as usize,
            handshake_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            response_timeout: Duration::from_secs(30),
        }
    }

    /// The connection limits of this configuration.
    pub fn limits(&self) -> ConnLimits {
        ConnLimits {
            max_connections: self.max_connections.max(1),
            handshake_timeout: self.handshake_timeout,
            response_timeout: self.response_timeout,
        }
    }

    /// Connection window: every stream may fill its window without starving the others.
    pub fn conn_window(&self) -> u32 {
        self.max_streams.saturating_mul(STREAM_WINDOW)
    }
}

/// Where the server's connections come from.
#[derive(Debug)]
pub enum Incoming {
    /// Data connections already accepted and bound to the test by the session;
    /// the server ends when all of them are closed.
    Streams(Vec<std::net::TcpStream>),
    /// A listening socket (`wirescope serve grpc`); the server runs until stopped.
    Listener(std::net::TcpListener),
}

/// A running server.
pub struct GrpcServer {
    pub(super) sup: Workers,
    counters: Arc<GrpcCounters>,
    budget: Budget,
    local_addr: Option<SocketAddr>,
}

impl GrpcServer {
    /// Start serving on `incoming` with `cfg`.
    pub fn start(cfg: ServerConfig, incoming: Incoming) -> Result<Self, GrpcError> {
        let counters = GrpcCounters::new(cfg.threads);
        Self::start_counted(cfg, incoming, counters)
    }

    /// [`GrpcServer::start`] counting into `counters` (made by the caller
    /// with [`GrpcCounters::new`]`(cfg.threads)`).
    pub fn start_counted(
        cfg: ServerConfig,
        incoming: Incoming,
        counters: Arc<GrpcCounters>,
    ) -> Result<Self, GrpcError> {
        super::check_cpus(&cfg.cpus)?;
        let local_addr = match &incoming {
            Incoming::Listener(l) => Some(l.local_addr().map_err(|e| GrpcError::Io {
                op: "reading the listening address",
                source: e,
            })?),
            Incoming::Streams(v) if v.is_empty() => {
                return Err(GrpcError::Usage(
                    "the gRPC server needs at least one data connection".into(),
                ))
            }
            Incoming::Streams(_) => None,
        };
        let c = Arc::clone(&counters);
        let budget = Budget::new(cfg.memory_budget);
        let b = budget.clone();
        let mut sup = Workers::default();
        let ctl = sup.control().clone();
        sup.spawn("grpc-server".into(), None, move || {
            run(cfg, incoming, ctl, c, b)
        })?;
        Ok(GrpcServer {
            sup,
            counters,
            budget,
            local_addr,
        })
    }

    /// The listening address (listener mode).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }
    /// Counters (for the sampler).
    pub fn counters(&self) -> &Arc<GrpcCounters> {
        &self.counters
    }
    /// Bytes of the memory budget held by messages now.
    pub fn budget_held(&self) -> usize {
        self.budget.held()
    }
    /// Graceful end: GOAWAY, in-flight RPCs finish.
    pub fn stop(&self) {
        self.sup.stop();
    }
    /// Immediate end (dropping the server does it too, and joins).
    pub fn abort(&self) {
        self.sup.abort();
    }
    /// True once the server thread has returned.
    pub fn is_finished(&self) -> bool {
        self.sup.is_finished()
    }
    /// Wait for the server to end (after [`stop`](Self::stop), or once every
    /// handed-in connection is closed).
    pub fn join(&mut self) -> Result<(), EngineError> {
        self.sup.join()
    }
}

/// Build the runtime (named, pinned, counted threads).
pub(super) fn runtime(
    name: &str,
    threads: usize,
    cpus: &[CpuId],
    counters: &Arc<GrpcCounters>,
) -> Result<tokio::runtime::Runtime, EngineError> {
    let next = Arc::new(AtomicUsize::new(0));
    let (c, cpus) = (Arc::clone(counters), cpus.to_vec());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name(format!("{name}-w"))
        .on_thread_start(move || {
            let i = next.fetch_add(1, Ordering::Relaxed);
            c.attach_thread(i);
            if !cpus.is_empty() {
                // CPUs were checked against this process's affinity before the start.
                let _ = pin_current_thread(cpus[i % cpus.len()]);
            }
        })
        .on_thread_stop(GrpcCounters::detach_thread)
        .enable_all()
        .build()
        .map_err(|source| EngineError::Spawn {
            name: format!("{name} runtime"),
            source,
        })
}

/// Resolves once `flag` is set.
pub(super) async fn flag_set(flag: Arc<std::sync::atomic::AtomicBool>) {
    while !flag.load(Ordering::Relaxed) {
        tokio::time::sleep(FLAG_POLL).await;
    }
}

fn run(
    cfg: ServerConfig,
    incoming: Incoming,
    ctl: EngineControl,
    counters: Arc<GrpcCounters>,
    budget: Budget,
) -> Result<(), EngineError> {
    let rt = runtime("grpc-server", cfg.threads, &cfg.cpus, &counters)?;
    let svc = BenchService::new(&cfg, Arc::clone(&counters), budget);
    let server = tonic::transport::Server::builder()
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(cfg.conn_window())
        .max_concurrent_streams(cfg.max_streams)
        .http2_max_header_list_size(MAX_HEADER_LIST)
        .http2_adaptive_window(Some(false));
    let limits = cfg.limits();
    let io_err = |op: &'static str| {
        move |source: std::io::Error| EngineError::Io {
            op,
            conn: 0,
            source,
        }
    };
    let result = rt.block_on(async move {
        let stop = flag_set(Arc::clone(&ctl.stop));
        let abort = flag_set(Arc::clone(&ctl.abort));
        let live = Arc::new(Live::default());
        let served = match incoming {
            Incoming::Streams(streams) => {
                let mut conns = Vec::with_capacity(streams.len());
                for s in streams {
                    conns.push(Ok::<_, std::io::Error>(Guarded::new(
                        tokio_stream_from(s).map_err(io_err("adopting a data connection"))?,
                        &live,
                        &limits,
                    )));
                }
                // Never-ending incoming: tonic shuts connections down when it ends.
                let incoming = futures_util::StreamExt::chain(
                    futures_util::stream::iter(conns),
                    futures_util::stream::pending(),
                );
                tokio::select! {
                    r = server.serve_with_incoming_shutdown(svc, incoming, stop) => r,
                    _ = abort => Ok(()),
                    _ = live.all_closed() => Ok(()),
                }
            }
            Incoming::Listener(l) => {
                l.set_nonblocking(true)
                    .map_err(io_err("setting the listener non-blocking"))?;
                let l = tokio::net::TcpListener::from_std(l)
                    .map_err(io_err("adopting the listener"))?;
                let incoming = super::conn::accept(l, Arc::clone(&live), limits);
                // Ends with this block (the select below drops it).
                let trim = super::conn::trim_after_closes(Arc::clone(&live));
                tokio::select! {
                    r = server.serve_with_incoming_shutdown(svc, incoming, stop) => r,
                    _ = abort => Ok(()),
                    () = trim => Ok(()),
                }
            }
        };
        served.map_err(|e| EngineError::Unsupported(format!("gRPC server failed: {e}")))
    });
    // Cancel what still runs (connections of an aborted server) and join the workers.
    rt.shutdown_timeout(Duration::from_secs(2));
    result
}

fn tokio_stream_from(s: std::net::TcpStream) -> std::io::Result<tokio::net::TcpStream> {
    s.set_nonblocking(true)?;
    s.set_nodelay(true)?;
    tokio::net::TcpStream::from_std(s)
}

/// State shared by all handlers of one server.
struct Shared {
    counters: Arc<GrpcCounters>,
    budget: Budget,
    body_timeout: BodyTimeout,
    /// Calls in flight over all connections ([`ServerConfig::max_calls`]).
    calls: Arc<tokio::sync::Semaphore>,
    max_calls: usize,
    max_message: usize,
    /// Framed response header and payload body, shared, per size.
    payloads: RwLock<HashMap<usize, (Bytes, Bytes)>>,
}

impl Shared {
    /// One shared header and body per response size.
    fn payload(&self, size: usize) -> (Bytes, Bytes) {
        if let Some(b) = self
            .payloads
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&size)
        {
            return b.clone();
        }
        let made = (response_head(size), super::proto::payload_body(size));
        let mut map = self.payloads.write().unwrap_or_else(|e| e.into_inner());
        if map.len() < PAYLOAD_CACHE_ENTRIES {
            map.insert(size, made.clone());
        }
        made
    }

    /// The payload size a request asks for, or the status it asks for.
    fn check(&self, response_size: i32, status: Option<&EchoStatus>) -> Result<usize, Status> {
        if let Some(st) = status {
            if st.code != 0 {
                return Err(Status::new(Code::from_i32(st.code), st.message.clone()));
            }
        }
        let size = usize::try_from(response_size).map_err(|_| {
            Status::invalid_argument(format!("response_size {response_size} is negative"))
        })?;
        if size.saturating_add(super::MESSAGE_OVERHEAD) > self.max_message {
            return Err(Status::resource_exhausted(format!(
                "response_size {size} exceeds this server's max message size of {} bytes",
                self.max_message
            )));
        }
        Ok(size)
    }

    /// The response a unary request asks for, or the status it asks for.
    fn answer(&self, req: &SimpleRequest) -> Result<(SimpleResponse, usize), Status> {
        let size = self.check(req.response_size, req.response_status.as_ref())?;
        let (_, body) = self.payload(size);
        Ok((
            SimpleResponse {
                payload: Some(Payload { r#type: 0, body }),
            },
            size,
        ))
    }

    /// Take the budget for an encoded response from `conn`'s share; the
    /// call's body gives it back.
    async fn hold_response(
        &self,
        resp: &SimpleResponse,
        conn: &Arc<ConnShare>,
        permits: Option<&ResponsePermits>,
    ) {
        if let Some(p) = permits {
            p.0.push(self.budget.acquire(conn, resp.encoded_len() + 5).await);
        }
    }

    fn grpc(&self) -> tonic::server::Grpc<BenchCodec> {
        tonic::server::Grpc::new(BenchCodec)
            .max_decoding_message_size(self.max_message)
            .max_encoding_message_size(self.max_message)
    }
}

/// The `grpc.testing.BenchmarkService` service (hand-written tonic glue).
#[derive(Clone)]
pub struct BenchService {
    shared: Arc<Shared>,
}

impl BenchService {
    fn new(cfg: &ServerConfig, counters: Arc<GrpcCounters>, budget: Budget) -> Self {
        BenchService {
            shared: Arc::new(Shared {
                counters,
                budget,
                body_timeout: BodyTimeout {
                    idle: cfg.body_timeout,
                },
                calls: Arc::new(tokio::sync::Semaphore::new(cfg.max_calls.max(1))),
                max_calls: cfg.max_calls.max(1),
                max_message: cfg.max_message,
                payloads: RwLock::new(HashMap::new()),
            }),
        }
    }
}

impl NamedService for BenchService {
    const NAME: &'static str = SERVICE;
}

impl tower_service::Service<http::Request<Body>> for BenchService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let shared = Arc::clone(&self.shared);
        let path = req.uri().path();
        let unary = path == UNARY_PATH;
        if !unary && path != STREAMING_PATH {
            let msg = format!("wirescope serves {UNARY_PATH} and {STREAMING_PATH}, not {path}");
            return Box::pin(async move { Ok(Status::unimplemented(msg).into_http()) });
        }
        // A call in flight costs stream state outside the budget: count it.
        let Ok(call) = Arc::clone(&shared.calls).try_acquire_owned() else {
            shared.counters.record_error(Code::ResourceExhausted as i32);
            let msg = format!(
                "this server has {} calls in flight, its limit (--max-calls); retry later",
                shared.max_calls
            );
            return Box::pin(async move { Ok(Status::resource_exhausted(msg).into_http()) });
        };
        if !unary {
            let max = shared.max_message;
            let idle = shared.body_timeout.idle;
            let body = StreamCallBody::new(req.into_body(), shared, max, idle);
            let body = Holding {
                inner: body,
                _call: call,
            };
            let mut resp = http::Response::new(Body::new(body));
            resp.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/grpc"),
            );
            return Box::pin(async move { Ok(resp) });
        }
        Box::pin(async move {
            let queue = PermitQueue::default();
            let responses = PermitQueue::default();
            let (mut parts, body) = req.into_parts();
            // Every connection has one; a request without it stands alone.
            let conn = match parts.extensions.get::<ConnInfo>() {
                Some(c) => Arc::clone(&c.share),
                None => ConnShare::new(),
            };
            parts.extensions.insert(queue.clone());
            parts.extensions.insert(ResponsePermits(responses.clone()));
            parts.extensions.insert(Arc::clone(&conn));
            let body = AdmittedBody::new(
                body,
                &shared.budget,
                &conn,
                queue,
                &shared.counters,
                shared.body_timeout,
            );
            let req = http::Request::from_parts(parts, body);
            let mut grpc = shared.grpc();
            let resp = grpc.unary(Unary(Arc::clone(&shared)), req).await;
            Ok(resp.map(|b| {
                let inner = SlicedBody::new(b, responses, &conn);
                Body::new(Holding { inner, _call: call })
            }))
        })
    }
}

impl Answer for Shared {
    fn answer(&self, req: &ParsedRequest) -> Result<(Bytes, Bytes, usize), Status> {
        let size = self.check(req.response_size, req.status.as_ref())?;
        let (head, body) = self.payload(size);
        Ok((head, body, size))
    }
    fn counters(&self) -> &GrpcCounters {
        &self.counters
    }
}

/// `UnaryCall`.
struct Unary(Arc<Shared>);

impl UnaryService<SimpleRequest> for Unary {
    type Response = SimpleResponse;
    type Future = BoxFuture<'static, Result<Response<SimpleResponse>, Status>>;

    fn call(&mut self, req: Request<SimpleRequest>) -> Self::Future {
        let shared = Arc::clone(&self.0);
        Box::pin(async move {
            let queue = req.extensions().get::<PermitQueue>().cloned();
            let responses = req.extensions().get::<ResponsePermits>().cloned();
            let conn = req
                .extensions()
                .get::<Arc<ConnShare>>()
                .cloned()
                .unwrap_or_else(ConnShare::new);
            let msg = req.into_inner();
            let rx = msg.payload_len() as u64;
            let answer = shared.answer(&msg);
            // The request is done with: drop it and give its bytes back first.
            drop(msg);
            if let Some(q) = queue {
                q.release_one();
            }
            match answer {
                Err(st) => {
                    shared.counters.record_error(st.code() as i32);
                    Err(st)
                }
                Ok((resp, tx)) => {
                    shared.hold_response(&resp, &conn, responses.as_ref()).await;
                    shared.counters.record_ok(tx as u64, rx, None);
                    Ok(Response::new(resp))
                }
            }
        })
    }
}

/// A response body that holds `G` (a call's slot) until it is dropped.
struct Holding<B, G> {
    inner: B,
    _call: G,
}

impl<B, G> http_body::Body for Holding<B, G>
where
    B: http_body::Body + Unpin,
    G: Unpin,
{
    type Data = B::Data;
    type Error = B::Error;
    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// prost codec for the server side (decodes requests, encodes responses).
#[derive(Debug, Clone, Copy, Default)]
pub struct BenchCodec;

/// Encodes [`SimpleResponse`]s.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResponseEncoder;

/// Decodes [`SimpleRequest`]s (the payload is a zero-copy slice of tonic's buffer).
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestDecoder;

impl Codec for BenchCodec {
    type Encode = SimpleResponse;
    type Decode = SimpleRequest;
    type Encoder = ResponseEncoder;
    type Decoder = RequestDecoder;
    fn encoder(&mut self) -> ResponseEncoder {
        ResponseEncoder
    }
    fn decoder(&mut self) -> RequestDecoder {
        RequestDecoder
    }
}

impl Encoder for ResponseEncoder {
    type Item = SimpleResponse;
    type Error = Status;
    fn encode(&mut self, item: SimpleResponse, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        // One allocation of the right size instead of doubling from 8 KiB.
        dst.reserve(item.encoded_len());
        item.encode(dst)
            .map_err(|e| Status::internal(format!("encoding the response: {e}")))
    }
    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(512, 32 * 1024)
    }
}

impl Decoder for RequestDecoder {
    type Item = SimpleRequest;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<SimpleRequest>, Status> {
        SimpleRequest::decode(src)
            .map(Some)
            .map_err(|e| Status::invalid_argument(format!("not a grpc.testing.SimpleRequest: {e}")))
    }
    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(1024, 32 * 1024)
    }
}

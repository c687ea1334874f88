//! The BenchmarkService client: `channels` HTTP/2 connections x `concurrency`
//! RPCs in flight, on its own runtime of pinned worker threads.
//!
//! Owns connecting (or adopting the session's data connections), the first
//! RPC that turns a wrong target into one typed error, the slot tasks (one per
//! RPC in flight, slot i on channel i mod channels) and their counting. It is
//! written on hyper's HTTP/2 client rather than tonic's `Channel` because the
//! bytes of a request must be a shared payload and a response must never be
//! collected whole (see the parent module's memory notes); the gRPC framing it
//! needs is five bytes and a status header, checked against tonic's server and
//! grpc-go's in the tests and the bench.

use super::counters::{status_name, GrpcCounters};
use super::proto::{
    payload_body, EchoStatus, FramingError, RequestTemplate, ResponseScanner, ScannedMessage,
    STREAMING_PATH, UNARY_PATH,
};
use super::server::{flag_set, runtime};
use super::{GrpcError, GrpcMode};
use crate::traffic::workers::Workers;
use crate::traffic::{EngineControl, EngineError};
use crate::units::CpuId;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Uri};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Incoming as RespBody;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Receive budget of the client over all its connections (see the module notes).
const RECV_BUDGET: u32 = 64 << 20;
/// Connect and first-RPC timeout.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a graceful end waits for connections to say goodbye.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// What the client does.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// Unary or stream.
    pub mode: GrpcMode,
    /// HTTP/2 connections.
    pub channels: usize,
    /// RPCs in flight in all.
    pub concurrency: usize,
    /// Request payload bytes.
    pub size: usize,
    /// Response payload bytes.
    pub resp_size: usize,
    /// Runtime worker threads.
    pub threads: usize,
    /// CPUs for the worker threads, round-robin; empty = unpinned.
    pub cpus: Vec<CpuId>,
    /// Ask the server to answer with this status (tests of error counting).
    pub response_status: Option<EchoStatus>,
}

/// Where the client's connections come from.
#[derive(Debug)]
pub enum Target {
    /// Data connections the session opened and bound to the test, one per channel.
    Streams(Vec<std::net::TcpStream>),
    /// `HOST:PORT` of any BenchmarkService server.
    Addr(String),
}

/// The HTTP/2 receive windows the client advertised.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Windows {
    /// Per-stream window, bytes.
    pub stream: u32,
    /// Per-connection window, bytes.
    pub connection: u32,
}

impl Windows {
    /// Windows for `channels` connections receiving `resp_size`-byte payloads.
    pub fn for_point(channels: usize, resp_size: usize) -> Self {
        let channels = u32::try_from(channels.max(1)).unwrap_or(u32::MAX);
        let connection = (RECV_BUDGET / channels).max(1 << 20);
        let framed = u32::try_from(resp_size.saturating_add(64)).unwrap_or(u32::MAX);
        let stream = framed.clamp(64 * 1024, 8 << 20).min(connection);
        Windows { stream, connection }
    }
}

/// A running client.
pub struct GrpcClient {
    pub(super) sup: Workers,
    counters: Arc<GrpcCounters>,
    failure: Arc<Mutex<Option<GrpcError>>>,
}

impl GrpcClient {
    /// Connect, make one RPC to check the target, then start the load.
    /// Returns when the load runs (or with the error that stopped it from starting).
    pub fn start(cfg: ClientConfig, target: Target) -> Result<Self, GrpcError> {
        let counters = GrpcCounters::new(cfg.threads);
        Self::start_counted(cfg, target, counters)
    }

    /// [`GrpcClient::start`] counting into `counters` (made by the caller
    /// with [`GrpcCounters::new`]`(cfg.threads)`, so a sampler can hold them
    /// before the client runs).
    pub fn start_counted(
        cfg: ClientConfig,
        target: Target,
        counters: Arc<GrpcCounters>,
    ) -> Result<Self, GrpcError> {
        check_config(&cfg, &target)?;
        super::check_cpus(&cfg.cpus)?;
        let failure = Arc::new(Mutex::new(None));
        let windows = Windows::for_point(cfg.channels, cfg.resp_size);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (c, f) = (Arc::clone(&counters), Arc::clone(&failure));
        let mut sup = Workers::default();
        let ctl = sup.control().clone();
        sup.spawn("grpc-client".into(), None, move || {
            run(cfg, target, windows, ctl, c, f, ready_tx)
        })?;
        let mut client = GrpcClient {
            sup,
            counters,
            failure,
        };
        super::await_ready(
            &ready_rx,
            || client.join(),
            || GrpcError::Usage("the gRPC client ended before it started".into()),
        )?;
        Ok(client)
    }

    /// Counters (for the sampler).
    pub fn counters(&self) -> &Arc<GrpcCounters> {
        &self.counters
    }
    /// Graceful end: every slot finishes its RPC, streams are closed cleanly.
    pub fn stop(&self) {
        self.sup.stop();
    }
    /// Immediate end (dropping the client does it too, and joins).
    pub fn abort(&self) {
        self.sup.abort();
    }
    /// True once the client thread has returned.
    pub fn is_finished(&self) -> bool {
        self.sup.is_finished()
    }
    /// Wait for the end; the first error of any slot wins.
    pub fn join(&mut self) -> Result<(), GrpcError> {
        let joined = self.sup.join();
        if let Some(e) = self
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            return Err(e);
        }
        joined.map_err(GrpcError::from)
    }
}

fn check_config(cfg: &ClientConfig, target: &Target) -> Result<(), GrpcError> {
    if cfg.concurrency == 0 {
        return Err(GrpcError::Usage(
            "--concurrency 0 makes no RPCs; use at least 1 (and at least --channels)".into(),
        ));
    }
    if cfg.channels == 0 {
        return Err(GrpcError::Usage("--channels must be at least 1".into()));
    }
    if cfg.concurrency < cfg.channels {
        return Err(GrpcError::Usage(format!(
            "--concurrency {} is below --channels {}: raise --concurrency or lower --channels",
            cfg.concurrency, cfg.channels
        )));
    }
    for (what, v) in [("size", cfg.size), ("resp-size", cfg.resp_size)] {
        if v > super::MAX_MESSAGE - super::MESSAGE_OVERHEAD {
            return Err(GrpcError::Usage(format!(
                "--{what} {v} exceeds wirescope's limit of {} bytes",
                super::MAX_MESSAGE - super::MESSAGE_OVERHEAD
            )));
        }
    }
    if let Target::Streams(s) = target {
        if s.len() != cfg.channels {
            return Err(GrpcError::Usage(format!(
                "{} data connections for {} channels",
                s.len(),
                cfg.channels
            )));
        }
    }
    Ok(())
}

/// One HTTP/2 connection.
#[derive(Clone)]
struct Channel {
    index: usize,
    send: SendRequest<ReqBody>,
}

/// What every slot shares.
struct Plan {
    target: String,
    request: RequestTemplate,
    unary_uri: Uri,
    stream_uri: Uri,
    size: u64,
    expect_status: i32,
}

#[allow(clippy::too_many_arguments)]
fn run(
    cfg: ClientConfig,
    target: Target,
    windows: Windows,
    ctl: EngineControl,
    counters: Arc<GrpcCounters>,
    failure: Arc<Mutex<Option<GrpcError>>>,
    ready: std::sync::mpsc::Sender<Result<(), GrpcError>>,
) -> Result<(), EngineError> {
    let rt = runtime("grpc-client", cfg.threads, &cfg.cpus, &counters)?;
    let fail = |e: GrpcError| {
        let mut f = failure.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            *f = Some(e);
        }
    };
    rt.block_on(async {
        let (chans, conns, plan) = match setup(&cfg, target, windows).await {
            Ok(v) => v,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let plan = Arc::new(plan);
        if let Err(e) = first_rpc(&cfg, &chans[0], &plan, &counters).await {
            let _ = ready.send(Err(e));
            return;
        }
        let _ = ready.send(Ok(()));
        let mut slots = tokio::task::JoinSet::new();
        for i in 0..cfg.concurrency {
            let ch = chans[i % chans.len()].clone();
            let (plan, ctl, c) = (Arc::clone(&plan), ctl.clone(), Arc::clone(&counters));
            match cfg.mode {
                GrpcMode::Unary => slots.spawn(unary_slot(ch, plan, ctl, c)),
                GrpcMode::Stream => slots.spawn(stream_slot(ch, plan, ctl, c)),
            };
        }
        drop(chans);
        let abort = flag_set(Arc::clone(&ctl.abort));
        tokio::pin!(abort);
        loop {
            tokio::select! {
                _ = &mut abort => return,
                done = slots.join_next() => match done {
                    None => break,
                    Some(Ok(Ok(()))) => {}
                    Some(Ok(Err(e))) => {
                        if !ctl.aborted() {
                            fail(e);
                        }
                        ctl.abort.store(true, Ordering::Relaxed);
                        return;
                    }
                    Some(Err(join)) => {
                        fail(GrpcError::Engine(EngineError::Panicked(format!("grpc slot: {join}"))));
                        return;
                    }
                },
            }
        }
        // Every slot ended cleanly: the senders are gone, let the connections close.
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, async {
            for c in conns {
                let _ = c.await;
            }
        })
        .await;
    });
    rt.shutdown_timeout(CLOSE_TIMEOUT);
    Ok(())
}

type ConnTask = tokio::task::JoinHandle<()>;

async fn setup(
    cfg: &ClientConfig,
    target: Target,
    w: Windows,
) -> Result<(Vec<Channel>, Vec<ConnTask>, Plan), GrpcError> {
    let (streams, name) = match target {
        Target::Addr(addr) => {
            let mut v = Vec::with_capacity(cfg.channels);
            for _ in 0..cfg.channels {
                let s = tokio::time::timeout(SETUP_TIMEOUT, tokio::net::TcpStream::connect(&addr))
                    .await
                    .map_err(|_| GrpcError::Connect {
                        target: addr.clone(),
                        source: std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!("no answer in {SETUP_TIMEOUT:?}"),
                        ),
                    })?
                    .map_err(|source| GrpcError::Connect {
                        target: addr.clone(),
                        source,
                    })?;
                v.push(s);
            }
            (v, addr)
        }
        Target::Streams(std_streams) => {
            let name = std_streams
                .first()
                .and_then(|s| s.peer_addr().ok())
                .map_or_else(|| "the peer".to_string(), |a| a.to_string());
            let mut v = Vec::with_capacity(std_streams.len());
            for s in std_streams {
                s.set_nonblocking(true)
                    .and_then(|()| tokio::net::TcpStream::from_std(s))
                    .map(|s| v.push(s))
                    .map_err(|source| GrpcError::Io {
                        op: "adopting a data connection",
                        source,
                    })?;
            }
            (v, name)
        }
    };
    let mut chans = Vec::with_capacity(streams.len());
    let mut conns = Vec::with_capacity(streams.len());
    for (index, s) in streams.into_iter().enumerate() {
        let _ = s.set_nodelay(true);
        let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .initial_stream_window_size(w.stream)
            .initial_connection_window_size(w.connection)
            .adaptive_window(false)
            .max_concurrent_reset_streams(1024)
            .handshake::<_, ReqBody>(TokioIo::new(s))
            .await
            .map_err(|e| GrpcError::NotGrpc {
                target: name.clone(),
                detail: format!("the HTTP/2 handshake on connection {index} failed: {e}"),
            })?;
        conns.push(tokio::spawn(async move {
            let _ = conn.await;
        }));
        chans.push(Channel { index, send });
    }
    let uri = |path: &str| -> Result<Uri, GrpcError> {
        Uri::builder()
            .scheme("http")
            .authority(name.as_str())
            .path_and_query(path)
            .build()
            .map_err(|e| GrpcError::Usage(format!("'{name}' is not a valid HOST:PORT: {e}")))
    };
    let status = cfg.response_status.as_ref();
    let plan = Plan {
        request: RequestTemplate::new(payload_body(cfg.size), cfg.resp_size as u32, status),
        unary_uri: uri(UNARY_PATH)?,
        stream_uri: uri(STREAMING_PATH)?,
        target: name.clone(),
        size: cfg.size as u64,
        expect_status: status.map_or(0, |s| s.code),
    };
    Ok((chans, conns, plan))
}

/// One RPC before the load: a wrong target, a missing method or a message
/// too large becomes one clear error here instead of a storm of counted ones.
async fn first_rpc(
    cfg: &ClientConfig,
    ch: &Channel,
    plan: &Plan,
    counters: &GrpcCounters,
) -> Result<(), GrpcError> {
    let (uri, method) = match cfg.mode {
        GrpcMode::Unary => (&plan.unary_uri, UNARY_PATH),
        GrpcMode::Stream => (&plan.stream_uri, STREAMING_PATH),
    };
    let body = match cfg.mode {
        GrpcMode::Unary => ReqBody::unary(&plan.request),
        GrpcMode::Stream => ReqBody::once(&plan.request),
    };
    let t0 = Instant::now();
    let call = async {
        let resp = ch
            .send
            .clone()
            .send_request(request(uri, body))
            .await
            .map_err(|e| not_grpc(plan, format!("the HTTP/2 request failed: {e}")))?;
        let mut reader = ResponseReader::open(resp).map_err(|d| not_grpc(plan, d.to_string()))?;
        let mut rx = 0;
        loop {
            match reader.next().await {
                Ok(Next::Message(m)) => rx += m.payload_len as u64,
                Ok(Next::End { code, message }) => return Ok((code, message, rx)),
                Err(detail) => return Err(not_grpc(plan, detail.to_string())),
            }
        }
    };
    let (code, message, rx) = tokio::time::timeout(SETUP_TIMEOUT, call)
        .await
        .map_err(|_| GrpcError::Status {
            target: plan.target.clone(),
            code: "DEADLINE_EXCEEDED",
            message: format!("no answer to the first RPC in {SETUP_TIMEOUT:?}"),
        })??;
    if code == plan.expect_status {
        // A real RPC the server counted: count it here too.
        match code {
            0 => counters.record_ok(plan.size, rx, Some(t0.elapsed())),
            c => counters.record_error(c),
        }
        return Ok(());
    }
    let target = plan.target.clone();
    Err(match code {
        12 => GrpcError::Unimplemented {
            target,
            method: method.to_string(),
            message,
            hint: if cfg.mode == GrpcMode::Stream {
                " streaming; try --mode unary".into()
            } else {
                String::new()
            },
        },
        // tonic says OUT_OF_RANGE, grpc-go RESOURCE_EXHAUSTED.
        8 | 11 => {
            let response = message.contains("response_size");
            GrpcError::TooLarge {
                target,
                what: if response { "response" } else { "request" },
                flag: if response { "resp-size" } else { "size" },
                size: if response { cfg.resp_size } else { cfg.size },
                message,
            }
        }
        c => GrpcError::Status {
            target,
            code: status_name(c),
            message,
        },
    })
}

fn not_grpc(plan: &Plan, detail: String) -> GrpcError {
    GrpcError::NotGrpc {
        target: plan.target.clone(),
        detail,
    }
}

fn request(uri: &Uri, body: ReqBody) -> http::Request<ReqBody> {
    let mut req = http::Request::new(body);
    *req.method_mut() = Method::POST;
    *req.uri_mut() = uri.clone();
    *req.version_mut() = http::Version::HTTP_2;
    let h = req.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    h.insert(http::header::TE, HeaderValue::from_static("trailers"));
    h.insert(
        http::header::USER_AGENT,
        HeaderValue::from_static(concat!("wirescope/", env!("CARGO_PKG_VERSION"))),
    );
    req
}

fn transport(plan: &Plan, ch: &Channel, detail: impl std::fmt::Display) -> GrpcError {
    GrpcError::Transport {
        target: plan.target.clone(),
        channel: ch.index,
        detail: detail.to_string(),
    }
}

async fn unary_slot(
    mut ch: Channel,
    plan: Arc<Plan>,
    ctl: EngineControl,
    counters: Arc<GrpcCounters>,
) -> Result<(), GrpcError> {
    while !ctl.stopping() {
        let t0 = Instant::now();
        let req = request(&plan.unary_uri, ReqBody::unary(&plan.request));
        let Some(mut reader) = call(&mut ch, req, &plan, &ctl).await? else {
            return Ok(());
        };
        let mut rx = 0u64;
        loop {
            match reader.next().await {
                Ok(Next::Message(m)) => rx += m.payload_len as u64,
                Ok(Next::End { code: 0, .. }) => {
                    counters.record_ok(plan.size, rx, Some(t0.elapsed()));
                    break;
                }
                Ok(Next::End { code, .. }) => {
                    counters.record_error(code);
                    break;
                }
                Err(_) if ctl.stopping() => return Ok(()),
                Err(d) => return Err(transport(&plan, &ch, d)),
            }
        }
    }
    Ok(())
}

/// Send `req` and check the response head; `None` when the send failed
/// because the test is ending (not an error).
async fn call(
    ch: &mut Channel,
    req: http::Request<ReqBody>,
    plan: &Plan,
    ctl: &EngineControl,
) -> Result<Option<ResponseReader>, GrpcError> {
    match ch.send.send_request(req).await {
        Ok(resp) => ResponseReader::open(resp)
            .map(Some)
            .map_err(|d| transport(plan, ch, d)),
        Err(_) if ctl.stopping() => Ok(None),
        Err(e) => Err(transport(plan, ch, e)),
    }
}

async fn stream_slot(
    mut ch: Channel,
    plan: Arc<Plan>,
    ctl: EngineControl,
    counters: Arc<GrpcCounters>,
) -> Result<(), GrpcError> {
    while !ctl.stopping() {
        let (tx, rx) = mpsc::channel(1);
        let mut t0 = Instant::now();
        // The first message goes with the request: some servers send headers only then.
        if tx.send(plan.request.chunks()).await.is_err() {
            return Ok(());
        }
        let req = request(&plan.stream_uri, ReqBody::stream(rx));
        let Some(mut reader) = call(&mut ch, req, &plan, &ctl).await? else {
            return Ok(());
        };
        let mut tx = Some(tx);
        loop {
            match reader.next().await {
                Ok(Next::Message(m)) => {
                    counters.record_ok(plan.size, m.payload_len as u64, Some(t0.elapsed()));
                    match &tx {
                        Some(sender) if !ctl.stopping() => {
                            t0 = Instant::now();
                            if sender.send(plan.request.chunks()).await.is_err() {
                                tx = None;
                            }
                        }
                        // Half-close: the server ends its side with a status.
                        _ => tx = None,
                    }
                }
                Ok(Next::End { code, .. }) => {
                    if code != 0 {
                        counters.record_error(code);
                    }
                    break;
                }
                Err(_) if ctl.stopping() => return Ok(()),
                Err(d) => return Err(transport(&plan, &ch, d)),
            }
        }
    }
    Ok(())
}

/// What a response yields next.
enum Next {
    /// One complete message.
    Message(ScannedMessage),
    /// The call's status (from trailers, or trailers-only headers).
    End {
        /// grpc-status.
        code: i32,
        /// grpc-message.
        message: String,
    },
}

/// Why a response is not a gRPC answer, or broke off.
#[derive(Debug, thiserror::Error)]
enum ResponseError {
    /// An HTTP status other than 200 without a gRPC status.
    #[error("it answered HTTP {0}")]
    Http(http::StatusCode),
    /// A content type other than gRPC's without a gRPC status.
    #[error("it answered content-type '{0}'")]
    ContentType(String),
    /// The body's framing is broken.
    #[error(transparent)]
    Framing(#[from] FramingError),
    /// The body failed (the connection broke, the stream was reset).
    #[error("the response body failed: {0}")]
    Body(String),
    /// The body ended between a message's start and its end.
    #[error("the response ended inside a message")]
    Truncated,
}

/// Reads a gRPC response frame by frame, keeping no message.
struct ResponseReader {
    body: Option<RespBody>,
    scanner: ResponseScanner,
    ready: VecDeque<ScannedMessage>,
    end: Option<(i32, String)>,
}

impl ResponseReader {
    /// Check the response head; a trailers-only response ends at once.
    fn open(resp: http::Response<RespBody>) -> Result<Self, ResponseError> {
        let status = resp.status();
        let ct = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let end = grpc_status(resp.headers());
        if status != http::StatusCode::OK && end.is_none() {
            return Err(ResponseError::Http(status));
        }
        if !ct.starts_with("application/grpc") && end.is_none() {
            return Err(ResponseError::ContentType(ct));
        }
        Ok(ResponseReader {
            body: end.is_none().then(|| resp.into_body()),
            scanner: ResponseScanner::default(),
            ready: VecDeque::new(),
            end,
        })
    }

    async fn next(&mut self) -> Result<Next, ResponseError> {
        loop {
            if let Some(m) = self.ready.pop_front() {
                return Ok(Next::Message(m));
            }
            let Some(body) = self.body.as_mut() else {
                let (code, message) = self
                    .end
                    .take()
                    .unwrap_or((2, "the response ended without a grpc-status trailer".into()));
                return Ok(Next::End { code, message });
            };
            match body.frame().await {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        let ready = &mut self.ready;
                        self.scanner.feed(&data, |m| ready.push_back(m))?;
                    }
                    Err(frame) => {
                        if let Some(t) = frame.trailers_ref() {
                            self.end = grpc_status(t);
                        }
                    }
                },
                Some(Err(e)) => return Err(ResponseError::Body(e.to_string())),
                None => {
                    self.body = None;
                    if !self.scanner.at_boundary() && self.end.is_none() {
                        return Err(ResponseError::Truncated);
                    }
                }
            }
        }
    }
}

/// `grpc-status` and `grpc-message` of a header or trailer block.
fn grpc_status(h: &HeaderMap) -> Option<(i32, String)> {
    let code = h.get("grpc-status")?.to_str().ok()?.trim().parse().ok()?;
    let message = h
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .map(percent_decode)
        .unwrap_or_default();
    Some((code, message))
}

/// grpc-message is percent-encoded (RFC 3986 style) by the gRPC spec.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A request body: a unary message, or the messages a stream slot sends.
pub struct ReqBody {
    chunks: [Option<Bytes>; 2],
    stream: Option<mpsc::Receiver<[Bytes; 2]>>,
}

impl ReqBody {
    fn unary(t: &RequestTemplate) -> Self {
        let [a, b] = t.chunks();
        ReqBody {
            chunks: [Some(a), (!b.is_empty()).then_some(b)],
            stream: None,
        }
    }
    /// One message on a stream request (then the client's side ends).
    fn once(t: &RequestTemplate) -> Self {
        Self::unary(t)
    }
    fn stream(rx: mpsc::Receiver<[Bytes; 2]>) -> Self {
        ReqBody {
            chunks: [None, None],
            stream: Some(rx),
        }
    }
}

impl Body for ReqBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        for c in &mut this.chunks {
            if let Some(b) = c.take() {
                return Poll::Ready(Some(Ok(Frame::data(b))));
            }
        }
        match this.stream.as_mut() {
            None => Poll::Ready(None),
            Some(rx) => match rx.poll_recv(cx) {
                Poll::Ready(Some([head, body])) => {
                    this.chunks[1] = (!body.is_empty()).then_some(body);
                    Poll::Ready(Some(Ok(Frame::data(head))))
                }
                Poll::Ready(None) => {
                    this.stream = None;
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.stream.is_none() && self.chunks.iter().all(Option::is_none)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_bounded() {
        let w = Windows::for_point(8, 64);
        assert_eq!(
            w,
            Windows {
                stream: 64 * 1024,
                connection: 8 << 20
            }
        );
        let w = Windows::for_point(8, 4 << 20);
        assert_eq!(w.stream, (4 << 20) + 64);
        let w = Windows::for_point(1024, 32 << 20);
        assert_eq!(w.connection, 1 << 20);
        assert_eq!(w.stream, 1 << 20);
    }

    #[test]
    fn grpc_message_is_percent_decoded() {
        assert_eq!(percent_decode("a%20b%25"), "a b%");
        assert_eq!(percent_decode("100%"), "100%");
        let mut h = HeaderMap::new();
        h.insert("grpc-status", HeaderValue::from_static("12"));
        h.insert("grpc-message", HeaderValue::from_static("no%20such"));
        assert_eq!(grpc_status(&h), Some((12, "no such".into())));
    }

    #[test]
    fn zero_concurrency_is_a_usage_error() {
        let cfg = ClientConfig {
            mode: GrpcMode::Unary,
            channels: 1,
            concurrency: 0,
            size: 1,
            resp_size: 1,
            threads: 1,
            cpus: vec![],
            response_status: None,
        };
        let e = GrpcClient::start(cfg, Target::Addr("127.0.0.1:1".into()))
            .err()
            .unwrap();
        assert!(
            e.is_usage() && e.to_string().contains("--concurrency 0"),
            "{e}"
        );
    }
}

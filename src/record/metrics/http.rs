//! The metrics endpoint: HTTP/1.1 (hyper) on a named thread of its own with
//! a one-thread runtime, so scrapes — and the procfs reads each one does —
//! never run on the runtime that carries a session's control protocol, and a
//! flood of scrapes cannot hold the agent.
//!
//! `GET /metrics` answers the hub's text (OpenMetrics unless the `Accept`
//! header asks for Prometheus text only); any other path is 404, any other
//! method 405. Connections are capped ([`MAX_CONNECTIONS`]; more are closed
//! as they arrive) and must send their request head within
//! [`HEADER_TIMEOUT`]. The address is bound by [`MetricsServer::start`] on
//! the caller's thread, so a bad address fails before anything else starts.

use super::{Format, MetricsError, MetricsHub};
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Scrape connections served at once.
pub const MAX_CONNECTIONS: usize = 64;
/// Time a connection has to send its request head.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// A running endpoint; dropping it stops the server and joins its thread.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    cancel: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// Bind `addr` now and serve `hub` on a thread named `ws-metrics` until dropped.
    pub fn start(addr: SocketAddr, hub: MetricsHub) -> Result<MetricsServer, MetricsError> {
        let bind = |source| MetricsError::Bind { addr, source };
        let listener = std::net::TcpListener::bind(addr).map_err(bind)?;
        let local = listener.local_addr().map_err(bind)?;
        listener.set_nonblocking(true).map_err(bind)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(MetricsError::Thread)?;
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        let thread = std::thread::Builder::new()
            .name("ws-metrics".into())
            .spawn(move || rt.block_on(serve(listener, hub, stop)))
            .map_err(MetricsError::Thread)?;
        Ok(MetricsServer {
            addr: local,
            cancel,
            thread: Some(thread),
        })
    }

    /// The bound address (the port chosen when `:0` was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.cancel.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(listener: std::net::TcpListener, hub: MetricsHub, cancel: CancellationToken) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(target: "metrics", "cannot serve metrics: {e}");
            return;
        }
    };
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            r = listener.accept() => match r {
                Ok((s, _)) => {
                    let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                        drop(s);
                        continue;
                    };
                    let hub = hub.clone();
                    conns.spawn(async move {
                        let _permit = permit;
                        let service = hyper::service::service_fn(move |req| {
                            let hub = hub.clone();
                            async move { Ok::<_, std::convert::Infallible>(answer(&hub, &req)) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .timer(hyper_util::rt::TokioTimer::new())
                            .header_read_timeout(HEADER_TIMEOUT)
                            .serve_connection(hyper_util::rt::TokioIo::new(s), service)
                            .await;
                    });
                }
                Err(e) => {
                    tracing::warn!(target: "metrics", "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
    conns.shutdown().await;
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The response to one request.
fn answer<B>(hub: &MetricsHub, req: &Request<B>) -> Response<Full<Bytes>> {
    if req.uri().path() != "/metrics" {
        return text(
            StatusCode::NOT_FOUND,
            format!(
                "not found: {}; wirescope serves its metrics at /metrics\n",
                req.uri().path()
            ),
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "use GET /metrics\n".to_string(),
        );
        r.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("GET, HEAD"),
        );
        return r;
    }
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let format = Format::from_accept(accept);
    match hub.encode(format) {
        Ok(body) => {
            let mut r = Response::new(Full::new(Bytes::from(body)));
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static(format.content_type()),
            );
            r
        }
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
    }
}

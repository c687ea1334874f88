//! The gRPC engine over loopback: wirescope's client against its server (in
//! one process, and as two processes through `serve grpc` / `run --engine
//! grpc --target`), status codes counted on both ends, and the errors a user
//! gets for a wrong or missing server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wirescope::traffic::grpc::client::{ClientConfig, GrpcClient, Target};
use wirescope::traffic::grpc::counters::GrpcCounters;
use wirescope::traffic::grpc::proto::EchoStatus;
use wirescope::traffic::grpc::server::{GrpcServer, Incoming, ServerConfig};
use wirescope::traffic::grpc::{GrpcError, GrpcMode};

fn server(cfg: ServerConfig) -> (GrpcServer, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let s = GrpcServer::start(cfg, Incoming::Listener(l)).unwrap();
    let addr = s.local_addr().unwrap();
    (s, addr)
}

fn client_cfg(mode: GrpcMode, channels: usize, concurrency: usize, size: usize) -> ClientConfig {
    ClientConfig {
        mode,
        channels,
        concurrency,
        size,
        resp_size: size / 2,
        threads: 2,
        cpus: vec![],
        response_status: None,
    }
}

/// Wait (bounded) until `f` holds; the marker is a counter, never a sleep.
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn run_until(client: &mut GrpcClient, what: &str, done: impl Fn(&GrpcCounters) -> bool) {
    let c = Arc::clone(client.counters());
    wait_until(what, || done(&c));
    client.stop();
    client.join().unwrap();
}

fn counts_match(mode: GrpcMode) {
    let (mut srv, addr) = server(ServerConfig::new(2));
    let mut client =
        GrpcClient::start(client_cfg(mode, 2, 8, 1000), Target::Addr(addr.to_string())).unwrap();
    run_until(&mut client, "300 RPCs", |c| c.snapshot().rpcs >= 300);
    let (c, s) = (client.counters().snapshot(), srv.counters().snapshot());
    // Every RPC the client counted, the server answered, and no more.
    assert_eq!(c.rpcs, s.rpcs, "client {c:?} server {s:?}");
    assert_eq!(c.tx_payload, s.rx_payload);
    assert_eq!(c.rx_payload, s.tx_payload);
    assert_eq!(c.tx_payload, c.rpcs * 1000);
    assert_eq!(c.rx_payload, c.rpcs * 500);
    assert_eq!((c.error_total(), s.error_total()), (0, 0));
    let lat = client.counters().take_latency();
    assert!(!lat.is_empty(), "latencies are recorded");
    srv.stop();
    srv.join().unwrap();
}

#[test]
fn unary_byte_counts_equal_on_both_ends() {
    let _traffic = crate::common::traffic();
    counts_match(GrpcMode::Unary);
}

#[test]
fn stream_byte_counts_equal_on_both_ends() {
    let _traffic = crate::common::traffic();
    counts_match(GrpcMode::Stream);
}

#[test]
fn statuses_are_counted_by_code_on_both_ends() {
    let _traffic = crate::common::traffic();
    for mode in [GrpcMode::Unary, GrpcMode::Stream] {
        let (mut srv, addr) = server(ServerConfig::new(1));
        let mut cfg = client_cfg(mode, 1, 4, 64);
        cfg.response_status = Some(EchoStatus {
            code: 9,
            message: "asked for".into(),
        });
        let mut client = GrpcClient::start(cfg, Target::Addr(addr.to_string())).unwrap();
        run_until(&mut client, "50 errors", |c| c.snapshot().errors[9] >= 50);
        let (c, s) = (client.counters().snapshot(), srv.counters().snapshot());
        assert_eq!(c.errors[9], s.errors[9], "{mode:?}");
        assert_eq!((c.rpcs, s.rpcs, c.error_total()), (0, 0, c.errors[9]));
        srv.abort();
        srv.join().unwrap();
    }
}

#[test]
fn handed_in_connections_end_the_server_when_closed() {
    let _traffic = crate::common::traffic();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (mut ours, mut theirs) = (vec![], vec![]);
    for _ in 0..3 {
        ours.push(std::net::TcpStream::connect(addr).unwrap());
        theirs.push(l.accept().unwrap().0);
    }
    let mut srv = GrpcServer::start(ServerConfig::new(1), Incoming::Streams(theirs)).unwrap();
    let mut client = GrpcClient::start(
        client_cfg(GrpcMode::Unary, 3, 6, 100),
        Target::Streams(ours),
    )
    .unwrap();
    run_until(&mut client, "100 RPCs", |c| c.snapshot().rpcs >= 100);
    drop(client);
    // The client closed every connection: the server ends by itself.
    srv.join().unwrap();
    assert!(srv.counters().snapshot().rpcs >= 100);
}

#[test]
fn missing_server_is_a_connect_error() {
    let _traffic = crate::common::traffic();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = format!("127.0.0.1:{port}");
    let e = GrpcClient::start(
        client_cfg(GrpcMode::Unary, 1, 1, 64),
        Target::Addr(target.clone()),
    )
    .err()
    .unwrap();
    assert!(matches!(e, GrpcError::Connect { .. }), "{e}");
    assert!(e.to_string().contains(&target) && !e.is_usage(), "{e}");
}

#[test]
fn a_target_that_is_not_grpc_is_named() {
    let _traffic = crate::common::traffic();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let http1 = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 256];
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    });
    let e = GrpcClient::start(
        client_cfg(GrpcMode::Unary, 1, 1, 64),
        Target::Addr(addr.to_string()),
    )
    .err()
    .unwrap();
    assert!(matches!(e, GrpcError::NotGrpc { .. }), "{e}");
    assert!(e.to_string().contains("is not a gRPC server"), "{e}");
    http1.join().unwrap();
}

#[test]
fn too_large_a_request_names_the_flag() {
    let _traffic = crate::common::traffic();
    let mut cfg = ServerConfig::new(1);
    cfg.max_message = 1 << 20;
    let (_srv, addr) = server(cfg);
    let mut c = client_cfg(GrpcMode::Unary, 1, 1, 2 << 20);
    c.resp_size = 10;
    let e = GrpcClient::start(c, Target::Addr(addr.to_string()))
        .err()
        .unwrap();
    assert!(matches!(e, GrpcError::TooLarge { flag: "size", .. }), "{e}");
    assert!(e.is_usage());
    let mut c = client_cfg(GrpcMode::Unary, 1, 1, 10);
    c.resp_size = 2 << 20;
    let e = GrpcClient::start(c, Target::Addr(addr.to_string()))
        .err()
        .unwrap();
    assert!(
        matches!(
            e,
            GrpcError::TooLarge {
                flag: "resp-size",
                ..
            }
        ),
        "{e}"
    );
}

/// A gRPC server that implements nothing (any other service's server).
#[derive(Clone)]
struct Nothing;

impl tower_service::Service<http::Request<tonic::body::Body>> for Nothing {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;
    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: http::Request<tonic::body::Body>) -> Self::Future {
        std::future::ready(Ok(tonic::Status::unimplemented("").into_http()))
    }
}

#[test]
fn unimplemented_service_is_named() {
    let _traffic = crate::common::traffic();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let l = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = l.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let serving = rt.spawn(
        tonic::transport::Server::builder().serve_with_incoming_shutdown(
            Nothing,
            tokio_stream::wrappers::TcpListenerStream::new(l),
            async {
                let _ = stop_rx.await;
            },
        ),
    );
    let e = GrpcClient::start(
        client_cfg(GrpcMode::Stream, 1, 1, 64),
        Target::Addr(addr.to_string()),
    )
    .err()
    .unwrap();
    assert!(matches!(e, GrpcError::Unimplemented { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("StreamingCall") && text.contains("--mode unary"),
        "{text}"
    );
    let _ = stop_tx.send(());
    rt.block_on(serving).unwrap().unwrap();
}

/// `wirescope serve grpc` on a free port; returns the child and its address.
fn spawn_serve(extra: &[&str]) -> (Child, String) {
    spawn_serve_every("0", extra)
}

/// `spawn_serve` printing a line of figures every `interval`.
fn spawn_serve_every(interval: &str, extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .args([
            "serve",
            "grpc",
            "--listen",
            "127.0.0.1:0",
            "--interval",
            interval,
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let mut addr = None;
    let mut said_no_token = false;
    for _ in 0..4 {
        line.clear();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if let Some(rest) = line.split(" on ").nth(1) {
            addr.get_or_insert_with(|| rest.split(',').next().unwrap().to_string());
        }
        said_no_token |= line.contains("NO TOKEN");
        if said_no_token && addr.is_some() {
            break;
        }
    }
    assert!(said_no_token, "serve grpc must say it has no token");
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    (child, addr.expect("serve grpc prints its address"))
}

fn sigint(child: &Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
}

/// Each interval line of `serve grpc` is stamped with the seconds since the
/// server started, so the stamps grow (they once all read 0.0s).
#[test]
fn serve_interval_lines_are_stamped_since_the_start() {
    let _traffic = crate::common::traffic();
    let (mut serve, _addr) = spawn_serve_every("200ms", &["--threads", "1"]);
    let mut lines = BufReader::new(serve.stdout.take().unwrap()).lines();
    let mut stamps = Vec::new();
    while stamps.len() < 4 {
        let line = lines.next().expect("an interval line").unwrap();
        let stamp = line
            .split_whitespace()
            .next()
            .and_then(|t| t.strip_suffix('s'));
        stamps.push(stamp.and_then(|t| t.parse::<f64>().ok()).expect(&line));
    }
    sigint(&serve);
    assert!(serve.wait().unwrap().success());
    // A tick never comes early (late ones may come back to back after a
    // stall): line i is stamped at least (i + 1) intervals after the start.
    assert!(stamps.windows(2).all(|w| w[1] >= w[0]), "{stamps:?}");
    for (i, s) in stamps.iter().enumerate() {
        assert!(s + 0.05 >= 0.2 * (i + 1) as f64, "{stamps:?}");
    }
}

#[test]
fn serve_and_client_as_two_processes() {
    let _traffic = crate::common::traffic();
    let (mut serve, addr) = spawn_serve(&["--threads", "1", "--cpus", "0"]);
    for mode in ["unary", "stream"] {
        let out = Command::new(env!("CARGO_BIN_EXE_wirescope"))
            .args(["run", "--engine", "grpc", "--target", &addr, "--mode", mode])
            .args(["--channels", "2", "--concurrency", "4", "--size", "256"])
            .args(["--resp-size", "256", "-t", "1s", "--omit", "0s"])
            .args(["--threads", "1", "--cpus", "0", "--ebpf", "off", "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let g = &v["grpc"];
        assert!(g["rpcs_per_s"].as_f64().unwrap() > 0.0, "{v}");
        let (tx, rx) = (
            g["request_bytes_per_s"].as_f64().unwrap(),
            g["response_bytes_per_s"].as_f64().unwrap(),
        );
        assert!(
            (tx - rx).abs() < 1e-6 * tx.max(1.0),
            "same size both ways: {v}"
        );
        assert!(g["client_peak_rss"].as_u64().unwrap() > 0, "{v}");
        assert!(v["latency_us"]["p99"].as_f64().unwrap() > 0.0, "{v}");
    }
    sigint(&serve);
    let mut out = String::new();
    serve
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(serve.wait().unwrap().success());
    assert!(out.starts_with("total") && out.contains("RPC/s"), "{out}");
}

#[test]
fn client_exit_codes_say_usage_or_failure() {
    let _traffic = crate::common::traffic();
    let code = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_wirescope"))
            .args(["run", "--engine", "grpc", "--ebpf", "off", "-t", "1s"])
            .args(args)
            .output()
            .unwrap()
    };
    let out = code(&["--target", "127.0.0.1:1", "--concurrency", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--concurrency 0"));
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = code(&["--target", &format!("127.0.0.1:{port}")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot connect"));
}

#[test]
fn run_against_a_third_party_server_samples_this_host_only() {
    let _traffic = crate::common::traffic();
    let (mut serve, addr) = spawn_serve(&["--threads", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("target.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .args(["run", "--engine", "grpc", "--target", &addr])
        .args(["--channels", "2", "--concurrency", "8", "--size", "100"])
        .args([
            "--resp-size",
            "40",
            "-t",
            "1s",
            "-i",
            "500ms",
            "--ebpf",
            "off",
        ])
        .arg("--log")
        .arg(&log)
        .output()
        .unwrap();
    sigint(&serve);
    let _ = serve.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("only this host's telemetry"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("gRPC server {addr}")), "{text}");
    // The log: local Samples only, and a summary whose counts add up.
    let records = wirescope::record::log::read_log(&log).unwrap();
    let mut msgs = 0;
    let mut summary = None;
    for r in records {
        match r {
            wirescope::record::schema::Record::Sample(s) => {
                assert_eq!(s.host, wirescope::probe::sample::HostRole::Local);
                msgs += s.engine.messages;
            }
            wirescope::record::schema::Record::Summary(s) => summary = Some(s),
            _ => {}
        }
    }
    let s = summary.expect("a summary");
    assert!(s.messages > 0);
    assert_eq!(s.messages, msgs, "the closing Sample covers the last RPCs");
    assert_eq!(s.bytes, s.messages * 40);
    assert_eq!(s.latency_us.map(|l| l.count), Some(s.messages));

    // Nothing listens: one line, exit 1; another engine: a usage error.
    let code = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_wirescope"))
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (c, e) = code(&["run", "--engine", "grpc", "--target", &addr, "-t", "1s"]);
    assert_eq!(c, Some(1), "{e}");
    assert!(
        e.contains("cannot connect") && e.contains("serve grpc"),
        "{e}"
    );
    let (c, e) = code(&["run", "--target", &addr, "-t", "1s"]);
    assert_eq!(c, Some(2), "{e}");
    assert!(e.contains("--engine grpc"), "{e}");
    // A target that is not gRPC: the wrong --target, a usage error in one line.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let not_grpc = l.local_addr().unwrap().to_string();
    let http1 = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 256];
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    });
    let (c, e) = code(&["run", "--engine", "grpc", "--target", &not_grpc, "-t", "1s"]);
    http1.join().unwrap();
    assert_eq!(c, Some(2), "{e}");
    assert!(
        e.contains("is not a gRPC server") && e.lines().count() == 1,
        "{e}"
    );
}

//! `serve grpc` against hostile clients (issue 23, items 2 and 3), over
//! loopback: real attackers speak HTTP/2 through the `h2` crate or as raw
//! frames, and a well-behaved wirescope client must keep getting answers.
//!
//! * silent request bodies and unread responses hold at most one
//!   connection's share of the memory budget, and only until the body or
//!   response timeout;
//! * HEADERS-only streams are failed by the body timeout, streams beyond the
//!   per-connection cap are refused, a connection without a preface is
//!   closed, connections beyond the cap are closed on accept;
//! * out of descriptors, the accept loop waits instead of spinning and serves
//!   again once descriptors are free.

use bytes::Bytes;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wirescope::traffic::grpc::client::{ClientConfig, GrpcClient, Target};
use wirescope::traffic::grpc::proto::{framed, SimpleRequest, STREAMING_PATH, UNARY_PATH};
use wirescope::traffic::grpc::server::{GrpcServer, Incoming, ServerConfig};
use wirescope::traffic::grpc::GrpcMode;

const LIVENESS: Duration = Duration::from_secs(60);

fn server(cfg: ServerConfig) -> (GrpcServer, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let s = GrpcServer::start(cfg, Incoming::Listener(l)).unwrap();
    let addr = s.local_addr().unwrap();
    (s, addr)
}

/// Wait (bounded) until `f` holds.
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + LIVENESS;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn polite(channels: usize) -> ClientConfig {
    ClientConfig {
        mode: GrpcMode::Unary,
        channels,
        concurrency: channels,
        size: 1000,
        resp_size: 1000,
        threads: 1,
        cpus: vec![],
        response_status: None,
    }
}

/// A well-behaved client completes `n` RPCs against `addr` within the
/// liveness bound (run on its own thread: a denied server never answers).
fn polite_rpcs(addr: SocketAddr, n: u64) -> Result<u64, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = (|| {
            let mut c = GrpcClient::start(polite(1), Target::Addr(addr.to_string()))
                .map_err(|e| e.to_string())?;
            let counters = Arc::clone(c.counters());
            while counters.snapshot().rpcs < n {
                if c.is_finished() {
                    return Err(format!("the client ended: {:?}", c.join()));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            c.stop();
            let _ = c.join();
            Ok(counters.snapshot().rpcs)
        })();
        let _ = tx.send(r);
    });
    rx.recv_timeout(LIVENESS).unwrap_or_else(|_| {
        Err(format!(
            "no {n} RPC(s) within {LIVENESS:?}: the server is denied"
        ))
    })
}

fn grpc_request(addr: SocketAddr) -> http::Request<()> {
    http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{UNARY_PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap()
}

/// An HTTP/2 connection, driven by a task whose handle ends when the
/// connection does, and its PING handle.
async fn h2_connect(
    addr: SocketAddr,
) -> (
    h2::client::SendRequest<Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
    h2::PingPong,
) {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, mut conn) = h2::client::handshake(tcp).await.unwrap();
    let ping = conn.ping_pong().expect("the first ping handle");
    (send, tokio::spawn(conn), ping)
}

type Open = (h2::client::ResponseFuture, h2::SendStream<Bytes>);

/// A unary call whose DATA is only a prefix declaring `len` bytes, then silence.
async fn silent(send: &mut h2::client::SendRequest<Bytes>, addr: SocketAddr, len: u32) -> Open {
    let mut send = send.clone().ready().await.unwrap();
    let (resp, mut body) = send.send_request(grpc_request(addr), false).unwrap();
    let mut prefix = vec![0u8];
    prefix.extend_from_slice(&len.to_be_bytes());
    body.send_data(Bytes::from(prefix), false).unwrap();
    (resp, body)
}

fn grpc_status(resp: &http::Response<h2::RecvStream>) -> Option<String> {
    resp.headers()
        .get("grpc-status")
        .map(|v| v.to_str().unwrap_or("?").to_string())
}

#[test]
fn silent_request_bodies_do_not_deny_other_clients() {
    let _traffic = crate::common::traffic();
    let mut cfg = ServerConfig::new(2);
    cfg.body_timeout = Duration::from_secs(10);
    let (srv, addr) = server(cfg);
    let rt = tokio::runtime::Runtime::new().unwrap();
    // The attack: 64 MiB and 32 MiB declared on one connection, of a
    // 96 MiB budget, and nothing more sent.
    let (mut send, _conn, mut ping) = rt.block_on(h2_connect(addr));
    let first = rt.block_on(silent(&mut send, addr, 64 << 20));
    wait_until("the 64 MiB message to be admitted", || {
        srv.budget_held() >= 64 << 20
    });
    let second = rt.block_on(silent(&mut send, addr, 32 << 20));
    // A PING round trip: the server has read the second stream's frames.
    rt.block_on(ping.ping(h2::Ping::opaque())).unwrap();

    let done = polite_rpcs(addr, 3);
    let held_meanwhile = srv.budget_held();
    assert!(done.is_ok(), "{done:?}");
    assert!(
        held_meanwhile >= 64 << 20,
        "the attacker still held its message while the other client was served ({held_meanwhile} bytes)"
    );
    // The attacker's calls fail by the body timeout, and their bytes come back.
    for (resp, _body) in [first, second] {
        let resp = rt
            .block_on(async { tokio::time::timeout(LIVENESS * 2, resp).await })
            .expect("the silent call ends")
            .expect("answered with a status");
        assert_eq!(grpc_status(&resp).as_deref(), Some("4"), "{resp:?}");
    }
    wait_until("the budget to come back", || srv.budget_held() == 0);
    assert_eq!(srv.counters().snapshot().errors[4], 2);
}

#[test]
fn unread_responses_do_not_deny_other_clients() {
    let _traffic = crate::common::traffic();
    let mut cfg = ServerConfig::new(2);
    cfg.response_timeout = Duration::from_secs(10);
    let (srv, addr) = server(cfg);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (send, conn, _ping) = rt.block_on(h2_connect(addr));
    // 200 unary calls asking for 16 MiB each, whose responses are never read
    // (the client's windows stay shut); every handle is kept so none is reset.
    let ask = framed(&SimpleRequest {
        response_type: 0,
        response_size: 16 << 20,
        payload: None,
        response_status: None,
    });
    let calls: Vec<Open> = rt.block_on(async {
        let mut v = Vec::new();
        for _ in 0..200 {
            let mut s = send.clone().ready().await.unwrap();
            let (resp, mut body) = s.send_request(grpc_request(addr), false).unwrap();
            body.send_data(Bytes::from(ask.clone()), true).unwrap();
            v.push((resp, body));
        }
        v
    });
    wait_until("responses to hold budget", || srv.budget_held() >= 32 << 20);

    let done = polite_rpcs(addr, 3);
    assert!(done.is_ok(), "{done:?}");
    assert!(
        srv.budget_held() >= 32 << 20,
        "the unread responses were still held while the other client was served"
    );
    // The response timeout resets the attacker's connection and frees its memory.
    let ended = rt.block_on(async { tokio::time::timeout(LIVENESS, conn).await });
    assert!(
        ended.is_ok(),
        "the attacker's connection is closed by the server"
    );
    wait_until("the budget to come back", || srv.budget_held() == 0);
    drop(calls);
    assert!(polite_rpcs(addr, 1).is_ok());
}

// ---- raw HTTP/2 frames (the h2 client never exceeds a server's limits) ----

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn frame(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    v.extend([ty, flags]);
    v.extend(stream.to_be_bytes());
    v.extend(payload);
    v
}

/// HPACK literal header field without indexing, new name, no Huffman.
fn literal(name: &str, value: &str) -> Vec<u8> {
    let mut v = vec![0, name.len() as u8];
    v.extend(name.as_bytes());
    v.push(value.len() as u8);
    v.extend(value.as_bytes());
    v
}

fn call_headers(stream: u32, path: &str) -> Vec<u8> {
    let mut block = Vec::new();
    for (n, v) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] {
        block.extend(literal(n, v));
    }
    // HEADERS, END_HEADERS, no END_STREAM: the body is still to come.
    frame(1, 0x4, stream, &block)
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<(u8, u8, u32, Vec<u8>)> {
    let mut h = [0u8; 9];
    s.read_exact(&mut h)?;
    let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
    let stream = u32::from_be_bytes([h[5] & 0x7f, h[6], h[7], h[8]]);
    let mut p = vec![0u8; len];
    s.read_exact(&mut p)?;
    Ok((h[3], h[4], stream, p))
}

#[test]
fn streams_beyond_the_cap_are_refused_and_headers_only_streams_time_out() {
    let _traffic = crate::common::traffic();
    let mut cfg = ServerConfig::new(1);
    cfg.max_streams = 4;
    cfg.body_timeout = Duration::from_secs(2);
    let (srv, addr) = server(cfg);
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(LIVENESS)).unwrap();
    let mut out = PREFACE.to_vec();
    out.extend(frame(4, 0, 0, &[]));
    // Six HEADERS-only streams on a connection allowed four, of both kinds.
    for id in [1u32, 3, 5, 7, 9, 11] {
        let path = if id % 4 == 1 {
            UNARY_PATH
        } else {
            STREAMING_PATH
        };
        out.extend(call_headers(id, path));
    }
    s.write_all(&out).unwrap();
    let mut refused = vec![];
    let mut ended = vec![];
    while refused.len() < 2 || ended.len() < 4 {
        let (ty, flags, id, p) = read_frame(&mut s).expect("the server answers every stream");
        match ty {
            4 if flags & 1 == 0 => s.write_all(&frame(4, 1, 0, &[])).unwrap(),
            3 if p == [0, 0, 0, 7] => refused.push(id),
            // The response's HEADERS with END_STREAM: a trailers-only status.
            1 if flags & 1 == 1 && !ended.contains(&id) => ended.push(id),
            3 if !ended.contains(&id) => ended.push(id),
            _ => {}
        }
    }
    refused.sort_unstable();
    ended.sort_unstable();
    assert_eq!(refused, vec![9, 11], "REFUSED_STREAM beyond --max-streams");
    assert_eq!(
        ended,
        vec![1, 3, 5, 7],
        "HEADERS-only streams end by the body timeout"
    );
    assert_eq!(srv.counters().snapshot().errors[4], 4);
}

#[test]
fn calls_beyond_the_server_wide_cap_are_answered_resource_exhausted() {
    let _traffic = crate::common::traffic();
    let mut cfg = ServerConfig::new(1);
    cfg.max_calls = 2;
    cfg.body_timeout = Duration::from_secs(600);
    let (srv, addr) = server(cfg);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (mut send, _conn, _ping) = rt.block_on(h2_connect(addr));
    // Two calls in flight (each admitted: the server has taken them).
    let mut held: Vec<Open> = Vec::new();
    for n in 1..=2 {
        held.push(rt.block_on(silent(&mut send, addr, 100)));
        wait_until("the call to be taken", || srv.budget_held() >= n * 1024);
    }
    let (third, _body) = rt.block_on(silent(&mut send, addr, 100));
    let resp = rt
        .block_on(async { tokio::time::timeout(LIVENESS, third).await })
        .expect("the call over the cap is answered at once")
        .unwrap();
    assert_eq!(grpc_status(&resp).as_deref(), Some("8"), "{resp:?}");
    assert_eq!(srv.counters().snapshot().errors[8], 1);
    // Once a call ends, its place is free.
    drop(held);
    wait_until("a free call slot", || polite_rpcs(addr, 1).is_ok());
}

#[test]
fn a_connection_without_a_preface_is_closed() {
    let _traffic = crate::common::traffic();
    let mut cfg = ServerConfig::new(1);
    cfg.handshake_timeout = Duration::from_secs(1);
    let (_srv, addr) = server(cfg);
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(LIVENESS)).unwrap();
    // Whatever the server sends first (its SETTINGS), the connection must end.
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the server kept a connection without a preface: {e}"),
        }
    }
}

#[test]
fn connections_beyond_the_cap_are_closed_and_the_others_served() {
    let _traffic = crate::common::traffic();
    let mut cfg = ServerConfig::new(1);
    cfg.max_connections = 2;
    let (srv, addr) = server(cfg);
    let mut two = GrpcClient::start(polite(2), Target::Addr(addr.to_string())).unwrap();
    let c = Arc::clone(two.counters());
    wait_until("RPCs on both connections", || c.snapshot().rpcs >= 10);
    let mut third = TcpStream::connect(addr).unwrap();
    third.set_read_timeout(Some(LIVENESS)).unwrap();
    third.write_all(PREFACE).unwrap_or(());
    let mut buf = [0u8; 64];
    match third.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("a third connection over --max-connections 2 was served: {other:?}"),
    }
    let before = c.snapshot().rpcs;
    wait_until("the two connections to keep working", || {
        c.snapshot().rpcs >= before + 10
    });
    two.stop();
    two.join().unwrap();
    // Their places free up once they are closed.
    let deadline = Instant::now() + LIVENESS;
    loop {
        match polite_rpcs(addr, 1) {
            Ok(_) => break,
            Err(e) => assert!(
                Instant::now() < deadline,
                "no connection after the cap freed: {e}"
            ),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(srv.counters().snapshot().rpcs >= before + 11);
}

/// utime + stime of a process, clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may contain spaces) in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn out_of_descriptors_the_accept_loop_waits_and_recovers() {
    let _traffic = crate::common::traffic();
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wirescope"));
    cmd.args([
        "serve",
        "grpc",
        "--listen",
        "127.0.0.1:0",
        "--interval",
        "0",
    ])
    .args(["--threads", "1", "--handshake-timeout", "10m"])
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs before exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 64,
                rlim_max: 64,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut serve = Killed(cmd.spawn().unwrap());
    let pid = serve.0.id();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let err = serve.0.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first = rx.recv_timeout(LIVENESS).expect("serve grpc starts");
    let addr: SocketAddr = first
        .split(" on ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .expect("serve grpc prints its address")
        .parse()
        .unwrap();
    // More idle connections (preface sent) than the server has descriptors.
    let mut idle = Vec::new();
    for _ in 0..100 {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(PREFACE).unwrap();
        idle.push(s);
    }
    let deadline = Instant::now() + LIVENESS;
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("serve grpc says accepting failed");
        if line.contains("accepting a connection failed") {
            assert!(line.contains("Too many open files"), "{line}");
            break;
        }
    }
    // Out of descriptors with connections waiting: it must not spin.
    let t0 = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(3));
    let used = cpu_ticks(pid) - t0;
    eprintln!("server CPU while out of descriptors: {used} ticks in 3 s");
    assert!(
        used < 60,
        "the server used {used} ticks of CPU in 3 s while out of descriptors"
    );
    // Free the descriptors: it serves again.
    drop(idle);
    let deadline = Instant::now() + LIVENESS;
    loop {
        match polite_rpcs(addr, 1) {
            Ok(_) => break,
            Err(e) => {
                if Instant::now() >= deadline || serve.0.try_wait().ok().flatten().is_some() {
                    // Say what the server said and whether it still runs
                    // (seen once under the whole suite's load: refused).
                    let said: Vec<String> = rx.try_iter().collect();
                    panic!(
                        "not serving again: {e}; server exit: {:?}; its stderr since:\n{}",
                        serve.0.try_wait(),
                        said.join("\n")
                    );
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(serve);
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    wirescope::traffic::grpc::memory::parse_status(&status)
        .unwrap()
        .vmrss
        .unwrap()
}

#[test]
fn memory_of_closed_connections_goes_back_to_the_kernel() {
    let _traffic = crate::common::traffic();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .args([
            "serve",
            "grpc",
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "0",
        ])
        .args(["--threads", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map(Killed)
        .unwrap();
    let pid = serve.0.id();
    let mut err = BufReader::new(serve.0.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr: SocketAddr = line
        .split(" on ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .expect("serve grpc prints its address")
        .parse()
        .unwrap();
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let base = rss_kib(pid);
    // The flood, smaller: HEADERS-only streams on many connections.
    let mut conns = Vec::new();
    for c in 0..100u32 {
        let mut s = TcpStream::connect(addr).unwrap();
        let mut out = PREFACE.to_vec();
        out.extend(frame(4, 0, 0, &[]));
        for i in 0..256u32 {
            let path = if (c + i) % 2 == 0 {
                UNARY_PATH
            } else {
                STREAMING_PATH
            };
            out.extend(call_headers(1 + 2 * i, path));
        }
        s.write_all(&out).unwrap();
        conns.push(s);
    }
    let mut peak = base;
    wait_until("the streams to cost memory", || {
        peak = peak.max(rss_kib(pid));
        peak > base + 40 * 1024
    });
    drop(conns);
    // Freed by Rust when the connections close, and given back by the trim.
    wait_until("RSS to come back down", || {
        rss_kib(pid) < base + (peak - base) / 2
    });
    drop(serve);
}

//! The gRPC engine across the namespace pair (198.18.0.1 -> 198.18.0.2 over a
//! 4-queue veth): `wirescope serve grpc` in side B, `wirescope run --engine
//! grpc --target` in side A, unary and stream; every RPC and payload byte the
//! client counted, the server counted. Needs root (CI runs as root).

use crate::common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};

/// Kills the server on every way out (drops before the pair it runs in).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn unary_and_stream_counts_equal_across_the_pair() {
    let pair = common::Pair::new();
    for mode in ["unary", "stream"] {
        let server = Command::new("ip")
            .args(["netns", "exec", &pair.b, common::bin()])
            .args(["serve", "grpc", "--listen", "198.18.0.2:50051"])
            .args(["--interval", "0", "--json", "--threads", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut server = Killed(server);
        let mut err = BufReader::new(server.0.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        assert!(line.contains("198.18.0.2:50051"), "{line}");
        let log = pair.log_path(&format!("{mode}.jsonl"));
        let out = Command::new("ip")
            .args(["netns", "exec", &pair.a, common::bin()])
            .args(["run", "--engine", "grpc", "--target", "198.18.0.2:50051"])
            .args(["--mode", mode, "--channels", "4", "--concurrency", "16"])
            .args(["--size", "1000", "--resp-size", "300", "-t", "1s"])
            .args(["--omit", "0s", "--threads", "1", "--ebpf", "off", "--log"])
            .arg(&log)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let client = common::Log::read(&log).summaries()[0].clone();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(server.0.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        let mut stdout = String::new();
        server
            .0
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        assert!(server.0.wait().unwrap().success());
        let srv: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        // The server counted every RPC the client completed, and those of
        // the check `run --target` makes before the test (at least its
        // setup RPC; how many more its one slot began before it was
        // stopped depends on timing, so no upper bound is asserted).
        let s = &srv["totals"];
        let rpcs = s["rpcs"].as_u64().unwrap();
        assert!(client.messages > 0, "{mode}: {client:?}");
        assert!(
            rpcs > client.messages,
            "{mode}: client {} server {s}",
            client.messages
        );
        assert_eq!(s["rx_payload"].as_u64(), Some(rpcs * 1000), "{mode}: {s}");
        assert_eq!(s["tx_payload"].as_u64(), Some(rpcs * 300), "{mode}: {s}");
        assert_eq!(client.bytes, client.messages * 300, "{mode}");
        let g = client.sections.grpc.as_ref().expect("a gRPC summary");
        assert!(g.errors.is_empty(), "{mode}: {:?}", g.errors);
        assert!(client.latency_us.is_some_and(|l| l.p50 > 0.0), "{mode}");
    }
}

//! The gRPC engine across the namespace pair (198.18.0.1 -> 198.18.0.2 over a
//! 4-queue veth): `wirescope serve grpc` in side B, `wirescope serve
//! grpc-client` in side A, unary and stream; every RPC and payload byte the
//! client counted, the server counted. Needs root (CI runs as root).

mod common;

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
        let out = Command::new("ip")
            .args(["netns", "exec", &pair.a, common::bin()])
            .args(["serve", "grpc-client", "--target", "198.18.0.2:50051"])
            .args(["--mode", mode, "--channels", "4", "--concurrency", "16"])
            .args(["--size", "1000", "--resp-size", "300", "-t", "1s"])
            .args(["--omit", "0s", "--threads", "1", "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let client: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
        let (c, s) = (&client["totals"], &srv["totals"]);
        assert!(c["rpcs"].as_u64().unwrap() > 0, "{mode}: {client}");
        assert_eq!(c["rpcs"], s["rpcs"], "{mode}: client {c} server {s}");
        assert_eq!(c["tx_payload"], s["rx_payload"], "{mode}");
        assert_eq!(c["rx_payload"], s["tx_payload"], "{mode}");
        assert_eq!(
            c["tx_payload"].as_u64(),
            c["rpcs"].as_u64().map(|n| n * 1000)
        );
        assert!(client["result"]["latency"]["p50"].as_f64().unwrap() > 0.0);
    }
}

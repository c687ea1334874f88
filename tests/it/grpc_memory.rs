//! Memory stays bounded at large messages: 4 MiB x 64 RPCs in flight over 8
//! connections, the client in a process of its own (this test binary run
//! again for [`client_process`] alone, so no other test's allocations count)
//! and `wirescope serve grpc` as a third process.
//! The bound asserted is the 300 MB; `cargo xtask bench grpc`
//! reports the real figures (about a tenth of it for the client).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wirescope::traffic::grpc::client::{ClientConfig, GrpcClient, Target};
use wirescope::traffic::grpc::memory::{parse_status, peak_resident, reset_peak};
use wirescope::traffic::grpc::GrpcMode;

const BOUND: u64 = 300_000_000;
const MIB4: usize = 4 << 20;
/// Set for the child run: `MODE ADDR`, the mode as `GrpcMode` parses it.
const CLIENT_ENV: &str = "WIRESCOPE_IT_GRPC_MEMORY_CLIENT";
/// What the child prints before its peak resident set (bytes).
const CLIENT_HWM: &str = "client VmHWM ";

fn server_hwm(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    parse_status(&status).unwrap().vmhwm.unwrap() * 1024
}

/// Kills the server on every way out of the test (a failed assert included).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn four_mib_by_64_in_flight_stays_bounded_on_both_ends() {
    // The 4 MiB x 64 load takes its turn with the other areas' core-bound tests.
    let _cores = crate::common::cores();
    let serve = Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .args([
            "serve",
            "grpc",
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "0",
        ])
        .args(["--threads", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut serve = Killed(serve);
    let mut err = BufReader::new(serve.0.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .split(" on ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .expect("serve grpc prints its address")
        .to_string();
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));

    for mode in [GrpcMode::Unary, GrpcMode::Stream] {
        std::fs::write(format!("/proc/{}/clear_refs", serve.0.id()), "5").unwrap();
        let child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "grpc_memory::client_process",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CLIENT_ENV, format!("{} {addr}", mode.name()))
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&child.stdout);
        assert!(
            child.status.success(),
            "{mode:?}: the client process failed:\n{out}\n{}",
            String::from_utf8_lossy(&child.stderr)
        );
        // libtest prints the test's name first, on the same line.
        let mine: u64 = out
            .split(CLIENT_HWM)
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{mode:?}: the client printed no {CLIENT_HWM:?}:\n{out}"));
        let theirs = server_hwm(serve.0.id());
        eprintln!(
            "{mode:?}: client VmHWM {} MB, server VmHWM {} MB",
            mine / 1_000_000,
            theirs / 1_000_000
        );
        assert!(mine < BOUND, "{mode:?}: client VmHWM {mine} bytes");
        assert!(theirs < BOUND, "{mode:?}: server VmHWM {theirs} bytes");
    }
}

/// The client half of the test above, in a process that runs nothing else:
/// 128 RPCs of 4 MiB (two full rounds of the 64 slots), then its peak
/// resident set on stdout. Run on its own (`--ignored`, no `CLIENT_ENV`), it
/// runs the whole test above.
#[test]
#[ignore = "the client process of four_mib_by_64_in_flight_stays_bounded_on_both_ends"]
fn client_process() {
    let Ok(spec) = std::env::var(CLIENT_ENV) else {
        return four_mib_by_64_in_flight_stays_bounded_on_both_ends();
    };
    let (mode, addr) = spec.split_once(' ').expect("CLIENT_ENV is `MODE ADDR`");
    let mode: GrpcMode =
        serde_json::from_value(serde_json::json!(mode)).expect("CLIENT_ENV names a gRPC mode");
    reset_peak().unwrap();
    let cfg = ClientConfig {
        mode,
        channels: 8,
        concurrency: 64,
        size: MIB4,
        resp_size: MIB4,
        threads: 2,
        cpus: vec![],
        response_status: None,
    };
    let mut client = GrpcClient::start(cfg, Target::Addr(addr.to_string())).unwrap();
    let c = Arc::clone(client.counters());
    let deadline = Instant::now() + Duration::from_secs(120);
    // Two full rounds of the 64 slots: every slot has had a message in flight.
    while c.snapshot().rpcs < 128 {
        assert!(
            Instant::now() < deadline,
            "128 RPCs of 4 MiB did not complete"
        );
        assert!(
            !client.is_finished(),
            "the client ended early: {:?}",
            client.join()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    client.stop();
    client.join().unwrap();
    println!("{CLIENT_HWM}{}", peak_resident().unwrap().0);
}

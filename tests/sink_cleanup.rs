//! The packet engine leaves nothing behind: after a normal end, an error,
//! SIGINT and even SIGKILL no XDP program is attached to the sink's
//! interface (`ip -d link`), the program is unloaded (the kernel's program
//! list), and no AF_XDP or packet socket is left (this process's socket
//! descriptors, the namespace's `/proc/net/packet`).
//!
//! One test function, so nothing else in this process opens sockets while
//! descriptors are counted. Needs root (CI runs as root).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use wirescope::probe::sink_path::PathProbe;
use wirescope::traffic::sink::lab::{run_point, Point};
use wirescope::traffic::sink::xdp::program_loaded;
use wirescope::traffic::sink::{SinkMode, SinkSpec};

fn own_sockets() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_link(e.path())
                .map(|t| t.to_string_lossy().starts_with("socket:"))
                .unwrap_or(false)
        })
        .count()
}

/// The kernel frees a program after an RCU grace period: poll, bounded.
fn wait_unloaded(id: u32) {
    let t = Instant::now();
    while program_loaded(id) {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "XDP program {id} still loaded 5 s after its owner let go"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_clean(p: &common::Pair, id: Option<u32>, sockets_before: Option<usize>, what: &str) {
    assert!(
        !common::xdp_attached(&p.b, "veth-b"),
        "{what}: XDP still attached"
    );
    if let Some(id) = id {
        wait_unloaded(id);
    }
    assert_eq!(
        common::packet_sockets(&p.a),
        0,
        "{what}: packet socket left in {}",
        p.a
    );
    assert_eq!(
        common::packet_sockets(&p.b),
        0,
        "{what}: packet socket left in {}",
        p.b
    );
    if let Some(before) = sockets_before {
        assert_eq!(
            own_sockets(),
            before,
            "{what}: socket descriptors left open"
        );
    }
}

fn point(p: &common::Pair, spec: SinkSpec) -> Point {
    common::sink_point(
        p,
        spec,
        Duration::from_millis(800),
        Duration::from_millis(200),
    )
}

/// Start `sink-lab` and wait for its first interval line (the marker that
/// the XDP program and the sockets are in place and traffic flows).
/// The caller waits for the child (it is signalled and reaped there).
#[allow(clippy::zombie_processes)]
fn start_lab(
    p: &common::Pair,
    mode: &str,
) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(common::bin())
        .args([
            "sink-lab",
            "--sink-netns",
            &p.b,
            "--sink-iface",
            "veth-b",
            "--gen-netns",
            &p.a,
            "--gen-iface",
            "veth-a",
            "--sink",
            mode,
            "--queues",
            "4",
            "--rate",
            "20000",
            "-t",
            "60s",
            "-i",
            "200ms",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start wirescope sink-lab");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sink-lab ended before its first interval");
        }
        if line.starts_with("[  0]") {
            return (child, out);
        }
    }
}

#[test]
fn nothing_is_left_after_normal_end_error_sigint_and_sigkill() {
    let p = common::Pair::new();
    let cancel = AtomicBool::new(false);

    // Normal end, for the two modes with kernel objects (XDP + AF_XDP, packet rings).
    for mode in [SinkMode::AfXdp, SinkMode::Tpacket, SinkMode::Xdp] {
        let before = own_sockets();
        let spec = SinkSpec {
            mode,
            queues: 4,
            rate: 20_000,
            fallback: false,
            ..SinkSpec::default()
        };
        let mut seen_running = false;
        let r = run_point(&point(&p, spec), &PathProbe::opener(), &cancel, |_| {
            seen_running = true;
            assert!(
                own_sockets() > before,
                "the engine's sockets are open while it runs"
            );
            if mode != SinkMode::Tpacket {
                assert!(
                    common::xdp_attached(&p.b, "veth-b"),
                    "XDP attached while running"
                );
            } else {
                assert!(
                    common::packet_sockets(&p.b) >= 4,
                    "one packet socket per queue"
                );
            }
        })
        .unwrap();
        assert!(seen_running);
        assert_eq!(r.summary.lost, 0);
        assert_clean(&p, r.xdp_program_id, Some(before), mode.name());
    }

    // Error: the sink is bound (XDP + AF_XDP sockets), then the generator
    // refuses (1600 B frames do not fit veth-a's MTU of 1500).
    let before = own_sockets();
    let spec = SinkSpec {
        mode: SinkMode::AfXdp,
        queues: 4,
        frame_size: 1600,
        fallback: false,
        ..SinkSpec::default()
    };
    let e = run_point(&point(&p, spec), &PathProbe::opener(), &cancel, |_| {}).unwrap_err();
    assert!(e.to_string().contains("MTU"), "{e}");
    assert_clean(&p, None, Some(before), "error");

    // SIGINT: the summary is printed, exit code 130, everything released.
    for mode in ["af-xdp", "tpacket"] {
        let (child, mut out) = start_lab(&p, mode);
        assert!(mode != "af-xdp" || common::xdp_attached(&p.b, "veth-b"));
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
        let status = child.wait_with_output().unwrap().status;
        assert_eq!(status.code(), Some(130), "{mode}: {rest}");
        assert!(rest.contains("interrupted"), "{mode}: {rest}");
        assert_clean(&p, None, None, &format!("SIGINT {mode}"));
    }

    // SIGKILL: no unwinding at all; the kernel drops the BPF link with the
    // process, so the program still goes.
    let (mut child, _out) = start_lab(&p, "xdp");
    assert!(common::xdp_attached(&p.b, "veth-b"));
    child.kill().unwrap();
    child.wait().unwrap();
    let t = Instant::now();
    while common::xdp_attached(&p.b, "veth-b") {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "XDP still attached 5 s after SIGKILL"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_clean(&p, None, None, "SIGKILL");
}

//! The agent's log (issue 28): the real binary on loopback, a controller
//! with the wrong token; the agent's stderr must name the refusal, its
//! level and the caller's address. No root needed.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use wirescope::session::auth::Token;
use wirescope::session::controller::{Controller, Target};

/// The agent, killed when the test ends however it ends.
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `wirescope agent ARGS` on a free loopback port; its stderr lines
/// arrive on the channel. Returns the address from its "listening on" line.
fn start(args: &[&str], token: &std::path::Path) -> (Agent, SocketAddr, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .args(args)
        .args(["agent", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(token)
        .env_remove("RUST_LOG")
        .env_remove("WIRESCOPE_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the agent");
    let stderr = child.stderr.take().expect("piped stderr");
    let agent = Agent(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        if let Some(rest) = line.split("listening on ").nth(1) {
            let addr = rest.split_whitespace().next().unwrap_or_default();
            let addr: SocketAddr = addr.parse().unwrap_or_else(|e| panic!("{line}: {e}"));
            return (agent, addr, rx);
        }
        seen.push(line);
    }
    panic!(
        "the agent did not say where it listens:\n{}",
        seen.join("\n")
    );
}

fn token_file(dir: &std::path::Path, text: &str) -> std::path::PathBuf {
    let p = dir.join("token");
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// Lines until one satisfies `want` (at most 30 s), or all seen so far.
fn wait_for(rx: &mpsc::Receiver<String>, want: impl Fn(&str) -> bool) -> Result<String, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(l) if want(&l) => return Ok(l),
            Ok(l) => seen.push(l),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    Err(seen.join("\n"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_logged_as_a_warning_with_the_callers_address() {
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path(), "0123456789abcdef0123456789abcdef\n");
    let (_agent, addr, rx) = start(&[], &token);
    let wrong = Token::from_text("fedcba9876543210fedcba9876543210", "test").unwrap();
    let e = Controller::connect(Target::Tcp(addr), &wrong)
        .await
        .err()
        .expect("a wrong token is refused")
        .to_string();
    assert!(e.contains("authentication failed"), "{e}");
    let line = wait_for(&rx, |l| l.contains("refused")).unwrap_or_else(|seen| {
        panic!("no refusal in the agent's log:\n{seen}");
    });
    assert!(line.contains(" WARN "), "a level on the line: {line}");
    assert!(line.contains("agent"), "the target on the line: {line}");
    assert!(
        line.contains("wrong token"),
        "the reason on the line: {line}"
    );
    assert!(
        line.contains("refused 127.0.0.1:"),
        "the caller's address on the line: {line}"
    );
    // A time first: RFC 3339, e.g. 2026-01-02T03:04:05.678901Z.
    let time = line.split_whitespace().next().unwrap_or_default();
    assert!(
        time.len() > 20 && time.as_bytes()[4] == b'-' && time.contains('T'),
        "a time first on the line: {line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_keeps_the_agents_warnings_out_of_stderr() {
    // With -q only errors are written: the refusal (a warning) is not, and
    // neither is the "listening on" line, so wait on the port instead.
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path(), "0123456789abcdef0123456789abcdef\n");
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let mut child = Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .args(["-q", "agent", "--listen", &addr.to_string(), "--token-file"])
        .arg(&token)
        .env_remove("RUST_LOG")
        .env_remove("WIRESCOPE_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the agent");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "the agent did not listen on {addr}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let wrong = Token::from_text("fedcba9876543210fedcba9876543210", "test").unwrap();
    let e = Controller::connect(Target::Tcp(addr), &wrong)
        .await
        .err()
        .expect("a wrong token is refused")
        .to_string();
    assert!(e.contains("authentication failed"), "{e}");
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("WARN") && !err.contains("refused"), "{err}");
}

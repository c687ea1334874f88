//! Issue 23 on the real binary: remote tuning cannot hold an agent, a
//! planted backup cannot steer a rollback, a local-pair checklist leaves
//! nothing on the host, and the tuning CLI's output is safe to paste and
//! ends quietly on a closed pipe. Tests with namespaces need root.

mod common;

use common::{stderr, Pair, TOKEN};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Wait for a child within a liveness bound; kill it and fail past it.
fn wait_within(mut c: Child, limit: Duration, what: &str) -> Output {
    let t = Instant::now();
    while t.elapsed() < limit {
        if c.try_wait().unwrap().is_some() {
            return c.wait_with_output().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = c.kill();
    let o = c.wait_with_output().unwrap();
    panic!(
        "{what} did not finish within {} s: {}",
        limit.as_secs(),
        stderr(&o)
    );
}

/// `wirescope profile ARGS` in namespace `ns`, with the test token.
fn profile_in(ns: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, common::bin(), "profile"])
        .args(args)
        .env("WIRESCOPE_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn profile_within(ns: &str, args: &[&str], limit: Duration) -> Output {
    let c = profile_in(ns, args).spawn().unwrap();
    wait_within(c, limit, &format!("profile {}", args.join(" ")))
}

const LIVENESS: Duration = Duration::from_secs(30);

#[test]
fn a_63_star_glob_does_not_hold_the_agent_and_sigterm_ends_it() {
    let mut pair = Pair::new();
    pair.start_agent();
    let g = pair.dir.path().join("g.toml");
    std::fs::write(
        &g,
        format!(
            "name = \"g\"\n[[interface]]\nmatch = \"{}#\"\nmtu = 1500\n",
            "*".repeat(63)
        ),
    )
    .unwrap();
    let g = g.to_str().unwrap();
    // A plan request (allowed without --allow-tuning): answered, not spun on.
    let o = profile_within(
        &pair.a,
        &["apply", g, "--peer", "198.18.0.2", "--dry-run"],
        LIVENESS,
    );
    assert!(
        stderr(&o).contains("matches no interface"),
        "{}\nagent: {}",
        stderr(&o),
        pair.agent_log()
    );
    // The next controller is served.
    let o = profile_within(
        &pair.a,
        &["save", "now", "--peer", "198.18.0.2", "-o", "-"],
        LIVENESS,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("[sysctl]"));
    // SIGTERM ends the process.
    let pid = pair.agent_pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let t = Instant::now();
    while common::process_alive(pid) {
        assert!(t.elapsed() < LIVENESS, "the agent ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

//! End to end: the real binary in a tmux pane on the embedded local pair.
//! Starts `wirescope tui`, waits for a few intervals, checks that both hosts'
//! per-core rows and a non-zero throughput are on screen, presses `q`, and
//! checks the exit code, the terminal mode and that the namespaces are gone.
//! Needs tmux (CI installs it); fails with the install line when it is missing.

use std::process::Command;
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

struct Session(String);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .status();
    }
}

/// Start `cmd` in a detached tmux session of `w` x `h`; killed when dropped.
fn start(name: &str, w: &str, h: &str, cmd: &str) -> Session {
    assert!(
        Command::new("tmux").arg("-V").output().is_ok(),
        "this test drives the real binary in tmux: apt-get install tmux (.ci/run does)"
    );
    let status = Command::new("tmux")
        .args(["new-session", "-d", "-s", name, "-x", w, "-y", h, cmd])
        .status()
        .unwrap();
    assert!(status.success());
    Session(name.to_string())
}

/// The local pair's first namespace as the header names it (`ws-a-1234`).
fn namespace_on(screen: &str) -> String {
    let ns = screen.split("ws-a-").nth(1).map(|r| {
        format!(
            "ws-a-{}",
            r.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        )
    });
    ns.unwrap_or_else(|| panic!("the header names the pair's namespaces:\n{screen}"))
}

fn assert_namespace_gone(ns: &str) {
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(!list.contains(ns), "{ns} left behind:\n{list}");
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> Option<String>) -> String {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn dashboard_on_the_local_pair_under_tmux() {
    let _turn = crate::common::local_pair_turn();
    let dir = tempfile::tempdir().unwrap();
    let exit_file = dir.path().join("exit");
    let name = format!("wst-tui-{}", std::process::id());
    let cmd = format!(
        "{} tui -P 2 -t 60s; echo $? > {}; sleep 60",
        env!("CARGO_BIN_EXE_wirescope"),
        exit_file.display()
    );
    let _s = start(&name, "160", "48", &cmd);
    let screen = wait_for(
        "three intervals with traffic",
        Duration::from_secs(30),
        || {
            let p = tmux(&["capture-pane", "-p", "-t", &name]);
            let running = p.contains("running 3.") || p.contains("running 4.");
            running.then_some(p)
        },
    );
    let both = screen
        .lines()
        .filter(|l| l.matches("cpu0").count() == 2 || l.matches("cpu1").count() == 2)
        .count();
    assert!(
        both >= 1,
        "per-core rows of both hosts side by side:\n{screen}"
    );
    assert!(
        screen.contains(" local ") && screen.contains(" peer "),
        "{screen}"
    );
    let rate = screen
        .lines()
        .find_map(|l| l.split("local→peer ").nth(1))
        .unwrap_or_default()
        .to_string();
    assert!(
        !rate.starts_with("0.00") && rate.contains("bit/s"),
        "non-zero throughput: {rate}\n{screen}"
    );
    let ns = namespace_on(&screen);
    tmux(&["send-keys", "-t", &name, "q"]);
    let code = wait_for("exit", Duration::from_secs(15), || {
        std::fs::read_to_string(&exit_file)
            .ok()
            .filter(|s| !s.is_empty())
    });
    assert_eq!(code.trim(), "0", "exit code");
    let alt = tmux(&["display-message", "-p", "-t", &name, "#{alternate_on}"]);
    assert_eq!(alt.trim(), "0", "the terminal left the alternate screen");
    assert_namespace_gone(&ns);
}

/// Pids of wirescope processes whose command line holds `needle` (not the
/// shell tmux may start the command with).
fn pids_with(needle: &str) -> Vec<String> {
    let out = Command::new("pgrep")
        .args(["-f", needle])
        .output()
        .expect("pgrep runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "wirescope")
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn a_terminal_hang_up_ends_the_tui_like_q() {
    let _turn = crate::common::local_pair_turn();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("hangup.jsonl");
    let name = format!("wst-hup-{}", std::process::id());
    // The binary is the pane's only process: killing the session hangs up its terminal.
    let cmd = format!(
        "{} tui -P 2 -t 60s --log {}",
        env!("CARGO_BIN_EXE_wirescope"),
        log.display()
    );
    let session = start(&name, "120", "40", &cmd);
    let screen = wait_for("two intervals", Duration::from_secs(30), || {
        let p = tmux(&["capture-pane", "-p", "-t", &name]);
        (p.contains("running 2.") || p.contains("running 3.")).then_some(p)
    });
    let ns = namespace_on(&screen);
    let needle = log.display().to_string();
    let tui = pids_with(&needle);
    assert_eq!(tui.len(), 1, "the TUI runs: {tui:?}");
    // The local pair's agent runs with a working directory named after the TUI's pid.
    let agent_needle = format!("wirescope-{}-", tui[0]);
    assert!(!pids_with(&agent_needle).is_empty(), "its agent runs");
    drop(session); // tmux kill-session: SIGHUP, then the pty is gone.
    wait_for(
        "the TUI and its agent to end",
        Duration::from_secs(20),
        || (pids_with(&needle).is_empty() && pids_with(&agent_needle).is_empty()).then(String::new),
    );
    assert_namespace_gone(&ns);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.lines().count() >= 3,
        "the log holds the test up to the hang-up:\n{text}"
    );
}

/// `tui --replay LOG` with the real binary: the dashboard comes up with the
/// log's test (read while it shows), `q` leaves with exit 0.
#[test]
fn a_replay_opens_streams_the_log_and_quits_with_q() {
    let name = format!("wst-replay-{}", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let status = dir.path().join("status");
    let log = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tui/run.jsonl");
    let cmd = format!(
        "{} tui --replay {}; echo $? > {}",
        env!("CARGO_BIN_EXE_wirescope"),
        log.display(),
        status.display()
    );
    let _session = start(&name, "120", "40", &format!("sh -c '{cmd}'"));
    wait_for("the replay's dashboard", Duration::from_secs(20), || {
        let p = tmux(&["capture-pane", "-p", "-t", &name]);
        (p.contains("replay") && p.contains("Gbit/s")).then_some(p)
    });
    tmux(&["send-keys", "-t", &name, "q"]);
    let code = wait_for("the TUI to exit", Duration::from_secs(20), || {
        std::fs::read_to_string(&status)
            .ok()
            .filter(|s| !s.trim().is_empty())
    });
    assert_eq!(code.trim(), "0");
}

//! The embedded local pair: two hosts on one machine, so wirescope runs anywhere.
//!
//! As root: namespaces `ws-a-PID` and `ws-b-PID` joined by a veth pair with
//! several rx/tx queues (`veth-a` 198.18.0.1 ⇄ `veth-b` 198.18.0.2, the
//! RFC 2544 benchmarking range). A real `wirescope agent` process runs in
//! `ws-b` (through `ip netns exec`); the controller moves itself into `ws-a`.
//! Without root, or where namespaces cannot be created, both ends use
//! loopback and the reason is reported.
//!
//! The veth's MTU follows the test: 1500 normally, raised for a packet
//! test point whose frames need more (up to 8982 for 9000 B frames) and set
//! back for the next point ([`netns::VethPair::set_mtu`], called by the controller
//! before each point). Both ends belong to the tool, so the user has
//! nothing to fix; whether XDP takes the larger MTU on veth is the sink's
//! business (it falls back and says so, like on any interface).
//!
//! Control goes over a unix socket in a private temporary directory. The
//! agent gets the token through its environment, runs in its own process
//! group (so the terminal's Ctrl-C reaches only the controller, which stops
//! the test cleanly) and dies with the controller (PR_SET_PDEATHSIG).
//! [`LocalPair`]'s `Drop` kills the agent and deletes the namespaces, which
//! also destroys the veth pair.

use super::auth::{Token, TOKEN_ENV};
use super::controller::Target;
use super::netns::{self, NetnsError, NetnsGuard, VethPair};
use crate::traffic::RxQueues;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Controller-side address on the veth.
pub const ADDR_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// Agent-side address on the veth.
pub const ADDR_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// Namespace name prefixes (followed by the controller's pid).
pub const NS_PREFIXES: [&str; 2] = ["ws-a-", "ws-b-"];

/// A packet test that asks for more sink threads than the local pair's veth
/// has queues.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{asked}: the local pair's veth has {queues} rx queues and the test runs one receive thread per queue; use {smaller}{fix}")]
pub struct QueuesError {
    /// The flag or sweep set that asks for the threads.
    pub asked: String,
    /// The veth's queues.
    pub queues: u32,
    /// What to ask for instead.
    pub smaller: String,
    /// `, or build the pair with --pair-queues N`, or nothing.
    pub fix: String,
}

/// Why `plan` cannot run on a local pair with `queues` veth queues, if it
/// cannot: a packet test runs one sink thread per rx queue (all its modes
/// but `udp`), so asking for more threads than the pair has queues is
/// refused before anything is built.
pub fn check_plan_queues(
    plan: &crate::session::plan::TestPlan,
    queues: u32,
) -> Result<(), QueuesError> {
    for p in plan.points() {
        let Some(RxQueues { threads, flag }) = p.spec.rx_queues_needed() else {
            continue;
        };
        if threads <= queues {
            continue;
        }
        let (asked, smaller) = match p.sweep.as_ref().and_then(|v| v.cpus.clone()) {
            Some(set) => (
                format!("--sweep cores: the set {set} ({threads} CPUs)"),
                format!("sets of at most {queues} CPUs"),
            ),
            None => (
                format!("{flag} {threads}"),
                format!("{flag} {queues} or fewer"),
            ),
        };
        let fix = if threads <= 64 {
            format!(", or build the pair with --pair-queues {threads}")
        } else {
            String::new()
        };
        return Err(QueuesError {
            asked,
            queues,
            smaller,
            fix,
        });
    }
    Ok(())
}

/// What kind of pair was built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairKind {
    /// Two namespaces and a veth pair.
    Netns {
        /// Controller namespace.
        ns_a: String,
        /// Agent namespace.
        ns_b: String,
        /// rx/tx queues per veth end.
        queues: u32,
    },
    /// Loopback in the current namespace.
    Loopback {
        /// Why namespaces were not used.
        reason: String,
    },
}

impl std::fmt::Display for PairKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PairKind::Netns { ns_a, ns_b, queues } => {
                write!(f, "namespaces {ns_a} ({ADDR_A}, veth-a) <-> {ns_b} ({ADDR_B}, veth-b), veth with {queues} rx/tx queues")
            }
            PairKind::Loopback { reason } => write!(f, "loopback ({reason})"),
        }
    }
}

/// Errors building the pair.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    /// Namespace setup failed.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// The agent process could not start or died.
    #[error("local agent: {0}")]
    Agent(String),
    /// Temporary directory.
    #[error("cannot create a private directory for the control socket: {0}")]
    TempDir(std::io::Error),
}

/// A running local pair. Dropping it tears everything down.
pub struct LocalPair {
    /// What was built.
    pub kind: PairKind,
    /// Where the controller connects.
    pub target: Target,
    /// The token the child agent uses.
    pub token: Token,
    child: Option<Child>,
    dir: tempfile::TempDir,
    // Declared last: namespaces go after the agent process is gone.
    _netns: NetnsGuard,
}

/// The pair's working directory (control socket, agent log) is
/// `$TMPDIR/wirescope-PID-XXXXXX`, so the next run can tell whose it was.
const DIR_PREFIX: &str = "wirescope-";

/// Remove the working directories of local pairs whose process is gone (a
/// `kill -9` skips the pair's own clean-up). Only directories this user owns,
/// named `wirescope-PID-*`, are touched; returns what was removed.
pub fn remove_stale_dirs(tmp: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return removed;
    };
    let me = nix::unistd::geteuid().as_raw();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(DIR_PREFIX)
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        // symlink_metadata: a link named like ours is not followed.
        let Ok(meta) = e.path().symlink_metadata() else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != me || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

impl LocalPair {
    /// The namespaces of the two ends (controller's, agent's), when the
    /// pair is built of namespaces.
    pub fn netns(&self) -> Option<[String; 2]> {
        match &self.kind {
            PairKind::Netns { ns_a, ns_b, .. } => Some([ns_a.clone(), ns_b.clone()]),
            PairKind::Loopback { .. } => None,
        }
    }

    /// Build the pair and start the agent. Call on the main thread, before
    /// any runtime threads exist (PR_SET_PDEATHSIG follows the spawning thread).
    pub fn create(exe: &Path, queues: u32) -> Result<Self, PairError> {
        let token = Token::random();
        let pid = std::process::id();
        remove_stale_dirs(&std::env::temp_dir());
        let dir = tempfile::Builder::new()
            .prefix(&format!("{DIR_PREFIX}{pid}-"))
            .tempdir()
            .map_err(PairError::TempDir)?;
        let sock = dir.path().join("control.sock");
        let mut netns = NetnsGuard::default();
        let kind = if nix::unistd::geteuid().is_root() {
            netns::remove_stale(&NS_PREFIXES);
            let (a, b) = (format!("ws-a-{pid}"), format!("ws-b-{pid}"));
            match build_netns(&mut netns, &a, &b, queues) {
                Ok(()) => PairKind::Netns {
                    ns_a: a,
                    ns_b: b,
                    queues,
                },
                Err(e) => {
                    drop(std::mem::take(&mut netns));
                    PairKind::Loopback {
                        reason: format!("namespaces unavailable: {e}"),
                    }
                }
            }
        } else {
            PairKind::Loopback {
                reason: "not root, so no network namespaces; run as root for a veth pair".into(),
            }
        };
        let (listen, data_ip, mut cmd, veth) = match &kind {
            PairKind::Netns { ns_a, ns_b, .. } => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns_b]).arg(exe);
                let veth = VethPair {
                    ns_a: ns_a.clone(),
                    ns_b: ns_b.clone(),
                };
                let listen = format!("{ADDR_B}:{}", super::DEFAULT_PORT);
                (listen, IpAddr::V4(ADDR_B), c, Some(veth))
            }
            PairKind::Loopback { .. } => (
                "127.0.0.1:0".into(),
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                Command::new(exe),
                None,
            ),
        };
        let log =
            std::fs::File::create(dir.path().join("agent.log")).map_err(PairError::TempDir)?;
        cmd.arg("agent")
            .arg("--listen")
            .arg(&listen)
            .arg("--control-unix")
            .arg(&sock)
            .arg("--state-dir")
            .arg(dir.path().join("agent-state"))
            .arg("--once");
        cmd.env(TOKEN_ENV, token.as_text())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .process_group(0);
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| PairError::Agent(format!("cannot start {}: {e}", exe.display())))?;
        let mut pair = LocalPair {
            kind,
            target: Target::Unix {
                path: sock.clone(),
                data_ip,
                veth,
            },
            token,
            child: Some(child),
            dir,
            _netns: netns,
        };
        pair.wait_ready(&sock, Duration::from_secs(10))?;
        Ok(pair)
    }

    fn wait_ready(&mut self, sock: &Path, limit: Duration) -> Result<(), PairError> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if std::os::unix::net::UnixStream::connect(sock).is_ok() {
                return Ok(());
            }
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    return Err(PairError::Agent(format!(
                        "exited with {status} before it was ready: {}",
                        self.agent_log_tail()
                    )));
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(PairError::Agent(format!(
            "not ready after {} s: {}",
            limit.as_secs(),
            self.agent_log_tail()
        )))
    }

    /// Move the calling thread into the controller's namespace (no-op on loopback).
    pub fn enter_controller_side(&self) -> Result<(), PairError> {
        if let PairKind::Netns { ns_a, .. } = &self.kind {
            netns::enter(ns_a)?;
        }
        Ok(())
    }

    /// The last lines the agent wrote, for error messages.
    pub fn agent_log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("agent.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(5).collect();
        if lines.is_empty() {
            "(the agent printed nothing)".into()
        } else {
            lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
        }
    }

    /// Process id of the agent (tests kill it to simulate a lost peer).
    pub fn agent_pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

fn build_netns(g: &mut NetnsGuard, a: &str, b: &str, queues: u32) -> Result<(), NetnsError> {
    g.add(a)?;
    g.add(b)?;
    let q = queues.to_string();
    // One `ip` call per line; names and addresses hold no spaces.
    for call in [
        format!("link add veth-a netns {a} numtxqueues {q} numrxqueues {q} type veth peer name veth-b netns {b} numtxqueues {q} numrxqueues {q}"),
        format!("-n {a} addr add {ADDR_A}/30 dev veth-a"),
        format!("-n {b} addr add {ADDR_B}/30 dev veth-b"),
        format!("-n {a} link set veth-a up"),
        format!("-n {b} link set veth-b up"),
    ] {
        netns::ip(&call.split(' ').collect::<Vec<_>>())?;
    }
    Ok(())
}

impl Drop for LocalPair {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if let Ok(None) = c.try_wait() {
                let pid = nix::unistd::Pid::from_raw(i32::try_from(c.id()).unwrap_or(0));
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
                let t = Instant::now();
                while t.elapsed() < Duration::from_secs(2) {
                    if let Ok(Some(_)) = c.try_wait() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        // `dir` and then `netns` are dropped after this, in field order.
    }
}

#[cfg(test)]
mod tests {
    use super::check_plan_queues;
    use super::netns::{mtu_for, DEFAULT_MTU};
    use super::remove_stale_dirs;
    use crate::session::plan::{Sweep, SweepParam, TestPlan};
    use crate::traffic::sink::{SinkMode, SinkSpec};
    use crate::traffic::EngineSpec;
    use crate::units::CpuId;

    fn sink(frame_size: u32, queues: u32, mode: SinkMode) -> EngineSpec {
        EngineSpec::Sink(SinkSpec {
            frame_size,
            queues,
            mode,
            ..SinkSpec::default()
        })
    }

    #[test]
    fn the_veth_mtu_follows_the_frames_of_a_point() {
        assert_eq!(mtu_for(None), DEFAULT_MTU);
        assert_eq!(mtu_for(Some(&sink(64, 1, SinkMode::AfXdp))), 1500);
        assert_eq!(mtu_for(Some(&sink(1518, 1, SinkMode::AfXdp))), 1500);
        assert_eq!(mtu_for(Some(&sink(1519, 1, SinkMode::AfXdp))), 1501);
        assert_eq!(mtu_for(Some(&sink(9000, 1, SinkMode::AfXdp))), 8982);
    }

    #[test]
    fn sink_threads_beyond_the_pairs_queues_are_refused_by_flag_or_set() {
        let plan = |spec, sweep| TestPlan {
            spec,
            time: None,
            omit: std::time::Duration::ZERO,
            interval: std::time::Duration::from_secs(1),
            sweep,
        };
        assert!(check_plan_queues(&plan(sink(64, 4, SinkMode::AfXdp), None), 4).is_ok());
        // UDP sockets are not queues.
        assert!(check_plan_queues(&plan(sink(64, 8, SinkMode::Udp), None), 4).is_ok());
        let e = check_plan_queues(&plan(sink(64, 8, SinkMode::Xdp), None), 4)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--queues 8: the local pair's veth has 4 rx queues"),
            "{e}"
        );
        assert!(
            e.contains("--queues 4 or fewer, or build the pair with --pair-queues 8"),
            "{e}"
        );
        let cores = Sweep {
            param: SweepParam::Cores,
            values: vec![1, 5],
            cpu_sets: vec![vec![CpuId(0)], (0..5).map(CpuId).collect()],
        };
        let e = check_plan_queues(&plan(sink(64, 1, SinkMode::AfXdp), Some(cores)), 4)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--sweep cores: the set 0-4 (5 CPUs)"), "{e}");
        assert!(e.contains("sets of at most 4 CPUs"), "{e}");
    }

    #[test]
    fn only_dead_runs_directories_are_swept() {
        let root = tempfile::tempdir().unwrap();
        let mk = |n: &str| {
            let p = root.path().join(n);
            std::fs::create_dir(&p).unwrap();
            std::fs::write(p.join("agent.log"), "x").unwrap();
            p
        };
        // Above the largest pid_max (2^22): cannot be a live process.
        let dead = mk("wirescope-4194305-abc");
        let alive = mk(&format!("wirescope-{}-abc", std::process::id()));
        let other = mk("wirescope-notapid");
        let target = mk("elsewhere");
        let link = root.path().join("wirescope-4194306-link");
        std::os::unix::fs::symlink(&target, &link).unwrap();

        assert_eq!(remove_stale_dirs(root.path()), vec![dead.clone()]);
        assert!(!dead.exists());
        assert!(alive.exists() && other.exists() && target.join("agent.log").exists());
        assert!(link.symlink_metadata().is_ok());
    }
}

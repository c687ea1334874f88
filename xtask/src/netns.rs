//! A throwaway pair of network namespaces for the benchmarks: `wsbench-a-<pid>`
//! and `wsbench-b-<pid>`, joined by a veth with several rx/tx queues, with
//! fixed test addresses from 198.18.0.0/15 (RFC 2544 benchmarking space).
//!
//! Owns creating and removing exactly these two namespaces. It never touches
//! the host's interfaces, other namespaces, or processes outside the pair.
//!
//! Removal happens in `Drop` (normal return, error, panic). A watchdog shell,
//! in its own process group so a terminal Ctrl-C does not reach it, removes
//! the pair if this process dies without running `Drop` (signal, `kill -9`):
//! it waits on a pipe that only this process holds open.

use crate::cmd::{self, command};
use anyhow::{Context, Result};
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

/// Address of side A (the client side).
pub const ADDR_A: &str = "198.18.0.1";
/// Address of side B (where the servers run).
pub const ADDR_B: &str = "198.18.0.2";
const PREFIX_LEN: u8 = 30;
const QUEUES: u32 = 4;
const VETH_A: &str = "veth-a";
const VETH_B: &str = "veth-b";

/// Reads one line; anything but "done" (including EOF when xtask dies) means
/// "clean up": kill what still runs inside the pair, then delete it.
const WATCHDOG: &str = r#"read -r msg
[ "$msg" = done ] && exit 0
for ns in "$@"; do
  for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  ip netns del "$ns" 2>/dev/null
done
exit 0
"#;

/// Which end of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Client end, 198.18.0.1.
    A,
    /// Server end, 198.18.0.2.
    B,
}

/// The namespace pair; removed on drop.
pub struct NetnsPair {
    a: String,
    b: String,
    /// Namespaces that exist now (for removal).
    created: Vec<String>,
    watchdog: Option<Child>,
}

impl NetnsPair {
    /// Create both namespaces, the veth, addresses, and bring links up.
    pub fn create() -> Result<Self> {
        let pid = std::process::id();
        let mut pair = NetnsPair {
            a: format!("wsbench-a-{pid}"),
            b: format!("wsbench-b-{pid}"),
            created: Vec::new(),
            watchdog: None,
        };
        pair.watchdog = Some(spawn_watchdog(&pair.a, &pair.b)?);
        for ns in [pair.a.clone(), pair.b.clone()] {
            cmd::run(&mut command("ip", ["netns", "add", &ns]))
                .context("creating a network namespace")?;
            pair.created.push(ns);
        }
        pair.configure()
            .with_context(|| format!("configuring the veth between {} and {}", pair.a, pair.b))?;
        Ok(pair)
    }

    fn configure(&self) -> Result<()> {
        let q = QUEUES.to_string();
        let (a, b) = (self.a.as_str(), self.b.as_str());
        #[rustfmt::skip]
        let link = ["link", "add", VETH_A, "netns", a, "numtxqueues", &q, "numrxqueues", &q,
                    "type", "veth", "peer", "name", VETH_B, "netns", b, "numtxqueues", &q, "numrxqueues", &q];
        cmd::run(&mut command("ip", link))?;
        for (ns, dev, addr) in [(a, VETH_A, ADDR_A), (b, VETH_B, ADDR_B)] {
            let cidr = format!("{addr}/{PREFIX_LEN}");
            cmd::run(&mut command(
                "ip",
                ["-n", ns, "addr", "add", &cidr, "dev", dev],
            ))?;
            cmd::run(&mut command("ip", ["-n", ns, "link", "set", "lo", "up"]))?;
            cmd::run(&mut command("ip", ["-n", ns, "link", "set", dev, "up"]))?;
        }
        Ok(())
    }

    /// Namespace name of `side`.
    pub fn name(&self, side: Side) -> &str {
        match side {
            Side::A => &self.a,
            Side::B => &self.b,
        }
    }

    /// `ip netns exec <ns> <program>`; add arguments and environment to it.
    pub fn command(&self, side: Side, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = command("ip", ["netns", "exec", self.name(side)]);
        cmd.arg(program);
        cmd
    }

    /// Short description for headers.
    pub fn describe(&self) -> String {
        format!(
            "{} ({VETH_A} {ADDR_A}/{PREFIX_LEN}) <-> {} ({VETH_B} {ADDR_B}/{PREFIX_LEN}), veth with {QUEUES} rx/tx queues",
            self.a, self.b
        )
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        for ns in std::mem::take(&mut self.created) {
            kill_remaining(&ns);
            if let Err(e) = cmd::run(&mut command("ip", ["netns", "del", &ns])) {
                eprintln!("xtask: could not remove namespace {ns}: {e:#}");
            }
        }
        if let Some(mut dog) = self.watchdog.take() {
            if let Some(mut stdin) = dog.stdin.take() {
                let _ = stdin.write_all(b"done\n");
            }
            let _ = dog.wait();
        }
    }
}

/// Kill processes still inside `ns` (only ever ones this tool started there).
fn kill_remaining(ns: &str) {
    let Ok(pids) = cmd::output(&mut command("ip", ["netns", "pids", ns])) else {
        return;
    };
    for pid in pids.split_whitespace() {
        eprintln!("xtask: killing leftover pid {pid} in {ns}");
        if let Err(e) = cmd::run(&mut command("kill", ["-KILL", pid])) {
            eprintln!("xtask: {e:#}");
        }
    }
}

fn spawn_watchdog(a: &str, b: &str) -> Result<Child> {
    Command::new("sh")
        .args(["-c", WATCHDOG, "wsbench-watchdog", a, b])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .context("starting the namespace clean-up watchdog (sh)")
}

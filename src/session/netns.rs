//! Network namespaces and veth pairs, through iproute2's `ip`.
//!
//! Namespaces are created with `ip netns add` (so they appear in
//! `ip netns list` and can be inspected with `ip netns exec` while a test
//! runs) and removed by [`NetnsGuard`] on drop, which runs on normal return,
//! on error and while unwinding from a panic. Names carry the creating
//! process id, so [`remove_stale`] can delete what a killed run left behind.
//! The local pair's veth MTU is set per test point ([`VethPair::set_mtu`],
//! [`mtu_for`]).

use std::fs::File;
use std::process::{Command, Stdio};

/// Errors from namespace setup.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// `ip` could not be run.
    #[error("cannot run `ip {args}`: {source}; install iproute2")]
    Spawn {
        /// Arguments.
        args: String,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// `ip` failed.
    #[error("`ip {args}` failed: {stderr}")]
    Failed {
        /// Arguments.
        args: String,
        /// What ip printed.
        stderr: String,
    },
    /// setns failed.
    #[error("cannot enter network namespace {name}: {source}")]
    Enter {
        /// Namespace.
        name: String,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
}

/// The local pair's veth MTU when it is built, and its least.
pub const DEFAULT_MTU: u32 = 1500;

/// The pair's two veth ends, by namespace: what the controller resizes
/// between points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VethPair {
    /// Controller namespace (holds `veth-a`).
    pub ns_a: String,
    /// Agent namespace (holds `veth-b`).
    pub ns_b: String,
}

impl VethPair {
    /// Set the MTU of both ends.
    pub fn set_mtu(&self, mtu: u32) -> Result<(), NetnsError> {
        let m = mtu.to_string();
        for (ns, dev) in [(&self.ns_a, "veth-a"), (&self.ns_b, "veth-b")] {
            ip(&["-n", ns, "link", "set", "dev", dev, "mtu", &m])?;
        }
        Ok(())
    }
}

/// The veth MTU a point of `spec` needs: the IP packet of a test's frames
/// when its engine chooses their size ([`EngineSpecOps::frame_mtu`]), at
/// least [`DEFAULT_MTU`]; every other test runs at the default.
///
/// [`EngineSpecOps::frame_mtu`]: crate::traffic::EngineSpecOps::frame_mtu
pub fn mtu_for(spec: Option<&crate::traffic::EngineSpec>) -> u32 {
    spec.and_then(|s| s.frame_mtu())
        .map_or(DEFAULT_MTU, |m| m.max(DEFAULT_MTU))
}

/// Run `ip ARGS`, returning stdout.
pub fn ip(args: &[&str]) -> Result<String, NetnsError> {
    let joined = args.join(" ");
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| NetnsError::Spawn {
            args: joined.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(NetnsError::Failed {
            args: joined,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Namespaces this process created; deleted on drop (in reverse order).
#[derive(Debug, Default)]
pub struct NetnsGuard {
    names: Vec<String>,
}

impl NetnsGuard {
    /// Create namespace `name` and remember it.
    pub fn add(&mut self, name: &str) -> Result<(), NetnsError> {
        ip(&["netns", "add", name])?;
        self.names.push(name.to_string());
        ip(&["-n", name, "link", "set", "lo", "up"])?;
        Ok(())
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        for n in self.names.drain(..).rev() {
            if let Err(e) = ip(&["netns", "del", &n]) {
                eprintln!("wirescope: could not remove network namespace {n}: {e}; remove it with `ip netns del {n}`");
            }
        }
    }
}

/// Move the calling thread into namespace `name` (threads it spawns later
/// inherit it), and give it a private mount namespace with a sysfs of the new
/// network namespace, as `ip netns exec` does, so /sys/class/net shows the
/// namespace's interfaces. Call while the process is single-threaded.
pub fn enter(name: &str) -> Result<(), NetnsError> {
    use nix::mount::{mount, umount2, MntFlags, MsFlags};
    let enter = || -> std::io::Result<()> {
        let f = File::open(format!("/run/netns/{name}"))?;
        nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET)?;
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)?;
        // Keep mount events from propagating back to the host.
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_SLAVE | MsFlags::MS_REC,
            None::<&str>,
        )?;
        umount2("/sys", MntFlags::MNT_DETACH)?;
        mount(
            Some(name),
            "/sys",
            Some("sysfs"),
            MsFlags::empty(),
            None::<&str>,
        )?;
        Ok(())
    };
    enter().map_err(|source| NetnsError::Enter {
        name: name.into(),
        source,
    })
}

/// Delete namespaces named `{prefix}{pid}` whose process no longer exists.
pub fn remove_stale(prefixes: &[&str]) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return removed;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = prefixes
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .and_then(|rest| rest.parse::<u32>().ok())
        else {
            continue;
        };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if ip(&["netns", "del", &name]).is_ok() {
            removed.push(name);
        }
    }
    removed
}

//! `wirescope capture DIR`: a snapshot of this host in the sosreport layout.
//!
//! Files are copied to the same relative paths (`DIR/proc/stat`,
//! `DIR/sys/class/net/eth0/mtu`, ...) and command outputs are written where
//! sosreport puts them (`DIR/sos_commands/networking/ethtool_-S_eth0`, ...)
//! in the exact text format the commands print, so a capture and a real
//! sosreport are read by the same [`Dir`](super::capture_dir::CaptureDir) code. Only
//! reads the host; writes only below DIR.

use super::capture_dir::ethtool_file;
use super::ethtool_text as text;
use super::facts::Support;
use super::live_host::LiveHost;
use super::source::HostSource;
use super::system::{online_cpu_ids, parse_interrupts, SYSCTLS};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a capture wrote and what it could not.
#[derive(Debug, Default)]
pub struct CaptureReport {
    /// Files written.
    pub files: usize,
    /// What could not be captured, with the reason.
    pub skipped: Vec<String>,
    /// Files the kernel has but gives no value for on this host (a virtual
    /// interface's `speed`: EINVAL): expected, listed in [`MANIFEST`], not warned about.
    pub absent: Vec<String>,
}

/// The capture's own manifest below DIR: what wirescope wrote it with and
/// which files were absent on the captured host (and why).
pub const MANIFEST: &str = "wirescope-capture.txt";

/// Errors of a read that mean "this host has no value here" rather than a
/// failure: virtual devices answer EINVAL/ENODEV/EOPNOTSUPP for speed,
/// duplex and the like.
fn expected_absence(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::ENODEV | libc::EOPNOTSUPP | libc::ENXIO | libc::ENODATA)
    )
}

/// Capture errors that stop the capture.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// DIR exists and is not empty.
    #[error("{0} exists and is not empty; choose a new directory so nothing is overwritten")]
    NotEmpty(PathBuf),
    /// Writing failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// File.
        path: PathBuf,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Write `content` to the host path `rel` below `root`, creating the
/// directories it needs; on failure, the path that failed and why.
pub(super) fn write_below(
    root: &Path,
    rel: &str,
    content: &str,
) -> Result<(), (PathBuf, std::io::Error)> {
    let path = root.join(rel.trim_start_matches('/'));
    if let Some(parent) = path.parent() {
        if let Err(e) = std::fs::create_dir_all(parent) {
            return Err((path, e));
        }
    }
    std::fs::write(&path, content).map_err(|e| (path, e))
}

struct Writer<'a> {
    root: &'a Path,
    report: CaptureReport,
}

impl Writer<'_> {
    fn put(&mut self, rel: &str, content: &str) -> Result<(), CaptureError> {
        write_below(self.root, rel, content)
            .map_err(|(path, source)| CaptureError::Write { path, source })?;
        self.report.files += 1;
        Ok(())
    }

    fn mkdir(&mut self, rel: &str) -> Result<(), CaptureError> {
        let path = self.root.join(rel.trim_start_matches('/'));
        std::fs::create_dir_all(&path).map_err(|source| CaptureError::Write { path, source })
    }

    /// Copy a host file if it exists (absent files are normal: not every host has cpufreq).
    fn copy(&mut self, path: &str) -> Result<(), CaptureError> {
        match std::fs::read_to_string(path) {
            Ok(t) => self.put(path, &t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) if expected_absence(&e) => {
                self.report.absent.push(format!("{path}: {e}"));
                Ok(())
            }
            Err(e) => {
                self.report.skipped.push(format!("{path}: {e}"));
                Ok(())
            }
        }
    }

    fn command(&mut self, rel: &str, prog: &str, args: &[&str]) -> Result<(), CaptureError> {
        match Command::new(prog)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
        {
            Ok(o) if o.status.success() => self.put(rel, &String::from_utf8_lossy(&o.stdout)),
            Ok(o) => {
                self.report.skipped.push(format!(
                    "{prog} {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                Ok(())
            }
            Err(e) => {
                self.report.skipped.push(format!("{prog}: {e}"));
                Ok(())
            }
        }
    }

    /// The output of `ethtool FLAG IFACE` (`flag` empty: plain `ethtool IFACE`).
    fn support<T>(
        &mut self,
        flag: &str,
        iface: &str,
        v: &Support<T>,
        fmt: impl Fn(&T) -> String,
    ) -> Result<(), CaptureError> {
        let rel = ethtool_file(flag, iface);
        match v {
            Support::Value(x) => self.put(&rel, &fmt(x)),
            // What ethtool itself prints when the driver refuses; the reader maps it back.
            Support::NotSupported { .. } => {
                self.put(&rel, "netlink error: Operation not supported\n")
            }
            Support::Error(e) => {
                let what = format!("ethtool {flag}");
                self.report
                    .skipped
                    .push(format!("{}: {e}", what.trim_end()));
                Ok(())
            }
            Support::Unknown => Ok(()),
        }
    }
}

/// Interfaces worth capturing: every one but loopback.
pub fn default_ifaces() -> Vec<String> {
    LiveHost::default()
        .list("/sys/class/net")
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n != "lo")
        .collect()
}

/// Write a snapshot of this host into `dir` (created; must be new or empty).
pub fn capture(dir: &Path, ifaces: &[String]) -> Result<CaptureReport, CaptureError> {
    if dir.exists()
        && std::fs::read_dir(dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(CaptureError::NotEmpty(dir.to_path_buf()));
    }
    let live = LiveHost::default();
    let mut w = Writer {
        root: dir,
        report: CaptureReport::default(),
    };
    capture_host(&mut w, &live)?;
    let interrupts = live
        .read("/proc/interrupts")
        .map(|t| parse_interrupts(&t).1)
        .unwrap_or_default();
    for iface in ifaces {
        capture_iface(&mut w, &live, iface, &interrupts)?;
    }
    // RDMA devices: firmware, ports, GIDs, counters/ and hw_counters/.
    let rdma =
        super::rdma::capture::capture_rdma(&live, dir).map_err(|source| CaptureError::Write {
            path: dir.join("sys/class/infiniband"),
            source,
        })?;
    w.report.skipped.extend(rdma.skipped);
    capture_commands(&mut w)?;
    write_manifest(&mut w)?;
    Ok(w.report)
}

/// The host-wide files: /proc counters and facts, sysctls, NUMA nodes, and
/// per online CPU its governor, topology and caches.
fn capture_host(w: &mut Writer<'_>, live: &LiveHost) -> Result<(), CaptureError> {
    for f in [
        "/proc/stat",
        "/proc/softirqs",
        "/proc/interrupts",
        "/proc/cpuinfo",
        "/proc/cmdline",
        "/proc/net/dev",
        "/proc/net/softnet_stat",
        "/proc/net/snmp",
        "/proc/net/netstat",
        "/proc/sys/kernel/osrelease",
        // Tells a reader whether two captures (or a capture and a live host) come from one running kernel.
        "/proc/sys/kernel/random/boot_id",
        // With boot_id, the time between two captures of one boot (`check --since` rates).
        "/proc/uptime",
        // Present in every network namespace; tells a reader that hidden net.core sysctls are global ones.
        "/proc/sys/net/core/somaxconn",
        "/sys/devices/system/cpu/online",
    ] {
        w.copy(f)?;
    }
    for name in SYSCTLS {
        w.copy(&format!("/proc/sys/{}", name.replace('.', "/")))?;
    }
    for node in live
        .list("/sys/devices/system/node")
        .unwrap_or_default()
        .iter()
        .filter(|n| n.starts_with("node"))
    {
        w.copy(&format!("/sys/devices/system/node/{node}/cpulist"))?;
    }
    for c in online_cpu_ids(live) {
        let cpu = format!("/sys/devices/system/cpu/cpu{}", c.0);
        w.copy(&format!("{cpu}/cpufreq/scaling_governor"))?;
        // Where the core sits (the packet rules' NUMA/L3/SMT facts).
        for f in ["thread_siblings_list", "core_id", "physical_package_id"] {
            w.copy(&format!("{cpu}/topology/{f}"))?;
        }
        for i in live.list(&format!("{cpu}/cache")).unwrap_or_default() {
            if i.starts_with("index") {
                for f in ["level", "shared_cpu_list", "id"] {
                    w.copy(&format!("{cpu}/cache/{i}/{f}"))?;
                }
            }
        }
    }
    Ok(())
}

/// The commands a sosreport runs for what has no file: qdiscs, addresses, links, processes.
fn capture_commands(w: &mut Writer<'_>) -> Result<(), CaptureError> {
    let commands: [(&str, &str, &[&str]); 4] = [
        (
            "networking/tc_-s_qdisc_show",
            "tc",
            &["-s", "qdisc", "show"],
        ),
        ("networking/ip_-d_address", "ip", &["-d", "address"]),
        ("networking/ip_-s_-d_link", "ip", &["-s", "-d", "link"]),
        ("process/ps_auxwww", "ps", &["auxwww"]),
    ];
    for (rel, prog, args) in commands {
        w.command(&format!("sos_commands/{rel}"), prog, args)?;
    }
    Ok(())
}

/// The manifest: which version wrote it, what the host has no value for, what was not captured.
fn write_manifest(w: &mut Writer<'_>) -> Result<(), CaptureError> {
    let mut manifest = format!(
        "wirescope {} capture\n# absent on this host (the kernel has no value for them; expected for virtual devices):\n",
        env!("CARGO_PKG_VERSION")
    );
    for a in &w.report.absent {
        let _ = writeln!(manifest, "{a}");
    }
    for s in &w.report.skipped {
        let _ = writeln!(manifest, "# not captured: {s}");
    }
    w.put(MANIFEST, &manifest)?;
    Ok(())
}

fn capture_iface(
    w: &mut Writer<'_>,
    live: &LiveHost,
    iface: &str,
    interrupts: &[super::system::IrqLine],
) -> Result<(), CaptureError> {
    let base = format!("/sys/class/net/{iface}");
    for f in ["ifindex", "mtu", "operstate", "address", "speed", "duplex"] {
        w.copy(&format!("{base}/{f}"))?;
    }
    for f in [
        "numa_node",
        "local_cpulist",
        "current_link_speed",
        "current_link_width",
        "max_link_speed",
        "max_link_width",
    ] {
        w.copy(&format!("{base}/device/{f}"))?;
    }
    if let Ok(name) = live.link_name(&format!("{base}/device")) {
        w.put(&format!("{base}/device.link"), &format!("{name}\n"))?;
    }
    for q in live.list(&format!("{base}/queues")).unwrap_or_default() {
        // The queue directory itself says the queue exists, even when its mask is unreadable.
        w.mkdir(&format!("{base}/queues/{q}"))?;
        let file = if q.starts_with("rx-") {
            "rps_cpus"
        } else {
            "xps_cpus"
        };
        w.copy(&format!("{base}/queues/{q}/{file}"))?;
    }
    let eth = live.ethtool(iface);
    let bus = eth.drvinfo.bus_info();
    let devname = live
        .link_name(&format!("{base}/device"))
        .unwrap_or_default();
    for irq in super::system::nic_irqs(live, iface, &bus, &devname, interrupts) {
        w.copy(&format!("/proc/irq/{}/effective_affinity_list", irq.irq))?;
        w.copy(&format!("/proc/irq/{}/smp_affinity_list", irq.irq))?;
    }
    w.support("-i", iface, &eth.drvinfo, text::format_drvinfo)?;
    w.support("-S", iface, &eth.stats, |s| text::format_stats(s))?;
    w.support("-l", iface, &eth.channels, |c| {
        text::format_channels(iface, c)
    })?;
    w.support("-g", iface, &eth.rings, |r| text::format_rings(iface, r))?;
    w.support("-k", iface, &eth.features, |f| {
        text::format_features(iface, f)
    })?;
    w.support("-c", iface, &eth.coalesce, |c| {
        text::format_coalesce(iface, c)
    })?;
    w.support("-a", iface, &eth.pause, |p| text::format_pause(iface, p))?;
    w.support("", iface, &eth.link, |l| text::format_link(iface, l))
}

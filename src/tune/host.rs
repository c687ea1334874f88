//! The host a profile is read from and written to: every tunable of a
//! [`Key`] read and written one at a time.
//!
//! Two kinds of host share this code:
//!
//! * [`Host::live`]: this machine, in the network namespace of the process.
//!   Files under `/proc/sys`, `/sys` and `/proc/irq`; NIC settings through
//!   ethtool generic netlink (`*_GET` to read, the `*_SET` requests of
//!   [`crate::probe::netlink::ethtool_set`] to write); the MTU through
//!   rtnetlink; irqbalance through systemd (`systemctl stop|start`). Nothing
//!   shells out to `ethtool` or `ip`.
//! * [`Host::at_root`]: a directory laid out like `/` — a `wirescope capture`,
//!   an unpacked sosreport, or a test's own tree. Files are read and written
//!   below it (so IRQ affinity and governors can be exercised without
//!   touching this machine); NIC settings are read from the captured ethtool
//!   text and cannot be written.
//!
//! Reads go through [`HostSource`], the same path the probes use, so the
//! facts the diagnosis shows and the values tuning backs up are read alike.
//! This module never decides whether a value is wise; [`super::resolve`]
//! checks values against what it reads here.

use super::features::kernel_from_shown;
use super::key::{on_off, Key};
use crate::probe::capture_dir::CaptureDir as Dir;
use crate::probe::facts::{Channels, Coalesce, Features, Pause, Rings, Support};
use crate::probe::live_host::LiveHost as Live;
use crate::probe::netlink::ethtool_set::{
    ChannelKind, CoalesceValue, EthtoolSet, PauseKind, RingKind,
};
use crate::probe::netlink::link::{LinkNl, MtuInfo};
use crate::probe::netlink::{EthtoolNl, NlError};
use crate::probe::source::HostSource;
use std::io::{self, Write as _};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// A failed read or write of one setting.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A file could not be read or written.
    #[error("{op} {path}: {source}")]
    Io {
        /// `read` / `write`.
        op: &'static str,
        /// The kernel path (`/proc/sys/net/ipv4/tcp_rmem`).
        path: String,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// A netlink request failed (the kernel's extended-ack text included).
    #[error(transparent)]
    Netlink(#[from] NlError),
    /// The host cannot read or take this setting at all.
    #[error("{0}")]
    Unsupported(String),
    /// The host cannot start or stop services.
    #[error(transparent)]
    NoServices(#[from] NoServices),
    /// A command (systemctl) failed.
    #[error("{command}: {detail}")]
    Command {
        /// The command line.
        command: String,
        /// Its error output or exit status.
        detail: String,
    },
}

/// Why a host cannot start or stop irqbalance.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoServices {
    /// A directory laid out like `/`, not a running system.
    #[error("{host} has no services to start or stop")]
    NotLive {
        /// The host as messages describe it.
        host: String,
    },
    /// No systemctl on the PATH.
    #[error("systemctl is not installed; start or stop irqbalance with your init system")]
    NoSystemctl,
}

impl HostError {
    /// True when the setting does not exist or the driver does not implement it
    /// (as opposed to a value the kernel refused).
    pub fn is_unsupported(&self) -> bool {
        match self {
            HostError::Io { source, .. } => source.kind() == io::ErrorKind::NotFound,
            HostError::Netlink(NlError::NotSupported { .. } | NlError::NoDevice { .. }) => true,
            HostError::Unsupported(_) | HostError::NoServices(_) => true,
            _ => false,
        }
    }
}

/// The ethtool view of one interface, with kernel feature names.
#[derive(Debug, Clone, Default)]
pub struct NicState {
    /// Driver name (empty when unknown).
    pub driver: String,
    /// PCI address (empty for virtual devices).
    pub bus: String,
    /// `ethtool -l`.
    pub channels: Support<Channels>,
    /// `ethtool -g`.
    pub rings: Support<Rings>,
    /// `ethtool -c`.
    pub coalesce: Support<Coalesce>,
    /// `ethtool -k` by kernel name (`rx-gro`).
    pub features: Support<Features>,
    /// `ethtool -a`.
    pub pause: Support<Pause>,
}

/// One of the parts of [`NicState`], so a single read asks the kernel once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Channels,
    Rings,
    Coalesce,
    Features,
    Pause,
}

impl Part {
    const ALL: [Part; 5] = [
        Part::Channels,
        Part::Rings,
        Part::Coalesce,
        Part::Features,
        Part::Pause,
    ];
}

/// A host to tune (see the module docs).
pub struct Host {
    src: Box<dyn HostSource>,
    /// None: the live host (`/`); Some: files live below this directory.
    root: Option<PathBuf>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// This machine, in the calling thread's network namespace.
    pub fn live() -> Host {
        Host {
            src: Box::new(Live::default()),
            root: None,
        }
    }

    /// A directory laid out like `/` (see the module docs).
    pub fn at_root(dir: impl AsRef<Path>) -> Host {
        Host {
            src: Box::new(Dir::new(dir.as_ref())),
            root: Some(dir.as_ref().to_path_buf()),
        }
    }

    /// True for [`Host::live`].
    pub fn is_live(&self) -> bool {
        self.root.is_none()
    }

    /// For messages: `live host` / `directory /x`.
    pub fn describe(&self) -> String {
        self.src.describe()
    }

    /// The reading side, for code that shares the probes' parsers.
    pub fn source(&self) -> &dyn HostSource {
        self.src.as_ref()
    }

    /// Which network namespace the values belong to: `net:[4026531840]` live,
    /// `dir:/path` for a directory. A backup taken in one is never restored in another.
    pub fn namespace(&self) -> String {
        match &self.root {
            Some(r) => format!("dir:{}", r.display()),
            None => std::fs::read_link("/proc/self/ns/net")
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "net:[unknown]".into()),
        }
    }

    /// The identity of the network namespace the values belong to (None for
    /// a directory, or when /proc cannot say): see [`super::origin`].
    pub fn netns_id(&self) -> Option<super::origin::NetnsId> {
        if self.is_live() {
            super::origin::NetnsId::current()
        } else {
            None
        }
    }

    /// Is this process in the initial network namespace (the one of PID 1)?
    /// None for a directory, or when PID 1's namespace cannot be read.
    pub fn in_initial_netns(&self) -> Option<bool> {
        if !self.is_live() {
            return None;
        }
        let ours = std::fs::read_link("/proc/self/ns/net").ok()?;
        let init = std::fs::read_link("/proc/1/ns/net").ok()?;
        Some(ours == init)
    }

    fn file(&self, path: &str) -> PathBuf {
        match &self.root {
            Some(r) => r.join(path.trim_start_matches('/')),
            None => PathBuf::from(path),
        }
    }

    /// Does this kernel path exist?
    pub fn exists(&self, path: &str) -> bool {
        self.file(path).exists()
    }

    /// Is this kernel path writable by someone (any write bit set)?
    pub fn writable(&self, path: &str) -> bool {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(self.file(path))
            .map(|m| m.permissions().mode() & 0o222 != 0)
            .unwrap_or(false)
    }

    /// Read a kernel file, trimmed.
    pub fn read_file(&self, path: &str) -> Result<String, HostError> {
        self.src
            .read(path)
            .map(|s| s.trim().to_string())
            .map_err(|source| HostError::Io {
                op: "read",
                path: path.to_string(),
                source,
            })
    }

    /// Write a kernel file in one `write(2)`, as `sysctl -w` and `echo >` do.
    /// Never through a symlink that leads elsewhere (see `open_for_write`).
    pub fn write_file(&self, path: &str, value: &str) -> Result<(), HostError> {
        let err = |source| HostError::Io {
            op: "write",
            path: path.to_string(),
            source,
        };
        let mut f = self.open_for_write(path).map_err(err)?;
        let buf = format!("{value}\n");
        let n = f.write(buf.as_bytes()).map_err(err)?;
        if n != buf.len() {
            return Err(err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("the kernel took {n} of {} bytes", buf.len()),
            )));
        }
        Ok(())
    }

    /// Open a kernel file to write. Live: its directory must resolve (sysfs
    /// is made of symlinks: `/sys/class/net/eth0` → `/sys/devices/...`) to a
    /// place under `/sys`, `/proc/sys` or `/proc/irq`, and the file itself is
    /// opened `O_NOFOLLOW` there. Below a directory: no symlink anywhere on
    /// the way. A `..` in the path is refused in both.
    fn open_for_write(&self, path: &str) -> io::Result<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        use std::path::Component;
        let refuse = |why: String| io::Error::new(io::ErrorKind::PermissionDenied, why);
        let rel = Path::new(path.trim_start_matches('/'));
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(refuse(format!("{path} is not a plain kernel path")));
        }
        let (Some(parent), Some(leaf)) = (rel.parent(), rel.file_name()) else {
            return Err(refuse(format!("{path} is not a kernel file")));
        };
        let dir = match &self.root {
            None => {
                let real = std::fs::canonicalize(Path::new("/").join(parent))?;
                let kernel = ["/sys", "/proc/sys", "/proc/irq"];
                if !kernel.iter().any(|k| real.starts_with(k)) {
                    return Err(refuse(format!(
                        "{path} leads to {}, outside {}; not written",
                        real.display(),
                        kernel.join(", ")
                    )));
                }
                real
            }
            Some(root) => {
                let mut at = root.clone();
                for c in parent.components() {
                    at.push(c);
                    if std::fs::symlink_metadata(&at)?.file_type().is_symlink() {
                        return Err(refuse(format!(
                            "{} is a symlink; not written through",
                            at.display()
                        )));
                    }
                }
                at
            }
        };
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY)
            .open(dir.join(leaf))
    }

    /// Entries of a kernel directory.
    pub fn list(&self, path: &str) -> Vec<String> {
        self.src.list(path).unwrap_or_default()
    }

    /// Interfaces of this host (network namespace), sorted.
    pub fn interfaces(&self) -> Vec<String> {
        self.list("/sys/class/net")
    }

    /// Does the interface exist?
    pub fn has_interface(&self, iface: &str) -> bool {
        super::profile::check_interface_name(iface).is_ok()
            && self.exists(&format!("/sys/class/net/{iface}"))
    }

    /// Indices of the rx and tx queues sysfs shows.
    pub fn queues(&self, iface: &str) -> (Vec<u32>, Vec<u32>) {
        let names = self.list(&format!("/sys/class/net/{iface}/queues"));
        let indices = |dir: &str| {
            let mut v: Vec<u32> = names
                .iter()
                .filter_map(|q| q.strip_prefix(dir)?.parse().ok())
                .collect();
            v.sort_unstable();
            v
        };
        (indices("rx-"), indices("tx-"))
    }

    /// Online CPUs.
    pub fn online_cpus(&self) -> Vec<u32> {
        crate::probe::system::online_cpu_ids(self.source())
            .into_iter()
            .map(|c| c.0)
            .collect()
    }

    /// CPUs local to the NIC: its `local_cpulist`, else its NUMA node's CPUs,
    /// else every online CPU (virtual devices have no node).
    pub fn local_cpus(&self, iface: &str) -> Vec<u32> {
        let base = format!("/sys/class/net/{iface}/device");
        let from = |p: &str| {
            self.read_file(p)
                .ok()
                .and_then(|l| super::cpuset::parse_list(&l).ok())
                .filter(|v| !v.is_empty())
        };
        from(&format!("{base}/local_cpulist"))
            .or_else(|| {
                let node = self.read_file(&format!("{base}/numa_node")).ok()?;
                let node: i32 = node.parse().ok()?;
                (node >= 0)
                    .then(|| from(&format!("/sys/devices/system/node/node{node}/cpulist")))?
            })
            .unwrap_or_else(|| self.online_cpus())
    }

    /// The NIC's data interrupts (completion/rx/tx, not control) as (IRQ, name),
    /// found the way the facts find them.
    pub fn data_irqs(&self, iface: &str) -> Vec<(u32, String)> {
        let interrupts = self
            .read_file("/proc/interrupts")
            .map(|t| crate::probe::system::parse_interrupts(&t).1)
            .unwrap_or_default();
        let bus = self.nic_driver(iface).1;
        let devname = self
            .src
            .link_name(&format!("/sys/class/net/{iface}/device"))
            .unwrap_or_default();
        crate::probe::system::nic_irqs(self.source(), iface, &bus, &devname, &interrupts)
            .into_iter()
            .filter(crate::diagnose::util::is_data_irq)
            .map(|f| (f.irq, f.name))
            .collect()
    }

    /// IRQ numbers by their /proc/interrupts name.
    pub fn irqs_by_name(&self) -> Vec<(u32, String)> {
        self.read_file("/proc/interrupts")
            .map(|t| crate::probe::system::parse_interrupts(&t).1)
            .unwrap_or_default()
            .into_iter()
            .map(|l| (l.irq, l.name().to_string()))
            .collect()
    }

    /// Governors a CPU's cpufreq driver offers; None without cpufreq.
    pub fn available_governors(&self, cpu: u32) -> Option<Vec<String>> {
        self.read_file(&format!(
            "/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_available_governors"
        ))
        .ok()
        .map(|s| s.split_ascii_whitespace().map(str::to_string).collect())
    }

    /// The interface that routes to `peer` (live only).
    pub fn route_iface(&self, peer: IpAddr) -> Option<String> {
        if self.is_live() {
            crate::probe::system::route_iface(peer)
        } else {
            None
        }
    }

    /// Is irqbalance running? None when the process list cannot be read.
    pub fn irqbalance_running(&self) -> Option<bool> {
        self.src
            .processes()
            .map(|p| p.iter().any(|c| c == "irqbalance"))
    }

    /// Can this host change irqbalance (live, with systemctl)?
    pub fn can_control_irqbalance(&self) -> Result<(), NoServices> {
        if !self.is_live() {
            return Err(NoServices::NotLive {
                host: self.describe(),
            });
        }
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join("systemctl").is_file()))
            .unwrap_or(false);
        if found {
            Ok(())
        } else {
            Err(NoServices::NoSystemctl)
        }
    }

    /// (driver, bus address) of an interface; empty strings when unknown.
    pub fn nic_driver(&self, iface: &str) -> (String, String) {
        let info = if self.is_live() {
            crate::probe::nic::EthtoolIoctl::open()
                .ok()
                .and_then(|io| io.drvinfo(iface).ok())
        } else {
            self.src.ethtool(iface).drvinfo.value().cloned()
        };
        info.map(|d| (d.driver, d.bus_info)).unwrap_or_default()
    }

    /// The whole ethtool view of an interface (used to validate a plan).
    pub fn nic(&self, iface: &str) -> NicState {
        self.nic_parts(iface, &Part::ALL)
    }

    /// Some parts of the ethtool view: one netlink request per part live.
    fn nic_parts(&self, iface: &str, parts: &[Part]) -> NicState {
        let (driver, bus) = self.nic_driver(iface);
        let mut s = NicState {
            driver,
            bus,
            ..Default::default()
        };
        if !self.is_live() {
            let v = self.src.ethtool(iface);
            s.channels = v.channels;
            s.rings = v.rings;
            s.coalesce = v.coalesce;
            s.features = match v.features {
                Support::Value(f) => Support::Value(kernel_from_shown(&f)),
                other => other,
            };
            s.pause = v.pause;
            return s;
        }
        let mut nl = match EthtoolNl::open() {
            Ok(nl) => nl,
            Err(e) => {
                let m = format!("ethtool netlink: {e}");
                s.channels = Support::Error(m.clone());
                s.rings = Support::Error(m.clone());
                s.coalesce = Support::Error(m.clone());
                s.features = Support::Error(m.clone());
                s.pause = Support::Error(m);
                return s;
            }
        };
        for part in parts {
            match part {
                Part::Channels => s.channels = nl.channels(iface, &s.driver),
                Part::Rings => s.rings = nl.rings(iface, &s.driver),
                Part::Coalesce => s.coalesce = nl.coalesce(iface, &s.driver),
                Part::Features => s.features = nl.features(iface, &s.driver),
                Part::Pause => s.pause = nl.pause(iface, &s.driver),
            }
        }
        s
    }

    /// MTU and the driver's limits (limits only live).
    pub fn mtu(&self, iface: &str) -> Result<MtuInfo, HostError> {
        if self.is_live() {
            Ok(LinkNl::open()?.mtu(iface)?)
        } else {
            let mtu = self.read_file(&format!("/sys/class/net/{iface}/mtu"))?;
            let mtu = mtu.parse().map_err(|_| {
                HostError::Unsupported(format!("{iface} mtu: '{mtu}' is not a number"))
            })?;
            Ok(MtuInfo {
                ifindex: 0,
                mtu,
                min: None,
                max: None,
            })
        }
    }

    /// The current value of a setting, in its canonical form.
    pub fn read(&self, key: &Key) -> Result<String, HostError> {
        let raw = match key {
            Key::Mtu { iface } => self.mtu(iface)?.mtu.to_string(),
            Key::Channel { iface, which } => {
                let c = value(self.nic_parts(iface, &[Part::Channels]).channels, key)?;
                channel(&c, *which)
                    .1
                    .ok_or_else(|| missing(key))?
                    .to_string()
            }
            Key::Ring { iface, which } => {
                let r = value(self.nic_parts(iface, &[Part::Rings]).rings, key)?;
                ring(&r, *which).1.ok_or_else(|| missing(key))?.to_string()
            }
            Key::Coalesce { iface, param } => {
                let c = value(self.nic_parts(iface, &[Part::Coalesce]).coalesce, key)?;
                coalesce_value(&c, param).ok_or_else(|| missing(key))?
            }
            Key::Feature { iface, name } => {
                let f = value(self.nic_parts(iface, &[Part::Features]).features, key)?;
                on_off(f.0.get(name).ok_or_else(|| missing(key))?.on)
            }
            Key::Pause { iface, which } => {
                let p = value(self.nic_parts(iface, &[Part::Pause]).pause, key)?;
                on_off(pause(&p, *which))
            }
            Key::Irqbalance => match self.irqbalance_running() {
                Some(true) => "running".into(),
                Some(false) => "stopped".into(),
                None => {
                    return Err(HostError::Unsupported(
                        "the process list cannot be read".into(),
                    ))
                }
            },
            Key::Sysctl { .. }
            | Key::Rps { .. }
            | Key::RpsFlowCnt { .. }
            | Key::Xps { .. }
            | Key::IrqAffinity { .. }
            | Key::Governor { .. } => {
                let path = key
                    .path()
                    .ok_or_else(|| HostError::Unsupported(format!("{key}: no such file")))?;
                self.read_file(&path)?
            }
        };
        Ok(key.canonical(&raw))
    }

    /// The value the kernel holds as *requested* for a feature (ethtool's
    /// `[requested on]`): a feature whose dependency is off keeps the request
    /// and turns on when the dependency does. None for other keys.
    pub fn read_wanted(&self, key: &Key) -> Option<String> {
        let Key::Feature { iface, name } = key else {
            return None;
        };
        let f = self.nic_parts(iface, &[Part::Features]).features;
        let feat = *f.value()?.0.get(name)?;
        Some(on_off(feat.requested.unwrap_or(feat.on)))
    }

    /// Set a setting to a canonical value. The caller reads it back to confirm.
    pub fn write(&self, key: &Key, value: &str) -> Result<(), HostError> {
        if let Some(path) = key.path() {
            return self.write_file(&path, value);
        }
        if !self.is_live() {
            return Err(HostError::Unsupported(format!(
                "{key}: {} cannot change NIC settings or services",
                self.describe()
            )));
        }
        let num = |v: &str| {
            v.parse::<u32>()
                .map_err(|_| HostError::Unsupported(format!("{key}: '{v}' is not a number")))
        };
        let on = |v: &str| v == "on";
        match key {
            Key::Mtu { iface } => LinkNl::open()?.set_mtu(iface, num(value)?)?,
            Key::Channel { iface, which } => {
                EthtoolSet::open()?.set_channel(iface, *which, num(value)?)?
            }
            Key::Ring { iface, which } => {
                EthtoolSet::open()?.set_ring(iface, *which, num(value)?)?
            }
            Key::Coalesce { iface, param } => {
                let v = if param.starts_with("adaptive-") {
                    CoalesceValue::Flag(on(value))
                } else {
                    CoalesceValue::Num(num(value)?)
                };
                EthtoolSet::open()?.set_coalesce(iface, param, v)?
            }
            Key::Feature { iface, name } => {
                EthtoolSet::open()?.set_features(iface, &[(name.as_str(), on(value))])?
            }
            Key::Pause { iface, which } => {
                EthtoolSet::open()?.set_pause(iface, *which, on(value))?
            }
            Key::Irqbalance => {
                self.can_control_irqbalance()?;
                let verb = if value == "running" { "start" } else { "stop" };
                let command = format!("systemctl {verb} irqbalance");
                let out = std::process::Command::new("systemctl")
                    .args([verb, "irqbalance"])
                    .stdin(std::process::Stdio::null())
                    .output()
                    .map_err(|e| HostError::Command {
                        command: command.clone(),
                        detail: e.to_string(),
                    })?;
                if !out.status.success() {
                    return Err(HostError::Command {
                        command,
                        detail: format!(
                            "{}: {}",
                            out.status,
                            String::from_utf8_lossy(&out.stderr).trim()
                        ),
                    });
                }
            }
            _ => return Err(HostError::Unsupported(format!("{key}: not writable"))),
        }
        Ok(())
    }
}

fn value<T>(s: Support<T>, key: &Key) -> Result<T, HostError> {
    match s {
        Support::Value(v) => Ok(v),
        Support::NotSupported { driver } => Err(HostError::Unsupported(format!(
            "{key}: not supported by driver {}",
            if driver.is_empty() { "?" } else { &driver }
        ))),
        Support::Error(e) => Err(HostError::Unsupported(format!("{key}: {e}"))),
        Support::Unknown => Err(HostError::Unsupported(format!(
            "{key}: not known for this host"
        ))),
    }
}

fn missing(key: &Key) -> HostError {
    HostError::Unsupported(format!("{key}: the driver does not report it"))
}

/// (maximum, current) of one channel count (`ethtool -l`).
pub fn channel(c: &Channels, k: ChannelKind) -> (Option<u32>, Option<u32>) {
    match k {
        ChannelKind::Rx => (c.max_rx, c.rx),
        ChannelKind::Tx => (c.max_tx, c.tx),
        ChannelKind::Other => (c.max_other, c.other),
        ChannelKind::Combined => (c.max_combined, c.combined),
    }
}

/// (maximum, current) of one ring size (`ethtool -g`).
pub fn ring(r: &Rings, k: RingKind) -> (Option<u32>, Option<u32>) {
    match k {
        RingKind::Rx => (r.max_rx, r.rx),
        RingKind::RxMini => (r.max_rx_mini, r.rx_mini),
        RingKind::RxJumbo => (r.max_rx_jumbo, r.rx_jumbo),
        RingKind::Tx => (r.max_tx, r.tx),
    }
}

/// One pause parameter (`ethtool -a`).
pub fn pause(p: &Pause, k: PauseKind) -> bool {
    match k {
        PauseKind::Autoneg => p.autoneg,
        PauseKind::Rx => p.rx,
        PauseKind::Tx => p.tx,
    }
}

/// The kinds the driver has (a maximum above 0), in order.
pub fn with_max<K: Copy>(kinds: &[K], f: impl Fn(K) -> (Option<u32>, Option<u32>)) -> Vec<K> {
    kinds
        .iter()
        .copied()
        .filter(|k| f(*k).0.unwrap_or(0) > 0)
        .collect()
}

/// A coalescing parameter's value in canonical text.
pub fn coalesce_value(c: &Coalesce, param: &str) -> Option<String> {
    match param {
        "adaptive-rx" => c.adaptive_rx.map(on_off),
        "adaptive-tx" => c.adaptive_tx.map(on_off),
        "rx-usecs" => c.rx_usecs.map(|v| v.to_string()),
        "rx-frames" => c.rx_frames.map(|v| v.to_string()),
        "tx-usecs" => c.tx_usecs.map(|v| v.to_string()),
        "tx-frames" => c.tx_frames.map(|v| v.to_string()),
        other => c.other.get(other).map(|v| v.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_never_go_through_a_symlink_or_out_of_the_kernel_trees() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let target = elsewhere.path().join("target");
        std::fs::write(&target, "precious\n").unwrap();
        let q = root.path().join("sys/class/net/eth0/queues/rx-0");
        std::fs::create_dir_all(&q).unwrap();
        std::fs::write(q.join("rps_flow_cnt"), "0\n").unwrap();
        std::os::unix::fs::symlink(&target, q.join("rps_cpus")).unwrap();
        let host = Host::at_root(root.path());
        // A real file is written; a symlinked leaf is not followed.
        host.write_file("/sys/class/net/eth0/queues/rx-0/rps_flow_cnt", "8")
            .unwrap();
        assert!(host
            .write_file("/sys/class/net/eth0/queues/rx-0/rps_cpus", "f")
            .is_err());
        // A symlinked directory on the way is refused too.
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join("sys/class/net/evil"))
            .unwrap();
        let e = host
            .write_file("/sys/class/net/evil/target", "x")
            .unwrap_err();
        assert!(e.to_string().contains("is a symlink"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");
        // `..` is refused below a directory and live.
        assert!(host
            .write_file("/sys/class/net/../../../target", "x")
            .is_err());
        let live = Host::live();
        let path = format!("/sys/class/net/../../../..{}/x", elsewhere.path().display());
        let e = live.write_file(&path, "x").unwrap_err();
        assert!(e.to_string().contains("not a plain kernel path"), "{e}");
        // A live path whose directory resolves outside /sys and /proc/sys
        // (a symlink in /proc leading to a directory anyone may own).
        let e = live
            .write_file("/proc/thread-self/root/tmp/wst-never-written", "x")
            .unwrap_err();
        assert!(e.to_string().contains("outside /sys"), "{e}");
        assert!(!Path::new("/tmp/wst-never-written").exists());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");
    }
}

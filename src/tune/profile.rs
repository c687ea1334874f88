//! The profile file: a plain TOML file of settings grouped by kind, parsed
//! into [`Profile`] with errors that name the file, the line, the key and
//! what is allowed. Serde reads the keys (`profile/raw.rs`: one struct per
//! table, `deny_unknown_fields`); one validation pass (`profile/check.rs`)
//! their values.
//!
//! ```toml
//! name = "throughput-100g"
//! description = "..."
//! for = "single-stream throughput on 100 Gb/s"
//! [sysctl]
//! "net.core.rmem_max" = "536870912"
//! [[interface]]
//! match = "@route"          # a name, a glob (enp*), @route or (checklists) @subject
//! mtu = 9000
//! channels = { combined = "max" }   # or channels = "max": every kind to its maximum
//! rings = "max"
//! coalesce = { adaptive-rx = false, rx-usecs = 0 }
//! features = { gro = true, lro = false }
//! pause = { rx = true, tx = true }
//! rps = "local"             # a hex mask, "all", "local", or { rx-0 = "f", ... }
//! xps = "spread"            # a hex mask, "all", "local", "spread", or per queue
//! rps_flow_cnt = 4096
//! irq_affinity = "local"    # "local", "all", or { "mlx5_comp0@pci:..." = "0-3" }
//! [host]
//! irqbalance = "stopped"    # or "running"
//! governor = "performance"  # or { cpu0 = "performance", ... }
//! ```
//!
//! This module only reads and checks the text: names, value shapes and
//! ranges that hold on every host. Whether *this* host can take a value
//! (the sysctl exists, the driver has that many channels) is decided in
//! [`super::resolve`]. Order is kept as written (each value keeps its place
//! in the file), because settings are applied in file order.
//!
//! Sysctls are limited to `net.*` and a few scheduler/memory knobs that
//! network tuning guides set: a profile may come from a peer, and a sysctl
//! like `kernel.core_pattern` would let it run programs as root.

pub(crate) mod check;
pub(crate) mod raw;

use super::cpuset;
use crate::probe::netlink::ethtool_set::{ChannelKind, PauseKind, RingKind};
use raw::{Doc, RawProfile};
use std::fmt;

/// Largest profile text accepted (bytes): far above any real profile.
pub const MAX_TEXT: usize = 256 * 1024;
/// Most `[[interface]]` blocks in one profile.
pub const MAX_INTERFACE_BLOCKS: usize = 64;
/// Most sysctls in one profile.
pub const MAX_SYSCTLS: usize = 512;

/// Sysctls outside `net.` a profile may set.
pub const EXTRA_SYSCTLS: &[&str] = &[
    "kernel.numa_balancing",
    "kernel.timer_migration",
    "kernel.sched_autogroup_enabled",
    "vm.stat_interval",
];

/// A bad profile: where (file, line, key), what, and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {key}: {problem}; {allowed}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ProfileError {
    /// The file (or `shipped profile NAME`, `request from the controller`).
    pub file: String,
    /// The 1-based line of the value (None when the file as a whole is wrong).
    pub line: Option<usize>,
    /// The key path (`[[interface]] #2 channels.combined`), or `syntax`.
    pub key: String,
    /// What is wrong.
    pub problem: String,
    /// What is allowed instead.
    pub allowed: String,
}

/// A parsed profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: String,
    /// `for`: what it is for.
    pub purpose: String,
    /// Settings in file order.
    pub sections: Vec<Section>,
    /// Where it was read from, for messages.
    pub source: String,
}

/// One group of settings.
#[derive(Debug, Clone, PartialEq)]
pub enum Section {
    /// `[sysctl]`: dotted name → value, in order.
    Sysctl(Vec<(String, String)>),
    /// One `[[interface]]` block.
    Interface(InterfaceBlock),
    /// `[host]`.
    Host(Vec<HostSetting>),
}

/// Which interfaces a block applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matcher {
    /// Exactly this interface.
    Name(String),
    /// Every interface whose name matches the glob (`*`, `?`, `[...]`), lo excluded.
    Glob(String),
    /// `@route`: the interface that routes to the peer.
    Route,
    /// `@subject`: the interface a finding names (checklists only).
    Subject,
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Matcher::Name(n) | Matcher::Glob(n) => f.write_str(n),
            Matcher::Route => f.write_str("@route"),
            Matcher::Subject => f.write_str("@subject"),
        }
    }
}

/// One `[[interface]]` block.
#[derive(Debug, Clone, PartialEq)]
pub struct InterfaceBlock {
    /// 1-based position among the blocks, for messages.
    pub index: usize,
    /// `match`.
    pub matcher: Matcher,
    /// Settings in file order.
    pub settings: Vec<IfSetting>,
}

/// A count that may be the driver's maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// The maximum the driver reports.
    Max,
    /// This number.
    N(u32),
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Count::Max => f.write_str("max"),
            Count::N(n) => write!(f, "{n}"),
        }
    }
}

/// Channel or ring counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counts<K> {
    /// `"max"`: every kind the driver has, at its maximum.
    AllMax,
    /// The kinds given.
    Each(Vec<(K, Count)>),
}

/// A value per queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerQueue<T> {
    /// The same on every queue.
    All(T),
    /// By queue index.
    Each(Vec<(u32, T)>),
}

impl<T> PerQueue<T> {
    /// The value for queue `q`: the one for every queue, or the last one given for `q`.
    pub fn get(&self, q: u32) -> Option<&T> {
        match self {
            PerQueue::All(v) => Some(v),
            PerQueue::Each(v) => v.iter().rev().find(|(x, _)| *x == q).map(|(_, v)| v),
        }
    }
}

/// An RPS/XPS CPU set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaskSpec {
    /// These CPUs (a hex mask in the file).
    Cpus(Vec<u32>),
    /// Every online CPU.
    All,
    /// The CPUs local to the NIC (its NUMA node).
    Local,
    /// One local CPU per queue, round-robin (XPS only).
    Spread,
}

impl fmt::Display for MaskSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MaskSpec::Cpus(c) => f.write_str(&cpuset::format_mask(c)),
            MaskSpec::All => f.write_str("all"),
            MaskSpec::Local => f.write_str("local"),
            MaskSpec::Spread => f.write_str("spread"),
        }
    }
}

/// IRQ affinity of a NIC's data interrupts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IrqSpec {
    /// Spread round-robin over the NIC's NUMA-local CPUs.
    Local,
    /// Spread round-robin over every online CPU.
    All,
    /// By interrupt name (as /proc/interrupts shows it) → CPU list.
    Explicit(Vec<(String, Vec<u32>)>),
}

/// A coalescing value.
pub use crate::probe::netlink::ethtool_set::CoalesceValue;

/// One per-interface setting.
#[derive(Debug, Clone, PartialEq)]
pub enum IfSetting {
    /// `mtu`.
    Mtu(u32),
    /// `channels`.
    Channels(Counts<ChannelKind>),
    /// `rings`.
    Rings(Counts<RingKind>),
    /// `coalesce`: `ethtool -C` names.
    Coalesce(Vec<(String, CoalesceValue)>),
    /// `features`: as written (short, `ethtool -k` or kernel names).
    Features(Vec<(String, bool)>),
    /// `pause`.
    Pause(Vec<(PauseKind, bool)>),
    /// `rps`.
    Rps(PerQueue<MaskSpec>),
    /// `xps`.
    Xps(PerQueue<MaskSpec>),
    /// `rps_flow_cnt`.
    RpsFlowCnt(PerQueue<u32>),
    /// `irq_affinity`.
    IrqAffinity(IrqSpec),
}

impl IfSetting {
    /// The key as written in the file.
    pub fn key(&self) -> &'static str {
        match self {
            IfSetting::Mtu(_) => "mtu",
            IfSetting::Channels(_) => "channels",
            IfSetting::Rings(_) => "rings",
            IfSetting::Coalesce(_) => "coalesce",
            IfSetting::Features(_) => "features",
            IfSetting::Pause(_) => "pause",
            IfSetting::Rps(_) => "rps",
            IfSetting::Xps(_) => "xps",
            IfSetting::RpsFlowCnt(_) => "rps_flow_cnt",
            IfSetting::IrqAffinity(_) => "irq_affinity",
        }
    }
}

/// A CPU frequency governor choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Governor {
    /// Every online CPU.
    All(String),
    /// By CPU.
    Each(Vec<(u32, String)>),
}

/// One `[host]` setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostSetting {
    /// `governor`.
    Governor(Governor),
    /// `irqbalance`: true = running.
    Irqbalance(bool),
}

impl Profile {
    /// Parse profile text; `file` names it in errors. Serde reads the keys
    /// (`profile/raw.rs`), one validation pass (`profile/check.rs`) their values.
    pub fn parse(text: &str, file: &str) -> Result<Profile, ProfileError> {
        let doc = Doc { file, text };
        if text.len() > MAX_TEXT {
            return Err(doc.err(
                None,
                "file",
                format!("{} bytes is too large", text.len()),
                format!("a profile is at most {MAX_TEXT} bytes"),
            ));
        }
        let raw: RawProfile = doc.read(check::describe)?;
        let cx = check::Ctx::new(&doc, "");
        let text_of = |s: Option<raw::At<String>>| s.map(|s| s.into_inner()).unwrap_or_default();
        Ok(Profile {
            name: check::name(&cx, raw.name.as_ref())?,
            sections: check::sections(&cx, &raw)?,
            description: text_of(raw.description),
            purpose: text_of(raw.purpose),
            source: file.to_string(),
        })
    }

    /// Every interface block.
    pub fn interfaces(&self) -> impl Iterator<Item = &InterfaceBlock> {
        self.sections.iter().filter_map(|s| match s {
            Section::Interface(b) => Some(b),
            _ => None,
        })
    }

    /// Does any block match by `@route` (then resolving needs the peer's address)?
    pub fn uses_route(&self) -> bool {
        self.interfaces().any(|b| b.matcher == Matcher::Route)
    }

    /// Does any block match by `@subject` (checklist fragments)?
    pub fn uses_subject(&self) -> bool {
        self.interfaces().any(|b| b.matcher == Matcher::Subject)
    }
}

/// A name a profile may not hold: of a profile, an interface or a sysctl.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// A profile name of the wrong length.
    #[error("'{0}' must be 1 to 64 characters")]
    ProfileLength(String),
    /// A profile name with other characters.
    #[error("'{0}' is not a profile name")]
    Profile(String),
    /// Not an interface name the kernel allows.
    #[error("'{0}' is not an interface name")]
    Interface(String),
    /// A sysctl name of the wrong length.
    #[error("must be 1 to 200 characters")]
    SysctlLength,
    /// A sysctl outside the allow-list.
    #[error("only net.* sysctls and {} may be set by a profile", EXTRA_SYSCTLS.join(", "))]
    SysctlNotAllowed,
    /// A sysctl name component that is not one.
    #[error("'{0}' is not a sysctl name component")]
    SysctlComponent(String),
}

/// Letters, digits, `.`, `-`, `_`; 1 to 64 bytes; not starting with `.`.
pub fn check_profile_name(n: &str) -> Result<(), NameError> {
    if n.is_empty() || n.len() > 64 {
        return Err(NameError::ProfileLength(n.to_string()));
    }
    if n.starts_with('.')
        || !n
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(NameError::Profile(n.to_string()));
    }
    Ok(())
}

/// A sysctl name as `sysctl(8)` writes it; returns its /proc/sys path.
pub fn sysctl_path(name: &str) -> Result<String, NameError> {
    if name.is_empty() || name.len() > 200 {
        return Err(NameError::SysctlLength);
    }
    if !name.starts_with("net.") && !EXTRA_SYSCTLS.contains(&name) {
        return Err(NameError::SysctlNotAllowed);
    }
    let mut parts = Vec::new();
    for part in name.split('.') {
        let ok = !part.is_empty()
            && part != ".."
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-/".contains(&b));
        // sysctl(8): a '/' inside a component stands for a '.' in the path (eth0/100 → eth0.100).
        let p = part.replace('/', ".");
        if !ok || p == "." || p == ".." {
            return Err(NameError::SysctlComponent(part.to_string()));
        }
        parts.push(p);
    }
    Ok(format!("/proc/sys/{}", parts.join("/")))
}

/// Whitespace-normalised sysctl value (`4096\t131072  6291456` → `4096 131072 6291456`).
pub fn normalize_sysctl(v: &str) -> String {
    v.split_ascii_whitespace().collect::<Vec<_>>().join(" ")
}

/// Check an interface name as the kernel allows it (`dev_valid_name`):
/// IFNAMSIZ is 16 with the NUL, and sysfs paths are built from it.
pub fn check_interface_name(n: &str) -> Result<(), NameError> {
    let ok = !n.is_empty()
        && n.len() <= 15
        && n != "."
        && n != ".."
        && !n
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0);
    if ok {
        Ok(())
    } else {
        Err(NameError::Interface(n.to_string()))
    }
}

pub use super::glob::glob_match;

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUE_SHAPE: &str = r#"
name = "throughput-100g"
description = "..."
[sysctl]
"net.core.rmem_max" = "536870912"
"net.ipv4.tcp_rmem" = "4096 87380 268435456"
[[interface]]
match = "@route"
mtu = 9000
channels = { combined = "max" }
features = { gro = true, lro = false }
"#;

    #[test]
    fn parses_the_shape_of_the_issue_in_order() {
        let p = Profile::parse(ISSUE_SHAPE, "t.toml").unwrap();
        assert_eq!(p.name, "throughput-100g");
        assert_eq!(
            p.sections[0],
            Section::Sysctl(vec![
                ("net.core.rmem_max".into(), "536870912".into()),
                ("net.ipv4.tcp_rmem".into(), "4096 87380 268435456".into()),
            ])
        );
        let Section::Interface(b) = &p.sections[1] else {
            panic!("{:?}", p.sections)
        };
        assert_eq!(b.matcher, Matcher::Route);
        assert_eq!(
            b.settings,
            vec![
                IfSetting::Mtu(9000),
                IfSetting::Channels(Counts::Each(vec![(ChannelKind::Combined, Count::Max)])),
                IfSetting::Features(vec![("gro".into(), true), ("lro".into(), false)]),
            ]
        );
        assert!(p.uses_route());
    }

    fn err(text: &str) -> ProfileError {
        Profile::parse(text, "bad.toml").unwrap_err()
    }

    #[test]
    fn errors_name_file_key_and_what_is_allowed() {
        let e = err(
            "name = \"x\"\n[[interface]]\nmatch = \"eth0\"\nchannels = { combined = \"lots\" }\n",
        );
        assert_eq!(e.file, "bad.toml");
        assert_eq!(e.key, "[[interface]] #1 (match eth0) channels.combined");
        assert!(e.allowed.contains("\"max\""), "{e}");
        let e = err("name = \"x\"\n[sysctl]\nnet.core.rmem_max = 5\n");
        assert!(e.problem.contains("split by TOML"), "{e}");
        let e = err("name = \"x\"\n[sysctl]\n\"kernel.core_pattern\" = \"|/bin/sh\"\n");
        assert!(e.problem.contains("only net.*"), "{e}");
        let e = err("name = \"x\"\n[sysctl]\n\"net.ipv4.tcp_rmem\" = \"4096 8192\"\n");
        assert!(e.problem.contains("three numbers"), "{e}");
        let e = err("name = \"x\"\n[sysctl]\n\"net.ipv4.../x\" = \"1\"\n");
        assert!(e.key.contains("net.ipv4"), "{e}");
        let e = err("name = \"x\"\ncolour = 1\n");
        assert_eq!(e.key, "colour");
        assert!(e.allowed.contains("[[interface]]"));
        let e = err("[sysctl]\n");
        assert_eq!(e.key, "name");
        let e = err("name = \"x\"\n[[interface]]\nmatch = \"a/b\"\n");
        assert!(e.problem.contains("not an interface name"), "{e}");
        let e = err("name = \"x\"\n[[interface]]\nmatch = \"eth0\"\ncoalesce = { rx-usec = 3 }\n");
        assert!(e.allowed.contains("rx-usecs"), "{e}");
        let e = err("name = \"x\"\n[host]\nirqbalance = \"maybe\"\n");
        assert_eq!(e.key, "host.irqbalance");
        let e = err("name = \"x\"\n[[interface]]\nmatch = \"eth0\"\nmtu = 9000\nmtu = 1500\n");
        assert_eq!(e.key, "syntax");
        assert!(e.allowed.contains("line 5"), "{e}");
    }

    #[test]
    fn every_interface_setting_parses() {
        let p = Profile::parse(
            r#"
name = "all"
[[interface]]
match = "enp*"
rings = "max"
coalesce = { adaptive_rx = false, rx-usecs = 0 }
pause = { rx = "on", tx = false }
rps = { rx-0 = "f", 1 = "0x3" }
xps = "spread"
rps_flow_cnt = 4096
irq_affinity = { "mlx5_comp0@pci:0000:3b:00.0" = "0-3" }
[host]
governor = { cpu0 = "performance" }
irqbalance = "stop"
"#,
            "f",
        )
        .unwrap();
        let b = p.interfaces().next().unwrap();
        assert_eq!(b.matcher, Matcher::Glob("enp*".into()));
        assert_eq!(b.settings[0], IfSetting::Rings(Counts::AllMax));
        assert_eq!(
            b.settings[1],
            IfSetting::Coalesce(vec![
                ("adaptive-rx".into(), CoalesceValue::Flag(false)),
                ("rx-usecs".into(), CoalesceValue::Num(0))
            ])
        );
        assert_eq!(
            b.settings[3],
            IfSetting::Rps(PerQueue::Each(vec![
                (0, MaskSpec::Cpus(vec![0, 1, 2, 3])),
                (1, MaskSpec::Cpus(vec![0, 1]))
            ]))
        );
        assert_eq!(
            b.settings[4],
            IfSetting::Xps(PerQueue::All(MaskSpec::Spread))
        );
        assert_eq!(
            p.sections.last(),
            Some(&Section::Host(vec![
                HostSetting::Governor(Governor::Each(vec![(0, "performance".into())])),
                HostSetting::Irqbalance(false)
            ]))
        );
    }

    #[test]
    fn globs() {
        assert!(glob_match("enp*", "enp3s0").unwrap());
        assert!(!glob_match("enp*", "eth0").unwrap());
        assert!(glob_match("eth[0-2]", "eth1").unwrap());
        assert!(!glob_match("eth[!0-2]", "eth1").unwrap());
        assert!(glob_match("veth-?", "veth-a").unwrap());
        assert!(glob_match("eth[", "eth0").is_err());
    }

    #[test]
    fn errors_name_the_line_of_the_value_or_key() {
        let e = err(
            "name = \"x\"\n[[interface]]\nmatch = \"eth0\"\nchannels = { combined = \"lots\" }\n",
        );
        assert_eq!(e.line, Some(4), "{e}");
        assert!(
            e.to_string()
                .starts_with("bad.toml:4: [[interface]] #1 (match eth0) channels.combined: "),
            "{e}"
        );
        // A key serde refuses: its line, its block, and what the block has.
        let e = err("name = \"x\"\n[[interface]]\nmatch = \"eth0\"\nmtu = 9000\ncolour = 1\n");
        assert_eq!(
            (e.line, e.key.as_str(), e.problem.as_str()),
            (
                Some(5),
                "[[interface]] #1 (match eth0) colour",
                "unknown key"
            )
        );
        assert!(e.allowed.contains("irq_affinity"), "{e}");
        let e = err("name = \"x\"\n\n[host]\ngovernor = \"performance\"\nnap = true\n");
        assert_eq!((e.line, e.key.as_str()), (Some(5), "host.nap"), "{e}");
        // A table's entries: the entry's own line.
        let e = err("name = \"x\"\n[sysctl]\n\"net.core.rmem_max\" = \"1\"\n\"net.ipv4.tcp_rmem\" = \"1 2\"\n");
        assert_eq!(e.line, Some(4), "{e}");
        // A value of the wrong shape where serde reads it.
        let e = err("name = \"x\"\nsysctl = 5\n");
        assert_eq!((e.line, e.key.as_str()), (Some(2), "sysctl"), "{e}");
        assert!(e.allowed.contains("[sysctl]"), "{e}");
    }

    #[test]
    fn settings_keep_file_order_whatever_the_toml_form() {
        let p = Profile::parse(
            r#"
name = "order"
[host]
irqbalance = "stopped"
[[interface]]
match = "eth0"
channels.combined = 4
rps-cpus = "f"
mtu = 9000
[interface.features]
gro = true
[sysctl]
"net.core.rmem_max" = "1"
"#,
            "f",
        )
        .unwrap();
        let kinds: Vec<&str> = p
            .sections
            .iter()
            .map(|s| match s {
                Section::Host(_) => "host",
                Section::Interface(_) => "interface",
                Section::Sysctl(_) => "sysctl",
            })
            .collect();
        assert_eq!(kinds, ["host", "interface", "sysctl"]);
        let b = p.interfaces().next().unwrap();
        let keys: Vec<&str> = b.settings.iter().map(IfSetting::key).collect();
        assert_eq!(keys, ["channels", "rps", "mtu", "features"]);
    }

    #[test]
    fn one_key_spelled_two_ways_in_a_block_is_refused() {
        let e =
            err("name = \"x\"\n[[interface]]\nmatch = \"eth0\"\nrps = \"f\"\nrps_cpus = \"3\"\n");
        assert_eq!(e.key, "[[interface]] #1 (match eth0)", "{e}");
        assert!(e.problem.contains("duplicate") && e.line.is_some(), "{e}");
    }

    #[test]
    fn sysctl_paths() {
        assert_eq!(
            sysctl_path("net.ipv4.tcp_rmem").unwrap(),
            "/proc/sys/net/ipv4/tcp_rmem"
        );
        assert_eq!(
            sysctl_path("net.ipv4.conf.eth0/100.rp_filter").unwrap(),
            "/proc/sys/net/ipv4/conf/eth0.100/rp_filter"
        );
        assert!(sysctl_path("net..x").is_err());
        assert!(sysctl_path("net.ipv4.conf./.x").is_err());
        assert!(sysctl_path("vm.stat_interval").is_ok());
    }
}

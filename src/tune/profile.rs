//! The profile file: a plain TOML file of settings grouped by kind, parsed
//! into [`Profile`] with errors that name the file, the key and what is
//! allowed.
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
//! [`super::resolve`]. Order is kept as written (the TOML table keeps
//! insertion order), because settings are applied in file order.
//!
//! Sysctls are limited to `net.*` and a few scheduler/memory knobs that
//! network tuning guides set: a profile may come from a peer, and a sysctl
//! like `kernel.core_pattern` would let it run programs as root.

use super::cpuset;
use crate::probe::netlink::ethtool_set::{
    coalesce_attr, coalesce_names, ChannelKind, PauseKind, RingKind,
};
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

/// A bad profile: where, what, and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {key}: {problem}; {allowed}")]
pub struct ProfileError {
    /// The file (or `shipped profile NAME`, `request from the controller`).
    pub file: String,
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

const TOP_KEYS: &str = "name, description, for, [sysctl], [[interface]], [host]";
const IF_KEYS: &str =
    "match, mtu, channels, rings, coalesce, features, pause, rps, xps, rps_flow_cnt, irq_affinity";
const HOST_KEYS: &str = "governor, irqbalance";

struct Ctx<'a> {
    file: &'a str,
}

impl Ctx<'_> {
    fn err(
        &self,
        key: impl Into<String>,
        problem: impl Into<String>,
        allowed: impl Into<String>,
    ) -> ProfileError {
        ProfileError {
            file: self.file.to_string(),
            key: key.into(),
            problem: problem.into(),
            allowed: allowed.into(),
        }
    }
}

fn type_name(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a float",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a date",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}

impl Ctx<'_> {
    /// `v` as a table, or an error saying what was expected.
    fn table<'v>(
        &self,
        key: &str,
        v: &'v toml::Value,
        allowed: impl Into<String>,
    ) -> Result<&'v toml::Table, ProfileError> {
        v.as_table()
            .ok_or_else(|| self.err(key, format!("is {}", type_name(v)), allowed))
    }

    /// At most `max` entries.
    fn at_most(&self, key: &str, n: usize, max: usize) -> Result<(), ProfileError> {
        if n > max {
            return Err(self.err(key, format!("{n} entries"), format!("at most {max}")));
        }
        Ok(())
    }
}

impl Profile {
    /// Parse profile text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Profile, ProfileError> {
        let cx = Ctx { file };
        if text.len() > MAX_TEXT {
            return Err(cx.err(
                "file",
                format!("{} bytes is too large", text.len()),
                format!("a profile is at most {MAX_TEXT} bytes"),
            ));
        }
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            cx.err(
                "syntax",
                e.message().to_string(),
                format!(
                    "fix the TOML syntax{}",
                    e.span()
                        .map(|s| format!(" at line {}", line_of(text, s.start)))
                        .unwrap_or_default()
                ),
            )
        })?;
        let mut p = Profile {
            name: String::new(),
            description: String::new(),
            purpose: String::new(),
            sections: Vec::new(),
            source: file.to_string(),
        };
        let mut have_name = false;
        for (k, v) in &table {
            match k.as_str() {
                "name" => {
                    p.name = string(&cx, "name", v)?;
                    check_profile_name(&p.name).map_err(|e| {
                        cx.err(
                            "name",
                            e,
                            "letters, digits, '.', '-' and '_', e.g. throughput-100g",
                        )
                    })?;
                    have_name = true;
                }
                "description" => p.description = string(&cx, "description", v)?,
                "for" => p.purpose = string(&cx, "for", v)?,
                "sysctl" => p.sections.push(Section::Sysctl(parse_sysctls(&cx, v)?)),
                "interface" => {
                    let arr = v.as_array().ok_or_else(|| {
                        cx.err(
                            "interface",
                            format!("is {}", type_name(v)),
                            "write each block as [[interface]] with a `match` key",
                        )
                    })?;
                    cx.at_most("interface", arr.len(), MAX_INTERFACE_BLOCKS)?;
                    for (i, b) in arr.iter().enumerate() {
                        p.sections
                            .push(Section::Interface(parse_interface(&cx, i + 1, b)?));
                    }
                }
                "host" => p.sections.push(Section::Host(parse_host(&cx, v)?)),
                other => {
                    return Err(cx.err(other, "unknown key", format!("a profile has {TOP_KEYS}")))
                }
            }
        }
        if !have_name {
            return Err(cx.err("name", "missing", "add name = \"...\" at the top"));
        }
        Ok(p)
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

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map(|t| t.matches('\n').count() + 1)
        .unwrap_or(1)
}

/// Letters, digits, `.`, `-`, `_`; 1 to 64 bytes; not starting with `.`.
pub fn check_profile_name(n: &str) -> Result<(), String> {
    if n.is_empty() || n.len() > 64 {
        return Err(format!("'{n}' must be 1 to 64 characters"));
    }
    if n.starts_with('.')
        || !n
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(format!("'{n}' is not a profile name"));
    }
    Ok(())
}

fn string(cx: &Ctx, key: &str, v: &toml::Value) -> Result<String, ProfileError> {
    v.as_str().map(str::to_string).ok_or_else(|| {
        cx.err(
            key,
            format!("is {}", type_name(v)),
            "write it as a quoted string",
        )
    })
}

/// A sysctl name as `sysctl(8)` writes it; returns its /proc/sys path.
pub fn sysctl_path(name: &str) -> Result<String, String> {
    if name.is_empty() || name.len() > 200 {
        return Err("must be 1 to 200 characters".into());
    }
    if !name.starts_with("net.") && !EXTRA_SYSCTLS.contains(&name) {
        return Err(format!(
            "only net.* sysctls and {} may be set by a profile",
            EXTRA_SYSCTLS.join(", ")
        ));
    }
    let mut parts = Vec::new();
    for part in name.split('.') {
        let ok = !part.is_empty()
            && part != ".."
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-/".contains(&b));
        if !ok {
            return Err(format!("'{part}' is not a sysctl name component"));
        }
        // sysctl(8): a '/' inside a component stands for a '.' in the path (eth0/100 → eth0.100).
        let p = part.replace('/', ".");
        if p == "." || p == ".." {
            return Err(format!("'{part}' is not a sysctl name component"));
        }
        parts.push(p);
    }
    Ok(format!("/proc/sys/{}", parts.join("/")))
}

/// Whitespace-normalised sysctl value (`4096\t131072  6291456` → `4096 131072 6291456`).
pub fn normalize_sysctl(v: &str) -> String {
    v.split_ascii_whitespace().collect::<Vec<_>>().join(" ")
}

fn parse_sysctls(cx: &Ctx, v: &toml::Value) -> Result<Vec<(String, String)>, ProfileError> {
    let t = cx.table(
        "sysctl",
        v,
        "write [sysctl] with \"name\" = \"value\" lines",
    )?;
    cx.at_most("sysctl", t.len(), MAX_SYSCTLS)?;
    let mut out = Vec::new();
    for (name, val) in t {
        let key = format!("sysctl.\"{name}\"");
        if val.is_table() {
            return Err(cx.err(
                key,
                "is a table: the dotted name was split by TOML",
                format!("quote the whole name: \"{name}.…\" = \"value\""),
            ));
        }
        sysctl_path(name).map_err(|e| {
            cx.err(
                &key,
                e,
                "a dotted sysctl name such as \"net.core.rmem_max\"",
            )
        })?;
        let value = match val {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => u8::from(*b).to_string(),
            other => {
                return Err(cx.err(
                    key,
                    format!("is {}", type_name(other)),
                    "a string (\"4096 87380 268435456\") or an integer",
                ))
            }
        };
        let norm = normalize_sysctl(&value);
        if norm.is_empty() || norm.len() > 1024 || norm.chars().any(|c| c.is_control()) {
            return Err(cx.err(
                key,
                format!("'{value}' is not a sysctl value"),
                "1 to 1024 printable characters",
            ));
        }
        check_known_sysctl(name, &norm).map_err(|e| cx.err(&key, e.0, e.1))?;
        out.push((name.clone(), norm));
    }
    Ok(out)
}

/// Shapes of sysctls whose form is fixed on every kernel: (problem, allowed).
fn check_known_sysctl(name: &str, v: &str) -> Result<(), (String, String)> {
    let triple = [
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
        "net.ipv4.tcp_mem",
        "net.ipv4.udp_mem",
    ];
    if triple.contains(&name) {
        let nums: Vec<Option<u64>> = v.split(' ').map(|w| w.parse().ok()).collect();
        let ok = nums.len() == 3 && nums.iter().all(Option::is_some);
        let n: Vec<u64> = nums.into_iter().flatten().collect();
        if !ok {
            return Err((
                format!("'{v}' is not three numbers"),
                "min default max, e.g. \"4096 131072 268435456\"".into(),
            ));
        }
        if !(n[0] <= n[1] && n[1] <= n[2]) {
            return Err((
                format!("'{v}' is not ordered"),
                "min ≤ default ≤ max".into(),
            ));
        }
    }
    Ok(())
}

fn interface_name_ok(n: &str) -> bool {
    // IFNAMSIZ is 16 with the NUL; sysfs paths are built from it.
    !n.is_empty()
        && n.len() <= 15
        && n != "."
        && n != ".."
        && !n
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0)
}

/// Check an interface name as the kernel allows it (`dev_valid_name`).
pub fn check_interface_name(n: &str) -> Result<(), String> {
    if interface_name_ok(n) {
        Ok(())
    } else {
        Err(format!("'{n}' is not an interface name"))
    }
}

fn parse_matcher(cx: &Ctx, key: &str, s: &str) -> Result<Matcher, ProfileError> {
    let allowed = "an interface name (eth0), a glob (enp*s0f*), @route (the interface that routes to the peer) or, in checklists, @subject";
    match s {
        "@route" => Ok(Matcher::Route),
        "@subject" => Ok(Matcher::Subject),
        s if s.starts_with('@') => Err(cx.err(key, format!("'{s}' is not a matcher"), allowed)),
        s if s.contains(['*', '?', '[']) => {
            let ok = s.len() <= 64 && s.bytes().all(|b| b != b'/' && !b.is_ascii_whitespace());
            if !ok {
                return Err(cx.err(key, format!("'{s}' is not a pattern"), allowed));
            }
            glob_match(s, "probe").map_err(|e| cx.err(key, e, allowed))?;
            Ok(Matcher::Glob(s.to_string()))
        }
        s => {
            check_interface_name(s).map_err(|e| cx.err(key, e, allowed))?;
            Ok(Matcher::Name(s.to_string()))
        }
    }
}

pub use super::glob::glob_match;

fn norm_key(k: &str) -> String {
    k.replace('_', "-")
}

fn uint(
    cx: &Ctx,
    key: &str,
    v: &toml::Value,
    max: u64,
    allowed: &str,
) -> Result<u32, ProfileError> {
    match v {
        toml::Value::Integer(i) if *i >= 0 && (*i as u64) <= max => {
            u32::try_from(*i).map_err(|_| cx.err(key, format!("{i} is out of range"), allowed))
        }
        toml::Value::Integer(i) => Err(cx.err(key, format!("{i} is out of range"), allowed)),
        other => Err(cx.err(key, format!("is {}", type_name(other)), allowed)),
    }
}

fn boolean(cx: &Ctx, key: &str, v: &toml::Value) -> Result<bool, ProfileError> {
    match v {
        toml::Value::Boolean(b) => Ok(*b),
        toml::Value::String(s) if s == "on" => Ok(true),
        toml::Value::String(s) if s == "off" => Ok(false),
        other => Err(cx.err(
            key,
            format!("{other} is not on/off"),
            "true or false (or \"on\"/\"off\")",
        )),
    }
}

fn count(cx: &Ctx, key: &str, v: &toml::Value) -> Result<Count, ProfileError> {
    let allowed = "a number or \"max\" (the driver's maximum)";
    match v {
        toml::Value::String(s) if s == "max" => Ok(Count::Max),
        toml::Value::Integer(_) => Ok(Count::N(uint(cx, key, v, 1 << 20, allowed)?)),
        other => Err(cx.err(key, format!("{other} is not a count"), allowed)),
    }
}

fn counts<K: Copy>(
    cx: &Ctx,
    key: &str,
    v: &toml::Value,
    kinds: &[K],
    name: fn(K) -> &'static str,
) -> Result<Counts<K>, ProfileError> {
    let names: Vec<&str> = kinds.iter().map(|k| name(*k)).collect();
    let allowed = format!(
        "\"max\" or a table of {} with numbers or \"max\"",
        names.join(", ")
    );
    match v {
        toml::Value::String(s) if s == "max" => Ok(Counts::AllMax),
        toml::Value::Table(t) => {
            let mut out = Vec::new();
            for (k, val) in t {
                let sub = format!("{key}.{k}");
                let kind = kinds
                    .iter()
                    .find(|x| name(**x) == norm_key(k))
                    .ok_or_else(|| {
                        cx.err(&sub, "unknown kind", format!("one of {}", names.join(", ")))
                    })?;
                out.push((*kind, count(cx, &sub, val)?));
            }
            Ok(Counts::Each(out))
        }
        other => Err(cx.err(key, format!("{other} is not a table"), allowed)),
    }
}

fn mask_spec(cx: &Ctx, key: &str, v: &toml::Value, spread: bool) -> Result<MaskSpec, ProfileError> {
    let allowed = if spread {
        "a hex CPU mask (\"f\"), \"all\", \"local\" (the NIC's NUMA node) or \"spread\" (one local CPU per queue)"
    } else {
        "a hex CPU mask (\"f\"), \"all\" or \"local\" (the NIC's NUMA node)"
    };
    let s = v
        .as_str()
        .ok_or_else(|| cx.err(key, format!("is {}", type_name(v)), allowed))?;
    match s {
        "all" => Ok(MaskSpec::All),
        "local" => Ok(MaskSpec::Local),
        "spread" if spread => Ok(MaskSpec::Spread),
        s => cpuset::parse_mask(s)
            .map(MaskSpec::Cpus)
            .map_err(|e| cx.err(key, e, allowed)),
    }
}

fn per_queue<T>(
    cx: &Ctx,
    key: &str,
    v: &toml::Value,
    prefix: &str,
    one: impl Fn(&str, &toml::Value) -> Result<T, ProfileError>,
) -> Result<PerQueue<T>, ProfileError> {
    let Some(t) = v.as_table() else {
        return Ok(PerQueue::All(one(key, v)?));
    };
    let mut out = Vec::new();
    for (k, val) in t {
        let sub = format!("{key}.{k}");
        let idx = k
            .strip_prefix(prefix)
            .unwrap_or(k)
            .parse::<u32>()
            .ok()
            .filter(|q| *q < 4096)
            .ok_or_else(|| {
                cx.err(
                    &sub,
                    "not a queue",
                    format!("{prefix}N (N a queue index below 4096)"),
                )
            })?;
        out.push((idx, one(&sub, val)?));
    }
    Ok(PerQueue::Each(out))
}

fn parse_interface(
    cx: &Ctx,
    index: usize,
    v: &toml::Value,
) -> Result<InterfaceBlock, ProfileError> {
    let base = format!("[[interface]] #{index}");
    let t = cx.table(&base, v, "a table with `match` and settings")?;
    let m = t.get("match").ok_or_else(|| {
        cx.err(
            format!("{base} match"),
            "missing",
            "add match = \"eth0\" (or a glob, or \"@route\")",
        )
    })?;
    let ms = string(cx, &format!("{base} match"), m)?;
    let matcher = parse_matcher(cx, &format!("{base} match"), &ms)?;
    let base = format!("[[interface]] #{index} (match {ms})");
    let mut settings = Vec::new();
    for (k, val) in t {
        let key = format!("{base} {k}");
        let s = match norm_key(k).as_str() {
            "match" => continue,
            "mtu" => IfSetting::Mtu(uint(cx, &key, val, 1 << 20, "an MTU in bytes, 68 or more")?),
            "channels" => {
                IfSetting::Channels(counts(cx, &key, val, &ChannelKind::ALL, ChannelKind::name)?)
            }
            "rings" => IfSetting::Rings(counts(cx, &key, val, &RingKind::ALL, RingKind::name)?),
            "coalesce" => IfSetting::Coalesce(parse_coalesce(cx, &key, val)?),
            "features" => IfSetting::Features(parse_features(cx, &key, val)?),
            "pause" => IfSetting::Pause(parse_pause(cx, &key, val)?),
            "rps" | "rps-cpus" => IfSetting::Rps(per_queue(cx, &key, val, "rx-", |k, v| {
                mask_spec(cx, k, v, false)
            })?),
            "xps" | "xps-cpus" => IfSetting::Xps(per_queue(cx, &key, val, "tx-", |k, v| {
                mask_spec(cx, k, v, true)
            })?),
            "rps-flow-cnt" => IfSetting::RpsFlowCnt(per_queue(cx, &key, val, "rx-", |k, v| {
                uint(
                    cx,
                    k,
                    v,
                    1 << 27,
                    "a number of flow entries per queue (a power of two, e.g. 4096)",
                )
            })?),
            "irq-affinity" => IfSetting::IrqAffinity(parse_irq(cx, &key, val)?),
            _ => {
                return Err(cx.err(
                    key,
                    "unknown key",
                    format!("an [[interface]] block has {IF_KEYS}"),
                ))
            }
        };
        if let IfSetting::Mtu(m) = s {
            if m < 68 {
                return Err(cx.err(
                    key,
                    format!("{m} is too small"),
                    "68 (the IPv4 minimum) or more",
                ));
            }
        }
        if settings.iter().any(|x: &IfSetting| x.key() == s.key()) {
            return Err(cx.err(key, "given twice", "write each key once per block"));
        }
        settings.push(s);
    }
    Ok(InterfaceBlock {
        index,
        matcher,
        settings,
    })
}

fn parse_coalesce(
    cx: &Ctx,
    key: &str,
    v: &toml::Value,
) -> Result<Vec<(String, CoalesceValue)>, ProfileError> {
    let names = coalesce_names().join(", ");
    let t = cx.table(key, v, format!("a table of {names}"))?;
    let mut out = Vec::new();
    for (k, val) in t {
        let n = norm_key(k);
        let sub = format!("{key}.{k}");
        let Some((_, flag)) = coalesce_attr(&n) else {
            return Err(cx.err(
                sub,
                "unknown coalescing parameter",
                format!("one of {names}"),
            ));
        };
        let value = if flag {
            CoalesceValue::Flag(boolean(cx, &sub, val)?)
        } else {
            CoalesceValue::Num(uint(
                cx,
                &sub,
                val,
                u32::MAX as u64,
                "a number (microseconds or frames)",
            )?)
        };
        out.push((n, value));
    }
    Ok(out)
}

fn parse_features(
    cx: &Ctx,
    key: &str,
    v: &toml::Value,
) -> Result<Vec<(String, bool)>, ProfileError> {
    let allowed =
        "a table of feature names (gro, tso, rx-gro, generic-receive-offload, ...) = true/false";
    let t = cx.table(key, v, allowed)?;
    let mut out = Vec::new();
    for (k, val) in t {
        let sub = format!("{key}.{k}");
        let ok = !k.is_empty()
            && k.len() <= 64
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
        if !ok {
            return Err(cx.err(sub, "not a feature name", allowed));
        }
        out.push((k.clone(), boolean(cx, &sub, val)?));
    }
    Ok(out)
}

fn parse_pause(
    cx: &Ctx,
    key: &str,
    v: &toml::Value,
) -> Result<Vec<(PauseKind, bool)>, ProfileError> {
    let allowed = "a table of autoneg, rx, tx = true/false";
    let t = cx.table(key, v, allowed)?;
    let mut out = Vec::new();
    for (k, val) in t {
        let sub = format!("{key}.{k}");
        let kind = PauseKind::ALL
            .into_iter()
            .find(|p| p.name() == k)
            .ok_or_else(|| cx.err(&sub, "unknown pause parameter", allowed))?;
        out.push((kind, boolean(cx, &sub, val)?));
    }
    Ok(out)
}

fn parse_irq(cx: &Ctx, key: &str, v: &toml::Value) -> Result<IrqSpec, ProfileError> {
    let allowed = "\"local\" (spread the NIC's data IRQs over its NUMA node's CPUs), \"all\" (over every CPU), or a table \"IRQ name\" = \"CPU list\"";
    match v {
        toml::Value::String(s) if s == "local" => Ok(IrqSpec::Local),
        toml::Value::String(s) if s == "all" => Ok(IrqSpec::All),
        toml::Value::Table(t) => {
            let mut out = Vec::new();
            for (name, val) in t {
                let sub = format!("{key}.\"{name}\"");
                if name.is_empty() || name.len() > 128 || name.chars().any(char::is_whitespace) {
                    return Err(cx.err(
                        sub,
                        "not an interrupt name",
                        "the last column of /proc/interrupts",
                    ));
                }
                let s = string(cx, &sub, val)?;
                let cpus = cpuset::parse_list(&s)
                    .map_err(|e| cx.err(&sub, e, "a CPU list such as \"0-3,8\""))?;
                if cpus.is_empty() {
                    return Err(cx.err(sub, "empty CPU list", "at least one CPU"));
                }
                out.push((name.clone(), cpus));
            }
            Ok(IrqSpec::Explicit(out))
        }
        other => Err(cx.err(key, format!("{other} is not an IRQ policy"), allowed)),
    }
}

fn governor_name(cx: &Ctx, key: &str, v: &toml::Value) -> Result<String, ProfileError> {
    let s = string(cx, key, v)?;
    let ok =
        !s.is_empty() && s.len() <= 32 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !ok {
        return Err(cx.err(
            key,
            format!("'{s}' is not a governor name"),
            "a cpufreq governor such as performance, schedutil, ondemand",
        ));
    }
    Ok(s)
}

fn parse_host(cx: &Ctx, v: &toml::Value) -> Result<Vec<HostSetting>, ProfileError> {
    let t = cx.table("host", v, format!("a [host] table with {HOST_KEYS}"))?;
    let mut out = Vec::new();
    for (k, val) in t {
        let key = format!("host.{k}");
        match k.as_str() {
            "governor" => {
                let g = match val {
                    toml::Value::Table(t) => {
                        let mut each = Vec::new();
                        for (c, g) in t {
                            let sub = format!("{key}.{c}");
                            let cpu = c
                                .strip_prefix("cpu")
                                .and_then(|n| n.parse::<u32>().ok())
                                .filter(|n| *n <= cpuset::MAX_CPU)
                                .ok_or_else(|| cx.err(&sub, "not a CPU", "cpuN = \"governor\""))?;
                            each.push((cpu, governor_name(cx, &sub, g)?));
                        }
                        Governor::Each(each)
                    }
                    other => Governor::All(governor_name(cx, &key, other)?),
                };
                out.push(HostSetting::Governor(g));
            }
            "irqbalance" => {
                let allowed = "\"stopped\" or \"running\"";
                let running = match val {
                    toml::Value::String(s) if s == "stopped" || s == "stop" => false,
                    toml::Value::String(s) if s == "running" || s == "start" => true,
                    toml::Value::Boolean(b) => *b,
                    other => return Err(cx.err(key, format!("{other} is not a state"), allowed)),
                };
                out.push(HostSetting::Irqbalance(running));
            }
            _ => return Err(cx.err(key, "unknown key", format!("[host] has {HOST_KEYS}"))),
        }
    }
    Ok(out)
}

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

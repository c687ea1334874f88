//! The validation pass: a [`RawProfile`] as serde read it becomes the
//! settings of a [`super::Profile`], each value checked for the shapes and
//! ranges that hold on every host, with an error naming the file, the line,
//! the key and what is allowed. Whether *this* host can take a value is
//! [`crate::tune::resolve`]'s question, not this one's.

use super::raw::{dotted, At, Doc, Entries, RawHost, RawInterface, RawProfile};
use super::raw::{RawSection, Spot, Step, Written};
use super::{
    check_interface_name, cpuset, glob_match, normalize_sysctl, sysctl_path, CoalesceValue, Count,
    Counts, Governor, HostSetting, IfSetting, InterfaceBlock, IrqSpec, MaskSpec, Matcher, PerQueue,
    ProfileError, Section, MAX_INTERFACE_BLOCKS, MAX_SYSCTLS,
};
use crate::probe::netlink::ethtool_set::{
    coalesce_attr, coalesce_names, ChannelKind, PauseKind, RingKind,
};
use std::ops::Range;
use toml::Value;

/// The keys a profile has, for messages.
pub const TOP_KEYS: &str = "name, description, for, [sysctl], [[interface]], [host]";
const IF_KEYS: &str =
    "match, mtu, channels, rings, coalesce, features, pause, rps, xps, rps_flow_cnt, irq_affinity";
const HOST_KEYS: &str = "governor, irqbalance";
const SYSCTL_TABLE: &str = "write [sysctl] with \"name\" = \"value\" lines";
const FEATURES: &str =
    "a table of feature names (gro, tso, rx-gro, generic-receive-offload, ...) = true/false";
const PAUSE: &str = "a table of autoneg, rx, tx = true/false";
const MATCHER: &str = "an interface name (eth0), a glob (enp*s0f*), @route (the interface that routes to the peer) or, in checklists, @subject";

/// Where a value is: the document, the prefix its keys get (a checklist's
/// `[[check]] #2 change: `) and the value's byte range.
#[derive(Debug, Clone)]
pub struct Ctx<'a> {
    doc: &'a Doc<'a>,
    prefix: &'a str,
    span: Option<Range<usize>>,
}

impl<'a> Ctx<'a> {
    /// The whole of `doc`, keys written after `prefix`.
    pub fn new(doc: &'a Doc<'a>, prefix: &'a str) -> Ctx<'a> {
        Ctx {
            doc,
            prefix,
            span: None,
        }
    }

    /// The same place, keys written after `prefix`.
    pub fn with_prefix(&self, prefix: &'a str) -> Ctx<'a> {
        Ctx {
            prefix,
            ..self.clone()
        }
    }

    /// The file, as messages name it.
    pub fn file(&self) -> &str {
        self.doc.file
    }

    /// The same document at `span`.
    pub fn at(&self, span: Range<usize>) -> Ctx<'a> {
        Ctx {
            span: Some(span),
            ..self.clone()
        }
    }

    /// An error at this place.
    pub fn err(
        &self,
        key: impl AsRef<str>,
        problem: impl Into<String>,
        allowed: impl Into<String>,
    ) -> ProfileError {
        let key = format!("{}{}", self.prefix, key.as_ref());
        self.doc.err(self.span.clone(), key, problem, allowed)
    }

    /// At most `max` entries.
    fn at_most(&self, key: &str, n: usize, max: usize) -> Result<(), ProfileError> {
        if n > max {
            return Err(self.err(key, format!("{n} entries"), format!("at most {max}")));
        }
        Ok(())
    }
}

/// The key and what is allowed where serde refused a profile (see [`Doc::read`]).
pub fn describe(path: &[Step], doc: &toml::Table) -> Spot {
    let Some(Step::Key(top)) = path.first() else {
        return Spot::at("syntax", "a profile is a TOML table");
    };
    let key = dotted(path);
    match top.as_str() {
        "name" | "description" | "for" => Spot::at(key, "write it as a quoted string"),
        "sysctl" => Spot::at(key, SYSCTL_TABLE),
        "interface" => describe_interface(&path[1..], doc),
        "host" => match path.get(1) {
            None => Spot::at(key, format!("a [host] table with {HOST_KEYS}")),
            Some(_) => Spot::unknown(key, format!("[host] has {HOST_KEYS}")),
        },
        _ => Spot::unknown(key, format!("a profile has {TOP_KEYS}")),
    }
}

fn describe_interface(path: &[Step], doc: &toml::Table) -> Spot {
    let Some(Step::Index(i)) = path.first() else {
        let allowed = "write each block as [[interface]] with a `match` key";
        return Spot::at("interface", allowed);
    };
    let matcher = doc
        .get("interface")
        .and_then(|a| a.get(*i))
        .and_then(|b| b.get("match"))
        .and_then(Value::as_str);
    let base = match matcher {
        Some(m) => format!("[[interface]] #{} (match {m})", i + 1),
        None => format!("[[interface]] #{}", i + 1),
    };
    let Some(Step::Key(k)) = path.get(1) else {
        let allowed = format!("a table with `match` and settings, each key once: {IF_KEYS}");
        return Spot::at(base, allowed);
    };
    let key = format!("{base} {}", dotted(&path[1..]));
    match k.as_str() {
        "match" => Spot::at(key, format!("a quoted string: {MATCHER}")),
        "coalesce" => Spot::at(key, format!("a table of {}", coalesce_names().join(", "))),
        "features" => Spot::at(key, FEATURES),
        "pause" => Spot::at(key, PAUSE),
        _ => Spot::unknown(key, format!("an [[interface]] block has {IF_KEYS}")),
    }
}

/// `name`: present and a profile name.
pub fn name(cx: &Ctx, name: Option<&At<String>>) -> Result<String, ProfileError> {
    let Some(n) = name else {
        return Err(cx.err("name", "missing", "add name = \"...\" at the top"));
    };
    super::check_profile_name(n.get_ref()).map_err(|e| {
        cx.at(n.span()).err(
            "name",
            e.to_string(),
            "letters, digits, '.', '-' and '_', e.g. throughput-100g",
        )
    })?;
    Ok(n.get_ref().clone())
}

/// The settings of a profile, checked, in file order.
pub fn sections(cx: &Ctx, raw: &RawProfile) -> Result<Vec<Section>, ProfileError> {
    let mut out = Vec::new();
    for s in raw.sections() {
        match s {
            RawSection::Sysctl(t) => {
                out.push(Section::Sysctl(sysctls(&cx.at(t.span()), t.get_ref())?))
            }
            RawSection::Interfaces(blocks) => {
                let n = blocks.get_ref().len();
                cx.at(blocks.span())
                    .at_most("interface", n, MAX_INTERFACE_BLOCKS)?;
                for (i, b) in blocks.get_ref().iter().enumerate() {
                    let block = interface(&cx.at(b.span()), i + 1, b.get_ref())?;
                    out.push(Section::Interface(block));
                }
            }
            RawSection::Host(h) => out.push(Section::Host(host(cx, h.get_ref())?)),
        }
    }
    Ok(out)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

fn sysctls(cx: &Ctx, t: &Entries) -> Result<Vec<(String, String)>, ProfileError> {
    cx.at_most("sysctl", t.len(), MAX_SYSCTLS)?;
    let mut out = Vec::new();
    for (name, val) in t {
        let cx = cx.at(val.span());
        let key = format!("sysctl.\"{name}\"");
        if val.get_ref().is_table() {
            return Err(cx.err(
                key,
                "is a table: the dotted name was split by TOML",
                format!("quote the whole name: \"{name}.…\" = \"value\""),
            ));
        }
        sysctl_path(name).map_err(|e| {
            cx.err(
                &key,
                e.to_string(),
                "a dotted sysctl name such as \"net.core.rmem_max\"",
            )
        })?;
        let value = match val.get_ref() {
            Value::String(s) => s.clone(),
            Value::Integer(i) => i.to_string(),
            Value::Boolean(b) => u8::from(*b).to_string(),
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
        let nums: Option<Vec<u64>> = v.split(' ').map(|w| w.parse().ok()).collect();
        let Some([min, default, max]) = nums.and_then(|n| <[u64; 3]>::try_from(n).ok()) else {
            return Err((
                format!("'{v}' is not three numbers"),
                "min default max, e.g. \"4096 131072 268435456\"".into(),
            ));
        };
        if !(min <= default && default <= max) {
            return Err((
                format!("'{v}' is not ordered"),
                "min ≤ default ≤ max".into(),
            ));
        }
    }
    Ok(())
}

fn matcher(cx: &Ctx, key: &str, s: &str) -> Result<Matcher, ProfileError> {
    match s {
        "@route" => Ok(Matcher::Route),
        "@subject" => Ok(Matcher::Subject),
        s if s.starts_with('@') => Err(cx.err(key, format!("'{s}' is not a matcher"), MATCHER)),
        s if s.contains(['*', '?', '[']) => {
            let ok = s.len() <= 64 && s.bytes().all(|b| b != b'/' && !b.is_ascii_whitespace());
            if !ok {
                return Err(cx.err(key, format!("'{s}' is not a pattern"), MATCHER));
            }
            glob_match(s, "probe").map_err(|e| cx.err(key, e.to_string(), MATCHER))?;
            Ok(Matcher::Glob(s.to_string()))
        }
        s => {
            check_interface_name(s).map_err(|e| cx.err(key, e.to_string(), MATCHER))?;
            Ok(Matcher::Name(s.to_string()))
        }
    }
}

fn interface(cx: &Ctx, index: usize, b: &RawInterface) -> Result<InterfaceBlock, ProfileError> {
    let base = format!("[[interface]] #{index}");
    let Some(m) = &b.matcher else {
        return Err(cx.err(
            format!("{base} match"),
            "missing",
            "add match = \"eth0\" (or a glob, or \"@route\")",
        ));
    };
    let ms = m.get_ref();
    let matcher = matcher(&cx.at(m.span()), &format!("{base} match"), ms)?;
    let base = format!("{base} (match {ms})");
    let mut settings = Vec::new();
    for (k, w) in b.settings() {
        settings.push(setting(&cx.at(w.span()), &format!("{base} {k}"), k, w)?);
    }
    Ok(InterfaceBlock {
        index,
        matcher,
        settings,
    })
}

/// One setting of an `[[interface]]` block; `name` is its key's one spelling.
fn setting(cx: &Ctx, key: &str, name: &str, w: Written) -> Result<IfSetting, ProfileError> {
    let val = match w {
        Written::Table(t) => {
            return match name {
                "coalesce" => coalesce(cx, key, t.get_ref()).map(IfSetting::Coalesce),
                "features" => features(cx, key, t.get_ref()).map(IfSetting::Features),
                _ => pause(cx, key, t.get_ref()).map(IfSetting::Pause),
            }
        }
        Written::Value(v) => v.get_ref(),
    };
    Ok(match name {
        "mtu" => {
            let m = uint(cx, key, val, 1 << 20, "an MTU in bytes, 68 or more")?;
            if m < 68 {
                let too_small = format!("{m} is too small");
                return Err(cx.err(key, too_small, "68 (the IPv4 minimum) or more"));
            }
            IfSetting::Mtu(m)
        }
        "channels" => {
            IfSetting::Channels(counts(cx, key, val, &ChannelKind::ALL, ChannelKind::name)?)
        }
        "rings" => IfSetting::Rings(counts(cx, key, val, &RingKind::ALL, RingKind::name)?),
        "rps" => IfSetting::Rps(per_queue(cx, key, val, "rx-", |k, v| {
            mask_spec(cx, k, v, false)
        })?),
        "xps" => IfSetting::Xps(per_queue(cx, key, val, "tx-", |k, v| {
            mask_spec(cx, k, v, true)
        })?),
        "rps_flow_cnt" => IfSetting::RpsFlowCnt(per_queue(cx, key, val, "rx-", |k, v| {
            let allowed = "a number of flow entries per queue (a power of two, e.g. 4096)";
            uint(cx, k, v, 1 << 27, allowed)
        })?),
        _ => IfSetting::IrqAffinity(irq(cx, key, val)?),
    })
}

fn norm_key(k: &str) -> String {
    k.replace('_', "-")
}

fn uint(cx: &Ctx, key: &str, v: &Value, max: u64, allowed: &str) -> Result<u32, ProfileError> {
    match v {
        Value::Integer(i) if *i >= 0 && (*i as u64) <= max => {
            u32::try_from(*i).map_err(|_| cx.err(key, format!("{i} is out of range"), allowed))
        }
        Value::Integer(i) => Err(cx.err(key, format!("{i} is out of range"), allowed)),
        other => Err(cx.err(key, format!("is {}", type_name(other)), allowed)),
    }
}

fn boolean(cx: &Ctx, key: &str, v: &Value) -> Result<bool, ProfileError> {
    match v {
        Value::Boolean(b) => Ok(*b),
        Value::String(s) if s == "on" => Ok(true),
        Value::String(s) if s == "off" => Ok(false),
        other => Err(cx.err(
            key,
            format!("{other} is not on/off"),
            "true or false (or \"on\"/\"off\")",
        )),
    }
}

fn count(cx: &Ctx, key: &str, v: &Value) -> Result<Count, ProfileError> {
    let allowed = "a number or \"max\" (the driver's maximum)";
    match v {
        Value::String(s) if s == "max" => Ok(Count::Max),
        Value::Integer(_) => Ok(Count::N(uint(cx, key, v, 1 << 20, allowed)?)),
        other => Err(cx.err(key, format!("{other} is not a count"), allowed)),
    }
}

fn counts<K: Copy>(
    cx: &Ctx,
    key: &str,
    v: &Value,
    kinds: &[K],
    name: fn(K) -> &'static str,
) -> Result<Counts<K>, ProfileError> {
    let names: Vec<&str> = kinds.iter().map(|k| name(*k)).collect();
    let allowed = format!(
        "\"max\" or a table of {} with numbers or \"max\"",
        names.join(", ")
    );
    match v {
        Value::String(s) if s == "max" => Ok(Counts::AllMax),
        Value::Table(t) => {
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

fn mask_spec(cx: &Ctx, key: &str, v: &Value, spread: bool) -> Result<MaskSpec, ProfileError> {
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
            .map_err(|e| cx.err(key, e.to_string(), allowed)),
    }
}

fn per_queue<T>(
    cx: &Ctx,
    key: &str,
    v: &Value,
    prefix: &str,
    one: impl Fn(&str, &Value) -> Result<T, ProfileError>,
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

/// Each entry of the table at `key`, read by `entry` (its place, key, dotted key, value).
fn entries<T>(
    cx: &Ctx,
    key: &str,
    t: &Entries,
    entry: impl Fn(&Ctx, &str, String, &Value) -> Result<T, ProfileError>,
) -> Result<Vec<T>, ProfileError> {
    t.iter()
        .map(|(k, val)| entry(&cx.at(val.span()), k, format!("{key}.{k}"), val.get_ref()))
        .collect()
}

fn coalesce(
    cx: &Ctx,
    key: &str,
    t: &Entries,
) -> Result<Vec<(String, CoalesceValue)>, ProfileError> {
    let names = coalesce_names().join(", ");
    entries(cx, key, t, |cx, k, sub, val| {
        let n = norm_key(k);
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
            let allowed = "a number (microseconds or frames)";
            CoalesceValue::Num(uint(cx, &sub, val, u32::MAX as u64, allowed)?)
        };
        Ok((n, value))
    })
}

fn features(cx: &Ctx, key: &str, t: &Entries) -> Result<Vec<(String, bool)>, ProfileError> {
    entries(cx, key, t, |cx, k, sub, val| {
        let ok = !k.is_empty()
            && k.len() <= 64
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
        if !ok {
            return Err(cx.err(sub, "not a feature name", FEATURES));
        }
        Ok((k.to_string(), boolean(cx, &sub, val)?))
    })
}

fn pause(cx: &Ctx, key: &str, t: &Entries) -> Result<Vec<(PauseKind, bool)>, ProfileError> {
    entries(cx, key, t, |cx, k, sub, val| {
        let kind = PauseKind::ALL
            .into_iter()
            .find(|p| p.name() == k)
            .ok_or_else(|| cx.err(&sub, "unknown pause parameter", PAUSE))?;
        Ok((kind, boolean(cx, &sub, val)?))
    })
}

fn irq(cx: &Ctx, key: &str, v: &Value) -> Result<IrqSpec, ProfileError> {
    let allowed = "\"local\" (spread the NIC's data IRQs over its NUMA node's CPUs), \"all\" (over every CPU), or a table \"IRQ name\" = \"CPU list\"";
    match v {
        Value::String(s) if s == "local" => Ok(IrqSpec::Local),
        Value::String(s) if s == "all" => Ok(IrqSpec::All),
        Value::Table(t) => {
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
                    .map_err(|e| cx.err(&sub, e.to_string(), "a CPU list such as \"0-3,8\""))?;
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

fn string(cx: &Ctx, key: &str, v: &Value) -> Result<String, ProfileError> {
    v.as_str().map(str::to_string).ok_or_else(|| {
        cx.err(
            key,
            format!("is {}", type_name(v)),
            "write it as a quoted string",
        )
    })
}

fn governor_name(cx: &Ctx, key: &str, v: &Value) -> Result<String, ProfileError> {
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

fn governor(cx: &Ctx, key: &str, v: &Value) -> Result<Governor, ProfileError> {
    let Value::Table(t) = v else {
        return Ok(Governor::All(governor_name(cx, key, v)?));
    };
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
    Ok(Governor::Each(each))
}

fn host(cx: &Ctx, h: &RawHost) -> Result<Vec<HostSetting>, ProfileError> {
    let mut out = Vec::new();
    for (k, val) in h.settings() {
        let cx = cx.at(val.span());
        let key = format!("host.{k}");
        let v = val.get_ref();
        out.push(match k {
            "governor" => HostSetting::Governor(governor(&cx, &key, v)?),
            _ => HostSetting::Irqbalance(match v {
                Value::String(s) if s == "stopped" || s == "stop" => false,
                Value::String(s) if s == "running" || s == "start" => true,
                Value::Boolean(b) => *b,
                other => {
                    let allowed = "\"stopped\" or \"running\"";
                    return Err(cx.err(key, format!("{other} is not a state"), allowed));
                }
            }),
        });
    }
    Ok(out)
}

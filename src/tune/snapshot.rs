//! `profile save`: the current value of every tunable a profile can hold,
//! written as a profile that, applied to the same host, changes nothing.
//!
//! Interfaces are written by name, IRQs by their /proc/interrupts name,
//! features by kernel name (fixed ones are left out: they cannot be set),
//! channels and rings only for the kinds the driver has. Sysctls are the
//! ones the shipped profiles and the diagnosis rules name; one that does not
//! exist here (or only in the initial network namespace) is left out with a
//! note, as is anything else that cannot be read.

use super::error::TuneError;
use super::host::{channel, coalesce_value, ring, with_max, Host, NicState};
use super::key::Key;
use super::profile::{sysctl_path, Profile};
use crate::probe::facts::Support;
use crate::probe::netlink::ethtool_set::{ChannelKind, RingKind};

/// Sysctls `profile save` records (every one the shipped profiles or the rules name).
pub const SYSCTLS: &[&str] = &[
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.core.optmem_max",
    "net.core.netdev_max_backlog",
    "net.core.netdev_budget",
    "net.core.netdev_budget_usecs",
    "net.core.busy_read",
    "net.core.busy_poll",
    "net.core.rps_sock_flow_entries",
    "net.core.default_qdisc",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_mem",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_mtu_probing",
    "net.ipv4.tcp_fastopen",
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_moderate_rcvbuf",
];

/// A saved profile's text and what could not be recorded.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Profile text (parses with [`Profile::parse`]).
    pub text: String,
    /// What was left out, and why.
    pub notes: Vec<String>,
}

fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn bare_ok(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn key(k: &str) -> String {
    if bare_ok(k) {
        k.to_string()
    } else {
        q(k)
    }
}

fn inline(pairs: &[(String, String)]) -> String {
    let body: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{} = {v}", key(k)))
        .collect();
    format!("{{ {} }}", body.join(", "))
}

/// Record `host` as profile `name`; `ifaces` empty = every interface but lo.
pub fn snapshot(host: &Host, name: &str, ifaces: &[String]) -> Result<Snapshot, TuneError> {
    super::profile::check_profile_name(name).map_err(|e| TuneError::NotFound {
        name: name.to_string(),
        hint: format!("{e}; use letters, digits, '.', '-' and '_'"),
    })?;
    let mut notes = Vec::new();
    let mut t = header(host, name);
    sysctl_section(host, &mut t, &mut notes);
    for iface in &interface_names(host, ifaces)? {
        interface(host, iface, &mut t, &mut notes);
    }
    host_section(host, &mut t, &mut notes);
    // What was written must read back as a profile; anything else is a bug here.
    Profile::parse(&t, "saved profile")?;
    Ok(Snapshot { text: t, notes })
}

/// The comment saying who saved it when, and the profile's name, description and purpose.
fn header(host: &Host, name: &str) -> String {
    let when = super::state::now_rfc3339();
    let who = if host.is_live() {
        crate::probe::system::HostInfo::current().hostname
    } else {
        host.describe()
    };
    format!(
        "# Saved by wirescope {} from {who} ({}) at {when}.\n\nname = {}\ndescription = {}\nfor = {}\n",
        env!("CARGO_PKG_VERSION"),
        host.namespace(),
        q(name),
        q(&format!("Values on {who} at {when}")),
        q(&format!("going back to the values of {when}"))
    )
}

/// `[sysctl]`: every sysctl wirescope tunes that this host has and lets write.
fn sysctl_section(host: &Host, t: &mut String, notes: &mut Vec<String>) {
    t.push_str("\n[sysctl]\n");
    for s in SYSCTLS {
        let Ok(path) = sysctl_path(s) else { continue };
        if !host.exists(&path) {
            notes.push(format!(
                "sysctl {s}: not on this host (or only in the initial network namespace)"
            ));
            continue;
        }
        if !host.writable(&path) {
            notes.push(format!("sysctl {s}: read-only here"));
            continue;
        }
        match host.read(&Key::Sysctl {
            name: s.to_string(),
        }) {
            Ok(v) => t.push_str(&format!("{} = {}\n", q(s), q(&v))),
            Err(e) => notes.push(format!("sysctl {s}: {e}")),
        }
    }
}

/// The interfaces to save: those asked for (each must exist), else every one but lo.
fn interface_names(host: &Host, ifaces: &[String]) -> Result<Vec<String>, TuneError> {
    Ok(if ifaces.is_empty() {
        host.interfaces()
            .into_iter()
            .filter(|i| i != "lo")
            .collect()
    } else {
        for i in ifaces {
            if !host.has_interface(i) {
                return Err(TuneError::NotFound {
                    name: i.clone(),
                    hint: format!(
                        "no such interface; this host has {}",
                        host.interfaces().join(", ")
                    ),
                });
            }
        }
        ifaces.to_vec()
    })
}

/// `[host]`: irqbalance and the CPU frequency governor(s).
fn host_section(host: &Host, t: &mut String, notes: &mut Vec<String>) {
    let mut host_lines = Vec::new();
    match host.irqbalance_running() {
        Some(r) => host_lines.push(format!(
            "irqbalance = {}",
            q(if r { "running" } else { "stopped" })
        )),
        None => notes.push("irqbalance: the process list cannot be read".into()),
    }
    let cpus = host.online_cpus();
    let govs: Vec<(u32, String)> = cpus
        .iter()
        .filter_map(|c| host.read(&Key::Governor { cpu: *c }).ok().map(|g| (*c, g)))
        .collect();
    if govs.is_empty() {
        notes.push("governor: no cpufreq on this host".into());
    } else if govs.len() == cpus.len() && govs.iter().all(|(_, g)| *g == govs[0].1) {
        host_lines.push(format!("governor = {}", q(&govs[0].1)));
    } else {
        let pairs: Vec<(String, String)> = govs
            .iter()
            .map(|(c, g)| (format!("cpu{c}"), q(g)))
            .collect();
        host_lines.push(format!("governor = {}", inline(&pairs)));
    }
    if !host_lines.is_empty() {
        t.push_str("\n[host]\n");
        for l in host_lines {
            t.push_str(&l);
            t.push('\n');
        }
    }
}

/// One `[[interface]]` block: its values, then its per-queue, ethtool and IRQ tables.
fn interface(host: &Host, iface: &str, t: &mut String, notes: &mut Vec<String>) {
    let nic = host.nic(iface);
    let lines = interface_values(host, iface, &nic, notes);
    let mut tables = queue_tables(host, iface, notes);
    tables.extend(ethtool_tables(iface, &nic, notes));
    let irqs = irq_affinities(host, iface, notes);
    if !irqs.is_empty() {
        tables.push(("irq_affinity".into(), irqs));
    }
    t.push_str(&format!("\n[[interface]]\nmatch = {}\n", q(iface)));
    for l in lines {
        t.push_str(&l);
        t.push('\n');
    }
    for (name, pairs) in tables {
        t.push_str(&format!("\n[interface.{name}]\n"));
        for (k, v) in pairs {
            t.push_str(&format!("{} = {v}\n", key(&k)));
        }
    }
}

/// A named table of `key = value` pairs under `[interface.NAME]`.
type Table = (String, Vec<(String, String)>);

/// The interface's plain values: mtu, channels, rings, pause.
fn interface_values(
    host: &Host,
    iface: &str,
    nic: &NicState,
    notes: &mut Vec<String>,
) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    match host.mtu(iface) {
        Ok(m) => lines.push(format!("mtu = {}", m.mtu)),
        Err(e) => notes.push(format!("{iface} mtu: {e}")),
    }
    for (what, pairs, why) in [
        (
            "channels",
            nic.channels
                .value()
                .map(|c| counts(&ChannelKind::ALL, |k| channel(c, k), ChannelKind::name)),
            support_text(&nic.channels),
        ),
        (
            "rings",
            nic.rings
                .value()
                .map(|r| counts(&RingKind::ALL, |k| ring(r, k), RingKind::name)),
            support_text(&nic.rings),
        ),
    ] {
        match pairs {
            Some(p) if !p.is_empty() => lines.push(format!("{what} = {}", inline(&p))),
            Some(_) => {}
            None => notes.push(format!("{iface} {what}: {why}")),
        }
    }
    match &nic.pause {
        Support::Value(p) => lines.push(format!(
            "pause = {{ autoneg = {}, rx = {}, tx = {} }}",
            p.autoneg, p.rx, p.tx
        )),
        other => notes.push(format!("{iface} pause: {}", support_text(other))),
    }
    lines
}

/// The per-queue tables: rps, rps_flow_cnt, xps (queues whose file exists).
fn queue_tables(host: &Host, iface: &str, notes: &mut Vec<String>) -> Vec<Table> {
    let mut tables: Vec<Table> = Vec::new();
    let (rx, tx) = host.queues(iface);
    let per_queue = |file: &str, dir: &str, qs: &[u32], mask: bool, notes: &mut Vec<String>| {
        let mut pairs = Vec::new();
        for qi in qs {
            let k = match (file, mask) {
                ("rps_cpus", _) => Key::Rps {
                    iface: iface.into(),
                    queue: *qi,
                },
                ("xps_cpus", _) => Key::Xps {
                    iface: iface.into(),
                    queue: *qi,
                },
                _ => Key::RpsFlowCnt {
                    iface: iface.into(),
                    queue: *qi,
                },
            };
            let Some(path) = k.path() else { continue };
            if !host.exists(&path) {
                continue;
            }
            match host.read(&k) {
                Ok(v) => pairs.push((format!("{dir}-{qi}"), if mask { q(&v) } else { v })),
                Err(e) => notes.push(format!("{k}: {e}")),
            }
        }
        pairs
    };
    for (file, key_name, dir, qs, mask) in [
        ("rps_cpus", "rps", "rx", &rx, true),
        ("rps_flow_cnt", "rps_flow_cnt", "rx", &rx, false),
        ("xps_cpus", "xps", "tx", &tx, true),
    ] {
        let pairs = per_queue(file, dir, qs, mask, notes);
        if !pairs.is_empty() {
            tables.push((key_name.to_string(), pairs));
        }
    }
    tables
}

/// The ethtool tables: coalesce and the features the driver lets change.
fn ethtool_tables(iface: &str, nic: &NicState, notes: &mut Vec<String>) -> Vec<Table> {
    let mut tables: Vec<Table> = Vec::new();
    match &nic.coalesce {
        Support::Value(c) => {
            let mut names: Vec<String> = vec![
                "adaptive-rx".into(),
                "adaptive-tx".into(),
                "rx-usecs".into(),
                "rx-frames".into(),
                "tx-usecs".into(),
                "tx-frames".into(),
            ];
            names.extend(c.other.keys().cloned());
            let pairs: Vec<(String, String)> = names
                .into_iter()
                .filter_map(|n| {
                    let v = coalesce_value(c, &n)?;
                    let v = match v.as_str() {
                        "on" => "true".to_string(),
                        "off" => "false".to_string(),
                        _ => v,
                    };
                    Some((n, v))
                })
                .collect();
            if !pairs.is_empty() {
                tables.push(("coalesce".into(), pairs));
            }
        }
        other => notes.push(format!("{iface} coalesce: {}", support_text(other))),
    }
    match &nic.features {
        Support::Value(f) => {
            let pairs: Vec<(String, String)> =
                f.0.iter()
                    .filter(|(_, x)| !x.fixed)
                    .map(|(n, x)| (n.clone(), x.on.to_string()))
                    .collect();
            if !pairs.is_empty() {
                tables.push(("features".into(), pairs));
            }
        }
        other => notes.push(format!("{iface} features: {}", support_text(other))),
    }
    tables
}

/// Each data IRQ's affinity by IRQ name (a name two IRQs share is left out).
fn irq_affinities(host: &Host, iface: &str, notes: &mut Vec<String>) -> Vec<(String, String)> {
    let irqs = host.data_irqs(iface);
    let mut seen = std::collections::BTreeSet::new();
    let mut pairs = Vec::new();
    for (irq, name) in irqs {
        if !seen.insert(name.clone()) {
            notes.push(format!(
                "irq {irq} ({name}): another IRQ has the same name; left out"
            ));
            continue;
        }
        let k = Key::IrqAffinity {
            irq,
            name: name.clone(),
        };
        match host.read(&k) {
            Ok(v) => pairs.push((name, q(&v))),
            Err(e) => notes.push(format!("{k}: {e}")),
        }
    }
    pairs
}

/// `kind = current` for every kind the driver has.
fn counts<K: Copy>(
    kinds: &[K],
    f: impl Fn(K) -> (Option<u32>, Option<u32>),
    name: fn(K) -> &'static str,
) -> Vec<(String, String)> {
    with_max(kinds, &f)
        .into_iter()
        .filter_map(|k| Some((name(k).to_string(), f(k).1?.to_string())))
        .collect()
}

fn support_text<T>(s: &Support<T>) -> String {
    match s {
        Support::Value(_) => "read".into(),
        Support::NotSupported { driver } => format!("not supported by driver {driver}"),
        Support::Error(e) => e.clone(),
        Support::Unknown => "not known".into(),
    }
}

//! `profile diff A B`: two profiles, or a profile and the live host.
//!
//! Two files are compared as written, setting by setting (`gro` and
//! `rx-gro` count as the same feature), without touching the host. A file
//! and `live` are compared on this host: the file is resolved (its
//! interfaces found, "max" made a number) and each setting's target is set
//! against the value the host has now; what cannot be resolved is listed
//! as a problem. `live` against `live` has no differences.

use super::features::canonical_name;
use super::host::Host;
use super::profile::{
    Counts, Governor, HostSetting, IfSetting, IrqSpec, PerQueue, Profile, Section,
};
use super::resolve::{resolve, Problem, ResolveOpts};
use serde::Serialize;

/// One side of a diff.
#[derive(Debug, Clone)]
pub enum Side {
    /// A profile.
    Profile(Box<Profile>),
    /// The live host.
    Live,
}

impl Side {
    /// For headers: the profile's name and file, or `live`.
    pub fn label(&self) -> String {
        match self {
            Side::Profile(p) => format!("{} ({})", p.name, p.source),
            Side::Live => "live".into(),
        }
    }
}

/// One setting that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DiffLine {
    /// The setting.
    pub setting: String,
    /// Value on side A (None: not set there).
    pub a: Option<String>,
    /// Value on side B.
    pub b: Option<String>,
}

/// The result.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Diff {
    /// Side A.
    pub a: String,
    /// Side B.
    pub b: String,
    /// Settings compared.
    pub compared: usize,
    /// Settings that differ.
    pub lines: Vec<DiffLine>,
    /// Settings of a profile that could not be resolved on this host.
    pub problems: Vec<Problem>,
}

/// Compare (see the module docs).
pub fn diff(a: &Side, b: &Side, host: &Host, opts: &ResolveOpts) -> Diff {
    let mut d = Diff {
        a: a.label(),
        b: b.label(),
        compared: 0,
        lines: Vec::new(),
        problems: Vec::new(),
    };
    match (a, b) {
        (Side::Live, Side::Live) => {}
        (Side::Profile(pa), Side::Profile(pb)) => {
            let fa = flatten(pa);
            let fb = flatten(pb);
            let mut keys: Vec<&String> = fa.iter().map(|(k, _)| k).collect();
            for (k, _) in &fb {
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
            d.compared = keys.len();
            // A key set twice counts with its last value.
            let last = |f: &[(String, String)], k: &String| {
                f.iter().rev().find(|(x, _)| x == k).map(|(_, v)| v.clone())
            };
            for k in keys {
                let (va, vb) = (last(&fa, k), last(&fb, k));
                if va != vb {
                    d.lines.push(DiffLine {
                        setting: k.clone(),
                        a: va,
                        b: vb,
                    });
                }
            }
        }
        (Side::Profile(p), Side::Live) | (Side::Live, Side::Profile(p)) => {
            let plan = resolve(p, host, opts);
            let live_first = matches!(a, Side::Live);
            d.compared = plan.settings.len();
            for s in &plan.settings {
                if s.changes() {
                    let now = s.current_text().to_string();
                    let (va, vb) = if live_first {
                        (now, s.target.clone())
                    } else {
                        (s.target.clone(), now)
                    };
                    d.lines.push(DiffLine {
                        setting: s.key.to_string(),
                        a: Some(va),
                        b: Some(vb),
                    });
                }
            }
            d.problems = plan.problems;
        }
    }
    d
}

/// A profile as (setting, value) pairs, as written (for comparing two files).
pub fn flatten(p: &Profile) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for s in &p.sections {
        match s {
            Section::Sysctl(list) => {
                for (n, v) in list {
                    out.push((format!("sysctl {n}"), v.clone()));
                }
            }
            Section::Interface(b) => {
                let base = format!("interface {}", b.matcher);
                for set in &b.settings {
                    flatten_if(&base, set, &mut out);
                }
            }
            Section::Host(list) => {
                for h in list {
                    match h {
                        HostSetting::Governor(Governor::All(g)) => {
                            out.push(("host governor".into(), g.clone()))
                        }
                        HostSetting::Governor(Governor::Each(v)) => {
                            for (c, g) in v {
                                out.push((format!("host governor cpu{c}"), g.clone()));
                            }
                        }
                        HostSetting::Irqbalance(r) => out.push((
                            "host irqbalance".into(),
                            if *r { "running" } else { "stopped" }.into(),
                        )),
                    }
                }
            }
        }
    }
    out
}

fn counts<K: Copy>(
    base: &str,
    what: &str,
    c: &Counts<K>,
    name: fn(K) -> &'static str,
    out: &mut Vec<(String, String)>,
) {
    match c {
        Counts::AllMax => out.push((format!("{base} {what}"), "max".into())),
        Counts::Each(v) => {
            for (k, n) in v {
                out.push((format!("{base} {what} {}", name(*k)), n.to_string()));
            }
        }
    }
}

fn per_queue<T: ToString>(
    base: &str,
    what: &str,
    dir: &str,
    pq: &PerQueue<T>,
    out: &mut Vec<(String, String)>,
) {
    match pq {
        PerQueue::All(v) => out.push((format!("{base} {what}"), v.to_string())),
        PerQueue::Each(v) => {
            for (q, x) in v {
                out.push((format!("{base} {what} {dir}-{q}"), x.to_string()));
            }
        }
    }
}

fn flatten_if(base: &str, s: &IfSetting, out: &mut Vec<(String, String)>) {
    use crate::probe::netlink::ethtool_set::{ChannelKind, CoalesceValue, RingKind};
    let b = |v: bool| if v { "on" } else { "off" }.to_string();
    match s {
        IfSetting::Mtu(m) => out.push((format!("{base} mtu"), m.to_string())),
        IfSetting::Channels(c) => counts(base, "channels", c, ChannelKind::name, out),
        IfSetting::Rings(c) => counts(base, "rings", c, RingKind::name, out),
        IfSetting::Coalesce(v) => {
            for (p, x) in v {
                let val = match x {
                    CoalesceValue::Flag(f) => b(*f),
                    CoalesceValue::Num(n) => n.to_string(),
                };
                out.push((format!("{base} coalesce {p}"), val));
            }
        }
        IfSetting::Features(v) => {
            for (n, on) in v {
                out.push((format!("{base} feature {}", canonical_name(n)), b(*on)));
            }
        }
        IfSetting::Pause(v) => {
            for (k, on) in v {
                out.push((format!("{base} pause {}", k.name()), b(*on)));
            }
        }
        IfSetting::Rps(pq) => per_queue(base, "rps", "rx", pq, out),
        IfSetting::Xps(pq) => per_queue(base, "xps", "tx", pq, out),
        IfSetting::RpsFlowCnt(pq) => per_queue(base, "rps_flow_cnt", "rx", pq, out),
        IfSetting::IrqAffinity(IrqSpec::Local) => {
            out.push((format!("{base} irq_affinity"), "local".into()))
        }
        IfSetting::IrqAffinity(IrqSpec::All) => {
            out.push((format!("{base} irq_affinity"), "all".into()))
        }
        IfSetting::IrqAffinity(IrqSpec::Explicit(v)) => {
            for (n, cpus) in v {
                out.push((
                    format!("{base} irq_affinity {n}"),
                    super::cpuset::format_list(cpus),
                ));
            }
        }
    }
}

/// Human text: a header, one line per difference, then problems.
pub fn render(d: &Diff) -> String {
    let mut s = format!("--- {}\n+++ {}\n", d.a, d.b);
    if d.lines.is_empty() {
        s.push_str(&format!(
            "no differences ({} setting(s) compared)\n",
            d.compared
        ));
    } else {
        let w = d.lines.iter().map(|l| l.setting.len()).max().unwrap_or(0);
        let wa = d
            .lines
            .iter()
            .map(|l| l.a.as_deref().unwrap_or("(not set)").len())
            .max()
            .unwrap_or(0);
        for l in &d.lines {
            s.push_str(&format!(
                "{:w$}  {:wa$}  ->  {}\n",
                l.setting,
                l.a.as_deref().unwrap_or("(not set)"),
                l.b.as_deref().unwrap_or("(not set)"),
            ));
        }
        s.push_str(&format!(
            "{} of {} setting(s) differ\n",
            d.lines.len(),
            d.compared
        ));
    }
    if !d.problems.is_empty() {
        s.push_str("not compared (cannot be resolved on this host):\n");
        for p in &d.problems {
            s.push_str(&format!("  - {p}\n"));
        }
    }
    s
}

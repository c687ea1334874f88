//! A profile on a host: which interfaces its blocks mean, what "max" and
//! "local" are there, and whether the host can take every value — before
//! anything changes.
//!
//! [`resolve`] turns a [`Profile`] into a [`Plan`]: one [`Planned`] entry per
//! concrete [`Key`] with its target and current value, in the profile's
//! order, plus every [`Problem`] found (no such sysctl, driver without
//! rings, a count above the driver's maximum, a missing interface, an
//! offline CPU in a mask). A plan with problems is never applied; problems
//! the host simply has no means for (a VM without cpufreq, veth without
//! rings) are marked `unsupported`, and `--skip-unsupported` drops only those.
//!
//! It reads the host and writes nothing.

use super::cpuset;
use super::features::kernel_names;
use super::host::{channel, coalesce_value, pause, ring, with_max, Host, NicState};
use super::key::{on_off, Key};
use super::profile::{
    glob_match, sysctl_path, Count, Counts, Governor, HostSetting, IfSetting, InterfaceBlock,
    IrqSpec, MaskSpec, Matcher, PerQueue, Profile, Section,
};
use crate::probe::facts::Support;
use crate::probe::netlink::ethtool_set::{ChannelKind, CoalesceValue, PauseKind, RingKind};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::IpAddr;

/// What resolving needs besides the profile.
#[derive(Debug, Clone, Default)]
pub struct ResolveOpts {
    /// The peer's address, for `@route`.
    pub route_to: Option<IpAddr>,
    /// The interface a finding names, for `@subject` (checklists).
    pub subject: Option<String>,
}

/// One setting to make.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Planned {
    /// What.
    pub key: Key,
    /// Value wanted (canonical).
    pub target: String,
    /// Value now (canonical); empty for a queue that does not exist yet.
    pub current: String,
    /// Where in the profile it comes from (`[[interface]] #1 (match @route) channels`).
    pub origin: String,
    /// The setting is on a queue an earlier channel change creates: its
    /// value is read when it is written.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub new_queue: bool,
}

impl Planned {
    /// Does applying it change anything?
    pub fn changes(&self) -> bool {
        self.new_queue || self.current != self.target
    }

    /// The current value for people (`(new queue)` when it does not exist yet).
    pub fn current_text(&self) -> &str {
        if self.new_queue {
            "(new queue)"
        } else {
            &self.current
        }
    }

    /// The equivalent command.
    pub fn command(&self) -> String {
        self.key.command(&self.target)
    }
}

/// A value the host cannot take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Problem {
    /// The setting (`sysctl net.core.busy_poll`, `eth0 rings rx`) or profile key.
    pub setting: String,
    /// What is wrong here.
    pub problem: String,
    /// What would be accepted.
    pub allowed: String,
    /// The host has no such setting at all (skippable with `--skip-unsupported`).
    pub unsupported: bool,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.setting, self.problem)?;
        if !self.allowed.is_empty() {
            write!(f, "; {}", self.allowed)?;
        }
        Ok(())
    }
}

/// A profile resolved on a host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Plan {
    /// Profile name.
    pub profile: String,
    /// Host description.
    pub host: String,
    /// Settings in order (only valid ones).
    pub settings: Vec<Planned>,
    /// Everything the host cannot take.
    pub problems: Vec<Problem>,
    /// Remarks (a NIC without IRQs of its own, group members left as they are).
    pub notes: Vec<String>,
}

impl Plan {
    /// Settings whose value differs from the target.
    pub fn changes(&self) -> Vec<&Planned> {
        self.settings.iter().filter(|p| p.changes()).collect()
    }

    /// Drop the problems of settings this host does not have; returns them.
    pub fn skip_unsupported(&mut self) -> Vec<Problem> {
        let (skipped, keep): (Vec<Problem>, Vec<Problem>) =
            self.problems.drain(..).partition(|p| p.unsupported);
        self.problems = keep;
        skipped
    }
}

struct Resolver<'a> {
    host: &'a Host,
    opts: &'a ResolveOpts,
    plan: Plan,
    online: Vec<u32>,
    /// rx/tx queue indices after this block's channel change, while it is resolved.
    queues_after: Option<(Vec<u32>, Vec<u32>)>,
}

/// Resolve `profile` on `host` (reads only).
pub fn resolve(profile: &Profile, host: &Host, opts: &ResolveOpts) -> Plan {
    let mut r = Resolver {
        host,
        opts,
        plan: Plan {
            profile: profile.name.clone(),
            host: host.describe(),
            settings: Vec::new(),
            problems: Vec::new(),
            notes: Vec::new(),
        },
        online: host.online_cpus(),
        queues_after: None,
    };
    for section in &profile.sections {
        match section {
            Section::Sysctl(list) => {
                for (name, value) in list {
                    r.sysctl(name, value);
                }
            }
            Section::Interface(block) => r.block(block),
            Section::Host(list) => {
                for s in list {
                    r.host_setting(s);
                }
            }
        }
    }
    r.plan
}

fn problem(
    setting: impl Into<String>,
    problem: impl Into<String>,
    allowed: impl Into<String>,
) -> Problem {
    Problem {
        setting: setting.into(),
        problem: problem.into(),
        allowed: allowed.into(),
        unsupported: false,
    }
}

fn unsupported(
    setting: impl Into<String>,
    why: impl Into<String>,
    allowed: impl Into<String>,
) -> Problem {
    Problem {
        unsupported: true,
        ..problem(setting, why, allowed)
    }
}

/// Shape of a sysctl value: the number of fields and whether all are integers.
fn shape(v: &str) -> (usize, bool) {
    let w: Vec<&str> = v.split(' ').collect();
    (w.len(), w.iter().all(|x| x.parse::<i64>().is_ok()))
}

impl Resolver<'_> {
    fn push(&mut self, key: Key, target: String, current: String, origin: String) {
        self.push_planned(key, target, current, origin, false);
    }

    fn push_planned(
        &mut self,
        key: Key,
        target: String,
        current: String,
        origin: String,
        new_queue: bool,
    ) {
        // A later block wins for the same setting: it is applied where it is written last.
        self.plan.settings.retain(|p| p.key != key);
        let target = key.canonical(&target);
        self.plan.settings.push(Planned {
            key,
            target,
            current,
            origin,
            new_queue,
        });
    }

    fn fail(&mut self, p: Problem) {
        self.plan.problems.push(p);
    }

    fn read(&mut self, key: &Key) -> Option<String> {
        match self.host.read(key) {
            Ok(v) => Some(v),
            Err(e) => {
                // xps_cpus exists on every queue but answers ENOENT on a single-queue device.
                let hint = if matches!(key, Key::Xps { .. }) {
                    "XPS needs a device with several tx queues"
                } else {
                    ""
                };
                self.fail(Problem {
                    unsupported: e.is_unsupported(),
                    ..problem(key.to_string(), format!("cannot read it: {e}"), hint)
                });
                None
            }
        }
    }

    fn sysctl(&mut self, name: &str, value: &str) {
        let key = Key::Sysctl {
            name: name.to_string(),
        };
        let Ok(path) = sysctl_path(name) else {
            return self.fail(problem(
                key.to_string(),
                "not a sysctl name",
                "a dotted net.* name",
            ));
        };
        if !self.host.exists(&path) {
            let hint = if name.starts_with("net.core.")
                && self.host.in_initial_netns() == Some(false)
            {
                "it may exist only in the initial network namespace; apply it there"
            } else {
                "check the name with `sysctl -a`; the kernel may be too old or the module not loaded"
            };
            return self.fail(unsupported(
                key.to_string(),
                format!("no such sysctl on {}", self.host.describe()),
                hint,
            ));
        }
        if !self.host.writable(&path) {
            let why = if self.host.in_initial_netns() == Some(false) {
                "read-only in this network namespace (the initial namespace owns it)"
            } else {
                "read-only"
            };
            return self.fail(unsupported(
                key.to_string(),
                why,
                "apply it where it can be written, or remove it",
            ));
        }
        let Some(current) = self.read(&key) else {
            return;
        };
        let target = key.canonical(value);
        let (n_cur, int_cur) = shape(&current);
        let (n_new, int_new) = shape(&target);
        if int_cur && (!int_new || n_cur != n_new) {
            return self.fail(problem(
                key.to_string(),
                format!("'{target}' does not match the form of the current value '{current}'"),
                format!("{n_cur} integer(s)"),
            ));
        }
        self.push(key, target, current, format!("sysctl \"{name}\""));
    }

    fn interfaces(&mut self, block: &InterfaceBlock) -> Vec<String> {
        let on = self.host.describe();
        let one_of = || format!("one of: {}", self.host.interfaces().join(", "));
        let found = match &block.matcher {
            Matcher::Name(n) if self.host.has_interface(n) => Ok(vec![n.clone()]),
            Matcher::Name(n) => Err((format!("interface {n} missing on {on}"), one_of())),
            Matcher::Glob(g) => {
                let v: Vec<String> = self
                    .host
                    .interfaces()
                    .into_iter()
                    .filter(|i| i != "lo" && glob_match(g, i).unwrap_or(false))
                    .collect();
                match v.is_empty() {
                    true => Err((
                        format!("the pattern matches no interface on {on}"),
                        one_of(),
                    )),
                    false => Ok(v),
                }
            }
            Matcher::Route => match self.opts.route_to {
                None => Err((
                    "@route needs the peer's address".into(),
                    "give it with --route-to ADDR".into(),
                )),
                Some(addr) => self.host.route_iface(addr).map(|i| vec![i]).ok_or_else(|| {
                    let why = format!("no interface routes to {addr} on {on}");
                    (why, "check the address (`ip route get ADDR`)".into())
                }),
            },
            Matcher::Subject => match &self.opts.subject {
                Some(s) if self.host.has_interface(s) => Ok(vec![s.clone()]),
                Some(s) => Err((
                    format!("the finding's interface {s} is missing"),
                    String::new(),
                )),
                None => Err((
                    "@subject is only meaningful in a checklist step".into(),
                    "match by name, glob or @route".into(),
                )),
            },
        };
        found.unwrap_or_else(|(why, allowed)| {
            let what = format!("[[interface]] #{} (match {})", block.index, block.matcher);
            self.fail(problem(what, why, allowed));
            Vec::new()
        })
    }

    fn block(&mut self, block: &InterfaceBlock) {
        for iface in self.interfaces(block) {
            let needs_nic = block.settings.iter().any(|s| {
                matches!(
                    s,
                    IfSetting::Channels(_)
                        | IfSetting::Rings(_)
                        | IfSetting::Coalesce(_)
                        | IfSetting::Features(_)
                        | IfSetting::Pause(_)
                )
            });
            let nic = if needs_nic {
                self.host.nic(&iface)
            } else {
                NicState::default()
            };
            let base = format!(
                "[[interface]] #{} (match {}) on {iface}",
                block.index, block.matcher
            );
            // Channels first: they change the set of queues that rps/xps address.
            let is_ch = |s: &&IfSetting| matches!(s, IfSetting::Channels(_));
            let ordered = block
                .settings
                .iter()
                .filter(is_ch)
                .chain(block.settings.iter().filter(|s| !is_ch(s)));
            for s in ordered {
                let origin = format!("{base} {}", s.key());
                self.if_setting(&iface, &nic, s, &origin);
                if is_ch(&s) {
                    self.queues_after = Some(self.predict_queues(&iface, &nic));
                }
            }
            self.queues_after = None;
        }
    }

    /// rx/tx queues once the planned channel counts of `iface` are set: each
    /// combined or rx (tx) channel more or less is one rx (tx) queue more or less.
    fn predict_queues(&self, iface: &str, nic: &NicState) -> (Vec<u32>, Vec<u32>) {
        let (rx, tx) = self.host.queues(iface);
        let Some(ch) = nic.channels.value() else {
            return (rx, tx);
        };
        let delta = |which: ChannelKind, cur: Option<u32>| -> i64 {
            let cur = i64::from(cur.unwrap_or(0));
            let key = Key::Channel {
                iface: iface.into(),
                which,
            };
            self.plan
                .settings
                .iter()
                .find(|p| p.key == key)
                .and_then(|p| p.target.parse::<i64>().ok())
                .map(|t| t - cur)
                .unwrap_or(0)
        };
        let dc = delta(ChannelKind::Combined, ch.combined);
        let n_rx = (rx.len() as i64 + dc + delta(ChannelKind::Rx, ch.rx)).max(1);
        let n_tx = (tx.len() as i64 + dc + delta(ChannelKind::Tx, ch.tx)).max(1);
        ((0..n_rx as u32).collect(), (0..n_tx as u32).collect())
    }

    fn nic_value<T: Clone>(
        &mut self,
        part: &Support<T>,
        what: &str,
        iface: &str,
        driver: &str,
    ) -> Option<T> {
        let (why, allowed) = match part {
            Support::Value(v) => return Some(v.clone()),
            Support::NotSupported { .. } => {
                let d = if driver.is_empty() { "?" } else { driver };
                (
                    format!("driver {d} does not support {what}"),
                    format!("remove {what} for {iface} from the profile"),
                )
            }
            Support::Error(e) => (format!("cannot read: {e}"), String::new()),
            Support::Unknown => ("not known for this host".to_string(), String::new()),
        };
        self.fail(unsupported(format!("{iface} {what}"), why, allowed));
        None
    }

    #[allow(clippy::too_many_arguments)]
    fn counts<K: Copy>(
        &mut self,
        what: &str,
        counts: &Counts<K>,
        kinds: &[K],
        all_max: Vec<K>,
        fields: impl Fn(K) -> (Option<u32>, Option<u32>),
        key: impl Fn(K) -> Key,
        name: fn(K) -> &'static str,
        origin: &str,
    ) {
        let wanted: Vec<(K, Count)> = match counts {
            Counts::AllMax => all_max.into_iter().map(|k| (k, Count::Max)).collect(),
            Counts::Each(v) => v.clone(),
        };
        for (kind, count) in wanted {
            let k = key(kind);
            let (max, cur) = fields(kind);
            let Some(max) = max.filter(|m| *m > 0) else {
                self.fail(unsupported(
                    k.to_string(),
                    format!("the driver has no {} {what} (maximum n/a)", name(kind)),
                    format!(
                        "kinds with a maximum: {}",
                        with_max(kinds, &fields)
                            .into_iter()
                            .map(name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
                continue;
            };
            let target = match count {
                Count::Max => max,
                Count::N(n) if n > max => {
                    self.fail(problem(
                        k.to_string(),
                        format!("{n} is above the driver's maximum {max}"),
                        format!("0 to {max}, or \"max\""),
                    ));
                    continue;
                }
                Count::N(n) => n,
            };
            let Some(cur) = cur else {
                self.fail(unsupported(
                    k.to_string(),
                    "the driver does not report the current value",
                    "",
                ));
                continue;
            };
            self.push(k, target.to_string(), cur.to_string(), origin.to_string());
        }
    }

    fn cpus_online(&mut self, setting: &str, cpus: &[u32]) -> bool {
        let off: Vec<u32> = cpus
            .iter()
            .copied()
            .filter(|c| !self.online.contains(c))
            .collect();
        if off.is_empty() {
            return true;
        }
        let online = cpuset::format_list(&self.online);
        self.fail(problem(
            setting,
            format!("CPU(s) {} are not online", cpuset::format_list(&off)),
            format!("online CPUs: {online}"),
        ));
        false
    }

    fn queue_files(&mut self, iface: &str, rx: bool, pq: &PerQueue<impl Clone>) -> Vec<u32> {
        let (rxq, txq) = self
            .queues_after
            .clone()
            .unwrap_or_else(|| self.host.queues(iface));
        let all = if rx { rxq } else { txq };
        let dir = if rx { "rx" } else { "tx" };
        match pq {
            PerQueue::All(_) => {
                if all.is_empty() {
                    self.fail(unsupported(
                        format!("{iface} {dir} queues"),
                        "sysfs shows no queues",
                        "",
                    ));
                }
                all
            }
            PerQueue::Each(v) => v
                .iter()
                .filter_map(|(q, _)| {
                    if all.contains(q) {
                        Some(*q)
                    } else {
                        self.fail(problem(
                            format!("{iface} {dir}-{q}"),
                            "no such queue",
                            format!("{dir}-0 to {dir}-{}", all.len().saturating_sub(1)),
                        ));
                        None
                    }
                })
                .collect(),
        }
    }

    fn masks(&mut self, iface: &str, rx: bool, pq: &PerQueue<MaskSpec>, origin: &str) {
        let queues = self.queue_files(iface, rx, pq);
        let local = self.host.local_cpus(iface);
        for (i, q) in queues.iter().enumerate() {
            let Some(spec) = pq.get(*q) else { continue };
            let cpus = match spec {
                MaskSpec::Cpus(c) => c.clone(),
                MaskSpec::All => self.online.clone(),
                MaskSpec::Local => local.clone(),
                MaskSpec::Spread => local
                    .get(i % local.len().max(1))
                    .map(|c| vec![*c])
                    .unwrap_or_default(),
            };
            let key = if rx {
                Key::Rps {
                    iface: iface.into(),
                    queue: *q,
                }
            } else {
                Key::Xps {
                    iface: iface.into(),
                    queue: *q,
                }
            };
            if !self.cpus_online(&key.to_string(), &cpus) {
                continue;
            }
            self.queue_setting(iface, key, cpuset::format_mask(&cpus), origin);
        }
    }

    /// A per-queue setting: read now, or, on a queue the channel change
    /// creates, planned to be read when it is written.
    fn queue_setting(&mut self, iface: &str, key: Key, target: String, origin: &str) {
        let (rx_now, tx_now) = self.host.queues(iface);
        let new_queue = match &key {
            Key::Rps { queue, .. } | Key::RpsFlowCnt { queue, .. } => !rx_now.contains(queue),
            Key::Xps { queue, .. } => !tx_now.contains(queue),
            _ => false,
        };
        // A queue that does not exist yet: queue 0's file tells whether the kernel has the feature.
        let proxy = new_queue.then(|| key.on_queue(0));
        if !self.file_ok(proxy.as_ref().unwrap_or(&key)) {
            return;
        }
        let Some(current) = new_queue.then(String::new).or_else(|| self.read(&key)) else {
            return;
        };
        self.push_planned(key, target, current, origin.to_string(), new_queue);
    }

    /// The key's file exists and is writable; otherwise a problem.
    fn file_ok(&mut self, key: &Key) -> bool {
        let Some(path) = key.path() else { return true };
        if !self.host.exists(&path) {
            self.fail(unsupported(
                key.to_string(),
                format!("{path} does not exist on {}", self.host.describe()),
                "the kernel lacks this feature (CONFIG_RPS / CONFIG_XPS / cpufreq)",
            ));
            return false;
        }
        if !self.host.writable(&path) {
            self.fail(problem(key.to_string(), format!("{path} is read-only"), ""));
            return false;
        }
        true
    }

    /// One interface setting of a profile, checked against what the NIC
    /// and its driver take, then planned (or a problem).
    fn if_setting(&mut self, iface: &str, nic: &NicState, s: &IfSetting, origin: &str) {
        match s {
            IfSetting::Mtu(m) => self.if_mtu(iface, nic, m, origin),
            IfSetting::Channels(c) => self.if_channels(iface, nic, c, origin),
            IfSetting::Rings(c) => self.if_rings(iface, nic, c, origin),
            IfSetting::Coalesce(list) => self.if_coalesce(iface, nic, list, origin),
            IfSetting::Features(list) => self.if_features(iface, nic, list, origin),
            IfSetting::Pause(list) => self.if_pause(iface, nic, list, origin),
            IfSetting::RpsFlowCnt(pq) => self.if_rps_flow_cnt(iface, pq, origin),
            IfSetting::Rps(pq) => self.masks(iface, true, pq, origin),
            IfSetting::Xps(pq) => self.masks(iface, false, pq, origin),
            IfSetting::IrqAffinity(spec) => self.irqs(iface, spec, origin),
        }
    }

    /// A new MTU, within the range the driver takes.
    fn if_mtu(&mut self, iface: &str, nic: &NicState, m: &u32, origin: &str) {
        let key = Key::Mtu {
            iface: iface.into(),
        };
        match self.host.mtu(iface) {
            Ok(info) => {
                let (lo, hi) = (info.min.unwrap_or(68), info.max.unwrap_or(u32::MAX));
                if *m < lo || *m > hi {
                    return self.fail(problem(
                        key.to_string(),
                        format!("{m} is outside what driver {} takes", nic.driver),
                        format!("{lo} to {hi}"),
                    ));
                }
                self.push(key, m.to_string(), info.mtu.to_string(), origin.into());
            }
            Err(e) => self.fail(Problem {
                unsupported: e.is_unsupported(),
                ..problem(key.to_string(), format!("cannot read: {e}"), "")
            }),
        }
    }

    /// Channel counts (`max`: combined when the driver has them, else rx and tx).
    fn if_channels(&mut self, iface: &str, nic: &NicState, c: &Counts<ChannelKind>, origin: &str) {
        let Some(ch) = self.nic_value(&nic.channels, "channels", iface, &nic.driver) else {
            return;
        };
        let fields = |k| channel(&ch, k);
        let have = with_max(&ChannelKind::ALL, fields);
        // "max": combined channels when the driver has them (drivers
        // refuse mixing combined with rx/tx), else rx and tx.
        let all_max = if have.contains(&ChannelKind::Combined) {
            vec![ChannelKind::Combined]
        } else {
            have.into_iter()
                .filter(|k| *k != ChannelKind::Other)
                .collect()
        };
        let key = |which| Key::Channel {
            iface: iface.into(),
            which,
        };
        self.counts(
            "channels",
            c,
            &ChannelKind::ALL,
            all_max,
            fields,
            key,
            ChannelKind::name,
            origin,
        );
    }

    /// Ring sizes.
    fn if_rings(&mut self, iface: &str, nic: &NicState, c: &Counts<RingKind>, origin: &str) {
        let Some(r) = self.nic_value(&nic.rings, "rings", iface, &nic.driver) else {
            return;
        };
        let fields = |k| ring(&r, k);
        let all_max = with_max(&RingKind::ALL, fields);
        let key = |which| Key::Ring {
            iface: iface.into(),
            which,
        };
        self.counts(
            "rings",
            c,
            &RingKind::ALL,
            all_max,
            fields,
            key,
            RingKind::name,
            origin,
        );
    }

    /// Interrupt coalescing, adaptive moderation first.
    fn if_coalesce(
        &mut self,
        iface: &str,
        nic: &NicState,
        list: &[(String, CoalesceValue)],
        origin: &str,
    ) {
        let driver = nic.driver.clone();
        let Some(c) = self.nic_value(&nic.coalesce, "coalescing", iface, &driver) else {
            return;
        };
        let mut list = list.to_vec();
        // Adaptive moderation first: it decides whether the fixed values are used.
        list.sort_by_key(|(p, _)| !p.starts_with("adaptive-"));
        for (param, v) in list {
            let key = Key::Coalesce {
                iface: iface.into(),
                param: param.clone(),
            };
            let Some(cur) = coalesce_value(&c, &param) else {
                self.fail(unsupported(
                    key.to_string(),
                    format!("driver {driver} does not support {param}"),
                    "remove it from the profile",
                ));
                continue;
            };
            let target = match v {
                CoalesceValue::Flag(b) => on_off(b),
                CoalesceValue::Num(n) => n.to_string(),
            };
            self.push(key, target, cur, origin.into());
        }
    }

    /// Offload features; a fixed one is a problem alone, a note within a group.
    fn if_features(&mut self, iface: &str, nic: &NicState, list: &[(String, bool)], origin: &str) {
        let driver = nic.driver.clone();
        let Some(f) = self.nic_value(&nic.features, "features", iface, &driver) else {
            return;
        };
        for (name, on) in list {
            let names = kernel_names(name);
            let present: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| f.0.contains_key(*n))
                .collect();
            if present.is_empty() {
                self.fail(unsupported(
                    format!("{iface} feature {name}"),
                    format!("{iface} has no such feature"),
                    "see `ethtool -k` for the names",
                ));
                continue;
            }
            let group = names.len() > 1;
            for k in present {
                let feat = f.0[k];
                let key = Key::Feature {
                    iface: iface.into(),
                    name: k.to_string(),
                };
                if feat.fixed {
                    if feat.on != *on && !group {
                        self.fail(problem(
                            key.to_string(),
                            format!("fixed {} by driver {driver}", on_off(feat.on)),
                            "it cannot be changed; remove it",
                        ));
                    } else if feat.on != *on {
                        self.plan.notes.push(format!(
                            "{key}: fixed {} by the driver, left as it is",
                            on_off(feat.on)
                        ));
                    }
                    continue;
                }
                self.push(key, on_off(*on), on_off(feat.on), origin.into());
            }
        }
    }

    /// Pause frames (flow control).
    fn if_pause(&mut self, iface: &str, nic: &NicState, list: &[(PauseKind, bool)], origin: &str) {
        let Some(p) = self.nic_value(&nic.pause, "pause (flow control)", iface, &nic.driver) else {
            return;
        };
        for (kind, on) in list {
            let cur = pause(&p, *kind);
            self.push(
                Key::Pause {
                    iface: iface.into(),
                    which: *kind,
                },
                on_off(*on),
                on_off(cur),
                origin.into(),
            );
        }
    }

    /// rps_flow_cnt per rx queue: 0 or a power of two.
    fn if_rps_flow_cnt(&mut self, iface: &str, pq: &PerQueue<u32>, origin: &str) {
        for q in self.queue_files(iface, true, pq) {
            let Some(&n) = pq.get(q) else { continue };
            let key = Key::RpsFlowCnt {
                iface: iface.into(),
                queue: q,
            };
            if n != 0 && !n.is_power_of_two() {
                self.fail(problem(
                    key.to_string(),
                    format!(
                        "{n} is not a power of two (the kernel would round it up to {})",
                        n.next_power_of_two()
                    ),
                    "0 or a power of two",
                ));
                continue;
            }
            self.queue_setting(iface, key, n.to_string(), origin);
        }
    }
    fn irqs(&mut self, iface: &str, spec: &IrqSpec, origin: &str) {
        let wanted: Vec<(u32, String, Vec<u32>)> = match spec {
            IrqSpec::Local | IrqSpec::All => {
                let irqs = self.host.data_irqs(iface);
                if irqs.is_empty() {
                    self.plan.notes.push(format!(
                        "{iface}: no data interrupts of its own (a virtual device, or its IRQs are not named after it); irq_affinity changes nothing"
                    ));
                    return;
                }
                let cpus = if *spec == IrqSpec::Local {
                    self.host.local_cpus(iface)
                } else {
                    self.online.clone()
                };
                irqs.into_iter()
                    .enumerate()
                    .map(|(i, (irq, name))| {
                        (
                            irq,
                            name,
                            cpus.get(i % cpus.len().max(1))
                                .map(|c| vec![*c])
                                .unwrap_or_default(),
                        )
                    })
                    .collect()
            }
            IrqSpec::Explicit(list) => {
                let all = self.host.irqs_by_name();
                let mut out = Vec::new();
                for (name, cpus) in list {
                    match all.iter().find(|(_, n)| n == name) {
                        Some((irq, _)) => out.push((*irq, name.clone(), cpus.clone())),
                        None => self.fail(problem(
                            format!("{iface} irq {name}"),
                            "no interrupt of that name in /proc/interrupts",
                            "the last column of /proc/interrupts",
                        )),
                    }
                }
                out
            }
        };
        for (irq, name, cpus) in wanted {
            let key = Key::IrqAffinity { irq, name };
            if cpus.is_empty() || !self.cpus_online(&key.to_string(), &cpus) || !self.file_ok(&key)
            {
                continue;
            }
            let Some(cur) = self.read(&key) else { continue };
            self.push(key, cpuset::format_list(&cpus), cur, origin.into());
        }
    }

    fn host_setting(&mut self, s: &HostSetting) {
        match s {
            HostSetting::Governor(g) => {
                let each: Vec<(u32, String)> = match g {
                    Governor::All(name) => self.online.iter().map(|c| (*c, name.clone())).collect(),
                    Governor::Each(v) => v.clone(),
                };
                for (cpu, gov) in each {
                    let key = Key::Governor { cpu };
                    if !self.cpus_online(&key.to_string(), &[cpu]) {
                        continue;
                    }
                    let Some(avail) = self.host.available_governors(cpu) else {
                        self.fail(unsupported(
                            key.to_string(),
                            format!(
                                "no cpufreq on {} (a VM, or no cpufreq driver loaded)",
                                self.host.describe()
                            ),
                            "remove governor from the profile",
                        ));
                        // One line is enough: every CPU answers the same.
                        if matches!(g, Governor::All(_)) {
                            break;
                        }
                        continue;
                    };
                    if !avail.contains(&gov) {
                        self.fail(problem(
                            key.to_string(),
                            format!("governor {gov} is not available"),
                            format!("one of: {}", avail.join(", ")),
                        ));
                        continue;
                    }
                    if !self.file_ok(&key) {
                        continue;
                    }
                    let Some(cur) = self.read(&key) else { continue };
                    self.push(key, gov, cur, "host.governor".into());
                }
            }
            HostSetting::Irqbalance(running) => {
                let key = Key::Irqbalance;
                let Some(cur) = self.read(&key) else { return };
                let target = if *running { "running" } else { "stopped" }.to_string();
                if cur != target {
                    if let Err(e) = self.host.can_control_irqbalance() {
                        return self.fail(unsupported(key.to_string(), e.to_string(), ""));
                    }
                }
                self.push(key, target, cur, "host.irqbalance".into());
            }
        }
    }
}

//! Which host a checklist step's change belongs on: the side of the data
//! path its settings act on (receive or send) and which way the test's data
//! flows between the pair.
//!
//! A receive-side setting (GRO, LRO, rx rings, RPS, rx coalescing, rmem
//! sysctls, the input backlog, the NAPI budget) only matters on the host that
//! receives the test's data; a send-side one (TSO/GSO, tx rings, XPS, tx
//! coalescing, wmem sysctls) on the host that sends it. Which host that is
//! comes from the test spec's connection roles ([`EngineSpecOps::conn_roles`]),
//! never from which host a finding happened to name: a GRO finding on the
//! sender of a local→peer test is about the ACK path, which the test does
//! not measure. A check that names its host keeps it; a change with no side
//! (MTU, IRQ placement, governor, a mix of both sides) goes where the finding
//! points. Pure: no host is read here.
//!
//! [`EngineSpecOps::conn_roles`]: crate::traffic::EngineSpecOps::conn_roles

use super::features::kernel_names;
use super::profile::{Counts, IfSetting, Profile, Section};
use crate::probe::netlink::ethtool_set::RingKind;
use crate::probe::sample::HostRole;
use crate::traffic::{ConnRole, EngineSpec, Side};

/// The part of the data path a change acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathSide {
    /// Only settings that act where data arrives.
    Receive,
    /// Only settings that act where data leaves.
    Send,
    /// Neither, or both.
    Either,
}

/// Which hosts of the pair receive and send the test's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataFlow {
    /// The controller's host receives data.
    pub local_receives: bool,
    /// The agent's host receives data.
    pub peer_receives: bool,
    /// The controller's host sends data.
    pub local_sends: bool,
    /// The agent's host sends data.
    pub peer_sends: bool,
}

impl DataFlow {
    /// Both hosts send and receive (unknown direction: nothing is moved).
    pub const BOTH: DataFlow = DataFlow {
        local_receives: true,
        peer_receives: true,
        local_sends: true,
        peer_sends: true,
    };

    /// The direction of a test: from the controller's connection roles for
    /// the engines with data connections, from the engine's arrow otherwise.
    pub fn of(spec: &EngineSpec) -> DataFlow {
        let roles = spec.conn_roles(Side::Controller);
        if roles.is_empty() {
            let (fwd, back) = match spec.arrow() {
                "<-" => (false, true),
                "<->" => (true, true),
                _ => (true, false),
            };
            return DataFlow {
                local_receives: back,
                peer_receives: fwd,
                local_sends: fwd,
                peer_sends: back,
            };
        }
        // Requests and responses both carry data: a client and a server both
        // send and receive.
        let any = |f: fn(&ConnRole) -> bool| roles.iter().any(f);
        DataFlow {
            local_receives: any(|r| *r != ConnRole::Sender),
            peer_receives: any(|r| *r != ConnRole::Receiver),
            local_sends: any(|r| *r != ConnRole::Receiver),
            peer_sends: any(|r| *r != ConnRole::Sender),
        }
    }

    fn hosts(self, side: PathSide) -> Vec<HostRole> {
        let (l, p) = match side {
            PathSide::Receive => (self.local_receives, self.peer_receives),
            PathSide::Send => (self.local_sends, self.peer_sends),
            PathSide::Either => (true, true),
        };
        let mut v = Vec::new();
        if l {
            v.push(HostRole::Local);
        }
        if p {
            v.push(HostRole::Peer);
        }
        v
    }
}

/// Where a step's change goes, and why (for the step's line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The host.
    pub host: HostRole,
    /// Why that host, e.g. "it receives the test's data".
    pub why: String,
}

/// Choose the host for a change of `side`: the checklist's host if it names
/// one, else the host on that side of the data path (the finding's host
/// when both hosts are on that side), else the finding's host.
pub fn place(
    named: Option<HostRole>,
    finding: HostRole,
    side: PathSide,
    flow: DataFlow,
) -> Placement {
    let p = |host, why: &str| Placement {
        host,
        why: why.to_string(),
    };
    if let Some(h) = named {
        return p(h, "the checklist names it");
    }
    let why = match side {
        PathSide::Receive => "it receives the test's data",
        PathSide::Send => "it sends the test's data",
        PathSide::Either => return p(finding, "the finding is about it"),
    };
    let hosts = flow.hosts(side);
    match hosts.as_slice() {
        [] => p(finding, "the finding is about it"),
        hs if hs.contains(&finding) => p(finding, why),
        [h, ..] => p(*h, why),
    }
}

/// The side of the data path a profile's settings act on.
pub fn path_side(profile: &Profile) -> PathSide {
    let mut sides = Vec::new();
    for s in &profile.sections {
        match s {
            Section::Sysctl(kv) => sides.extend(kv.iter().map(|(k, _)| sysctl_side(k))),
            Section::Interface(b) => sides.extend(b.settings.iter().map(if_side)),
            Section::Host(_) => sides.push(PathSide::Either),
        }
    }
    let rx = sides.contains(&PathSide::Receive);
    let tx = sides.contains(&PathSide::Send);
    match (rx, tx) {
        (true, false) => PathSide::Receive,
        (false, true) => PathSide::Send,
        _ => PathSide::Either,
    }
}

fn sysctl_side(key: &str) -> PathSide {
    const RX: &[&str] = &[
        "rmem",
        "netdev_max_backlog",
        "netdev_budget",
        "rps_sock_flow_entries",
        "tcp_moderate_rcvbuf",
        "tcp_adv_win_scale",
        "busy_read",
        "busy_poll",
    ];
    const TX: &[&str] = &["wmem", "tcp_limit_output_bytes", "tcp_notsent_lowat"];
    let last = key.rsplit('.').next().unwrap_or(key);
    if RX.iter().any(|w| last.contains(w)) {
        PathSide::Receive
    } else if TX.iter().any(|w| last.contains(w)) {
        PathSide::Send
    } else {
        PathSide::Either
    }
}

fn name_side(name: &str) -> PathSide {
    if name.starts_with("rx") || name.starts_with("adaptive-rx") {
        PathSide::Receive
    } else if name.starts_with("tx") || name.starts_with("adaptive-tx") {
        PathSide::Send
    } else {
        PathSide::Either
    }
}

fn combine(sides: impl Iterator<Item = PathSide>) -> PathSide {
    let mut acc = None;
    for s in sides {
        acc = match acc {
            None => Some(s),
            Some(a) if a == s => Some(a),
            Some(_) => Some(PathSide::Either),
        };
    }
    acc.unwrap_or(PathSide::Either)
}

fn if_side(s: &IfSetting) -> PathSide {
    match s {
        IfSetting::Features(f) => {
            combine(f.iter().flat_map(|(n, _)| kernel_names(n)).map(name_side))
        }
        IfSetting::Rings(Counts::Each(kinds)) => combine(kinds.iter().map(|(k, _)| match k {
            RingKind::Tx => PathSide::Send,
            RingKind::Rx | RingKind::RxMini | RingKind::RxJumbo => PathSide::Receive,
        })),
        IfSetting::Coalesce(kv) => combine(kv.iter().map(|(k, _)| name_side(k))),
        IfSetting::Rps(_) | IfSetting::RpsFlowCnt(_) => PathSide::Receive,
        IfSetting::Xps(_) => PathSide::Send,
        IfSetting::Rings(Counts::AllMax)
        | IfSetting::Mtu(_)
        | IfSetting::Channels(_)
        | IfSetting::Pause(_)
        | IfSetting::IrqAffinity(_) => PathSide::Either,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(body: &str) -> PathSide {
        let p = Profile::parse(&format!("name = \"x\"\n{body}"), "t").unwrap();
        path_side(&p)
    }

    #[test]
    fn settings_are_sorted_by_the_side_they_act_on() {
        let iface = |s: &str| format!("[[interface]]\nmatch = \"@route\"\n{s}\n");
        assert_eq!(side(&iface("features = { gro = true }")), PathSide::Receive);
        assert_eq!(side(&iface("features = { lro = true }")), PathSide::Receive);
        assert_eq!(
            side(&iface("features = { tso = true, gso = true }")),
            PathSide::Send
        );
        assert_eq!(
            side(&iface("features = { tso = true, gro = true }")),
            PathSide::Either
        );
        assert_eq!(side(&iface("rings = { rx = \"max\" }")), PathSide::Receive);
        assert_eq!(side(&iface("rings = { tx = \"max\" }")), PathSide::Send);
        assert_eq!(side(&iface("rings = \"max\"")), PathSide::Either);
        assert_eq!(side(&iface("rps = \"local\"")), PathSide::Receive);
        assert_eq!(side(&iface("irq_affinity = \"local\"")), PathSide::Either);
        assert_eq!(side(&iface("mtu = 9000")), PathSide::Either);
        assert_eq!(
            side("[sysctl]\n\"net.ipv4.tcp_rmem\" = \"4096 131072 268435456\"\n\"net.core.rmem_max\" = \"268435456\""),
            PathSide::Receive
        );
        assert_eq!(
            side("[sysctl]\n\"net.ipv4.tcp_wmem\" = \"4096 65536 268435456\""),
            PathSide::Send
        );
        assert_eq!(
            side("[sysctl]\n\"net.core.netdev_max_backlog\" = \"65536\""),
            PathSide::Receive
        );
        assert_eq!(side("[host]\ngovernor = \"performance\""), PathSide::Either);
    }

    #[test]
    fn the_side_picks_the_host_the_data_reaches_or_leaves() {
        let fwd = DataFlow {
            local_receives: false,
            peer_receives: true,
            local_sends: true,
            peer_sends: false,
        };
        let r = place(None, HostRole::Local, PathSide::Receive, fwd);
        assert_eq!(r.host, HostRole::Peer);
        assert_eq!(r.why, "it receives the test's data");
        assert_eq!(
            place(None, HostRole::Peer, PathSide::Send, fwd).host,
            HostRole::Local
        );
        let e = place(None, HostRole::Local, PathSide::Either, fwd);
        assert_eq!(e.host, HostRole::Local);
        let n = place(
            Some(HostRole::Local),
            HostRole::Peer,
            PathSide::Receive,
            fwd,
        );
        assert_eq!(
            (n.host, n.why.as_str()),
            (HostRole::Local, "the checklist names it")
        );
        // Both hosts receive in a bidirectional test: the finding's host stays.
        let b = place(None, HostRole::Local, PathSide::Receive, DataFlow::BOTH);
        assert_eq!(b.host, HostRole::Local);
    }
}

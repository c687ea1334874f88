//! Fixes for the embedded local pair: a finding's command runs in the
//! namespace of the host it is about.
//!
//! On the local pair both "hosts" are network namespaces of this machine:
//! `ethtool -K veth-b gro on` typed in the user's shell finds no `veth-b`,
//! and a per-namespace sysctl would change the wrong namespace. The
//! pipeline rewrites the fixes of such a session's findings to
//! `ip netns exec ws-b-PID ethtool -K veth-b gro on` (in `sh -c '...'` when
//! the command has a redirection or pipe, so the whole of it runs there).
//! Host-wide commands (`cpupower`, `grubby`, `modprobe`, ...) and
//! wirescope's own options are left as they are.

use crate::diagnose::{Finding, HostRole};
use crate::tune::key::sh_quote;

/// Commands that act on a network namespace's interfaces, sysctls or counters.
const NETNS_COMMANDS: &[&str] = &[
    "ethtool", "ip", "tc", "sysctl", "nstat", "echo", "ss", "mlnx_qos", "rdma",
];

/// `cmd` as run in `ns`, or unchanged when it is not a per-namespace command
/// (or already names a namespace).
pub fn in_netns(cmd: &str, ns: &str) -> String {
    let first = cmd.split_whitespace().next().unwrap_or("");
    if !NETNS_COMMANDS.contains(&first) || cmd.starts_with("ip netns exec ") {
        return cmd.to_string();
    }
    if cmd.contains(['>', '<', '|', ';', '&']) {
        format!("ip netns exec {ns} sh -c {}", sh_quote(cmd))
    } else {
        format!("ip netns exec {ns} {cmd}")
    }
}

/// Rewrite the fixes of `f` for the namespace of its host; `netns` holds
/// the controller's and the agent's namespaces.
pub fn localize(f: &mut Finding, netns: &[String; 2]) {
    let ns = match f.host {
        HostRole::Local => &netns[0],
        HostRole::Peer => &netns[1],
    };
    for fix in &mut f.fix {
        *fix = in_netns(fix, ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::Severity;

    #[test]
    fn per_namespace_commands_run_in_the_hosts_namespace() {
        assert_eq!(
            in_netns("ethtool -K veth-b gro on", "ws-b-7"),
            "ip netns exec ws-b-7 ethtool -K veth-b gro on"
        );
        assert_eq!(
            in_netns(
                "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 67108864\"",
                "ws-a-7"
            ),
            "ip netns exec ws-a-7 sysctl -w net.ipv4.tcp_rmem=\"4096 131072 67108864\""
        );
        assert_eq!(
            in_netns(
                "echo 1 > /sys/class/net/veth-b/queues/rx-0/rps_cpus",
                "ws-b-7"
            ),
            "ip netns exec ws-b-7 sh -c 'echo 1 > /sys/class/net/veth-b/queues/rx-0/rps_cpus'"
        );
        // Host-wide commands, wirescope's own options and already-local ones stay.
        for cmd in [
            "cpupower frequency-set -g performance",
            "wirescope run -P 4",
            "--channels 4",
            "ip netns exec ws-b-7 ethtool -S veth-b",
        ] {
            assert_eq!(in_netns(cmd, "ws-b-7"), cmd);
        }
    }

    #[test]
    fn a_findings_fixes_follow_its_host() {
        let netns = ["ws-a-9".to_string(), "ws-b-9".to_string()];
        let mut f = Finding::new(
            "nic.gro-off",
            Severity::Warn,
            HostRole::Peer,
            "veth-b",
            "GRO off",
            0.3,
        )
        .fix("ethtool -K veth-b gro on")
        .fix("wirescope run -P 4");
        localize(&mut f, &netns);
        assert_eq!(
            f.fix,
            vec![
                "ip netns exec ws-b-9 ethtool -K veth-b gro on".to_string(),
                "wirescope run -P 4".to_string()
            ]
        );
    }
}

//! One concrete tunable of one host ([`Key`]) and the canonical text of its
//! value.
//!
//! A profile says "channels = max on @route"; resolving it on a host gives
//! keys such as `veth-a channels rx` with a number. Keys are what the
//! backup, the journal, the before → after records and the dry-run commands
//! talk about, so each knows how to name itself and which command a person
//! would type to make the same change. Values are text in one canonical form
//! per kind (sysctls whitespace-normalised, masks shortest hex, booleans
//! `on`/`off`), so "is it already set" and "did the write take" are string
//! comparisons.

use super::cpuset;
use super::profile::normalize_sysctl;
use crate::probe::netlink::ethtool_set::{ChannelKind, PauseKind, RingKind};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One tunable.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Key {
    /// `/proc/sys/...` by its dotted name.
    Sysctl {
        /// Dotted name.
        name: String,
    },
    /// Interface MTU.
    Mtu {
        /// Interface.
        iface: String,
    },
    /// A channel count.
    Channel {
        /// Interface.
        iface: String,
        /// Which count.
        which: ChannelKind,
    },
    /// A ring size.
    Ring {
        /// Interface.
        iface: String,
        /// Which ring.
        which: RingKind,
    },
    /// A coalescing parameter (`ethtool -C` name).
    Coalesce {
        /// Interface.
        iface: String,
        /// Parameter (`adaptive-rx`, `rx-usecs`...).
        param: String,
    },
    /// An offload feature by its kernel name (`rx-gro`).
    Feature {
        /// Interface.
        iface: String,
        /// Kernel feature name.
        name: String,
    },
    /// A pause (flow control) parameter.
    Pause {
        /// Interface.
        iface: String,
        /// Which parameter.
        which: PauseKind,
    },
    /// `queues/rx-N/rps_cpus`.
    Rps {
        /// Interface.
        iface: String,
        /// rx queue.
        queue: u32,
    },
    /// `queues/rx-N/rps_flow_cnt`.
    RpsFlowCnt {
        /// Interface.
        iface: String,
        /// rx queue.
        queue: u32,
    },
    /// `queues/tx-N/xps_cpus`.
    Xps {
        /// Interface.
        iface: String,
        /// tx queue.
        queue: u32,
    },
    /// `/proc/irq/N/smp_affinity_list`.
    IrqAffinity {
        /// IRQ number.
        irq: u32,
        /// Its name in /proc/interrupts.
        name: String,
    },
    /// `cpufreq/scaling_governor` of one CPU.
    Governor {
        /// CPU.
        cpu: u32,
    },
    /// The irqbalance service (`running` / `stopped`).
    Irqbalance,
}

impl fmt::Display for Key {
    /// How messages name the setting: `sysctl net.ipv4.tcp_rmem`, `eth0 channels combined`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Sysctl { name } => write!(f, "sysctl {name}"),
            Key::Mtu { iface } => write!(f, "{iface} mtu"),
            Key::Channel { iface, which } => write!(f, "{iface} channels {}", which.name()),
            Key::Ring { iface, which } => write!(f, "{iface} rings {}", which.name()),
            Key::Coalesce { iface, param } => write!(f, "{iface} coalesce {param}"),
            Key::Feature { iface, name } => write!(f, "{iface} feature {name}"),
            Key::Pause { iface, which } => write!(f, "{iface} pause {}", which.name()),
            Key::Rps { iface, queue } => write!(f, "{iface} rx-{queue} rps_cpus"),
            Key::RpsFlowCnt { iface, queue } => write!(f, "{iface} rx-{queue} rps_flow_cnt"),
            Key::Xps { iface, queue } => write!(f, "{iface} tx-{queue} xps_cpus"),
            Key::IrqAffinity { irq, name } => write!(f, "irq {irq} ({name}) affinity"),
            Key::Governor { cpu } => write!(f, "cpu{cpu} governor"),
            Key::Irqbalance => f.write_str("irqbalance"),
        }
    }
}

impl Key {
    /// The interface the key belongs to, if any.
    pub fn iface(&self) -> Option<&str> {
        match self {
            Key::Mtu { iface }
            | Key::Channel { iface, .. }
            | Key::Ring { iface, .. }
            | Key::Coalesce { iface, .. }
            | Key::Feature { iface, .. }
            | Key::Pause { iface, .. }
            | Key::Rps { iface, .. }
            | Key::RpsFlowCnt { iface, .. }
            | Key::Xps { iface, .. } => Some(iface),
            _ => None,
        }
    }

    /// The file behind a file-backed key, as the kernel exposes it.
    pub fn path(&self) -> Option<String> {
        match self {
            Key::Sysctl { name } => super::profile::sysctl_path(name).ok(),
            Key::Rps { iface, queue } => {
                Some(format!("/sys/class/net/{iface}/queues/rx-{queue}/rps_cpus"))
            }
            Key::RpsFlowCnt { iface, queue } => Some(format!(
                "/sys/class/net/{iface}/queues/rx-{queue}/rps_flow_cnt"
            )),
            Key::Xps { iface, queue } => {
                Some(format!("/sys/class/net/{iface}/queues/tx-{queue}/xps_cpus"))
            }
            Key::IrqAffinity { irq, .. } => Some(format!("/proc/irq/{irq}/smp_affinity_list")),
            Key::Governor { cpu } => Some(format!(
                "/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
            )),
            _ => None,
        }
    }

    /// The command a person would run to set `value` (what `--dry-run` prints).
    pub fn command(&self, value: &str) -> String {
        let onoff = |v: &str| if v == "on" { "on" } else { "off" }.to_string();
        match self {
            Key::Sysctl { name } => {
                if value.contains(' ') {
                    format!("sysctl -w {name}=\"{value}\"")
                } else {
                    format!("sysctl -w {name}={value}")
                }
            }
            Key::Mtu { iface } => format!("ip link set dev {iface} mtu {value}"),
            Key::Channel { iface, which } => format!("ethtool -L {iface} {} {value}", which.name()),
            Key::Ring { iface, which } => format!("ethtool -G {iface} {} {value}", which.name()),
            Key::Coalesce { iface, param } => format!("ethtool -C {iface} {param} {value}"),
            Key::Feature { iface, name } => format!("ethtool -K {iface} {name} {}", onoff(value)),
            Key::Pause { iface, which } => {
                format!("ethtool -A {iface} {} {}", which.name(), onoff(value))
            }
            Key::Irqbalance => {
                if value == "running" {
                    "systemctl start irqbalance".into()
                } else {
                    "systemctl stop irqbalance".into()
                }
            }
            Key::Rps { .. }
            | Key::RpsFlowCnt { .. }
            | Key::Xps { .. }
            | Key::IrqAffinity { .. }
            | Key::Governor { .. } => {
                format!("echo {value} > {}", self.path().unwrap_or_default())
            }
        }
    }

    /// The canonical text of a value of this key, as read or as written in a profile.
    pub fn canonical(&self, raw: &str) -> String {
        let t = raw.trim();
        match self {
            Key::Sysctl { .. } => normalize_sysctl(t),
            Key::Rps { .. } | Key::Xps { .. } => cpuset::canonical_mask(t),
            Key::IrqAffinity { .. } => cpuset::canonical_list(t),
            Key::Feature { .. } | Key::Pause { .. } => match t {
                "on" | "true" | "1" => "on".into(),
                "off" | "false" | "0" => "off".into(),
                other => other.into(),
            },
            Key::Coalesce { param, .. } if param.starts_with("adaptive-") => match t {
                "on" | "true" | "1" => "on".into(),
                "off" | "false" | "0" => "off".into(),
                other => other.into(),
            },
            _ => t.to_string(),
        }
    }
}

/// `on` / `off`.
pub fn on_off(b: bool) -> String {
    if b { "on" } else { "off" }.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_what_a_person_would_type() {
        let k = Key::Sysctl {
            name: "net.ipv4.tcp_rmem".into(),
        };
        assert_eq!(
            k.command("4096 8192 16384"),
            "sysctl -w net.ipv4.tcp_rmem=\"4096 8192 16384\""
        );
        let k = Key::Channel {
            iface: "eth0".into(),
            which: ChannelKind::Combined,
        };
        assert_eq!(k.command("8"), "ethtool -L eth0 combined 8");
        assert_eq!(k.to_string(), "eth0 channels combined");
        let k = Key::Rps {
            iface: "eth0".into(),
            queue: 3,
        };
        assert_eq!(
            k.command("f"),
            "echo f > /sys/class/net/eth0/queues/rx-3/rps_cpus"
        );
        assert_eq!(k.canonical("00000000,0000000f\n"), "f");
        let k = Key::Feature {
            iface: "eth0".into(),
            name: "rx-gro".into(),
        };
        assert_eq!(k.command("on"), "ethtool -K eth0 rx-gro on");
        assert_eq!(
            Key::Irqbalance.command("stopped"),
            "systemctl stop irqbalance"
        );
    }

    #[test]
    fn keys_serialize_tagged() {
        let k = Key::Pause {
            iface: "eth0".into(),
            which: PauseKind::Rx,
        };
        let j = serde_json::to_string(&k).unwrap();
        assert_eq!(j, r#"{"kind":"pause","iface":"eth0","which":"rx"}"#);
        assert_eq!(serde_json::from_str::<Key>(&j).unwrap(), k);
    }
}

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
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
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

    /// The same per-queue setting on queue `queue` (any other key as it is).
    pub fn on_queue(&self, queue: u32) -> Key {
        let mut k = self.clone();
        if let Key::Rps { queue: q, .. }
        | Key::RpsFlowCnt { queue: q, .. }
        | Key::Xps { queue: q, .. } = &mut k
        {
            *q = queue;
        }
        k
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

    /// The command a person would run to set `value` (what `--dry-run` prints);
    /// every argument is quoted for a POSIX shell ([`sh_quote`]).
    pub fn command(&self, value: &str) -> String {
        let q = sh_quote;
        let onoff = |v: &str| if v == "on" { "on" } else { "off" };
        match self {
            Key::Sysctl { name } => format!("sysctl -w {}={}", q(name), q(value)),
            Key::Mtu { iface } => format!("ip link set dev {} mtu {}", q(iface), q(value)),
            Key::Channel { iface, which } => {
                format!("ethtool -L {} {} {}", q(iface), which.name(), q(value))
            }
            Key::Ring { iface, which } => {
                format!("ethtool -G {} {} {}", q(iface), which.name(), q(value))
            }
            Key::Coalesce { iface, param } => {
                format!("ethtool -C {} {} {}", q(iface), q(param), q(value))
            }
            Key::Feature { iface, name } => {
                format!("ethtool -K {} {} {}", q(iface), q(name), onoff(value))
            }
            Key::Pause { iface, which } => {
                format!("ethtool -A {} {} {}", q(iface), which.name(), onoff(value))
            }
            Key::Irqbalance => format!(
                "systemctl {} irqbalance",
                if value == "running" { "start" } else { "stop" }
            ),
            Key::Rps { .. }
            | Key::RpsFlowCnt { .. }
            | Key::Xps { .. }
            | Key::IrqAffinity { .. }
            | Key::Governor { .. } => {
                format!(
                    "echo {} > {}",
                    q(value),
                    q(&self.path().unwrap_or_default())
                )
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
            Key::Feature { .. } | Key::Pause { .. } => canonical_bool(t),
            Key::Coalesce { param, .. } if param.starts_with("adaptive-") => canonical_bool(t),
            _ => t.to_string(),
        }
    }
}

/// A boolean value as `on` / `off` (anything else as it is).
fn canonical_bool(t: &str) -> String {
    match t {
        "on" | "true" | "1" => "on".into(),
        "off" | "false" | "0" => "off".into(),
        other => other.into(),
    }
}

/// Longest value a backup or journal may record for one setting.
pub const MAX_VALUE: usize = 4096;

/// Why a backup or journal read back from the state directory is not
/// trusted: it must hold only what a profile could have made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// A name no profile may hold.
    #[error(transparent)]
    Name(#[from] super::profile::NameError),
    /// Not a word of ethtool's vocabulary.
    #[error("'{word}' is not a {what} name")]
    Word {
        /// Which vocabulary (feature, coalescing parameter).
        what: &'static str,
        /// The word.
        word: String,
    },
    /// A queue number no interface has.
    #[error("queue {0} is out of range (0-65535)")]
    Queue(u32),
    /// An IRQ number no host has.
    #[error("IRQ {0} is out of range")]
    Irq(u32),
    /// An IRQ name that is not one.
    #[error("the IRQ name is longer than 128 characters or has control characters")]
    IrqName,
    /// A CPU number no host has.
    #[error("CPU {0} is out of range")]
    Cpu(u32),
    /// A value longer than any setting's.
    #[error("a value of {0} bytes (at most {MAX_VALUE})")]
    ValueTooLong(usize),
    /// A value that is not one line of text.
    #[error("the value {0:?} has control characters")]
    ValueControl(String),
    /// A text field longer than its bound.
    #[error("{what} is {len} bytes (at most {max})")]
    TextTooLong {
        /// Which field.
        what: &'static str,
        /// Its length.
        len: usize,
        /// Its bound.
        max: usize,
    },
    /// A text field with control characters.
    #[error("{what} {text:?} has control characters")]
    TextControl {
        /// Which field.
        what: &'static str,
        /// Its text.
        text: String,
    },
    /// A format this wirescope does not read.
    #[error("version {found} (this wirescope reads {reads})")]
    Version {
        /// The file's version.
        found: u32,
        /// The version this build reads.
        reads: u32,
    },
    /// A backup moved into another backup's directory.
    #[error("its id {id:?} is not its directory's name {dir:?}")]
    Id {
        /// The ID it holds.
        id: String,
        /// Its directory's name.
        dir: String,
    },
    /// More settings than any profile makes.
    #[error("{n} settings (at most {max})")]
    TooManySteps {
        /// Settings in the backup.
        n: usize,
        /// The bound.
        max: usize,
    },
    /// One setting of the backup is wrong.
    #[error("setting {index} ({key}): {source}")]
    Setting {
        /// 1-based.
        index: usize,
        /// The setting.
        key: String,
        /// What is wrong.
        source: Box<RecordError>,
    },
    /// A journal event about a setting the backup does not have.
    #[error("an event names setting {step} of a backup of {steps}")]
    EventStep {
        /// 1-based.
        step: usize,
        /// Settings in the backup.
        steps: usize,
    },
    /// The namespace a backup was taken in is not described as one.
    #[error(
        "the namespace's boot id or name is longer than 64 characters or has control characters"
    )]
    Namespace,
}

/// A word of ethtool's vocabulary (feature or coalescing parameter names).
fn check_word(what: &'static str, w: &str) -> Result<(), RecordError> {
    let ok = !w.is_empty()
        && w.len() <= 64
        && w.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(RecordError::Word {
            what,
            word: w.to_string(),
        })
    }
}

impl Key {
    /// Check a key read from a file (a backup) as strictly as a profile
    /// checks what it names: interface names as the kernel allows them,
    /// sysctls from the profile allow-list, numbers in range.
    pub fn validate(&self) -> Result<(), RecordError> {
        if let Some(iface) = self.iface() {
            super::profile::check_interface_name(iface)?;
        }
        match self {
            Key::Sysctl { name } => Ok(super::profile::sysctl_path(name).map(|_| ())?),
            Key::Coalesce { param, .. } => check_word("coalescing parameter", param),
            Key::Feature { name, .. } => check_word("feature", name),
            Key::Rps { queue, .. } | Key::RpsFlowCnt { queue, .. } | Key::Xps { queue, .. }
                if *queue > 65_535 =>
            {
                Err(RecordError::Queue(*queue))
            }
            Key::IrqAffinity { irq, .. } if *irq > 1 << 24 => Err(RecordError::Irq(*irq)),
            Key::IrqAffinity { name, .. }
                if name.len() > 128 || name.chars().any(char::is_control) =>
            {
                Err(RecordError::IrqName)
            }
            Key::Governor { cpu } if *cpu > 65_535 => Err(RecordError::Cpu(*cpu)),
            _ => Ok(()),
        }
    }
}

/// Check a value read from a file (a backup or journal): bounded, one line.
pub fn check_value(v: &str) -> Result<(), RecordError> {
    if v.len() > MAX_VALUE {
        return Err(RecordError::ValueTooLong(v.len()));
    }
    if v.chars().any(char::is_control) {
        return Err(RecordError::ValueControl(v.to_string()));
    }
    Ok(())
}

/// One argument as a POSIX shell reads it back unchanged: as is when it
/// holds only characters no shell treats specially, in double quotes when
/// it adds only spaces (`"4096 131072 6291456"`), else in single quotes
/// with each `'` written as `'\''`. So `$(...)`, backquotes and `;` in a
/// value or name are never run when a printed command is pasted.
pub fn sh_quote(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else if !s.is_empty() && s.chars().all(|c| plain(c) || c == ' ') {
        format!("\"{s}\"")
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
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
    fn printed_commands_are_quoted_for_the_shell() {
        let k = Key::Sysctl {
            name: "net.core.default_qdisc".into(),
        };
        assert_eq!(
            k.command("$(touch /tmp/pwned)"),
            "sysctl -w net.core.default_qdisc='$(touch /tmp/pwned)'"
        );
        let k = Key::Coalesce {
            iface: "e$(id)".into(),
            param: "rx-usecs".into(),
        };
        assert_eq!(k.command("it's"), "ethtool -C 'e$(id)' rx-usecs 'it'\\''s'");
        let k = Key::Xps {
            iface: "a`b`".into(),
            queue: 0,
        };
        assert_eq!(
            k.command("f;reboot"),
            "echo 'f;reboot' > '/sys/class/net/a`b`/queues/tx-0/xps_cpus'"
        );
        assert_eq!(sh_quote(""), "''");
        assert_eq!(sh_quote("a b"), "\"a b\"");
    }

    proptest::proptest! {
        /// Whatever the text, `sh -c 'printf %s ARG'` prints it back unchanged.
        #[test]
        fn quoting_round_trips_through_sh(s in "[ -~]{0,24}") {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", sh_quote(&s)))
                .output()
                .unwrap();
            proptest::prop_assert_eq!(String::from_utf8_lossy(&out.stdout), s);
        }
    }

    #[test]
    fn keys_from_a_file_are_checked() {
        let bad = [
            Key::Rps {
                iface: "../../../../tmp/x/evil".into(),
                queue: 0,
            },
            Key::Mtu { iface: "..".into() },
            Key::Mtu {
                iface: "sixteen-chars-xx".into(),
            },
            Key::Sysctl {
                name: "kernel.core_pattern".into(),
            },
            Key::Feature {
                iface: "eth0".into(),
                name: "../x".into(),
            },
            Key::Governor { cpu: 1 << 20 },
        ];
        for k in bad {
            assert!(k.validate().is_err(), "{k:?}");
        }
        Key::Rps {
            iface: "eth0".into(),
            queue: 3,
        }
        .validate()
        .unwrap();
        assert!(check_value("4096 131072 6291456").is_ok());
        assert!(check_value("1\n2").is_err());
        assert!(check_value(&"9".repeat(MAX_VALUE + 1)).is_err());
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

//! [`CaptureDir`]: a captured directory (`wirescope capture`, a real
//! sosreport, a test fixture) as a [`HostSource`]. Files are read below its
//! root; the command-shaped questions are answered from the text ethtool, tc
//! and ps printed, as sosreport stores it under `sos_commands/`.

use super::ethtool_text as text;
use super::facts::Support;
use super::nic::NicStats;
use super::source::{EthtoolView, HostSource};
use super::untrusted::{ReadError, Root};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The sosreport file name of an ethtool command's output (`-i` → `ethtool_-i_eth0`,
/// plain `ethtool eth0` → `ethtool_eth0`).
pub fn ethtool_file(flag: &str, iface: &str) -> String {
    if flag.is_empty() {
        format!("sos_commands/networking/ethtool_{iface}")
    } else {
        format!("sos_commands/networking/ethtool_{flag}_{iface}")
    }
}

fn one<T>(
    dir: &CaptureDir,
    flag: &str,
    iface: &str,
    driver: &str,
    parse: fn(&str) -> Result<T, text::ParseError>,
) -> Support<T> {
    let path = ethtool_file(flag, iface);
    match dir.command(&path) {
        Err(_) => Support::Unknown,
        Ok(t) => match parse(&t) {
            Ok(v) => Support::Value(v),
            // sosreport keeps what ethtool printed, including its refusal.
            Err(_) if t.contains("Operation not supported") => Support::NotSupported {
                driver: driver.to_string(),
            },
            Err(e) => Support::Error(format!("{path}: {e}")),
        },
    }
}

/// ethtool's view of `iface` from `sos_commands/networking/ethtool_*_IF`,
/// with `ethtool -S` only when `stats` (the host facts keep
/// none of it).
fn view(dir: &CaptureDir, iface: &str, stats: bool) -> EthtoolView {
    let drvinfo = one(dir, "-i", iface, "", text::parse_drvinfo);
    let driver = drvinfo.driver();
    EthtoolView {
        channels: one(dir, "-l", iface, &driver, text::parse_channels),
        rings: one(dir, "-g", iface, &driver, text::parse_rings),
        features: one(dir, "-k", iface, &driver, text::parse_features),
        coalesce: one(dir, "-c", iface, &driver, text::parse_coalesce),
        link: one(dir, "", iface, &driver, text::parse_link),
        pause: one(dir, "-a", iface, &driver, text::parse_pause),
        stats: if stats {
            one(dir, "-S", iface, &driver, text::parse_stats)
        } else {
            Support::Unknown
        },
        drvinfo,
    }
}

/// The root qdisc kind of `iface` in `tc qdisc show` output: the full
/// listing names the device (`qdisc mq 0: dev eth0 root`); the output of
/// `tc qdisc show dev eth0` omits it (`qdisc noqueue 0: root refcnt 2`).
pub fn parse_tc_root(text: &str, iface: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let w: Vec<&str> = l.split_ascii_whitespace().collect();
        let dev_ok = match w.iter().position(|x| *x == "dev") {
            Some(d) => w.get(d + 1) == Some(&iface),
            None => true,
        };
        (w.first() == Some(&"qdisc") && dev_ok && w.contains(&"root"))
            .then(|| w.get(1).map(|k| k.to_string()))?
    })
}

/// Command names (basename of argv\[0\], kernel threads without brackets) from `ps auxwww`.
pub fn parse_ps_aux(text: &str) -> Vec<String> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let cmd = l.split_ascii_whitespace().nth(10)?;
            let cmd = cmd.trim_start_matches('[').trim_end_matches(']');
            Some(
                cmd.rsplit('/')
                    .next()
                    .unwrap_or(cmd)
                    .trim_end_matches(':')
                    .to_string(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tc_root_qdisc() {
        let t = "qdisc noqueue 0: dev lo root refcnt 2 \n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \nqdisc mq 0: dev eth0 root \nqdisc fq_codel 0: dev eth0 parent :1 limit 10240p\n";
        assert_eq!(parse_tc_root(t, "eth0").as_deref(), Some("mq"));
        assert_eq!(parse_tc_root(t, "lo").as_deref(), Some("noqueue"));
        assert_eq!(parse_tc_root(t, "eth1"), None);
        // `tc qdisc show dev veth-a` leaves the device out.
        assert_eq!(
            parse_tc_root("qdisc noqueue 0: root refcnt 2 \n", "veth-a").as_deref(),
            Some("noqueue")
        );
    }

    #[test]
    fn ethtool_stats_alone_answers_as_the_full_view() {
        let d = tempfile::tempdir().unwrap();
        let net = d.path().join("sos_commands/networking");
        std::fs::create_dir_all(&net).unwrap();
        std::fs::write(
            net.join("ethtool_-i_eth0"),
            "driver: virtio_net\nversion: 1.0.0\nbus-info: 0000:00:03.0\n",
        )
        .unwrap();
        std::fs::write(
            net.join("ethtool_-S_eth0"),
            "NIC statistics:\n     rx_queue_0_packets: 12\n     tx_queue_0_bytes: 34\n",
        )
        .unwrap();
        std::fs::write(
            net.join("ethtool_-S_eth1"),
            "no stats available\nOperation not supported\n",
        )
        .unwrap();
        std::fs::write(net.join("ethtool_-i_eth1"), "driver: dummy\n").unwrap();
        std::fs::write(net.join("ethtool_-S_eth2"), "garbage without a colon\n").unwrap();
        let c = CaptureDir::new(d.path());
        for i in ["eth0", "eth1", "eth2", "eth3"] {
            assert_eq!(
                c.ethtool_stats(i).map(|s| s.to_pairs()),
                c.ethtool(i).stats,
                "{i}"
            );
        }
        assert!(matches!(c.ethtool_stats("eth0"), Support::Value(v) if v.len() == 2));
        assert!(matches!(c.ethtool_stats("eth3"), Support::Unknown));
        // The facts' view: all of it but the counters (not read at all).
        for i in ["eth0", "eth1", "eth2", "eth3"] {
            let full = c.ethtool(i);
            assert_eq!(
                c.ethtool_facts(i),
                EthtoolView {
                    stats: Support::Unknown,
                    ..full
                },
                "{i}"
            );
        }
    }

    #[test]
    fn ps_names() {
        let t = "USER PID %CPU %MEM VSZ RSS TTY STAT START TIME COMMAND\nroot 1 0.0 0.1 1 1 ? Ss 10:00 0:01 /sbin/init splash\nroot 812 0.0 0.0 1 1 ? Ss 10:00 0:00 /usr/sbin/irqbalance --foreground\nroot 9 0.0 0.0 0 0 ? I< 10:00 0:00 [kworker/0:1H]\n";
        let p = parse_ps_aux(t);
        assert!(p.contains(&"irqbalance".to_string()));
        assert_eq!(p[0], "init");
    }
}

/// A directory laid out like the host's root (`DIR/proc/stat`), with command
/// outputs under `DIR/sos_commands/` as sosreport stores them.
#[derive(Debug)]
pub struct CaptureDir {
    root: Root,
    /// Files that were there but not read, with the reason (reported, not silent).
    skipped: Mutex<BTreeMap<String, String>>,
    /// Each interface's `ethtool -S` names as last read (shared with the readings).
    stat_names: Mutex<BTreeMap<String, Arc<[String]>>>,
}

impl CaptureDir {
    /// A source rooted at `root`. Nothing below it is trusted: see
    /// [`super::untrusted`].
    pub fn new(root: impl AsRef<Path>) -> Self {
        CaptureDir {
            root: Root::new(root.as_ref()),
            skipped: Mutex::new(BTreeMap::new()),
            stat_names: Mutex::new(BTreeMap::new()),
        }
    }

    /// The directory as given.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// Text of a command output file, e.g. `sos_commands/networking/ethtool_-i_eth0`.
    pub fn command(&self, rel: &str) -> io::Result<String> {
        self.note(rel, self.root.read(rel))
    }

    /// Files present but not read so far, each with why ("proc/x: it leads
    /// out of the capture"), for the user.
    pub fn skipped(&self) -> Vec<String> {
        self.skipped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(p, why)| format!("{p}: {why}"))
            .collect()
    }

    fn note<T>(&self, rel: &str, r: Result<T, ReadError>) -> io::Result<T> {
        if let Err(ReadError::Refused(why)) = &r {
            self.skipped
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(rel.trim_start_matches('/').to_string(), why.to_string());
        }
        r.map_err(io::Error::from)
    }
}

impl HostSource for CaptureDir {
    fn read(&self, path: &str) -> io::Result<String> {
        self.note(path, self.root.read(path))
    }
    fn list(&self, path: &str) -> io::Result<Vec<String>> {
        self.note(path, self.root.list(path))
    }
    fn link_name(&self, path: &str) -> io::Result<String> {
        self.note(path, self.root.link_name(path)).or_else(|_| {
            let alt = format!("{}.link", path.trim_end_matches('/'));
            self.read(&alt).map(|s| s.trim().to_string())
        })
    }
    fn ethtool(&self, iface: &str) -> EthtoolView {
        view(self, iface, true)
    }
    fn ethtool_facts(&self, iface: &str) -> EthtoolView {
        view(self, iface, false)
    }
    /// `ethtool -S` of `iface` alone: only its file is read and parsed (the
    /// sampler asks every interval), sharing the names of `iface`'s previous
    /// reading while they stay the same. The driver (`-i`) is read only to name it
    /// in a refusal, as [`HostSource::ethtool`] does.
    fn ethtool_stats(&self, iface: &str) -> Support<NicStats> {
        let path = ethtool_file("-S", iface);
        let names = || {
            self.stat_names
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        // The previous names, not the lock, are held while the file is read.
        let prev = names().get(iface).cloned();
        match self.command(&path) {
            Err(_) => Support::Unknown,
            Ok(t) => match text::parse_stats_reusing(&t, prev.as_ref()) {
                Ok(v) => {
                    if prev.is_none_or(|n| !Arc::ptr_eq(&n, &v.names)) {
                        names().insert(iface.to_owned(), Arc::clone(&v.names));
                    }
                    Support::Value(v)
                }
                Err(_) if t.contains("Operation not supported") => Support::NotSupported {
                    driver: match one(self, "-i", iface, "", text::parse_drvinfo) {
                        Support::Value(d) => d.driver,
                        _ => String::new(),
                    },
                },
                Err(e) => Support::Error(format!("{path}: {e}")),
            },
        }
    }
    /// Root qdisc from `sos_commands/networking/tc_-s_qdisc_show`.
    fn qdisc(&self, iface: &str) -> Option<String> {
        parse_tc_root(
            &self
                .command("sos_commands/networking/tc_-s_qdisc_show")
                .ok()?,
            iface,
        )
    }
    /// Command names from `sos_commands/process/ps_auxwww`.
    fn processes(&self) -> Option<Vec<String>> {
        Some(parse_ps_aux(
            &self.command("sos_commands/process/ps_auxwww").ok()?,
        ))
    }
    fn describe(&self) -> String {
        format!("directory {}", self.root.path().display())
    }
}

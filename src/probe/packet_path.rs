//! Where a host lost packets on one interface, for packet engines
//! ([`PathSource`]): its `/proc/net/dev` line, the NIC's `ethtool -S` loss
//! counters (per rx queue and NIC-wide), and softnet drops. The engine's
//! own copy of what the sampler reads, so a packet test accounts for its
//! loss without a session (the tests).
//!
//! Everything is opened when the probe is made — the `/proc/thread-self/
//! net/dev` file and the ethtool ioctl socket — so the probe answers for
//! the network namespace of the thread that made it, whichever thread reads
//! it later. Reading only: it never changes the host.

use super::ethtool_names::{per_queue, Dir};
use super::facts::Support;
use super::nic::{parse_net_dev, EthtoolIoctl, StatsReader};
use super::softirq::parse_softnet;
use crate::traffic::paths::{PathCounters, PathOpener, PathSource, NIC_LOSS_COUNTERS};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// The loss counters of one interface, opened in the creating thread's namespace.
#[derive(Debug)]
pub struct PathProbe {
    iface: String,
    driver: String,
    dev: Option<File>,
    io: Option<EthtoolIoctl>,
    stats: StatsReader,
}

impl PathProbe {
    /// Open for `iface` (driven by `driver`) in the calling thread's namespace.
    pub fn open(iface: &str, driver: &str) -> PathProbe {
        PathProbe {
            iface: iface.into(),
            driver: driver.into(),
            dev: File::open("/proc/thread-self/net/dev").ok(),
            io: EthtoolIoctl::open().ok(),
            stats: StatsReader::default(),
        }
    }

    /// An opener of these for the packet engine.
    pub fn opener() -> PathOpener {
        std::sync::Arc::new(|iface: &str, driver: &str| {
            Box::new(PathProbe::open(iface, driver)) as Box<dyn PathSource>
        })
    }
}

impl PathSource for PathProbe {
    /// The counters now (what cannot be read stays 0 / absent).
    fn read(&mut self) -> PathCounters {
        let mut p = PathCounters {
            iface: self.iface.clone(),
            ..Default::default()
        };
        if let Some(text) = self.dev.as_ref().and_then(read_all) {
            if let Some(c) = parse_net_dev(&text)
                .ok()
                .and_then(|d| d.get(&self.iface).copied())
            {
                p.rx_packets = c.rx_packets;
                p.rx_dropped = c.rx_dropped;
                p.tx_packets = c.tx_packets;
                p.tx_dropped = c.tx_dropped;
            }
        }
        if let Some(io) = &self.io {
            if let Support::Value(stats) = self.stats.read(io, None, &self.iface, &self.driver) {
                apply_ethtool(&mut p, &self.driver, &stats.to_pairs());
            }
        }
        if let Ok(text) = std::fs::read_to_string("/proc/net/softnet_stat") {
            p.softnet_dropped = parse_softnet(&text, &[])
                .iter()
                .map(|(_, s)| u64::from(s.dropped))
                .sum();
        }
        p
    }
}

/// Fill the per-queue drops and NIC-wide loss counters from `ethtool -S`.
pub fn apply_ethtool(p: &mut PathCounters, driver: &str, stats: &[(String, u64)]) {
    let (queues, globals) = per_queue(driver, stats);
    for q in queues.iter().filter(|q| q.dir == Dir::Rx) {
        if let Some(d) = q.drops {
            p.rx_queue_drops.insert(q.queue, d);
        }
    }
    for (name, v) in globals {
        if NIC_LOSS_COUNTERS.contains(&name.as_str()) {
            p.nic.insert(name, v);
        }
    }
}

fn read_all(f: &File) -> Option<String> {
    let mut out = Vec::with_capacity(8192);
    let mut buf = [0u8; 8192];
    loop {
        let n = f.read_at(&mut buf, out.len() as u64).ok()?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.len() > 1 << 20 {
            break;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_counters_move_and_reread() {
        let mut p = PathProbe::open("lo", "");
        let a = p.read();
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = s.local_addr().unwrap();
        for _ in 0..10 {
            s.send_to(b"x", to).unwrap();
        }
        let b = p.read();
        assert!(b.rx_packets >= a.rx_packets + 10, "{a:?} -> {b:?}");
    }

    #[test]
    fn ethtool_counters_land_by_queue_and_name() {
        let stats: Vec<(String, u64)> = [
            ("rx_queue_0_drops", 3),
            ("rx_queue_1_drops", 0),
            ("rx_queue_0_xdp_packets", 10),
            ("rx_missed_errors", 7),
            ("tx_timeout", 1),
        ]
        .iter()
        .map(|(n, v)| (n.to_string(), *v))
        .collect();
        let mut p = PathCounters::default();
        apply_ethtool(&mut p, "veth", &stats);
        assert_eq!(p.rx_queue_drops.get(&0), Some(&3));
        assert_eq!(p.rx_queue_drops.get(&1), Some(&0));
        assert_eq!(p.nic.get("rx_missed_errors"), Some(&7));
        assert!(!p.nic.contains_key("tx_timeout"));
    }
}

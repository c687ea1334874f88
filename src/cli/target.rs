//! Where the far end is ([`TargetArgs`]) and what to watch besides the
//! test's own interface ([`ObserveArgs`]), and their resolution.

use super::UsageError;
use crate::probe::ebpf::EbpfMode;
use crate::session::plan::{Observe, TargetChoice};
use clap::Args;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

/// Where the far end is.
#[derive(Debug, Args, Default, Clone)]
pub struct TargetArgs {
    /// Agent to test against (`wirescope agent` runs there).
    #[arg(long, value_name = "HOST[:PORT]", conflicts_with = "local_pair")]
    pub peer: Option<String>,
    /// The agent's port when --peer names none (default 5310), as iperf3's -p.
    #[arg(long, short = 'p', value_name = "PORT", requires = "peer")]
    pub port: Option<u16>,
    /// Use the embedded local pair: two network namespaces and a veth as root, loopback otherwise (the default without --peer).
    #[arg(long)]
    pub local_pair: bool,
    /// rx/tx queues of the local pair's veth.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub pair_queues: u32,
    /// Token file shared with the agent. Default: $WIRESCOPE_TOKEN, else ~/.config/wirescope/token.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
}

/// Interfaces to watch. The one that routes to the other host is always watched.
#[derive(Debug, Args, Default, Clone)]
pub struct ObserveArgs {
    /// Also watch this interface on this host (repeatable).
    #[arg(long = "iface", value_name = "IF")]
    pub ifaces: Vec<String>,
    /// Also watch this interface on the agent's host (repeatable).
    #[arg(long = "peer-iface", value_name = "IF")]
    pub peer_ifaces: Vec<String>,
    /// eBPF probes on both hosts, when privileged (CAP_BPF+CAP_PERFMON, kernel BTF).
    /// default: rx/tx packets per queue × CPU, sampled (probes attached a quarter
    /// of each interval, counts scaled; measured cost with wirescope's own
    /// threads: 0.4 % of the busy CPU of a 2-stream TCP test on the local pair's
    /// veth, `cargo xtask bench ebpf`); deep: exact counts, every softirq
    /// vector's time and NAPI polls/budget exhaustion per instance (3.2 %); off.
    /// On the local pair one set counts for both ends. `WIRESCOPE_EBPF=off` on a
    /// host keeps them off there whatever this says.
    #[arg(long, value_enum, value_name = "SET", default_value = "default")]
    pub ebpf: EbpfMode,
}

impl TargetArgs {
    /// Resolve `--peer` (DNS included) or pick the local pair.
    pub fn resolve(&self) -> Result<TargetChoice, UsageError> {
        let Some(p) = &self.peer else {
            return Ok(TargetChoice::LocalPair {
                queues: self.pair_queues,
            });
        };
        let mut addr = resolve_peer(p)?;
        if let Some(port) = self.port {
            if has_port(p) && addr.port() != port {
                return Err(UsageError(format!(
                    "--peer '{p}' names port {} and -p {port}: give the port once",
                    addr.port()
                )));
            }
            addr.set_port(port);
        }
        Ok(TargetChoice::Peer(addr))
    }
}

/// True when `--peer`'s value names a port (`HOST:PORT`, `[IPv6]:PORT`).
fn has_port(p: &str) -> bool {
    p.parse::<SocketAddr>().is_ok()
        || (p.parse::<std::net::IpAddr>().is_err()
            && p.rsplit_once(':').is_some_and(|(h, _)| !h.contains(':')))
}

/// `HOST`, `HOST:PORT`, `IPv4`, `[IPv6]:PORT` or bare IPv6 → an address (default port 5310).
pub fn resolve_peer(p: &str) -> Result<SocketAddr, UsageError> {
    let port = crate::session::DEFAULT_PORT;
    if let Ok(a) = p.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = p.parse::<std::net::IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let (host, port) = match p.rsplit_once(':') {
        Some((h, pt)) if !h.contains(':') => (
            h,
            pt.parse::<u16>().map_err(|_| {
                UsageError(format!(
                    "--peer '{p}': '{pt}' is not a port; use HOST or HOST:PORT, e.g. node-b:5310"
                ))
            })?,
        ),
        _ => (p, port),
    };
    (host, port)
        .to_socket_addrs()
        .map_err(|e| UsageError(format!("--peer '{p}': cannot resolve '{host}': {e}")))?
        .next()
        .ok_or_else(|| UsageError(format!("--peer '{p}': '{host}' has no address")))
}

impl ObserveArgs {
    /// The plain form the session reads.
    pub fn resolve(&self) -> Observe {
        Observe {
            ifaces: self.ifaces.clone(),
            peer_ifaces: self.peer_ifaces.clone(),
            ebpf: self.ebpf,
        }
    }
}

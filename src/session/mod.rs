//! The node pair: control protocol, agent, controller and the embedded local pair.
//!
//! One control connection per controller (TCP, or a unix socket for the local
//! pair) carries length-prefixed JSON [`proto::Msg`]s; the data connections of
//! a test are separate TCP sockets to the agent's port, each introduced by a
//! magic, the test's id, its index and a tag of both under the session's data
//! key ([`proto::DataHello`]). docs/protocol.md describes the whole protocol.
//! Either side may vanish at any moment: the other stops its engine, keeps
//! what it measured and reports the loss.

pub mod agent;
pub mod auth;
pub mod channel;
pub mod controller;
pub mod driver;
pub mod engines;
pub mod localpair;
pub mod net;
pub mod netns;
pub mod outcome;
pub mod pair;
mod pairing;
pub mod plan;
pub mod point;
pub mod proto;

pub use proto::{ProtoError, DEFAULT_PORT, PROTOCOL_VERSION};

use crate::probe::ebpf::{EbpfIface, IfaceKey};
use anyhow::Context;
use plan::TargetChoice;

/// The far end chosen on the command line, ready to connect to.
pub struct Opened {
    /// The embedded local pair, when one was built (dropping it tears it down).
    pub pair: Option<localpair::LocalPair>,
    /// Where the controller connects.
    pub target: controller::Target,
    /// The shared token.
    pub token: auth::Token,
    /// How the pair is built, for headers and logs.
    pub description: String,
    /// The agent's interfaces when it runs on this kernel (the local pair's
    /// veth-b): one eBPF set here counts for both ends.
    pub same_kernel: Vec<EbpfIface>,
}

/// Build the local pair or load the token for a remote agent. Call on the
/// main thread before any runtime exists: the local pair moves this thread
/// into its namespace, and the agent's death signal follows the spawning thread.
pub fn open(choice: &TargetChoice, token_file: Option<&std::path::Path>) -> anyhow::Result<Opened> {
    match choice {
        TargetChoice::LocalPair { queues } => {
            let exe = std::env::current_exe()
                .context("cannot find the wirescope executable to start the local agent")?;
            let pair = localpair::LocalPair::create(&exe, *queues)
                .context("cannot build the local pair")?;
            let agent_ns = match &pair.kind {
                localpair::PairKind::Netns { ns_b, queues, .. } => {
                    netns_inode(&format!("/run/netns/{ns_b}")).map(|ino| (ino, *queues))
                }
                localpair::PairKind::Loopback { .. } => None,
            };
            pair.enter_controller_side()
                .context("cannot enter the controller's namespace")?;
            // veth-b's ifindex is veth-a's iflink, readable from this side.
            let same_kernel = agent_ns
                .and_then(|(netns, queues)| {
                    let ifindex = std::fs::read_to_string("/sys/class/net/veth-a/iflink")
                        .ok()?
                        .trim()
                        .parse()
                        .ok()?;
                    Some(EbpfIface {
                        name: "veth-b".into(),
                        key: IfaceKey { ifindex, netns },
                        rx_queues: queues,
                        tx_queues: queues,
                        rx_mapping_is_queue: true,
                    })
                })
                .into_iter()
                .collect();
            Ok(Opened {
                target: pair.target.clone(),
                token: pair.token.clone(),
                description: format!("local pair: {}", pair.kind),
                pair: Some(pair),
                same_kernel,
            })
        }
        TargetChoice::Peer(addr) => {
            let (token, _) = auth::load_token(token_file, false)?;
            if let Some(w) = token.weakness() {
                eprintln!("warning: {w}");
            }
            Ok(Opened {
                pair: None,
                target: controller::Target::Tcp(*addr),
                token,
                description: format!("remote agent {addr}"),
                same_kernel: Vec::new(),
            })
        }
    }
}

/// Inode number of a network namespace file (what the kernel's `ns.inum` is).
fn netns_inode(path: &str) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.ino() as u32)
}

#[cfg(test)]
mod tests;

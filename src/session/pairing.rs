//! Pairing of the two hosts' Samples by interval index.
//!
//! The controller's Sample of interval `k` and the agent's arrive at
//! different moments (the agent's over the control connection). Rates are
//! never mixed across hosts: each Sample keeps its own measured span; pairing
//! only decides which two are shown and logged together.

use super::outcome::RunEvent;
use crate::probe::ebpf::{drop_peer_share, share_with_peer};
use crate::probe::sample::Sample;
use std::collections::BTreeMap;
use tokio::sync::mpsc;

/// Pairs local and peer Samples by interval index and emits intervals in
/// index order. A peer Sample more than two intervals late is not waited for;
/// if it still arrives, it is forwarded alone at once. Pending Samples are
/// bounded (a peer that runs ahead cannot grow the map without limit).
#[derive(Default)]
pub(crate) struct Pairing {
    local: BTreeMap<u32, Sample>,
    peer: BTreeMap<u32, Sample>,
    emitted: Option<u32>,
    /// The peer's interfaces counted by this host's eBPF probes (same kernel).
    shared: Vec<String>,
}

/// Most peer Samples kept while waiting for the local ones.
const MAX_PENDING: usize = 64;

impl Pairing {
    /// A pairing for one point; `shared` are the peer's interfaces this
    /// host's eBPF probes count (the local pair).
    pub(crate) fn new(shared: Vec<String>) -> Self {
        Pairing {
            shared,
            ..Default::default()
        }
    }

    pub(crate) async fn local(&mut self, s: Sample, ev: &mpsc::Sender<RunEvent>) {
        self.local.insert(s.index, s);
        self.emit(ev, false).await;
    }

    pub(crate) async fn peer(&mut self, s: Sample, ev: &mpsc::Sender<RunEvent>) {
        if self.emitted.is_some_and(|e| s.index <= e) {
            let _ = ev
                .send(RunEvent {
                    index: s.index,
                    local: None,
                    peer: Some(s),
                })
                .await;
            return;
        }
        self.peer.insert(s.index, s);
        while self.peer.len() > MAX_PENDING {
            self.peer.pop_first();
        }
        self.emit(ev, false).await;
    }

    /// Emit, oldest first, every local interval whose peer Sample is here or
    /// two intervals late; with `all`, everything left.
    async fn emit(&mut self, ev: &mpsc::Sender<RunEvent>, all: bool) {
        loop {
            let newest = self.local.keys().next_back().copied();
            let Some(k) = self.local.keys().next().copied() else {
                break;
            };
            let ready = all || self.peer.contains_key(&k) || newest.is_some_and(|n| k + 2 <= n);
            if !ready {
                break;
            }
            let (mut local, mut peer) = (self.local.remove(&k), self.peer.remove(&k));
            if !self.shared.is_empty() {
                match (local.as_mut(), peer.as_mut()) {
                    (Some(l), Some(p)) => share_with_peer(l, p, &self.shared),
                    (Some(l), None) => drop_peer_share(l, &self.shared),
                    _ => {}
                }
            }
            let _ = ev
                .send(RunEvent {
                    index: k,
                    local,
                    peer,
                })
                .await;
            self.emitted = Some(k);
        }
    }

    pub(crate) async fn flush(&mut self, ev: &mpsc::Sender<RunEvent>) {
        self.emit(ev, true).await;
        for (k, p) in std::mem::take(&mut self.peer) {
            let _ = ev
                .send(RunEvent {
                    index: k,
                    local: None,
                    peer: Some(p),
                })
                .await;
        }
    }
}

//! Admission of connections that have not authenticated yet.
//!
//! Before a caller proves it knows the token it costs the agent a socket and
//! a task, and anyone who can reach the port can open thousands: a flood of
//! 500 connections once made the real controller time out. So:
//!
//! * at most [`Gate::max_pending`] unauthenticated connections at once (sized
//!   from the open-file limit, keeping [`RESERVE`] descriptors for the
//!   authenticated controller and its data connections), and at most
//!   [`PER_SOURCE`] from one address, and never more than a quarter of all
//!   places (so one address cannot fill them: with a 256-descriptor limit
//!   there are 4 places and one address gets 1);
//! * new connections from one address are rate-limited (a token bucket of
//!   [`RATE`] per second, bursts of [`BURST`]);
//! * a wrong token bans its address for 1 s, doubling with each further
//!   failure up to [`MAX_BAN`]; a success clears the record.
//!
//! Refusals close the connection without a word and are counted; the agent
//! logs a summary at most every few seconds instead of a line per attempt.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Descriptors kept for the authenticated controller.
pub const RESERVE: usize = 256;
/// Most unauthenticated connections from one address.
pub const PER_SOURCE: usize = 8;
/// New connections per second from one address (sustained).
pub const RATE: f64 = 20.0;
/// Burst of new connections from one address.
pub const BURST: f64 = 40.0;
/// Longest ban after repeated wrong tokens.
pub const MAX_BAN: Duration = Duration::from_secs(60);
/// Addresses remembered at most (the oldest idle ones are forgotten first).
const MAX_SOURCES: usize = 4096;

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Refusal {
    /// Too many unauthenticated connections in all.
    Full,
    /// Too many from this address at once.
    SourceBusy,
    /// This address opens connections too fast.
    RateLimited,
    /// This address sent a wrong token recently.
    Banned,
}

impl Refusal {
    fn describe(self) -> &'static str {
        match self {
            Refusal::Full => "too many unauthenticated connections",
            Refusal::SourceBusy => "too many connections from one address",
            Refusal::RateLimited => "connecting too fast",
            Refusal::Banned => "wrong token recently",
        }
    }
}

#[derive(Debug)]
struct Source {
    pending: usize,
    tokens: f64,
    last: Instant,
    failures: u32,
    banned_until: Option<Instant>,
}

impl Source {
    fn new(now: Instant) -> Self {
        Source {
            pending: 0,
            tokens: BURST,
            last: now,
            failures: 0,
            banned_until: None,
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    pending: usize,
    sources: HashMap<IpAddr, Source>,
    refused: HashMap<(Refusal, Option<IpAddr>), u64>,
    /// Data connections the authenticated controller is about to open (its
    /// address when known, the count): they pass the rate and count limits,
    /// which are meant for strangers (`-P 1000` opens 1000 at once).
    passes: Option<(Option<IpAddr>, usize)>,
}

/// The admission state of one agent.
#[derive(Debug)]
pub struct Gate {
    inner: Mutex<Inner>,
    max_pending: usize,
    per_source: usize,
}

/// An admitted, not yet authenticated connection; dropping it frees its place.
#[derive(Debug)]
pub struct Permit {
    gate: Arc<Gate>,
    ip: Option<IpAddr>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut g = self.gate.lock();
        g.pending = g.pending.saturating_sub(1);
        if let Some(s) = self.ip.and_then(|ip| g.sources.get_mut(&ip)) {
            s.pending = s.pending.saturating_sub(1);
        }
    }
}

impl Gate {
    /// A gate for a process that may open `nofile` descriptors.
    pub fn new(nofile: u64) -> Arc<Self> {
        let budget = usize::try_from(nofile)
            .unwrap_or(usize::MAX)
            .saturating_sub(RESERVE);
        let max_pending = (budget / 4).clamp(4, 64);
        Arc::new(Gate {
            inner: Mutex::new(Inner::default()),
            max_pending,
            per_source: (max_pending / 4).clamp(1, PER_SOURCE),
        })
    }

    /// Most unauthenticated connections at once.
    pub fn max_pending(&self) -> usize {
        self.max_pending
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Admit a new connection from `ip` (None: the local unix socket).
    pub fn admit(self: &Arc<Self>, ip: Option<IpAddr>) -> Result<Permit, Refusal> {
        self.admit_at(ip, Instant::now())
    }

    fn admit_at(self: &Arc<Self>, ip: Option<IpAddr>, now: Instant) -> Result<Permit, Refusal> {
        let mut g = self.lock();
        let refused = |g: &mut Inner, r: Refusal| {
            *g.refused.entry((r, ip)).or_insert(0) += 1;
            Err(r)
        };
        if let Some(ip) = ip {
            if !g.sources.contains_key(&ip) && g.sources.len() >= MAX_SOURCES {
                forget_idle(&mut g, now);
            }
            let total = g.pending;
            let Inner {
                sources, passes, ..
            } = &mut *g;
            let s = sources.entry(ip).or_insert_with(|| Source::new(now));
            if s.banned_until.is_some_and(|t| now < t) {
                return refused(&mut g, Refusal::Banned);
            }
            let elapsed = now.saturating_duration_since(s.last).as_secs_f64();
            s.tokens = (s.tokens + elapsed * RATE).min(BURST);
            s.last = now;
            let pass = passes
                .as_mut()
                .filter(|(from, left)| *left > 0 && from.is_none_or(|f| f == ip));
            if let Some((_, left)) = pass {
                *left -= 1;
            } else {
                let limit = if s.tokens < 1.0 {
                    Some(Refusal::RateLimited)
                } else if s.pending >= self.per_source {
                    Some(Refusal::SourceBusy)
                } else if total >= self.max_pending {
                    Some(Refusal::Full)
                } else {
                    None
                };
                if let Some(r) = limit {
                    return refused(&mut g, r);
                }
                s.tokens -= 1.0;
            }
            s.pending += 1;
        } else if g.pending >= self.max_pending {
            return refused(&mut g, Refusal::Full);
        }
        g.pending += 1;
        Ok(Permit {
            gate: Arc::clone(self),
            ip,
        })
    }

    /// The authenticated controller will open `n` data connections now, from
    /// `from` (None: its address is unknown, e.g. it came over the unix
    /// socket; then any address may use them). Until [`Gate::expect_done`],
    /// that many connections pass the limits meant for strangers; they still
    /// must prove the session's data key to be used.
    pub fn expect_data(&self, from: Option<IpAddr>, n: usize) {
        self.lock().passes = (n > 0).then_some((from, n));
    }

    /// The data connections are in (or the wait is over): no more passes.
    pub fn expect_done(&self) {
        self.lock().passes = None;
    }

    /// `ip` sent a wrong token: ban it for a while; returns how long.
    pub fn auth_failed(&self, ip: Option<IpAddr>) -> Duration {
        self.auth_failed_at(ip, Instant::now())
    }

    fn auth_failed_at(&self, ip: Option<IpAddr>, now: Instant) -> Duration {
        let Some(ip) = ip else {
            return Duration::ZERO;
        };
        let mut g = self.lock();
        let s = g.sources.entry(ip).or_insert_with(|| Source::new(now));
        s.failures = s.failures.saturating_add(1);
        let ban = Duration::from_secs(1u64 << (s.failures - 1).min(6)).min(MAX_BAN);
        s.banned_until = Some(now + ban);
        ban
    }

    /// `ip` authenticated: forget its failures.
    pub fn auth_ok(&self, ip: Option<IpAddr>) {
        let mut g = self.lock();
        if let Some(s) = ip.and_then(|ip| g.sources.get_mut(&ip)) {
            s.failures = 0;
            s.banned_until = None;
        }
    }

    /// Refusals since the last call, as one line (None when there were none).
    pub fn take_refusals(&self) -> Option<String> {
        let mut g = self.lock();
        if g.refused.is_empty() {
            return None;
        }
        let mut by: Vec<((Refusal, Option<IpAddr>), u64)> = g.refused.drain().collect();
        by.sort();
        let total: u64 = by.iter().map(|(_, n)| n).sum();
        let detail: Vec<String> = by
            .iter()
            .take(5)
            .map(|((r, ip), n)| {
                let from = ip
                    .map(|i| i.to_string())
                    .unwrap_or_else(|| "unix socket".into());
                format!("{n} from {from} ({})", r.describe())
            })
            .collect();
        let more = if by.len() > 5 { ", ..." } else { "" };
        Some(format!(
            "refused {total} unauthenticated connection(s): {}{more}",
            detail.join(", ")
        ))
    }
}

/// Drop the records of addresses with nothing pending and no ban.
fn forget_idle(g: &mut Inner, now: Instant) {
    g.sources
        .retain(|_, s| s.pending > 0 || s.banned_until.is_some_and(|t| now < t));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> Option<IpAddr> {
        Some(IpAddr::from([198, 18, 0, n]))
    }

    #[test]
    fn pending_connections_are_capped_in_all_and_per_source() {
        let g = Gate::new(1024);
        let t = Instant::now();
        let mine: Vec<Permit> = (0..PER_SOURCE)
            .map(|_| g.admit_at(ip(1), t).unwrap())
            .collect();
        assert_eq!(g.admit_at(ip(1), t).unwrap_err(), Refusal::SourceBusy);
        drop(mine);
        assert!(g.admit_at(ip(1), t).is_ok(), "a permit frees its place");
        let others: Vec<Permit> = (2..=255)
            .filter_map(|n| g.admit_at(ip(n), t).ok())
            .collect();
        assert_eq!(others.len(), g.max_pending());
        assert_eq!(g.admit_at(None, t).unwrap_err(), Refusal::Full);
    }

    #[test]
    fn the_controllers_data_connections_pass_the_limits_strangers_do_not() {
        let g = Gate::new(256);
        let t = Instant::now();
        g.expect_data(ip(1), 1000);
        let data: Vec<Permit> = (0..1000)
            .filter_map(|_| g.admit_at(ip(1), t).ok())
            .collect();
        assert_eq!(data.len(), 1000, "-P 1000 gets all its connections at once");
        assert!(g.admit_at(ip(1), t).is_err(), "no more than expected");
        let strangers = (0..100).filter(|_| g.admit_at(ip(9), t).is_ok()).count();
        assert_eq!(strangers, 0, "the places are taken; passes are not theirs");
        g.expect_done();
        drop(data);
        g.expect_data(None, 2);
        assert!(g.admit_at(ip(7), t).is_ok() && g.admit_at(ip(7), t).is_ok());
    }

    #[test]
    fn one_address_never_takes_every_place() {
        // RLIMIT_NOFILE 256: everything is reserve, 4 places, 1 per address.
        let g = Gate::new(256);
        let t = Instant::now();
        let flood: Vec<Permit> = (0..500).filter_map(|_| g.admit_at(ip(9), t).ok()).collect();
        assert_eq!(flood.len(), 1);
        assert!(g.admit_at(ip(1), t).is_ok(), "the controller still gets in");
        assert!(g.admit_at(None, t).is_ok(), "so does the local socket");
    }

    #[test]
    fn a_source_that_connects_too_fast_is_slowed_down() {
        let g = Gate::new(1 << 20);
        let t = Instant::now();
        let mut ok = 0;
        for _ in 0..200 {
            if let Ok(p) = g.admit_at(ip(1), t) {
                ok += 1;
                drop(p);
            }
        }
        assert_eq!(ok, BURST as usize, "a burst, then nothing");
        assert!(g.admit_at(ip(1), t + Duration::from_millis(100)).is_ok());
        assert!(g.take_refusals().unwrap().contains("connecting too fast"));
        assert!(g.take_refusals().is_none(), "counts are taken once");
    }

    #[test]
    fn wrong_tokens_ban_the_address_longer_each_time() {
        let g = Gate::new(1024);
        let t = Instant::now();
        assert_eq!(g.auth_failed_at(ip(1), t), Duration::from_secs(1));
        assert_eq!(g.admit_at(ip(1), t).unwrap_err(), Refusal::Banned);
        assert!(
            g.admit_at(ip(2), t).is_ok(),
            "other addresses are not banned"
        );
        let t2 = t + Duration::from_secs(2);
        assert!(g.admit_at(ip(1), t2).is_ok());
        assert_eq!(g.auth_failed_at(ip(1), t2), Duration::from_secs(2));
        for _ in 0..20 {
            g.auth_failed_at(ip(1), t2);
        }
        assert_eq!(g.auth_failed_at(ip(1), t2), MAX_BAN);
        g.auth_ok(ip(1));
        assert!(g.admit_at(ip(1), t2).is_ok());
    }
}

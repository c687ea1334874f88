//! Liveness of the node pair's TCP connections, decided by the kernel.
//!
//! A peer whose host vanishes (link down, namespace deleted, laptop off the
//! VPN) sends no FIN or RST: without help, a blocked read waits forever. Every
//! control and data socket therefore gets TCP keepalive (probe after
//! [`KEEPALIVE_IDLE`] of silence, every [`KEEPALIVE_INTERVAL`],
//! [`KEEPALIVE_COUNT`] times) and `TCP_USER_TIMEOUT` ([`USER_TIMEOUT`]: data
//! unacknowledged that long aborts the connection). A vanished peer is then
//! noticed within about 10 s whatever the application is doing, while a peer
//! that is merely busy keeps acknowledging and is never called lost.

use socket2::{SockRef, TcpKeepalive};
use std::os::fd::AsFd;
use std::time::Duration;

/// Silence before the first keepalive probe.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(3);
/// Between keepalive probes.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(2);
/// Unanswered probes before the connection is dropped.
pub const KEEPALIVE_COUNT: u32 = 3;
/// Longest time sent data may stay unacknowledged.
pub const USER_TIMEOUT: Duration = Duration::from_secs(10);

/// Turn on keepalive and the user timeout on a TCP socket.
pub fn keep_alive(sock: &impl AsFd) -> std::io::Result<()> {
    let s = SockRef::from(sock);
    s.set_tcp_keepalive(
        &TcpKeepalive::new()
            .with_time(KEEPALIVE_IDLE)
            .with_interval(KEEPALIVE_INTERVAL)
            .with_retries(KEEPALIVE_COUNT),
    )?;
    s.set_tcp_user_timeout(Some(USER_TIMEOUT))
}

/// The process's open-file limit (soft, hard).
pub fn nofile_limit() -> (u64, u64) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit the kernel writes into.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return (1024, 1024);
    }
    (r.rlim_cur, r.rlim_max)
}

/// Raise the open-file soft limit to the hard limit (a test with thousands
/// of connections needs three descriptors each); returns the new soft limit.
pub fn raise_nofile_limit() -> u64 {
    let (soft, hard) = nofile_limit();
    if soft >= hard {
        return soft;
    }
    let r = libc::rlimit {
        rlim_cur: hard,
        rlim_max: hard,
    };
    // SAFETY: `r` is a valid rlimit; raising the soft limit up to the hard
    // one needs no privilege.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } == 0 {
        hard
    } else {
        soft
    }
}

/// Descriptors this process has open now (None when /proc is unreadable).
pub fn open_fds() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_reach_the_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        keep_alive(&c).unwrap();
        let s = SockRef::from(&c);
        assert!(s.keepalive().unwrap());
        assert_eq!(s.tcp_keepalive_time().unwrap(), KEEPALIVE_IDLE);
        assert_eq!(s.tcp_user_timeout().unwrap(), Some(USER_TIMEOUT));
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let (_, hard) = nofile_limit();
        assert_eq!(raise_nofile_limit(), hard);
        assert_eq!(nofile_limit().0, hard);
        assert!(open_fds().unwrap() > 2);
    }
}

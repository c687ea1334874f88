//! TCP_INFO of engine sockets.
//!
//! libc's `tcp_info` stops at `tcpi_total_retrans`, before the fields that
//! matter most here (delivery rate, busy/rwnd/sndbuf-limited time), so we
//! declare the kernel's layout (include/uapi/linux/tcp.h) up to
//! `tcpi_rcv_wnd`. The kernel copies min(our size, its size) and reports the
//! length; fields beyond that length are reported as absent, not as zero.

use serde::{Deserialize, Serialize};
use std::os::fd::AsRawFd;

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    flags: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,
    rcv_ooopack: u32,
    snd_wnd: u32,
    rcv_wnd: u32,
}

/// The TCP_INFO fields wirescope reports, per socket.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TcpInfo {
    /// Smoothed RTT (µs).
    pub rtt_us: u32,
    /// RTT variance (µs).
    pub rttvar_us: u32,
    /// Minimum RTT seen (µs), kernel ≥ 4.6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rtt_us: Option<u32>,
    /// Congestion window (segments).
    pub snd_cwnd: u32,
    /// Sender MSS (bytes).
    pub snd_mss: u32,
    /// Retransmitted segments over the connection's life.
    pub total_retrans: u32,
    /// Receive buffer space the kernel autotuned to (bytes).
    pub rcv_space: u32,
    /// Delivery rate estimate (bit/s), kernel ≥ 4.9.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate_bps: Option<u64>,
    /// Bytes written but not yet sent (bytes), kernel ≥ 4.6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notsent_bytes: Option<u32>,
    /// Time busy sending (µs), kernel ≥ 4.10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_us: Option<u64>,
    /// Time limited by the peer's receive window (µs), kernel ≥ 4.10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rwnd_limited_us: Option<u64>,
    /// Time limited by our send buffer (µs), kernel ≥ 4.10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf_limited_us: Option<u64>,
    /// Peer's advertised window after scaling (bytes), kernel ≥ 6.2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snd_wnd: Option<u32>,
}

macro_rules! end_of {
    ($f:ident) => {
        std::mem::offset_of!(RawTcpInfo, $f) + std::mem::size_of_val(&RawTcpInfo::default().$f)
    };
}

/// The raw TCP_INFO of `sock` and how many bytes of it the kernel filled
/// (older kernels fill fewer fields).
fn read_raw(sock: &impl AsRawFd) -> std::io::Result<(RawTcpInfo, usize)> {
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: raw is a plain-old-data buffer of `len` bytes; the kernel writes at most len.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut RawTcpInfo).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((raw, len as usize))
}

/// Read TCP_INFO of `sock`.
pub fn read(sock: &impl AsRawFd) -> std::io::Result<TcpInfo> {
    let (raw, len) = read_raw(sock)?;
    let has = |end: usize| len >= end;
    Ok(TcpInfo {
        rtt_us: raw.rtt,
        rttvar_us: raw.rttvar,
        min_rtt_us: has(end_of!(min_rtt)).then_some(raw.min_rtt),
        snd_cwnd: raw.snd_cwnd,
        snd_mss: raw.snd_mss,
        total_retrans: raw.total_retrans,
        rcv_space: raw.rcv_space,
        delivery_rate_bps: has(end_of!(delivery_rate))
            .then_some(raw.delivery_rate.saturating_mul(8)),
        notsent_bytes: has(end_of!(notsent_bytes)).then_some(raw.notsent_bytes),
        busy_us: has(end_of!(busy_time)).then_some(raw.busy_time),
        rwnd_limited_us: has(end_of!(rwnd_limited)).then_some(raw.rwnd_limited),
        sndbuf_limited_us: has(end_of!(sndbuf_limited)).then_some(raw.sndbuf_limited),
        snd_wnd: has(end_of!(snd_wnd)).then_some(raw.snd_wnd),
    })
}

/// Whether the kernel still hears from the other end of a TCP connection:
/// what decides that a silent peer is gone rather than busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// The connection is ESTABLISHED (or closing normally: still ours to read).
    pub established: bool,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// Milliseconds since the last ACK arrived.
    pub last_ack_recv_ms: u32,
}

impl Liveness {
    /// True when the peer's kernel acknowledged everything, or did so within `limit`.
    pub fn acknowledging(&self, limit: std::time::Duration) -> bool {
        self.established
            && (self.unacked == 0 || u128::from(self.last_ack_recv_ms) <= limit.as_millis())
    }
}

/// Read the liveness fields of TCP_INFO of `sock`.
pub fn liveness(sock: &impl AsRawFd) -> std::io::Result<Liveness> {
    let (raw, _) = read_raw(sock)?;
    // TCP_ESTABLISHED = 1, TCP_CLOSE_WAIT = 8 (the peer closed; we may still read).
    Ok(Liveness {
        established: raw.state == 1 || raw.state == 8,
        unacked: raw.unacked,
        last_ack_recv_ms: raw.last_ack_recv,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn layout_matches_uapi_offsets() {
        // Offsets from include/uapi/linux/tcp.h (stable ABI).
        assert_eq!(std::mem::offset_of!(RawTcpInfo, rto), 8);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, total_retrans), 100);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, pacing_rate), 104);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, delivery_rate), 160);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, busy_time), 168);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, snd_wnd), 228);
    }

    #[test]
    fn reads_a_loopback_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[1u8; 100_000]).unwrap();
        let mut buf = vec![0u8; 100_000];
        s.read_exact(&mut buf).unwrap();
        let i = read(&c).unwrap();
        assert!(i.snd_mss > 0);
        assert!(i.snd_cwnd > 0);
        assert!(i.delivery_rate_bps.is_some());
    }
}

//! The test's frames: Ethernet / IPv4 / UDP between the pair's addresses,
//! and the 18-byte stamp at the start of the UDP payload that lets the sink
//! count loss, reordering and duplicates per flow.
//!
//! Layout (offsets in the frame, the FCS is the NIC's and not written):
//!
//! ```text
//!  0  Ethernet: dst MAC, src MAC, type 0x0800                      14 B
//! 14  IPv4: 20 B, DF, TTL 64, checksum filled in (no options)      20 B
//! 34  UDP: src port SRC_PORT_BASE + flow, dst port, checksum 0       8 B
//! 42  stamp: "WS", flow id u16, sequence u48, send time u64 (ns)  18 B
//! 60  zeros up to the frame size minus the FCS
//! ```
//!
//! The stamp is little-endian (both ends are wirescope) and fits exactly
//! in the smallest frame: 64 B − 4 B FCS − 42 B headers = 18 B. A 48-bit
//! sequence wraps after 2.8·10¹⁴ frames of one flow — 93 days at 35 Mpps.
//! The send time is `CLOCK_REALTIME` read once per batch, so it says when
//! the batch was handed to the kernel; comparing it across hosts needs
//! synchronised clocks (on the local pair both ends share one).
//!
//! Pure functions over byte slices: no sockets, no clocks.

use super::spec::SRC_PORT_BASE;
use std::net::Ipv4Addr;

/// Ethernet + IPv4 + UDP headers.
pub const HEADERS: usize = 42;
/// Offset of the stamp in the frame.
pub const STAMP_OFFSET: usize = HEADERS;
/// Bytes of the stamp.
pub const STAMP_LEN: usize = 18;
/// The stamp's magic.
pub const MAGIC: [u8; 2] = *b"WS";
/// The largest sequence number (48 bits).
pub const SEQ_MASK: u64 = (1 << 48) - 1;

/// A MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Mac(pub [u8; 6]);

impl std::fmt::Display for Mac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.map(|b| format!("{b:02x}")).join(":"))
    }
}

impl std::str::FromStr for Mac {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || format!("'{s}' is not a MAC address (e.g. 02:00:00:00:00:01)");
        let bytes: Option<Vec<u8>> = s
            .split(':')
            .map(|p| u8::from_str_radix(p, 16).ok().filter(|_| p.len() == 2))
            .collect();
        bytes
            .and_then(|b| b.try_into().ok())
            .map(Mac)
            .ok_or_else(err)
    }
}

/// What the stamp of one frame says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Flow id.
    pub flow: u16,
    /// Sequence number within the flow, from 0.
    pub seq: u64,
    /// Send time, ns since the Unix epoch (per batch).
    pub tx_ns: u64,
}

/// Source and destination UDP ports of flow `flow`.
pub fn ports(flow: u16, dst_port: u16) -> (u16, u16) {
    (SRC_PORT_BASE.wrapping_add(flow), dst_port)
}

/// Builds the frames of one test: the fixed part of every flow's frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameBuilder {
    /// Source MAC (the generator's interface).
    pub src_mac: Mac,
    /// Destination MAC (the sink's interface).
    pub dst_mac: Mac,
    /// Source address.
    pub src_ip: Ipv4Addr,
    /// Destination address.
    pub dst_ip: Ipv4Addr,
    /// Destination UDP port.
    pub dst_port: u16,
    /// Bytes written per frame: the frame size minus the FCS (≥ 60).
    pub wire_len: usize,
}

impl FrameBuilder {
    /// The frame of `flow` with sequence 0 and send time 0.
    pub fn template(&self, flow: u16) -> Vec<u8> {
        let len = self.wire_len.max(HEADERS + STAMP_LEN);
        let mut f = vec![0u8; len];
        f[0..6].copy_from_slice(&self.dst_mac.0);
        f[6..12].copy_from_slice(&self.src_mac.0);
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip_len = (len - 14) as u16;
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&self.src_ip.octets());
        ip[16..20].copy_from_slice(&self.dst_ip.octets());
        let sum = ipv4_checksum(ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        let (sport, dport) = ports(flow, self.dst_port);
        let udp = &mut f[34..42];
        udp[0..2].copy_from_slice(&sport.to_be_bytes());
        udp[2..4].copy_from_slice(&dport.to_be_bytes());
        udp[4..6].copy_from_slice(&(ip_len - 20).to_be_bytes());
        // UDP checksum 0: none (allowed for IPv4), so a stamp is two stores.
        write_stamp_header(&mut f[STAMP_OFFSET..], flow);
        f
    }

    /// UDP payload bytes (for the sendmmsg path, where the kernel writes the headers).
    pub fn payload_len(&self) -> usize {
        self.wire_len.max(HEADERS + STAMP_LEN) - HEADERS
    }
}

/// Write the magic and the flow id at the start of a stamp.
pub fn write_stamp_header(payload: &mut [u8], flow: u16) {
    payload[0..2].copy_from_slice(&MAGIC);
    payload[2..4].copy_from_slice(&flow.to_le_bytes());
}

/// Write sequence and send time into the stamp at the start of `payload`
/// (whose magic and flow id are already there).
#[inline]
pub fn stamp_payload(payload: &mut [u8], seq: u64, tx_ns: u64) {
    let s = (seq & SEQ_MASK).to_le_bytes();
    payload[4..10].copy_from_slice(&s[..6]);
    payload[10..18].copy_from_slice(&tx_ns.to_le_bytes());
}

/// Write sequence and send time into a whole frame built by [`FrameBuilder`].
#[inline]
pub fn stamp_frame(frame: &mut [u8], seq: u64, tx_ns: u64) {
    stamp_payload(&mut frame[STAMP_OFFSET..], seq, tx_ns);
}

/// Read a stamp from a UDP payload.
#[inline]
pub fn parse_payload(p: &[u8]) -> Option<Stamp> {
    if p.len() < STAMP_LEN || p[0..2] != MAGIC {
        return None;
    }
    let mut s = [0u8; 8];
    s[..6].copy_from_slice(&p[4..10]);
    let mut t = [0u8; 8];
    t.copy_from_slice(&p[10..18]);
    Some(Stamp {
        flow: u16::from_le_bytes([p[2], p[3]]),
        seq: u64::from_le_bytes(s),
        tx_ns: u64::from_le_bytes(t),
    })
}

/// Read the stamp of a whole Ethernet frame; None for anything that is not
/// an IPv4/UDP frame to `dst_port` carrying a stamp.
#[inline]
pub fn parse_frame(f: &[u8], dst_port: u16) -> Option<Stamp> {
    if f.len() < HEADERS + STAMP_LEN || f[12..14] != [0x08, 0x00] {
        return None;
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    if f[14] >> 4 != 4 || ihl < 20 || f[23] != 17 {
        return None;
    }
    let udp = 14 + ihl;
    if f.len() < udp + 8 + STAMP_LEN || f[udp + 2..udp + 4] != dst_port.to_be_bytes() {
        return None;
    }
    parse_payload(&f[udp + 8..])
}

/// The Internet checksum of an IPv4 header whose checksum field is 0.
pub fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder(wire_len: usize) -> FrameBuilder {
        FrameBuilder {
            src_mac: "02:00:00:00:00:01".parse().unwrap(),
            dst_mac: "02:00:00:00:00:02".parse().unwrap(),
            src_ip: Ipv4Addr::new(198, 18, 0, 1),
            dst_ip: Ipv4Addr::new(198, 18, 0, 2),
            dst_port: 9,
            wire_len,
        }
    }

    #[test]
    fn smallest_frame_has_exactly_the_stamp_as_payload() {
        let b = builder(60);
        let mut f = b.template(7);
        assert_eq!(f.len(), 60);
        assert_eq!(b.payload_len(), STAMP_LEN);
        stamp_frame(&mut f, 123_456_789, 42);
        assert_eq!(
            parse_frame(&f, 9),
            Some(Stamp {
                flow: 7,
                seq: 123_456_789,
                tx_ns: 42
            })
        );
        // Headers as a packet parser would read them.
        assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 2]);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 46, "IPv4 total length");
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 26, "UDP length");
        assert_eq!(u16::from_be_bytes([f[34], f[35]]), SRC_PORT_BASE + 7);
        // A valid header checksums to zero.
        assert_eq!(ipv4_checksum(&f[14..34]), 0);
    }

    #[test]
    fn jumbo_frames_and_wrong_frames() {
        let b = builder(8996);
        let f = b.template(1);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 8982);
        assert!(parse_frame(&f, 9).is_some());
        assert!(parse_frame(&f, 10).is_none(), "other port");
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(parse_frame(&arp, 9).is_none());
        let mut nomagic = f.clone();
        nomagic[STAMP_OFFSET] = b'X';
        assert!(parse_frame(&nomagic, 9).is_none());
        assert!(parse_frame(&f[..50], 9).is_none(), "truncated");
    }

    #[test]
    fn sequence_is_48_bits() {
        let mut p = [0u8; STAMP_LEN];
        write_stamp_header(&mut p, 65535);
        stamp_payload(&mut p, SEQ_MASK + 5, u64::MAX);
        let s = parse_payload(&p).unwrap();
        assert_eq!((s.flow, s.seq, s.tx_ns), (65535, 4, u64::MAX));
    }

    #[test]
    fn macs_parse_and_print() {
        let m: Mac = "aa:BB:0c:00:00:ff".parse().unwrap();
        assert_eq!(m.to_string(), "aa:bb:0c:00:00:ff");
        assert!("aa:bb".parse::<Mac>().is_err());
        assert!("aa:bb:cc:dd:ee:ff:00".parse::<Mac>().is_err());
        assert!("zz:bb:cc:dd:ee:ff".parse::<Mac>().is_err());
    }
}

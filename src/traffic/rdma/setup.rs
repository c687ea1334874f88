//! The connection-setup message of an RDMA test point ([`RdmaSetup`]): what
//! each end tells the other so the RC queue pairs can be connected — per QP
//! the QPN, PSN, rkey, buffer address and length; per port the LID (IB) or
//! GID (RoCE) and the active MTU. It travels as the `setup` of `Start` and
//! `Accepting` over the authenticated control channel; there is no extra port.
//!
//! [`RdmaSetup::check_remote`] is what a receiver runs before it programs its
//! QPs with the peer's values: a malformed or mismatched message (wrong
//! version, QP count, MTU, link layer, a zero rkey, a buffer that is not the
//! size the spec implies) is refused with the reason, never used.

use super::spec::{RdmaSpec, IB_MTUS};
use serde::{Deserialize, Serialize};
use std::net::Ipv6Addr;

/// Version of the setup message; both ends must agree.
pub const SETUP_VERSION: u32 = 1;

/// The link layer the setup's addresses are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Fabric {
    /// InfiniBand: LIDs.
    Infiniband,
    /// RoCE: GIDs.
    Ethernet,
}

/// One QP's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QpEndpoint {
    /// QP number (24 bits).
    pub qpn: u32,
    /// Initial packet sequence number (24 bits).
    pub psn: u32,
    /// Remote key of the QP's buffer.
    pub rkey: u32,
    /// Virtual address of the QP's buffer.
    pub addr: u64,
    /// Length of the QP's buffer.
    pub len: u64,
}

/// Everything one end sends the other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RdmaSetup {
    /// [`SETUP_VERSION`].
    pub version: u32,
    /// Device name (for messages).
    pub device: String,
    /// Port number.
    pub port: u8,
    /// Link layer of that port.
    pub fabric: Fabric,
    /// LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// GID of the local end (RoCE; optional on IB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<Ipv6Addr>,
    /// GID index used locally (for messages and rdma.gid-v1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid_index: Option<u32>,
    /// Active MTU of the port (bytes).
    pub mtu: u32,
    /// One per QP, by QP index.
    pub qps: Vec<QpEndpoint>,
}

/// Why a received setup was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    /// Version differs.
    #[error("rdma setup version {got} from {peer}, this end speaks {want}: run the same wirescope version on both hosts")]
    Version {
        /// Peer device.
        peer: String,
        /// Received.
        got: u32,
        /// Ours.
        want: u32,
    },
    /// Wrong number of QPs.
    #[error("rdma setup from {peer} has {got} QPs, the test has {want}")]
    QpCount {
        /// Peer device.
        peer: String,
        /// Received.
        got: usize,
        /// Expected.
        want: u32,
    },
    /// A field is out of its range.
    #[error("rdma setup from {peer}: {what}")]
    Invalid {
        /// Peer device.
        peer: String,
        /// What is wrong.
        what: String,
    },
    /// The two ends cannot talk (link layer, MTU).
    #[error("rdma setup from {peer} does not match this end: {what}")]
    Mismatch {
        /// Peer device.
        peer: String,
        /// What differs.
        what: String,
    },
}

/// What both ends agreed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agreed {
    /// Path MTU (bytes): the smaller active MTU, or the spec's when smaller still.
    pub path_mtu: u32,
}

const QPN_MASK: u32 = 0x00FF_FFFF;

impl RdmaSetup {
    /// Check a setup received from the peer against the spec and our own
    /// setup; returns the path MTU to program.
    pub fn check_remote(&self, spec: &RdmaSpec, local: &RdmaSetup) -> Result<Agreed, SetupError> {
        if self.version != SETUP_VERSION {
            return Err(SetupError::Version {
                peer: self.peer_name(),
                got: self.version,
                want: SETUP_VERSION,
            });
        }
        self.check_link(spec, local)?;
        self.check_qps(spec)?;
        let path_mtu = [Some(self.mtu), Some(local.mtu), spec.mtu]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(1024);
        Ok(Agreed { path_mtu })
    }

    /// The device, QP count, MTU and address (LID or GID) against the test
    /// and this side's setup.
    fn check_link(&self, spec: &RdmaSpec, local: &RdmaSetup) -> Result<(), SetupError> {
        if self.device.len() > 64 {
            return Err(self.invalid("device name longer than 64 bytes".into()));
        }
        if self.qps.len() != spec.qps as usize {
            return Err(SetupError::QpCount {
                peer: self.peer_name(),
                got: self.qps.len(),
                want: spec.qps,
            });
        }
        if !IB_MTUS.contains(&self.mtu) {
            return Err(self.invalid(format!(
                "MTU {} is not an RDMA MTU (256, 512, 1024, 2048, 4096)",
                self.mtu
            )));
        }
        if let Some(want) = spec.mtu {
            if want > self.mtu || want > local.mtu {
                return Err(self.mismatch(format!(
                    "the test asks for MTU {want} but the active MTUs are {} here and {} there",
                    local.mtu, self.mtu
                )));
            }
        }
        if self.fabric != local.fabric {
            return Err(self.mismatch(format!(
                "link layer {:?} there, {:?} here",
                self.fabric, local.fabric
            )));
        }
        match self.fabric {
            Fabric::Infiniband if self.lid == 0 || self.lid >= 0xC000 => {
                return Err(self.invalid(format!("LID {:#x} is not a unicast LID", self.lid)))
            }
            Fabric::Ethernet => match self.gid {
                None => return Err(self.invalid("RoCE needs a GID and none was sent".into())),
                Some(g) if g.is_unspecified() => {
                    return Err(self.invalid("GID is all zeros".into()))
                }
                Some(g) if g.is_multicast() => {
                    return Err(self.invalid(format!("GID {g} is multicast")))
                }
                _ => {}
            },
            _ => {}
        }
        Ok(())
    }

    /// Each QP: its number, first PSN, memory key and buffer.
    fn check_qps(&self, spec: &RdmaSpec) -> Result<(), SetupError> {
        let want_len = spec.buffer_len();
        for (i, q) in self.qps.iter().enumerate() {
            if q.qpn & !QPN_MASK != 0 || q.qpn < 2 {
                return Err(self.invalid(format!(
                    "QP {i}: QPN {:#x} is not a 24-bit RC QP number",
                    q.qpn
                )));
            }
            if q.psn & !QPN_MASK != 0 {
                return Err(self.invalid(format!("QP {i}: PSN {:#x} is wider than 24 bits", q.psn)));
            }
            if spec.op.remote_memory() && q.rkey == 0 {
                return Err(self.invalid(format!(
                    "QP {i}: rkey is 0; an RDMA {} needs the peer's memory key",
                    spec.op.name()
                )));
            }
            if q.len != want_len {
                return Err(self.invalid(format!(
                    "QP {i}: buffer length {} B, the test's buffers are {want_len} B",
                    q.len
                )));
            }
            if q.addr == 0 || q.addr.checked_add(q.len).is_none() {
                return Err(self.invalid(format!(
                    "QP {i}: buffer address {:#x} + {} B is not a valid range",
                    q.addr, q.len
                )));
            }
        }
        Ok(())
    }

    /// How errors name the other side.
    fn peer_name(&self) -> String {
        if self.device.is_empty() {
            "the peer".to_string()
        } else {
            format!("peer device {}", self.device)
        }
    }

    fn invalid(&self, what: String) -> SetupError {
        SetupError::Invalid {
            peer: self.peer_name(),
            what,
        }
    }

    fn mismatch(&self, what: String) -> SetupError {
        SetupError::Mismatch {
            peer: self.peer_name(),
            what,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::rdma::spec::{RdmaMode, RdmaOp};
    use crate::units::Bytes;

    fn spec() -> RdmaSpec {
        let mut s = RdmaSpec::perftest_defaults(RdmaOp::Write, RdmaMode::Bw);
        s.qps = 2;
        s.size = Bytes(4096);
        s
    }

    fn setup(mtu: u32, gid: &str) -> RdmaSetup {
        let s = spec();
        RdmaSetup {
            version: SETUP_VERSION,
            device: "mlx5_0".into(),
            port: 1,
            fabric: Fabric::Ethernet,
            lid: 0,
            gid: Some(gid.parse().unwrap()),
            gid_index: Some(3),
            mtu,
            qps: (0..2)
                .map(|i| QpEndpoint {
                    qpn: 0x120 + i,
                    psn: 0xabcdef,
                    rkey: 0x1234,
                    addr: 0x7f00_0000_0000 + u64::from(i) * 0x10000,
                    len: s.buffer_len(),
                })
                .collect(),
        }
    }

    #[test]
    fn round_trip_through_json() {
        let a = setup(4096, "::ffff:198.18.0.1");
        let text = serde_json::to_string(&a).unwrap();
        assert!(text.contains("\"gid\":\"::ffff:198.18.0.1\""), "{text}");
        let b: RdmaSetup = serde_json::from_str(&text).unwrap();
        assert_eq!(a, b);
        let local = setup(1024, "::ffff:198.18.0.2");
        // Path MTU: the smaller active MTU.
        assert_eq!(b.check_remote(&spec(), &local).unwrap().path_mtu, 1024);
    }

    #[test]
    fn refusals() {
        let local = setup(4096, "::ffff:198.18.0.2");
        let refuse = |f: &dyn Fn(&mut RdmaSetup), s: &RdmaSpec| {
            let mut r = setup(4096, "::ffff:198.18.0.1");
            f(&mut r);
            r.check_remote(s, &local).unwrap_err().to_string()
        };
        let s = spec();
        assert!(refuse(&|r| r.version = 2, &s).contains("version 2"));
        assert!(refuse(&|r| r.mtu = 1500, &s).contains("MTU 1500 is not an RDMA MTU"));
        assert!(refuse(&|r| r.qps[1].rkey = 0, &s).contains("rkey is 0"));
        assert!(refuse(&|r| r.qps[0].len = 1 << 40, &s).contains("buffer length"));
        assert!(refuse(&|r| r.qps[0].len = 4096, &s).contains("buffer length 4096"));
        assert!(refuse(&|r| r.qps[0].addr = u64::MAX - 10, &s).contains("not a valid range"));
        assert!(refuse(&|r| r.qps[0].qpn = 0x0100_0000, &s).contains("24-bit"));
        assert!(refuse(&|r| r.qps[0].psn = 0x0100_0000, &s).contains("PSN"));
        assert!(refuse(&|r| r.qps.pop().map(|_| ()).unwrap_or(()), &s)
            .contains("has 1 QPs, the test has 2"));
        assert!(refuse(&|r| r.gid = None, &s).contains("needs a GID"));
        assert!(refuse(&|r| r.gid = Some(Ipv6Addr::UNSPECIFIED), &s).contains("all zeros"));
        assert!(refuse(&|r| r.fabric = Fabric::Infiniband, &s).contains("link layer"));
        // The test asks for 4096 but the peer's port runs 1024.
        let mut want4k = spec();
        want4k.mtu = Some(4096);
        assert!(refuse(&|r| r.mtu = 1024, &want4k).contains("asks for MTU 4096"));
        // SEND does not use the peer's rkey: 0 is accepted there.
        let mut send = spec();
        send.op = RdmaOp::Send;
        let mut r = setup(4096, "::ffff:198.18.0.1");
        r.qps[0].rkey = 0;
        assert!(r.check_remote(&send, &local).is_ok());
        // InfiniBand: a LID is required.
        let mut ib_local = local.clone();
        ib_local.fabric = Fabric::Infiniband;
        let mut r = setup(4096, "::ffff:198.18.0.1");
        r.fabric = Fabric::Infiniband;
        assert!(r
            .check_remote(&s, &ib_local)
            .unwrap_err()
            .to_string()
            .contains("LID 0x0"));
        r.lid = 7;
        assert!(r.check_remote(&s, &ib_local).is_ok());
    }

    #[test]
    fn malformed_json_is_refused_by_serde() {
        assert!(serde_json::from_str::<RdmaSetup>(r#"{"version":1}"#).is_err());
        assert!(serde_json::from_str::<RdmaSetup>(
            r#"{"version":1,"device":"x","port":1,"fabric":"ethernet","lid":0,"gid":"not-a-gid","mtu":1024,"qps":[]}"#
        )
        .is_err());
        assert!(serde_json::from_str::<RdmaSetup>(
            r#"{"version":1,"device":"x","port":300,"fabric":"ethernet","lid":0,"mtu":1024,"qps":[]}"#
        )
        .is_err());
    }
}

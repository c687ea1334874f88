//! The TCP engine's test description: [`TcpMode`] and [`TcpSpec`], plain
//! data that both ends agree on, and its answers to what the layers above
//! ask of a test ([`EngineSpecOps`]). The data socket and the engine those
//! answers make are the engine's (`mod.rs`); nothing here does I/O.

use crate::traffic::limits::{MemoryNeed, SpecError};
use crate::traffic::options::{SweepParam, SweepPoint};
use crate::traffic::{ConnRole, Engine, EngineError, EngineHost, EngineKind, EngineSpecOps, Side};
use crate::units::{Bytes, CpuId};
use serde::{Deserialize, Serialize};
use socket2::Socket;
use std::net::{IpAddr, SocketAddr};

/// What the TCP engine does on its connections.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum TcpMode {
    /// Bulk transfer, one thread per stream (like iperf3).
    Stream,
    /// Both ends echo everything they receive (muduo/evpp pingpong); reports MiB/s.
    Pingpong,
    /// Closed-loop request/response with a latency histogram (like netperf TCP_RR).
    Rr,
}

impl TcpMode {
    /// Lower-case name as used on the command line and in logs.
    pub fn name(self) -> &'static str {
        match self {
            TcpMode::Stream => "stream",
            TcpMode::Pingpong => "pingpong",
            TcpMode::Rr => "rr",
        }
    }
}

/// What both ends of a TCP test point need to know. Travels to the agent
/// inside the control protocol's `Start`, as the `tcp` arm of [`EngineSpec`](crate::traffic::EngineSpec).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TcpSpec {
    /// Mode within the engine.
    pub mode: TcpMode,
    /// stream: streams per direction; pingpong/rr: connections.
    pub streams: u32,
    /// Worker threads per side for pingpong/rr (stream always uses one per stream).
    pub threads: u32,
    /// stream: bytes per write() call.
    pub len: Bytes,
    /// pingpong: message size; rr: request size.
    pub size: Bytes,
    /// rr: response size.
    pub resp_size: Bytes,
    /// rr: requests in flight per connection.
    pub depth: u32,
    /// SO_SNDBUF and SO_RCVBUF on every data socket (kernel doubles it).
    pub window: Option<Bytes>,
    /// TCP_MAXSEG.
    pub mss: Option<u32>,
    /// TCP_CONGESTION (e.g. cubic, bbr).
    pub congestion: Option<String>,
    /// MSG_ZEROCOPY on send.
    pub zerocopy: bool,
    /// MSG_TRUNC on receive: the kernel discards the data without copying it.
    pub skip_rx_copy: bool,
    /// stream: the agent sends, the controller receives.
    pub reverse: bool,
    /// stream: both directions at once, `streams` connections each.
    pub bidir: bool,
    /// CPUs for the controller's worker threads (round-robin); empty = unpinned.
    pub cpus: Vec<CpuId>,
    /// CPUs for the agent's worker threads; empty = unpinned.
    pub peer_cpus: Vec<CpuId>,
    /// stream: stop after this many bytes in total per direction.
    pub bytes: Option<Bytes>,
}

/// What the session, the plan, the faces and the diagnosis ask of a TCP
/// spec (see [`EngineSpecOps`]).
impl EngineSpecOps for TcpSpec {
    fn kind(&self) -> EngineKind {
        EngineKind::Tcp
    }

    fn mode_name(&self) -> &'static str {
        self.mode.name()
    }

    fn arrow(&self) -> &'static str {
        if self.bidir {
            "<->"
        } else if self.reverse {
            "<-"
        } else {
            "->"
        }
    }

    fn data_socket(&self, addr: &SocketAddr, conn: usize) -> Result<Socket, EngineError> {
        super::prepare_socket(self, addr, conn)
    }

    fn with_flows(&self, n: u32) -> String {
        match self.mode {
            TcpMode::Stream => format!("-P {n}"),
            _ => format!("-m {} --conns {n}", self.mode.name()),
        }
    }

    fn short(&self) -> String {
        match self.mode {
            TcpMode::Stream => format!("tcp stream -P {}", self.streams),
            _ => format!("tcp {} --conns {}", self.mode.name(), self.streams),
        }
    }

    fn label(&self) -> String {
        format!(
            "tcp {} streams={} len={} size={}",
            self.mode.name(),
            self.streams,
            self.len.0,
            self.size.0
        )
    }

    /// `--bidir`: one run measures both directions at once.
    fn both_ways_in_one_run(&self) -> bool {
        self.bidir
    }

    /// Worker threads unless given: one per connection, at most one per
    /// `online` CPU.
    fn settle_on_host(&mut self, online: &dyn Fn() -> usize, _usable: &dyn Fn() -> Vec<CpuId>) {
        if self.threads == 0 {
            let cpus = u32::try_from(online()).unwrap_or(u32::MAX);
            self.threads = self.streams.min(cpus).max(1);
        }
    }

    fn prepare(
        &self,
        side: Side,
        _toward: Option<IpAddr>,
        _host: &dyn EngineHost,
    ) -> Result<Box<dyn Engine>, EngineError> {
        Ok(Box::new(super::TcpEngine::new(self.clone(), side)))
    }

    /// Apply one sweep point: size is the bytes per write (stream) or the
    /// message size (rr/pingpong, the response too when it followed it);
    /// streams the connections. Other parameters are refused before.
    fn apply_sweep(&mut self, p: SweepPoint<'_>) {
        let v = p.value;
        match (p.param, self.mode) {
            (SweepParam::Size, TcpMode::Stream) => self.len = Bytes(v),
            (SweepParam::Size, _) => {
                if self.resp_size == self.size {
                    self.resp_size = Bytes(v);
                }
                self.size = Bytes(v);
            }
            (SweepParam::Streams, _) => self.streams = u32::try_from(v).unwrap_or(u32::MAX),
            // Refused for tcp by its validation.
            _ => {}
        }
    }

    /// Number of data connections the controller opens.
    fn connection_count(&self) -> usize {
        let n = self.streams as usize;
        if self.mode == TcpMode::Stream && self.bidir {
            2 * n
        } else {
            n
        }
    }

    /// The role of each data connection, by index, for `side`.
    fn conn_roles(&self, side: Side) -> Vec<ConnRole> {
        let controller_roles: Vec<ConnRole> = match self.mode {
            TcpMode::Stream => {
                let n = self.streams as usize;
                let fwd = if self.reverse {
                    ConnRole::Receiver
                } else {
                    ConnRole::Sender
                };
                let mut v = vec![fwd; n];
                if self.bidir {
                    let back = if self.reverse {
                        ConnRole::Sender
                    } else {
                        ConnRole::Receiver
                    };
                    v.extend(std::iter::repeat_n(back, n));
                }
                v
            }
            TcpMode::Pingpong | TcpMode::Rr => vec![ConnRole::Client; self.streams as usize],
        };
        match side {
            Side::Controller => controller_roles,
            Side::Agent => controller_roles
                .into_iter()
                .map(|r| match r {
                    ConnRole::Sender => ConnRole::Receiver,
                    ConnRole::Receiver => ConnRole::Sender,
                    ConnRole::Client => ConnRole::Server,
                    ConnRole::Server => ConnRole::Client,
                })
                .collect(),
        }
    }

    /// Limits a receiving agent enforces on a spec that came over the network
    /// (the controller's CLI checks the same ranges from the same constants,
    /// with friendlier messages).
    fn validate(&self) -> Result<(), SpecError> {
        use crate::traffic::limits::{
            check, MAX_CONNS, MAX_DEPTH, MAX_MSG, MAX_THREADS, MAX_WINDOW, MIN_WINDOW,
        };
        check("streams", u64::from(self.streams), 1, MAX_CONNS)?;
        check("threads", u64::from(self.threads), 0, MAX_THREADS)?;
        check("depth", u64::from(self.depth), 1, MAX_DEPTH)?;
        check("len", self.len.0, 1, MAX_MSG)?;
        check("size", self.size.0, 1, MAX_MSG)?;
        check("resp_size", self.resp_size.0, 1, MAX_MSG)?;
        if let Some(w) = self.window {
            check("window", w.0, MIN_WINDOW, MAX_WINDOW)?;
        }
        Ok(())
    }

    /// The buffers this side's workers allocate (see `stream.rs`, `echo.rs`).
    fn memory_needed(&self, side: Side) -> MemoryNeed {
        let roles = self.conn_roles(side);
        let n = roles.len() as u64;
        match self.mode {
            TcpMode::Stream => {
                let send = self.len.0;
                let recv = self.len.0.max(super::stream::MIN_RECV_BUF as u64);
                let senders = roles.iter().filter(|r| **r == ConnRole::Sender).count() as u64;
                let bytes = senders
                    .saturating_mul(send)
                    .saturating_add((n - senders).saturating_mul(recv));
                MemoryNeed {
                    bytes: Bytes(bytes),
                    what: format!("{n} stream(s) x {} buffers", Bytes(send.max(recv))),
                    smaller: "use fewer streams (-P) or a smaller --len".into(),
                }
            }
            TcpMode::Pingpong | TcpMode::Rr => {
                let per_conn = self.size.0.saturating_add(self.resp_size.0);
                let io = super::echo::IO_BUF as u64 * 2 * u64::from(self.threads.max(1));
                MemoryNeed {
                    bytes: Bytes(n.saturating_mul(per_conn).saturating_add(io)),
                    what: format!(
                        "{n} connection(s) x {} request+response buffers",
                        Bytes(per_conn)
                    ),
                    smaller: "use fewer connections (--conns) or smaller --size/--resp-size".into(),
                }
            }
        }
    }

    /// CPUs this side pins its threads to.
    fn cpus_for(&self, side: Side) -> &[CpuId] {
        match side {
            Side::Controller => &self.cpus,
            Side::Agent => &self.peer_cpus,
        }
    }

    /// True when small packets are the workload: rr and pingpong whose
    /// messages fit in one packet (`mtu` bytes) each way.
    fn small_packets_by_design(&self, mtu: f64) -> bool {
        self.mode != TcpMode::Stream && self.size.0.max(self.resp_size.0) as f64 <= mtu
    }

    /// True when the summary reports the MiB/s the client received
    /// (pingpong: muduo's figure).
    fn reports_mib_per_s(&self) -> bool {
        self.mode == TcpMode::Pingpong
    }

    fn bulk_transfer(&self) -> bool {
        self.mode == TcpMode::Stream
    }

    /// MSG_ZEROCOPY, for large writes of a stream.
    fn send_copy_fix(&self) -> Option<&'static str> {
        (self.mode == TcpMode::Stream).then_some(
            "wirescope run --zerocopy  # MSG_ZEROCOPY saves the send copy (large writes)",
        )
    }

    fn sends_zerocopy(&self) -> bool {
        self.zerocopy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(mode: TcpMode) -> TcpSpec {
        TcpSpec {
            mode,
            streams: 2,
            threads: 1,
            len: Bytes(1024),
            size: Bytes(64),
            resp_size: Bytes(64),
            depth: 1,
            window: None,
            mss: None,
            congestion: None,
            zerocopy: false,
            skip_rx_copy: false,
            reverse: false,
            bidir: false,
            cpus: vec![],
            peer_cpus: vec![],
            bytes: None,
        }
    }

    #[test]
    fn roles_mirror_between_sides() {
        let mut s = spec(TcpMode::Stream);
        s.bidir = true;
        let c = s.conn_roles(Side::Controller);
        let a = s.conn_roles(Side::Agent);
        assert_eq!(
            c,
            vec![
                ConnRole::Sender,
                ConnRole::Sender,
                ConnRole::Receiver,
                ConnRole::Receiver
            ]
        );
        assert_eq!(
            a,
            vec![
                ConnRole::Receiver,
                ConnRole::Receiver,
                ConnRole::Sender,
                ConnRole::Sender
            ]
        );
        s.reverse = true;
        s.bidir = false;
        assert_eq!(s.conn_roles(Side::Controller), vec![ConnRole::Receiver; 2]);
        assert_eq!(s.connection_count(), 2);
        let r = spec(TcpMode::Rr);
        assert_eq!(r.conn_roles(Side::Agent), vec![ConnRole::Server; 2]);
    }
}

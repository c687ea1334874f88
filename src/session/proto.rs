//! Control-protocol messages and their framing.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes of JSON
//! (one [`Msg`]). Frames above [`MAX_FRAME`] are refused before any byte of
//! the body is read, so a hostile or confused peer cannot make us allocate.
//!
//! Handshake (controller speaks first, so one port can also take data
//! connections, which start with [`DATA_MAGIC`] instead of a length):
//! `Hello{version}` → `Challenge{version, nonce_a}` → `Auth{nonce_c, mac_c}` →
//! `Welcome{mac_a, host}`; `mac_c = HMAC-SHA256(token, "controller" ‖ nonce_a ‖ nonce_c)`
//! and `mac_a` likewise with "agent", so each side proves it knows the token
//! without sending it. Since version 4 each nonce is the sender's fresh
//! X25519 public key share ([`super::auth::Ephemeral`], 32 bytes, hex). Any
//! refusal is a `Refused{reason}` frame, then close. These four frames are
//! plain; every frame after `Welcome`, both ways, is sealed with keys derived
//! from the X25519 shared secret, the token and both shares
//! ([`super::channel`]), so a recording stays closed to whoever steals the
//! token later.

use super::plan::TestPlan;
use crate::probe::ebpf::{EbpfHosts, EbpfMode, EbpfStatus};
use crate::probe::sample::{LatencySummary, Sample};
use crate::probe::system::HostInfo;
use crate::traffic::{ConnSnapshot, EngineSetup, EngineSpec, EngineTotals};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Version of the control protocol; both ends must speak the same (4: the
/// handshake nonces are ephemeral X25519 key shares — forward secrecy).
pub const PROTOCOL_VERSION: u32 = 4;
/// Largest accepted control frame after authentication (bytes of JSON): the
/// first Sample of a large host (hundreds of CPUs, thousands of NIC
/// counters, facts) fits with room to spare.
pub const MAX_FRAME: u32 = 16 << 20;
/// Largest frame accepted before authentication: hello and auth are tiny,
/// and an unauthenticated peer must not make the agent allocate much.
pub const MAX_HANDSHAKE_FRAME: u32 = 64 << 10;
/// First bytes of a data connection.
pub const DATA_MAGIC: [u8; 4] = *b"WSD3";
/// Default agent port.
pub const DEFAULT_PORT: u16 = 5310;

/// One control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Msg {
    /// controller → agent, first frame.
    Hello {
        /// Protocol version the controller speaks.
        version: u32,
        /// wirescope version of the controller.
        software: String,
    },
    /// agent → controller.
    Challenge {
        /// Protocol version the agent speaks.
        version: u32,
        /// The agent's ephemeral X25519 public key share: the nonce (hex).
        nonce: String,
    },
    /// controller → agent.
    Auth {
        /// The controller's ephemeral X25519 public key share: its nonce (hex).
        nonce: String,
        /// HMAC proof (hex).
        mac: String,
    },
    /// agent → controller: authenticated.
    Welcome {
        /// Agent's HMAC proof (hex).
        mac: String,
        /// Who the agent is.
        host: HostInfo,
    },
    /// agent → controller, then the agent closes.
    Refused {
        /// Why, for the user.
        reason: String,
    },
    /// controller → agent, optional, before the first test: which eBPF
    /// probes to attach on the agent's host for this session.
    Configure {
        /// The probe set (`by-peer` when the controller's probes count for
        /// the agent, on the same kernel).
        ebpf: EbpfMode,
    },
    /// agent → controller: what the agent's probes do now.
    Configured {
        /// eBPF status on the agent's host.
        ebpf: Option<EbpfStatus>,
    },
    /// controller → agent: prepare a test point.
    Start {
        /// What to run.
        test: TestParams,
    },
    /// agent → controller: open the data connections to this port.
    Accepting {
        /// TCP port for data connections.
        data_port: u16,
        /// The agent's part of the engine's setup exchange.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        setup: Option<EngineSetup>,
    },
    /// agent → controller: every data connection arrived.
    DataReady {},
    /// controller → agent: start the engine and the clock.
    Go {},
    /// controller → agent: an interval ended; take a Sample now. The
    /// controller owns the interval clock so both hosts' intervals line up
    /// and never drift apart.
    Tick {},
    /// agent → controller: one interval of the agent's host.
    Sample {
        /// The agent's Sample (host says "local" from its own view).
        sample: Box<Sample>,
    },
    /// controller → agent: finish gracefully.
    Stop {},
    /// agent → controller: the agent's final counters.
    Finished {
        /// Totals.
        result: SideResult,
    },
    /// either way: the test failed on the sender's side.
    Failed {
        /// What went wrong, for the user.
        error: String,
        /// The test as asked cannot run on the sender's host (a CPU it
        /// does not have, more threads than its interface has queues,
        /// frames above its MTU): a usage error, not a failure.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        usage: bool,
    },
    /// controller → agent: session over.
    Bye {},
    /// controller → agent, between tests: still here (the agent frees a
    /// session that says nothing for [`IDLE_LIMIT`]).
    Ping {},
    /// controller → agent, between tests: read or change the agent host's
    /// settings (changing needs `agent --allow-tuning`).
    Tune {
        /// What to do.
        req: Box<crate::tune::peer::TuneRequest>,
    },
    /// agent → controller: the answer to [`Msg::Tune`].
    Tuned {
        /// The answer.
        resp: Box<crate::tune::peer::TuneResponse>,
    },
    /// fleet coordinator → agent X, between tests: run this test against
    /// the agent at `peer` as its controller ([`super::pair`]).
    PairTest {
        /// Y's control address, `IP:PORT`.
        peer: String,
        /// What to run.
        test: Box<PairSpec>,
    },
    /// agent X → coordinator: what X's test against Y publishes, in order,
    /// ending with `End`.
    PairEvent {
        /// One event.
        event: Box<PairEvent>,
    },
}

/// How long an authenticated controller may stay silent between tests
/// before the agent ends its session (controllers ping every [`PING_EVERY`]).
pub const IDLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);
/// How often an idle controller pings.
pub const PING_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

impl Msg {
    /// The `type` tag, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Msg::Hello { .. } => "hello",
            Msg::Challenge { .. } => "challenge",
            Msg::Auth { .. } => "auth",
            Msg::Welcome { .. } => "welcome",
            Msg::Refused { .. } => "refused",
            Msg::Configure { .. } => "configure",
            Msg::Configured { .. } => "configured",
            Msg::Start { .. } => "start",
            Msg::Accepting { .. } => "accepting",
            Msg::DataReady {} => "data_ready",
            Msg::Go {} => "go",
            Msg::Tick {} => "tick",
            Msg::Sample { .. } => "sample",
            Msg::Stop {} => "stop",
            Msg::Finished { .. } => "finished",
            Msg::Failed { .. } => "failed",
            Msg::Bye {} => "bye",
            Msg::Ping {} => "ping",
            Msg::Tune { .. } => "tune",
            Msg::Tuned { .. } => "tuned",
            Msg::PairTest { .. } => "pair_test",
            Msg::PairEvent { .. } => "pair_event",
        }
    }
}

/// One test point as both ends run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestParams {
    /// Test number within the session (data connections name it, with a tag
    /// under the session's data key).
    pub id: u64,
    /// The engine's parameters; None to observe only (`wirescope watch --peer`).
    pub spec: Option<EngineSpec>,
    /// Sampling period (ms).
    pub interval_ms: u64,
    /// Warm-up not counted (ms).
    pub omit_ms: u64,
    /// Extra interfaces the agent should watch (`--peer-iface`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ifaces: Vec<String>,
    /// The controller's part of the engine's setup exchange.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<EngineSetup>,
    /// The first point of a plan carries the specs of the points after it:
    /// the agent checks them too (its CPUs) before anything runs, so a
    /// sweep's last point cannot be refused after the first ones ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub later: Vec<EngineSpec>,
}

/// One side's totals at the end of a point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct SideResult {
    /// Final counters of every connection.
    pub conns: Vec<ConnSnapshot>,
    /// Retransmitted segments per connection (TCP_INFO).
    pub retransmits: Vec<u32>,
    /// Seconds from Go until this side's engine finished.
    pub duration_s: f64,
    /// rr latency over the whole point (client side only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
    /// Engine error on this side, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The engine's own totals, when it has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<EngineTotals>,
}

/// The header of a data connection: magic, test id, connection index, and
/// a tag over both under the session's data key ([`super::channel`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHello {
    /// The test's id.
    pub test: u64,
    /// Connection index.
    pub index: u32,
    /// HMAC of test and index under the session's data key (truncated).
    pub tag: [u8; 16],
}

impl DataHello {
    /// Bytes after the magic.
    pub const REST: usize = 8 + 4 + 16;
    /// Wire size including the magic.
    pub const LEN: usize = 4 + Self::REST;

    /// Encode with the magic.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..4].copy_from_slice(&DATA_MAGIC);
        b[4..12].copy_from_slice(&self.test.to_be_bytes());
        b[12..16].copy_from_slice(&self.index.to_be_bytes());
        b[16..].copy_from_slice(&self.tag);
        b
    }

    /// Decode the bytes that follow the magic.
    pub fn decode_after_magic(b: &[u8; Self::REST]) -> Self {
        let mut test = [0u8; 8];
        test.copy_from_slice(&b[..8]);
        let mut tag = [0u8; 16];
        tag.copy_from_slice(&b[12..]);
        DataHello {
            test: u64::from_be_bytes(test),
            index: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            tag,
        }
    }
}

/// Control-protocol failures, each naming what the peer did.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    /// The socket failed.
    #[error("control connection: {0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection.
    #[error("the peer closed the control connection")]
    Closed,
    /// A frame exceeded [`MAX_FRAME`].
    #[error("control frame of {len} bytes exceeds the {max}-byte limit")]
    TooLarge {
        /// Announced length.
        len: u32,
        /// The limit.
        max: u32,
    },
    /// The first bytes are neither a frame nor a data connection.
    #[error("not a wirescope control connection (first bytes {0:?}); point only wirescope controllers at this port")]
    Garbage(String),
    /// A frame's body was not a valid message.
    #[error("malformed control frame: {0}")]
    BadJson(#[from] serde_json::Error),
    /// A valid message at the wrong time.
    #[error("unexpected '{got}' message while waiting for {expected}")]
    Unexpected {
        /// What we waited for.
        expected: &'static str,
        /// What came.
        got: &'static str,
    },
    /// Versions differ.
    #[error("protocol version mismatch: this side speaks {ours}, the peer {theirs}; upgrade both ends to the same wirescope release")]
    Version {
        /// Ours.
        ours: u32,
        /// Theirs.
        theirs: u32,
    },
    /// The token proofs did not match.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// The agent refused us.
    #[error("the agent refused the connection: {0}")]
    Refused(String),
    /// A step took too long.
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    /// A sealed frame could not be sealed or opened.
    #[error("{0}")]
    Sealed(String),
}

/// Check a frame length against `max`; `first` are the raw 4 bytes for the garbage message.
pub fn check_len(first: [u8; 4], max: u32) -> Result<u32, ProtoError> {
    let len = u32::from_be_bytes(first);
    if len > max {
        if first.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
            return Err(ProtoError::Garbage(
                String::from_utf8_lossy(&first).into_owned(),
            ));
        }
        return Err(ProtoError::TooLarge { len, max });
    }
    Ok(len)
}

/// Read one frame of at most `max` bytes whose 4 length bytes were already consumed.
pub async fn read_body<R: AsyncRead + Unpin>(
    r: &mut R,
    first: [u8; 4],
    max: u32,
) -> Result<Msg, ProtoError> {
    let len = check_len(first, max)?;
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body).await.map_err(eof_is_closed)?;
    Ok(serde_json::from_slice(&body)?)
}

/// Read one frame of at most `max` bytes.
pub async fn read_msg_max<R: AsyncRead + Unpin>(r: &mut R, max: u32) -> Result<Msg, ProtoError> {
    let mut first = [0u8; 4];
    r.read_exact(&mut first).await.map_err(eof_is_closed)?;
    read_body(r, first, max).await
}

/// Read one frame (authenticated session: up to [`MAX_FRAME`]).
pub async fn read_msg<R: AsyncRead + Unpin>(r: &mut R) -> Result<Msg, ProtoError> {
    read_msg_max(r, MAX_FRAME).await
}

/// Write one frame and flush it.
pub async fn write_msg<W: AsyncWrite + Unpin>(w: &mut W, msg: &Msg) -> Result<(), ProtoError> {
    let body = serde_json::to_vec(msg)?;
    let len = frame_len(body.len())?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    w.write_all(&frame).await?;
    w.flush().await?;
    Ok(())
}

/// A frame's length prefix for `len` bytes of body, at most [`MAX_FRAME`].
pub(crate) fn frame_len(len: usize) -> Result<u32, ProtoError> {
    u32::try_from(len)
        .ok()
        .filter(|l| *l <= MAX_FRAME)
        .ok_or(ProtoError::TooLarge {
            len: u32::try_from(len).unwrap_or(u32::MAX),
            max: MAX_FRAME,
        })
}

pub(crate) fn eof_is_closed(e: std::io::Error) -> ProtoError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        ProtoError::Closed
    } else {
        ProtoError::Io(e)
    }
}

// Fleet pair tests ([`super::pair`]): what travels between the coordinator and agent X.

/// A sweep asked of a fleet.
#[derive(Debug, thiserror::Error)]
#[error("a fleet runs one test point per pair; drop --sweep (sweep one pair with `wirescope run`)")]
pub struct SweepInFleet;

/// What one pair test runs (one point of a [`TestPlan`] without a sweep).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PairSpec {
    /// The engine and its options, as `run` resolved them.
    pub spec: EngineSpec,
    /// Time limit in milliseconds (0: until the byte budget is spent).
    pub time_ms: u64,
    /// Warm-up in milliseconds.
    pub omit_ms: u64,
    /// Sampling period in milliseconds.
    pub interval_ms: u64,
    /// eBPF probe set of both hosts.
    pub ebpf: EbpfMode,
}

impl PairSpec {
    /// The spec of a plan; a sweep is refused (a fleet runs one point per pair).
    pub fn of(plan: &TestPlan, ebpf: EbpfMode) -> Result<Self, SweepInFleet> {
        if plan.sweep.is_some() {
            return Err(SweepInFleet);
        }
        Ok(PairSpec {
            spec: plan.spec.clone(),
            time_ms: plan.time.map_or(0, |t| t.as_millis() as u64),
            omit_ms: plan.omit.as_millis() as u64,
            interval_ms: plan.interval.as_millis() as u64,
            ebpf,
        })
    }

    /// Back to the plan the driver runs.
    pub fn plan(&self) -> TestPlan {
        TestPlan {
            spec: self.spec.clone(),
            time: (self.time_ms > 0).then(|| Duration::from_millis(self.time_ms)),
            omit: Duration::from_millis(self.omit_ms),
            interval: Duration::from_millis(self.interval_ms.max(1)),
            sweep: None,
        }
    }
}

/// What X's controller published, as it travels to the coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PairEvent {
    /// X is connected to Y: who Y is and what both hosts' probes do.
    Ready {
        /// Y's host.
        peer: Box<HostInfo>,
        /// eBPF status of X (local) and Y (peer).
        ebpf: Box<EbpfHosts>,
    },
    /// One interval of both hosts.
    Interval {
        /// Interval index.
        index: u32,
        /// X's Sample.
        local: Option<Box<Sample>>,
        /// Y's Sample.
        peer: Option<Box<Sample>>,
    },
    /// The point ended.
    Done {
        /// X's totals.
        local: Box<SideResult>,
        /// Y's totals, when Y delivered them.
        peer: Option<Box<SideResult>>,
        /// How it ended.
        #[serde(flatten)]
        end: EndReason,
    },
    /// The test could not run (connection to Y, setup); `usage` when the
    /// options cannot run on these hosts.
    Failed {
        /// What went wrong.
        error: String,
        /// A usage error rather than a failure.
        #[serde(default)]
        usage: bool,
    },
    /// Nothing follows.
    End,
}

/// How a point ended (a pair test's travels to the coordinator as it is).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "end", content = "why", rename_all = "snake_case")]
pub enum EndReason {
    /// Time or byte limit reached.
    Completed,
    /// Ctrl-C / SIGTERM / stopped by the user (a pair test: by the coordinator).
    Interrupted,
    /// The agent vanished (a pair test: Y).
    PeerLost(String),
    /// Something failed (engine, agent).
    Failed(String),
}

impl EndReason {
    /// True when the point ran to its end or was stopped on purpose.
    pub fn clean(&self) -> bool {
        matches!(self, EndReason::Completed | EndReason::Interrupted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip() {
        let (mut a, mut b) = tokio::io::duplex(4096);
        let m = Msg::Hello {
            version: 1,
            software: "x".into(),
        };
        write_msg(&mut a, &m).await.unwrap();
        assert_eq!(read_msg(&mut b).await.unwrap(), m);
    }

    #[tokio::test]
    async fn oversized_and_garbage_are_named() {
        let (mut a, mut b) = tokio::io::duplex(64);
        tokio::io::AsyncWriteExt::write_all(&mut a, &(MAX_FRAME + 1).to_be_bytes())
            .await
            .unwrap();
        let e = read_msg(&mut b).await.unwrap_err();
        assert!(matches!(e, ProtoError::TooLarge { .. }), "{e}");
        let e = check_len(*b"GET ", MAX_FRAME).unwrap_err();
        assert!(e.to_string().contains("GET"), "{e}");
    }

    #[tokio::test]
    async fn bad_json_is_an_error() {
        let (mut a, mut b) = tokio::io::duplex(64);
        tokio::io::AsyncWriteExt::write_all(&mut a, &3u32.to_be_bytes())
            .await
            .unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut a, b"{x}")
            .await
            .unwrap();
        assert!(matches!(
            read_msg(&mut b).await.unwrap_err(),
            ProtoError::BadJson(_)
        ));
    }

    #[test]
    fn data_hello_round_trip() {
        let h = DataHello {
            test: 9,
            index: 3,
            tag: [7; 16],
        };
        let b = h.encode();
        assert_eq!(&b[..4], &DATA_MAGIC);
        let mut rest = [0u8; DataHello::REST];
        rest.copy_from_slice(&b[4..]);
        assert_eq!(DataHello::decode_after_magic(&rest), h);
    }
}

//! TEST DOUBLE of the [`Verbs`] trait — used only by the tests of the engine
//! loop, because this machine (and CI) has no RDMA device. It is not a
//! mock of libibverbs: it is a small in-memory RC "fabric" between two
//! endpoints that keeps the semantics the engine depends on — QPs must be
//! connected before posting; WRITE/READ check the peer's rkey and address
//! range (else a "remote access error" completion); SEND consumes a posted
//! receive of the connected peer QP (held, like an RNR retry, until one is
//! posted); only signaled WRs complete, and they free the send-queue slots of
//! the unsignaled WRs before them; a full send or receive queue is ENOMEM.
//! The real implementation is [`SidewayVerbs`](super::sideway::SidewayVerbs).

use super::setup::Fabric;
use super::verbs::{
    Completion, ConnectAttrs, Cq, LocalQp, PortInfo, QpConfig, SendWr, Verbs, VerbsError, WrOp,
};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default)]
struct Qp {
    qpn: u32,
    rkey: u32,
    addr: u64,
    buf: Vec<u8>,
    peer: Option<usize>,
    recvs: VecDeque<(u64, u64, u32)>,
    held_sends: VecDeque<Vec<u8>>,
    sq_used: u32,
    since_signal: u32,
}

#[derive(Default)]
struct End {
    qps: Vec<Qp>,
    send_cq: VecDeque<(Completion, usize, u32)>,
    recv_cq: VecDeque<Completion>,
    tx_depth: u32,
    rx_depth: u32,
}

struct Fabric2 {
    ends: [End; 2],
    /// Make the completion after this many send completions an error (status 12).
    fail_after: Option<u64>,
    completions: u64,
}

/// One end of the test-double fabric.
pub struct TestDoubleVerbs {
    me: usize,
    fabric: Arc<Mutex<Fabric2>>,
    kind: Fabric,
    mtu: u32,
    name: String,
}

/// Two connected test-double endpoints (0: controller, 1: agent).
pub fn pair(kind: Fabric, mtu: u32) -> (TestDoubleVerbs, TestDoubleVerbs) {
    let f = Arc::new(Mutex::new(Fabric2 {
        ends: [End::default(), End::default()],
        fail_after: None,
        completions: 0,
    }));
    let mk = |me| TestDoubleVerbs {
        me,
        fabric: f.clone(),
        kind,
        mtu,
        name: format!("double{me} port 1"),
    };
    (mk(0), mk(1))
}

impl TestDoubleVerbs {
    /// The send completion after `n` good ones is a "transport retry counter exceeded".
    pub fn fail_after(&self, n: u64) {
        self.lock().fail_after = Some(n);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Fabric2> {
        self.fabric
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn err(&self, what: &str) -> VerbsError {
        VerbsError::Port(format!("{}: {what}", self.name))
    }
}

fn enomem(call: &'static str, device: &str) -> VerbsError {
    VerbsError::Call {
        call,
        device: device.into(),
        source: std::io::Error::from_raw_os_error(libc::ENOMEM),
    }
}

impl Verbs for TestDoubleVerbs {
    fn device(&self) -> &str {
        &self.name
    }

    fn port_info(&self) -> Result<PortInfo, VerbsError> {
        Ok(PortInfo {
            active: true,
            active_mtu: self.mtu,
            max_mtu: 4096,
            lid: if self.kind == Fabric::Infiniband {
                7 + self.me as u16
            } else {
                0
            },
            fabric: self.kind,
            max_rd_atomic: 16,
        })
    }

    fn gid(&self, index: u32) -> Result<[u8; 16], VerbsError> {
        if index > 3 {
            return Err(self.err("no such GID"));
        }
        let ip = std::net::Ipv4Addr::new(198, 18, 0, 1 + self.me as u8);
        Ok(ip.to_ipv6_mapped().octets())
    }

    fn create(&mut self, cfg: &QpConfig) -> Result<Vec<LocalQp>, VerbsError> {
        let me = self.me;
        let mut f = self.lock();
        let end = &mut f.ends[me];
        end.tx_depth = cfg.tx_depth;
        end.rx_depth = cfg.rx_depth;
        let mut out = Vec::new();
        for q in 0..cfg.qps {
            let qp = Qp {
                qpn: 0x100 + (me as u32) * 0x1000 + q,
                rkey: 0xa000 + (me as u32) * 0x100 + q,
                addr: 0x1000_0000 * (me as u64 + 1) + u64::from(q) * 0x100_0000,
                buf: vec![0; cfg.buffer_len as usize],
                ..Default::default()
            };
            out.push(LocalQp {
                qpn: qp.qpn,
                rkey: qp.rkey,
                addr: qp.addr,
                len: cfg.buffer_len,
            });
            end.qps.push(qp);
        }
        Ok(out)
    }

    fn connect(&mut self, qp: usize, a: &ConnectAttrs) -> Result<(), VerbsError> {
        let (me, other) = (self.me, 1 - self.me);
        let mut f = self.lock();
        let peer = f.ends[other]
            .qps
            .iter()
            .position(|p| p.qpn == a.remote_qpn)
            .ok_or_else(|| VerbsError::Port(format!("no peer QP {:#x}", a.remote_qpn)))?;
        let q = f.ends[me]
            .qps
            .get_mut(qp)
            .ok_or_else(|| VerbsError::Port(format!("no QP {qp}")))?;
        q.peer = Some(peer);
        Ok(())
    }

    fn post_send(&mut self, qp: usize, wr: &SendWr) -> Result<(), VerbsError> {
        let (me, other) = (self.me, 1 - self.me);
        let name = self.name.clone();
        let mut f = self.lock();
        let depth = f.ends[me].tx_depth;
        let (peer, data) = {
            let q = f.ends[me]
                .qps
                .get_mut(qp)
                .ok_or_else(|| VerbsError::Port(format!("no QP {qp}")))?;
            let Some(peer) = q.peer else {
                return Err(VerbsError::Port(format!(
                    "{name}: QP {qp} is not connected (RESET)"
                )));
            };
            if q.sq_used >= depth {
                return Err(enomem("ibv_post_send", &name));
            }
            q.sq_used += 1;
            q.since_signal += 1;
            let (o, l) = (wr.offset as usize, wr.len as usize);
            let data = q.buf.get(o..o + l).map(<[u8]>::to_vec);
            (peer, data)
        };
        let data = data.ok_or_else(|| VerbsError::Port(format!("{name}: WR past the buffer")))?;
        let mut status = 0;
        match wr.op {
            WrOp::Write { remote_addr, rkey } | WrOp::Read { remote_addr, rkey } => {
                let p = &mut f.ends[other].qps[peer];
                let off = remote_addr.wrapping_sub(p.addr) as usize;
                let ok = rkey == p.rkey && remote_addr >= p.addr && off + data.len() <= p.buf.len();
                if !ok {
                    status = 10; // remote access error
                } else if matches!(wr.op, WrOp::Write { .. }) {
                    p.buf[off..off + data.len()].copy_from_slice(&data);
                } else {
                    let src = p.buf[off..off + data.len()].to_vec();
                    let q = &mut f.ends[me].qps[qp];
                    q.buf[wr.offset as usize..wr.offset as usize + src.len()].copy_from_slice(&src);
                }
            }
            WrOp::Send => {
                let p = &mut f.ends[other].qps[peer];
                match p.recvs.pop_front() {
                    Some((id, off, len)) => {
                        let n = data.len().min(len as usize);
                        p.buf[off as usize..off as usize + n].copy_from_slice(&data[..n]);
                        f.ends[other].recv_cq.push_back(Completion {
                            wr_id: id,
                            status: 0,
                            byte_len: n as u32,
                        });
                    }
                    None => p.held_sends.push_back(data),
                }
            }
        }
        if wr.signaled {
            f.completions += 1;
            if f.fail_after.is_some_and(|n| f.completions > n) {
                status = 12; // transport retry counter exceeded
            }
            let q = &mut f.ends[me].qps[qp];
            let covered = q.since_signal;
            q.since_signal = 0;
            f.ends[me].send_cq.push_back((
                Completion {
                    wr_id: wr.wr_id,
                    status,
                    byte_len: 0,
                },
                qp,
                covered,
            ));
        }
        Ok(())
    }

    fn post_recv(
        &mut self,
        qp: usize,
        wr_id: u64,
        offset: u64,
        len: u32,
    ) -> Result<(), VerbsError> {
        let me = self.me;
        let name = self.name.clone();
        let mut f = self.lock();
        let depth = f.ends[me].rx_depth;
        let end = &mut f.ends[me];
        let q = end
            .qps
            .get_mut(qp)
            .ok_or_else(|| VerbsError::Port(format!("no QP {qp}")))?;
        if q.recvs.len() as u32 >= depth {
            return Err(enomem("ibv_post_recv", &name));
        }
        match q.held_sends.pop_front() {
            Some(data) => {
                let n = data.len().min(len as usize);
                q.buf[offset as usize..offset as usize + n].copy_from_slice(&data[..n]);
                end.recv_cq.push_back(Completion {
                    wr_id,
                    status: 0,
                    byte_len: n as u32,
                });
            }
            None => q.recvs.push_back((wr_id, offset, len)),
        }
        Ok(())
    }

    fn poll(&mut self, cq: Cq, out: &mut Vec<Completion>) -> Result<(), VerbsError> {
        let me = self.me;
        let mut f = self.lock();
        let end = &mut f.ends[me];
        for _ in 0..64 {
            match cq {
                Cq::Send => match end.send_cq.pop_front() {
                    Some((c, qp, covered)) => {
                        end.qps[qp].sq_used -= covered;
                        out.push(c);
                    }
                    None => break,
                },
                Cq::Recv => match end.recv_cq.pop_front() {
                    Some(c) => out.push(c),
                    None => break,
                },
            }
        }
        Ok(())
    }

    fn wait(&mut self, cq: Cq, timeout: Duration) -> Result<bool, VerbsError> {
        let ready = {
            let f = self.lock();
            let e = &f.ends[self.me];
            match cq {
                Cq::Send => !e.send_cq.is_empty(),
                Cq::Recv => !e.recv_cq.is_empty(),
            }
        };
        if !ready {
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
        }
        Ok(ready)
    }

    fn read_byte(&self, qp: usize, offset: u64) -> u8 {
        let f = self.lock();
        f.ends[self.me]
            .qps
            .get(qp)
            .and_then(|q| q.buf.get(offset as usize).copied())
            .unwrap_or(0)
    }

    fn write_byte(&mut self, qp: usize, offset: u64, value: u8) {
        let me = self.me;
        let mut f = self.lock();
        if let Some(b) = f.ends[me]
            .qps
            .get_mut(qp)
            .and_then(|q| q.buf.get_mut(offset as usize))
        {
            *b = value;
        }
    }
}

#[cfg(test)]
mod tests {
    //! The engine loop end to end over the test double (both ends in this
    //! process, one worker thread each): what cannot run here on a device.
    use super::*;
    use crate::traffic::rdma::engine::{interval, Connected, Prepared, RdmaError, RdmaOutcome};
    use crate::traffic::rdma::spec::{RdmaMode, RdmaOp, RdmaSpec};
    use crate::traffic::rdma::Chosen;
    use crate::traffic::{ConnSnapshot, RunningEngine, Side};
    use crate::units::Bytes;

    fn chosen(kind: Fabric) -> Chosen {
        Chosen {
            device: "double".into(),
            port: 1,
            gid_index: (kind == Fabric::Ethernet).then_some(3),
            netdev: None,
        }
    }

    /// Prepare both ends, exchange setups as the session would, connect.
    fn connect(spec: &RdmaSpec, kind: Fabric) -> (Connected, Connected, TestDoubleVerbs) {
        let (a, b) = pair(kind, 4096);
        let handle = TestDoubleVerbs {
            me: 0,
            fabric: a.fabric.clone(),
            kind,
            mtu: 4096,
            name: "handle".into(),
        };
        let ctl = Prepared::from_verbs(spec, Side::Controller, Box::new(a), &chosen(kind)).unwrap();
        let agt = Prepared::from_verbs(spec, Side::Agent, Box::new(b), &chosen(kind)).unwrap();
        // Through JSON, as over the control channel.
        let ctl_setup = serde_json::from_str(&serde_json::to_string(ctl.setup()).unwrap()).unwrap();
        let agt_setup = serde_json::from_str(&serde_json::to_string(agt.setup()).unwrap()).unwrap();
        let agt = agt.connect(&ctl_setup).unwrap();
        let ctl = ctl.connect(&agt_setup).unwrap();
        (ctl, agt, handle)
    }

    /// Wait (on the result marker, not a clock) until a side published its outcome.
    fn outcome(e: &RunningEngine, r: &crate::traffic::rdma::engine::RdmaResult) -> RdmaOutcome {
        loop {
            if let Some(o) = r.get() {
                return o;
            }
            assert!(
                !e.is_finished() || r.get().is_some(),
                "worker exited without an outcome"
            );
            std::thread::park_timeout(Duration::from_millis(1));
        }
    }

    fn run(spec: &RdmaSpec, kind: Fabric) -> (RdmaOutcome, RdmaOutcome) {
        let (ctl, agt, _h) = connect(spec, kind);
        let (mut ea, ra) = agt.start().unwrap();
        let (mut ec, rc) = ctl.start().unwrap();
        let oc = outcome(&ec, &rc);
        let oa = outcome(&ea, &ra);
        ec.stop();
        ea.stop();
        ec.join().unwrap();
        ea.join().unwrap();
        (oc, oa)
    }

    fn bw(op: RdmaOp) -> RdmaSpec {
        let mut s = RdmaSpec::perftest_defaults(op, RdmaMode::Bw);
        s.size = Bytes(4096);
        s.qps = 2;
        s.iters = Some(300);
        s.tx_depth = 16;
        s.rx_depth = 64;
        s
    }

    #[test]
    fn write_bw_counts_every_message_and_reports() {
        let s = bw(RdmaOp::Write);
        assert_eq!(s.cq_mod(), 16);
        let (c, a) = run(&s, Fabric::Ethernet);
        let r = c.bw.expect("controller bw report");
        assert_eq!((r.bytes, r.iterations), (4096, 600));
        assert!(
            r.bw_avg_gbps > 0.0 && r.bw_peak_gbps >= r.bw_avg_gbps * 0.99,
            "{r:?}"
        );
        assert_eq!(c.tx_bytes, 600 * 4096);
        assert_eq!(c.messages, 600);
        assert!(!c.stopped_early);
        assert_eq!(c.path_mtu, 4096);
        assert_eq!(c.gid_index, Some(3));
        // The WRITE responder is passive: no report, nothing counted.
        assert!(a.bw.is_none());
        assert_eq!(a.messages, 0);
    }

    #[test]
    fn read_bw_moves_data_to_the_requester() {
        let (c, _) = run(&bw(RdmaOp::Read), Fabric::Infiniband);
        assert_eq!(c.rx_bytes, 600 * 4096);
        assert_eq!(c.tx_bytes, 0);
        assert_eq!(c.bw.unwrap().iterations, 600);
    }

    #[test]
    fn send_bw_is_received_and_counted_on_the_agent() {
        // rx depth below tx depth: receives run out and the double holds SENDs (RNR).
        let mut s = bw(RdmaOp::Send);
        s.rx_depth = 8;
        let (c, a) = run(&s, Fabric::Ethernet);
        assert_eq!(c.bw.unwrap().iterations, 600);
        assert_eq!(a.rx_bytes, 600 * 4096);
        assert_eq!(a.messages, 600);
        assert!(a.bw.is_none());
    }

    #[test]
    fn bidirectional_write_reports_on_both_sides() {
        let mut s = bw(RdmaOp::Write);
        s.bidir = true;
        let (c, a) = run(&s, Fabric::Ethernet);
        let (rc, ra) = (c.bw.unwrap(), a.bw.unwrap());
        assert_eq!((rc.iterations, ra.iterations), (600, 600));
        let sum = rc.plus(&ra);
        assert!((sum.bw_avg_gbps - rc.bw_avg_gbps - ra.bw_avg_gbps).abs() < 1e-9);
    }

    #[test]
    fn bidirectional_send() {
        let mut s = bw(RdmaOp::Send);
        s.bidir = true;
        let (c, a) = run(&s, Fabric::Ethernet);
        assert_eq!(c.rx_bytes, 600 * 4096);
        assert_eq!(a.rx_bytes, 600 * 4096);
        assert!(c.bw.is_some() && a.bw.is_some());
    }

    #[test]
    fn many_ops_keep_only_the_ends_and_report_no_peak() {
        let mut s = bw(RdmaOp::Write);
        s.qps = 1;
        s.size = Bytes(2);
        s.iters = Some(30_000); // over perftest's 20000 peak limit
        let (c, _) = run(&s, Fabric::Ethernet);
        let r = c.bw.unwrap();
        assert_eq!(r.iterations, 30_000);
        assert_eq!(r.bw_peak_gbps, 0.0);
        assert!(r.bw_avg_gbps > 0.0);
    }

    fn lat(op: RdmaOp) -> RdmaSpec {
        let mut s = RdmaSpec::perftest_defaults(op, RdmaMode::Lat);
        s.iters = Some(50);
        s
    }

    #[test]
    fn write_send_and_read_latency() {
        for op in [RdmaOp::Write, RdmaOp::Send, RdmaOp::Read] {
            let (c, a) = run(&lat(op), Fabric::Ethernet);
            let r = c.lat.unwrap_or_else(|| panic!("{op:?}: no latency report"));
            assert_eq!((r.bytes, r.iterations), (2, 50), "{op:?}");
            assert!(
                r.t_min_us <= r.t_typical_us && r.t_typical_us <= r.t_max_us,
                "{op:?} {r:?}"
            );
            assert_eq!(c.messages, 50, "{op:?}");
            if op != RdmaOp::Read {
                // The server answered every ping.
                assert_eq!(a.messages, 50, "{op:?}");
            }
        }
    }

    #[test]
    fn use_event_runs_on_completion_events() {
        let mut s = lat(RdmaOp::Send);
        s.use_event = true;
        let (c, _) = run(&s, Fabric::Ethernet);
        assert_eq!(c.lat.unwrap().iterations, 50);
        let mut s = bw(RdmaOp::Send);
        s.use_event = true;
        let (c, a) = run(&s, Fabric::Ethernet);
        assert_eq!(c.bw.unwrap().iterations, 600);
        assert_eq!(a.messages, 600);
    }

    #[test]
    fn duration_mode_counts_the_sample_window() {
        let mut s = bw(RdmaOp::Write);
        s.iters = None;
        s.secs = Some(1.0);
        let (c, _) = run(&s, Fabric::Ethernet);
        let r = c.bw.unwrap();
        assert!(r.iterations > 0);
        // perftest -D: no peak.
        assert_eq!(r.bw_peak_gbps, 0.0);
        assert!(c.messages >= r.iterations);
    }

    #[test]
    fn abort_returns_a_waiting_server_at_once_and_drop_aborts() {
        let (_ctl, agt, _h) = connect(&lat(RdmaOp::Write), Fabric::Ethernet);
        // The agent waits for a ping that never comes.
        let (mut ea, ra) = agt.start().unwrap();
        ea.abort();
        ea.join().unwrap();
        assert!(ra.get().is_none());
        // A dropped engine aborts its worker (no orphan thread: the control count reaches 0).
        let (_ctl, agt, _h) = connect(&lat(RdmaOp::Write), Fabric::Ethernet);
        let (ea, _ra) = agt.start().unwrap();
        let control = ea.control.clone();
        drop(ea);
        while control.running.load(std::sync::atomic::Ordering::Acquire) != 0 {
            std::thread::park_timeout(Duration::from_millis(1));
        }
    }

    #[test]
    fn graceful_stop_of_an_endless_run() {
        let mut s = bw(RdmaOp::Write);
        s.iters = None;
        s.secs = Some(3600.0);
        let (ctl, agt, _h) = connect(&s, Fabric::Ethernet);
        let (mut ea, _ra) = agt.start().unwrap();
        let (mut ec, rc) = ctl.start().unwrap();
        // Stop once traffic moved (a marker in the counters, not a sleep).
        while ec
            .counters
            .snapshot()
            .iter()
            .map(|c| c.messages)
            .sum::<u64>()
            < 1000
        {
            std::thread::park_timeout(Duration::from_millis(1));
        }
        ec.stop();
        ec.join().unwrap();
        let o = rc.get().unwrap();
        assert!(o.messages >= 1000);
        ea.stop();
        ea.join().unwrap();
    }

    #[test]
    fn a_completion_error_fails_the_run_with_its_status() {
        let (ctl, agt, h) = connect(&bw(RdmaOp::Write), Fabric::Ethernet);
        h.fail_after(3);
        let (mut ea, _ra) = agt.start().unwrap();
        let (mut ec, rc) = ctl.start().unwrap();
        let e = ec.join().unwrap_err().to_string();
        assert!(e.contains("transport retry counter exceeded"), "{e}");
        assert!(e.contains("rdma statistic show link double/1"), "{e}");
        assert!(rc.get().is_none());
        ea.stop();
        ea.join().unwrap();
    }

    #[test]
    fn a_mismatched_setup_is_refused_before_any_qp_is_programmed() {
        let s = bw(RdmaOp::Write);
        let (a, b) = pair(Fabric::Ethernet, 1024);
        let ctl =
            Prepared::from_verbs(&s, Side::Controller, Box::new(a), &chosen(Fabric::Ethernet))
                .unwrap();
        let agt =
            Prepared::from_verbs(&s, Side::Agent, Box::new(b), &chosen(Fabric::Ethernet)).unwrap();
        let mut bad = agt.setup().clone();
        bad.qps[0].rkey = 0;
        match ctl.connect(&bad) {
            Err(RdmaError::Setup(e)) => assert!(e.to_string().contains("rkey is 0"), "{e}"),
            Err(e) => panic!("wrong error {e}"),
            Ok(_) => panic!("accepted a zero rkey"),
        }
        // An invalid spec never reaches the device.
        let mut huge = s.clone();
        huge.size = Bytes(16 << 20);
        let (a, _) = pair(Fabric::Ethernet, 1024);
        assert!(matches!(
            Prepared::from_verbs(
                &huge,
                Side::Controller,
                Box::new(a),
                &chosen(Fabric::Ethernet)
            ),
            Err(RdmaError::Spec(_))
        ));
    }

    #[test]
    fn interval_figures_by_hand() {
        // QP 0 sent 1 MB and 250 messages, QP 1 received 0.5 MB in 0.5 s:
        // tx 1e6 * 8 / 0.5 = 16 Mbit/s, rx 8 Mbit/s, 500 msg/s.
        let prev = [ConnSnapshot::default(), ConnSnapshot::default()];
        let cur = [
            ConnSnapshot {
                tx_bytes: 1_000_000,
                messages: 250,
                ..Default::default()
            },
            ConnSnapshot {
                rx_bytes: 500_000,
                ..Default::default()
            },
        ];
        let mut h = crate::traffic::new_latency_histogram();
        h.record(2_000).unwrap();
        h.record(4_000).unwrap();
        let i = interval(&prev, &cur, 0.5, Some(&h));
        assert_eq!(i.tx_bps, 16e6);
        assert_eq!(i.rx_bps, 8e6);
        assert_eq!(i.msg_per_s, 500.0);
        assert_eq!(i.qps[1].rx_bytes, 500_000);
        assert_eq!(i.lat_p50_us, Some(2.0));
        assert!(i.lat_p99_us.unwrap() >= 4.0);
        assert_eq!(interval(&prev, &cur, 0.0, None).tx_bps, 0.0);
    }

    /// Through the control protocol's frames, as `Start` / `Accepting`.
    fn over_frames(m: &crate::session::proto::Msg) -> crate::session::proto::Msg {
        use crate::session::proto::{read_msg, write_msg};
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut buf = Vec::new();
            write_msg(&mut buf, m).await.unwrap();
            read_msg(&mut buf.as_slice()).await.unwrap()
        })
    }

    fn start_msg(
        spec: &RdmaSpec,
        setup: Option<crate::traffic::EngineSetup>,
    ) -> crate::session::proto::Msg {
        crate::session::proto::Msg::Start {
            test: crate::session::proto::TestParams {
                id: 7,
                spec: Some(crate::traffic::EngineSpec::Rdma(spec.clone())),
                interval_ms: 100,
                omit_ms: 0,
                ifaces: Vec::new(),
                setup,
                later: Vec::new(),
            },
        }
    }

    /// Both ends of `spec` over a fresh pair of test doubles.
    fn session_ends(
        spec: &RdmaSpec,
        k: Fabric,
    ) -> (
        crate::traffic::rdma::session::RdmaEngine,
        crate::traffic::rdma::session::RdmaEngine,
    ) {
        use crate::traffic::rdma::session::RdmaEngine;
        let (a, b) = pair(k, 4096);
        let end = |side, v: Box<dyn Verbs>| {
            RdmaEngine::new(Prepared::from_verbs(spec, side, v, &chosen(k)).unwrap())
        };
        (
            end(Side::Controller, Box::new(a)),
            end(Side::Agent, Box::new(b)),
        )
    }

    /// Wait (at most 30 s) until the controller's engine says its work is done.
    fn wait_done(ec: &crate::traffic::RunningEngine, what: &str) {
        let done = std::sync::Arc::clone(&ec.control.done);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(30), done.notified())
                .await
                .expect(what)
        });
    }

    #[test]
    fn the_session_engine_exchanges_setups_in_control_frames_and_reports() {
        use crate::session::proto::Msg;
        use crate::traffic::{Engine, EngineInterval, EngineTotals};
        let spec = bw(RdmaOp::Write);
        let (ctl, agt) = session_ends(&spec, Fabric::Ethernet);
        let (mut ctl, mut agt) = (Box::new(ctl), Box::new(agt));
        // Start carries the controller's setup; the agent connects, then answers.
        let Msg::Start { test } = over_frames(&start_msg(&spec, ctl.setup())) else {
            panic!("not a start")
        };
        assert_eq!(test.setup, ctl.setup(), "the setup survives the frame");
        agt.connect(test.setup).unwrap();
        let Msg::Accepting { setup, .. } = over_frames(&Msg::Accepting {
            data_port: 0,
            setup: agt.setup(),
        }) else {
            panic!("not accepting")
        };
        ctl.connect(setup).unwrap();
        let mut ea = agt.start(Vec::new()).unwrap();
        let mut ec = ctl.start(Vec::new()).unwrap();
        // Gated: the workers wait for the session's clock.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            ec.counters
                .snapshot()
                .iter()
                .map(|c| c.messages)
                .sum::<u64>(),
            0
        );
        ea.release();
        ec.release();
        // The requester ends by itself after its iterations; its probe has the report.
        wait_done(&ec, "the requester finishes its iterations");
        let probe = ec.probe.clone().unwrap();
        match probe.interval(1.0) {
            Some(EngineInterval::Rdma(i)) => {
                assert_eq!(i.qps.len(), 2);
                assert_eq!(i.qps.iter().map(|q| q.messages).sum::<u64>(), 600);
            }
            other => panic!("{other:?}"),
        }
        match probe.totals() {
            Some(EngineTotals::Rdma(o)) => {
                assert_eq!(o.messages, 600);
                assert!(o.bw.is_some(), "a perftest report");
            }
            other => panic!("{other:?}"),
        }
        ec.stop();
        ea.stop();
        ec.join().unwrap();
        ea.join().unwrap();
    }

    #[test]
    fn bidirectional_ends_keep_their_qps_and_the_controller_says_when_done() {
        use crate::traffic::{Engine, EngineTotals};
        // Bidirectional: both ends keep their QPs after their own work; the
        // controller's end still tells the session when its work is done.
        let mut spec_b = bw(RdmaOp::Write);
        spec_b.bidir = true;
        let (ctl, agt) = session_ends(&spec_b, Fabric::Ethernet);
        let (mut ctl, mut agt) = (Box::new(ctl), Box::new(agt));
        agt.connect(ctl.setup()).unwrap();
        ctl.connect(agt.setup()).unwrap();
        let mut ea = agt.start(Vec::new()).unwrap();
        let mut ec = ctl.start(Vec::new()).unwrap();
        ea.release();
        ec.release();
        wait_done(&ec, "a bidirectional requester says when its work is done");
        ec.stop();
        ea.stop();
        ec.join().unwrap();
        ea.join().unwrap();
        for e in [&ec, &ea] {
            match e.probe.as_ref().and_then(|p| p.totals()) {
                Some(EngineTotals::Rdma(o)) => assert!(o.bw.is_some(), "{o:?}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_setup_that_is_not_the_tests_is_refused_with_the_reason() {
        use crate::session::proto::Msg;
        use crate::traffic::{Engine, EngineSetup};
        // A setup that is not the test's is refused when it arrives, each
        // with the reason: a wrong MTU, a zero rkey, a QP count that differs.
        let spec = bw(RdmaOp::Write);
        for (what, says) in [("mtu", "MTU 1000"), ("rkey", "rkey is 0"), ("qps", "QP")] {
            let (mut ctl, agt) = session_ends(&spec, Fabric::Ethernet);
            let Some(EngineSetup::Rdma(mut bad)) = agt.setup() else {
                panic!("no setup")
            };
            match what {
                "mtu" => bad.mtu = 1000,
                "rkey" => bad.qps[0].rkey = 0,
                _ => {
                    let extra = bad.qps[0];
                    bad.qps.push(extra);
                }
            }
            let Msg::Accepting { setup, .. } = over_frames(&Msg::Accepting {
                data_port: 0,
                setup: Some(EngineSetup::Rdma(bad)),
            }) else {
                panic!("not accepting")
            };
            let e = ctl.connect(setup).unwrap_err().to_string();
            assert!(e.contains(says), "{what}: {e}");
            // Nor is a setup of another engine, or none.
            assert!(ctl.connect(None).is_err());
        }
    }

    #[test]
    fn an_oversized_setup_never_becomes_a_message() {
        use crate::traffic::{Engine, EngineSetup};
        // An oversized setup never becomes a message: the frame limit stops it.
        let spec = bw(RdmaOp::Write);
        let (ctl, _) = session_ends(&spec, Fabric::Ethernet);
        let Some(EngineSetup::Rdma(mut huge)) = ctl.setup() else {
            panic!("no setup")
        };
        let one = huge.qps[0];
        huge.qps = vec![one; 400_000];
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let e = rt.block_on(async {
            let mut buf = Vec::new();
            crate::session::proto::write_msg(
                &mut buf,
                &start_msg(&spec, Some(EngineSetup::Rdma(huge))),
            )
            .await
            .unwrap_err()
        });
        assert!(
            e.to_string().contains("exceeds the 16777216-byte limit"),
            "{e}"
        );
    }
}

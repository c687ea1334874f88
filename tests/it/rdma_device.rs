//! The RDMA engine on a real device, both ends in this process over one
//! port (RC loopback through the HCA: ConnectX and soft-RoCE `rxe` both do
//! it). Ignored by default: CI and this project's build machine have no RDMA
//! device. On a host with one:
//!
//! ```sh
//! cargo test --release --test it rdma_device:: -- --ignored --nocapture
//! WIRESCOPE_IB_DEV=mlx5_1 WIRESCOPE_GID_INDEX=3 cargo test --release --test it rdma_device:: -- --ignored --nocapture
//! ```
//!
//! Without a device or libibverbs it fails at once with the preflight line
//! (what is missing and the command that fixes it).

use wirescope::probe::live_host::LiveHost as Live;
use wirescope::probe::rdma::preflight::{choose, preflight};
use wirescope::probe::rdma::{read_rdma_facts, RdmaCounterReader};
use wirescope::traffic::rdma::engine::prepare;
use wirescope::traffic::rdma::sideway::SidewayProvider;
use wirescope::traffic::rdma::{
    BwReport, LatReport, RdmaEndpoint, RdmaMode, RdmaOp, RdmaOutcome, RdmaSpec,
};
use wirescope::traffic::Side;

fn endpoint() -> RdmaEndpoint {
    RdmaEndpoint {
        ib_dev: std::env::var("WIRESCOPE_IB_DEV").ok(),
        ib_port: std::env::var("WIRESCOPE_IB_PORT")
            .ok()
            .and_then(|v| v.parse().ok()),
        gid_index: std::env::var("WIRESCOPE_GID_INDEX")
            .ok()
            .and_then(|v| v.parse().ok()),
    }
}

/// One point, both ends on the local device; the controller's outcome.
fn point(spec: &RdmaSpec) -> RdmaOutcome {
    let live = Live::default();
    let facts = read_rdma_facts(&live);
    let chosen = choose(&facts, &endpoint(), None, None).unwrap_or_else(|e| panic!("{e}"));
    let ctl = prepare(spec, Side::Controller, &SidewayProvider, &chosen)
        .unwrap_or_else(|e| panic!("{e}"));
    let agt =
        prepare(spec, Side::Agent, &SidewayProvider, &chosen).unwrap_or_else(|e| panic!("{e}"));
    let (cs, as_) = (ctl.setup().clone(), agt.setup().clone());
    let agt = agt.connect(&cs).unwrap_or_else(|e| panic!("{e}"));
    let ctl = ctl.connect(&as_).unwrap_or_else(|e| panic!("{e}"));
    let (mut ea, ra) = agt.start().unwrap();
    let (mut ec, rc) = ctl.start().unwrap();
    ec.join().unwrap_or_else(|e| panic!("{e}"));
    let out = rc.get().expect("controller outcome");
    ea.stop();
    ea.join().unwrap_or_else(|e| panic!("{e}"));
    let _ = ra.get();
    out
}

#[test]
#[ignore = "needs an RDMA device (ConnectX, or soft-RoCE: modprobe rdma_rxe && rdma link add rxe0 type rxe netdev IF)"]
fn perftest_style_points_on_the_local_device() {
    let live = Live::default();
    if let Err(e) = preflight(&live, &SidewayProvider, "this host", None) {
        panic!("{e}");
    }
    let facts = read_rdma_facts(&live);
    let mut reader = RdmaCounterReader::new();
    let _ = reader.read(&live, &facts);
    for op in [RdmaOp::Write, RdmaOp::Read, RdmaOp::Send] {
        let mut s = RdmaSpec::perftest_defaults(op, RdmaMode::Bw);
        s.local = endpoint();
        s.peer = endpoint();
        let o = point(&s);
        let r = o.bw.expect("bw report");
        println!(
            "ib_{}_bw (loopback) {}\n{}\n{}",
            op.name(),
            o.device,
            BwReport::HEADER,
            r.line()
        );
        assert_eq!(r.iterations, s.iters.unwrap());
        assert!(r.bw_avg_gbps > 0.0);
        let mut l = RdmaSpec::perftest_defaults(op, RdmaMode::Lat);
        l.local = endpoint();
        l.peer = endpoint();
        let o = point(&l);
        let r = o.lat.expect("lat report");
        println!(
            "ib_{}_lat (loopback)\n{}\n{}",
            op.name(),
            LatReport::HEADER,
            r.line()
        );
        assert!(r.t_min_us > 0.0 && r.t_min_us <= r.t_typical_us);
    }
    if let Some(sample) = reader.read(&live, &facts) {
        for p in sample.ports {
            let moved: Vec<String> = p
                .counters
                .iter()
                .map(|c| format!("{}/{} +{}", c.group, c.name, c.delta))
                .collect();
            println!("{}: {}", p.label(), moved.join(", "));
        }
    }
}

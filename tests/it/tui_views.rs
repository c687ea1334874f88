//! Every TUI view rendered with ratatui's TestBackend at 80x24 and 160x48 from
//! recorded Samples (a real `wirescope run -t 3s -P 2` log), plus a peer-lost
//! session and a host with one saturated core built from it; insta snapshots.
//! Also: replay shows the same numbers as the log.

use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::path::Path;
use wirescope::cli::TuiArgs;
use wirescope::probe::facts::IrqFact;
use wirescope::probe::sample::{HostRole, QueueSource, Sample};
use wirescope::probe::system::HostInfo;
use wirescope::record::log::read_log;
use wirescope::record::pipeline::{Origin, Pipeline};
use wirescope::record::schema::Record;
use wirescope::session::driver::{PointStart, SessionEvent};
use wirescope::session::outcome::{EndReason, RunEvent};
use wirescope::tui::action::{update, Action};
use wirescope::tui::app::actions_of;
use wirescope::tui::model::{Model, ModelConfig, Source, View};
use wirescope::tui::{replay, view};
use wirescope::units::{BitsPerSec, CpuId, Percent};

const LOG: &str = "tests/fixtures/tui/run.jsonl";

fn cfg(source: Source) -> ModelConfig {
    ModelConfig {
        source,
        local_host: HostInfo::default(),
        pair: String::new(),
        test: TuiArgs::defaults().test,
        history: std::time::Duration::from_secs(600),
        color: false,
        log_path: None,
    }
}

fn records() -> Vec<Record> {
    read_log(Path::new(LOG)).unwrap()
}

fn replay_model() -> Model {
    replay::model_from_records(records(), cfg(Source::Replay(LOG.into())))
}

fn render(m: &Model, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| view::draw(f, m)).unwrap();
    t.backend().to_string()
}

fn samples() -> Vec<Sample> {
    records()
        .into_iter()
        .filter_map(|r| match r {
            Record::Sample(s) => Some(*s),
            _ => None,
        })
        .collect()
}

/// Feed one session event through the pipeline (as the TUI's pipeline thread
/// does) and its output into the model.
fn feed(m: &mut Model, p: &mut Pipeline, ev: SessionEvent) {
    for a in actions_of(p.handle(ev).unwrap()) {
        update(m, a);
    }
}

fn interval(m: &mut Model, p: &mut Pipeline, l: Option<Sample>, r: Option<Sample>) {
    let index = l.as_ref().or(r.as_ref()).map(|s| s.index).unwrap_or(0);
    feed(
        m,
        p,
        SessionEvent::Interval(Box::new(RunEvent {
            index,
            local: l,
            peer: r,
        })),
    );
}

/// A live session fed from the fixture's samples, through the same pipeline
/// (diagnosis included) a live session uses.
fn live_model(samples: &[Sample]) -> Model {
    live_model_with(samples).0
}

fn live_model_with(samples: &[Sample]) -> (Model, Pipeline) {
    let mut m = Model::new(cfg(Source::Live));
    m.local_host.hostname = "vm".into();
    m.pair = "local pair: namespaces ws-a-1 <-> ws-b-1".into();
    let peer = HostInfo {
        hostname: "vm".into(),
        kernel: "6.18.44-fc-v595".into(),
        cpus: 2,
        ..HostInfo::default()
    };
    let mut pipe = Pipeline::new(Origin::default());
    update(&mut m, Action::Connected { peer });
    let spec = replay_model().spec.unwrap();
    feed(
        &mut m,
        &mut pipe,
        SessionEvent::PointStarted(Box::new(PointStart {
            number: 1,
            sweep: None,
            spec: Some(spec),
            time: Some(std::time::Duration::from_secs(10)),
        })),
    );
    let (l, p): (Vec<_>, Vec<_>) = samples
        .iter()
        .cloned()
        .partition(|s| s.host == HostRole::Local);
    for (l, p) in l.into_iter().zip(p) {
        interval(&mut m, &mut pipe, Some(l), Some(p));
    }
    (m, pipe)
}

#[test]
fn every_view_at_both_sizes_from_a_recorded_run() {
    let mut m = replay_model();
    // The third interval: a full second (the last one is the 2 ms closing interval).
    for a in [Action::Home, Action::Right, Action::Right] {
        update(&mut m, a);
    }
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        for v in View::ALL {
            m.view = v;
            insta::assert_snapshot!(
                format!("tui_{}_{w}x{h}", v.title().to_lowercase()),
                render(&m, w, h)
            );
        }
        m.view = View::Dashboard;
        update(&mut m, Action::ToggleHelp);
        insta::assert_snapshot!(format!("tui_help_{w}x{h}"), render(&m, w, h));
        update(&mut m, Action::Close);
    }
}

#[test]
fn peer_lost() {
    let s = samples();
    let (mut m, mut pipe) = live_model_with(&s[..4]);
    let late_local = s
        .iter()
        .find(|x| x.host == HostRole::Local && x.index == 2)
        .cloned();
    interval(&mut m, &mut pipe, late_local, None);
    update(
        &mut m,
        Action::PointDone {
            end: EndReason::PeerLost("no message from the agent for 3.0 s".into()),
            summary: None,
        },
    );
    let a = render(&m, 80, 24);
    assert!(a.contains("peer lost"), "{a}");
    assert!(a.contains("no sample this interval"), "{a}");
    insta::assert_snapshot!("tui_peer_lost_80x24", a);
    insta::assert_snapshot!("tui_peer_lost_160x48", render(&m, 160, 48));
}

/// One core of 8 at 100% softirq (it holds the NIC IRQ and one rx queue does
/// all the work); the engine pinned to another core.
fn saturated(mut s: Sample) -> Sample {
    let base = s.cpus[0];
    s.cpus = (0..8)
        .map(|i| {
            let mut c = base;
            c.cpu = CpuId(i);
            let (u, sy, si) = if i == 3 {
                (0.0, 0.0, 100.0)
            } else if i == 1 {
                (5.0, 40.0, 2.0)
            } else {
                (1.0, 2.0, 0.5)
            };
            c.user = Percent(u);
            c.nice = Percent(0.0);
            c.system = Percent(sy);
            c.irq = Percent(0.0);
            c.softirq = Percent(si);
            c.idle = Percent(100.0 - u - sy - si);
            c
        })
        .collect();
    for q in &mut s.queues {
        if q.queue == 3 {
            q.packets = Some(812_000);
            q.bytes = Some(1_200_000_000);
            q.pps = 812_000.0;
            q.bps = BitsPerSec(9.6e9);
            q.drops = Some(1520);
            q.source = QueueSource::Qstats;
        } else {
            q.source = QueueSource::Qstats;
        }
    }
    if let Some(f) = s.facts.as_mut() {
        f.cpus = 8;
        if let Some(n) = f.nics.first_mut() {
            n.irqs = vec![IrqFact {
                irq: 42,
                name: "mlx5_comp3".into(),
                affinity: "3".into(),
            }];
        }
    }
    s
}

#[test]
fn one_saturated_core() {
    let s: Vec<Sample> = samples().into_iter().take(6).map(saturated).collect();
    let mut m = live_model(&s);
    if let Some(spec) = m.spec.as_mut().and_then(|s| s.as_tcp_mut()) {
        spec.cpus = vec![CpuId(1)];
        spec.peer_cpus = vec![CpuId(1)];
    }
    m.view = View::Cpu;
    let a = render(&m, 80, 24);
    assert!(a.contains("▶cpu3"), "the busiest core is marked:\n{a}");
    assert!(a.contains("cpu3  N"), "the IRQ core is marked:\n{a}");
    assert!(a.contains("cpu1   E"), "the engine core is marked:\n{a}");
    insta::assert_snapshot!("tui_saturated_cpu_80x24", a);
    insta::assert_snapshot!("tui_saturated_cpu_160x48", render(&m, 160, 48));
    m.view = View::Queues;
    insta::assert_snapshot!("tui_saturated_queues_80x24", render(&m, 80, 24));
    m.view = View::Dashboard;
    insta::assert_snapshot!("tui_saturated_dashboard_160x48", render(&m, 160, 48));
}

#[test]
fn replay_shows_the_numbers_of_the_log() {
    let s = samples();
    let mut m = replay_model();
    let n_intervals = s.iter().filter(|x| x.host == HostRole::Local).count();
    assert_eq!(m.history.len(), n_intervals);
    update(&mut m, Action::Home);
    for idx in 0..n_intervals {
        let peer = s
            .iter()
            .find(|x| x.host == HostRole::Peer && x.index as usize == idx)
            .unwrap();
        let local = s
            .iter()
            .find(|x| x.host == HostRole::Local && x.index as usize == idx)
            .unwrap();
        let screen = render(&m, 160, 48);
        // Receiver-counted local→peer rate, as the log has it; on the last
        // interval (a 1 ms tail after the test stopped) the point's result:
        // the summary's bytes over its measured span, as `run` prints it.
        let want = if idx + 1 == n_intervals {
            let sum = records()
                .into_iter()
                .find_map(|r| match r {
                    Record::Summary(s) => Some(s),
                    _ => None,
                })
                .unwrap();
            let bytes: u64 = sum
                .streams
                .iter()
                .filter(|x| x.direction == "local->peer")
                .map(|x| x.bytes)
                .sum();
            let mean = BitsPerSec(bytes as f64 * 8.0 / sum.duration_s);
            assert!(
                screen.contains(&format!("Result: local→peer {mean}")),
                "the result under the chart:\n{screen}"
            );
            format!("result local→peer {mean}")
        } else {
            format!("local→peer {}", peer.engine.rx_bps)
        };
        assert!(
            screen.contains(&want),
            "interval {idx}: {want} not on screen:\n{screen}"
        );
        // The tail's 1 ms of /proc/stat ticks measure no CPU: the CPU
        // panel keeps the interval before it (it showed "mean 0.0%").
        let local = if idx + 1 == n_intervals {
            assert!(!screen.contains("mean 0.0%"), "the tail's CPU:\n{screen}");
            s.iter()
                .find(|x| x.host == HostRole::Local && x.index as usize == idx - 1)
                .unwrap()
        } else {
            local
        };
        let busiest = local.busiest_cpu().unwrap();
        let want = format!("▶cpu{}", busiest.cpu.0);
        assert!(screen.contains(&want), "interval {idx}: {want}\n{screen}");
        let want = format!("{:>5.1}%", busiest.busy().0);
        assert!(screen.contains(&want), "interval {idx}: {want}\n{screen}");
        update(&mut m, Action::Right);
    }
}

/// Not root: the local pair fell back to loopback, and the header says why.
#[test]
fn no_privileges() {
    let s = samples();
    let mut m = live_model(&s[..4]);
    m.pair = "loopback (not root, so no network namespaces; run as root for a veth pair)".into();
    m.local_host.privileged = false;
    let wide = render(&m, 160, 48);
    assert!(wide.contains("loopback (not root"), "{wide}");
    insta::assert_snapshot!("tui_no_privileges_160x48", wide);
    insta::assert_snapshot!("tui_no_privileges_80x24", render(&m, 80, 24));
}

#[test]
fn ebpf_queue_rows_show_which_cpus_handled_them() {
    let mut s: Vec<Sample> = samples().into_iter().take(2).collect();
    for x in &mut s {
        x.queues.push(
            serde_json::from_value(serde_json::json!({"iface":"veth-b","dir":"rx","queue":2,
                "packets":4000,"bytes":6_000_000,"drops":null,"pps":4000.0,"bps":4.8e7,"source":"ebpf"}))
            .unwrap(),
        );
        for (cpu, packets) in [(0, 1000u64), (1, 3000)] {
            x.queue_cpus.push(
                serde_json::from_value(serde_json::json!({"iface":"veth-b","dir":"rx","queue":2,
                    "cpu":cpu,"packets":packets,"bytes":packets*1500}))
                .unwrap(),
            );
        }
    }
    let mut m = live_model(&s);
    m.view = View::Queues;
    let a = render(&m, 160, 48);
    assert!(
        a.contains("eBPF cpu1 75% cpu0 25%"),
        "the queue→CPU split, busiest first:\n{a}"
    );
}

/// The control view of a replay shows the test the log holds, not defaults.
#[test]
fn replay_control_shows_the_logged_test() {
    let m = replay_model();
    // The fixture was written by `wirescope run -t 3s -P 2`.
    assert_eq!(m.test.streams, Some(2));
    assert_eq!(m.test.time, Some(std::time::Duration::from_secs(3)));
    let mut m = m;
    m.view = View::Control;
    let screen = render(&m, 160, 48);
    assert!(screen.contains("-P 2"), "{screen}");
}

/// An empty log says so instead of a blank dashboard.
#[test]
fn an_empty_log_says_it_is_empty() {
    let m = replay::model_from_records(Vec::new(), cfg(Source::Replay("empty.jsonl".into())));
    let screen = render(&m, 80, 24);
    assert!(screen.contains("holds no interval"), "{screen}");
}

/// A packet test: the queue view shows the sink's own count per queue and
/// where frames were dropped, live.
#[test]
fn the_queue_view_shows_the_packet_sinks_queues_and_drops() {
    use wirescope::traffic::sink::engine::SinkLive;
    use wirescope::traffic::sink::figures::{Drops, QueueFigures, Rates, SinkInterval};
    use wirescope::traffic::sink::SinkMode;
    use wirescope::traffic::EngineInterval;
    let rates = |pps: f64| Rates::of(pps as u64, 1.0, 64, None);
    let queue = |queue: u32, pps: f64, ring_full: u64| QueueFigures {
        queue,
        cpu: Some(CpuId(queue)),
        counted: pps as u64,
        rates: rates(pps),
        duplicates: 0,
        reordered: 0,
        missing_delta: 0,
        ring_full,
        nic_drops: None,
        thread: Some(queue),
        cpu_pct: Some(97.0),
        napi_cpu: None,
    };
    let live = SinkLive {
        iface: "veth-b".into(),
        figures: SinkInterval {
            secs: 1.0,
            mode: SinkMode::AfXdp,
            counted: 1_500_000,
            rates: rates(1_500_000.0),
            duplicates: 0,
            reordered: 0,
            missing: 4321,
            missing_delta: 4321,
            cpu_pct: Some(194.0),
            iface_rx_packets: None,
            drops: Drops {
                ring_full: 4321,
                ..Drops::default()
            },
            queues: vec![queue(0, 600_000.0, 0), queue(1, 900_000.0, 4321)],
        },
    };
    let mut s: Vec<Sample> = samples().into_iter().take(2).collect();
    for x in s.iter_mut().filter(|x| x.host == HostRole::Peer) {
        x.engine.extra = Some(EngineInterval::Sink(Box::new(live.clone())));
    }
    let mut m = live_model(&s);
    m.view = View::Queues;
    let a = render(&m, 160, 48);
    assert!(a.contains("packet sink (af-xdp) on veth-b"), "{a}");
    assert!(a.contains("ring full 4321"), "{a}");
    // Busiest queue first.
    let q1 = a.find("sink thread 1 cpu1").expect("queue 1's row");
    let q0 = a.find("sink thread 0 cpu0").expect("queue 0's row");
    assert!(q1 < q0, "{a}");
}

/// The facts view's "sink cores" row names the cores the sink runs on
/// when its end chose them itself (default pinning: the spec has no list),
/// from the CPUs of the threads in its figures.
#[test]
fn the_facts_view_names_the_sink_cores_an_end_chose_itself() {
    use wirescope::traffic::sink::engine::SinkLive;
    use wirescope::traffic::sink::figures::{QueueFigures, Rates, SinkInterval};
    use wirescope::traffic::sink::{SinkMode, SinkSpec};
    use wirescope::traffic::{EngineInterval, EngineSpec};
    let queue = |queue: u32, cpu: u32| QueueFigures {
        queue,
        cpu: Some(CpuId(cpu)),
        counted: 10,
        rates: Rates::of(10, 1.0, 64, None),
        duplicates: 0,
        reordered: 0,
        missing_delta: 0,
        ring_full: 0,
        nic_drops: None,
        thread: Some(queue),
        cpu_pct: None,
        napi_cpu: None,
    };
    let live = SinkLive {
        iface: "veth-b".into(),
        figures: SinkInterval {
            secs: 1.0,
            mode: SinkMode::AfXdp,
            counted: 20,
            rates: Rates::of(20, 1.0, 64, None),
            duplicates: 0,
            reordered: 0,
            missing: 0,
            missing_delta: 0,
            cpu_pct: None,
            iface_rx_packets: None,
            drops: Default::default(),
            // Two queues, one thread on cpu1.
            queues: vec![queue(0, 1), queue(1, 1)],
        },
    };
    let mut s: Vec<Sample> = samples().into_iter().take(2).collect();
    for x in s.iter_mut().filter(|x| x.host == HostRole::Peer) {
        x.engine.extra = Some(EngineInterval::Sink(Box::new(live.clone())));
    }
    let mut m = live_model(&s);
    assert!(m.facts.peer.is_some(), "the fixture's peer facts");
    m.spec = Some(EngineSpec::Sink(SinkSpec::default()));
    m.view = View::Facts;
    let a = render(&m, 160, 48);
    let row = a
        .lines()
        .find(|l| l.contains("sink cores"))
        .unwrap_or_else(|| panic!("no sink cores row: {a}"));
    assert!(
        row.contains("cpu1 node") && row.contains("NIC veth-b"),
        "{row}"
    );
}

/// RDMA ports in the queue view: state and rate from the facts, the
/// interval's traffic and the hw_counters that moved, trouble highlighted.
#[test]
fn the_queue_view_shows_rdma_ports_and_the_counters_that_move() {
    use wirescope::probe::capture_dir::CaptureDir;
    use wirescope::probe::rdma::{read_rdma_facts, CounterDelta, RdmaPortSample, RdmaSample};
    let rdma = read_rdma_facts(&CaptureDir::new("tests/fixtures/rdma"));
    let mut s: Vec<Sample> = samples().into_iter().take(2).collect();
    let moved = RdmaSample {
        ports: vec![RdmaPortSample {
            device: "mlx5_0".into(),
            port: 1,
            secs: 1.0,
            tx_bps: 2.0e10,
            rx_bps: 1.0e9,
            counters: vec![CounterDelta {
                group: "hw_counters".into(),
                name: "out_of_buffer".into(),
                delta: 5000,
                per_s: 5000.0,
            }],
            ..RdmaPortSample::default()
        }],
    };
    for x in s.iter_mut().filter(|x| x.host == HostRole::Local) {
        let mut f = x.facts.clone().map(|f| *f).unwrap_or_default();
        f.rdma = Some(rdma.clone());
        x.facts = Some(Box::new(f));
        x.rdma = Some(moved.clone());
    }
    let mut m = live_model(&s);
    m.view = View::Queues;
    let a = render(&m, 160, 60);
    assert!(a.contains("RDMA mlx5_0 port 1: ACTIVE, 25 Gb/sec"), "{a}");
    assert!(a.contains("out_of_buffer"), "{a}");
    assert!(a.contains("+5000"), "{a}");
    assert!(a.contains("RDMA mlx4_0 port 2"), "{a}");
}

/// The streaming replay (a long log opens at once and fills in) gives the
/// very outputs the batch replay does, whatever the record boundaries.
#[test]
fn a_streamed_replay_gives_the_outputs_of_a_whole_one() {
    use wirescope::record::replay::{outputs, Replayer};
    let whole = outputs(records());
    let mut r = Replayer::default();
    let mut streamed = Vec::new();
    for rec in records() {
        r.push(rec);
        streamed.extend(r.ready());
    }
    streamed.extend(r.finish());
    assert_eq!(streamed.len(), whole.len());
    assert!(
        streamed == whole,
        "the streamed outputs differ from the whole replay's"
    );
}

//! The TUI on big hosts: two synthetic hosts (256 CPUs on 2 NUMA nodes,
//! 8 mlx5 NICs × 64 queues) read by the real sampler and fed through the
//! live pipeline; the dashboard, CPU, queue and facts views at 80x24 and
//! 200x60 as insta snapshots, and the figures the generator wrote read back
//! from the rendered text (the hottest cores, 512 queues folded into a
//! summary, the NICs grouped). No timing is asserted.

use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::time::Duration;
use wirescope::cli::TuiArgs;
use wirescope::probe::ebpf::EbpfUnavailable;
use wirescope::probe::ethtool_names::Dir;
use wirescope::probe::sample::{HostRole, Sample};
use wirescope::probe::sampler::{EbpfLoader, Sampler};
use wirescope::probe::synthetic::{Layout, SyntheticHost};
use wirescope::probe::system::HostInfo;
use wirescope::record::pipeline::{Origin, Pipeline};
use wirescope::session::driver::{PointStart, SessionEvent};
use wirescope::session::outcome::RunEvent;
use wirescope::tui::action::{update, Action};
use wirescope::tui::app::actions_of;
use wirescope::tui::model::{Model, ModelConfig, Source, View};
use wirescope::tui::view;
use wirescope::units::BitsPerSec;

/// Intervals fed (enough for the rules' hysteresis to raise findings).
const INTERVALS: u32 = 6;

/// The peer's one saturated core (node 1, an SMT second thread).
const PEER_HOT: u32 = 201;

/// `n` 1-second intervals of `h` as a session hands them on (the engine's
/// figure: the first NIC's receive traffic), as host `role`.
fn intervals(h: &mut SyntheticHost, role: HostRole, boot: &str) -> Vec<Sample> {
    let loader: EbpfLoader = Box::new(|_, _| Err(EbpfUnavailable::Disabled("synthetic".into())));
    let mut s = Sampler::with(Box::new(h.source()), None, loader);
    s.set_ifaces(&h.nic_names());
    s.begin(None, Duration::ZERO, Duration::from_secs(1));
    (0..INTERVALS)
        .map(|i| {
            h.advance(1).unwrap();
            let mut x = s.sample();
            assert!(x.probe_errors.is_empty(), "{:?}", x.probe_errors);
            x.host = role;
            x.start_s = f64::from(i);
            x.end_s = f64::from(i) + 1.0;
            x.engine.rx_bytes = h.nic_bytes_per_s(0, Dir::Rx);
            x.engine.rx_bps = BitsPerSec::from_bytes(x.engine.rx_bytes, 1.0);
            at_one_second(&mut x);
            // Two machines, two boots (one boot is the embedded local pair).
            if let Some(f) = x.facts.as_mut() {
                f.boot_id = boot.into();
            }
            x
        })
        .collect()
}

/// The rates over the generator's 1 s (the sampler divides by the wall
/// time between its reads, a few milliseconds here): the counts are exact.
fn at_one_second(x: &mut Sample) {
    for q in &mut x.queues {
        q.pps = q.packets.unwrap_or(0) as f64;
        q.bps = BitsPerSec::from_bytes(q.bytes.unwrap_or(0), 1.0);
    }
    for i in &mut x.ifaces {
        i.rx_bps = BitsPerSec::from_bytes(i.delta.rx_bytes, 1.0);
        i.tx_bps = BitsPerSec::from_bytes(i.delta.tx_bytes, 1.0);
    }
}

/// Local: the default big host (cpu0-7 saturated by softirq); peer: the
/// same shape with one saturated core, cpu201.
struct Pair {
    local: SyntheticHost,
    peer: SyntheticHost,
    model: Model,
}

fn pair() -> Pair {
    let mut local = SyntheticHost::in_temp(Layout::default()).unwrap();
    let mut peer = SyntheticHost::in_temp(Layout {
        hot_cpus: vec![PEER_HOT],
        ..Layout::default()
    })
    .unwrap();
    let l = intervals(&mut local, HostRole::Local, "boot-a");
    let p = intervals(&mut peer, HostRole::Peer, "boot-b");
    let mut m = Model::new(ModelConfig {
        source: Source::Live,
        local_host: HostInfo {
            hostname: "big-a".into(),
            ..HostInfo::default()
        },
        pair: "big-a <-> big-b".into(),
        test: TuiArgs::defaults().test,
        history: Duration::from_secs(600),
        color: false,
        log_path: None,
    });
    let mut pipe = Pipeline::new(Origin::default());
    update(
        &mut m,
        Action::Connected {
            peer: HostInfo {
                hostname: "big-b".into(),
                kernel: "6.8.0-49-generic".into(),
                cpus: 256,
                ..HostInfo::default()
            },
        },
    );
    let mut feed = |m: &mut Model, ev: SessionEvent| {
        for a in actions_of(pipe.handle(ev).unwrap()) {
            update(m, a);
        }
    };
    feed(
        &mut m,
        SessionEvent::PointStarted(Box::new(PointStart {
            number: 1,
            sweep: None,
            spec: None,
            time: Some(Duration::from_secs(10)),
        })),
    );
    for (l, p) in l.into_iter().zip(p) {
        feed(
            &mut m,
            SessionEvent::Interval(Box::new(RunEvent {
                index: l.index,
                local: Some(l),
                peer: Some(p),
            })),
        );
    }
    Pair {
        local,
        peer,
        model: m,
    }
}

fn render(m: &Model, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| view::draw(f, m)).unwrap();
    t.backend().to_string()
}

/// The rendered rows, each split at the middle column into (local, peer) halves.
fn halves(text: &str, w: usize) -> Vec<(String, String)> {
    text.lines()
        .map(|l| {
            let chars: Vec<char> = l.trim_matches('"').chars().collect();
            let mid = (w / 2).min(chars.len());
            (chars[..mid].iter().collect(), chars[mid..].iter().collect())
        })
        .collect()
}

/// The strip row of `half` that starts at CPU `first`: its cells.
fn strip_row(half: &[String], first: u32) -> Option<String> {
    let label = format!("│{first:>4} ");
    half.iter().find_map(|l| {
        l.strip_prefix(&label)
            .map(|r| r.trim_end_matches('│').trim_end().to_string())
    })
}

#[test]
fn the_cpu_view_shows_every_core_as_heat_and_the_hottest_by_number() {
    let mut p = pair();
    p.model.view = View::Cpu;
    for (w, h) in [(80u16, 24u16), (200, 60)] {
        let text = render(&p.model, w, h);
        insta::assert_snapshot!(format!("tui_big_cpu_{w}x{h}"), &text);
        let rows = halves(&text, usize::from(w));
        let local: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
        let peer: Vec<String> = rows.iter().map(|r| r.1.clone()).collect();
        assert!(text.contains("local big-a: 256 cores"), "{text}");
        assert!(text.contains("node0: 128 cpus, mean 16%, 8 ≥95%"), "{text}");
        for half in [&local, &peer] {
            for node in 0..2 {
                let line = format!("node{node}: 128 cpus, mean ");
                assert!(half.iter().any(|l| l.contains(&line)), "{line}\n{text}");
            }
        }
        // Every core has one cell: the node's rows hold 128 cells each,
        // and the saturated cores are `Q` exactly where the generator put them.
        let per_row = if w == 80 { 32 } else { 64 };
        for (half, host) in [(&local, &p.local), (&peer, &p.peer)] {
            let mut cells = 0;
            let mut hot = Vec::new();
            for node in 0..2 {
                let ids: Vec<u32> = host.node_cpus(node).iter().map(|c| c.0).collect();
                for chunk in ids.chunks(per_row) {
                    let row = strip_row(half, chunk[0])
                        .unwrap_or_else(|| panic!("no strip row at cpu{}\n{text}", chunk[0]));
                    let row: Vec<char> = row.chars().collect();
                    assert_eq!(row.len(), chunk.len(), "row at cpu{}\n{text}", chunk[0]);
                    cells += row.len();
                    for (c, cell) in chunk.iter().zip(&row) {
                        if *cell == 'Q' {
                            hot.push(*c);
                        } else {
                            assert_eq!(*cell, '░', "cpu{c} is 10 % busy\n{text}");
                        }
                    }
                }
            }
            assert_eq!(cells, 256);
            hot.sort_unstable();
            let want: Vec<u32> = (0..256).filter(|c| host.is_hot(*c)).collect();
            assert_eq!(hot, want, "{text}");
        }
        // The hottest cores by number with their softirq share: the peer's
        // one saturated core marked busiest, the local's eight listed.
        let has = |half: &[String], what: &str, figures: &str| {
            half.iter().any(|l| {
                l.split("  ")
                    .any(|e| e.trim_start().starts_with(what) && e.contains(figures))
                    || (l.contains(what) && l.contains(figures))
            })
        };
        let sat = "100% u  0 s  0 i  0 q100";
        assert!(has(&peer, &format!("▶cpu{PEER_HOT} "), sat), "{text}");
        assert!(has(&local, "cpu0 ", sat), "{text}");
        assert!(
            has(&peer, "cpu0 ", "10% u  5 s  3 i  0 q  2"),
            "the peer's next hottest are the 10 % cores, by number\n{text}"
        );
    }
}

#[test]
fn the_queue_view_folds_512_queues_into_a_summary_and_the_busiest() {
    let mut p = pair();
    p.model.view = View::Queues;
    let total = |h: &SyntheticHost, dir| -> f64 { (0..8).map(|n| h.nic_pps(n, dir) as f64).sum() };
    for (w, h) in [(80u16, 24u16), (200, 60)] {
        let text = render(&p.model, w, h);
        insta::assert_snapshot!(format!("tui_big_queues_{w}x{h}"), &text);
        for (role, host) in [("local", &p.local), ("peer ", &p.peer)] {
            for (d, dir) in [("rx", Dir::Rx), ("tx", Dir::Tx)] {
                let summary = format!(
                    " {role} {d} 512 queues of 8 ifaces, 512 active: {} pkt/s ",
                    view::short(total(host, dir), "")
                );
                assert!(text.contains(&summary), "{summary}\n{text}");
            }
        }
        // The busiest queue: rx queue 0 of the first NIC at 1 Mpps (the
        // local host; the peer's queues 0 too: its hot queue count is 1).
        assert!(text.contains("max 1.0M pkt/s ens1f0np0 q0"), "{text}");
        assert!(
            text.lines().any(|l| l.contains(" local ens1f0np0 rx ")
                && l.contains(" 1.0M ")
                && l.contains(" 12.0G L2")),
            "{text}"
        );
        assert!(text.contains("more active queues folded"), "{text}");
    }
}

#[test]
fn the_facts_view_groups_the_nics() {
    let mut p = pair();
    p.model.view = View::Facts;
    let names = p.local.nic_names();
    for (w, h) in [(80u16, 24u16), (200, 60)] {
        let text = render(&p.model, w, h);
        insta::assert_snapshot!(format!("tui_big_facts_{w}x{h}"), &text);
        assert!(text.contains("8 NICs: ens1f0np0"), "{text}");
        assert!(!text.contains("nic1 driver"), "{text}");
        assert!(text.contains("mlx5_core"), "{text}");
    }
    // Wide enough for the NIC lists: NUMA nodes 0 and 1, four NICs each.
    let text = render(&p.model, 200, 60);
    let on = |node: u32| -> String {
        let nics: Vec<&str> = (0..8u32)
            .filter(|n| p.local.nic_node(*n) == node)
            .map(|n| names[n as usize].as_str())
            .collect();
        format!("{node}: {}", nics.join(" "))
    };
    assert!(text.contains(&on(0)), "{}\n{text}", on(0));
    assert!(text.contains(&on(1)), "{}\n{text}", on(1));
}

#[test]
fn the_dashboard_stays_readable() {
    let mut p = pair();
    p.model.view = View::Dashboard;
    for (w, h) in [(80u16, 24u16), (200, 60)] {
        let text = render(&p.model, w, h);
        insta::assert_snapshot!(format!("tui_big_dashboard_{w}x{h}"), &text);
        assert!(text.contains("Throughput"), "{text}");
        assert!(text.contains("node1: 128 cpus, mean 11%, 1 ≥95%"), "{text}");
        assert!(text.contains(&format!("▶cpu{PEER_HOT}")), "{text}");
        assert!(
            text.contains("hottest: u user s sys i irq q softirq"),
            "{text}"
        );
        // The chart keeps its 8 rows at least (below the 3 header lines).
        let chart_rows = text
            .lines()
            .take_while(|l| !l.contains("local big-a: 256 cores"))
            .count();
        assert!(chart_rows >= 3 + 8, "{chart_rows}\n{text}");
    }
}

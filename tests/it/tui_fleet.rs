//! The fleet view (`wirescope fleet --tui`): frames rendered with ratatui's
//! TestBackend at 80x24 and 120x40 from a model fed with synthetic
//! coordinator events (8 hosts all-pairs, one slow link, one odd setting;
//! a 40-host fleet that scrolls), insta snapshots; and the real binary's
//! fleet view in tmux against 4 agents in namespaces, until the matrix is
//! complete and `q`.

use crate::common::cores;
use crate::common::fleet::Fleet;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::process::Command;
use std::time::{Duration, Instant};
use wirescope::diagnose::{Evidence, Finding, HostRole, Severity};
use wirescope::fleet::coordinator::{explain, FleetEvent};
use wirescope::fleet::log::{DirectionResult, FleetSummary, PairRecord};
use wirescope::fleet::rounds::{rounds, Pattern};
use wirescope::probe::facts::{HostFacts, NicFacts};
use wirescope::probe::system::HostInfo;
use wirescope::tui::fleet::model::{
    update, Cell, FleetAction, FleetConfig, FleetModel, RunState, Screen,
};
use wirescope::tui::fleet::view;

const G: f64 = 1e9;

fn names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("node{i:02}")).collect()
}

fn config(n: usize) -> FleetConfig {
    let r = rounds(&Pattern::AllPairs, n);
    FleetConfig {
        hosts: names(n),
        pattern: "all-pairs".into(),
        test: "tcp stream".into(),
        time_s: 2.0,
        bidir: false,
        rounds_planned: r.len(),
        pairs_planned: r.iter().map(Vec::len).sum(),
        untested: Vec::new(),
        log_path: None,
        color: false,
    }
}

/// The slow link of the synthetic fleet: node04 → node06 (indices 3 → 5).
const SLOW: (usize, usize) = (3, 5);
/// The odd host: node07's MTU.
const ODD: usize = 6;

fn gbps(from: usize, to: usize) -> f64 {
    if (from, to) == SLOW {
        0.85
    } else {
        9.2 + 0.05 * ((from * 7 + to * 3) % 5) as f64
    }
}

fn direction(h: &[String], from: usize, to: usize) -> DirectionResult {
    let slow = (from, to) == SLOW;
    let findings = if slow {
        vec![Finding::new(
            "tcp.retransmits",
            Severity::Warn,
            HostRole::Local,
            "conn 0",
            "TCP retransmits 2.1 % of the segments sent",
            0.6,
        )
        .ev(Evidence::num(
            "retransmitted segments",
            2.1,
            "%",
            "TCP_INFO conn 0",
        ))
        .ev(Evidence::num("rtt", 840.0, "us", "TCP_INFO conn 0"))]
    } else {
        Vec::new()
    };
    DirectionResult {
        from: h[from].clone(),
        to: h[to].clone(),
        bps: Some(gbps(from, to) * G),
        retransmits: if slow { 1843 } else { (from + to) as u64 },
        busiest_from: Some(((from % 4) as u32, 38.5 + from as f64)),
        busiest_to: Some(((to % 4) as u32, 61.0 + to as f64)),
        findings,
        limited_by: slow.then(|| "the network path (retransmits, no core saturated)".to_string()),
        error: None,
    }
}

fn facts(i: usize) -> Box<HostFacts> {
    Box::new(HostFacts {
        kernel: "6.1.0-27-amd64".into(),
        nics: vec![NicFacts {
            name: "eth0".into(),
            mtu: Some(if i == ODD { 1400 } else { 1500 }),
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn send(m: &mut FleetModel, ev: FleetEvent) {
    update(m, FleetAction::Event(Box::new(ev)));
}

/// A model fed the events of an all-pairs run of `n` hosts up to round
/// `upto` (its pairs all done), with the first pair of the next round
/// running (one interval in).
fn fleet_model(n: usize, upto: usize) -> FleetModel {
    let h = names(n);
    let mut m = FleetModel::new(config(n));
    send(
        &mut m,
        FleetEvent::Checked(vec![Ok(HostInfo::default()); n]),
    );
    let plan = rounds(&Pattern::AllPairs, n);
    let mut seen = vec![false; n];
    for (r, pairs) in plan.iter().enumerate().take(upto.saturating_add(1)) {
        send(
            &mut m,
            FleetEvent::RoundStarted {
                round: r + 1,
                pairs: pairs.clone(),
            },
        );
        for &(a, b) in pairs {
            send(&mut m, FleetEvent::TestStarted { from: a, to: b });
            send(
                &mut m,
                FleetEvent::TestInterval {
                    from: a,
                    to: b,
                    bps: gbps(a, b) * G * 0.98,
                },
            );
            if r == upto {
                // The round running now: its first test in flight, the rest not started.
                break;
            }
            for x in [a, b] {
                if !seen[x] {
                    seen[x] = true;
                    send(&mut m, FleetEvent::Facts(x, facts(x)));
                }
            }
            send(&mut m, FleetEvent::TestStarted { from: b, to: a });
            let rec = PairRecord {
                round: r + 1,
                a: h[a].clone(),
                b: h[b].clone(),
                directions: vec![direction(&h, a, b), direction(&h, b, a)],
            };
            send(&mut m, FleetEvent::PairDone(Box::new(rec)));
        }
    }
    m
}

/// The whole run, closed by the summary the coordinator would send.
fn done_model(n: usize) -> FleetModel {
    let mut m = fleet_model(n, usize::MAX);
    let facts: Vec<Option<&HostFacts>> = m.facts.iter().map(|f| f.as_deref()).collect();
    let (slow_nodes, slow_links, odd_facts) = explain(&m.matrix, &m.cfg.hosts, &facts, &m.pairs);
    let summary = FleetSummary {
        matrix: m.matrix.clone(),
        slow_nodes,
        slow_links,
        odd_facts,
        untested: Vec::new(),
        failed: Vec::new(),
        rounds_run: m.cfg.rounds_planned,
        rounds_planned: m.cfg.rounds_planned,
        pairs_run: m.pairs.len(),
        interrupted: false,
        wall_s: 16.4,
        test_s: 14.0,
    };
    send(&mut m, FleetEvent::Done(Box::new(summary)));
    m
}

fn render(m: &FleetModel, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| view::draw(f, m)).unwrap();
    t.backend().to_string()
}

fn to_cell(m: &mut FleetModel, row: usize, col: usize) {
    while m.cursor.0 > row {
        update(m, FleetAction::Up);
    }
    while m.cursor.0 < row {
        update(m, FleetAction::Down);
    }
    while m.cursor.1 > col {
        update(m, FleetAction::Left);
    }
    while m.cursor.1 < col {
        update(m, FleetAction::Right);
    }
}

#[test]
fn the_matrix_fills_in_round_by_round_at_80x24() {
    let mut m = fleet_model(8, 4);
    assert_eq!(
        (m.round, m.pairs.len(), m.state.clone()),
        (5, 16, RunState::Running)
    );
    // The running test shows its live figure; the slow link, tested in an
    // earlier round, is already named with its evidence, and so is the odd MTU.
    let running: Vec<_> = m.live.keys().copied().collect();
    assert_eq!(running.len(), 1, "{running:?}");
    assert!(matches!(
        m.cell(running[0].0, running[0].1),
        Cell::Running(Some(_))
    ));
    to_cell(&mut m, SLOW.0, SLOW.1);
    let screen = render(&m, 80, 24);
    assert!(
        screen.contains("round 5/7 · pairs 16/28 · hosts up 8, down 0"),
        "{screen}"
    );
    assert!(
        screen.contains("slow link node04 → node06: 0.85 Gb/s"),
        "{screen}"
    );
    assert!(
        screen.contains("odd setting nic.mtu: node07: 1400; the other"),
        "{screen}"
    );
    assert!(
        screen.contains("0.85!"),
        "the slow cell is marked without colour:\n{screen}"
    );
    insta::assert_snapshot!("fleet_running_80x24", screen);
}

#[test]
fn the_finished_run_at_120x40_names_the_slow_link_and_the_odd_host_only() {
    let mut m = done_model(8);
    assert_eq!(m.state, RunState::Done);
    let links: Vec<(&str, &str)> = m
        .slow_links
        .iter()
        .map(|l| (l.what.from.as_str(), l.what.to.as_str()))
        .collect();
    assert_eq!(links, [("node04", "node06")]);
    assert!(m.slow_nodes.is_empty(), "{:?}", m.slow_nodes);
    let odd: Vec<&str> = m.odd.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(odd, ["nic.mtu"]);
    to_cell(&mut m, 0, 1);
    let screen = render(&m, 120, 40);
    assert!(screen.contains("round 7/7 · pairs 28/28"), "{screen}");
    assert!(screen.contains("Outliers (the run's summary)"), "{screen}");
    insta::assert_snapshot!("fleet_done_120x40", screen);
}

#[test]
fn enter_on_the_slow_link_shows_its_pair_and_esc_goes_back() {
    let mut m = done_model(8);
    to_cell(&mut m, SLOW.0, SLOW.1);
    update(&mut m, FleetAction::Open);
    assert_eq!(
        m.screen,
        Screen::Detail {
            from: SLOW.0,
            to: SLOW.1,
            scroll: 0
        }
    );
    let screen = render(&m, 80, 24);
    for want in [
        "node04 → node06  0.85 Gb/s · 1843 retransmits",
        "node06 → node04  9.",
        "busiest core: node04 cpu3 41.5 %, node06 cpu1 66.0 %",
        "limited by: the network path",
        "[warn] TCP retransmits 2.1 % of the segments sent",
        "retransmitted segments = 2.1 % (TCP_INFO conn 0)",
    ] {
        assert!(screen.contains(want), "{want:?} in:\n{screen}");
    }
    insta::assert_snapshot!("fleet_detail_80x24", screen);
    update(&mut m, FleetAction::Back);
    assert_eq!(m.screen, Screen::Matrix);
    assert!(render(&m, 80, 24).contains("slow link node04 → node06"));
}

#[test]
fn a_big_fleet_scrolls_with_the_cursor_and_numbers_its_columns() {
    let mut m = fleet_model(40, 2);
    to_cell(&mut m, 30, 25);
    let screen = render(&m, 80, 24);
    // The cursor's row and column are on screen although 40 do not fit.
    let row = screen
        .lines()
        .find(|l| l.contains("30 node31"))
        .map(str::to_string);
    assert!(row.is_some(), "row 30 shown:\n{screen}");
    assert!(
        screen.contains(" rows "),
        "the scroll position is said:\n{screen}"
    );
    assert!(
        !screen.contains(" 0 node01"),
        "the first rows scrolled away:\n{screen}"
    );
    insta::assert_snapshot!("fleet_40_hosts_80x24", screen);
}

// ---------------------------------------------------------------------------
// End to end: the real binary in tmux.

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

struct Session(String);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .status();
    }
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> Option<String>) -> String {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `wirescope fleet --tui` against `f`'s agents in a tmux pane of 100x30;
/// the shell writes the exit status to `exit` when it ends.
struct FleetTui {
    name: String,
    exit: std::path::PathBuf,
    log: std::path::PathBuf,
    _session: Session,
}

fn fleet_tui(f: &Fleet, tag: &str, test_s: &str) -> FleetTui {
    assert!(
        Command::new("tmux").arg("-V").output().is_ok(),
        "this test drives the real binary in tmux: apt-get install tmux (.ci/run does)"
    );
    let exit = f.dir.path().join(format!("{tag}.exit"));
    let log = f.dir.path().join(format!("{tag}.jsonl"));
    let name = format!("wst-{tag}-{}", std::process::id());
    let cmd = format!(
        "ip netns exec {} env WIRESCOPE_TOKEN={} {} fleet --tui --hosts {} -t {test_s} --ebpf off --log {}; echo $? > {}; sleep 60",
        f.coord,
        crate::common::TOKEN,
        crate::common::bin(),
        f.hosts(),
        log.display(),
        exit.display()
    );
    let status = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &name,
            "-x",
            "100",
            "-y",
            "30",
            &cmd,
        ])
        .status()
        .unwrap();
    assert!(status.success());
    FleetTui {
        _session: Session(name.clone()),
        name,
        exit,
        log,
    }
}

impl FleetTui {
    fn screen(&self) -> String {
        tmux(&["capture-pane", "-p", "-t", &self.name])
    }

    fn wait_screen(&self, what: &str, f: impl Fn(&str) -> bool) -> String {
        wait_for(what, Duration::from_secs(90), || {
            let p = self.screen();
            f(&p).then_some(p)
        })
    }

    fn keys(&self, k: &str) {
        tmux(&["send-keys", "-t", &self.name, k]);
    }

    fn alternate_screen(&self) -> bool {
        tmux(&["display-message", "-p", "-t", &self.name, "#{alternate_on}"]).trim() == "1"
    }

    fn exit_code(&self) -> String {
        wait_for("exit", Duration::from_secs(30), || {
            std::fs::read_to_string(&self.exit)
                .ok()
                .filter(|s| !s.is_empty())
        })
        .trim()
        .to_string()
    }

    fn summary(&self) -> FleetSummary {
        let recs = wirescope::fleet::log::read(&self.log).expect("the fleet log");
        match recs.last() {
            Some(wirescope::fleet::log::FleetRecord::FleetSummary(s)) => (**s).clone(),
            other => panic!("the log ends with the summary: {other:?}"),
        }
    }
}

/// The measured cells of the matrix rows on screen (rows `│i 10.99.`).
fn measured_cells(screen: &str, n: usize) -> Vec<usize> {
    screen
        .lines()
        .filter(|l| (0..n).any(|i| l.contains(&format!("│{i} 10.99."))))
        .map(|r| {
            r.split_whitespace()
                .filter(|w| w.trim_end_matches(['!', '│']).parse::<f64>().is_ok())
                .count()
        })
        .collect()
}

#[test]
fn the_fleet_view_of_four_agents_under_tmux() {
    let _cores = cores();
    let mut f = Fleet::new(4);
    f.start_agents();
    f.line_rate("400mbit");
    let tui = fleet_tui(&f, "fleet-q", "1s");
    // 4 hosts all-pairs: 6 pairs in 3 rounds, both directions.
    let screen = tui.wait_screen("the complete matrix", |p| {
        p.contains("round 3/3 · pairs 6/6") && p.contains(" done")
    });
    assert!(screen.contains("hosts up 4, down 0"), "{screen}");
    assert!(
        tui.alternate_screen(),
        "the fleet view runs on the alternate screen"
    );
    assert_eq!(
        measured_cells(&screen, 4),
        [3, 3, 3, 3],
        "every direction measured:\n{screen}"
    );
    tui.keys("q");
    let code = tui.exit_code();
    assert!(
        !tui.alternate_screen(),
        "the terminal left the alternate screen"
    );
    let s = tui.summary();
    assert_eq!((s.pairs_run, s.interrupted), (6, false), "{s:?}");
    let named = !s.slow_nodes.is_empty() || !s.slow_links.is_empty() || !s.odd_facts.is_empty();
    assert_eq!(
        code,
        if named { "3" } else { "0" },
        "exit code as `wirescope fleet` would give for this summary: {s:?}"
    );
    let text = tmux(&["capture-pane", "-p", "-S", "-200", "-t", &tui.name]);
    assert!(
        text.contains("6 pairs in 3/3 rounds"),
        "the summary printed after the view:\n{text}"
    );
}

#[test]
fn ctrl_c_stops_the_fleet_and_keeps_the_partial_matrix_until_q() {
    let _cores = cores();
    let mut f = Fleet::new(4);
    f.start_agents();
    f.line_rate("400mbit");
    let tui = fleet_tui(&f, "fleet-c", "2s");
    // Round 1 done (2 pairs), round 2 running.
    let before = tui.wait_screen("round 2 running", |p| p.contains("round 2/3 · pairs 2/6"));
    tui.keys("C-c");
    let screen = tui.wait_screen("the run interrupted", |p| {
        p.contains("interrupted: partial matrix")
    });
    assert!(
        tui.alternate_screen(),
        "the view stays after Ctrl-C:\n{screen}"
    );
    let cells: usize = measured_cells(&screen, 4).iter().sum();
    assert!(
        (4..12).contains(&cells),
        "round 1's 4 directions (and what round 2 measured) stay:\n{before}\n{screen}"
    );
    tui.keys("q");
    assert_eq!(
        tui.exit_code(),
        "130",
        "a run stopped early exits like `wirescope fleet` after Ctrl-C"
    );
    assert!(
        !tui.alternate_screen(),
        "the terminal left the alternate screen"
    );
    let s = tui.summary();
    assert!(s.interrupted, "{s:?}");
    assert!(s.rounds_run < 3 && s.pairs_run >= 2, "{s:?}");
}

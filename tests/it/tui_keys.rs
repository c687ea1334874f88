//! Key handling through the key table and `update`, without a terminal; the
//! event loop driven with scripted events and a TestBackend.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::time::Duration;
use wirescope::cli::TuiArgs;
use wirescope::probe::sample::{HostRole, Sample};
use wirescope::probe::system::HostInfo;
use wirescope::record::log::read_log;
use wirescope::record::pipeline::Output;
use wirescope::record::schema::Record;
use wirescope::traffic::tcp::TcpMode;
use wirescope::tui::action::{update, Action, Effect};
use wirescope::tui::app::{run_loop, Io};
use wirescope::tui::event::Event;
use wirescope::tui::keys::{action_for, help_lines, KEYMAP};
use wirescope::tui::model::{LogState, Modal, Model, ModelConfig, RunState, Source, View};

fn model() -> Model {
    let mut m = Model::new(ModelConfig {
        source: Source::Live,
        local_host: HostInfo::default(),
        pair: String::new(),
        test: TuiArgs::defaults().test,
        history: Duration::from_secs(600),
        color: false,
        log_path: None,
    });
    update(
        &mut m,
        Action::Connected {
            peer: HostInfo::default(),
        },
    );
    m
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn press(m: &mut Model, code: KeyCode) -> Vec<Effect> {
    match action_for(&key(code)) {
        Some(a) => update(m, a),
        None => Vec::new(),
    }
}

fn samples() -> Vec<Sample> {
    read_log(std::path::Path::new("tests/fixtures/tui/run.jsonl"))
        .unwrap()
        .into_iter()
        .filter_map(|r| match r {
            Record::Sample(s) => Some(*s),
            _ => None,
        })
        .collect()
}

fn feed(m: &mut Model, n: usize) -> Vec<Effect> {
    let s = samples();
    let (l, p): (Vec<_>, Vec<_>) = s.into_iter().partition(|x| x.host == HostRole::Local);
    let mut eff = Vec::new();
    for (l, p) in l.into_iter().zip(p).cycle().take(n) {
        eff.extend(update(
            m,
            Action::Interval {
                local: Some(Box::new(l)),
                peer: Some(Box::new(p)),
                changes: Vec::new(),
                active: Vec::new(),
            },
        ));
    }
    eff
}

#[test]
fn the_table_maps_the_documented_keys() {
    assert!(matches!(
        action_for(&key(KeyCode::Char('q'))),
        Some(Action::Quit)
    ));
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert!(matches!(action_for(&ctrl_c), Some(Action::Quit)));
    assert!(
        action_for(&key(KeyCode::Char('c'))).is_none(),
        "plain c does nothing"
    );
    assert!(matches!(
        action_for(&key(KeyCode::Tab)),
        Some(Action::NextView)
    ));
    assert!(matches!(
        action_for(&key(KeyCode::BackTab)),
        Some(Action::PrevView)
    ));
    for (i, v) in View::ALL.iter().enumerate() {
        let c = char::from_digit(i as u32 + 1, 10).unwrap();
        assert!(matches!(action_for(&key(KeyCode::Char(c))), Some(Action::ShowView(x)) if x == *v));
    }
    // '?' arrives with SHIFT on most terminals.
    let q = KeyEvent::new(KeyCode::Char('?'), KeyModifiers::SHIFT);
    assert!(matches!(action_for(&q), Some(Action::ToggleHelp)));
    let mut release = key(KeyCode::Char('q'));
    release.kind = KeyEventKind::Release;
    assert!(action_for(&release).is_none());
    for (k, a) in [('s', "StartStop"), ('p', "TogglePause"), ('l', "ToggleLog")] {
        let got = format!("{:?}", action_for(&key(KeyCode::Char(k))).unwrap());
        assert_eq!(got, a);
    }
    assert!(action_for(&key(KeyCode::Char('z'))).is_none());
}

#[test]
fn help_lists_every_binding() {
    let help = help_lines();
    for b in KEYMAP {
        assert!(help.iter().any(|(k, _)| *k == b.keys), "{} missing", b.keys);
    }
}

#[test]
fn views_help_and_quit() {
    let mut m = model();
    press(&mut m, KeyCode::Tab);
    assert_eq!(m.view, View::Cpu);
    press(&mut m, KeyCode::BackTab);
    press(&mut m, KeyCode::BackTab);
    assert_eq!(m.view, View::Tune, "the last view");
    press(&mut m, KeyCode::Char('?'));
    assert_eq!(m.modal, Modal::Help);
    press(&mut m, KeyCode::Char('3'));
    assert_eq!(m.modal, Modal::None, "any key closes the help");
    assert_eq!(m.view, View::Tune, "... and does nothing else");
    assert!(press(&mut m, KeyCode::Char('q')).is_empty());
    assert!(m.quit);
}

#[test]
fn start_stop_goes_through_the_same_validation_as_run() {
    let mut m = model();
    let eff = press(&mut m, KeyCode::Char('s'));
    let [Effect::Start(plan)] = eff.as_slice() else {
        panic!("{eff:?}")
    };
    assert_eq!(plan.spec.as_tcp().unwrap().mode, TcpMode::Stream);
    assert_eq!(plan.time, Some(Duration::from_secs(10)), "default: 10 s");
    assert_eq!(m.state, RunState::Starting);
    assert!(matches!(
        press(&mut m, KeyCode::Char('s')).as_slice(),
        [Effect::Stop]
    ));
    assert_eq!(m.state, RunState::Stopping);
    // Quitting while a test runs stops it.
    let mut m2 = model();
    press(&mut m2, KeyCode::Char('s'));
    assert!(matches!(
        press(&mut m2, KeyCode::Char('q')).as_slice(),
        [Effect::Stop]
    ));

    // Control view: Left wraps tcp stream -> rdma write lat, then rdma
    // write bw: the plan is an rdma one (the session's preflight says
    // whether this host can run it).
    let mut m = model();
    press(&mut m, KeyCode::Char('6'));
    press(&mut m, KeyCode::Left);
    assert_eq!(m.test.engine, wirescope::traffic::EngineKind::Rdma);
    assert_eq!(m.test.mode.as_deref(), Some("lat"));
    press(&mut m, KeyCode::Left);
    assert!(m.test_error.is_none(), "{:?}", m.test_error);
    let eff = press(&mut m, KeyCode::Enter);
    let [Effect::Start(plan)] = eff.as_slice() else {
        panic!("{eff:?}")
    };
    assert!(matches!(
        &plan.spec,
        wirescope::traffic::EngineSpec::Rdma(r) if r.mode == wirescope::traffic::rdma::RdmaMode::Bw
    ));

    // Control view: Right five times is the packet sink (af-xdp); two
    // queues, a larger frame, then start.
    let mut m = model();
    press(&mut m, KeyCode::Char('6'));
    for _ in 0..5 {
        press(&mut m, KeyCode::Right);
    }
    assert_eq!(m.test.engine, wirescope::traffic::EngineKind::Sink);
    press(&mut m, KeyCode::Down);
    press(&mut m, KeyCode::Right);
    assert_eq!(m.test.engines.sink.queues, Some(2));
    press(&mut m, KeyCode::Down);
    press(&mut m, KeyCode::Down);
    press(&mut m, KeyCode::Right);
    assert_eq!(m.test.engines.sink.frame_size, Some(128));
    assert!(m.test_error.is_none(), "{:?}", m.test_error);
    let eff = press(&mut m, KeyCode::Enter);
    let [Effect::Start(plan)] = eff.as_slice() else {
        panic!("{eff:?}")
    };
    let k = plan.spec.as_sink().unwrap();
    assert_eq!((k.queues, k.frame_size), (2, 128));

    // Control view: Right four times is grpc stream; channels and
    // RPCs in flight, then start: the plan is run's own.
    let mut m = model();
    press(&mut m, KeyCode::Char('6'));
    for _ in 0..4 {
        press(&mut m, KeyCode::Right);
    }
    assert_eq!(m.test.engine, wirescope::traffic::EngineKind::Grpc);
    press(&mut m, KeyCode::Down);
    press(&mut m, KeyCode::Right);
    assert_eq!(m.test.engines.grpc.channels, Some(2));
    press(&mut m, KeyCode::Down);
    press(&mut m, KeyCode::Left);
    assert!(m.test_error.is_none(), "{:?}", m.test_error);
    let eff = press(&mut m, KeyCode::Enter);
    let [Effect::Start(plan)] = eff.as_slice() else {
        panic!("{eff:?}")
    };
    let g = plan.spec.as_grpc().unwrap();
    assert_eq!(
        (g.mode, g.channels, g.concurrency),
        (wirescope::traffic::grpc::GrpcMode::Stream, 2, 64)
    );

    // Control view: mode rr (Right twice: stream -> pingpong -> rr), more connections, start.
    let mut m = model();
    press(&mut m, KeyCode::Char('6'));
    press(&mut m, KeyCode::Right);
    press(&mut m, KeyCode::Right);
    assert_eq!(
        TcpMode::from_option(m.test.mode.as_deref()).unwrap(),
        TcpMode::Rr
    );
    press(&mut m, KeyCode::Down);
    press(&mut m, KeyCode::Right);
    press(&mut m, KeyCode::Right);
    assert_eq!(m.test.conns, Some(4));
    assert!(m.test_error.is_none());
    let eff = press(&mut m, KeyCode::Enter);
    let [Effect::Start(plan)] = eff.as_slice() else {
        panic!("{eff:?}")
    };
    assert_eq!(
        (
            plan.spec.as_tcp().unwrap().mode,
            plan.spec.as_tcp().unwrap().streams
        ),
        (TcpMode::Rr, 4)
    );

    // An invalid combination is refused with run's own message.
    let mut m = model();
    m.test.omit = Duration::from_secs(30);
    assert!(press(&mut m, KeyCode::Char('s')).is_empty());
    assert_eq!(m.view, View::Control);
    let msg = m.message.clone().unwrap();
    assert!(msg.contains("--omit") && msg.contains("--time"), "{msg}");
}

#[test]
fn pause_pins_the_display_while_data_keeps_coming() {
    let mut m = model();
    feed(&mut m, 3);
    press(&mut m, KeyCode::Char('p'));
    let pinned = m.current().unwrap().seq;
    feed(&mut m, 2);
    assert_eq!(m.current().unwrap().seq, pinned);
    assert_eq!(m.newer_than_cursor(), 2);
    press(&mut m, KeyCode::Left);
    assert_eq!(m.current().unwrap().seq, pinned - 1);
    press(&mut m, KeyCode::End);
    assert_eq!(
        m.current().unwrap().seq,
        pinned + 2,
        "End follows live again"
    );
    assert!(!m.paused());
}

#[test]
fn history_is_bounded() {
    let mut m = Model::new(ModelConfig {
        source: Source::Live,
        local_host: HostInfo::default(),
        pair: String::new(),
        test: TuiArgs::defaults().test,
        history: Duration::from_secs(5),
        color: false,
        log_path: None,
    });
    feed(&mut m, 12);
    assert_eq!(m.history.len(), 5);
    assert_eq!(m.history.back().unwrap().seq, 11);
    assert!(
        m.history
            .iter()
            .all(|i| i.local.as_ref().unwrap().facts.is_none()),
        "facts live in the model, not in every interval"
    );
    assert!(m.facts.local.is_some() && m.facts.peer.is_some());
}

#[test]
fn log_toggle_asks_the_pipeline_and_writes_nothing_itself() {
    let mut m = model();
    let eff = press(&mut m, KeyCode::Char('l'));
    assert!(matches!(eff.as_slice(), [Effect::OpenLog { path: None }]));
    assert!(
        feed(&mut m, 3).is_empty(),
        "intervals never make the UI write: the pipeline thread records"
    );
    update(&mut m, Action::LogOpened("x.jsonl".into()));
    assert_eq!(m.log, LogState::On("x.jsonl".into()));
    assert!(feed(&mut m, 1).is_empty());
    assert!(matches!(
        press(&mut m, KeyCode::Char('l')).as_slice(),
        [Effect::CloseLog]
    ));
    assert_eq!(m.log, LogState::Off);
}

#[test]
fn the_loop_drains_events_and_redraws_at_most_once_per_batch() {
    let mut m = model();
    let (tx, mut rx) = tokio::sync::mpsc::channel(256);
    let s = samples();
    let (l, p): (Vec<_>, Vec<_>) = s.into_iter().partition(|x| x.host == HostRole::Local);
    for (l, p) in l.into_iter().zip(p).cycle().take(100) {
        tx.try_send(Event::Output(Box::new(Output::Interval {
            local: Some(Box::new(l)),
            peer: Some(Box::new(p)),
            changes: Vec::new(),
            active: Vec::new(),
        })))
        .unwrap();
    }
    for _ in 0..50 {
        tx.try_send(Event::Tick).unwrap();
    }
    tx.try_send(Event::Input(key(KeyCode::Char('q')))).unwrap();
    let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let mut io = Io::default();
    run_loop(&mut term, &mut m, &mut rx, &mut io).unwrap();
    assert!(m.quit);
    assert_eq!(m.history.len(), 100);
    assert!(io.frames <= 2, "{} frames for one batch", io.frames);
}

#[test]
fn the_tune_view_runs_a_checklist_and_answers_its_questions() {
    use wirescope::tui::tune::TuneNote;
    use wirescope::tune::runner::{Question, Record};
    let mut m = model();
    press(&mut m, KeyCode::Char('7'));
    assert_eq!(m.view, View::Tune);
    // Not connected yet: refused with a reason, nothing asked of the session.
    m.state = RunState::Connecting;
    assert!(press(&mut m, KeyCode::Enter).is_empty());
    assert!(m.message.is_some());
    m.state = RunState::Idle;
    press(&mut m, KeyCode::Down);
    assert_eq!(m.tune.selected, 1);
    press(&mut m, KeyCode::Up);
    let eff = press(&mut m, KeyCode::Enter);
    let [Effect::Checklist(c)] = eff.as_slice() else {
        panic!("{eff:?}")
    };
    assert_eq!(c.name, "single-stream");
    assert_eq!(m.tune.running.as_deref(), Some("single-stream"));
    // A second Enter while it runs does nothing, nor does starting a test.
    assert!(press(&mut m, KeyCode::Enter).is_empty());
    assert!(press(&mut m, KeyCode::Char('s')).is_empty());
    assert_eq!(m.state, RunState::Idle);
    // Its question is shown; y answers it once.
    let q = Question::Apply {
        step: 1,
        rule: "tcp.buffer-limited".into(),
        finding: "the receive buffer limits the window".into(),
        evidence: vec!["tcp_rmem max = 16384 B (sysctl)".into()],
        host: wirescope::diagnose::HostRole::Peer,
        host_why: "it receives the test's data".into(),
        change: "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 268435456\"".into(),
    };
    update(&mut m, Action::Tune(Box::new(TuneNote::Question(q))));
    assert!(m.tune.question.is_some());
    assert!(m
        .tune
        .lines
        .iter()
        .any(|l| l.contains("tcp.buffer-limited on the peer host")));
    assert!(matches!(
        press(&mut m, KeyCode::Char('y')).as_slice(),
        [Effect::Answer(true)]
    ));
    assert!(
        press(&mut m, KeyCode::Char('n')).is_empty(),
        "no question waits"
    );
    update(
        &mut m,
        Action::Tune(Box::new(TuneNote::Record(Record::Baseline {
            metric: wirescope::tune::decide::Metric::Throughput,
            values: vec![2.64e9, 2.70e9],
            findings: Vec::new(),
        }))),
    );
    assert!(m.tune.lines.iter().any(|l| l.contains("2.64 Gbit/s")));
    update(&mut m, Action::Tune(Box::new(TuneNote::Ended(Ok(())))));
    assert!(m.tune.running.is_none());
    let screen = {
        let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(100, 30)).unwrap();
        t.draw(|f| wirescope::tui::view::draw(f, &m)).unwrap();
        t.backend().to_string()
    };
    assert!(
        screen.contains("single-stream") && screen.contains("finished"),
        "{screen}"
    );
}

//! One code path builds headers, records, findings and summaries for every
//! face: the same session events fed to `run`'s consumer (log from the start,
//! as `run --log` does) and to the TUI's pipeline thread (recording turned on
//! with `l` before the test starts, as `tui --log` does) give logs that differ
//! only in their timestamps — compared record by record, whole records.
//!
//! The events are a real session's: the Samples of a recorded
//! `wirescope run -t 3s -P 2` on the local pair, replayed in order.

use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use wirescope::probe::ebpf::EbpfHosts;
use wirescope::probe::sample::{HostRole, Sample};
use wirescope::probe::system::HostInfo;
use wirescope::record::log::read_log;
use wirescope::record::pipeline::{Origin, Pipeline};
use wirescope::record::schema::Record;
use wirescope::session::driver::{PointStart, SessionEvent};
use wirescope::session::outcome::{EndReason, PointOutcome, RunEvent};
use wirescope::session::plan::{Plan, TestPlan};
use wirescope::session::proto::SideResult;
use wirescope::traffic::ConnSnapshot;
use wirescope::tui::event::Event;
use wirescope::tui::session_task::{pipeline_thread, PipeCmd, PipeIn};

const LOG: &str = "tests/fixtures/tui/run.jsonl";

/// The session events of the recorded run, as the driver published them.
fn session_events() -> Vec<SessionEvent> {
    let records = read_log(Path::new(LOG)).unwrap();
    let Some(Record::Header(h)) = records.first().cloned() else {
        panic!("the fixture starts with its header")
    };
    let spec = h.spec.clone().expect("a test log has a spec");
    let samples: Vec<Sample> = records
        .iter()
        .filter_map(|r| match r {
            Record::Sample(s) => Some((**s).clone()),
            _ => None,
        })
        .collect();
    let mut ev = vec![
        SessionEvent::Ready {
            peer: Box::new(h.hosts.peer.clone()),
            ebpf: Box::new(h.ebpf.clone().unwrap_or(EbpfHosts {
                local: None,
                peer: None,
            })),
        },
        SessionEvent::PlanStarted(Box::new(Plan::Test(Box::new(TestPlan {
            spec: spec.clone(),
            time: Some(Duration::from_secs(3)),
            omit: Duration::ZERO,
            interval: Duration::from_secs(1),
            sweep: None,
        })))),
        SessionEvent::PointStarted(Box::new(PointStart {
            number: 1,
            sweep: None,
            spec: Some(spec.clone()),
            time: Some(Duration::from_secs(3)),
        })),
    ];
    let last = samples.iter().map(|s| s.index).max().unwrap_or(0);
    let mut totals = vec![ConnSnapshot::default(); spec.connection_count()];
    for i in 0..=last {
        let local = samples
            .iter()
            .find(|s| s.index == i && s.host == HostRole::Local)
            .cloned();
        let peer = samples
            .iter()
            .find(|s| s.index == i && s.host == HostRole::Peer)
            .cloned();
        for c in peer.iter().flat_map(|p| p.conns.iter()) {
            if let Some(t) = totals.get_mut(c.id) {
                t.rx_bytes += c.rx_bytes;
            }
        }
        ev.push(SessionEvent::Interval(Box::new(RunEvent {
            index: i,
            local,
            peer,
        })));
    }
    ev.push(SessionEvent::PointDone(Box::new(PointOutcome {
        local: SideResult {
            duration_s: 3.0,
            ..SideResult::default()
        },
        peer: Some(SideResult {
            conns: totals,
            duration_s: 3.0,
            ..SideResult::default()
        }),
        end: EndReason::Completed,
    })));
    ev.push(SessionEvent::PlanDone);
    ev
}

fn origin() -> Origin {
    Origin {
        command_line: vec!["wirescope".into()],
        local: HostInfo::current(),
        pair: "local pair: recorded".into(),
        netns: None,
    }
}

/// `run --log PATH`: the consumer `wirescope run` uses.
fn run_face_log(dir: &Path) -> Vec<Record> {
    let path = dir.join("run.jsonl");
    let mut p = Pipeline::new(origin());
    p.record_to(wirescope::record::log::LogWriter::create(&path).unwrap())
        .unwrap();
    let (tx, mut rx) = mpsc::channel(1024);
    for e in session_events() {
        tx.try_send(e).unwrap();
    }
    drop(tx);
    let face = wirescope::face::run::consume(&mut rx, &mut p, true, &CancellationToken::new());
    assert_eq!(face.exit(p.worst_raised(), None).unwrap(), 0);
    read_log(&path).unwrap()
}

/// `tui --log PATH` (or `l` before `s`): the TUI's pipeline thread.
fn tui_face_log(dir: &Path) -> Vec<Record> {
    let path = dir.join("tui.jsonl");
    let (tx, rx) = mpsc::channel(1024);
    let (ui_tx, mut ui_rx) = mpsc::channel(1024);
    let thread = pipeline_thread(origin(), rx, ui_tx).unwrap();
    tx.blocking_send(PipeIn::Cmd(PipeCmd::Record(path.clone())))
        .unwrap();
    for e in session_events() {
        tx.blocking_send(PipeIn::Session(e)).unwrap();
    }
    drop(tx);
    thread.join().unwrap();
    let mut opened = false;
    while let Ok(ev) = ui_rx.try_recv() {
        match ev {
            Event::LogOpened(p) => opened = p == path,
            Event::LogFailed(e) => panic!("{e}"),
            _ => {}
        }
    }
    assert!(opened, "the UI is told the log is open");
    read_log(&path).unwrap()
}

/// A record with its wall-clock timestamps cleared.
fn untimed(r: &Record) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    if let Some(o) = v.as_object_mut() {
        o.remove("start_time");
    }
    v
}

#[test]
fn tui_log_and_run_log_are_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_face_log(dir.path());
    let tui = tui_face_log(dir.path());
    assert!(
        run.len() > 2 + 8,
        "header, point_start, samples, summary: {} records",
        run.len()
    );
    assert!(matches!(run.first(), Some(Record::Header(_))));
    assert!(matches!(run.last(), Some(Record::Summary(_))));
    assert!(
        run.iter().any(|r| matches!(r, Record::Finding(_))),
        "the recorded run raised findings: both logs must carry them"
    );
    assert_eq!(run.len(), tui.len(), "same number of records");
    for (i, (a, b)) in run.iter().zip(&tui).enumerate() {
        assert_eq!(untimed(a), untimed(b), "record {i} differs");
    }
}

//! A real healthy run (2 streams over the embedded namespace pair) must produce
//! no warn or error finding. Needs root (the pair is two network namespaces)
//! and fails loudly without it.

use wirescope::diagnose::{diagnose, Input, Severity, TestContext, Window};
use wirescope::probe::sample::{HostRole, Sample};
use wirescope::record::log::read_log;
use wirescope::record::schema::Record;

// The two runs share this machine's cores: they run one at a time, and apart
// from the other areas' core-bound tests (`common::cores`); each starts a
// local pair, which takes its turn (`common::local_pair_turn`).

#[test]
fn healthy_two_stream_run_has_no_warnings() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "this test needs root for the namespace pair (CI runs as root); run `cargo test` as root"
    );
    let _serial = crate::common::cores();
    let _turn = crate::common::local_pair_turn();
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("healthy.jsonl");
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .args(["run", "-t", "3s", "-P", "2", "--log"])
        .arg(&log)
        .output()
        .expect("run wirescope");
    assert!(
        st.status.success(),
        "wirescope run failed: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let records = read_log(&log).expect("read log");
    let mut local: Vec<Sample> = Vec::new();
    let mut peer: Vec<Sample> = Vec::new();
    let mut spec = None;
    for r in records {
        match r {
            Record::Header(h) => spec = h.spec,
            Record::Sample(s) if s.host == HostRole::Local => local.push(*s),
            Record::Sample(s) => peer.push(*s),
            Record::Summary(s) => assert!(s.error.is_none(), "{s:?}"),
            _ => {}
        }
    }
    assert!(!local.is_empty() && !peer.is_empty());
    let input = Input {
        local: Window::from_samples(&local),
        peer: Window::from_samples(&peer),
        test: TestContext {
            spec: spec.as_ref(),
        },
    };
    let findings = diagnose(&input);
    eprintln!("{}", wirescope::face::check::render(&findings));
    let bad: Vec<_> = findings
        .iter()
        .filter(|f| f.severity >= Severity::Warn)
        .collect();
    assert!(bad.is_empty(), "false alarms on a healthy run: {bad:#?}");
    // The JSON form carries the documented keys.
    let json = serde_json::to_value(&findings).expect("serialize");
    for f in json.as_array().expect("array") {
        for k in ["id", "severity", "host", "title", "evidence", "fix"] {
            assert!(f.get(k).is_some(), "missing key {k} in {f}");
        }
    }
    // Per-interval use through the Tracker sees no warn either.
    let mut tracker = wirescope::diagnose::Tracker::new(2, 2);
    for i in 1..=local.len().min(peer.len()) {
        let w = Input {
            local: Window {
                samples: &local[..i],
                facts: input.local.facts(),
            },
            peer: Window {
                samples: &peer[..i],
                facts: input.peer.facts(),
            },
            test: input.test,
        };
        tracker.update(diagnose(&w));
    }
    assert!(tracker
        .active()
        .iter()
        .all(|f| f.severity == Severity::Info));
}

/// Read a log into per-host Samples plus the spec.
fn load(
    log: &std::path::Path,
) -> (
    Vec<Sample>,
    Vec<Sample>,
    Option<wirescope::traffic::EngineSpec>,
) {
    let mut local = Vec::new();
    let mut peer = Vec::new();
    let mut spec = None;
    for r in read_log(log).expect("read log") {
        match r {
            Record::Header(h) => spec = h.spec,
            Record::Sample(s) if s.host == HostRole::Local => local.push(*s),
            Record::Sample(s) => peer.push(*s),
            _ => {}
        }
    }
    (local, peer, spec)
}

/// Fault injection: both engine ends pinned to one CPU → that core saturates and
/// the top finding names it; no error-level finding.
#[test]
fn pinned_run_names_the_saturated_core() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "this test needs root for the namespace pair (CI runs as root); run `cargo test` as root"
    );
    let _serial = crate::common::cores();
    let _turn = crate::common::local_pair_turn();
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("pinned.jsonl");
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .args([
            "run",
            "-t",
            "4s",
            "-P",
            "1",
            "--cpus",
            "0",
            "--peer-cpus",
            "0",
            "--log",
        ])
        .arg(&log)
        .output()
        .expect("run wirescope");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let (local, peer, spec) = load(&log);
    let input = Input {
        local: Window::from_samples(&local),
        peer: Window::from_samples(&peer),
        test: TestContext {
            spec: spec.as_ref(),
        },
    };
    let findings = diagnose(&input);
    eprintln!("{}", wirescope::face::check::render(&findings));
    // The top finding is about cpu0. Which rule names it depends on whether the
    // machine's other cores had headroom (other load on a shared test machine
    // removes it): cpu.single-core-saturated, else softirq.concentrated.
    let top = &findings[0];
    assert!(
        ["cpu.single-core-saturated", "softirq.concentrated"].contains(&top.id.as_str()),
        "{findings:#?}"
    );
    assert_eq!(top.subject, "cpu0");
    assert_eq!(top.severity, Severity::Warn);
    assert!(findings.iter().all(|f| f.severity < Severity::Error));
}

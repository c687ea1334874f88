//! What a long run keeps stays bounded on a big host: the synthetic host's
//! Samples (256 CPUs, 8 NICs x 64 queues, both ends of the pair) fed
//! through the pipeline every face uses — running aggregates, the live
//! diagnosis with its window, the closing window, a zstd log — without
//! sleeping, the heap it retains counted by a counting allocator (per
//! thread: only this test's allocations count). `cargo xtask bench scale`
//! feeds the full day (86,400 intervals) in a release build and prints the
//! figure; here the retained heap must stop growing once the windows are
//! full and stay under the 100 MB.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;
use wirescope::probe::ebpf::EbpfUnavailable;
use wirescope::probe::sample::{HostRole, Sample};
use wirescope::probe::sampler::{EbpfLoader, Sampler};
use wirescope::probe::synthetic::{Layout as HostLayout, SyntheticHost};
use wirescope::record::log::{read_log, LogWriter};
use wirescope::record::pipeline::{Origin, Pipeline, FINAL_WINDOW};
use wirescope::record::schema::Record;
use wirescope::session::driver::{PointStart, SessionEvent};
use wirescope::session::outcome::RunEvent;

/// The System allocator, counting each thread's live bytes.
struct Counting;

thread_local! {
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

fn count(d: i64) {
    let _ = LIVE.try_with(|n| n.set(n.get() + d));
}

// SAFETY: every call goes to System with the caller's arguments; the
// counter is a const-initialised thread-local Cell (no allocation, no destructor).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            count(l.size() as i64);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            count(l.size() as i64);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        count(-(l.size() as i64));
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            count(new as i64 - l.size() as i64);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> i64 {
    LIVE.with(Cell::get)
}

/// A few intervals of the big host as both ends of a pair (the peer: the
/// same shape on another boot).
fn big_pair(n: usize) -> Vec<(Sample, Sample)> {
    let mut h = SyntheticHost::in_temp(HostLayout::default()).unwrap();
    let loader: EbpfLoader = Box::new(|_, _| Err(EbpfUnavailable::Disabled("synthetic".into())));
    let mut s = Sampler::with(Box::new(h.source()), None, loader);
    s.set_ifaces(&h.nic_names());
    s.begin(None, Duration::ZERO, Duration::from_secs(1));
    (0..n)
        .map(|_| {
            h.advance(1).unwrap();
            let l = s.sample();
            assert!(l.probe_errors.is_empty(), "{:?}", l.probe_errors);
            let mut p = l.clone();
            p.host = HostRole::Peer;
            if let Some(f) = p.facts.as_mut() {
                f.boot_id = "synthetic-peer".into();
            }
            (l, p)
        })
        .collect()
}

#[test]
fn the_pipeline_keeps_a_bounded_state_over_a_long_big_host_run() {
    let pairs = big_pair(3);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("day.jsonl.zst");
    let base = live();
    let mut p = Pipeline::new(Origin::default());
    p.handle(SessionEvent::PointStarted(Box::new(PointStart {
        number: 1,
        sweep: None,
        spec: None,
        time: None,
    })))
    .unwrap();
    // Recording from the middle of a point: the header is written at once.
    p.record_to(LogWriter::create(&log).unwrap()).unwrap();
    let mut retained = Vec::new();
    let checkpoints = [FINAL_WINDOW + 30, 2 * FINAL_WINDOW + 60];
    for i in 0..checkpoints[1] {
        let (mut l, mut r) = pairs[i % pairs.len()].clone();
        for s in [&mut l, &mut r] {
            s.index = i as u32;
            s.start_s = i as f64;
            s.end_s = i as f64 + 1.0;
            if i > 0 {
                s.facts = None;
            }
        }
        let out = p.handle(SessionEvent::Interval(Box::new(RunEvent {
            index: i as u32,
            local: Some(l),
            peer: Some(r),
        })));
        drop(out.unwrap());
        if checkpoints.contains(&(i + 1)) {
            retained.push(live() - base);
        }
    }
    let mb = |b: i64| b as f64 / 1e6;
    let (a, b) = (retained[0], retained[1]);
    assert!(
        b <= a + a / 50,
        "the pipeline grew from {:.1} MB after {} intervals to {:.1} MB after {}",
        mb(a),
        checkpoints[0],
        mb(b),
        checkpoints[1]
    );
    assert!(
        b < 100_000_000,
        "the pipeline keeps {:.1} MB of a big host's run (goal <= 100 MB)",
        mb(b)
    );
    drop(p);
    // The log written along the way reads back whole (zstd, compact Samples).
    let recs = read_log(&log).unwrap();
    let samples = recs
        .iter()
        .filter(|r| matches!(r, Record::Sample(_)))
        .count();
    assert_eq!(samples, 2 * checkpoints[1]);
}

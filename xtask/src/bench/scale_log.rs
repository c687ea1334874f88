//! `bench scale`'s log, memory and replay figures on the synthetic big
//! host: the log bytes per interval (schema 2 against schema 1) and
//! zstd-compressed, the heap the pipeline and the TUI model keep after a day
//! of intervals fed without sleeping (counted by [`super::alloc`]), and what
//! opening a day's log in the TUI's replay costs.

use super::alloc::live;
use anyhow::{Context, Result};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::time::{Duration, Instant};
use wirescope::probe::sample::Sample;
use wirescope::record::log::{LogReader, LogWriter};
use wirescope::record::pipeline::{Origin, Pipeline};
use wirescope::record::replay::Replayer;
use wirescope::record::schema::Record;
use wirescope::session::driver::{PointStart, SessionEvent};
use wirescope::session::outcome::RunEvent;
use wirescope::tui::action::update;
use wirescope::tui::model::{Model, ModelConfig, Source};

/// Intervals in a day at 1 s.
pub const DAY: usize = 86_400;

fn gb_day(per_interval: f64) -> f64 {
    per_interval * DAY as f64 / 1e9
}

/// Both hosts' records of interval `i`, as a session hands them on.
fn interval(local: &[Sample], peer: &[Sample], i: usize) -> (Sample, Sample) {
    let k = i % local.len();
    let (mut l, mut r) = (local[k].clone(), peer[k].clone());
    for s in [&mut l, &mut r] {
        s.index = i as u32;
        s.start_s = i as f64;
        s.end_s = i as f64 + 1.0;
        if i > 0 {
            // The facts come with the first Sample and when they change.
            s.facts = None;
        }
    }
    (l, r)
}

/// Log bytes per interval: schema 2 (what is written) and schema 1 (one
/// object per row, as before), then zstd over the whole run.
pub fn log_bytes(local: &[Sample], peer: &[Sample]) -> Result<()> {
    let (mut now, mut old) = (Vec::new(), Vec::new());
    for (l, p) in local.iter().zip(peer).skip(1) {
        let mut n = 0;
        let mut o = 0;
        for s in [l, p] {
            n += serde_json::to_vec(&Record::Sample(Box::new(s.clone())))?.len() + 1;
            let mut v = serde_json::to_value(s)?;
            v["type"] = "sample".into();
            o += v.to_string().len() + 1;
        }
        now.push(n as f64);
        old.push(o as f64);
    }
    let (n, o) = (super::stats::median(&now), super::stats::median(&old));
    // What a log file holds: the big host's rows summed on a detail line
    // every few intervals (record::detail), over a run of 600 intervals.
    let dir = tempfile::tempdir().context("temporary directory")?;
    let path = dir.path().join("scale.jsonl");
    let runs = 600;
    let mut w = LogWriter::create(&path)?;
    for i in 0..runs {
        let (l, p) = interval(local, peer, i);
        w.write(&Record::Sample(Box::new(l)))?;
        w.write(&Record::Sample(Box::new(p)))?;
    }
    w.finish()?;
    drop(w);
    let file = std::fs::metadata(&path)?.len() as f64 / runs as f64;
    println!(
        "log: {file:.0} bytes per interval in a log file, both hosts ({:.2} GB per 24 h at 1 s; goal <= 1 GB before compression): the rows summed on a detail line every few intervals; every interval's line with its rows: {n:.0} bytes ({:.2} GB); schema 1 wrote {o:.0} bytes ({:.1} GB)",
        gb_day(file),
        gb_day(n),
        gb_day(o)
    );
    if let Some(s) = local.get(1) {
        let v = serde_json::to_value(Record::Sample(Box::new(s.clone())))?;
        let mut fields: Vec<(String, usize)> = v
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, x)| (k.clone(), x.to_string().len()))
                    .collect()
            })
            .unwrap_or_default();
        fields.sort_by_key(|f| std::cmp::Reverse(f.1));
        let top: Vec<String> = fields
            .iter()
            .take(6)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        println!(
            "log: one host's record by field (bytes): {}",
            top.join(", ")
        );
    }
    let path = dir.path().join("scale.jsonl.zst");
    let mut w = LogWriter::create(&path)?;
    let n = local.len().max(1);
    for i in 0..n {
        let (l, p) = interval(local, peer, i);
        w.write(&Record::Sample(Box::new(l)))?;
        w.write(&Record::Sample(Box::new(p)))?;
    }
    drop(w);
    let z = std::fs::metadata(&path)?.len() as f64 / n as f64;
    println!(
        "log zstd: {z:.0} bytes per interval ({:.3} GB per 24 h; the synthetic host's steady rates compress better than a real host's)",
        gb_day(z)
    );
    Ok(())
}

/// Feed `n` intervals through the pipeline (live diagnosis, aggregates, the
/// closing window, a zstd log) and the TUI model, without sleeping; print
/// the heap each keeps, and return the log written.
pub fn day(
    local: &[Sample],
    peer: &[Sample],
    n: usize,
    dir: &std::path::Path,
) -> Result<std::path::PathBuf> {
    let path = dir.join("day.jsonl.zst");
    let t0 = Instant::now();
    let base = live();
    let mut p = Pipeline::new(Origin::default());
    let start = SessionEvent::PointStarted(Box::new(PointStart {
        number: 1,
        sweep: None,
        spec: None,
        time: None,
    }));
    let mut outs = vec![p.handle(start)?];
    // Recording from the middle of a point: the header is written at once.
    p.record_to(LogWriter::create(&path)?)?;
    let pipe_base = live() - base;
    let mut pipe_at = Vec::new();
    let marks = [n / 4, n / 2, n];
    for i in 0..n {
        let (l, r) = interval(local, peer, i);
        outs.push(p.handle(SessionEvent::Interval(Box::new(RunEvent {
            index: i as u32,
            local: Some(l),
            peer: Some(r),
        })))?);
        // The TUI's model is fed apart (below): drop the outputs here.
        outs.clear();
        if marks.contains(&(i + 1)) {
            pipe_at.push((i + 1, live() - base));
        }
    }
    let pipe = pipe_at.last().map_or(pipe_base, |x| x.1);
    drop(p);
    let mb = |b: i64| b as f64 / 1e6;
    let grow: Vec<String> = pipe_at
        .iter()
        .map(|(i, b)| format!("{:.1} MB after {i}", mb(*b)))
        .collect();
    println!(
        "memory after {n} intervals: pipeline {:.1} MB ({}; goal <= 100 MB; {:.0} s to feed)",
        mb(pipe),
        grow.join(", "),
        t0.elapsed().as_secs_f64()
    );
    Ok(path)
}

/// The TUI model fed the pipeline's outputs of `n` intervals (a live
/// session's history, bounded by `--history`, 600 s by default).
pub fn tui_memory(local: &[Sample], peer: &[Sample], n: usize) -> Result<()> {
    let t0 = Instant::now();
    let base = live();
    let mut m = Model::new(ModelConfig {
        source: Source::Live,
        local_host: Default::default(),
        pair: "synthetic host x2".into(),
        test: wirescope::cli::TuiArgs::defaults().test,
        history: Duration::from_secs(600),
        color: true,
        log_path: None,
    });
    let mut p = Pipeline::new(Origin::default());
    let mut feed = |m: &mut Model, ev| -> Result<()> {
        for a in wirescope::tui::app::actions_of(p.handle(ev)?) {
            update(m, a);
        }
        Ok(())
    };
    feed(
        &mut m,
        SessionEvent::PointStarted(Box::new(PointStart {
            number: 1,
            sweep: None,
            spec: None,
            time: None,
        })),
    )?;
    let mut at = Vec::new();
    for i in 0..n {
        let (l, r) = interval(local, peer, i);
        feed(
            &mut m,
            SessionEvent::Interval(Box::new(RunEvent {
                index: i as u32,
                local: Some(l),
                peer: Some(r),
            })),
        )?;
        if i + 1 == n / 2 || i + 1 == n {
            at.push(live() - base);
        }
    }
    let mb = |b: i64| b as f64 / 1e6;
    println!(
        "memory after {n} intervals: TUI model {:.1} MB with its pipeline ({:.1} MB at half; history of {} intervals; goal <= 100 MB; {:.0} s)",
        mb(at.last().copied().unwrap_or(0)),
        mb(at.first().copied().unwrap_or(0)),
        m.history.len(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Opening `log` (a day of the big host) as `tui --replay` opens it: the
/// header read, the dashboard's model made and its first frame drawn —
/// what the user waits for — then the rest streamed through the
/// [`Replayer`] into the model as the replay thread feeds it, timed over
/// its first `k` intervals and scaled to the day.
pub fn replay_open(log: &std::path::Path, intervals: usize, k: usize) -> Result<()> {
    let size = std::fs::metadata(log)?.len();
    println!(
        "log zstd (the day's log as the pipeline wrote it): {:.1} MB for {intervals} intervals",
        size as f64 / 1e6
    );
    let t0 = Instant::now();
    let mut reader = LogReader::open(log)?;
    let first = reader.next().transpose()?;
    let cfg = ModelConfig {
        source: Source::Replay(log.to_path_buf()),
        local_host: Default::default(),
        pair: String::new(),
        test: wirescope::cli::TuiArgs::defaults().test,
        history: Duration::from_secs(600),
        color: true,
        log_path: None,
    };
    let mut m = wirescope::tui::replay::streaming_model(first.as_ref(), cfg);
    let mut term = Terminal::new(TestBackend::new(200, 60))?;
    term.draw(|f| wirescope::tui::view::draw(f, &m))?;
    let first_frame = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let mut r = Replayer::default();
    if let Some(h) = first {
        r.push(h);
    }
    let mut samples = 0;
    for rec in reader {
        let rec = rec?;
        if matches!(rec, Record::Sample(_)) {
            samples += 1;
        }
        r.push(rec);
        for o in r.ready() {
            for a in wirescope::tui::app::actions_of(o) {
                update(&mut m, a);
            }
        }
        if samples >= 2 * k {
            break;
        }
    }
    let per_k = t1.elapsed().as_secs_f64() * 1_000.0 / (samples / 2).max(1) as f64;
    println!(
        "replay open ({intervals}-interval log; 86,400 = 24 h): first frame {:.3} s (header read, model made, dashboard drawn at 200x60; goal <= 2 s); then the log streams in behind it at {per_k:.2} s per 1,000 intervals ({:.0} s for 24 h)",
        first_frame,
        per_k * DAY as f64 / 1_000.0
    );
    Ok(())
}

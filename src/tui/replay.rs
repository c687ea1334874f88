//! `--replay LOG`: a `wirescope run` (or `watch`) log turned into the same
//! model a live session builds, by feeding its records through the same
//! [`update`] as live data. Findings are recomputed by the same live
//! diagnosis, so they match what `run` printed. The time cursor starts on the
//! last interval.

use super::action::{update, Action};
use super::model::{Model, ModelConfig};
use crate::probe::sample::{HostRole, Sample};
use crate::record::schema::Record;
use std::time::Duration;

/// Build a replay model from a log's records.
pub fn model_from_records(records: Vec<Record>, mut cfg: ModelConfig) -> Model {
    let header = records.iter().find_map(|r| match r {
        Record::Header(h) => Some(h.clone()),
        _ => None,
    });
    if let Some(h) = &header {
        cfg.local_host = h.hosts.local.clone();
        cfg.pair = h.pair.clone();
        if h.interval_s > 0.0 {
            cfg.test.interval = Duration::from_secs_f64(h.interval_s);
        }
    }
    let samples = records
        .iter()
        .filter(|r| matches!(r, Record::Sample(_)))
        .count();
    let mut m = Model::new(cfg);
    m.capacity = m.capacity.max(samples + 1);
    if let Some(h) = &header {
        m.peer_host = Some(h.hosts.peer.clone());
    }
    let spec = header.as_ref().and_then(|h| h.spec.clone());
    let time = header
        .as_ref()
        .and_then(|h| h.time_s)
        .map(Duration::from_secs_f64);
    let mut pending: Option<Sample> = None;
    let mut started = false;
    for r in records {
        match r {
            Record::Event(e) if e.kind == "point_start" => {
                flush(&mut m, &mut pending);
                if let Some(s) = &spec {
                    update(
                        &mut m,
                        Action::PointStarted {
                            spec: Box::new(s.clone()),
                            time,
                        },
                    );
                    started = true;
                }
            }
            Record::Event(e) => {
                flush(&mut m, &mut pending);
                if e.kind != "point_start" {
                    m.message = Some(format!("{} at {:.2} s: {}", e.kind, e.t, e.message));
                }
            }
            Record::Sample(s) => {
                if !started {
                    if let Some(sp) = &spec {
                        update(
                            &mut m,
                            Action::PointStarted {
                                spec: Box::new(sp.clone()),
                                time,
                            },
                        );
                    }
                    started = true;
                }
                pair(&mut m, &mut pending, *s);
            }
            Record::Summary(_) => flush(&mut m, &mut pending),
            Record::Header(_) | Record::Finding(_) => {}
        }
    }
    flush(&mut m, &mut pending);
    m.cursor = m.history.back().map(|i| i.seq);
    m
}

/// Samples of one interval are written together (local, then peer); pair them.
fn pair(m: &mut Model, pending: &mut Option<Sample>, s: Sample) {
    match pending.take() {
        Some(p) if p.index == s.index && p.host != s.host => {
            let (l, r) = if p.host == HostRole::Local {
                (p, s)
            } else {
                (s, p)
            };
            push(m, Some(l), Some(r));
        }
        Some(p) => {
            push_one(m, p);
            *pending = Some(s);
        }
        None => *pending = Some(s),
    }
}

fn flush(m: &mut Model, pending: &mut Option<Sample>) {
    if let Some(p) = pending.take() {
        push_one(m, p);
    }
}

fn push_one(m: &mut Model, s: Sample) {
    match s.host {
        HostRole::Local => push(m, Some(s), None),
        HostRole::Peer => push(m, None, Some(s)),
    }
}

fn push(m: &mut Model, local: Option<Sample>, peer: Option<Sample>) {
    update(
        m,
        Action::Interval {
            local: local.map(Box::new),
            peer: peer.map(Box::new),
        },
    );
}

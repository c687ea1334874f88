//! A log read back as the series a report draws: per point, one row per
//! interval (receiver-counted rates per direction, message rate, latency,
//! loss, both hosts' cores, queues and softnet counters), the findings
//! raised and cleared on the way, and the point's summary.
//!
//! It reads the log through [`crate::record::replay::outputs`], the same
//! path as the TUI's replay, so a report shows what the run showed.

use crate::diagnose::Change;
use crate::probe::facts::HostFacts;
use crate::probe::sample::{HostRole, Sample};
use crate::record::pipeline::Output;
use crate::record::schema::{Header, Record, Summary};
use crate::traffic::{EngineInterval, LatencySummary};

/// One core over one interval (busy and its split, %), in the summary's form.
pub use crate::record::schema::CoreMean as Core;

/// One rx or tx queue over one interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Queue {
    /// `veth-b rx 3`.
    pub name: String,
    /// Packets per second.
    pub pps: f64,
    /// Drops in the interval, when the source counts them.
    pub drops: u64,
}

/// One host over one interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostRow {
    /// Its cores.
    pub cores: Vec<Core>,
    /// Its NIC queues.
    pub queues: Vec<Queue>,
    /// softnet `dropped` over all CPUs, per second.
    pub softnet_drops: f64,
    /// softnet `time_squeeze` over all CPUs, per second.
    pub squeezes: f64,
}

/// One interval of a point.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    /// End of the interval (s since the point started).
    pub t: f64,
    /// Its length (s).
    pub span: f64,
    /// Warm-up interval (`--omit`).
    pub omitted: bool,
    /// Receiver-counted local→peer rate (bit/s).
    pub l2p: f64,
    /// Receiver-counted peer→local rate (bit/s).
    pub p2l: f64,
    /// Messages, RPCs or frames per second.
    pub rate: f64,
    /// Latency of the interval (µs), request/response modes.
    pub latency: Option<LatencySummary>,
    /// Frames the sink found missing in the interval (packet tests).
    pub lost: Option<i64>,
    /// This host and the agent's.
    pub hosts: [HostRow; 2],
}

/// A finding raised or cleared in the interval `start`..`t`.
#[derive(Debug, Clone, PartialEq)]
pub struct Moment {
    /// Start of the interval whose Samples raised or cleared it (s).
    pub start: f64,
    /// Interval end (s).
    pub t: f64,
    /// The change.
    pub change: Change,
}

/// One test point.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Point {
    /// 1-based.
    pub number: u32,
    /// Its intervals.
    pub rows: Vec<Row>,
    /// Findings raised and cleared during it.
    pub moments: Vec<Moment>,
    /// The closing summary, when the point ended with one.
    pub summary: Option<Summary>,
    /// The hosts' facts as the first Samples carried them.
    pub facts: [Option<HostFacts>; 2],
}

/// One log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    /// What to call it (the file name).
    pub name: String,
    /// Its header (hosts, command line, spec, sweep).
    pub header: Option<Header>,
    /// Its points in order.
    pub points: Vec<Point>,
}

fn host_row(s: &Sample) -> HostRow {
    // A big host's log sums its rows over several intervals (detail lines).
    let secs = s.rows_secs().max(1e-9);
    HostRow {
        cores: s
            .cpus
            .iter()
            .map(|c| Core {
                cpu: c.cpu.0,
                busy: c.busy().0,
                user: c.user.0 + c.nice.0,
                system: c.system.0,
                irq: c.irq.0,
                softirq: c.softirq.0,
            })
            .collect(),
        queues: s
            .queues
            .iter()
            .map(|q| Queue {
                name: format!(
                    "{} {} {}",
                    q.iface,
                    match q.dir {
                        crate::probe::ethtool_names::Dir::Rx => "rx",
                        crate::probe::ethtool_names::Dir::Tx => "tx",
                    },
                    q.queue
                ),
                pps: q.pps,
                drops: q.drops.unwrap_or(0),
            })
            .collect(),
        softnet_drops: s
            .softnet
            .iter()
            .map(|c| f64::from(c.delta.dropped))
            .sum::<f64>()
            / secs,
        squeezes: s
            .softnet
            .iter()
            .map(|c| f64::from(c.delta.time_squeeze))
            .sum::<f64>()
            / secs,
    }
}

fn row(local: Option<&Sample>, peer: Option<&Sample>) -> Row {
    let l = local.map(|s| &s.engine);
    let p = peer.map(|s| &s.engine);
    // The receiver counted the bytes: its rate, else the sender's.
    let l2p = p
        .map(|e| e.rx_bps.0)
        .or(l.map(|e| e.tx_bps.0))
        .unwrap_or(0.0);
    let p2l = l
        .map(|e| e.rx_bps.0)
        .or(p.map(|e| e.tx_bps.0))
        .unwrap_or(0.0);
    let both = [local, peer];
    let rate = both
        .iter()
        .flatten()
        .map(|s| s.engine.msgs_per_s)
        .fold(0.0, f64::max);
    let latency = both.iter().flatten().find_map(|s| s.engine.latency);
    let lost = both.iter().flatten().find_map(|s| {
        s.engine
            .extra
            .as_ref()
            .and_then(EngineInterval::missing_in_interval)
    });
    let any = local.or(peer);
    Row {
        t: any.map_or(0.0, |s| s.end_s),
        span: any.map_or(0.0, |s| s.end_s - s.start_s),
        omitted: any.is_some_and(|s| s.omitted),
        l2p,
        p2l,
        rate,
        latency,
        lost,
        hosts: [
            local.map(host_row).unwrap_or_default(),
            peer.map(host_row).unwrap_or_default(),
        ],
    }
}

/// The report's view of a log's records.
pub fn run(name: &str, records: Vec<Record>) -> Run {
    let header = records.iter().find_map(|r| match r {
        Record::Header(h) => Some((**h).clone()),
        _ => None,
    });
    // The closing few-ms interval of a point says nothing a chart can show
    // (the tables leave it out too): intervals under a fifth of the period.
    let shortest = 0.2 * header.as_ref().map_or(1.0, |h| h.interval_s).max(0.0);
    let mut run = Run {
        name: name.to_string(),
        header,
        points: Vec::new(),
    };
    for o in crate::record::replay::outputs(records) {
        match o {
            Output::PointStarted(p) => run.points.push(Point {
                number: p.number,
                ..Point::default()
            }),
            Output::Interval {
                local,
                peer,
                changes,
                ..
            } => {
                let Some(point) = run.points.last_mut() else {
                    continue;
                };
                for (i, s) in [local.as_deref(), peer.as_deref()].into_iter().enumerate() {
                    if let (None, Some(f)) = (&point.facts[i], s.and_then(|s| s.facts.as_deref())) {
                        point.facts[i] = Some(f.clone());
                    }
                }
                let r = row(local.as_deref(), peer.as_deref());
                // A change in the closing few-ms interval belongs to the
                // last interval a chart shows.
                let start = match point.rows.last() {
                    Some(last) if r.span < shortest => last.t - last.span,
                    _ => r.t - r.span,
                };
                point
                    .moments
                    .extend(changes.into_iter().map(|change| Moment {
                        start,
                        t: r.t,
                        change,
                    }));
                if r.span >= shortest {
                    point.rows.push(r);
                }
            }
            Output::PointDone { summary, .. } => {
                if let Some(point) = run.points.last_mut() {
                    point.summary = summary.map(|s| *s);
                }
            }
            _ => {}
        }
    }
    run
}

/// The host index of a role in [`Row::hosts`] and [`Point::facts`].
pub fn index(h: HostRole) -> usize {
    match h {
        HostRole::Local => 0,
        HostRole::Peer => 1,
    }
}

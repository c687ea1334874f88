//! The queue view of hosts with more active queues than the panel has rows
//! (8 NICs × 64 queues): per host and (direction, source) one summary —
//! queues and how many moved, total pkt/s and bit/s, drops, the busiest
//! queue and the median one — then the host's busiest queues in the rows
//! left, and one line for the rest.
//!
//! Pure layout of the Samples: no I/O, nothing kept between frames.

use super::super::model::Model;
use super::queues::{dir_name, idle, queue_row};
use super::{alert, short, short_bps, style};
use crate::probe::ethtool_names::Dir;
use crate::probe::sample::{QueueSample, QueueSource, Sample};
use ratatui::style::{Color, Modifier};
use ratatui::text::Line;

/// One (direction, source) of one host, summed.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary<'a> {
    /// Direction.
    pub dir: Dir,
    /// Counter source.
    pub source: QueueSource,
    /// Queues listed.
    pub queues: usize,
    /// Queues that moved a packet, a byte or a drop.
    pub active: usize,
    /// Interfaces they belong to.
    pub ifaces: usize,
    /// Packets per second, all queues.
    pub pps: f64,
    /// Bits per second, all queues.
    pub bps: f64,
    /// Drops, all queues.
    pub drops: u64,
    /// Queues with drops.
    pub dropping: usize,
    /// The busiest queue.
    pub max: Option<&'a QueueSample>,
    /// The median packet rate of the active queues.
    pub median_pps: f64,
}

/// The summaries of one host, receive first, in the order sources appear.
pub fn summaries(s: &Sample) -> Vec<Summary<'_>> {
    let mut keys: Vec<(Dir, QueueSource)> = Vec::new();
    for q in &s.queues {
        if !keys.contains(&(q.dir, q.source)) {
            keys.push((q.dir, q.source));
        }
    }
    keys.sort_by_key(|k| matches!(k.0, Dir::Tx));
    keys.into_iter()
        .map(|(dir, source)| {
            let qs: Vec<&QueueSample> = s
                .queues
                .iter()
                .filter(|q| q.dir == dir && q.source == source)
                .collect();
            let mut ifaces: Vec<&str> = qs.iter().map(|q| q.iface.as_str()).collect();
            ifaces.sort_unstable();
            ifaces.dedup();
            let mut rates: Vec<f64> = qs.iter().filter(|q| !idle(q)).map(|q| q.pps).collect();
            let median_pps = crate::fleet::analyze::median(&mut rates).unwrap_or(0.0);
            Summary {
                dir,
                source,
                queues: qs.len(),
                active: rates.len(),
                ifaces: ifaces.len(),
                pps: qs.iter().map(|q| q.pps).sum(),
                bps: qs.iter().map(|q| q.bps.0).sum(),
                drops: qs.iter().filter_map(|q| q.drops).sum(),
                dropping: qs.iter().filter(|q| q.drops.unwrap_or(0) > 0).count(),
                max: qs
                    .iter()
                    .copied()
                    .filter(|q| !idle(q))
                    // Ties: the first interface and queue.
                    .max_by(|a, b| {
                        a.pps
                            .total_cmp(&b.pps)
                            .then(b.iface.cmp(&a.iface))
                            .then(b.queue.cmp(&a.queue))
                    }),
                median_pps,
            }
        })
        .collect()
}

/// The summary of one (direction, source): one line when `width` allows,
/// else two (totals, then the busiest and the median queue).
fn summary_lines(m: &Model, role: &str, x: &Summary, width: u16) -> Vec<Line<'static>> {
    let d = dir_name(x.dir);
    let ifaces = if x.ifaces == 1 {
        String::new()
    } else {
        format!(" of {} ifaces", x.ifaces)
    };
    let drops = if x.dropping > 0 {
        format!("drops {} ({} queues)", x.drops, x.dropping)
    } else {
        format!("drops {}", x.drops)
    };
    let totals = format!(
        " {role:<6}{d:<3}{} queues{ifaces}, {} active: {} pkt/s {} bit/s {drops}",
        x.queues,
        x.active,
        short(x.pps, ""),
        short_bps(x.bps),
    );
    let spread = match x.max {
        Some(q) => format!(
            "max {} pkt/s {} q{}, median {} pkt/s ({})",
            short(q.pps, ""),
            q.iface,
            q.queue,
            short(x.median_pps, ""),
            x.source.name()
        ),
        None => format!("nothing moved ({})", x.source.name()),
    };
    let st = if x.drops > 0 {
        alert(m)
    } else {
        style(m, Color::Gray).add_modifier(Modifier::BOLD)
    };
    let one = format!("{totals}; {spread}");
    if one.chars().count() <= usize::from(width) {
        vec![Line::styled(one, st)]
    } else {
        vec![
            Line::styled(totals, st),
            Line::styled(format!(" {role:<6}{d:<3}{spread}"), st),
        ]
    }
}

/// Both hosts folded into `room` lines (at least each host's summaries
/// and one line for what is not listed; the view scrolls past `room`).
pub fn hosts(
    m: &Model,
    hosts: &[(&str, Option<&Sample>)],
    room: usize,
    width: u16,
    lines: &mut Vec<Line<'static>>,
) {
    let parts: Vec<(&str, Option<&Sample>, Vec<Line<'static>>)> = hosts
        .iter()
        .map(|(role, s)| {
            let head = match s {
                Some(s) if !s.queues.is_empty() => summaries(s)
                    .iter()
                    .flat_map(|x| summary_lines(m, role, x, width))
                    .collect(),
                _ => {
                    let mut v = Vec::new();
                    super::queues::host_section(m, role, *s, &mut v);
                    v
                }
            };
            (*role, *s, head)
        })
        .collect();
    let fixed: usize = parts.iter().map(|p| p.2.len()).sum();
    let listing = parts
        .iter()
        .filter(|p| p.1.is_some_and(|s| !s.queues.is_empty()))
        .count()
        .max(1);
    // Each listing host: its busiest queues and one line for the rest.
    let each = room.saturating_sub(fixed) / listing;
    for (role, s, head) in parts {
        lines.extend(head);
        let Some(s) = s.filter(|s| !s.queues.is_empty()) else {
            continue;
        };
        busiest(m, role, s, each.saturating_sub(1), lines);
    }
}

/// `n` busiest queues of `s` (any direction and source), then how many
/// more moved and the most the busiest of them carried.
fn busiest(m: &Model, role: &str, s: &Sample, n: usize, lines: &mut Vec<Line<'static>>) {
    let mut qs: Vec<&QueueSample> = s.queues.iter().filter(|q| !idle(q)).collect();
    qs.sort_by(|a, b| {
        b.pps
            .total_cmp(&a.pps)
            .then(a.iface.cmp(&b.iface))
            .then(a.queue.cmp(&b.queue))
    });
    for q in qs.iter().take(n) {
        lines.push(queue_row(m, role, s, q));
    }
    if let Some(next) = qs.get(n) {
        lines.push(Line::styled(
            format!(
                " {role:<6}{} more active queues folded, each {} pkt/s or less",
                qs.len() - n,
                short(next.pps, "")
            ),
            style(m, Color::DarkGray),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::summaries;
    use crate::probe::ethtool_names::Dir;
    use crate::probe::sample::{QueueSample, QueueSource, Sample};
    use crate::units::BitsPerSec;

    fn q(iface: &str, dir: Dir, queue: u32, packets: u64, drops: u64) -> QueueSample {
        QueueSample {
            iface: iface.into(),
            dir,
            queue,
            packets: Some(packets),
            bytes: Some(packets * 100),
            drops: Some(drops),
            pps: packets as f64,
            bps: BitsPerSec(packets as f64 * 800.0),
            source: QueueSource::Ethtool,
            other: Default::default(),
        }
    }

    #[test]
    fn a_summary_counts_active_queues_totals_drops_the_busiest_and_the_median() {
        let mut s: Sample = serde_json::from_value(serde_json::json!({
            "host": "local", "index": 0, "start_s": 0.0, "end_s": 1.0, "omitted": false,
            "engine": {"tx_bytes": 0, "rx_bytes": 0, "tx_bps": 0.0, "rx_bps": 0.0,
                       "messages": 0, "msgs_per_s": 0.0},
            "cpus": [], "softirqs": [], "softnet": [], "ifaces": [], "nstat": {}
        }))
        .expect("sample json");
        s.queues = vec![
            q("eth1", Dir::Tx, 0, 5, 0),
            q("eth0", Dir::Rx, 0, 10, 0),
            q("eth0", Dir::Rx, 1, 0, 0),
            q("eth1", Dir::Rx, 0, 30, 2),
            q("eth1", Dir::Rx, 1, 20, 0),
            q("eth0", Dir::Rx, 2, 30, 0),
        ];
        let v = summaries(&s);
        assert_eq!(v.len(), 2);
        let (rx, tx) = (&v[0], &v[1]);
        assert_eq!((rx.dir, tx.dir), (Dir::Rx, Dir::Tx), "receive first");
        assert_eq!((rx.queues, rx.active, rx.ifaces), (5, 4, 2));
        assert_eq!(rx.pps, 90.0);
        assert_eq!(rx.bps, 72_000.0);
        assert_eq!((rx.drops, rx.dropping), (2, 1));
        // 30 pps twice: the first interface's queue is the busiest.
        let max = rx.max.expect("a busiest queue");
        assert_eq!((max.iface.as_str(), max.queue), ("eth0", 2));
        // Active rates 10, 20, 30, 30 (the idle queue does not count).
        assert_eq!(rx.median_pps, 25.0);
        assert_eq!((tx.queues, tx.active, tx.median_pps), (1, 1, 5.0));
    }
}

//! Queues: per-queue packets/s, bits/s and drops of both hosts, each with its
//! source (qstats / ethtool -S / eBPF) and the layer its bytes are counted
//! at (L2 frames or L3 packets), busiest first. Queues that moved nothing in
//! the interval are folded into one line per interface, direction and
//! source; sources where nothing moved at all are one line per host.
//! eBPF rows end with the queue→CPU split: which CPUs handled that queue's
//! packets, busiest first ("one core does all the work" at a glance).

use super::super::model::Model;
use super::{alert, alert_if, short, short_bps, style, title};
use crate::probe::ethtool_names::Dir;
use crate::probe::sample::{QueueSample, QueueSource, Sample};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

/// Draw the queue table.
pub fn render(frame: &mut Frame, area: Rect, m: &Model) {
    let cur = m.measured();
    let note = super::detail_note(cur.and_then(|i| i.local.as_ref().or(i.peer.as_ref())));
    let block = Block::default().borders(Borders::ALL).title(Span::styled(
        format!(
            " NIC queues, busiest first (at: L2 = frames with Ethernet header, L3 = IP packets) {note}"
        ),
        title(m),
    ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let mut lines = vec![Line::styled(
        format!(
            " {:<6}{:<10}{:<4}{:>6} {:>9} {:>9} {:<3}{:>7}  {}",
            "host", "iface", "dir", "queue", "pkt/s", "bit/s", "at", "drops", "source"
        ),
        style(m, Color::Gray).add_modifier(Modifier::BOLD),
    )];
    let hosts = [
        ("local", cur.and_then(|i| i.local.as_ref())),
        ("peer", cur.and_then(|i| i.peer.as_ref())),
    ];
    let mut tail: Vec<Line> = Vec::new();
    // RDMA ports: state and rate (facts), traffic and the counters that moved.
    let facts = [m.facts.local.as_ref(), m.facts.peer.as_ref()];
    for ((role, s), f) in hosts.into_iter().zip(facts) {
        if let Some(r) = f.and_then(|f| f.rdma.as_ref()) {
            rdma_lines(m, role, r, s.and_then(|s| s.rdma.as_ref()), &mut tail);
        }
    }
    // An engine's own count per queue (a packet test's sink), and where
    // it dropped.
    for (role, s) in hosts {
        if let Some(q) = s
            .and_then(|s| s.engine.extra.as_ref())
            .and_then(|x| x.own_queues())
        {
            own_queue_lines(m, role, &q, &mut tail);
        }
    }
    // Every active queue when they fit (RDMA and sink lines scroll below);
    // else each host's summary and its busiest queues, in the room left.
    let room = usize::from(inner.height).saturating_sub(lines.len());
    let active: usize = hosts
        .iter()
        .filter_map(|(_, s)| *s)
        .map(|s| s.queues.iter().filter(|q| !idle(q)).count())
        .sum();
    let mut detail: Vec<Line> = Vec::new();
    if active <= room {
        for (role, s) in hosts {
            host_section(m, role, s, &mut detail);
        }
    }
    if active <= room && detail.len() <= room {
        lines.extend(detail);
    } else {
        let budget = room.saturating_sub(tail.len());
        super::queues_fold::hosts(m, &hosts, budget, inner.width, &mut lines);
    }
    lines.extend(tail);
    let max_scroll = (lines.len() as u16).saturating_sub(inner.height);
    frame.render_widget(
        Paragraph::new(lines).scroll((m.scroll.min(max_scroll), 0)),
        inner,
    );
}

pub(super) fn idle(q: &QueueSample) -> bool {
    q.packets.unwrap_or(0) == 0 && q.bytes.unwrap_or(0) == 0 && q.drops.unwrap_or(0) == 0
}

/// One host's lines: its queues, or why there are none.
pub(super) fn host_section(
    m: &Model,
    role: &str,
    s: Option<&Sample>,
    lines: &mut Vec<Line<'static>>,
) {
    match s {
        Some(s) if !s.queues.is_empty() => host_lines(m, role, s, lines),
        Some(_) if m.measured().is_some_and(|i| i.thinned) => lines.push(Line::raw(format!(
            " {role:<6}per-queue detail of this interval no longer kept (the history keeps the newest {} rows; move the cursor forward)",
            crate::tui::model::DETAIL_ROWS
        ))),
        Some(_) => lines.push(Line::raw(format!(
            " {role:<6}no per-queue counters from this host's driver"
        ))),
        None => lines.push(Line::raw(format!(" {role:<6}no sample this interval"))),
    }
}

/// Which bytes a source counts: the driver's counters and eBPF at transmit
/// see whole frames (L2, Ethernet header included); eBPF at receive sees
/// `skb->len` after the Ethernet header is pulled (L3, the IP packet).
pub(super) fn layer(source: QueueSource, dir: Dir) -> &'static str {
    match (source, dir) {
        (QueueSource::Ebpf | QueueSource::EbpfSampled, Dir::Rx) => "L3",
        _ => "L2",
    }
}

/// One host's queues: the busiest (interface, direction, source) groups
/// first, each with its active queues busiest first and its idle ones
/// folded; groups where nothing moved are one line at the end.
fn host_lines(m: &Model, role: &str, s: &Sample, lines: &mut Vec<Line<'static>>) {
    let mut groups: Vec<(&str, Dir, QueueSource)> = Vec::new();
    for q in &s.queues {
        if !groups.contains(&(q.iface.as_str(), q.dir, q.source)) {
            groups.push((q.iface.as_str(), q.dir, q.source));
        }
    }
    let members = |g: &(&str, Dir, QueueSource)| -> Vec<&QueueSample> {
        s.queues
            .iter()
            .filter(|q| q.iface == g.0 && q.dir == g.1 && q.source == g.2)
            .collect()
    };
    let activity = |g: &(&str, Dir, QueueSource)| -> f64 { members(g).iter().map(|q| q.pps).sum() };
    groups.sort_by(|a, b| activity(b).total_cmp(&activity(a)));
    let mut quiet: Vec<String> = Vec::new();
    for g in &groups {
        let (iface, dir, source) = *g;
        let mut qs = members(g);
        let d = dir_name(dir);
        if qs.iter().all(|q| idle(q)) {
            quiet.push(format!("{iface} {d} {}", source.name()));
            continue;
        }
        qs.sort_by(|a, b| b.pps.total_cmp(&a.pps).then(a.queue.cmp(&b.queue)));
        for q in qs.iter().filter(|q| !idle(q)) {
            lines.push(queue_row(m, role, s, q));
        }
        let folded: Vec<u32> = qs.iter().filter(|q| idle(q)).map(|q| q.queue).collect();
        if !folded.is_empty() {
            let list = ranges(&folded);
            lines.push(Line::styled(
                format!(
                    " {role:<6}{iface:<10}{d:<4}{:>6} idle: {} queue(s) folded  {}",
                    list,
                    folded.len(),
                    source.name()
                ),
                style(m, Color::DarkGray),
            ));
        }
    }
    if !quiet.is_empty() {
        lines.push(Line::styled(
            format!(" {role:<6}nothing moved: {}", quiet.join(", ")),
            style(m, Color::DarkGray),
        ));
    }
}

/// One queue's row: host, interface, direction, queue, pkt/s, bit/s, layer,
/// drops (highlighted when any), source, and for eBPF the CPUs that handled it.
pub(super) fn queue_row(m: &Model, role: &str, s: &Sample, q: &QueueSample) -> Line<'static> {
    let d = dir_name(q.dir);
    let drops = q.drops.map(|d| d.to_string()).unwrap_or_else(|| "-".into());
    let mut spans = vec![Span::raw(format!(
        " {role:<6}{:<10}{d:<4}{:>6} {:>9} {:>9} {:<3}",
        q.iface,
        q.queue,
        short(q.pps, ""),
        short_bps(q.bps.0),
        layer(q.source, q.dir),
    ))];
    let dstyle = alert_if(m, q.drops.unwrap_or(0) > 0);
    spans.push(Span::styled(format!("{drops:>7}"), dstyle));
    spans.push(Span::raw(format!("  {}", q.source.name())));
    if q.source.is_ebpf() {
        spans.push(Span::raw(cpu_split(s, q)));
    }
    Line::from(spans)
}

/// `rx` / `tx`.
pub(super) fn dir_name(d: Dir) -> &'static str {
    match d {
        Dir::Rx => "rx",
        Dir::Tx => "tx",
    }
}

/// One host's RDMA ports: state, rate, link layer, active MTU, this
/// interval's traffic and every counter that moved (errors highlighted).
fn rdma_lines(
    m: &Model,
    role: &str,
    facts: &crate::probe::rdma::RdmaFacts,
    sample: Option<&crate::probe::rdma::RdmaSample>,
    lines: &mut Vec<Line<'static>>,
) {
    if facts.devices.is_empty() {
        lines.push(Line::styled(
            format!(" {role:<6}RDMA: no RDMA device"),
            style(m, Color::DarkGray),
        ));
        return;
    }
    for d in &facts.devices {
        for p in &d.ports {
            lines.push(Line::styled(
                format!(
                    " {role:<6}RDMA {} port {}: {}, {}, MTU {}{}",
                    d.name,
                    p.port,
                    p.state.as_ref().map_or("?", |s| s.name.as_str()),
                    p.rate.as_ref().map_or("rate ?", |r| r.text.as_str()),
                    p.active_mtu.map_or("?".into(), |v| v.to_string()),
                    p.netdev
                        .as_ref()
                        .map(|n| format!(", {n}"))
                        .unwrap_or_default(),
                ),
                style(m, Color::Gray).add_modifier(Modifier::BOLD),
            ));
            let Some(ps) = sample.and_then(|s| {
                s.ports
                    .iter()
                    .find(|x| x.device == d.name && x.port == p.port)
            }) else {
                continue;
            };
            lines.push(Line::raw(format!(
                " {role:<6}  tx {}  rx {}",
                short_bps(ps.tx_bps),
                short_bps(ps.rx_bps)
            )));
            for c in ps.counters.iter().filter(|c| c.delta > 0) {
                let st = alert_if(m, crate::diagnose::rdma_counter_is_trouble(&c.name));
                lines.push(Line::styled(
                    format!(
                        " {role:<6}  {:<28} +{:<10} {}/s",
                        c.name,
                        c.delta,
                        short(c.per_s, "")
                    ),
                    st,
                ));
            }
            for pr in &ps.pfc {
                lines.push(Line::styled(
                    format!(
                        " {role:<6}  PFC priority {}: pause rx {} tx {}",
                        pr.prio, pr.rx_pause, pr.tx_pause
                    ),
                    alert(m),
                ));
            }
        }
    }
}

/// An engine's own queues (a packet sink's): what it counted per queue, the
/// worker of each and its CPU, its drops, and the interval's drops on the
/// path.
fn own_queue_lines(
    m: &Model,
    role: &str,
    q: &crate::traffic::OwnQueues,
    lines: &mut Vec<Line<'static>>,
) {
    lines.push(Line::styled(
        format!(
            " {role:<6}{} on {}: {} counted, {} missing, {} {}",
            q.counter,
            q.iface,
            short(q.rate_per_s, "pps"),
            q.missing,
            q.workers.0,
            q.workers.1.map_or("-".into(), |c| format!("{c:.0}%")),
        ),
        style(m, Color::Gray).add_modifier(Modifier::BOLD),
    ));
    for r in &q.rows {
        let dstyle = alert_if(m, r.drops > 0);
        lines.push(Line::from(vec![
            Span::raw(format!(
                " {role:<6}{:<10}{:<4}{:>6} {:>9} {:>9} {:<3}",
                q.iface,
                r.dir,
                r.queue,
                short(r.rate_per_s, ""),
                short_bps(r.bps),
                r.layer,
            )),
            Span::styled(format!("{:>7}", r.drops), dstyle),
            Span::raw(format!("  {}", r.worker)),
        ]));
    }
    if !q.dropped.is_empty() {
        lines.push(Line::styled(
            format!(" {role:<6}dropped this interval: {}", q.dropped.join(", ")),
            alert(m),
        ));
    }
}

/// ` cpu1 97% cpu0 3%`: the CPUs that handled `q`'s packets (eBPF matrix).
fn cpu_split(s: &Sample, q: &QueueSample) -> String {
    let mut cells: Vec<(u32, u64)> = s
        .queue_cpus
        .iter()
        .filter(|c| c.iface == q.iface && c.dir == q.dir && c.queue == Some(q.queue))
        .map(|c| (c.cpu.0, c.packets))
        .collect();
    let total: u64 = cells.iter().map(|c| c.1).sum();
    if total == 0 {
        return String::new();
    }
    cells.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    cells
        .iter()
        .take(4)
        .map(|(cpu, p)| format!(" cpu{cpu} {:.0}%", *p as f64 * 100.0 / total as f64))
        .collect()
}

/// `0-3,6` for queue numbers.
fn ranges(ids: &[u32]) -> String {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut it = ids.into_iter().peekable();
    while let Some(start) = it.next() {
        let mut end = start;
        while it.peek() == Some(&(end + 1)) {
            end += 1;
            it.next();
        }
        parts.push(if end > start {
            format!("{start}-{end}")
        } else {
            start.to_string()
        });
    }
    parts.join(",")
}

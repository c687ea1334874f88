//! CPU of both hosts side by side: one row per core, a stacked bar of
//! user / system / irq / softirq (distinct colours and letters, so it reads
//! without colour), the busy percentage; the busiest core is marked `▶` and
//! bold, cores holding the NIC's IRQs `N`, cores the engine is pinned to `E`.
//! A host with more cores than the panel has rows (256 threads at 80x24) is
//! drawn by [`super::cpu_heat`] instead: heat strips per NUMA node and the
//! hottest cores — the choice is by what fits, not by a host size.

use super::super::model::Model;
use super::{host_name, style, title};
use crate::probe::cpu::CpuSample;
use crate::probe::facts::HostFacts;
use crate::probe::sample::Sample;
use crate::units::{parse_cpu_list, CpuId};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

/// Bar segments: letter, legend word, colour.
const SEGMENTS: [(char, &str, Color); 4] = [
    ('u', "user", Color::Green),
    ('s', "system", Color::Red),
    ('i', "irq", Color::Yellow),
    ('q', "softirq", Color::Magenta),
];

/// Draw both hosts and the legend.
pub fn render(frame: &mut Frame, area: Rect, m: &Model) {
    let [hosts, legend] = Layout::vertical([Constraint::Min(3), Constraint::Length(1)]).areas(area);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(hosts);
    let cur = m.measured();
    // Any host with more cores than rows is drawn as heat strips: their legend.
    let rows = hosts.height.saturating_sub(2);
    let heat = cur.is_some_and(|i| {
        [i.local.as_ref(), i.peer.as_ref()]
            .into_iter()
            .flatten()
            .any(|s| s.cpus.len() > usize::from(rows))
    });
    let spec = m.spec.as_ref();
    host(
        frame,
        left,
        m,
        &host_name(m, true),
        "local",
        cur.and_then(|i| i.local.as_ref()),
        m.facts.local.as_ref(),
        spec.map(|s| s.cpus_for(crate::traffic::Side::Controller))
            .unwrap_or(&[]),
    );
    host(
        frame,
        right,
        m,
        &host_name(m, false),
        "peer",
        cur.and_then(|i| i.peer.as_ref()),
        m.facts.peer.as_ref(),
        spec.map(|s| s.cpus_for(crate::traffic::Side::Agent))
            .unwrap_or(&[]),
    );
    let legend_line = if heat {
        Line::raw(format!(" {}", super::cpu_heat::LEGEND))
    } else {
        legend_line(m)
    };
    frame.render_widget(Paragraph::new(legend_line), legend);
}

/// Rows the CPU panel (borders and legend included) would like at `width`,
/// at most `max`: every core when they fit, else the heat strips and a few
/// of the hottest cores, else `max`.
pub fn wanted_height(m: &Model, width: u16, max: u16) -> u16 {
    let Some(i) = m.current() else {
        return 4.min(max);
    };
    let inner_w = (width / 2).saturating_sub(2);
    let mut rows = 1u16;
    let mut heat = 0u16;
    for (s, f) in [
        (i.local.as_ref(), m.facts.local.as_ref()),
        (i.peer.as_ref(), m.facts.peer.as_ref()),
    ] {
        let Some(s) = s else { continue };
        rows = rows.max(s.cpus.len().min(usize::from(u16::MAX)) as u16);
        let groups = super::cpu_heat::groups(s, f);
        let strips = super::cpu_heat::strip_lines(groups.iter().map(|g| g.cpus.len()), inner_w);
        heat = heat.max(strips + 1 + super::cpu_heat::HOTTEST_ROWS);
    }
    if rows.saturating_add(3) <= max {
        rows + 3
    } else {
        (heat + 3).min(max)
    }
}

fn legend_line(m: &Model) -> Line<'static> {
    let mut spans = vec![Span::raw(" ")];
    for (c, word, color) in SEGMENTS {
        spans.push(Span::styled(c.to_string(), seg_style(m, color)));
        spans.push(Span::raw(format!(" {word} ")));
    }
    spans.push(Span::raw("▶ busiest  N NIC IRQ  E engine"));
    Line::from(spans)
}

fn seg_style(m: &Model, c: Color) -> Style {
    if m.color {
        Style::default().bg(c).fg(Color::Black)
    } else {
        Style::default()
    }
}

/// CPUs that service the NIC's interrupts (effective affinity of every NIC IRQ), sorted.
pub fn irq_cpus(facts: Option<&HostFacts>) -> Vec<CpuId> {
    let mut v: Vec<CpuId> = facts
        .into_iter()
        .flat_map(|f| f.nics.iter())
        .flat_map(|n| n.irqs.iter())
        .filter_map(|irq| parse_cpu_list(&irq.affinity).ok())
        .flatten()
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

#[allow(clippy::too_many_arguments)]
fn host(
    frame: &mut Frame,
    area: Rect,
    m: &Model,
    name: &str,
    role: &str,
    s: Option<&Sample>,
    facts: Option<&HostFacts>,
    engine_cpus: &[CpuId],
) {
    let head = match s {
        Some(s) => format!(
            " {role} {name}: {} cores, mean {:.1}% {}",
            s.cpus.len(),
            s.mean_busy(),
            super::detail_note(Some(s))
        ),
        None => format!(" {role} {name}: no sample this interval "),
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(head, title(m)));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(s) = s else {
        return;
    };
    let irq = irq_cpus(facts);
    if s.cpus.len() > usize::from(inner.height) {
        let marks = super::cpu_heat::Marks {
            irq: &irq,
            engine: engine_cpus,
        };
        super::cpu_heat::render(frame, inner, m, s, facts, &marks);
        return;
    }
    let busiest = s.busiest_cpu().map(|c| c.cpu);
    let lines: Vec<Line> = s
        .cpus
        .iter()
        .map(|c| {
            row(
                m,
                c,
                inner.width,
                busiest == Some(c.cpu),
                irq.binary_search(&c.cpu).is_ok(),
                engine_cpus.contains(&c.cpu),
            )
        })
        .collect();
    let max_scroll = (lines.len() as u16).saturating_sub(inner.height);
    frame.render_widget(
        Paragraph::new(lines).scroll((m.scroll.min(max_scroll), 0)),
        inner,
    );
}

fn row(
    m: &Model,
    c: &CpuSample,
    width: u16,
    busiest: bool,
    irq: bool,
    engine: bool,
) -> Line<'static> {
    let width = usize::from(width);
    let numbers = width >= 56;
    let prefix = format!(
        "{}{:<6}{}{} ",
        if busiest { '▶' } else { ' ' },
        format!("cpu{}", c.cpu.0),
        if irq { 'N' } else { ' ' },
        if engine { 'E' } else { ' ' }
    );
    let suffix = if numbers {
        format!(
            " {:>5.1}% u{:>3.0} s{:>3.0} i{:>3.0} q{:>3.0}",
            c.busy().0,
            c.user.0 + c.nice.0,
            c.system.0,
            c.irq.0,
            c.softirq.0
        )
    } else {
        format!(" {:>5.1}%", c.busy().0)
    };
    let bar_w = width.saturating_sub(prefix.chars().count() + suffix.chars().count());
    let mut spans = vec![Span::raw(prefix)];
    let values = [c.user.0 + c.nice.0, c.system.0, c.irq.0, c.softirq.0];
    let mut used = 0usize;
    let mut acc = 0.0;
    for ((ch, _, color), v) in SEGMENTS.iter().zip(values) {
        acc += v.max(0.0);
        let end = ((acc / 100.0) * bar_w as f64)
            .round()
            .clamp(0.0, bar_w as f64) as usize;
        let cells = end.saturating_sub(used);
        if cells > 0 {
            spans.push(Span::styled(
                ch.to_string().repeat(cells),
                seg_style(m, *color),
            ));
        }
        used = used.max(end);
    }
    spans.push(Span::styled(
        ".".repeat(bar_w.saturating_sub(used)),
        style(m, Color::DarkGray),
    ));
    let mut tail = Span::raw(suffix);
    if busiest {
        tail = tail.style(Style::default().add_modifier(Modifier::BOLD));
        spans[0] = spans[0]
            .clone()
            .style(Style::default().add_modifier(Modifier::BOLD));
    }
    spans.push(tail);
    Line::from(spans)
}

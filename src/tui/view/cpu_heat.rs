//! The CPU panel of a host with more cores than the panel has rows (a
//! 256-thread server at 80x24): a heat strip per NUMA node, one cell per
//! core (its busy % as a shade, `q`/`Q` when interrupts and softirqs are
//! most of it), then the hottest cores by number with their user / system /
//! irq / softirq. When even the strips do not fit, one line per node.
//!
//! Pure layout of one Sample and the host facts: no I/O, nothing kept.

use super::super::model::Model;
use super::{style, title};
use crate::diagnose::THRESHOLDS;
use crate::probe::cpu::CpuSample;
use crate::probe::facts::HostFacts;
use crate::probe::sample::Sample;
use crate::units::{parse_cpu_list, CpuId};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// Width of one entry of the hottest list (`▶cpu255 NE 100% u  0 s  0 i  0 q100`).
const ENTRY_W: u16 = 36;
/// Columns between entries of the hottest list.
const GAP: u16 = 2;
/// Width of a strip row's label (`  128 `: the row's first CPU).
const LABEL_W: u16 = 5;
/// Rows of the hottest list a panel asks for (below the strips).
pub const HOTTEST_ROWS: u16 = 3;

/// The legend of the heat strips (one line, fits 80 columns).
pub const LEGEND: &str = "·░▒▓█ busy <5/25/50/75/≥75%  q Q irq+softirq-bound  N NIC IRQ  E engine";

/// One NUMA node's cores in the sample, in the node's CPU order.
pub struct Group<'a> {
    /// `node0`, or `cpus` when the facts name no node.
    pub name: String,
    /// The node's cores that the sample has.
    pub cpus: Vec<&'a CpuSample>,
}

/// The sample's cores per NUMA node (the facts' node lists; cores no node
/// lists go to an `other` group; no facts: one `cpus` group).
pub fn groups<'a>(s: &'a Sample, facts: Option<&HostFacts>) -> Vec<Group<'a>> {
    let nodes = facts.map(|f| f.numa.as_slice()).unwrap_or(&[]);
    if nodes.len() < 2 {
        return vec![Group {
            name: "cpus".into(),
            cpus: s.cpus.iter().collect(),
        }];
    }
    // Index of each sample core by CPU number (no scan per lookup).
    let top = s
        .cpus
        .iter()
        .map(|c| c.cpu.0 as usize + 1)
        .max()
        .unwrap_or(0);
    let mut at: Vec<Option<usize>> = vec![None; top];
    for (i, c) in s.cpus.iter().enumerate() {
        at[c.cpu.0 as usize] = Some(i);
    }
    let mut placed = vec![false; s.cpus.len()];
    let mut out: Vec<Group> = nodes
        .iter()
        .map(|n| {
            let ids = parse_cpu_list(&n.cpulist).unwrap_or_default();
            let cpus = ids
                .iter()
                .filter_map(|c| at.get(c.0 as usize).copied().flatten())
                .filter(|i| !std::mem::replace(&mut placed[*i], true))
                .map(|i| &s.cpus[i])
                .collect();
            Group {
                name: format!("node{}", n.node),
                cpus,
            }
        })
        .collect();
    let other: Vec<&CpuSample> = s
        .cpus
        .iter()
        .zip(&placed)
        .filter(|(_, p)| !**p)
        .map(|(c, _)| c)
        .collect();
    if !other.is_empty() {
        out.push(Group {
            name: "other".into(),
            cpus: other,
        });
    }
    out
}

/// Cells per strip row: the largest power of two (at least 8) that fits
/// next to the label, so SMT siblings line up when a node's count is one.
fn cells_per_row(width: u16) -> usize {
    let avail = usize::from(width.saturating_sub(LABEL_W)).max(8);
    let mut n = 8;
    while n * 2 <= avail {
        n *= 2;
    }
    n
}

/// Lines the strips of `groups` take at `width` (a header line per node plus its rows).
pub fn strip_lines(sizes: impl IntoIterator<Item = usize>, width: u16) -> u16 {
    let per = cells_per_row(width);
    sizes
        .into_iter()
        .map(|n| 1 + n.div_ceil(per))
        .sum::<usize>()
        .min(usize::from(u16::MAX)) as u16
}

/// Entries of the hottest list per row at `width`.
fn entries_per_row(width: u16) -> usize {
    usize::from((width + GAP) / (ENTRY_W + GAP)).max(1)
}

/// The cell of one core: its busy % as a shade; `q` / `Q` (under and over
/// 50 % busy) when irq + softirq are at least half of its busy time.
fn cell(c: &CpuSample) -> char {
    let busy = c.busy().0;
    let kernel = c.irq.0 + c.softirq.0;
    if busy < 5.0 {
        '·'
    } else if kernel * 2.0 >= busy {
        if busy < 50.0 {
            'q'
        } else {
            'Q'
        }
    } else if busy < 25.0 {
        '░'
    } else if busy < 50.0 {
        '▒'
    } else if busy < 75.0 {
        '▓'
    } else {
        '█'
    }
}

fn cell_style(m: &Model, c: &CpuSample) -> Style {
    match cell(c) {
        'q' | 'Q' => style(m, Color::Magenta),
        '·' => style(m, Color::DarkGray),
        _ if c.busy().0 >= THRESHOLDS.core_saturated_pct => style(m, Color::Red),
        _ => style(m, Color::Green),
    }
}

/// `node0: 128 cpus, mean 16%, 8 ≥95%` (or `max 10%` when none is saturated).
fn node_line(m: &Model, g: &Group) -> Line<'static> {
    let n = g.cpus.len().max(1) as f64;
    let mean = g.cpus.iter().map(|c| c.busy().0).sum::<f64>() / n;
    let max = g.cpus.iter().map(|c| c.busy().0).fold(0.0, f64::max);
    let sat = THRESHOLDS.core_saturated_pct;
    let hot = g.cpus.iter().filter(|c| c.busy().0 >= sat).count();
    let tail = if hot > 0 {
        format!("{hot} ≥{sat:.0}%")
    } else {
        format!("max {max:.0}%")
    };
    Line::styled(
        format!("{}: {} cpus, mean {mean:.0}%, {tail}", g.name, g.cpus.len()),
        title(m),
    )
}

/// A node's strip rows: `  128 ····QQQQ░░…`.
fn strip_rows(m: &Model, g: &Group, width: u16, out: &mut Vec<Line<'static>>) {
    for row in g.cpus.chunks(cells_per_row(width)) {
        let first = row.first().map_or(0, |c| c.cpu.0);
        let mut spans = vec![Span::styled(
            format!("{first:>4} "),
            style(m, Color::DarkGray),
        )];
        // One span per run of equal cells (a 256-core frame stays cheap).
        let mut run = String::new();
        let mut run_style = Style::default();
        for c in row {
            let st = cell_style(m, c);
            if st != run_style && !run.is_empty() {
                spans.push(Span::styled(std::mem::take(&mut run), run_style));
            }
            run_style = st;
            run.push(cell(c));
        }
        if !run.is_empty() {
            spans.push(Span::styled(run, run_style));
        }
        out.push(Line::from(spans));
    }
}

/// One hottest-list entry, [`ENTRY_W`] columns.
fn entry(c: &CpuSample, busiest: bool, irq: bool, engine: bool) -> String {
    format!(
        "{}{:<7}{}{} {:>3.0}% u{:>3.0} s{:>3.0} i{:>3.0} q{:>3.0}",
        if busiest { '▶' } else { ' ' },
        format!("cpu{}", c.cpu.0),
        if irq { 'N' } else { ' ' },
        if engine { 'E' } else { ' ' },
        c.busy().0,
        c.user.0 + c.nice.0,
        c.system.0,
        c.irq.0,
        c.softirq.0
    )
}

/// What a host's compact panel marks on its cores.
pub struct Marks<'a> {
    /// CPUs servicing the NIC's IRQs, sorted.
    pub irq: &'a [CpuId],
    /// CPUs the engine is pinned to.
    pub engine: &'a [CpuId],
}

/// Draw the compact panel of one host into `inner` (inside its border):
/// strips (or node lines when the strips leave no room for two rows of the
/// list), then the hottest cores, scrolled by the model's scroll.
pub fn render(
    frame: &mut Frame,
    inner: Rect,
    m: &Model,
    s: &Sample,
    facts: Option<&HostFacts>,
    marks: &Marks,
) {
    let groups = groups(s, facts);
    let strips = strip_lines(groups.iter().map(|g| g.cpus.len()), inner.width);
    let mut top: Vec<Line> = Vec::new();
    if strips + 2 <= inner.height {
        for g in &groups {
            top.push(node_line(m, g));
            strip_rows(m, g, inner.width, &mut top);
        }
    } else {
        top.extend(groups.iter().map(|g| node_line(m, g)));
    }
    let top_h = (top.len() as u16).min(inner.height);
    frame.render_widget(
        Paragraph::new(top),
        Rect {
            height: top_h,
            ..inner
        },
    );
    let list = Rect {
        y: inner.y + top_h,
        height: inner.height - top_h,
        ..inner
    };
    if list.height == 0 {
        return;
    }
    let mut lines = vec![Line::styled(
        "hottest: u user s sys i irq q softirq",
        style(m, Color::Gray).add_modifier(Modifier::BOLD),
    )];
    lines.extend(hottest_rows(s, list.width, marks));
    let max_scroll = (lines.len() as u16).saturating_sub(list.height);
    frame.render_widget(
        Paragraph::new(lines).scroll((m.scroll.min(max_scroll), 0)),
        list,
    );
}

/// Every core, hottest first (ties by number), packed into rows of entries.
fn hottest_rows(s: &Sample, width: u16, marks: &Marks) -> Vec<Line<'static>> {
    let busiest = s.busiest_cpu().map(|c| c.cpu);
    let mut order: Vec<(f64, &CpuSample)> = s.cpus.iter().map(|c| (c.busy().0, c)).collect();
    order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cpu.cmp(&b.1.cpu)));
    order
        .chunks(entries_per_row(width))
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .map(|(_, c)| {
                    entry(
                        c,
                        busiest == Some(c.cpu),
                        marks.irq.binary_search(&c.cpu).is_ok(),
                        marks.engine.contains(&c.cpu),
                    )
                })
                .collect();
            let mut spans: Vec<Span> = Vec::with_capacity(cells.len());
            for (i, text) in cells.into_iter().enumerate() {
                let bold = busiest == Some(row[i].1.cpu);
                let sep = if i == 0 { "" } else { "  " };
                let span = Span::raw(format!("{sep}{text}"));
                spans.push(if bold {
                    span.style(Style::default().add_modifier(Modifier::BOLD))
                } else {
                    span
                });
            }
            Line::from(spans)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(cpu: u32, user: f64, softirq: f64) -> CpuSample {
        let p = crate::units::Percent;
        CpuSample {
            cpu: CpuId(cpu),
            user: p(user),
            nice: p(0.0),
            system: p(0.0),
            irq: p(0.0),
            softirq: p(softirq),
            iowait: p(0.0),
            steal: p(0.0),
            idle: p(100.0 - user - softirq),
        }
    }

    #[test]
    fn cells_shade_by_busy_and_show_softirq_bound_cores_apart() {
        assert_eq!(cell(&core(0, 1.0, 0.0)), '·');
        assert_eq!(cell(&core(0, 10.0, 0.0)), '░');
        assert_eq!(cell(&core(0, 30.0, 0.0)), '▒');
        assert_eq!(cell(&core(0, 60.0, 0.0)), '▓');
        assert_eq!(cell(&core(0, 99.0, 0.0)), '█');
        assert_eq!(cell(&core(0, 5.0, 20.0)), 'q');
        assert_eq!(cell(&core(0, 0.0, 100.0)), 'Q');
        // Half user, half softirq: irq+softirq-bound.
        assert_eq!(cell(&core(0, 40.0, 40.0)), 'Q');
    }

    #[test]
    fn strip_rows_are_powers_of_two_so_siblings_line_up() {
        assert_eq!(cells_per_row(38), 32);
        assert_eq!(cells_per_row(98), 64);
        assert_eq!(cells_per_row(10), 8);
        // Two nodes of 128 at 38 columns: a header and 4 rows each.
        assert_eq!(strip_lines([128, 128], 38), 10);
        assert_eq!(entries_per_row(38), 1);
        assert_eq!(entries_per_row(98), 2);
    }
}

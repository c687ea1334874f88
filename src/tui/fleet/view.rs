//! The fleet view's renderer: `draw(frame, &FleetModel)`. It only reads the
//! model — no I/O, no clock — so a frame is a pure function of it.
//!
//! Layout: two header lines (the run: hosts, pattern, test, log; where it
//! is: round k/N, pairs done, hosts up and down), then either the heat map
//! (rows send, columns receive; a cell's colour is its share of the fleet
//! median, with the Gb/s figure where the cell is wide enough), the
//! cursor's line and the outliers, or one pair's test; a footer with the
//! keys. 8 hosts fit 80x24; more scroll with the cursor (columns are then
//! numbered, rows keep a truncated name after their number).

use super::keys::FLEET_KEYS;
use super::model::{Cell, FleetModel, RunState, Screen};
use crate::face::fleet::{outlier_lines, OutlierLine};
use crate::fleet::analyze::SLOW;
use crate::fleet::log::PairRecord;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

/// Share of the median from which a cell counts as at speed (green).
pub const AT_SPEED: f64 = 0.9;
/// Widest cell; narrower when the columns do not fit.
const CELL_MAX: usize = 7;
/// Narrowest cell before the matrix scrolls sideways.
const CELL_MIN: usize = 2;
/// Longest host name a row label shows.
const NAME_MAX: usize = 16;
/// Lines the outliers panel keeps at least (with its borders).
const OUTLIERS_MIN: u16 = 6;
/// Lines the preview of the cursor's pair needs to be shown under the outliers.
const PREVIEW_MIN: u16 = 8;

/// Draw the whole screen.
pub fn draw(frame: &mut Frame, m: &FleetModel) {
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(4),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    header(frame, head, m);
    match &m.screen {
        Screen::Matrix => matrix_screen(frame, body, m),
        Screen::Detail { from, to, scroll } => match m.record(*from, *to) {
            Some(p) => pair_box(frame, body, m, p, *scroll, "Esc: back"),
            None => matrix_screen(frame, body, m),
        },
    }
    footer(frame, foot, m);
}

fn st(m: &FleetModel, s: Style) -> Style {
    if m.cfg.color {
        s
    } else {
        Style::default().add_modifier(s.add_modifier)
    }
}

fn dim(m: &FleetModel) -> Style {
    st(m, Style::default().fg(Color::DarkGray))
}

fn header(frame: &mut Frame, area: Rect, m: &FleetModel) {
    let mut first = vec![
        Span::styled(
            "wirescope fleet",
            st(m, Style::default().add_modifier(Modifier::BOLD)),
        ),
        Span::raw(format!(
            "  {} hosts · {} · {} {} each",
            m.n(),
            m.cfg.pattern,
            m.cfg.test,
            crate::face::span_text(m.cfg.time_s)
        )),
    ];
    if let Some(p) = &m.cfg.log_path {
        first.push(Span::raw(format!(" · log {}", p.display())));
    }
    let (up, down) = m.up_down();
    let (state, style) = match m.state {
        RunState::Checking => ("checking the agents", Style::default().fg(Color::Cyan)),
        RunState::Running => ("running", Style::default().fg(Color::Cyan)),
        RunState::Stopping => ("stopping", Style::default().fg(Color::Yellow)),
        RunState::Done => ("done", Style::default().fg(Color::Green)),
        RunState::Interrupted => (
            "interrupted: partial matrix",
            Style::default().fg(Color::Yellow),
        ),
    };
    let mut second = vec![
        Span::raw(format!(
            "round {}/{} · pairs {}/{} · hosts up {up}, down {down} · ",
            m.round,
            m.cfg.rounds_planned,
            m.pairs.len(),
            m.cfg.pairs_planned
        )),
        Span::styled(state, st(m, style.add_modifier(Modifier::BOLD))),
    ];
    if let Some(e) = &m.log_error {
        second.push(Span::styled(
            format!(" · log stopped: {e}"),
            st(m, Style::default().fg(Color::Red)),
        ));
    }
    frame.render_widget(
        Paragraph::new(vec![Line::from(first), Line::from(second)]),
        area,
    );
}

fn footer(frame: &mut Frame, area: Rect, m: &FleetModel) {
    let mut spans = Vec::new();
    for (k, h) in crate::tui::keys::help_in(FLEET_KEYS) {
        spans.push(Span::styled(
            k,
            st(m, Style::default().add_modifier(Modifier::BOLD)),
        ));
        spans.push(Span::raw(format!(" {h}  ")));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn matrix_screen(frame: &mut Frame, area: Rect, m: &FleetModel) {
    let n = m.n() as u16;
    let want = n.saturating_add(3);
    let room = area.height.saturating_sub(OUTLIERS_MIN + 1);
    let mat_h = want.min(room).max(4.min(area.height));
    let [mat, cur, rest] = Layout::vertical([
        Constraint::Length(mat_h),
        Constraint::Length(1),
        Constraint::Min(0),
    ])
    .areas(area);
    heat_map(frame, mat, m);
    cursor_line(frame, cur, m);
    let lines = outlier_view(m);
    // Room left under the outliers: the cursor's pair, as Enter shows it.
    let out_h = (lines.len() as u16 + 2).max(OUTLIERS_MIN);
    let (i, j) = m.cursor;
    match m.record(i, j) {
        Some(p) if rest.height >= out_h + PREVIEW_MIN => {
            let [out, pre] =
                Layout::vertical([Constraint::Length(out_h), Constraint::Min(0)]).areas(rest);
            outliers(frame, out, m, lines);
            pair_box(frame, pre, m, p, 0, "Enter: full screen");
        }
        _ => outliers(frame, rest, m, lines),
    }
}

/// Gb/s as few characters as the figure allows: `9.41`, `23.5`, `400`.
pub fn gbps(bps: f64) -> String {
    let g = bps / 1e9;
    if g < 10.0 {
        format!("{g:.2}")
    } else if g < 100.0 {
        format!("{g:.1}")
    } else {
        format!("{g:.0}")
    }
}

/// The first visible of `n` items when `vis` fit, with `at` in view
/// (centred once the list scrolls).
fn first_visible(at: usize, vis: usize, n: usize) -> usize {
    if n <= vis || vis == 0 {
        0
    } else {
        at.saturating_sub(vis / 2).min(n - vis)
    }
}

fn trunc(s: &str, w: usize) -> String {
    s.chars().take(w).collect()
}

/// A share's shade, for cells too narrow for a figure and for NO_COLOR.
fn shade(share: f64) -> char {
    if share >= AT_SPEED {
        '█'
    } else if share >= 0.7 {
        '▓'
    } else if share >= SLOW {
        '▒'
    } else {
        '░'
    }
}

fn share_color(share: f64) -> Color {
    if share >= AT_SPEED {
        Color::Green
    } else if share >= SLOW {
        Color::Yellow
    } else {
        Color::Red
    }
}

/// A cell's text (right-aligned in `w`) and style.
fn cell_text(m: &FleetModel, c: &Cell, w: usize) -> (String, Style) {
    let fig = |bps: f64, mark: &str| {
        let f = gbps(bps);
        if f.chars().count() + mark.chars().count() <= w {
            Some(format!("{f}{mark}"))
        } else if f.chars().count() <= w {
            Some(f)
        } else {
            None
        }
    };
    match c {
        Cell::Diagonal => ("·".into(), dim(m)),
        Cell::Untested => ("-".into(), dim(m)),
        Cell::Failed(_) => (
            if w >= 4 { "fail" } else { "✗" }.into(),
            st(
                m,
                Style::default()
                    .fg(Color::Magenta)
                    .add_modifier(Modifier::BOLD),
            ),
        ),
        Cell::Running(v) => (
            match v {
                Some(b) => fig(*b, "~").unwrap_or_else(|| "~".into()),
                None => "…".into(),
            },
            st(
                m,
                Style::default()
                    .fg(Color::Cyan)
                    .add_modifier(Modifier::ITALIC),
            ),
        ),
        Cell::Measured(v) => {
            let share = m.median.filter(|x| *x > 0.0).map_or(1.0, |md| v / md);
            let mark = if share < SLOW { "!" } else { "" };
            let text = if w >= 4 {
                fig(*v, mark).unwrap_or_else(|| shade(share).to_string())
            } else {
                shade(share).to_string()
            };
            (
                text,
                st(m, Style::default().fg(Color::Black).bg(share_color(share))),
            )
        }
    }
}

fn heat_map(frame: &mut Frame, area: Rect, m: &FleetModel) {
    let n = m.n();
    let title = match m.median {
        Some(md) => format!(
            " Gb/s: rows send → columns receive · colour: share of the median {} Gb/s ",
            gbps(md)
        ),
        None => " Gb/s: rows send → columns receive ".to_string(),
    };
    let block = Block::default().borders(Borders::ALL).title(title);
    let inner = block.inner(area);
    let idx_w = n.saturating_sub(1).to_string().len();
    let name_w = m
        .cfg
        .hosts
        .iter()
        .map(|h| h.chars().count())
        .max()
        .unwrap_or(1)
        .min(NAME_MAX);
    let inner_w = usize::from(inner.width);
    // The label keeps at least a third of the width to the cells.
    let name_w = name_w.min((inner_w / 3).saturating_sub(idx_w + 1)).max(1);
    let label_w = idx_w + 1 + name_w;
    let avail = inner_w.saturating_sub(label_w);
    let cell_w = (avail / n.max(1))
        .saturating_sub(1)
        .clamp(CELL_MIN, CELL_MAX);
    let vis_cols = (avail / (cell_w + 1)).max(1).min(n);
    let vis_rows = usize::from(inner.height.saturating_sub(1)).min(n);
    let (r0, c0) = (
        first_visible(m.cursor.0, vis_rows, n),
        first_visible(m.cursor.1, vis_cols, n),
    );
    let names_fit = m.cfg.hosts.iter().all(|h| h.chars().count() <= cell_w);
    let mut lines = Vec::with_capacity(vis_rows + 1);
    let mut head = vec![Span::raw(" ".repeat(label_w))];
    for j in c0..c0 + vis_cols {
        let t = if names_fit {
            m.cfg.hosts[j].clone()
        } else {
            j.to_string()
        };
        let style = if j == m.cursor.1 {
            st(
                m,
                Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
            )
        } else {
            dim(m)
        };
        head.push(Span::styled(
            format!(" {:>cell_w$}", trunc(&t, cell_w)),
            style,
        ));
    }
    lines.push(Line::from(head));
    for i in r0..r0 + vis_rows {
        let label = format!("{i:>idx_w$} {:<name_w$}", trunc(&m.cfg.hosts[i], name_w));
        let lstyle = if i == m.cursor.0 {
            st(m, Style::default().add_modifier(Modifier::BOLD))
        } else {
            Style::default()
        };
        let mut row = vec![Span::styled(label, lstyle)];
        for j in c0..c0 + vis_cols {
            let (text, mut style) = cell_text(m, &m.cell(i, j), cell_w);
            if (i, j) == m.cursor {
                style = style.add_modifier(Modifier::REVERSED);
            }
            row.push(Span::raw(" "));
            row.push(Span::styled(
                format!("{:>cell_w$}", trunc(&text, cell_w)),
                style,
            ));
        }
        lines.push(Line::from(row));
    }
    let block = if vis_rows < n || vis_cols < n {
        block.title_bottom(format!(
            " rows {}-{} · columns {}-{} of {n} ",
            r0,
            r0 + vis_rows.saturating_sub(1),
            c0,
            c0 + vis_cols.saturating_sub(1)
        ))
    } else {
        block
    };
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn cursor_line(frame: &mut Frame, area: Rect, m: &FleetModel) {
    if let Some(note) = &m.note {
        frame.render_widget(
            Paragraph::new(Span::styled(
                note.clone(),
                st(m, Style::default().fg(Color::Yellow)),
            )),
            area,
        );
        return;
    }
    let (i, j) = m.cursor;
    let name = |k: usize| m.cfg.hosts.get(k).cloned().unwrap_or_default();
    let link = format!("{} → {}", name(i), name(j));
    let what = match m.cell(i, j) {
        Cell::Diagonal => name(i),
        Cell::Untested => format!("{link}: not tested"),
        Cell::Running(v) => format!(
            "{link}: running, {}",
            v.map_or("no interval yet".into(), |b| format!(
                "{} Gb/s now",
                gbps(b)
            ))
        ),
        Cell::Failed(why) => format!("{link}: failed: {why} · Enter: the pair's test"),
        Cell::Measured(v) => {
            let share = m
                .median
                .filter(|x| *x > 0.0)
                .map(|md| format!(" ({:.0} % of the median)", 100.0 * v / md))
                .unwrap_or_default();
            format!("{link}: {} Gb/s{share} · Enter: the pair's test", gbps(v))
        }
    };
    frame.render_widget(Paragraph::new(Line::from(format!("▸ {what}"))), area);
}

/// The outliers panel's lines: the same lines as the summary's text.
fn outlier_view(m: &FleetModel) -> Vec<Line<'static>> {
    let untested = m.untested();
    let failed = match &m.summary {
        Some(s) => s.failed.clone(),
        None => m.failures(),
    };
    outlier_lines(&m.slow_nodes, &m.slow_links, &m.odd, &untested, &failed)
        .into_iter()
        .map(|(kind, text)| {
            let (text, style) = match kind {
                OutlierLine::SlowNode | OutlierLine::SlowLink => (
                    text,
                    Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
                ),
                OutlierLine::OddSetting => (text, Style::default().fg(Color::Yellow)),
                OutlierLine::Evidence => {
                    (format!("    {text}"), Style::default().fg(Color::DarkGray))
                }
                OutlierLine::NotTested => (text, Style::default().fg(Color::Magenta)),
                OutlierLine::Nothing if m.pairs.is_empty() => (
                    "no pair done yet".into(),
                    Style::default().fg(Color::DarkGray),
                ),
                OutlierLine::Nothing => (text, Style::default().fg(Color::Green)),
            };
            Line::from(Span::styled(text, st(m, style)))
        })
        .collect()
}

fn outliers(frame: &mut Frame, area: Rect, m: &FleetModel, lines: Vec<Line<'static>>) {
    if area.height == 0 {
        return;
    }
    let title = match m.state {
        RunState::Done | RunState::Interrupted => " Outliers (the run's summary) ".to_string(),
        _ => format!(" Outliers (so far: {} pairs) ", m.analyzed_pairs),
    };
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}

/// One pair's test, both directions: throughput, retransmits, the busiest
/// core of each host, what limited it, the findings with their evidence.
pub fn detail_lines(m: &FleetModel, p: &PairRecord) -> Vec<Line<'static>> {
    let bold = st(m, Style::default().add_modifier(Modifier::BOLD));
    let mut out: Vec<Line<'static>> = Vec::new();
    let mut shown: Option<&Vec<crate::diagnose::Finding>> = None;
    for d in &p.directions {
        let fig = match (&d.bps, &d.error) {
            (_, Some(e)) => format!("failed: {e}"),
            (Some(b), None) => format!("{} Gb/s", gbps(*b)),
            (None, None) => "no result".into(),
        };
        out.push(Line::from(vec![
            Span::styled(format!("{} → {}", d.from, d.to), bold),
            Span::raw(format!("  {fig} · {} retransmits", d.retransmits)),
        ]));
        let core = |h: &str, c: Option<(u32, f64)>| match c {
            Some((cpu, busy)) => format!("{h} cpu{cpu} {busy:.1} %"),
            None => format!("{h} -"),
        };
        out.push(Line::from(format!(
            "  busiest core: {}, {}",
            core(&d.from, d.busiest_from),
            core(&d.to, d.busiest_to)
        )));
        if let Some(l) = &d.limited_by {
            out.push(Line::from(format!("  limited by: {l}")));
        }
        // The host that ran the test is `local` in its findings.
        let local = if m.cfg.bidir {
            p.a.as_str()
        } else {
            d.from.as_str()
        };
        let peer = if local == d.from {
            d.to.as_str()
        } else {
            d.from.as_str()
        };
        if shown.is_some_and(|f| *f == d.findings) && !d.findings.is_empty() {
            out.push(Line::from(
                "  findings: as above (one test for both directions)",
            ));
        } else if d.findings.is_empty() {
            out.push(Line::from(Span::styled("  no findings", dim(m))));
        } else {
            for f in &d.findings {
                let host = match f.host {
                    crate::probe::sample::HostRole::Local => local,
                    crate::probe::sample::HostRole::Peer => peer,
                };
                let sev = match f.severity {
                    crate::diagnose::Severity::Info => Color::Blue,
                    crate::diagnose::Severity::Warn => Color::Yellow,
                    crate::diagnose::Severity::Error => Color::Red,
                };
                out.push(Line::from(vec![
                    Span::styled(
                        format!("  [{}] ", f.severity.name()),
                        st(m, Style::default().fg(sev)),
                    ),
                    Span::styled(f.title.clone(), bold),
                    Span::styled(format!(" ({}, {host})", f.id), dim(m)),
                ]));
                for e in &f.evidence {
                    out.push(Line::from(format!("      {e}")));
                }
            }
        }
        shown = Some(&d.findings);
        out.push(Line::from(""));
    }
    out
}

fn pair_box(
    frame: &mut Frame,
    area: Rect,
    m: &FleetModel,
    p: &PairRecord,
    scroll: usize,
    keys: &str,
) {
    let lines = detail_lines(m, p);
    let skip = scroll.min(lines.len().saturating_sub(1));
    let title = format!(" {} ↔ {} · round {} · {keys} ", p.a, p.b, p.round);
    let shown: Vec<Line> = lines.into_iter().skip(skip).collect();
    frame.render_widget(
        Paragraph::new(shown).block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}

//! Findings from the live diagnosis (the same rules as `run` and `check`),
//! most important first, with evidence (value, unit, source) and the fix.
//! Empty when the diagnosis has nothing to say — never a placeholder finding.

use super::super::model::Model;
use super::{alert, style, title};
use crate::diagnose::{Finding, Severity};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

fn sev_style(m: &Model, s: Severity) -> Style {
    let c = match s {
        Severity::Info => Color::Cyan,
        Severity::Warn => Color::Yellow,
        Severity::Error => Color::Red,
    };
    style(m, c).add_modifier(Modifier::BOLD)
}

fn head(m: &Model, f: &Finding) -> Line<'static> {
    Line::from(vec![
        Span::styled(
            format!(" [{}] ", f.severity.name()),
            sev_style(m, f.severity),
        ),
        Span::raw(format!("{} {}: ", f.host.name(), f.id)),
        Span::styled(
            f.title.clone(),
            Style::default().add_modifier(Modifier::BOLD),
        ),
    ])
}

fn findings(m: &Model) -> &[Finding] {
    m.current().map(|i| i.findings.as_slice()).unwrap_or(&[])
}

/// `text` wrapped to `width` columns, every line after the first indented
/// like the text after `prefix` (the wrapped part of a fix stays under it).
fn wrapped(prefix: &str, text: &str, width: u16, st: Style) -> Vec<Line<'static>> {
    let indent = " ".repeat(prefix.chars().count());
    let opts = textwrap::Options::new(usize::from(width).max(prefix.len() + 10))
        .initial_indent(prefix)
        .subsequent_indent(&indent);
    textwrap::wrap(text, opts)
        .into_iter()
        .map(|l| Line::styled(l.into_owned(), st))
        .collect()
}

/// The full panel: every active finding with evidence, why and fix.
pub fn render(frame: &mut Frame, area: Rect, m: &Model) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(" Findings (live diagnosis) ", title(m)));
    let width = block.inner(area).width;
    let mut lines: Vec<Line> = Vec::new();
    let fs = findings(m);
    if fs.is_empty() {
        lines.push(Line::raw(" No findings."));
    }
    for f in fs {
        lines.push(head(m, f));
        for e in &f.evidence {
            lines.extend(wrapped("     ", &e.to_string(), width, Style::default()));
        }
        if !f.why.is_empty() {
            lines.extend(wrapped("     why: ", &f.why, width, style(m, Color::Gray)));
        }
        for fix in &f.fix {
            lines.extend(wrapped("     fix: ", fix, width, alert(m)));
        }
    }
    let inner_h = block.inner(area).height;
    let scroll = m.scroll.min((lines.len() as u16).saturating_sub(inner_h));
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0)),
        area,
    );
}

/// `cpu3 100 % (u 2 s 40 i 0 q 58)`: a host's busiest core over the point,
/// split with the CPU panel's letters.
fn busiest(h: &crate::record::schema::HostCpu) -> String {
    match h.cpus.iter().max_by(|a, b| a.busy.total_cmp(&b.busy)) {
        Some(c) => format!(
            "cpu{} {:.0} % (u {:.0} s {:.0} i {:.0} q {:.0})",
            c.cpu, c.busy, c.user, c.system, c.irq, c.softirq
        ),
        None => "no CPU figures".into(),
    }
}

/// Dashboard strip once the point under the cursor has ended: its result
/// (mean throughput over the measured span, the busiest core of each host)
/// and its top findings over the whole point, in replay as live.
pub fn render_result(frame: &mut Frame, area: Rect, m: &Model, s: &crate::record::schema::Summary) {
    let (l2p, p2l) = super::result_directions(s);
    let mut head_line = format!(
        " Result: local→peer {}  peer→local {}  over {:.2} s",
        crate::units::BitsPerSec(l2p),
        crate::units::BitsPerSec(p2l),
        s.duration_s
    );
    if s.rate_per_s > 0.0 {
        head_line.push_str(&format!("  {} msg/s", super::short(s.rate_per_s, "")));
    }
    if let Some(l) = &s.latency_us {
        head_line.push_str(&format!("  p50 {:.1} us  p99 {:.1} us", l.p50, l.p99));
    }
    if let Some(p) = &s.partial {
        head_line.push_str(&format!("  (partial: {p})"));
    }
    let mut lines = vec![
        Line::styled(head_line, title(m)),
        Line::raw(format!(
            " busiest core: local {}  peer {}",
            busiest(&s.hosts.local),
            busiest(&s.hosts.peer)
        )),
    ];
    let room = usize::from(area.height).saturating_sub(lines.len());
    if s.findings.is_empty() {
        lines.push(Line::raw(" no findings over the point"));
    }
    lines.extend(s.findings.iter().take(room).map(|f| head(m, f)));
    frame.render_widget(Paragraph::new(lines), area);
}

/// Dashboard strip: a title line and the top findings, one line each.
pub fn render_compact(frame: &mut Frame, area: Rect, m: &Model) {
    let fs = findings(m);
    let mut lines = vec![Line::styled(
        format!(" Findings: {} (5 for details)", fs.len()),
        title(m),
    )];
    if fs.is_empty() {
        lines[0] = Line::styled(" Findings: none", title(m));
    }
    let room = usize::from(area.height.saturating_sub(1));
    lines.extend(fs.iter().take(room).map(|f| head(m, f)));
    frame.render_widget(Paragraph::new(lines), area);
}

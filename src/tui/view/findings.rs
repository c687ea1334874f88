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

/// The full panel: every active finding with evidence, why and fix.
pub fn render(frame: &mut Frame, area: Rect, m: &Model) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(" Findings (live diagnosis) ", title(m)));
    let mut lines: Vec<Line> = Vec::new();
    let fs = findings(m);
    if fs.is_empty() {
        lines.push(Line::raw(" No findings."));
    }
    for f in fs {
        lines.push(head(m, f));
        for e in &f.evidence {
            lines.push(Line::raw(format!("     {e}")));
        }
        if !f.why.is_empty() {
            lines.push(Line::styled(
                format!("     why: {}", f.why),
                style(m, Color::Gray),
            ));
        }
        for fix in &f.fix {
            lines.push(Line::styled(format!("     fix: {fix}"), alert(m)));
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

//! Control: the test's options (the same as `wirescope run`'s, validated by
//! the same `TestArgs::resolve`), the equivalent command line, start/stop,
//! and the table of the last sweep's points.

use super::super::form::{self, FIELDS};
use super::super::model::Model;
use super::{alert, style, title};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

/// Draw the form.
pub fn render(frame: &mut Frame, area: Rect, m: &Model) {
    let block = Block::default().borders(Borders::ALL).title(Span::styled(
        " Test (same options as wirescope run) ",
        title(m),
    ));
    let mut lines = Vec::new();
    for (i, f) in FIELDS.iter().enumerate() {
        let selected = i == m.field;
        let st = if selected {
            style(m, Color::Cyan).add_modifier(Modifier::REVERSED | Modifier::BOLD)
        } else {
            Style::default()
        };
        lines.push(Line::from(vec![
            Span::raw(if selected { " ▸ " } else { "   " }),
            Span::raw(format!("{:<32}", form::label(*f, &m.test))),
            Span::styled(format!("◂ {} ▸", form::value(*f, &m.test)), st),
        ]));
    }
    lines.push(Line::raw(""));
    match &m.test_error {
        Some(e) => lines.push(Line::styled(format!(" invalid: {e}"), alert(m))),
        None => lines.push(Line::styled(
            " valid (checked by the same rules as wirescope run)",
            style(m, Color::Green),
        )),
    }
    lines.push(Line::raw(format!(
        " same as: {}",
        form::command_line(&m.test)
    )));
    lines.push(Line::raw(""));
    let verb = if m.state.busy() {
        "stop the running test"
    } else {
        "start this test"
    };
    lines.push(Line::styled(
        format!(
            " ↑↓ choose  ←→ change  s/Enter {verb}  (state: {})",
            m.state.label()
        ),
        style(m, Color::Gray),
    ));
    // The points of the last sweep, one row each (the same table as `run`).
    let param = |s: &crate::record::schema::Summary| s.sweep.as_ref().map(|v| v.param.clone());
    let last = m.summaries.values().next_back().and_then(param);
    let mut points: Vec<_> = m
        .summaries
        .values()
        .rev()
        .take_while(|s| last.is_some() && param(s) == last)
        .cloned()
        .collect();
    points.reverse();
    for l in crate::record::text::sweep_table(&points).lines() {
        lines.push(Line::raw(format!(" {l}")));
    }
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        area,
    );
}

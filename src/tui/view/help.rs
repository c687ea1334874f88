//! Help popup: every key of [`KEYMAP`](super::super::keys::KEYMAP), generated
//! from the table itself so it cannot fall out of date.

use super::super::keys::help_lines;
use super::super::model::Model;
use super::title;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

/// Draw the popup centred in `area`.
pub fn render(frame: &mut Frame, area: Rect, m: &Model) {
    let items = help_lines();
    let key_w = items
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let mut lines: Vec<Line> = items
        .iter()
        .map(|(k, h)| {
            Line::from(vec![
                Span::styled(
                    format!(" {k:<key_w$}  "),
                    Style::default().add_modifier(Modifier::BOLD),
                ),
                Span::raw(h.to_string()),
            ])
        })
        .collect();
    lines.push(Line::raw(""));
    lines.push(Line::raw(
        " CPU bars: u user  s system  i irq  q softirq  (% of each core)",
    ));
    let w = lines.iter().map(Line::width).max().unwrap_or(20) as u16 + 2;
    let h = lines.len() as u16 + 2;
    let w = w.min(area.width);
    let h = h.min(area.height);
    let popup = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title(Span::styled(" Keys (any key closes) ", title(m))),
        ),
        popup,
    );
}

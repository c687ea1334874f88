//! Tune: the shipped checklists (↑↓ choose, Enter runs one on the pair),
//! then what the running checklist says — baseline, each proposed change
//! with its evidence and commands, the question (`y` apply / `n` skip or
//! keep), each step's result and the closing table. The same step loop as
//! `wirescope checklist run`.

use super::super::model::Model;
use super::{alert, style, title};
use crate::tune::checklist::{shipped, SHIPPED};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

/// Draw the view.
pub fn render(frame: &mut Frame, area: Rect, m: &Model) {
    let block = Block::default().borders(Borders::ALL).title(Span::styled(
        " Guided tuning (checklists: change one thing, measure before and after) ",
        title(m),
    ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let mut lines = Vec::new();
    for (i, (name, _)) in SHIPPED.iter().enumerate() {
        let purpose = match shipped(name) {
            Some(Ok(c)) => match c.unavailable() {
                Some(why) => format!("{} (not available: {why})", c.purpose),
                None => c.purpose,
            },
            Some(Err(e)) => format!("does not load: {e}"),
            None => String::new(),
        };
        let selected = i == m.tune.selected;
        let running = m.tune.running.as_deref() == Some(*name);
        let st = if selected {
            style(m, Color::Cyan).add_modifier(Modifier::REVERSED | Modifier::BOLD)
        } else {
            style(m, Color::Gray)
        };
        lines.push(Line::from(vec![
            Span::raw(if selected { " ▸ " } else { "   " }),
            Span::styled(format!("{name:<18}"), st),
            Span::raw(format!(
                "  {purpose}{}",
                if running { "  (running)" } else { "" }
            )),
        ]));
    }
    let hint = match (&m.tune.running, &m.tune.question) {
        (_, Some(_)) => "y: yes   n: no   (the question is below)",
        (Some(_), None) => "running: each test shows in the other views; s stops the running test",
        (None, None) => {
            "↑↓ choose  Enter run on the pair (changes are backed up: wirescope profile rollback)"
        }
    };
    lines.push(Line::styled(format!(" {hint}"), style(m, Color::Gray)));
    lines.push(Line::raw(""));
    let room = usize::from(inner.height).saturating_sub(lines.len() + 1);
    let skip = m.tune.lines.len().saturating_sub(room);
    lines.extend(
        m.tune
            .lines
            .iter()
            .skip(skip)
            .map(|l| Line::raw(format!(" {l}"))),
    );
    if m.tune.question.is_some() {
        lines.push(Line::styled(" ▶ y / n ?", alert(m)));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

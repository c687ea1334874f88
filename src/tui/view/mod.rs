//! Renderers: `fn render(frame, area, &Model)`, one module per view. They
//! only read the model — no I/O, no clock, no state of their own — so a frame
//! is a pure function of the model and snapshot tests are exact.
//!
//! Layout: [`header`] (3 lines: test and state, throughput and probes, tabs),
//! the selected view, a one-line footer with the keys; [`help`] on top when
//! open. Everything fits 80x24; larger terminals get more detail.

pub mod control;
pub mod cpu;
pub mod cpu_heat;
pub mod facts;
pub mod facts_group;
pub mod findings;
pub mod header;
pub mod help;
pub mod queues;
pub mod queues_fold;
pub mod throughput;
pub mod tune;

use super::model::{Interval, Modal, Model, View};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// Draw the whole screen.
pub fn draw(frame: &mut Frame, m: &Model) {
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Min(4),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    header::render(frame, head, m);
    match m.view {
        View::Dashboard => dashboard(frame, body, m),
        View::Cpu => cpu::render(frame, body, m),
        View::Queues => queues::render(frame, body, m),
        View::Facts => facts::render(frame, body, m),
        View::Findings => findings::render(frame, body, m),
        View::Control => control::render(frame, body, m),
        View::Tune => tune::render(frame, body, m),
    }
    footer(frame, foot, m);
    if m.modal == Modal::Help {
        help::render(frame, frame.area(), m);
    }
}

/// Throughput on top, both hosts' CPU below, the top findings at the bottom.
fn dashboard(frame: &mut Frame, area: Rect, m: &Model) {
    let result = m.result();
    let find_h = match result {
        Some(s) => (s.findings.len().clamp(1, 3) + 2) as u16,
        None => {
            (m.current()
                .map(|i| i.findings.len())
                .unwrap_or(0)
                .clamp(1, 3)
                + 1) as u16
        }
    };
    let rest = area.height.saturating_sub(find_h);
    // CPU: every core plus borders and legend (or, for more cores than
    // that leaves, the heat strips), but leave the chart at least 8 rows.
    let cpu_h = cpu::wanted_height(m, area.width, rest.saturating_sub(8)).max(4);
    let [top, mid, bottom] = Layout::vertical([
        Constraint::Min(4),
        Constraint::Length(cpu_h),
        Constraint::Length(find_h),
    ])
    .areas(area);
    throughput::render(frame, top, m);
    cpu::render(frame, mid, m);
    match result {
        Some(s) => findings::render_result(frame, bottom, m, s),
        None => findings::render_compact(frame, bottom, m),
    }
}

/// The footer's keys (the README's sample screen shows the same line).
const KEYS: &str = "q quit  Tab/1-7 view  s start/stop  p pause  ←→ time  ↑↓ scroll  l log  ? help";

fn footer(frame: &mut Frame, area: Rect, m: &Model) {
    let keys = KEYS;
    let mut spans = vec![Span::styled(
        keys,
        style(m, Color::Gray).add_modifier(Modifier::DIM),
    )];
    if let Some(msg) = &m.message {
        spans = vec![
            Span::styled(
                format!("{msg}  "),
                style(m, Color::Yellow).add_modifier(Modifier::BOLD),
            ),
            Span::styled("? help  q quit", style(m, Color::Gray)),
        ];
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// A foreground colour, or plain text under NO_COLOR.
pub fn style(m: &Model, c: Color) -> Style {
    if m.color {
        Style::default().fg(c)
    } else {
        Style::default()
    }
}

/// Style for something that must stand out with or without colour.
pub fn alert(m: &Model) -> Style {
    style(m, Color::Yellow).add_modifier(Modifier::BOLD)
}

/// [`alert`] where `bad`, else plain.
pub fn alert_if(m: &Model, bad: bool) -> Style {
    if bad {
        alert(m)
    } else {
        Style::default()
    }
}

/// Title style of blocks.
pub fn title(m: &Model) -> Style {
    style(m, Color::Cyan).add_modifier(Modifier::BOLD)
}

/// Bits/s in 6-7 characters: `136.6G`, `812M`, `0`.
pub fn short_bps(v: f64) -> String {
    short(v, "")
}

/// A rate with SI prefixes in a few characters: `1.2M`, `945k`, `12`.
pub fn short(v: f64, unit: &str) -> String {
    let (d, p) = if v >= 1e12 {
        (v / 1e12, "T")
    } else if v >= 1e9 {
        (v / 1e9, "G")
    } else if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    if d == 0.0 {
        format!("0{unit}")
    } else if d >= 100.0 || p.is_empty() {
        format!("{d:.0}{p}{unit}")
    } else {
        format!("{d:.1}{p}{unit}")
    }
}

/// Receiver-counted rates of one interval: (local→peer, peer→local) in bit/s.
pub fn directions(i: &Interval) -> (f64, f64) {
    crate::record::aggregate::receiver_rates(
        i.local.as_ref().map(|s| &s.engine),
        i.peer.as_ref().map(|s| &s.engine),
    )
}

/// A point's result as (local→peer, peer→local) bit/s: the bytes the
/// receivers counted over the measured span, like `run`'s summary line
/// (request/response modes: the total, shown as local→peer).
pub fn result_directions(s: &crate::record::schema::Summary) -> (f64, f64) {
    if s.duration_s <= 0.0 {
        return (0.0, 0.0);
    }
    let rate = |dir: &str| {
        s.streams
            .iter()
            .filter(|x| x.direction == dir)
            .map(|x| x.bytes as f64)
            // fold from +0.0: an empty f64 sum is -0.0 ("-0.00 bit/s").
            .fold(0.0, |a, b| a + b)
            * 8.0
            / s.duration_s
    };
    let (a, b) = (rate("local->peer"), rate("peer->local"));
    if a == 0.0 && b == 0.0 {
        (s.throughput_bps, 0.0)
    } else {
        (a, b)
    }
}

/// What a replayed Sample's per-row figures cover when its log summed them
/// over several intervals (a big host's log keeps them every few
/// intervals, [`crate::record::detail`]); empty for a Sample's own rows.
pub fn detail_note(s: Option<&crate::probe::sample::Sample>) -> String {
    use crate::probe::sample::Detail;
    match s.map(|s| s.detail) {
        Some(Detail::Span { start_s, end_s }) => {
            format!("· rows: {start_s:.0}-{end_s:.0} s of the log ")
        }
        Some(Detail::Later) => "· rows: in a later line of the log ".into(),
        _ => String::new(),
    }
}

/// Host name or a placeholder.
pub fn host_name(m: &Model, local: bool) -> String {
    if local {
        m.local_host.hostname.clone()
    } else {
        m.peer_host
            .as_ref()
            .map(|h| h.hostname.clone())
            .unwrap_or_else(|| "peer".into())
    }
}

#[cfg(test)]
mod readme_tests {
    use super::KEYS;
    use crate::tui::model::View;

    const README: &str = include_str!("../../../README.md");
    /// The user docs that name views by key.
    const DOCS: [&str; 4] = [
        README,
        include_str!("../../../docs/dashboard.md"),
        include_str!("../../../docs/engines.md"),
        include_str!("../../../docs/tuning.md"),
    ];

    #[test]
    fn the_readme_names_the_views_and_keys_the_tui_has() {
        assert!(
            KEYS.contains(&format!("Tab/1-{} view", View::ALL.len())),
            "{KEYS}"
        );
        assert!(
            README.contains(KEYS),
            "the README's sample screen shows another key line than the TUI: {KEYS}"
        );
        // "the queue view (`3`)", across line breaks: every such number is
        // the view's key.
        let text = DOCS
            .concat()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase();
        let mut checked = 0;
        for (n, v) in View::ALL.iter().enumerate() {
            let word = v.title().to_lowercase();
            let word = word.trim_end_matches('s');
            let key = format!("{word} view (`");
            for (at, _) in text.match_indices(&key) {
                checked += 1;
                let digit = text[at + key.len()..].chars().next();
                assert_eq!(
                    digit,
                    char::from_digit(n as u32 + 1, 10),
                    "README/docs: the {word} view is key {}",
                    n + 1
                );
            }
        }
        assert!(
            checked >= 3,
            "only {checked} view keys found in the README and docs"
        );
    }
}

//! Header: test and state, elapsed/total, throughput both ways, probes, tabs.

use super::super::model::{LogState, Model, RunState, View};
use super::{alert, directions, style, title};
use crate::units::BitsPerSec;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// Draw the three header lines.
pub fn render(frame: &mut Frame, area: Rect, m: &Model) {
    let lines = vec![line1(m), line2(m), tabs(m)];
    frame.render_widget(Paragraph::new(lines), area);
}

fn state_style(m: &Model) -> ratatui::style::Style {
    let c = match m.state {
        RunState::Running | RunState::Starting => Color::Green,
        RunState::PeerLost(_) | RunState::Failed(_) => Color::Red,
        RunState::Stopped(_) | RunState::Stopping => Color::Yellow,
        _ => Color::Cyan,
    };
    style(m, c).add_modifier(Modifier::BOLD)
}

fn line1(m: &Model) -> Line<'static> {
    let test = match &m.spec {
        Some(s) => s.short(),
        None => format!(
            "{} {} (not started)",
            m.test.engine.name(),
            m.test.mode.as_deref().unwrap_or("stream")
        ),
    };
    let cur = m.current();
    let elapsed = cur
        .and_then(|i| i.local.as_ref().or(i.peer.as_ref()))
        .map(|s| s.end_s)
        .unwrap_or(0.0);
    let total = match m.total() {
        Some(t) => format!("{:.0} s", t.as_secs_f64()),
        None => "-".into(),
    };
    let mut state = m.state.label().to_string();
    if m.paused() {
        state.push_str(&format!(", display paused (+{})", m.newer_than_cursor()));
    }
    let peer = match &m.peer_host {
        Some(h) => format!("peer {} ({} CPUs, {})", h.hostname, h.cpus, h.kernel),
        None => "peer: not connected".into(),
    };
    Line::from(vec![
        Span::styled(" wirescope ", title(m)),
        Span::raw(format!("{test} │ ")),
        Span::styled(state, state_style(m)),
        Span::raw(format!(" {elapsed:.1}/{total} │ {peer} │ {}", m.pair)),
    ])
}

fn line2(m: &Model) -> Line<'static> {
    let cur = m.current();
    let (l2p, p2l) = cur.map(directions).unwrap_or((0.0, 0.0));
    let mut spans = vec![
        Span::raw(" local→peer "),
        Span::styled(format!("{}", BitsPerSec(l2p)), alert(m)),
        Span::raw("  peer→local "),
        Span::styled(format!("{}", BitsPerSec(p2l)), alert(m)),
    ];
    let msgs = cur
        .and_then(|i| i.local.as_ref())
        .map(|s| s.engine.msgs_per_s)
        .unwrap_or(0.0);
    if msgs > 0.0 {
        spans.push(Span::raw(format!("  {} msg/s", super::short(msgs, ""))));
    }
    spans.push(Span::raw(format!(" │ probes: {}", probes(m))));
    let log = match &m.log {
        LogState::Off => "off".to_string(),
        LogState::On(p) => format!("→ {}", p.display()),
        LogState::Failed(_) => "FAILED".to_string(),
    };
    spans.push(Span::raw(format!(" │ log {log}")));
    Line::from(spans)
}

/// Which probes delivered data in the interval under the cursor.
fn probes(m: &Model) -> String {
    let Some(i) = m.current() else {
        return "-".into();
    };
    let mut v: Vec<String> = Vec::new();
    let mut errors = 0;
    for s in i.local.iter().chain(i.peer.iter()) {
        let mut add = |name: &str| {
            if !v.iter().any(|x| x == name) {
                v.push(name.to_string());
            }
        };
        if !s.cpus.is_empty() {
            add("stat");
        }
        if !s.softirqs.is_empty() {
            add("softirqs");
        }
        if !s.softnet.is_empty() {
            add("softnet");
        }
        if !s.ifaces.is_empty() {
            add("net/dev");
        }
        for q in &s.queues {
            add(q.source.name());
        }
        if s.conns.iter().any(|c| c.tcp.is_some()) {
            add("TCP_INFO");
        }
        errors += s.probe_errors.len();
    }
    if !v.iter().any(|x| x == "eBPF") {
        v.push("no eBPF".into());
    }
    if errors > 0 {
        v.push(format!("{errors} probe error(s)"));
    }
    v.join(" ")
}

fn tabs(m: &Model) -> Line<'static> {
    let mut spans = vec![Span::raw(" ")];
    for (n, v) in View::ALL.iter().enumerate() {
        let mut label = format!("{} {}", n + 1, v.title());
        if *v == View::Findings {
            let k = m.current().map(|i| i.findings.len()).unwrap_or(0);
            label.push_str(&format!(" ({k})"));
        }
        let st = if *v == m.view {
            style(m, Color::Cyan).add_modifier(Modifier::REVERSED | Modifier::BOLD)
        } else {
            style(m, Color::Gray)
        };
        let text = if *v == m.view {
            format!("[{label}]")
        } else {
            format!(" {label} ")
        };
        spans.push(Span::styled(text, st));
        spans.push(Span::raw(" "));
    }
    Line::from(spans)
}

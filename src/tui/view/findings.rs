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

/// ` [warn] peer id: ` and `title` (all or part of the finding's).
fn head_with(m: &Model, f: &Finding, title: String) -> Line<'static> {
    Line::from(vec![
        Span::styled(
            format!(" [{}] ", f.severity.name()),
            sev_style(m, f.severity),
        ),
        Span::raw(format!("{} {}: ", f.host.name(), f.id)),
        Span::styled(title, Style::default().add_modifier(Modifier::BOLD)),
    ])
}

/// A finding's head line wrapped to `width` columns in at most `room`
/// lines: the title continues under itself instead of being cut at the
/// panel's edge; when it does not fit, its last line ends with `…` (the
/// findings view, key 5, shows it whole).
fn head_wrapped(m: &Model, f: &Finding, width: u16, room: usize) -> Vec<Line<'static>> {
    let sev = format!(" [{}] ", f.severity.name());
    let who = format!("{} {}: ", f.host.name(), f.id);
    let lead = sev.chars().count() + who.chars().count();
    let width = usize::from(width).max(lead + 10);
    if lead + f.title.chars().count() <= width || room <= 1 {
        return vec![head_with(m, f, ellipsized(&f.title, width - lead))];
    }
    let first_pad = " ".repeat(lead);
    let pad = " ".repeat(sev.chars().count());
    let opts = textwrap::Options::new(width)
        .initial_indent(&first_pad)
        .subsequent_indent(&pad);
    let parts: Vec<String> = textwrap::wrap(&f.title, opts)
        .into_iter()
        .map(|l| l.trim_start().to_string())
        .collect();
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut out = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let last_room = out.len() + 1 == room && i + 1 < parts.len();
        let text = if last_room {
            let used = if i == 0 { lead } else { pad.len() };
            ellipsized(
                &format!("{part} {}", parts[i + 1..].join(" ")),
                width - used,
            )
        } else {
            part.clone()
        };
        out.push(if i == 0 {
            head_with(m, f, text)
        } else {
            Line::from(vec![Span::raw(pad.clone()), Span::styled(text, bold)])
        });
        if last_room {
            break;
        }
    }
    out
}

/// `text` cut to `cols` columns at a word boundary where it can be, with `…`.
fn ellipsized(text: &str, cols: usize) -> String {
    if text.chars().count() <= cols {
        return text.to_string();
    }
    let keep: String = text.chars().take(cols.saturating_sub(1)).collect();
    let cut = match keep.rfind(' ') {
        Some(i) if i > cols / 2 => &keep[..i],
        _ => keep.as_str(),
    };
    format!("{}…", cut.trim_end())
}

/// Head lines of `fs` in at most `room` lines: the most important finding
/// wrapped on two lines, the others on two while there is room for every
/// finding still waiting, else on one (ending in `…` when cut).
fn heads(m: &Model, fs: &[Finding], width: u16, room: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    for (i, f) in fs.iter().enumerate() {
        let left = room.saturating_sub(lines.len());
        if left == 0 {
            break;
        }
        let waiting = fs.len() - i - 1;
        let share = match (i, waiting) {
            (_, 0) => left,
            (0, _) => left.min(2),
            _ => left.saturating_sub(waiting).clamp(1, 2),
        };
        lines.extend(head_wrapped(m, f, width, share));
    }
    lines
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
        lines.push(head_with(m, f, f.title.clone()));
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
    lines.extend(heads(m, &s.findings, area.width, room));
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
    lines.extend(heads(m, fs, area.width, room));
    frame.render_widget(Paragraph::new(lines), area);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::HostRole;
    use crate::tui::model::{ModelConfig, Source};

    fn model() -> Model {
        Model::new(ModelConfig {
            source: Source::Live,
            local_host: Default::default(),
            pair: String::new(),
            test: crate::cli::TuiArgs::defaults().test,
            history: std::time::Duration::from_secs(60),
            color: false,
            log_path: None,
        })
    }

    fn text(lines: &[Line]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    fn finding(id: &str, title: &str) -> Finding {
        Finding::new(id, Severity::Warn, HostRole::Peer, "cpu1", title, 0.9)
    }

    const LONG: &str = "one core is saturated: cpu1 at 100 % (softirq 62 %) while the other cores average 12 %, and one flow cannot use more than one core";

    #[test]
    fn a_long_title_continues_on_the_next_line_instead_of_being_cut() {
        let m = model();
        let fs = [finding("cpu.single-core-saturated", LONG)];
        let lines = text(&heads(&m, &fs, 120, 4));
        assert!(lines.len() >= 2, "{lines:?}");
        assert!(lines.iter().all(|l| l.chars().count() <= 120), "{lines:?}");
        let joined = lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
        assert!(joined.ends_with("than one core"), "{joined}");
    }

    #[test]
    fn when_room_is_short_every_finding_keeps_a_line_and_a_cut_says_so() {
        let m = model();
        let fs: Vec<Finding> = (0..4)
            .map(|i| finding(&format!("cpu.rule-{i}"), LONG))
            .collect();
        let lines = text(&heads(&m, &fs, 80, 5));
        assert_eq!(lines.len(), 5, "{lines:?}");
        // The first finding on two lines, the three others on one each.
        assert!(
            lines[1].starts_with(' ') && !lines[1].contains("cpu.rule"),
            "{lines:?}"
        );
        for (i, l) in lines.iter().enumerate() {
            assert!(l.chars().count() <= 80, "{l}");
            if i != 0 {
                assert!(l.ends_with('…'), "{l}");
            }
        }
        assert!(lines[4].contains("cpu.rule-3"), "{lines:?}");
    }
}

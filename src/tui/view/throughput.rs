//! Throughput: bits/s per direction over the last intervals (receiver-counted
//! engine bytes), and for rr/pingpong the message rate and p50/p99 latency.

use super::super::model::Model;
use super::{directions, short, short_bps, style, title};
use crate::traffic::EngineKind;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Color;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, GraphType, Paragraph};
use ratatui::Frame;

/// Draw the chart (and the rr/pingpong line under it).
pub fn render(frame: &mut Frame, area: Rect, m: &Model) {
    let block = Block::default().borders(Borders::ALL).title(Span::styled(
        " Throughput, bit/s (engine bytes counted by the receiver) ",
        title(m),
    ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let msg_mode = m.spec.as_ref().is_some_and(|s| !s.bulk_transfer());
    let [chart_area, stats_area] =
        Layout::vertical([Constraint::Min(2), Constraint::Length(u16::from(msg_mode))])
            .areas(inner);
    let n = usize::from(chart_area.width.saturating_sub(8)).max(2);
    let point = m.current().map(|i| i.point);
    let win: Vec<_> = m
        .window(n)
        .into_iter()
        .filter(|i| Some(i.point) == point && !m.is_tail(i))
        .collect();
    if win.is_empty() {
        frame.render_widget(Paragraph::new(" no intervals yet"), chart_area);
        return;
    }
    let mut l2p = Vec::with_capacity(win.len());
    let mut p2l = Vec::with_capacity(win.len());
    let mut max: f64 = 1.0;
    for i in &win {
        let (a, b) = directions(i);
        l2p.push((i.seq as f64, a));
        p2l.push((i.seq as f64, b));
        max = max.max(a).max(b);
    }
    let x0 = win.first().map(|i| i.seq as f64).unwrap_or(0.0);
    let x1 = win
        .last()
        .map(|i| i.seq as f64)
        .unwrap_or(0.0)
        .max(x0 + 1.0);
    // Once the point is over: its result; else the last full interval.
    let (last, what) = match m.result() {
        Some(r) => (super::result_directions(r), "result, "),
        None => (win.last().map(|i| directions(i)).unwrap_or((0.0, 0.0)), ""),
    };
    let top = max * 1.1;
    let [legend_area, plot_area] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(chart_area);
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(" ⣿ local→peer ", style(m, Color::Green)),
            Span::raw(format!("{}/s", super::short(last.0, "bit"))),
            Span::styled("   • peer→local ", style(m, Color::Magenta)),
            Span::raw(format!("{}/s", super::short(last.1, "bit"))),
            Span::raw(format!(
                "   ({what}point {}, last {} intervals)",
                point.unwrap_or(0),
                win.len()
            )),
        ])),
        legend_area,
    );
    let mut datasets = Vec::new();
    if l2p.iter().any(|p| p.1 > 0.0) {
        datasets.push(
            Dataset::default()
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(style(m, Color::Green))
                .data(&l2p),
        );
    }
    if p2l.iter().any(|p| p.1 > 0.0) {
        datasets.push(
            Dataset::default()
                .marker(Marker::Dot)
                .graph_type(GraphType::Scatter)
                .style(style(m, Color::Magenta))
                .data(&p2l),
        );
    }
    let y_labels = if plot_area.height >= 4 {
        vec![
            Span::raw("0"),
            Span::raw(short_bps(top / 2.0)),
            Span::raw(short_bps(top)),
        ]
    } else {
        vec![Span::raw("0"), Span::raw(short_bps(top))]
    };
    let chart = Chart::new(datasets)
        .x_axis(Axis::default().bounds([x0, x1]).labels(vec![
            Span::raw(format!("#{x0:.0}")),
            Span::raw(format!("#{x1:.0}")),
        ]))
        .y_axis(Axis::default().bounds([0.0, top]).labels(y_labels));
    frame.render_widget(chart, plot_area);
    if msg_mode {
        frame.render_widget(Paragraph::new(rate_line(m)), stats_area);
    }
}

/// `msgs/s 123k  p50 45.1 us  p99 98.0 us` of the interval under the cursor.
fn rate_line(m: &Model) -> Line<'static> {
    let Some(i) = m.current() else {
        return Line::raw("");
    };
    // The end whose count is the test's rate (a packet test's sink),
    // whichever host it runs on; else the controller's.
    let counting = [i.local.as_ref(), i.peer.as_ref()]
        .into_iter()
        .flatten()
        .find(|s| {
            s.engine
                .extra
                .as_ref()
                .is_some_and(|x| x.counts_the_tests_rate())
        });
    let s = counting.or(i.local.as_ref()).or(i.peer.as_ref());
    let msgs = s.map(|s| s.engine.msgs_per_s).unwrap_or(0.0);
    let lat = i
        .local
        .iter()
        .chain(i.peer.iter())
        .find_map(|s| s.engine.latency);
    let unit = m.spec.as_ref().map_or("msg/s", |s| {
        crate::traffic::slice(s.kind()).chart_rate_unit()
    });
    let mut text = format!(" {} {unit}", short(msgs, ""));
    match lat {
        Some(l) => text.push_str(&format!(
            "  latency p50 {:.1} us  p99 {:.1} us  ({} client, local)",
            l.p50,
            l.p99,
            m.spec
                .as_ref()
                .map_or(EngineKind::DEFAULT, |s| s.kind())
                .name()
        )),
        None => text.push_str("  latency: none this interval"),
    }
    Line::raw(text)
}

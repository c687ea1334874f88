//! The report's charts: SVG drawn by plotters (its SVG backend; text stays
//! `<text>`, selectable, in the page's own sans-serif font), each with a
//! `<title>` and an `aria-label`, units on every axis and the Okabe–Ito
//! palette (told apart with the common colour-vision deficiencies); heat
//! maps use viridis.

use plotters::coord::Shift;
use plotters::prelude::*;

/// A chart could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the chart {title:?}: {reason}")]
pub struct ChartError {
    /// Its title.
    pub title: String,
    /// plotters' message.
    pub reason: String,
}

/// Okabe & Ito's eight colours (black last).
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// (x, y) points.
    pub points: Vec<(f64, f64)>,
}

const FONT: &str = "sans-serif";

fn err<E: std::fmt::Debug>(title: &str) -> impl Fn(E) -> ChartError + '_ {
    move |e| ChartError {
        title: title.to_string(),
        reason: format!("{e:?}"),
    }
}

/// `svg` with a `<title>` and `role="img"`/`aria-label` on its root element.
fn accessible(svg: String, title: &str) -> String {
    let t = super::html::escape(title);
    match svg.find('>') {
        Some(i) => format!(
            "{} role=\"img\" aria-label=\"{t}\"><title>{t}</title>{}",
            &svg[..i],
            &svg[i + 1..]
        ),
        None => svg,
    }
}

fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    if !lo.is_finite() || !hi.is_finite() {
        (0.0, 1.0)
    } else if hi - lo < 1e-12 {
        (lo.min(0.0), hi.max(lo + 1.0))
    } else {
        (lo.min(0.0), hi * 1.05)
    }
}

/// A line chart of `series` over x; `x_desc`/`y_desc` name the axes with
/// their units. `x_labels`, when given, names each integer x (a sweep's
/// values) instead of printing the number.
pub fn lines(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    x_labels: Option<&[String]>,
) -> Result<String, ChartError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 300)).into_drawing_area();
        root.fill(&WHITE).map_err(err(title))?;
        let pts = || series.iter().flat_map(|s| s.points.iter());
        let (x0, x1) = range(pts().map(|p| p.0));
        let (y0, y1) = range(pts().map(|p| p.1));
        let mut c = ChartBuilder::on(&root)
            .caption(title, (FONT, 16))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(err(title))?;
        let fmt_x = |x: &f64| match x_labels {
            Some(l) if (x.fract()).abs() < 1e-9 && *x >= 0.0 => {
                l.get(*x as usize).cloned().unwrap_or_default()
            }
            Some(_) => String::new(),
            None => short(*x),
        };
        let mut mesh = c.configure_mesh();
        mesh.x_desc(x_desc)
            .y_desc(y_desc)
            .label_style((FONT, 12))
            .x_label_formatter(&fmt_x)
            .y_label_formatter(&|y| short(*y));
        if let Some(l) = x_labels {
            mesh.x_labels(l.len().max(2));
        }
        mesh.draw().map_err(err(title))?;
        for (i, s) in series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            c.draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(err(title))?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
            c.draw_series(s.points.iter().map(|p| Circle::new(*p, 3, color.filled())))
                .map_err(err(title))?;
        }
        if series.len() > 1 || series.iter().any(|s| !s.name.is_empty()) {
            c.configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.3))
                .label_font((FONT, 12))
                .position(SeriesLabelPosition::LowerRight)
                .draw()
                .map_err(err(title))?;
        }
        root.present().map_err(err(title))?;
    }
    Ok(accessible(svg, title))
}

/// 1.5k, 2.3M, 0.25: compact axis labels.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// One panel of a heat map: a value per (interval, core).
pub struct Panel<'a> {
    /// `user %`, `softirq %`, ...
    pub name: &'a str,
    /// `cells[interval][core]`, 0–100.
    pub cells: Vec<Vec<f64>>,
}

/// A heat map per panel, side by side: x the intervals (ends in `t`), y
/// the cores, labelled `cpuN` and the marks of that core (`*` busiest,
/// `i` NIC IRQ, `e` engine).
pub fn heat(
    title: &str,
    t: &[f64],
    cores: &[(u32, String)],
    panels: &[Panel],
) -> Result<String, ChartError> {
    let mut svg = String::new();
    let rows = cores.len().max(1);
    let height = (60 + rows * 14).clamp(160, 900) as u32;
    {
        let root = SVGBackend::with_string(&mut svg, (1000, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err(title))?;
        let root = root.titled(title, (FONT, 16)).map_err(err(title))?;
        let areas = root.split_evenly((1, panels.len().max(1)));
        for (area, p) in areas.iter().zip(panels) {
            heat_panel(area, title, t, cores, p)?;
        }
        root.present().map_err(err(title))?;
    }
    Ok(accessible(svg, title))
}

fn heat_panel(
    area: &DrawingArea<SVGBackend, Shift>,
    title: &str,
    t: &[f64],
    cores: &[(u32, String)],
    p: &Panel,
) -> Result<(), ChartError> {
    let t_end = t.last().copied().unwrap_or(1.0).max(1e-3);
    let n = cores.len().max(1) as u32;
    let mut c = ChartBuilder::on(area)
        .caption(p.name, (FONT, 13))
        .margin(4)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..t_end, (0u32..n).into_segmented())
        .map_err(err(title))?;
    let label = |y: &SegmentValue<u32>| match y {
        SegmentValue::CenterOf(i) => cores
            .get(*i as usize)
            .map(|c| c.1.clone())
            .unwrap_or_default(),
        _ => String::new(),
    };
    c.configure_mesh()
        .disable_mesh()
        .x_desc("time (s)")
        .label_style((FONT, 11))
        .y_labels(cores.len().clamp(1, 32))
        .y_label_formatter(&label)
        .draw()
        .map_err(err(title))?;
    let mut cells = Vec::new();
    for (k, col) in p.cells.iter().enumerate() {
        let t0 = if k == 0 { 0.0 } else { t[k - 1] };
        let t1 = t.get(k).copied().unwrap_or(t0);
        for (j, v) in col.iter().enumerate() {
            let color = ViridisRGB::get_color((v / 100.0).clamp(0.0, 1.0) as f32);
            let j = j as u32;
            cells.push(Rectangle::new(
                [
                    (t0, SegmentValue::Exact(j)),
                    (t1, SegmentValue::Exact(j + 1)),
                ],
                color.filled(),
            ));
        }
    }
    c.draw_series(cells).map_err(err(title))?;
    Ok(())
}

/// One bar of the findings timeline.
pub struct Span {
    /// `peer cpu.single-core-saturated`.
    pub label: String,
    /// 0 info, 1 warn, 2 error.
    pub level: usize,
    /// Raised at (s).
    pub from: f64,
    /// Cleared at, or the point's end (s).
    pub to: f64,
}

/// Findings on a timeline: one row per finding, a bar from raised to
/// cleared, coloured by severity (info sky blue, warn orange, error vermillion).
pub fn timeline(title: &str, t_end: f64, spans: &[Span]) -> Result<String, ChartError> {
    let mut svg = String::new();
    let height = (70 + spans.len() * 22).clamp(120, 700) as u32;
    let level_color = [PALETTE[4], PALETTE[1], PALETTE[5]];
    {
        let root = SVGBackend::with_string(&mut svg, (720, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err(title))?;
        let n = spans.len().max(1) as u32;
        let mut c = ChartBuilder::on(&root)
            .caption(title, (FONT, 16))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(300)
            .build_cartesian_2d(0f64..t_end.max(1e-3), (0u32..n).into_segmented())
            .map_err(err(title))?;
        let label = |y: &SegmentValue<u32>| match y {
            SegmentValue::CenterOf(i) => spans
                .get(*i as usize)
                .map(|s| s.label.clone())
                .unwrap_or_default(),
            _ => String::new(),
        };
        c.configure_mesh()
            .disable_y_mesh()
            .x_desc("time (s)")
            .label_style((FONT, 11))
            .y_labels(spans.len().max(1))
            .y_label_formatter(&label)
            .draw()
            .map_err(err(title))?;
        c.draw_series(spans.iter().enumerate().map(|(i, s)| {
            let i = i as u32;
            Rectangle::new(
                [
                    (s.from, SegmentValue::Exact(i)),
                    (s.to.max(s.from + 1e-3), SegmentValue::Exact(i + 1)),
                ],
                level_color[s.level.min(2)].filled(),
            )
        }))
        .map_err(err(title))?;
        root.present().map_err(err(title))?;
    }
    Ok(accessible(svg, title))
}

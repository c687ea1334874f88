//! The report page: one self-contained HTML document (inline CSS and SVG,
//! no script, no font, image or style fetched from anywhere), so it opens
//! offline and as a mail attachment.

use super::charts::{self, Panel, Series, Span};
use super::data::{Core, HostRow, Point, Run};
use crate::diagnose::{Change, Finding};
use crate::traffic::{slice, EngineKind};
use std::fmt::Write as _;

/// Text as HTML (also inside attributes).
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#111;max-width:1500px}\
h1{font-size:1.5em}h2{font-size:1.25em;border-bottom:1px solid #999}h3{font-size:1.05em}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:.2em .5em;text-align:left;vertical-align:top}\
.runs{display:grid;gap:1.5em}.limit{font-weight:bold;background:#f3f3f3;padding:.4em}\
svg{max-width:100%;height:auto;display:block;margin:.5em 0}\
.sev-info{color:#0b6e99}.sev-warn{color:#9a5b00}.sev-error{color:#a33600}\
code{background:#f3f3f3;padding:0 .2em}.ev{margin:0 0 0 1.5em;font-size:.9em}";

/// The whole page for `runs` (one column each when there are several).
pub fn page(runs: &[Run]) -> Result<String, charts::ChartError> {
    let mut o = String::new();
    let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>wirescope report: {}</title><style>{STYLE}</style></head><body>\
         <h1>wirescope report: {}</h1>",
        escape(&names.join(", ")),
        escape(&names.join(", "))
    );
    if runs.len() > 1 {
        o.push_str(&comparison(runs)?);
    }
    let _ = write!(
        o,
        "<div class=\"runs\" style=\"grid-template-columns:repeat({},minmax(0,1fr))\">",
        runs.len().clamp(1, 3)
    );
    for r in runs {
        o.push_str("<section>");
        o.push_str(&run(r)?);
        o.push_str("</section>");
    }
    o.push_str("</div></body></html>\n");
    Ok(o)
}

/// What a point is: `point 2 (size=65536)`.
pub fn point_label(p: &Point) -> String {
    match p.summary.as_ref().and_then(|s| s.sweep.as_ref()) {
        Some(v) => format!("point {} ({}={})", p.number, v.param, v.value),
        None => format!("point {}", p.number),
    }
}

/// The figure a point is judged by: Gbit/s for byte streams, else its rate.
pub fn headline_value(p: &Point) -> Option<(f64, &'static str)> {
    let s = p.summary.as_ref()?;
    let by_rate = <EngineKind as clap::ValueEnum>::from_str(&s.engine, false)
        .is_ok_and(|k| slice(k).judged_by_rate());
    if by_rate || (s.throughput_bps < 1e6 && s.rate_per_s > 0.0) {
        Some((s.rate_per_s, "per second"))
    } else {
        Some((s.throughput_bps / 1e9, "Gbit/s"))
    }
}

/// Side by side: each log's points, and its sweep (when it has one) on one chart.
fn comparison(runs: &[Run]) -> Result<String, charts::ChartError> {
    let mut o = String::from("<h2>Side by side</h2><table><tr><th>point</th>");
    for r in runs {
        let _ = write!(o, "<th>{}</th>", escape(&r.name));
    }
    o.push_str("</tr>");
    let most = runs.iter().map(|r| r.points.len()).max().unwrap_or(0);
    for i in 0..most {
        let label = runs
            .iter()
            .find_map(|r| r.points.get(i))
            .map(point_label)
            .unwrap_or_default();
        let _ = write!(o, "<tr><td>{}</td>", escape(&label));
        for r in runs {
            let cell = r.points.get(i).map(result_line).unwrap_or_default();
            let _ = write!(o, "<td>{}</td>", escape(&cell));
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
    if let Some(svg) = sweep_chart(runs)? {
        o.push_str(&svg);
    }
    Ok(o)
}

/// `9.81 Gbit/s local→peer, 0 bit/s peer→local; CPU local 54 %, peer 61 %`.
fn result_line(p: &Point) -> String {
    let Some(s) = &p.summary else {
        return "no summary (the point did not end)".into();
    };
    let mut line = match headline_value(p) {
        Some((v, "Gbit/s")) => format!("{v:.2} Gbit/s"),
        Some((v, _)) => format!("{} /s", charts::short(v)),
        None => String::new(),
    };
    if let Some(l) = &s.latency_us {
        let _ = write!(line, ", p50 {:.1} µs, p99 {:.1} µs", l.p50, l.p99);
    }
    let _ = write!(
        line,
        "; CPU local {:.0} %, peer {:.0} %",
        s.hosts.local.mean_busy, s.hosts.peer.mean_busy
    );
    line
}

/// Throughput (or rate) against the swept value, one line per log.
fn sweep_chart(runs: &[Run]) -> Result<Option<String>, charts::ChartError> {
    let swept: Vec<&Run> = runs
        .iter()
        .filter(|r| {
            r.points
                .iter()
                .filter(|p| p.summary.as_ref().is_some_and(|s| s.sweep.is_some()))
                .count()
                > 1
        })
        .collect();
    let Some(first) = swept.first() else {
        return Ok(None);
    };
    let mut values: Vec<u64> = swept
        .iter()
        .flat_map(|r| r.points.iter())
        .filter_map(|p| p.summary.as_ref()?.sweep.as_ref().map(|v| v.value))
        .collect();
    values.sort_unstable();
    values.dedup();
    let param = first
        .points
        .iter()
        .find_map(|p| p.summary.as_ref()?.sweep.as_ref().map(|v| v.param.clone()))
        .unwrap_or_default();
    let unit = first
        .points
        .iter()
        .find_map(headline_value)
        .map_or("Gbit/s", |h| h.1);
    let series: Vec<Series> = swept
        .iter()
        .map(|r| Series {
            name: r.name.clone(),
            points: r
                .points
                .iter()
                .filter_map(|p| {
                    let v = p.summary.as_ref()?.sweep.as_ref()?.value;
                    let x = values.iter().position(|x| *x == v)? as f64;
                    Some((x, headline_value(p)?.0))
                })
                .collect(),
        })
        .collect();
    let labels: Vec<String> = values.iter().map(|v| sweep_value(&param, *v)).collect();
    let y = if unit == "Gbit/s" {
        "throughput (Gbit/s)".to_string()
    } else {
        "rate (messages, RPCs or frames per second)".to_string()
    };
    charts::lines(
        &format!("{y} vs {param}"),
        &format!("{param} (swept value)"),
        &y,
        &series,
        Some(&labels),
    )
    .map(Some)
}

/// A swept value as the command line writes it: sizes in binary units
/// (`64K`, `1M`), counts as numbers.
fn sweep_value(param: &str, v: u64) -> String {
    let bytes = matches!(param, "size" | "frame" | "resp_size" | "len");
    match v {
        v if bytes && v >= 1 << 20 && v % (1 << 20) == 0 => format!("{}M", v >> 20),
        v if bytes && v >= 1 << 10 && v % (1 << 10) == 0 => format!("{}K", v >> 10),
        v => v.to_string(),
    }
}

fn run(r: &Run) -> Result<String, charts::ChartError> {
    let mut o = format!("<h2>{}</h2>", escape(&r.name));
    if let Some(h) = &r.header {
        let _ = write!(
            o,
            "<table><tr><th>command</th><td><code>{}</code></td></tr>\
             <tr><th>started</th><td>{}</td></tr><tr><th>pair</th><td>{}</td></tr>\
             <tr><th>local host</th><td>{}</td></tr><tr><th>peer host</th><td>{}</td></tr></table>",
            escape(&h.command_line.join(" ")),
            escape(&h.start_time),
            escape(&h.pair),
            escape(&host(&h.hosts.local)),
            escape(&host(&h.hosts.peer)),
        );
    }
    if let Some(svg) = sweep_chart(std::slice::from_ref(r))? {
        o.push_str(&svg);
    }
    for p in &r.points {
        o.push_str(&point(r, p)?);
    }
    Ok(o)
}

fn host(h: &crate::probe::system::HostInfo) -> String {
    format!("{} (kernel {}, {} CPUs)", h.hostname, h.kernel, h.cpus)
}

fn point(r: &Run, p: &Point) -> Result<String, charts::ChartError> {
    let label = point_label(p);
    let mut o = format!("<h3>{}: {}</h3>", escape(&label), escape(&result_line(p)));
    if let Some(l) = p.summary.as_ref().and_then(|s| s.limited_by.as_ref()) {
        let _ = write!(o, "<p class=\"limit\">{}</p>", escape(l));
    }
    o.push_str(&rates(&label, p)?);
    for (i, name) in ["local", "peer"].iter().enumerate() {
        if p.rows.iter().any(|row| !row.hosts[i].cores.is_empty()) {
            o.push_str(&cpu_heat(r, p, i, name, &label)?);
        }
    }
    o.push_str(&queues_and_softnet(p, &label)?);
    o.push_str(&findings(p, &label)?);
    Ok(o)
}

fn rates(label: &str, p: &Point) -> Result<String, charts::ChartError> {
    let pts = |f: &dyn Fn(&super::data::Row) -> Option<f64>| -> Vec<(f64, f64)> {
        p.rows.iter().filter_map(|r| Some((r.t, f(r)?))).collect()
    };
    let mut o = String::new();
    let top = p.rows.iter().map(|r| r.l2p.max(r.p2l)).fold(0.0, f64::max);
    if top > 0.0 {
        // Gbit/s, or Mbit/s / kbit/s for small-message tests.
        let (div, unit) = match top {
            x if x >= 1e9 => (1e9, "Gbit/s"),
            x if x >= 1e6 => (1e6, "Mbit/s"),
            _ => (1e3, "kbit/s"),
        };
        let mut series = vec![Series {
            name: "local→peer".into(),
            points: pts(&|r| Some(r.l2p / div)),
        }];
        if p.rows.iter().any(|r| r.p2l > 0.0) {
            series.push(Series {
                name: "peer→local".into(),
                points: pts(&|r| Some(r.p2l / div)),
            });
        }
        o.push_str(&charts::lines(
            &format!("{label}: throughput per interval (receiver-counted)"),
            "time (s)",
            unit,
            &series,
            None,
        )?);
    }
    if p.rows.iter().any(|r| r.rate > 0.0) {
        // Rows that count lost frames are a packet test's.
        let frames = p.rows.iter().any(|r| r.lost.is_some());
        let mut series = vec![Series {
            name: if frames {
                "frames counted /s"
            } else {
                "messages /s"
            }
            .into(),
            points: pts(&|r| Some(r.rate)),
        }];
        if frames {
            series.push(Series {
                name: "frames missing /s".into(),
                points: pts(&|r| r.lost.map(|l| l.max(0) as f64 / r.span.max(1e-3))),
            });
        }
        o.push_str(&charts::lines(
            &format!("{label}: rate per interval"),
            "time (s)",
            if frames {
                "frames per second"
            } else {
                "messages per second"
            },
            &series,
            None,
        )?);
    }
    if p.rows.iter().any(|r| r.latency.is_some()) {
        type Quantile = fn(&crate::traffic::LatencySummary) -> f64;
        let quantiles: [(&str, Quantile); 3] = [
            ("p50", |l| l.p50),
            ("p99", |l| l.p99),
            ("p99.9", |l| l.p999),
        ];
        let series: Vec<Series> = quantiles
            .into_iter()
            .map(|(name, f)| Series {
                name: name.into(),
                points: pts(&|r| r.latency.as_ref().map(f)),
            })
            .collect();
        o.push_str(&charts::lines(
            &format!("{label}: latency percentiles per interval"),
            "time (s)",
            "latency (µs)",
            &series,
            None,
        )?);
    }
    Ok(o)
}

/// Cores marked: `*` the busiest over the point, `i` a NIC data IRQ's
/// core, `e` an engine thread's pinned core.
fn core_labels(r: &Run, p: &Point, host: usize) -> Vec<(u32, String)> {
    let mut mean: std::collections::BTreeMap<u32, f64> = Default::default();
    for row in &p.rows {
        for c in &row.hosts[host].cores {
            *mean.entry(c.cpu).or_default() += c.busy;
        }
    }
    let busiest = mean
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(c, _)| *c);
    let irq: std::collections::BTreeSet<u32> = p.facts[host]
        .iter()
        .flat_map(|f| f.nics.iter())
        .flat_map(|n| n.irqs.iter())
        .filter_map(|i| crate::units::parse_cpu_list(&i.affinity).ok())
        .filter(|l| l.len() == 1)
        .flatten()
        .map(|c| c.0)
        .collect();
    let engine: Vec<u32> = r
        .header
        .as_ref()
        .and_then(|h| h.spec.as_ref())
        .map(|s| {
            let side = if host == 0 {
                crate::traffic::Side::Controller
            } else {
                crate::traffic::Side::Agent
            };
            s.cpus_for(side).iter().map(|c| c.0).collect()
        })
        .unwrap_or_default();
    mean.keys()
        .map(|c| {
            let mut l = format!("cpu{c}");
            for (on, m) in [
                (busiest == Some(*c), " *"),
                (irq.contains(c), " i"),
                (engine.contains(c), " e"),
            ] {
                if on {
                    l.push_str(m);
                }
            }
            (*c, l)
        })
        .collect()
}

/// One figure of a core (busy, user, ...).
type CoreFigure = fn(&Core) -> f64;

fn cpu_heat(
    r: &Run,
    p: &Point,
    host: usize,
    name: &str,
    label: &str,
) -> Result<String, charts::ChartError> {
    let cores = core_labels(r, p, host);
    let t: Vec<f64> = p.rows.iter().map(|r| r.t).collect();
    let cell = |f: fn(&Core) -> f64| -> Vec<Vec<f64>> {
        p.rows
            .iter()
            .map(|row| {
                cores
                    .iter()
                    .map(|(c, _)| {
                        row.hosts[host]
                            .cores
                            .iter()
                            .find(|x| x.cpu == *c)
                            .map_or(0.0, f)
                    })
                    .collect()
            })
            .collect()
    };
    let parts: [(&str, CoreFigure); 5] = [
        ("busy %", |c| c.busy),
        ("user %", |c| c.user),
        ("system %", |c| c.system),
        ("irq %", |c| c.irq),
        ("softirq %", |c| c.softirq),
    ];
    let panels: Vec<Panel> = parts
        .iter()
        .map(|(name, f)| Panel {
            name,
            cells: cell(*f),
        })
        .collect();
    charts::heat(
        &format!("{label}: {name} host CPU per core over time (0 % dark, 100 % yellow; * busiest, i NIC IRQ, e engine)"),
        &t,
        &cores,
        &panels,
    )
}

fn queues_and_softnet(p: &Point, label: &str) -> Result<String, charts::ChartError> {
    let mut o = String::new();
    for (i, name) in ["local", "peer"].iter().enumerate() {
        let mut total: std::collections::BTreeMap<&str, f64> = Default::default();
        for row in &p.rows {
            for q in &row.hosts[i].queues {
                *total.entry(q.name.as_str()).or_default() += q.pps;
            }
        }
        let mut busiest: Vec<(&str, f64)> = total.into_iter().collect();
        busiest.sort_by(|a, b| b.1.total_cmp(&a.1));
        busiest.truncate(6);
        if busiest.iter().all(|q| q.1 <= 0.0) {
            continue;
        }
        let of = |q: &str, f: fn(&super::data::Queue) -> f64| -> Vec<(f64, f64)> {
            p.rows
                .iter()
                .map(|r| {
                    (
                        r.t,
                        r.hosts[i]
                            .queues
                            .iter()
                            .find(|x| x.name == q)
                            .map_or(0.0, f),
                    )
                })
                .collect()
        };
        let mut series: Vec<Series> = busiest
            .iter()
            .map(|(q, _)| Series {
                name: format!("{q} packets/s"),
                points: of(q, |x| x.pps),
            })
            .collect();
        for (q, _) in &busiest {
            let drops = of(q, |x| x.drops as f64);
            if drops.iter().any(|d| d.1 > 0.0) {
                series.push(Series {
                    name: format!("{q} drops"),
                    points: drops,
                });
            }
        }
        o.push_str(&charts::lines(
            &format!(
                "{label}: {name} host, busiest queues (packets per second; drops per interval)"
            ),
            "time (s)",
            "packets per second",
            &series,
            None,
        )?);
    }
    let mut series = Vec::new();
    type HostFigure = fn(&HostRow) -> f64;
    let figures: [(&str, HostFigure); 2] = [
        ("softnet drops/s", |h| h.softnet_drops),
        ("squeezes/s", |h| h.squeezes),
    ];
    for (what, f) in figures {
        for (i, n) in ["local", "peer"].iter().enumerate() {
            series.push(Series {
                name: format!("{n} {what}"),
                points: p.rows.iter().map(|r| (r.t, f(&r.hosts[i]))).collect(),
            });
        }
    }
    if series.iter().all(|s| s.points.iter().all(|p| p.1 == 0.0)) {
        o.push_str("<p>softnet: no drops and no time squeezes on either host</p>");
        return Ok(o);
    }
    o.push_str(&charts::lines(
        &format!("{label}: softnet drops and time squeezes (both hosts)"),
        "time (s)",
        "events per second",
        &series,
        None,
    )?);
    Ok(o)
}

fn findings(p: &Point, label: &str) -> Result<String, charts::ChartError> {
    let t_end = p.rows.last().map_or(1.0, |r| r.t);
    let mut spans: Vec<Span> = Vec::new();
    let mut open: Vec<(String, usize)> = Vec::new();
    for m in &p.moments {
        match &m.change {
            Change::Raised(f) => {
                let key = format!("{} {} {}", f.host.name(), f.id, f.subject);
                spans.push(Span {
                    label: format!("{} {}", f.host.name(), f.id),
                    level: f.severity as usize,
                    // Drawn from the interval that raised it: one raised
                    // at the end of a point still shows.
                    from: m.start,
                    to: t_end,
                });
                open.push((key, spans.len() - 1));
            }
            Change::Cleared { id, host, subject } => {
                let key = format!("{} {id} {subject}", host.name());
                if let Some(i) = open.iter().position(|o| o.0 == key) {
                    spans[open.remove(i).1].to = m.t;
                }
            }
        }
    }
    let mut o = String::new();
    if !spans.is_empty() {
        o.push_str(&charts::timeline(
            &format!("{label}: findings raised and cleared (info blue, warn orange, error red)"),
            t_end,
            &spans,
        )?);
    }
    let list: &[Finding] = p.summary.as_ref().map_or(&[], |s| s.findings.as_slice());
    if list.is_empty() {
        o.push_str("<p>findings over the point: none</p>");
        return Ok(o);
    }
    o.push_str("<p>findings over the point, most important first:</p><ol>");
    for f in list {
        let _ = write!(
            o,
            "<li><span class=\"sev-{}\">[{}]</span> {} <code>{}</code>: {}<ul class=\"ev\">",
            f.severity.name(),
            f.severity.name(),
            f.host.name(),
            escape(&f.id),
            escape(&f.title)
        );
        for e in &f.evidence {
            let _ = write!(o, "<li>{}</li>", escape(&e.to_string()));
        }
        for x in &f.fix {
            let _ = write!(o, "<li>fix: <code>{}</code></li>", escape(x));
        }
        o.push_str("</ul></li>");
    }
    o.push_str("</ol>");
    Ok(o)
}

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
    let lines = vec![line1(m, area.width), line2(m, area.width), tabs(m)];
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

/// One field of a header line: its text, a shorter form, and how long it
/// stays when the line is too wide (higher keeps its full form longer and
/// is dropped later; a required field is never dropped, only shortened).
struct Field {
    keep: u8,
    required: bool,
    full: Vec<Span<'static>>,
    short: Option<Vec<Span<'static>>>,
}

const SEPARATOR: &str = " │ ";

impl Field {
    fn new(keep: u8, full: Vec<Span<'static>>) -> Self {
        Field {
            keep,
            required: false,
            full,
            short: None,
        }
    }

    /// A field that is never dropped.
    fn required(keep: u8, full: Vec<Span<'static>>) -> Self {
        Field {
            required: true,
            ..Field::new(keep, full)
        }
    }

    fn or_short(mut self, short: Vec<Span<'static>>) -> Self {
        self.short = Some(short);
        self
    }
}

fn spans_width(spans: &[Span<'_>]) -> usize {
    spans.iter().map(Span::width).sum()
}

/// Lay the fields out in order, separated by `│`, within `width`: while the
/// line is too wide, the field that is the least useful is shortened, then
/// dropped (a narrow terminal keeps the state, the throughput and the log).
fn fit(mut fields: Vec<Field>, width: u16) -> Line<'static> {
    let width = usize::from(width);
    let mut shown = vec![true; fields.len()];
    loop {
        let total: usize = fields
            .iter()
            .zip(&shown)
            .filter(|(_, s)| **s)
            .map(|(f, _)| spans_width(&f.full))
            .sum::<usize>()
            + Span::raw(SEPARATOR).width() * shown.iter().filter(|s| **s).count().saturating_sub(1);
        if total <= width {
            break;
        }
        // First shorten, least useful first (among equals the rightmost);
        // only when every short form is in use, drop.
        let by_keep = |i: &usize| (fields[*i].keep, std::cmp::Reverse(*i));
        let shorten = (0..fields.len())
            .filter(|&i| shown[i] && fields[i].short.is_some())
            .min_by_key(by_keep);
        if let Some(i) = shorten {
            if let Some(short) = fields[i].short.take() {
                fields[i].full = short;
            }
            continue;
        }
        match (0..fields.len())
            .filter(|&i| shown[i] && !fields[i].required)
            .min_by_key(by_keep)
        {
            Some(i) => shown[i] = false,
            None => break,
        }
    }
    let mut spans = Vec::new();
    for (f, _) in fields.into_iter().zip(shown).filter(|(_, s)| *s) {
        if !spans.is_empty() {
            spans.push(Span::raw(SEPARATOR));
        }
        spans.extend(f.full);
    }
    Line::from(spans)
}

fn line1(m: &Model, width: u16) -> Line<'static> {
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
    let point = cur.map(|i| i.point).unwrap_or(0);
    let at = if m.cursor.is_some() && point > 0 {
        format!(" point {point}")
    } else {
        String::new()
    };
    let peer = match &m.peer_host {
        Some(h) => Field::new(
            100,
            vec![Span::raw(format!(
                "peer {} ({} CPUs, {})",
                h.hostname, h.cpus, h.kernel
            ))],
        )
        .or_short(vec![Span::raw(format!("peer {}", h.hostname))]),
        None => Field::new(100, vec![Span::raw("peer: not connected")]),
    };
    fit(
        vec![
            Field::required(
                250,
                vec![
                    Span::styled(" wirescope ", title(m)),
                    Span::raw(test.clone()),
                ],
            )
            .or_short(vec![Span::raw(format!(" {test}"))]),
            Field::required(
                255,
                vec![
                    Span::styled(state, state_style(m)),
                    Span::raw(format!("{at} {elapsed:.1}/{total}")),
                ],
            ),
            peer,
            // "namespaces ws-a-1 (198.18.0.1, veth-a) <-> ..." shortens to its first words.
            Field::new(50, vec![Span::raw(m.pair.clone())]).or_short(vec![Span::raw(
                m.pair.split(" (").next().unwrap_or_default().to_string(),
            )]),
        ],
        width,
    )
}

fn line2(m: &Model, width: u16) -> Line<'static> {
    let cur = m.current();
    let result = m.result();
    let (l2p, p2l) = match result {
        Some(s) => super::result_directions(s),
        None => cur.map(directions).unwrap_or((0.0, 0.0)),
    };
    let (label, span) = match result {
        Some(s) => (" result ", format!(" (mean of {:.2} s)", s.duration_s)),
        None => (" ", String::new()),
    };
    // Shortened before the log path (which a narrow terminal must still show).
    let throughput = Field::required(
        150,
        vec![
            Span::raw(format!("{label}local→peer ")),
            Span::styled(format!("{}", BitsPerSec(l2p)), alert(m)),
            Span::raw("  peer→local "),
            Span::styled(format!("{}", BitsPerSec(p2l)), alert(m)),
            Span::raw(span),
        ],
    )
    .or_short(vec![
        Span::raw(format!("{label}→")),
        Span::styled(format!("{}", BitsPerSec(l2p)), alert(m)),
        Span::raw(" ←"),
        Span::styled(format!("{}", BitsPerSec(p2l)), alert(m)),
    ]);
    let (full_probes, short_probes) = probes(m);
    let mut fields = vec![throughput];
    let msgs = match result {
        Some(s) => s.rate_per_s,
        None => cur
            .and_then(|i| i.local.as_ref())
            .map(|s| s.engine.msgs_per_s)
            .unwrap_or(0.0),
    };
    if msgs > 0.0 {
        fields.push(Field::new(
            150,
            vec![Span::raw(format!("{} msg/s", super::short(msgs, "")))],
        ));
    }
    let log = match &m.log {
        LogState::Off => Field::new(120, vec![Span::raw("log off")]),
        LogState::On(p) => Field::new(200, vec![Span::raw(format!("log → {}", p.display()))])
            .or_short(vec![Span::raw(format!(
                "log → {}",
                p.file_name().unwrap_or(p.as_os_str()).to_string_lossy()
            ))]),
        LogState::Failed(_) => Field::required(255, vec![Span::styled("log FAILED", alert(m))]),
    };
    fields.push(log);
    fields.push(
        Field::new(60, vec![Span::raw(format!("probes: {full_probes}"))])
            .or_short(vec![Span::raw(short_probes)]),
    );
    fit(fields, width)
}

/// Which probes delivered data in the interval under the cursor: the full
/// list, and the short form (whether eBPF counts, whether probes failed).
fn probes(m: &Model) -> (String, String) {
    let Some(i) = m.current() else {
        return ("-".into(), "-".into());
    };
    let mut v: Vec<String> = Vec::new();
    let mut errors = 0;
    for s in i.local.iter().chain(i.peer.iter()) {
        let mut add = |name: &str| {
            if !v.iter().any(|x| x == name) {
                v.push(name.to_string());
            }
        };
        let have = [
            (!s.cpus.is_empty()).then_some("stat"),
            (!s.softirqs.is_empty()).then_some("softirqs"),
            (!s.softnet.is_empty()).then_some("softnet"),
            (!s.ifaces.is_empty()).then_some("net/dev"),
        ];
        have.into_iter()
            .flatten()
            .chain(s.queues.iter().map(|q| q.source.name()))
            .chain(
                s.conns
                    .iter()
                    .any(|c| c.tcp.is_some())
                    .then_some("TCP_INFO"),
            )
            .for_each(&mut add);
        errors += s.probe_errors.len();
    }
    let words: Vec<&str> = i
        .local
        .iter()
        .chain(i.peer.iter())
        .filter_map(ebpf_word)
        .collect();
    let ebpf = if words.contains(&"eBPF sampled") {
        "eBPF sampled"
    } else if words.contains(&"eBPF") {
        "eBPF"
    } else {
        v.push("no eBPF".into());
        "no eBPF"
    };
    if !v.iter().any(|x| x == ebpf) && ebpf != "no eBPF" {
        v.push(ebpf.to_string());
    }
    let short = if errors > 0 {
        v.push(format!("{errors} probe error(s)"));
        format!("{ebpf}, probe errors")
    } else {
        ebpf.to_string()
    };
    (v.join(" "), short)
}

/// Whether the eBPF probes ran on a host in an interval, and how: `eBPF`
/// (every skb, `--ebpf deep`), `eBPF sampled` (the default set, attached
/// for a share of the interval), or None (off, or a captured host). The
/// Sample's status says it even when no queue row came from eBPF (an idle
/// interval).
fn ebpf_word(s: &crate::probe::sample::Sample) -> Option<&'static str> {
    use crate::probe::sample::QueueSource;
    let counted = s.queues.iter().any(|q| q.source.is_ebpf());
    if s.ebpf.as_deref() != Some("on") && !counted {
        return None;
    }
    let sampled = s.ebpf_observed.is_some()
        || s.queues
            .iter()
            .any(|q| q.source == QueueSource::EbpfSampled);
    Some(if sampled { "eBPF sampled" } else { "eBPF" })
}

fn tabs(m: &Model) -> Line<'static> {
    let mut spans = vec![Span::raw(" ")];
    for (n, v) in View::ALL.iter().enumerate() {
        let mut label = format!("{} {}", n + 1, v.title());
        if *v == View::Findings {
            let k = m.current().map(|i| i.findings.len()).unwrap_or(0);
            label.push_str(&format!(" ({k})"));
        }
        let (text, st) = if *v == m.view {
            let st = style(m, Color::Cyan).add_modifier(Modifier::REVERSED | Modifier::BOLD);
            (format!("[{label}]"), st)
        } else {
            (format!(" {label} "), style(m, Color::Gray))
        };
        spans.push(Span::styled(text, st));
        spans.push(Span::raw(" "));
    }
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::{ebpf_word, fit, Field};
    use crate::probe::sample::Sample;

    fn sample(extra: &str) -> Sample {
        let engine = serde_json::to_string(&crate::probe::sample::EngineSample::default())
            .expect("an engine sample");
        let json = format!(
            r#"{{"host":"local","index":1,"start_s":1.0,"end_s":2.0,"omitted":false,"engine":{engine},"cpus":[]{extra}}}"#
        );
        serde_json::from_str(&json).expect("a test Sample")
    }

    #[test]
    fn the_default_sampled_ebpf_set_is_named_not_reported_missing() {
        // The default set: status on, packet probes attached for 25 % of
        // the interval. It was shown as "no eBPF".
        let s = sample(r#","ebpf":"on","ebpf_observed":0.25"#);
        assert_eq!(ebpf_word(&s), Some("eBPF sampled"));
        // An idle interval of the deep set: no eBPF queue row, still on.
        assert_eq!(ebpf_word(&sample(r#","ebpf":"on""#)), Some("eBPF"));
        // Off, with its reason, and a captured host (no status).
        let off = sample(r#","ebpf":"eBPF off: needs CAP_BPF and CAP_PERFMON (run as root)""#);
        assert_eq!(ebpf_word(&off), None);
        assert_eq!(ebpf_word(&sample("")), None);
    }
    use ratatui::text::Span;

    fn text(line: &ratatui::text::Line<'_>) -> String {
        line.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    fn fields() -> Vec<Field> {
        vec![
            Field::required(
                150,
                vec![Span::raw("local→peer 35.51 Gbit/s  peer→local 0.00 bit/s")],
            )
            .or_short(vec![Span::raw("→35.51 Gbit/s ←0.00 bit/s")]),
            Field::new(200, vec![Span::raw("log → /var/tmp/wirescope/run-1.jsonl")])
                .or_short(vec![Span::raw("log → run-1.jsonl")]),
            Field::new(
                60,
                vec![Span::raw("probes: stat softirqs softnet net/dev eBPF")],
            )
            .or_short(vec![Span::raw("eBPF")]),
        ]
    }

    #[test]
    fn a_wide_line_keeps_every_field_in_full() {
        let l = fit(fields(), 200);
        assert_eq!(
            text(&l),
            "local→peer 35.51 Gbit/s  peer→local 0.00 bit/s │ log → /var/tmp/wirescope/run-1.jsonl │ probes: stat softirqs softnet net/dev eBPF"
        );
    }

    #[test]
    fn a_narrow_line_shortens_before_it_drops_and_keeps_the_log() {
        let l = fit(fields(), 80);
        let t = text(&l);
        assert!(t.chars().count() <= 80, "{t}");
        assert!(t.contains("log → /var/tmp/wirescope/run-1.jsonl"), "{t}");
        assert!(t.starts_with("→35.51 Gbit/s"), "{t}");
        // Everything short (49 columns) does not fit 48: the probes go first.
        let l = fit(fields(), 48);
        assert_eq!(text(&l), "→35.51 Gbit/s ←0.00 bit/s │ log → run-1.jsonl");
        let l = fit(fields(), 30);
        assert_eq!(text(&l), "→35.51 Gbit/s ←0.00 bit/s");
    }
}

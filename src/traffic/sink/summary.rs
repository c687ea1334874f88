//! The packet sink's part of the faces: its section of a point's summary
//! (what the sink counted and the generator sent, loss, per queue, where
//! frames were dropped), its closing lines, its sweep table and its live row.

use super::figures::{summarize, Drops, PointInputs, QueueFigures, Rates, SinkSummary};
use super::TxPath;
use crate::traffic::options::{OptionError, Resolved};
use crate::traffic::TestOptions;
use crate::traffic::{
    si, EngineInterval, EngineKind, EngineSlice, EngineTotals, Headline, IntervalRow, PointEnds,
    Sections, Warmup,
};
use std::fmt::Write;

/// The packet sink's slice.
pub struct SinkSlice;

impl EngineSlice for SinkSlice {
    fn habits(&self) -> &'static [crate::traffic::habits::Habit] {
        super::args::HABITS
    }

    fn long_habits(&self) -> &'static [crate::traffic::habits::LongHabit] {
        super::args::LONG_HABITS
    }

    fn sweep_example(&self) -> Option<&'static str> {
        Some("frame=64,512,1518 or cores=0;1;0,1")
    }

    fn kind(&self) -> EngineKind {
        EngineKind::Sink
    }

    fn resolve(&self, t: &TestOptions<'_>) -> Result<Resolved, OptionError> {
        super::args::resolve(t)
    }

    fn refuse_elsewhere(&self, t: &TestOptions<'_>) -> Result<(), OptionError> {
        super::args::refuse_elsewhere(t)
    }

    /// The packet figures of a point; the headline is the sink's frames.
    fn summarize(&self, e: &PointEnds<'_>, out: &mut Sections) -> Headline {
        let Some(s) = e.spec.as_sink().and_then(|spec| section(spec, e)) else {
            return Headline::default();
        };
        let head = Headline {
            counts: Some((
                s.duration_s,
                s.messages.saturating_mul(u64::from(s.frame_size)),
                s.messages,
            )),
            ..Headline::default()
        };
        out.sink = Some(Box::new(s));
        head
    }

    /// The sink counts frames: its section stands for the point.
    fn common_totals(&self, s: &Sections) -> bool {
        s.sink.is_none()
    }

    fn summary_lines(&self, s: &Sections, _mode: &str) -> String {
        s.sink.as_deref().map(lines).unwrap_or_default()
    }

    /// Threads, core ids, frame size, the sink mode and generator path that
    /// ran, pps, L2 Mbit/s, sink CPU %: one row per point.
    fn sweep_table(&self, points: &[&Sections]) -> Option<String> {
        let rows: Option<Vec<&SinkSummary>> = points.iter().map(|p| p.sink.as_deref()).collect();
        rows.map(sweep_table)
    }

    fn interval_header(&self) -> Option<String> {
        Some(format!(
            "{:<5} {:>14}  {:>11}  {:>12}  {:>12}  {:>11}  {:>13}  {:>13}  {:>9}  | {:<20} | {:<20}",
            "[ ID]",
            "Interval",
            "Rx pps",
            "L2 bit/s",
            "L1 bit/s",
            "Tx pps",
            "Missing (run)",
            "Dropped (ivl)",
            "Sink CPU",
            "CPU local (busiest)",
            "CPU peer (busiest)"
        ))
    }

    fn interval_row(&self, row: &IntervalRow<'_>) -> Option<String> {
        Some(interval_row(row))
    }

    fn paths(&self) -> crate::traffic::DataPaths {
        use crate::traffic::DataPaths;
        // Frames through the kernel's receive path into packet rings.
        DataPaths::KERNEL_STACK.and(DataPaths::PACKET_RINGS)
    }

    fn busy_polls(&self) -> bool {
        true
    }

    fn chart_rate_unit(&self) -> &'static str {
        "pps"
    }

    fn judged_by_rate(&self) -> bool {
        true
    }
}

/// The packet figures of a point, from both ends' totals: the sink's
/// counters at the start and after its drain, the generator's, and the
/// per-flow tally (exact: every frame sent, the warm-up included). Rates
/// leave the warm-up out, like every other engine's.
fn section(spec: &super::SinkSpec, e: &PointEnds<'_>) -> Option<SinkSummary> {
    let sides = [(e.local, &e.local_warmup), (e.peer, &e.peer_warmup)];
    let (sink, warm): (_, &Warmup) = sides.iter().find_map(|&(t, w)| match t? {
        EngineTotals::Sink(s) => Some((s, w)),
        _ => None,
    })?;
    let gen = sides.iter().find_map(|&(t, _)| match t? {
        EngineTotals::Generator(g) => Some(g),
        _ => None,
    });
    let mut s = summarize(
        spec,
        PointInputs {
            sink: (&sink.first, &sink.last),
            gen: gen.map(|g| (&g.first, &g.last)),
            totals: gen.and_then(|g| g.totals.as_ref()),
            seen: sink.seen.as_ref().map_or(&[], |t| t.seen.as_slice()),
            speed_mbps: sink.end.speed_mbps,
        },
    );
    let mut refused = sink.end.refused.clone();
    refused.append(&mut s.refused);
    s.refused = refused;
    s.interrupted = e.interrupted;
    s.rx_zero_copy = sink.end.zero_copy;
    if warm.msgs > 0 || warm.end_s > 0.0 {
        let rates = |n: u64, secs: f64| Rates::of(n, secs, spec.frame_size, sink.end.speed_mbps);
        s.messages = s.messages.saturating_sub(warm.msgs);
        s.duration_s = (s.duration_s - warm.end_s).max(0.0);
        let r = rates(s.messages, s.duration_s);
        s.rate_per_s = r.pps;
        s.l2_bps = r.l2_bps;
        s.l1_bps = r.l1_bps;
        s.line_rate_pct = r.line_rate_pct;
        // The queues' rows are the sink's connections, in the same order:
        // leave each one's warm-up out too, so they sum to `messages`.
        let fs = u64::from(spec.frame_size).max(1);
        for (i, q) in s.per_queue.iter_mut().enumerate() {
            let w = warm.rx(i) / fs;
            q.counted = q.counted.saturating_sub(w);
            q.rates = rates(q.counted, s.duration_s);
        }
    }
    Some(s)
}

fn mpps(pps: f64) -> String {
    format!("{:.3} Mpps", pps / 1e6)
}

/// A packet test's result: what ran, what the sink counted and the
/// generator sent, loss, per queue, the lossy flows and where frames were
/// dropped (`run --engine sink`).
fn lines(s: &SinkSummary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "packets: sink {}{}, generator {}{}: {} B frames, {} flow{}, {} thread{} per side",
        s.mode.name(),
        copy_mode(s.rx_zero_copy),
        s.tx_path.name(),
        copy_mode(s.tx_zero_copy),
        s.frame_size,
        s.flows,
        plural(u64::from(s.flows)),
        s.queues,
        plural(u64::from(s.queues))
    );
    for r in &s.refused {
        let _ = writeln!(out, "  {r}");
    }
    let _ = writeln!(
        out,
        "counted {} in {:.2} s = {} (L2 {}, L1 {}{}); sent {} ({}), lost {}, reordered {}, duplicates {}",
        s.messages,
        s.duration_s,
        mpps(s.rate_per_s),
        s.l2_bps,
        s.l1_bps,
        s.line_rate_pct
            .map(|p| format!(", {p:.1} % of the link"))
            .unwrap_or_default(),
        s.sent,
        mpps(s.generator_pps),
        s.lost,
        s.reordered,
        s.duplicates
    );
    let cpu = |c: Option<f64>| c.map_or("-".to_string(), |c| format!("{c:.0}%"));
    let _ = writeln!(
        out,
        "CPU of the threads: sink {}, generator {} (% of one core)",
        cpu(s.sink_cpu_pct),
        cpu(s.generator_cpu_pct)
    );
    for q in &s.per_queue {
        out.push_str(&sink_queue_line(q));
    }
    let wh = drop_places(&s.drops);
    if !wh.is_empty() {
        let _ = writeln!(
            out,
            "dropped on the path ({} in all, each frame once): {}",
            s.drops.total(),
            wh.join(", ")
        );
    }
    if s.split_flows > 0 {
        let _ = writeln!(
            out,
            "  {} flow(s) arrived on more than one queue (generator threads moved between CPUs?): live gaps overstated loss; the loss above is exact",
            s.split_flows
        );
    }
    if s.flows_with_loss > 0 {
        let ids: Vec<String> = s
            .lossy_flows
            .iter()
            .take(16)
            .map(|f| format!("{}({})", f.flow, f.lost))
            .collect();
        let _ = writeln!(
            out,
            "  {} flow(s) lost frames, flow(lost): {}",
            s.flows_with_loss,
            ids.join(" ")
        );
    }
    if s.interrupted {
        let _ = writeln!(out, "  interrupted");
    }
    out
}

/// One queue of a packet test's result: its count, rate, thread and drops.
fn sink_queue_line(q: &QueueFigures) -> String {
    let thread = match (q.thread, q.cpu_pct) {
        (Some(t), Some(c)) => format!(", thread {t} cpu {c:.0}%"),
        (Some(t), None) => format!(", thread {t}"),
        (None, _) => String::new(),
    };
    let ring_full = match q.ring_full {
        0 => String::new(),
        n => format!(", ring full {n}"),
    };
    let nic = match q.nic_drops {
        Some(n) if n > 0 => format!(", NIC drops {n}"),
        _ => String::new(),
    };
    format!(
        "  queue {:>3}{}: {:>12} counted {}{thread}{ring_full}{nic}\n",
        q.queue,
        q.cpu.map(|c| format!(" ({c})")).unwrap_or_default(),
        q.counted,
        mpps(q.rates.pps),
    )
}

/// " (zero-copy)" / " (copy mode)" of an AF_XDP end.
fn copy_mode(zero_copy: Option<bool>) -> &'static str {
    match zero_copy {
        Some(true) => " (zero-copy)",
        Some(false) => " (copy mode)",
        None => "",
    }
}

/// Where frames were dropped, each loss once: the kernel's counters
/// overlap (see [`Drops`]), so the
/// interface's rx drops are named only for what the others leave
/// unexplained, and the generator's failed sends and its interface's tx
/// drops are one figure.
fn drop_places(d: &Drops) -> Vec<String> {
    let mut wh: Vec<String> = Vec::new();
    if d.generator_host() > 0 {
        wh.push(match (d.generator_errors, d.tx_dropped) {
            (e, 0) => format!("generator send errors {e}"),
            (0, t) => format!("generator's interface tx drops {t}"),
            (e, t) => format!("generator's interface tx drops {t} (its sends saw {e} errors)"),
        });
    }
    for (v, name) in [
        (d.ring_full, "socket/XDP ring full"),
        (d.xdp_no_socket, "XDP frames without a socket"),
        (d.softnet_dropped, "softnet backlog drops"),
    ] {
        if v > 0 {
            wh.push(format!("{name} {v}"));
        }
    }
    let named: u64 = d.nic.values().sum();
    if named >= d.rx_queue_drops.values().sum::<u64>() {
        for (k, v) in &d.nic {
            wh.push(format!("NIC {k} {v}"));
        }
    } else {
        for (q, v) in &d.rx_queue_drops {
            wh.push(format!("NIC rx queue {q} drops {v}"));
        }
    }
    if d.other_rx() > 0 {
        wh.push(format!(
            "other rx drops of the sink's interface {}",
            d.other_rx()
        ));
    }
    wh
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The generator's path as a sweep row names it: `af-xdp zc`/`af-xdp copy`,
/// `tx-ring`, `sendmmsg`; `-` when no generator ran here (`auto` left).
fn tx_cell(s: &SinkSummary) -> String {
    match (s.tx_path, s.tx_zero_copy) {
        (TxPath::Auto, _) => "-".into(),
        (TxPath::AfXdp, Some(true)) => "af-xdp zc".into(),
        (TxPath::AfXdp, Some(false)) => "af-xdp copy".into(),
        (p, _) => p.name().into(),
    }
}

/// The table a packet sweep ends with: threads, core ids, frame size, the
/// sink mode and generator path that ran (a refused mode changes what a
/// row measures), pps, L2 Mbit/s, sink CPU % — one row per point.
fn sweep_table<'a>(rows: impl IntoIterator<Item = &'a SinkSummary>) -> String {
    let mut out = String::from(
        "threads  cores       frame  sink     generator    pps          L2 Mbps     CPU %   lost\n",
    );
    for s in rows {
        let _ = writeln!(
            out,
            "{:>7}  {:<10}  {:>5}  {:<7}  {:<11}  {:>11.0}  {:>10.1}  {:>6}  {:>5}",
            s.queues,
            if s.sink_cpus.is_empty() {
                "-".to_string()
            } else {
                crate::units::format_cpu_list(&s.sink_cpus)
            },
            s.frame_size,
            s.mode.name(),
            tx_cell(s),
            s.rate_per_s,
            s.l2_bps.0 / 1e6,
            s.sink_cpu_pct
                .map_or("-".to_string(), |c| format!("{c:.1}")),
            s.lost
        );
    }
    out
}

/// The packet test's row: the sink's counts and rates, the generator's
/// rate, live gaps, drops on the path and the sink threads' CPU.
///
/// The span printed is the one the sink's rates cover: its last interval
/// ends when the counts last moved, not when the drain's quiet tail ended.
fn interval_row(row: &IntervalRow<'_>) -> String {
    let (start, end) = row.span;
    let (mut sink, mut gen) = (None, None);
    for e in row.figures.into_iter().flatten() {
        match e {
            EngineInterval::Sink(k) => sink = Some(&k.figures),
            EngineInterval::Generator(g) => gen = Some(&g.figures),
            _ => {}
        }
    }
    let end = sink
        .map(|k| k.secs)
        .filter(|own| *own > 0.0 && *own < end - start)
        .map_or(end, |own| start + own);
    let span = format!("{start:6.2}-{end:<6.2}s");
    let dash = || "-".to_string();
    let (pps, l2, l1, missing, dropped, cpu) = match sink {
        Some(k) => {
            let dropped = k.drops.sink_host();
            (
                format!("{}pps", si(k.rates.pps)),
                k.rates.l2_bps.to_string(),
                k.rates.l1_bps.to_string(),
                k.missing.to_string(),
                dropped.to_string(),
                k.cpu_pct.map_or_else(dash, |c| format!("{c:.0}%")),
            )
        }
        None => (dash(), dash(), dash(), dash(), dash(), dash()),
    };
    let tx = gen.map_or_else(dash, |g| format!("{}pps", si(g.rates.pps)));
    let errors = match gen {
        Some(g) if g.errors > 0 => format!("  send errors: {}", g.errors),
        _ => String::new(),
    };
    format!(
        "[SUM] {span}  {pps:>11}  {l2:>12}  {l1:>12}  {tx:>11}  {missing:>13}  {dropped:>13}  {cpu:>9}  | {:<20} | {:<20}{}{errors}\n",
        row.cpu[0],
        row.cpu[1],
        row.omit
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink_summary(mode: &str, tx: &str, zc: Option<bool>) -> SinkSummary {
        let mut v = serde_json::json!({
            "engine": "sink", "mode": mode, "tx_path": tx, "frame_size": 64, "queues": 1,
            "flows": 1, "sink_cpus": [0], "duration_s": 1.0, "rate_per_s": 1000.0,
            "messages": 1000, "l2_bps": 512000.0, "l1_bps": 672000.0, "sent": 1000, "lost": 0,
            "reordered": 0, "duplicates": 0, "generator_pps": 1000.0,
            "drops": {"generator_errors": 0, "tx_dropped": 0, "rx_dropped": 0,
                      "softnet_dropped": 0, "ring_full": 0, "xdp_no_socket": 0},
            "per_queue": [], "flows_with_loss": 0
        });
        if let Some(z) = zc {
            v["tx_zero_copy"] = z.into();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_packet_sweep_row_says_which_sink_mode_and_generator_path_ran() {
        let rows = [
            sink_summary("af-xdp", "af-xdp", Some(false)),
            sink_summary("tpacket", "tx-ring", None),
            sink_summary("xdp", "auto", None),
        ];
        let t = sweep_table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        let col = |name: &str| lines[0].find(name).unwrap();
        let (sink, gen) = (col("sink"), col("generator"));
        for (line, (mode, path)) in lines[1..].iter().zip([
            ("af-xdp", "af-xdp copy"),
            ("tpacket", "tx-ring"),
            ("xdp", "-"),
        ]) {
            assert_eq!(&line[sink..sink + mode.len()], mode, "{t}");
            assert_eq!(&line[gen..gen + path.len()], path, "{t}");
        }
        // One flow, one thread: no plural.
        let l = super::lines(&rows[1]);
        assert!(l.contains("64 B frames, 1 flow, 1 thread per side"), "{l}");
    }
}

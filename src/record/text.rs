//! The human-readable table `wirescope run` prints without `--json`:
//! iperf3's columns plus the busiest core of each host.

use super::schema::{HostCpu, Summary};
use crate::probe::sample::Sample;
use crate::traffic::{si, IntervalRow};
use crate::traffic::{ConnRole, EngineSpec, Side};
use crate::units::{BitsPerSec, Bytes, Nanos};
use std::fmt::Write;

/// The first line of `run`'s table: what runs between which hosts.
pub fn run_title(h: &super::schema::Header) -> String {
    let what = h
        .spec
        .as_ref()
        .map(|s| format!("{} {}", s.kind().name(), s.mode_name()))
        .unwrap_or_else(|| "observe".into());
    // Without an agent (`run --engine grpc --target`) the far end is the pair's description.
    let far = if h.hosts.peer.cpus == 0 && h.hosts.peer.hostname.is_empty() {
        h.pair.clone()
    } else {
        format!(
            "peer {} ({}, {} CPUs)",
            h.hosts.peer.hostname, h.hosts.peer.kernel, h.hosts.peer.cpus
        )
    };
    let arrow = h.spec.as_ref().map_or("->", |s| s.arrow());
    format!(
        "wirescope {}: {what}, local {} ({}, {} CPUs) {arrow} {far}",
        h.wirescope, h.hosts.local.hostname, h.hosts.local.kernel, h.hosts.local.cpus,
    )
}

/// The line a sweep's point starts with: the swept value (a cores
/// sweep's CPU set, not how many CPUs it has).
pub fn sweep_heading(s: &crate::session::plan::SweepValue) -> String {
    match &s.cpus {
        Some(set) => format!("== sweep {} = {set} ==", s.param),
        None => format!("== sweep {} = {} ==", s.param, s.value),
    }
}

/// Column header for interval rows.
pub fn interval_header(spec: &EngineSpec) -> String {
    if let Some(h) = crate::traffic::slice(spec.kind()).interval_header() {
        return h;
    }
    match spec.bulk_transfer() {
        true => format!(
            "{:<5} {:>14}  {:>11}  {:>14}  {:>5}  {:>9}  {:>8}  | {:<20} | {:<20}",
            "[ ID]",
            "Interval",
            "Transfer",
            "Bitrate",
            "Retr",
            "Cwnd",
            "RTT",
            "CPU local (busiest)",
            "CPU peer (busiest)"
        ),
        false => format!(
            "{:<5} {:>14}  {:>13}  {:>14}  {:>10}  {:>10}  | {:<20} | {:<20}",
            "[ ID]",
            "Interval",
            "Rate",
            "Bitrate",
            "p50",
            "p99",
            "CPU local (busiest)",
            "CPU peer (busiest)"
        ),
    }
}

/// Shortest span whose CPU shares are shown: /proc/stat counts in 10 ms
/// ticks, so a shorter interval (the few ms that end a test) reads 0 % or
/// 100 % whatever the cores did.
const CPU_MIN_SPAN_S: f64 = 0.1;

fn cpu_cell(s: Option<&Sample>) -> String {
    let s = s.filter(|s| s.end_s - s.start_s >= CPU_MIN_SPAN_S);
    match s.and_then(|s| s.busiest_cpu().map(|b| (s.mean_busy(), b))) {
        Some((mean, b)) => format!("{mean:5.1}% ({} {:5.1}%)", b.cpu, b.busy().0),
        None => "-".into(),
    }
}

/// Received bytes per connection for one interval (the receiving host's
/// count when its Sample arrived, else the sender's), with the rate over the
/// span of the host that counted them: under overload the two hosts' Samples of one interval can cover very
/// different spans (seen: 3.1 s against 1.1 s), and dividing one host's
/// bytes by the other's span gave rates no link carries.
fn counted(
    spec: &EngineSpec,
    local: Option<&Sample>,
    peer: Option<&Sample>,
    i: usize,
) -> (u64, f64) {
    let roles = spec.conn_roles(Side::Controller);
    let get = |s: Option<&Sample>, rx: bool| {
        let s = s?;
        let c = s.conns.get(i)?;
        let b = if rx { c.rx_bytes } else { c.tx_bytes };
        Some((b, (s.end_s - s.start_s).max(1e-9)))
    };
    let (b, secs) = match roles.get(i) {
        Some(ConnRole::Sender) => get(peer, true).or(get(local, false)),
        Some(ConnRole::Receiver) => get(local, true).or(get(peer, false)),
        _ => get(local, true),
    }
    .unwrap_or((0, 1.0));
    (b, b as f64 * 8.0 / secs)
}

/// A TCP stream interval: one row per stream (up to 16) with its bytes,
/// rate, retransmits, cwnd and RTT, then the SUM row.
fn stream_rows(
    spec: &EngineSpec,
    local: Option<&Sample>,
    peer: Option<&Sample>,
    span: &str,
    omit: &str,
    cpu: &[String; 2],
) -> String {
    let mut out = String::new();
    let n = spec.connection_count();
    let roles = spec.conn_roles(Side::Controller);
    let mut total = 0;
    let mut total_bps = 0.0;
    let mut retr_total = 0;
    // The congestion window and RTT of a lone stream go on the SUM row.
    let (mut cwnd, mut rtt) = (String::new(), String::new());
    for (i, role) in roles.iter().enumerate() {
        let (b, bps) = counted(spec, local, peer, i);
        total += b;
        total_bps += bps;
        let sender = if *role == ConnRole::Sender {
            local
        } else {
            peer
        };
        let c = sender.and_then(|s| s.conns.get(i));
        let retr = c.map(|c| c.retransmits).unwrap_or(0);
        retr_total += retr;
        if n == 1 && i == 0 {
            (cwnd, rtt) = cwnd_rtt(c);
        }
        if n > 1 && n <= 16 {
            let (cwnd, rtt) = cwnd_rtt(c);
            let _ = writeln!(
                out,
                "[{i:>3}] {span}  {:>11}  {:>14}  {retr:>5}  {cwnd:>9}  {rtt:>8}{omit}",
                Bytes(b).to_string(),
                BitsPerSec(bps).to_string()
            );
        }
    }
    let _ = writeln!(
        out,
        "[SUM] {span}  {:>11}  {:>14}  {retr_total:>5}  {cwnd:>9}  {rtt:>8}  | {:<20} | {:<20}{omit}",
        Bytes(total).to_string(),
        BitsPerSec(total_bps).to_string(),
        cpu[0],
        cpu[1]
    );
    out
}

/// A connection's congestion window and RTT cells (`-` without TCP_INFO).
fn cwnd_rtt(c: Option<&crate::probe::sample::ConnSample>) -> (String, String) {
    match c.and_then(|c| c.tcp) {
        Some(t) => (
            Bytes(u64::from(t.snd_cwnd) * u64::from(t.snd_mss)).to_string(),
            format!("{} us", t.rtt_us),
        ),
        None => ("-".into(), "-".into()),
    }
}

/// Rows for one interval (per stream when there are several, then SUM).
pub fn interval_rows(spec: &EngineSpec, local: Option<&Sample>, peer: Option<&Sample>) -> String {
    let Some(any) = local.or(peer) else {
        return String::new();
    };
    let secs = (any.end_s - any.start_s).max(1e-9);
    let span = format!("{:6.2}-{:<6.2}s", any.start_s, any.end_s);
    let omit = if any.omitted { " (omitted)" } else { "" };
    let mut out = String::new();
    let slice = crate::traffic::slice(spec.kind());
    let cpu = [cpu_cell(local), cpu_cell(peer)];
    let own = slice.interval_row(&IntervalRow {
        span: (any.start_s, any.end_s),
        omit,
        figures: [local, peer].map(|s| s.and_then(|s| s.engine.extra.as_ref())),
        cpu: [&cpu[0], &cpu[1]],
    });
    if let Some(row) = own {
        out.push_str(&row);
        return out;
    }
    let n = spec.connection_count();
    match spec.bulk_transfer() {
        true => out.push_str(&stream_rows(spec, local, peer, &span, omit, &cpu)),
        false => {
            let l = local.map(|s| &s.engine);
            let total: u64 = (0..n).map(|i| counted(spec, local, peer, i).0).sum();
            let rate = l.map(|e| e.msgs_per_s).unwrap_or(0.0);
            let unit = slice.rate_unit(spec);
            let figures = l.and_then(|e| e.extra.as_ref());
            // The engine's note after the row (gRPC: the interval's non-OK statuses).
            let errors = slice.interval_note(figures);
            // The summary's unit rule: us below 10 ms, ms above.
            let (p50, p99) = p50_p99(l.and_then(|e| e.latency));
            let _ = writeln!(
                out,
                "[SUM] {span}  {:>13}  {:>14}  {p50:>10}  {p99:>10}  | {:<20} | {:<20}{omit}{errors}",
                format!("{} {unit}", si(rate)),
                match slice.interval_bps(figures) {
                    Some(bps) => BitsPerSec(bps).to_string(),
                    None => BitsPerSec::from_bytes(total, secs).to_string(),
                },
                cpu[0],
                cpu[1]
            );
        }
    }
    out
}

/// A latency in microseconds as the summary prints it (us below 10 ms, ms above).
fn latency(us: f64) -> String {
    Nanos((us * 1000.0).max(0.0) as u64).to_string()
}

/// The p50 and p99 cells of a latency summary (`-` without one).
fn p50_p99(l: Option<crate::traffic::LatencySummary>) -> (String, String) {
    match l {
        Some(q) => (latency(q.p50), latency(q.p99)),
        None => ("-".into(), "-".into()),
    }
}

/// Up to `n` names joined by ", ", with "… (K more)" when there are more.
fn name_list(names: &[String], n: usize) -> String {
    let mut s = names.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > n {
        let _ = write!(s, ", … ({} more)", names.len() - n);
    }
    s
}

/// RDMA devices of a host: firmware, board, PCIe, and per port its state,
/// rate, link layer, MTUs, GIDs (with their RoCE type) and counters.
pub fn rdma_facts_lines(r: &crate::probe::rdma::RdmaFacts) -> String {
    use crate::probe::rdma::GidType;
    let mut o = String::new();
    if r.devices.is_empty() {
        let _ = writeln!(
            o,
            "\nRDMA: {}",
            r.none.as_deref().unwrap_or("no RDMA device")
        );
        return o;
    }
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".into());
    for d in &r.devices {
        let _ = writeln!(
            o,
            "\nRDMA {}: {} fw {}, board {}, node GUID {}{}",
            d.name,
            opt(&d.hca_type),
            opt(&d.fw_ver),
            opt(&d.board_id),
            opt(&d.node_guid),
            d.pci
                .as_ref()
                .map(|p| format!(", PCI {p}"))
                .unwrap_or_default()
        );
        if let Some(p) = &d.pcie {
            let _ = writeln!(
                o,
                "  PCIe: {} x{} (max {} x{})",
                p.current_speed,
                p.current_width.map_or("?".into(), |w| w.to_string()),
                p.max_speed,
                p.max_width.map_or("?".into(), |w| w.to_string())
            );
        }
        for p in &d.ports {
            let _ = writeln!(
                o,
                "  port {}: {} ({}), {}, {}, {}{}{}",
                p.port,
                p.state.as_ref().map_or("?", |s| s.name.as_str()),
                p.phys_state.as_ref().map_or("?", |s| s.name.as_str()),
                p.rate.as_ref().map_or("rate ?", |r| r.text.as_str()),
                p.link_layer
                    .unwrap_or(crate::probe::rdma::LinkLayer::Other)
                    .name(),
                match (p.active_mtu, p.max_mtu) {
                    // InfiniBand ports: the MTUs are not in sysfs.
                    (None, None) => "MTU not in sysfs (ibv_devinfo -v shows it)".to_string(),
                    (a, m) => format!(
                        "active MTU {} of {}",
                        a.map_or("?".into(), |m| m.to_string()),
                        m.map_or("?".into(), |m| m.to_string())
                    ),
                },
                p.netdev
                    .as_ref()
                    .map(|n| format!(
                        ", netdev {n}{}",
                        p.netdev_mtu
                            .map(|m| format!(" mtu {m}"))
                            .unwrap_or_default()
                    ))
                    .unwrap_or_default(),
                p.lid
                    .filter(|l| *l > 0)
                    .map(|l| format!(", LID {l}"))
                    .unwrap_or_default(),
            );
            for g in &p.gids {
                let _ = writeln!(
                    o,
                    "    GID {} {} {}{}",
                    g.index,
                    g.gid,
                    match g.kind {
                        GidType::RoceV2 => "RoCE v2",
                        GidType::IbRoceV1 => "IB/RoCE v1",
                        GidType::Unknown => "type ?",
                    },
                    g.ndev
                        .as_ref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                );
            }
            if !p.counters.is_empty() || !p.hw_counters.is_empty() {
                let _ = writeln!(
                    o,
                    "    counters: {} in counters/, {} in hw_counters/ ({})",
                    p.counters.len(),
                    p.hw_counters.len(),
                    name_list(&p.hw_counters, 8)
                );
            }
        }
    }
    o
}

/// The non-zero RDMA counters of each port at one instant (a capture).
pub fn rdma_counter_lines(r: &crate::probe::rdma::RdmaSnapshot) -> String {
    let mut o = String::new();
    for p in &r.ports {
        let nz = |m: &std::collections::BTreeMap<String, u64>| -> Vec<String> {
            m.iter()
                .filter(|(_, v)| **v > 0)
                .map(|(k, v)| format!("{k} {v}"))
                .collect()
        };
        let (c, h, n) = (nz(&p.counters), nz(&p.hw_counters), nz(&p.netdev));
        let _ = writeln!(
            o,
            "\nRDMA {} port {} counters (non-zero):",
            p.device, p.port
        );
        for (what, v) in [
            ("counters/", c),
            ("hw_counters/", h),
            ("netdev pause/prio", n),
        ] {
            if !v.is_empty() {
                let _ = writeln!(o, "  {what}: {}", v.join(", "));
            }
        }
    }
    o
}

fn cpu_line(name: &str, h: &HostCpu) -> String {
    let mut s = format!(
        "CPU {name}: mean {:.1}% busy over {} interval(s)",
        h.mean_busy, h.intervals
    );
    if let Some(p) = h.observer_share_pct {
        let _ = write!(
            s,
            "; observing it cost {:.1} ms CPU ({p:.2} % of the busy CPU)",
            h.observer_cpu_ms
        );
    }
    for c in &h.cpus {
        let _ = write!(
            s,
            " | cpu{} {:.1}% (usr {:.1} sys {:.1} irq {:.1} si {:.1})",
            c.cpu, c.busy, c.user, c.system, c.irq, c.softirq
        );
    }
    s
}

/// The table a sweep ends with: one row per point, the swept value first,
/// then what the point achieved and what it cost (the table a user draws by
/// hand from iperf3 or ghz runs). Empty for fewer than two swept points.
pub fn sweep_table(points: &[Summary]) -> String {
    let swept: Vec<&Summary> = points.iter().filter(|s| s.sweep.is_some()).collect();
    let Some(param) = swept
        .first()
        .and_then(|s| s.sweep.as_ref())
        .map(|v| v.param.clone())
        .filter(|_| swept.len() >= 2)
    else {
        return String::new();
    };
    let sections: Vec<&crate::traffic::Sections> = swept.iter().map(|s| &s.sections).collect();
    let own = crate::traffic::EngineKind::ALL
        .iter()
        .find_map(|&k| crate::traffic::slice(k).sweep_table(&sections));
    if let Some(table) = own {
        return format!("\nsweep of {param}: one row per point\n{table}");
    }
    let value = |s: &Summary| {
        let v = s.sweep.as_ref().map_or(0, |v| v.value);
        if param == "size" {
            Bytes(v).to_string()
        } else {
            v.to_string()
        }
    };
    let mut out = format!(
        "\nsweep of {param}: one row per point\n{:>12}  {:>14}  {:>11}  {:>11}  {:>11}  {:>10}  {:>10}  {:>7}  {:>7}\n",
        param, "throughput", "msg/s", "MB/s sent", "MB/s recv", "p50", "p99", "CPU loc", "CPU peer"
    );
    for s in swept {
        // From this host's side: what it sent and what it received, MB/s.
        let mbs = |bytes: u64| {
            if s.duration_s > 0.0 {
                format!("{:.1}", bytes as f64 / s.duration_s / 1e6)
            } else {
                "-".into()
            }
        };
        let dir = |d: &str| -> u64 {
            s.streams
                .iter()
                .filter(|x| x.direction == d)
                .map(|x| x.bytes)
                .sum()
        };
        let own = crate::traffic::EngineKind::ALL
            .iter()
            .find_map(|&k| crate::traffic::slice(k).payload_cells(&s.sections));
        let (req, resp) = match own {
            Some(c) => (c.sent, c.received),
            None if s.mode == "stream" => (mbs(dir("local->peer")), mbs(dir("peer->local"))),
            None => ("-".into(), mbs(s.bytes)),
        };
        let (p50, p99) = p50_p99(s.latency_us);
        let cpu = |h: &HostCpu| {
            if h.intervals == 0 {
                "-".to_string()
            } else {
                format!("{:.0}%", h.mean_busy)
            }
        };
        let rate = if s.messages > 0 {
            si(s.rate_per_s)
        } else {
            "-".into()
        };
        let _ = writeln!(
            out,
            "{:>12}  {:>14}  {:>11}  {:>11}  {:>11}  {:>10}  {:>10}  {:>7}  {:>7}{}",
            value(s),
            BitsPerSec(s.throughput_bps).to_string(),
            rate,
            req,
            resp,
            p50,
            p99,
            cpu(&s.hosts.local),
            cpu(&s.hosts.peer),
            if s.error.is_some() { "  (failed)" } else { "" }
        );
    }
    out
}

/// The closing block of a point.
pub fn summary_block(s: &Summary) -> String {
    let mut out = String::from("- - - - - - - - - - - - - - - - - - - - - - - - -\n");
    if let Some(sw) = &s.sweep {
        let _ = writeln!(out, "sweep {} = {}", sw.param, sw.value);
    }
    for st in &s.streams {
        if s.streams.len() > 1 && s.streams.len() <= 16 {
            let _ = writeln!(
                out,
                "[{:>3}] {:<12} {:>11}  {:>14}  retr {}",
                st.id,
                st.direction,
                Bytes(st.bytes).to_string(),
                BitsPerSec::from_bytes(st.bytes, s.duration_s).to_string(),
                st.retransmits
            );
        }
    }
    let retr: u32 = s.streams.iter().map(|x| x.retransmits).sum();
    let slices = crate::traffic::EngineKind::ALL.map(crate::traffic::slice);
    let common = slices.iter().all(|e| e.common_totals(&s.sections));
    if common {
        let _ = writeln!(
            out,
            "[SUM] 0.00-{:.2} s  {:>11}  {:>14}  retr {retr}  (bytes counted by the receiver)",
            s.duration_s,
            Bytes(s.bytes).to_string(),
            BitsPerSec(s.throughput_bps).to_string()
        );
    }
    if s.messages > 0 && common {
        let _ = write!(out, "{} messages, {}/s", s.messages, si(s.rate_per_s));
        if let Some(m) = s.mib_per_s {
            let _ = write!(out, ", {m:.1} MiB/s");
        }
        out.push('\n');
    }
    let (zc_done, zc_copied) = s
        .streams
        .iter()
        .filter_map(|x| x.zerocopy)
        .fold((0, 0), |(a, b), z| (a + z.completed, b + z.copied));
    if zc_done > 0 {
        let _ = writeln!(
            out,
            "MSG_ZEROCOPY: {zc_done} sends completed, {:.0}% of them copied by the kernel anyway{}",
            zc_copied as f64 * 100.0 / zc_done as f64,
            if zc_copied == zc_done {
                " (always so on loopback and veth; a real NIC avoids the copy)"
            } else {
                ""
            }
        );
    }
    for e in &slices {
        out.push_str(&e.summary_lines(&s.sections, &s.mode));
    }
    if let Some(l) = s.latency_us {
        let ns = latency;
        let _ = writeln!(
            out,
            "latency: p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  ({} transactions)",
            ns(l.p50),
            ns(l.p90),
            ns(l.p99),
            ns(l.p999),
            ns(l.max),
            l.count
        );
    }
    let _ = writeln!(out, "{}", cpu_line("local", &s.hosts.local));
    if s.hosts.peer.intervals > 0 || slices.iter().all(|e| e.peer_reported(&s.sections)) {
        let _ = writeln!(out, "{}", cpu_line("peer ", &s.hosts.peer));
    }
    if let Some(l) = &s.limited_by {
        let _ = writeln!(out, "{l}");
    }
    out.push_str(&findings_block(&s.findings, 5));
    if s.interrupted {
        out.push_str("interrupted by the user\n");
    }
    if let Some(e) = &s.error {
        let _ = writeln!(out, "error: {e}");
    }
    out
}

/// Column header of `wirescope watch`.
pub const WATCH_HEADER: &str = "[  interval   ] host: CPU mean, busiest core | interface rx / tx | NET_RX softirqs/s | softnet drops, squeezes";

fn host_cell(s: &Sample) -> String {
    let mut cell = match s.busiest_cpu() {
        Some(b) => format!(
            "cpu {:5.1}% max {} {:5.1}%",
            s.mean_busy(),
            b.cpu,
            b.busy().0
        ),
        None => "cpu -".into(),
    };
    let secs = s.rows_secs().max(1e-9);
    for i in &s.ifaces {
        let _ = write!(cell, " | {} rx {} tx {}", i.name, i.rx_bps, i.tx_bps);
    }
    let net_rx: u64 = s.softirqs.iter().map(|c| c.net_rx).sum();
    let drops: u64 = s.softnet.iter().map(|c| u64::from(c.delta.dropped)).sum();
    let squeeze: u64 = s
        .softnet
        .iter()
        .map(|c| u64::from(c.delta.time_squeeze))
        .sum();
    let _ = write!(
        cell,
        " | NET_RX {}/s | drops {drops} squeezes {squeeze}",
        si(net_rx as f64 / secs)
    );
    cell
}

/// One `watch` row: this host, and the peer when there is one.
pub fn watch_row(local: Option<&Sample>, peer: Option<&Sample>) -> String {
    let Some(any) = local.or(peer) else {
        return String::new();
    };
    let mut row = format!("[{:6.2}-{:<6.2}s] ", any.start_s, any.end_s);
    if let Some(l) = local {
        let _ = write!(row, "local: {}", host_cell(l));
    }
    if let Some(p) = peer {
        let _ = write!(
            row,
            "{}peer: {}",
            if local.is_some() { " || " } else { "" },
            host_cell(p)
        );
    }
    row.push('\n');
    row
}

/// `  LABEL: ...` for a NIC fact ethtool may not have.
fn support_line<T>(
    o: &mut String,
    label: &str,
    v: &crate::probe::facts::Support<T>,
    f: impl Fn(&T) -> String,
) {
    use crate::probe::facts::Support;
    let text = match v {
        Support::Value(x) => f(x),
        Support::NotSupported { driver } if driver.is_empty() => {
            "not supported by the driver".into()
        }
        Support::NotSupported { driver } => format!("not supported by driver {driver}"),
        Support::Error(e) => format!("unavailable ({e})"),
        Support::Unknown => "unknown".into(),
    };
    let _ = writeln!(o, "  {label}: {text}");
}

/// `current/max`.
fn cur_max<T: std::fmt::Display>(cur: Option<T>, max: Option<T>) -> String {
    format!("{}/{}", opt(cur), opt(max))
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "n/a".into())
}

/// A NIC's offloads, interrupt coalescing and pause frames.
fn offload_lines(o: &mut String, n: &crate::probe::facts::NicFacts) {
    support_line(o, "offloads", &n.features, |f| {
        [
            "generic-receive-offload",
            "large-receive-offload",
            "tcp-segmentation-offload",
            "generic-segmentation-offload",
            "rx-checksumming",
            "tx-nocache-copy",
        ]
        .iter()
        .map(|k| {
            format!(
                "{k} {}",
                f.on(k)
                    .map(|b| if b { "on" } else { "off" })
                    .unwrap_or("n/a")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
    });
    support_line(o, "coalesce", &n.coalesce, |c| {
        format!(
            "adaptive rx {} tx {}, rx-usecs {} tx-usecs {}",
            opt(c.adaptive_rx),
            opt(c.adaptive_tx),
            opt(c.rx_usecs),
            opt(c.tx_usecs)
        )
    });
    support_line(o, "pause", &n.pause, |p| {
        format!("autoneg {} rx {} tx {}", p.autoneg, p.rx, p.tx)
    });
}

/// One NIC's facts: MTU, state, driver and firmware, link, channels,
/// rings, offloads, coalescing, pause, NUMA placement, PCIe and IRQs.
fn nic_lines(o: &mut String, n: &crate::probe::facts::NicFacts) {
    let _ = writeln!(
        o,
        "\n{}: mtu {}, {}, qdisc {}",
        n.name,
        opt(n.mtu),
        n.operstate.as_deref().unwrap_or("state unknown"),
        n.qdisc.as_deref().unwrap_or("unknown")
    );
    support_line(o, "driver", &n.drvinfo, |d| {
        format!(
            "{} {} firmware '{}' bus '{}'",
            d.driver, d.version, d.firmware, d.bus_info
        )
    });
    support_line(o, "link", &n.link, |l| {
        format!(
            "{} Mb/s {}, autoneg {}, link {}",
            opt(l.speed_mbps),
            l.duplex.as_deref().unwrap_or("duplex n/a"),
            opt(l.autoneg),
            opt(l.link_detected)
        )
    });
    support_line(o, "channels", &n.channels, |c| {
        format!(
            "combined {} rx {} tx {} (current/max)",
            cur_max(c.combined, c.max_combined),
            cur_max(c.rx, c.max_rx),
            cur_max(c.tx, c.max_tx)
        )
    });
    support_line(o, "rings", &n.rings, |r| {
        format!(
            "rx {} tx {} (current/max)",
            cur_max(r.rx, r.max_rx),
            cur_max(r.tx, r.max_tx)
        )
    });
    offload_lines(o, n);
    let _ = writeln!(
        o,
        "  NUMA node {}, local CPUs {}, queues rx {} tx {}",
        opt(n.numa_node),
        n.local_cpulist.as_deref().unwrap_or("n/a"),
        opt(n.rx_queues),
        opt(n.tx_queues)
    );
    if let Some(p) = &n.pcie {
        let _ = writeln!(
            o,
            "  PCIe: {} x{} (max {} x{})",
            p.current_speed,
            opt(p.current_width),
            p.max_speed,
            opt(p.max_width)
        );
    }
    for i in &n.irqs {
        let _ = writeln!(o, "  IRQ {} {} -> CPUs {}", i.irq, i.name, i.affinity);
    }
}

/// Host facts for people (`watch --from DIR` without `--json`).
pub fn facts_block(source: &str, f: &crate::probe::facts::HostFacts) -> String {
    let mut o = format!("host facts from {source}\n");
    let _ = writeln!(
        o,
        "kernel {}, {} CPUs ({})",
        f.kernel,
        f.cpus,
        if f.cpu_model.is_empty() {
            "model unknown"
        } else {
            &f.cpu_model
        }
    );
    for n in &f.numa {
        let _ = writeln!(o, "NUMA node{}: CPUs {}", n.node, n.cpulist);
    }
    let _ = writeln!(
        o,
        "irqbalance: {}",
        match f.irqbalance {
            Some(true) => "running",
            Some(false) => "not running",
            None => "unknown",
        }
    );
    if f.governors.is_empty() {
        o.push_str("cpufreq governor: none (no cpufreq)\n");
    }
    for (g, cpus) in &f.governors {
        let _ = writeln!(o, "cpufreq governor {g}: CPUs {cpus}");
    }
    for (k, v) in &f.sysctls {
        let _ = writeln!(o, "{k} = {v}");
    }
    for n in &f.nics {
        nic_lines(&mut o, n);
    }
    if let Some(r) = &f.rdma {
        o.push_str(&rdma_facts_lines(r));
    }
    if !f.unavailable.is_empty() {
        let _ = writeln!(o, "\nnot available: {}", f.unavailable.join(", "));
    }
    o
}

/// One line per raised or cleared finding, as they happen.
pub fn finding_change(c: &crate::diagnose::Change) -> String {
    use crate::diagnose::Change;
    match c {
        Change::Raised(f) => format!(
            "  >> finding [{}] {} {}: {}\n",
            f.severity.name(),
            f.host.name(),
            f.id,
            f.title
        ),
        Change::Cleared { id, host, subject } => {
            format!(
                "  << cleared {} {}{}\n",
                host.name(),
                id,
                if subject.is_empty() {
                    String::new()
                } else {
                    format!(" ({subject})")
                }
            )
        }
    }
}

/// Findings for people: most important first, each with its evidence and fix.
pub fn findings_block(findings: &[crate::diagnose::Finding], limit: usize) -> String {
    let mut o = String::new();
    if findings.is_empty() {
        o.push_str("findings: none\n");
        return o;
    }
    let _ = writeln!(
        o,
        "findings, most important first ({} in all):",
        findings.len()
    );
    for f in findings.iter().take(limit) {
        let _ = writeln!(
            o,
            "  [{}] {} {}: {}",
            f.severity.name(),
            f.host.name(),
            f.id,
            f.title
        );
        for e in &f.evidence {
            let _ = writeln!(o, "      {e}");
        }
        for fix in &f.fix {
            let _ = writeln!(o, "      fix: {fix}");
        }
    }
    if findings.len() > limit {
        let _ = writeln!(
            o,
            "  ... {} more in the log / --json",
            findings.len() - limit
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(host: &str, start: f64, end: f64, rx: u64, tx: u64, role: &str) -> Sample {
        serde_json::from_value(serde_json::json!({
            "host": host, "index": 0, "start_s": start, "end_s": end, "omitted": false,
            "engine": {"tx_bytes": tx, "rx_bytes": rx, "tx_bps": 0.0, "rx_bps": 0.0,
                       "messages": 0, "msgs_per_s": 0.0},
            "conns": [{"id": 0, "role": role, "tx_bytes": tx, "rx_bytes": rx, "retransmits": 0}],
            "cpus": [], "softirqs": [], "softnet": [], "ifaces": [], "nstat": {}
        }))
        .expect("sample json")
    }

    #[test]
    fn a_rate_is_over_the_span_of_the_host_that_counted_the_bytes() {
        // Overload: the controller's Sample covers 1 ms, the agent's (which
        // counted the received bytes) a full second. 1.25 GB in 1 s = 10 Gbit/s,
        // not 10 Tbit/s.
        let spec: EngineSpec = serde_json::from_value(serde_json::json!({
            "engine": "tcp", "mode": "stream", "streams": 1, "threads": 1, "len": 65536,
            "size": 64, "resp_size": 64, "depth": 1, "zerocopy": false, "skip_rx_copy": false,
            "reverse": false, "bidir": false, "cpus": [], "peer_cpus": []
        }))
        .expect("spec json");
        let local = sample("local", 4.679, 4.680, 0, 1_250_000_000, "sender");
        let peer = sample("peer", 3.7, 4.7, 1_250_000_000, 0, "receiver");
        let rows = interval_rows(&spec, Some(&local), Some(&peer));
        assert!(rows.contains("10.00 Gbit/s"), "{rows}");
    }

    fn with_extra(mut s: Sample, extra: serde_json::Value) -> Sample {
        s.engine.extra = Some(serde_json::from_value(extra).expect("engine interval json"));
        s
    }

    #[test]
    fn the_few_ms_that_end_a_test_show_no_cpu_share() {
        let spec: EngineSpec = serde_json::from_value(serde_json::json!({
            "engine": "tcp", "mode": "stream", "streams": 1, "threads": 1, "len": 65536,
            "size": 64, "resp_size": 64, "depth": 1, "zerocopy": false, "skip_rx_copy": false,
            "reverse": false, "bidir": false, "cpus": [], "peer_cpus": []
        }))
        .expect("spec json");
        let cpu = |n: u32| {
            serde_json::json!({"cpu": n, "user": 0.0, "nice": 0.0, "system": 0.0, "irq": 0.0,
                               "softirq": 0.0, "iowait": 0.0, "steal": 0.0, "idle": 100.0})
        };
        let cpus = serde_json::json!([cpu(0), cpu(1)]);
        let mut local = sample("local", 3.002, 3.005, 0, 4_000, "sender");
        local.cpus = serde_json::from_value(cpus.clone()).expect("cpus json");
        let row = interval_rows(&spec, Some(&local), None);
        assert!(!row.contains("0.0%"), "{row}");
        // A full interval shows them.
        let mut full = sample("local", 2.0, 3.0, 0, 4_000, "sender");
        full.cpus = serde_json::from_value(cpus).expect("cpus json");
        let row = interval_rows(&spec, Some(&full), None);
        assert!(row.contains("0.0% (cpu"), "{row}");
    }

    #[test]
    fn grpc_rows_say_latency_in_the_summarys_units_and_stream_rates_in_messages() {
        let grpc = |mode: &str| -> EngineSpec {
            serde_json::from_value(serde_json::json!({
                "engine": "grpc", "mode": mode, "channels": 1, "concurrency": 1,
                "size": 64, "resp_size": 64, "threads": 1, "peer_threads": 1,
                "cpus": [], "peer_cpus": []
            }))
            .expect("grpc spec json")
        };
        let mut local = sample("local", 1.0, 2.0, 0, 0, "sender");
        local.engine.latency = Some(crate::traffic::LatencySummary {
            count: 10,
            min: 100.0,
            mean: 150_000.0,
            p50: 177_340.4,
            p90: 180_000.0,
            p99: 190_000.0,
            p999: 190_000.0,
            max: 190_000.0,
        });
        let unary = interval_rows(&grpc("unary"), Some(&local), None);
        assert!(
            unary.contains("177.34 ms") && unary.contains("190.00 ms"),
            "{unary}"
        );
        assert!(!unary.contains(" us"), "{unary}");
        assert!(unary.contains("RPC/s"), "{unary}");
        let stream = interval_rows(&grpc("stream"), Some(&local), None);
        assert!(
            stream.contains("msg/s") && !stream.contains("RPC/s"),
            "{stream}"
        );
    }

    #[test]
    fn a_sink_row_spans_what_its_rates_cover_and_its_loss_columns_say_their_span() {
        // The last interval: the Sample spans 2.00-3.38 s, the sink's counts
        // last moved at 3.00 s, so its 924.87 kpps are over 1 s.
        let spec: EngineSpec = serde_json::from_value(serde_json::json!({
            "engine": "sink", "mode": "udp", "frame_size": 512, "queues": 1, "rate": 0
        }))
        .expect("sink spec json");
        let peer = with_extra(
            sample("peer", 2.0, 3.38, 0, 0, "receiver"),
            serde_json::json!({"engine": "sink", "iface": "veth-b", "figures": {
                "secs": 1.0, "mode": "udp", "counted": 924_870, "pps": 924_870.0,
                "l2_bps": 3.79e9, "l1_bps": 3.94e9, "duplicates": 0, "reordered": 0,
                "missing": 120, "missing_delta": 20, "drops": {"generator_errors": 0,
                "tx_dropped": 0, "rx_dropped": 0, "softnet_dropped": 0, "ring_full": 7,
                "xdp_no_socket": 0}, "queues": []}}),
        );
        let row = interval_rows(&spec, None, Some(&peer));
        assert!(row.contains("2.00-3.00"), "{row}");
        assert!(!row.contains("3.38"), "{row}");
        assert!(row.contains("924.87kpps"), "{row}");
        let head = interval_header(&spec);
        assert!(
            head.contains("Missing (run)") && head.contains("Dropped (ivl)"),
            "{head}"
        );
        // Columns line up: the missing count sits under its header.
        let col = head.find("Missing (run)").expect("missing column") + "Missing (run)".len();
        assert_eq!(&row[col - 3..col], "120", "{head}\n{row}");
    }

    fn summary(value: u64, mode: &str, grpc: bool) -> Summary {
        let mut v = serde_json::json!({
            "engine": if grpc { "grpc" } else { "tcp" }, "mode": mode,
            "sweep": {"param": "size", "value": value},
            "duration_s": 2.0, "bytes": value * 1000, "throughput_bps": (value * 4000) as f64,
            "messages": 1000, "rate_per_s": 500.0,
            "latency_us": {"count": 1000, "min": 10.0, "mean": 50.0, "p50": 40.0, "p90": 80.0,
                           "p99": 120.0, "p999": 200.0, "max": 300.0},
            "streams": [{"id": 0, "direction": mode, "bytes": value * 1000, "sent_bytes": value * 1000, "retransmits": 0}],
            "hosts": {"local": {"mean_busy": 50.0, "cpus": [], "intervals": 2},
                      "peer": {"mean_busy": 25.0, "cpus": [], "intervals": 2}},
            "peer_lost": false, "interrupted": false
        });
        if grpc {
            v["grpc"] = serde_json::json!({"rpcs_per_s": 500.0, "request_bytes_per_s": 1e6,
                                           "response_bytes_per_s": 2e6});
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_sweep_ends_with_one_row_per_point() {
        let t = sweep_table(&[summary(64, "unary", true), summary(4096, "unary", true)]);
        let rows: Vec<&str> = t.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(rows.len(), 4, "{t}");
        assert!(rows[0].contains("sweep of size"), "{t}");
        assert!(
            rows[2].trim_start().starts_with("64 B") && rows[3].contains("4.00 KiB"),
            "{t}"
        );
        assert!(
            rows[2].contains("1.0") && rows[2].contains("2.0"),
            "request and response MB/s: {t}"
        );
        assert!(
            rows[2].contains("40.0 us") && rows[2].contains("50%") && rows[2].contains("25%"),
            "{t}"
        );
        // One point is no sweep.
        assert_eq!(sweep_table(&[summary(64, "rr", false)]), "");
    }

    #[test]
    fn a_cores_sweep_heading_names_the_cpu_set() {
        let v = |value, cpus: Option<&str>| crate::session::plan::SweepValue {
            param: if cpus.is_some() { "cores" } else { "frame" }.into(),
            value,
            cpus: cpus.map(String::from),
        };
        assert_eq!(sweep_heading(&v(1, Some("0"))), "== sweep cores = 0 ==");
        assert_eq!(sweep_heading(&v(1, Some("1"))), "== sweep cores = 1 ==");
        assert_eq!(sweep_heading(&v(2, Some("0-1"))), "== sweep cores = 0-1 ==");
        assert_eq!(sweep_heading(&v(512, None)), "== sweep frame = 512 ==");
    }
}

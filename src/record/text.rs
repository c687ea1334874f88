//! The human-readable table `wirescope run` prints without `--json`:
//! iperf3's columns plus the busiest core of each host.

use super::schema::{HostCpu, Summary};
use crate::probe::sample::Sample;
use crate::traffic::{ConnRole, EngineSpec, Side, TcpMode};
use crate::units::{BitsPerSec, Bytes, Nanos};
use std::fmt::Write;

/// Column header for interval rows.
pub fn interval_header(spec: &EngineSpec) -> String {
    match spec.mode {
        TcpMode::Stream => format!(
            "{:<5} {:>13}  {:>11}  {:>14}  {:>5}  {:>9}  {:>8}  | {:<20} | {:<20}",
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
        _ => format!(
            "{:<5} {:>13}  {:>13}  {:>14}  {:>10}  {:>10}  | {:<20} | {:<20}",
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

fn cpu_cell(s: Option<&Sample>) -> String {
    match s.and_then(|s| s.busiest_cpu().map(|b| (s.mean_busy(), b))) {
        Some((mean, b)) => format!("{mean:5.1}% ({} {:5.1}%)", b.cpu, b.busy().0),
        None => "-".into(),
    }
}

/// Received bytes per connection for one interval: the receiving host's count
/// when its Sample arrived, else the sender's.
fn conn_bytes(spec: &EngineSpec, local: Option<&Sample>, peer: Option<&Sample>, i: usize) -> u64 {
    let roles = spec.conn_roles(Side::Controller);
    let get = |s: Option<&Sample>, rx: bool| {
        s.and_then(|s| s.conns.get(i))
            .map(|c| if rx { c.rx_bytes } else { c.tx_bytes })
    };
    match roles.get(i) {
        Some(ConnRole::Sender) => get(peer, true).or(get(local, false)).unwrap_or(0),
        Some(ConnRole::Receiver) => get(local, true).or(get(peer, false)).unwrap_or(0),
        _ => get(local, true).unwrap_or(0),
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
    let n = spec.connection_count();
    match spec.mode {
        TcpMode::Stream => {
            let roles = spec.conn_roles(Side::Controller);
            let mut total = 0;
            let mut retr_total = 0;
            for (i, role) in roles.iter().enumerate() {
                let b = conn_bytes(spec, local, peer, i);
                total += b;
                let sender = if *role == ConnRole::Sender {
                    local
                } else {
                    peer
                };
                let c = sender.and_then(|s| s.conns.get(i));
                let retr = c.map(|c| c.retransmits).unwrap_or(0);
                retr_total += retr;
                if n > 1 && n <= 16 {
                    let (cwnd, rtt) = match c.and_then(|c| c.tcp) {
                        Some(t) => (
                            Bytes(u64::from(t.snd_cwnd) * u64::from(t.snd_mss)).to_string(),
                            format!("{} us", t.rtt_us),
                        ),
                        None => ("-".into(), "-".into()),
                    };
                    let _ = writeln!(
                        out,
                        "[{i:>3}] {span}  {:>11}  {:>14}  {retr:>5}  {cwnd:>9}  {rtt:>8}{omit}",
                        Bytes(b).to_string(),
                        BitsPerSec::from_bytes(b, secs).to_string()
                    );
                }
            }
            let (cwnd, rtt) = if n == 1 {
                let sender = if roles[0] == ConnRole::Sender {
                    local
                } else {
                    peer
                };
                match sender.and_then(|s| s.conns.first()).and_then(|c| c.tcp) {
                    Some(t) => (
                        Bytes(u64::from(t.snd_cwnd) * u64::from(t.snd_mss)).to_string(),
                        format!("{} us", t.rtt_us),
                    ),
                    None => ("-".into(), "-".into()),
                }
            } else {
                (String::new(), String::new())
            };
            let _ = writeln!(
                out,
                "[SUM] {span}  {:>11}  {:>14}  {retr_total:>5}  {cwnd:>9}  {rtt:>8}  | {:<20} | {:<20}{omit}",
                Bytes(total).to_string(),
                BitsPerSec::from_bytes(total, secs).to_string(),
                cpu_cell(local),
                cpu_cell(peer)
            );
        }
        _ => {
            let l = local.map(|s| &s.engine);
            let total: u64 = (0..n).map(|i| conn_bytes(spec, local, peer, i)).sum();
            let rate = l.map(|e| e.msgs_per_s).unwrap_or(0.0);
            let unit = if spec.mode == TcpMode::Rr {
                "trans/s"
            } else {
                "msg/s"
            };
            let (p50, p99) = match l.and_then(|e| e.latency) {
                Some(q) => (format!("{:.1} us", q.p50), format!("{:.1} us", q.p99)),
                None => ("-".into(), "-".into()),
            };
            let _ = writeln!(
                out,
                "[SUM] {span}  {:>13}  {:>14}  {p50:>10}  {p99:>10}  | {:<20} | {:<20}{omit}",
                format!("{} {unit}", si(rate)),
                BitsPerSec::from_bytes(total, secs).to_string(),
                cpu_cell(local),
                cpu_cell(peer)
            );
        }
    }
    out
}

fn si(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.2}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

fn cpu_line(name: &str, h: &HostCpu) -> String {
    let mut s = format!(
        "CPU {name}: mean {:.1}% busy over {} interval(s)",
        h.mean_busy, h.intervals
    );
    for c in &h.cpus {
        let _ = write!(
            s,
            " | cpu{} {:.1}% (usr {:.1} sys {:.1} irq {:.1} si {:.1})",
            c.cpu, c.busy, c.user, c.system, c.irq, c.softirq
        );
    }
    s
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
    let _ = writeln!(
        out,
        "[SUM] 0.00-{:.2} s  {:>11}  {:>14}  retr {retr}  (bytes counted by the receiver)",
        s.duration_s,
        Bytes(s.bytes).to_string(),
        BitsPerSec(s.throughput_bps).to_string()
    );
    if s.messages > 0 {
        let _ = write!(out, "{} messages, {}/s", s.messages, si(s.rate_per_s));
        if let Some(m) = s.mib_per_s {
            let _ = write!(out, ", {m:.1} MiB/s");
        }
        out.push('\n');
    }
    if let Some(l) = s.latency_us {
        let ns = |us: f64| Nanos((us * 1000.0) as u64);
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
    let _ = writeln!(out, "{}", cpu_line("peer ", &s.hosts.peer));
    if s.interrupted {
        out.push_str("interrupted by the user\n");
    }
    if let Some(e) = &s.error {
        let _ = writeln!(out, "error: {e}");
    }
    out
}

//! TCP rules: tcp.buffer-limited (TCP_INFO limited time and buffer maxima against
//! bandwidth × RTT) and tcp.retransmits (nstat RetransSegs / OutSegs).

use super::HostCtx;
use crate::diagnose::finding::{Finding, Severity};
use crate::diagnose::impact::prior;
use crate::diagnose::thresholds::Thresholds;
use crate::diagnose::util::{pow2_at_least, secs, speed_mbps, sysctl_max, sysctl_min_default};
use crate::probe::facts::HostFacts;
use crate::probe::sample::{HostRole, Sample};
use crate::probe::tcpinfo::TcpInfo;
use crate::traffic::ConnRole;
use std::collections::BTreeMap;

/// Buffers below this (B) are small whatever the BDP: 4 MiB, the kernel's default tcp_wmem max.
const SMALL_BUFFER: u64 = 4 << 20;
/// The buffer size a fix proposes at least: 64 MiB (ESnet's value for 100 Gb/s hosts).
const FIX_BUFFER: u64 = 64 << 20;

/// Live TCP rules of one host.
pub fn window_rules(ctx: &HostCtx, t: &Thresholds) -> Vec<Finding> {
    let mut out = buffer_limited(ctx, t);
    out.extend(retransmits(ctx, t));
    out
}

/// What the sender's TCP_INFO says over the window.
#[derive(Debug, Default)]
struct SendStats {
    conns: usize,
    rtt_us: f64,
    rate_bps: f64,
    rwnd_frac: f64,
    sndbuf_frac: f64,
    /// Whether the kernel reported the limited times (tcpi_busy_time and
    /// tcpi_rwnd_limited / tcpi_sndbuf_limited, Linux ≥ 4.10).
    rwnd_known: bool,
    sndbuf_known: bool,
    /// Mean sender MSS (B).
    mss: f64,
    worst_conn: usize,
}

fn frac(
    first: &TcpInfo,
    last: &TcpInfo,
    f: fn(&TcpInfo) -> Option<u64>,
    single: bool,
) -> Option<f64> {
    let (b0, b1) = (first.busy_us?, last.busy_us?);
    let (l0, l1) = (f(first)?, f(last)?);
    let (busy, lim) = if single || b1 <= b0 {
        (b1, l1)
    } else {
        (b1 - b0, l1.saturating_sub(l0))
    };
    (busy > 0).then(|| lim as f64 / busy as f64)
}

/// The senders' TCP_INFO over the window: connections in the `Sender`
/// role, or with `any_role` every connection that sent data (rr,
/// pingpong and gRPC connections are clients and servers).
fn send_stats(active: &[&Sample], any_role: bool) -> Option<SendStats> {
    let mut per: BTreeMap<usize, Vec<(&TcpInfo, u64, f64)>> = BTreeMap::new();
    for s in active {
        let sends = |c: &&crate::probe::sample::ConnSample| {
            c.role == ConnRole::Sender || (any_role && c.tx_bytes > 0)
        };
        for c in s.conns.iter().filter(sends) {
            if let Some(ti) = &c.tcp {
                per.entry(c.id).or_default().push((ti, c.tx_bytes, secs(s)));
            }
        }
    }
    if per.is_empty() {
        return None;
    }
    let mut st = SendStats {
        conns: per.len(),
        ..Default::default()
    };
    let mut rtts = Vec::new();
    let mut mss = Vec::new();
    for (id, v) in &per {
        mss.extend(v.iter().map(|x| f64::from(x.0.snd_mss)));
        let (first, last) = (v[0].0, v[v.len() - 1].0);
        let single = v.len() == 1;
        rtts.extend(v.iter().map(|x| x.0.rtt_us as f64));
        let bytes: u64 = v.iter().map(|x| x.1).sum();
        let time: f64 = v.iter().map(|x| x.2).sum::<f64>().max(1e-9);
        st.rate_bps = st.rate_bps.max(bytes as f64 * 8.0 / time);
        let r = frac(first, last, |t| t.rwnd_limited_us, single);
        let b = frac(first, last, |t| t.sndbuf_limited_us, single);
        st.rwnd_known |= r.is_some();
        st.sndbuf_known |= b.is_some();
        let (r, b) = (r.unwrap_or(0.0), b.unwrap_or(0.0));
        if r.max(b) > st.rwnd_frac.max(st.sndbuf_frac) {
            st.worst_conn = *id;
        }
        st.rwnd_frac = st.rwnd_frac.max(r);
        st.sndbuf_frac = st.sndbuf_frac.max(b);
    }
    st.rtt_us = rtts.iter().sum::<f64>() / rtts.len().max(1) as f64;
    st.mss = mss.iter().sum::<f64>() / mss.len().max(1) as f64;
    Some(st)
}

/// The sysctls of a direction's buffers: tcp_[rw]mem and core [rw]mem_max.
fn buffer_sysctls(recv: bool) -> (&'static str, &'static str) {
    if recv {
        ("net.ipv4.tcp_rmem", "net.core.rmem_max")
    } else {
        ("net.ipv4.tcp_wmem", "net.core.wmem_max")
    }
}

/// Buffer cap (B) of a host for one direction: tcp_[rw]mem max, or 2 × min(SO_*BUF, core max).
fn cap(facts: &HostFacts, recv: bool, window: Option<u64>) -> Option<(u64, String)> {
    let (tcp, core) = buffer_sysctls(recv);
    match window {
        Some(w) => {
            let core_max = sysctl_max(facts, core).unwrap_or(w);
            Some((
                2 * w.min(core_max),
                format!(
                    "SO_{}BUF (--window) capped by {core}",
                    if recv { "RCV" } else { "SND" }
                ),
            ))
        }
        None => sysctl_max(facts, tcp).map(|m| (m, format!("{tcp} max"))),
    }
}

fn buffer_fix(f: Finding, facts: &HostFacts, recv: bool, want: u64, window: bool) -> Finding {
    let (tcp, core) = buffer_sysctls(recv);
    // With --window the test set SO_SNDBUF/SO_RCVBUF itself: that switches
    // off autotuning, so tcp_[rw]mem does not apply and the option is the
    // fix (the core maximum still caps what it asks for).
    if window {
        return f
            .fix(format!(
                "wirescope run --window {}  # or drop --window to let the kernel autotune",
                want / 2
            ))
            .fix(format!("sysctl -w {core}={want}"));
    }
    let (min, def) = sysctl_min_default(facts, tcp);
    f.fix(format!("sysctl -w {tcp}=\"{min} {def} {want}\""))
        .fix(format!("sysctl -w {core}={want}"))
}

/// tcp.buffer-limited, for the receive side (other host) and the send side (this host).
fn buffer_limited(ctx: &HostCtx, t: &Thresholds) -> Vec<Finding> {
    let Some(st) = send_stats(&ctx.active, false) else {
        return Vec::new();
    };
    let link_bps = ctx
        .facts
        .and_then(|f| f.nics.first())
        .and_then(speed_mbps)
        .map(|m| m as f64 * 1e6)
        .unwrap_or(0.0);
    let per_conn = st.rate_bps.max(link_bps / st.conns.max(1) as f64);
    let bdp = per_conn / 8.0 * st.rtt_us / 1e6;
    let window = ctx
        .spec
        .and_then(|s| s.as_tcp())
        .and_then(|t| t.window)
        .map(|w| w.0);
    let want = pow2_at_least(2.0 * bdp).max(FIX_BUFFER);
    let mut out = Vec::new();
    let other = match ctx.host {
        HostRole::Local => HostRole::Peer,
        HostRole::Peer => HostRole::Local,
    };
    for (recv, facts, host, limited, known) in [
        (true, ctx.other_facts, other, st.rwnd_frac, st.rwnd_known),
        (false, ctx.facts, ctx.host, st.sndbuf_frac, st.sndbuf_known),
    ] {
        let Some(facts) = facts else { continue };
        let Some((cap, what)) = cap(facts, recv, window) else {
            continue;
        };
        let capf = cap as f64;
        let kind = if recv { "receive" } else { "send" };
        let lim_name = if recv {
            "rwnd_limited"
        } else {
            "sndbuf_limited"
        };
        // The kernel's limited-time counters decide when it has them: a cap
        // below bandwidth × RTT that never held a connection back is worth
        // knowing (info), not what limited the test. Without them (kernels
        // before 4.10) the cap against bandwidth × RTT is all there is.
        let said = limited >= t.limited_share && (capf < 2.0 * bdp || cap < SMALL_BUFFER);
        let (sev, title) = if said || (!known && capf < bdp) {
            (
                Severity::Warn,
                format!(
                    "TCP {kind} buffer cap {} KiB vs bandwidth × RTT {} KiB; {lim_name} {:.0} % of the time",
                    cap / 1024,
                    (bdp / 1024.0).round(),
                    limited * 100.0
                ),
            )
        } else if known && capf < bdp {
            (
                Severity::Info,
                format!(
                    "TCP {kind} buffer cap {} KiB is below bandwidth × RTT {} KiB, but the kernel saw the connections {lim_name} only {:.0} % of the time: not what limited this test",
                    cap / 1024,
                    (bdp / 1024.0).round(),
                    limited * 100.0
                ),
            )
        } else {
            continue;
        };
        let impact = if sev == Severity::Warn {
            limited.max(if capf < bdp { 1.0 - capf / bdp } else { 0.0 })
        } else {
            limited
        };
        let f = Finding::new(
            "tcp.buffer-limited",
            sev,
            host,
            kind,
            title,
            impact * prior("tcp.buffer-limited") / 0.6,
        )
        .num(what, capf, "B", if recv { "sysctl (receiver)" } else { "sysctl (sender)" })
        .num("bandwidth × RTT per connection", bdp, "B", "TCP_INFO rtt × max(rate, link speed / streams)")
        .num("srtt (mean)", st.rtt_us, "us", "TCP_INFO rtt (sender)")
        .num("rate per connection", st.rate_bps, "b/s", "engine counters")
        .num(format!("{lim_name} share of busy time (conn {})", st.worst_conn), limited * 100.0, "%", "TCP_INFO tcpi_rwnd_limited / tcpi_busy_time")
        .why(if recv {
            "The receiver cannot advertise a window larger than its buffer: a connection carries at most window / RTT."
        } else {
            "The sender cannot keep more unacknowledged data than its send buffer: a connection carries at most sndbuf / RTT."
        });
        out.push(buffer_fix(f, facts, recv, want, window.is_some()));
    }
    out
}

/// tcp.retransmits: retransmitted segments > 0.1 % of sent; when most of
/// them were duplicates the receiver already had (D-SACK), an info only.
fn retransmits(ctx: &HostCtx, t: &Thresholds) -> Option<Finding> {
    let (retr, out, source) = sent_and_retransmitted(ctx);
    if out == 0 || retr < t.retrans_min_segs {
        return None;
    }
    let ratio = retr as f64 / out as f64;
    if ratio <= t.retrans_ratio {
        return None;
    }
    // Retransmits the receiver reported it already had (D-SACK) lost
    // nothing: tail-loss probes and early timeouts while ACKs were late
    // (a busy receiver, request/response traffic).
    let spurious = nstat_sum(ctx, "TcpExt.TCPDSACKRecvSegs")
        .max(nstat_sum(ctx, "TcpExt.TCPDSACKRecv"))
        .min(retr);
    let lost = retr - spurious;
    if lost < t.retrans_min_segs || lost as f64 / out as f64 <= t.retrans_ratio {
        return Some(late_acks(ctx, (retr, out, source), spurious, ratio));
    }
    Some(lost_segments(ctx, t, lost, out, source))
}

/// Retransmitted and sent segments over the active window, and where they
/// were read: nstat when the host has it, else the engine's own
/// connections (TCP_INFO retransmits, bytes / MSS).
fn sent_and_retransmitted(ctx: &HostCtx) -> (u64, u64, &'static str) {
    if ctx
        .active
        .iter()
        .any(|s| s.nstat.contains_key("Tcp.OutSegs"))
    {
        (
            nstat_sum(ctx, "Tcp.RetransSegs"),
            nstat_sum(ctx, "Tcp.OutSegs"),
            "nstat Tcp.RetransSegs / Tcp.OutSegs",
        )
    } else {
        let mut r = 0u64;
        let mut o = 0u64;
        for s in &ctx.active {
            for c in s.conns.iter().filter(|c| c.role == ConnRole::Sender) {
                r += c.retransmits as u64;
                let mss = c.tcp.as_ref().map(|x| x.snd_mss).unwrap_or(1448).max(1) as u64;
                o += c.tx_bytes / mss;
            }
        }
        (r, o, "TCP_INFO retransmits / (bytes / MSS)")
    }
}

/// The info for retransmits that mostly arrived twice (D-SACK): ACKs came
/// late, little or nothing was lost.
fn late_acks(
    ctx: &HostCtx,
    (retr, out, source): (u64, u64, &'static str),
    spurious: u64,
    ratio: f64,
) -> Finding {
    let lost = retr - spurious;
    Finding::new(
        "tcp.retransmits",
        Severity::Info,
        ctx.host,
        "",
        if lost == 0 {
            format!(
                "{:.2} % of sent segments were retransmitted ({retr} of {out}), but the receiver already had {spurious} of them (D-SACK): ACKs came late, nothing was lost",
                ratio * 100.0
            )
        } else {
            format!(
                "{:.2} % of sent segments were retransmitted ({retr} of {out}), but the receiver already had {spurious} of them (D-SACK): ACKs came late; {lost} were lost, below the threshold",
                ratio * 100.0
            )
        },
        ratio.min(1.0) * prior("tcp.retransmits") * 0.25,
    )
    .num("retransmitted segments", retr as f64, "", source)
    .num("sent segments", out as f64, "", source)
    .num("of them reported duplicate by the receiver", spurious as f64, "", "nstat TcpExt.TCPDSACKRecvSegs")
    .num("of them lost", lost as f64, "", "retransmitted - D-SACKed")
    .num("tail-loss probes", nstat_sum(ctx, "TcpExt.TCPLossProbes") as f64, "", "nstat TcpExt.TCPLossProbes")
    .why("A sender that waits too long for an ACK sends the last segment again (a tail-loss probe) or times out; when the receiver reports it as a duplicate, the original arrived: the delay is in the receiver's processing, not in the network.")
}

/// The finding for `retr` segments really lost of `out` sent: a warning when
/// that loss rate can bound a connection at the measured RTT, an info when
/// a local shaper drops them or the connections ran far below the bound.
fn lost_segments(
    ctx: &HostCtx,
    t: &Thresholds,
    retr: u64,
    out: u64,
    source: &'static str,
) -> Finding {
    let ratio = retr as f64 / out as f64;
    // What that loss rate allows one connection at the measured RTT
    // (Mathis et al.: MSS / RTT × sqrt(3/2) / sqrt(p)). A connection that
    // ran far below it was held back by something else: the retransmits
    // are worth knowing, not the limit (a short RTT tolerates much loss).
    let bound = send_stats(&ctx.active, true)
        .filter(|st| st.rtt_us > 0.0 && st.mss > 0.0)
        .map(|st| {
            let bps = st.mss * 8.0 / (st.rtt_us / 1e6) * (1.5f64).sqrt() / ratio.sqrt();
            (bps, st.rate_bps)
        });
    // A shaper on this host's own interface drops what exceeds its rate
    // at the sender: those drops are the shaper at work (qdisc.shaping
    // names it), not a lossy path.
    let shaper = ctx.facts.and_then(|f| {
        f.nics
            .iter()
            .find_map(|n| super::platform::shaper(n).map(|q| (n.name.as_str(), q)))
    });
    let limiting =
        shaper.is_none() && bound.is_none_or(|(bps, rate)| rate >= t.loss_bound_share * bps);
    let (sev, title) = loss_title(retr, out, ratio, shaper, limiting, bound);
    let mut f = Finding::new(
        "tcp.retransmits",
        sev,
        ctx.host,
        "",
        title,
        (ratio * 100.0).min(1.0) * prior("tcp.retransmits") * if limiting { 2.0 } else { 0.5 },
    )
    .num("retransmitted segments", retr as f64, "", source)
    .num("sent segments", out as f64, "", source)
    .num("retransmit ratio", ratio * 100.0, "%", source);
    if let Some((iface, q)) = shaper {
        f = f.text(
            format!("root qdisc of {iface}"),
            q,
            format!("tc qdisc show dev {iface}"),
        );
    }
    if let Some((bps, rate)) = bound {
        f = f
            .num(
                "loss-bound rate per connection",
                bps,
                "b/s",
                "MSS / srtt × sqrt(3/2) / sqrt(ratio) (TCP_INFO, Mathis et al.)",
            )
            .num("rate per connection", rate, "b/s", "engine counters");
    }
    let mut f = f
    .why("Every loss halves (cubic) or re-probes (bbr) the congestion window: losses cap throughput well below the link.")
    .fix("nstat -az | grep -iE 'retrans|lost|drop|prune|collapse'");
    for nic in ctx.facts.map(|f| f.nics.as_slice()).unwrap_or(&[]) {
        f = f
            .fix(format!(
                "ethtool -S {} | grep -iE 'drop|discard|pause|out_of_buffer|err'",
                nic.name
            ))
            .fix(format!("tc -s qdisc show dev {}", nic.name));
    }
    f
}

/// The severity and title of a loss finding: a local shaper's drops, a
/// loss rate that bounds the connections, or one they ran far below.
fn loss_title(
    retr: u64,
    out: u64,
    ratio: f64,
    shaper: Option<(&str, &str)>,
    limiting: bool,
    bound: Option<(f64, f64)>,
) -> (Severity, String) {
    if let Some((iface, q)) = shaper {
        (
            Severity::Info,
            format!(
                "{:.2} % of sent segments were retransmitted ({retr} of {out}): the {q} shaper on {iface} drops what exceeds its rate (see qdisc.shaping)",
                ratio * 100.0
            ),
        )
    } else if limiting {
        (
            Severity::Warn,
            format!(
                "{:.2} % of sent segments were retransmitted ({retr} of {out})",
                ratio * 100.0
            ),
        )
    } else {
        let (bps, rate) = bound.unwrap_or_default();
        (
            Severity::Info,
            format!(
                "{:.2} % of sent segments were retransmitted ({retr} of {out}); at this RTT that loss allows {} per connection and they ran at {}: not what limited this test",
                ratio * 100.0,
                crate::units::BitsPerSec(bps),
                crate::units::BitsPerSec(rate)
            ),
        )
    }
}

/// A nstat counter summed over the active window.
fn nstat_sum(ctx: &HostCtx, k: &str) -> u64 {
    ctx.active
        .iter()
        .filter_map(|s| s.nstat.get(k))
        .sum::<u64>()
}

/// Check-only: buffer maxima below a fast link's BDP at the assumed RTT (info).
pub fn check_rules(facts: &HostFacts, host: HostRole, t: &Thresholds) -> Vec<Finding> {
    let Some(speed) = facts.nics.iter().filter_map(speed_mbps).max() else {
        return Vec::new();
    };
    if speed < t.fast_link_mbps {
        return Vec::new();
    }
    let bdp = speed as f64 * 1e6 / 8.0 * t.assumed_rtt_us / 1e6;
    let want = pow2_at_least(2.0 * bdp).max(FIX_BUFFER);
    let mut out = Vec::new();
    for recv in [true, false] {
        let Some((cap, what)) = cap(facts, recv, None) else {
            continue;
        };
        if cap as f64 >= bdp {
            continue;
        }
        let kind = if recv { "receive" } else { "send" };
        let f = Finding::new(
            "tcp.buffer-limited",
            Severity::Info,
            host,
            kind,
            format!(
                "TCP {kind} buffer max {} KiB is below the BDP of a {} Gb/s link at {:.0} ms RTT ({} KiB)",
                cap / 1024,
                speed / 1000,
                t.assumed_rtt_us / 1000.0,
                (bdp / 1024.0).round()
            ),
            0.2,
        )
        .num(what, cap as f64, "B", "sysctl")
        .num("link speed", speed as f64, "Mb/s", "ethtool")
        .num("assumed RTT", t.assumed_rtt_us, "us", "Thresholds::assumed_rtt_us")
        .why("A single connection carries at most buffer / RTT; measure the RTT with a test to know whether this limits you.");
        out.push(buffer_fix(f, facts, recv, want, false));
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::diagnose::{diagnose, Input, Severity, TestContext, Window};
    use crate::probe::facts::HostFacts;
    use crate::probe::sample::{HostRole, Sample};
    use crate::traffic::EngineSpec;
    use serde_json::json;

    /// Four 1-s intervals of one 175 Mb/s sender connection at a 1 ms RTT
    /// that was receive-window limited 70 % of the time (what `--window 8K`
    /// recorded on the namespace pair: "cap 16 KiB, rwnd_limited 67 %").
    fn sender_window() -> Vec<Sample> {
        (0..4u64)
            .map(|i| {
                serde_json::from_value(json!({
                    "host": "local", "index": i, "start_s": i as f64, "end_s": i as f64 + 1.0,
                    "omitted": false,
                    "engine": {"tx_bytes": 22_000_000u64, "rx_bytes": 0, "tx_bps": 1.76e8,
                               "rx_bps": 0.0, "messages": 0, "msgs_per_s": 0.0},
                    "cpus": [], "softirqs": [], "softnet": [], "ifaces": [], "nstat": {},
                    "conns": [{"id": 0, "role": "sender", "tx_bytes": 22_000_000u64, "rx_bytes": 0,
                               "retransmits": 0, "tcp": {"rtt_us": 1000, "rttvar_us": 10,
                               "min_rtt_us": 20, "snd_cwnd": 100, "snd_mss": 1448, "total_retrans": 0,
                               "rcv_space": 14480, "delivery_rate_bps": 176_000_000u64,
                               "notsent_bytes": 0, "busy_us": 1_000_000 * (i + 1),
                               "rwnd_limited_us": 700_000 * (i + 1), "sndbuf_limited_us": 0,
                               "snd_wnd": 8192}}]
                }))
                .expect("sample json")
            })
            .collect()
    }

    fn receiver() -> HostFacts {
        HostFacts {
            sysctls: [
                ("net.ipv4.tcp_rmem", "4096 16384 32768"),
                ("net.core.rmem_max", "4194304"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            ..Default::default()
        }
    }

    fn spec(window: Option<u64>) -> EngineSpec {
        serde_json::from_value(
            json!({"engine":"tcp","mode":"stream","streams":1,"threads":0,
            "len":131072,"size":16384,"resp_size":16384,"depth":1,"window":window,"mss":null,
            "congestion":null,"zerocopy":false,"skip_rx_copy":false,"reverse":false,"bidir":false,
            "cpus":[],"peer_cpus":[],"bytes":null}),
        )
        .expect("spec json")
    }

    fn fixes(window: Option<u64>) -> Vec<String> {
        let (local, lf, pf, spec) = (
            sender_window(),
            HostFacts::default(),
            receiver(),
            spec(window),
        );
        let f = diagnose(&Input {
            local: Window {
                samples: &local,
                facts: Some(&lf),
            },
            peer: Window {
                samples: &[],
                facts: Some(&pf),
            },
            test: TestContext { spec: Some(&spec) },
        });
        let b = f
            .iter()
            .find(|x| x.id == "tcp.buffer-limited" && x.host == HostRole::Peer)
            .unwrap_or_else(|| panic!("no receive-side tcp.buffer-limited: {f:#?}"));
        assert_eq!(b.severity, Severity::Warn, "{b:#?}");
        b.fix.clone()
    }

    /// The sender's window with 0.5 % of its segments retransmitted.
    fn lossy_sender() -> Vec<Sample> {
        let mut w = sender_window();
        for s in &mut w {
            s.nstat.insert("Tcp.OutSegs".into(), 1_000_000);
            s.nstat.insert("Tcp.RetransSegs".into(), 5_000);
        }
        w
    }

    fn retransmits(sender: HostFacts) -> crate::diagnose::Finding {
        let (local, spec) = (lossy_sender(), spec(None));
        let f = diagnose(&Input {
            local: Window {
                samples: &local,
                facts: Some(&sender),
            },
            peer: Window::default(),
            test: TestContext { spec: Some(&spec) },
        });
        f.into_iter()
            .find(|x| x.id == "tcp.retransmits")
            .expect("tcp.retransmits")
    }

    #[test]
    fn drops_of_the_senders_own_shaper_are_not_a_lossy_path() {
        let nic = |qdisc: &str| HostFacts {
            nics: vec![crate::probe::facts::NicFacts {
                name: "veth-b".into(),
                qdisc: Some(qdisc.into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        // 0.5 % lost at 1 ms: the loss allows ~20 Mb/s and the connection
        // ran at 176 Mb/s against it.
        assert_eq!(retransmits(nic("noqueue")).severity, Severity::Warn);
        // The same loss where the sender's own tbf dropped what exceeded
        // its rate (a gRPC test shaped to 20 Mbit/s ranked this first).
        let f = retransmits(nic("tbf"));
        assert_eq!(f.severity, Severity::Info, "{f:#?}");
        assert!(f.title.contains("tbf shaper on veth-b"), "{}", f.title);
    }

    #[test]
    fn a_window_the_test_set_is_fixed_by_the_option_not_tcp_rmem() {
        // --window 8K: SO_RCVBUF switches autotuning off; tcp_rmem does not
        // apply, so the first fix (the one `limited_by` quotes) is the option.
        let f = fixes(Some(8192));
        assert!(f[0].starts_with("wirescope run --window "), "{f:?}");
        assert!(f.iter().all(|x| !x.contains("tcp_rmem")), "{f:?}");
        assert!(f.iter().any(|x| x.contains("net.core.rmem_max")), "{f:?}");
        // Autotuned: the receiver's tcp_rmem maximum (32 KiB) is the cap and the fix.
        let f = fixes(None);
        assert!(f[0].starts_with("sysctl -w net.ipv4.tcp_rmem="), "{f:?}");
        assert!(f.iter().all(|x| !x.contains("--window")), "{f:?}");
    }
}

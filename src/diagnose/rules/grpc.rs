//! gRPC rules: grpc.connection-bound, grpc.flow-control-limited, grpc.errors.
//!
//! Pure functions of a [`GrpcWindow`]: the client's interval figures over the
//! window plus the few host numbers each rule compares them with (per-core
//! busy %, the data connections' RTT, the HTTP/2 windows in force).
//! [`window`] builds it from the client host's Samples of a gRPC test
//! (the controller runs the client), which [`crate::diagnose::diagnose`]
//! does for every window of a gRPC point.

use crate::diagnose::finding::{Finding, Severity};
use crate::diagnose::Thresholds;
use crate::probe::sample::{HostRole, Sample};
use crate::traffic::grpc::counters::GrpcInterval;
use crate::traffic::grpc::{GrpcSpec, Windows};
use crate::traffic::EngineInterval;
use std::collections::BTreeMap;

/// The gRPC rules' own numbers (documented in `assets/rules.md`).
#[derive(Debug, Clone, PartialEq)]
pub struct GrpcThresholds {
    /// grpc.connection-bound: the client's busiest core at or above this busy % ...
    pub grpc_core_saturated_pct: f64,
    /// ... while the other cores average below this.
    pub grpc_others_idle_pct: f64,
    /// grpc.connection-bound: about one HTTP/2 connection per this many busy cores.
    pub grpc_cores_per_connection: usize,
    /// grpc.flow-control-limited: rate per connection/stream × RTT at this share of its window.
    pub grpc_window_share: f64,
    /// grpc.errors: share of failed RPCs that makes it an error, not a warning.
    pub grpc_error_share: f64,
}

/// The shipped table.
pub const GRPC_THRESHOLDS: GrpcThresholds = GrpcThresholds {
    grpc_core_saturated_pct: 90.0,
    grpc_others_idle_pct: 50.0,
    grpc_cores_per_connection: 4,
    grpc_window_share: 0.8,
    grpc_error_share: 0.01,
};

/// gRPC's entry of the engines' rules (see `rules::engine_rules`): on a
/// gRPC test, the gRPC rules on the client's window (the controller runs
/// the client). Nothing on other tests.
pub fn test_rules(input: &crate::diagnose::Input, t: &Thresholds, out: &mut Vec<Finding>) {
    let Some(g) = input.test.spec.and_then(|s| s.as_grpc()) else {
        return;
    };
    if let Some(w) = window(g, input.local.samples) {
        out.extend(rules(&w, t, &GRPC_THRESHOLDS));
    }
}

/// The rules' window from the client's Samples (warm-up left out); None
/// while no interval carries gRPC figures.
pub fn window(spec: &GrpcSpec, samples: &[Sample]) -> Option<GrpcWindow> {
    let counted: Vec<&Sample> = samples.iter().filter(|s| !s.omitted).collect();
    let intervals: Vec<GrpcInterval> = counted
        .iter()
        .filter_map(|s| match &s.engine.extra {
            Some(EngineInterval::Grpc(g)) => Some(GrpcInterval {
                latency: s.engine.latency,
                ..g.clone()
            }),
            _ => None,
        })
        .collect();
    if intervals.is_empty() {
        return None;
    }
    let core_busy = crate::diagnose::util::mean_core_busy(counted.iter().copied());
    let core_kernel = crate::diagnose::util::mean_core_kernel(counted.iter().copied());
    let process_cpu = crate::diagnose::util::mean_process_cpu(counted.iter().copied());
    let rtt_us = crate::diagnose::util::mean(
        counted
            .iter()
            .flat_map(|s| s.conns.iter())
            .filter_map(|c| c.tcp.map(|t| f64::from(t.rtt_us))),
    );
    let recv = Windows::for_point(spec.channels as usize, spec.resp_size.as_usize());
    let server = spec.server_config();
    Some(GrpcWindow {
        host: HostRole::Local,
        channels: spec.channels,
        concurrency: spec.concurrency,
        intervals,
        core_busy,
        core_kernel,
        process_cpu,
        rtt_us,
        recv_stream_window: recv.stream,
        recv_conn_window: recv.connection,
        send_stream_window: crate::traffic::grpc::server::STREAM_WINDOW,
        send_conn_window: server.conn_window(),
    })
}

/// What the gRPC rules look at, for the host running the client.
#[derive(Debug, Clone, PartialEq)]
pub struct GrpcWindow {
    /// The host the figures are about (the client's).
    pub host: HostRole,
    /// HTTP/2 connections of the test.
    pub channels: u32,
    /// RPCs in flight in all.
    pub concurrency: u32,
    /// The client's figures, one per interval of the window (warm-up excluded).
    pub intervals: Vec<GrpcInterval>,
    /// Mean busy % of each core of the client's host over the window, by CPU number.
    pub core_busy: Vec<(u32, f64)>,
    /// Mean kernel % (system+irq+softirq) per core over the window.
    pub core_kernel: Vec<(u32, f64)>,
    /// Mean CPU of the client's process, % of one core, when its Samples say.
    pub process_cpu: Option<f64>,
    /// Mean smoothed RTT of the data connections (TCP_INFO), µs.
    pub rtt_us: Option<f64>,
    /// Receive windows the client advertised (bound what it can receive).
    pub recv_stream_window: u32,
    /// See `recv_stream_window`.
    pub recv_conn_window: u32,
    /// Receive windows the server advertised (bound what the client can send).
    pub send_stream_window: u32,
    /// See `send_stream_window`.
    pub send_conn_window: u32,
}

impl GrpcWindow {
    fn mean(&self, f: impl Fn(&GrpcInterval) -> f64) -> f64 {
        let secs: f64 = self.intervals.iter().map(|i| i.secs).sum();
        if secs <= 0.0 {
            return 0.0;
        }
        self.intervals.iter().map(|i| f(i) * i.secs).sum::<f64>() / secs
    }
}

/// All gRPC rules.
pub fn rules(w: &GrpcWindow, t: &Thresholds, g: &GrpcThresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(connection_bound(w, t, g));
    out.extend(flow_control_limited(w, g));
    out.extend(errors(w, g));
    out
}

/// One core saturated while the others idle, with fewer connections than cores:
/// each HTTP/2 connection's reads, writes and framing run on one thread at a time.
pub fn connection_bound(w: &GrpcWindow, t: &Thresholds, g: &GrpcThresholds) -> Option<Finding> {
    let cores = w.core_busy.len();
    if cores < 2 || w.intervals.is_empty() || w.channels as usize >= cores {
        return None;
    }
    // A client that used little CPU in all saturated no core: the busy
    // core is another process's.
    if w.process_cpu.is_some_and(|p| p < t.test_cpu_min_pct) {
        return None;
    }
    // The busiest core that runs some of the client's network path: one
    // saturated by user time alone is another process's.
    let kernel = |cpu: u32| w.core_kernel.iter().find(|c| c.0 == cpu).map(|c| c.1);
    let (top_cpu, top) = w
        .core_busy
        .iter()
        .copied()
        .filter(|c| kernel(c.0).is_none_or(|k| k >= t.kernel_path_min_pct))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let others = w
        .core_busy
        .iter()
        .filter(|c| c.0 != top_cpu)
        .map(|c| c.1)
        .sum::<f64>()
        / (cores - 1) as f64;
    let rps = w.mean(|i| i.rpcs_per_sec);
    if top < g.grpc_core_saturated_pct || others >= g.grpc_others_idle_pct || rps <= 0.0 {
        return None;
    }
    let suggest = (w.channels as usize * 2)
        .max(cores.div_ceil(g.grpc_cores_per_connection))
        .min(cores);
    let impact = ((top - others) / 100.0).clamp(0.0, 1.0);
    Some(
        Finding::new(
            "grpc.connection-bound",
            Severity::Warn,
            w.host,
            format!("{} channels", w.channels),
            format!(
                "{} RPCs in flight share {} HTTP/2 connection(s): cpu{top_cpu} is saturated while the other cores idle",
                w.concurrency, w.channels
            ),
            impact,
        )
        .num("HTTP/2 connections", f64::from(w.channels), "", "test spec --channels")
        .num("RPCs in flight", f64::from(w.concurrency), "", "test spec --concurrency")
        .num(format!("cpu{top_cpu} busy"), top, "%", "/proc/stat")
        .num("other cores' mean busy", others, "%", "/proc/stat")
        .num("RPCs", rps, "/s", "gRPC client counters")
        .why(format!(
            "A gRPC stack handles each HTTP/2 connection on one thread at a time (framing, HPACK, socket reads and writes), so more RPCs in flight on the same connections only queue on that core. Rule of thumb: about one connection per {} busy cores, and at least one per core that should work.",
            g.grpc_cores_per_connection
        ))
        .fix(format!("--channels {suggest}")),
    )
}

/// A connection or stream moves close to window / RTT: HTTP/2 flow control,
/// not the network or the CPU, sets the rate.
pub fn flow_control_limited(w: &GrpcWindow, g: &GrpcThresholds) -> Option<Finding> {
    let rtt_us = w.rtt_us.filter(|r| *r > 0.0)?;
    let rtt = rtt_us / 1e6;
    let channels = f64::from(w.channels.max(1));
    let streams = f64::from(w.concurrency.max(1));
    let dirs = [
        (
            "receive",
            w.mean(|i| i.rx_bytes_per_sec),
            w.recv_conn_window,
            w.recv_stream_window,
            "the client's",
        ),
        (
            "send",
            w.mean(|i| i.tx_bytes_per_sec),
            w.send_conn_window,
            w.send_stream_window,
            "the server's",
        ),
    ];
    let mut worst: Option<(f64, &str, f64, u32, &str, &str)> = None;
    for (dir, rate, conn_w, stream_w, whose) in dirs {
        for (level, per, window) in [
            ("connection", rate / channels, conn_w),
            ("stream", rate / streams, stream_w),
        ] {
            if window == 0 {
                continue;
            }
            let share = per * rtt / f64::from(window);
            if share >= g.grpc_window_share && worst.is_none_or(|x| share > x.0) {
                worst = Some((share, dir, per, window, level, whose));
            }
        }
    }
    let (share, dir, per, window, level, whose) = worst?;
    let needed = per * rtt;
    Some(
        Finding::new(
            "grpc.flow-control-limited",
            Severity::Warn,
            w.host,
            format!("{dir} {level} window"),
            format!(
                "each HTTP/2 {level} {dir}s {:.1} MB/s, {:.0}% of what its {} KiB window allows at {:.0} µs RTT",
                per / 1e6,
                share * 100.0,
                window / 1024,
                rtt_us
            ),
            (share - g.grpc_window_share).clamp(0.0, 1.0) * 5.0,
        )
        .num(format!("{level} window ({whose})"), f64::from(window), "B", "HTTP/2 SETTINGS / WINDOW_UPDATE in force")
        .num("RTT", rtt_us, "us", "TCP_INFO of the data connections")
        .num(format!("rate per {level}"), per, "B/s", "gRPC client counters")
        .num("rate x RTT", needed, "B", "computed")
        .why("HTTP/2 lets a sender have at most one window of unacknowledged data per stream and per connection; below rate x RTT the sender waits for WINDOW_UPDATEs every round trip, however idle the link and the CPUs are.".to_string())
        .fix(format!("--channels {} (each connection has its own window)", w.channels.saturating_mul(2)))
        .fix(format!("raise {whose} HTTP/2 window above {:.0} KiB (grpc-go: InitialWindowSize / InitialConnWindowSize; tonic: initial_stream_window_size / initial_connection_window_size)", (needed * 2.0 / 1024.0).ceil())),
    )
}

/// Non-OK statuses over the window, by code.
pub fn errors(w: &GrpcWindow, g: &GrpcThresholds) -> Option<Finding> {
    let mut by_code: BTreeMap<&str, u64> = BTreeMap::new();
    for i in &w.intervals {
        for (code, n) in &i.errors {
            *by_code.entry(code.as_str()).or_default() += n;
        }
    }
    let failed: u64 = by_code.values().sum();
    if failed == 0 {
        return None;
    }
    let ok: f64 = w.intervals.iter().map(|i| i.rpcs_per_sec * i.secs).sum();
    let share = failed as f64 / (failed as f64 + ok).max(1.0);
    let severity = if share >= g.grpc_error_share {
        Severity::Error
    } else {
        Severity::Warn
    };
    let codes: Vec<String> = by_code.iter().map(|(c, n)| format!("{c} x{n}")).collect();
    let mut f = Finding::new(
        "grpc.errors",
        severity,
        w.host,
        "",
        format!(
            "{failed} RPCs failed ({:.2}%): {}",
            share * 100.0,
            codes.join(", ")
        ),
        share.clamp(0.0, 1.0),
    )
    .num("RPCs completed OK", ok.round(), "", "gRPC client counters")
    .why("Failed RPCs are not in the RPC rate or the latency percentiles; the figures describe only the calls that succeeded.".to_string());
    for (code, n) in &by_code {
        f = f.num(
            format!("status {code}"),
            *n as f64,
            "",
            "grpc-status trailers",
        );
        if let Some(fix) = fix_for(code) {
            f = f.fix(fix);
        }
    }
    Some(f)
}

fn fix_for(code: &str) -> Option<&'static str> {
    Some(match code {
        "RESOURCE_EXHAUSTED" | "OUT_OF_RANGE" => {
            "lower --size / --resp-size below the server's max message size, or raise it on the server"
        }
        "UNAVAILABLE" => "the server closed connections or is overloaded: check its log, lower --concurrency",
        "DEADLINE_EXCEEDED" => "the server answers too slowly for the deadline: lower --concurrency or --size",
        "UNIMPLEMENTED" => "point the test at a grpc.testing.BenchmarkService server (or use --mode unary)",
        "CANCELLED" => "calls were cancelled, usually by a peer going away mid-test: check the other host",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::THRESHOLDS;

    fn interval(rps: f64, bytes: f64, errors: &[(&str, u64)]) -> GrpcInterval {
        GrpcInterval {
            secs: 1.0,
            rpcs_per_sec: rps,
            tx_bytes_per_sec: bytes,
            rx_bytes_per_sec: bytes,
            latency: None,
            errors: errors.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
            peak_rss: None,
        }
    }

    fn window(channels: u32, concurrency: u32, cores: &[f64]) -> GrpcWindow {
        GrpcWindow {
            host: HostRole::Local,
            channels,
            concurrency,
            intervals: vec![interval(90_000.0, 5.76e6, &[]); 3],
            core_busy: cores
                .iter()
                .enumerate()
                .map(|(i, b)| (i as u32, *b))
                .collect(),
            // Half of each core's busy time in the kernel (syscalls, softirq).
            core_kernel: cores
                .iter()
                .enumerate()
                .map(|(i, b)| (i as u32, *b / 2.0))
                .collect(),
            process_cpu: None,
            rtt_us: Some(50.0),
            recv_stream_window: 64 * 1024,
            recv_conn_window: 8 << 20,
            send_stream_window: 64 * 1024,
            send_conn_window: 16 << 20,
        }
    }

    fn serious(f: &[Finding]) -> Vec<&str> {
        f.iter()
            .filter(|f| f.severity >= Severity::Warn)
            .map(|f| f.id.as_str())
            .collect()
    }

    #[test]
    fn one_connection_on_one_saturated_core_is_connection_bound() {
        let w = window(1, 64, &[100.0, 4.0]);
        let f = connection_bound(&w, &THRESHOLDS, &GRPC_THRESHOLDS).unwrap();
        assert_eq!(f.id, "grpc.connection-bound");
        assert_eq!(f.fix, vec!["--channels 2"]);
        assert!(f.title.contains("1 HTTP/2 connection"), "{}", f.title);
        let w = window(2, 64, &[100.0, 60.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0]);
        assert_eq!(
            connection_bound(&w, &THRESHOLDS, &GRPC_THRESHOLDS)
                .unwrap()
                .fix,
            vec!["--channels 4"]
        );
        // The saturated core runs user time alone (another process's, e.g.
        // a CPU hog): not the client's connection.
        let mut hog = window(1, 64, &[100.0, 10.0, 10.0, 10.0]);
        hog.core_kernel[0].1 = 0.5;
        assert!(connection_bound(&hog, &THRESHOLDS, &GRPC_THRESHOLDS).is_none());
        // The saturated core has kernel time, but the client's process used
        // 4 % of one core in all (a shaped test; another process's system
        // calls): not the client's. At a core's worth, it is.
        let mut shaped = window(1, 64, &[100.0, 10.0, 10.0, 10.0]);
        shaped.process_cpu = Some(4.0);
        assert!(connection_bound(&shaped, &THRESHOLDS, &GRPC_THRESHOLDS).is_none());
        shaped.process_cpu = Some(95.0);
        assert!(connection_bound(&shaped, &THRESHOLDS, &GRPC_THRESHOLDS).is_some());
    }

    #[test]
    fn a_healthy_eight_by_64_run_raises_nothing() {
        let w = window(8, 64, &[70.0, 65.0]);
        assert!(
            serious(&rules(&w, &THRESHOLDS, &GRPC_THRESHOLDS)).is_empty(),
            "{:?}",
            rules(&w, &THRESHOLDS, &GRPC_THRESHOLDS)
        );
    }

    #[test]
    fn window_below_rate_times_rtt_is_flow_control_limited() {
        let mut w = window(1, 1, &[30.0, 30.0]);
        // 64 KiB stream window at 1 ms allows 65.5 MB/s; the stream moves 60 MB/s.
        w.rtt_us = Some(1000.0);
        w.intervals = vec![interval(14.0, 60e6, &[]); 2];
        let f = flow_control_limited(&w, &GRPC_THRESHOLDS).unwrap();
        assert_eq!(f.subject, "receive stream window");
        assert!(f.fix[1].contains("client's"), "{:?}", f.fix);
        w.intervals = vec![interval(2.0, 10e6, &[]); 2];
        assert!(flow_control_limited(&w, &GRPC_THRESHOLDS).is_none());
        w.rtt_us = None;
        assert!(flow_control_limited(&w, &GRPC_THRESHOLDS).is_none());
    }

    #[test]
    fn statuses_are_named_with_their_share() {
        let mut w = window(8, 64, &[50.0, 50.0]);
        w.intervals = vec![
            interval(970.0, 0.0, &[("UNAVAILABLE", 20)]),
            interval(
                990.0,
                0.0,
                &[("UNAVAILABLE", 10), ("RESOURCE_EXHAUSTED", 1)],
            ),
        ];
        let f = errors(&w, &GRPC_THRESHOLDS).unwrap();
        assert_eq!(f.severity, Severity::Error);
        assert!(f.title.starts_with("31 RPCs failed"), "{}", f.title);
        assert_eq!(f.fix.len(), 2);
        w.intervals = vec![interval(100_000.0, 0.0, &[("CANCELLED", 3)])];
        assert_eq!(
            errors(&w, &GRPC_THRESHOLDS).unwrap().severity,
            Severity::Warn
        );
        w.intervals = vec![interval(100.0, 0.0, &[])];
        assert!(errors(&w, &GRPC_THRESHOLDS).is_none());
    }
}

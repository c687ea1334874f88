//! Parsers for the outputs the benchmarks read: wirescope's `--json` summary,
//! iperf3's `-J` report, iperf2's CSV (`-y C`) and sockperf's ping-pong text.
//!
//! Pure functions of text; every missing or malformed field is an error that
//! names the field and the tool.

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// What the benchmarks use from one `wirescope run --json` summary.
#[derive(Debug, Clone, PartialEq)]
pub struct WsRun {
    /// Received bits per second.
    pub throughput_bps: f64,
    /// rr: transactions per second.
    pub rate_per_s: f64,
    /// rr: round-trip latency percentiles (µs).
    pub latency: Option<Percentiles>,
    /// Mean busy % over all cores of the controller's host.
    pub cpu_local: f64,
    /// Same for the agent's host.
    pub cpu_peer: f64,
}

/// Median and 99th percentile, µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Percentiles {
    /// 50th percentile.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// Parse wirescope's summary; a summary that carries an error fails.
pub fn wirescope_summary(json: &str) -> Result<WsRun> {
    let v: Value =
        serde_json::from_str(json.trim()).context("wirescope --json output is not JSON")?;
    if let Some(err) = v.get("error").and_then(Value::as_str) {
        bail!("wirescope reported an error: {err}");
    }
    if v.get("peer_lost").and_then(Value::as_bool) == Some(true) {
        bail!("wirescope lost the agent during the test");
    }
    let latency = match v.get("latency_us") {
        None | Some(Value::Null) => None,
        Some(_) => Some(Percentiles {
            p50: number(&v, &["latency_us", "p50"], "wirescope")?,
            p99: number(&v, &["latency_us", "p99"], "wirescope")?,
        }),
    };
    Ok(WsRun {
        throughput_bps: number(&v, &["throughput_bps"], "wirescope")?,
        rate_per_s: number(&v, &["rate_per_s"], "wirescope")?,
        latency,
        cpu_local: number(&v, &["hosts", "local", "mean_busy"], "wirescope")?,
        cpu_peer: number(&v, &["hosts", "peer", "mean_busy"], "wirescope")?,
    })
}

/// `end.sum_received.bits_per_second` of an iperf3 `-J` report.
pub fn iperf3_received_bps(json: &str) -> Result<f64> {
    let v: Value = serde_json::from_str(json.trim()).context("iperf3 -J output is not JSON")?;
    if let Some(err) = v.get("error").and_then(Value::as_str) {
        bail!("iperf3 reported an error: {err}");
    }
    number(&v, &["end", "sum_received", "bits_per_second"], "iperf3")
}

fn number(v: &Value, path: &[&str], tool: &str) -> Result<f64> {
    let mut at = v;
    for key in path {
        at = at
            .get(key)
            .with_context(|| format!("{tool} JSON has no field {}", path.join(".")))?;
    }
    at.as_f64()
        .with_context(|| format!("{tool} JSON field {} is not a number: {at}", path.join(".")))
}

/// Total bits per second from iperf2's `-y C` output: the SUM row (stream id
/// -1) when there are several streams, else the only row.
pub fn iperf2_csv_bps(csv: &str) -> Result<f64> {
    // timestamp,src,sport,dst,dport,id,interval,bytes,bits_per_second
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(',').collect())
        .collect();
    let row = rows
        .iter()
        .find(|r| r.get(5).is_some_and(|id| id.trim() == "-1"))
        .or_else(|| rows.last())
        .context("iperf -y C printed no report rows")?;
    let field = row.get(8).with_context(|| {
        format!(
            "iperf CSV row has {} fields, expected 9: {}",
            row.len(),
            row.join(",")
        )
    })?;
    field
        .trim()
        .parse()
        .with_context(|| format!("iperf CSV bits_per_second '{field}' is not a number"))
}

/// How sockperf expressed its latency figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SockperfUnit {
    /// "Summary: Round trip is ..." (`--full-rtt`).
    RoundTrip,
    /// "Summary: Latency is ..." — sockperf's default, RTT/2.
    OneWay,
}

/// A sockperf ping-pong result, converted to round-trip times.
#[derive(Debug, Clone, PartialEq)]
pub struct Sockperf {
    /// Round-trip percentiles, µs.
    pub rtt: Percentiles,
    /// Round trips per second over sockperf's valid (post warm-up) duration.
    pub rate_per_s: f64,
    /// What sockperf printed, before conversion.
    pub reported: SockperfUnit,
}

/// Parse `sockperf ping-pong` output (colour escapes allowed).
pub fn sockperf_pingpong(text: &str) -> Result<Sockperf> {
    let text = strip_ansi(text);
    let reported = if text.contains("Summary: Round trip is") {
        SockperfUnit::RoundTrip
    } else if text.contains("Summary: Latency is") {
        SockperfUnit::OneWay
    } else {
        bail!("sockperf output has no 'Summary: Latency is' / 'Summary: Round trip is' line");
    };
    let factor = if reported == SockperfUnit::OneWay {
        2.0
    } else {
        1.0
    };
    let rtt = Percentiles {
        p50: factor * percentile(&text, 50.0)?,
        p99: factor * percentile(&text, 99.0)?,
    };
    let valid = text
        .lines()
        .find(|l| l.contains("[Valid Duration]"))
        .context("sockperf output has no [Valid Duration] line")?;
    let secs: f64 = field(valid, "RunTime=")?;
    let received: f64 = field(valid, "ReceivedMessages=")?;
    if secs <= 0.0 {
        bail!("sockperf valid duration is {secs} s");
    }
    Ok(Sockperf {
        rtt,
        rate_per_s: received / secs,
        reported,
    })
}

/// `sockperf: ---> percentile 99.000 =   10.479`
fn percentile(text: &str, which: f64) -> Result<f64> {
    for line in text.lines() {
        let Some(rest) = line.split("---> percentile").nth(1) else {
            continue;
        };
        let Some((p, value)) = rest.split_once('=') else {
            continue;
        };
        if p.trim()
            .parse::<f64>()
            .is_ok_and(|p| (p - which).abs() < 1e-9)
        {
            return value.trim().parse().with_context(|| {
                format!(
                    "sockperf percentile {which} value '{}' is not a number",
                    value.trim()
                )
            });
        }
    }
    bail!("sockperf output has no 'percentile {which:.3}' line")
}

/// The number after `key` in `line`, up to the next space or ';'.
fn field(line: &str, key: &str) -> Result<f64> {
    let rest = line
        .split(key)
        .nth(1)
        .with_context(|| format!("sockperf line has no {key}: {line}"))?;
    let num: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    num.parse()
        .with_context(|| format!("sockperf {key} '{num}' is not a number in: {line}"))
}

/// Remove terminal colour sequences (`ESC [ ... letter`).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real outputs captured on a veth pair (198.18.0.1 -> 198.18.0.2).
    const SOCKPERF_RTT: &str = include_str!("testdata/sockperf-pingpong-tcp-m64-full-rtt.txt");
    const WS_RR: &str = include_str!("testdata/wirescope-rr-conns1-size64.json");
    const WS_STREAM: &str = include_str!("testdata/wirescope-stream-P2.json");
    const IPERF3: &str = include_str!("testdata/iperf3-P2-t3.json");

    #[test]
    fn sockperf_round_trip_is_taken_as_is() {
        let s = sockperf_pingpong(SOCKPERF_RTT).unwrap();
        assert_eq!(s.reported, SockperfUnit::RoundTrip);
        assert_eq!(
            s.rtt,
            Percentiles {
                p50: 18.169,
                p99: 24.689
            }
        );
        // [Valid Duration], not [Total Run].
        assert!((s.rate_per_s - 83598.0 / 1.55).abs() < 1e-6);
    }

    #[test]
    fn sockperf_one_way_latency_is_doubled() {
        let one_way = SOCKPERF_RTT.replace("Summary: Round trip is", "Summary: Latency is");
        let s = sockperf_pingpong(&one_way).unwrap();
        assert_eq!(s.reported, SockperfUnit::OneWay);
        assert_eq!(
            s.rtt,
            Percentiles {
                p50: 2.0 * 18.169,
                p99: 2.0 * 24.689
            }
        );
    }

    #[test]
    fn sockperf_without_percentiles_is_an_error() {
        let cut: Vec<&str> = SOCKPERF_RTT
            .lines()
            .filter(|l| !l.contains("percentile 50.000"))
            .collect();
        let err = sockperf_pingpong(&cut.join("\n")).unwrap_err().to_string();
        assert!(err.contains("percentile 50.000"), "{err}");
    }

    #[test]
    fn wirescope_rr_summary() {
        let w = wirescope_summary(WS_RR).unwrap();
        // serde_json's default float parsing may differ in the last bit.
        assert!((w.rate_per_s - 123780.78325613227).abs() < 1e-6);
        assert_eq!(
            w.latency,
            Some(Percentiles {
                p50: 7.723,
                p99: 17.855
            })
        );
        assert_eq!(
            (w.cpu_local, w.cpu_peer),
            (56.00795225427099, 56.347238021508005)
        );
    }

    #[test]
    fn wirescope_stream_summary_has_no_latency() {
        let w = wirescope_summary(WS_STREAM).unwrap();
        assert!((w.throughput_bps - 99584001816.2023).abs() < 1e-3);
        assert_eq!(w.latency, None);
    }

    #[test]
    fn wirescope_missing_field_is_named() {
        let err = wirescope_summary(&WS_RR.replace("\"peer\"", "\"far\""))
            .unwrap_err()
            .to_string();
        assert!(err.contains("hosts.peer.mean_busy"), "{err}");
    }

    #[test]
    fn wirescope_error_summary_fails() {
        let with_error = WS_RR.replace(
            "\"peer_lost\":false",
            "\"peer_lost\":false,\"error\":\"boom\"",
        );
        let err = wirescope_summary(&with_error).unwrap_err();
        assert!(err.to_string().contains("boom"));
    }

    #[test]
    fn iperf3_sum_received() {
        assert!((iperf3_received_bps(IPERF3).unwrap() - 119143787937.928).abs() < 1e-3);
        let err = iperf3_received_bps(
            r#"{"start":{},"intervals":[],"end":{},"error":"unable to connect to server"}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("unable to connect"));
    }

    /// iperf2 is not installed here: rows follow its documented `-y C` layout
    /// (timestamp,src,sport,dst,dport,id,interval,bytes,bits_per_second).
    #[test]
    fn iperf2_csv_prefers_the_sum_row() {
        let csv = "20240101120000,198.18.0.1,40000,198.18.0.2,5001,3,0.0-5.0,1000,1600\n\
                   20240101120000,198.18.0.1,40002,198.18.0.2,5001,4,0.0-5.0,1000,1600\n\
                   20240101120000,198.18.0.1,0,198.18.0.2,5001,-1,0.0-5.0,2000,3200\n";
        assert_eq!(iperf2_csv_bps(csv).unwrap(), 3200.0);
        assert_eq!(iperf2_csv_bps(csv.lines().next().unwrap()).unwrap(), 1600.0);
        assert!(iperf2_csv_bps("").is_err());
    }

    #[test]
    fn ansi_sequences_are_removed() {
        assert_eq!(strip_ansi("a\u{1b}[2;35mb\u{1b}[0mc"), "abc");
    }
}

//! perftest's arithmetic and columns, as pure functions over recorded
//! timestamps, so wirescope's RDMA numbers can be compared with `ib_*_bw` /
//! `ib_*_lat` line by line.
//!
//! The formulas are those of perftest's `print_report_bw`,
//! `print_full_bw_report`, `print_report_lat` and `print_report_lat_duration`
//! (src/perftest_resources.c), including their integer steps: timestamps are
//! ticks (`cycles_t` there, nanoseconds here — the functions take the tick
//! rate), the per-message time of the peak search and the median are integer
//! divisions of ticks, and the two largest latency samples are dropped.
//!
//! * `tposted[i]`: when the i-th send WR (over all QPs, in posting order) was posted.
//! * `tcompleted[k·cq_mod − 1]`: when the k-th signaled completion was polled
//!   (one completion stands for `cq_mod` WRs); `tcompleted[n − 1]` is the last.
//! * Duration mode (`-D`) keeps only the sample window's start (`tposted[0]`) and
//!   end (`tcompleted[0]`) and the operations completed in it; no peak.

use serde::{Deserialize, Serialize};

/// perftest's `format_factor` for Gb/s: 10^9 / 8 bytes per second.
const GBS: f64 = 125_000_000.0;

/// One line of a bandwidth report (`#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BwReport {
    /// `#bytes`: message size.
    pub bytes: u64,
    /// `#iterations`: messages counted (iterations x QPs, or completed in the sample window).
    pub iterations: u64,
    /// `BW peak[Gb/sec]` (0 when not measured, as perftest prints with `-N`/`-D`).
    pub bw_peak_gbps: f64,
    /// `BW average[Gb/sec]`.
    pub bw_avg_gbps: f64,
    /// `MsgRate[Mpps]`.
    pub msg_rate_mpps: f64,
}

/// Recorded times of a bandwidth run (iterations mode).
#[derive(Debug, Clone, Copy)]
pub struct BwInput<'a> {
    /// Message size (bytes).
    pub size: u64,
    /// Messages (iterations x QPs).
    pub ops: u64,
    /// Ticks per second (perftest: CPU MHz x 10^6; here 10^9 for ns).
    pub ticks_per_sec: f64,
    /// `tposted`: `ops` entries (just `[start]` without peak).
    pub posted: &'a [u64],
    /// `tcompleted`: `ops` entries (just `[end]` without peak).
    pub completed: &'a [u64],
    /// CQ moderation.
    pub cq_mod: u64,
    /// Search the peak (perftest's `noPeak == OFF`).
    pub peak: bool,
}

/// perftest `ROUND_UP(value, alignment)`.
fn round_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

/// `print_report_bw` (+ `print_full_bw_report` without a remote report).
/// None when the arrays are shorter than `ops` or no time elapsed.
pub fn bw_report(i: &BwInput) -> Option<BwReport> {
    let n = i.ops;
    let cq_mod = i.cq_mod.max(1);
    let last = if i.peak { n.checked_sub(1)? } else { 0 };
    let need = usize::try_from(last).ok()? + 1;
    if i.posted.len() < need || i.completed.len() < need || n == 0 {
        return None;
    }
    let tp = |k: u64| i.posted[k as usize];
    let tc = |k: u64| i.completed[k as usize];
    // cycles_t arithmetic is unsigned: an unfilled tcompleted[0] (0) makes the
    // first candidate "infinite", exactly as in perftest.
    let mut opt_delta = tc(0).wrapping_sub(tp(0));
    if i.peak {
        for a in 0..n {
            let mut j = round_up(a + 1, cq_mod) - 1;
            while j < n {
                let t = tc(j).wrapping_sub(tp(a)) / (j - a + 1);
                opt_delta = opt_delta.min(t);
                j += cq_mod;
            }
            if !n.is_multiple_of(cq_mod) {
                let j = n - 1;
                let t = tc(j).wrapping_sub(tp(a)) / (j - a + 1);
                opt_delta = opt_delta.min(t);
            }
        }
    }
    let sum = tc(last).wrapping_sub(tp(0)) as f64;
    if sum <= 0.0 || sum >= u64::MAX as f64 / 2.0 {
        return None;
    }
    let tsize = i.size as f64;
    let bw_avg = tsize * n as f64 * i.ticks_per_sec / (sum * GBS);
    let msg_rate = n as f64 * i.ticks_per_sec / (sum * 1_000_000.0);
    let peak_up = if i.peak {
        i.size.saturating_mul(i.ticks_per_sec as u64)
    } else {
        0
    };
    let peak_down = opt_delta.saturating_mul(GBS as u64);
    let bw_peak = if peak_down == 0 {
        0.0
    } else {
        peak_up as f64 / peak_down as f64
    };
    Some(BwReport {
        bytes: i.size,
        iterations: n,
        bw_peak_gbps: bw_peak,
        bw_avg_gbps: bw_avg,
        msg_rate_mpps: msg_rate,
    })
}

/// Duration mode (`-D`): `ops` completed between the sample window's start and end ticks.
pub fn bw_report_duration(
    size: u64,
    ops: u64,
    window_start: u64,
    window_end: u64,
    ticks_per_sec: f64,
) -> Option<BwReport> {
    bw_report(&BwInput {
        size,
        ops,
        ticks_per_sec,
        posted: &[window_start],
        completed: &[window_end],
        cq_mod: 1,
        peak: false,
    })
}

impl BwReport {
    /// perftest's bidirectional sum (`print_full_bw_report` with the remote report).
    pub fn plus(&self, remote: &BwReport) -> BwReport {
        BwReport {
            bytes: self.bytes,
            iterations: self.iterations,
            bw_peak_gbps: self.bw_peak_gbps + remote.bw_peak_gbps,
            bw_avg_gbps: self.bw_avg_gbps + remote.bw_avg_gbps,
            msg_rate_mpps: self.msg_rate_mpps + remote.msg_rate_mpps,
        }
    }

    /// perftest's column header (Gb/s).
    pub const HEADER: &'static str =
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";

    /// One report line in perftest's format (`REPORT_FMT`, or `REPORT_FMT_EXT`
    /// with six decimals when the average is below 0.1 Gb/s).
    pub fn line(&self) -> String {
        if self.bw_avg_gbps < 0.1 {
            format!(
                " {:<7}    {}           {:<7.6}            {:<7.6}            {:<7.6}",
                self.bytes,
                self.iterations,
                self.bw_peak_gbps,
                self.bw_avg_gbps,
                self.msg_rate_mpps
            )
        } else {
            format!(
                " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t   {:<7.6}",
                self.bytes,
                self.iterations,
                self.bw_peak_gbps,
                self.bw_avg_gbps,
                self.msg_rate_mpps
            )
        }
    }
}

/// One line of a latency report (µs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatReport {
    /// `#bytes`.
    pub bytes: u64,
    /// `#iterations`.
    pub iterations: u64,
    /// `t_min[usec]`.
    pub t_min_us: f64,
    /// `t_max[usec]` (the largest sample after dropping the top two).
    pub t_max_us: f64,
    /// `t_typical[usec]`: the median.
    pub t_typical_us: f64,
    /// `t_avg[usec]`.
    pub t_avg_us: f64,
    /// `t_stdev[usec]` (population).
    pub t_stdev_us: f64,
    /// `99% percentile[usec]`.
    pub p99_us: f64,
    /// `99.9% percentile[usec]`.
    pub p99_9_us: f64,
}

/// perftest `LAT_MEASURE_TAIL`: the largest samples left out.
pub const LAT_MEASURE_TAIL: usize = 2;

/// perftest `get_median` on a sorted array (integer mean of the middle two).
pub fn median(n: usize, sorted: &[u64]) -> u64 {
    if (n - 1) % 2 == 1 {
        (sorted[n / 2] + sorted[n / 2 - 1]) / 2
    } else {
        sorted[n / 2]
    }
}

/// `print_report_lat`: `posted` holds the post time of every iteration of the
/// ping-pong; each sample is the gap between two posts, divided by
/// `rtt_factor` (2 for write/send: half a round trip; 1 for read).
/// None with fewer than `LAT_MEASURE_TAIL + 2` samples.
pub fn lat_report(
    size: u64,
    posted: &[u64],
    rtt_factor: u32,
    ticks_per_us: f64,
) -> Option<LatReport> {
    let iters = posted.len();
    let mut delta: Vec<u64> = posted.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
    delta.sort_unstable();
    let measure_cnt = delta.len().checked_sub(LAT_MEASURE_TAIL)?;
    if measure_cnt < 2 {
        return None;
    }
    let q = ticks_per_us * f64::from(rtt_factor);
    let med = median(measure_cnt, &delta);
    let average = delta[..measure_cnt]
        .iter()
        .map(|d| *d as f64 / q)
        .sum::<f64>()
        / measure_cnt as f64;
    let var = delta[..measure_cnt]
        .iter()
        .map(|d| (average - *d as f64 / q).powi(2))
        .sum::<f64>()
        / measure_cnt as f64;
    let i99 = (measure_cnt as f64 * 0.99).ceil() as usize;
    let i999 = (measure_cnt as f64 * 0.999).ceil() as usize;
    Some(LatReport {
        bytes: size,
        iterations: iters as u64,
        t_min_us: delta[0] as f64 / q,
        t_max_us: delta[measure_cnt] as f64 / q,
        t_typical_us: med as f64 / q,
        t_avg_us: average,
        t_stdev_us: var.sqrt(),
        p99_us: delta[i99] as f64 / q,
        p99_9_us: delta[i999] as f64 / q,
    })
}

/// Duration-mode latency (`print_report_lat_duration`): average and transactions per second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatDurationReport {
    /// `#bytes`.
    pub bytes: u64,
    /// `#iterations` completed in the sample window.
    pub iterations: u64,
    /// `t_avg[usec]`.
    pub t_avg_us: f64,
    /// `tps average`.
    pub tps: f64,
}

/// `print_report_lat_duration`.
pub fn lat_report_duration(
    size: u64,
    iters: u64,
    window_ticks: u64,
    rtt_factor: u32,
    ticks_per_us: f64,
) -> Option<LatDurationReport> {
    if iters == 0 || window_ticks == 0 {
        return None;
    }
    let t = window_ticks as f64;
    Some(LatDurationReport {
        bytes: size,
        iterations: iters,
        t_avg_us: t / ticks_per_us / f64::from(rtt_factor) / iters as f64,
        tps: iters as f64 / (t / (ticks_per_us * 1_000_000.0)),
    })
}

impl LatReport {
    /// perftest's column header.
    pub const HEADER: &'static str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";

    /// One line in perftest's `REPORT_FMT_LAT`.
    pub fn line(&self) -> String {
        format!(
            " {:<7} {}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
            self.bytes,
            self.iterations,
            self.t_min_us,
            self.t_max_us,
            self.t_typical_us,
            self.t_avg_us,
            self.t_stdev_us,
            self.p99_us,
            self.p99_9_us
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    /// 1000-byte messages on a 1 GHz (ns) clock with peak search.
    fn bw_ns(posted: &[u64], completed: &[u64], cq_mod: u64) -> BwReport {
        bw_report(&BwInput {
            size: 1000,
            ops: posted.len() as u64,
            ticks_per_sec: 1e9,
            posted,
            completed,
            cq_mod,
            peak: true,
        })
        .unwrap()
    }

    #[test]
    fn bw_by_hand() {
        // 4 WRs of 1000 B, cq_mod 2, ns ticks. Posted at 1000, 1010, 1020, 1030;
        // completions for WRs 0-1 at 1100 and 2-3 at 1300 (tcompleted[1], [3]).
        // Peak search, t = (tc[j] - tp[i]) / (j - i + 1), integer:
        //   i=0: j=1: 100/2=50   j=3: 300/4=75
        //   i=1: j=1: 90/1=90    j=3: 290/3=96
        //   i=2: j=3: 280/2=140
        //   i=3: j=3: 270/1=270            -> opt_delta = 50 ns per message
        // peak = 1000 B * 1e9 / (50 * 125e6) = 160 Gb/s
        // avg  = 1000 * 4 * 1e9 / ((1300 - 1000) * 125e6) = 106.666.. Gb/s
        // rate = 4 * 1e9 / (300 * 1e6) = 13.333.. Mpps
        let r = bw_ns(&[1000, 1010, 1020, 1030], &[0, 1100, 0, 1300], 2);
        assert_eq!((r.bytes, r.iterations), (1000, 4));
        close(r.bw_peak_gbps, 160.0);
        close(r.bw_avg_gbps, 4000.0 * 1e9 / (300.0 * 125e6));
        close(r.msg_rate_mpps, 4e9 / 300e6);
    }

    #[test]
    fn bw_by_hand_with_a_last_unmoderated_completion() {
        // 5 WRs, cq_mod 2: the last WR is signaled on its own (tcompleted[4] = 1350).
        // Extra candidates j = 4 for every i: 350/5=70, 340/4=85, 330/3=110, 320/2=160, 310/1=310.
        // Minimum stays i=0,j=1: 50. avg = 5 * 1000 * 1e9 / (350 * 125e6) = 114.2857..
        let r = bw_ns(
            &[1000, 1010, 1020, 1030, 1040],
            &[0, 1100, 0, 1300, 1350],
            2,
        );
        close(r.bw_peak_gbps, 160.0);
        close(r.bw_avg_gbps, 5e12 / (350.0 * 125e6));
        // Every WR signaled (cq_mod 1) with a slow first one: the peak is the best pair.
        // tp = [0+1000, 1001, 1002], tc = [1500, 1510, 1520]:
        //   i=0: 500, 510/2=255, 520/3=173   i=1: 509, 519/2=259   i=2: 518 -> 173
        let r = bw_report(&BwInput {
            size: 4096,
            ops: 3,
            ticks_per_sec: 2.0e9, // a 2 GHz "cycle" clock, as perftest's get_cycles
            posted: &[1000, 1001, 1002],
            completed: &[1500, 1510, 1520],
            cq_mod: 1,
            peak: true,
        })
        .unwrap();
        close(r.bw_peak_gbps, 4096.0 * 2e9 / (173.0 * 125e6));
        close(r.bw_avg_gbps, 4096.0 * 3.0 * 2e9 / (520.0 * 125e6));
    }

    #[test]
    fn bw_duration_has_no_peak_and_sums_bidirectional() {
        // 1_000_000 messages of 64 KiB in a 2 s window: 65536*8*1e6/2 = 262.144 Gb/s.
        let r = bw_report_duration(65536, 1_000_000, 5_000_000_000, 7_000_000_000, 1e9).unwrap();
        assert_eq!(r.bw_peak_gbps, 0.0);
        close(r.bw_avg_gbps, 262.144);
        close(r.msg_rate_mpps, 0.5);
        let both = r.plus(&r);
        close(both.bw_avg_gbps, 524.288);
        close(both.msg_rate_mpps, 1.0);
        assert!(bw_report_duration(1, 1, 5, 5, 1e9).is_none());
    }

    #[test]
    fn lat_by_hand() {
        // Post times (ns) of 7 ping-pong iterations; gaps 13000, 6000, 20000, 9000, 15000, 8000.
        // Sorted: 6000 8000 9000 13000 | 15000 20000 (the top two are the tail).
        // measure_cnt = 6 - 2 = 4, q = 1000 ticks/us * rtt 2 = 2000:
        //   t_min = 6000/2000 = 3.0, t_max = delta[4] = 15000/2000 = 7.5
        //   median (n=4, even): (delta[2] + delta[1]) / 2 = (9000 + 8000)/2 = 8500 -> 4.25
        //   avg = (3 + 4 + 4.5 + 6.5)/4 = 4.5
        //   stdev = sqrt((1.5² + 0.5² + 0² + 2²)/4) = sqrt(1.625)
        //   99%: delta[ceil(3.96)=4] = 7.5; 99.9%: delta[ceil(3.996)=4] = 7.5
        let posted = [0, 13000, 19000, 39000, 48000, 63000, 71000];
        let r = lat_report(2, &posted, 2, 1000.0).unwrap();
        assert_eq!((r.bytes, r.iterations), (2, 7));
        close(r.t_min_us, 3.0);
        close(r.t_max_us, 7.5);
        close(r.t_typical_us, 4.25);
        close(r.t_avg_us, 4.5);
        close(r.t_stdev_us, 1.625f64.sqrt());
        close(r.p99_us, 7.5);
        close(r.p99_9_us, 7.5);
        // READ is a whole round trip: rtt_factor 1 doubles every figure.
        let r1 = lat_report(2, &posted, 1, 1000.0).unwrap();
        close(r1.t_typical_us, 8.5);
        // Too few samples for perftest's arithmetic.
        assert!(lat_report(2, &[0, 1, 2, 3], 2, 1000.0).is_none());
    }

    #[test]
    fn median_is_integer_like_perftest() {
        // (8001 + 9000) / 2 = 8500 in integer ticks, not 8500.5.
        assert_eq!(median(4, &[6000, 8001, 9000, 13000]), 8500);
        assert_eq!(median(3, &[1, 2, 3]), 2);
    }

    #[test]
    fn lat_duration_by_hand() {
        // 10000 round trips in 0.1 s of 1 GHz ticks, rtt 2: 1e8/1000/2/10000 = 5 us; 100000 tps.
        let r = lat_report_duration(2, 10_000, 100_000_000, 2, 1000.0).unwrap();
        close(r.t_avg_us, 5.0);
        close(r.tps, 100_000.0);
    }

    #[test]
    fn lines_use_perftest_columns() {
        let r = BwReport {
            bytes: 65536,
            iterations: 5000,
            bw_peak_gbps: 97.3456,
            bw_avg_gbps: 96.5,
            msg_rate_mpps: 0.184059,
        };
        assert_eq!(
            r.line(),
            " 65536      5000             97.35              96.50  \t\t   0.184059"
        );
        assert!(BwReport::HEADER.contains("BW average[Gb/sec]"));
        let slow = BwReport {
            bw_avg_gbps: 0.05,
            ..r
        };
        assert!(slow.line().contains("0.050000"), "{}", slow.line());
        let l = LatReport {
            bytes: 2,
            iterations: 1000,
            t_min_us: 1.0,
            t_max_us: 3.25,
            t_typical_us: 1.1,
            t_avg_us: 1.2,
            t_stdev_us: 0.1,
            p99_us: 2.0,
            p99_9_us: 3.0,
        };
        assert!(
            l.line()
                .starts_with(" 2       1000          1.00           3.25   "),
            "{:?}",
            l.line()
        );
        assert!(LatReport::HEADER.contains("t_typical[usec]"));
    }
}

//! Pacing of one generator thread: frame `n` is due at `start + n / rate`.
//!
//! Frames go out in batches (one syscall each); a paced thread sends
//! batches small enough that they are about half a millisecond apart and
//! sleeps between them, so a paced generator leaves its core mostly idle
//! and the rate is exact over any interval longer than a batch. Being late
//! (the path is slower than asked) does not cause a burst later beyond one
//! batch: the schedule is never ahead of the clock; a thread that fell
//! behind (descheduled on a busy host) catches up in full batches, and one
//! more than 250 ms behind restarts its schedule from now.

use std::time::{Duration, Instant};

/// Frames per batch when unpaced.
pub const BATCH: usize = 64;

/// One thread's schedule.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: u64,
    start: Instant,
    done: u64,
}

impl Pacer {
    /// A schedule of `rate` frames/s starting now (0 = unpaced).
    pub fn new(rate: u64) -> Self {
        Pacer {
            rate,
            start: Instant::now(),
            done: 0,
        }
    }

    /// Frames to send in the next batch.
    pub fn batch(&self) -> usize {
        if self.rate == 0 {
            BATCH
        } else {
            (self.rate / 2000).clamp(1, BATCH as u64) as usize
        }
    }

    /// When frame `n` (counted from the start) is due.
    fn due(&self, n: u64) -> Instant {
        let ns = u128::from(n) * 1_000_000_000 / u128::from(self.rate.max(1));
        self.start + Duration::from_nanos(ns.min(u128::from(u64::MAX)) as u64)
    }

    /// Wait until the next frame is due (returns at once when unpaced or
    /// when `stop()` turns true).
    pub fn wait(&mut self, stop: impl Fn() -> bool) {
        if self.rate == 0 {
            return;
        }
        loop {
            let now = Instant::now();
            let due = self.due(self.done);
            if now >= due {
                if now - due > Duration::from_millis(250) {
                    // Far behind: restart the schedule instead of bursting.
                    self.start = now;
                    self.done = 0;
                }
                return;
            }
            if stop() {
                return;
            }
            let left = due - now;
            if left > Duration::from_micros(150) {
                std::thread::sleep(
                    (left - Duration::from_micros(80)).min(Duration::from_millis(5)),
                );
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Record that `n` frames went out.
    pub fn sent(&mut self, n: u64) {
        self.done += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_follow_the_rate() {
        assert_eq!(Pacer::new(0).batch(), BATCH);
        assert_eq!(Pacer::new(1000).batch(), 1);
        assert_eq!(Pacer::new(12_500).batch(), 6);
        assert_eq!(Pacer::new(10_000_000).batch(), BATCH);
    }

    #[test]
    fn schedule_is_linear_in_frames() {
        let p = Pacer::new(1000);
        assert_eq!(p.due(0), p.start);
        assert_eq!(p.due(500) - p.start, Duration::from_millis(500));
        assert_eq!(p.due(1000) - p.start, Duration::from_secs(1));
    }

    #[test]
    fn unpaced_and_stopped_waits_return() {
        let mut p = Pacer::new(0);
        p.wait(|| false);
        let mut p = Pacer::new(1);
        p.sent(1_000_000); // due in 11 days
        p.wait(|| true);
    }
}

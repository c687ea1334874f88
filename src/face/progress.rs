//! The progress of a headless sweep on stderr: "point k of N, ~T left",
//! redrawn in place at each point and interval.
//!
//! Only when stderr is a terminal and the plan has several points: a piped
//! or redirected stderr gets nothing (a log of carriage returns helps no
//! one). The line is erased before anything else is printed and drawn again
//! after, so it never splits a table row. It only shows; it reads no clock
//! but the one it is given.

use std::io::Write;
use std::time::{Duration, Instant};

/// "point 2 of 5, ~1 min 10 s left"; without an estimate, "point 2 of 5".
pub fn line(k: usize, n: usize, left: Option<Duration>) -> String {
    match left {
        Some(t) => format!(
            "point {k} of {n}, ~{} left",
            super::span_text(t.as_secs_f64())
        ),
        None => format!("point {k} of {n}"),
    }
}

/// Time left at point `k` of `n`, `in_point` into it, when a point takes
/// `per_point`: the rest of this one and the whole of the later ones.
pub fn left(per_point: Duration, k: usize, n: usize, in_point: Duration) -> Duration {
    let later = u32::try_from(n.saturating_sub(k)).unwrap_or(u32::MAX);
    per_point
        .saturating_mul(later)
        .saturating_add(per_point.saturating_sub(in_point))
}

/// The progress line's state across one run.
pub struct Progress {
    on: bool,
    total: usize,
    /// What a point should take before one has ended (time + omit).
    guess: Option<Duration>,
    point: usize,
    point_started: Option<Instant>,
    /// Time of the points that ended, and how many.
    done: (Duration, u32),
    shown: bool,
}

impl Progress {
    /// A line that is drawn only when `terminal` (stderr is one).
    pub fn new(terminal: bool) -> Progress {
        Progress {
            on: terminal,
            total: 0,
            guess: None,
            point: 0,
            point_started: None,
            done: (Duration::ZERO, 0),
            shown: false,
        }
    }

    /// A plan of `points` points of about `guess` each begins.
    pub fn plan(&mut self, points: usize, guess: Option<Duration>) {
        self.total = points;
        self.guess = guess;
        self.done = (Duration::ZERO, 0);
    }

    /// Point `k` (1-based) begins.
    pub fn point(&mut self, k: usize, now: Instant) {
        self.point = k;
        self.point_started = Some(now);
    }

    /// The current point ended.
    pub fn point_done(&mut self, now: Instant) {
        if let Some(t) = self.point_started.take() {
            self.done.0 += now.saturating_duration_since(t);
            self.done.1 += 1;
        }
    }

    /// The plan ended: nothing more to show.
    pub fn plan_done(&mut self) {
        self.clear();
        self.total = 0;
    }

    /// The line now, if there is one to show.
    pub fn text(&self, now: Instant) -> Option<String> {
        if !self.on || self.total < 2 || self.point == 0 {
            return None;
        }
        let per_point = match self.done {
            (t, n) if n > 0 => Some(t / n),
            _ => self.guess,
        };
        let in_point = self
            .point_started
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        let left = per_point.map(|p| left(p, self.point, self.total, in_point));
        Some(line(self.point, self.total, left))
    }

    /// Erase the line (before other output).
    pub fn clear(&mut self) {
        if self.shown {
            let _ = std::io::stderr().lock().write_all(b"\r\x1b[K");
            self.shown = false;
        }
    }

    /// Draw the line again (after other output).
    pub fn draw(&mut self, now: Instant) {
        if let Some(t) = self.text(now) {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[K{t}");
            self.shown = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_point_and_the_time_left() {
        assert_eq!(
            line(2, 5, Some(Duration::from_secs(70))),
            "point 2 of 5, ~70 s left"
        );
        assert_eq!(
            line(1, 3, Some(Duration::from_secs(200))),
            "point 1 of 3, ~3 min 20 s left"
        );
        assert_eq!(line(3, 4, None), "point 3 of 4");
    }

    #[test]
    fn time_left_is_the_rest_of_this_point_and_the_later_ones() {
        let p = Duration::from_secs(10);
        assert_eq!(left(p, 1, 3, Duration::ZERO), Duration::from_secs(30));
        assert_eq!(
            left(p, 2, 3, Duration::from_secs(4)),
            Duration::from_secs(16)
        );
        // A point that runs long leaves the later ones only.
        assert_eq!(left(p, 3, 3, Duration::from_secs(12)), Duration::ZERO);
    }

    #[test]
    fn the_estimate_learns_from_the_points_that_ended() {
        let t0 = Instant::now();
        let mut p = Progress::new(true);
        p.plan(3, Some(Duration::from_secs(10)));
        assert_eq!(p.text(t0), None, "nothing before the first point");
        p.point(1, t0);
        assert_eq!(p.text(t0).as_deref(), Some("point 1 of 3, ~30 s left"));
        // The first point took 20 s, not 10: the estimate follows.
        p.point_done(t0 + Duration::from_secs(20));
        p.point(2, t0 + Duration::from_secs(20));
        assert_eq!(
            p.text(t0 + Duration::from_secs(25)).as_deref(),
            Some("point 2 of 3, ~35 s left")
        );
    }

    #[test]
    fn nothing_without_a_terminal_or_for_one_point() {
        let t0 = Instant::now();
        let mut off = Progress::new(false);
        off.plan(3, Some(Duration::from_secs(10)));
        off.point(1, t0);
        assert_eq!(off.text(t0), None);
        let mut one = Progress::new(true);
        one.plan(1, Some(Duration::from_secs(10)));
        one.point(1, t0);
        assert_eq!(one.text(t0), None);
    }
}

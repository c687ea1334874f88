//! The default set's sampling window: the per-packet programs are attached
//! for a share of each interval only, and this module keeps the clock of
//! how long they were, so the reader can scale what they counted.
//!
//! Why a window rather than counting 1 skb in N inside the program: what a
//! per-packet program costs is mostly its invocation (the tracepoint, the
//! BPF dispatch), not its body — measured on the local pair's veth, an empty
//! program on `netif_receive_skb` takes 70-90 ns a run (BPF_ENABLE_STATS),
//! the counting one 75-120 ns. Skipping skbs inside the program would save
//! the difference only; a program that is not attached costs nothing.
//!
//! [`Gate`] owns the loaded programs on a named thread (`ws-ebpf-gate`) that
//! sleeps until a window opens or closes: [`Gate::open`] (called by the
//! reader right after it read the maps) attaches them and schedules the
//! close; the thread detaches them when the window ends, and when the gate
//! is dropped it detaches them, unloads the object and ends. Attaching
//! takes a few hundred microseconds (the kernel patches the tracepoint's
//! static key on every CPU), so there is one window per interval, at its
//! start. The clock runs from the middle of the attach calls to the middle
//! of the detach calls: each program goes live somewhere inside its own
//! call, so that is the span the programs covered, to within a small part
//! of those calls (a few hundred microseconds of a 250 ms window).
//!
//! It never reads maps, never prints, and never touches anything but its
//! own programs' links.

use aya::programs::tp_btf::BtfTracePointLinkId;
use aya::programs::BtfTracePoint;
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The share of each interval the per-packet programs are attached.
pub const SHARE: f64 = 0.25;
/// Intervals are taken as at least this long and at most [`MAX_SPAN`] when
/// sizing the window: a very short interval still gets a window a few
/// packets long, and a long one (or, before the sampler said its interval,
/// a long pause between reads) does not keep the programs attached for
/// seconds.
const MIN_SPAN: Duration = Duration::from_millis(100);
/// See [`MIN_SPAN`].
const MAX_SPAN: Duration = Duration::from_secs(2);
/// The first window, opened when the programs are loaded (a 1 s interval's).
pub const FIRST_WINDOW: Duration = Duration::from_millis(250);

/// The window that follows a read, in an interval of `span`.
pub fn window_after(span: Duration) -> Duration {
    span.clamp(MIN_SPAN, MAX_SPAN).mul_f64(SHARE)
}

/// How long the programs were attached, kept by the gate thread and taken by the reader.
#[derive(Debug, Default)]
struct Clock {
    /// Attached time of the windows closed since the last [`Clock::take`].
    closed: Duration,
    /// When the open window's programs were all attached (None: closed).
    open_since: Option<Instant>,
    /// Why the last window could not open, until the reader takes it.
    error: Option<String>,
}

impl Clock {
    /// Attached time since the previous take, up to `now` (an open window
    /// is split there: its part after `now` goes to the next take).
    fn take(&mut self, now: Instant) -> Duration {
        let mut t = std::mem::take(&mut self.closed);
        if let Some(since) = self.open_since.as_mut() {
            t += now.saturating_duration_since(*since);
            *since = (*since).max(now);
        }
        t
    }

    fn opened(&mut self, at: Instant) {
        self.open_since.get_or_insert(at);
    }

    fn closed(&mut self, at: Instant) {
        if let Some(since) = self.open_since.take() {
            self.closed += at.saturating_duration_since(since);
        }
    }
}

/// What the reader learns from the gate at each read.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// How long the programs were attached since the previous read.
    pub attached: Duration,
    /// Why a window could not open, if one could not.
    pub error: Option<String>,
}

/// The per-packet programs of the default set, attached during windows.
pub struct Gate {
    clock: Arc<Mutex<Clock>>,
    /// Window lengths to the thread; dropped to stop it.
    open: Option<Sender<Duration>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate").field("clock", &self.clock).finish()
    }
}

/// A program of the gate that could not be found or attached.
#[derive(Debug, thiserror::Error)]
enum GateError {
    /// The object has no program of that name.
    #[error("{name}: not in the object")]
    Missing {
        /// The program.
        name: &'static str,
    },
    /// aya refused the program (wrong type, attach failed).
    #[error("{name}: {source}")]
    Program {
        /// The program.
        name: &'static str,
        /// aya's error.
        #[source]
        source: aya::programs::ProgramError,
    },
}

/// The programs the gate thread owns: the object and its attached links.
struct Programs {
    bpf: aya::Ebpf,
    names: Vec<&'static str>,
    links: Vec<(&'static str, BtfTracePointLinkId)>,
}

impl Programs {
    fn attach(&mut self) -> Result<(), GateError> {
        for name in self.names.clone() {
            let attached = program(&mut self.bpf, name).and_then(|p| {
                p.attach()
                    .map_err(|source| GateError::Program { name, source })
            });
            match attached {
                Ok(id) => self.links.push((name, id)),
                Err(e) => {
                    self.detach();
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn detach(&mut self) {
        for (name, id) in std::mem::take(&mut self.links) {
            // A link that cannot be found was already detached: nothing to undo.
            if let Ok(p) = program(&mut self.bpf, name) {
                let _ = p.detach(id);
            }
        }
    }
}

fn program<'a>(
    bpf: &'a mut aya::Ebpf,
    name: &'static str,
) -> Result<&'a mut BtfTracePoint, GateError> {
    bpf.program_mut(name)
        .ok_or(GateError::Missing { name })?
        .try_into()
        .map_err(|source| GateError::Program { name, source })
}

fn lock(clock: &Mutex<Clock>) -> MutexGuard<'_, Clock> {
    // The clock is plain numbers, valid whatever a panicking holder left.
    clock.lock().unwrap_or_else(|e| e.into_inner())
}

impl Gate {
    /// Take over `bpf`, whose programs `names` are loaded and attached
    /// (`links`, live since `attached_at`), and close their first window
    /// [`FIRST_WINDOW`] after that.
    pub fn start(
        bpf: aya::Ebpf,
        names: Vec<&'static str>,
        links: Vec<(&'static str, BtfTracePointLinkId)>,
        attached_at: Instant,
    ) -> std::io::Result<Gate> {
        let clock = Arc::new(Mutex::new(Clock::default()));
        lock(&clock).opened(attached_at);
        let (tx, rx) = channel::<Duration>();
        let programs = Programs { bpf, names, links };
        let c = Arc::clone(&clock);
        let thread = std::thread::Builder::new()
            .name("ws-ebpf-gate".into())
            .spawn(move || {
                // Closing on time keeps the cost at the share; real-time
                // priority keeps busy engines from delaying it (the clock
                // stays right either way).
                crate::traffic::raise_priority();
                run(programs, rx, &c, attached_at + FIRST_WINDOW);
            })?;
        Ok(Gate {
            clock,
            open: Some(tx),
            thread: Some(thread),
        })
    }

    /// What was attached since the previous call, up to `now`.
    pub fn observed(&self, now: Instant) -> Observed {
        let mut c = lock(&self.clock);
        Observed {
            attached: c.take(now),
            error: c.error.take(),
        }
    }

    /// Open a window of `len` from now (or extend the open one to end then).
    pub fn open(&self, len: Duration) {
        if let Some(tx) = &self.open {
            // The thread only ends when this sender is dropped.
            let _ = tx.send(len);
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.open = None;
        if let Some(t) = self.thread.take() {
            // A panic on the gate thread has nothing left for us to undo:
            // its programs were dropped (unloaded) as it unwound.
            let _ = t.join();
        }
    }
}

/// The gate thread: attach on a window's opening, detach at its end, stop
/// when the sender is dropped (the object unloads as `programs` drops).
fn run(
    mut programs: Programs,
    rx: std::sync::mpsc::Receiver<Duration>,
    clock: &Mutex<Clock>,
    first_close: Instant,
) {
    let mut close_at = Some(first_close);
    loop {
        let next = match close_at {
            Some(t) => rx.recv_timeout(t.saturating_duration_since(Instant::now())),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(len) => {
                if programs.links.is_empty() {
                    let t = Instant::now();
                    match programs.attach() {
                        Ok(()) => lock(clock).opened(midpoint(t)),
                        Err(e) => {
                            lock(clock).error = Some(e.to_string());
                            continue;
                        }
                    }
                }
                close_at = Some(Instant::now() + len);
            }
            Err(RecvTimeoutError::Timeout) => {
                close(&mut programs, clock);
                close_at = None;
            }
            Err(RecvTimeoutError::Disconnected) => {
                close(&mut programs, clock);
                return;
            }
        }
    }
}

/// The middle of the span from `start` to now.
pub fn midpoint(start: Instant) -> Instant {
    start + start.elapsed() / 2
}

fn close(programs: &mut Programs, clock: &Mutex<Clock>) {
    if programs.links.is_empty() {
        return;
    }
    let t = Instant::now();
    programs.detach();
    lock(clock).closed(midpoint(t));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_splits_an_open_window_at_the_read() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut c = Clock::default();
        assert_eq!(c.take(t0 + ms(10)), Duration::ZERO, "never opened");
        c.opened(t0);
        c.closed(t0 + ms(250));
        c.opened(t0 + ms(1000));
        // Read 100 ms into the second window: the first whole, the second's start.
        assert_eq!(c.take(t0 + ms(1100)), ms(350));
        c.closed(t0 + ms(1250));
        assert_eq!(c.take(t0 + ms(2000)), ms(150), "the rest of the second");
        assert_eq!(c.take(t0 + ms(3000)), Duration::ZERO, "closed since");
        // Opening an open window again does not move its start.
        c.opened(t0 + ms(3000));
        c.opened(t0 + ms(3100));
        assert_eq!(c.take(t0 + ms(3200)), ms(200));
    }

    #[test]
    fn windows_are_a_share_of_a_bounded_interval() {
        let ms = Duration::from_millis;
        assert_eq!(window_after(ms(1000)), ms(250));
        assert_eq!(window_after(ms(500)), ms(125));
        assert_eq!(window_after(ms(1)), ms(25), "a quick re-read");
        assert_eq!(
            window_after(Duration::from_secs(60)),
            ms(500),
            "a long pause"
        );
        assert_eq!(FIRST_WINDOW, window_after(Duration::from_secs(1)));
    }
}

//! The one event stream of the TUI loop and the thread that reads the terminal.
//!
//! Keys, resizes and ticks come from the input thread; intervals and session
//! news from the pipeline thread. Both write into one bounded channel
//! ([`EVENT_QUEUE`]); the loop is the only reader. Ticks are dropped when the
//! queue is full (the next one will do), data events wait for room.

use crate::record::pipeline::Output;
use crossterm::event::KeyEvent;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Capacity of the event channel.
pub const EVENT_QUEUE: usize = 256;
/// Period of [`Event::Tick`]: the redraw throttle (at most 10 frames/s).
pub const TICK: Duration = Duration::from_millis(100);

/// Everything the loop reacts to.
#[derive(Debug)]
pub enum Event {
    /// A key press.
    Input(KeyEvent),
    /// The terminal changed size.
    Resize,
    /// Time passed.
    Tick,
    /// What the session's pipeline produced (connected, a point, an interval, ...).
    Output(Box<Output>),
    /// Recording started.
    LogOpened(PathBuf),
    /// Recording could not start, or a write failed (recording stopped).
    LogFailed(String),
    /// SIGTERM / SIGHUP / the terminal went away: leave like `q`.
    Quit,
    /// A running checklist's question, record or end (the Tune view).
    Tune(Box<super::tune::TuneNote>),
    /// What the fleet coordinator did (the fleet view, `fleet --tui`).
    Fleet(Box<crate::fleet::coordinator::FleetEvent>),
}

/// The terminal reader: a named thread polling crossterm with [`TICK`] as timeout.
pub struct InputThread {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl InputThread {
    /// Start reading keys into `tx`.
    pub fn spawn(tx: mpsc::Sender<Event>) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("ws-tui-input".into())
            .spawn(move || input_loop(&tx, &flag))?;
        Ok(InputThread {
            stop,
            handle: Some(handle),
        })
    }

    /// Ask the thread to end (it notices within one [`TICK`]); `drop` joins it.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Drop for InputThread {
    /// Joins the thread, but waits at most half a second: should a terminal
    /// read ever hang, the TUI still stops its test and removes the pair
    /// (the process exit ends the thread).
    fn drop(&mut self) {
        self.stop();
        if let Some(h) = self.handle.take() {
            let t0 = std::time::Instant::now();
            while !h.is_finished() && t0.elapsed() < JOIN_LIMIT {
                std::thread::sleep(Duration::from_millis(10));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
    }
}

/// How long dropping [`InputThread`] waits for the thread (a few [`TICK`]s).
const JOIN_LIMIT: Duration = Duration::from_millis(500);

/// What the terminal's descriptor says before crossterm reads it.
#[derive(Debug, PartialEq, Eq)]
enum Tty {
    /// Bytes (or a buffered event) wait.
    Readable,
    /// Nothing within the timeout.
    Quiet,
    /// Hung up, closed or failed: nothing will ever come.
    Gone,
}

/// `poll(2)` on the terminal. crossterm 0.28 must not be the first to see a
/// hang-up: its reader retries a read that returns EOF or EIO forever (one
/// core at 100 %, the thread never returns), so the hang-up is caught here.
fn wait_tty(fd: std::os::fd::BorrowedFd<'_>, timeout: Duration) -> Tty {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(0) => Tty::Quiet,
        Ok(_) => {
            let r = fds[0].revents().unwrap_or(PollFlags::empty());
            if r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL) {
                Tty::Gone
            } else {
                Tty::Readable
            }
        }
        Err(nix::errno::Errno::EINTR) => Tty::Quiet,
        Err(_) => Tty::Gone,
    }
}

/// The descriptor crossterm reads keys from: stdin when it is a terminal,
/// else `/dev/tty` (kept open here only to watch it).
fn open_tty() -> Option<Box<dyn std::os::fd::AsFd>> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        return Some(Box::new(std::io::stdin()));
    }
    let tty = std::fs::File::open("/dev/tty").ok()?;
    Some(Box::new(tty))
}

/// Reads the terminal until told to stop. When the terminal is gone (hang-up,
/// EOF, EIO) it sends [`Event::Quit`] once and ends, so the loop leaves like
/// `q` instead of waiting for keys that never come.
fn input_loop(tx: &mpsc::Sender<Event>, stop: &AtomicBool) {
    use crossterm::event::{self as ct, Event as Ct};
    use std::os::fd::AsFd;
    let tty = open_tty();
    let gone = |tx: &mpsc::Sender<Event>| {
        let _ = tx.blocking_send(Event::Quit);
    };
    while !stop.load(Ordering::Relaxed) {
        // Events crossterm already parsed come first; it reads the descriptor
        // only once poll(2) has said it holds bytes and no hang-up.
        let ready = match ct::poll(Duration::ZERO) {
            Ok(true) => true,
            Ok(false) => match tty.as_ref().map(|t| wait_tty(t.as_fd(), TICK)) {
                Some(Tty::Gone) => return gone(tx),
                Some(Tty::Quiet) => false,
                Some(Tty::Readable) | None => match ct::poll(TICK) {
                    Ok(r) => r,
                    Err(_) => return gone(tx),
                },
            },
            Err(_) => return gone(tx),
        };
        let ev = if ready {
            match ct::read() {
                Ok(Ct::Key(k)) => Event::Input(k),
                Ok(Ct::Resize(..)) => Event::Resize,
                Ok(_) => continue,
                Err(_) => return gone(tx),
            }
        } else {
            if tx.try_send(Event::Tick).is_err() && tx.is_closed() {
                return;
            }
            continue;
        };
        if tx.blocking_send(ev).is_err() {
            return;
        }
    }
}

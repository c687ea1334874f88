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
}

impl InputThread {
    /// Ask the thread to end (it notices within one [`TICK`]); `drop` joins it.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Drop for InputThread {
    fn drop(&mut self) {
        self.stop();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn input_loop(tx: &mpsc::Sender<Event>, stop: &AtomicBool) {
    use crossterm::event::{self as ct, Event as Ct};
    while !stop.load(Ordering::Relaxed) {
        let ev = match ct::poll(TICK) {
            Ok(true) => match ct::read() {
                Ok(Ct::Key(k)) => Event::Input(k),
                Ok(Ct::Resize(..)) => Event::Resize,
                Ok(_) => continue,
                Err(_) => return,
            },
            Ok(false) => {
                if tx.try_send(Event::Tick).is_err() && tx.is_closed() {
                    return;
                }
                continue;
            }
            Err(_) => return,
        };
        if tx.blocking_send(ev).is_err() {
            return;
        }
    }
}

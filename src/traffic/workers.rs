//! The threads of one end of a test (the packet sink's and generator's, the
//! gRPC client's and server's) and their stop flags: `stop` lets them
//! drain, `abort` makes them return at once, and dropping the set aborts and
//! joins them, so no path leaves a thread (or the sockets it owns) behind.

use crate::traffic::{join_all, spawn_worker, EngineControl, EngineError};
use crate::units::CpuId;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

/// Named, pinned worker threads sharing one [`EngineControl`].
#[derive(Debug, Default)]
pub struct Workers {
    threads: Vec<JoinHandle<Result<(), EngineError>>>,
    control: EngineControl,
}

impl Workers {
    /// Start `f` on a thread named `name`, pinned to `cpu`. On failure the
    /// threads already started are aborted and joined.
    pub fn spawn<F>(&mut self, name: String, cpu: Option<CpuId>, f: F) -> Result<(), EngineError>
    where
        F: FnOnce() -> Result<(), EngineError> + Send + 'static,
    {
        match spawn_worker(name, cpu, &self.control, f) {
            Ok(h) => {
                self.threads.push(h);
                Ok(())
            }
            Err(e) => {
                self.abort();
                let _ = join_all(std::mem::take(&mut self.threads));
                Err(e)
            }
        }
    }

    /// Threads started.
    pub fn len(&self) -> usize {
        self.threads.len()
    }
    /// True once every thread has returned (or was joined).
    pub fn is_finished(&self) -> bool {
        self.threads.iter().all(JoinHandle::is_finished)
    }
    /// The flags and the done signal.
    pub fn control(&self) -> &EngineControl {
        &self.control
    }
    /// Finish gracefully: threads drain, then return.
    pub fn stop(&self) {
        self.control.stop.store(true, Ordering::Relaxed);
    }
    /// Return at once.
    pub fn abort(&self) {
        self.control.abort.store(true, Ordering::Relaxed);
        self.stop();
    }
    /// Wait for every thread; the first error (or panic) wins.
    pub fn join(&mut self) -> Result<(), EngineError> {
        join_all(std::mem::take(&mut self.threads))
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.abort();
            let _ = join_all(std::mem::take(&mut self.threads));
        }
    }
}

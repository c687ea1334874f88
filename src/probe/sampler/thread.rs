//! [`SamplerThread`]: a [`Sampler`] on a named thread of its own.
//!
//! The session (an async task) asks; the thread reads the host and answers
//! through a oneshot channel, so the runtime that carries the control
//! protocol never waits on procfs, ioctl, netlink or BPF maps. The thread
//! raises its own scheduling priority ([`raise_priority`]) so engines that
//! keep every core busy cannot delay its reads. Requests queue in order; at
//! most [`QUEUE`] may wait, so a stalled host cannot grow the queue.

use super::{EngineView, Sampler};
use crate::probe::ebpf::{EbpfIface, EbpfMode, EbpfStatus};
use crate::probe::sample::{LatencySummary, Sample};
use crate::probe::source::HostSource;
use crate::traffic::{raise_priority, Priority};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::oneshot;

/// Most requests waiting for the sampler thread.
pub const QUEUE: usize = 16;

/// The sampler thread is gone or too far behind.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    /// It ended (a panic in a probe, or shutdown).
    #[error("the sampler thread ended")]
    Gone,
    /// The thread could not be started.
    #[error("cannot start the sampler thread: {0}")]
    Spawn(#[source] std::io::Error),
    /// [`QUEUE`] requests are already waiting.
    #[error("the sampler thread is {QUEUE} requests behind (the host is overloaded)")]
    Behind,
}

enum Cmd {
    SetEbpf {
        mode: EbpfMode,
        peer: Vec<EbpfIface>,
    },
    SetIfaces {
        names: Vec<String>,
        reply: oneshot::Sender<Option<EbpfStatus>>,
    },
    Begin {
        engine: Option<EngineView>,
        omit: Duration,
        interval: Duration,
        reply: oneshot::Sender<()>,
    },
    Sample {
        reply: oneshot::Sender<Sample>,
    },
    End {
        reply: oneshot::Sender<Option<LatencySummary>>,
    },
}

/// A sampler running on its own thread.
pub struct SamplerThread {
    tx: Option<SyncSender<Cmd>>,
    handle: Option<JoinHandle<()>>,
    priority: Priority,
}

impl std::fmt::Debug for SamplerThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SamplerThread")
            .field("priority", &self.priority)
            .finish()
    }
}

impl SamplerThread {
    /// Start the thread `name`, which builds its sampler with `make` (the
    /// sampler's first snapshots are taken on that thread).
    pub fn spawn<F>(name: &str, make: F) -> std::io::Result<Self>
    where
        F: FnOnce() -> Sampler + Send + 'static,
    {
        let (tx, rx) = sync_channel::<Cmd>(QUEUE);
        let (ptx, prx) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let _ = ptx.send(raise_priority());
                let mut s = make();
                while let Ok(cmd) = rx.recv() {
                    serve(&mut s, cmd);
                }
            })?;
        let priority = prx.recv().unwrap_or(Priority::Unchanged);
        Ok(SamplerThread {
            tx: Some(tx),
            handle: Some(handle),
            priority,
        })
    }

    /// A sampler of `source` on the thread `name`.
    pub fn of(name: &str, source: Box<dyn HostSource>) -> std::io::Result<Self> {
        Self::spawn(name, move || Sampler::new(source))
    }

    fn send(&self, cmd: Cmd) -> Result<(), SamplerError> {
        let tx = self.tx.as_ref().ok_or(SamplerError::Gone)?;
        match tx.try_send(cmd) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => Err(SamplerError::Behind),
            Err(TrySendError::Disconnected(_)) => Err(SamplerError::Gone),
        }
    }

    /// Choose the eBPF set (takes effect now if interfaces are set, else at
    /// [`SamplerThread::set_ifaces`]).
    pub fn set_ebpf(&self, mode: EbpfMode, peer: Vec<EbpfIface>) -> Result<(), SamplerError> {
        self.send(Cmd::SetEbpf { mode, peer })
    }

    /// Watch these interfaces from now on; returns what the eBPF probes do then.
    pub async fn set_ifaces(&self, names: Vec<String>) -> Result<Option<EbpfStatus>, SamplerError> {
        let (reply, rx) = oneshot::channel();
        self.send(Cmd::SetIfaces { names, reply })?;
        rx.await.map_err(|_| SamplerError::Gone)
    }

    /// Start a test point (see [`Sampler::begin`]).
    pub async fn begin(
        &self,
        engine: Option<EngineView>,
        omit: Duration,
        interval: Duration,
    ) -> Result<(), SamplerError> {
        let (reply, rx) = oneshot::channel();
        self.send(Cmd::Begin {
            engine,
            omit,
            interval,
            reply,
        })?;
        rx.await.map_err(|_| SamplerError::Gone)
    }

    /// Ask for the next Sample; it arrives on the returned channel.
    pub fn request(&self) -> Result<oneshot::Receiver<Sample>, SamplerError> {
        let (reply, rx) = oneshot::channel();
        self.send(Cmd::Sample { reply })?;
        Ok(rx)
    }

    /// End the point: stop watching the engine; returns the point's latency.
    pub async fn end(&self) -> Result<Option<LatencySummary>, SamplerError> {
        let (reply, rx) = oneshot::channel();
        self.send(Cmd::End { reply })?;
        rx.await.map_err(|_| SamplerError::Gone)
    }
}

fn serve(s: &mut Sampler, cmd: Cmd) {
    // A requester that went away (its point was aborted) is not an error.
    match cmd {
        Cmd::SetEbpf { mode, peer } => s.set_ebpf(mode, peer),
        Cmd::SetIfaces { names, reply } => {
            s.set_ifaces(&names);
            let _ = reply.send(s.ebpf_status());
        }
        Cmd::Begin {
            engine,
            omit,
            interval,
            reply,
        } => {
            s.begin(engine, omit, interval);
            let _ = reply.send(());
        }
        Cmd::Sample { reply } => {
            let _ = reply.send(s.sample());
        }
        Cmd::End { reply } => {
            let latency = s.latency_total();
            s.end();
            let _ = reply.send(latency);
        }
    }
}

impl Drop for SamplerThread {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

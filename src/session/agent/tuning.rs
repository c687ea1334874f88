//! A tuning request on the agent, off the session loop: the work (files,
//! ioctls, netlink) runs on a named thread of its own while the session keeps
//! watching the control connection, a deadline and the agent's shutdown.
//!
//! One request must never hold the agent: a controller that goes away, the
//! deadline ([`TUNE_DEADLINE`], the idle limit) or SIGTERM ends the wait at
//! once, and the session with it. The thread is not joined (a blocking read
//! cannot be interrupted); it keeps a flag set until it returns, so no second
//! request runs beside it, and the process may exit while it still runs.
//! This module only waits; what a request does is [`crate::tune::peer`].

use super::control::Inbox;
use crate::session::proto::{Msg, ProtoError, IDLE_LIMIT};
use crate::tune::peer::TuneResponse;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long one tuning request may take before the session gives up on it.
pub const TUNE_DEADLINE: Duration = IDLE_LIMIT;

/// Why the wait for a tuning request ended without an answer: the session ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Abandoned(pub String);

/// Clears the "a tuning request runs" flag when the thread ends, however.
struct Running(Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Run `work` on thread `ws-agent-tune` and wait for its answer, the
/// controller leaving, `deadline` or `shutdown`, whichever comes first.
/// `running` is the agent-wide flag of a request still on its thread.
pub async fn run<F>(
    work: F,
    rx: &mut Inbox,
    deadline: Duration,
    shutdown: &CancellationToken,
    running: &Arc<AtomicBool>,
) -> Result<TuneResponse, Abandoned>
where
    F: FnOnce() -> TuneResponse + Send + 'static,
{
    if running.swap(true, Ordering::SeqCst) {
        return Ok(TuneResponse::Failed {
            error: "the agent is still working on a tuning request of an earlier session; \
                    try again in a minute"
                .into(),
        });
    }
    let (tx, mut done) = tokio::sync::oneshot::channel();
    let guard = Running(Arc::clone(running));
    let spawned = std::thread::Builder::new()
        .name("ws-agent-tune".into())
        .spawn(move || {
            // A panic in `work` drops the guard while unwinding.
            let answer = work();
            // The request is done: clear the flag before the answer leaves,
            // so a request that follows the answer at once (the next
            // session's) is never refused as "still working".
            drop(guard);
            let _ = tx.send(answer);
        });
    if let Err(e) = spawned {
        // The closure (and the guard in it) was dropped: the flag is clear.
        return Ok(TuneResponse::Failed {
            error: format!("the agent cannot start its tuning thread: {e}"),
        });
    }
    let until = tokio::time::Instant::now() + deadline;
    loop {
        tokio::select! {
            r = &mut done => {
                return Ok(r.unwrap_or_else(|_| TuneResponse::Failed {
                    error: "the tuning thread ended without an answer".into(),
                }));
            }
            _ = tokio::time::sleep_until(until) => {
                return Err(Abandoned(format!(
                    "the tuning request did not finish within {} s; it may still run on the agent (`wirescope profile rollback --peer` undoes an apply once it ends)",
                    deadline.as_secs()
                )));
            }
            _ = shutdown.cancelled() => {
                return Err(Abandoned("the agent is shutting down".into()));
            }
            m = rx.recv() => match m {
                None | Some(Err(ProtoError::Closed)) => {
                    return Err(Abandoned("controller closed the connection during a tuning request".into()));
                }
                Some(Err(e)) => return Err(Abandoned(e.to_string())),
                Some(Ok(Msg::Bye {})) => return Err(Abandoned("controller said bye during a tuning request".into())),
                Some(Ok(Msg::Ping {})) | Some(Ok(Msg::Tick {})) | Some(Ok(Msg::Stop {})) => {}
                Some(Ok(other)) => {
                    return Err(Abandoned(
                        ProtoError::Unexpected {
                            expected: "ping or bye while a tuning request runs",
                            got: other.kind(),
                        }
                        .to_string(),
                    ));
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    /// Work that blocks until the test lets it go (a stuck ioctl, a slow match).
    fn stuck() -> (
        impl FnOnce() -> TuneResponse + Send,
        std::sync::mpsc::Sender<()>,
    ) {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let work = move || {
            let _ = rx.recv();
            TuneResponse::Status { pending: None }
        };
        (work, tx)
    }

    const LONG: Duration = Duration::from_secs(3600);

    /// A Status request that must be answered (not abandoned).
    async fn status(rx: &mut Inbox, running: &Arc<AtomicBool>) -> TuneResponse {
        run(
            || TuneResponse::Status { pending: None },
            rx,
            LONG,
            &CancellationToken::new(),
            running,
        )
        .await
        .unwrap_or_else(|e| panic!("abandoned: {}", e.0))
    }

    #[tokio::test]
    async fn a_disconnect_ends_the_wait_and_the_flag_stays_until_the_work_ends() {
        let running = Arc::new(AtomicBool::new(false));
        let (work, release) = stuck();
        let (tx, mut rx) = mpsc::channel(4);
        tx.send(Ok(Msg::Ping {})).await.unwrap();
        drop(tx);
        let r = tokio::time::timeout(
            Duration::from_secs(30),
            run(work, &mut rx, LONG, &CancellationToken::new(), &running),
        )
        .await
        .expect("liveness bound");
        assert!(r.unwrap_err().0.contains("closed the connection"));
        // A second request while the first still runs is refused, not queued.
        let (_tx2, mut rx2) = mpsc::channel(1);
        let r = status(&mut rx2, &running).await;
        assert!(matches!(r, TuneResponse::Failed { ref error } if error.contains("still working")));
        release.send(()).unwrap();
        let t = std::time::Instant::now();
        while running.load(Ordering::SeqCst) {
            assert!(t.elapsed() < Duration::from_secs(30), "liveness bound");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let r = status(&mut rx2, &running).await;
        assert_eq!(r, TuneResponse::Status { pending: None });
    }

    /// The flag is clear when the answer arrives: back-to-back requests
    /// (one session's last, the next session's first) are all served. (The
    /// thread used to clear it after sending, so the next request could
    /// find it still set: seen in the integration suite under load.)
    #[tokio::test]
    async fn a_request_right_after_an_answer_is_served() {
        let running = Arc::new(AtomicBool::new(false));
        let (_tx, mut rx) = mpsc::channel(1);
        for i in 0..200 {
            let r = status(&mut rx, &running).await;
            assert_eq!(r, TuneResponse::Status { pending: None }, "request {i}");
            assert!(
                !running.load(Ordering::SeqCst),
                "request {i}: flag still set"
            );
        }
    }

    #[tokio::test]
    async fn shutdown_and_the_deadline_end_the_wait() {
        let running = Arc::new(AtomicBool::new(false));
        let (work, _keep) = stuck();
        let (_tx, mut rx) = mpsc::channel(1);
        let stop = CancellationToken::new();
        stop.cancel();
        let r = run(work, &mut rx, LONG, &stop, &running).await;
        assert_eq!(r.unwrap_err().0, "the agent is shutting down");

        let running = Arc::new(AtomicBool::new(false));
        let (work, _keep2) = stuck();
        let r = run(
            work,
            &mut rx,
            Duration::from_millis(50),
            &CancellationToken::new(),
            &running,
        )
        .await;
        assert!(r.unwrap_err().0.contains("did not finish within"));
    }
}

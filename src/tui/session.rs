//! The controller side of a live TUI session, as a tokio task.
//!
//! It connects once (the local pair's agent serves one controller), then
//! waits for [`SessionCmd`]s: `Start` runs every point of a plan through
//! [`Controller::run_point`], forwarding each interval to the UI as an
//! [`Event`]; `Stop` cancels the running point (it ends as interrupted,
//! engines stopped on both hosts); `Quit` stops and closes. The UI never
//! waits on this task: it only reads the event channel.

use super::event::Event;
use crate::cli::{ObserveArgs, TestPlan};
use crate::probe::ebpf::EbpfIface;
use crate::record::schema::EbpfHosts;
use crate::session::auth::Token;
use crate::session::controller::{Controller, EndReason, PointParams, RunEvent, Target};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What the UI asks of the session.
#[derive(Debug)]
pub enum SessionCmd {
    /// Run a plan.
    Start(Box<TestPlan>),
    /// Stop the running plan.
    Stop,
    /// Stop and close the session.
    Quit,
}

/// Capacity of the command channel (keys are slow; a full queue drops a key, not data).
pub const CMD_QUEUE: usize = 16;

/// Connect, then serve commands until `Quit` or the UI goes away.
pub async fn serve(
    target: Target,
    token: Token,
    observe: ObserveArgs,
    same_kernel: Vec<EbpfIface>,
    mut cmds: mpsc::Receiver<SessionCmd>,
    events: mpsc::Sender<Event>,
) {
    let mut ctl = match Controller::connect(target, &token).await {
        Ok(c) => c,
        Err(e) => {
            let _ = events.send(Event::Failed(e.to_string())).await;
            return;
        }
    };
    if events
        .send(Event::Connected(ctl.peer.clone()))
        .await
        .is_err()
    {
        ctl.close().await;
        return;
    }
    match ctl
        .configure_ebpf(observe.ebpf, &observe.ifaces, same_kernel)
        .await
    {
        Ok((local, peer)) => {
            let _ = events
                .send(Event::Ebpf(Box::new(EbpfHosts { local, peer })))
                .await;
        }
        Err(e) => {
            let _ = events.send(Event::Failed(e.to_string())).await;
            return;
        }
    }
    let mut pending = None;
    loop {
        let cmd = match pending.take() {
            Some(c) => c,
            None => match cmds.recv().await {
                Some(c) => c,
                None => break,
            },
        };
        match cmd {
            SessionCmd::Start(plan) => {
                match run_plan(&mut ctl, &plan, &observe, &mut cmds, &events).await {
                    Ok(next) => pending = next,
                    Err(()) => return,
                }
            }
            SessionCmd::Stop => {}
            SessionCmd::Quit => break,
        }
    }
    ctl.close().await;
}

/// Run every point; returns a command that arrived and must be handled next
/// (Quit), or Err when the session is unusable.
async fn run_plan(
    ctl: &mut Controller,
    plan: &TestPlan,
    observe: &ObserveArgs,
    cmds: &mut mpsc::Receiver<SessionCmd>,
    events: &mpsc::Sender<Event>,
) -> Result<Option<SessionCmd>, ()> {
    let cancel = CancellationToken::new();
    let mut after = None;
    for (_, spec) in plan.points() {
        let pp = PointParams {
            spec: Some(spec.clone()),
            interval: plan.interval,
            omit: plan.omit,
            time: plan.time,
            ifaces: observe.ifaces.clone(),
            peer_ifaces: observe.peer_ifaces.clone(),
        };
        let _ = events
            .send(Event::PointStarted(Box::new(spec), plan.time))
            .await;
        let (tx, mut rx) = mpsc::channel::<RunEvent>(64);
        let result = {
            let run = ctl.run_point(&pp, &tx, &cancel);
            tokio::pin!(run);
            let mut cmds_open = true;
            loop {
                tokio::select! {
                    r = &mut run => break r,
                    Some(ev) = rx.recv() => forward(ev, events).await,
                    c = cmds.recv(), if cmds_open => match c {
                        Some(SessionCmd::Stop) | Some(SessionCmd::Start(_)) => cancel.cancel(),
                        Some(SessionCmd::Quit) => { cancel.cancel(); after = Some(SessionCmd::Quit); }
                        None => { cancel.cancel(); cmds_open = false; after = Some(SessionCmd::Quit); }
                    },
                }
            }
        };
        drop(tx);
        while let Some(ev) = rx.recv().await {
            forward(ev, events).await;
        }
        match result {
            Ok(outcome) => {
                let end = outcome.end.clone();
                let _ = events.send(Event::PointDone(Box::new(outcome))).await;
                match end {
                    EndReason::Completed if !cancel.is_cancelled() => {}
                    EndReason::PeerLost(_) => return Err(()),
                    _ => break,
                }
            }
            Err(e) => {
                let _ = events.send(Event::Failed(e.to_string())).await;
                return Err(());
            }
        }
    }
    Ok(after)
}

async fn forward(ev: RunEvent, events: &mpsc::Sender<Event>) {
    let RunEvent::Interval { local, peer, .. } = ev;
    let _ = events
        .send(Event::Interval(local.map(Box::new), peer.map(Box::new)))
        .await;
}

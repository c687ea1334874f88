//! Apply a plan all-or-nothing, roll back, and finish or undo an apply that
//! was interrupted.
//!
//! Apply: resolve and validate everything first ([`plan`]; any problem and
//! nothing changes), take the lock, refuse while an interrupted apply is
//! pending, write the backup of every value that will change (durably, see
//! [`super::state`]), then write the settings in order. Each write is read
//! back: a driver that accepts a value but keeps another one counts as a
//! failure. On the first failure the settings already changed are restored
//! in reverse order and the error names the setting and the kernel's answer.
//!
//! Rollback restores the newest backup that is still in effect (or was
//! interrupted), in reverse order, to exactly the values it recorded, and
//! marks it rolled back; running it again goes one backup further back.
//!
//! Every change is reported as a [`Change`] (before → after), the record the
//! log will carry. This module prints nothing.

use super::error::{SettingFailure, TuneError};
use super::host::{Host, HostError};
use super::key::Key;
use super::profile::Profile;
use super::resolve::{resolve, Plan, Problem, ResolveOpts};
use super::state::{
    now_rfc3339, Backup, Entry, Event, Journal, Outcome, Phase, StateDir, Status, Step,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One setting changed on a host: the record for the log and the reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Change {
    /// What (`sysctl net.ipv4.tcp_rmem`).
    pub setting: String,
    /// The same, structured.
    pub key: Key,
    /// Value before.
    pub before: String,
    /// Value after (read back).
    pub after: String,
    /// The equivalent command.
    pub command: String,
}

/// What an apply (or finish) did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApplyReport {
    /// Backup ID (empty when nothing needed to change).
    pub backup: String,
    /// Profile name.
    pub profile: String,
    /// Host (`hostname`, network namespace).
    pub host: String,
    /// Every setting changed, in order.
    pub changes: Vec<Change>,
    /// Settings that already had their value.
    pub unchanged: usize,
    /// Settings this host does not have, skipped with `--skip-unsupported`.
    pub skipped: Vec<Problem>,
    /// Remarks from resolving.
    pub notes: Vec<String>,
}

/// What a rollback did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RollbackReport {
    /// Backup ID.
    pub backup: String,
    /// Profile name.
    pub profile: String,
    /// Host.
    pub host: String,
    /// Settings written back (before = value found, after = value restored).
    pub restored: Vec<Change>,
    /// Settings someone else changed after the apply (restored anyway).
    pub drifted: Vec<String>,
    /// Settings that already had their value from before the apply.
    pub already: usize,
}

/// Options of [`apply`].
#[derive(Default)]
pub struct ApplyOptions<'a> {
    /// Drop settings this host does not have instead of refusing the profile.
    pub skip_unsupported: bool,
    /// Called after each setting is written, read back and journaled, with
    /// (settings done, settings to change). The CLI's test hook uses it.
    pub after_step: Option<&'a dyn Fn(usize, usize)>,
}

/// Resolve and validate: a plan every setting of which this host can take.
/// Returns it with the settings skipped as unsupported (when asked to).
pub fn plan(
    profile: &Profile,
    host: &Host,
    opts: &ResolveOpts,
    skip_unsupported: bool,
) -> Result<(Plan, Vec<Problem>), TuneError> {
    let mut plan = resolve(profile, host, opts);
    let skipped = if skip_unsupported {
        plan.skip_unsupported()
    } else {
        Vec::new()
    };
    if !plan.problems.is_empty() {
        return Err(TuneError::Invalid {
            profile: plan.profile.clone(),
            host: plan.host.clone(),
            problems: plan.problems,
        });
    }
    Ok((plan, skipped))
}

fn host_name(host: &Host) -> String {
    if host.is_live() {
        format!(
            "{} ({})",
            crate::probe::system::HostInfo::current().hostname,
            host.namespace()
        )
    } else {
        host.describe()
    }
}

/// The error for a pending interrupted apply, if there is one.
pub fn check_interrupted(state: &StateDir) -> Result<(), TuneError> {
    let Some(e) = state.interrupted()? else {
        return Ok(());
    };
    let (phase, done) = match e.status() {
        Status::Interrupted { phase, done, .. } => (phase, done.len()),
        _ => (Phase::Apply, 0),
    };
    Err(TuneError::Interrupted {
        total: e.backup.steps.len(),
        id: e.backup.id,
        profile: e.backup.profile,
        created: e.backup.created,
        phase,
        done,
    })
}

/// Apply a profile (see the module docs).
pub fn apply(
    profile: &Profile,
    host: &Host,
    state: &StateDir,
    resolve_opts: &ResolveOpts,
    opts: &ApplyOptions,
) -> Result<ApplyReport, TuneError> {
    let (plan, skipped) = plan(profile, host, resolve_opts, opts.skip_unsupported)?;
    apply_plan(&plan, &profile.source, skipped, host, state, opts)
}

/// Apply a plan from [`plan`].
pub fn apply_plan(
    plan: &Plan,
    source: &str,
    skipped: Vec<Problem>,
    host: &Host,
    state: &StateDir,
    opts: &ApplyOptions,
) -> Result<ApplyReport, TuneError> {
    let _lock = state.lock()?;
    check_interrupted(state)?;
    let changes = plan.changes();
    let mut report = ApplyReport {
        backup: String::new(),
        profile: plan.profile.clone(),
        host: host_name(host),
        changes: Vec::new(),
        unchanged: plan.settings.len() - changes.len(),
        skipped,
        notes: plan.notes.clone(),
    };
    if changes.is_empty() {
        return Ok(report);
    }
    // Read the values again under the lock: the plan may be minutes old (a
    // confirmation prompt), and the backup must hold what is there now.
    let mut steps = Vec::with_capacity(changes.len());
    for p in &changes {
        let before = if p.new_queue {
            String::new()
        } else {
            host.read(&p.key)?
        };
        steps.push(Step {
            key: p.key.clone(),
            before,
            after: p.target.clone(),
            origin: p.origin.clone(),
            read_before: p.new_queue,
        });
    }
    let backup = Backup {
        version: 0,
        id: String::new(),
        created: String::new(),
        hostname: report.host.clone(),
        namespace: host.namespace(),
        profile: plan.profile.clone(),
        source: source.to_string(),
        steps,
        netns: host.netns_id(),
        command: super::origin::command_line(),
    };
    let (backup, mut journal) = state.create(backup)?;
    report.backup = backup.id.clone();
    journal.append(&Event::Begin {
        phase: Phase::Apply,
        at: now_rfc3339(),
    })?;
    let todo: Vec<usize> = (0..backup.steps.len()).collect();
    report.changes = run_steps(
        &backup,
        &todo,
        &mut BTreeMap::new(),
        host,
        &mut journal,
        opts,
    )?;
    Ok(report)
}

/// What a write left behind.
enum Written {
    /// The value reads back as written.
    Done(String),
    /// A feature the kernel keeps as requested until a feature it depends on
    /// is set too (ethtool's `[requested on]`): verified once all steps ran.
    Pending,
}

/// Why a write did not leave the value asked for.
#[derive(Debug, thiserror::Error)]
enum WriteError {
    /// The kernel refused the write (its answer).
    #[error(transparent)]
    Refused(#[from] HostError),
    /// Written, but reading it back failed.
    #[error("written, but it cannot be read back: {0}")]
    ReadBack(#[source] HostError),
    /// Written, and it reads back as something else.
    #[error("the kernel accepted {value} but the value is now {got} (the driver adjusted or refused it)")]
    Adjusted {
        /// What was written.
        value: String,
        /// What reads back.
        got: String,
    },
}

/// Write a value and read it back.
fn write_and_check(host: &Host, key: &Key, value: &str) -> Result<Written, WriteError> {
    host.write(key, value)?;
    let got = host.read(key).map_err(WriteError::ReadBack)?;
    if got == key.canonical(value) {
        return Ok(Written::Done(got));
    }
    if host.read_wanted(key).as_deref() == Some(value) {
        return Ok(Written::Pending);
    }
    Err(WriteError::Adjusted {
        value: value.to_string(),
        got,
    })
}

/// Re-read the settings left pending; the ones still not at their value, with the error.
fn settle(host: &Host, pending: &[(usize, &Key, &str)]) -> Vec<(usize, String)> {
    pending
        .iter()
        .filter_map(|(i, key, value)| match host.read(key) {
            Ok(v) if v == *value => None,
            Ok(v) => Some((
                *i,
                format!("the kernel keeps it {v} although {value} was requested: it depends on a setting that is not {value}"),
            )),
            Err(e) => Some((*i, format!("cannot be read back: {e}"))),
        })
        .collect()
}

/// Write `steps` in order; on failure restore every step of `backup` that
/// was started (these and earlier ones) and return the error.
fn run_steps(
    backup: &Backup,
    steps: &[usize],
    befores: &mut BTreeMap<usize, String>,
    host: &Host,
    journal: &mut Journal,
    opts: &ApplyOptions,
) -> Result<Vec<Change>, TuneError> {
    let total = backup.steps.len();
    let first = total - steps.len();
    let mut changes = Vec::new();
    let mut pending: Vec<(usize, &Key, &str)> = Vec::new();
    for (n, &i) in steps.iter().enumerate() {
        let step = &backup.steps[i];
        let mut before = step.before.clone();
        let mut read = None;
        if step.read_before {
            match host.read(&step.key) {
                Ok(v) => {
                    before = v.clone();
                    befores.insert(i, v.clone());
                    read = Some(v);
                }
                Err(e) => {
                    journal.append(&Event::Start {
                        step: i,
                        before: None,
                    })?;
                    return fail(
                        backup,
                        i,
                        i,
                        format!("cannot read it before writing: {e}"),
                        befores,
                        host,
                        journal,
                    );
                }
            }
        }
        journal.append(&Event::Start {
            step: i,
            before: read,
        })?;
        let value = if before == step.after {
            step.after.clone()
        } else {
            match write_and_check(host, &step.key, &step.after) {
                Ok(Written::Done(v)) => v,
                Ok(Written::Pending) => {
                    pending.push((i, &step.key, step.after.as_str()));
                    step.after.clone()
                }
                Err(e) => return fail(backup, i, i, e.to_string(), befores, host, journal),
            }
        };
        journal.append(&Event::Done {
            step: i,
            value: value.clone(),
        })?;
        if before != value {
            changes.push(Change {
                setting: step.key.to_string(),
                key: step.key.clone(),
                before,
                after: value,
                command: step.key.command(&step.after),
            });
        }
        if let Some(f) = opts.after_step {
            f(first + n + 1, total);
        }
    }
    if let Some((i, error)) = settle(host, &pending).into_iter().next() {
        let last = steps.last().copied().unwrap_or(i);
        return fail(backup, i, last, error, befores, host, journal);
    }
    journal.append(&Event::End {
        outcome: Outcome::Applied,
        at: now_rfc3339(),
    })?;
    Ok(changes)
}

/// Step `i` failed: journal it, restore every step up to `last` in reverse, and build the error.
fn fail(
    backup: &Backup,
    i: usize,
    last: usize,
    error: String,
    befores: &BTreeMap<usize, String>,
    host: &Host,
    journal: &mut Journal,
) -> Result<Vec<Change>, TuneError> {
    let step = &backup.steps[i];
    journal.append(&Event::Failed {
        step: i,
        error: error.clone(),
    })?;
    // Earlier steps, and this one in case the driver half-took it.
    let back: Vec<usize> = (0..=last).rev().collect();
    let done = restore(Phase::Restore, backup, &back, befores, host, journal)?;
    Err(TuneError::SettingFailed(Box::new(SettingFailure {
        index: i + 1,
        total: backup.steps.len(),
        setting: step.key.to_string(),
        value: step.after.clone(),
        command: step.key.command(&step.after),
        error,
        restored: done
            .restored
            .iter()
            .filter(|c| c.key != step.key)
            .map(|c| c.setting.clone())
            .collect(),
        restore_errors: done.failures,
        backup: backup.id.clone(),
    })))
}

/// What restoring did.
#[derive(Default)]
struct Restoration {
    /// Settings written back.
    restored: Vec<Change>,
    /// Settings that could not be, with the error.
    failures: Vec<String>,
    /// Settings found neither at the value before nor at the value the apply set.
    drifted: Vec<String>,
}

/// Restore `steps` (in the order given) to their values before, journaled as `phase`.
fn restore(
    phase: Phase,
    backup: &Backup,
    steps: &[usize],
    befores: &BTreeMap<usize, String>,
    host: &Host,
    journal: &mut Journal,
) -> Result<Restoration, TuneError> {
    journal.append(&Event::Begin {
        phase,
        at: now_rfc3339(),
    })?;
    let mut done = Restoration::default();
    let mut pending: Vec<(usize, &Key, &str)> = Vec::new();
    for &i in steps {
        let step = &backup.steps[i];
        let before = if step.read_before {
            match befores.get(&i) {
                Some(b) => b.as_str(),
                None => continue, // never reached: nothing to undo
            }
        } else {
            step.before.as_str()
        };
        let now = match host.read(&step.key) {
            // The queue went away with the channel it belonged to: so did its setting.
            Err(e) if step.read_before && e.is_unsupported() => {
                journal.append(&Event::Restored {
                    step: i,
                    value: String::new(),
                })?;
                continue;
            }
            r => r.ok(),
        };
        if now.as_deref() == Some(before) {
            journal.append(&Event::Restored {
                step: i,
                value: before.to_string(),
            })?;
            continue;
        }
        if let Some(n) = &now {
            if *n != step.after {
                done.drifted
                    .push(format!("{} (was {n}, set {})", step.key, step.after));
            }
        }
        let change = |after: String| Change {
            setting: step.key.to_string(),
            key: step.key.clone(),
            before: now.clone().unwrap_or_default(),
            after,
            command: step.key.command(before),
        };
        match write_and_check(host, &step.key, before) {
            Ok(Written::Done(value)) => {
                journal.append(&Event::Restored {
                    step: i,
                    value: value.clone(),
                })?;
                done.restored.push(change(value));
            }
            Ok(Written::Pending) => {
                pending.push((i, &step.key, before));
                done.restored.push(change(before.to_string()));
            }
            Err(e) => {
                let error = e.to_string();
                journal.append(&Event::RestoreFailed {
                    step: i,
                    error: error.clone(),
                })?;
                done.failures
                    .push(format!("{} = {before}: {error}", step.key));
            }
        }
    }
    settle_restores(host, backup, &pending, &mut done, journal)?;
    journal.append(&Event::End {
        outcome: match (done.failures.is_empty(), phase) {
            (false, _) => Outcome::Incomplete,
            (true, Phase::Restore) => Outcome::Restored,
            (true, _) => Outcome::RolledBack,
        },
        at: now_rfc3339(),
    })?;
    Ok(done)
}

/// Wait for the restores that take effect later (`pending`: step, key,
/// value) and journal each: restored, or failed with its error (then it is
/// taken out of `done.restored` and its error goes to `done.failures`).
fn settle_restores(
    host: &Host,
    backup: &Backup,
    pending: &[(usize, &Key, &str)],
    done: &mut Restoration,
    journal: &mut Journal,
) -> Result<(), TuneError> {
    let stuck = settle(host, pending);
    for (i, _, value) in pending {
        match stuck.iter().find(|(j, _)| j == i) {
            Some((_, error)) => {
                journal.append(&Event::RestoreFailed {
                    step: *i,
                    error: error.clone(),
                })?;
                done.failures
                    .push(format!("{} = {value}: {error}", backup.steps[*i].key));
                done.restored.retain(|c| c.key != backup.steps[*i].key);
            }
            None => journal.append(&Event::Restored {
                step: *i,
                value: value.to_string(),
            })?,
        }
    }
    Ok(())
}

/// Is this process where the backup was taken? With the namespace's
/// identity recorded, inode, device, boot and cookie must all match (an
/// inode alone is reused by a namespace made later); older backups compare
/// the `net:[inode]` text.
fn same_namespace(e: &Entry, host: &Host) -> Result<(), TuneError> {
    let ours = host.namespace();
    let same = match (&e.backup.netns, host.netns_id()) {
        (Some(theirs), Some(now)) => theirs.same(&now),
        _ => e.backup.namespace == ours,
    };
    if !same {
        let describe = |n: Option<&super::origin::NetnsId>, text: &str| {
            n.map_or_else(|| text.to_string(), |n| n.describe())
        };
        return Err(TuneError::WrongNamespace {
            id: e.backup.id.clone(),
            theirs: describe(e.backup.netns.as_ref(), &e.backup.namespace),
            ours: describe(host.netns_id().as_ref(), &ours),
        });
    }
    Ok(())
}

/// Roll back the newest backup still in effect, or the interrupted one (undo).
pub fn rollback(host: &Host, state: &StateDir) -> Result<RollbackReport, TuneError> {
    let _lock = state.lock()?;
    let entry = state
        .entries()?
        .into_iter()
        .find(|e| e.status().in_effect())
        .ok_or_else(|| TuneError::NothingToRollBack {
            dir: state.path().display().to_string(),
        })?;
    same_namespace(&entry, host)?;
    let steps: Vec<usize> = match entry.status() {
        // Only what an interrupted apply may have touched; the rest was never written.
        Status::Interrupted {
            phase: Phase::Apply | Phase::Finish,
            started,
            ..
        } => {
            let mut s = started;
            s.sort_unstable();
            s.into_iter().rev().collect()
        }
        _ => (0..entry.backup.steps.len()).rev().collect(),
    };
    let mut journal = state.journal(&entry)?;
    let befores = entry.befores();
    let done = restore(
        Phase::Rollback,
        &entry.backup,
        &steps,
        &befores,
        host,
        &mut journal,
    )?;
    if !done.failures.is_empty() {
        return Err(TuneError::RollbackIncomplete {
            id: entry.backup.id,
            restored: done.restored.len(),
            failures: done.failures,
        });
    }
    Ok(RollbackReport {
        backup: entry.backup.id,
        profile: entry.backup.profile,
        host: host_name(host),
        already: steps.len() - done.restored.len(),
        restored: done.restored,
        drifted: done.drifted,
    })
}

/// Complete an interrupted apply: write the settings it had not confirmed.
/// An interrupted restore or rollback is completed as a rollback.
pub fn finish(
    host: &Host,
    state: &StateDir,
    opts: &ApplyOptions,
) -> Result<ApplyReport, TuneError> {
    let entry = {
        let _lock = state.lock()?;
        state
            .interrupted()?
            .ok_or_else(|| TuneError::NothingToFinish {
                dir: state.path().display().to_string(),
            })?
    };
    same_namespace(&entry, host)?;
    let Status::Interrupted { phase, done, .. } = entry.status() else {
        return Err(TuneError::NothingToFinish {
            dir: state.path().display().to_string(),
        });
    };
    let mut report = ApplyReport {
        backup: entry.backup.id.clone(),
        profile: entry.backup.profile.clone(),
        host: host_name(host),
        changes: Vec::new(),
        unchanged: 0,
        skipped: Vec::new(),
        notes: Vec::new(),
    };
    if matches!(phase, Phase::Restore | Phase::Rollback) {
        let r = rollback(host, state)?;
        report.notes.push(format!(
            "the interrupted {} was completed: {} setting(s) restored",
            if phase == Phase::Restore {
                "restore"
            } else {
                "rollback"
            },
            r.restored.len()
        ));
        report.changes = r.restored;
        return Ok(report);
    }
    let _lock = state.lock()?;
    let todo: Vec<usize> = (0..entry.backup.steps.len())
        .filter(|i| !done.contains(i))
        .collect();
    let mut journal = state.journal(&entry)?;
    journal.append(&Event::Begin {
        phase: Phase::Finish,
        at: now_rfc3339(),
    })?;
    report.changes = run_steps(
        &entry.backup,
        &todo,
        &mut entry.befores(),
        host,
        &mut journal,
        opts,
    )?;
    report.unchanged = done.len();
    Ok(report)
}

/// An interrupted apply, as `wirescope check` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pending {
    /// Backup ID.
    pub backup: String,
    /// Profile name.
    pub profile: String,
    /// When the apply started.
    pub created: String,
    /// Host as the backup names it.
    pub host: String,
    /// Settings confirmed done.
    pub done: usize,
    /// Settings in the apply.
    pub total: usize,
    /// Settings that may be half-way (started, not confirmed).
    pub uncertain: Vec<String>,
    /// What to run.
    pub advice: String,
}

/// The interrupted apply in `state`, if any: for `wirescope check`, the TUI
/// and the agent to report before anything else runs.
pub fn pending(state: &StateDir) -> Result<Option<Pending>, TuneError> {
    let Some(e) = state.interrupted()? else {
        return Ok(None);
    };
    let (done, started) = match e.status() {
        Status::Interrupted { done, started, .. } => (done, started),
        _ => (Vec::new(), Vec::new()),
    };
    Ok(Some(Pending {
        backup: e.backup.id.clone(),
        profile: e.backup.profile.clone(),
        created: e.backup.created.clone(),
        host: e.backup.hostname.clone(),
        done: done.len(),
        total: e.backup.steps.len(),
        uncertain: started
            .iter()
            .filter(|s| !done.contains(s))
            .filter_map(|s| e.backup.steps.get(*s))
            .map(|s| s.key.to_string())
            .collect(),
        advice: "run `wirescope profile rollback` to restore the values before it, or `wirescope profile finish` to complete it".into(),
    }))
}

//! Errors of the tuning commands, each saying what to do next.

use super::host::HostError;
use super::profile::ProfileError;
use super::resolve::Problem;
use super::state::{Phase, StateError};

/// Why a tuning operation did not happen (or did not complete).
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// The profile text is wrong.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// No profile of that name.
    #[error("no profile named '{name}': {hint}")]
    NotFound {
        /// What was asked for.
        name: String,
        /// Where it was looked for.
        hint: String,
    },
    /// The host cannot take some settings: nothing was changed.
    #[error(
        "profile {profile} cannot be applied on {host}; nothing was changed:\n{}",
        list(problems)
    )]
    Invalid {
        /// Profile name.
        profile: String,
        /// Host description.
        host: String,
        /// Every problem.
        problems: Vec<Problem>,
    },
    /// An earlier apply was interrupted: finish or undo it first.
    #[error("an earlier {} of profile {profile} (backup {id}, {created}) was interrupted after {done} of {total} settings; \
             run `wirescope profile rollback` to undo it or `wirescope profile finish` to complete it", phase_name(*phase))]
    Interrupted {
        /// Backup ID.
        id: String,
        /// Profile name.
        profile: String,
        /// When the backup was made.
        created: String,
        /// The phase that was running.
        phase: Phase,
        /// Settings confirmed done.
        done: usize,
        /// Settings in the backup.
        total: usize,
    },
    /// A setting failed; the ones already changed were restored.
    #[error("{0}")]
    SettingFailed(Box<SettingFailure>),
    /// Nothing to roll back.
    #[error("no applied profile to roll back in {dir}")]
    NothingToRollBack {
        /// The state directory.
        dir: String,
    },
    /// Nothing interrupted to finish.
    #[error("no interrupted apply to finish in {dir}")]
    NothingToFinish {
        /// The state directory.
        dir: String,
    },
    /// The backup belongs to another network namespace (or directory).
    #[error("backup {id} was taken in {theirs}, this process runs in {ours}; run the command in that network namespace (ip netns exec NAME ...), or, if that namespace is gone, discard the backup with `wirescope profile rollback --discard {id}`")]
    WrongNamespace {
        /// Backup ID.
        id: String,
        /// Where it was taken.
        theirs: String,
        /// Where we are.
        ours: String,
    },
    /// A rollback left some settings changed.
    #[error("rollback of backup {id} restored {restored} setting(s) but could not restore: {}; run `wirescope profile rollback` again after fixing the cause", failures.join("; "))]
    RollbackIncomplete {
        /// Backup ID.
        id: String,
        /// How many were restored.
        restored: usize,
        /// The settings that failed, with the error.
        failures: Vec<String>,
    },
    /// The state directory failed.
    #[error(transparent)]
    State(#[from] StateError),
    /// Reading or writing the host failed outside a plan.
    #[error(transparent)]
    Host(#[from] HostError),
    /// A file could not be read or written.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Which setting failed, with what, and what was restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingFailure {
    /// 1-based position among the settings that change.
    pub index: usize,
    /// How many settings change.
    pub total: usize,
    /// The setting (`sysctl net.ipv4.tcp_congestion_control`).
    pub setting: String,
    /// The value that was refused.
    pub value: String,
    /// The equivalent command.
    pub command: String,
    /// The kernel's error.
    pub error: String,
    /// Settings restored to their value before.
    pub restored: Vec<String>,
    /// Settings that could not be restored (with the error).
    pub restore_errors: Vec<String>,
    /// Backup ID (keeps the values before).
    pub backup: String,
}

impl std::fmt::Display for SettingFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "setting {} of {} failed: {} = {} ({}): {}; {}",
            self.index,
            self.total,
            self.setting,
            self.value,
            self.command,
            self.error,
            restored_text(&self.restored, &self.restore_errors)
        )
    }
}

fn list(problems: &[Problem]) -> String {
    let mut s = problems
        .iter()
        .map(|p| format!("  - {p}"))
        .collect::<Vec<_>>()
        .join("\n");
    let n = problems.iter().filter(|p| p.unsupported).count();
    if n > 0 {
        s.push_str(&format!(
            "\n{n} of these are settings this host does not have; --skip-unsupported applies the rest"
        ));
    }
    s
}

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Apply => "apply",
        Phase::Finish => "finish",
        Phase::Restore => "restore after a failed apply",
        Phase::Rollback => "rollback",
    }
}

fn restored_text(restored: &[String], errors: &[String]) -> String {
    if errors.is_empty() {
        if restored.is_empty() {
            "nothing had been changed before it; the host is as it was".into()
        } else {
            format!(
                "restored the {} setting(s) changed before it ({}); the host is as it was",
                restored.len(),
                restored.join(", ")
            )
        }
    } else {
        format!(
            "restored {} setting(s) but COULD NOT restore: {}; run `wirescope profile rollback` after fixing the cause",
            restored.len(),
            errors.join("; ")
        )
    }
}

//! The state directory: durable backups, the journal of every apply and
//! rollback, the lock, and saved profiles.
//!
//! ```text
//! STATE/                    /var/lib/wirescope, $WIRESCOPE_STATE_DIR or --state-dir
//!   lock                    flock(2): one apply/rollback at a time
//!   profiles/NAME.toml      `profile save NAME`
//!   backups/ID/backup.json  every value an apply will change, before → after (written first)
//!   backups/ID/journal.jsonl  one event per line: begin, start i, done i, failed i, restored i, end
//! ```
//!
//! The backup is written to a temporary file, fsynced, renamed into place
//! and the directory fsynced, all before the first setting changes; every
//! journal line is fsynced before the next setting is touched. So whatever
//! moment the process dies at (kill -9, power loss), the next command finds
//! a backup whose journal has no `end` and knows which settings may have
//! changed: [`Status::Interrupted`]. IDs sort by time (`2025-01-31T12-00-00.123Z-PID`).
//!
//! Root restores what a backup says, so the record is not trusted blindly:
//! the directory, `backups/` and each backup must belong to root or the
//! invoking user and be writable by no one else, no symlink on the way
//! ([`crate::probe::trusted`], the token file's check); backup.json and the
//! journal are read with a size bound and every field is checked as strictly
//! as a profile's ([`Backup::validate`]) before anything acts on it.
//!
//! This module knows nothing about how settings are written; it only keeps
//! the record (see [`super::apply`]).

use super::key::{check_value, Key, RecordError};
use super::origin::NetnsId;
use crate::probe::trusted::{check_private, read_bounded, ROOT_TRUSTED};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Write as _};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Default state directory.
pub const DEFAULT_DIR: &str = "/var/lib/wirescope";
/// Environment variable that overrides it.
pub const ENV_DIR: &str = "WIRESCOPE_STATE_DIR";

/// The state directory without a flag or variable: [`DEFAULT_DIR`] for
/// root; for another user (who cannot write there) `$XDG_STATE_HOME/wirescope`,
/// else `~/.local/state/wirescope`, as the XDG base directories say.
fn default_dir() -> PathBuf {
    if nix::unistd::geteuid().is_root() {
        return PathBuf::from(DEFAULT_DIR);
    }
    let abs = |v: std::ffi::OsString| {
        let p = PathBuf::from(v);
        p.is_absolute().then_some(p)
    };
    std::env::var_os("XDG_STATE_HOME")
        .and_then(abs)
        .map(|p| p.join("wirescope"))
        .or_else(|| {
            std::env::var_os("HOME")
                .and_then(abs)
                .map(|h| h.join(".local/state/wirescope"))
        })
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR))
}
/// Version of backup.json.
pub const BACKUP_VERSION: u32 = 1;
/// Largest backup.json or journal read.
pub const MAX_RECORD: u64 = 8 << 20;
/// Most settings one backup may hold.
pub const MAX_STEPS: usize = 65_536;

/// A state-directory operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A file or directory could not be used.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// Where.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A backup or journal does not parse.
    #[error("{}: {detail}; move the directory aside if it is damaged", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A backup or journal parses but holds what no profile could have made.
    #[error("{}: {source}; move the directory aside if it is damaged", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: RecordError,
    },
    /// Someone else could have written the directory or a backup in it.
    #[error("{}: {reason}; someone else could have planted a backup there, so wirescope does not act on it; fix it with `{fix}` or use another --state-dir", path.display())]
    Untrusted {
        /// The directory or file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
        /// The command that fixes it.
        fix: String,
    },
    /// No backup has this ID.
    #[error("no backup {id} in {}; `wirescope profile rollback --list` shows them", dir.display())]
    NoSuchBackup {
        /// The ID asked for.
        id: String,
        /// The backups directory.
        dir: PathBuf,
    },
    /// Another wirescope holds the lock.
    #[error("another wirescope is applying or rolling back settings (lock {} is held); wait for it to finish", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
}

/// One setting in a backup: its value before and the value the apply sets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// What.
    pub key: Key,
    /// Value before the apply (what rollback restores); empty when
    /// `read_before` (then the journal's `start` event holds it).
    pub before: String,
    /// Value the apply sets.
    pub after: String,
    /// Where in the profile it came from.
    pub origin: String,
    /// The setting belongs to a queue an earlier step creates (more
    /// channels): its value is read, and journaled, right before the write.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_before: bool,
}

/// What backup.json holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Backup {
    /// File format version.
    pub version: u32,
    /// ID (directory name).
    pub id: String,
    /// When (RFC 3339, UTC).
    pub created: String,
    /// Host name.
    pub hostname: String,
    /// Network namespace (`net:[4026531840]`) or `dir:PATH`.
    pub namespace: String,
    /// Profile name.
    pub profile: String,
    /// Where the profile was read from.
    pub source: String,
    /// The settings, in apply order.
    pub steps: Vec<Step>,
    /// The namespace's identity beyond its inode (absent in older backups
    /// and for directories).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<NetnsId>,
    /// The command that made it, for listings.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
}

/// Bounded text without control characters.
fn check_text(what: &'static str, t: &str, max: usize) -> Result<(), RecordError> {
    if t.len() > max {
        let len = t.len();
        return Err(RecordError::TextTooLong { what, len, max });
    }
    if t.chars().any(char::is_control) {
        let text = t.to_string();
        return Err(RecordError::TextControl { what, text });
    }
    Ok(())
}

impl Backup {
    /// Check every field of a backup read from `dir_name`, as strictly as a
    /// profile is checked: its ID is its directory's name, texts are bounded,
    /// keys name what a profile may name, values are bounded single lines.
    pub fn validate(&self, dir_name: &str) -> Result<(), RecordError> {
        if self.version != BACKUP_VERSION {
            return Err(RecordError::Version {
                found: self.version,
                reads: BACKUP_VERSION,
            });
        }
        if self.id != dir_name {
            return Err(RecordError::Id {
                id: self.id.clone(),
                dir: dir_name.to_string(),
            });
        }
        check_text("created", &self.created, 64)?;
        check_text("hostname", &self.hostname, 255)?;
        check_text("namespace", &self.namespace, 4096)?;
        check_text("profile", &self.profile, 256)?;
        check_text("source", &self.source, 4096)?;
        check_text("command", &self.command, 4096)?;
        if let Some(n) = &self.netns {
            n.validate()?;
        }
        if self.steps.len() > MAX_STEPS {
            return Err(RecordError::TooManySteps {
                n: self.steps.len(),
                max: MAX_STEPS,
            });
        }
        for (i, st) in self.steps.iter().enumerate() {
            let at = |e: RecordError| RecordError::Setting {
                index: i + 1,
                key: st.key.to_string(),
                source: Box::new(e),
            };
            st.key.validate().map_err(at)?;
            check_value(&st.before).map_err(at)?;
            check_value(&st.after).map_err(at)?;
            check_text("origin", &st.origin, 512).map_err(at)?;
        }
        Ok(())
    }
}

/// What a journal line records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// An apply (or `finish`) starts.
    Begin {
        /// `apply`, `finish`, `restore` (after a failure), `rollback`.
        phase: Phase,
        /// When.
        at: String,
    },
    /// About to write step `step` (0-based).
    Start {
        /// Index into the backup's steps.
        step: usize,
        /// The value read just before the write, for `read_before` steps.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before: Option<String>,
    },
    /// Step written and read back.
    Done {
        /// Index.
        step: usize,
        /// Value read back.
        value: String,
    },
    /// Step failed.
    Failed {
        /// Index.
        step: usize,
        /// The kernel's error.
        error: String,
    },
    /// Step restored to its `before` value.
    Restored {
        /// Index.
        step: usize,
        /// Value read back.
        value: String,
    },
    /// Restoring a step failed.
    RestoreFailed {
        /// Index.
        step: usize,
        /// The kernel's error.
        error: String,
    },
    /// The phase is over.
    End {
        /// How it ended.
        outcome: Outcome,
        /// When.
        at: String,
    },
}

/// The phases a journal records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Applying the profile.
    Apply,
    /// Completing an interrupted apply.
    Finish,
    /// Undoing a failed apply.
    Restore,
    /// `profile rollback` (or undoing an interrupted apply).
    Rollback,
}

/// How a phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every step applied.
    Applied,
    /// A step failed and every changed one was restored.
    Restored,
    /// Rolled back.
    RolledBack,
    /// Some steps could not be restored (the backup stays eligible for rollback).
    Incomplete,
}

/// Where a backup stands, from its journal.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// The last phase never ended: the process died in the middle.
    Interrupted {
        /// The phase that was running.
        phase: Phase,
        /// Steps that were started in the apply/finish phases (they may have changed).
        started: Vec<usize>,
        /// Steps confirmed done.
        done: Vec<usize>,
    },
    /// Applied and in effect: `rollback` restores it.
    Applied,
    /// A failed apply was restored: nothing to undo.
    Restored,
    /// Rolled back: nothing to undo.
    RolledBack,
    /// A restore or rollback left some steps changed: `rollback` retries.
    Incomplete,
}

impl Status {
    /// Would `rollback` restore it (applied, incomplete or interrupted)?
    pub fn in_effect(&self) -> bool {
        matches!(
            self,
            Status::Applied | Status::Incomplete | Status::Interrupted { .. }
        )
    }
}

/// A backup with its journal.
#[derive(Debug, Clone)]
pub struct Entry {
    /// backup.json.
    pub backup: Backup,
    /// The journal's events.
    pub events: Vec<Event>,
    /// Its directory.
    pub dir: PathBuf,
}

impl Entry {
    /// The value each `read_before` step had just before its write, from the journal.
    pub fn befores(&self) -> std::collections::BTreeMap<usize, String> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Start {
                    step,
                    before: Some(b),
                } => Some((*step, b.clone())),
                _ => None,
            })
            .collect()
    }

    /// Where it stands.
    pub fn status(&self) -> Status {
        let mut phase = None;
        let mut started = Vec::new();
        let mut done = Vec::new();
        let mut last_end = None;
        for e in &self.events {
            match e {
                Event::Begin { phase: p, .. } => {
                    phase = Some(*p);
                    last_end = None;
                }
                Event::Start { step, .. }
                    if matches!(phase, Some(Phase::Apply | Phase::Finish))
                        && !started.contains(step) =>
                {
                    started.push(*step)
                }
                Event::Done { step, .. } if !done.contains(step) => done.push(*step),
                Event::End { outcome, .. } => last_end = Some(*outcome),
                _ => {}
            }
        }
        match last_end {
            Some(Outcome::Applied) => Status::Applied,
            Some(Outcome::Restored) => Status::Restored,
            Some(Outcome::RolledBack) => Status::RolledBack,
            Some(Outcome::Incomplete) => Status::Incomplete,
            None => Status::Interrupted {
                // A backup without any journal line: written, nothing touched yet.
                phase: phase.unwrap_or(Phase::Apply),
                started,
                done,
            },
        }
    }
}

/// The state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

fn invalid(path: &Path) -> impl FnOnce(RecordError) -> StateError + '_ {
    move |source| StateError::Invalid {
        path: path.to_path_buf(),
        source,
    }
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StateError + 'a {
    move |source| StateError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

fn fsync_dir(dir: &Path) -> Result<(), StateError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("fsync directory", dir))
}

/// Now in RFC 3339 with milliseconds, UTC.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

impl StateDir {
    /// The directory given, else `$WIRESCOPE_STATE_DIR`, else `/var/lib/wirescope`.
    pub fn resolve(flag: Option<&Path>) -> StateDir {
        let root = flag
            .map(Path::to_path_buf)
            .or_else(|| {
                std::env::var_os(ENV_DIR)
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
            .unwrap_or_else(default_dir);
        StateDir { root }
    }

    /// A state directory at `root`.
    pub fn at(root: impl Into<PathBuf>) -> StateDir {
        StateDir { root: root.into() }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Saved profiles.
    pub fn profiles_dir(&self) -> PathBuf {
        self.root.join("profiles")
    }

    fn backups_dir(&self) -> PathBuf {
        self.root.join("backups")
    }

    fn ensure(&self, dir: &Path) -> Result<(), StateError> {
        // 0755 whatever the umask grants: a group-writable directory would
        // be refused by the next command (see the module docs).
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(io_err("create directory", dir))
    }

    /// Is `path` owned by root or us and writable by no one else (and not a symlink)?
    fn trusted(&self, path: &Path) -> Result<(), StateError> {
        check_private(path, ROOT_TRUSTED)
            .map(|_| ())
            .map_err(|e| StateError::Untrusted {
                path: path.to_path_buf(),
                reason: e.to_string(),
                fix: e.fix(path),
            })
    }

    /// The state directory and `backups/`, when they exist, are trusted.
    fn check_dirs(&self) -> Result<bool, StateError> {
        for d in [&self.root, &self.backups_dir()] {
            match std::fs::symlink_metadata(d) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
                Err(e) => return Err(io_err("examine", d)(e)),
                Ok(_) => self.trusted(d)?,
            }
        }
        Ok(true)
    }

    /// Take the lock without waiting: held while applying or rolling back,
    /// released on drop.
    pub fn lock(&self) -> Result<nix::fcntl::Flock<File>, StateError> {
        self.ensure(&self.root)?;
        self.trusted(&self.root)?;
        let path = self.root.join("lock");
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        let how = nix::fcntl::FlockArg::LockExclusiveNonblock;
        nix::fcntl::Flock::lock(f, how).map_err(|(_, e)| match e {
            nix::errno::Errno::EWOULDBLOCK => StateError::Locked { path },
            e => StateError::Io {
                op: "lock",
                path,
                source: io::Error::from(e),
            },
        })
    }

    /// A new backup ID: the time and this process.
    fn new_id(&self) -> String {
        format!("{}-{}", now_rfc3339().replace(':', "-"), std::process::id())
    }

    /// Write a backup durably and open its journal (see the module docs).
    /// `backup.id` and `backup.created` are filled in here.
    pub fn create(&self, mut backup: Backup) -> Result<(Backup, Journal), StateError> {
        let base = self.backups_dir();
        self.ensure(&base)?;
        self.check_dirs()?;
        let mut id = self.new_id();
        let mut dir = base.join(&id);
        let mut n = 1;
        while let Err(e) = std::fs::DirBuilder::new().mode(0o755).create(&dir) {
            if e.kind() != io::ErrorKind::AlreadyExists || n > 100 {
                return Err(io_err("create directory", &dir)(e));
            }
            n += 1;
            id = format!("{}-{n}", self.new_id());
            dir = base.join(&id);
        }
        backup.id = id;
        backup.created = now_rfc3339();
        backup.version = BACKUP_VERSION;
        let tmp = dir.join("backup.json.tmp");
        let fin = dir.join("backup.json");
        let text = serde_json::to_vec_pretty(&backup).map_err(|e| StateError::Corrupt {
            path: fin.clone(),
            detail: e.to_string(),
        })?;
        {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o644)
                .open(&tmp)
                .map_err(io_err("create", &tmp))?;
            f.write_all(&text).map_err(io_err("write", &tmp))?;
            f.sync_all().map_err(io_err("fsync", &tmp))?;
        }
        std::fs::rename(&tmp, &fin).map_err(io_err("rename", &tmp))?;
        let jpath = dir.join("journal.jsonl");
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o644)
            .open(&jpath)
            .map_err(io_err("create", &jpath))?;
        file.sync_all().map_err(io_err("fsync", &jpath))?;
        fsync_dir(&dir)?;
        fsync_dir(&base)?;
        Ok((backup, Journal { file, path: jpath }))
    }

    /// Every backup, newest first. Every one is checked (see the module
    /// docs): one that fails is an error naming it, never skipped silently.
    pub fn entries(&self) -> Result<Vec<Entry>, StateError> {
        if !self.check_dirs()? {
            return Ok(Vec::new());
        }
        let base = self.backups_dir();
        let rd = std::fs::read_dir(&base).map_err(io_err("read directory", &base))?;
        let mut names: Vec<String> = rd
            .flatten()
            .filter(|e| {
                std::fs::symlink_metadata(e.path().join("backup.json")).is_ok()
                    || e.file_type().is_ok_and(|t| t.is_symlink())
            })
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.reverse();
        names.iter().map(|n| self.entry(&base.join(n))).collect()
    }

    fn entry(&self, dir: &Path) -> Result<Entry, StateError> {
        self.trusted(dir)?;
        let bpath = dir.join("backup.json");
        self.trusted(&bpath)?;
        let corrupt = |path: &Path, detail: String| StateError::Corrupt {
            path: path.to_path_buf(),
            detail,
        };
        let text = read_bounded(&bpath, MAX_RECORD).map_err(|e| corrupt(&bpath, e.to_string()))?;
        let backup: Backup =
            serde_json::from_str(&text).map_err(|e| corrupt(&bpath, e.to_string()))?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        backup.validate(&name).map_err(invalid(&bpath))?;
        let jpath = dir.join("journal.jsonl");
        let events = match std::fs::symlink_metadata(&jpath) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_err("read", &jpath)(e)),
            Ok(_) => {
                self.trusted(&jpath)?;
                let text =
                    read_bounded(&jpath, MAX_RECORD).map_err(|e| corrupt(&jpath, e.to_string()))?;
                let events = parse_journal(text.as_bytes(), &jpath)?;
                check_events(&events, backup.steps.len()).map_err(invalid(&jpath))?;
                events
            }
        };
        Ok(Entry {
            backup,
            events,
            dir: dir.to_path_buf(),
        })
    }

    /// Remove a backup without restoring it: the one with `id`, else the
    /// newest one a rollback would restore. Returns its ID and, when it
    /// still reads as a valid backup, what it held. A backup named by ID is
    /// removed even when it no longer reads (damaged, or of another
    /// version): that is the way out for it.
    pub fn discard(&self, id: Option<&str>) -> Result<(String, Option<Backup>), StateError> {
        let _lock = self.lock()?;
        let Some(id) = id else {
            let e = self
                .entries()?
                .into_iter()
                .find(|e| e.status().in_effect())
                .ok_or_else(|| StateError::NoSuchBackup {
                    id: "in effect".into(),
                    dir: self.backups_dir(),
                })?;
            std::fs::remove_dir_all(&e.dir).map_err(io_err("remove", &e.dir))?;
            fsync_dir(&self.backups_dir())?;
            return Ok((e.backup.id.clone(), Some(e.backup)));
        };
        let missing = || StateError::NoSuchBackup {
            id: id.to_string(),
            dir: self.backups_dir(),
        };
        let plain = !id.is_empty()
            && !id.starts_with('.')
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if !plain || !self.check_dirs()? {
            return Err(missing());
        }
        let dir = self.backups_dir().join(id);
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            _ => return Err(missing()),
        }
        self.trusted(&dir)?;
        let backup = self.entry(&dir).ok().map(|e| e.backup);
        std::fs::remove_dir_all(&dir).map_err(io_err("remove", &dir))?;
        fsync_dir(&self.backups_dir())?;
        Ok((id.to_string(), backup))
    }

    /// The newest backup whose journal never ended (the process died), if any.
    pub fn interrupted(&self) -> Result<Option<Entry>, StateError> {
        Ok(self
            .entries()?
            .into_iter()
            .find(|e| matches!(e.status(), Status::Interrupted { .. })))
    }

    /// Open the journal of an existing backup to append.
    pub fn journal(&self, entry: &Entry) -> Result<Journal, StateError> {
        let path = entry.dir.join("journal.jsonl");
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        Ok(Journal { file, path })
    }
}

/// Every event names a step of the backup and carries a bounded value.
fn check_events(events: &[Event], steps: usize) -> Result<(), RecordError> {
    for e in events {
        let (step, value) = match e {
            Event::Start { step, before } => (Some(*step), before.as_deref()),
            Event::Done { step, value } | Event::Restored { step, value } => {
                (Some(*step), Some(value.as_str()))
            }
            Event::Failed { step, error } | Event::RestoreFailed { step, error } => {
                check_text("an error", error, 4096)?;
                (Some(*step), None)
            }
            Event::Begin { at, .. } | Event::End { at, .. } => {
                check_text("a time", at, 64)?;
                (None, None)
            }
        };
        if let Some(s) = step.filter(|s| *s >= steps) {
            return Err(RecordError::EventStep { step: s + 1, steps });
        }
        if let Some(v) = value {
            check_value(v)?;
        }
    }
    Ok(())
}

/// Journal lines; a torn last line (the process died mid-write) is ignored.
fn parse_journal(r: impl BufRead, path: &Path) -> Result<Vec<Event>, StateError> {
    let lines: Vec<String> = r
        .lines()
        .collect::<Result<_, _>>()
        .map_err(io_err("read", path))?;
    let mut out = Vec::new();
    let n = lines.len();
    for (i, l) in lines.iter().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(l) {
            Ok(e) => out.push(e),
            Err(_) if i + 1 == n => {}
            Err(e) => {
                return Err(StateError::Corrupt {
                    path: path.to_path_buf(),
                    detail: format!("line {}: {e}", i + 1),
                })
            }
        }
    }
    Ok(out)
}

/// An open journal: every append is on disk before it returns.
#[derive(Debug)]
pub struct Journal {
    file: File,
    path: PathBuf,
}

impl Journal {
    /// Append one event and fsync.
    pub fn append(&mut self, e: &Event) -> Result<(), StateError> {
        let mut line = serde_json::to_string(e).map_err(|err| StateError::Corrupt {
            path: self.path.clone(),
            detail: err.to_string(),
        })?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .map_err(io_err("write", &self.path))?;
        self.file.sync_data().map_err(io_err("fsync", &self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backup() -> Backup {
        Backup {
            version: 0,
            id: String::new(),
            created: String::new(),
            hostname: "h".into(),
            namespace: "net:[1]".into(),
            profile: "p".into(),
            source: "p.toml".into(),
            steps: vec![Step {
                key: Key::Sysctl {
                    name: "net.ipv4.tcp_rmem".into(),
                },
                before: "4096 8192 16384".into(),
                after: "4096 131072 6291456".into(),
                origin: "sysctl".into(),
                read_before: false,
            }],
            netns: None,
            command: String::new(),
        }
    }

    #[test]
    fn journal_tells_where_a_backup_stands() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::at(d.path());
        let (b, mut j) = s.create(backup()).unwrap();
        assert!(b.id.ends_with(&format!("-{}", std::process::id())));
        let e = s.interrupted().unwrap().unwrap();
        assert_eq!(e.backup, b);
        j.append(&Event::Begin {
            phase: Phase::Apply,
            at: now_rfc3339(),
        })
        .unwrap();
        j.append(&Event::Start {
            step: 0,
            before: None,
        })
        .unwrap();
        assert_eq!(
            s.entries().unwrap()[0].status(),
            Status::Interrupted {
                phase: Phase::Apply,
                started: vec![0],
                done: vec![]
            }
        );
        j.append(&Event::Done {
            step: 0,
            value: "x".into(),
        })
        .unwrap();
        j.append(&Event::End {
            outcome: Outcome::Applied,
            at: now_rfc3339(),
        })
        .unwrap();
        assert_eq!(s.entries().unwrap()[0].status(), Status::Applied);
        assert!(s.interrupted().unwrap().is_none());
        // A torn last line is the process dying mid-write: ignored.
        let mut f = OpenOptions::new()
            .append(true)
            .open(e.dir.join("journal.jsonl"))
            .unwrap();
        f.write_all(b"{\"event\":\"begin\",\"ph").unwrap();
        assert_eq!(s.entries().unwrap()[0].status(), Status::Applied);
    }

    /// Plant `json` as backup `id` with an "applied" journal.
    fn plant(s: &StateDir, id: &str, json: &str) -> PathBuf {
        let dir = s.path().join("backups").join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("backup.json"), json).unwrap();
        std::fs::write(
            dir.join("journal.jsonl"),
            "{\"event\":\"begin\",\"phase\":\"apply\",\"at\":\"t\"}\n{\"event\":\"end\",\"outcome\":\"applied\",\"at\":\"t\"}\n",
        )
        .unwrap();
        dir
    }

    fn planted_json(id: &str, key: serde_json::Value, before: &str) -> String {
        serde_json::json!({
            "version": 1, "id": id, "created": "2025-01-01T00:00:00Z",
            "hostname": "h", "namespace": "net:[1]", "profile": "p", "source": "p.toml",
            "steps": [{"key": key, "before": before, "after": "0", "origin": "rps"}],
        })
        .to_string()
    }

    #[test]
    fn a_planted_backup_is_refused_with_what_is_wrong() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::at(d.path());
        let id = "2025-01-01T00-00-00.000Z-1";
        let key = serde_json::json!({"kind": "rps", "iface": "../../../../tmp/x/evil", "queue": 0});
        plant(&s, id, &planted_json(id, key, "f"));
        let e = s.entries().unwrap_err().to_string();
        assert!(
            e.contains("'../../../../tmp/x/evil' is not an interface name"),
            "{e}"
        );
        assert!(s.interrupted().is_err());
        // A sysctl a profile may not set, a value with a newline, an id that
        // is not the directory's, an unknown field: each refused by name.
        let cases = [
            (
                planted_json(
                    id,
                    serde_json::json!({"kind": "sysctl", "name": "kernel.core_pattern"}),
                    "x",
                ),
                "only net.*",
            ),
            (
                planted_json(
                    id,
                    serde_json::json!({"kind": "mtu", "iface": "eth0"}),
                    "1500\n9000",
                ),
                "control characters",
            ),
            (
                planted_json(
                    "other",
                    serde_json::json!({"kind": "mtu", "iface": "eth0"}),
                    "1500",
                ),
                "directory's name",
            ),
            (
                planted_json(
                    id,
                    serde_json::json!({"kind": "mtu", "iface": "eth0"}),
                    "1500",
                )
                .replace("\"hostname\"", "\"evil\":1,\"hostname\""),
                "unknown field",
            ),
        ];
        for (json, want) in cases {
            plant(&s, id, &json);
            let e = s.entries().unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
        plant(
            &s,
            id,
            &planted_json(
                id,
                serde_json::json!({"kind": "mtu", "iface": "eth0"}),
                "1500",
            ),
        );
        assert_eq!(s.entries().unwrap().len(), 1);
    }

    #[test]
    fn a_state_directory_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::at(d.path());
        let (b, _j) = s.create(backup()).unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o775)).unwrap();
        let e = s.entries().unwrap_err().to_string();
        assert!(e.contains("mode 775") && e.contains("chmod 755"), "{e}");
        assert!(s.lock().is_err());
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let bdir = d.path().join("backups").join(&b.id);
        std::fs::set_permissions(&bdir, std::fs::Permissions::from_mode(0o757)).unwrap();
        assert!(s.entries().unwrap_err().to_string().contains("mode 757"));
        std::fs::set_permissions(&bdir, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A backup directory that is a symlink to one elsewhere.
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::remove_dir_all(&bdir).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), &bdir).unwrap();
        assert!(s.entries().unwrap_err().to_string().contains("symlink"));
    }

    #[test]
    fn discard_removes_a_backup_without_restoring_it() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::at(d.path());
        let (b, mut j) = s.create(backup()).unwrap();
        j.append(&Event::End {
            outcome: Outcome::Applied,
            at: now_rfc3339(),
        })
        .unwrap();
        assert!(matches!(
            s.discard(Some("nope")),
            Err(StateError::NoSuchBackup { .. })
        ));
        assert!(matches!(
            s.discard(Some("../x")),
            Err(StateError::NoSuchBackup { .. })
        ));
        assert_eq!(s.discard(None).unwrap().0, b.id);
        assert!(s.entries().unwrap().is_empty());
        // A damaged backup blocks every listing, but named by ID it goes.
        let (b, _j) = s.create(backup()).unwrap();
        std::fs::write(
            s.path().join("backups").join(&b.id).join("backup.json"),
            "{",
        )
        .unwrap();
        assert!(s.entries().is_err());
        assert_eq!(s.discard(Some(&b.id)).unwrap(), (b.id.clone(), None));
        assert!(s.entries().unwrap().is_empty());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// Whatever backup.json holds, reading it never panics: it is either
        /// a backup every field of which passed the checks, or an error that
        /// names the file.
        #[test]
        fn any_backup_json_is_valid_or_a_clear_error(
            version in 0u32..3,
            same_id in proptest::bool::ANY,
            text in "[ -~\n\u{7f}é]{0,20}",
            iface in "[a-z0-9./: \n-]{0,20}",
            kind in proptest::sample::select(vec!["rps", "mtu", "sysctl", "feature", "governor", "bogus"]),
            queue in proptest::prelude::any::<u32>(),
            name in "[a-z._/]{0,24}",
            value in "[ -~\n]{0,12}",
            extra in proptest::bool::ANY,
            garbage in proptest::bool::ANY,
        ) {
            let d = tempfile::tempdir().unwrap();
            let s = StateDir::at(d.path());
            let id = "2025-01-01T00-00-00.000Z-7";
            let key = serde_json::json!({"kind": kind, "iface": iface, "queue": queue, "name": name, "cpu": queue});
            let mut v = serde_json::json!({
                "version": version, "id": if same_id { id } else { "x" },
                "created": text, "hostname": text, "namespace": "net:[1]",
                "profile": text, "source": text,
                "steps": [{"key": key, "before": value, "after": value, "origin": text}],
            });
            if extra {
                v["netns"] = serde_json::json!({"inode": queue, "dev": 1, "boot_id": text});
            }
            let full = v.to_string();
            let json: String = if garbage {
                full.chars().take(full.chars().count() / 2).collect()
            } else {
                full
            };
            plant(&s, id, &json);
            match s.entries() {
                Ok(es) => {
                    for e in es {
                        proptest::prop_assert!(e.backup.validate(id).is_ok());
                    }
                }
                Err(e) => {
                    let m = e.to_string();
                    proptest::prop_assert!(m.contains("backup.json"), "{}", m);
                }
            }
        }
    }

    #[test]
    fn the_lock_is_exclusive() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::at(d.path());
        let l = s.lock().unwrap();
        assert!(matches!(s.lock(), Err(StateError::Locked { .. })));
        drop(l);
        s.lock().unwrap();
    }
}

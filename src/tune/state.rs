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
//! This module knows nothing about how settings are written; it only keeps
//! the record (see [`super::apply`]).

use super::key::Key;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Write as _};
use std::path::{Path, PathBuf};

/// Default state directory.
pub const DEFAULT_DIR: &str = "/var/lib/wirescope";
/// Environment variable that overrides it.
pub const ENV_DIR: &str = "WIRESCOPE_STATE_DIR";
/// Version of backup.json.
pub const BACKUP_VERSION: u32 = 1;

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
    /// Another wirescope holds the lock.
    #[error("another wirescope is applying or rolling back settings (lock {} is held); wait for it to finish", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
}

/// One setting in a backup: its value before and the value the apply sets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

/// What a journal line records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
        match (last_end, phase) {
            (Some(Outcome::Applied), _) => Status::Applied,
            (Some(Outcome::Restored), _) => Status::Restored,
            (Some(Outcome::RolledBack), _) => Status::RolledBack,
            (Some(Outcome::Incomplete), _) => Status::Incomplete,
            (None, Some(phase)) => Status::Interrupted {
                phase,
                started,
                done,
            },
            // A backup without any journal line: written, nothing touched yet.
            (None, None) => Status::Interrupted {
                phase: Phase::Apply,
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

/// Held while applying or rolling back; released on drop.
#[derive(Debug)]
pub struct Lock {
    _flock: nix::fcntl::Flock<File>,
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
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR));
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
        std::fs::create_dir_all(dir).map_err(io_err("create directory", dir))
    }

    /// Take the lock without waiting.
    pub fn lock(&self) -> Result<Lock, StateError> {
        self.ensure(&self.root)?;
        let path = self.root.join("lock");
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        match nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(l) => Ok(Lock { _flock: l }),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(StateError::Locked { path }),
            Err((_, e)) => Err(StateError::Io {
                op: "lock",
                path,
                source: io::Error::from(e),
            }),
        }
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
        let mut id = self.new_id();
        let mut dir = base.join(&id);
        let mut n = 1;
        while let Err(e) = std::fs::create_dir(&dir) {
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
            let mut f = File::create(&tmp).map_err(io_err("create", &tmp))?;
            f.write_all(&text).map_err(io_err("write", &tmp))?;
            f.sync_all().map_err(io_err("fsync", &tmp))?;
        }
        std::fs::rename(&tmp, &fin).map_err(io_err("rename", &tmp))?;
        let jpath = dir.join("journal.jsonl");
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&jpath)
            .map_err(io_err("create", &jpath))?;
        file.sync_all().map_err(io_err("fsync", &jpath))?;
        fsync_dir(&dir)?;
        fsync_dir(&base)?;
        Ok((backup, Journal { file, path: jpath }))
    }

    /// Every backup, newest first.
    pub fn entries(&self) -> Result<Vec<Entry>, StateError> {
        let base = self.backups_dir();
        let rd = match std::fs::read_dir(&base) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err("read directory", &base)(e)),
        };
        let mut names: Vec<String> = rd
            .flatten()
            .filter(|e| e.path().join("backup.json").is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.reverse();
        names.iter().map(|n| self.entry(&base.join(n))).collect()
    }

    fn entry(&self, dir: &Path) -> Result<Entry, StateError> {
        let bpath = dir.join("backup.json");
        let text = std::fs::read(&bpath).map_err(io_err("read", &bpath))?;
        let backup: Backup = serde_json::from_slice(&text).map_err(|e| StateError::Corrupt {
            path: bpath.clone(),
            detail: e.to_string(),
        })?;
        if backup.version != BACKUP_VERSION {
            return Err(StateError::Corrupt {
                path: bpath,
                detail: format!(
                    "version {} (this wirescope reads {BACKUP_VERSION})",
                    backup.version
                ),
            });
        }
        let jpath = dir.join("journal.jsonl");
        let events = match File::open(&jpath) {
            Ok(f) => parse_journal(io::BufReader::new(f), &jpath)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_err("read", &jpath)(e)),
        };
        Ok(Entry {
            backup,
            events,
            dir: dir.to_path_buf(),
        })
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

//! Files wirescope acts on without asking again — the token file, the
//! tuning state directory and its backups, a profile or checklist a user
//! names — and the checks that make acting on them safe.
//!
//! * [`check_private`]: who may have written (or may read) a file or
//!   directory. A token others can read authenticates them too; a state
//!   directory others can write lets them plant a backup that root will
//!   restore. Like ssh with its keys, such a file is refused, with the
//!   `chmod`/`chown` that fixes it.
//! * [`read_bounded`]: read a file a user named, refusing devices, FIFOs and
//!   anything larger than a limit (`/dev/zero` would never end).
//!
//! This module only checks and reads; callers decide what a refusal means.

use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Bits no one but the owner may have on a secret (the token file).
pub const SECRET: Policy = Policy {
    forbidden: 0o077,
    owner: false,
};

/// A directory (or file) whose content root acts on: owned by root or the
/// invoking user, writable by no one else.
pub const ROOT_TRUSTED: Policy = Policy {
    forbidden: 0o022,
    owner: true,
};

/// What [`check_private`] requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Permission bits that must be clear.
    pub forbidden: u32,
    /// The owner must be root or this process's user.
    pub owner: bool,
}

/// Why a file is not trusted.
#[derive(Debug, thiserror::Error)]
pub enum Untrusted {
    /// Its permission bits let others in.
    #[error("mode {mode:o} lets others {what} it")]
    Mode {
        /// Its permission bits.
        mode: u32,
        /// `read or write` / `write`.
        what: &'static str,
        /// The mode that would do.
        fixed: u32,
    },
    /// Someone else owns it.
    #[error("it belongs to uid {uid}, not to root or uid {ours}")]
    Owner {
        /// Its owner.
        uid: u32,
        /// This process's user.
        ours: u32,
    },
    /// It is a symlink (where only a real file or directory will do).
    #[error("it is a symlink")]
    Symlink,
    /// It could not be examined.
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl Untrusted {
    /// The command that fixes it, for `path`.
    pub fn fix(&self, path: &Path) -> String {
        let p = path.display();
        match self {
            Untrusted::Mode { fixed, .. } => format!("chmod {fixed:o} {p}"),
            Untrusted::Owner { .. } => format!("chown root {p}"),
            Untrusted::Symlink => format!("replace the symlink {p} by a directory"),
            Untrusted::Io(_) => format!("check {p}"),
        }
    }
}

/// Check `path` (not following a final symlink) against `policy`.
pub fn check_private(path: &Path, policy: Policy) -> Result<std::fs::Metadata, Untrusted> {
    let m = std::fs::symlink_metadata(path)?;
    if m.file_type().is_symlink() {
        return Err(Untrusted::Symlink);
    }
    check_metadata(&m, policy)?;
    Ok(m)
}

/// [`check_private`] on metadata already read (of an open file).
pub fn check_metadata(m: &std::fs::Metadata, policy: Policy) -> Result<(), Untrusted> {
    let mode = m.permissions().mode();
    if mode & policy.forbidden != 0 {
        return Err(Untrusted::Mode {
            mode: mode & 0o7777,
            fixed: mode & 0o7777 & !policy.forbidden,
            what: if policy.forbidden & 0o044 != 0 {
                "read or write"
            } else {
                "write"
            },
        });
    }
    if policy.owner {
        let ours = nix::unistd::geteuid().as_raw();
        let uid = m.uid();
        if uid != 0 && uid != ours {
            return Err(Untrusted::Owner { uid, ours });
        }
    }
    Ok(())
}

/// Why a named file was not read.
#[derive(Debug, thiserror::Error)]
pub enum BoundedError {
    /// Not a regular file.
    #[error("{path} is a {kind}, not a regular file; give a file")]
    NotRegular {
        /// The path.
        path: String,
        /// What it is.
        kind: &'static str,
    },
    /// Larger than the limit.
    #[error("{path} is larger than {max} bytes; is it the right file?")]
    TooLarge {
        /// The path.
        path: String,
        /// The limit.
        max: u64,
    },
    /// Not UTF-8.
    #[error("{path} is not UTF-8 text")]
    NotText {
        /// The path.
        path: String,
    },
    /// The OS said no.
    #[error("read {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl BoundedError {
    /// The OS error of a failed open or read (e.g. NotFound), if that is what it was.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            BoundedError::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

/// Read a regular file of at most `max` bytes as text. Opened non-blocking
/// (a FIFO does not hang the open) and checked after the open.
pub fn read_bounded(path: &Path, max: u64) -> Result<String, BoundedError> {
    let p = || path.display().to_string();
    let io = |source| BoundedError::Io { path: p(), source };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io)?;
    let m = f.metadata().map_err(io)?;
    if !m.file_type().is_file() {
        return Err(BoundedError::NotRegular {
            path: p(),
            kind: super::untrusted::kind_of(&m),
        });
    }
    let mut buf = Vec::new();
    f.take(max + 1).read_to_end(&mut buf).map_err(io)?;
    if buf.len() as u64 > max {
        return Err(BoundedError::TooLarge { path: p(), max });
    }
    String::from_utf8(buf).map_err(|_| BoundedError::NotText { path: p() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_and_large_files_are_refused() {
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("is a device"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("f");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = read_bounded(&fifo, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        let big = d.path().join("big");
        std::fs::write(&big, vec![b'a'; 1025]).unwrap();
        assert!(matches!(
            read_bounded(&big, 1024),
            Err(BoundedError::TooLarge { .. })
        ));
        assert_eq!(read_bounded(&big, 1025).unwrap().len(), 1025);
        assert!(read_bounded(d.path(), 10)
            .unwrap_err()
            .to_string()
            .contains("directory"));
    }

    #[test]
    fn writable_by_others_or_symlinked_is_untrusted() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s");
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        check_private(&p, ROOT_TRUSTED).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o775)).unwrap();
        let e = check_private(&p, ROOT_TRUSTED).unwrap_err();
        assert!(e.to_string().contains("mode 775"), "{e}");
        assert!(e.fix(&p).starts_with("chmod 755 "), "{}", e.fix(&p));
        let l = d.path().join("l");
        std::os::unix::fs::symlink(&p, &l).unwrap();
        assert!(matches!(
            check_private(&l, ROOT_TRUSTED),
            Err(Untrusted::Symlink)
        ));
    }
}

//! Reading files of a directory that someone else made (a capture, a
//! sosreport a stranger sent) without trusting it.
//!
//! A capture can hold a symlink to `/root/.config/wirescope/token` (its text
//! would end up in `--json` output), to `/dev/zero` (reading would never
//! end) or a FIFO (reading would block forever). So every path is resolved
//! *beneath* the capture's root with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS)` — symlinks inside the capture work, any path that
//! leaves it fails — opened `O_NONBLOCK`, checked to be a regular file (or a
//! directory, for listings) after the open, and read up to [`MAX_FILE`]
//! bytes. On kernels without openat2 (before 5.6) the path is canonicalized
//! and checked to stay below the canonical root before an `O_NOFOLLOW` open.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

/// Largest file read from a capture (the biggest real ones, `ethtool -S` of
/// a many-queue NIC or /proc/interrupts of a large host, are a few MiB).
pub const MAX_FILE: u64 = 16 << 20;

/// Why a file of a capture was not read (a missing file is not one of these).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The path leaves the capture (a symlink or `..` out of it).
    #[error("it leads out of the capture (symlink or ..)")]
    Escapes,
    /// Not a regular file (device, FIFO, socket, directory).
    #[error("it is a {0}, not a regular file")]
    NotRegular(&'static str),
    /// Larger than [`MAX_FILE`].
    #[error("it is {0} bytes, more than the {MAX_FILE}-byte limit")]
    TooLarge(u64),
    /// Not text.
    #[error("it is not UTF-8 text")]
    NotText,
}

/// A failed read: absent (normal in a capture), refused (reported), or an I/O error.
#[derive(Debug)]
pub enum ReadError {
    /// No such file.
    Missing,
    /// Refused, with the reason.
    Refused(Refusal),
    /// The OS said no.
    Io(io::Error),
}

impl From<ReadError> for io::Error {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Missing => io::ErrorKind::NotFound.into(),
            ReadError::Refused(r) => io::Error::new(io::ErrorKind::InvalidData, r.to_string()),
            ReadError::Io(e) => e,
        }
    }
}

/// The root of an untrusted directory.
#[derive(Debug)]
pub struct Root {
    path: PathBuf,
    fd: Option<OwnedFd>,
    canonical: Option<PathBuf>,
}

/// What a file that is not a regular file is, for a refusal ("FIFO").
pub(crate) fn kind_of(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_dir() {
        "directory"
    } else if t.is_char_device() || t.is_block_device() {
        "device"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_symlink() {
        "symlink"
    } else {
        "file"
    }
}

impl Root {
    /// Open `path` as the root (it need not exist: every read then says Missing).
    pub fn new(path: &Path) -> Self {
        let fd = nix::fcntl::open(
            path,
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok()
        // SAFETY: `open` returned a fresh descriptor that nothing else owns.
        .map(|raw| unsafe { OwnedFd::from_raw_fd(raw) });
        Root {
            path: path.to_path_buf(),
            fd,
            canonical: std::fs::canonicalize(path).ok(),
        }
    }

    /// The root as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `rel` with absolute prefixes removed (paths are given as the host has them).
    fn relative(rel: &str) -> Result<PathBuf, ReadError> {
        let p = Path::new(rel.trim_start_matches('/'));
        if p.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(ReadError::Refused(Refusal::Escapes));
        }
        Ok(if p.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            p.to_path_buf()
        })
    }

    /// Open `rel` beneath the root, non-blocking, without following links out of it.
    fn open(&self, rel: &str, directory: bool) -> Result<File, ReadError> {
        let rel = Self::relative(rel)?;
        let flags = nix::fcntl::OFlag::O_RDONLY
            | nix::fcntl::OFlag::O_NONBLOCK
            | nix::fcntl::OFlag::O_NOCTTY
            | nix::fcntl::OFlag::O_CLOEXEC
            | if directory {
                nix::fcntl::OFlag::O_DIRECTORY
            } else {
                nix::fcntl::OFlag::empty()
            };
        let Some(root) = &self.fd else {
            return Err(ReadError::Missing);
        };
        let how = nix::fcntl::OpenHow::new().flags(flags).resolve(
            nix::fcntl::ResolveFlag::RESOLVE_BENEATH
                | nix::fcntl::ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
        match nix::fcntl::openat2(root.as_raw_fd(), rel.as_path(), how) {
            // SAFETY: openat2 returned a fresh descriptor that nothing else owns.
            Ok(fd) => Ok(unsafe { File::from_raw_fd(fd) }),
            Err(nix::errno::Errno::ENOENT) | Err(nix::errno::Errno::ENOTDIR) => {
                Err(ReadError::Missing)
            }
            Err(nix::errno::Errno::EXDEV) | Err(nix::errno::Errno::ELOOP) => {
                Err(ReadError::Refused(Refusal::Escapes))
            }
            Err(nix::errno::Errno::ENOSYS) => self.open_fallback(&rel, flags),
            Err(e) => Err(ReadError::Io(e.into())),
        }
    }

    /// Before Linux 5.6: resolve the path and check it stays below the root.
    fn open_fallback(&self, rel: &Path, flags: nix::fcntl::OFlag) -> Result<File, ReadError> {
        let Some(root) = &self.canonical else {
            return Err(ReadError::Missing);
        };
        let full = match std::fs::canonicalize(root.join(rel)) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ReadError::Missing),
            Err(e) => return Err(ReadError::Io(e)),
        };
        if !full.starts_with(root) {
            return Err(ReadError::Refused(Refusal::Escapes));
        }
        nix::fcntl::open(
            &full,
            flags | nix::fcntl::OFlag::O_NOFOLLOW,
            nix::sys::stat::Mode::empty(),
        )
        // SAFETY: `open` returned a fresh descriptor that nothing else owns.
        .map(|fd| unsafe { File::from_raw_fd(fd) })
        .map_err(|e| ReadError::Io(e.into()))
    }

    /// The text of regular file `rel`, at most [`MAX_FILE`] bytes.
    pub fn read(&self, rel: &str) -> Result<String, ReadError> {
        let mut f = self.open(rel, false)?;
        let m = f.metadata().map_err(ReadError::Io)?;
        if !m.is_file() {
            return Err(ReadError::Refused(Refusal::NotRegular(kind_of(&m))));
        }
        if m.len() > MAX_FILE {
            return Err(ReadError::Refused(Refusal::TooLarge(m.len())));
        }
        let mut buf = Vec::new();
        // sysfs and procfs copies report sizes that need not match: read to
        // the cap, whatever the size said.
        (&mut f)
            .take(MAX_FILE + 1)
            .read_to_end(&mut buf)
            .map_err(ReadError::Io)?;
        if buf.len() as u64 > MAX_FILE {
            return Err(ReadError::Refused(Refusal::TooLarge(buf.len() as u64)));
        }
        String::from_utf8(buf).map_err(|_| ReadError::Refused(Refusal::NotText))
    }

    /// Entry names of directory `rel`, sorted.
    pub fn list(&self, rel: &str) -> Result<Vec<String>, ReadError> {
        let dir = self.open(rel, true)?;
        let fd_path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        super::source::list_dir(Path::new(&fd_path)).map_err(ReadError::Io)
    }

    /// The last component of symlink `rel`'s target (the link itself is not followed).
    pub fn link_name(&self, rel: &str) -> Result<String, ReadError> {
        let rel = Self::relative(rel)?;
        let (parent, name) = match (rel.parent(), rel.file_name()) {
            (Some(p), Some(n)) => (p.to_path_buf(), n.to_os_string()),
            _ => return Err(ReadError::Missing),
        };
        let parent = parent.to_string_lossy().into_owned();
        let dir = self.open(&parent, true)?;
        let target = nix::fcntl::readlinkat(Some(dir.as_raw_fd()), name.as_os_str()).map_err(
            |e| match e {
                nix::errno::Errno::ENOENT | nix::errno::Errno::EINVAL => ReadError::Missing,
                e => ReadError::Io(e.into()),
            },
        )?;
        Ok(Path::new(&target)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_out_devices_fifos_and_huge_files_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("proc/net")).unwrap();
        std::fs::write(root.join("proc/stat"), "cpu0 1 2 3\n").unwrap();
        std::os::unix::fs::symlink("stat", root.join("proc/stat-link")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("proc/out")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.join("proc/zero")).unwrap();
        nix::unistd::mkfifo(&root.join("proc/fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let big = File::create(root.join("proc/big")).unwrap();
        big.set_len(MAX_FILE + 1).unwrap();
        let r = Root::new(root);
        assert_eq!(r.read("/proc/stat").unwrap(), "cpu0 1 2 3\n");
        assert_eq!(
            r.read("/proc/stat-link").unwrap(),
            "cpu0 1 2 3\n",
            "links inside are fine"
        );
        assert!(matches!(
            r.read("/proc/out"),
            Err(ReadError::Refused(Refusal::Escapes))
        ));
        assert!(matches!(
            r.read("/proc/zero"),
            Err(ReadError::Refused(Refusal::Escapes))
        ));
        assert!(matches!(
            r.read("/proc/../../etc/passwd"),
            Err(ReadError::Refused(Refusal::Escapes))
        ));
        assert!(matches!(
            r.read("/proc/fifo"),
            Err(ReadError::Refused(Refusal::NotRegular("FIFO")))
        ));
        assert!(matches!(
            r.read("/proc/big"),
            Err(ReadError::Refused(Refusal::TooLarge(_)))
        ));
        assert!(matches!(r.read("/proc/none"), Err(ReadError::Missing)));
        assert!(matches!(
            r.read("/proc/net"),
            Err(ReadError::Refused(Refusal::NotRegular("directory")))
        ));
        assert_eq!(r.list("/proc/net").unwrap(), Vec::<String>::new());
        assert!(r.list("/proc").unwrap().contains(&"stat".to_string()));
        assert_eq!(r.link_name("/proc/zero").unwrap(), "zero");
        assert!(matches!(
            Root::new(&root.join("absent")).read("/proc/stat"),
            Err(ReadError::Missing)
        ));
    }
}

//! Where probes read host files from: the live host or a captured directory.
//!
//! Paths are given as the kernel exposes them (`/proc/stat`). The live source
//! reads them directly; a directory source (a capture, a sosreport, a test
//! fixture) reads the same relative path below its root, so parsers cannot
//! tell the difference.

use std::io;
use std::path::{Path, PathBuf};

/// A readable view of a host's /proc and /sys.
pub trait HostSource: Send + Sync {
    /// Read a whole file given by its absolute path on the host (e.g. `/proc/stat`).
    fn read(&self, path: &str) -> io::Result<String>;
    /// A short description for error messages ("live host", "capture /tmp/x").
    fn describe(&self) -> String;
}

/// The running host.
#[derive(Debug, Default, Clone, Copy)]
pub struct Live;

impl HostSource for Live {
    fn read(&self, path: &str) -> io::Result<String> {
        std::fs::read_to_string(path)
    }
    fn describe(&self) -> String {
        "live host".into()
    }
}

/// A directory laid out like the host's root (`DIR/proc/stat`).
#[derive(Debug, Clone)]
pub struct Dir {
    root: PathBuf,
}

impl Dir {
    /// A source rooted at `root`.
    pub fn new(root: impl AsRef<Path>) -> Self {
        Dir {
            root: root.as_ref().to_path_buf(),
        }
    }
}

impl HostSource for Dir {
    fn read(&self, path: &str) -> io::Result<String> {
        std::fs::read_to_string(self.root.join(path.trim_start_matches('/')))
    }
    fn describe(&self) -> String {
        format!("directory {}", self.root.display())
    }
}

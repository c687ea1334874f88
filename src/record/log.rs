//! JSON-lines log writer and reader.

use super::schema::Record;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Log errors, naming the file and line.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// Open/read/write failed.
    #[error("log {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a record.
    #[error("log {path} line {line}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// A line longer than any record wirescope writes.
    #[error("log {path} line {line} is longer than {max} bytes; this is not a wirescope log (or it is damaged)")]
    LineTooLong {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// The bound ([`MAX_LINE`]).
        max: u64,
    },
}

/// The longest line the reader accepts: a Sample of a host with thousands
/// of CPUs and queues is a few MiB; a line beyond this is not a record.
pub const MAX_LINE: u64 = 64 << 20;

/// Writes one record per line, flushed immediately.
pub struct LogWriter {
    w: BufWriter<Box<dyn Write + Send>>,
    path: PathBuf,
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter")
            .field("path", &self.path)
            .finish()
    }
}

/// Standard output for JSON lines: a reader that went away (`| head`) means
/// "enough", so a closed pipe silently ends the output; other errors are errors.
struct Stdout {
    closed: bool,
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.closed {
            return Ok(buf.len());
        }
        match std::io::stdout().lock().write_all(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(buf.len())
            }
            Err(e) => Err(e),
            Ok(()) => Ok(buf.len()),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        if self.closed {
            return Ok(());
        }
        match std::io::stdout().lock().flush() {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            r => r,
        }
    }
}

impl LogWriter {
    /// Create (truncate) `path`.
    pub fn create(path: &Path) -> Result<Self, LogError> {
        let f = File::create(path).map_err(|source| LogError::Io {
            path: path.into(),
            source,
        })?;
        Ok(LogWriter {
            w: BufWriter::new(Box::new(f)),
            path: path.into(),
        })
    }

    /// Records as JSON lines on standard output (`watch --json`).
    pub fn stdout() -> Self {
        LogWriter {
            w: BufWriter::new(Box::new(Stdout { closed: false })),
            path: PathBuf::from("<stdout>"),
        }
    }

    /// Where this log goes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one record and flush it to the kernel.
    pub fn write(&mut self, r: &Record) -> Result<(), LogError> {
        let io = |source| LogError::Io {
            path: self.path.clone(),
            source,
        };
        serde_json::to_writer(&mut self.w, r).map_err(|e| io(e.into()))?;
        self.w.write_all(b"\n").map_err(io)?;
        self.w.flush().map_err(io)
    }
}

/// Read a log. A final line without its newline (a run killed mid-write) is ignored.
pub fn read_log(path: &Path) -> Result<Vec<Record>, LogError> {
    let f = File::open(path).map_err(|source| LogError::Io {
        path: path.into(),
        source,
    })?;
    let mut out = Vec::new();
    let mut r = BufReader::new(f);
    let mut line = String::new();
    let mut n = 0;
    loop {
        line.clear();
        let got = (&mut r)
            .take(MAX_LINE + 1)
            .read_line(&mut line)
            .map_err(|source| LogError::Io {
                path: path.into(),
                source,
            })?;
        if got == 0 {
            break;
        }
        n += 1;
        if got as u64 > MAX_LINE {
            return Err(LogError::LineTooLong {
                path: path.into(),
                line: n,
                max: MAX_LINE,
            });
        }
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(&line) {
            Ok(rec) => out.push(rec),
            Err(_) if !line.ends_with('\n') => break,
            Err(source) => {
                return Err(LogError::Parse {
                    path: path.into(),
                    line: n,
                    source,
                })
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::schema::Event;

    #[test]
    fn a_line_longer_than_any_record_is_refused_without_reading_it_all() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("huge.jsonl");
        let f = std::fs::File::create(&p).unwrap();
        // Sparse: the file is MAX_LINE + 1 MiB of zero bytes with no newline.
        f.set_len(MAX_LINE + (1 << 20)).unwrap();
        let e = read_log(&p).unwrap_err();
        assert!(matches!(e, LogError::LineTooLong { line: 1, .. }), "{e}");
    }

    #[test]
    fn truncated_tail_is_ignored_but_bad_lines_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.jsonl");
        let mut w = LogWriter::create(&p).unwrap();
        let ev = Record::Event(Event {
            t: 1.0,
            kind: "k".into(),
            message: "m".into(),
        });
        w.write(&ev).unwrap();
        drop(w);
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str("{\"type\":\"sam");
        std::fs::write(&p, &text).unwrap();
        assert_eq!(read_log(&p).unwrap(), vec![ev]);
        std::fs::write(&p, "{\"type\":\"nope\"}\n").unwrap();
        let e = read_log(&p).unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
    }
}

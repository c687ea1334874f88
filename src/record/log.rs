//! JSON-lines log writer and reader, plain or zstd-compressed.
//!
//! A log whose name ends in `.zst` is written as a zstd stream: each record
//! is flushed as a zstd block as soon as it is written, and the frame is
//! ended every [`FRAME_EVERY`] (and when the writer is dropped), so a run
//! that is killed leaves a stream that decodes up to its last record. The
//! reader recognises zstd by its magic bytes, whatever the name, and reads
//! a truncated last frame up to where it stops, as it reads a truncated
//! last line of a plain log.

use super::detail::{Rows, Thinner};
use super::schema::Record;
use crate::probe::sample::Detail;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The first bytes of a zstd frame.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// A zstd log's frame is ended at least this often: what a reader of a
/// killed run's log is sure to find complete.
pub const FRAME_EVERY: Duration = Duration::from_secs(5);

/// zstd level of compressed logs (zstd's default: fast, about 10x on logs of big hosts).
const ZSTD_LEVEL: i32 = 3;

/// True when `path` asks for a compressed log (`.zst`).
pub fn is_zstd_name(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "zst")
}

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

impl LogError {
    /// What an I/O error of the log at `path` becomes.
    fn io(path: &Path) -> impl Fn(std::io::Error) -> LogError + Copy + '_ {
        move |source| LogError::Io {
            path: path.into(),
            source,
        }
    }
}

/// The longest line the reader accepts: a Sample of a host with thousands
/// of CPUs and queues is a few MiB; a line beyond this is not a record.
pub const MAX_LINE: u64 = 64 << 20;

/// Writes one record per line, flushed immediately.
pub struct LogWriter {
    out: Out,
    path: PathBuf,
    /// The record being written (reused: a big host's record is tens of kB).
    buf: Vec<u8>,
    /// Samples as one object per row (schema 1's form, which the reader
    /// takes too) rather than columns: the stdout stream, read by `jq` and
    /// scripts rather than kept.
    rows: bool,
    /// Per-row detail every few intervals on a big host (log files only).
    thin: Option<Thinner>,
    /// The newest interval's records, until the next record shows whether
    /// its Samples close their spans.
    held: Vec<Record>,
}

/// Counts the bytes written to it (a line's length without keeping it).
struct ByteCount(usize);

impl Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A `sample` record with its arrays as rows (`{"type":"sample",...}`).
#[derive(serde::Serialize)]
struct SampleRows<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    sample: &'a crate::probe::sample::Sample,
}

/// Where the lines go.
enum Out {
    Plain(BufWriter<Box<dyn Write + Send>>),
    Zstd(ZstdOut),
}

/// A zstd stream of frames, each ended after [`ZstdOut::every`].
struct ZstdOut {
    /// None only after a failed frame change (the log is then broken).
    enc: Option<zstd::stream::write::Encoder<'static, File>>,
    started: Instant,
    every: Duration,
}

impl ZstdOut {
    fn encoder(f: File) -> std::io::Result<zstd::stream::write::Encoder<'static, File>> {
        let mut e = zstd::stream::write::Encoder::new(f, ZSTD_LEVEL)?;
        e.include_checksum(true)?;
        Ok(e)
    }

    fn write(&mut self, line: &[u8]) -> std::io::Result<()> {
        let enc = self
            .enc
            .as_mut()
            .ok_or_else(|| std::io::Error::other("an earlier frame could not be ended"))?;
        enc.write_all(line)?;
        if self.started.elapsed() < self.every {
            // A block the reader can decode, in the kernel now.
            return enc.flush();
        }
        self.end_frame()
    }

    /// End the frame (a complete, checksummed unit) and start the next.
    fn end_frame(&mut self) -> std::io::Result<()> {
        let Some(enc) = self.enc.take() else {
            return Ok(());
        };
        let f = enc.finish()?;
        self.enc = Some(Self::encoder(f)?);
        self.started = Instant::now();
        Ok(())
    }
}

impl Drop for ZstdOut {
    fn drop(&mut self) {
        if let Some(enc) = self.enc.take() {
            // Best effort: every record was flushed as a block already.
            let _ = enc.finish();
        }
    }
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

impl Stdout {
    /// `op` on standard output, nothing once its reader went away.
    fn unless_closed(
        &mut self,
        op: impl FnOnce(&mut std::io::StdoutLock) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        if self.closed {
            return Ok(());
        }
        match op(&mut std::io::stdout().lock()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            r => r,
        }
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.unless_closed(|o| o.write_all(buf)).map(|()| buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.unless_closed(|o| o.flush())
    }
}

impl LogWriter {
    /// Create (truncate) `path`: zstd-compressed when it ends in `.zst`.
    pub fn create(path: &Path) -> Result<Self, LogError> {
        Self::create_framed(path, FRAME_EVERY)
    }

    /// [`LogWriter::create`], a `.zst` log ending its frames every `every`
    /// (zero: after every record).
    pub fn create_framed(path: &Path, every: Duration) -> Result<Self, LogError> {
        let io = LogError::io(path);
        let f = File::create(path).map_err(io)?;
        let out = if is_zstd_name(path) {
            Out::Zstd(ZstdOut {
                enc: Some(ZstdOut::encoder(f).map_err(io)?),
                started: Instant::now(),
                every,
            })
        } else {
            Out::Plain(BufWriter::new(Box::new(f)))
        };
        Ok(LogWriter {
            out,
            path: path.into(),
            buf: Vec::new(),
            rows: false,
            thin: Some(Thinner::default()),
            held: Vec::new(),
        })
    }

    /// Records as JSON lines on standard output (`watch --json`, `--log
    /// -`): Samples with their arrays as rows, for `jq` and scripts.
    pub fn stdout() -> Self {
        LogWriter {
            out: Out::Plain(BufWriter::new(Box::new(Stdout { closed: false }))),
            path: PathBuf::from("<stdout>"),
            buf: Vec::new(),
            rows: true,
            thin: None,
            held: Vec::new(),
        }
    }

    /// Where this log goes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one record and flush it to the kernel (a big host's
    /// interval: when the next record comes, see [`super::detail`]).
    pub fn write(&mut self, r: &Record) -> Result<(), LogError> {
        if self.thin.is_none() {
            return self.write_now(r).map(|_| ());
        }
        match r {
            Record::Sample(s) => {
                // A new interval (or this host again): the one held goes on
                // without closing its span.
                let next = self.held.iter().any(
                    |h| matches!(h, Record::Sample(x) if x.index != s.index || x.host == s.host),
                );
                if next {
                    self.release(false)?;
                }
                let thins = self.thin.as_ref().is_some_and(|t| t.thins(s.host));
                if self.held.is_empty() && !thins {
                    self.write_sample((**s).clone(), false)
                } else {
                    self.held.push(r.clone());
                    Ok(())
                }
            }
            // A finding amends the interval before it: it stays behind it.
            Record::Finding(_) if !self.held.is_empty() => {
                self.held.push(r.clone());
                Ok(())
            }
            _ => {
                self.release(true)?;
                let point = match r {
                    Record::Header(_) => true,
                    Record::Event(e) => e.kind == "point_start",
                    _ => false,
                };
                if point {
                    if let Some(t) = &mut self.thin {
                        t.new_point();
                    }
                }
                self.write_now(r).map(|_| ())
            }
        }
    }

    /// Write the records held back; their Samples close their spans when
    /// `closes` (the point ended, or the log does).
    fn release(&mut self, closes: bool) -> Result<(), LogError> {
        for r in std::mem::take(&mut self.held) {
            match r {
                Record::Sample(s) => self.write_sample(*s, closes)?,
                r => self.write_now(&r).map(|_| ())?,
            }
        }
        Ok(())
    }

    /// One Sample's line: its rows summed into its span or the span's sums
    /// put in; what a detail line's rows cost sets how often the next comes.
    fn write_sample(
        &mut self,
        s: crate::probe::sample::Sample,
        closes: bool,
    ) -> Result<(), LogError> {
        let host = s.host;
        let line = match &mut self.thin {
            Some(t) => t.line(s, closes),
            None => s,
        };
        if matches!(line.detail, Detail::Later) {
            return self.write_now(&Record::Sample(Box::new(line))).map(|_| ());
        }
        let mut rec = Record::Sample(Box::new(line));
        let rest = match &mut rec {
            // The rows' share of the line: the line less the rest of the Sample.
            Record::Sample(line) => {
                let rows = Rows::take(line);
                let mut n = ByteCount(0);
                let rest = serde_json::to_writer(&mut n, &rec).map(|()| n.0);
                if let Record::Sample(line) = &mut rec {
                    rows.put(line);
                }
                rest.map_err(|e| LogError::io(&self.path)(e.into()))?
            }
            _ => 0,
        };
        let bytes = self.write_now(&rec)?;
        if let Some(t) = &mut self.thin {
            t.wrote_detail(host, bytes.saturating_sub(rest));
        }
        Ok(())
    }

    /// Finish the log: the interval held back is written, closing its spans.
    pub fn finish(&mut self) -> Result<(), LogError> {
        self.release(true)?;
        match &mut self.out {
            Out::Plain(w) => w.flush(),
            Out::Zstd(_) => Ok(()),
        }
        .map_err(LogError::io(&self.path))
    }

    /// Write `r` as one line now; its length in bytes.
    fn write_now(&mut self, r: &Record) -> Result<usize, LogError> {
        let io = LogError::io(&self.path);
        self.buf.clear();
        match r {
            Record::Sample(sample) if self.rows => serde_json::to_writer(
                &mut self.buf,
                &SampleRows {
                    kind: "sample",
                    sample,
                },
            ),
            _ => serde_json::to_writer(&mut self.buf, r),
        }
        .map_err(|e| io(e.into()))?;
        self.buf.push(b'\n');
        match &mut self.out {
            Out::Plain(w) => w.write_all(&self.buf).and_then(|()| w.flush()),
            Out::Zstd(z) => z.write(&self.buf),
        }
        .map_err(io)?;
        Ok(self.buf.len())
    }
}

impl Drop for LogWriter {
    /// The interval held back is written (an error here has no one to go to:
    /// [`LogWriter::finish`] reports it).
    fn drop(&mut self) {
        let _ = self.release(true);
    }
}

/// The lines of a log file, decompressed when it starts with zstd's magic.
fn open_lines(path: &Path) -> Result<Box<dyn BufRead + Send>, LogError> {
    let io = LogError::io(path);
    let mut r = BufReader::new(File::open(path).map_err(io)?);
    if r.fill_buf().map_err(io)?.starts_with(&ZSTD_MAGIC) {
        let d = zstd::stream::read::Decoder::with_buffer(r).map_err(io)?;
        return Ok(Box::new(BufReader::new(d)));
    }
    Ok(Box::new(r))
}

/// The records of a log one at a time, plain or zstd (by its magic bytes):
/// what [`read_log`] collects, for readers that keep only what they need.
/// A final line without its newline, or a zstd frame cut short (a run
/// killed mid-write), ends the records without an error.
pub struct LogReader {
    r: Box<dyn BufRead + Send>,
    path: PathBuf,
    line: String,
    n: usize,
    done: bool,
}

impl LogReader {
    /// Open `path`.
    pub fn open(path: &Path) -> Result<Self, LogError> {
        Ok(LogReader {
            r: open_lines(path)?,
            path: path.into(),
            line: String::new(),
            n: 0,
            done: false,
        })
    }

    /// The next line (with its newline if it had one); None at the end.
    fn next_line(&mut self) -> Result<Option<()>, LogError> {
        self.line.clear();
        let got = match (&mut self.r).take(MAX_LINE + 1).read_line(&mut self.line) {
            Ok(n) => n,
            // A zstd frame cut short: the run was killed mid-write.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                self.line.clear();
                0
            }
            Err(source) => return Err(LogError::io(&self.path)(source)),
        };
        if got == 0 {
            return Ok(None);
        }
        self.n += 1;
        if got as u64 > MAX_LINE {
            return Err(LogError::LineTooLong {
                path: self.path.clone(),
                line: self.n,
                max: MAX_LINE,
            });
        }
        Ok(Some(()))
    }
}

impl Iterator for LogReader {
    type Item = Result<Record, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            match self.next_line() {
                Ok(None) => self.done = true,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Ok(Some(())) if self.line.trim().is_empty() => {}
                Ok(Some(())) => {
                    return match serde_json::from_str::<Record>(&self.line) {
                        Ok(rec) => Some(Ok(rec)),
                        Err(_) if !self.line.ends_with('\n') => {
                            self.done = true;
                            None
                        }
                        Err(source) => {
                            self.done = true;
                            Some(Err(LogError::Parse {
                                path: self.path.clone(),
                                line: self.n,
                                source,
                            }))
                        }
                    }
                }
            }
        }
        None
    }
}

/// Read a log, plain or zstd. A final line without its newline (a run
/// killed mid-write) is ignored.
pub fn read_log(path: &Path) -> Result<Vec<Record>, LogError> {
    LogReader::open(path)?.collect()
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

#[cfg(test)]
mod zstd_tests {
    use super::*;
    use crate::record::schema::Event;

    fn events(n: usize) -> Vec<Record> {
        (0..n)
            .map(|i| {
                Record::Event(Event {
                    t: i as f64,
                    kind: "k".into(),
                    message: format!("record {i} {}", "x".repeat(i % 50)),
                })
            })
            .collect()
    }

    #[test]
    fn a_zst_log_is_compressed_and_read_back_by_its_magic_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.jsonl.zst");
        let recs = events(200);
        // Frames ended after every record, and one long frame: both read back.
        for every in [Duration::ZERO, Duration::from_secs(3600)] {
            let mut w = LogWriter::create_framed(&p, every).unwrap();
            for r in &recs {
                w.write(r).unwrap();
            }
            drop(w);
            let bytes = std::fs::read(&p).unwrap();
            assert!(bytes.starts_with(&ZSTD_MAGIC));
            assert_eq!(read_log(&p).unwrap(), recs);
        }
        // Renamed: still recognised as zstd.
        let q = dir.path().join("renamed.jsonl");
        std::fs::copy(&p, &q).unwrap();
        assert_eq!(read_log(&q).unwrap(), recs);
        let plain = dir.path().join("run.jsonl");
        let mut w = LogWriter::create(&plain).unwrap();
        for r in &recs {
            w.write(r).unwrap();
        }
        drop(w);
        let (z, t) = (
            std::fs::metadata(&p).unwrap().len(),
            std::fs::metadata(&plain).unwrap().len(),
        );
        assert!(z * 4 < t, "zstd {z} bytes, plain {t}");
        assert_eq!(read_log(&plain).unwrap(), recs);
    }

    #[test]
    fn a_killed_zstd_run_leaves_a_log_readable_up_to_its_last_record() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("killed.jsonl.zst");
        let recs = events(30);
        let mut w = LogWriter::create_framed(&p, Duration::from_secs(3600)).unwrap();
        for r in &recs {
            w.write(r).unwrap();
        }
        // No destructor, as when the process is killed: the frame is never ended.
        std::mem::forget(w);
        assert_eq!(read_log(&p).unwrap(), recs);
        // Frames ended after every record, then the file cut mid-frame: the
        // complete records before the cut are read, the rest is not an error.
        let mut w = LogWriter::create_framed(&p, Duration::ZERO).unwrap();
        for r in &recs {
            w.write(r).unwrap();
        }
        drop(w);
        let full = std::fs::read(&p).unwrap();
        std::fs::write(&p, &full[..full.len() - 20]).unwrap();
        let got = read_log(&p).unwrap();
        assert!(!got.is_empty() && got.len() < recs.len(), "{}", got.len());
        assert_eq!(got[..], recs[..got.len()]);
    }

    #[test]
    fn a_damaged_zstd_log_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.jsonl.zst");
        let mut w = LogWriter::create_framed(&p, Duration::ZERO).unwrap();
        for r in &events(20) {
            w.write(r).unwrap();
        }
        drop(w);
        let mut b = std::fs::read(&p).unwrap();
        let mid = b.len() / 2;
        for x in &mut b[mid..mid + 8] {
            *x ^= 0x5a;
        }
        std::fs::write(&p, &b).unwrap();
        let e = read_log(&p).unwrap_err().to_string();
        assert!(e.contains("bad.jsonl.zst"), "{e}");
    }
}

#[cfg(test)]
mod rows_tests {
    use super::*;

    #[test]
    fn the_stdout_stream_writes_samples_as_rows_and_they_read_back_exactly() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tui/run.jsonl");
        let recs = read_log(&fixture).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("stream.jsonl");
        let f = File::create(&p).unwrap();
        // The stdout writer's form, into a file.
        let mut w = LogWriter {
            out: Out::Plain(BufWriter::new(Box::new(f))),
            path: p.clone(),
            buf: Vec::new(),
            rows: true,
            thin: None,
            held: Vec::new(),
        };
        for r in &recs {
            w.write(r).unwrap();
        }
        drop(w);
        let text = std::fs::read_to_string(&p).unwrap();
        let sample = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["type"] == "sample")
            .unwrap();
        assert!(sample["cpus"][0]["idle"].is_number(), "{sample}");
        assert!(sample.get("cpu_cols").is_none());
        assert_eq!(read_log(&p).unwrap(), recs);
    }
}

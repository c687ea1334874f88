//! `wirescope report LOG... -o report.html`: one self-contained HTML page
//! with the charts of one or several logs — the headline and `limited_by`
//! of each point, throughput (or rate, latency, loss) per interval, both
//! hosts' cores as heat maps over time, the busiest queues, softnet
//! counters, the findings on a timeline with their evidence and fix, and a
//! sweep as a chart; several logs side by side.
//!
//! [`data`] reads a log into series (through the replay path), [`charts`]
//! draws them with plotters' SVG backend, [`html`] lays out the page.

pub mod charts;
pub mod data;
pub mod html;

use super::FaceError;
use crate::record::log::read_log;
use std::path::{Path, PathBuf};

/// The runs of these logs, each named by its file name.
pub fn read_runs(logs: &[PathBuf]) -> Result<Vec<data::Run>, FaceError> {
    logs.iter()
        .map(|p| {
            let records = read_log(p).map_err(|e| {
                FaceError::Usage(format!(
                    "{}: {e}; give a log written by `wirescope run --log` or `watch --log`",
                    p.display()
                ))
            })?;
            let name = p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            Ok(data::run(&name, records))
        })
        .collect()
}

/// The page for these logs.
pub fn render(logs: &[PathBuf]) -> Result<String, FaceError> {
    let runs = read_runs(logs)?;
    html::page(&runs).map_err(|e| FaceError::Failed(e.into()))
}

/// The directory `out` goes in (`.` for a bare file name).
pub fn parent_dir(out: &Path) -> &Path {
    match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Write `page` to `out` whole or not at all (a temporary file beside it,
/// renamed over it).
pub fn write_page(out: &Path, page: &str) -> Result<(), FaceError> {
    let dir = parent_dir(out);
    let fail = |e: std::io::Error| {
        FaceError::Usage(format!(
            "cannot write the report {}: {e}; choose a writable path with -o",
            out.display()
        ))
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    std::io::Write::write_all(&mut tmp, page.as_bytes()).map_err(fail)?;
    // A page to share: readable by others, like any file the user writes.
    tmp.as_file()
        .set_permissions(
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o644),
        )
        .map_err(fail)?;
    tmp.persist(out).map_err(|e| fail(e.error))?;
    Ok(())
}

/// `wirescope report`.
pub fn command(a: crate::cli::ReportArgs) -> super::FaceResult {
    let page = render(&a.logs)?;
    write_page(&a.output, &page)?;
    outln!(
        "wirescope: wrote {} ({} log(s), {} KiB)",
        a.output.display(),
        a.logs.len(),
        page.len().div_ceil(1024)
    );
    Ok(0)
}

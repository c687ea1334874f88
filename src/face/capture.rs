//! `wirescope capture DIR`: a snapshot of this host in the sosreport layout,
//! for `watch --from` / `check --from` later or on another machine.

use super::{FaceResult, EXIT_OK};
use crate::cli::CaptureArgs;

/// `wirescope capture DIR`.
pub fn capture(args: CaptureArgs) -> FaceResult {
    let ifaces = if args.ifaces.is_empty() {
        crate::probe::capture_writer::default_ifaces()
    } else {
        args.ifaces.clone()
    };
    let r = crate::probe::capture_writer::capture(&args.dir, &ifaces)
        .map_err(|e| super::FaceError::Failed(e.into()))?;
    eprintln!(
        "wirescope: captured {} files for {} into {}",
        r.files,
        if ifaces.is_empty() {
            "no interface".to_string()
        } else {
            ifaces.join(", ")
        },
        args.dir.display()
    );
    for s in &r.skipped {
        eprintln!("  not captured: {s}");
    }
    if !r.absent.is_empty() {
        eprintln!(
            "  {} file(s) have no value on this host (virtual devices; listed in {})",
            r.absent.len(),
            crate::probe::capture_writer::MANIFEST
        );
    }
    eprintln!(
        "read it back with: wirescope watch --from {}",
        args.dir.display()
    );
    Ok(EXIT_OK)
}

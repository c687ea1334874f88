//! `--replay LOG`: a `wirescope run` (or `watch`, or the TUI's own `l`) log
//! turned into the same model a live session builds: the log's records become
//! the outputs a live pipeline produced ([`crate::record::replay`]) and go
//! through the same [`update`] as live data. Findings are the log's own
//! finding records, so they match what the run showed. The time cursor
//! starts on the last interval.

use super::action::update;
use super::app::actions_of;
use super::model::{Model, ModelConfig};
use crate::record::schema::Record;

/// The test options of the logged command line (`run ...`, `tui ...` or a
/// bare `wirescope`), so the control view shows the test the log holds.
/// None for logs of commands without a test (`watch`) or from another version.
fn logged_test(argv: &[String]) -> Option<crate::cli::TestArgs> {
    use crate::cli::{Cli, Command, TuiArgs};
    use clap::Parser;
    match Cli::try_parse_from(argv).ok()?.command {
        Some(Command::Run(r)) => Some(r.test),
        Some(Command::Tui(t)) => Some(t.test),
        None => Some(TuiArgs::defaults().test),
        Some(_) => None,
    }
}

/// The replay's model configuration from the log's header: the logged
/// test, both hosts, the interval.
pub fn config_from_header(
    header: Option<&crate::record::schema::Header>,
    mut cfg: ModelConfig,
) -> ModelConfig {
    if let Some(h) = header {
        if let Some(test) = logged_test(&h.command_line) {
            cfg.test = test;
        }
        cfg.local_host = h.hosts.local.clone();
        cfg.pair = h.pair.clone();
        if let Some(i) = crate::units::duration_from_secs(h.interval_s).filter(|d| !d.is_zero()) {
            cfg.test.interval = i;
        }
    }
    cfg
}

/// A model for a log read as it streams in (`tui --replay`):
/// it keeps up to a day of intervals (the detail of the newest only, see
/// [`super::model::DETAIL_ROWS`]) and follows the newest until the user
/// moves the cursor.
pub fn streaming_model(header: Option<&Record>, cfg: ModelConfig) -> Model {
    let h = match header {
        Some(Record::Header(h)) => Some(&**h),
        _ => None,
    };
    let mut m = Model::new(config_from_header(h, cfg));
    m.capacity = super::model::MAX_HISTORY;
    m
}

/// Build a replay model from a log's records.
pub fn model_from_records(records: Vec<Record>, cfg: ModelConfig) -> Model {
    let header = records.iter().find_map(|r| match r {
        Record::Header(h) => Some(h.clone()),
        _ => None,
    });
    let cfg = config_from_header(header.as_deref(), cfg);
    let samples = records
        .iter()
        .filter(|r| matches!(r, Record::Sample(_)))
        .count();
    let mut m = Model::new(cfg);
    m.capacity = m.capacity.max(samples + 1);
    for o in crate::record::replay::outputs(records) {
        for a in actions_of(o) {
            update(&mut m, a);
        }
    }
    if m.history.is_empty() {
        m.message = Some("this log holds no interval (an empty or header-only log)".into());
    }
    m.cursor = m.history.back().map(|i| i.seq);
    m
}

//! Records of a run: the JSON-lines log, the summary, and the human table.
//!
//! The log is the same Samples the TUI shows, serialised one record per line,
//! each with a `type`: `header`, `sample`, `event`, `summary`. It is written
//! and flushed record by record, so a run that is killed leaves a valid
//! prefix that [`log::read_log`] (and the TUI's replay) can read.
//!
//! The same Samples and findings are also served to Prometheus
//! ([`metrics`]: OpenMetrics over HTTP, `--metrics ADDR`).

pub mod aggregate;
pub mod compact;
pub mod detail;
pub mod log;
pub mod metrics;
pub mod netns_fix;
pub mod pipeline;
pub mod replay;
pub mod schema;
pub mod summary;
pub mod text;

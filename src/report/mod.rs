//! Reports of a run: the versioned model ([`model`]) and the writers over it: JUnit XML
//! ([`junit`]), JSON ([`json`], schema in `schemas/report-v1.schema.json`), a Markdown summary
//! ([`markdown`]), one self-contained HTML page with SVG timelines ([`html`]) and the
//! terminal phase table ([`table`]); [`compare`] diffs two runs. Every writer is a pure
//! function of a [`RunReport`]; [`write_all`] is the only one that touches the disk, and it
//! runs everything through the [`Redactor`] first. [`fmt`] holds the shared formatting
//! (phase labels, durations, sizes) so that every output reads the same.

pub mod compare;
pub mod fmt;
pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod model;
pub mod redact;
pub mod table;

mod error;
mod failure;
mod svg;
mod write;

#[cfg(test)]
pub(crate) mod test_support;

pub use error::ReportError;
pub use failure::{FailureSummary, failure_summary};
pub use fmt::{KEY_PHASES, phase_label};
pub use model::{
    CleanupEntry, GpuSample, LeftSnapshot, RunReport, SCHEMA_VERSION, ScenarioReport,
    ScenarioStatus, SnapshotsLeft, StepReport, StepStatus, TargetInfo, TargetKind,
};
pub use redact::{Redactor, redact_volatile};
pub use table::phase_table;
pub use write::{
    FILES, check_reports_dir, read_report, write_all, write_all_to, write_file, write_json,
    write_page, write_rendered,
};

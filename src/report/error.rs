//! The report module's one error type.

use std::path::PathBuf;

/// Every way reading or writing reports can fail.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A report file or directory could not be read or written.
    #[error("cannot {action} {}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not a JSON report this build understands.
    #[error("{} is not a wsgate JSON report", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The report was written with another schema version.
    #[error(
        "{} has report schema version {found}; this wsgate reads version {supported}",
        path.display()
    )]
    SchemaVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// The run id cannot name a directory.
    #[error(
        "run id {run_id:?} cannot name a report directory (use letters, digits, '.', '_', '-')"
    )]
    InvalidRunId { run_id: String },
    /// The JUnit XML could not be produced.
    #[error("cannot write the JUnit XML")]
    Junit {
        #[source]
        source: junit_report::Error,
    },
    /// The JUnit XML could not be post-processed (properties).
    #[error("cannot add properties to the JUnit XML")]
    Xml {
        #[source]
        source: quick_xml::Error,
    },
    /// The model could not be turned into JSON (a bug).
    #[error("cannot serialise the report")]
    Serialize {
        #[source]
        source: serde_json::Error,
    },
}

//! The arguments of `wsgate report` (the command itself is `crate::commands::report`).

use std::path::PathBuf;

use clap::ArgGroup;

#[derive(Debug, Clone, clap::Args)]
#[command(group(ArgGroup::new("input").required(true).args(["file", "compare"])))]
pub struct ReportArgs {
    /// A JSON report (reports/<run-id>/report.json) to re-render as summary.md and report.html
    #[arg(value_name = "FILE.json")]
    pub file: Option<PathBuf>,
    /// Where to write the re-rendered files (default: next to FILE.json)
    #[arg(long, value_name = "DIR", requires = "file")]
    pub out: Option<PathBuf>,
    /// Compare two reports, A (baseline) then B: what got slower or started failing in B
    #[arg(long, num_args = 2, value_names = ["A.json", "B.json"])]
    pub compare: Option<Vec<PathBuf>>,
    /// A phase counts as changed when it moved by more than this percentage...
    #[arg(long, default_value_t = 20.0, value_name = "PERCENT", requires = "compare", value_parser = non_negative,
        allow_negative_numbers = true)]
    pub threshold: f64,
    /// ...and by at least this many seconds
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS", requires = "compare", value_parser = non_negative,
        allow_negative_numbers = true)]
    pub min_delta: f64,
    /// Print the comparison as JSON
    #[arg(long, requires = "compare")]
    pub json: bool,
}

fn non_negative(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{text:?} is not a non-negative number")),
    }
}

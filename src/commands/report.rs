//! `wsgate report`: re-render the Markdown summary and the HTML page from a JSON report
//! (next to it, or into `--out`), or compare two reports: what got slower beyond a
//! threshold, what started failing, whose verdict changed. A comparison with regressions
//! exits 1 (FAILED), so CI can gate on it.

use std::path::PathBuf;
use std::time::Duration;

use clap::ArgGroup;

use super::CommandError;
use crate::exit_code;
use crate::report::compare::{self, Threshold};
use crate::report::{Redactor, ReportError, phase_table, read_report, write_rendered};

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
    #[arg(long, default_value_t = 20.0, value_name = "PERCENT", requires = "compare", value_parser = non_negative)]
    pub threshold: f64,
    /// ...and by at least this many seconds
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS", requires = "compare", value_parser = non_negative)]
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

pub async fn run(args: ReportArgs) -> Result<i32, CommandError> {
    if let Some(pair) = &args.compare {
        return compare_reports(&pair[0], &pair[1], &args);
    }
    let Some(file) = &args.file else {
        // clap's group requires one of the two.
        return Ok(exit_code::USAGE);
    };
    let report = read_report(file)?;
    let dir = match &args.out {
        Some(d) => d.clone(),
        None => file
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_else(|| PathBuf::from(".")),
    };
    print!("{}", phase_table(&report));
    for path in write_rendered(&report, &dir, &Redactor::none())? {
        println!("wrote {}", path.display());
    }
    Ok(exit_code::SUCCESS)
}

fn compare_reports(
    a: &std::path::Path,
    b: &std::path::Path,
    args: &ReportArgs,
) -> Result<i32, CommandError> {
    let before = read_report(a)?;
    let after = read_report(b)?;
    let threshold = Threshold {
        percent: args.threshold,
        min_delta: Duration::from_secs_f64(args.min_delta),
    };
    let c = compare::compare(&before, &after, threshold);
    if args.json {
        let text =
            serde_json::to_string_pretty(&c).map_err(|source| ReportError::Serialize { source })?;
        println!("{text}");
    } else {
        print!("{}", compare::render(&c));
    }
    Ok(if c.regressions() > 0 {
        exit_code::FAILED
    } else {
        exit_code::SUCCESS
    })
}

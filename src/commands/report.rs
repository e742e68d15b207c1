//! `wsgate report`: re-render the Markdown summary and the HTML page from a JSON report
//! (next to it, or into `--out`), or compare two reports: what got slower beyond a
//! threshold, what started failing, whose verdict changed. A comparison with regressions
//! exits 1 (FAILED), so CI can gate on it.

use std::path::PathBuf;
use std::time::Duration;

use super::CommandError;
use crate::cli::report::ReportArgs;
use crate::exit_code;
use crate::report::compare::{self, Threshold};
use crate::report::{Redactor, ReportError, phase_table, read_report, write_rendered};

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
    let written = write_rendered(&report, &dir, &Redactor::none())
        .map_err(|e| CommandError::writing_reports(e, "--out"))?;
    for path in written {
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
    Ok(c.exit_code())
}

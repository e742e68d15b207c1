//! The only part of `report` that touches the disk: write every format of a run under
//! `<dir>/<run-id>/` (and append the summary to `$GITHUB_STEP_SUMMARY`), re-render Markdown
//! and HTML from a JSON report, and read a JSON report back.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::ReportError;
use super::html::html_page;
use super::json::{from_json, to_json};
use super::junit::junit_xml;
use super::markdown::markdown;
use super::model::RunReport;
use super::redact::Redactor;

/// The files [`write_all`] writes into the run's directory, in order.
pub const FILES: [&str; 4] = ["report.json", "junit.xml", "summary.md", "report.html"];

/// Writes every format under `<dir>/<run-id>/` (see [`FILES`]) with every secret the
/// `redactor` knows replaced, and appends the Markdown summary to the file named by
/// `$GITHUB_STEP_SUMMARY` when it is set. Returns the files written in the run directory.
pub fn write_all(
    report: &RunReport,
    dir: &Path,
    redactor: &Redactor,
) -> Result<Vec<PathBuf>, ReportError> {
    let step_summary = std::env::var_os("GITHUB_STEP_SUMMARY")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    write_all_to(report, dir, redactor, step_summary.as_deref())
}

/// [`write_all`] with the step summary file given instead of read from the environment.
pub fn write_all_to(
    report: &RunReport,
    dir: &Path,
    redactor: &Redactor,
    step_summary: Option<&Path>,
) -> Result<Vec<PathBuf>, ReportError> {
    check_run_id(&report.run_id)?;
    let clean = redactor.redact_report(report);
    // Render everything before writing anything: no half-written report directory.
    let summary = redactor.redact(&markdown(&clean));
    let contents = [
        redactor.redact(&to_json(&clean)?),
        redactor.redact(&junit_xml(&clean)?),
        summary.clone(),
        redactor.redact(&html_page(&clean)),
    ];
    let run_dir = dir.join(&clean.run_id);
    create_dir(&run_dir)?;
    let mut written = Vec::new();
    for (name, text) in FILES.iter().zip(contents) {
        written.push(write_file(&run_dir.join(name), &text)?);
    }
    if let Some(path) = step_summary {
        append(path, &summary)?;
    }
    Ok(written)
}

/// Writes one command's own page (`drill.html`, `gate-verify.html`, built on
/// [`super::html::page`]) as `<dir>/<run-id>/<name>`, through the same redaction and atomic
/// write as the run's reports.
pub fn write_page(
    page: &str,
    dir: &Path,
    run_id: &str,
    name: &str,
    redactor: &Redactor,
) -> Result<PathBuf, ReportError> {
    write_in_run_dir(dir, run_id, name, &redactor.redact(page))
}

/// Writes one command's own result (`drill.json`, `gate-verify.json`) as
/// `<dir>/<run-id>/<name>`, through the same redaction and atomic write as the run's reports.
pub fn write_json(
    value: &impl serde::Serialize,
    dir: &Path,
    run_id: &str,
    name: &str,
    redactor: &Redactor,
) -> Result<PathBuf, ReportError> {
    check_run_id(run_id)?;
    let serialize = |source| ReportError::Serialize { source };
    let mut json = serde_json::to_value(value).map_err(serialize)?;
    redactor.redact_value(&mut json);
    let text = serde_json::to_string_pretty(&json).map_err(serialize)?;
    write_in_run_dir(dir, run_id, name, &redactor.redact(&text))
}

/// Writes `text` (already redacted) as `<dir>/<run-id>/<name>`, after checking the run id.
fn write_in_run_dir(
    dir: &Path,
    run_id: &str,
    name: &str,
    text: &str,
) -> Result<PathBuf, ReportError> {
    check_run_id(run_id)?;
    let run_dir = dir.join(run_id);
    create_dir(&run_dir)?;
    write_file(&run_dir.join(name), text)
}

/// Re-renders `summary.md` and `report.html` from a report into `dir`.
pub fn write_rendered(
    report: &RunReport,
    dir: &Path,
    redactor: &Redactor,
) -> Result<Vec<PathBuf>, ReportError> {
    let clean = redactor.redact_report(report);
    let md = redactor.redact(&markdown(&clean));
    let page = redactor.redact(&html_page(&clean));
    create_dir(dir)?;
    Ok(vec![
        write_file(&dir.join("summary.md"), &md)?,
        write_file(&dir.join("report.html"), &page)?,
    ])
}

/// Reads a JSON report written by `wsgate run`.
pub fn read_report(path: &Path) -> Result<RunReport, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    })?;
    from_json(&text, path)
}

fn check_run_id(run_id: &str) -> Result<(), ReportError> {
    let ok = !run_id.is_empty()
        && run_id != "."
        && run_id != ".."
        && run_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(ReportError::InvalidRunId {
            run_id: run_id.to_string(),
        })
    }
}

/// Checks, before a command starts its work, that `dir` can take its reports: creates it and
/// writes and removes a file in it, so that a run of an hour never ends with reports it
/// cannot write.
pub fn check_reports_dir(dir: &Path) -> Result<(), ReportError> {
    create_dir(dir)?;
    let probe = dir.join(format!(".wsgate-write-check-{}", std::process::id()));
    write_file(&probe, "")?;
    std::fs::remove_file(&probe).map_err(|source| ReportError::Io {
        action: "remove",
        path: probe.clone(),
        source,
    })
}

fn create_dir(dir: &Path) -> Result<(), ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io {
        action: "create the report directory",
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes through a temporary file and a rename, so a reader never sees half a file.
pub fn write_file(path: &Path, text: &str) -> Result<PathBuf, ReportError> {
    let tmp = path.with_extension("tmp");
    let io = |source| ReportError::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    };
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    Ok(path.to_path_buf())
}

fn append(path: &Path, text: &str) -> Result<(), ReportError> {
    let io = |source| ReportError::Io {
        action: "append the summary to",
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)?;
    f.write_all(b"\n").map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_that_would_leave_the_directory_are_refused() {
        for bad in ["", ".", "..", "../x", "a/b", "r 1"] {
            assert!(check_run_id(bad).is_err(), "{bad:?}");
        }
        assert!(check_run_id("r20260302-020000-a1b2").is_ok());
    }

    /// A command's own result (drill.json, gate-verify.json) goes through the redactor: the
    /// token in a value, in a map key, or base64-encoded never reaches the file.
    #[test]
    fn a_commands_result_is_written_redacted_under_its_run() {
        use base64::Engine as _;
        let dir = tempfile::tempdir().unwrap();
        let token = "s3cret-t0ken-value";
        let value = serde_json::json!({
            "problem": format!("pod said {token}"),
            token: 1,
            "b64": base64::engine::general_purpose::STANDARD.encode(token),
        });
        let redactor = Redactor::new(vec![token.to_owned()]);
        let path = write_json(&value, dir.path(), "r1", "drill.json", &redactor).unwrap();
        assert_eq!(path, dir.path().join("r1").join("drill.json"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains(token) && !text.contains("czNjcmV0"),
            "{text}"
        );
        assert!(text.contains("pod said [REDACTED]"), "{text}");
        let refused = write_json(&value, dir.path(), "../up", "drill.json", &redactor);
        assert!(matches!(refused, Err(ReportError::InvalidRunId { .. })));
    }

    #[test]
    fn writes_every_file_and_appends_the_step_summary() {
        let dir = tempfile::tempdir().unwrap();
        let summary = dir.path().join("step-summary.md");
        std::fs::write(&summary, "earlier step\n").unwrap();
        let r = RunReport {
            run_id: "r20260302-020000-a1b2".into(),
            ..RunReport::default()
        };
        let written = write_all_to(&r, dir.path(), &Redactor::none(), Some(&summary)).unwrap();
        let names: Vec<_> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        assert_eq!(names, FILES);
        assert!(
            written
                .iter()
                .all(|p| p.parent().unwrap().ends_with(&r.run_id))
        );
        let appended = std::fs::read_to_string(&summary).unwrap();
        assert!(
            appended.starts_with("earlier step\n# wsgate run"),
            "{appended}"
        );
        let back = read_report(&written[0]).unwrap();
        assert_eq!(back, r);
        let err = read_report(&dir.path().join("missing.json")).unwrap_err();
        assert!(err.to_string().contains("missing.json"), "{err}");
    }
}

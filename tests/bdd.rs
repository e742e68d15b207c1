//! The verification suite against the embedded simulator, exactly as a user runs it:
//! `wsgate run` from the project directory. First on a healthy simulator, where every
//! scenario must pass; then with simulator faults, where the suite must fail the scenarios
//! the fault breaks, for the right reason, and pass the rest; and with the API server
//! answering 429/500 to 10% of requests and dropping watches, where every scenario must still
//! reach its verdict. `harness = false`: this is
//! the test's main, and it ends with a `N passed, N failed` line.

use std::path::Path;
use std::process::{Command, ExitCode};

use serde_json::Value;

/// One suite run: extra `wsgate run` arguments, and per scenario (by a name fragment) the
/// expected status and, for failures, a fragment the failure message must contain.
struct Case {
    name: &'static str,
    fault: Option<&'static str>,
    /// A whole simulator profile instead of the default one (relative to the project).
    profile: Option<&'static str>,
    expect: &'static [(&'static str, &'static str, &'static str)],
}

/// Every scenario passes: the healthy expectation, shared by the API-trouble run.
const ALL_PASS: &[(&str, &str, &str)] = &[
    ("resumes with its process", "passed", ""),
    ("snapshot is deleted", "passed", ""),
    ("kind without snapshots", "passed", ""),
    ("snapshots are gone", "passed", ""),
    ("GPU squeeze", "passed", ""),
    ("comes back restored", "passed", ""),
    ("invalidates the snapshot", "passed", ""),
    ("3 paused workspaces", "passed", ""),
    ("4 paused workspaces", "passed", ""),
    ("checkpoint fails", "passed", ""),
    ("GPU model changed", "passed", ""),
];

const CASES: &[Case] = &[
    Case {
        name: "healthy simulator",
        fault: None,
        profile: None,
        expect: ALL_PASS,
    },
    Case {
        name: "fault silent-cold-start",
        fault: Some("silent-cold-start"),
        profile: None,
        expect: &[
            (
                "resumes with its process",
                "failed",
                "verdict FreshSession, expected Restored",
            ),
            ("snapshot is deleted", "passed", ""),
            ("kind without snapshots", "passed", ""),
            (
                "snapshots are gone",
                "failed",
                "verdict FreshSession, expected Restored",
            ),
            (
                "GPU squeeze",
                "failed",
                "verdict FreshSession, expected Restored",
            ),
            (
                "comes back restored",
                "failed",
                "gate verdict SnapshotInvalidated, expected Restored",
            ),
            ("invalidates the snapshot", "passed", ""),
            ("3 paused workspaces", "failed", "not restored"),
            ("4 paused workspaces", "failed", "FreshSession (platform)"),
            // These expect a cold start already: a silent one changes nothing.
            ("checkpoint fails", "passed", ""),
            ("GPU model changed", "passed", ""),
        ],
    },
    Case {
        name: "fault lose-home-files",
        fault: Some("lose-home-files"),
        profile: None,
        expect: &[
            ("resumes with its process", "failed", "expected Restored"),
            ("snapshot is deleted", "failed", "expected FreshSession"),
            ("kind without snapshots", "failed", "expected FreshSession"),
            ("snapshots are gone", "failed", "expected Restored"),
            ("GPU squeeze", "failed", "expected Restored"),
            (
                "comes back restored",
                "failed",
                "gate verdict Failed, expected Restored",
            ),
            (
                "invalidates the snapshot",
                "failed",
                "gate verdict Failed, expected SnapshotInvalidated",
            ),
            // The kernel-checked workspace sees the lost files; the others have only the
            // platform's restore condition, which a file loss does not touch.
            ("3 paused workspaces", "failed", "FilesLost"),
            ("4 paused workspaces", "passed", ""),
            (
                "checkpoint fails",
                "failed",
                "verdict FilesLost, expected FreshSession",
            ),
            (
                "GPU model changed",
                "failed",
                "verdict FilesLost, expected FreshSession",
            ),
        ],
    },
    Case {
        name: "API trouble (429/500 on 10% of requests, dropped watches)",
        fault: None,
        profile: Some("fixtures/sim/api-trouble.toml"),
        expect: ALL_PASS,
    },
];

fn run_case(root: &Path, case: &Case) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wsgate"));
    cmd.arg("run")
        .arg("--reports")
        .arg(dir.path())
        .current_dir(root)
        .env_remove("KUBECONFIG");
    if let Some(profile) = case.profile {
        cmd.arg("--set")
            .arg(format!("sim.profile={}", root.join(profile).display()));
    }
    if let Some(fault) = case.fault {
        let profile = std::fs::read_to_string(root.join("fixtures/sim/default.toml"))
            .map_err(|e| e.to_string())?;
        let profile = profile.replace("enabled = []", &format!("enabled = [\"{fault}\"]"));
        let path = dir.path().join("faulty.toml");
        std::fs::write(&path, profile).map_err(|e| e.to_string())?;
        cmd.arg("--set")
            .arg(format!("sim.profile={}", path.display()));
    }
    // A known Jupyter token, so that the reports can be searched for it.
    let token = format!("bdd-jupyter-token-{}", std::process::id());
    cmd.env("WSGATE_JUPYTER_TOKEN", &token);
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start wsgate: {e}"))?;
    if let Some(file) = find_secret(dir.path(), &token) {
        return Err(format!(
            "the run's Jupyter token appears in {}",
            file.display()
        ));
    }
    let report = std::fs::read_dir(dir.path())
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path().join("report.json"))
        .find(|p| p.exists())
        .ok_or("wsgate run wrote no report.json")?;
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(report).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let scenarios = report["scenarios"]
        .as_array()
        .ok_or("report has no scenarios")?;
    if report["gpu_allocation"]
        .as_array()
        .is_none_or(|a| a.is_empty())
    {
        return Err("the report has no GPU allocation samples".into());
    }
    let mut problems = Vec::new();
    for (fragment, status, message) in case.expect {
        let Some(s) = scenarios
            .iter()
            .find(|s| s["name"].as_str().is_some_and(|n| n.contains(fragment)))
        else {
            problems.push(format!("scenario {fragment:?} did not run"));
            continue;
        };
        let got = s["status"].as_str().unwrap_or("");
        let failure = s["failure"].as_str().unwrap_or("");
        if got != *status {
            problems.push(format!(
                "scenario {fragment:?}: {got}, expected {status} ({failure})"
            ));
        } else if !message.is_empty() && !failure.contains(message) {
            problems.push(format!(
                "scenario {fragment:?} failed for another reason: {failure}"
            ));
        }
    }
    let all_pass = case.expect.iter().all(|(_, s, _)| *s == "passed");
    if all_pass != status.success() {
        problems.push(format!("wsgate run exited with {status}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n  "))
    }
}

/// The first file under `dir` whose bytes contain `secret`.
fn find_secret(dir: &Path, secret: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_secret(&path, secret) {
                return Some(found);
            }
        } else if std::fs::read(&path)
            .is_ok_and(|b| b.windows(secret.len()).any(|w| w == secret.as_bytes()))
        {
            return Some(path);
        }
    }
    None
}

fn main() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut passed, mut failed) = (0, 0);
    for case in CASES {
        println!("\n=== bdd: {} ===", case.name);
        match run_case(root, case) {
            Ok(()) => {
                println!("=== bdd: {}: as expected", case.name);
                passed += 1;
            }
            Err(e) => {
                println!("=== bdd: {}: NOT as expected:\n  {e}", case.name);
                failed += 1;
            }
        }
    }
    println!("\nbdd: {passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

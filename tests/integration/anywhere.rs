//! An installed binary works wherever it is started (#15): a copy of `wsgate` in a bin
//! directory of its own, run from an empty directory, finds its features, profiles, cells
//! and the simulator's requirements inside itself and its Python runtime in the user's cache,
//! and runs the suite.

use std::path::Path;
use std::process::Output;

use crate::common::{COMMAND_LIMIT_S, text, within};

fn wsgate_in(bin: &Path, cwd: &Path, args: &[&str]) -> Output {
    within(COMMAND_LIMIT_S, bin)
        .current_dir(cwd)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("WSGATE_PROFILE")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_copy_of_the_binary_runs_the_suite_from_an_empty_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let bin_dir = tmp.path().join("bin");
    let work = tmp.path().join("empty");
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let bin = bin_dir.join("wsgate");
    std::fs::copy(env!("CARGO_BIN_EXE_wsgate"), &bin).unwrap();

    // The plan names the shipped features and profiles, none read from here.
    let o = wsgate_in(&bin, &work, &["run", "--dry-run"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    for feature in [
        "pause_resume.feature (shipped)",
        "snapshots.feature (shipped)",
    ] {
        assert!(out.contains(feature), "{out}");
    }
    assert!(out.contains("profile default"), "{out}");
    let o = wsgate_in(&bin, &work, &["run", "--profile", "nightly", "--dry-run"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("nightly (shipped)"), "{}", text(&o));
    // The path written for the source tree means the shipped profile where it is missing.
    let o = wsgate_in(
        &bin,
        &work,
        &[
            "run",
            "--profile",
            "fixtures/profiles/nightly.toml",
            "--dry-run",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = wsgate_in(&bin, &work, &["run", "--profile", "nigthly", "--dry-run"]);
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::USAGE),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains("capacity-drill, gke-t4, nightly, release-gate, sim-default"),
        "{}",
        text(&o)
    );

    // One real scenario: the simulator, a Jupyter server in its pod, pause and resume.
    let reports = tmp.path().join("reports");
    let o = wsgate_in(
        &bin,
        &work,
        &[
            "run",
            "--name",
            "A paused GPU workspace resumes with its process, model and files",
            "--reports",
            reports.to_str().unwrap(),
        ],
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("1 scenarios: 1 passed, 0 failed"), "{out}");
    let run_dirs: Vec<_> = std::fs::read_dir(&reports)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(run_dirs.len(), 1, "{run_dirs:?}");
    let report = std::fs::read_to_string(run_dirs[0].join("report.json")).unwrap();
    assert!(
        report.contains("A paused GPU workspace resumes"),
        "{report}"
    );
    // Nothing was written where it was started.
    let left: Vec<_> = std::fs::read_dir(&work).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

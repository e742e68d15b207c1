//! `wsgate sim calibrate` end to end: suite runs on a simulator profile with known timings,
//! with kernels of three sizes (`workspace.model_ballast_mib`), are calibrated from their
//! JSON reports; the calibrated profile gives the known timings and bandwidths back within
//! 10%, a suite run on it compares phase by phase with the first (`report --compare`), and a
//! drill runs on it; bad reports and bad `--out` paths are refused with what to do.

use std::path::{Path, PathBuf};

use wsgate::sim::profile::{DEFAULT_PROFILE, SimProfile};

use crate::common::{text, wsgate_command};

const SCENARIO: &str = "A paused GPU workspace resumes with its process";

/// The known timings (ms): pod start long enough to hold the real Jupyter server's own
/// start (it starts within it), the rest well above the harness's observation lag.
const POD_START: f64 = 9000.0;
const RESTORE: f64 = 1500.0;
const TERMINATION: f64 = 1500.0;
const RESTORED_LAG: f64 = 1500.0;
const CHECKPOINT_FIXED: f64 = 600.0;
/// The known bandwidths (MiB/s): a checkpoint or restore of the kernel of the largest run
/// (about 1 GiB) takes seconds more than one of the smallest (about 150 MiB).
const CHECKPOINT_MIB_PER_S: f64 = 300.0;
const RESTORE_MIB_PER_S: f64 = 600.0;
/// The kernels' memory beyond the model's, per run (MiB): sizes spread about sevenfold.
const BALLASTS: [u32; 3] = [0, 300, 900];

fn known_profile(dir: &Path) -> PathBuf {
    let text = DEFAULT_PROFILE
        .replace("pod_start_ms = 100", &format!("pod_start_ms = {POD_START}"))
        .replace(
            "termination_ms = 50",
            &format!("termination_ms = {TERMINATION}"),
        )
        // No settle: its wait depends on where in its second the pause fell.
        .replace("addon_settle_ms = 100", "addon_settle_ms = 0")
        .replace(
            "checkpoint_mib_per_s = 2048.0",
            &format!("checkpoint_mib_per_s = {CHECKPOINT_MIB_PER_S}"),
        )
        .replace(
            "restore_ms = 300",
            &format!("restore_ms = {RESTORE}\nrestore_mib_per_s = {RESTORE_MIB_PER_S}"),
        )
        .replace(
            "pod_restored_after_ready_ms = 2000",
            &format!("pod_restored_after_ready_ms = {RESTORED_LAG}"),
        )
        .replace(
            "checkpoint_min_ms = 200",
            &format!("checkpoint_min_ms = 0\ncheckpoint_fixed_ms = {CHECKPOINT_FIXED}"),
        );
    let p = SimProfile::parse("known", &text).expect("the known profile is valid");
    assert_eq!(
        p.timing.pod_start_ms.median().as_millis(),
        POD_START as u128
    );
    assert_eq!(p.timing.checkpoint_mib_per_s, CHECKPOINT_MIB_PER_S);
    assert_eq!(p.timing.restore_mib_per_s, RESTORE_MIB_PER_S);
    let path = dir.join("known.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn wsgate(args: &[&str]) -> std::process::Output {
    wsgate_command()
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("wsgate runs")
}

/// Runs the pause/resume scenario on `profile`, its kernel holding `ballast_mib` more;
/// returns its report.json.
fn suite_on(profile: &Path, reports: &Path, ballast_mib: u32) -> PathBuf {
    let profile = format!("sim.profile={}", profile.display());
    let ballast = format!("workspace.model_ballast_mib={ballast_mib}");
    let reports_arg = reports.display().to_string();
    let o = wsgate(&[
        "run",
        "--name",
        SCENARIO,
        "--set",
        &profile,
        "--set",
        &ballast,
        "--reports",
        &reports_arg,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    in_run_dir(reports, "report.json")
}

/// `file` in the one run directory under `reports` (`reports/<run-id>/file`).
fn in_run_dir(reports: &Path, file: &str) -> PathBuf {
    std::fs::read_dir(reports)
        .unwrap()
        .flatten()
        .map(|e| e.path().join(file))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no {file} under {}", reports.display()))
}

fn ms(d: &wsgate::sim::delay::Delay) -> f64 {
    d.median().as_secs_f64() * 1000.0
}

fn within_10_percent(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= want * 0.10,
        "{what}: calibrated {got:.0} ms, known {want:.0} ms"
    );
}

#[test]
fn a_profile_calibrated_from_a_run_gives_its_timings_back() {
    let dir = tempfile::tempdir().unwrap();
    let known = known_profile(dir.path());
    let firsts: Vec<String> = BALLASTS
        .iter()
        .map(|b| {
            let r = suite_on(&known, &dir.path().join(format!("first-{b}")), *b);
            r.display().to_string()
        })
        .collect();
    // The kernels' resident sizes as the reports hold them, spread by the ballast.
    let sizes: Vec<f64> = firsts
        .iter()
        .map(|f| {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            // The run recorded the API server's version, which says it is the simulator.
            let version = v["target"]["server_version"].as_str().unwrap_or("");
            assert!(version.ends_with("+wsgate-sim"), "{version:?}");
            v["scenarios"][0]["evidence_before"]["kernel"]["resident_bytes"]
                .as_f64()
                .expect("the report holds the kernel's resident bytes")
        })
        .collect();
    assert!(
        sizes[2] - sizes[0] > 800.0 * 1024.0 * 1024.0,
        "the ballast is resident: {sizes:?}"
    );
    let report = firsts[0].clone();
    let out = dir.path().join("calibrated.toml");
    let out_arg = out.display().to_string();
    let known_arg = known.display().to_string();

    // A simulator's report is not a cluster's: refused unless asked for.
    let o = wsgate(&["sim", "calibrate", &report, "--out", &out_arg]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--allow-simulated"), "{}", text(&o));
    assert!(!out.exists(), "nothing written");

    let mut args = vec!["sim", "calibrate"];
    args.extend(firsts.iter().map(String::as_str));
    args.extend(["--out", &out_arg, "--base", &known_arg, "--allow-simulated"]);
    let o = wsgate(&args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("pod_start_ms"), "{}", text(&o));
    // Each fit is printed with its error.
    for fit in ["checkpoint = ", "restore = "] {
        assert!(
            text(&o)
                .lines()
                .any(|l| l.starts_with(fit) && l.contains("(fitted)") && l.contains("rms error")),
            "{fit}: {}",
            text(&o)
        );
    }
    let p = SimProfile::load(&out).expect("the calibrated profile loads");
    let t = &p.timing;
    assert!(t.pod_start_ms.is_drawn(), "{:?}", t.pod_start_ms);
    within_10_percent(ms(&t.pod_start_ms), POD_START, "pod start");
    within_10_percent(ms(&t.restore_ms), RESTORE, "restore");
    within_10_percent(ms(&t.termination_ms), TERMINATION, "termination");
    within_10_percent(
        ms(&t.pod_restored_after_ready_ms),
        RESTORED_LAG,
        "PodRestored lag",
    );
    // Three sizes apart: both bandwidths are fitted, not kept from the base.
    within_10_percent(
        ms(&t.checkpoint_fixed_ms),
        CHECKPOINT_FIXED,
        "checkpoint fixed cost",
    );
    assert!(
        (t.checkpoint_mib_per_s - CHECKPOINT_MIB_PER_S).abs() <= CHECKPOINT_MIB_PER_S * 0.10,
        "checkpoint bandwidth: calibrated {} MiB/s, known {CHECKPOINT_MIB_PER_S} ({})",
        t.checkpoint_mib_per_s,
        text(&o)
    );
    assert!(
        (t.restore_mib_per_s - RESTORE_MIB_PER_S).abs() <= RESTORE_MIB_PER_S * 0.10,
        "restore bandwidth: calibrated {} MiB/s, known {RESTORE_MIB_PER_S} ({})",
        t.restore_mib_per_s,
        text(&o)
    );
    assert!(!text(&o).contains("kept from the base"), "{}", text(&o));
    let cal = p.calibration.as_ref().expect("the sources are recorded");
    assert_eq!(cal["simulated"].as_bool(), Some(true));
    assert_eq!(
        cal["sources"].as_array().map(Vec::len),
        Some(BALLASTS.len())
    );

    // A second run on the calibrated profile, phase by phase against the first.
    let second = suite_on(&out, &dir.path().join("second"), BALLASTS[0]);
    let second = second.display().to_string();
    let o = wsgate(&["report", "--compare", &report, &second, "--json"]);
    let json: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    let ratios = json["ratios"].as_array().expect("ratios");
    let mut checked = 0;
    for r in ratios {
        let (phase, before) = (r["phase"].as_str().unwrap(), r["before"].as_f64().unwrap());
        // Phases of a few ms are the harness's own lag, not a timing the profile sets.
        if before < 0.3 {
            continue;
        }
        let ratio = r["ratio"].as_f64().unwrap();
        assert!(
            (0.9..=1.1).contains(&ratio),
            "{phase}: {ratio:.2} of the first run ({})",
            text(&o)
        );
        checked += 1;
    }
    assert!(checked >= 6, "{ratios:?}");

    // A drill on the calibrated profile: every workspace restored, in about the
    // calibrated pod start and restore.
    let reports = dir.path().join("drill").display().to_string();
    let profile = format!("sim.profile={out_arg}");
    let o = wsgate(&[
        "drill",
        "--workspaces",
        "3",
        "--gpus",
        "2",
        "--sample",
        "0",
        "--set",
        &profile,
        "--reports",
        &reports,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("all 3 workspaces restored"),
        "{}",
        text(&o)
    );
    let drill_json = in_run_dir(&dir.path().join("drill"), "drill.json");
    let drill: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(drill_json).unwrap()).unwrap();
    // Its workspaces have no process (the `none` runtime): their nominal memory restores.
    let restore = t.restore_duration(
        wsgate::sim::pods::NOMINAL_RESIDENT_BYTES,
        t.restore_ms.median(),
    );
    let resume = ms(&t.pod_start_ms) + restore.as_secs_f64() * 1000.0;
    for r in drill["results"].as_array().unwrap() {
        let started = (r["to_running"].as_f64().unwrap() - r["waited"].as_f64().unwrap()) * 1000.0;
        within_10_percent(started, resume, "a drill workspace's resume past its wait");
    }
    within_10_percent(
        drill["ready_to_pod_restored"]["p50_s"].as_f64().unwrap() * 1000.0,
        ms(&t.pod_restored_after_ready_ms),
        "the drill's PodRestored lag",
    );
}

#[test]
fn bad_reports_and_outputs_are_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, body: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        p.display().to_string()
    };
    let good = wsgate::report::json::to_json(&crate::report::fixture::run_a()).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    v["schema_version"] = 2.into();
    let newer = file("newer.json", &v.to_string());
    v["schema_version"] = 1.into();
    v["scenarios"] = serde_json::json!([]);
    v["target"]["kind"] = "cluster".into();
    let empty = file("empty.json", &v.to_string());
    let garbage = file("garbage.json", "{\"run_id\": ");
    let blank = file("blank.json", "");
    let mine = file("mine.toml", "# my own profile\n");
    let out = dir.path().join("out.toml").display().to_string();
    let under_a_file = format!("{mine}/out.toml");
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec![&garbage], 2, "is not a wsgate JSON report"),
        (vec![&blank], 2, "is not a wsgate JSON report"),
        (
            vec![&newer],
            2,
            "has report schema version 2; this wsgate reads version 1",
        ),
        (vec![&empty], 2, "no passed scenario"),
        (vec![&empty, &newer], 2, "has report schema version 2"),
        (
            vec!["/nonexistent/report.json"],
            2,
            "cannot read /nonexistent/report.json",
        ),
    ];
    for (reports, code, says) in cases {
        let mut args = vec!["sim", "calibrate"];
        args.extend(&reports);
        args.extend(["--out", &out]);
        let o = wsgate(&args);
        assert_eq!(o.status.code(), Some(code), "{reports:?}: {}", text(&o));
        assert!(
            text(&o).contains(says),
            "{reports:?}: expected {says:?} in {}",
            text(&o)
        );
        assert!(!text(&o).contains("panicked"), "{}", text(&o));
        assert!(!Path::new(&out).exists(), "{reports:?} wrote {out}");
    }
    // No report at all is clap's to refuse.
    let o = wsgate(&["sim", "calibrate", "--out", &out]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // A file it did not write is never overwritten, and a path it cannot write is 74.
    let o = wsgate(&[
        "sim",
        "calibrate",
        "--allow-simulated",
        &file("sim.json", &good),
        "--out",
        &mine,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("was not written by `wsgate sim calibrate`"),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read_to_string(&mine).unwrap(),
        "# my own profile\n"
    );
    let sim_report = file("sim2.json", &good);
    let o = wsgate(&[
        "sim",
        "calibrate",
        "--allow-simulated",
        &sim_report,
        "--out",
        &under_a_file,
    ]);
    assert_eq!(o.status.code(), Some(74), "{}", text(&o));
    assert!(text(&o).contains("choose another --out"), "{}", text(&o));
    // `sim` with a subcommand takes no server flags.
    let o = wsgate(&["sim", "--port", "0", "calibrate", &empty, "--out", &out]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

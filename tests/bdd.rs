//! The verification suite against the embedded simulator, exactly as a user runs it:
//! `wsgate run` from the project directory. On a healthy simulator, where every scenario
//! must pass; and the fault matrix of `docs/fault-matrix.md`: one run per simulator fault
//! (or group of faults), where the suite must fail the scenarios the table names, each for
//! the reason it names, and pass every other scenario it runs (the table says which it
//! leaves out). Zero false passes, zero false failures. `harness = false`: this is the test's main, and it ends with a
//! `N passed, N failed` line.
//!
//! `WSGATE_BDD_JOBS` (default 4) runs that many runs at once, the healthy one first among
//! them; each has its own simulator (a run keeps about half a core busy, most of it in its
//! Jupyter processes). Each run's time is printed as it finishes; the verdicts follow once
//! all have finished, since a fault run is judged against the healthy run's scenarios.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Mutex;

use serde_json::Value;
use wsgate::sim::faults::Fault;

/// Budgets for every run here: far above what a phase takes on the simulator (about a second)
/// so the healthy run passes on a loaded machine, yet short enough that a fault which makes a
/// phase hang costs seconds instead of the production budgets' minutes.
const MATRIX_BUDGETS: &[&str] = &[
    "budgets.workspace_running=90",
    "budgets.pause_to_paused=30",
    "budgets.gpu_release=40",
    "budgets.resume_to_running=60",
    "budgets.pod_restored=10",
    "budgets.snapshot_cleanup=30",
    "budgets.delete=60",
    "budgets.waiting_state=30",
    "budgets.drill_resume=180",
    "budgets.idle_pause=100",
];

/// The most one `wsgate run` here may take (on two cores with three others beside it, a
/// healthy run takes about 5 minutes, a fault run 3 to 5, checkpoint-hangs 8); past it the
/// run is stopped and fails.
const RUN_LIMIT_S: u64 = 1200;
/// Seconds between the polite stop (SIGTERM, which lets wsgate clean up) and SIGKILL.
const KILL_AFTER_S: u64 = 60;

/// One expected outcome: a scenario (by a fragment of its name) fails, with a message that
/// contains `because`.
#[derive(Debug, Clone)]
struct Fails {
    scenario: String,
    because: String,
}

/// One run of the suite: the faults switched on for every object, and what must fail.
/// `alone`: only the scenarios the table names run (`--name`), for a fault that, switched on
/// for the whole run, would break every later scenario the same way. `exits`: the run must
/// end with this exit code and its output must say each `fails` entry's cause (the
/// scenarios themselves are not judged: the simulator stops under them).
#[derive(Debug, Clone)]
struct Run {
    faults: Vec<String>,
    fails: Vec<Fails>,
    alone: bool,
    exits: Option<i32>,
}

impl Run {
    fn name(&self) -> String {
        if self.faults.is_empty() {
            "healthy simulator".into()
        } else {
            format!("fault {}", self.faults.join(" + "))
        }
    }
}

/// What the table says: the runs, and the faults it marks as per object only.
struct Matrix {
    runs: Vec<Run>,
    per_object: Vec<String>,
}

/// Reads the table of `docs/fault-matrix.md`.
fn read_matrix(path: &Path) -> Result<Matrix, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut runs: Vec<Run> = Vec::new();
    let mut per_object = Vec::new();
    let rows = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('|'))
        .skip(2); // the header and the |---| line
    for (i, row) in rows.enumerate() {
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let [fault, scenario, outcome, because] = cells[..] else {
            return Err(format!("table row {}: expected 4 cells: {row}", i + 1));
        };
        let faults: Vec<String> = fault.split(',').map(|f| f.trim().to_string()).collect();
        for f in &faults {
            if Fault::parse(f).is_none() {
                return Err(format!("table row {}: unknown fault {f:?}", i + 1));
            }
        }
        match outcome {
            "per object only" => {
                per_object.extend(faults);
                continue;
            }
            "fails" | "fails alone" | "passes" => {}
            other if other.starts_with("exits ") => {}
            other => {
                return Err(format!(
                    "table row {}: outcome {other:?} is not fails, fails alone, exits N, passes or per object only",
                    i + 1
                ));
            }
        }
        let exits = match outcome.strip_prefix("exits ") {
            Some(code) => Some(
                code.parse::<i32>()
                    .map_err(|_| format!("table row {}: {outcome:?} needs an exit code", i + 1))?,
            ),
            None => None,
        };
        let idx = match runs.iter().position(|r| r.faults == faults) {
            Some(idx) => idx,
            None => {
                runs.push(Run {
                    faults,
                    fails: Vec::new(),
                    alone: false,
                    exits: None,
                });
                runs.len() - 1
            }
        };
        if let Some(code) = exits {
            runs[idx].alone = true;
            runs[idx].exits = Some(code);
        } else if outcome == "fails alone" {
            runs[idx].alone = true;
        } else if runs[idx].alone {
            return Err(format!(
                "table row {}: a fault whose scenarios run alone has only `fails alone` rows",
                i + 1
            ));
        }
        if outcome != "passes" {
            if because.is_empty() || scenario == "(none)" {
                return Err(format!(
                    "table row {}: a failing scenario names its scenario and its cause",
                    i + 1
                ));
            }
            runs[idx].fails.push(Fails {
                scenario: scenario.to_string(),
                because: because.to_string(),
            });
        }
    }
    let covered: BTreeSet<String> = runs
        .iter()
        .flat_map(|r| r.faults.iter().cloned())
        .chain(per_object.iter().cloned())
        .collect();
    let missing: Vec<String> = Fault::ALL
        .iter()
        .map(|f| f.name())
        .filter(|n| !covered.contains(n))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{} has no row for the faults {missing:?}",
            path.display()
        ));
    }
    // The specification is the section below the table; a fault named only in the table
    // (or in the prose above it) has not been given its conclusion.
    const SPEC: &str = "## What each fault means, and what a correct harness must conclude";
    let Some((_, spec)) = text.split_once(SPEC) else {
        return Err(format!("{} has no section {SPEC:?}", path.display()));
    };
    let unspecified: Vec<String> = Fault::ALL
        .iter()
        .map(|f| f.name())
        .filter(|n| !spec.contains(&format!("`{n}`")))
        .collect();
    if !unspecified.is_empty() {
        return Err(format!(
            "{} does not say what a correct harness concludes under {unspecified:?}",
            path.display()
        ));
    }
    Ok(Matrix { runs, per_object })
}

/// The scenarios of one run's report, by name: (status, failure message).
type Outcomes = Vec<(String, String, String)>;

/// What one run gave: its scenarios, whether it exited 0, and how many times each simulator
/// fault acted (the report's `target.faults_injected`).
struct Ran {
    outcomes: Outcomes,
    success: bool,
    /// The exit code, and stdout and stderr together.
    code: Option<i32>,
    output: String,
    faults_injected: std::collections::BTreeMap<String, u64>,
}

/// What one run gave, or why it gave nothing, and how many seconds it took.
type Finished = (Result<Ran, String>, u64);

fn run_suite(root: &Path, run: &Run) -> Result<Ran, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    // Under coreutils' `timeout`: a run that hangs is ended (TERM, then KILL) and reported.
    let mut cmd = Command::new("timeout");
    cmd.arg(format!("--kill-after={KILL_AFTER_S}"))
        .arg(RUN_LIMIT_S.to_string())
        .arg(env!("CARGO_BIN_EXE_wsgate"))
        .arg("run")
        .arg("--reports")
        .arg(dir.path())
        .current_dir(root)
        .env_remove("KUBECONFIG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for set in MATRIX_BUDGETS {
        cmd.arg("--set").arg(set);
    }
    if !run.faults.is_empty() {
        // The drill (drill.feature, the only @slow feature) runs in the healthy run
        // only: see docs/fault-matrix.md. capacity.feature is @drill too and stays in.
        cmd.arg("--tags").arg("not @slow");
        if run.alone {
            let names: Vec<String> = run
                .fails
                .iter()
                .map(|f| regex::escape(&f.scenario))
                .collect();
            cmd.arg("--name").arg(names.join("|"));
        }
        let profile = std::fs::read_to_string(root.join("fixtures/sim/default.toml"))
            .map_err(|e| e.to_string())?;
        let list: Vec<String> = run.faults.iter().map(|f| format!("{f:?}")).collect();
        let edited = profile.replace("enabled = []", &format!("enabled = [{}]", list.join(", ")));
        if edited == profile {
            return Err("fixtures/sim/default.toml has no `enabled = []` line to edit".into());
        }
        let path = dir.path().join("faulty.toml");
        std::fs::write(&path, edited).map_err(|e| e.to_string())?;
        cmd.arg("--set")
            .arg(format!("sim.profile={}", path.display()));
    }
    // A known Jupyter token, so that the reports can be searched for it.
    // Each run its own: runs overlap in time.
    let token = format!(
        "bdd-jupyter-token-{}-{}",
        std::process::id(),
        run.name()
            .replace(|c: char| !c.is_ascii_alphanumeric(), "-")
    );
    cmd.env("WSGATE_JUPYTER_TOKEN", &token);
    let out = cmd
        .output()
        .map_err(|e| format!("cannot start wsgate: {e}"))?;
    let log = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bdd-{}.log", run.name().replace([' ', '+'], "-")));
    let _ = std::fs::write(&log, [&out.stdout[..], &out.stderr[..]].concat());
    if matches!(out.status.code(), Some(124 | 137)) {
        return Err(format!(
            "wsgate run ran past its {RUN_LIMIT_S} s limit and was stopped; its output is in {}",
            log.display()
        ));
    }
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
        .ok_or_else(|| {
            format!(
                "wsgate run ({}) wrote no report.json; its output is in {}",
                out.status,
                log.display()
            )
        })?;
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(report).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    // A run that must stop (`exits`) has no cluster left to sample or clean: the simulator
    // went down with it.
    let stopped = run.exits.is_some();
    if !stopped
        && report["gpu_allocation"]
            .as_array()
            .is_none_or(|a| a.is_empty())
    {
        return Err("the report has no GPU allocation samples".into());
    }
    // Nothing left behind, under any fault: every object a scenario created is removed.
    let cleanup: Vec<wsgate::report::CleanupEntry> =
        serde_json::from_value(report["cleanup"].clone())
            .map_err(|e| format!("the report's cleanup section: {e}"))?;
    let leaks: Vec<String> = cleanup
        .iter()
        .filter(|c| c.is_leak())
        .map(|c| format!("{} ({}): {:?}", c.object, c.scenario, c.outcome))
        .collect();
    if !stopped && !leaks.is_empty() {
        return Err(format!(
            "cleanup did not remove everything; its output is in {}:\n    {}",
            log.display(),
            leaks.join("\n    ")
        ));
    }
    let scenarios = report["scenarios"]
        .as_array()
        .ok_or("report has no scenarios")?
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or("").to_string(),
                s["status"].as_str().unwrap_or("").to_string(),
                s["failure"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let faults_injected = report["target"]["faults_injected"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default();
    Ok(Ran {
        outcomes: scenarios,
        success: out.status.success(),
        code: out.status.code(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        faults_injected,
    })
}

/// Compares one run's outcomes with its row of the table; `names` are the scenarios the
/// healthy run had (less the drill's, which fault runs leave out), so a scenario that
/// silently did not run is caught too.
fn judge(run: &Run, ran: &Ran, names: &BTreeSet<String>) -> Vec<String> {
    let (outcomes, success) = (&ran.outcomes, ran.success);
    let mut problems = Vec::new();
    // Every fault of the run acted at least once: a row that expects "passes" (or a failure
    // that something else caused) proves nothing about a fault that silently did nothing.
    for f in &run.faults {
        if ran.faults_injected.get(f).copied().unwrap_or(0) == 0 {
            problems.push(format!(
                "fault {f} never acted in this run (the report's target.faults_injected: {:?})",
                ran.faults_injected
            ));
        }
    }
    if let Some(code) = run.exits {
        if ran.code != Some(code) {
            problems.push(format!("wsgate run exited {:?}, expected {code}", ran.code));
        }
        for f in &run.fails {
            if !ran.output.contains(&f.because) {
                problems.push(format!("the run's output does not say {:?}", f.because));
            }
        }
        return problems;
    }

    let got: BTreeSet<String> = outcomes.iter().map(|(n, _, _)| n.clone()).collect();
    let drill = |n: &String| !run.faults.is_empty() && n.contains("paused workspaces resume");
    let left_out = |n: &String| run.alone && !run.fails.iter().any(|f| n.contains(&f.scenario));
    for missing in names.difference(&got).filter(|n| !drill(n) && !left_out(n)) {
        problems.push(format!("scenario {missing:?} did not run"));
    }
    for f in &run.fails {
        if !outcomes.iter().any(|(n, _, _)| n.contains(&f.scenario)) {
            problems.push(format!(
                "the table names scenario {:?}, which no scenario's name contains",
                f.scenario
            ));
        }
    }
    for (name, status, failure) in outcomes {
        let expected = run.fails.iter().find(|f| name.contains(&f.scenario));
        match (expected, status.as_str()) {
            (None, "passed") => {}
            (None, got) => problems.push(format!(
                "scenario {name:?}: {got}, expected passed ({})",
                cause(failure)
            )),
            (Some(f), "failed") if failure.contains(&f.because) => {}
            (Some(f), "failed") => problems.push(format!(
                "scenario {name:?} failed for another reason than {:?}: {}",
                f.because,
                cause(failure)
            )),
            (Some(_), got) => problems.push(format!(
                "scenario {name:?}: {got}, expected failed: a FALSE PASS"
            )),
        }
    }
    if run.fails.is_empty() != success {
        problems.push(format!(
            "wsgate run exited {}",
            if success { "0" } else { "non-zero" }
        ));
    }
    // A false restore has its own exit code (README: 14, whatever else failed), and no other
    // fault may produce one: the platform claiming a restore the kernel does not confirm is
    // only what `kernel-dies` means.
    let false_restore = run
        .fails
        .iter()
        .any(|f| f.because.starts_with("FALSE RESTORE"));
    if false_restore != (ran.code == Some(14)) {
        problems.push(format!(
            "wsgate run exited {:?}; the table expects {}",
            ran.code,
            if false_restore {
                "a false restore (exit 14)"
            } else {
                "no false restore (not 14)"
            }
        ));
    }
    problems
}

/// The first file under `dir` whose bytes contain `secret`.
fn find_secret(dir: &Path, secret: &str) -> Option<PathBuf> {
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

/// The cause in a failure message, short: the step's own words up to the evidence.
fn cause(failure: &str) -> String {
    let from = failure
        .find("Captured output: ")
        .map_or(failure, |i| &failure[i + "Captured output: ".len()..]);
    let to = from.find("; decided by").unwrap_or(from.len()).min(200);
    let mut end = to;
    while !from.is_char_boundary(end) {
        end -= 1;
    }
    from[..end].replace(['\n', '|'], " ")
}

/// Prints the observed outcomes as table rows, for a reviewer updating the table.
fn print_observed(run: &Run, outcomes: &Outcomes) {
    println!("  observed (as table rows):");
    for (name, status, failure) in outcomes {
        if status != "passed" {
            println!(
                "  | {} | {name} | {status} | {} |",
                run.faults.join(", "),
                cause(failure)
            );
        }
    }
}

fn main() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let matrix = match read_matrix(&root.join("docs/fault-matrix.md")) {
        Ok(m) => m,
        Err(e) => {
            println!("bdd: the fault matrix cannot be read: {e}\n\nbdd: 0 passed, 1 failed");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "bdd: {} fault runs from docs/fault-matrix.md; per object only (tested elsewhere): {:?}",
        matrix.runs.len(),
        matrix.per_object
    );
    let (mut passed, mut failed) = (0, 0);

    // The healthy run and the fault runs share the workers: a run keeps about half a core
    // busy, so the healthy run alone would leave most of the machine idle. The healthy run
    // goes first (it is the longest) and is judged first: its scenarios are the full list
    // every fault run is judged against.
    let healthy = Run {
        faults: Vec::new(),
        fails: Vec::new(),
        alone: false,
        exits: None,
    };
    let all: Vec<&Run> = std::iter::once(&healthy).chain(&matrix.runs).collect();
    let jobs: usize = std::env::var("WSGATE_BDD_JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .filter(|j| *j > 0)
        .unwrap_or(4);
    println!(
        "bdd: the healthy run and {} fault runs, {jobs} at a time",
        matrix.runs.len()
    );
    let queue = Mutex::new(all.iter().copied().enumerate());
    let finished: Mutex<Vec<Option<Finished>>> = Mutex::new(all.iter().map(|_| None).collect());
    let began = std::time::Instant::now();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                loop {
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                    let Some((i, run)) = next else { break };
                    let started = std::time::Instant::now();
                    // A panic here would end the scope with a panic and lose every verdict.
                    let result =
                        std::panic::catch_unwind(|| run_suite(root, run)).unwrap_or_else(|p| {
                            Err(format!(
                                "the test's own code panicked during the run: {}",
                                p.downcast_ref::<&str>()
                                    .map(|s| s.to_string())
                                    .or_else(|| p.downcast_ref::<String>().cloned())
                                    .unwrap_or_default()
                            ))
                        });
                    let took = started.elapsed().as_secs();
                    println!(
                        "=== bdd: {} finished in {took} s ({} s since the first run began)",
                        run.name(),
                        began.elapsed().as_secs()
                    );
                    finished.lock().unwrap_or_else(|e| e.into_inner())[i] = Some((result, took));
                }
            });
        }
    });
    let mut finished = finished.into_inner().unwrap_or_else(|e| e.into_inner());

    println!("\n=== bdd: verdicts");
    let names: BTreeSet<String> = match finished[0].take() {
        Some((Ok(ran), took)) => {
            let names = ran.outcomes.iter().map(|(n, _, _)| n.clone()).collect();
            let problems = judge(&healthy, &ran, &names);
            if problems.is_empty() && !ran.outcomes.is_empty() {
                println!(
                    "=== bdd: healthy simulator: {} scenarios passed ({took} s)",
                    ran.outcomes.len()
                );
                passed += 1;
            } else {
                println!(
                    "=== bdd: healthy simulator: NOT as expected ({took} s):\n  {}",
                    problems.join("\n  ")
                );
                failed += 1;
            }
            names
        }
        Some((Err(e), took)) => {
            println!("=== bdd: healthy simulator: NOT as expected ({took} s):\n  {e}");
            failed += 1;
            BTreeSet::new()
        }
        None => {
            println!("=== bdd: healthy simulator: NOT as expected: it did not run");
            failed += 1;
            BTreeSet::new()
        }
    };
    for (run, slot) in matrix.runs.iter().zip(finished.into_iter().skip(1)) {
        let ok = match slot {
            Some((Ok(ran), took)) => {
                let problems = judge(run, &ran, &names);
                println!(
                    "=== bdd: {}: {} ({took} s; faults acted: {:?})",
                    run.name(),
                    if problems.is_empty() {
                        "as expected".to_string()
                    } else {
                        format!("NOT as expected:\n  {}", problems.join("\n  "))
                    },
                    ran.faults_injected
                );
                if !problems.is_empty() {
                    print_observed(run, &ran.outcomes);
                }
                problems.is_empty()
            }
            Some((Err(e), took)) => {
                println!(
                    "=== bdd: {}: NOT as expected ({took} s):\n  {e}",
                    run.name()
                );
                false
            }
            None => {
                println!("=== bdd: {}: NOT as expected: it did not run", run.name());
                false
            }
        };
        if ok {
            passed += 1;
        } else {
            failed += 1;
        }
    }
    println!("\nbdd: {passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

//! Interruption in each phase of a real run against a standalone simulator: SIGINT or SIGTERM
//! while a workspace is created, paused (checkpoint), resumed (restore) and cleaned up ends
//! with the interrupted code, the reports written, and no labelled object left; after SIGKILL,
//! `wsgate janitor --run-id` removes what the run left.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, ResourceQuota, Secret};
use kube::api::{Api, ListParams};
use wsgate::platform::crd::{PodSnapshot, Workspace};

const NS: &str = "wsgate-test";
const LABEL: &str = "app.kubernetes.io/managed-by=wsgate";

/// Platform steps only (no kernel), so the `none` runtime serves it: create, pause with a
/// checkpoint, resume with a restore; the run's cleanup follows the last step.
const FEATURE: &str = "Feature: interrupted
  Scenario: pause and resume
    Given a snapshot-enabled GPU workspace is Running
    When the workspace is paused
    Then the workspace is Paused within the \"pause_to_paused\" budget
    And the workspace's PodSnapshot is Ready
    When the workspace is resumed
    Then the workspace is Running within the \"resume_to_running\" budget
";

/// A working directory holding the feature above and nothing else.
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("features")).unwrap();
    std::fs::write(dir.path().join("features/interrupted.feature"), FEATURE).unwrap();
    dir
}

/// `wsgate run` against the simulator's kubeconfig, stdout piped so its steps can be read.
fn spawn_run(work: &Path, kc: &Path, reports: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_wsgate"))
        .current_dir(work)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("GITHUB_STEP_SUMMARY")
        .args([
            "run",
            "--features",
            "features",
            "--target",
            "cluster",
            "--namespace",
            NS,
            "--kubeconfig",
        ])
        .arg(kc)
        .arg("--reports")
        .arg(reports)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads the child's stdout on a thread; each line goes to the returned channel.
fn lines(child: &mut Child) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for a line containing `needle`; returns every line read so far. Ends with a panic
/// naming what was seen if stdout closes first or 60 s pass.
async fn wait_for_line(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    seen: &mut Vec<String>,
    needle: &str,
) {
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = rx.recv().await {
            let hit = line.contains(needle);
            seen.push(line);
            if hit {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(found, Ok(true)),
        "no line with {needle:?}:\n{}",
        seen.join("\n")
    );
}

/// The labelled objects of every kind the harness creates or causes, by `selector`.
async fn labelled(client: &kube::Client, selector: &str) -> Vec<String> {
    let lp = ListParams::default().labels(selector);
    let mut out = Vec::new();
    macro_rules! list {
        ($k:ty) => {
            let api: Api<$k> = Api::namespaced(client.clone(), NS);
            for o in api.list(&lp).await.unwrap().items {
                out.push(format!(
                    "{} {}",
                    stringify!($k),
                    o.metadata.name.unwrap_or_default()
                ));
            }
        };
    }
    list!(Workspace);
    list!(Pod);
    list!(PodSnapshot);
    list!(ResourceQuota);
    list!(PersistentVolumeClaim);
    list!(Secret);
    out
}

/// What the platform made for the run's workspaces and wsgate never labelled: their pods
/// and PodSnapshots. Both go after the workspace (pods after their grace period, snapshots
/// after the add-on's teardown), so this waits up to 30 s for them to be gone and returns
/// what is still there.
async fn platform_leftovers(client: &kube::Client) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let snaps: Api<PodSnapshot> = Api::namespaced(client.clone(), NS);
    let of_workspaces = ListParams::default().labels(wsgate::platform::workspace::WORKSPACE_LABEL);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut left: Vec<String> = Vec::new();
        for p in pods.list(&of_workspaces).await.unwrap().items {
            left.push(format!("Pod {}", p.metadata.name.unwrap_or_default()));
        }
        for s in snaps.list(&ListParams::default()).await.unwrap().items {
            left.push(format!(
                "PodSnapshot {}",
                s.metadata.name.unwrap_or_default()
            ));
        }
        if left.is_empty() || std::time::Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid, which has not been waited for yet.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

/// When to interrupt: once a labelled workspace exists, or once a step line is printed.
enum When {
    WorkspaceExists,
    AfterStep(&'static str),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_and_sigterm_in_each_phase_leave_nothing_and_write_reports() {
    // Pods take 1.5 s to terminate, so the run's cleanup (which waits for the workspace's pod
    // to go) is still under way when the signal sent after the last step arrives.
    let sim = crate::common::start_platform(|p| {
        p.timing.termination_ms = wsgate::sim::delay::Delay::Fixed(1_500)
    })
    .await;
    let work = workdir();
    let kc = work.path().join("kc.yaml");
    sim.write_kubeconfig(&kc).unwrap();
    let client = sim.client().await.unwrap();
    let workspaces: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let phases = [
        ("creating", When::WorkspaceExists, libc::SIGINT),
        (
            "pausing",
            When::AfterStep("When the workspace is paused"),
            libc::SIGTERM,
        ),
        (
            "resuming",
            When::AfterStep("When the workspace is resumed"),
            libc::SIGINT,
        ),
        (
            "cleaning up",
            When::AfterStep("resume_to_running"),
            libc::SIGTERM,
        ),
    ];
    for (phase, when, sig) in phases {
        let reports = work
            .path()
            .join(format!("reports-{}", phase.replace(' ', "-")));
        let mut child = spawn_run(work.path(), &kc, &reports);
        let mut rx = lines(&mut child);
        let mut seen = Vec::new();
        match when {
            When::WorkspaceExists => {
                let lp = ListParams::default().labels(LABEL);
                let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
                while workspaces.list(&lp).await.unwrap().items.is_empty() {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "{phase}: the run created no workspace within 60 s"
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            When::AfterStep(step) => wait_for_line(&mut rx, &mut seen, step).await,
        }
        signal(&child, sig);
        let out = tokio::task::spawn_blocking(move || {
            crate::common::wait_within(child, crate::common::COMMAND_LIMIT_S, "wsgate run")
        })
        .await
        .unwrap();
        while let Ok(line) = rx.try_recv() {
            seen.push(line);
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(wsgate::exit_code::INTERRUPTED),
            "{phase}: {}\n{stderr}",
            seen.join("\n")
        );
        assert!(stderr.contains("interrupted"), "{phase}: {stderr}");
        let left = labelled(&client, LABEL).await;
        assert!(left.is_empty(), "{phase}: left behind: {left:?}");
        let left = platform_leftovers(&client).await;
        assert!(left.is_empty(), "{phase}: the platform kept: {left:?}");
        let report = std::fs::read_dir(&reports)
            .unwrap_or_else(|e| panic!("{phase}: no reports directory: {e}"))
            .flatten()
            .map(|d| d.path().join("report.json"))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{phase}: no report.json"));
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        assert_eq!(
            json["exit_code"],
            wsgate::exit_code::INTERRUPTED,
            "{phase}: the report says the run was interrupted"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigkill_the_janitor_removes_what_the_run_left() {
    let sim = crate::common::start_platform(|_| {}).await;
    let work = workdir();
    let kc = work.path().join("kc.yaml");
    sim.write_kubeconfig(&kc).unwrap();
    let client = sim.client().await.unwrap();
    let mut child = spawn_run(work.path(), &kc, &work.path().join("reports"));
    let mut rx = lines(&mut child);
    let mut seen = Vec::new();
    wait_for_line(&mut rx, &mut seen, "When the workspace is paused").await;
    signal(&child, libc::SIGKILL);
    let status = tokio::task::spawn_blocking(move || {
        crate::common::wait_within(child, 60, "wsgate run after SIGKILL")
    })
    .await
    .unwrap()
    .status;
    assert_eq!(status.code(), None, "SIGKILL ends the run without a word");
    let run_id = seen
        .iter()
        .find_map(|l| l.strip_prefix("run id: "))
        .unwrap_or_else(|| panic!("no run id printed:\n{}", seen.join("\n")))
        .trim()
        .to_owned();
    let by_run = format!("wsgate.dev/run-id={run_id}");
    let left = labelled(&client, &by_run).await;
    assert!(
        left.iter().any(|o| o.starts_with("Workspace ")),
        "a killed run leaves its workspace: {left:?}"
    );
    let kc_arg = kc.clone();
    let out = tokio::task::spawn_blocking(move || {
        crate::common::wsgate_command()
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .args(["janitor", "--target", "cluster", "--namespace", NS])
            .arg("--kubeconfig")
            .arg(&kc_arg)
            .args(["--run-id", &run_id])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", crate::common::text(&out));
    let left = labelled(&client, &by_run).await;
    assert!(left.is_empty(), "the janitor left: {left:?}");
    let left = labelled(&client, LABEL).await;
    assert!(left.is_empty(), "the janitor left: {left:?}");
    let left = platform_leftovers(&client).await;
    assert!(
        left.is_empty(),
        "after the janitor the platform kept: {left:?}"
    );
}

/// `gate prepare` interrupted while it waits for the kernel (the `none` runtime serves no
/// Jupyter, so it would wait out `kernel_reachable`): the interrupted code, and nothing of
/// its run left, although its own ledger went with the abandoned step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_gate_prepare_leaves_nothing() {
    let sim = crate::common::start_platform(|_| {}).await;
    let work = workdir();
    let kc = work.path().join("kc.yaml");
    sim.write_kubeconfig(&kc).unwrap();
    let client = sim.client().await.unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_wsgate"))
        .current_dir(work.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .args(["gate", "prepare", "--target", "cluster", "--namespace", NS])
        .arg("--kubeconfig")
        .arg(&kc)
        .arg("--state")
        .arg(work.path().join("gate.json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut rx = lines(&mut child);
    let mut seen = Vec::new();
    wait_for_line(&mut rx, &mut seen, "storing the marker").await;
    assert!(
        !labelled(&client, LABEL).await.is_empty(),
        "prepare has created its objects by now"
    );
    signal(&child, libc::SIGINT);
    let out = tokio::task::spawn_blocking(move || {
        crate::common::wait_within(child, crate::common::COMMAND_LIMIT_S, "wsgate gate prepare")
    })
    .await
    .unwrap();
    while let Ok(line) = rx.try_recv() {
        seen.push(line);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(wsgate::exit_code::INTERRUPTED),
        "{}\n{stderr}",
        seen.join("\n")
    );
    assert!(
        stderr.contains("interrupted; removing what gate prepare"),
        "{stderr}"
    );
    let left = labelled(&client, LABEL).await;
    assert!(left.is_empty(), "left behind: {left:?}");
    let left = platform_leftovers(&client).await;
    assert!(left.is_empty(), "the platform kept: {left:?}");
    assert!(
        !work.path().join("gate.json").exists(),
        "no state for a prepare that did not end"
    );
}

/// `gate verify` interrupted while it resumes (after a real prepare, on the Jupyter runtime):
/// the interrupted code, and everything of the gate's run removed by its label, as an
/// uninterrupted verify without `--keep` would have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_gate_verify_removes_the_gates_objects() {
    wsgate::install_crypto_provider();
    let sim = wsgate::sim::SimHandle::start(wsgate::sim::SimOptions::with_platform())
        .await
        .expect("simulator starts");
    let work = workdir();
    let kc = work.path().join("kc.yaml");
    sim.write_kubeconfig(&kc).unwrap();
    let client = sim.client().await.unwrap();
    let state = work.path().join("gate.json");
    let args = |sub: &str| -> Vec<String> {
        [
            "gate",
            sub,
            "--target",
            "cluster",
            "--namespace",
            NS,
            "--kubeconfig",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([
            kc.display().to_string(),
            "--state".into(),
            state.display().to_string(),
        ])
        .collect()
    };
    let prepare = args("prepare");
    let out = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = prepare.iter().map(String::as_str).collect();
        crate::common::wsgate(&refs)
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", crate::common::text(&out));
    assert!(!labelled(&client, LABEL).await.is_empty());

    let mut child = Command::new(env!("CARGO_BIN_EXE_wsgate"))
        .current_dir(work.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .args(args("verify"))
        .arg("--set")
        .arg(format!(
            "reports.dir={}",
            work.path().join("reports").display()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut rx = lines(&mut child);
    let mut seen = Vec::new();
    wait_for_line(&mut rx, &mut seen, "resuming workspace").await;
    signal(&child, libc::SIGTERM);
    let out = tokio::task::spawn_blocking(move || {
        crate::common::wait_within(child, crate::common::COMMAND_LIMIT_S, "wsgate gate verify")
    })
    .await
    .unwrap();
    while let Ok(line) = rx.try_recv() {
        seen.push(line);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(wsgate::exit_code::INTERRUPTED),
        "{}\n{stderr}",
        seen.join("\n")
    );
    assert!(
        stderr.contains("interrupted; removing what gate"),
        "{stderr}"
    );
    let left = labelled(&client, LABEL).await;
    assert!(left.is_empty(), "left behind: {left:?}");
    let left = platform_leftovers(&client).await;
    assert!(left.is_empty(), "the platform kept: {left:?}");
    sim.shutdown().await;
}

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
    assert!(
        out.contains("session: reaching Jupyter at the pod's address"),
        "session.connect = auto on a reachable pod network: {out}"
    );
    // The same scenario through the API server's port-forward (session.connect).
    let forwarded = tmp.path().join("reports-forwarded");
    let o = wsgate_in(
        &bin,
        &work,
        &[
            "run",
            "--name",
            "A paused GPU workspace resumes with its process, model and files",
            "--set",
            "session.connect=port-forward",
            "--reports",
            forwarded.to_str().unwrap(),
        ],
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("session: reaching Jupyter through the API server's port-forward"),
        "{out}"
    );
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

/// `wsgate sim` whose pods' runtime cannot start (no Python): the pod says so as a kubelet
/// would (its container waiting in `RunContainerError` with the runtime's message, a Warning
/// `Failed` event), the Workspace turns Error with that message, and a run against it prints
/// the reason when its wait runs out, not only "Pending".
#[tokio::test]
async fn a_runtime_that_cannot_start_is_shown_on_the_pod_and_by_the_run() {
    use k8s_openapi::api::core::v1::{Event, Pod};
    use kube::api::{Api, ListParams};
    use std::time::Duration;

    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("empty");
    std::fs::create_dir_all(&work).unwrap();
    let kc = tmp.path().join("kc.yaml");
    let missing = "/nonexistent/wsgate-test/python3";
    let sim = std::process::Command::new("timeout")
        .args(["--kill-after=10", "300"])
        .arg(env!("CARGO_BIN_EXE_wsgate"))
        .args(["sim", "--kubeconfig", kc.to_str().unwrap()])
        .current_dir(&work)
        .env("WSGATE_PYTHON", missing)
        .env("XDG_CACHE_HOME", tmp.path().join("cache"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !kc.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no kubeconfig within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let o = within(COMMAND_LIMIT_S, env!("CARGO_BIN_EXE_wsgate"))
        .current_dir(&work)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("GITHUB_STEP_SUMMARY")
        .args([
            "run",
            "--target",
            "cluster",
            "--namespace",
            "wsgate-test",
            "--kubeconfig",
        ])
        .arg(&kc)
        .args([
            "--name",
            "A paused GPU workspace resumes with its process, model and files",
            "--set",
            "budgets.workspace_running=15",
            "--keep",
            "failed",
            "--reports",
        ])
        .arg(tmp.path().join("reports"))
        .output()
        .unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(wsgate::exit_code::FAILED), "{out}");
    assert!(
        out.contains("Workspace Pod has warning event: Error: cannot run the Python interpreter"),
        "{out}"
    );
    assert!(out.contains(missing), "{out}");

    // The pod and its event, as kubectl would show them (the run kept what failed).
    let yaml = std::fs::read_to_string(&kc).unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&yaml).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "wsgate-test");
    let listed = pods.list(&ListParams::default()).await.unwrap().items;
    let pod = listed.first().expect("the failed scenario's pod was kept");
    let status = pod.status.as_ref().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    let container = &status.container_statuses.as_ref().unwrap()[0];
    let waiting = container.state.as_ref().unwrap().waiting.as_ref().unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("RunContainerError"));
    assert!(
        waiting.message.as_deref().unwrap().contains(missing),
        "{waiting:?}"
    );
    let events: Api<Event> = Api::namespaced(client, "wsgate-test");
    let failed: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Failed"))
        .collect();
    assert!(
        failed.iter().any(|e| e.type_.as_deref() == Some("Warning")
            && e.message
                .as_deref()
                .is_some_and(|m| m.starts_with("Error: ") && m.contains(missing))
            && e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("kubelet")),
        "{failed:?}"
    );
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(sim.id() as i32, libc::SIGTERM);
    }
    let _ = tokio::task::spawn_blocking(move || {
        crate::common::wait_within(sim, 60, "wsgate sim after SIGTERM")
    })
    .await;
}

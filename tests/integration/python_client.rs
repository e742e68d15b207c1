//! The official Python `kubernetes` client (37.0.2) against a running simulator over HTTPS:
//! custom-object list and watch of Workspaces, typed lists and a typed pod watch, and the
//! generated kubeconfig. The Python side is `tests/integration/py/k8s_client_check.py`.
//!
//! The client lives in its own venv, `target/py-k8s-venv`, created on first use. Without
//! `python3`, or when pip cannot install the package, the test prints a `SKIPPED:` line and passes.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

const NS: &str = "wsgate-test";
const CLIENT_VERSION: &str = "37.0.2";
/// How long the Python script may run (it makes about a dozen requests and two watches).
const SCRIPT_BUDGET: Duration = Duration::from_secs(120);
/// Server-side timeout of each watch in the script: a backstop, not an expectation.
const WATCH_BACKSTOP_S: u64 = 30;

/// Serialises venv creation between tests of this binary.
static VENV_LOCK: Mutex<()> = Mutex::new(());

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's python with `kubernetes==37.0.2`, creating the venv if needed; `Err` says why not.
fn python_with_client() -> Result<PathBuf, String> {
    let _guard = VENV_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let venv = manifest_dir().join("target").join("py-k8s-venv");
    let python = venv.join("bin").join("python");
    let check =
        format!("import kubernetes, sys; sys.exit(kubernetes.__version__ != {CLIENT_VERSION:?})");
    let ready = || {
        crate::common::within(60, &python)
            .args(["-c", &check])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if ready() {
        return Ok(python);
    }
    let out = crate::common::within(120, "python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .map_err(|e| format!("python3 not runnable: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "python3 -m venv failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let out = crate::common::within(600, venv.join("bin").join("pip"))
        .args([
            "install",
            "--quiet",
            &format!("kubernetes=={CLIENT_VERSION}"),
        ])
        .output()
        .map_err(|e| format!("pip not runnable: {e}"))?;
    if !out.status.success() || !ready() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        return Err(format!(
            "pip could not install kubernetes=={CLIENT_VERSION}: {tail:?}"
        ));
    }
    Ok(python)
}

fn workspaces(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubeflow.org", "v1beta1", "Workspace"),
        "workspaces",
    );
    Api::namespaced_with(client.clone(), NS, &ar)
}

/// Objects for the script to find: a Workspace, a Pod with a full status, an Event.
async fn seed(client: &kube::Client) {
    let ws: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Workspace",
        "metadata": {"name": "ws-a"},
        "spec": {"paused": false, "kind": "jupyterlab",
                 "podTemplate": {"volumes": {}, "options": {"imageConfig": "jupyterlab_scipy_190",
                                                            "podConfig": "tiny_cpu"}}}
    }))
    .expect("a Workspace");
    workspaces(client)
        .create(&PostParams::default(), &ws)
        .await
        .expect("kube-rs creates the Workspace");

    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), NS);
    let pod = serde_json::from_value(json!({
        "metadata": {"name": "ws-a-0", "labels": {"notebooks.kubeflow.org/workspace-name": "ws-a"}},
        // A GPU limit sent as a JSON number: the server serves it as the string "1".
        "spec": {"containers": [{"name": "main", "image": "jupyter:1",
                                 "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    }))
    .expect("a Pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("kube-rs creates the Pod");
    pods.patch_status(
        "ws-a-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"},
                           {"type": "PodRestored", "status": "True", "message": "Restored from snapshot x"}],
            "containerStatuses": [{"name": "main", "ready": true, "restartCount": 0, "image": "jupyter:1",
                                   "imageID": "sha256:0", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]
        }})),
    )
    .await
    .expect("kube-rs patches the Pod status");

    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), NS);
    let event = serde_json::from_value(json!({
        "metadata": {"name": "ws-a-0.restored"},
        "involvedObject": {"kind": "Pod", "name": "ws-a-0", "namespace": NS},
        "type": "Normal", "reason": "GKEPodSnapshotting",
        "message": format!("Successfully restored the pod from PodSnapshot {NS}/snap")
    }))
    .expect("an Event");
    events
        .create(&PostParams::default(), &event)
        .await
        .expect("kube-rs creates the Event");
}

#[tokio::test]
async fn python_client_lists_and_watches_workspaces_and_lists_pods() {
    wsgate::install_crypto_provider();
    let python = match tokio::task::spawn_blocking(python_with_client)
        .await
        .expect("venv task")
    {
        Ok(p) => p,
        Err(why) => {
            eprintln!("SKIPPED: Python kubernetes client unavailable ({why})");
            return;
        }
    };
    let sim = crate::common::start_sim().await;
    let client = sim.client().await.expect("a kube client");
    seed(&client).await;

    let dir = tempfile::tempdir().expect("a temp dir");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, sim.ca_pem()).expect("the CA is written");
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig)
        .expect("the kubeconfig is written");

    let script = manifest_dir().join("tests/integration/py/k8s_client_check.py");
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .env("WSGATE_HOST", sim.url())
        .env("WSGATE_TOKEN", sim.token())
        .env("WSGATE_CA", &ca)
        .env("WSGATE_NAMESPACE", NS)
        .env("WSGATE_KUBECONFIG", &kubeconfig)
        .env("WSGATE_NEW_WS", "ws-py")
        .env("WSGATE_WATCH_S", WATCH_BACKSTOP_S.to_string())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(SCRIPT_BUDGET, run)
        .await
        .unwrap_or_else(|_| {
            panic!("the Python client script ran past its {SCRIPT_BUDGET:?} budget")
        })
        .expect("the Python script starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Python client failed ({}):\n{}\n{stdout}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value =
        serde_json::from_str(stdout.trim()).expect("the script prints one JSON document");

    assert_eq!(report["client_version"], CLIENT_VERSION);
    assert_eq!(report["list_kind"], "WorkspaceList");
    assert!(
        report["list_resource_version"]
            .as_str()
            .is_some_and(|rv| !rv.is_empty()),
        "{report}"
    );
    assert_eq!(report["workspaces"], json!(["ws-a"]));
    assert_eq!(report["pods"], json!(["ws-a-0"]));
    assert_eq!(
        report["pod_limits"],
        json!({"ws-a-0": {"nvidia.com/gpu": ["str", "1"]}}),
        "quantities are strings: {report}"
    );
    assert!(
        report["events"].as_u64().is_some_and(|n| n >= 1),
        "{report}"
    );
    let namespaces = report["namespaces"].as_array().expect("namespaces");
    assert!(namespaces.contains(&json!(NS)), "{report}");
    assert_eq!(report["kubeconfig_namespaces"], report["namespaces"]);

    // The watch starts with ADDED for what exists, then shows what the script created.
    let watch = report["watch"].as_array().expect("watch events");
    assert_eq!(
        watch.first().map(|e| (&e[0], &e[1])),
        Some((&json!("ADDED"), &json!("ws-a"))),
        "{report}"
    );
    assert_eq!(
        watch.last().map(|e| (&e[0], &e[1])),
        Some((&json!("ADDED"), &json!("ws-py"))),
        "{report}"
    );
    assert!(
        watch
            .iter()
            .all(|e| e[2].as_str().is_some_and(|rv| !rv.is_empty())),
        "every watch event carries a resourceVersion: {report}"
    );
    assert_eq!(report["pod_watch"], json!([["ADDED", "ws-a-0", "V1Pod"]]));

    let created = workspaces(&client)
        .get("ws-py")
        .await
        .expect("the Workspace the Python client created");
    assert_eq!(
        created
            .metadata
            .labels
            .unwrap_or_default()
            .get("created-by")
            .map(String::as_str),
        Some("python-client")
    );
    sim.shutdown().await;
}

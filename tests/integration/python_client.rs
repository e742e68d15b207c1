//! The official Python `kubernetes` client (37.0.2) against a running simulator over HTTPS:
//! every list the simulator serves parsed by the typed models;
//! custom-object list and watch of Workspaces, typed lists and a typed pod watch, and the
//! generated kubeconfig. The Python side is `tests/integration/py/k8s_client_check.py`.
//!
//! The client lives in its own venv, `target/py-k8s-venv`, created on first use. Without
//! `python3`, or when pip cannot install the package, the test prints a `SKIPPED:` line and
//! passes, except under CI (`CI` set), where it fails.

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
                 "podTemplate": {"volumes": {}, "options": {"imageConfig": "jupyterlab-cpu",
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

/// The venv's interpreter with the client, or `None` (the test is skipped, said on stderr)
/// where it cannot be installed. Under CI (`CI` set, where `.ci/run` has the package
/// registry) a missing client fails the test instead: a skip there would hide a check.
async fn python_or_skip() -> Option<PathBuf> {
    match tokio::task::spawn_blocking(python_with_client)
        .await
        .expect("venv task")
    {
        Ok(p) => Some(p),
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("the Python kubernetes client is needed under CI: {why}")
        }
        Err(why) => {
            eprintln!("SKIPPED: Python kubernetes client unavailable ({why})");
            None
        }
    }
}

#[tokio::test]
async fn python_client_lists_and_watches_workspaces_and_lists_pods() {
    wsgate::install_crypto_provider();
    let Some(python) = python_or_skip().await else {
        return;
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

/// Creates `obj` (a JSON object with apiVersion and kind) through kube-rs, as the kind the
/// simulator serves under that name.
async fn create_any(client: &kube::Client, obj: Value) {
    let api_version = obj["apiVersion"].as_str().expect("apiVersion").to_owned();
    let api_version = api_version.as_str();
    let kind = obj["kind"].as_str().expect("kind").to_owned();
    let kind = kind.as_str();
    let info = wsgate::sim::kinds::KINDS
        .iter()
        .find(|k| k.api_version() == api_version && k.kind == kind)
        .unwrap_or_else(|| panic!("the simulator serves no {api_version} {kind}"));
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        info.plural,
    );
    let api: Api<DynamicObject> = if info.namespaced {
        Api::namespaced_with(client.clone(), NS, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    let obj: DynamicObject = serde_json::from_value(obj).expect("a valid object");
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("kube-rs creates the {kind}: {e}"));
}

async fn wait_state(
    api: &Api<wsgate::platform::crd::Workspace>,
    name: &str,
    state: wsgate::platform::crd::WorkspaceState,
) {
    use wsgate::platform::{wait, workspace as ws};
    let mut w = wait::WaitFor::new(
        format!("test:{state}"),
        Duration::from_secs(60),
        format!("be {state}"),
    );
    w.progress_every = None;
    wait::until(api, name, &w, ws::describe, |o| ws::is_state(o, state))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The official client parses every list the simulator serves, with objects in each that
/// the simulated platform made itself (a Running and a Paused snapshot-enabled GPU
/// Workspace: their pods, StatefulSets, Services, PodSnapshot, trigger, policy, the
/// add-on's ConfigMap, Events) and one of every other kind. The client's typed models
/// refuse an object that misses a required field or carries a wrongly typed one, which
/// kube-rs (lenient where k8s-openapi has defaults) may accept: a check nobody here wrote.
#[tokio::test]
async fn python_client_parses_every_list_the_simulator_serves() {
    use wsgate::platform::crd::{Workspace, WorkspaceState};
    wsgate::install_crypto_provider();
    let Some(python) = python_or_skip().await else {
        return;
    };
    let sim = crate::common::start_platform(|_| {}).await;
    let client = sim.client().await.expect("a kube client");

    // Two snapshot-enabled GPU Workspaces: one Running, one paused to a Ready PodSnapshot.
    let workspaces: Api<Workspace> = Api::namespaced(client.clone(), NS);
    for name in ["py-running", "py-paused"] {
        create_any(
            &client,
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": format!("{name}-home")},
                   "spec": {"accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}}}),
        )
        .await;
        create_any(
            &client,
            json!({"apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace",
                   "metadata": {"name": name},
                   "spec": {"paused": false, "kind": "jupyterlab-resumable", "podTemplate": {
                       "volumes": {"home": format!("{name}-home")},
                       "options": {"imageConfig": "jupyterlab-gpu", "podConfig": "gpu_t4_spot"}}}}),
        )
        .await;
    }
    for name in ["py-running", "py-paused"] {
        wait_state(&workspaces, name, WorkspaceState::Running).await;
    }
    workspaces
        .patch(
            "py-paused",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": true}})),
        )
        .await
        .expect("pause");
    wait_state(&workspaces, "py-paused", WorkspaceState::Paused).await;

    // One of each kind the platform does not make, as a user or `kubectl apply` would.
    let labels = json!({"app": "py-check"});
    let pod_template = json!({"metadata": {"labels": labels},
        "spec": {"restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "busybox:1.36",
                                 "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}]}});
    for obj in [
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "py-secret"},
               "type": "Opaque", "stringData": {"k": "v"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "py-sa"}}),
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "py-running.1"},
               "involvedObject": {"apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace",
                                  "name": "py-running", "namespace": NS},
               "type": "Normal", "reason": "Checked", "message": "made by the test",
               "source": {"component": "py-check"}}),
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "py-quota"},
               "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "py-deploy"},
               "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                        "template": pod_template}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "py-job"},
               "spec": {"suspend": true, "template": pod_template}}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "py-cron"},
               "spec": {"schedule": "0 3 * * *", "suspend": true,
                        "jobTemplate": {"spec": {"template": pod_template}}}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
               "metadata": {"name": "py-netpol"},
               "spec": {"podSelector": {"matchLabels": labels}, "policyTypes": ["Ingress"]}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "py-role"},
               "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "py-rb"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "py-role"},
               "subjects": [{"kind": "ServiceAccount", "name": "py-sa", "namespace": NS}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "py-cr"},
               "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "py-crb"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "py-cr"},
               "subjects": [{"kind": "ServiceAccount", "name": "py-sa", "namespace": NS}]}),
    ] {
        create_any(&client, obj).await;
    }

    let stored: Vec<_> = wsgate::sim::kinds::KINDS
        .iter()
        .filter(|k| k.stored())
        .collect();
    let kinds: Vec<Value> = stored
        .iter()
        .map(|k| {
            json!({"group": k.group, "version": k.version, "kind": k.kind, "plural": k.plural,
                   "namespaced": k.namespaced, "custom": k.custom})
        })
        .collect();
    let dir = tempfile::tempdir().expect("a temp dir");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, sim.ca_pem()).expect("the CA is written");
    let script = manifest_dir().join("tests/integration/py/k8s_client_check.py");
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .env("WSGATE_HOST", sim.url())
        .env("WSGATE_TOKEN", sim.token())
        .env("WSGATE_CA", &ca)
        .env("WSGATE_KINDS", Value::Array(kinds).to_string())
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
    let mut failures = Vec::new();
    for k in &stored {
        let key = if k.group.is_empty() {
            k.plural.to_string()
        } else {
            format!("{}.{}", k.plural, k.group)
        };
        let got = &report[&key];
        if let Some(err) = got["error"].as_str() {
            failures.push(format!("{key}: {err}"));
            continue;
        }
        // Typed lists are V1<Kind>List of V1<Kind>; custom ones <Kind>List of <Kind>.
        let (list, item) = if k.custom {
            (k.list_kind(), k.kind.to_string())
        } else if k.kind == "Event" {
            // The client names core/v1 Event apart from events.k8s.io's.
            ("CoreV1EventList".into(), "CoreV1Event".into())
        } else {
            (format!("V1{}List", k.kind), format!("V1{}", k.kind))
        };
        if got["type"] != json!(list) {
            failures.push(format!("{key}: listed as {}, not {list}", got["type"]));
        }
        if got["count"].as_u64().unwrap_or(0) == 0 {
            failures.push(format!(
                "{key}: no objects to parse (the test must make one)"
            ));
        } else if got["kinds"] != json!([item]) {
            failures.push(format!("{key}: items are {}, not {item}", got["kinds"]));
        }
    }
    assert!(
        failures.is_empty(),
        "the official client could not parse every list:\n{}\n{report}",
        failures.join("\n")
    );
    sim.shutdown().await;
}

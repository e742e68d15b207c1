//! The real `kubectl` (the one on PATH) against a running simulator over HTTPS, with the
//! simulator's generated kubeconfig: get (json, yaml, tables, watch), apply (client-side,
//! server-side, server dry run), patch, label, delete and wait.
//!
//! Each test starts its own simulator and gives kubectl its own `KUBECACHEDIR`: the Cloud SDK
//! dispatcher caches its `/version` probe per cache dir (`kubectl-and-clients.md` §0).
//! Without `kubectl` on PATH every test prints `SKIPPED: kubectl not on PATH` and passes.

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use wsgate::sim::SimHandle;

/// The namespace the simulator seeds and the kubeconfig's context points at.
const NS: &str = "wsgate-test";
/// How long one kubectl command (discovery included) may take.
const COMMAND_BUDGET: Duration = Duration::from_secs(60);
/// How long a change made through kube-rs may take to show in kubectl's output.
const CHANGE_BUDGET: Duration = Duration::from_secs(30);

/// One simulator, its kubeconfig and a private kubectl cache dir.
struct Fixture {
    sim: SimHandle,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    client: kube::Client,
}

fn kubectl_on_path() -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            std::fs::metadata(dir.join("kubectl")).is_ok_and(|m| {
                m.is_file()
                    && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
            })
        })
    })
}

async fn setup(test: &str) -> Option<Fixture> {
    wsgate::install_crypto_provider();
    if !kubectl_on_path() {
        eprintln!("SKIPPED: kubectl not on PATH ({test})");
        return None;
    }
    let sim = crate::common::start_sim().await;
    let dir = tempfile::tempdir().expect("a temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig)
        .expect("the kubeconfig is written");
    let client = sim.client().await.expect("a kube client for the simulator");
    Some(Fixture {
        sim,
        dir,
        kubeconfig,
        client,
    })
}

fn workspace_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubeflow.org", "v1beta1", "Workspace"),
        "workspaces",
    )
}

/// A Workspace manifest as users write it.
fn workspace(name: &str, paused: bool) -> Value {
    json!({
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Workspace",
        "metadata": {"name": name, "labels": {"app": "demo"}},
        "spec": {
            "paused": paused,
            "kind": "jupyterlab",
            "podTemplate": {
                "volumes": {},
                "options": {"imageConfig": "jupyterlab-cpu", "podConfig": "tiny_cpu"},
            },
        },
    })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The whitespace-separated cells of the first line starting with `name`, if any.
fn row<'a>(table: &'a str, name: &str) -> Option<Vec<&'a str>> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&name))
}

fn header(table: &str) -> Vec<&str> {
    table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect()
}

impl Fixture {
    fn workspaces(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), NS, &workspace_resource())
    }

    async fn create_workspace(&self, manifest: Value) -> DynamicObject {
        let obj: DynamicObject = serde_json::from_value(manifest).expect("a DynamicObject");
        self.workspaces()
            .create(&PostParams::default(), &obj)
            .await
            .expect("kube-rs creates the Workspace")
    }

    async fn set_state(&self, name: &str, state: &str) {
        self.workspaces()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"state": state}})),
            )
            .await
            .expect("kube-rs patches the Workspace status");
    }

    async fn workspace_json(&self, name: &str) -> Option<Value> {
        let obj = self
            .workspaces()
            .get_opt(name)
            .await
            .expect("kube-rs reads the Workspace");
        obj.map(|o| serde_json::to_value(o).expect("serialisable"))
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .env("KUBECACHEDIR", self.dir.path().join("kube-cache"))
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    async fn run(&self, args: &[&str]) -> Output {
        tokio::time::timeout(COMMAND_BUDGET, self.command(args).output())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "`kubectl {}` ran past the {COMMAND_BUDGET:?} command budget",
                    args.join(" ")
                )
            })
            .expect("kubectl starts")
    }

    /// Runs kubectl, requires success, returns stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.status.success(),
            "`kubectl {}` failed ({}):\nstdout: {}\nstderr: {}",
            args.join(" "),
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        );
        let stderr = text(&out.stderr);
        assert!(
            !stderr.contains("couldn't get resource list") && !stderr.contains("memcache"),
            "`kubectl {}` reported a discovery failure:\n{stderr}",
            args.join(" ")
        );
        text(&out.stdout)
    }

    /// Runs kubectl, requires failure, returns stderr.
    async fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            !out.status.success(),
            "`kubectl {}` should have failed:\nstdout: {}",
            args.join(" "),
            text(&out.stdout)
        );
        text(&out.stderr)
    }

    /// Reruns kubectl until `pred` holds for its stdout, within `CHANGE_BUDGET`.
    async fn eventually(&self, args: &[&str], what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + CHANGE_BUDGET;
        loop {
            let out = self.ok(args).await;
            if pred(&out) {
                return out;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not seen in `kubectl {}` within the {CHANGE_BUDGET:?} change budget; last output:\n{out}",
                args.join(" ")
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn manifest(&self, name: &str, yaml: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, yaml).expect("the manifest is written");
        path.display().to_string()
    }
}

/// Reads kubectl's output lines until one satisfies `pred`, within `CHANGE_BUDGET`.
async fn read_until(
    lines: &mut Lines<BufReader<ChildStdout>>,
    seen: &mut Vec<String>,
    what: &str,
    pred: impl Fn(&str) -> bool,
) {
    let deadline = tokio::time::Instant::now() + CHANGE_BUDGET;
    loop {
        match tokio::time::timeout_at(deadline, lines.next_line()).await {
            Err(_) => panic!(
                "{what}: not printed within the {CHANGE_BUDGET:?} change budget; lines so far: {seen:#?}"
            ),
            Ok(Ok(Some(line))) => {
                let hit = pred(&line);
                seen.push(line);
                if hit {
                    return;
                }
            }
            Ok(Ok(None)) => panic!("kubectl's output ended before {what}; lines: {seen:#?}"),
            Ok(Err(e)) => panic!("reading kubectl's output: {e}"),
        }
    }
}

/// Requires that a background kubectl has not finished yet (it must be waiting).
fn still_waiting(child: &mut Child, what: &str) {
    if let Some(status) = child.try_wait().expect("try_wait") {
        panic!("`kubectl wait` finished ({status}) before {what}");
    }
}

async fn finish(child: Child, what: &str) -> Output {
    tokio::time::timeout(CHANGE_BUDGET + COMMAND_BUDGET, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{what}: kubectl did not return within its budget"))
        .expect("kubectl's output")
}

#[tokio::test]
async fn get_json_yaml_name_and_jsonpath_return_plain_objects() {
    let Some(f) = setup("get_json_yaml_name_and_jsonpath_return_plain_objects").await else {
        return;
    };
    f.create_workspace(workspace("ws-a", false)).await;

    // The dispatcher must run its embedded v1.32 against the simulator's /version.
    let version: Value = serde_json::from_str(&f.ok(&["version", "-o", "json"]).await)
        .expect("kubectl version -o json prints JSON");
    assert_eq!(version["serverVersion"]["minor"], "32", "{version}");
    assert!(
        version["clientVersion"]["gitVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("v1.32.")),
        "the dispatcher ran another kubectl: {version}"
    );

    let one: Value = serde_json::from_str(&f.ok(&["get", "workspace", "ws-a", "-o", "json"]).await)
        .expect("kubectl -o json prints JSON");
    assert_eq!(one["kind"], "Workspace");
    assert_eq!(one["metadata"]["name"], "ws-a");
    assert_eq!(one["metadata"]["namespace"], NS);
    assert_eq!(one["spec"]["kind"], "jupyterlab");

    let list: Value = serde_json::from_str(&f.ok(&["get", "ws", "-o", "json"]).await)
        .expect("kubectl -o json prints JSON");
    assert_eq!(list["kind"], "List");
    let names: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["ws-a"]);

    let yaml = f.ok(&["get", "ws", "ws-a", "-o", "yaml"]).await;
    assert!(yaml.contains("kind: Workspace"), "{yaml}");
    assert!(yaml.contains("name: ws-a"), "{yaml}");

    let by_label = f.ok(&["get", "ws", "-l", "app=demo", "-o", "name"]).await;
    assert_eq!(by_label.trim(), "workspace.kubeflow.org/ws-a");
    let none = f.ok(&["get", "ws", "-l", "app!=demo", "-o", "name"]).await;
    assert_eq!(none.trim(), "");

    let ns = f
        .ok(&[
            "get",
            "namespaces",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
        .await;
    for name in ["default", "kube-system", NS] {
        assert!(
            ns.split_whitespace().any(|n| n == name),
            "{name} missing: {ns}"
        );
    }

    let err = f.fails(&["get", "ws", "nope"]).await;
    assert!(
        err.contains("Error from server (NotFound)") && err.contains("\"nope\" not found"),
        "{err}"
    );
    f.sim.shutdown().await;
}

#[tokio::test]
async fn default_output_is_a_table_with_the_platform_columns() {
    let Some(f) = setup("default_output_is_a_table_with_the_platform_columns").await else {
        return;
    };
    f.create_workspace(workspace("ws-a", false)).await;
    f.set_state("ws-a", "Running").await;

    let ws = f
        .eventually(&["get", "workspaces"], "ws-a in state Running", |out| {
            row(out, "ws-a").is_some_and(|cells| cells.get(1) == Some(&"Running"))
        })
        .await;
    assert_eq!(header(&ws), ["NAME", "STATE", "AGE"], "{ws}");

    let all_ns = f.ok(&["get", "ws", "-A", "--show-labels"]).await;
    assert_eq!(
        header(&all_ns),
        ["NAMESPACE", "NAME", "STATE", "AGE", "LABELS"],
        "{all_ns}"
    );
    let cells = row(&all_ns, NS).expect("a row in the test namespace");
    assert_eq!(cells[1], "ws-a");
    assert!(cells[4].contains("app=demo"), "{all_ns}");

    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(f.client.clone(), NS);
    let pod = serde_json::from_value(json!({
        "metadata": {"name": "ws-a-0"},
        "spec": {"containers": [{"name": "main", "image": "jupyter:1"},
                                {"name": "sidecar", "image": "proxy:1"}]}
    }))
    .expect("a Pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("kube-rs creates the Pod");
    let running = |name: &str, ready: bool| {
        json!({"name": name, "ready": ready, "restartCount": 1, "image": "i", "imageID": "i",
               "started": true, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}})
    };
    pods.patch_status(
        "ws-a-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Running", "podIP": "10.1.2.3", "podIPs": [{"ip": "10.1.2.3"}],
            "containerStatuses": [running("main", true), running("sidecar", false)]
        }})),
    )
    .await
    .expect("kube-rs patches the Pod status");

    let out = f
        .eventually(&["get", "pods"], "ws-a-0 with 1/2 ready", |out| {
            row(out, "ws-a-0").is_some_and(|c| c.get(1) == Some(&"1/2"))
        })
        .await;
    assert_eq!(
        header(&out),
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{out}"
    );
    let cells = row(&out, "ws-a-0").expect("the pod row");
    assert_eq!(&cells[1..4], ["1/2", "Running", "2"], "{out}");

    let wide = f.ok(&["get", "pods", "-o", "wide"]).await;
    let head = header(&wide);
    assert!(head.contains(&"IP") && head.contains(&"NODE"), "{wide}");
    assert!(
        row(&wide, "ws-a-0").is_some_and(|c| c.contains(&"10.1.2.3")),
        "{wide}"
    );

    let ns = f.ok(&["get", "namespaces"]).await;
    assert_eq!(header(&ns), ["NAME", "STATUS", "AGE"], "{ns}");
    assert!(row(&ns, NS).is_some(), "{ns}");
    f.sim.shutdown().await;
}

#[tokio::test]
async fn get_watch_prints_changes_made_through_kube_rs() {
    let Some(f) = setup("get_watch_prints_changes_made_through_kube_rs").await else {
        return;
    };
    f.create_workspace(workspace("ws-a", false)).await;

    let mut child = f
        .command(&["get", "workspaces", "--watch"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl get -w starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    read_until(&mut lines, &mut seen, "the existing ws-a", |l| {
        l.starts_with("ws-a ")
    })
    .await;
    assert_eq!(header(&seen[0]), ["NAME", "STATE", "AGE"], "{seen:#?}");

    f.create_workspace(workspace("ws-b", false)).await;
    read_until(&mut lines, &mut seen, "the new ws-b", |l| {
        l.starts_with("ws-b ")
    })
    .await;

    f.set_state("ws-b", "Paused").await;
    read_until(&mut lines, &mut seen, "ws-b turning Paused", |l| {
        l.starts_with("ws-b ") && l.split_whitespace().nth(1) == Some("Paused")
    })
    .await;
    assert!(
        !seen
            .iter()
            .any(|l| l.contains("BOOKMARK") || l.contains("<unknown>")),
        "junk rows in `get -w`: {seen:#?}"
    );

    child.start_kill().expect("kill kubectl get -w");
    let _ = child.wait().await;
    f.sim.shutdown().await;
}

const APPLY_V1: &str = r#"apiVersion: v1
kind: Namespace
metadata:
  name: team-apply
  labels:
    team: a
---
apiVersion: kubeflow.org/v1beta1
kind: Workspace
metadata:
  name: ws-apply
  namespace: team-apply
spec:
  paused: false
  kind: jupyterlab
  podTemplate:
    volumes: {}
    options:
      imageConfig: jupyterlab-cpu
      podConfig: tiny_cpu
"#;

fn ssa_workspace(name: &str, paused: bool) -> String {
    format!(
        r#"apiVersion: kubeflow.org/v1beta1
kind: Workspace
metadata:
  name: {name}
spec:
  paused: {paused}
  kind: jupyterlab
  podTemplate:
    volumes: {{}}
    options:
      imageConfig: jupyterlab-cpu
      podConfig: tiny_cpu
"#
    )
}

#[tokio::test]
async fn apply_creates_then_configures_and_server_side_applies() {
    let Some(f) = setup("apply_creates_then_configures_and_server_side_applies").await else {
        return;
    };
    let v1 = f.manifest("v1.yaml", APPLY_V1);
    let out = f.ok(&["apply", "-f", &v1]).await;
    assert!(out.contains("namespace/team-apply created"), "{out}");
    assert!(
        out.contains("workspace.kubeflow.org/ws-apply created"),
        "{out}"
    );

    let team_ws: Api<DynamicObject> =
        Api::namespaced_with(f.client.clone(), "team-apply", &workspace_resource());
    let created = team_ws.get("ws-apply").await.expect("ws-apply exists");
    assert!(
        created
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("kubectl.kubernetes.io/last-applied-configuration")),
        "the last-applied annotation is stored: {created:?}"
    );

    let v2 = f.manifest(
        "v2.yaml",
        &APPLY_V1
            .replace("team: a", "team: b")
            .replace("paused: false", "paused: true"),
    );
    let out = f.ok(&["apply", "-f", &v2]).await;
    assert!(out.contains("namespace/team-apply configured"), "{out}");
    assert!(
        out.contains("workspace.kubeflow.org/ws-apply configured"),
        "{out}"
    );
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(f.client.clone());
    let ns = namespaces.get("team-apply").await.expect("the namespace");
    assert_eq!(
        ns.metadata
            .labels
            .unwrap_or_default()
            .get("team")
            .map(String::as_str),
        Some("b")
    );
    let ws = team_ws.get("ws-apply").await.expect("ws-apply");
    assert_eq!(ws.data["spec"]["paused"], true);
    assert_eq!(
        ws.metadata.uid, created.metadata.uid,
        "apply patched, not re-created"
    );

    // A third apply of the same file computes an empty patch from the stored annotation.
    let out = f.ok(&["apply", "-f", &v2]).await;
    assert!(out.contains("namespace/team-apply unchanged"), "{out}");
    assert!(
        out.contains("workspace.kubeflow.org/ws-apply unchanged"),
        "{out}"
    );

    let ssa = f.manifest("ssa.yaml", &ssa_workspace("ws-ssa", false));
    let out = f.ok(&["apply", "--server-side", "-f", &ssa]).await;
    assert!(
        out.contains("workspace.kubeflow.org/ws-ssa serverside-applied"),
        "{out}"
    );
    assert_eq!(
        f.workspace_json("ws-ssa").await.expect("ws-ssa exists")["spec"]["paused"],
        false
    );
    let ssa = f.manifest("ssa2.yaml", &ssa_workspace("ws-ssa", true));
    let out = f.ok(&["apply", "--server-side", "-f", &ssa]).await;
    assert!(
        out.contains("workspace.kubeflow.org/ws-ssa serverside-applied"),
        "{out}"
    );
    assert_eq!(
        f.workspace_json("ws-ssa").await.expect("ws-ssa exists")["spec"]["paused"],
        true
    );

    // Server-side apply over objects that carry the client-side annotation (built-in included).
    let out = f
        .ok(&["apply", "--server-side", "--force-conflicts", "-f", &v1])
        .await;
    assert!(
        out.contains("namespace/team-apply serverside-applied"),
        "{out}"
    );
    assert!(
        out.contains("workspace.kubeflow.org/ws-apply serverside-applied"),
        "{out}"
    );
    let ws = team_ws.get("ws-apply").await.expect("ws-apply");
    assert_eq!(ws.data["spec"]["paused"], false);

    let dry = f.manifest("dry.yaml", &ssa_workspace("ws-dry", false));
    let out = f.ok(&["apply", "--dry-run=server", "-f", &dry]).await;
    assert!(
        out.contains("workspace.kubeflow.org/ws-dry created (server dry run)"),
        "{out}"
    );
    assert!(
        f.workspace_json("ws-dry").await.is_none(),
        "a server dry run persisted ws-dry"
    );
    f.sim.shutdown().await;
}

#[tokio::test]
async fn patch_merge_json_status_and_label_work_and_strategic_is_refused_for_workspaces() {
    let Some(f) =
        setup("patch_merge_json_status_and_label_work_and_strategic_is_refused_for_workspaces")
            .await
    else {
        return;
    };
    f.create_workspace(workspace("ws-a", false)).await;

    let out = f
        .ok(&[
            "patch",
            "ws",
            "ws-a",
            "--type=merge",
            "-p",
            r#"{"spec":{"paused":true}}"#,
        ])
        .await;
    assert!(out.contains("workspace.kubeflow.org/ws-a patched"), "{out}");
    assert_eq!(
        f.workspace_json("ws-a").await.unwrap()["spec"]["paused"],
        true
    );

    let json_patch = r#"[{"op":"replace","path":"/spec/paused","value":false},{"op":"add","path":"/metadata/labels/tier","value":"gold"}]"#;
    f.ok(&["patch", "ws", "ws-a", "--type=json", "-p", json_patch])
        .await;
    let ws = f.workspace_json("ws-a").await.unwrap();
    assert_eq!(ws["spec"]["paused"], false);
    assert_eq!(ws["metadata"]["labels"]["tier"], "gold");
    assert_eq!(ws["metadata"]["labels"]["app"], "demo");

    let err = f
        .fails(&["patch", "ws", "ws-a", "-p", r#"{"spec":{"paused":true}}"#])
        .await;
    assert!(
        err.contains(
            "application/strategic-merge-patch+json is not supported by kubeflow.org/v1beta1, Kind=Workspace"
        ),
        "{err}"
    );
    assert_eq!(
        f.workspace_json("ws-a").await.unwrap()["spec"]["paused"],
        false
    );

    // Built-in kinds take strategic merge patch (kubectl's default).
    f.ok(&[
        "patch",
        "namespace",
        NS,
        "-p",
        r#"{"metadata":{"labels":{"patched":"strategic"}}}"#,
    ])
    .await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(f.client.clone());
    let labels = namespaces
        .get(NS)
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap_or_default();
    assert_eq!(labels.get("patched").map(String::as_str), Some("strategic"));
    assert_eq!(
        labels.get("wsgate.dev/test-namespace").map(String::as_str),
        Some("true")
    );

    f.ok(&[
        "patch",
        "ws",
        "ws-a",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"state":"Paused"}}"#,
    ])
    .await;
    assert_eq!(
        f.workspace_json("ws-a").await.unwrap()["status"]["state"],
        "Paused"
    );

    f.ok(&["label", "ws", "ws-a", "tier=silver", "--overwrite"])
        .await;
    f.ok(&["annotate", "ws", "ws-a", "wsgate.dev/note=hello"])
        .await;
    f.ok(&["label", "ws", "ws-a", "app-"]).await;
    let ws = f.workspace_json("ws-a").await.unwrap();
    assert_eq!(ws["metadata"]["labels"]["tier"], "silver");
    assert!(ws["metadata"]["labels"].get("app").is_none(), "{ws}");
    assert_eq!(ws["metadata"]["annotations"]["wsgate.dev/note"], "hello");
    f.sim.shutdown().await;
}

#[tokio::test]
async fn delete_removes_the_object_and_a_second_delete_is_not_found() {
    let Some(f) = setup("delete_removes_the_object_and_a_second_delete_is_not_found").await else {
        return;
    };
    f.create_workspace(workspace("ws-a", false)).await;
    let out = f.ok(&["delete", "workspace", "ws-a"]).await;
    assert!(
        out.contains(r#"workspace.kubeflow.org "ws-a" deleted"#),
        "{out}"
    );
    assert!(
        f.workspace_json("ws-a").await.is_none(),
        "ws-a is still there"
    );

    let err = f.fails(&["delete", "workspace", "ws-a"]).await;
    assert!(err.contains("Error from server (NotFound)"), "{err}");
    f.sim.shutdown().await;
}

#[tokio::test]
async fn wait_for_jsonpath_sees_a_status_set_through_kube_rs() {
    let Some(f) = setup("wait_for_jsonpath_sees_a_status_set_through_kube_rs").await else {
        return;
    };
    f.create_workspace(workspace("ws-a", true)).await;
    f.set_state("ws-a", "Pending").await;

    let timeout = format!("--timeout={}s", CHANGE_BUDGET.as_secs());
    let mut child = f
        .command(&[
            "wait",
            "--for=jsonpath={.status.state}=Paused",
            "workspace/ws-a",
            &timeout,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl wait starts");
    still_waiting(&mut child, "the state became Paused");
    f.set_state("ws-a", "Paused").await;
    let out = finish(child, "wait for Paused").await;
    assert!(
        out.status.success(),
        "kubectl wait failed: {}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("workspace.kubeflow.org/ws-a condition met"),
        "{}",
        text(&out.stdout)
    );

    // A condition that never holds times out with kubectl's own message.
    let err = f
        .fails(&[
            "wait",
            "--for=jsonpath={.status.state}=Running",
            "workspace/ws-a",
            "--timeout=2s",
        ])
        .await;
    assert!(err.contains("timed out waiting for the condition"), "{err}");
    f.sim.shutdown().await;
}

#[tokio::test]
async fn wait_for_delete_returns_once_the_finalizer_is_removed() {
    let Some(f) = setup("wait_for_delete_returns_once_the_finalizer_is_removed").await else {
        return;
    };
    let mut manifest = workspace("ws-a", false);
    manifest["metadata"]["finalizers"] = json!(["wsgate.dev/test-hold"]);
    f.create_workspace(manifest).await;

    f.ok(&["delete", "workspace", "ws-a", "--wait=false"]).await;
    let held = f
        .workspace_json("ws-a")
        .await
        .expect("held by its finalizer");
    assert!(
        held["metadata"]["deletionTimestamp"].is_string(),
        "deletionTimestamp set: {held}"
    );

    let timeout = format!("--timeout={}s", CHANGE_BUDGET.as_secs());
    let mut child = f
        .command(&["wait", "--for=delete", "workspace/ws-a", &timeout])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl wait starts");
    still_waiting(&mut child, "the finalizer was removed");
    f.workspaces()
        .patch(
            "ws-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("kube-rs removes the finalizer");
    let out = finish(child, "wait for delete").await;
    assert!(
        out.status.success(),
        "kubectl wait --for=delete failed: {}",
        text(&out.stderr)
    );
    assert!(
        f.workspace_json("ws-a").await.is_none(),
        "ws-a is still there"
    );

    // Already gone: kubectl returns at once, successfully.
    f.ok(&["wait", "--for=delete", "workspace/ws-a", "--timeout=10s"])
        .await;
    f.sim.shutdown().await;
}

/// kubectl's generators send built-in kinds as protobuf (`k8s\0` envelope): the simulator
/// decodes them as a real API server does, and the objects read back through kube-rs are
/// what kubectl asked for. A kind it does not decode is refused, naming what to do.
#[tokio::test]
async fn create_secret_quota_configmap_namespace_and_serviceaccount_send_protobuf() {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ResourceQuota, Secret, ServiceAccount};
    let Some(f) =
        setup("create_secret_quota_configmap_namespace_and_serviceaccount_send_protobuf").await
    else {
        return;
    };
    // kubectl says what it sends at -v=8: the body really is protobuf.
    let out = f
        .run(&[
            "create",
            "secret",
            "generic",
            "pb-secret",
            "--from-literal=token=s3cr3t",
            "--from-literal=empty=",
            "-v=8",
        ])
        .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("secret/pb-secret created"), "{stdout}");
    assert!(
        stderr.contains("Content-Type: application/vnd.kubernetes.protobuf"),
        "{stderr}"
    );
    f.ok(&[
        "create",
        "quota",
        "pb-quota",
        "--hard=pods=3,requests.nvidia.com/gpu=0",
    ])
    .await;
    f.ok(&["create", "configmap", "pb-map", "--from-literal=k=v"])
        .await;
    f.ok(&["create", "namespace", "wsgate-pb-ns"]).await;
    f.ok(&["create", "serviceaccount", "pb-sa"]).await;
    f.ok(&["label", "secret", "pb-secret", "team=ml"]).await;

    let secret = Api::<Secret>::namespaced(f.client.clone(), NS)
        .get("pb-secret")
        .await
        .unwrap();
    let data = secret.data.unwrap();
    assert_eq!(data["token"].0, b"s3cr3t");
    assert_eq!(data["empty"].0, b"");
    assert_eq!(secret.type_.as_deref(), Some("Opaque"));
    assert_eq!(secret.metadata.labels.unwrap()["team"], "ml");
    let quota = Api::<ResourceQuota>::namespaced(f.client.clone(), NS)
        .get("pb-quota")
        .await
        .unwrap();
    let hard = quota.spec.unwrap().hard.unwrap();
    assert_eq!(hard["pods"].0, "3");
    assert_eq!(hard["requests.nvidia.com/gpu"].0, "0");
    let map = Api::<ConfigMap>::namespaced(f.client.clone(), NS)
        .get("pb-map")
        .await
        .unwrap();
    assert_eq!(map.data.unwrap()["k"], "v");
    Api::<Namespace>::all(f.client.clone())
        .get("wsgate-pb-ns")
        .await
        .unwrap();
    Api::<ServiceAccount>::namespaced(f.client.clone(), NS)
        .get("pb-sa")
        .await
        .unwrap();
    // The table kubectl prints reads them back.
    let out = f.ok(&["get", "quota", "pb-quota"]).await;
    assert!(out.contains("pb-quota"), "{out}");

    f.sim.shutdown().await;
}

/// The other generators of kinds the simulator serves (deployment, job, cronjob, a job from
/// a cronjob, services, roles and bindings) send protobuf too: each object reads back
/// through kube-rs as kubectl built it, with the API server's Service defaults. A body with
/// a field the simulator does not map is refused whole, naming the field.
#[tokio::test]
async fn create_deployment_job_cronjob_service_and_rbac_send_protobuf() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::batch::v1::{CronJob, Job};
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let Some(f) = setup("create_deployment_job_cronjob_service_and_rbac_send_protobuf").await
    else {
        return;
    };
    let out = f
        .run(&[
            "create",
            "deployment",
            "pb-deploy",
            "--image=busybox:1.36",
            "--replicas=0",
            "--port=8080",
            "-v=8",
            "--",
            "sleep",
            "5",
        ])
        .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("Content-Type: application/vnd.kubernetes.protobuf"),
        "{stderr}"
    );
    f.ok(&[
        "create",
        "job",
        "pb-job",
        "--image=busybox",
        "--",
        "echo",
        "hi",
    ])
    .await;
    f.ok(&[
        "create",
        "cronjob",
        "pb-cron",
        "--image=busybox",
        "--schedule=*/5 * * * *",
        "--",
        "date",
    ])
    .await;
    f.ok(&["create", "job", "pb-manual", "--from=cronjob/pb-cron"])
        .await;
    f.ok(&["create", "service", "clusterip", "pb-svc", "--tcp=80:8080"])
        .await;
    f.ok(&["create", "service", "nodeport", "pb-np", "--tcp=80:http"])
        .await;
    f.ok(&[
        "create",
        "service",
        "externalname",
        "pb-ext",
        "--external-name=db.example",
    ])
    .await;
    f.ok(&[
        "create",
        "role",
        "pb-role",
        "--verb=get,list",
        "--resource=pods",
    ])
    .await;
    f.ok(&[
        "create",
        "rolebinding",
        "pb-rb",
        "--role=pb-role",
        "--serviceaccount=wsgate-test:default",
    ])
    .await;
    f.ok(&[
        "create",
        "clusterrole",
        "wsgate-pb-cr",
        "--verb=get",
        "--resource=workspaces.kubeflow.org",
        "--resource-name=ws1",
    ])
    .await;
    f.ok(&[
        "create",
        "clusterrolebinding",
        "wsgate-pb-crb",
        "--clusterrole=view",
        "--group=auditors",
    ])
    .await;

    let d = Api::<Deployment>::namespaced(f.client.clone(), NS)
        .get("pb-deploy")
        .await
        .unwrap();
    let spec = d.spec.unwrap();
    assert_eq!(
        spec.replicas,
        Some(0),
        "--replicas=0 is kept, not dropped as zero"
    );
    assert_eq!(spec.selector.match_labels.unwrap()["app"], "pb-deploy");
    let c = &spec.template.spec.unwrap().containers[0];
    assert_eq!(
        (c.name.as_str(), c.image.as_deref()),
        ("busybox", Some("busybox:1.36"))
    );
    assert_eq!(
        c.command.as_deref(),
        Some(&["sleep".to_string(), "5".to_string()][..])
    );
    assert_eq!(c.ports.as_ref().unwrap()[0].container_port, 8080);
    let jobs = Api::<Job>::namespaced(f.client.clone(), NS);
    let job = jobs.get("pb-job").await.unwrap().spec.unwrap();
    let pod = job.template.spec.unwrap();
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    assert_eq!(pod.containers[0].name, "pb-job");
    let cron = Api::<CronJob>::namespaced(f.client.clone(), NS)
        .get("pb-cron")
        .await
        .unwrap();
    let cron_uid = cron.metadata.uid.clone().unwrap();
    let cron = cron.spec.unwrap();
    assert_eq!(cron.schedule, "*/5 * * * *");
    let tpl = cron.job_template.spec.unwrap().template.spec.unwrap();
    assert_eq!(tpl.restart_policy.as_deref(), Some("OnFailure"));
    let manual = jobs.get("pb-manual").await.unwrap();
    let owner = &manual.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("CronJob", cron_uid.as_str())
    );
    assert_eq!(
        manual.metadata.annotations.unwrap()["cronjob.kubernetes.io/instantiate"],
        "manual"
    );
    let services = Api::<Service>::namespaced(f.client.clone(), NS);
    let svc = services.get("pb-svc").await.unwrap().spec.unwrap();
    let port = &svc.ports.unwrap()[0];
    assert_eq!(port.target_port, Some(IntOrString::Int(8080)));
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    assert!(svc.cluster_ip.is_some_and(|ip| ip.starts_with("10.96.")));
    let np = services.get("pb-np").await.unwrap().spec.unwrap();
    assert_eq!(
        np.ports.unwrap()[0].target_port,
        Some(IntOrString::String("http".into()))
    );
    assert_eq!(np.external_traffic_policy.as_deref(), Some("Cluster"));
    assert_eq!(np.internal_traffic_policy.as_deref(), Some("Cluster"));
    assert_eq!(np.ip_families.as_deref(), Some(&["IPv4".to_string()][..]));
    let ext = services.get("pb-ext").await.unwrap().spec.unwrap();
    assert_eq!(ext.external_name.as_deref(), Some("db.example"));
    assert_eq!(
        ext.cluster_ip, None,
        "an ExternalName service gets no cluster IP"
    );
    let role = Api::<Role>::namespaced(f.client.clone(), NS)
        .get("pb-role")
        .await
        .unwrap();
    let rule = &role.rules.unwrap()[0];
    assert_eq!(rule.verbs, ["get", "list"]);
    assert_eq!(rule.api_groups.as_deref(), Some(&[String::new()][..]));
    let rb = Api::<RoleBinding>::namespaced(f.client.clone(), NS)
        .get("pb-rb")
        .await
        .unwrap();
    let subject = &rb.subjects.unwrap()[0];
    assert_eq!(
        (subject.kind.as_str(), subject.name.as_str()),
        ("ServiceAccount", "default")
    );
    assert_eq!(rb.role_ref.name, "pb-role");
    let cr = Api::<ClusterRole>::all(f.client.clone())
        .get("wsgate-pb-cr")
        .await
        .unwrap();
    let rule = &cr.rules.unwrap()[0];
    assert_eq!(
        rule.api_groups.as_deref(),
        Some(&["kubeflow.org".to_string()][..])
    );
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["workspaces".to_string()][..])
    );
    assert_eq!(
        rule.resource_names.as_deref(),
        Some(&["ws1".to_string()][..])
    );
    let crb = Api::<ClusterRoleBinding>::all(f.client.clone())
        .get("wsgate-pb-crb")
        .await
        .unwrap();
    assert_eq!(crb.subjects.unwrap()[0].name, "auditors");
    // kubectl's tables read them back.
    let out = f.ok(&["get", "deploy,job,cronjob,svc"]).await;
    for name in [
        "pb-deploy",
        "pb-job",
        "pb-cron",
        "pb-manual",
        "pb-svc",
        "pb-ext",
    ] {
        assert!(out.contains(name), "{name}: {out}");
    }

    f.sim.shutdown().await;
}

/// A probe is not mapped: the body is refused whole, naming the field, and nothing is
/// stored. Needs no kubectl: the body is built with k8s-pb as kubectl builds it.
#[tokio::test]
async fn a_protobuf_deployment_with_a_probe_is_refused_and_not_stored() {
    use k8s_openapi::api::apps::v1::Deployment;
    wsgate::install_crypto_provider();
    let sim = crate::common::start_sim().await;
    let client = sim.client().await.expect("a kube client for the simulator");
    let err = post_protobuf_deployment_with_probe(&client).await;
    assert!(
        err.contains("spec.template.spec.containers[0].readinessProbe") && err.contains("as JSON"),
        "{err}"
    );
    assert!(
        Api::<Deployment>::namespaced(client.clone(), NS)
            .get_opt("pb-probe")
            .await
            .unwrap()
            .is_none()
    );
    sim.shutdown().await;
}

/// POSTs a protobuf Deployment whose container has a readiness probe; returns the error.
async fn post_protobuf_deployment_with_probe(client: &kube::Client) -> String {
    use k8s_pb::api::apps::v1 as apps;
    use k8s_pb::api::core::v1 as core;
    use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use prost::Message;
    let deployment = apps::Deployment {
        metadata: Some(ObjectMeta {
            name: Some("pb-probe".into()),
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            template: Some(core::PodTemplateSpec {
                metadata: None,
                spec: Some(core::PodSpec {
                    containers: vec![core::Container {
                        name: Some("app".into()),
                        image: Some("busybox".into()),
                        readiness_probe: Some(core::Probe {
                            period_seconds: Some(3),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: None,
    };
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some("apps/v1".into()),
            kind: Some("Deployment".into()),
        }),
        raw: Some(deployment.encode_to_vec()),
        content_encoding: None,
        content_type: None,
    };
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown.encode_to_vec());
    let request = http::Request::post(format!("/apis/apps/v1/namespaces/{NS}/deployments"))
        .header("Content-Type", "application/vnd.kubernetes.protobuf")
        .body(body)
        .unwrap();
    match client.request_text(request).await {
        Ok(text) => panic!("the simulator stored a Deployment it cannot map: {text}"),
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 415, "{status:?}");
            status.message
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
}

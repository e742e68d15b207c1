//! The opt-in squeeze methods through a real `wsgate run` against a standalone simulator:
//! the capacity scenario's platform steps (squeeze, resume waits visibly, one attempt, the
//! snapshot kept, lift, Running) pass with `squeeze.method = "placeholder-pods"` and
//! `"taint"`, and afterwards no placeholder pod and no squeeze taint is left; likewise after
//! a SIGINT while the squeeze holds. The `none` runtime serves it (no kernel steps).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};

const NS: &str = "wsgate-test";

/// capacity.feature's scenario without its kernel steps.
const FEATURE: &str = "Feature: squeeze
  Scenario: GPU squeeze without a kernel
    Given a snapshot-enabled GPU workspace is Running
    When the workspace is paused
    Then the workspace is Paused within the \"pause_to_paused\" budget
    When the GPUs are squeezed
    And the workspace is resumed
    Then the workspace shows a waiting state within the \"waiting_state\" budget
    And at most one restore attempt is in flight
    And the workspace's PodSnapshot is still Ready
    When the squeeze is lifted
    Then the workspace is Running within the \"resume_to_running\" budget
";

fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("features")).unwrap();
    std::fs::write(dir.path().join("features/squeeze.feature"), FEATURE).unwrap();
    dir
}

fn spawn_run(work: &Path, kc: &Path, method: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_wsgate"))
        .current_dir(work)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("GITHUB_STEP_SUMMARY")
        .args(["run", "--features", "features", "--target", "cluster"])
        .args(["--namespace", NS])
        .arg("--kubeconfig")
        .arg(kc)
        .arg("--reports")
        .arg(work.join(format!("reports-{method}")))
        .args(["--set", &format!("squeeze.method={method}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// What the squeeze could leave: placeholder pods (any wsgate pod on a GPU) and taints.
async fn leftovers(client: &kube::Client) -> Vec<String> {
    let mut out = Vec::new();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for p in pods
        .list(&ListParams::default().labels("wsgate.dev/role=squeeze-placeholder"))
        .await
        .unwrap()
        .items
    {
        out.push(format!("Pod {}", p.metadata.name.unwrap_or_default()));
    }
    let nodes: Api<Node> = Api::all(client.clone());
    for n in nodes.list(&ListParams::default()).await.unwrap().items {
        for t in n.spec.and_then(|s| s.taints).unwrap_or_default() {
            if t.key == wsgate::platform::taint::SQUEEZE_TAINT {
                out.push(format!(
                    "taint {}={:?} on {}",
                    t.key,
                    t.value,
                    n.metadata.name.clone().unwrap_or_default()
                ));
            }
        }
    }
    out
}

/// The report's cleanup entries, as `object -> status`.
fn cleanup_of(work: &Path, method: &str) -> Vec<(String, String)> {
    let report = std::fs::read_dir(work.join(format!("reports-{method}")))
        .unwrap()
        .flatten()
        .map(|d| d.path().join("report.json"))
        .find(|p| p.exists())
        .expect("a report.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    json["cleanup"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["object"].as_str().unwrap_or("").to_string(),
                c["outcome"]["status"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placeholder_pods_and_taints_squeeze_then_leave_nothing() {
    let sim = crate::common::start_platform(|_| {}).await;
    let work = workdir();
    let kc = work.path().join("kc.yaml");
    sim.write_kubeconfig(&kc).unwrap();
    let client = sim.client().await.unwrap();
    for (method, recorded) in [
        (
            "placeholder-pods",
            "Pod wsgate-test/wsgate-gpu-placeholder-",
        ),
        ("taint", "taint wsgate.dev/squeeze="),
    ] {
        let child = spawn_run(work.path(), &kc, method);
        let out = tokio::task::spawn_blocking(move || {
            crate::common::wait_within(child, crate::common::COMMAND_LIMIT_S, "wsgate run")
        })
        .await
        .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(0), "{method}:\n{text}");
        let left = leftovers(&client).await;
        assert!(left.is_empty(), "{method}: left behind: {left:?}");
        // The squeeze went through the ledger: its objects are in the cleanup, already
        // gone because the lift removed them.
        let cleanup = cleanup_of(work.path(), method);
        let squeezed: Vec<_> = cleanup
            .iter()
            .filter(|(o, _)| o.starts_with(recorded))
            .collect();
        assert!(
            !squeezed.is_empty(),
            "{method}: nothing of the squeeze in the ledger: {cleanup:?}"
        );
        for (object, status) in squeezed {
            assert_eq!(status, "already_gone", "{method}: {object}");
        }
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_while_squeezed_removes_placeholders_and_taints() {
    let sim = crate::common::start_platform(|_| {}).await;
    let work = workdir();
    let kc = work.path().join("kc.yaml");
    sim.write_kubeconfig(&kc).unwrap();
    let client = sim.client().await.unwrap();
    for method in ["placeholder-pods", "taint"] {
        let mut child = spawn_run(work.path(), &kc, method);
        let stdout = child.stdout.take().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut seen = Vec::new();
        let squeezed = tokio::time::timeout(Duration::from_secs(90), async {
            while let Some(line) = rx.recv().await {
                let hit = line.contains("When the GPUs are squeezed");
                seen.push(line);
                if hit {
                    return true;
                }
            }
            false
        })
        .await;
        assert!(
            matches!(squeezed, Ok(true)),
            "{method}: the squeeze step never passed:\n{}",
            seen.join("\n")
        );
        assert!(
            !leftovers(&client).await.is_empty(),
            "{method}: the squeeze holds while the run is interrupted"
        );
        // SAFETY: kill(2) on our own child's pid, which has not been waited for yet.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGINT);
        }
        let out = tokio::task::spawn_blocking(move || {
            crate::common::wait_within(child, crate::common::COMMAND_LIMIT_S, "wsgate run")
        })
        .await
        .unwrap();
        assert_eq!(
            out.status.code(),
            Some(wsgate::exit_code::INTERRUPTED),
            "{method}: {}\n{}",
            seen.join("\n"),
            String::from_utf8_lossy(&out.stderr)
        );
        let left = leftovers(&client).await;
        assert!(left.is_empty(), "{method}: left behind: {left:?}");
    }
    sim.shutdown().await;
}

//! Nothing left behind: `wsgate janitor` removes labelled leftovers (by run id, or expired),
//! and a Workspace's cleanup ends when its pods are gone.
//! Interrupting `wsgate run` in each phase is `interrupt.rs`.

use std::process::Command;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::json;

const NS: &str = "wsgate-test";

fn wsgate() -> Command {
    let mut c = crate::common::wsgate_command();
    c.env_remove("KUBECONFIG");
    c
}

#[tokio::test]
async fn janitor_removes_a_runs_objects_and_expired_ones_only() {
    let sim = crate::common::start_platform(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    sim.write_kubeconfig(&kc).unwrap();
    let client = sim.client().await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let labelled = |name: &str, run: &str, expires: i64| -> Secret {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {
            "wsgate.dev/run-id": run, "wsgate.dev/expires": expires.to_string(), "app.kubernetes.io/managed-by": "wsgate"}}}))
        .unwrap()
    };
    let past = chrono::Utc::now().timestamp() - 60;
    let future = chrono::Utc::now().timestamp() + 3600;
    for s in [
        labelled("old-1", "r-old", past),
        labelled("fresh-1", "r-new", future),
        labelled("fresh-2", "r-new", future),
    ] {
        secrets.create(&PostParams::default(), &s).await.unwrap();
    }
    let unrelated: Secret =
        serde_json::from_value(json!({"metadata": {"name": "not-ours"}})).unwrap();
    secrets
        .create(&PostParams::default(), &unrelated)
        .await
        .unwrap();
    // A namespace without the opt-in label is refused, even for wsgate's own leftovers.
    let elsewhere: Api<Secret> = Api::namespaced(client.clone(), "default");
    elsewhere
        .create(
            &PostParams::default(),
            &labelled("old-elsewhere", "r-old", past),
        )
        .await
        .unwrap();
    let kc_d = kc.to_str().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        wsgate()
            .args(["janitor", "--target", "cluster", "--kubeconfig", &kc_d])
            .args(["--namespace", "default"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(wsgate::exit_code::TARGET), "{said}");
    assert!(said.contains("wsgate.dev/test-namespace=true"), "{said}");
    assert!(elsewhere.get_opt("old-elsewhere").await.unwrap().is_some());

    let kc_s = kc.to_str().unwrap().to_string();
    let run = move |extra: &[&str]| {
        let mut args = vec!["janitor", "--target", "cluster", "--kubeconfig", &kc_s];
        args.extend_from_slice(extra);
        wsgate().args(&args).output().unwrap()
    };
    let out = tokio::task::spawn_blocking({
        let run = run.clone();
        move || run(&["--dry-run"])
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success() && text.contains("old-1") && !text.contains("fresh-1"),
        "{text}"
    );
    assert!(
        secrets.get_opt("old-1").await.unwrap().is_some(),
        "a dry run removes nothing"
    );
    let out = tokio::task::spawn_blocking({
        let run = run.clone();
        move || run(&[])
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(secrets.get_opt("old-1").await.unwrap().is_none());
    assert!(secrets.get_opt("fresh-1").await.unwrap().is_some());
    let out = tokio::task::spawn_blocking(move || run(&["--run-id", "r-new"]))
        .await
        .unwrap();
    assert!(out.status.success());
    assert!(secrets.get_opt("fresh-2").await.unwrap().is_none());
    assert!(
        secrets.get_opt("not-ours").await.unwrap().is_some(),
        "unlabelled objects are never touched"
    );
}

/// A Workspace's cleanup ends when its pods are gone too. Deleted in the background, the
/// Workspace goes at once, and its pods after it (the garbage collector deletes the
/// StatefulSet, then the pods, which terminate): a cleanup that stopped at the Workspace
/// left a terminating pod behind. One still there when the delete budget runs out is a leak.
#[tokio::test]
async fn a_workspaces_cleanup_ends_when_its_pods_are_gone() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::ListParams;
    use kube::runtime::wait::await_condition;
    use std::time::Duration;
    use wsgate::platform::crd::Workspace;
    use wsgate::platform::ledger::CleanupOutcome;

    let sim = crate::common::start_platform(|p| {
        p.timing.termination_ms = wsgate::sim::delay::Delay::Fixed(5000);
    })
    .await;
    let client = sim.client().await.unwrap();
    let workspaces: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let expires = chrono::Utc::now() + chrono::Duration::hours(1);
    let running_pod_of = |name: &'static str| {
        let pods = pods.clone();
        async move {
            let lp = ListParams::default().labels(&format!(
                "{}={name}",
                wsgate::platform::names::WORKSPACE_LABEL
            ));
            tokio::time::timeout(Duration::from_secs(30), async {
                loop {
                    let listed = pods.list(&lp).await.unwrap().items;
                    if let Some(p) = listed.into_iter().find(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    }) {
                        return p;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
            .await
            .unwrap_or_else(|_| panic!("no Running pod of {name} within 30 s"))
        }
    };
    let create = |name: &'static str, run: &'static str| {
        let workspaces = workspaces.clone();
        async move {
            let ws: Workspace = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": wsgate::platform::ledger::labels(run, expires)},
                "spec": {"paused": false, "kind": "jupyterlab", "podTemplate": {
                    "volumes": {},
                    "options": {"imageConfig": "jupyterlab-gpu", "podConfig": "tiny_cpu"}}}
            }))
            .unwrap();
            workspaces
                .create(&PostParams::default(), &ws)
                .await
                .unwrap();
        }
    };

    create("gone-with-pods", "r-pods").await;
    let pod = running_pod_of("gone-with-pods").await;
    let results =
        wsgate::platform::janitor::sweep_run(&client, NS, "r-pods", Duration::from_secs(30)).await;
    assert!(
        results
            .iter()
            .any(|r| r.object == format!("Workspace {NS}/gone-with-pods")
                && r.outcome == CleanupOutcome::Deleted),
        "{results:?}"
    );
    assert!(
        pods.get_opt(&pod.metadata.name.clone().unwrap())
            .await
            .unwrap()
            .is_none(),
        "the Workspace's pod is gone when its cleanup ends"
    );

    // Past the budget: the Workspace goes, its pod (5 s to terminate) is still there when
    // the pod wait's 1.5 s are up, and that is named.
    create("pods-outlive", "r-short").await;
    let pod = running_pod_of("pods-outlive").await;
    let pod_name = pod.metadata.name.clone().unwrap();
    let results =
        wsgate::platform::janitor::sweep_run(&client, NS, "r-short", Duration::from_millis(1500))
            .await;
    let ws = results
        .iter()
        .find(|r| r.object == format!("Workspace {NS}/pods-outlive"))
        .expect("the Workspace is among the results");
    match &ws.outcome {
        CleanupOutcome::Leaked(why) => {
            assert!(why.contains("its pods are still there"), "{why}");
            assert!(why.contains(&pod_name), "{why}");
        }
        other => panic!("a pod still terminating is a leak, not {other:?}"),
    }
    // It does go in the end (nothing wsgate did was undone): the pod terminates.
    let uid = pod.metadata.uid.clone().unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(
            pods.clone(),
            &pod_name,
            kube::runtime::wait::conditions::is_deleted(&uid),
        ),
    )
    .await
    .expect("the pod terminates")
    .unwrap();
}

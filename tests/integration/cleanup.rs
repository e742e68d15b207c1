//! Nothing left behind: `wsgate janitor` removes labelled leftovers (by run id, or expired).
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

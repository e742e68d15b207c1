//! wsgate touches only what it created: a tampered ledger, a janitor run id that is not a
//! run id, and a drill next to someone else's quota or token Secret delete and overwrite
//! nothing. Every object here is listed before and after.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ResourceQuota, Secret};
use kube::api::{Api, PostParams};
use serde_json::json;
use wsgate::platform::ledger::{CleanupOutcome, Entry, Ledger};
use wsgate::platform::ownership::Claim;

use crate::common::{start_platform, text, wsgate};

const NS: &str = "wsgate-test";
const BUDGET: Duration = Duration::from_secs(20);

fn secret(name: &str, labels: serde_json::Value) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "stringData": {"token": "theirs"},
    }))
    .unwrap()
}

fn ours(run: &str) -> serde_json::Value {
    json!({"app.kubernetes.io/managed-by": "wsgate", "wsgate.dev/run-id": run,
           "wsgate.dev/expires": "1"})
}

fn entry(
    kind: &str,
    plural: &str,
    namespace: Option<&str>,
    name: &str,
    uid: Option<String>,
) -> Entry {
    Entry {
        group: String::new(),
        version: "v1".into(),
        kind: kind.into(),
        plural: plural.into(),
        namespace: namespace.map(str::to_string),
        name: name.into(),
        uid,
    }
}

#[tokio::test]
async fn a_tampered_ledger_removes_only_what_the_run_created() {
    let sim = start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let here: Api<Secret> = Api::namespaced(client.clone(), NS);
    let default: Api<Secret> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    let mine = here.create(&pp, &secret("mine", ours("r1"))).await.unwrap();
    let foreign = here
        .create(&pp, &secret("foreign", json!({})))
        .await
        .unwrap();
    let other_run = here
        .create(&pp, &secret("other-run", ours("r2")))
        .await
        .unwrap();
    let empty_run = here
        .create(&pp, &secret("empty-run", ours("")))
        .await
        .unwrap();
    let outside = default
        .create(&pp, &secret("outside", ours("r1")))
        .await
        .unwrap();
    let ledger = Ledger {
        entries: vec![
            entry(
                "Secret",
                "secrets",
                Some(NS),
                "mine",
                mine.metadata.uid.clone(),
            ),
            entry("Secret", "secrets", Some(NS), "foreign", None),
            entry(
                "Secret",
                "secrets",
                Some(NS),
                "foreign",
                foreign.metadata.uid.clone(),
            ),
            entry(
                "Secret",
                "secrets",
                Some(NS),
                "other-run",
                other_run.metadata.uid.clone(),
            ),
            entry(
                "Secret",
                "secrets",
                Some(NS),
                "empty-run",
                empty_run.metadata.uid.clone(),
            ),
            entry(
                "Secret",
                "secrets",
                Some("default"),
                "outside",
                outside.metadata.uid.clone(),
            ),
            entry("Namespace", "namespaces", None, "kubeflow-workspaces", None),
        ],
        taints: Vec::new(),
    };

    // What `gate verify` does with a state file: vet, then clean up what is left.
    let claim = Claim::Run("r1".into());
    let (vetted, refused) = ledger.vet(NS, &claim);
    let refused_objects: Vec<_> = refused.iter().map(|r| r.object.as_str()).collect();
    assert_eq!(
        refused_objects,
        [
            "Secret wsgate-test/foreign",
            "Secret default/outside",
            "Namespace kubeflow-workspaces"
        ],
        "{refused:?}"
    );
    let results = vetted.cleanup(&client, &claim, BUDGET, false).await;
    let outcome = |name: &str| {
        results
            .iter()
            .find(|r| r.object == format!("Secret {NS}/{name}"))
            .map(|r| r.outcome.clone())
            .unwrap_or_else(|| panic!("{name} not in {results:?}"))
    };
    assert_eq!(outcome("mine"), CleanupOutcome::Deleted);
    for name in ["foreign", "other-run", "empty-run"] {
        assert!(
            matches!(outcome(name), CleanupOutcome::Refused(ref why) if why.contains("not wsgate's")),
            "{name}: {results:?}"
        );
    }
    // The unvetted ledger (a run's own, in memory) meets the same live check.
    let results = ledger.cleanup(&client, &claim, BUDGET, false).await;
    assert!(
        results
            .iter()
            .filter(|r| r.object != format!("Secret {NS}/mine"))
            .all(|r| matches!(r.outcome, CleanupOutcome::Refused(_))),
        "{results:?}"
    );
    for name in ["foreign", "other-run", "empty-run"] {
        assert!(
            here.get_opt(name).await.unwrap().is_some(),
            "{name} deleted"
        );
    }
    assert!(default.get_opt("outside").await.unwrap().is_some());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    assert!(
        namespaces
            .get_opt("kubeflow-workspaces")
            .await
            .unwrap()
            .is_some()
    );
    assert!(here.get_opt("mine").await.unwrap().is_none());
}

#[tokio::test]
async fn the_janitor_refuses_a_run_id_that_is_not_one() {
    let sim = start_platform(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    sim.write_kubeconfig(&kc).unwrap();
    let client = sim.client().await.unwrap();
    let here: Api<Secret> = Api::namespaced(client.clone(), NS);
    let pp = PostParams::default();
    here.create(
        &pp,
        &secret("empty-label", json!({"wsgate.dev/run-id": ""})),
    )
    .await
    .unwrap();
    here.create(&pp, &secret("empty-ours", ours("")))
        .await
        .unwrap();
    let kc = kc.display().to_string();
    for bad in ["", " ", "r1,app=x", "-r1", &"r".repeat(53)] {
        let (kc, arg) = (kc.clone(), bad.to_string());
        let o = tokio::task::spawn_blocking(move || {
            wsgate(&[
                "janitor",
                "--target",
                "cluster",
                "--kubeconfig",
                &kc,
                "--run-id",
                &arg,
            ])
        })
        .await
        .unwrap();
        let out = text(&o);
        assert_eq!(
            o.status.code(),
            Some(wsgate::exit_code::USAGE),
            "{bad:?}: {out}"
        );
        assert!(out.contains("--run-id"), "{out}");
    }
    assert!(here.get_opt("empty-label").await.unwrap().is_some());
    assert!(here.get_opt("empty-ours").await.unwrap().is_some());
}

/// Runs a drill against the simulator as a cluster (`--target cluster`), which squeezes
/// with a ResourceQuota and puts the namespace's token Secret.
async fn cluster_drill(kc: String) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().unwrap();
        let reports = format!("reports.dir={}", dir.path().display());
        wsgate(&[
            "drill",
            "--target",
            "cluster",
            "--kubeconfig",
            &kc,
            "--namespace",
            NS,
            "--workspaces",
            "2",
            "--gpus",
            "1",
            "--sample",
            "0",
            "--set",
            &reports,
        ])
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_drill_next_to_a_foreign_quota_or_token_touches_neither() {
    let sim = start_platform(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    sim.write_kubeconfig(&kc).unwrap();
    let kc = kc.display().to_string();
    let client = sim.client().await.unwrap();
    let pp = PostParams::default();

    // A quota of the squeeze's name that is someone else's, or another wsgate run's (a
    // drill running beside this one, or one that crashed and left its squeeze): the drill
    // stops, names it, and deletes nothing.
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), NS);
    for labels in [json!({}), ours("r-another-drill")] {
        let quota: ResourceQuota = serde_json::from_value(json!({
            "metadata": {"name": "wsgate-gpu-squeeze", "labels": labels},
            "spec": {"hard": {"requests.nvidia.com/gpu": "5"}}
        }))
        .unwrap();
        let quota = quotas.create(&pp, &quota).await.unwrap();
        let o = cluster_drill(kc.clone()).await;
        let out = text(&o);
        assert_eq!(
            o.status.code(),
            Some(wsgate::exit_code::FAILED),
            "{labels}: {out}"
        );
        assert!(
            out.contains("ResourceQuota wsgate-gpu-squeeze already exists and is not this run's"),
            "{labels}: {out}"
        );
        let after = quotas.get("wsgate-gpu-squeeze").await.unwrap();
        assert_eq!(after.metadata.uid, quota.metadata.uid, "{labels}: {out}");
        assert_eq!(after.spec, quota.spec);
        quotas
            .delete("wsgate-gpu-squeeze", &Default::default())
            .await
            .unwrap();
    }

    // Someone's token Secret: never overwritten.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let theirs = secrets
        .create(&pp, &secret("jupyter-token", json!({"team": "ml"})))
        .await
        .unwrap();
    let o = cluster_drill(kc).await;
    let out = text(&o);
    assert_ne!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("Secret wsgate-test/jupyter-token is not wsgate's to touch"),
        "{out}"
    );
    let after = secrets.get("jupyter-token").await.unwrap();
    assert_eq!(after.metadata.uid, theirs.metadata.uid);
    assert_eq!(
        after.metadata.resource_version,
        theirs.metadata.resource_version
    );
    // Nothing of the drills is left, and nothing of theirs is gone.
    let left: Vec<_> = quotas
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|q| q.metadata.name)
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Forcing a cold start deletes PodSnapshots, which carry GKE's labels and not wsgate's:
/// the rule is applied to their Workspace, so the snapshots of a Workspace wsgate did not
/// create (or of another run, or a Workspace whose uid is not the one recorded) stay.
#[tokio::test]
async fn snapshots_are_deleted_only_for_a_workspace_of_this_run() {
    use wsgate::platform::crd::{PodSnapshot, Workspace};
    use wsgate::platform::snapshots::{DeleteSnapshotsError, delete_all};
    let sim = start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let pp = PostParams::default();
    let wsapi: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let snaps: Api<PodSnapshot> = Api::namespaced(client.clone(), NS);
    let mut uids = std::collections::BTreeMap::new();
    for (name, labels) in [("mine", ours("r1")), ("theirs", json!({}))] {
        let w: Workspace = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"paused": true, "kind": "jupyterlab-resumable", "podTemplate": {
                "volumes": {"home": format!("{name}-home")},
                "options": {"imageConfig": "jupyterlab-gpu", "podConfig": "gpu_t4_spot"}}}
        }))
        .unwrap();
        let made = wsapi.create(&pp, &w).await.unwrap();
        uids.insert(name, made.metadata.uid.unwrap());
        let s: PodSnapshot = serde_json::from_value(json!({
            "metadata": {"name": format!("{name}-snap"),
                "labels": {"gke-pod-snapshot-triggered-by": format!("ws-{name}-trigger")}},
            "spec": {"source": {"podName": format!("{name}-0")}},
        }))
        .unwrap();
        snaps.create(&pp, &s).await.unwrap();
    }
    let names = || async {
        let mut v: Vec<String> = snaps
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|s| s.metadata.deletion_timestamp.is_none())
            .filter_map(|s| s.metadata.name)
            .collect();
        v.sort();
        v
    };
    let r1 = Claim::Run("r1".into());
    let err = delete_all(&client, &r1, NS, "theirs", None)
        .await
        .unwrap_err();
    assert!(matches!(err, DeleteSnapshotsError::NotOurs(_)), "{err}");
    assert!(
        err.to_string()
            .contains("Workspace wsgate-test/theirs is not wsgate's"),
        "{err}"
    );
    let err = delete_all(&client, &Claim::Run("r2".into()), NS, "mine", None)
        .await
        .unwrap_err();
    assert!(matches!(err, DeleteSnapshotsError::NotOurs(_)), "{err}");
    let err = delete_all(&client, &r1, NS, "mine", Some("another-uid"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("its uid is"), "{err}");
    let err = delete_all(&client, &r1, "default", "mine", None)
        .await
        .unwrap_err();
    assert!(matches!(err, DeleteSnapshotsError::Namespace(_)), "{err}");
    assert_eq!(names().await, ["mine-snap", "theirs-snap"]);
    let n = delete_all(&client, &r1, NS, "mine", Some(&uids["mine"]))
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(names().await, ["theirs-snap"]);
}

/// Pause, resume and annotations go to the Workspace this run created, by its uid: a
/// namesake made by someone else after wsgate's was deleted is refused by the API server,
/// named as not wsgate's, and left exactly as it was.
#[tokio::test]
async fn pause_resume_and_annotations_never_reach_a_namesake() {
    use wsgate::platform::crd::Workspace;
    use wsgate::platform::workspace::{self as ws, WorkspaceError};

    let sim = start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let body = |labels: serde_json::Value| -> Workspace {
        serde_json::from_value(json!({
            "apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace",
            "metadata": {"name": "nb", "labels": labels},
            // Paused from the start: no pod, so nothing but these writes changes them.
            "spec": {"paused": true, "kind": "jupyterlab-resumable", "podTemplate": {
                "volumes": {"home": "nb-home"},
                "options": {"imageConfig": "jupyterlab-cpu", "podConfig": "small_cpu"}}}
        }))
        .unwrap()
    };
    let pp = PostParams::default();
    let ours_ws = api.create(&pp, &body(ours("r1"))).await.unwrap();
    let our_uid = ours_ws.metadata.uid.clone().unwrap();
    ws::annotate(&client, NS, "nb", &our_uid, "wsgate.dev/note", "x")
        .await
        .expect("wsgate's own Workspace takes the annotation");

    // Someone deletes it and makes their own under the same name.
    api.delete("nb", &Default::default()).await.unwrap();
    for _ in 0..100 {
        if api.get_opt("nb").await.unwrap().is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let theirs = api.create(&pp, &body(json!({"team": "ml"}))).await.unwrap();

    for (what, result) in [
        (
            "pause",
            ws::set_paused(&client, NS, "nb", &our_uid, true).await,
        ),
        (
            "resume",
            ws::set_paused(&client, NS, "nb", &our_uid, false).await,
        ),
        (
            "annotate",
            ws::annotate(
                &client,
                NS,
                "nb",
                &our_uid,
                "sim.wsgate.dev/fault",
                "kernel-dies",
            )
            .await,
        ),
    ] {
        let err = result.expect_err(what);
        assert!(matches!(err, WorkspaceError::NotOurs(_)), "{what}: {err:?}");
        let text = err.to_string();
        assert!(
            text.contains("Workspace wsgate-test/nb is not wsgate's to touch"),
            "{text}"
        );
        assert!(text.contains(&our_uid), "{text}");
    }
    let after = api.get("nb").await.unwrap();
    assert_eq!(after.metadata.uid, theirs.metadata.uid);
    assert!(after.spec.paused, "the namesake was not resumed");
    assert_eq!(
        after.metadata.annotations, theirs.metadata.annotations,
        "nor annotated"
    );
    assert_eq!(
        after.metadata.generation, theirs.metadata.generation,
        "nor changed"
    );
}

/// Two drills at once in one namespace (two CI jobs, or a drill started beside a running
/// one): they meet at the token Secret and the squeeze quota, which share a name. Each
/// either finishes or stops naming the object that is the other run's; neither deletes
/// or overwrites the other's, and afterwards nothing of either is left.
#[tokio::test]
async fn two_drills_at_once_never_tear_down_each_other() {
    let sim = start_platform(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    sim.write_kubeconfig(&kc).unwrap();
    let kc = kc.display().to_string();
    let (a, b) = tokio::join!(cluster_drill(kc.clone()), cluster_drill(kc));
    for o in [&a, &b] {
        let out = text(o);
        assert!(!out.contains("panicked"), "{out}");
        match o.status.code() {
            Some(0) => assert!(out.contains("all 2 workspaces restored"), "{out}"),
            Some(code) => {
                assert_ne!(code, wsgate::exit_code::INTERNAL, "{out}");
                assert!(
                    out.contains("is not this run's") || out.contains("is not wsgate's to touch"),
                    "a drill that stops names the other run's object: {out}"
                );
            }
            None => panic!("ended by a signal: {out}"),
        }
    }
    let client = sim.client().await.unwrap();
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let workspaces: Api<wsgate::platform::crd::Workspace> = Api::namespaced(client, NS);
    let lp = Default::default();
    assert!(
        quotas.list(&lp).await.unwrap().items.is_empty(),
        "no quota left"
    );
    assert!(
        secrets.list(&lp).await.unwrap().items.is_empty(),
        "no Secret left"
    );
    assert!(
        workspaces.list(&lp).await.unwrap().items.is_empty(),
        "no Workspace left"
    );
}

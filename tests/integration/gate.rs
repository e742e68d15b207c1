//! `wsgate gate prepare` and `wsgate gate verify` as two separate processes against one
//! simulator (with the real Jupyter runtime), the state file the only hand-off: a snapshot
//! that survives gives Restored; one the "upgrade" removed gives the fresh-session warning
//! (exit 10 with --require-restore), and so does a resume onto another GPU model (whose
//! missing PodRestored verify waits out within its budget); a bad state file or the
//! embedded target is refused.

use std::path::Path;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use wsgate::gate::GateState;
use wsgate::platform::crd::{PodSnapshot, Workspace};
use wsgate::sim::{SimHandle, SimOptions};

use crate::common::{text, wsgate};

const NS: &str = "wsgate-test";

async fn start() -> SimHandle {
    wsgate::install_crypto_provider();
    let mut opts = SimOptions::with_platform();
    if let Some(p) = opts.platform.as_mut() {
        // PodRestored well after Ready, later than verify reaches the kernel: the verdict
        // is Restored only if verify waits for the condition instead of reading it once.
        p.profile.timing.pod_restored_after_ready_ms = wsgate::sim::delay::Delay::Fixed(3000);
    }
    SimHandle::start(opts).await.expect("simulator starts")
}

/// Runs `wsgate gate <sub> ...` against the simulator's kubeconfig, off the runtime's threads.
async fn gate(kubeconfig: &Path, dir: &Path, sub: &str, extra: &[&str]) -> std::process::Output {
    let mut args: Vec<String> = [
        "gate",
        sub,
        "--target",
        "cluster",
        "--kubeconfig",
        &kubeconfig.display().to_string(),
        "--namespace",
        NS,
        "--state",
        &dir.join("gate.json").display().to_string(),
        "--set",
        &format!("reports.dir={}", dir.join("reports").display()),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        wsgate(&refs)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_and_verify_in_separate_processes() {
    let sim = start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let client = sim.client().await.unwrap();
    let workspaces: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let snapshots: Api<PodSnapshot> = Api::namespaced(client.clone(), NS);

    // 1. The snapshot survives the "upgrade": Restored, exit 0, everything removed after.
    let o = gate(&kubeconfig, dir.path(), "prepare", &[]).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let state_path = dir.path().join("gate.json");
    let raw = std::fs::read_to_string(&state_path).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&state_path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let state = GateState::read(&state_path).unwrap();
    let token = Api::<Secret>::namespaced(client.clone(), NS)
        .get("jupyter-token")
        .await
        .unwrap()
        .data
        .unwrap()["token"]
        .0
        .clone();
    let token = String::from_utf8(token).unwrap();
    assert!(
        !raw.contains(&token),
        "the Jupyter token is in the state file"
    );
    assert!(
        !raw.contains(sim.token()),
        "the API token is in the state file"
    );
    let ws = workspaces.get(&state.workspace).await.unwrap();
    assert_eq!(ws.status.unwrap().state.to_string(), "Paused");
    assert_eq!(
        ws.metadata.labels.unwrap()["wsgate.dev/run-id"],
        state.run_id
    );
    assert!(
        state.snapshot.is_some(),
        "prepare recorded the Ready PodSnapshot"
    );

    // The state file is another machine's input: entries wsgate never made (no uid, not its
    // labels, another namespace, cluster-scoped) are reported and left alone.
    let pp = kube::api::PostParams::default();
    let foreign = |name: &str| -> Secret {
        serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let theirs = secrets.create(&pp, &foreign("theirs")).await.unwrap();
    let elsewhere: Api<Secret> = Api::namespaced(client.clone(), "default");
    let outside = elsewhere.create(&pp, &foreign("outside")).await.unwrap();
    let mut tampered: serde_json::Value = serde_json::from_str(&raw).unwrap();
    let secret_entry = |ns: &str, name: &str, uid: Option<String>| {
        json!({"group": "", "version": "v1", "kind": "Secret", "plural": "secrets",
               "namespace": ns, "name": name, "uid": uid})
    };
    let entries = tampered["ledger"]["entries"].as_array_mut().unwrap();
    entries.push(secret_entry(NS, "theirs", None));
    entries.push(secret_entry(NS, "theirs", theirs.metadata.uid.clone()));
    entries.push(secret_entry(
        "default",
        "outside",
        outside.metadata.uid.clone(),
    ));
    entries.push(json!({"group": "", "version": "v1", "kind": "Namespace",
                        "plural": "namespaces", "namespace": null,
                        "name": "kubeflow-workspaces", "uid": null}));
    // A run id that is empty or a selector would select other runs' objects (or every
    // object with the label): verify refuses the state before anything is touched.
    for bad in ["", "r1,team=ml"] {
        let mut bad_run = tampered.clone();
        bad_run["run_id"] = json!(bad);
        std::fs::write(&state_path, serde_json::to_string(&bad_run).unwrap()).unwrap();
        let o = gate(&kubeconfig, dir.path(), "verify", &[]).await;
        let out = text(&o);
        assert_eq!(o.status.code(), Some(wsgate::exit_code::USAGE), "{out}");
        assert!(out.contains("the state file's run_id"), "{out}");
        let ws = workspaces.get(&state.workspace).await.unwrap();
        assert_eq!(ws.status.unwrap().state.to_string(), "Paused", "{out}");
        assert!(secrets.get_opt("theirs").await.unwrap().is_some(), "{out}");
    }
    std::fs::write(&state_path, serde_json::to_string(&tampered).unwrap()).unwrap();

    let o = gate(&kubeconfig, dir.path(), "verify", &[]).await;
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("gate verdict: PASS: restored"), "{out}");
    assert!(out.contains("resume -> next cell done"), "{out}");
    assert!(out.contains("refused: Secret wsgate-test/theirs"), "{out}");
    assert!(out.contains("not wsgate's to touch"), "{out}");
    assert!(secrets.get_opt("theirs").await.unwrap().is_some(), "{out}");
    assert!(
        elsewhere.get_opt("outside").await.unwrap().is_some(),
        "{out}"
    );
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    assert!(
        namespaces
            .get_opt("kubeflow-workspaces")
            .await
            .unwrap()
            .is_some()
    );
    secrets
        .delete("theirs", &DeleteParams::default())
        .await
        .unwrap();
    let result: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            dir.path()
                .join("reports")
                .join(&state.run_id)
                .join("gate-verify.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(result["verdict"], "restored");
    assert_eq!(result["restore"]["kind"], "Restored");
    assert_eq!(result["attempts"], 1);
    // The same result as a page beside it, redacted like the JSON.
    let page = std::fs::read_to_string(
        dir.path()
            .join("reports")
            .join(&state.run_id)
            .join("gate-verify.html"),
    )
    .unwrap();
    assert!(page.contains("PASS: restored across the upgrade"), "{page}");
    assert!(page.contains("data-status=\"passed\""), "{page}");
    assert!(page.contains("<h2>Restore verdict</h2>"), "{page}");
    // The platform's PodRestored, waited for, names the PodSnapshot by its name.
    let snap = state.snapshot.clone().unwrap();
    assert_ne!(snap.name, snap.uid);
    let said = result["restore"]["decided_by"].to_string();
    assert!(
        said.contains(&format!(
            "PodRestored: True (Restored): Restored from snapshot {}",
            snap.name
        )),
        "{said}"
    );
    // The files, read three ways: by the kernel, and on the volume through pods/exec,
    // independently of Jupyter.
    assert_eq!(said.matches(" and the volume").count(), 3, "{said}");
    assert!(!result["pod_restored_lag"].is_null(), "{result}");
    assert!(
        workspaces
            .get_opt(&state.workspace)
            .await
            .unwrap()
            .is_none()
    );
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    assert!(
        pvcs.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // 2. The "upgrade" invalidates the snapshot: a fresh session with the files recoverable,
    //    a pass with a warning, or exit 10 when a restore is required.
    let o = gate(&kubeconfig, dir.path(), "prepare", &[]).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let state = GateState::read(&state_path).unwrap();
    let snap = state.snapshot.clone().unwrap();
    snapshots
        .delete(&snap.name, &DeleteParams::default())
        .await
        .unwrap();
    let o = gate(&kubeconfig, dir.path(), "verify", &["--require-restore"]).await;
    let out = text(&o);
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::FRESH_SESSION),
        "{out}"
    );
    assert!(out.contains("PASS WITH WARNING"), "{out}");
    assert!(out.contains("guidance for users"), "{out}");
    assert!(out.contains("is gone or not Ready"), "{out}");
    assert!(
        workspaces
            .get_opt(&state.workspace)
            .await
            .unwrap()
            .is_none()
    );

    // 3. The upgrade moved the workspace to nodes with another GPU model (the simulator's
    //    gpu-model-mismatch fault): the snapshot cannot restore there; a pass with a warning.
    let o = gate(&kubeconfig, dir.path(), "prepare", &[]).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let state = GateState::read(&state_path).unwrap();
    workspaces
        .patch(
            &state.workspace,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"sim.wsgate.dev/fault": "gpu-model-mismatch"}}})),
        )
        .await
        .unwrap();
    // No PodRestored comes for a cold start: the wait for it ends at its budget.
    let o = gate(
        &kubeconfig,
        dir.path(),
        "verify",
        &["--set", "budgets.pod_restored=5"],
    )
    .await;
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("PASS WITH WARNING"), "{out}");
    assert!(
        out.contains("is still Ready"),
        "the snapshot itself was there: {out}"
    );
    assert!(
        out.contains(
            "PodRestored: not written within the `pod_restored` budget (5 s from the resume): \
             evidence of a cold start"
        ),
        "{out}"
    );

    // 4. The kernel dies during the restore (the simulator's kernel-dies fault): GKE says
    //    PodRestored=True, the process is gone. A false restore: FAIL, exit 14, never a pass.
    let o = gate(&kubeconfig, dir.path(), "prepare", &[]).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let state = GateState::read(&state_path).unwrap();
    workspaces
        .patch(
            &state.workspace,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"sim.wsgate.dev/fault": "kernel-dies"}}}),
            ),
        )
        .await
        .unwrap();
    let o = gate(&kubeconfig, dir.path(), "verify", &[]).await;
    let out = text(&o);
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::FALSE_RESTORE),
        "{out}"
    );
    assert!(
        out.contains("FAIL: the platform claimed a restore, but the paused process was lost"),
        "{out}"
    );
    assert!(!out.contains("PASS"), "{out}");

    // 5. Verify again from the same (now spent) state, its ledger naming someone else's
    //    Secret (with that Secret's own uid) and the test namespace itself: the workspace
    //    is gone, say so, and delete nothing of theirs on the way out.
    let pp = kube::api::PostParams::default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let theirs = secrets
        .create(
            &pp,
            &serde_json::from_value(json!({"metadata": {"name": "theirs-too"}})).unwrap(),
        )
        .await
        .unwrap();
    let state_path = dir.path().join("gate.json");
    let mut spent: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    let entries = spent["ledger"]["entries"].as_array_mut().unwrap();
    entries.push(
        json!({"group": "", "version": "v1", "kind": "Secret", "plural": "secrets",
                        "namespace": NS, "name": "theirs-too", "uid": theirs.metadata.uid}),
    );
    entries.push(json!({"group": "", "version": "v1", "kind": "Namespace",
                        "plural": "namespaces", "namespace": null, "name": NS, "uid": null}));
    std::fs::write(&state_path, serde_json::to_string(&spent).unwrap()).unwrap();
    let o = gate(&kubeconfig, dir.path(), "verify", &[]).await;
    let out = text(&o);
    assert_eq!(o.status.code(), Some(wsgate::exit_code::TARGET), "{out}");
    assert!(out.contains("from the state file is gone"), "{out}");
    let after = secrets.get("theirs-too").await.unwrap();
    assert_eq!(after.metadata.uid, theirs.metadata.uid, "{out}");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    assert!(namespaces.get_opt(NS).await.unwrap().is_some(), "{out}");
}

#[tokio::test]
async fn bad_state_files_and_the_embedded_target_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("missing.json");
    let o = wsgate(&["gate", "verify", "--state", &state.display().to_string()]);
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::USAGE),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("run `wsgate gate prepare --state FILE`"));

    std::fs::write(&state, r#"{"schema": "something/else"}"#).unwrap();
    let o = wsgate(&["gate", "verify", "--state", &state.display().to_string()]);
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::USAGE),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains("is not a wsgate gate state"),
        "{}",
        text(&o)
    );

    let o = wsgate(&["gate", "prepare", "--state", &state.display().to_string()]);
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::USAGE),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains("the embedded simulator would not outlive the first"),
        "{}",
        text(&o)
    );
}

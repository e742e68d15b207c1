//! What the add-on's two mutating webhooks do, as pure functions over the object being
//! written (kubeflow-workspaces.md §10; gke-labs/workspaces
//! `providers/gke/internal/snapshot/webhook.go`):
//!
//! - Workspace UPDATE (`mutateWorkspace`), only on a `spec.paused` transition of a
//!   snapshot-enabled Workspace. A pause (false -> true) whose Workspace is
//!   `checkpoint-state: Ready` passes; one with no pod, a pod not `Running` or a pod being
//!   deleted passes at once, unchanged; otherwise it is rewritten back to `paused: false`
//!   with `checkpoint-state: Checkpointing` and a fresh `checkpoint-started-at` (UTC, whole
//!   seconds): a second pause while `Checkpointing` gets a new stamp, there is no check. A
//!   resume (true -> false) of a `Ready` Workspace is marked `checkpoint-state: Restoring`.
//! - Pod CREATE (`mutatePod`): pods of snapshot-enabled Workspaces (never TPU pods) get
//!   `runtimeClassName: gvisor`, the readiness gate `podsnapshot.gke.kubeflow.org/active`,
//!   the volume `jupyter-ipc-config` (the ConfigMap) mounted in the first container at
//!   `/etc/jupyter/jupyter_server_config.py`, and `podsnapshot.gke.io/ps-name: <last
//!   checkpoint>` whenever the Workspace has a `last-checkpoint-name`. No condition is
//!   written: the gate's condition comes from the add-on's reconciler, so a pod it never
//!   looks at (a namespace outside the tenant list) never turns Ready.
//!
//! The webhooks serve every namespace; only the reconciler is limited to the tenant
//! namespaces. [`mutate`] is the store's mutating admission hook (`Store::add_mutation`).
//! Two things upstream's webhooks write to other objects the hook cannot (it only reads):
//! the pause's readiness-gate flip on the pod and the safety-net ConfigMap; the add-on's
//! reconcile does both right after the write.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::DUPLICATE_OF;
use crate::sim::controllers::agent::PS_NAME;
use crate::sim::controllers::kind;
use crate::sim::controllers::kubelet::WORKSPACE_LABEL;
use crate::sim::error::ApiError;
use crate::sim::json::{Lookup as _, annotation, is_deleting, label, name_of, str_at};
use crate::sim::kinds::KindInfo;
use crate::sim::store::Lister;

/// `podsnapshot.gke.kubeflow.org/checkpoint-state`: `Checkpointing`, `Ready` or `Restoring`
/// (upstream `snapshot.go` has no other state).
pub use crate::platform::names::CHECKPOINT_STATE;
/// When the webhook caught the pause: RFC 3339 in UTC, whole seconds (`2026-01-02T15:04:05Z`).
/// The add-on's trigger carries the same stamp, which is how a trigger left from an earlier
/// pause is told apart.
pub const CHECKPOINT_STARTED_AT: &str = "podsnapshot.gke.kubeflow.org/checkpoint-started-at";
/// The PodSnapshot the last pause produced.
pub const LAST_CHECKPOINT_NAME: &str = "podsnapshot.gke.kubeflow.org/last-checkpoint-name";
/// The per-Workspace storage config (default `kubeflow-pod-snapshot-storage-config`).
pub use crate::platform::names::STORAGE_CONFIG_ANNOTATION;
/// The pod readiness gate the add-on turns False to drain the Service during a checkpoint.
pub const ACTIVE_GATE: &str = "podsnapshot.gke.kubeflow.org/active";
/// The gate's (and `Ready`'s) reason and message while a checkpoint runs (upstream
/// `reconcile.go`, `reconcileCheckpointing`, and `webhook.go`, `mutateWorkspace`).
pub const CHECKPOINTING_REASON: &str = "CheckpointingInProgress";
pub const CHECKPOINTING_MESSAGE: &str = "Pausing: taking GKE PodSnapshot";
/// The gate's reason and message once the pod serves (upstream `reconcileActive`).
pub const ACTIVE_REASON: &str = "WorkspaceActive";
pub const ACTIVE_MESSAGE: &str = "Workspace pod is active";
/// The sandbox runtime Pod Snapshots need.
pub const GVISOR: &str = "gvisor";
/// The ConfigMap (and pod volume) with the Jupyter IPC kernel config (upstream
/// `snapshot.go`, `IPCConfigMapName`, `IPCConfigMapKey`, `IPCConfigMapMountPath`).
pub const IPC_CONFIG_MAP: &str = "jupyter-ipc-config";
pub const IPC_CONFIG_KEY: &str = "jupyter_server_config.py";
pub const IPC_MOUNT_PATH: &str = "/etc/jupyter/jupyter_server_config.py";
/// The ConfigMap's one key: kernels on the `ipc` transport (Unix sockets, not TCP
/// loopback, which a gVisor checkpoint cannot carry) and a poll-based event loop (upstream
/// `snapshot.go`, `jupyterIPCServerConfig`).
pub const IPC_SERVER_CONFIG: &str = "import asyncio
import selectors
class PollEventLoopPolicy(asyncio.DefaultEventLoopPolicy):
    def _loop_factory(self):
        return asyncio.SelectorEventLoop(selectors.PollSelector())
asyncio.set_event_loop_policy(PollEventLoopPolicy())

c.KernelManager.transport = 'ipc'
";

/// Whether a pod asks for TPUs (gVisor cannot host them: never snapshotted).
pub fn requests_tpu(pod: &Value) -> bool {
    pod.lookup("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            ["limits", "requests"].iter().any(|k| {
                c.lookup(&format!("/resources/{k}/google.com~1tpu"))
                    .is_some()
            })
        })
}

/// The `checkpoint-started-at` stamp for `at`: UTC, whole seconds, `Z`.
pub fn checkpoint_stamp(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The Workspace UPDATE webhook on an intercepted pause: `paused` back to false,
/// `Checkpointing`, and the stamp `now`, whatever stamp was there (upstream has no check
/// for a pause already being checkpointed).
pub fn hold_pause(ws: &mut Value, now: &str) {
    ws["spec"]["paused"] = json!(false);
    ws["metadata"]["annotations"][CHECKPOINT_STATE] = json!("Checkpointing");
    ws["metadata"]["annotations"][CHECKPOINT_STARTED_AT] = json!(now);
}

/// The pod CREATE webhook: sandbox runtime, readiness gate, the IPC config volume and
/// mount (each only where missing) and, when `last_checkpoint` is given, the snapshot pin.
pub fn inject_pod(pod: &mut Value, last_checkpoint: Option<&str>) {
    pod["spec"]["runtimeClassName"] = json!(GVISOR);
    let has = |pod: &Value, list: &str, check: &dyn Fn(&Value) -> bool| {
        pod.lookup(list)
            .and_then(Value::as_array)
            .is_some_and(|items| items.iter().any(check))
    };
    let push = |pod: &mut Value, list: &str, item: Value| {
        if !pod.lookup(list).is_some_and(Value::is_array) {
            let (parent, field) = list.rsplit_once('/').unwrap_or(("", list));
            if let Some(p) = pod.pointer_mut(parent) {
                p[field] = json!([]);
            }
        }
        if let Some(items) = pod.pointer_mut(list).and_then(Value::as_array_mut) {
            items.push(item);
        }
    };
    if !has(pod, "/spec/readinessGates", &|g| {
        str_at(g, "/conditionType") == Some(ACTIVE_GATE)
    }) {
        push(
            pod,
            "/spec/readinessGates",
            json!({"conditionType": ACTIVE_GATE}),
        );
    }
    if !has(pod, "/spec/volumes", &|v| {
        str_at(v, "/name") == Some(IPC_CONFIG_MAP)
    }) {
        push(
            pod,
            "/spec/volumes",
            json!({"name": IPC_CONFIG_MAP, "configMap": {"name": IPC_CONFIG_MAP}}),
        );
    }
    if pod
        .lookup("/spec/containers/0")
        .is_some_and(Value::is_object)
        && !has(pod, "/spec/containers/0/volumeMounts", &|m| {
            str_at(m, "/name") == Some(IPC_CONFIG_MAP)
                || str_at(m, "/mountPath") == Some(IPC_MOUNT_PATH)
        })
    {
        push(
            pod,
            "/spec/containers/0/volumeMounts",
            json!({"name": IPC_CONFIG_MAP, "mountPath": IPC_MOUNT_PATH,
                "subPath": IPC_CONFIG_KEY}),
        );
    }
    if let Some(ps) = last_checkpoint.filter(|ps| !ps.is_empty()) {
        pod["metadata"]["annotations"][PS_NAME] = json!(ps);
    }
}

/// The mutating admission hook: pause and resume of Workspaces (updates) and pods
/// (creates) of snapshot-enabled Workspaces.
pub fn mutate(
    kind_info: &KindInfo,
    old: Option<&Value>,
    new: &mut Value,
    list: Lister<'_>,
) -> Result<(), ApiError> {
    match (kind_info.kind, old) {
        ("Workspace", Some(old)) => on_workspace_update(old, new, list),
        ("Pod", None) => on_pod_create(new, list),
        _ => {}
    }
    Ok(())
}

/// Upstream's `snapshotEnabled` (see [`super::enabled_by`]), reading the kind in the store.
fn enabled_with(ws: &Value, list: Lister<'_>) -> bool {
    super::enabled_by(ws, |name| list.get(kind("WorkspaceKind"), None, name))
}

/// The pod behind a Workspace as upstream's `findWorkspacePod` picks it: one not being
/// deleted, else a deleting one. The second pod of `duplicate-restore-attempts` is never it.
pub fn workspace_pod<'a, P: std::ops::Deref<Target = Value>>(
    pods: &'a [P],
    ws: &str,
) -> Option<&'a P> {
    let mine: Vec<&'a P> = pods
        .iter()
        .filter(|p| label(p, WORKSPACE_LABEL) == Some(ws) && annotation(p, DUPLICATE_OF).is_none())
        .collect();
    mine.iter()
        .find(|p| !is_deleting(p))
        .or_else(|| mine.first())
        .copied()
}

/// Ground truth for the held pause: run after [`mutate`] in the same admission (under the
/// store's lock, so `old` is what the write replaces), it records the moment a Workspace's
/// `checkpoint-state` turns `Checkpointing`, whoever wrote the pause (a client, or the
/// workspace controller's idle pause). Admission comes just before the commit; a dry run,
/// or a write refused after admission, would leave a record of a hold that did not happen
/// (no test or bench does either).
pub fn note_held(
    truth: &crate::sim::truth::Truth,
    kind_info: &KindInfo,
    old: Option<&Value>,
    new: &Value,
) {
    let held = |o: &Value| annotation(o, CHECKPOINT_STATE) == Some("Checkpointing");
    if kind_info.kind == "Workspace" && old.is_some_and(|o| !held(o)) && held(new) {
        truth.record(
            crate::sim::truth::Transition::PauseHeld,
            str_at(new, "/metadata/namespace"),
            name_of(new),
            None,
            None,
        );
    }
}

fn on_workspace_update(old: &Value, new: &mut Value, list: Lister<'_>) {
    let was = old.lookup("/spec/paused") == Some(&json!(true));
    let now = new.lookup("/spec/paused") == Some(&json!(true));
    if was == now || !enabled_with(new, list) {
        return;
    }
    let state = annotation(new, CHECKPOINT_STATE);
    if !was {
        if state == Some("Ready") {
            return;
        }
        // Upstream's findWorkspacePod: the pods labelled with the Workspace's name.
        let pods = list.labelled(
            kind("Pod"),
            str_at(new, "/metadata/namespace"),
            WORKSPACE_LABEL,
            name_of(new),
        );
        let running = workspace_pod(&pods, name_of(new)).is_some_and(|p| {
            str_at(p, "/status/phase") == Some("Running") && !is_deleting(p) && !requests_tpu(p)
        });
        if running {
            hold_pause(new, &checkpoint_stamp(Utc::now()));
        }
    } else if state == Some("Ready") {
        new["metadata"]["annotations"][CHECKPOINT_STATE] = json!("Restoring");
    }
}

fn on_pod_create(pod: &mut Value, list: Lister<'_>) {
    let Some(ws_name) = label(pod, WORKSPACE_LABEL).map(str::to_string) else {
        return;
    };
    if requests_tpu(pod) {
        return;
    }
    // Upstream gets the Workspace by name (mutatePod).
    let ws = list.get(
        kind("Workspace"),
        str_at(pod, "/metadata/namespace"),
        &ws_name,
    );
    let Some(ws) = ws else { return };
    if !enabled_with(&ws, list) {
        return;
    }
    inject_pod(pod, annotation(&ws, LAST_CHECKPOINT_NAME));
}

/// Removes the add-on's state annotations from a Workspace.
pub fn clear_state(ws: &mut Value) {
    if let Some(a) = ws
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        for k in [
            CHECKPOINT_STATE,
            CHECKPOINT_STARTED_AT,
            LAST_CHECKPOINT_NAME,
        ] {
            a.remove(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::seed::SNAPSHOT_ENABLED;
    use std::sync::Arc;

    #[test]
    fn the_stamp_is_utc_in_whole_seconds() {
        let at = DateTime::parse_from_rfc3339("2026-01-02T16:04:05.678+01:00")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(checkpoint_stamp(at), "2026-01-02T15:04:05Z");
    }

    #[test]
    fn every_held_pause_gets_a_new_stamp() {
        let mut ws = json!({"metadata": {}, "spec": {"paused": true}});
        hold_pause(&mut ws, "2026-01-02T15:04:05Z");
        assert_eq!(ws["spec"]["paused"], false);
        assert_eq!(annotation(&ws, CHECKPOINT_STATE), Some("Checkpointing"));
        ws["spec"]["paused"] = json!(true);
        hold_pause(&mut ws, "2026-01-02T15:04:09Z");
        assert_eq!(
            annotation(&ws, CHECKPOINT_STARTED_AT),
            Some("2026-01-02T15:04:09Z")
        );
        clear_state(&mut ws);
        assert_eq!(annotation(&ws, CHECKPOINT_STATE), None);
    }

    fn lister(pods: Vec<Value>, ws: Value) -> impl Fn(&KindInfo, Option<&str>) -> Vec<Arc<Value>> {
        let wsk = Arc::new(json!({"metadata": {"name": "resumable",
            "annotations": {SNAPSHOT_ENABLED: "true"}}}));
        let pods: Vec<_> = pods.into_iter().map(Arc::new).collect();
        let ws = Arc::new(ws);
        move |k: &KindInfo, _: Option<&str>| match k.kind {
            "WorkspaceKind" => vec![wsk.clone()],
            "Pod" => pods.clone(),
            "Workspace" => vec![ws.clone()],
            _ => Vec::new(),
        }
    }

    #[test]
    fn enabled_follows_upstreams_snapshot_enabled() {
        let kind_says = |v: Option<&str>| {
            let mut k = json!({"metadata": {"name": "k"}});
            if let Some(v) = v {
                k["metadata"]["annotations"][SNAPSHOT_ENABLED] = json!(v);
            }
            Some(Arc::new(k))
        };
        let ws = |says: Option<&str>, pod_config: &str| {
            let mut w = json!({"metadata": {"name": "a"}, "spec": {"kind": "k",
                "podTemplate": {"options": {"podConfig": pod_config}}}});
            if let Some(v) = says {
                w["metadata"]["annotations"][SNAPSHOT_ENABLED] = json!(v);
            }
            w
        };
        let cases = [
            // (Workspace says, pod option, kind says, enabled)
            (Some("TRUE"), "small", None, true),
            (Some("False"), "small", Some("true"), false),
            (Some("maybe"), "small", Some("True"), true),
            (Some("maybe"), "small", Some("yes"), false),
            (None, "small", Some("true"), true),
            (None, "small", None, false),
            (None, "TPU_v5e", Some("true"), false),
            (Some("true"), "tpu_v5e", None, true),
        ];
        for (says, pod_config, kind, want) in cases {
            let got = super::super::enabled_by(&ws(says, pod_config), |_| kind_says(kind));
            assert_eq!(got, want, "{says:?} {pod_config} {kind:?}");
        }
        let mut kindless = ws(None, "small");
        kindless["spec"]["kind"] = json!("");
        assert!(!super::super::enabled_by(&kindless, |_| kind_says(Some(
            "true"
        ))));

        // The storage config: the Workspace's when not empty, else the kind's when the kind
        // was read (not when the Workspace's own annotation decided), else the default.
        let storage = |says: Option<&str>, own: Option<&str>, kind: Option<&str>| {
            let mut w = ws(says, "small");
            if let Some(v) = own {
                w["metadata"]["annotations"][STORAGE_CONFIG_ANNOTATION] = json!(v);
            }
            let k = json!({"metadata": {"name": "k", "annotations": {
                SNAPSHOT_ENABLED: "true", STORAGE_CONFIG_ANNOTATION: kind.unwrap_or("")}}});
            super::super::snapshot_setting(&w, |_| Some(Arc::new(k))).1
        };
        let default = crate::sim::seed::STORAGE_CONFIG;
        assert_eq!(storage(None, None, Some("kind-sc")), "kind-sc");
        assert_eq!(storage(None, Some(""), Some("kind-sc")), "kind-sc");
        assert_eq!(storage(None, Some("own-sc"), Some("kind-sc")), "own-sc");
        assert_eq!(storage(Some("true"), None, Some("kind-sc")), default);
        assert_eq!(storage(None, None, None), default);
    }

    fn pod(phase: &str, deleting: bool) -> Value {
        let mut p = json!({"metadata": {"name": "ws-a-0", "namespace": "ns",
            "labels": {WORKSPACE_LABEL: "a"}}, "status": {"phase": phase}});
        if deleting {
            p["metadata"]["deletionTimestamp"] = json!("2026-01-02T15:04:05Z");
        }
        p
    }

    /// Runs the Workspace webhook on `old` -> `old` with `spec.paused = paused`.
    fn update(list: Lister<'_>, old: &Value, paused: bool) -> Value {
        let mut new = old.clone();
        new["spec"]["paused"] = json!(paused);
        mutate(kind("Workspace"), Some(old), &mut new, list).unwrap();
        new
    }

    #[test]
    fn a_pause_with_a_running_pod_is_held_and_restamped_even_while_checkpointing() {
        let ws = json!({"metadata": {"name": "a", "namespace": "ns", "annotations": {}},
            "spec": {"kind": "resumable", "paused": false}});
        let list = lister(vec![pod("Running", false)], ws.clone());
        let held = update(&list, &ws, true);
        assert_eq!(held["spec"]["paused"], false);
        assert_eq!(annotation(&held, CHECKPOINT_STATE), Some("Checkpointing"));
        let stamp = annotation(&held, CHECKPOINT_STARTED_AT).unwrap();
        assert!(DateTime::parse_from_rfc3339(stamp).is_ok(), "{stamp}");
        assert!(stamp.ends_with('Z') && !stamp.contains('.'), "{stamp}");
        // A second pause while Checkpointing: no check, a new stamp.
        let mut checkpointing = held.clone();
        checkpointing["metadata"]["annotations"][CHECKPOINT_STARTED_AT] =
            json!("2000-01-01T00:00:00Z");
        let again = update(&list, &checkpointing, true);
        assert_eq!(again["spec"]["paused"], false);
        assert_ne!(
            annotation(&again, CHECKPOINT_STARTED_AT),
            Some("2000-01-01T00:00:00Z")
        );
        // Not a transition (e.g. a status or label write): untouched.
        let mut same = checkpointing.clone();
        same["metadata"]["labels"] = json!({"x": "y"});
        mutate(kind("Workspace"), Some(&checkpointing), &mut same, &list).unwrap();
        assert_eq!(
            annotation(&same, CHECKPOINT_STARTED_AT),
            Some("2000-01-01T00:00:00Z")
        );
    }

    #[test]
    fn a_pause_passes_unchanged_when_ready_disabled_or_without_a_running_pod() {
        let ws = json!({"metadata": {"name": "a", "namespace": "ns", "annotations": {}},
            "spec": {"kind": "resumable", "paused": false}});
        for pods in [
            vec![],
            vec![pod("Pending", false)],
            vec![pod("Running", true)],
        ] {
            let list = lister(pods.clone(), ws.clone());
            let passed = update(&list, &ws, true);
            assert_eq!(passed["spec"]["paused"], true, "{pods:?}");
            assert_eq!(annotation(&passed, CHECKPOINT_STATE), None, "{pods:?}");
        }
        let list = lister(vec![pod("Running", false)], ws.clone());
        let mut ready = ws.clone();
        ready["metadata"]["annotations"][CHECKPOINT_STATE] = json!("Ready");
        assert_eq!(update(&list, &ready, true)["spec"]["paused"], true);
        let mut off = ws.clone();
        off["metadata"]["annotations"][SNAPSHOT_ENABLED] = json!("false");
        let passed = update(&list, &off, true);
        assert_eq!(passed["spec"]["paused"], true);
        assert_eq!(annotation(&passed, CHECKPOINT_STATE), None);
    }

    /// gVisor cannot host TPUs (upstream `mutatePod`, and `snapshotEnabled` on the Workspace
    /// path): a running pod that asks for a TPU is never checkpointed, its pause goes through.
    #[test]
    fn a_pause_of_a_tpu_workspace_goes_through_unheld() {
        let ws = json!({"metadata": {"name": "a", "namespace": "ns", "annotations": {}},
            "spec": {"kind": "resumable", "paused": false}});
        for place in ["limits", "requests"] {
            let mut tpu = pod("Running", false);
            tpu["spec"] = json!({"containers": [{"name": "main",
                "resources": {place: {"google.com/tpu": "4"}}}]});
            let list = lister(vec![tpu], ws.clone());
            let passed = update(&list, &ws, true);
            assert_eq!(passed["spec"]["paused"], true, "{place}");
            assert_eq!(annotation(&passed, CHECKPOINT_STATE), None, "{place}");
            assert_eq!(annotation(&passed, CHECKPOINT_STARTED_AT), None, "{place}");
        }
        // The same pod without the TPU is held (the control).
        let list = lister(vec![pod("Running", false)], ws.clone());
        assert_eq!(update(&list, &ws, true)["spec"]["paused"], false);
    }

    #[test]
    fn a_resume_from_ready_is_marked_restoring() {
        let ws = json!({"metadata": {"name": "a", "namespace": "ns",
            "annotations": {CHECKPOINT_STATE: "Ready", LAST_CHECKPOINT_NAME: "snap"}},
            "spec": {"kind": "resumable", "paused": true}});
        let list = lister(vec![], ws.clone());
        let resumed = update(&list, &ws, false);
        assert_eq!(annotation(&resumed, CHECKPOINT_STATE), Some("Restoring"));
        assert_eq!(resumed["spec"]["paused"], false);
        let mut plain = ws.clone();
        clear_state(&mut plain);
        assert_eq!(
            annotation(&update(&list, &plain, false), CHECKPOINT_STATE),
            None
        );
    }

    #[test]
    fn pods_get_the_sandbox_the_gate_the_ipc_config_and_the_pin_but_no_condition() {
        let ws = json!({"metadata": {"name": "a", "namespace": "ns",
            "annotations": {CHECKPOINT_STATE: "Restoring", LAST_CHECKPOINT_NAME: "snap"}},
            "spec": {"kind": "resumable", "paused": false}});
        let list = lister(vec![], ws.clone());
        let mut p = json!({"metadata": {"name": "ws-a-0", "namespace": "ns",
            "labels": {WORKSPACE_LABEL: "a"}},
            "spec": {"containers": [{"name": "main"}, {"name": "side"}],
                "readinessGates": [{"conditionType": "other"}],
                "volumes": [{"name": "home-volume"}]}, "status": {}});
        mutate(kind("Pod"), None, &mut p, &list).unwrap();
        assert_eq!(p["spec"]["runtimeClassName"], GVISOR);
        assert_eq!(
            p["spec"]["readinessGates"],
            json!([{"conditionType": "other"}, {"conditionType": ACTIVE_GATE}])
        );
        assert_eq!(
            p["spec"]["volumes"][1],
            json!({"name": IPC_CONFIG_MAP, "configMap": {"name": IPC_CONFIG_MAP}})
        );
        assert_eq!(
            p["spec"]["containers"][0]["volumeMounts"],
            json!([{"name": IPC_CONFIG_MAP, "mountPath": IPC_MOUNT_PATH,
                "subPath": IPC_CONFIG_KEY}])
        );
        assert!(p["spec"]["containers"][1].get("volumeMounts").is_none());
        assert_eq!(annotation(&p, PS_NAME), Some("snap"));
        assert!(p["status"].get("conditions").is_none(), "no condition");
        // Applied again, nothing doubles.
        let before = p.clone();
        inject_pod(&mut p, Some("snap"));
        assert_eq!(p, before);
        // No last checkpoint (a pause that went through with no pod): no pin.
        let mut cold = ws.clone();
        cold["metadata"]["annotations"][LAST_CHECKPOINT_NAME] = json!("");
        let list = lister(vec![], cold);
        let mut p = json!({"metadata": {"name": "ws-a-0", "namespace": "ns",
            "labels": {WORKSPACE_LABEL: "a"}}, "spec": {"containers": [{"name": "main"}]}});
        mutate(kind("Pod"), None, &mut p, &list).unwrap();
        assert_eq!(annotation(&p, PS_NAME), None);
        assert_eq!(p["spec"]["readinessGates"][0]["conditionType"], ACTIVE_GATE);
        // TPU pods are never touched.
        let mut tpu = json!({"metadata": {"name": "ws-a-0", "namespace": "ns",
            "labels": {WORKSPACE_LABEL: "a"}},
            "spec": {"containers": [{"resources": {"limits": {"google.com/tpu": "4"}}}]}});
        let before = tpu.clone();
        mutate(kind("Pod"), None, &mut tpu, &list).unwrap();
        assert_eq!(tpu, before);
    }
}

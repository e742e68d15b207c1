//! What the add-on's two mutating webhooks do, as pure functions over the object being
//! written (kubeflow-workspaces.md §10):
//!
//! - Workspace UPDATE: a pause (`spec.paused` false -> true) of a snapshot-enabled
//!   Workspace with a running pod is rewritten back to `paused: false` and marked
//!   `checkpoint-state: Checkpointing` with `checkpoint-started-at`.
//! - Pod CREATE: pods of snapshot-enabled Workspaces get `runtimeClassName: gvisor`, the
//!   readiness gate `podsnapshot.gke.kubeflow.org/active` and, on resume,
//!   `podsnapshot.gke.io/ps-name: <last checkpoint>`.
//!
//! [`mutate`] is the store's mutating admission hook (`Store::add_mutation`), so that no
//! other controller ever sees a held pause as `paused: true`. The add-on's reconcile applies
//! the same changes again right after a write (idempotent), for stores without the hook.

use serde_json::{Value, json};

use super::DUPLICATE_OF;
use crate::sim::controllers::agent::{
    PS_NAME, annotation, is_deleting, label, name_of, now_ms, str_at,
};
use crate::sim::controllers::kind;
use crate::sim::controllers::kubelet::WORKSPACE_LABEL;
use crate::sim::controllers::scheduler::set_condition;
use crate::sim::error::ApiError;
use crate::sim::kinds::KindInfo;
use crate::sim::seed::SNAPSHOT_ENABLED;
use crate::sim::store::Lister;

/// `podsnapshot.gke.kubeflow.org/checkpoint-state`: `Checkpointing`, `Ready` or `Restoring`
/// (and, in the simulator, `Failed` after a failed checkpoint until the resume).
pub const CHECKPOINT_STATE: &str = "podsnapshot.gke.kubeflow.org/checkpoint-state";
/// When the add-on caught the pause (RFC 3339, ms).
pub const CHECKPOINT_STARTED_AT: &str = "podsnapshot.gke.kubeflow.org/checkpoint-started-at";
/// The PodSnapshot the last pause produced.
pub const LAST_CHECKPOINT_NAME: &str = "podsnapshot.gke.kubeflow.org/last-checkpoint-name";
/// The per-Workspace storage config (default `kubeflow-pod-snapshot-storage-config`).
pub const STORAGE_CONFIG_ANNOTATION: &str = "podsnapshot.gke.kubeflow.org/storage-config";
/// The pod readiness gate the add-on turns False to drain the Service during a checkpoint.
pub const ACTIVE_GATE: &str = "podsnapshot.gke.kubeflow.org/active";
/// The sandbox runtime Pod Snapshots need.
pub const GVISOR: &str = "gvisor";

/// Whether a pod asks for TPUs (gVisor cannot host them: never snapshotted).
pub fn requests_tpu(pod: &Value) -> bool {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            ["limits", "requests"].iter().any(|k| {
                c.pointer(&format!("/resources/{k}/google.com~1tpu"))
                    .is_some()
            })
        })
}

/// The Workspace UPDATE webhook on a pause request: hold `paused` at false and start the
/// checkpoint. Returns whether it changed anything.
pub fn hold_pause(ws: &mut Value, now: &str) -> bool {
    if ws.pointer("/spec/paused") != Some(&json!(true)) {
        return false;
    }
    ws["spec"]["paused"] = json!(false);
    if annotation(ws, CHECKPOINT_STATE) != Some("Checkpointing") {
        ws["metadata"]["annotations"][CHECKPOINT_STATE] = json!("Checkpointing");
        ws["metadata"]["annotations"][CHECKPOINT_STARTED_AT] = json!(now);
    }
    true
}

/// The pod CREATE webhook: sandbox runtime, readiness gate and, when `last_checkpoint` is
/// given, the snapshot pin. Returns whether it changed anything.
pub fn inject_pod(pod: &mut Value, last_checkpoint: Option<&str>) -> bool {
    let mut changed = false;
    if str_at(pod, "/spec/runtimeClassName") != Some(GVISOR) {
        pod["spec"]["runtimeClassName"] = json!(GVISOR);
        changed = true;
    }
    let has_gate = pod
        .pointer("/spec/readinessGates")
        .and_then(Value::as_array)
        .is_some_and(|g| {
            g.iter()
                .any(|x| str_at(x, "/conditionType") == Some(ACTIVE_GATE))
        });
    if !has_gate {
        if !pod
            .pointer("/spec/readinessGates")
            .is_some_and(Value::is_array)
        {
            pod["spec"]["readinessGates"] = json!([]);
        }
        if let Some(g) = pod["spec"]["readinessGates"].as_array_mut() {
            g.push(json!({"conditionType": ACTIVE_GATE}));
        }
        changed = true;
    }
    if let Some(ps) = last_checkpoint
        && annotation(pod, PS_NAME).is_none()
    {
        pod["metadata"]["annotations"][PS_NAME] = json!(ps);
        changed = true;
    }
    changed
}

/// The mutating admission hook: holds pauses (Workspace updates) and prepares pods (Pod
/// creates) of snapshot-enabled Workspaces.
pub fn mutate(
    kind_info: &KindInfo,
    old: Option<&Value>,
    new: &mut Value,
    list: Lister<'_>,
) -> Result<(), ApiError> {
    match (kind_info.kind, old) {
        ("Workspace", Some(old)) => hold_on_update(old, new, list),
        ("Pod", None) => prepare_on_create(new, list),
        _ => {}
    }
    Ok(())
}

/// The add-on's setting on the Workspace, else on its WorkspaceKind.
fn enabled_with(ws: &Value, list: Lister<'_>) -> bool {
    let value = annotation(ws, SNAPSHOT_ENABLED)
        .map(str::to_string)
        .or_else(|| {
            let kind_name = str_at(ws, "/spec/kind")?;
            list(kind("WorkspaceKind"), None)
                .iter()
                .find(|k| name_of(k) == kind_name)
                .and_then(|k| annotation(k, SNAPSHOT_ENABLED).map(str::to_string))
        });
    value.as_deref() == Some("true")
}

fn hold_on_update(old: &Value, new: &mut Value, list: Lister<'_>) {
    let pausing = old.pointer("/spec/paused") != Some(&json!(true))
        && new.pointer("/spec/paused") == Some(&json!(true));
    let state = annotation(new, CHECKPOINT_STATE);
    if !pausing || matches!(state, Some("Ready" | "Failed")) || !enabled_with(new, list) {
        return;
    }
    let checkpointing = state == Some("Checkpointing");
    let name = name_of(new).to_string();
    let running = list(kind("Pod"), str_at(new, "/metadata/namespace"))
        .iter()
        .any(|p| {
            label(p, WORKSPACE_LABEL) == Some(name.as_str())
                && str_at(p, "/status/phase") == Some("Running")
                && !is_deleting(p)
                && annotation(p, DUPLICATE_OF).is_none()
                && !requests_tpu(p)
        });
    if running || checkpointing {
        hold_pause(new, &now_ms());
    }
}

fn prepare_on_create(pod: &mut Value, list: Lister<'_>) {
    let Some(ws_name) = label(pod, WORKSPACE_LABEL).map(str::to_string) else {
        return;
    };
    let ws = list(kind("Workspace"), str_at(pod, "/metadata/namespace"))
        .into_iter()
        .find(|w| name_of(w) == ws_name);
    let Some(ws) = ws else { return };
    if !enabled_with(&ws, list) || requests_tpu(pod) {
        return;
    }
    let state = annotation(&ws, CHECKPOINT_STATE);
    let pin = match state {
        Some("Ready" | "Restoring") => annotation(&ws, LAST_CHECKPOINT_NAME),
        _ => None,
    };
    inject_pod(pod, pin);
    let active = if state == Some("Checkpointing") {
        "False"
    } else {
        "True"
    };
    let now = crate::sim::store::meta::now_rfc3339();
    set_condition(pod, ACTIVE_GATE, active, None, None, &now);
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

    #[test]
    fn a_pause_is_held_and_marked_once() {
        let mut ws = json!({"metadata": {}, "spec": {"paused": true}});
        assert!(hold_pause(&mut ws, "t1"));
        assert_eq!(ws["spec"]["paused"], false);
        assert_eq!(annotation(&ws, CHECKPOINT_STATE), Some("Checkpointing"));
        ws["spec"]["paused"] = json!(true);
        assert!(hold_pause(&mut ws, "t2"));
        assert_eq!(annotation(&ws, CHECKPOINT_STARTED_AT), Some("t1"));
        assert!(!hold_pause(&mut ws, "t3"));
        clear_state(&mut ws);
        assert_eq!(annotation(&ws, CHECKPOINT_STATE), None);
    }

    #[test]
    fn the_admission_hook_holds_pauses_and_prepares_pods_of_enabled_workspaces() {
        use std::sync::Arc;
        let wsk = Arc::new(json!({"metadata": {"name": "resumable",
            "annotations": {SNAPSHOT_ENABLED: "true"}}}));
        let pod = Arc::new(json!({"metadata": {"name": "ws-a-0", "namespace": "ns",
            "labels": {WORKSPACE_LABEL: "a"}}, "status": {"phase": "Running"}}));
        let ws = json!({"metadata": {"name": "a", "namespace": "ns",
            "annotations": {CHECKPOINT_STATE: "Ready", LAST_CHECKPOINT_NAME: "snap"}},
            "spec": {"kind": "resumable", "paused": false}});
        let stored = Arc::new(ws.clone());
        let list = move |k: &KindInfo, _: Option<&str>| match k.kind {
            "WorkspaceKind" => vec![wsk.clone()],
            "Pod" => vec![pod.clone()],
            "Workspace" => vec![stored.clone()],
            _ => Vec::new(),
        };
        let ws_kind = kind("Workspace");
        // The add-on's own pause (state Ready) passes.
        let mut own = ws.clone();
        own["spec"]["paused"] = json!(true);
        mutate(ws_kind, Some(&ws), &mut own, &list).unwrap();
        assert_eq!(own["spec"]["paused"], true);
        // A user's pause with a running pod is held.
        let mut old = ws.clone();
        clear_state(&mut old);
        let mut user = old.clone();
        user["spec"]["paused"] = json!(true);
        mutate(ws_kind, Some(&old), &mut user, &list).unwrap();
        assert_eq!(user["spec"]["paused"], false);
        assert_eq!(annotation(&user, CHECKPOINT_STATE), Some("Checkpointing"));
        // Disabled on the Workspace itself: the pause goes through.
        let mut off = user.clone();
        clear_state(&mut off);
        off["metadata"]["annotations"][SNAPSHOT_ENABLED] = json!("false");
        off["spec"]["paused"] = json!(true);
        mutate(ws_kind, Some(&old), &mut off, &list).unwrap();
        assert_eq!(off["spec"]["paused"], true);
        // A new pod of the paused Workspace is pinned to its last checkpoint.
        let mut new_pod = json!({"metadata": {"name": "ws-a-0", "namespace": "ns",
            "labels": {WORKSPACE_LABEL: "a"}}, "spec": {"containers": []}, "status": {}});
        mutate(kind("Pod"), None, &mut new_pod, &list).unwrap();
        assert_eq!(annotation(&new_pod, PS_NAME), Some("snap"));
        assert_eq!(new_pod["spec"]["runtimeClassName"], "gvisor");
        assert_eq!(new_pod["status"]["conditions"][0]["type"], ACTIVE_GATE);
        assert_eq!(new_pod["status"]["conditions"][0]["status"], "True");
    }

    #[test]
    fn pods_get_the_sandbox_the_gate_and_the_pin_once() {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "main"}],
            "readinessGates": [{"conditionType": "other"}]}});
        assert!(inject_pod(&mut pod, Some("snap")));
        assert_eq!(pod["spec"]["runtimeClassName"], "gvisor");
        assert_eq!(pod["spec"]["readinessGates"].as_array().unwrap().len(), 2);
        assert_eq!(annotation(&pod, PS_NAME), Some("snap"));
        assert!(!inject_pod(&mut pod, Some("other")));
        assert_eq!(annotation(&pod, PS_NAME), Some("snap"));
        let tpu =
            json!({"spec": {"containers": [{"resources": {"limits": {"google.com/tpu": 4}}}]}});
        assert!(requests_tpu(&tpu));
        assert!(!requests_tpu(&pod));
    }
}

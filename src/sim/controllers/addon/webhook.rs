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
//! The simulator's store has no mutating admission yet, so the add-on applies these right
//! after the write, from its reconcile. They are kept pure so that a store-level mutating
//! hook can call them at admission time, which closes the window in which the workspace
//! controller sees `paused: true`.

use serde_json::{Value, json};

use crate::sim::controllers::agent::{PS_NAME, annotation, str_at};

/// `podsnapshot.gke.kubeflow.org/checkpoint-state`: `Checkpointing`, `Ready` or `Restoring`.
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

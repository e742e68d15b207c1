//! Manual triggers: the `Triggered` condition, the policy that selects the target pod, and
//! the checkpoint a trigger starts (a new PodSnapshot, the pod frozen for the upload).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::{
    Agent, CHECKPOINTED_AT, DRIVER_VERSION, FINALIZER, GPU_MODEL, LAST_ACCESS, MACHINE_SERIES,
    ORIGIN_POD, RESIDENT_BYTES, SOURCE_NODE, SPEC_HASH, TARGET_NODE, TRIGGER_UID,
    TRIGGER_UID_FIELD, TRIGGERED_BY, distilled_spec_hash, fault_on, grouping_labels,
    resident_bytes, selector_matches, storage_of_policy, workspace_of,
};
use super::{InFlight, Outcome};
use crate::sim::bucket::SnapshotLocation;
use crate::sim::controllers::scheduler::gpu_request;
use crate::sim::controllers::{Ctx, Next, ObjKey, kind};
use crate::sim::faults::{FAULT_ANNOTATION, Fault};
use crate::sim::json::{
    Lookup as _, annotation, condition_status, is_deleting, label, name_of, now_rfc3339_ms,
    set_cr_condition, str_at, uid_of,
};
use crate::sim::seed::DRIVER_ANNOTATION;
use crate::sim::truth::Transition;

/// One trigger, by name and uid (a later trigger of the same name is another object).
pub(super) struct TriggerRef<'a> {
    pub(super) ns: &'a str,
    pub(super) name: &'a str,
    pub(super) uid: &'a str,
}

/// Writes a trigger's `Triggered` condition (and, when complete, the snapshot it created).
pub(super) fn set_triggered(
    ctx: &Ctx,
    t: &TriggerRef<'_>,
    status: &str,
    reason: &str,
    message: &str,
    snapshot: Option<&str>,
) {
    let _ = ctx.store.modify(
        kind("PodSnapshotManualTrigger"),
        Some(t.ns),
        t.name,
        true,
        false,
        |cur| {
            let mut c = cur.clone();
            if uid_of(cur) != t.uid {
                return Ok(c);
            }
            set_cr_condition(&mut c, "Triggered", status, reason, message);
            c["status"]["observedGeneration"] = cur
                .lookup("/metadata/generation")
                .cloned()
                .unwrap_or(json!(1));
            if let Some(s) = snapshot {
                c["status"]["snapshotCreated"] = json!({"name": s});
            }
            Ok(c)
        },
    );
}

/// The manual-type policy in `ns` whose selector selects `pod` (first by name).
fn manual_policy_for(ctx: &Ctx, ns: &str, pod: &Value) -> Option<std::sync::Arc<Value>> {
    ctx.store
        .selecting(
            kind("PodSnapshotPolicy"),
            Some(ns),
            pod.lookup("/metadata/labels"),
        )
        .into_iter()
        .filter(|p| !is_deleting(p))
        .filter(|p| str_at(p, "/spec/triggerConfig/type") == Some("manual"))
        .find(|p| {
            selector_matches(
                p.lookup("/spec/selector").unwrap_or(&Value::Null),
                pod.lookup("/metadata/labels"),
            )
        })
}

pub(super) fn driver_major(driver: &str) -> Option<u32> {
    driver.split('.').next()?.parse().ok()
}

impl Agent {
    pub(super) fn reconcile_trigger(&self, ctx: &Ctx, key: &ObjKey) -> Next {
        let Some(trig) = ctx.store.find(key.kind, key.ns(), &key.name) else {
            return Next::Done;
        };
        let ns = key.namespace.as_str();
        let trig_uid = uid_of(&trig).to_string();
        let tref = TriggerRef {
            ns,
            name: &key.name,
            uid: &trig_uid,
        };
        let fail = |message: &str| {
            set_triggered(ctx, &tref, "False", "Failed", message, None);
            Next::Done
        };
        if is_deleting(&trig)
            || matches!(condition_status(&trig, "Triggered"), Some("True" | "False"))
        {
            return Next::Done;
        }
        let already = !ctx
            .store
            .by_field(kind("PodSnapshot"), Some(ns), TRIGGER_UID_FIELD, &trig_uid)
            .is_empty();
        if already {
            return Next::Done;
        }
        let target = str_at(&trig, "/spec/targetPod").unwrap_or("");
        if target.is_empty() {
            return fail("spec.targetPod is required");
        }
        let Some(pod) = ctx.store.find(kind("Pod"), Some(ns), target) else {
            return fail(&format!("pod {ns}/{target} not found"));
        };
        if is_deleting(&pod) {
            return fail(&format!("pod {ns}/{target} is terminating"));
        }
        match str_at(&pod, "/status/phase").unwrap_or("Pending") {
            "Running" => {}
            "Pending" => {
                set_triggered(
                    ctx,
                    &tref,
                    "Unknown",
                    "Pending",
                    &format!("waiting for pod {ns}/{target} to run"),
                    None,
                );
                return Next::After(Duration::from_millis(500));
            }
            phase => return fail(&format!("pod {ns}/{target} is not running (phase {phase})")),
        }
        if str_at(&pod, "/spec/runtimeClassName") != Some("gvisor") {
            return fail(&format!(
                "pod {ns}/{target} does not run in GKE Sandbox: runtimeClassName must be gvisor"
            ));
        }
        let Some(policy) = manual_policy_for(ctx, ns, &pod) else {
            return fail(&format!(
                "no PodSnapshotPolicy with triggerConfig.type manual selects pod {ns}/{target}"
            ));
        };
        let policy_name = name_of(&policy).to_string();
        let (bucket, path) = match storage_of_policy(ctx, &policy) {
            Ok(s) => s,
            Err(e) => return fail(&e),
        };
        let node_name = str_at(&pod, "/spec/nodeName").unwrap_or("").to_string();
        let node = ctx.store.find(kind("Node"), None, &node_name);
        let node_label = |k: &str| node.as_deref().and_then(|n| label(n, k)).unwrap_or("");
        let gpu_model = node_label(crate::platform::names::ACCELERATOR_LABEL).to_string();
        let machine_series = node_label("cloud.google.com/machine-family").to_string();
        let driver = node
            .as_deref()
            .and_then(|n| annotation(n, DRIVER_ANNOTATION))
            .unwrap_or("")
            .to_string();
        if gpu_request(&pod) > 0 && driver_major(&driver).is_none_or(|m| m < 570) {
            return fail(&format!(
                "runsc error: exit status 128 (GPU checkpointing needs NVIDIA driver >= 570; node {node_name} has {driver:?})"
            ));
        }
        let pod_uid = uid_of(&pod).to_string();
        if ctx.pods.running(&pod_uid).is_none() {
            return fail(&format!("pod {ns}/{target} has no running sandbox"));
        }
        let ws = workspace_of(ctx, &pod);
        let mut fault_objs = vec![&*pod];
        if let Some(w) = &ws {
            fault_objs.push(w);
        }
        let outcome = if fault_on(ctx, Fault::CheckpointFails, &fault_objs) {
            ctx.truth.record_fault(Fault::CheckpointFails);
            Outcome::Fail
        } else if fault_on(ctx, Fault::CheckpointHangs, &fault_objs) {
            ctx.truth.record_fault(Fault::CheckpointHangs);
            Outcome::Hang
        } else {
            Outcome::Succeed
        };
        // Per-object faults travel with the snapshot, so that its own lifecycle (deletion,
        // restore matching) sees them.
        let fault_annotation: Vec<&str> = fault_objs
            .iter()
            .filter_map(|o| annotation(o, FAULT_ANNOTATION))
            .collect();
        let resident = resident_bytes(ctx, &pod);
        let mut labels = json!({TRIGGERED_BY: key.name});
        for l in grouping_labels(&policy) {
            if let Some(v) = label(&pod, &l) {
                labels[l] = json!(v);
            }
        }
        let now = now_rfc3339_ms();
        let mut annotations = json!({
            ORIGIN_POD: target,
            SPEC_HASH: distilled_spec_hash(&pod),
            GPU_MODEL: gpu_model,
            DRIVER_VERSION: driver,
            MACHINE_SERIES: machine_series,
            SOURCE_NODE: node_name,
            RESIDENT_BYTES: resident.to_string(),
            TRIGGER_UID: trig_uid.clone(),
            CHECKPOINTED_AT: now,
            LAST_ACCESS: now,
        });
        if !fault_annotation.is_empty() {
            annotations[FAULT_ANNOTATION] = json!(fault_annotation.join(","));
        }
        let snap_name = uuid::Uuid::new_v4().to_string();
        let snapshot = json!({
            "metadata": {"name": snap_name, "labels": labels, "annotations": annotations,
                         "finalizers": [FINALIZER]},
            "spec": {"policyName": policy_name},
        });
        let created = match ctx
            .store
            .create(kind("PodSnapshot"), Some(ns), snapshot, false)
        {
            Ok(c) => c,
            Err(e) => return fail(&format!("cannot create the PodSnapshot: {}", e.message)),
        };
        let snap_uid = uid_of(&created).to_string();
        let location = SnapshotLocation {
            bucket,
            path,
            snapshot_uid: snap_uid.clone(),
        };
        let _ = ctx.store.modify(
            kind("PodSnapshot"),
            Some(ns),
            &snap_name,
            true,
            false,
            |cur| {
                let mut c = cur.clone();
                set_cr_condition(
                    &mut c,
                    "Checkpoint",
                    "Unknown",
                    "AwaitingCheckpoint",
                    "checkpoint in progress",
                );
                set_cr_condition(
                    &mut c,
                    "Ready",
                    "False",
                    "AwaitingCheckpoint",
                    "waiting for the checkpoint to be uploaded",
                );
                Ok(c)
            },
        );
        let _ = ctx
            .store
            .modify(key.kind, key.ns(), &key.name, false, false, |cur| {
                let mut c = cur.clone();
                c["metadata"]["labels"][TARGET_NODE] = json!(node_name);
                Ok(c)
            });
        set_triggered(
            ctx,
            &tref,
            "Unknown",
            "InProgress",
            &format!("checkpointing pod {ns}/{target} into PodSnapshot {snap_name}"),
            None,
        );
        let description = json!({"snapshot": snap_name, "uid": snap_uid, "namespace": ns,
            "pod": target, "node": node_name, "residentBytes": resident});
        if let Err(e) = ctx.bucket.write_checkpoint_start(&location, &description) {
            tracing::warn!(error = %e, "cannot write the checkpoint's first objects");
        }
        let mut outcome = outcome;
        if outcome != Outcome::Fail {
            // The pod is frozen for the whole upload: its process becomes the image.
            if let Err(e) = ctx.pods.checkpoint(&pod_uid, &snap_uid, resident) {
                tracing::warn!(error = %e, "checkpoint failed");
                outcome = Outcome::Fail;
            }
        }
        let post_stop = str_at(&policy, "/spec/triggerConfig/postCheckpoint") == Some("stop");
        ctx.truth.record(
            Transition::CheckpointStarted,
            Some(ns),
            target,
            Some(&node_name),
            Some(snap_name.clone()),
        );
        let duration = ctx.profile.timing.checkpoint_duration(
            resident,
            ctx.delays
                .of(crate::sim::delay::Purpose::CheckpointFixed, &snap_uid),
        );
        self.inflight().insert(
            snap_uid,
            InFlight {
                started: Instant::now(),
                duration,
                outcome,
                pod_uid,
                pod_name: target.to_string(),
                node: node_name,
                trigger_name: key.name.clone(),
                trigger_uid: trig_uid.clone(),
                resident_bytes: resident,
                location,
                post_stop,
            },
        );
        Next::Done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_versions_parse_their_major() {
        assert_eq!(driver_major("570.172.08"), Some(570));
        assert_eq!(driver_major(""), None);
    }
}

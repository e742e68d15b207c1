//! The GKE Pod Snapshot agent (gke-pod-snapshots.md §2-§3, §7): it answers manual triggers
//! by checkpointing the target pod into a new PodSnapshot, uploads the snapshot's objects to
//! the bucket, deletes them again through the snapshot's finalizer, applies the policies'
//! retention rules, and answers the kubelet's question "does this new pod restore from a
//! snapshot?" ([`restore_plan`]).
//!
//! - Trigger: `Triggered` Unknown -> `True/Complete` with `status.snapshotCreated.name`, or
//!   `False/Failed` with the reason in the message.
//! - PodSnapshot: a UUID name, `spec.policyName`, the label `gke-pod-snapshot-triggered-by`,
//!   the annotation `podsnapshot.gke.io/origin-pod` and the finalizer
//!   `podsnapshot.gke.io/podsnapshot-finalizer`; `Checkpoint`/`Ready` `AwaitingCheckpoint`
//!   for the upload (whose length is the profile's `checkpoint_duration(resident bytes)`),
//!   then `Checkpoint`/`StorageReplicated` `Succeeded` and `Ready=True/AllSnapshotsAvailable`.
//! - The pod is frozen for the whole upload (its process becomes the snapshot's memory
//!   image); with `postCheckpoint: stop` it ends `Completed`, with `resume` it thaws.
//!
//! By concern: `trigger` (a trigger starts a checkpoint), `snapshot` (the checkpoint in
//! flight ends), `finalizer` (a deleted snapshot's objects go first), [`restore`] (which
//! snapshot a new pod restores from), [`retention`] (the policies' rules). This module keeps
//! the controller itself and what they share.

mod finalizer;
pub mod restore;
pub mod retention;
mod snapshot;
mod trigger;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::{Ctx, Next, ObjKey, Reconciler, kind};
use crate::platform::names::WORKSPACE_LABEL;
use crate::sim::bucket::SnapshotLocation;
use crate::sim::faults::{self, Fault};
use crate::sim::json::{
    Lookup as _, annotation, condition_status, is_deleting, label, name_of, now_rfc3339_ms,
    set_cr_condition, str_at, uid_of,
};
use crate::sim::seed::DRIVER_ANNOTATION;
use crate::sim::store::{Event, EventType};

pub(crate) use finalizer::delete_snapshot;
pub use restore::{RestorePlan, distilled_spec_hash, restore_plan, restore_plan_and_faults};
use trigger::TriggerRef;

/// The pod annotation that pins the snapshot to restore from.
pub const PS_NAME: &str = "podsnapshot.gke.io/ps-name";
/// The PodSnapshot annotation naming the pod it was taken from (v1).
pub const ORIGIN_POD: &str = "podsnapshot.gke.io/origin-pod";
pub use crate::platform::names::TRIGGERED_BY;
/// The finalizer that deletes a snapshot's bucket objects.
pub const FINALIZER: &str = "podsnapshot.gke.io/podsnapshot-finalizer";
/// The label GKE adds to a trigger: the node of the target pod.
pub const TARGET_NODE: &str = "podsnapshot.gke.io/targetNode";

// GKE records the machine family, GPU model, driver and node version as snapshot metadata,
// but the real field names are unknown (gke-pod-snapshots.md §2.4), so the simulator keeps
// them, and its own bookkeeping, as annotations under its own prefix.
/// The distilled pod-spec hash the snapshot was taken with.
pub const SPEC_HASH: &str = "sim.wsgate.dev/spec-hash";
/// `cloud.google.com/gke-accelerator` of the checkpointed node ("" without a GPU).
pub const GPU_MODEL: &str = "sim.wsgate.dev/gpu-model";
/// The NVIDIA driver version of the checkpointed node (same key as on the node).
pub const DRIVER_VERSION: &str = DRIVER_ANNOTATION;
/// `cloud.google.com/machine-family` of the checkpointed node.
pub const MACHINE_SERIES: &str = "sim.wsgate.dev/machine-series";
/// The node the pod was checkpointed on.
pub const SOURCE_NODE: &str = "sim.wsgate.dev/source-node";
/// The resident memory the image holds (the size of `pages.img`), in bytes.
pub const RESIDENT_BYTES: &str = "sim.wsgate.dev/resident-bytes";
/// The uid of the trigger that produced the snapshot (names are reused, uids are not).
pub const TRIGGER_UID: &str = "sim.wsgate.dev/trigger-uid";
/// [`TRIGGER_UID`] as the store's field index names it.
const TRIGGER_UID_FIELD: &str = "/metadata/annotations/sim.wsgate.dev~1trigger-uid";
/// When the checkpoint started (RFC 3339, ms): orders snapshots, newest first.
pub const CHECKPOINTED_AT: &str = "sim.wsgate.dev/checkpointed-at";
/// When the snapshot was last written or restored from (RFC 3339, ms): retention's clock.
pub const LAST_ACCESS: &str = "sim.wsgate.dev/last-access";

/// Whether a label selector (`matchLabels`, `matchExpressions`) selects `labels`. An empty
/// selector selects everything, as in Kubernetes.
pub fn selector_matches(selector: &Value, labels: Option<&Value>) -> bool {
    // An operator the API would have refused selects nothing.
    crate::sim::selector::LabelSelector::from_object(selector).is_ok_and(|s| s.matches(labels))
}

/// The Workspace a pod belongs to (by its workspace-name label), if any.
pub(crate) fn workspace_of(ctx: &Ctx, pod: &Value) -> Option<std::sync::Arc<Value>> {
    let ws = label(pod, WORKSPACE_LABEL)?;
    ctx.store
        .find(kind("Workspace"), str_at(pod, "/metadata/namespace"), ws)
}

/// Whether `fault` is on for the whole run or annotated on any of `objs`.
pub(crate) fn fault_on(ctx: &Ctx, fault: Fault, objs: &[&Value]) -> bool {
    ctx.profile.has_fault(fault) || objs.iter().any(|o| faults::annotated(o, fault))
}

/// Whether `fault` is on for a pod: run-wide, on the pod, or on its Workspace.
pub(crate) fn fault_for_pod(ctx: &Ctx, pod: &Value, fault: Fault) -> bool {
    let ws = workspace_of(ctx, pod);
    let mut objs = vec![pod];
    if let Some(ws) = &ws {
        objs.push(ws);
    }
    fault_on(ctx, fault, &objs)
}

/// The resident memory a checkpoint of `pod` writes: the pod annotation
/// `sim.wsgate.dev/resident-bytes` when set (for drills with large images), else what the
/// runtime reports (the process tree's RSS, or a nominal size with the `none` runtime).
pub fn resident_bytes(ctx: &Ctx, pod: &Value) -> u64 {
    annotation(pod, RESIDENT_BYTES)
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| ctx.pods.resident_bytes(uid_of(pod)))
}

/// The bucket and path of a policy's storage config, or why they cannot be resolved.
pub(crate) fn storage_of(ctx: &Ctx, ns: &str, policy: &str) -> Result<(String, String), String> {
    let p = ctx
        .store
        .find(kind("PodSnapshotPolicy"), Some(ns), policy)
        .ok_or_else(|| format!("PodSnapshotPolicy {ns}/{policy} not found"))?;
    storage_of_policy(ctx, &p)
}

pub(crate) fn storage_of_policy(ctx: &Ctx, policy: &Value) -> Result<(String, String), String> {
    let sc = str_at(policy, "/spec/storageConfigName").unwrap_or("");
    let cfg = ctx
        .store
        .find(kind("PodSnapshotStorageConfig"), None, sc)
        .ok_or_else(|| format!("PodSnapshotStorageConfig {sc:?} not found"))?;
    let bucket = str_at(&cfg, "/spec/snapshotStorageConfig/gcs/bucket")
        .filter(|b| !b.is_empty())
        .ok_or_else(|| format!("PodSnapshotStorageConfig {sc:?} names no bucket"))?;
    let path = str_at(&cfg, "/spec/snapshotStorageConfig/gcs/path").unwrap_or("");
    Ok((bucket.to_string(), path.to_string()))
}

/// How a checkpoint in flight will end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Succeed,
    Fail,
    Hang,
}

/// A checkpoint being uploaded.
#[derive(Debug, Clone)]
pub(super) struct InFlight {
    started: Instant,
    duration: Duration,
    outcome: Outcome,
    pod_uid: String,
    pod_name: String,
    node: String,
    trigger_name: String,
    trigger_uid: String,
    resident_bytes: u64,
    location: SnapshotLocation,
    post_stop: bool,
}

impl InFlight {
    fn trigger<'a>(&'a self, ns: &'a str) -> TriggerRef<'a> {
        TriggerRef {
            ns,
            name: &self.trigger_name,
            uid: &self.trigger_uid,
        }
    }
}

/// The agent: one controller over triggers, snapshots, policies and storage configs.
#[derive(Default)]
pub struct Agent {
    /// Snapshot uid -> its checkpoint in flight.
    inflight: Mutex<HashMap<String, InFlight>>,
    /// Snapshots (uid) whose stuck deletion was already reported.
    stuck: Mutex<std::collections::HashSet<String>>,
}

impl Agent {
    fn inflight(&self) -> std::sync::MutexGuard<'_, HashMap<String, InFlight>> {
        self.inflight.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Reconciler for Agent {
    fn name(&self) -> &'static str {
        "pod-snapshot-agent"
    }

    fn primary(&self) -> &'static [&'static str] {
        &[
            "PodSnapshotStorageConfig",
            "PodSnapshotPolicy",
            "PodSnapshotManualTrigger",
            "PodSnapshot",
        ]
    }

    fn keys_for(&self, ev: &Event) -> Vec<ObjKey> {
        let deleted = ev.etype == EventType::Deleted;
        match ev.kind.kind {
            "PodSnapshotStorageConfig" | "PodSnapshotPolicy" | "PodSnapshotManualTrigger"
                if !deleted =>
            {
                vec![ObjKey::of(ev.kind, &ev.object)]
            }
            "PodSnapshot" => {
                // Every snapshot change also re-runs its policy's retention.
                let mut keys = Vec::new();
                if !deleted {
                    keys.push(ObjKey::of(ev.kind, &ev.object));
                }
                if let Some(p) = str_at(&ev.object, "/spec/policyName") {
                    keys.push(ObjKey {
                        kind: kind("PodSnapshotPolicy"),
                        namespace: ev.namespace.clone().unwrap_or_default(),
                        name: p.to_string(),
                    });
                }
                keys
            }
            _ => Vec::new(),
        }
    }

    async fn reconcile(&self, ctx: &Ctx, key: &ObjKey) -> Next {
        match key.kind.kind {
            "PodSnapshotStorageConfig" => {
                if let Some(cfg) = ctx.store.find(key.kind, None, &key.name)
                    && let Some(b) = str_at(&cfg, "/spec/snapshotStorageConfig/gcs/bucket")
                    && let Err(e) = ctx.bucket.ensure(b)
                {
                    tracing::warn!(error = %e, "cannot create the simulated bucket");
                }
                Next::Done
            }
            "PodSnapshotPolicy" => retention::reconcile_policy(ctx, key),
            "PodSnapshotManualTrigger" => self.reconcile_trigger(ctx, key),
            "PodSnapshot" => self.reconcile_snapshot(ctx, key),
            _ => Next::Done,
        }
    }
}

/// The grouping-label values a snapshot carries (`snapshotGroupingRules.groupByLabelValue`).
pub(crate) fn grouping_labels(policy: &Value) -> Vec<String> {
    policy
        .lookup("/spec/snapshotGroupingRules/groupByLabelValue/labels")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|l| l.as_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_trigger_annotation_is_an_indexed_field() {
        let escaped = TRIGGER_UID.replace('~', "~0").replace('/', "~1");
        assert_eq!(
            TRIGGER_UID_FIELD,
            format!("/metadata/annotations/{escaped}")
        );
        assert!(crate::sim::store::index::FIELDS.contains(&("PodSnapshot", TRIGGER_UID_FIELD)));
    }

    #[test]
    fn selectors_follow_kubernetes_semantics() {
        let labels = json!({"app": "nb", "tier": "gold"});
        assert!(selector_matches(&json!({}), Some(&labels)));
        assert!(selector_matches(
            &json!({"matchLabels": {"app": "nb"}}),
            Some(&labels)
        ));
        assert!(!selector_matches(
            &json!({"matchLabels": {"app": "x"}}),
            Some(&labels)
        ));
        let expr = |op: &str, values: &[&str]| json!({"matchExpressions": [{"key": "tier", "operator": op, "values": values}]});
        assert!(selector_matches(&expr("In", &["gold", "x"]), Some(&labels)));
        assert!(!selector_matches(&expr("NotIn", &["gold"]), Some(&labels)));
        assert!(selector_matches(&expr("Exists", &[]), Some(&labels)));
        assert!(!selector_matches(&expr("DoesNotExist", &[]), Some(&labels)));
        assert!(!selector_matches(&expr("Bogus", &[]), Some(&labels)));
    }
}

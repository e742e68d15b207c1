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
//! The restore matching lives in [`restore`], retention in [`retention`].

pub mod restore;
pub mod retention;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::scheduler::{gpu_request, set_condition};
use super::{Ctx, Next, ObjKey, Reconciler, events, kind};
use crate::platform::names::WORKSPACE_LABEL;
use crate::sim::bucket::SnapshotLocation;
use crate::sim::faults::{self, FAULT_ANNOTATION, Fault};
pub(crate) use crate::sim::json::{now_rfc3339_ms, str_at};
use crate::sim::seed::DRIVER_ANNOTATION;
use crate::sim::store::meta::now_rfc3339;
use crate::sim::store::{DeleteOptions, Event, EventType};
use crate::sim::truth::{Imposed, Transition};

pub use restore::{RestorePlan, distilled_spec_hash, restore_plan, restore_plan_and_faults};

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

pub(crate) fn annotation<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

pub(crate) fn label<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.pointer("/metadata/labels")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

pub(crate) fn name_of(v: &Value) -> &str {
    str_at(v, "/metadata/name").unwrap_or("")
}

pub(crate) fn uid_of(v: &Value) -> &str {
    str_at(v, "/metadata/uid").unwrap_or("")
}

pub(crate) fn is_deleting(v: &Value) -> bool {
    v.pointer("/metadata/deletionTimestamp").is_some()
}

/// A status condition of a custom resource or pod.
pub(crate) fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| str_at(c, "/type") == Some(type_))
}

pub(crate) fn condition_status<'a>(obj: &'a Value, type_: &str) -> Option<&'a str> {
    condition(obj, type_).and_then(|c| str_at(c, "/status"))
}

/// Sets (or replaces) a condition of a custom resource (no `lastProbeTime`, unlike pods);
/// the transition time moves only when the status changes.
pub(crate) fn set_cr_condition(
    obj: &mut Value,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
) {
    if !obj
        .pointer("/status/conditions")
        .is_some_and(Value::is_array)
    {
        obj["status"]["conditions"] = json!([]);
    }
    let now = now_rfc3339();
    let conds = obj["status"]["conditions"]
        .as_array_mut()
        .expect("conditions is an array");
    let mut cond = json!({"type": type_, "status": status, "reason": reason,
        "message": message, "lastTransitionTime": now});
    match conds.iter_mut().find(|c| str_at(c, "/type") == Some(type_)) {
        Some(existing) => {
            if str_at(existing, "/status") == Some(status) {
                cond["lastTransitionTime"] = existing["lastTransitionTime"].clone();
            }
            *existing = cond;
        }
        None => conds.push(cond),
    }
}

/// Now, as the simulator's annotations write times (RFC 3339 with milliseconds).
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
enum Outcome {
    Succeed,
    Fail,
    Hang,
}

/// A checkpoint being uploaded.
#[derive(Debug, Clone)]
struct InFlight {
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

/// One trigger, by name and uid (a later trigger of the same name is another object).
struct TriggerRef<'a> {
    ns: &'a str,
    name: &'a str,
    uid: &'a str,
}

/// Writes a trigger's `Triggered` condition (and, when complete, the snapshot it created).
fn set_triggered(
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
                .pointer("/metadata/generation")
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
            pod.pointer("/metadata/labels"),
        )
        .into_iter()
        .filter(|p| !is_deleting(p))
        .filter(|p| str_at(p, "/spec/triggerConfig/type") == Some("manual"))
        .find(|p| {
            selector_matches(
                p.pointer("/spec/selector").unwrap_or(&Value::Null),
                pod.pointer("/metadata/labels"),
            )
        })
}

/// The grouping-label values a snapshot carries (`snapshotGroupingRules.groupByLabelValue`).
pub(crate) fn grouping_labels(policy: &Value) -> Vec<String> {
    policy
        .pointer("/spec/snapshotGroupingRules/groupByLabelValue/labels")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|l| l.as_str().map(str::to_string))
        .collect()
}

fn driver_major(driver: &str) -> Option<u32> {
    driver.split('.').next()?.parse().ok()
}

impl Agent {
    fn reconcile_trigger(&self, ctx: &Ctx, key: &ObjKey) -> Next {
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
        self.inflight().insert(
            snap_uid,
            InFlight {
                started: Instant::now(),
                duration: ctx.profile.timing.checkpoint_duration(resident),
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

    fn reconcile_snapshot(&self, ctx: &Ctx, key: &ObjKey) -> Next {
        let Some(snap) = ctx.store.find(key.kind, key.ns(), &key.name) else {
            return Next::Done;
        };
        let uid = uid_of(&snap).to_string();
        if is_deleting(&snap) {
            self.finalize(ctx, key, &snap);
            return Next::Done;
        }
        let Some(job) = self.inflight().get(&uid).cloned() else {
            return Next::Done;
        };
        let elapsed = job.started.elapsed();
        if elapsed < job.duration {
            return Next::After(job.duration - elapsed);
        }
        let ns = key.namespace.as_str();
        if job.outcome != Outcome::Hang {
            ctx.truth.record_imposed(Imposed::Checkpoint, job.duration);
        }
        match job.outcome {
            Outcome::Hang => {
                // A hung checkpoint stays AwaitingCheckpoint, with an InProgress condition.
                let _ = ctx
                    .store
                    .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
                        let mut c = cur.clone();
                        set_cr_condition(
                            &mut c,
                            "InProgress",
                            "True",
                            "AwaitingCheckpoint",
                            "the checkpoint upload has not completed",
                        );
                        Ok(c)
                    });
                self.inflight().remove(&uid);
            }
            Outcome::Fail => {
                self.inflight().remove(&uid);
                self.fail_checkpoint(
                    ctx,
                    key,
                    &job,
                    "runsc checkpoint failed: the sandbox could not be checkpointed",
                );
            }
            Outcome::Succeed => {
                self.inflight().remove(&uid);
                if let Err(e) = ctx.bucket.write_pages(&job.location, job.resident_bytes) {
                    self.fail_checkpoint(
                        ctx,
                        key,
                        &job,
                        &format!("upload to {} failed: {e}", job.location.url()),
                    );
                    return Next::Done;
                }
                let _ = ctx
                    .store
                    .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
                        let mut c = cur.clone();
                        set_cr_condition(
                            &mut c,
                            "Checkpoint",
                            "True",
                            "Succeeded",
                            "checkpoint completed",
                        );
                        set_cr_condition(
                            &mut c,
                            "StorageReplicated",
                            "True",
                            "Succeeded",
                            &format!("snapshot stored at {}", job.location.url()),
                        );
                        set_cr_condition(
                            &mut c,
                            "Ready",
                            "True",
                            "AllSnapshotsAvailable",
                            "all snapshots are available",
                        );
                        Ok(c)
                    });
                let now = now_rfc3339_ms();
                let _ = ctx
                    .store
                    .modify(key.kind, key.ns(), &key.name, false, false, |cur| {
                        let mut c = cur.clone();
                        c["metadata"]["annotations"][LAST_ACCESS] = json!(now);
                        Ok(c)
                    });
                set_triggered(
                    ctx,
                    &job.trigger(ns),
                    "True",
                    "Complete",
                    "checkpoint completed successfully",
                    Some(&key.name),
                );
                ctx.truth.record_delayed(
                    Transition::CheckpointFinished,
                    Some(ns),
                    &job.pod_name,
                    Some(&job.node),
                    Some(key.name.clone()),
                    Some(job.duration),
                );
                if job.post_stop {
                    complete_pod(ctx, ns, &job.pod_name, &job.pod_uid);
                } else if let Err(e) = ctx.pods.restore(&uid, &job.pod_uid) {
                    tracing::warn!(error = %e, "cannot resume the checkpointed pod");
                }
            }
        }
        Next::Done
    }

    fn fail_checkpoint(&self, ctx: &Ctx, key: &ObjKey, job: &InFlight, message: &str) {
        let ns = key.namespace.as_str();
        let _ = ctx
            .store
            .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
                let mut c = cur.clone();
                set_cr_condition(&mut c, "Checkpoint", "False", "Failed", message);
                set_cr_condition(&mut c, "Ready", "False", "Failed", message);
                Ok(c)
            });
        set_triggered(ctx, &job.trigger(ns), "False", "Failed", message, None);
        ctx.truth.record(
            Transition::CheckpointFailed,
            Some(ns),
            &job.pod_name,
            Some(&job.node),
            Some(format!("{}: {message}", key.name)),
        );
        // A frozen pod thaws and keeps running; its image is no snapshot.
        if ctx.pods.has_image(&job.location.snapshot_uid) {
            let _ = ctx.pods.restore(&job.location.snapshot_uid, &job.pod_uid);
            ctx.pods.drop_image(&job.location.snapshot_uid);
        }
    }

    /// The finalizer: delete the bucket objects and the image, then let the object go. With
    /// `snapshot-stuck-deleting` (the service agent lacks storage permission) it never does.
    fn finalize(&self, ctx: &Ctx, key: &ObjKey, snap: &Value) {
        let has_finalizer = snap
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x.as_str() == Some(FINALIZER)));
        if !has_finalizer {
            return;
        }
        let uid = uid_of(snap).to_string();
        let ns = key.namespace.as_str();
        if fault_on(ctx, Fault::SnapshotStuckDeleting, &[snap]) {
            let first = self
                .stuck
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(uid.clone());
            if first {
                ctx.truth.record_fault(Fault::SnapshotStuckDeleting);
                let url = storage_of(ctx, ns, str_at(snap, "/spec/policyName").unwrap_or(""))
                    .map(|(bucket, path)| {
                        SnapshotLocation {
                            bucket,
                            path,
                            snapshot_uid: uid.clone(),
                        }
                        .url()
                    })
                    .unwrap_or_default();
                events::record(
                    ctx,
                    snap,
                    "Warning",
                    "SnapshotDeletionFailed",
                    &format!(
                        "failed to delete snapshot objects {url}: googleapi: Error 403: service-000000000000@container-engine-robot.iam.gserviceaccount.com does not have storage.objects.delete access"
                    ),
                    "gke-pod-snapshot-controller",
                );
            }
            return;
        }
        match storage_of(ctx, ns, str_at(snap, "/spec/policyName").unwrap_or("")) {
            Ok((bucket, path)) => {
                let loc = SnapshotLocation {
                    bucket,
                    path,
                    snapshot_uid: uid.clone(),
                };
                if let Err(e) = ctx.bucket.delete_snapshot(&loc) {
                    tracing::warn!(error = %e, "cannot delete the snapshot's objects; retrying");
                    return;
                }
            }
            // Deleting the policy first orphans the files (gke-pod-snapshots.md §3).
            Err(why) => {
                tracing::warn!(snapshot = %key.name, %why, "bucket unknown: the snapshot's objects are orphaned")
            }
        }
        ctx.pods.drop_image(&uid);
        self.inflight().remove(&uid);
        let removed = ctx
            .store
            .modify(key.kind, key.ns(), &key.name, false, false, |cur| {
                let mut c = cur.clone();
                if let Some(f) = c
                    .pointer_mut("/metadata/finalizers")
                    .and_then(Value::as_array_mut)
                {
                    f.retain(|x| x.as_str() != Some(FINALIZER));
                }
                Ok(c)
            });
        if removed.is_ok() {
            ctx.truth.record(
                Transition::SnapshotDeleted,
                Some(ns),
                &key.name,
                None,
                Some(uid),
            );
        }
    }
}

/// `postCheckpoint: stop`: the checkpointed pod ends `Completed` (phase `Succeeded`).
fn complete_pod(ctx: &Ctx, ns: &str, name: &str, uid: &str) {
    let now = now_rfc3339();
    let _ = ctx
        .store
        .modify(kind("Pod"), Some(ns), name, true, false, |cur| {
            let mut c = cur.clone();
            if uid_of(cur) != uid || is_deleting(cur) {
                return Ok(c);
            }
            c["status"]["phase"] = json!("Succeeded");
            if let Some(cs) = c
                .pointer_mut("/status/containerStatuses")
                .and_then(Value::as_array_mut)
            {
                for s in cs {
                    let started = s.pointer("/state/running/startedAt").cloned();
                    s["ready"] = json!(false);
                    s["started"] = json!(false);
                    s["state"] = json!({"terminated": {"exitCode": 0, "reason": "Completed",
                    "startedAt": started, "finishedAt": now}});
                }
            }
            set_condition(
                &mut c,
                "ContainersReady",
                "False",
                Some("PodCompleted"),
                None,
                &now,
            );
            set_condition(&mut c, "Ready", "False", Some("PodCompleted"), None, &now);
            Ok(c)
        });
}

/// Deletes a snapshot (it then goes through the finalizer).
pub(crate) fn delete_snapshot(ctx: &Ctx, ns: &str, name: &str) {
    let _ = ctx.store.delete(
        kind("PodSnapshot"),
        Some(ns),
        name,
        &DeleteOptions::default(),
    );
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn cr_conditions_keep_their_transition_time_while_unchanged() {
        let mut o = json!({});
        set_cr_condition(&mut o, "Ready", "False", "AwaitingCheckpoint", "m");
        let t0 = o["status"]["conditions"][0]["lastTransitionTime"].clone();
        o["status"]["conditions"][0]["lastTransitionTime"] = json!("2000-01-01T00:00:00Z");
        set_cr_condition(&mut o, "Ready", "False", "AwaitingCheckpoint", "m2");
        assert_eq!(
            o["status"]["conditions"][0]["lastTransitionTime"],
            "2000-01-01T00:00:00Z"
        );
        set_cr_condition(&mut o, "Ready", "True", "AllSnapshotsAvailable", "");
        assert_ne!(
            o["status"]["conditions"][0]["lastTransitionTime"],
            "2000-01-01T00:00:00Z"
        );
        assert!(t0.is_string());
        assert_eq!(condition_status(&o, "Ready"), Some("True"));
    }

    #[test]
    fn driver_versions_parse_their_major() {
        assert_eq!(driver_major("570.172.08"), Some(570));
        assert_eq!(driver_major(""), None);
    }
}

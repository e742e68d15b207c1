//! The GKE Workspaces snapshot add-on (`gke-workspace-snapshot-addon`, kubeflow-workspaces.md
//! §10, gke-pod-snapshots.md §5): pause and resume of snapshot-enabled Workspaces through
//! Pod Snapshots, with no change to the workspace controller.
//!
//! A Workspace is enabled by `podsnapshot.gke.kubeflow.org/enabled: "true"` on itself or on
//! its WorkspaceKind (the Workspace's value wins); pods asking for TPUs never are.
//!
//! - Pause: the pause is held (`paused` back to false, `checkpoint-state: Checkpointing`,
//!   see [`webhook`]), the pod's readiness gate `podsnapshot.gke.kubeflow.org/active` turns
//!   False; after `addon_settle_ms` the add-on creates the policy `ws-<ws>-policy` and the
//!   trigger `ws-<ws>-trigger`; once the PodSnapshot is Ready it sets `paused: true`,
//!   `checkpoint-state: Ready` and `last-checkpoint-name`. As upstream's
//!   (gke-labs/workspaces `providers/gke/internal/snapshot/reconcile.go`,
//!   `reconcileCheckpointing`), the pause has no failure path: a failed checkpoint (the
//!   trigger's `Triggered=False/Failed`, the PodSnapshot's `Checkpoint=False`) and a hung one
//!   both leave the Workspace `Checkpointing` with its pod running and its GPU held, until
//!   it is deleted. Only a pod that is gone lets the pause through without a snapshot.
//! - Resume: `checkpoint-state: Restoring`; new pods get `ps-name`; once the pod is Ready
//!   the add-on deletes the Workspace's PodSnapshots and trigger and clears its annotations.
//! - Delete: once the Workspace is gone, its PodSnapshots are deleted, then (when they are
//!   gone) its policy and trigger ([`teardown`]). Simulator only: the Workspace annotation
//!   [`SIM_LAST_ACCESS_TIMEOUT`] shortens the policy's `lastAccessTimeout`.
//!
//! Faults applied here: `lose-home-files` (the home PVC's files are deleted while the
//! Workspace is paused, for any Workspace) and `duplicate-restore-attempts` (on resume the
//! add-on starts a second pod, `<pod>-duplicate`, with the same spec and pin, so two
//! restores of the one snapshot compete; it is deleted with the snapshots).

pub mod webhook;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::agent::{
    PS_NAME, TRIGGERED_BY, annotation, condition_status, fault_on, is_deleting, label, name_of,
    now_ms, str_at, uid_of,
};
use super::kubelet::WORKSPACE_LABEL;
use super::scheduler::set_condition;
use super::{Ctx, Next, ObjKey, Reconciler, kind};
use crate::sim::faults::Fault;
use crate::sim::seed::{SNAPSHOT_ENABLED, STORAGE_CONFIG};
use crate::sim::store::meta::now_rfc3339;
use crate::sim::store::{DeleteOptions, Event};
use crate::sim::truth::Imposed;
use webhook::{
    ACTIVE_GATE, CHECKPOINT_STARTED_AT, CHECKPOINT_STATE, LAST_CHECKPOINT_NAME,
    STORAGE_CONFIG_ANNOTATION, clear_state, hold_pause, inject_pod, requests_tpu,
};

/// The component name on the add-on's events.
pub const COMPONENT: &str = "gke-workspace-snapshot-addon";
/// The annotation on the second pod of `duplicate-restore-attempts`, naming the first.
pub const DUPLICATE_OF: &str = "sim.wsgate.dev/duplicate-of";
/// The retention the add-on gives every policy.
pub const LAST_ACCESS_TIMEOUT: &str = "7d";
/// Simulator only: a Workspace annotation that replaces [`LAST_ACCESS_TIMEOUT`] in the policy
/// the add-on creates for it (e.g. "3s"), so a test can watch retention expire a snapshot.
/// The real add-on has no such setting.
pub const SIM_LAST_ACCESS_TIMEOUT: &str = "sim.wsgate.dev/last-access-timeout";
/// After a Workspace is deleted: how often its terminating snapshots are looked at, and how
/// long they may hold the policy (which their finalizer needs to find the bucket) before it
/// is retired anyway (a wedged finalizer, e.g. `snapshot-stuck-deleting`).
const SNAPSHOT_DRAIN_INTERVAL: Duration = Duration::from_secs(1);
const SNAPSHOT_DRAIN_TIMEOUT: Duration = Duration::from_secs(600);

/// `ws-<ws>-policy`.
pub fn policy_name(ws: &str) -> String {
    format!("ws-{ws}-policy")
}

/// `ws-<ws>-trigger`.
pub fn trigger_name(ws: &str) -> String {
    format!("ws-{ws}-trigger")
}

/// The add-on controller.
#[derive(Default)]
pub struct SnapshotAddon {
    /// `lose-home-files`: Workspaces (uid) seen paused, and whether their files went yet.
    pauses: Mutex<HashMap<String, bool>>,
    /// Workspace (uid) -> the checkpoint (its started-at) and the trigger (uid) created for it.
    triggers: Mutex<HashMap<String, (String, String)>>,
    /// Pods (uid) that `duplicate-restore-attempts` already doubled.
    doubled: Mutex<HashSet<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn ws_key(ns: &str, name: &str) -> ObjKey {
    ObjKey {
        kind: kind("Workspace"),
        namespace: ns.to_string(),
        name: name.to_string(),
    }
}

/// The value of an add-on annotation: on the Workspace, else on its WorkspaceKind.
fn setting(ctx: &Ctx, ws: &Value, key: &str) -> Option<String> {
    if let Some(v) = annotation(ws, key) {
        return Some(v.to_string());
    }
    let kind_name = str_at(ws, "/spec/kind")?;
    let wsk = ctx.store.find(kind("WorkspaceKind"), None, kind_name)?;
    annotation(&wsk, key).map(str::to_string)
}

/// Whether pause/resume goes through Pod Snapshots for this Workspace.
pub fn enabled(ctx: &Ctx, ws: &Value) -> bool {
    setting(ctx, ws, SNAPSHOT_ENABLED).is_some_and(|v| v == "true")
}

fn is_ready(pod: &Value) -> bool {
    condition_status(pod, "Ready") == Some("True")
}

fn phase(pod: &Value) -> &str {
    str_at(pod, "/status/phase").unwrap_or("Pending")
}

fn ms_since(rfc3339: Option<&str>) -> Option<Duration> {
    let t = DateTime::parse_from_rfc3339(rfc3339?).ok()?;
    (Utc::now() - t.with_timezone(&Utc)).to_std().ok()
}

impl Reconciler for SnapshotAddon {
    fn name(&self) -> &'static str {
        "snapshot-addon"
    }

    fn primary(&self) -> &'static [&'static str] {
        &["Workspace"]
    }

    fn keys_for(&self, ev: &Event) -> Vec<ObjKey> {
        let ns = ev.namespace.clone().unwrap_or_default();
        let o = &ev.object;
        let ws = match ev.kind.kind {
            "Workspace" => Some(name_of(o).to_string()),
            "Pod" => label(o, WORKSPACE_LABEL).map(str::to_string),
            "PodSnapshotManualTrigger" => o
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .and_then(|refs| {
                    refs.iter()
                        .find(|r| str_at(r, "/kind") == Some("Workspace"))
                })
                .and_then(|r| str_at(r, "/name"))
                .map(str::to_string),
            "PodSnapshot" => label(o, TRIGGERED_BY)
                .and_then(|t| t.strip_prefix("ws-"))
                .and_then(|t| t.strip_suffix("-trigger"))
                .map(str::to_string),
            _ => None,
        };
        ws.map(|w| ws_key(&ns, &w)).into_iter().collect()
    }

    async fn reconcile(&self, ctx: &Ctx, key: &ObjKey) -> Next {
        let Some(ws) = ctx.store.find(key.kind, key.ns(), &key.name) else {
            return teardown(ctx, key);
        };
        if is_deleting(&ws) {
            return Next::Done;
        }
        let pods = workspace_pods(ctx, &key.namespace, &key.name);
        self.lose_home_files(ctx, &ws, &pods, false);
        if !enabled(ctx, &ws) {
            return Next::Done;
        }
        let state = annotation(&ws, CHECKPOINT_STATE).map(str::to_string);
        for p in &pods {
            prepare_pod(ctx, &ws, p, state.as_deref());
        }
        let primary = pods
            .iter()
            .find(|p| annotation(p, DUPLICATE_OF).is_none() && !is_deleting(p))
            .cloned();
        let running = primary
            .as_ref()
            .filter(|p| phase(p) == "Running" && !requests_tpu(p))
            .cloned();
        let paused = ws.pointer("/spec/paused") == Some(&json!(true));
        let checkpointing = state.as_deref() == Some("Checkpointing");
        if paused
            && !matches!(state.as_deref(), Some("Ready" | "Failed"))
            && (running.is_some() || checkpointing)
        {
            return self.hold(ctx, key, running.as_deref());
        }
        match state.as_deref() {
            Some("Checkpointing") => self.checkpointing(ctx, key, &ws, running.as_deref()),
            Some("Ready") if !paused => {
                update_ws(ctx, key, |w| {
                    w["metadata"]["annotations"][CHECKPOINT_STATE] = json!("Restoring");
                });
                Next::Done
            }
            Some("Restoring") if !paused => self.restoring(ctx, key, &ws, &pods),
            Some("Failed") if !paused => {
                update_ws(ctx, key, clear_state);
                Next::Done
            }
            _ => Next::Done,
        }
    }
}

/// What a deleted Workspace left (the add-on's teardown): its PodSnapshots are deleted
/// first, and its policy and trigger only once they are gone, because the snapshot finalizer
/// follows the policy to the bucket (deleting the policy first orphans the files,
/// gke-pod-snapshots.md §3). Snapshots still terminating after [`SNAPSHOT_DRAIN_TIMEOUT`]
/// stop pinning the policy. With no policy left there is nothing to do.
fn teardown(ctx: &Ctx, key: &ObjKey) -> Next {
    let ns = key.namespace.as_str();
    let policy = policy_name(&key.name);
    if ctx
        .store
        .find(kind("PodSnapshotPolicy"), key.ns(), &policy)
        .is_none()
    {
        return Next::Done;
    }
    let trigger = trigger_name(&key.name);
    let snapshots: Vec<_> = ctx
        .store
        .all(kind("PodSnapshot"), key.ns())
        .into_iter()
        .filter(|s| label(s, TRIGGERED_BY) == Some(trigger.as_str()))
        .collect();
    for s in snapshots.iter().filter(|s| !is_deleting(s)) {
        super::agent::delete_snapshot(ctx, ns, name_of(s));
    }
    let waited = snapshots
        .iter()
        .filter_map(|s| ms_since(str_at(s, "/metadata/deletionTimestamp")))
        .max();
    if !snapshots.is_empty() && waited.is_none_or(|w| w < SNAPSHOT_DRAIN_TIMEOUT) {
        return Next::After(SNAPSHOT_DRAIN_INTERVAL);
    }
    for (k, name) in [
        ("PodSnapshotPolicy", policy.as_str()),
        ("PodSnapshotManualTrigger", trigger.as_str()),
    ] {
        let _ = ctx
            .store
            .delete(kind(k), key.ns(), name, &DeleteOptions::default());
    }
    Next::Done
}

/// Whether the trigger's checkpoint failed: `Triggered=False`, or its PodSnapshot's
/// `Checkpoint=False`.
fn checkpoint_failed(ctx: &Ctx, key: &ObjKey, trigger: &Value) -> bool {
    if condition_status(trigger, "Triggered") == Some("False") {
        return true;
    }
    str_at(trigger, "/status/snapshotCreated/name")
        .and_then(|snap| ctx.store.find(kind("PodSnapshot"), key.ns(), snap))
        .is_some_and(|s| condition_status(&s, "Checkpoint") == Some("False"))
}

/// Every pod of a Workspace (its STS pod and any duplicate), deleting ones included.
fn workspace_pods(ctx: &Ctx, ns: &str, ws: &str) -> Vec<Arc<Value>> {
    ctx.store
        .all(kind("Pod"), Some(ns))
        .into_iter()
        .filter(|p| label(p, WORKSPACE_LABEL) == Some(ws))
        .collect()
}

/// A main-resource write of the Workspace.
fn update_ws(ctx: &Ctx, key: &ObjKey, change: impl FnOnce(&mut Value)) {
    let _ = ctx
        .store
        .modify(key.kind, key.ns(), &key.name, false, false, |cur| {
            let mut c = cur.clone();
            change(&mut c);
            Ok(c)
        });
}

/// Sets the pod's `podsnapshot.gke.kubeflow.org/active` condition.
fn set_active(ctx: &Ctx, pod: &Value, active: bool) {
    let status = if active { "True" } else { "False" };
    if condition_status(pod, ACTIVE_GATE) == Some(status) {
        return;
    }
    let now = now_rfc3339();
    let uid = uid_of(pod).to_string();
    let _ = ctx.store.modify(
        kind("Pod"),
        str_at(pod, "/metadata/namespace"),
        name_of(pod),
        true,
        false,
        |cur| {
            let mut c = cur.clone();
            if uid_of(cur) == uid {
                let (reason, message) = if active {
                    (None, None)
                } else {
                    (
                        Some("CheckpointInProgress"),
                        Some("the workspace is being checkpointed"),
                    )
                };
                set_condition(&mut c, ACTIVE_GATE, status, reason, message, &now);
            }
            Ok(c)
        },
    );
}

/// The pod webhook, applied right after the pod appears: the gate's condition first (so
/// the gate never waits on a missing condition), then runtime class, gate and pin.
fn prepare_pod(ctx: &Ctx, ws: &Value, pod: &Value, state: Option<&str>) {
    if is_deleting(pod) || matches!(phase(pod), "Succeeded" | "Failed") || requests_tpu(pod) {
        return;
    }
    if condition_status(pod, ACTIVE_GATE).is_none() {
        set_active(ctx, pod, state != Some("Checkpointing"));
    }
    let pin = match state {
        Some("Ready" | "Restoring") if phase(pod) == "Pending" => {
            annotation(ws, LAST_CHECKPOINT_NAME).map(str::to_string)
        }
        _ => None,
    };
    let mut probe = pod.clone();
    if !inject_pod(&mut probe, pin.as_deref()) {
        return;
    }
    let uid = uid_of(pod).to_string();
    let _ = ctx.store.modify(
        kind("Pod"),
        str_at(pod, "/metadata/namespace"),
        name_of(pod),
        false,
        false,
        |cur| {
            let mut c = cur.clone();
            if uid_of(cur) == uid {
                inject_pod(&mut c, pin.as_deref());
            }
            Ok(c)
        },
    );
}

impl SnapshotAddon {
    /// The pause webhook's effect: hold the pause and drain the pod.
    fn hold(&self, ctx: &Ctx, key: &ObjKey, pod: Option<&Value>) -> Next {
        let now = now_ms();
        update_ws(ctx, key, |w| {
            hold_pause(w, &now);
        });
        if let Some(p) = pod {
            set_active(ctx, p, false);
        }
        Next::After(Duration::from_millis(ctx.profile.timing.addon_settle_ms))
    }

    fn checkpointing(&self, ctx: &Ctx, key: &ObjKey, ws: &Value, pod: Option<&Value>) -> Next {
        let ns = key.namespace.as_str();
        let trigger = ctx.store.find(
            kind("PodSnapshotManualTrigger"),
            key.ns(),
            &trigger_name(&key.name),
        );
        // A trigger left from an earlier pause (a failed one) is never re-run.
        let started = annotation(ws, CHECKPOINT_STARTED_AT)
            .unwrap_or("")
            .to_string();
        let trigger = trigger.filter(|t| {
            lock(&self.triggers)
                .get(uid_of(ws))
                .is_some_and(|(s, u)| *s == started && u == uid_of(t))
        });
        let Some(pod) = pod else {
            // Nothing left to checkpoint: let the pause through (upstream's only way out of
            // Checkpointing without a Ready snapshot). A succeeded checkpoint stops the pod
            // itself (`postCheckpoint: stop`), so a trigger still going is followed.
            return match trigger {
                Some(t) if !checkpoint_failed(ctx, key, &t) => {
                    self.follow_trigger(ctx, key, Some(&t))
                }
                _ => self.no_pod(ctx, key),
            };
        };
        set_active(ctx, pod, false);
        let settle = Duration::from_millis(ctx.profile.timing.addon_settle_ms);
        let waited = ms_since(annotation(ws, CHECKPOINT_STARTED_AT)).unwrap_or(settle);
        if waited < settle {
            return Next::After(settle - waited);
        }
        self.ensure_policy(ctx, ws, &key.name, ns);
        let trigger = match trigger {
            Some(t) if str_at(&t, "/spec/targetPod") == Some(name_of(pod)) => t,
            _ => {
                let _ = ctx.store.delete(
                    kind("PodSnapshotManualTrigger"),
                    key.ns(),
                    &trigger_name(&key.name),
                    &DeleteOptions::default(),
                );
                let t = json!({
                    "metadata": {"name": trigger_name(&key.name), "ownerReferences": [{
                        "apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace",
                        "name": key.name, "uid": uid_of(ws),
                        "controller": true, "blockOwnerDeletion": true}]},
                    "spec": {"targetPod": name_of(pod)},
                });
                match ctx
                    .store
                    .create(kind("PodSnapshotManualTrigger"), key.ns(), t, false)
                {
                    Ok(t) => {
                        ctx.truth.record_imposed(Imposed::AddonSettle, settle);
                        lock(&self.triggers)
                            .insert(uid_of(ws).to_string(), (started, uid_of(&t).to_string()));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e.message, "cannot create the trigger");
                        return Next::After(Duration::from_millis(500));
                    }
                }
                return Next::Done;
            }
        };
        self.follow_trigger(ctx, key, Some(&trigger))
    }

    /// Follows the trigger to its PodSnapshot: Ready completes the pause. A failed
    /// checkpoint changes nothing: the Workspace stays `Checkpointing` (upstream has no
    /// failure path), with its pod running and its GPU held.
    fn follow_trigger(&self, ctx: &Ctx, key: &ObjKey, trigger: Option<&Value>) -> Next {
        let Some(trigger) = trigger else {
            return Next::Done;
        };
        if condition_status(trigger, "Triggered") != Some("True") {
            return Next::Done;
        }
        let Some(snap) = str_at(trigger, "/status/snapshotCreated/name") else {
            return Next::Done;
        };
        let Some(s) = ctx.store.find(kind("PodSnapshot"), key.ns(), snap) else {
            return Next::Done;
        };
        if condition_status(&s, "Ready") != Some("True") {
            return Next::Done;
        }
        let snap = snap.to_string();
        let mut paused = None;
        update_ws(ctx, key, |w| {
            w["spec"]["paused"] = json!(true);
            w["metadata"]["annotations"][CHECKPOINT_STATE] = json!("Ready");
            w["metadata"]["annotations"][LAST_CHECKPOINT_NAME] = json!(snap);
            paused = Some(w.clone());
        });
        if let Some(p) = paused {
            self.lose_home_files(ctx, &p, &[], true);
        }
        Next::Done
    }

    /// The pod is gone: the pause goes through without a snapshot, as upstream's (the resume
    /// will cold-start), marked `checkpoint-state: Failed` until the resume (upstream writes
    /// `Ready` with no `last-checkpoint-name`; the mark is the simulator's).
    fn no_pod(&self, ctx: &Ctx, key: &ObjKey) -> Next {
        update_ws(ctx, key, |w| {
            w["spec"]["paused"] = json!(true);
            clear_state(w);
            w["metadata"]["annotations"][CHECKPOINT_STATE] = json!("Failed");
        });
        Next::Done
    }

    fn ensure_policy(&self, ctx: &Ctx, ws: &Value, name: &str, ns: &str) {
        let policy = policy_name(name);
        if ctx
            .store
            .find(kind("PodSnapshotPolicy"), Some(ns), &policy)
            .is_some()
        {
            return;
        }
        let storage = setting(ctx, ws, STORAGE_CONFIG_ANNOTATION).unwrap_or(STORAGE_CONFIG.into());
        let retention = annotation(ws, SIM_LAST_ACCESS_TIMEOUT)
            .filter(|t| super::agent::retention::parse_duration(t).is_some())
            .unwrap_or(LAST_ACCESS_TIMEOUT);
        let p = json!({
            "metadata": {"name": policy},
            "spec": {
                "selector": {"matchLabels": {WORKSPACE_LABEL: name}},
                "storageConfigName": storage,
                "triggerConfig": {"type": "manual", "postCheckpoint": "stop"},
                "retentionConfig": {"lastAccessTimeout": retention},
            },
        });
        if let Err(e) = ctx
            .store
            .create(kind("PodSnapshotPolicy"), Some(ns), p, false)
        {
            tracing::warn!(error = %e.message, "cannot create the snapshot policy");
        }
    }

    fn restoring(&self, ctx: &Ctx, key: &ObjKey, ws: &Value, pods: &[Arc<Value>]) -> Next {
        let ns = key.namespace.as_str();
        let primary = pods
            .iter()
            .find(|p| annotation(p, DUPLICATE_OF).is_none() && !is_deleting(p));
        let Some(primary) = primary else {
            return Next::Done;
        };
        if fault_on(ctx, Fault::DuplicateRestoreAttempts, &[ws, primary]) {
            self.double(ctx, ns, ws, primary);
        }
        let duplicates: Vec<_> = pods
            .iter()
            .filter(|p| annotation(p, DUPLICATE_OF).is_some())
            .collect();
        // Both attempts run their course (started, or stuck unschedulable) before cleanup.
        let unsettled = duplicates.iter().any(|d| {
            !is_deleting(d)
                && phase(d) == "Pending"
                && condition_status(d, "PodScheduled") != Some("False")
        });
        if !is_ready(primary) || unsettled {
            return Next::Done;
        }
        for s in ctx.store.all(kind("PodSnapshot"), key.ns()) {
            if label(&s, TRIGGERED_BY) == Some(trigger_name(&key.name).as_str()) && !is_deleting(&s)
            {
                super::agent::delete_snapshot(ctx, ns, name_of(&s));
            }
        }
        let _ = ctx.store.delete(
            kind("PodSnapshotManualTrigger"),
            key.ns(),
            &trigger_name(&key.name),
            &DeleteOptions::default(),
        );
        for d in duplicates {
            let _ = ctx
                .store
                .delete(kind("Pod"), key.ns(), name_of(d), &DeleteOptions::default());
        }
        update_ws(ctx, key, clear_state);
        Next::Done
    }

    /// `duplicate-restore-attempts`: a second pod with the first one's spec and pin.
    fn double(&self, ctx: &Ctx, ns: &str, ws: &Value, primary: &Value) {
        if !lock(&self.doubled).insert(uid_of(primary).to_string()) {
            return;
        }
        let mut labels = primary
            .pointer("/metadata/labels")
            .cloned()
            .unwrap_or(json!({}));
        if let Some(l) = labels.as_object_mut() {
            l.remove("statefulset.kubernetes.io/pod-name");
        }
        let mut annotations = primary
            .pointer("/metadata/annotations")
            .cloned()
            .unwrap_or(json!({}));
        annotations[DUPLICATE_OF] = json!(name_of(primary));
        if annotation(primary, PS_NAME).is_none()
            && let Some(ps) = annotation(ws, LAST_CHECKPOINT_NAME)
        {
            annotations[PS_NAME] = json!(ps);
        }
        let mut spec = primary.get("spec").cloned().unwrap_or(json!({}));
        if let Some(s) = spec.as_object_mut() {
            s.remove("nodeName");
        }
        let pod = json!({
            "metadata": {
                "name": format!("{}-duplicate", name_of(primary)),
                "labels": labels, "annotations": annotations,
                "ownerReferences": [{"apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace",
                    "name": name_of(ws), "uid": uid_of(ws)}],
            },
            "spec": spec,
        });
        if let Err(e) = ctx.store.create(kind("Pod"), Some(ns), pod, false) {
            tracing::warn!(error = %e.message, "cannot create the duplicate restore pod");
        }
    }

    /// `lose-home-files`: the home files go while the Workspace is paused: once it has no
    /// pod left (or, with `now`, at once: the add-on's own pause after the checkpoint), and
    /// at the latest when the resume is seen, before a new pod can read them.
    fn lose_home_files(&self, ctx: &Ctx, ws: &Value, pods: &[Arc<Value>], now: bool) {
        let uid = uid_of(ws).to_string();
        if !fault_on(ctx, Fault::LoseHomeFiles, &[ws]) {
            lock(&self.pauses).remove(&uid);
            return;
        }
        {
            let mut pauses = lock(&self.pauses);
            if ws.pointer("/spec/paused") == Some(&json!(true)) {
                let wiped = pauses.entry(uid).or_insert(false);
                if *wiped || !(now || pods.is_empty()) {
                    return;
                }
                *wiped = true;
            } else if pauses.remove(&uid) != Some(false) {
                return;
            }
        }
        wipe_home(ctx, ws);
    }
}

/// Deletes everything in a Workspace's home volume directory (the directory stays).
fn wipe_home(ctx: &Ctx, ws: &Value) {
    let Some(home) = str_at(ws, "/spec/podTemplate/volumes/home") else {
        return;
    };
    let ns = str_at(ws, "/metadata/namespace").unwrap_or("");
    let dir = ctx.pods.volumes_root.join(ns).join(home);
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for e in entries.flatten() {
            let p = e.path();
            let gone = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            if let Err(err) = gone {
                tracing::warn!(path = %p.display(), error = %err, "lose-home-files could not delete");
            }
        }
    }
    tracing::info!(workspace = %name_of(ws), dir = %dir.display(), "fault lose-home-files: home files deleted");
}

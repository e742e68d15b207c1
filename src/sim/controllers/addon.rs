//! The GKE Workspaces snapshot add-on (`gke-workspace-snapshot-addon`, kubeflow-workspaces.md
//! §10, gke-pod-snapshots.md §5): pause and resume of snapshot-enabled Workspaces through
//! Pod Snapshots, with no change to the workspace controller. It follows gke-labs/workspaces
//! `providers/gke/internal/snapshot/reconcile.go` (`reconcileWorkspace` and what it calls);
//! its webhooks are [`webhook`].
//!
//! A Workspace is enabled by `podsnapshot.gke.kubeflow.org/enabled: "true"` on itself or on
//! its WorkspaceKind (the Workspace's value wins); pods asking for TPUs never are. The
//! reconciler manages only the profile's `[addon] tenant_namespaces` (empty: every
//! namespace, upstream `managedNamespace`); the webhooks serve every namespace, so outside
//! the list a pause is held `Checkpointing` forever and pods wait on their readiness gate.
//!
//! Every pass over an enabled Workspace ensures the ConfigMap `jupyter-ipc-config` in its
//! namespace (`ensureIPCConfigMap`: created if missing, its data put back if it differs)
//! and the policy `ws-<ws>-policy` (`ensureStorageConfigAndPolicy`), then:
//!
//! - `Checkpointing` ([`SnapshotAddon::checkpointing`], `reconcileCheckpointing`): with no
//!   pod, or one being deleted, the pause completes with no snapshot (`paused: true`,
//!   `checkpoint-state: Ready`, no `last-checkpoint-name`: the resume cold-starts). Else the
//!   pod's gate turns False (and `Ready` with it); once `addon_settle_ms` has passed since
//!   `checkpoint-started-at` the trigger `ws-<ws>-trigger` is created, stamped with it. A
//!   trigger with another stamp is left from an earlier pause: it is deleted, and the next
//!   pass makes a new one. Once the trigger's PodSnapshot is Ready the pause completes
//!   (`paused: true`, `checkpoint-state: Ready`, `last-checkpoint-name`). There is no
//!   failure path: a failed or hung checkpoint leaves the Workspace `Checkpointing` with its
//!   pod running and its GPU held, until it is deleted.
//! - Paused: nothing.
//! - Otherwise ([`SnapshotAddon::active`], `reconcileActive`): once the pod is Running with
//!   every container ready its gate turns True; after a resume (either annotation set) and
//!   once the pod is Ready, the Workspace's PodSnapshots and trigger are deleted and its
//!   annotations removed.
//! - Deleted ([`teardown`], `reconcileDeletedWorkspace`): its PodSnapshots are deleted,
//!   and its policy and trigger only once they are gone or have been terminating for
//!   `addon_drain_timeout_ms`. Simulator only: the Workspace annotation
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

use super::agent::{PS_NAME, TRIGGERED_BY, fault_on};
use super::kubelet::WORKSPACE_LABEL;
use super::scheduler::set_condition;
use super::{Ctx, Next, ObjKey, Reconciler, kind, lock};
use crate::sim::faults::Fault;
use crate::sim::json::{
    Lookup as _, annotation, condition_status, is_deleting, label, name_of, str_at, uid_of,
};
use crate::sim::seed::{SNAPSHOT_ENABLED, STORAGE_CONFIG};
use crate::sim::store::meta::now_rfc3339;
use crate::sim::store::{DeleteOptions, Event};
use crate::sim::truth::Imposed;
use webhook::{
    ACTIVE_GATE, ACTIVE_MESSAGE, ACTIVE_REASON, CHECKPOINT_STARTED_AT, CHECKPOINT_STATE,
    CHECKPOINTING_MESSAGE, CHECKPOINTING_REASON, IPC_CONFIG_KEY, IPC_CONFIG_MAP, IPC_SERVER_CONFIG,
    LAST_CHECKPOINT_NAME, STORAGE_CONFIG_ANNOTATION, requests_tpu, workspace_pod,
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

/// `ws-<ws>-policy`.
pub fn policy_name(ws: &str) -> String {
    format!("ws-{ws}-policy")
}

/// `ws-<ws>-trigger`.
pub fn trigger_name(ws: &str) -> String {
    format!("ws-{ws}-trigger")
}

/// The Workspace a `ws-<ws><suffix>` name was derived from.
fn workspace_from(derived: &str, suffix: &str) -> Option<String> {
    derived
        .strip_prefix("ws-")?
        .strip_suffix(suffix)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

/// The add-on controller. It keeps no state of its own about pauses: the trigger's stamp
/// is what ties it to one. The maps are the faults' bookkeeping.
#[derive(Default)]
pub struct SnapshotAddon {
    /// `lose-home-files`: Workspaces (uid) seen paused, and whether their files went yet.
    pauses: Mutex<HashMap<String, bool>>,
    /// Pods (uid) that `duplicate-restore-attempts` already doubled.
    doubled: Mutex<HashSet<String>>,
}

fn ws_key(ns: &str, name: &str) -> ObjKey {
    ObjKey {
        kind: kind("Workspace"),
        namespace: ns.to_string(),
        name: name.to_string(),
    }
}

/// Whether pause/resume goes through Pod Snapshots for this Workspace.
pub fn enabled(ctx: &Ctx, ws: &Value) -> bool {
    enabled_by(ws, |name| ctx.store.find(kind("WorkspaceKind"), None, name))
}

/// Upstream's `snapshotEnabled` (`cache.go`) on the enabled side: see [`snapshot_setting`].
pub fn enabled_by(ws: &Value, kind_named: impl FnOnce(&str) -> Option<Arc<Value>>) -> bool {
    snapshot_setting(ws, kind_named).0
}

/// Upstream's `snapshotEnabled` (`cache.go`), with `kind_named` reading a WorkspaceKind:
/// whether the Workspace is enabled, and the PodSnapshotStorageConfig it uses. The Workspace's
/// own annotation decides when it says `true` or `false` (any case); any other value, or
/// none, leaves it to the kind's annotation (`true`, any case), except that a Workspace whose
/// pod option names a TPU (`tpu` in its id, any case) or that names no kind is not enabled.
/// The storage config is the Workspace's annotation when not empty, else the kind's (only
/// when the kind was read, as upstream), else the default.
pub fn snapshot_setting(
    ws: &Value,
    kind_named: impl FnOnce(&str) -> Option<Arc<Value>>,
) -> (bool, String) {
    let own_storage = annotation(ws, STORAGE_CONFIG_ANNOTATION).filter(|v| !v.is_empty());
    let mut storage = own_storage.unwrap_or(STORAGE_CONFIG).to_string();
    match annotation(ws, SNAPSHOT_ENABLED) {
        Some(v) if v.eq_ignore_ascii_case("false") => return (false, storage),
        Some(v) if v.eq_ignore_ascii_case("true") => return (true, storage),
        _ => {}
    }
    let pod_config = str_at(ws, "/spec/podTemplate/options/podConfig").unwrap_or("");
    if pod_config.to_ascii_lowercase().contains("tpu") {
        return (false, storage);
    }
    let Some(kind_name) = str_at(ws, "/spec/kind").filter(|k| !k.is_empty()) else {
        return (false, storage);
    };
    let Some(wsk) = kind_named(kind_name) else {
        return (false, storage);
    };
    if own_storage.is_none()
        && let Some(v) = annotation(&wsk, STORAGE_CONFIG_ANNOTATION).filter(|v| !v.is_empty())
    {
        storage = v.to_string();
    }
    let enabled =
        annotation(&wsk, SNAPSHOT_ENABLED).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    (enabled, storage)
}

fn is_ready(pod: &Value) -> bool {
    condition_status(pod, "Ready") == Some("True")
}

/// Every container reports ready (and there is at least one).
fn all_containers_ready(pod: &Value) -> bool {
    let statuses = pod
        .lookup("/status/containerStatuses")
        .and_then(Value::as_array);
    statuses.is_some_and(|s| {
        !s.is_empty()
            && s.iter()
                .all(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
    })
}

fn phase(pod: &Value) -> &str {
    str_at(pod, "/status/phase").unwrap_or("Pending")
}

/// How long ago an RFC 3339 time was (negative when it lies ahead).
fn since(rfc3339: Option<&str>) -> Option<chrono::Duration> {
    let t = DateTime::parse_from_rfc3339(rfc3339?).ok()?;
    Some(Utc::now() - t.with_timezone(&Utc))
}

impl Reconciler for SnapshotAddon {
    fn name(&self) -> &'static str {
        "snapshot-addon"
    }

    fn primary(&self) -> &'static [&'static str] {
        &["Workspace"]
    }

    /// As upstream's event handlers (`cache.go`): pods by their Workspace label, triggers
    /// and policies by their Workspace owner or else by their derived name, PodSnapshots by
    /// the trigger named in `gke-pod-snapshot-triggered-by`.
    fn keys_for(&self, ev: &Event) -> Vec<ObjKey> {
        let ns = ev.namespace.clone().unwrap_or_default();
        let o = &ev.object;
        let owner = || {
            o.lookup("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .and_then(|refs| {
                    refs.iter()
                        .find(|r| str_at(r, "/kind") == Some("Workspace"))
                })
                .and_then(|r| str_at(r, "/name"))
                .map(str::to_string)
        };
        let ws = match ev.kind.kind {
            "Workspace" => Some(name_of(o).to_string()),
            "Pod" => label(o, WORKSPACE_LABEL).map(str::to_string),
            "PodSnapshotManualTrigger" => {
                owner().or_else(|| workspace_from(name_of(o), "-trigger"))
            }
            "PodSnapshotPolicy" => owner().or_else(|| workspace_from(name_of(o), "-policy")),
            "PodSnapshot" => label(o, TRIGGERED_BY).and_then(|t| workspace_from(t, "-trigger")),
            _ => None,
        };
        ws.map(|w| ws_key(&ns, &w)).into_iter().collect()
    }

    async fn reconcile(&self, ctx: &Ctx, key: &ObjKey) -> Next {
        let ws = ctx
            .store
            .find(key.kind, key.ns(), &key.name)
            .filter(|w| !is_deleting(w));
        if !ctx.profile.addon.manages(&key.namespace) {
            if let Some(ws) = ws.filter(|w| enabled(ctx, w)) {
                webhook_writes(ctx, &ws);
            }
            return Next::Done;
        }
        let Some(ws) = ws else {
            return match ctx.store.find(key.kind, key.ns(), &key.name) {
                Some(_) => Next::Done,
                None => teardown(ctx, key),
            };
        };
        let pods = workspace_pods(ctx, &key.namespace, &key.name);
        self.lose_home_files(ctx, &ws, &pods, false);
        if !enabled(ctx, &ws) {
            return Next::Done;
        }
        ensure_ipc_config_map(ctx, &key.namespace);
        ensure_policy(ctx, &ws, &key.name, &key.namespace);
        let state = annotation(&ws, CHECKPOINT_STATE).unwrap_or("");
        if state == "Checkpointing" {
            return self.checkpointing(ctx, key, &ws, &pods);
        }
        if ws.lookup("/spec/paused") == Some(&json!(true)) {
            return Next::Done;
        }
        self.active(ctx, key, &ws, &pods)
    }
}

/// What upstream's webhooks write to other objects, which the store's admission hook
/// cannot: the pod's gate turned False on the pause (`mutateWorkspace`) and the ConfigMap
/// as a safety net on a pod's creation (`mutatePod`). In tenant namespaces the reconciler
/// writes both anyway; elsewhere this is all that happens.
fn webhook_writes(ctx: &Ctx, ws: &Value) {
    let ns = str_at(ws, "/metadata/namespace").unwrap_or("");
    let pods = workspace_pods(ctx, ns, name_of(ws));
    if pods.is_empty() {
        return;
    }
    ensure_ipc_config_map(ctx, ns);
    if annotation(ws, CHECKPOINT_STATE) == Some("Checkpointing")
        && let Some(pod) = workspace_pod(&pods, name_of(ws))
        && phase(pod) == "Running"
        && !is_deleting(pod)
    {
        set_active(ctx, pod, false);
    }
}

/// What a deleted Workspace left (`reconcileDeletedWorkspace`). The policy is the marker:
/// with none there is nothing to do. Its PodSnapshots (found by their
/// `gke-pod-snapshot-triggered-by` label, terminating ones included) are deleted first,
/// and the policy and trigger only once none is left, because the snapshot finalizer
/// follows the policy to the bucket (deleting the policy first orphans the files,
/// gke-pod-snapshots.md §3). While every one is terminating, the policy stays until the
/// newest deletion is `addon_drain_timeout_ms` old (a wedged finalizer, e.g.
/// `snapshot-stuck-deleting`); it is looked at again every `addon_drain_interval_ms`.
fn teardown(ctx: &Ctx, key: &ObjKey) -> Next {
    let ns = key.namespace.as_str();
    let timing = &ctx.profile.timing;
    let interval = Duration::from_millis(timing.addon_drain_interval_ms);
    let timeout = Duration::from_millis(timing.addon_drain_timeout_ms);
    if ctx
        .store
        .find(kind("PodSnapshotPolicy"), key.ns(), &policy_name(&key.name))
        .is_none()
    {
        return Next::Done;
    }
    let trigger = trigger_name(&key.name);
    let draining = ctx
        .store
        .labelled(kind("PodSnapshot"), key.ns(), TRIGGERED_BY, &trigger);
    let all_terminating = !draining.is_empty() && draining.iter().all(|s| is_deleting(s));
    if !all_terminating {
        for s in &draining {
            super::agent::delete_snapshot(ctx, ns, name_of(s));
        }
        if draining.is_empty() {
            retire_policy(ctx, key);
            return Next::Done;
        }
        return Next::After(interval);
    }
    // The newest deletion needs the most time: it is the one measured.
    let waited = draining
        .iter()
        .filter_map(|s| since(str_at(s, "/metadata/deletionTimestamp")))
        .min()
        .and_then(|d| d.to_std().ok())
        .unwrap_or_default();
    if waited < timeout {
        return Next::After(interval);
    }
    tracing::info!(workspace = %key.name, namespace = %ns, "snapshots still terminating after the drain timeout; retiring the policy anyway");
    retire_policy(ctx, key);
    Next::Done
}

/// Deletes a deleted Workspace's policy and trigger (`retirePolicy`).
fn retire_policy(ctx: &Ctx, key: &ObjKey) {
    for (k, name) in [
        ("PodSnapshotPolicy", policy_name(&key.name)),
        ("PodSnapshotManualTrigger", trigger_name(&key.name)),
    ] {
        let _ = ctx
            .store
            .delete(kind(k), key.ns(), &name, &DeleteOptions::default());
    }
}

/// Every pod of a Workspace (its STS pod and any duplicate), deleting ones included.
fn workspace_pods(ctx: &Ctx, ns: &str, ws: &str) -> Vec<Arc<Value>> {
    ctx.store
        .labelled(kind("Pod"), Some(ns), WORKSPACE_LABEL, ws)
}

/// A merge patch of the Workspace: `spec.paused` and annotations, `None` removing one
/// (`patchWorkspacePauseAndAnnotations`). Returns the Workspace as written.
fn patch_ws(
    ctx: &Ctx,
    key: &ObjKey,
    paused: bool,
    annotations: &[(&str, Option<&str>)],
) -> Option<Value> {
    ctx.store
        .modify(key.kind, key.ns(), &key.name, false, false, |cur| {
            let mut c = cur.clone();
            c["spec"]["paused"] = json!(paused);
            for (k, v) in annotations {
                match v {
                    Some(v) => c["metadata"]["annotations"][*k] = json!(v),
                    None => {
                        if let Some(a) = c
                            .pointer_mut("/metadata/annotations")
                            .and_then(Value::as_object_mut)
                        {
                            a.remove(*k);
                        }
                    }
                }
            }
            Ok(c)
        })
        .ok()
        .map(|w| (*w).clone())
}

/// Publishes the pod's readiness gate `podsnapshot.gke.kubeflow.org/active` and `Ready` in
/// one status write (`setPodActiveCondition`, `applyPodConditions`): False with
/// `CheckpointingInProgress` on both; True with `WorkspaceActive`, and `Ready` True
/// (`ContainersReady`) when every container is ready. Nothing is written when the pod
/// already shows it.
fn set_active(ctx: &Ctx, pod: &Value, active: bool) {
    let status = if active { "True" } else { "False" };
    if condition_status(pod, ACTIVE_GATE) == Some(status)
        && (!active || is_ready(pod) || !all_containers_ready(pod))
    {
        return;
    }
    let (reason, message) = if active {
        (ACTIVE_REASON, ACTIVE_MESSAGE)
    } else {
        (CHECKPOINTING_REASON, CHECKPOINTING_MESSAGE)
    };
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
            if uid_of(cur) != uid {
                return Ok(c);
            }
            if condition_status(cur, ACTIVE_GATE) != Some(status) {
                set_condition(
                    &mut c,
                    ACTIVE_GATE,
                    status,
                    Some(reason),
                    Some(message),
                    &now,
                );
            }
            match condition_status(cur, "Ready") {
                Some("False") if !active => {}
                Some(_) if !active => {
                    set_condition(&mut c, "Ready", "False", Some(reason), Some(message), &now);
                }
                Some(s) if s != "True" && all_containers_ready(cur) => {
                    set_condition(
                        &mut c,
                        "Ready",
                        "True",
                        Some("ContainersReady"),
                        Some(""),
                        &now,
                    );
                }
                _ => {}
            }
            Ok(c)
        },
    );
}

/// Puts the ConfigMap `jupyter-ipc-config` in `ns`, or its data back (`ensureIPCConfigMap`).
fn ensure_ipc_config_map(ctx: &Ctx, ns: &str) {
    let data = json!({IPC_CONFIG_KEY: IPC_SERVER_CONFIG});
    match ctx.store.find(kind("ConfigMap"), Some(ns), IPC_CONFIG_MAP) {
        Some(cm) if cm.get("data") == Some(&data) => {}
        Some(_) => {
            let _ = ctx.store.modify(
                kind("ConfigMap"),
                Some(ns),
                IPC_CONFIG_MAP,
                false,
                false,
                |cur| {
                    let mut c = cur.clone();
                    c["data"] = data.clone();
                    Ok(c)
                },
            );
        }
        None => {
            let cm = json!({"metadata": {"name": IPC_CONFIG_MAP}, "data": data});
            if let Err(e) = ctx.store.create(kind("ConfigMap"), Some(ns), cm, false)
                && e.code != 409
            {
                tracing::warn!(error = %e.message, "cannot create the IPC ConfigMap");
            }
        }
    }
}

/// Creates the Workspace's `ws-<ws>-policy` if it is missing, with no owner: only
/// [`teardown`] retires it (`ensureStorageConfigAndPolicy`).
fn ensure_policy(ctx: &Ctx, ws: &Value, name: &str, ns: &str) {
    let policy = policy_name(name);
    let retention = annotation(ws, SIM_LAST_ACCESS_TIMEOUT)
        .filter(|t| super::agent::retention::parse_duration(t).is_some())
        .unwrap_or(LAST_ACCESS_TIMEOUT);
    if let Some(existing) = ctx.store.find(kind("PodSnapshotPolicy"), Some(ns), &policy) {
        // Simulator only: the policy exists from the Workspace's first pass, so a
        // [`SIM_LAST_ACCESS_TIMEOUT`] set later (a test shortening retention) is applied to
        // it. Upstream leaves an existing policy's spec alone.
        let current = str_at(&existing, "/spec/retentionConfig/lastAccessTimeout");
        if annotation(ws, SIM_LAST_ACCESS_TIMEOUT).is_some() && current != Some(retention) {
            let _ = ctx.store.modify(
                kind("PodSnapshotPolicy"),
                Some(ns),
                &policy,
                false,
                false,
                |cur| {
                    let mut c = cur.clone();
                    c["spec"]["retentionConfig"]["lastAccessTimeout"] = json!(retention);
                    Ok(c)
                },
            );
        }
        return;
    }
    let (_, storage) =
        snapshot_setting(ws, |name| ctx.store.find(kind("WorkspaceKind"), None, name));
    let p = json!({
        "metadata": {"name": policy},
        "spec": {
            "storageConfigName": storage,
            "selector": {"matchLabels": {WORKSPACE_LABEL: name}},
            "triggerConfig": {"type": "manual", "postCheckpoint": "stop"},
            "retentionConfig": {"lastAccessTimeout": retention},
        },
    });
    if let Err(e) = ctx
        .store
        .create(kind("PodSnapshotPolicy"), Some(ns), p, false)
        && e.code != 409
    {
        tracing::warn!(error = %e.message, "cannot create the snapshot policy");
    }
}

impl SnapshotAddon {
    /// A held pause (`reconcileCheckpointing`, see the module docs).
    fn checkpointing(&self, ctx: &Ctx, key: &ObjKey, ws: &Value, pods: &[Arc<Value>]) -> Next {
        let pod = workspace_pod(pods, &key.name).filter(|p| !is_deleting(p));
        let Some(pod) = pod else {
            // Nothing left to checkpoint: the pause completes, with no snapshot to restore.
            patch_ws(
                ctx,
                key,
                true,
                &[
                    (CHECKPOINT_STATE, Some("Ready")),
                    (CHECKPOINT_STARTED_AT, None),
                ],
            );
            return Next::Done;
        };
        set_active(ctx, pod, false);
        let stamp = annotation(ws, CHECKPOINT_STARTED_AT).unwrap_or("");
        let settle = Duration::from_millis(ctx.profile.timing.addon_settle_ms);
        if let Some(elapsed) = since(Some(stamp))
            && let Ok(remaining) =
                (chrono::Duration::from_std(settle).unwrap_or_default() - elapsed).to_std()
            && !remaining.is_zero()
        {
            return Next::After(remaining);
        }
        let name = trigger_name(&key.name);
        let trigger = ctx
            .store
            .find(kind("PodSnapshotManualTrigger"), key.ns(), &name);
        let Some(trigger) = trigger else {
            self.create_trigger(ctx, key, ws, name_of(pod), stamp, settle);
            return Next::Done;
        };
        if annotation(&trigger, CHECKPOINT_STARTED_AT).unwrap_or("") != stamp {
            // Left from an earlier pause: it cannot satisfy this one. Its deletion brings
            // the next pass, which makes a new one.
            let _ = ctx.store.delete(
                kind("PodSnapshotManualTrigger"),
                key.ns(),
                &name,
                &DeleteOptions::default(),
            );
            return Next::Done;
        }
        let Some(snap) = str_at(&trigger, "/status/snapshotCreated/name").filter(|s| !s.is_empty())
        else {
            return Next::Done;
        };
        let ready = ctx
            .store
            .find(kind("PodSnapshot"), key.ns(), snap)
            .is_some_and(|s| condition_status(&s, "Ready") == Some("True"));
        if !ready {
            return Next::Done;
        }
        let paused = patch_ws(
            ctx,
            key,
            true,
            &[
                (LAST_CHECKPOINT_NAME, Some(snap)),
                (CHECKPOINT_STATE, Some("Ready")),
                (CHECKPOINT_STARTED_AT, None),
            ],
        );
        if let Some(p) = paused {
            self.lose_home_files(ctx, &p, &[], true);
        }
        Next::Done
    }

    /// `ws-<ws>-trigger` for `pod`, stamped with the pause's `checkpoint-started-at`
    /// (`createManualTrigger`); one already there is left alone.
    fn create_trigger(
        &self,
        ctx: &Ctx,
        key: &ObjKey,
        ws: &Value,
        pod: &str,
        stamp: &str,
        settle: Duration,
    ) {
        let t = json!({
            "metadata": {
                "name": trigger_name(&key.name),
                "annotations": {CHECKPOINT_STARTED_AT: stamp},
                "ownerReferences": [{
                    "apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace",
                    "name": key.name, "uid": uid_of(ws),
                    "controller": false, "blockOwnerDeletion": true}],
            },
            "spec": {"targetPod": pod},
        });
        match ctx
            .store
            .create(kind("PodSnapshotManualTrigger"), key.ns(), t, false)
        {
            Ok(_) => ctx.truth.record_imposed(Imposed::AddonSettle, settle),
            Err(e) if e.code == 409 => {}
            Err(e) => tracing::warn!(error = %e.message, "cannot create the trigger"),
        }
    }

    /// A Workspace meant to serve (`reconcileActive`, see the module docs).
    fn active(&self, ctx: &Ctx, key: &ObjKey, ws: &Value, pods: &[Arc<Value>]) -> Next {
        let ns = key.namespace.as_str();
        let Some(pod) = workspace_pod(pods, &key.name).filter(|p| !is_deleting(p)) else {
            return Next::Done;
        };
        if phase(pod) != "Running" || !all_containers_ready(pod) || requests_tpu(pod) {
            return Next::Done;
        }
        set_active(ctx, pod, true);
        let state = annotation(ws, CHECKPOINT_STATE).unwrap_or("");
        let last = annotation(ws, LAST_CHECKPOINT_NAME).unwrap_or("");
        if state.is_empty() && last.is_empty() {
            return Next::Done;
        }
        if fault_on(ctx, Fault::DuplicateRestoreAttempts, &[ws, pod]) && state == "Restoring" {
            self.double(ctx, ns, ws, pod);
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
        if !is_ready(pod) || unsettled {
            return Next::Done;
        }
        // By label, not by name: a snapshot left by an interrupted cycle goes too.
        let trigger = trigger_name(&key.name);
        let triggered = ctx
            .store
            .labelled(kind("PodSnapshot"), key.ns(), TRIGGERED_BY, &trigger);
        for s in triggered {
            if !is_deleting(&s) {
                super::agent::delete_snapshot(ctx, ns, name_of(&s));
            }
        }
        let _ = ctx.store.delete(
            kind("PodSnapshotManualTrigger"),
            key.ns(),
            &trigger,
            &DeleteOptions::default(),
        );
        for d in duplicates {
            let _ = ctx
                .store
                .delete(kind("Pod"), key.ns(), name_of(d), &DeleteOptions::default());
        }
        patch_ws(
            ctx,
            key,
            false,
            &[
                (LAST_CHECKPOINT_NAME, None),
                (CHECKPOINT_STATE, None),
                (CHECKPOINT_STARTED_AT, None),
            ],
        );
        Next::Done
    }

    /// `duplicate-restore-attempts`: a second pod with the first one's spec and pin.
    fn double(&self, ctx: &Ctx, ns: &str, ws: &Value, primary: &Value) {
        if !lock(&self.doubled).insert(uid_of(primary).to_string()) {
            return;
        }
        let mut labels = primary
            .lookup("/metadata/labels")
            .cloned()
            .unwrap_or(json!({}));
        if let Some(l) = labels.as_object_mut() {
            l.remove("statefulset.kubernetes.io/pod-name");
        }
        let mut annotations = primary
            .lookup("/metadata/annotations")
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
        match ctx.store.create(kind("Pod"), Some(ns), pod, false) {
            Ok(_) => ctx.truth.record_fault(Fault::DuplicateRestoreAttempts),
            Err(e) => tracing::warn!(error = %e.message, "cannot create the duplicate restore pod"),
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
            if ws.lookup("/spec/paused") == Some(&json!(true)) {
                let wiped = pauses.entry(uid).or_insert(false);
                if *wiped || !(now || pods.is_empty()) {
                    return;
                }
                *wiped = true;
            } else if pauses.remove(&uid) != Some(false) {
                return;
            }
        }
        ctx.truth.record_fault(Fault::LoseHomeFiles);
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

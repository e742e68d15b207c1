//! The Kubeflow workspace controller with upstream semantics (kubeflow-workspaces.md §4-§5):
//! for each Workspace a ServiceAccount, a StatefulSet (replicas 0 when paused) and a Service,
//! all owned by it and found by ownerReference uid; the state derived from the pod, its
//! events and the StatefulSet's; the status in epoch milliseconds, written only when it
//! changes; Jupyter activity probing and auto-pause by `activityRules`. It also puts the
//! protection finalizer on the WorkspaceKind a Workspace uses, and keeps the StatefulSet it
//! last rendered for each Workspace (rendered again when an input changes). The kind's
//! `status.workspaces` counts are the WorkspaceKind controller's ([`WorkspaceKindController`]).
//!
//! Like upstream it knows nothing about snapshots: the GKE add-on intercepts pause by
//! rewriting `spec.paused`, and a pod whose readiness gate holds `Ready=False` is simply
//! not Running.

pub mod activity;
mod idle;
mod owned;
pub mod state;
pub mod template;
mod workspacekind;

pub use workspacekind::WorkspaceKindController;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Ctx, Next, ObjKey, Reconciler, kind};
use crate::sim::error::ApiError;
use crate::sim::json::{Lookup as _, now_epoch_ms, text_at};
use crate::sim::store::{Event, EventType, Store};
use crate::sim::truth::Transition;
use owned::Owned;
use template::{Selected, WORKSPACE_LABEL};

/// The finalizer a Workspace puts on its WorkspaceKind while it uses it.
pub const KIND_FINALIZER: &str = "notebooks.kubeflow.org/workspacekind-protection";
/// Upstream requeues a Pending Workspace after 15 s (scaled like the other intervals).
const PENDING_REQUEUE_SECS: i64 = 15;
/// Requeue after a failed or conflicting write.
const RETRY: Duration = Duration::from_millis(200);

/// The controller. Holds the store to map events (pods, owned objects, warning events,
/// WorkspaceKinds) to the Workspaces they concern.
pub struct WorkspaceController {
    store: Arc<Store>,
    http: OnceLock<Result<reqwest::Client, String>>,
    /// The StatefulSet last rendered for each Workspace, by namespace and name.
    rendered: Mutex<HashMap<(String, String), Arc<Rendered>>>,
}

/// A StatefulSet rendered for a Workspace, and what it was rendered from. Most reconciles
/// come from its pod's changes and find the same inputs: they use it instead of rendering
/// the template again (the controller's largest cost in a drill).
struct Rendered {
    uid: String,
    /// The Workspace's spec.
    spec: Value,
    /// The WorkspaceKind's uid and generation: the template reads only its spec (its
    /// status, whose counts change with every Workspace, does not count).
    kind_uid: String,
    kind_generation: i64,
    service_account: String,
    sts: Arc<Value>,
}

fn ws_key(namespace: &str, name: &str) -> ObjKey {
    ObjKey {
        kind: kind("Workspace"),
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

fn kind_key(name: &str) -> ObjKey {
    ObjKey {
        kind: kind("WorkspaceKind"),
        namespace: String::new(),
        name: name.to_string(),
    }
}

/// The Workspace that controls `obj`, from its ownerReferences.
fn controlling_workspace(obj: &Value) -> Option<ObjKey> {
    let owner = obj
        .lookup("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| {
            text_at(r, "/kind") == "Workspace"
                && r.get("controller").and_then(Value::as_bool) == Some(true)
        })?;
    Some(ws_key(
        text_at(obj, "/metadata/namespace"),
        text_at(owner, "/name"),
    ))
}

/// The Workspace a pod belongs to, from its workspace-name label.
fn labelled_workspace(pod: &Value) -> Option<ObjKey> {
    let name = pod
        .lookup("/metadata/labels")
        .and_then(|l| l.get(WORKSPACE_LABEL))
        .and_then(Value::as_str)?;
    Some(ws_key(text_at(pod, "/metadata/namespace"), name))
}

impl WorkspaceController {
    pub fn new(ctx: &Ctx) -> Self {
        Self {
            store: ctx.store.clone(),
            http: OnceLock::new(),
            rendered: Mutex::new(HashMap::new()),
        }
    }

    fn http(&self) -> Result<&reqwest::Client, &str> {
        self.http
            .get_or_init(|| {
                reqwest::Client::builder()
                    .no_proxy()
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(String::as_str)
    }

    /// Scales a platform interval; 0 stays 0 (it disables a guard such as minRunningSeconds).
    fn scale(ctx: &Ctx, seconds: i64) -> Duration {
        if seconds <= 0 {
            Duration::ZERO
        } else {
            ctx.profile.timing.scaled(seconds as f64)
        }
    }

    fn workspaces_of_kind(&self, kind_name: &str) -> Vec<ObjKey> {
        self.store
            .by_field(kind("Workspace"), None, "/spec/kind", kind_name)
            .iter()
            .map(|w| {
                ws_key(
                    text_at(w, "/metadata/namespace"),
                    text_at(w, "/metadata/name"),
                )
            })
            .collect()
    }

    fn keys_for_warning(&self, ev: &Value) -> Option<ObjKey> {
        let ns = text_at(ev, "/involvedObject/namespace");
        let name = text_at(ev, "/involvedObject/name");
        match text_at(ev, "/involvedObject/kind") {
            "Pod" => labelled_workspace(&*self.store.find(kind("Pod"), Some(ns), name)?),
            "StatefulSet" => {
                controlling_workspace(&*self.store.find(kind("StatefulSet"), Some(ns), name)?)
            }
            _ => None,
        }
    }
}

impl Reconciler for WorkspaceController {
    fn name(&self) -> &'static str {
        "workspace"
    }

    fn primary(&self) -> &'static [&'static str] {
        &["Workspace"]
    }

    fn keys_for(&self, ev: &Event) -> Vec<ObjKey> {
        let obj = &ev.object;
        match ev.kind.kind {
            "Workspace" => vec![ObjKey::of(ev.kind, obj)],
            "WorkspaceKind" => {
                // Upstream requeues the kind's Workspaces on generation changes only.
                let generation = |o: &Value| o.lookup("/metadata/generation").cloned();
                let changed = ev
                    .previous
                    .as_ref()
                    .is_none_or(|p| generation(p) != generation(obj));
                if ev.etype != EventType::Modified || changed {
                    self.workspaces_of_kind(text_at(obj, "/metadata/name"))
                } else {
                    Vec::new()
                }
            }
            "Pod" => labelled_workspace(obj).into_iter().collect(),
            "StatefulSet" | "Service" | "ServiceAccount" => {
                controlling_workspace(obj).into_iter().collect()
            }
            "Event" if text_at(obj, "/type") == "Warning" => {
                self.keys_for_warning(obj).into_iter().collect()
            }
            _ => Vec::new(),
        }
    }

    async fn reconcile(&self, ctx: &Ctx, key: &ObjKey) -> Next {
        self.reconcile_workspace(ctx, key).await
    }

    fn workers(&self) -> usize {
        MAX_CONCURRENT_RECONCILES
    }
}

/// Upstream's `--max-concurrent-reconciles` default (`MAX_CONCURRENT_RECONCILES`, 10 in
/// `cmd/main.go`): up to ten Workspaces are reconciled at once, so that a slow activity
/// probe does not hold the others. The WorkspaceKind controller keeps one.
const MAX_CONCURRENT_RECONCILES: usize = 10;

impl WorkspaceController {
    async fn reconcile_workspace(&self, ctx: &Ctx, key: &ObjKey) -> Next {
        let Some(ws) = ctx.store.find(key.kind, key.ns(), &key.name) else {
            self.forget(key);
            return Next::Done;
        };
        if ws.lookup("/metadata/deletionTimestamp").is_some() {
            self.forget(key);
            return Next::Done;
        }
        let panics = crate::sim::faults::Fault::ControllerPanics;
        if super::agent::fault_on(ctx, panics, &[&ws]) {
            ctx.truth.record_fault(panics);
            panic!(
                "fault controller-panics on Workspace {}/{}",
                key.namespace, key.name
            );
        }
        let mut status = state::complete(ws.get("status"));
        let kind_name = text_at(&ws, "/spec/kind");
        let Some(wsk) = ctx.store.find(kind("WorkspaceKind"), None, kind_name) else {
            return self.set_error(ctx, &ws, status, state::msg_unknown_kind(kind_name));
        };
        self.protect_kind(ctx, &wsk);

        status["pendingRestart"] = json!(false);
        let mut selected: Vec<Selected<'_>> = Vec::new();
        for option in ["imageConfig", "podConfig"] {
            let id = text_at(&ws, &format!("/spec/podTemplate/options/{option}"));
            match template::select_option(&wsk, option, id) {
                Ok(s) => {
                    status["podTemplateOptions"][option] = s.status();
                    if s.pending_restart() {
                        status["pendingRestart"] = json!(true);
                    }
                    selected.push(s);
                }
                Err(e) => {
                    let message = format!("Workspace has invalid {option}: {e}");
                    return self.set_error(ctx, &ws, status, message);
                }
            }
        }
        let (image, pod_config) = (&selected[0], &selected[1]);

        let service_account = match self.ensure_service_account(ctx, &ws) {
            Owned::Found(sa) => text_at(&sa, "/metadata/name").to_string(),
            Owned::Error(m) => return self.set_error(ctx, &ws, status, m),
            Owned::Retry => return Next::After(RETRY),
        };
        let inputs = template::Inputs {
            workspace: &ws,
            kind: &wsk,
            image,
            pod_config,
            service_account: &service_account,
        };
        let sts = match self.stateful_set(&inputs) {
            Ok(desired) => self.ensure_owned(ctx, "StatefulSet", &ws, &desired),
            Err(e) => {
                let message = format!("Workspace failed to generate StatefulSet with error: {e}");
                return self.set_error(ctx, &ws, status, message);
            }
        };
        let sts = match sts {
            Owned::Found(s) => s,
            Owned::Error(m) => return self.set_error(ctx, &ws, status, m),
            Owned::Retry => return Next::After(RETRY),
        };
        let service = match template::service(&ws, image) {
            Ok(desired) => self.ensure_owned(ctx, "Service", &ws, &desired),
            Err(e) => {
                let message = format!("Workspace failed to generate Service with error: {e}");
                return self.set_error(ctx, &ws, status, message);
            }
        };
        match service {
            Owned::Found(_) => {}
            Owned::Error(m) => return self.set_error(ctx, &ws, status, m),
            Owned::Retry => return Next::After(RETRY),
        }

        // The first StatefulSet pod is always `<sts>-0`.
        let pod_name = format!("{}-0", text_at(&sts, "/metadata/name"));
        let pod = ctx.store.find(kind("Pod"), key.ns(), &pod_name);
        let paused = ws
            .lookup("/spec/paused")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let now = now_epoch_ms();
        let previous_state = text_at(&ws, "/status/state").to_string();
        let pause_time = status["pauseTime"].as_i64().unwrap_or(0);
        status["pauseTime"] = json!(state::pause_time(paused, pause_time, now));
        status["podTemplatePod"] = state::pod_template_pod(pod.as_deref(), &service_account);
        // The events about one object, by the store's field index.
        let warning = |uid: &str| {
            let about = ctx
                .store
                .by_field(kind("Event"), key.ns(), "/involvedObject/uid", uid);
            state::latest_warning(&about, uid)
        };
        let derived = state::derive(
            paused,
            pod.as_deref(),
            || warning(text_at(&sts, "/metadata/uid")),
            || {
                warning(
                    pod.as_deref()
                        .map(|p| text_at(p, "/metadata/uid"))
                        .unwrap_or(""),
                )
            },
        );
        status["state"] = json!(derived.state.to_string());
        status["stateMessage"] = json!(derived.message);
        state::record_running_transition(&mut status, &previous_state, now);
        let mut next = derived
            .pending
            .then(|| Self::scale(ctx, PENDING_REQUEUE_SECS));

        let (pause, activity_next) = self
            .reconcile_activity(
                ctx,
                &ws,
                &wsk,
                image,
                pod_config,
                pod.as_deref(),
                &mut status,
            )
            .await;
        next = match (next, activity_next) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };

        if let Err(e) = self.write_status(ctx, &ws, status) {
            tracing::debug!(workspace = %key.name, error = %e, "status not written; retrying");
            return Next::After(RETRY);
        }
        if pause {
            // Status first (above), then a merge patch of `spec.paused` alone.
            let patched = ctx
                .store
                .modify(key.kind, key.ns(), &key.name, false, false, |cur| {
                    let mut c = cur.clone();
                    c["spec"]["paused"] = json!(true);
                    Ok(c)
                });
            if let Err(e) = patched {
                tracing::debug!(workspace = %key.name, error = %e, "pause not written; retrying");
                return Next::After(RETRY);
            }
            tracing::debug!(workspace = %key.name, "paused for inactivity");
            return Next::Done;
        }
        next.map_or(Next::Done, Next::After)
    }

    /// The StatefulSet `inputs` render: the one rendered last for this Workspace when its
    /// spec, its kind's spec (uid and generation) and its ServiceAccount are the same, else a
    /// new one.
    fn stateful_set(
        &self,
        inputs: &template::Inputs<'_>,
    ) -> Result<Arc<Value>, template::TemplateError> {
        let ws = inputs.workspace;
        let key = (
            text_at(ws, "/metadata/namespace").to_string(),
            text_at(ws, "/metadata/name").to_string(),
        );
        let (uid, spec) = (text_at(ws, "/metadata/uid"), ws.get("spec"));
        let kind_uid = text_at(inputs.kind, "/metadata/uid");
        let kind_generation = inputs
            .kind
            .lookup("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let cached = self.lock_rendered().get(&key).cloned();
        if let Some(r) = cached.filter(|r| {
            r.uid == uid
                && Some(&r.spec) == spec
                && r.kind_uid == kind_uid
                && r.kind_generation == kind_generation
                && r.service_account == inputs.service_account
        }) {
            return Ok(r.sts.clone());
        }
        let sts = Arc::new(template::stateful_set(inputs)?);
        let rendered = Rendered {
            uid: uid.to_string(),
            spec: spec.cloned().unwrap_or(Value::Null),
            kind_uid: kind_uid.to_string(),
            kind_generation,
            service_account: inputs.service_account.to_string(),
            sts: sts.clone(),
        };
        let mut all = self.lock_rendered();
        all.insert(key, Arc::new(rendered));
        // A Workspace whose Deleted event the controller missed (it re-listed after falling
        // behind) is never forgotten one by one: now and then, drop what is rendered for
        // Workspaces that are gone (each time the memo has doubled, so a lookup stays O(1)
        // on average).
        if all.len() >= 64 && all.len().is_power_of_two() {
            let ws = kind("Workspace");
            all.retain(|(ns, name), _| self.store.find(ws, Some(ns), name).is_some());
        }
        Ok(sts)
    }

    fn lock_rendered(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<Rendered>>> {
        self.rendered.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops what was rendered for a Workspace that is gone or going.
    fn forget(&self, key: &ObjKey) {
        self.lock_rendered()
            .remove(&(key.namespace.clone(), key.name.clone()));
    }

    /// Writes `status` as the whole status if it differs (with the read resourceVersion, so
    /// a stale view is refused), and records a state change as ground truth.
    fn write_status(&self, ctx: &Ctx, ws: &Value, status: Value) -> Result<(), ApiError> {
        if ws.get("status") == Some(&status) {
            return Ok(());
        }
        let ns = text_at(ws, "/metadata/namespace");
        let name = text_at(ws, "/metadata/name");
        let rv = text_at(ws, "/metadata/resourceVersion").to_string();
        let new_state = text_at(&status, "/state").to_string();
        let node = text_at(&status, "/podTemplatePod/nodeName").to_string();
        ctx.store
            .modify(kind("Workspace"), Some(ns), name, true, false, |_| {
                // A status write takes only the status (and the resourceVersion it checks).
                Ok(json!({"metadata": {"resourceVersion": rv}, "status": status}))
            })?;
        if text_at(ws, "/status/state") != new_state {
            ctx.truth.record(
                Transition::WorkspaceState,
                Some(ns),
                name,
                (!node.is_empty()).then_some(node.as_str()),
                Some(new_state),
            );
        }
        Ok(())
    }

    /// Upstream `updateWorkspaceState`: state `Error` with `message`, the rest as it was.
    fn set_error(&self, ctx: &Ctx, ws: &Value, mut status: Value, message: String) -> Next {
        status["state"] = json!("Error");
        status["stateMessage"] = json!(message);
        match self.write_status(ctx, ws, status) {
            Ok(()) => Next::Done,
            Err(_) => Next::After(RETRY),
        }
    }
}

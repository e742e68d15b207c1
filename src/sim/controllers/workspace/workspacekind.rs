//! The WorkspaceKind side (kubeflow-workspaces.md §6): the protection finalizer a Workspace
//! adds to the kind it uses (the Workspace controller's), and upstream's WorkspaceKind
//! controller, a controller of its own with its own queue (`workspacekind_controller.go`):
//! `status.workspaces` with the per-option counts, and releasing the finalizer once a
//! deleted kind has no Workspaces left.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{KIND_FINALIZER, WorkspaceController, kind_key};
use crate::sim::controllers::{Ctx, Next, ObjKey, Reconciler, kind};
use crate::sim::json::Lookup as _;
use crate::sim::json::text_at;
use crate::sim::store::{Event, EventType};

/// Upstream's `WorkspaceKindReconciler`: it reconciles WorkspaceKinds, and watches
/// Workspaces through `GenerationChangedPredicate` (a Workspace created or deleted, or its
/// spec changed), each mapped to the kind it names.
pub struct WorkspaceKindController;

impl Reconciler for WorkspaceKindController {
    fn name(&self) -> &'static str {
        "workspacekind"
    }

    fn primary(&self) -> &'static [&'static str] {
        &["WorkspaceKind"]
    }

    fn keys_for(&self, ev: &Event) -> Vec<ObjKey> {
        let obj = &ev.object;
        match ev.kind.kind {
            "WorkspaceKind" => vec![ObjKey::of(ev.kind, obj)],
            "Workspace" => {
                let spec_changed = ev
                    .previous
                    .as_ref()
                    .is_none_or(|p| p.get("spec") != obj.get("spec"));
                if ev.etype == EventType::Modified && !spec_changed {
                    return Vec::new();
                }
                let mut keys = vec![kind_key(text_at(obj, "/spec/kind"))];
                if let Some(p) = &ev.previous
                    && text_at(p, "/spec/kind") != text_at(obj, "/spec/kind")
                {
                    keys.push(kind_key(text_at(p, "/spec/kind")));
                }
                keys
            }
            _ => Vec::new(),
        }
    }

    async fn reconcile(&self, ctx: &Ctx, key: &ObjKey) -> Next {
        reconcile_kind(ctx, &key.name)
    }
}

impl WorkspaceController {
    /// Adds the protection finalizer to a kind in use (not to one being deleted).
    pub(super) fn protect_kind(&self, ctx: &Ctx, wsk: &Value) {
        let has = wsk
            .lookup("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x == KIND_FINALIZER));
        if has || wsk.lookup("/metadata/deletionTimestamp").is_some() {
            return;
        }
        let name = text_at(wsk, "/metadata/name");
        let _ = ctx
            .store
            .modify(kind("WorkspaceKind"), None, name, false, false, |cur| {
                let mut c = cur.clone();
                let mut fs = c
                    .lookup("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if !fs.iter().any(|x| x == KIND_FINALIZER) {
                    fs.push(json!(KIND_FINALIZER));
                }
                c["metadata"]["finalizers"] = json!(fs);
                Ok(c)
            });
    }
}

/// `status.workspaces` and per-option counts, and the protection finalizer released once a
/// deleted kind has no Workspaces.
fn reconcile_kind(ctx: &Ctx, name: &str) -> Next {
    let k = kind("WorkspaceKind");
    let Some(wsk) = ctx.store.find(k, None, name) else {
        return Next::Done;
    };
    let users: Vec<Arc<Value>> = ctx
        .store
        .by_field(kind("Workspace"), None, "/spec/kind", name);
    let counts = |option: &str| -> Vec<Value> {
        // One pass over the users: how many chose each id.
        let chosen = format!("/spec/podTemplate/options/{option}");
        let mut tally: std::collections::HashMap<&str, usize> = Default::default();
        for w in &users {
            *tally.entry(text_at(w, &chosen)).or_default() += 1;
        }
        wsk.lookup(&format!("/spec/podTemplate/options/{option}/values"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|v| {
                let id = text_at(v, "/id");
                let n = tally.get(id).copied().unwrap_or(0);
                json!({"id": id, "workspaces": n})
            })
            .collect()
    };
    let mut status = wsk
        .get("status")
        .filter(|s| s.is_object())
        .cloned()
        .unwrap_or(json!({}));
    status["workspaces"] = json!(users.len());
    status["podTemplateOptions"] =
        json!({"imageConfig": counts("imageConfig"), "podConfig": counts("podConfig")});
    if wsk.get("status") != Some(&status) {
        let _ = ctx.store.modify(k, None, name, true, false, |cur| {
            let mut c = cur.clone();
            c["status"] = status;
            Ok(c)
        });
    }
    if wsk.lookup("/metadata/deletionTimestamp").is_some() && users.is_empty() {
        let _ = ctx.store.modify(k, None, name, false, false, |cur| {
            let mut c = cur.clone();
            if let Some(fs) = c
                .pointer_mut("/metadata/finalizers")
                .and_then(Value::as_array_mut)
            {
                fs.retain(|x| x != KIND_FINALIZER);
            }
            Ok(c)
        });
    }
    Next::Done
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind_name: &str, etype: EventType, object: Value, previous: Option<Value>) -> Event {
        Event {
            rv: 1,
            kind: kind(kind_name),
            namespace: None,
            etype,
            object: Arc::new(object),
            previous: previous.map(Arc::new),
            encoded: Default::default(),
            at: std::time::Instant::now(),
        }
    }

    fn names(keys: Vec<ObjKey>) -> Vec<String> {
        keys.into_iter()
            .map(|k| format!("{}/{}", k.kind.kind, k.name))
            .collect()
    }

    #[test]
    fn the_kind_is_queued_when_a_workspace_comes_goes_or_changes_spec_not_status() {
        let c = WorkspaceKindController;
        let ws = json!({"metadata": {"namespace": "ns", "name": "a"},
            "spec": {"kind": "jupyterlab", "paused": false}});
        let keys = |etype, object: &Value, previous: Option<&Value>| {
            names(c.keys_for(&event(
                "Workspace",
                etype,
                object.clone(),
                previous.cloned(),
            )))
        };
        let wsk = ["WorkspaceKind/jupyterlab".to_string()];
        assert_eq!(keys(EventType::Added, &ws, None), wsk);
        assert_eq!(keys(EventType::Deleted, &ws, None), wsk);
        let mut with_status = ws.clone();
        with_status["status"] = json!({"state": "Running"});
        assert!(keys(EventType::Modified, &with_status, Some(&ws)).is_empty());
        let mut paused = ws.clone();
        paused["spec"]["paused"] = json!(true);
        assert_eq!(keys(EventType::Modified, &paused, Some(&ws)), wsk);
        let mut moved = ws.clone();
        moved["spec"]["kind"] = json!("codeserver");
        assert_eq!(
            keys(EventType::Modified, &moved, Some(&ws)),
            ["WorkspaceKind/codeserver", "WorkspaceKind/jupyterlab"]
        );
        let kind_event = event(
            "WorkspaceKind",
            EventType::Modified,
            json!({"metadata": {"name": "jupyterlab"}}),
            None,
        );
        assert_eq!(names(c.keys_for(&kind_event)), wsk);
        let pod = event(
            "Pod",
            EventType::Added,
            json!({"metadata": {"name": "p"}}),
            None,
        );
        assert!(c.keys_for(&pod).is_empty());
    }

    #[tokio::test]
    async fn the_workspace_controller_queues_workspaces_not_their_kind() {
        let dir = tempfile::tempdir().unwrap();
        let (_stop, ctx) = crate::sim::controllers::tests::test_ctx(dir.path());
        let c = WorkspaceController::new(&ctx);
        let ws = json!({"metadata": {"namespace": "ns", "name": "a"},
            "spec": {"kind": "jupyterlab", "paused": false}});
        let added = event("Workspace", EventType::Added, ws.clone(), None);
        assert_eq!(names(c.keys_for(&added)), ["Workspace/a"]);
        let mut paused = ws.clone();
        paused["spec"]["paused"] = json!(true);
        let changed = event("Workspace", EventType::Modified, paused, Some(ws));
        assert_eq!(names(c.keys_for(&changed)), ["Workspace/a"]);
        // The kind's own status write (its counts) queues nothing here.
        let wsk = json!({"metadata": {"name": "jupyterlab", "generation": 1}});
        let mut counted = wsk.clone();
        counted["status"] = json!({"workspaces": 1});
        let status_write = event("WorkspaceKind", EventType::Modified, counted, Some(wsk));
        assert!(c.keys_for(&status_write).is_empty());
    }

    #[test]
    fn a_deleted_kind_keeps_its_finalizer_until_no_workspace_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let (_stop, ctx) = crate::sim::controllers::tests::test_ctx_with_ns(dir.path());
        let store = &ctx.store;
        let wsk = kind("WorkspaceKind");
        store
            .create(
                wsk,
                None,
                json!({"metadata": {"name": "k", "finalizers": [KIND_FINALIZER]}}),
                false,
            )
            .unwrap();
        store
            .create(
                kind("Workspace"),
                Some("ns"),
                json!({"metadata": {"name": "a"}, "spec": {"kind": "k"}}),
                false,
            )
            .unwrap();
        let opts = crate::sim::store::DeleteOptions::default();
        store.delete(wsk, None, "k", &opts).unwrap();
        reconcile_kind(&ctx, "k");
        let kept = store.find(wsk, None, "k").expect("held by its finalizer");
        assert_eq!(kept["metadata"]["finalizers"], json!([KIND_FINALIZER]));
        assert_eq!(kept["status"]["workspaces"], json!(1));
        store
            .delete(kind("Workspace"), Some("ns"), "a", &opts)
            .unwrap();
        reconcile_kind(&ctx, "k");
        assert!(
            store.find(wsk, None, "k").is_none(),
            "the finalizer is released and the kind is gone"
        );
    }
}

//! The WorkspaceKind side of the controller (kubeflow-workspaces.md §6): the protection
//! finalizer a Workspace adds to the kind it uses, `status.workspaces` with the per-option
//! counts, and releasing the finalizer once a deleted kind has no Workspaces left.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{KIND_FINALIZER, WorkspaceController};
use crate::sim::controllers::{Ctx, Next, kind};
use crate::sim::json::text_at;

impl WorkspaceController {
    /// Adds the protection finalizer to a kind in use (not to one being deleted).
    pub(super) fn protect_kind(&self, ctx: &Ctx, wsk: &Value) {
        let has = wsk
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x == KIND_FINALIZER));
        if has || wsk.pointer("/metadata/deletionTimestamp").is_some() {
            return;
        }
        let name = text_at(wsk, "/metadata/name");
        let _ = ctx
            .store
            .modify(kind("WorkspaceKind"), None, name, false, false, |cur| {
                let mut c = cur.clone();
                let mut fs = c
                    .pointer("/metadata/finalizers")
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

    /// The WorkspaceKind side: `status.workspaces` and per-option counts, and the
    /// protection finalizer released once a deleted kind has no Workspaces.
    pub(super) fn reconcile_kind(&self, ctx: &Ctx, name: &str) -> Next {
        let k = kind("WorkspaceKind");
        let Some(wsk) = ctx.store.find(k, None, name) else {
            return Next::Done;
        };
        let users: Vec<Arc<Value>> =
            ctx.store
                .by_field(kind("Workspace"), None, "/spec/kind", name);
        let counts = |option: &str| -> Vec<Value> {
            // One pass over the users: how many chose each id.
            let chosen = format!("/spec/podTemplate/options/{option}");
            let mut tally: std::collections::HashMap<&str, usize> = Default::default();
            for w in &users {
                *tally.entry(text_at(w, &chosen)).or_default() += 1;
            }
            wsk.pointer(&format!("/spec/podTemplate/options/{option}/values"))
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
        if wsk.pointer("/metadata/deletionTimestamp").is_some() && users.is_empty() {
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
}

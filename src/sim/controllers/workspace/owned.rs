//! The objects a Workspace owns (kubeflow-workspaces.md §4.1), found by ownerReference uid
//! (the store's owner index):
//! the ServiceAccount `ws-<name>` and the one StatefulSet and Service, created when missing
//! and updated when their managed fields differ. More than one of a kind is an `Error`.

use std::sync::Arc;

use serde_json::Value;

use super::WorkspaceController;
use super::template::{self, controlled_by};
use crate::sim::controllers::{Ctx, kind};
use crate::sim::json::text_at;

/// What reconciling one owned object found.
pub(super) enum Owned {
    Found(Arc<Value>),
    /// A state message for `Error` (multiple owned objects, a name taken).
    Error(String),
    Retry,
}

impl WorkspaceController {
    fn owned(&self, ctx: &Ctx, kind_name: &str, ws: &Value) -> Vec<Arc<Value>> {
        let uid = text_at(ws, "/metadata/uid");
        let ns = Some(text_at(ws, "/metadata/namespace"));
        ctx.store
            .owned_by(kind(kind_name), ns, uid)
            .into_iter()
            .filter(|o| controlled_by(o, uid))
            .collect()
    }

    fn multiple(kind_name: &str, objs: &[Arc<Value>]) -> Owned {
        let names: Vec<&str> = objs.iter().map(|o| text_at(o, "/metadata/name")).collect();
        Owned::Error(format!(
            "Workspace owns multiple {kind_name}s: {}",
            names.join(", ")
        ))
    }

    /// The ServiceAccount `ws-<name>`: created if missing; a same-named one the Workspace
    /// does not own is an error.
    pub(super) fn ensure_service_account(&self, ctx: &Ctx, ws: &Value) -> Owned {
        let owned = self.owned(ctx, "ServiceAccount", ws);
        if owned.len() > 1 {
            return Self::multiple("ServiceAccount", &owned);
        }
        let desired = template::service_account(ws);
        let ns = Some(text_at(ws, "/metadata/namespace"));
        let sa = kind("ServiceAccount");
        if let Some(found) = owned.into_iter().next() {
            let Some(next) = template::updated("ServiceAccount", &desired, &found) else {
                return Owned::Found(found);
            };
            let name = text_at(&found, "/metadata/name");
            return match ctx.store.modify(sa, ns, name, false, false, |_| Ok(next)) {
                Ok(o) => Owned::Found(o),
                Err(_) => Owned::Retry,
            };
        }
        match ctx.store.create(sa, ns, desired.clone(), false) {
            Ok(o) => Owned::Found(o),
            Err(e) if e.reason == "AlreadyExists" => {
                let name = text_at(&desired, "/metadata/name");
                match ctx.store.find(sa, ns, name) {
                    Some(existing) if !controlled_by(&existing, text_at(ws, "/metadata/uid")) => {
                        Owned::Error(format!(
                            "Workspace ServiceAccount {name} already exists and is not owned by the Workspace"
                        ))
                    }
                    _ => Owned::Retry,
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "ServiceAccount not created");
                Owned::Retry
            }
        }
    }

    /// The one owned StatefulSet or Service: created from `desired` if missing, updated
    /// when its managed fields differ.
    pub(super) fn ensure_owned(
        &self,
        ctx: &Ctx,
        kind_name: &'static str,
        ws: &Value,
        desired: &Value,
    ) -> Owned {
        let owned = self.owned(ctx, kind_name, ws);
        let k = kind(kind_name);
        let ns = Some(text_at(ws, "/metadata/namespace"));
        match owned.as_slice() {
            [] => match ctx.store.create(k, ns, desired.clone(), false) {
                Ok(o) => Owned::Found(o),
                Err(e) => {
                    tracing::debug!(kind = kind_name, error = %e, "owned object not created");
                    Owned::Retry
                }
            },
            [found] => {
                if template::updated(kind_name, desired, found).is_none() {
                    return Owned::Found(found.clone());
                }
                let name = text_at(found, "/metadata/name");
                let written = ctx.store.modify(k, ns, name, false, false, |cur| {
                    Ok(template::updated(kind_name, desired, cur).unwrap_or_else(|| cur.clone()))
                });
                match written {
                    Ok(o) => Owned::Found(o),
                    Err(_) => Owned::Retry,
                }
            }
            many => Self::multiple(kind_name, many),
        }
    }
}

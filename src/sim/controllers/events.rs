//! Recording core/v1 Events about objects, as controllers and the kubelet do.

use serde_json::{Value, json};

use super::{Ctx, kind};
use crate::sim::json::Lookup as _;
use crate::sim::store::meta::{now_rfc3339, random_suffix};

/// Records an Event (`type_` is `Normal` or `Warning`) about `involved`.
pub fn record(
    ctx: &Ctx,
    involved: &Value,
    type_: &str,
    reason: &str,
    message: &str,
    component: &str,
) {
    let ns = crate::sim::json::str_at(involved, "/metadata/namespace").unwrap_or("default");
    let name = crate::sim::json::name_of(involved);
    let now = now_rfc3339();
    let ev = json!({
        "metadata": {"name": format!("{name}.{}", random_suffix()), "namespace": ns},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion"),
            "kind": involved.get("kind"),
            "name": name,
            "namespace": ns,
            "uid": involved.lookup("/metadata/uid"),
            "resourceVersion": involved.lookup("/metadata/resourceVersion"),
        },
        "reason": reason,
        "message": message,
        "type": type_,
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    });
    if let Err(e) = ctx.store.create(kind("Event"), Some(ns), ev, false) {
        tracing::debug!(error = %e, reason, "event not recorded");
    }
}

//! ResourceQuota: admission on pod create (403 Forbidden "exceeded quota", as the real API
//! server says it) and the quota controller that keeps `status.used` current. Supported
//! resources: `pods`, `count/pods` and `requests.nvidia.com/gpu` (extended resources are
//! quota'd by their `requests.` name only, as on a real cluster).

use serde_json::{Map, Value, json};

use super::scheduler::gpu_request;
use super::{Ctx, Next, ObjKey, Reconciler, kind};
use crate::sim::error::ApiError;
use crate::sim::json::Lookup as _;
use crate::sim::kinds::KindInfo;
use crate::sim::store::{Event, Lister};

const GPU_QUOTA: &str = "requests.nvidia.com/gpu";

fn quantity(v: &Value) -> i64 {
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or(0)
}

/// Whether a pod still counts against quota.
fn counts(pod: &Value) -> bool {
    pod.lookup("/metadata/deletionTimestamp").is_none()
        && !matches!(
            pod.lookup("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        )
}

/// What the pods of a namespace use, per supported quota resource.
fn usage(pods: &[std::sync::Arc<Value>]) -> Map<String, Value> {
    let live: Vec<_> = pods.iter().filter(|p| counts(p)).collect();
    let gpus: i64 = live.iter().map(|p| gpu_request(p)).sum();
    let mut m = Map::new();
    m.insert("pods".into(), json!(live.len().to_string()));
    m.insert("count/pods".into(), json!(live.len().to_string()));
    m.insert(GPU_QUOTA.into(), json!(gpus.to_string()));
    m
}

/// The admission check: refuses a pod that would exceed a quota of its namespace.
pub fn admit(kind_info: &KindInfo, obj: &Value, list: Lister<'_>) -> Result<(), ApiError> {
    if kind_info.kind != "Pod" {
        return Ok(());
    }
    let ns = obj.lookup("/metadata/namespace").and_then(Value::as_str);
    let name = obj
        .lookup("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let quotas = list.list(kind("ResourceQuota"), ns);
    if quotas.is_empty() {
        return Ok(());
    }
    let used = usage(&list.list(kind("Pod"), ns));
    let requested: [(&str, i64); 3] = [
        ("pods", 1),
        ("count/pods", 1),
        (GPU_QUOTA, gpu_request(obj)),
    ];
    for q in quotas {
        let Some(hard) = q.lookup("/spec/hard").and_then(Value::as_object) else {
            continue;
        };
        for (res, want) in requested {
            let Some(limit) = hard.get(res).map(quantity) else {
                continue;
            };
            let have = used.get(res).map(quantity).unwrap_or(0);
            if want > 0 && have + want > limit {
                let qname = q
                    .lookup("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                return Err(ApiError::forbidden(format!(
                    "pods \"{name}\" is forbidden: exceeded quota: {qname}, requested: {res}={want}, used: {res}={have}, limited: {res}={limit}"
                )));
            }
        }
    }
    Ok(())
}

/// Keeps every quota's `status.hard` and `status.used` current.
pub struct QuotaController;

impl Reconciler for QuotaController {
    fn name(&self) -> &'static str {
        "resourcequota"
    }

    fn primary(&self) -> &'static [&'static str] {
        &["ResourceQuota"]
    }

    fn keys_for(&self, ev: &Event) -> Vec<ObjKey> {
        match ev.kind.kind {
            "ResourceQuota" => vec![ObjKey::of(ev.kind, &ev.object)],
            // A pod changed: recount the quotas of its namespace (the empty name means all).
            "Pod" => vec![ObjKey {
                kind: kind("ResourceQuota"),
                namespace: ev.namespace.clone().unwrap_or_default(),
                name: String::new(),
            }],
            _ => Vec::new(),
        }
    }

    async fn reconcile(&self, ctx: &Ctx, key: &ObjKey) -> Next {
        let quotas = if key.name.is_empty() {
            ctx.store.all(key.kind, key.ns())
        } else {
            ctx.store
                .find(key.kind, key.ns(), &key.name)
                .into_iter()
                .collect()
        };
        if quotas.is_empty() {
            return Next::Done;
        }
        let used = usage(&ctx.store.all(kind("Pod"), key.ns()));
        for q in quotas {
            let name = q
                .lookup("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let hard = q.lookup("/spec/hard").cloned().unwrap_or(json!({}));
            let used_here: Map<String, Value> = hard
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| (k.clone(), used.get(k).cloned().unwrap_or(json!("0"))))
                .collect();
            let status = json!({"hard": hard, "used": used_here});
            if q.get("status") != Some(&status) {
                let _ = ctx
                    .store
                    .modify(key.kind, key.ns(), &name, true, false, |cur| {
                        let mut c = cur.clone();
                        c["status"] = status;
                        Ok(c)
                    });
            }
        }
        Next::Done
    }
}

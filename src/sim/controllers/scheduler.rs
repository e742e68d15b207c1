//! The scheduler: binds pending pods to nodes that satisfy their nodeSelector, tolerate the
//! node's NoSchedule taints and have enough free `nvidia.com/gpu`. A GPU counts as free only
//! once the pod holding it is gone. When nothing fits, the pod gets `PodScheduled=False`
//! with reason `Unschedulable` and the scheduler's usual message.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Ctx, Next, ObjKey, Reconciler, events, kind};
use crate::sim::json::str_at;
use crate::sim::store::Event;
use crate::sim::store::meta::now_rfc3339;
use crate::sim::truth::Transition;

pub use crate::platform::names::GPU_RESOURCE as GPU;
/// Node annotation counting GPUs that stay allocated with no pod (fault `gpu-not-released`).
pub const LEAKED_GPUS: &str = "sim.wsgate.dev/leaked-gpus";

pub struct Scheduler;

fn all_pending() -> ObjKey {
    ObjKey {
        kind: kind("Pod"),
        namespace: String::new(),
        name: String::new(),
    }
}

/// The GPUs a pod asks for (limits, else requests, over its containers).
pub fn gpu_request(pod: &Value) -> i64 {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let r = c.get("resources");
                    let q = r
                        .and_then(|r| r.pointer("/limits/nvidia.com~1gpu"))
                        .or_else(|| r.and_then(|r| r.pointer("/requests/nvidia.com~1gpu")));
                    q.and_then(|q| {
                        q.as_i64()
                            .or_else(|| q.as_str().and_then(|s| s.parse().ok()))
                    })
                    .unwrap_or(0)
                })
                .sum()
        })
        .unwrap_or(0)
}

/// GPUs in use on each node: every pod bound there that still exists, plus leaked ones.
pub fn gpus_in_use(ctx: &Ctx) -> BTreeMap<String, i64> {
    let mut used = BTreeMap::new();
    let nodes = ctx.store.all(kind("Node"), None);
    // Each node's pods, by the store's field index: pending pods are never read.
    for n in &nodes {
        let name = str_at(n, "/metadata/name").unwrap_or("");
        let bound = ctx
            .store
            .by_field(kind("Pod"), None, "/spec/nodeName", name);
        if !name.is_empty() && !bound.is_empty() {
            *used.entry(name.to_string()).or_insert(0) +=
                bound.iter().map(|p| gpu_request(p)).sum::<i64>();
        }
    }
    for n in nodes {
        let leaked = n
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(LEAKED_GPUS))
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or(0);
        if leaked > 0 {
            *used
                .entry(str_at(&n, "/metadata/name").unwrap_or("").to_string())
                .or_insert(0) += leaked;
        }
    }
    used
}

pub fn allocatable_gpus(node: &Value) -> i64 {
    node.pointer("/status/allocatable/nvidia.com~1gpu")
        .and_then(|q| {
            q.as_i64()
                .or_else(|| q.as_str().and_then(|s| s.parse().ok()))
        })
        .unwrap_or(0)
}

fn selector_matches(pod: &Value, node: &Value) -> bool {
    let Some(sel) = pod.pointer("/spec/nodeSelector").and_then(Value::as_object) else {
        return true;
    };
    let labels = node.pointer("/metadata/labels");
    sel.iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// The first NoSchedule/NoExecute taint of `node` that `pod` does not tolerate, as the
/// scheduler names it (`{key: value}`); `None` when the pod tolerates them all.
fn untolerated(pod: &Value, node: &Value) -> Option<String> {
    let tolerations = pod.pointer("/spec/tolerations").and_then(Value::as_array);
    node.pointer("/spec/taints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|t| matches!(str_at(t, "/effect"), Some("NoSchedule" | "NoExecute")))
        .find(|taint| {
            !tolerations.into_iter().flatten().any(|tol| {
                let key_ok = str_at(tol, "/key")
                    .is_none_or(|k| k.is_empty() || Some(k) == str_at(taint, "/key"));
                let op_exists = str_at(tol, "/operator") == Some("Exists");
                let value_ok = op_exists
                    || str_at(tol, "/value").unwrap_or("") == str_at(taint, "/value").unwrap_or("");
                let effect_ok = str_at(tol, "/effect")
                    .is_none_or(|e| e.is_empty() || Some(e) == str_at(taint, "/effect"));
                key_ok && value_ok && effect_ok
            })
        })
        .map(|t| {
            format!(
                "{{{}: {}}}",
                str_at(t, "/key").unwrap_or(""),
                str_at(t, "/value").unwrap_or("")
            )
        })
}

impl Reconciler for Scheduler {
    fn name(&self) -> &'static str {
        "scheduler"
    }

    fn primary(&self) -> &'static [&'static str] {
        &["Pod"]
    }

    fn keys_for(&self, ev: &Event) -> Vec<ObjKey> {
        match ev.kind.kind {
            "Pod" if str_at(&ev.object, "/spec/nodeName").is_none_or(str::is_empty) => {
                vec![ObjKey::of(ev.kind, &ev.object)]
            }
            // Capacity changed (a pod left a node, or a node changed): retry every pending
            // pod, which the empty key stands for.
            "Node" => vec![all_pending()],
            "Pod" if ev.etype == crate::sim::store::EventType::Deleted => vec![all_pending()],
            _ => Vec::new(),
        }
    }

    async fn reconcile(&self, ctx: &Ctx, key: &ObjKey) -> Next {
        // The empty key means "every pending pod".
        // Pending pods are retried oldest first, as kube-scheduler's queue orders them.
        let keys: Vec<ObjKey> = if key.name.is_empty() {
            // Unbound pods (no nodeName), by the store's field index.
            let mut pending = ctx.store.by_field(key.kind, None, "/spec/nodeName", "");
            pending.sort_by(|a, b| {
                let at = |p: &Value| {
                    (
                        str_at(p, "/metadata/creationTimestamp")
                            .unwrap_or("")
                            .to_string(),
                        str_at(p, "/metadata/name").unwrap_or("").to_string(),
                    )
                };
                at(a).cmp(&at(b))
            });
            pending.iter().map(|p| ObjKey::of(key.kind, p)).collect()
        } else {
            vec![key.clone()]
        };
        for k in keys {
            schedule_one(ctx, &k);
        }
        Next::Done
    }
}

fn schedule_one(ctx: &Ctx, key: &ObjKey) {
    let Some(pod) = ctx.store.find(key.kind, key.ns(), &key.name) else {
        return;
    };
    if str_at(&pod, "/spec/nodeName").is_some_and(|n| !n.is_empty())
        || pod.pointer("/metadata/deletionTimestamp").is_some()
    {
        return;
    }
    let want = gpu_request(&pod);
    let used = gpus_in_use(ctx);
    let nodes = ctx.store.all(kind("Node"), None);
    let (mut no_selector, mut no_gpu) = (0, 0);
    // Untolerated taints by how the scheduler names them, with their node counts.
    let mut taints: BTreeMap<String, usize> = BTreeMap::new();
    let mut chosen = None;
    for node in &nodes {
        let name = str_at(node, "/metadata/name").unwrap_or("");
        if !selector_matches(&pod, node) {
            no_selector += 1;
        } else if let Some(t) = untolerated(&pod, node) {
            *taints.entry(t).or_default() += 1;
        } else if want > 0 && allocatable_gpus(node) - used.get(name).copied().unwrap_or(0) < want {
            no_gpu += 1;
        } else {
            chosen = Some(name.to_string());
            break;
        }
    }
    let now = now_rfc3339();
    match chosen {
        Some(node) => {
            let bound = ctx
                .store
                .modify(key.kind, key.ns(), &key.name, false, false, |cur| {
                    let mut c = cur.clone();
                    c["spec"]["nodeName"] = json!(node);
                    Ok(c)
                });
            if bound.is_err() {
                return;
            }
            let _ = ctx
                .store
                .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
                    let mut c = cur.clone();
                    set_condition(&mut c, "PodScheduled", "True", None, None, &now);
                    if c.pointer("/status/phase").is_none() {
                        c["status"]["phase"] = json!("Pending");
                    }
                    Ok(c)
                });
            ctx.truth.record(
                Transition::PodScheduled,
                key.ns(),
                &key.name,
                Some(&node),
                None,
            );
            if want > 0 {
                ctx.truth.record(
                    Transition::GpuAllocated,
                    key.ns(),
                    &key.name,
                    Some(&node),
                    Some(format!("{want} GPU")),
                );
            }
        }
        None => {
            let mut reasons = Vec::new();
            if no_selector > 0 {
                reasons.push(format!(
                    "{no_selector} node(s) didn't match Pod's node affinity/selector"
                ));
            }
            for (taint, n) in &taints {
                reasons.push(format!("{n} node(s) had untolerated taint {taint}"));
            }
            if no_gpu > 0 {
                reasons.push(format!("{no_gpu} Insufficient {GPU}"));
            }
            let total = nodes.len();
            let message = format!(
                "0/{total} nodes are available: {}. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling.",
                reasons.join(", ")
            );
            let already = pod
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        str_at(c, "/type") == Some("PodScheduled")
                            && str_at(c, "/message") == Some(message.as_str())
                    })
                });
            if already {
                return;
            }
            let _ = ctx
                .store
                .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
                    let mut c = cur.clone();
                    set_condition(
                        &mut c,
                        "PodScheduled",
                        "False",
                        Some("Unschedulable"),
                        Some(&message),
                        &now,
                    );
                    c["status"]["phase"] = json!("Pending");
                    Ok(c)
                });
            ctx.truth.record(
                Transition::PodUnschedulable,
                key.ns(),
                &key.name,
                None,
                Some(message.clone()),
            );
            events::record(
                ctx,
                &pod,
                "Warning",
                "FailedScheduling",
                &message,
                "default-scheduler",
            );
        }
    }
}

/// Sets (or replaces) a pod condition.
pub fn set_condition(
    pod: &mut Value,
    type_: &str,
    status: &str,
    reason: Option<&str>,
    message: Option<&str>,
    now: &str,
) {
    if !pod
        .pointer("/status/conditions")
        .is_some_and(Value::is_array)
    {
        pod["status"]["conditions"] = json!([]);
    }
    let conds = pod["status"]["conditions"]
        .as_array_mut()
        .expect("conditions is an array");
    let mut cond =
        json!({"type": type_, "status": status, "lastProbeTime": null, "lastTransitionTime": now});
    if let Some(r) = reason {
        cond["reason"] = json!(r);
    }
    if let Some(m) = message {
        cond["message"] = json!(m);
    }
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

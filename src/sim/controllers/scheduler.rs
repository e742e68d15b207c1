//! The scheduler: binds pending pods to nodes that satisfy their nodeSelector, tolerate the
//! node's NoSchedule taints and have enough free `nvidia.com/gpu`. A GPU counts as free only
//! once the pod holding it is gone. When nothing fits, the pod gets `PodScheduled=False`
//! with reason `Unschedulable` and the scheduler's usual message.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};

use super::{Ctx, Next, ObjKey, Reconciler, events, kind, lock};
use crate::sim::json::Lookup as _;
use crate::sim::json::str_at;
use crate::sim::store::Event;
use crate::sim::store::meta::now_rfc3339;
use crate::sim::truth::Transition;

pub use crate::platform::names::GPU_RESOURCE as GPU;
/// Node annotation counting GPUs that stay allocated with no pod (fault `gpu-not-released`).
pub const LEAKED_GPUS: &str = "sim.wsgate.dev/leaked-gpus";

/// The scheduler keeps what it knows of the nodes between reconciles, as kube-scheduler's
/// cache does (`pkg/scheduler/backend/cache`): the GPUs in use per node, counting its own
/// bindings as it makes them (upstream's assumed pods), and which pod signatures fit nowhere.
/// A reconcile reads the nodes afresh only after an event that may free capacity or change a
/// node: a pod deleted, or any Node event. A pod bound by another client only takes
/// capacity; a node found taken that way is caught before binding (`Cluster::still_fits`).
#[derive(Default)]
pub struct Scheduler {
    cache: std::sync::Mutex<Option<(u64, Cluster)>>,
    /// Bumped by every event that makes the cache stale.
    epoch: std::sync::atomic::AtomicU64,
}

impl Scheduler {
    fn stale(&self) {
        self.epoch.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }
}

fn all_pending() -> ObjKey {
    ObjKey {
        kind: kind("Pod"),
        namespace: String::new(),
        name: String::new(),
    }
}

/// The GPUs a pod asks for (limits, else requests, over its containers).
pub fn gpu_request(pod: &Value) -> i64 {
    pod.lookup("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let r = c.get("resources");
                    let q = r
                        .and_then(|r| r.lookup("/limits/nvidia.com~1gpu"))
                        .or_else(|| r.and_then(|r| r.lookup("/requests/nvidia.com~1gpu")));
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

/// GPUs in use on one node: every pod bound there that still exists (by the store's field
/// index, so pending pods are never read), plus leaked ones.
fn node_gpus_in_use(ctx: &Ctx, node: &Value) -> i64 {
    let name = str_at(node, "/metadata/name").unwrap_or("");
    let bound: i64 = if name.is_empty() {
        0
    } else {
        ctx.store
            .by_field(kind("Pod"), None, "/spec/nodeName", name)
            .iter()
            .map(|p| gpu_request(p))
            .sum()
    };
    let leaked = node
        .lookup("/metadata/annotations")
        .and_then(|a| a.get(LEAKED_GPUS))
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or(0);
    bound + leaked.max(0)
}

/// GPUs in use on each of `nodes` that has any in use.
pub fn gpus_in_use(ctx: &Ctx, nodes: &[Arc<Value>]) -> BTreeMap<String, i64> {
    nodes
        .iter()
        .map(|n| {
            (
                str_at(n, "/metadata/name").unwrap_or(""),
                node_gpus_in_use(ctx, n),
            )
        })
        .filter(|(_, used)| *used > 0)
        .map(|(name, used)| (name.to_string(), used))
        .collect()
}

pub fn allocatable_gpus(node: &Value) -> i64 {
    node.lookup("/status/allocatable/nvidia.com~1gpu")
        .and_then(|q| {
            q.as_i64()
                .or_else(|| q.as_str().and_then(|s| s.parse().ok()))
        })
        .unwrap_or(0)
}

fn selector_matches(pod: &Value, node: &Value) -> bool {
    let Some(sel) = pod.lookup("/spec/nodeSelector").and_then(Value::as_object) else {
        return true;
    };
    let labels = node.lookup("/metadata/labels");
    sel.iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// The first NoSchedule/NoExecute taint of `node` that `pod` does not tolerate, as the
/// scheduler names it (`{key: value}`); `None` when the pod tolerates them all.
fn untolerated(pod: &Value, node: &Value) -> Option<String> {
    let tolerations = pod.lookup("/spec/tolerations").and_then(Value::as_array);
    node.lookup("/spec/taints")
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

    /// Events were missed (a bound pod's deletion or a Node event among them, perhaps):
    /// the nodes are read afresh, and the relist retries every pod.
    fn missed_events(&self) {
        self.stale();
    }

    fn keys_for(&self, ev: &Event) -> Vec<ObjKey> {
        match ev.kind.kind {
            "Pod" if str_at(&ev.object, "/spec/nodeName").is_none_or(str::is_empty) => {
                vec![ObjKey::of(ev.kind, &ev.object)]
            }
            // Capacity changed (a pod left a node, or a node changed): retry every pending
            // pod, which the empty key stands for, with the nodes read afresh.
            "Node" => {
                self.stale();
                vec![all_pending()]
            }
            "Pod" if ev.etype == crate::sim::store::EventType::Deleted => {
                self.stale();
                vec![all_pending()]
            }
            _ => Vec::new(),
        }
    }

    async fn reconcile(&self, ctx: &Ctx, key: &ObjKey) -> Next {
        // The empty key means "every pending pod".
        // Pending pods are retried oldest first, as kube-scheduler's queue orders them.
        let keys: Vec<ObjKey> = if key.name.is_empty() {
            // Unbound pods (no nodeName), by the store's field index.
            let mut pending = ctx.store.by_field(key.kind, None, "/spec/nodeName", "");
            fn at(p: &Value) -> (&str, &str) {
                (
                    str_at(p, "/metadata/creationTimestamp").unwrap_or(""),
                    str_at(p, "/metadata/name").unwrap_or(""),
                )
            }
            pending.sort_by(|a, b| at(a).cmp(&at(b)));
            pending.iter().map(|p| ObjKey::of(key.kind, p)).collect()
        } else {
            vec![key.clone()]
        };
        // The nodes and their GPUs in use, from the cache unless an event made it stale since
        // (then read afresh), kept up to date by this scheduler's own bindings; a node that
        // changed meanwhile is caught before binding.
        let epoch = self.epoch.load(std::sync::atomic::Ordering::Acquire);
        let cached = lock(&self.cache).take();
        let mut cluster = match cached {
            Some((at, cluster)) if at == epoch => cluster,
            _ => Cluster::read(ctx),
        };
        for k in keys {
            schedule_one(ctx, &k, &mut cluster);
        }
        *lock(&self.cache) = Some((epoch, cluster));
        Next::Done
    }
}

/// What the scheduler knows of the nodes.
struct Cluster {
    used: BTreeMap<String, i64>,
    nodes: Vec<Arc<Value>>,
    /// The unschedulable message for each pod signature (GPUs wanted, node selector,
    /// tolerations) found to fit nowhere. Between two reads of the nodes the scheduler only
    /// takes GPUs, so a pod that fit nowhere still fits nowhere, for the same reasons, until
    /// the nodes are read again.
    unschedulable: HashMap<String, String>,
}

impl Cluster {
    fn read(ctx: &Ctx) -> Self {
        let nodes = ctx.store.all(kind("Node"), None);
        Self {
            used: gpus_in_use(ctx, &nodes),
            nodes,
            unschedulable: HashMap::new(),
        }
    }

    /// Whether `node` is still the object this pass read (not deleted, relabelled or
    /// tainted since) and, read afresh, still has `want` GPUs free: another client may have
    /// bound a pod there (a pod created with `spec.nodeName`).
    fn still_fits(&self, ctx: &Ctx, node: &str, want: i64) -> bool {
        let Some(fresh) = ctx.store.find(kind("Node"), None, node) else {
            return false;
        };
        let unchanged = self
            .nodes
            .iter()
            .any(|n| str_at(n, "/metadata/name") == Some(node) && Arc::ptr_eq(n, &fresh));
        unchanged && (want == 0 || allocatable_gpus(&fresh) - node_gpus_in_use(ctx, &fresh) >= want)
    }

    /// The node `pod` goes to (`Ok`), or why none fits (`Err`, the scheduler's message).
    fn place(&mut self, pod: &Value, want: i64) -> Result<String, String> {
        let signature = serde_json::json!([
            want,
            pod.lookup("/spec/nodeSelector"),
            pod.lookup("/spec/tolerations")
        ])
        .to_string();
        if let Some(message) = self.unschedulable.get(&signature) {
            return Err(message.clone());
        }
        let (mut no_selector, mut no_gpu) = (0, 0);
        // Untolerated taints by how the scheduler names them, with their node counts.
        let mut taints: BTreeMap<String, usize> = BTreeMap::new();
        for node in &self.nodes {
            let name = str_at(node, "/metadata/name").unwrap_or("");
            if !selector_matches(pod, node) {
                no_selector += 1;
            } else if let Some(t) = untolerated(pod, node) {
                *taints.entry(t).or_default() += 1;
            } else if want > 0
                && allocatable_gpus(node) - self.used.get(name).copied().unwrap_or(0) < want
            {
                no_gpu += 1;
            } else {
                return Ok(name.to_string());
            }
        }
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
        let total = self.nodes.len();
        let message = format!(
            "0/{total} nodes are available: {}. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling.",
            reasons.join(", ")
        );
        self.unschedulable.insert(signature, message.clone());
        Err(message)
    }
}

fn schedule_one(ctx: &Ctx, key: &ObjKey, cluster: &mut Cluster) {
    let Some(pod) = ctx.store.find(key.kind, key.ns(), &key.name) else {
        return;
    };
    if str_at(&pod, "/spec/nodeName").is_some_and(|n| !n.is_empty())
        || pod.lookup("/metadata/deletionTimestamp").is_some()
    {
        return;
    }
    let want = gpu_request(&pod);
    let mut chosen = cluster.place(&pod, want);
    if let Ok(node) = &chosen
        && !cluster.still_fits(ctx, node, want)
    {
        *cluster = Cluster::read(ctx);
        chosen = cluster.place(&pod, want);
    }
    let now = now_rfc3339();
    match chosen {
        Ok(node) => {
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
            *cluster.used.entry(node.clone()).or_insert(0) += want;
            let _ = ctx
                .store
                .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
                    let mut c = cur.clone();
                    set_condition(&mut c, "PodScheduled", "True", None, None, &now);
                    if c.lookup("/status/phase").is_none() {
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
        Err(message) => {
            let already = pod
                .lookup("/status/conditions")
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

/// Sets (or replaces) a pod condition (with `lastProbeTime`, as the kubelet writes them).
pub fn set_condition(
    pod: &mut Value,
    type_: &str,
    status: &str,
    reason: Option<&str>,
    message: Option<&str>,
    now: &str,
) {
    let mut cond =
        json!({"type": type_, "status": status, "lastProbeTime": null, "lastTransitionTime": now});
    if let Some(r) = reason {
        cond["reason"] = json!(r);
    }
    if let Some(m) = message {
        cond["message"] = json!(m);
    }
    crate::sim::json::upsert_condition(pod, cond);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::sim::store::DeleteOptions;

    fn node(name: &str, gpus: i64, pool: &str) -> Arc<Value> {
        Arc::new(json!({"metadata": {"name": name, "labels": {"pool": pool}},
            "status": {"allocatable": {"nvidia.com/gpu": gpus.to_string()}}}))
    }

    fn pod(pool: &str) -> Value {
        json!({"spec": {"nodeSelector": {"pool": pool}}})
    }

    /// Creates [`node`] in the store; its status written through /status afterwards (it is
    /// not settable on create), as a kubelet does. Returns the node as created.
    fn add_node(ctx: &Ctx, name: &str, gpus: i64) -> Arc<Value> {
        let n = (*node(name, gpus, "t4")).clone();
        let created = ctx
            .store
            .create(kind("Node"), None, n.clone(), false)
            .unwrap();
        ctx.store
            .modify(kind("Node"), None, name, true, false, |cur| {
                let mut c = cur.clone();
                c["status"] = n["status"].clone();
                Ok(c)
            })
            .unwrap();
        created
    }

    #[test]
    fn a_pass_places_by_free_gpus_and_remembers_who_fits_nowhere() {
        let mut cluster = Cluster {
            used: [("a".to_string(), 1)].into(),
            nodes: vec![node("a", 1, "t4"), node("b", 1, "t4"), node("c", 4, "l4")],
            unschedulable: HashMap::new(),
        };
        assert_eq!(cluster.place(&pod("t4"), 1), Ok("b".to_string()));
        cluster.used.insert("b".into(), 1);
        let full = cluster.place(&pod("t4"), 1).unwrap_err();
        assert!(
            full.starts_with("0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 Insufficient nvidia.com/gpu."),
            "{full}"
        );
        // Remembered until the nodes are read again: the same answer without reading them.
        cluster.nodes.clear();
        assert_eq!(cluster.place(&pod("t4"), 1), Err(full));
        // Another signature is worked out afresh.
        assert!(
            cluster
                .place(&pod("l4"), 1)
                .unwrap_err()
                .starts_with("0/0 nodes")
        );
    }

    #[test]
    fn a_node_changed_or_filled_by_another_client_since_the_pass_read_it_is_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        let (_stop, ctx) = crate::sim::controllers::tests::test_ctx_with_ns(dir.path());
        let create = |k: &str, ns: Option<&str>, obj: Value| {
            ctx.store.create(kind(k), ns, obj, false).unwrap();
        };
        for name in ["a", "b"] {
            add_node(&ctx, name, 1);
        }
        let cluster = Cluster::read(&ctx);
        assert!(cluster.still_fits(&ctx, "a", 1));
        // Another client binds a one-GPU pod to `a` directly.
        create(
            "Pod",
            Some("ns"),
            json!({"metadata": {"name": "direct"}, "spec": {"nodeName": "a", "containers": [
                {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}),
        );
        assert!(!cluster.still_fits(&ctx, "a", 1), "its GPU is taken");
        assert!(
            cluster.still_fits(&ctx, "a", 0),
            "a pod without GPUs still fits"
        );
        // `b` is tainted after the pass read it.
        ctx.store
            .modify(kind("Node"), None, "b", false, false, |cur| {
                let mut n = cur.clone();
                n["spec"]["taints"] = json!([{"key": "k", "effect": "NoSchedule"}]);
                Ok(n)
            })
            .unwrap();
        assert!(!cluster.still_fits(&ctx, "b", 1));
        assert!(!cluster.still_fits(&ctx, "gone", 0));
        // Read afresh, the pass knows both.
        let fresh = Cluster::read(&ctx);
        assert_eq!(fresh.used.get("a"), Some(&1));
        assert!(fresh.still_fits(&ctx, "b", 1));
    }

    #[tokio::test]
    async fn the_scheduler_schedules_from_its_cache_until_a_pod_deletion_node_event_or_relist() {
        let dir = tempfile::tempdir().unwrap();
        let (_stop, ctx) = crate::sim::controllers::tests::test_ctx_with_ns(dir.path());
        add_node(&ctx, "a", 1);
        let create_pod = |name: &str| {
            let pod = json!({"metadata": {"name": name}, "spec": {"nodeSelector": {"pool": "t4"},
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}});
            ctx.store
                .create(kind("Pod"), Some("ns"), pod, false)
                .unwrap();
        };
        let key = |name: &str| ObjKey {
            kind: kind("Pod"),
            namespace: "ns".into(),
            name: name.into(),
        };
        let node_of = |name: &str| {
            ctx.store
                .find(kind("Pod"), Some("ns"), name)
                .and_then(|p| str_at(&p, "/spec/nodeName").map(str::to_string))
        };
        let unschedulable = |name: &str| {
            let p = ctx.store.find(kind("Pod"), Some("ns"), name).unwrap();
            node_of(name).is_none()
                && str_at(&p, "/status/conditions/0/reason") == Some("Unschedulable")
        };
        // Deleted behind the scheduler's back: it has not seen the event yet.
        let delete_pod = |name: &str| {
            let Ok(crate::sim::store::DeleteOutcome::Deleted(gone)) =
                ctx.store
                    .delete(kind("Pod"), Some("ns"), name, &DeleteOptions::default())
            else {
                panic!("{name} is deleted at once");
            };
            gone
        };
        let event = |kind_name: &str, etype, object| Event {
            rv: 1,
            kind: kind(kind_name),
            namespace: (kind_name == "Pod").then(|| "ns".to_string()),
            etype,
            object,
            previous: None,
            encoded: Default::default(),
            at: std::time::Instant::now(),
        };
        let s = Scheduler::default();
        let in_use = |node: &str| {
            lock(&s.cache)
                .as_ref()
                .and_then(|(_, c)| c.used.get(node).copied())
        };
        create_pod("p1");
        create_pod("p2");
        s.reconcile(&ctx, &key("p1")).await;
        assert_eq!(in_use("a"), Some(1), "its own binding is counted at once");
        s.reconcile(&ctx, &key("p2")).await;
        assert_eq!(node_of("p1").as_deref(), Some("a"));
        assert!(unschedulable("p2"));

        // 1. A relist after missed events: the cache still counted p1's GPU, as
        // kube-scheduler's does until its informer delivers the deletion; the relist
        // reads the nodes afresh.
        delete_pod("p1");
        s.reconcile(&ctx, &key("p2")).await;
        assert!(unschedulable("p2"), "scheduled from the cache");
        crate::sim::controllers::relisted(&ctx, &s);
        s.reconcile(&ctx, &key("p2")).await;
        assert_eq!(node_of("p2").as_deref(), Some("a"));

        // 2. A bound pod's deletion: its event makes the cache stale and queues every
        // pending pod.
        create_pod("p3");
        s.reconcile(&ctx, &key("p3")).await;
        assert!(unschedulable("p3"), "the cache counts p2's binding");
        let gone = delete_pod("p2");
        s.reconcile(&ctx, &key("p3")).await;
        assert!(unschedulable("p3"), "scheduled from the cache");
        let keys = s.keys_for(&event("Pod", crate::sim::store::EventType::Deleted, gone));
        assert_eq!(keys, vec![all_pending()]);
        s.reconcile(&ctx, &keys[0]).await;
        assert_eq!(node_of("p3").as_deref(), Some("a"));

        // 3. A Node event: a second node with a GPU is found.
        create_pod("p4");
        s.reconcile(&ctx, &key("p4")).await;
        assert!(unschedulable("p4"));
        let added = add_node(&ctx, "b", 1);
        s.reconcile(&ctx, &key("p4")).await;
        assert!(unschedulable("p4"), "scheduled from the cache");
        let keys = s.keys_for(&event("Node", crate::sim::store::EventType::Added, added));
        assert_eq!(keys, vec![all_pending()]);
        s.reconcile(&ctx, &keys[0]).await;
        assert_eq!(node_of("p4").as_deref(), Some("b"));
    }
}

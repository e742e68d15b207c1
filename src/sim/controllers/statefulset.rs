//! The StatefulSet controller: pods `<sts>-<ordinal>` from the template, one at a time,
//! scale-down by deletion, and the replica counts in status. A pod it cannot create (quota)
//! becomes a `FailedCreate` Warning event on the StatefulSet, as on a real cluster.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Ctx, Next, ObjKey, Reconciler, events, kind};
use crate::sim::json::Lookup as _;
use crate::sim::json::text_at;
use crate::sim::store::{DeleteOptions, Event};

pub struct StatefulSetController;

/// kube-controller-manager's `--concurrent-statefulset-syncs` default: five StatefulSets are
/// synced at once, by five workers over one queue (`kubernetes/kubernetes`
/// `pkg/controller/statefulset/config/v1alpha1/defaults.go`, `ConcurrentStatefulSetSyncs`;
/// `cmd/kube-controller-manager/app/apps.go` runs the controller with that many workers).
const CONCURRENT_STATEFULSET_SYNCS: usize = 5;

fn owner_sts(pod: &Value) -> Option<String> {
    pod.lookup("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("kind").and_then(Value::as_str) == Some("StatefulSet"))
        .and_then(|r| r.get("name").and_then(Value::as_str))
        .map(str::to_string)
}

fn is_ready(pod: &Value) -> bool {
    pod.lookup("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

impl Reconciler for StatefulSetController {
    fn name(&self) -> &'static str {
        "statefulset"
    }

    fn primary(&self) -> &'static [&'static str] {
        &["StatefulSet"]
    }

    fn keys_for(&self, ev: &Event) -> Vec<ObjKey> {
        match ev.kind.kind {
            "StatefulSet" => vec![ObjKey::of(ev.kind, &ev.object)],
            "Pod" => owner_sts(&ev.object)
                .map(|name| ObjKey {
                    kind: kind("StatefulSet"),
                    namespace: ev.namespace.clone().unwrap_or_default(),
                    name,
                })
                .into_iter()
                .collect(),
            _ => Vec::new(),
        }
    }

    fn workers(&self) -> usize {
        CONCURRENT_STATEFULSET_SYNCS
    }

    async fn reconcile(&self, ctx: &Ctx, key: &ObjKey) -> Next {
        let Some(sts) = ctx.store.find(key.kind, key.ns(), &key.name) else {
            return Next::Done;
        };
        if sts.lookup("/metadata/deletionTimestamp").is_some() {
            return Next::Done;
        }
        let pods = kind("Pod");
        let replicas = sts
            .lookup("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1)
            .max(0) as usize;
        let sts_uid = text_at(&sts, "/metadata/uid").to_string();
        // Its pods, by the store's owner index (a pod of an earlier StatefulSet of the same
        // name has another owner uid, and the garbage collector's to remove).
        let owned = ctx.store.owned_by(pods, key.ns(), &sts_uid);
        let pod_name = |i: usize| format!("{}-{i}", key.name);
        let mut next = Next::Done;
        // Scale down: delete the highest ordinals beyond the replica count.
        for p in &owned {
            let name = crate::sim::json::name_of(p);
            let ordinal = name
                .rsplit('-')
                .next()
                .and_then(|o| o.parse::<usize>().ok());
            if ordinal.is_some_and(|o| o >= replicas) && !crate::sim::json::is_deleting(p) {
                let _ = ctx
                    .store
                    .delete(pods, key.ns(), name, &DeleteOptions::default());
            }
        }
        // Scale up, in order: a pod is created only when the one before it is Ready.
        for i in 0..replicas {
            let name = pod_name(i);
            match owned
                .iter()
                .find(|p| p.lookup("/metadata/name").and_then(Value::as_str) == Some(&name))
            {
                Some(p) if is_ready(p) => continue,
                Some(_) => break,
                None => {
                    // Built by moving the copies in: `json!` would copy them again.
                    let template = |part: &str| {
                        sts.lookup(&format!("/spec/template/{part}"))
                            .cloned()
                            .unwrap_or(json!({}))
                    };
                    let mut pod = json!({});
                    pod["metadata"] = template("metadata");
                    pod["spec"] = template("spec");
                    let m = &mut pod["metadata"];
                    m["name"] = json!(name);
                    m["labels"]["statefulset.kubernetes.io/pod-name"] = json!(name);
                    m["ownerReferences"] = json!([{
                        "apiVersion": "apps/v1", "kind": "StatefulSet", "name": key.name,
                        "uid": sts.lookup("/metadata/uid"), "controller": true, "blockOwnerDeletion": true
                    }]);
                    if let Err(e) = ctx.store.create(pods, key.ns(), pod, false) {
                        events::record(
                            ctx,
                            &sts,
                            "Warning",
                            "FailedCreate",
                            &format!(
                                "create Pod {name} in StatefulSet {} failed error: {}",
                                key.name, e.message
                            ),
                            "statefulset-controller",
                        );
                        next = Next::After(Duration::from_millis(500));
                    }
                    break;
                }
            }
        }
        let mine = ctx.store.owned_by(pods, key.ns(), &sts_uid);
        let ready = mine.iter().filter(|p| is_ready(p)).count();
        let status = json!({
            "replicas": mine.len(),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentReplicas": mine.len(),
            "observedGeneration": sts.lookup("/metadata/generation"),
        });
        let _ = ctx
            .store
            .modify(key.kind, key.ns(), &key.name, true, false, |cur| {
                let mut c = cur.clone();
                c["status"] = status;
                Ok(c)
            });
        next
    }
}

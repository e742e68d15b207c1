//! Restore matching (gke-pod-snapshots.md §3): a new pod restores from a snapshot when
//!
//! 1. a PodSnapshotPolicy in its namespace selects it (and the snapshot's grouping-label
//!    values equal the pod's, when the policy groups);
//! 2. the snapshot is `Ready` and not being deleted: the one `podsnapshot.gke.io/ps-name`
//!    names, or else the most recent compatible one;
//! 3. its distilled pod-spec hash equals the pod's;
//! 4. the node the pod is bound to has the same GPU model, NVIDIA driver and machine series;
//! 5. the snapshot's memory image still exists.
//!
//! Anything else is a silent cold start: no condition, no event. The faults
//! `silent-cold-start` (no restore although a snapshot matches), `gpu-model-mismatch` (the
//! snapshot's GPU model reads as another) and `slow-restore` (ten times the restore time)
//! apply here.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{
    CHECKPOINTED_AT, DRIVER_VERSION, GPU_MODEL, LAST_ACCESS, MACHINE_SERIES, PS_NAME, SPEC_HASH,
    annotation, condition_status, fault_for_pod, fault_on, grouping_labels, is_deleting, label,
    name_of, now_rfc3339_ms, selector_matches, str_at, uid_of,
};
use crate::sim::controllers::{Ctx, kind};
use crate::sim::faults::Fault;
use crate::sim::json::Lookup as _;
use crate::sim::seed::DRIVER_ANNOTATION;

/// A restore the kubelet carries out when it starts a pod.
#[derive(Debug, Clone)]
pub struct RestorePlan {
    /// The PodSnapshot's name (a UUID GKE makes): what the `PodRestored` message carries.
    pub snapshot_name: String,
    /// Its `metadata.uid`: only the key of the memory image store and the bucket layout.
    pub snapshot_uid: String,
    /// How long the restore takes (the profile's restore time, with faults applied).
    pub delay: Duration,
}

/// How much `slow-restore` stretches a restore.
pub const SLOW_RESTORE_FACTOR: u32 = 10;

/// The distilled pod-spec hash: sha256 over what decides whether a memory image fits the
/// pod. It covers, per container (init containers too), `name`, `image`, `command`, `args`,
/// `securityContext` and `volumeMounts`, plus the pod's `volumes`, `securityContext` and
/// `runtimeClassName` (the sandbox). It leaves out `env` (the sources disagree; we follow
/// llm-d and the quoted docs), `resources`, `nodeSelector`, `tolerations`, `affinity`,
/// readiness gates, labels and annotations, so that a resume on a re-labelled or re-sized
/// pod still restores.
pub fn distilled_spec_hash(pod: &Value) -> String {
    let spec = pod.get("spec").cloned().unwrap_or(json!({}));
    let containers = |field: &str| -> Vec<Value> {
        spec.get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                json!({
                    "name": c.get("name"), "image": c.get("image"),
                    "command": c.get("command"), "args": c.get("args"),
                    "securityContext": c.get("securityContext"),
                    "volumeMounts": c.get("volumeMounts"),
                })
            })
            .collect()
    };
    let distilled = json!({
        "containers": containers("containers"),
        "initContainers": containers("initContainers"),
        "volumes": spec.get("volumes"),
        "securityContext": spec.get("securityContext"),
        "runtimeClassName": spec.get("runtimeClassName"),
    });
    let mut text = String::new();
    canonical(&distilled, &mut text);
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// JSON with object keys sorted, whatever map type serde_json was built with.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Why a snapshot does not fit a pod on a node (`None`: it fits).
pub fn incompatibility(ctx: &Ctx, snapshot: &Value, pod: &Value, node: &Value) -> Option<String> {
    incompatibility_with(ctx, snapshot, pod, node, true)
}

/// [`incompatibility`], with the `gpu-model-mismatch` fault counted or (to learn whether the
/// fault is what refused a restore) left out.
fn incompatibility_with(
    ctx: &Ctx,
    snapshot: &Value,
    pod: &Value,
    node: &Value,
    faults: bool,
) -> Option<String> {
    let recorded = |k: &str| annotation(snapshot, k).unwrap_or("");
    if recorded(SPEC_HASH) != distilled_spec_hash(pod) {
        return Some("the distilled pod-spec hash differs".into());
    }
    let node_model = label(node, crate::platform::names::ACCELERATOR_LABEL).unwrap_or("");
    let mismatch = faults
        && (fault_for_pod(ctx, pod, Fault::GpuModelMismatch)
            || fault_on(ctx, Fault::GpuModelMismatch, &[snapshot]));
    if mismatch || recorded(GPU_MODEL) != node_model {
        return Some(format!(
            "the GPU model differs (snapshot {:?}, node {node_model:?})",
            if mismatch {
                "another GPU model"
            } else {
                recorded(GPU_MODEL)
            }
        ));
    }
    let node_driver = annotation(node, DRIVER_ANNOTATION).unwrap_or("");
    if recorded(DRIVER_VERSION) != node_driver {
        return Some("the NVIDIA driver version differs".into());
    }
    let node_series = label(node, "cloud.google.com/machine-family").unwrap_or("");
    if recorded(MACHINE_SERIES) != node_series {
        return Some("the machine series differs".into());
    }
    if !ctx.pods.has_image(uid_of(snapshot)) {
        return Some("the snapshot's memory image is gone".into());
    }
    None
}

/// The Ready snapshots a pod could restore from (policy and grouping match), newest first.
pub fn candidates(ctx: &Ctx, pod: &Value) -> Vec<Arc<Value>> {
    let ns = str_at(pod, "/metadata/namespace");
    let labels = pod.lookup("/metadata/labels");
    let policies: Vec<_> = ctx
        .store
        .selecting(kind("PodSnapshotPolicy"), ns, labels)
        .into_iter()
        .filter(|p| !is_deleting(p))
        .filter(|p| selector_matches(p.lookup("/spec/selector").unwrap_or(&Value::Null), labels))
        .collect();
    if policies.is_empty() {
        return Vec::new();
    }
    // Each policy's snapshots, by the store's field index.
    let mut out: Vec<_> = policies
        .iter()
        .flat_map(|p| {
            ctx.store
                .by_field(kind("PodSnapshot"), ns, "/spec/policyName", name_of(p))
                .into_iter()
                .filter(|s| {
                    grouping_labels(p)
                        .iter()
                        .all(|l| label(s, l) == label(pod, l))
                })
        })
        .filter(|s| !is_deleting(s) && condition_status(s, "Ready") == Some("True"))
        .collect();
    out.sort_by(|a, b| {
        annotation(b, CHECKPOINTED_AT)
            .cmp(&annotation(a, CHECKPOINTED_AT))
            .then_with(|| name_of(a).cmp(name_of(b)))
    });
    out
}

/// Whether `pod` restores from a snapshot, and from which. `None` is a cold start.
///
/// A restore counts as an access for retention (`lastAccessTimeout`), so the chosen
/// snapshot's last-access time moves to now.
pub fn restore_plan(ctx: &Ctx, pod: &Value) -> Option<RestorePlan> {
    restore_plan_and_faults(ctx, pod).0
}

/// The snapshot a pod on `node` restores from (`faults`: with `gpu-model-mismatch` applied).
fn choose(ctx: &Ctx, pod: &Value, node: &Value, faults: bool) -> Option<Arc<Value>> {
    let candidates = candidates(ctx, pod);
    let pinned = annotation(pod, PS_NAME)
        .and_then(|ps| candidates.iter().find(|s| name_of(s) == ps))
        .cloned();
    match pinned {
        // A pinned snapshot is used or nothing is: GKE does not swap in another one.
        Some(s) => incompatibility_with(ctx, &s, pod, node, faults)
            .is_none()
            .then_some(s),
        None => candidates
            .into_iter()
            .find(|s| incompatibility_with(ctx, s, pod, node, faults).is_none()),
    }
}

/// [`restore_plan`], and the faults that changed it (a restore refused by
/// `silent-cold-start` or `gpu-model-mismatch`, slowed by `slow-restore`): the kubelet
/// records them once it starts the pod, so a fault that changed nothing is not counted.
pub fn restore_plan_and_faults(ctx: &Ctx, pod: &Value) -> (Option<RestorePlan>, Vec<Fault>) {
    let mut acted = Vec::new();
    let Some(node) = str_at(pod, "/spec/nodeName")
        .filter(|n| !n.is_empty())
        .and_then(|n| ctx.store.find(kind("Node"), None, n))
    else {
        return (None, acted);
    };
    let chosen = choose(ctx, pod, &node, true);
    if chosen.is_none()
        && fault_for_pod(ctx, pod, Fault::GpuModelMismatch)
        && choose(ctx, pod, &node, false).is_some()
    {
        acted.push(Fault::GpuModelMismatch);
    }
    let Some(chosen) = chosen else {
        return (None, acted);
    };
    if fault_for_pod(ctx, pod, Fault::SilentColdStart) {
        acted.push(Fault::SilentColdStart);
        return (None, acted);
    }
    let fixed = ctx.delays.of(
        crate::sim::delay::Purpose::Restore,
        crate::sim::json::uid_of(pod),
    );
    // The image's resident bytes, for a profile with a per-byte restore.
    let bytes = ctx
        .pods
        .image(crate::sim::json::uid_of(&chosen))
        .map_or(0, |i| i.resident_bytes);
    let mut delay = ctx.profile.timing.restore_duration(bytes, fixed);
    if fault_for_pod(ctx, pod, Fault::SlowRestore) {
        delay *= SLOW_RESTORE_FACTOR;
        acted.push(Fault::SlowRestore);
    }
    let name = name_of(&chosen).to_string();
    let now = now_rfc3339_ms();
    let _ = ctx.store.modify(
        kind("PodSnapshot"),
        str_at(pod, "/metadata/namespace"),
        &name,
        false,
        false,
        |cur| {
            let mut c = cur.clone();
            // Touch at most once a second: the kubelet asks again while the pod waits.
            let fresh = annotation(cur, LAST_ACCESS).is_some_and(|t| t.get(..19) == now.get(..19));
            if !fresh && !is_deleting(cur) {
                c["metadata"]["annotations"][LAST_ACCESS] = json!(now);
            }
            Ok(c)
        },
    );
    let plan = RestorePlan {
        snapshot_name: name,
        snapshot_uid: uid_of(&chosen).to_string(),
        delay,
    };
    (Some(plan), acted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(image: &str, env: &str, gpus: i64) -> Value {
        json!({"spec": {
            "runtimeClassName": "gvisor",
            "nodeSelector": {"a": env},
            "volumes": [{"name": "home-volume", "persistentVolumeClaim": {"claimName": "home"}}],
            "containers": [{"name": "main", "image": image, "env": [{"name": "X", "value": env}],
                            "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}})
    }

    #[test]
    fn the_hash_ignores_env_resources_and_node_selection_but_not_images_or_volumes() {
        let base = distilled_spec_hash(&pod("img:1", "a", 1));
        assert_eq!(base, distilled_spec_hash(&pod("img:1", "b", 2)));
        assert_ne!(base, distilled_spec_hash(&pod("img:2", "a", 1)));
        let mut other = pod("img:1", "a", 1);
        other["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = json!("other");
        assert_ne!(base, distilled_spec_hash(&other));
        let mut plain = pod("img:1", "a", 1);
        plain["spec"]
            .as_object_mut()
            .unwrap()
            .remove("runtimeClassName");
        assert_ne!(base, distilled_spec_hash(&plain));
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let mut a = String::new();
        canonical(
            &json!({"b": {"y": 1, "x": [2, {"q": 1, "p": 2}]}, "a": null}),
            &mut a,
        );
        assert_eq!(a, r#"{"a":null,"b":{"x":[2,{"p":2,"q":1}],"y":1}}"#);
    }
}

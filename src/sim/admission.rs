//! What a real API server does to every Pod it admits before anyone else sees it, where the
//! platform depends on it:
//!
//! - Defaulting (kubernetes `pkg/apis/core/v1/defaults.go`, `SetDefaults_Pod`): a container
//!   resource with a limit and no request gets the limit as its request.
//! - `ExtendedResourceToleration` (kubernetes
//!   `plugin/pkg/admission/extendedresourcetoleration/admission.go`, enabled on GKE): a pod
//!   that requests an extended resource (`nvidia.com/gpu`) tolerates the `NoSchedule` taint
//!   of that name, so the upstream `gpu_t4_spot` option, which names no toleration, lands on
//!   GPU nodes tainted `nvidia.com/gpu`.

use serde_json::{Value, json};

use super::error::ApiError;
use super::kinds::KindInfo;
use super::store::Lister;
use crate::sim::json::Lookup as _;

/// An extended resource: a qualified name outside the `kubernetes.io` domain (and not
/// `requests.`-prefixed), e.g. `nvidia.com/gpu`.
fn is_extended(name: &str) -> bool {
    name.contains('/')
        && !name.starts_with("requests.")
        && name
            .split('/')
            .next()
            .is_some_and(|d| d != "kubernetes.io" && !d.ends_with(".kubernetes.io"))
}

/// Requests defaulted from limits, in every container and init container.
fn default_requests(pod: &mut Value) {
    for list in ["containers", "initContainers"] {
        let Some(cs) = pod
            .pointer_mut(&format!("/spec/{list}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in cs {
            let Some(limits) = c
                .lookup("/resources/limits")
                .and_then(Value::as_object)
                .cloned()
            else {
                continue;
            };
            if !c
                .lookup("/resources/requests")
                .is_some_and(Value::is_object)
            {
                c["resources"]["requests"] = json!({});
            }
            if let Some(req) = c["resources"]["requests"].as_object_mut() {
                for (k, v) in limits {
                    req.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// The extended resources the pod's containers request, sorted.
fn extended_requests(pod: &Value) -> Vec<String> {
    let mut out: Vec<String> = ["containers", "initContainers"]
        .iter()
        .filter_map(|l| pod.lookup(&format!("/spec/{l}")).and_then(Value::as_array))
        .flatten()
        .filter_map(|c| c.lookup("/resources/requests").and_then(Value::as_object))
        .flat_map(|r| r.keys().filter(|k| is_extended(k)).cloned())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The Pod CREATE hook: defaulting, then the extended-resource tolerations (added unless an
/// equal one is there).
pub fn mutate(
    kind: &KindInfo,
    old: Option<&Value>,
    pod: &mut Value,
    _list: Lister<'_>,
) -> Result<(), ApiError> {
    if kind.kind != "Pod" || old.is_some() {
        return Ok(());
    }
    default_requests(pod);
    for resource in extended_requests(pod) {
        let toleration = json!({"key": resource, "operator": "Exists", "effect": "NoSchedule"});
        if !pod.lookup("/spec/tolerations").is_some_and(Value::is_array) {
            pod["spec"]["tolerations"] = json!([]);
        }
        if let Some(ts) = pod["spec"]["tolerations"].as_array_mut()
            && !ts.contains(&toleration)
        {
            ts.push(toleration);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the hook on a pod (`old` for an update) with no other objects to read.
    fn admit(old: Option<&Value>, pod: &mut Value) {
        let none = |_: &KindInfo, _: Option<&str>| Vec::new();
        mutate(crate::sim::controllers::kind("Pod"), old, pod, &none).unwrap();
    }

    #[test]
    fn a_gpu_limit_becomes_a_request_and_a_toleration_of_the_gpu_taint() {
        let mut pod = json!({"spec": {"containers": [{"name": "main",
            "resources": {"requests": {"cpu": "12"}, "limits": {"cpu": "12", "nvidia.com/gpu": "1"}}}]}});
        admit(None, &mut pod);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"],
            "1"
        );
        assert_eq!(
            pod["spec"]["tolerations"],
            json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
        );
        // Admitting it again adds nothing twice.
        admit(None, &mut pod);
        assert_eq!(pod["spec"]["tolerations"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn cpu_and_memory_get_no_toleration_and_updates_are_left_alone() {
        let mut pod = json!({"spec": {"containers": [{"name": "main",
            "resources": {"limits": {"cpu": "2", "memory": "4Gi"}}}]}});
        admit(None, &mut pod);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"]["memory"],
            "4Gi"
        );
        assert!(pod["spec"].get("tolerations").is_none());
        let mut gpu =
            json!({"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}});
        let old = gpu.clone();
        admit(Some(&old), &mut gpu);
        assert_eq!(gpu, old);
        assert!(!is_extended("hugepages-2Mi") && !is_extended("example.kubernetes.io/x"));
    }
}

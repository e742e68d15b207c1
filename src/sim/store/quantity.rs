//! Resource quantities as a real API server serves them: always strings. A client may send
//! `nvidia.com/gpu: 1` as a JSON number (`resource.Quantity` accepts one), but what the
//! server stores and serves is its canonical string form (`"1"`, `"500m"`); the official
//! Python client, for one, refuses a number where its model says string.

use serde_json::Value;

/// Turns every quantity of `obj` that is a JSON number into its string form, for the kinds
/// that carry quantities: Pod (container resources, overhead), StatefulSet (its pod
/// template), ResourceQuota (hard, used), Node (capacity, allocatable) and
/// PersistentVolumeClaim (requests, limits, capacity).
pub fn normalize(kind: &str, obj: &mut Value) {
    match kind {
        "Pod" => pod_spec(obj.pointer_mut("/spec")),
        "StatefulSet" => pod_spec(obj.pointer_mut("/spec/template/spec")),
        "ResourceQuota" => {
            for p in ["/spec/hard", "/status/hard", "/status/used"] {
                list(obj.pointer_mut(p));
            }
        }
        "Node" => {
            for p in ["/status/capacity", "/status/allocatable"] {
                list(obj.pointer_mut(p));
            }
        }
        "PersistentVolumeClaim" => {
            for p in [
                "/spec/resources/requests",
                "/spec/resources/limits",
                "/status/capacity",
            ] {
                list(obj.pointer_mut(p));
            }
        }
        _ => {}
    }
}

fn pod_spec(spec: Option<&mut Value>) {
    let Some(spec) = spec else { return };
    for field in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(cs) = spec.get_mut(field).and_then(Value::as_array_mut) {
            for c in cs {
                list(c.pointer_mut("/resources/limits"));
                list(c.pointer_mut("/resources/requests"));
            }
        }
    }
    list(spec.get_mut("overhead"));
    list(spec.pointer_mut("/resources/limits"));
    list(spec.pointer_mut("/resources/requests"));
}

/// A `ResourceList`: name -> quantity.
fn list(resources: Option<&mut Value>) {
    let Some(map) = resources.and_then(Value::as_object_mut) else {
        return;
    };
    for v in map.values_mut() {
        if let Value::Number(n) = v {
            *v = Value::String(canonical(n));
        }
    }
}

/// The canonical string of a numeric quantity: integers as they are, fractions in milli
/// units (`0.5` -> `500m`), as `resource.Quantity` writes them.
fn canonical(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    if f.fract() == 0.0 {
        format!("{f:.0}")
    } else {
        format!("{:.0}m", (f * 1000.0).round())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_become_strings_and_strings_stay() {
        let mut pod = json!({"spec": {
            "containers": [{"resources": {"limits": {"nvidia.com/gpu": 1, "cpu": 0.5},
                                          "requests": {"memory": "1Gi", "cpu": 2.0}}}],
            "initContainers": [{"resources": {"requests": {"cpu": 0.25}}}],
        }});
        normalize("Pod", &mut pod);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"limits": {"nvidia.com/gpu": "1", "cpu": "500m"},
                   "requests": {"memory": "1Gi", "cpu": "2"}})
        );
        assert_eq!(
            pod["spec"]["initContainers"][0]["resources"]["requests"]["cpu"],
            "250m"
        );
        let mut quota = json!({"spec": {"hard": {"requests.nvidia.com/gpu": 0}}});
        normalize("ResourceQuota", &mut quota);
        assert_eq!(quota["spec"]["hard"]["requests.nvidia.com/gpu"], "0");
        let mut sts = json!({"spec": {"template": {"spec": {
            "containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}});
        normalize("StatefulSet", &mut sts);
        assert_eq!(
            sts.pointer("/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"),
            Some(&json!("1"))
        );
    }
}

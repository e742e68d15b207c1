//! Object metadata rules: name validation (DNS-1123), generateName, timestamps, uids, and
//! which parts of an object a write through the main resource or `/status` may change.

use rand::RngExt;
use serde_json::{Map, Value};

use crate::sim::error::ApiError;
use crate::sim::json::Lookup as _;
use crate::sim::kinds::KindInfo;

/// RFC 3339 time in whole seconds, as Kubernetes writes `metav1.Time`.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Five random characters from the alphabet Kubernetes uses for `generateName`.
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Checks a DNS-1123 subdomain (the rule for most object names).
pub fn check_name(kind: &KindInfo, name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(
            kind,
            name,
            "metadata.name",
            format!(
                "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            ),
        ))
    }
}

pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = Value::Object(Map::new());
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

pub fn meta_str<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    meta(obj).and_then(|m| m.get(key)).and_then(Value::as_str)
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `a` and `b` agree on everything but `metadata`, `status`, `apiVersion` and
/// `kind`: what a generation counts changes of. Compared in place, without copying either.
pub fn same_spec_part(a: &Value, b: &Value) -> bool {
    let counted = |(k, _): &(&String, &Value)| {
        !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
    };
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => a.iter().filter(counted).eq(b.iter().filter(counted)),
        (a, b) => a.is_none() && b.is_none(),
    }
}

/// Drops empty `labels`, `annotations`, `finalizers` and `ownerReferences`, as a real API
/// server does (they are `omitempty`), so that `kubectl diff` sees no phantom change.
pub fn drop_empty_metadata(obj: &mut Value) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.retain(|k, v| {
            let collection = matches!(
                k.as_str(),
                "labels" | "annotations" | "finalizers" | "ownerReferences"
            );
            let empty = v.is_null()
                || v.as_object().is_some_and(|o| o.is_empty())
                || v.as_array().is_some_and(|a| a.is_empty());
            !(collection && empty)
        });
    }
}

/// A Secret's `stringData` is write-only: the API server folds it into base64 `data`
/// (kubernetes `pkg/apis/core/v1/conversion.go` `Convert_v1_Secret_To_core_Secret`), and a
/// Secret without a type is `Opaque` (`defaults.go` `SetDefaults_Secret`).
pub fn secret_on_write(obj: &mut Value) {
    use base64::Engine;
    if obj
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        obj["type"] = serde_json::json!("Opaque");
    }
    let Some(string_data) = obj.as_object_mut().and_then(|o| o.remove("stringData")) else {
        return;
    };
    if let Some(m) = string_data.as_object() {
        for (k, v) in m {
            let raw = v.as_str().unwrap_or_default();
            obj["data"][k] =
                serde_json::json!(base64::engine::general_purpose::STANDARD.encode(raw));
        }
    }
}

/// Fields the API server defaults on create for built-in kinds: a Pod starts `Pending`, a
/// Service its defaults and cluster IP. A Service whose `clusterIPs` contradict its
/// `clusterIP` is refused (422) as validation refuses it.
pub fn apply_create_defaults(
    kind: &KindInfo,
    name: &str,
    obj: &mut Value,
    serial: u64,
) -> Result<(), ApiError> {
    match kind.kind {
        "Pod" => {
            obj["status"] = serde_json::json!({"phase": "Pending", "qosClass": qos_class(obj)});
        }
        "Service" => service_defaults(obj, serial)
            .map_err(|(field, why)| ApiError::invalid(kind, name, field, why))?,
        _ => {}
    }
    Ok(())
}

/// kubernetes `pkg/apis/core/v1/defaults.go` (`SetDefaults_Service`: type, session affinity
/// and its client-IP timeout, each port's protocol and target port, the external traffic
/// policy of an externally reachable Service, the internal traffic policy, a LoadBalancer's
/// node-port allocation flag) and what the registry does unless the type is ExternalName
/// (`pkg/registry/core/service/storage/alloc.go`: a cluster IP when the client named none,
/// `clusterIPs` from `clusterIP`, one IPv4 family; `pkg/apis/core/validation/validation.go`
/// `ValidateServiceClusterIPsRelatedFields`: `clusterIPs` without `clusterIP`, or not
/// starting with it, is invalid). Not simulated: node-port allocation, and the dual-stack
/// policy a headless Service without a selector gets (it gets no IP family fields here).
/// An error is the invalid field and why.
fn service_defaults(obj: &mut Value, serial: u64) -> Result<(), (&'static str, String)> {
    use serde_json::json;
    let Some(o) = obj.as_object_mut() else {
        return Ok(());
    };
    let spec = o.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return Ok(());
    };
    let unset =
        |v: Option<&Value>| v.is_none_or(|v| v.is_null() || *v == json!("") || *v == json!(0));
    let absent = |v: Option<&Value>| v.is_none_or(Value::is_null);
    let mut default = |key: &str, value: Value| {
        if unset(spec.get(key)) {
            spec.insert(key.into(), value);
        }
    };
    default("type", json!("ClusterIP"));
    default("sessionAffinity", json!("None"));
    let kind = spec["type"].as_str().unwrap_or_default().to_string();
    if spec["sessionAffinity"] == json!("ClientIP")
        && absent(
            spec.get("sessionAffinityConfig")
                .and_then(|c| c.lookup("/clientIP/timeoutSeconds")),
        )
    {
        spec.insert(
            "sessionAffinityConfig".into(),
            json!({"clientIP": {"timeoutSeconds": 10800}}),
        );
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter(|p| p.is_object()) {
            if unset(p.get("protocol")) {
                p["protocol"] = json!("TCP");
            }
            if unset(p.get("targetPort")) {
                p["targetPort"] = p.get("port").cloned().unwrap_or(json!(0));
            }
        }
    }
    let reachable = matches!(kind.as_str(), "NodePort" | "LoadBalancer")
        || (kind == "ClusterIP" && non_empty_list(spec, "externalIPs"));
    let headless_without_selector =
        spec.get("clusterIP") == Some(&json!("None")) && !non_empty_object(spec.get("selector"));
    let given_ips = non_empty_list(spec, "clusterIPs");
    if reachable && unset(spec.get("externalTrafficPolicy")) {
        spec.insert("externalTrafficPolicy".into(), json!("Cluster"));
    }
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP")
        && absent(spec.get("internalTrafficPolicy"))
    {
        spec.insert("internalTrafficPolicy".into(), json!("Cluster"));
    }
    if kind == "LoadBalancer" && absent(spec.get("allocateLoadBalancerNodePorts")) {
        spec.insert("allocateLoadBalancerNodePorts".into(), json!(true));
    }
    if kind == "ExternalName" {
        return Ok(());
    }
    match (unset(spec.get("clusterIP")), given_ips) {
        (true, true) => {
            return Err((
                "spec.clusterIPs",
                "Invalid value: must be empty when `clusterIP` is not specified".into(),
            ));
        }
        (false, true) if spec["clusterIPs"][0] != spec["clusterIP"] => {
            return Err((
                "spec.clusterIPs",
                "Invalid value: first value must match `clusterIP`".into(),
            ));
        }
        (true, false) => {
            let ip = format!("10.96.{}.{}", (serial >> 8) & 0xFF, (serial & 0xFF).max(1));
            spec.insert("clusterIP".into(), json!(ip));
            spec.insert("clusterIPs".into(), json!([ip]));
        }
        (false, false) => {
            let ip = spec["clusterIP"].clone();
            spec.insert("clusterIPs".into(), json!([ip]));
        }
        (false, true) => {}
    }
    if headless_without_selector {
        return Ok(());
    }
    if !non_empty_list(spec, "ipFamilies") {
        spec.insert("ipFamilies".into(), json!(["IPv4"]));
    }
    if unset(spec.get("ipFamilyPolicy")) {
        spec.insert("ipFamilyPolicy".into(), json!("SingleStack"));
    }
    Ok(())
}

fn non_empty_list(spec: &Map<String, Value>, key: &str) -> bool {
    spec.get(key)
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

fn non_empty_object(v: Option<&Value>) -> bool {
    v.and_then(Value::as_object).is_some_and(|m| !m.is_empty())
}

fn qos_class(pod: &Value) -> &'static str {
    let containers = pod.lookup("/spec/containers").and_then(Value::as_array);
    let has = |field: &str| {
        containers.into_iter().flatten().any(|c| {
            c.lookup(&format!("/resources/{field}"))
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty())
        })
    };
    if has("requests") || has("limits") {
        "Burstable"
    } else {
        "BestEffort"
    }
}

/// The system-owned metadata fields a client cannot change.
pub const SYSTEM_FIELDS: &[&str] = &[
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "resourceVersion",
];

/// Builds the object a write stores: for `/status` only the status comes from `incoming`;
/// for the main resource of a kind with a status subresource, the status stays as it was.
pub fn merge_for_write(kind: &KindInfo, old: &Value, incoming: Value, status_write: bool) -> Value {
    if status_write {
        // The old object but its status (not copied, to be replaced), and the new status
        // taken out of `incoming`.
        let mut incoming = incoming;
        let status = incoming.as_object_mut().and_then(|o| o.remove("status"));
        let Some(fields) = old.as_object() else {
            return old.clone();
        };
        let mut next: Map<String, Value> = fields
            .iter()
            .filter(|(k, _)| k.as_str() != "status")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(s) = status {
            next.insert("status".into(), s);
        }
        return Value::Object(next);
    }
    let mut next = incoming;
    if kind.status {
        match old.get("status") {
            Some(s) => next["status"] = s.clone(),
            None => {
                if let Some(o) = next.as_object_mut() {
                    o.remove("status");
                }
            }
        }
    }
    let old_meta = meta(old).cloned().unwrap_or_default();
    let m = meta_mut(&mut next);
    for f in SYSTEM_FIELDS {
        match old_meta.get(*f) {
            Some(v) => {
                m.insert((*f).to_string(), v.clone());
            }
            None => {
                m.remove(*f);
            }
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::kinds;
    use serde_json::json;

    #[test]
    fn names_follow_dns_1123() {
        let k = kinds::find("kubeflow.org", "v1beta1", "workspaces").unwrap();
        assert!(check_name(k, "ws-a.b1").is_ok());
        for bad in ["", "Ws", "-a", "a-", "a_b", &"a".repeat(254)] {
            assert_eq!(check_name(k, bad).unwrap_err().code, 422, "{bad}");
        }
    }

    #[test]
    fn the_spec_part_is_everything_but_metadata_status_and_type() {
        let a = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"},
            "spec": {"x": [1, 2]}, "data": {"k": "v"}, "status": {"phase": "Running"}});
        let mut b = a.clone();
        b["metadata"]["labels"] = json!({"l": "1"});
        b["status"] = json!({"phase": "Pending"});
        b["apiVersion"] = json!("v2");
        assert!(same_spec_part(&a, &b));
        for (field, value) in [
            ("spec", json!({"x": [1, 3]})),
            ("data", json!({"k": "w"})),
            ("binaryData", json!({})),
        ] {
            let mut c = a.clone();
            c[field] = value;
            assert!(!same_spec_part(&a, &c), "{field}");
            assert!(!same_spec_part(&c, &a), "{field}");
        }
        let mut d = a.clone();
        d.as_object_mut().unwrap().remove("data");
        assert!(!same_spec_part(&a, &d));
        assert!(same_spec_part(&json!(null), &json!(1)));
        assert!(!same_spec_part(&json!({}), &json!(1)));
    }

    #[test]
    fn status_and_main_writes_are_separated() {
        let k = kinds::find("kubeflow.org", "v1beta1", "workspaces").unwrap();
        let old = json!({"metadata": {"name": "a", "uid": "u1", "generation": 1}, "spec": {"paused": false}, "status": {"state": "Running"}});
        let incoming = json!({"metadata": {"name": "a", "uid": "x"}, "spec": {"paused": true}, "status": {"state": "Paused"}});
        let main = merge_for_write(k, &old, incoming.clone(), false);
        assert_eq!(main["spec"]["paused"], true);
        assert_eq!(main["status"]["state"], "Running");
        assert_eq!(main["metadata"]["uid"], "u1");
        let status = merge_for_write(k, &old, incoming, true);
        assert_eq!(status["spec"]["paused"], false);
        assert_eq!(status["status"]["state"], "Paused");
        assert_eq!(status["metadata"], old["metadata"]);
        let cleared = merge_for_write(k, &old, json!({"spec": {"paused": true}}), true);
        assert_eq!(
            cleared,
            json!({"metadata": old["metadata"], "spec": {"paused": false}})
        );
    }

    #[test]
    fn generate_name_suffix_has_five_safe_chars() {
        let s = random_suffix();
        assert_eq!(s.len(), 5);
        assert!(s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }

    #[test]
    fn a_service_gets_the_api_servers_defaults_and_no_ip_when_external_name() {
        let k = kinds::find("", "v1", "services").unwrap();
        let mut svc = json!({"spec": {"ports": [{"port": 80}, {"port": 81, "targetPort": "web", "protocol": "UDP"}, 7]}});
        apply_create_defaults(k, "s", &mut svc, 258).unwrap();
        assert_eq!(
            svc["spec"],
            json!({"type": "ClusterIP", "sessionAffinity": "None",
                "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80},
                    {"port": 81, "targetPort": "web", "protocol": "UDP"}, 7],
                "internalTrafficPolicy": "Cluster",
                "clusterIP": "10.96.1.2", "clusterIPs": ["10.96.1.2"],
                "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"})
        );
        let mut ext = json!({"spec": {"type": "ExternalName", "externalName": "db.example"}});
        apply_create_defaults(k, "s", &mut ext, 3).unwrap();
        assert!(ext["spec"].get("clusterIP").is_none(), "{ext}");
        assert!(ext["spec"].get("internalTrafficPolicy").is_none(), "{ext}");
        let mut lb = json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}});
        apply_create_defaults(k, "s", &mut lb, 3).unwrap();
        assert_eq!(lb["spec"]["externalTrafficPolicy"], "Cluster");
        assert_eq!(lb["spec"]["allocateLoadBalancerNodePorts"], true);
        // Headless: the client's "None" is kept; without a selector no IP family is made up.
        let mut headless = json!({"spec": {"clusterIP": "None"}});
        apply_create_defaults(k, "s", &mut headless, 3).unwrap();
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
        assert!(
            headless["spec"].get("ipFamilyPolicy").is_none(),
            "{headless}"
        );
        // The client's own address is kept, and a zero timeout is left for validation.
        let mut named = json!({"spec": {"clusterIP": "10.0.0.9", "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 0}},
            "externalIPs": ["192.0.2.1"], "internalTrafficPolicy": "Local"}});
        apply_create_defaults(k, "s", &mut named, 3).unwrap();
        assert_eq!(named["spec"]["clusterIPs"], json!(["10.0.0.9"]));
        assert_eq!(named["spec"]["internalTrafficPolicy"], "Local");
        assert_eq!(
            named["spec"]["externalTrafficPolicy"], "Cluster",
            "externalIPs make it reachable"
        );
        assert_eq!(
            named["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
            0
        );
        let mut client_ip = json!({"spec": {"sessionAffinity": "ClientIP"}});
        apply_create_defaults(k, "s", &mut client_ip, 3).unwrap();
        assert_eq!(
            client_ip["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
            10800
        );
        // clusterIPs that contradict clusterIP are refused as validation refuses them.
        for (spec, field) in [
            (
                json!({"clusterIPs": ["10.0.0.9"]}),
                "spec.clusterIPs: Invalid value: must be empty",
            ),
            (
                json!({"clusterIPs": [""]}),
                "spec.clusterIPs: Invalid value: must be empty",
            ),
            (
                json!({"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.9"]}),
                "spec.clusterIPs: Invalid value: first value must match",
            ),
        ] {
            let e = apply_create_defaults(k, "s", &mut json!({"spec": spec}), 3).unwrap_err();
            assert_eq!(e.code, 422);
            assert!(e.message.contains(field), "{}", e.message);
        }
        // A malformed spec is left to validation, not a panic.
        let mut odd = json!({"spec": "x"});
        apply_create_defaults(k, "s", &mut odd, 3).unwrap();
        assert_eq!(odd, json!({"spec": "x"}));
    }
}

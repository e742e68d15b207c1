//! Kubernetes protobuf request bodies (`Content-Type: application/vnd.kubernetes.protobuf`),
//! as kubectl sends them for the built-in kinds its typed generators make (`kubectl create
//! secret|configmap|quota|namespace|serviceaccount`). A real API server decodes them
//! (kubernetes `apimachinery/pkg/runtime/serializer/protobuf/protobuf.go`): four magic
//! bytes `k8s\0`, then a `runtime.Unknown` whose `typeMeta` names the kind and whose `raw`
//! holds the object's own message. The simulator decodes those messages with the kube-rs
//! org's `k8s-pb` types and turns them into the JSON the rest of the API server takes,
//! field for field as the JSON serialisation writes them: Go's zero values (which gogo
//! protobuf writes for optional scalars) are left out as `omitempty` leaves them out, bytes
//! become base64 and a `Quantity` its string. Answers stay JSON, which every client's
//! `Accept` allows.
//!
//! Decoded kinds: Secret, ConfigMap, ResourceQuota, Namespace, ServiceAccount (the kinds of
//! kubectl's generators the simulator serves). Any other kind is refused with 415, naming
//! the ones decoded and how to send it as JSON; fields the server sets itself
//! (`creationTimestamp`, `managedFields`, `status`) are not read.

use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::{Map, Value, json};

use crate::sim::error::ApiError;

/// The media type kubectl sends.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The envelope's magic prefix.
const MAGIC: &[u8] = b"k8s\0";

/// The kinds decoded here, for messages.
pub const DECODED: &str = "Secret, ConfigMap, ResourceQuota, Namespace and ServiceAccount";

/// Decodes a protobuf body into the object's JSON (with `apiVersion` and `kind`).
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let raw = body.strip_prefix(MAGIC).ok_or_else(|| {
        ApiError::bad_request(
            "error decoding the protobuf body: it does not start with the `k8s\\x00` envelope",
        )
    })?;
    let unknown = Unknown::decode(raw).map_err(|e| bad(&e))?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    if unknown
        .content_encoding
        .as_deref()
        .is_some_and(|e| !e.is_empty())
    {
        return Err(ApiError::bad_request(
            "error decoding the protobuf body: encoded content (contentEncoding) is not supported",
        ));
    }
    let object = unknown.raw.unwrap_or_default();
    let object = object.as_slice();
    let mut value = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Secret") => secret(core::Secret::decode(object).map_err(|e| bad(&e))?),
        ("v1", "ConfigMap") => config_map(core::ConfigMap::decode(object).map_err(|e| bad(&e))?),
        ("v1", "ResourceQuota") => {
            resource_quota(core::ResourceQuota::decode(object).map_err(|e| bad(&e))?)
        }
        ("v1", "Namespace") => namespace(core::Namespace::decode(object).map_err(|e| bad(&e))?),
        ("v1", "ServiceAccount") => {
            service_account(core::ServiceAccount::decode(object).map_err(|e| bad(&e))?)
        }
        _ => {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the simulator decodes protobuf bodies for {DECODED}, not for {kind:?} \
                     ({api_version:?}); send it as JSON (Content-Type: application/json; \
                     `kubectl create -f` and `kubectl apply -f` do)"
                ),
            ));
        }
    };
    value["apiVersion"] = json!(api_version);
    value["kind"] = json!(kind);
    Ok(value)
}

fn bad(e: &prost::DecodeError) -> ApiError {
    ApiError::bad_request(format!("error decoding the protobuf body: {e}"))
}

/// Inserts `value` under `key` unless it is Go's zero value (`omitempty`).
fn put(o: &mut Map<String, Value>, key: &str, value: Value) {
    let zero = match &value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Bool(_) => false,
    };
    if !zero {
        o.insert(key.to_string(), value);
    }
}

fn base64(bytes: &[u8]) -> Value {
    use base64::Engine;
    json!(base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn metadata(m: Option<ObjectMeta>) -> Value {
    let m = m.unwrap_or_default();
    let mut o = Map::new();
    put(&mut o, "name", json!(m.name));
    put(&mut o, "generateName", json!(m.generate_name));
    put(&mut o, "namespace", json!(m.namespace));
    put(&mut o, "uid", json!(m.uid));
    put(&mut o, "resourceVersion", json!(m.resource_version));
    put(&mut o, "generation", json!(m.generation));
    put(
        &mut o,
        "deletionGracePeriodSeconds",
        json!(m.deletion_grace_period_seconds),
    );
    put(&mut o, "labels", json!(m.labels));
    put(&mut o, "annotations", json!(m.annotations));
    let owners: Vec<Value> = m
        .owner_references
        .into_iter()
        .map(|r| {
            let mut o = Map::new();
            put(&mut o, "apiVersion", json!(r.api_version));
            put(&mut o, "kind", json!(r.kind));
            put(&mut o, "name", json!(r.name));
            put(&mut o, "uid", json!(r.uid));
            if let Some(c) = r.controller {
                o.insert("controller".into(), json!(c));
            }
            if let Some(b) = r.block_owner_deletion {
                o.insert("blockOwnerDeletion".into(), json!(b));
            }
            Value::Object(o)
        })
        .collect();
    put(&mut o, "ownerReferences", json!(owners));
    put(&mut o, "finalizers", json!(m.finalizers));
    Value::Object(o)
}

fn secret(s: core::Secret) -> Value {
    let mut o = Map::new();
    o.insert("metadata".into(), metadata(s.metadata));
    let data: Map<String, Value> = s.data.iter().map(|(k, v)| (k.clone(), base64(v))).collect();
    put(&mut o, "data", Value::Object(data));
    put(&mut o, "stringData", json!(s.string_data));
    put(&mut o, "type", json!(s.r#type));
    if let Some(i) = s.immutable {
        o.insert("immutable".into(), json!(i));
    }
    Value::Object(o)
}

fn config_map(c: core::ConfigMap) -> Value {
    let mut o = Map::new();
    o.insert("metadata".into(), metadata(c.metadata));
    put(&mut o, "data", json!(c.data));
    let binary: Map<String, Value> = c
        .binary_data
        .iter()
        .map(|(k, v)| (k.clone(), base64(v)))
        .collect();
    put(&mut o, "binaryData", Value::Object(binary));
    if let Some(i) = c.immutable {
        o.insert("immutable".into(), json!(i));
    }
    Value::Object(o)
}

fn resource_quota(q: core::ResourceQuota) -> Value {
    let mut o = Map::new();
    o.insert("metadata".into(), metadata(q.metadata));
    let spec = q.spec.unwrap_or_default();
    let mut s = Map::new();
    let hard: Map<String, Value> = spec
        .hard
        .into_iter()
        .map(|(k, v)| (k, json!(v.string.unwrap_or_default())))
        .collect();
    put(&mut s, "hard", Value::Object(hard));
    put(&mut s, "scopes", json!(spec.scopes));
    if let Some(sel) = spec.scope_selector {
        let exprs: Vec<Value> = sel
            .match_expressions
            .into_iter()
            .map(|e| {
                let mut o = Map::new();
                put(&mut o, "scopeName", json!(e.scope_name));
                put(&mut o, "operator", json!(e.operator));
                put(&mut o, "values", json!(e.values));
                Value::Object(o)
            })
            .collect();
        let mut sel = Map::new();
        put(&mut sel, "matchExpressions", json!(exprs));
        s.insert("scopeSelector".into(), Value::Object(sel));
    }
    o.insert("spec".into(), Value::Object(s));
    Value::Object(o)
}

fn namespace(n: core::Namespace) -> Value {
    let mut o = Map::new();
    o.insert("metadata".into(), metadata(n.metadata));
    let finalizers = n.spec.map(|s| s.finalizers).unwrap_or_default();
    if !finalizers.is_empty() {
        o.insert("spec".into(), json!({"finalizers": finalizers}));
    }
    Value::Object(o)
}

fn service_account(a: core::ServiceAccount) -> Value {
    let mut o = Map::new();
    o.insert("metadata".into(), metadata(a.metadata));
    let secrets: Vec<Value> = a
        .secrets
        .into_iter()
        .map(|r| {
            let mut o = Map::new();
            put(&mut o, "kind", json!(r.kind));
            put(&mut o, "namespace", json!(r.namespace));
            put(&mut o, "name", json!(r.name));
            put(&mut o, "uid", json!(r.uid));
            put(&mut o, "apiVersion", json!(r.api_version));
            put(&mut o, "resourceVersion", json!(r.resource_version));
            put(&mut o, "fieldPath", json!(r.field_path));
            Value::Object(o)
        })
        .collect();
    put(&mut o, "secrets", json!(secrets));
    let pull: Vec<Value> = a
        .image_pull_secrets
        .into_iter()
        .map(|r| json!({"name": r.name.unwrap_or_default()}))
        .collect();
    put(&mut o, "imagePullSecrets", json!(pull));
    if let Some(b) = a.automount_service_account_token {
        o.insert("automountServiceAccountToken".into(), json!(b));
    }
    Value::Object(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::apimachinery::pkg::api::resource::Quantity;
    use k8s_pb::apimachinery::pkg::runtime::TypeMeta;

    /// The envelope as kubectl writes it (checked byte for byte against kubectl 1.32's
    /// `-v=9` dump of `kubectl create secret generic s1 --from-literal=a=b`: the magic,
    /// then `Unknown{typeMeta, raw}`, with gogo's empty optional strings in the metadata).
    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut out = MAGIC.to_vec();
        out.extend(unknown.encode_to_vec());
        out
    }

    fn meta(name: &str) -> Option<ObjectMeta> {
        Some(ObjectMeta {
            name: Some(name.into()),
            generate_name: Some(String::new()),
            namespace: Some("wsgate-test".into()),
            uid: Some(String::new()),
            resource_version: Some(String::new()),
            generation: Some(0),
            labels: [("app".to_string(), "x".to_string())].into(),
            ..Default::default()
        })
    }

    #[test]
    fn a_secret_becomes_its_json_with_base64_data_and_no_zero_values() {
        let s = core::Secret {
            metadata: meta("s1"),
            data: [("a".to_string(), b"b\x00\xff".to_vec())].into(),
            r#type: Some("Opaque".into()),
            ..Default::default()
        };
        let v = decode(&envelope("v1", "Secret", s.encode_to_vec())).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": "s1", "namespace": "wsgate-test", "labels": {"app": "x"}},
                "data": {"a": "YgD/"}})
        );
    }

    #[test]
    fn a_quota_keeps_its_quantities_as_strings_and_its_scope_selector() {
        let q = core::ResourceQuota {
            metadata: meta("q1"),
            spec: Some(core::ResourceQuotaSpec {
                hard: [(
                    "requests.nvidia.com/gpu".to_string(),
                    Quantity {
                        string: Some("0".into()),
                    },
                )]
                .into(),
                scopes: vec![],
                scope_selector: Some(core::ScopeSelector {
                    match_expressions: vec![core::ScopedResourceSelectorRequirement {
                        scope_name: Some("PriorityClass".into()),
                        operator: Some("In".into()),
                        values: vec!["high".into()],
                    }],
                }),
            }),
            status: None,
        };
        let v = decode(&envelope("v1", "ResourceQuota", q.encode_to_vec())).unwrap();
        assert_eq!(v["spec"]["hard"], json!({"requests.nvidia.com/gpu": "0"}));
        assert_eq!(
            v["spec"]["scopeSelector"],
            json!({"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]})
        );
        assert!(v["spec"].get("scopes").is_none(), "{v}");
    }

    #[test]
    fn other_kinds_bad_envelopes_and_garbage_are_refused_with_a_reason() {
        let pod = envelope("v1", "Pod", vec![]);
        let e = decode(&pod).unwrap_err();
        assert_eq!(e.code, 415);
        assert!(
            e.message.contains("\"Pod\"") && e.message.contains("as JSON"),
            "{}",
            e.message
        );
        let e = decode(b"{\"kind\":\"Secret\"}").unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("envelope"), "{}", e.message);
        let mut garbage = MAGIC.to_vec();
        garbage.extend([0x0a, 0xff, 0xff]);
        assert_eq!(decode(&garbage).unwrap_err().code, 400);
        let mut inner = envelope("v1", "Secret", vec![0x0a, 0x05, 0x01]);
        assert_eq!(decode(&inner).unwrap_err().code, 400);
        inner = envelope("v1", "ConfigMap", vec![]);
        assert_eq!(
            decode(&inner).unwrap(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})
        );
    }
}

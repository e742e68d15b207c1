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
//! Decoded kinds: the ones kubectl's generators write among those the simulator serves
//! (`DECODED`). Pointer fields in Go (`*int32`, `*bool`) are kept when present, even at
//! zero, as `json` writes a non-nil pointer; Go's plain scalars are left out at zero. A field
//! this module does not map (a probe, an affinity, a volume source other than the four below)
//! refuses the whole body with 415, naming the field, rather than storing the object without
//! it. The top-level specs, `PodSpec` and `Container` are destructured field by field, so the
//! compiler names a field that a newer k8s-pb adds there; the smaller nested messages are read
//! by field name and have no such guard. Any other kind is refused with 415 too, saying how to
//! send it as JSON. Fields the server sets itself (`creationTimestamp`, `managedFields`,
//! `status`) are not read.
//!
//! A field number the schema does not know (a client newer than the server) is skipped, as a
//! real API server skips it: apimachinery's `codec_factory.go` gives protobuf no strict
//! decoder ("strict decoding is unsupported for protobuf"), so even `fieldValidation=Strict`
//! drops it, and KEP-2885 names protobuf a non-goal. k8s-pb's schema is at least as new as
//! the v1.32 the simulator reports.

use std::collections::BTreeMap;

use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Map, Value, json};

use crate::sim::error::ApiError;

/// Records each named field that is set as not mapped, under `path`: a scalar pointer
/// (`pointers:`) whenever it is present, anything else when `IsSet` says so.
macro_rules! unmapped {
    ($u:expr, $path:expr; pointers: $($field:ident),+ $(,)?) => {
        $( $u.check($path, stringify!($field), $field.is_some()); )+
    };
    ($u:expr, $path:expr; $($field:ident),+ $(,)?) => {
        $( $u.check($path, stringify!($field), $crate::sim::api::protobuf::IsSet::is_set(&$field)); )+
    };
}

mod pod;
mod rbac;
mod workloads;

/// The media type kubectl sends.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The envelope's magic prefix.
const MAGIC: &[u8] = b"k8s\0";

/// The kinds decoded here, for messages.
pub const DECODED: &str = "Secret, ConfigMap, ResourceQuota, Namespace, ServiceAccount, \
     Service, Deployment, Job, CronJob, Role, ClusterRole, RoleBinding and ClusterRoleBinding";

/// Decodes a protobuf body into the object's JSON (with `apiVersion` and `kind`).
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let raw = body.strip_prefix(MAGIC).ok_or_else(|| {
        ApiError::bad_request(
            "error decoding the protobuf body: it does not start with the `k8s\\x00` envelope",
        )
    })?;
    let unknown: Unknown = message(raw)?;
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
    let mut u = Unmapped::default();
    let mut value = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Secret") => secret(message(object)?),
        ("v1", "ConfigMap") => config_map(message(object)?),
        ("v1", "ResourceQuota") => resource_quota(message(object)?),
        ("v1", "Namespace") => namespace(message(object)?),
        ("v1", "ServiceAccount") => service_account(message(object)?),
        ("v1", "Service") => workloads::service(message(object)?, &mut u),
        ("apps/v1", "Deployment") => workloads::deployment(message(object)?, &mut u),
        ("batch/v1", "Job") => workloads::job(message(object)?, &mut u),
        ("batch/v1", "CronJob") => workloads::cron_job(message(object)?, &mut u),
        ("rbac.authorization.k8s.io/v1", "Role") => rbac::role(message(object)?),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => rbac::cluster_role(message(object)?),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => rbac::role_binding(message(object)?),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            rbac::cluster_role_binding(message(object)?)
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
    u.refuse(&kind)?;
    value["apiVersion"] = json!(api_version);
    value["kind"] = json!(kind);
    Ok(value)
}

fn message<M: Message + Default>(object: &[u8]) -> Result<M, ApiError> {
    M::decode(object)
        .map_err(|e| ApiError::bad_request(format!("error decoding the protobuf body: {e}")))
}

/// The paths of fields that are set in the body but not mapped here.
#[derive(Debug, Default)]
pub(super) struct Unmapped(Vec<String>);

impl Unmapped {
    /// Records `path.field` (the field's JSON name) when `set`.
    fn check(&mut self, path: &str, field: &str, set: bool) {
        if set {
            self.0.push(format!("{path}.{}", json_name(field)));
        }
    }

    /// Records a path as it is.
    fn path(&mut self, path: String) {
        self.0.push(path);
    }

    /// 415 naming every unmapped field, when there is one.
    fn refuse(self, kind: &str) -> Result<(), ApiError> {
        if self.0.is_empty() {
            return Ok(());
        }
        Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the simulator does not map {} from a protobuf {kind} body, and stores no \
                 {kind} with fields dropped; send it as JSON (Content-Type: application/json; \
                 `kubectl create -f` and `kubectl apply -f` do), which it takes whole",
                self.0.join(", ")
            ),
        ))
    }
}

/// `liveness_probe` -> `livenessProbe`, `r#type` -> `type` (and the one unmapped field
/// whose JSON name has an acronym).
fn json_name(field: &str) -> String {
    if field == "set_hostname_as_fqdn" {
        return "setHostnameAsFQDN".into();
    }
    let mut out = String::new();
    let mut upper = false;
    for c in field.trim_start_matches("r#").chars() {
        match c {
            '_' => upper = true,
            c if upper => {
                out.extend(c.to_uppercase());
                upper = false;
            }
            c => out.push(c),
        }
    }
    out
}

/// Whether a field the simulator does not map carries something. Every such field is a Go
/// pointer, a slice or a map, and gogo protobuf writes a pointer exactly when it is not nil.
/// A pointer to a message counts when the message holds any field, even a zero one
/// (`runAsUser: 0` inside it is `Some(0)`); an empty message (`securityContext: {}`, which
/// a real API server's `SetDefaults_PodSpec` writes into every pod) carries nothing to
/// drop. Scalar pointers (`hostUsers: false`) are listed apart (`unmapped!`'s `pointers:`)
/// and count whenever present.
pub(super) trait IsSet {
    fn is_set(&self) -> bool;
}

impl<T: Message + Default + PartialEq> IsSet for Option<T> {
    fn is_set(&self) -> bool {
        self.as_ref().is_some_and(|m| *m != T::default())
    }
}

impl<T> IsSet for Vec<T> {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }
}

impl<K, V> IsSet for BTreeMap<K, V> {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }
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

/// Inserts a Go pointer field when present, even at zero.
fn opt<T: serde::Serialize>(o: &mut Map<String, Value>, key: &str, value: Option<T>) {
    if let Some(v) = value {
        o.insert(key.to_string(), json!(v));
    }
}

/// Inserts a plain Go `bool` when true (`omitempty`).
fn flag(o: &mut Map<String, Value>, key: &str, value: Option<bool>) {
    if value == Some(true) {
        o.insert(key.to_string(), json!(true));
    }
}

/// A map of quantities, each as its string.
fn quantities(m: BTreeMap<String, Quantity>) -> Value {
    Value::Object(
        m.into_iter()
            .map(|(k, v)| (k, json!(v.string.unwrap_or_default())))
            .collect(),
    )
}

/// An `IntOrString` as JSON writes it: the string when its type is 1, else the number.
fn int_or_string(v: IntOrString) -> Value {
    if v.r#type == Some(1) {
        json!(v.str_val.unwrap_or_default())
    } else {
        json!(v.int_val.unwrap_or_default())
    }
}

/// A label selector (`matchLabels`, `matchExpressions`).
fn label_selector(s: LabelSelector) -> Value {
    let mut o = Map::new();
    put(&mut o, "matchLabels", json!(s.match_labels));
    let exprs: Vec<Value> = s
        .match_expressions
        .into_iter()
        .map(|e| {
            let mut o = Map::new();
            put(&mut o, "key", json!(e.key));
            put(&mut o, "operator", json!(e.operator));
            put(&mut o, "values", json!(e.values));
            Value::Object(o)
        })
        .collect();
    put(&mut o, "matchExpressions", json!(exprs));
    Value::Object(o)
}

fn base64(bytes: &[u8]) -> Value {
    use base64::Engine;
    json!(base64::engine::general_purpose::STANDARD.encode(bytes))
}

pub(super) fn metadata(m: Option<ObjectMeta>) -> Value {
    let m = m.unwrap_or_default();
    let mut o = Map::new();
    put(&mut o, "name", json!(m.name));
    put(&mut o, "generateName", json!(m.generate_name));
    put(&mut o, "namespace", json!(m.namespace));
    put(&mut o, "uid", json!(m.uid));
    put(&mut o, "resourceVersion", json!(m.resource_version));
    put(&mut o, "generation", json!(m.generation));
    opt(
        &mut o,
        "deletionGracePeriodSeconds",
        m.deletion_grace_period_seconds,
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
    put(&mut s, "hard", quantities(spec.hard));
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
mod tests;

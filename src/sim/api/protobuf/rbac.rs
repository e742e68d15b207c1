//! Role, ClusterRole, RoleBinding and ClusterRoleBinding bodies, as `kubectl create role|
//! clusterrole|rolebinding|clusterrolebinding` write them; every field is mapped.

use k8s_pb::api::rbac::v1 as rbac;
use serde_json::{Map, Value, json};

use super::{label_selector, metadata, put};

pub(super) fn role(r: rbac::Role) -> Value {
    let rbac::Role { metadata: m, rules } = r;
    json!({"metadata": metadata(m), "rules": policy_rules(rules)})
}

pub(super) fn cluster_role(r: rbac::ClusterRole) -> Value {
    let rbac::ClusterRole {
        metadata: m,
        rules,
        aggregation_rule,
    } = r;
    let mut o = Map::new();
    o.insert("metadata".into(), metadata(m));
    o.insert("rules".into(), policy_rules(rules));
    if let Some(a) = aggregation_rule {
        let selectors: Vec<Value> = a
            .cluster_role_selectors
            .into_iter()
            .map(label_selector)
            .collect();
        let mut s = Map::new();
        put(&mut s, "clusterRoleSelectors", json!(selectors));
        o.insert("aggregationRule".into(), Value::Object(s));
    }
    Value::Object(o)
}

pub(super) fn role_binding(b: rbac::RoleBinding) -> Value {
    let rbac::RoleBinding {
        metadata: m,
        subjects,
        role_ref,
    } = b;
    binding(m, subjects, role_ref)
}

pub(super) fn cluster_role_binding(b: rbac::ClusterRoleBinding) -> Value {
    let rbac::ClusterRoleBinding {
        metadata: m,
        subjects,
        role_ref,
    } = b;
    binding(m, subjects, role_ref)
}

fn binding(
    m: Option<k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    subjects: Vec<rbac::Subject>,
    role_ref: Option<rbac::RoleRef>,
) -> Value {
    let subjects: Vec<Value> = subjects
        .into_iter()
        .map(|s| {
            let mut o = Map::new();
            put(&mut o, "kind", json!(s.kind));
            put(&mut o, "apiGroup", json!(s.api_group));
            put(&mut o, "name", json!(s.name));
            put(&mut o, "namespace", json!(s.namespace));
            Value::Object(o)
        })
        .collect();
    let r = role_ref.unwrap_or_default();
    let mut o = Map::new();
    o.insert("metadata".into(), metadata(m));
    put(&mut o, "subjects", json!(subjects));
    o.insert(
        "roleRef".into(),
        json!({
            "apiGroup": r.api_group.unwrap_or_default(),
            "kind": r.kind.unwrap_or_default(),
            "name": r.name.unwrap_or_default(),
        }),
    );
    Value::Object(o)
}

fn policy_rules(rules: Vec<rbac::PolicyRule>) -> Value {
    let rules: Vec<Value> = rules
        .into_iter()
        .map(|r| {
            let mut o = Map::new();
            o.insert("verbs".into(), json!(r.verbs));
            put(&mut o, "apiGroups", json!(r.api_groups));
            put(&mut o, "resources", json!(r.resources));
            put(&mut o, "resourceNames", json!(r.resource_names));
            put(&mut o, "nonResourceURLs", json!(r.non_resource_ur_ls));
            Value::Object(o)
        })
        .collect();
    json!(rules)
}

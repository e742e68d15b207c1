//! Patch bodies as the API server applies them: JSON merge patch, JSON patch (RFC 6902),
//! server-side apply (treated as a merge of the applied fields) and, for built-in kinds,
//! strategic merge patch (lists of containers, conditions and the like merge by key).

use serde_json::{Map, Value};

use crate::sim::error::ApiError;
use crate::sim::kinds::KindInfo;

/// The patch formats the server understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Apply,
    Strategic,
}

impl PatchType {
    /// From the request's Content-Type; 415 for anything else, and for strategic merge
    /// on a custom resource (as a real API server answers).
    pub fn from_content_type(content_type: &str, kind: &KindInfo) -> Result<Self, ApiError> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        match media {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/json-patch+json" => Ok(Self::Json),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Ok(Self::Apply),
            "application/strategic-merge-patch+json" if !kind.custom => Ok(Self::Strategic),
            other => Err(ApiError::unsupported_media_type(other, Some(kind))),
        }
    }
}

/// Parses an apply-patch body: YAML (JSON is YAML), with YAML 1.2 booleans and numbers.
pub fn parse_apply_body(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    let text = std::str::from_utf8(body)
        .map_err(|_| ApiError::bad_request("the apply patch body is not UTF-8"))?;
    let mut opts = serde_saphyr::Options::default();
    opts.strict_booleans = true;
    opts.leading_zero_numbers_as_strings = true;
    serde_saphyr::from_str_with_options(text, opts)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

/// Applies `body` of type `ptype` to `current`, returning the patched object.
pub fn apply(
    kind: &KindInfo,
    name: &str,
    current: &Value,
    ptype: PatchType,
    body: &[u8],
) -> Result<Value, ApiError> {
    let mut doc = current.clone();
    match ptype {
        PatchType::Merge | PatchType::Strategic => {
            let patch: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "a merge patch must be a JSON object (use application/json-patch+json for a list of operations)",
                ));
            }
            if ptype == PatchType::Strategic {
                strategic_merge(&mut doc, &patch, "");
            } else {
                json_patch::merge(&mut doc, &patch);
            }
        }
        PatchType::Apply => {
            let patch = parse_apply_body(body)?;
            if !patch.is_object() {
                return Err(ApiError::bad_request("an apply patch must be an object"));
            }
            json_patch::merge(&mut doc, &strip_nulls(patch));
        }
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!(
                    "error decoding JSON patch (expected a list of operations): {e}"
                ))
            })?;
            json_patch::patch(&mut doc, &ops)
                .map_err(|e| ApiError::invalid(kind, name, "patch", e.to_string()))?;
        }
    }
    Ok(doc)
}

/// Apply configurations never delete by null; drop nulls so merge semantics keep fields.
fn strip_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        other => other,
    }
}

/// The merge key of the lists that strategic merge patch merges by key.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "containers" | "initContainers" | "volumes" | "env" | "ephemeralContainers" => Some("name"),
        "conditions" => Some("type"),
        "volumeMounts" => Some("mountPath"),
        "ports" => Some("containerPort"),
        "readinessGates" => Some("conditionType"),
        "ownerReferences" => Some("uid"),
        _ => None,
    }
}

fn strategic_merge(target: &mut Value, patch: &Value, field: &str) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => merge_maps(t, p),
        (Value::Array(t), Value::Array(p)) if merge_key(field).is_some() => {
            let key = merge_key(field).unwrap_or("name");
            for item in p {
                let id = item.get(key);
                match t.iter_mut().find(|x| id.is_some() && x.get(key) == id) {
                    Some(existing) => strategic_merge(existing, item, ""),
                    None => t.push(item.clone()),
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

fn merge_maps(t: &mut Map<String, Value>, p: &Map<String, Value>) {
    for (k, v) in p {
        if k.starts_with("$") {
            continue;
        }
        if v.is_null() {
            t.remove(k);
        } else if let Some(existing) = t.get_mut(k) {
            strategic_merge(existing, v, k);
        } else {
            t.insert(k.clone(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::kinds;
    use serde_json::json;

    fn ws() -> &'static KindInfo {
        kinds::find("kubeflow.org", "v1beta1", "workspaces").unwrap()
    }
    fn pods() -> &'static KindInfo {
        kinds::find("", "v1", "pods").unwrap()
    }

    #[test]
    fn content_types_map_to_patch_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json", ws()).unwrap(),
            PatchType::Merge
        );
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml; charset=utf-8", ws())
                .unwrap(),
            PatchType::Apply
        );
        assert_eq!(
            PatchType::from_content_type("application/strategic-merge-patch+json", ws())
                .unwrap_err()
                .code,
            415
        );
        assert_eq!(
            PatchType::from_content_type("application/strategic-merge-patch+json", pods()).unwrap(),
            PatchType::Strategic
        );
        assert_eq!(
            PatchType::from_content_type("text/plain", pods())
                .unwrap_err()
                .code,
            415
        );
    }

    #[test]
    fn merge_json_and_apply_patches() {
        let cur = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"paused": false, "kind": "k"}});
        let out = apply(
            ws(),
            "a",
            &cur,
            PatchType::Merge,
            br#"{"spec":{"paused":true},"metadata":{"labels":{"x":null}}}"#,
        )
        .unwrap();
        assert_eq!(out["spec"], json!({"paused": true, "kind": "k"}));
        assert_eq!(out["metadata"]["labels"], json!({}));
        let out = apply(ws(), "a", &cur, PatchType::Json, br#"[{"op":"test","path":"/spec/paused","value":false},{"op":"replace","path":"/spec/paused","value":true}]"#).unwrap();
        assert_eq!(out["spec"]["paused"], true);
        let e = apply(
            ws(),
            "a",
            &cur,
            PatchType::Json,
            br#"[{"op":"test","path":"/spec/paused","value":true}]"#,
        )
        .unwrap_err();
        assert_eq!(e.code, 422);
        let out = apply(
            ws(),
            "a",
            &cur,
            PatchType::Apply,
            b"spec:\n  paused: yes\n  kind: k\n",
        )
        .unwrap();
        assert_eq!(out["spec"]["paused"], "yes", "YAML 1.2: `yes` is a string");
        assert_eq!(
            apply(ws(), "a", &cur, PatchType::Merge, b"[1]")
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            apply(ws(), "a", &cur, PatchType::Merge, b"{not json")
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            apply(ws(), "a", &cur, PatchType::Json, br#"{"op":"add"}"#)
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn strategic_merge_merges_keyed_lists() {
        let cur = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]}});
        let out = apply(
            pods(),
            "p",
            &cur,
            PatchType::Strategic,
            br#"{"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#,
        )
        .unwrap();
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}])
        );
    }
}

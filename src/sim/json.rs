//! Reading the simulator's objects (`serde_json` values) and stamping them: the one place
//! for the accessors the API and every controller use.

use serde_json::{Value, json};

use crate::sim::store::meta::now_rfc3339;

/// The string at JSON pointer `ptr`, if there is one.
pub fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    lookup(v, ptr).and_then(Value::as_str)
}

/// The value under `keys`, one object key after another (a key may hold `/`, as
/// `nvidia.com/gpu` does, which a JSON pointer would have to escape).
pub fn at_keys<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().try_fold(v, |v, key| v.get(key))
}

/// The string under `keys` (see [`at_keys`]).
pub fn str_at_keys<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a str> {
    at_keys(v, keys).and_then(Value::as_str)
}

/// The integer under `keys` (see [`at_keys`]), or 0.
pub fn int_at_keys(v: &Value, keys: &[&str]) -> i64 {
    at_keys(v, keys).and_then(Value::as_i64).unwrap_or(0)
}

/// The string at JSON pointer `ptr`, or `""` when there is none.
pub fn text_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    str_at(v, ptr).unwrap_or("")
}

/// Now, in epoch milliseconds (the Kubeflow workspace controller's status fields).
pub fn now_epoch_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Now, as RFC 3339 with milliseconds in UTC (`2026-12-05T12:00:00.000Z`), for the
/// snapshot agent's own stamps (metadata times are whole seconds: `store::meta`).
pub fn now_rfc3339_ms() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The annotation `key` of `v`, if it is there.
pub fn annotation<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    lookup(v, "/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// The label `key` of `v`, if it is there.
pub fn label<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    lookup(v, "/metadata/labels")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// `metadata.name`, or `""`.
pub fn name_of(v: &Value) -> &str {
    str_at(v, "/metadata/name").unwrap_or("")
}

/// `metadata.uid`, or `""`.
pub fn uid_of(v: &Value) -> &str {
    str_at(v, "/metadata/uid").unwrap_or("")
}

/// Whether `v` has a deletion timestamp (it waits for its finalizers).
pub fn is_deleting(v: &Value) -> bool {
    lookup(v, "/metadata/deletionTimestamp").is_some()
}

/// A status condition of a custom resource or pod.
pub fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    lookup(obj, "/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| str_at(c, "/type") == Some(type_))
}

/// The `status` of condition `type_`, if the object has it.
pub fn condition_status<'a>(obj: &'a Value, type_: &str) -> Option<&'a str> {
    condition(obj, type_).and_then(|c| str_at(c, "/status"))
}

/// Sets (or replaces) a condition of a custom resource (no `lastProbeTime`, unlike pods);
/// the transition time moves only when the status changes.
pub fn set_cr_condition(obj: &mut Value, type_: &str, status: &str, reason: &str, message: &str) {
    let cond = json!({"type": type_, "status": status, "reason": reason,
        "message": message, "lastTransitionTime": now_rfc3339()});
    upsert_condition(obj, cond);
}

/// Puts `cond` into `status.conditions` (made when missing), replacing the condition of
/// its type; while the status stays the same the old `lastTransitionTime` is kept.
pub fn upsert_condition(obj: &mut Value, mut cond: Value) {
    if !lookup(obj, "/status/conditions").is_some_and(Value::is_array) {
        obj["status"]["conditions"] = json!([]);
    }
    let conds = obj["status"]["conditions"]
        .as_array_mut()
        .expect("conditions is an array");
    let type_ = cond["type"].clone();
    match conds.iter_mut().find(|c| c["type"] == type_) {
        Some(existing) => {
            if existing["status"] == cond["status"] {
                cond["lastTransitionTime"] = existing["lastTransitionTime"].clone();
            }
            *existing = cond;
        }
        None => conds.push(cond),
    }
}

/// `v.pointer(ptr)` without its allocations: serde_json unescapes every token of a JSON
/// pointer into a new `String`, which made pointer lookups the simulator's largest cost in
/// a drill (13.7% of its CPU at 200 workspaces). Tokens without `~` (all the simulator's
/// own pointers) are looked up as they are; a pointer with an escape goes to serde_json.
pub fn lookup<'a>(v: &'a Value, ptr: &str) -> Option<&'a Value> {
    if ptr.contains('~') {
        return v.pointer(ptr);
    }
    if ptr.is_empty() {
        return Some(v);
    }
    ptr.strip_prefix('/')?
        .split('/')
        .try_fold(v, |v, token| match v {
            Value::Object(map) => map.get(token),
            Value::Array(items) => index(token).and_then(|i| items.get(i)),
            _ => None,
        })
}

/// An array index token as RFC 6901 (and serde_json) reads it: digits, no leading zero.
fn index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() > 1) {
        return None;
    }
    token.parse().ok()
}

/// [`lookup`] as a method of `Value`, named apart from serde_json's own `pointer`.
pub trait Lookup {
    fn lookup(&self, ptr: &str) -> Option<&Value>;
}

impl Lookup for Value {
    fn lookup(&self, ptr: &str) -> Option<&Value> {
        lookup(self, ptr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_by_pointer_and_the_two_clocks() {
        let v = serde_json::json!({"metadata": {"name": "ws", "generation": 3}});
        assert_eq!(str_at(&v, "/metadata/name"), Some("ws"));
        assert_eq!(str_at(&v, "/metadata/generation"), None);
        assert_eq!(text_at(&v, "/metadata/uid"), "");
        assert!(now_epoch_ms() > 1_700_000_000_000);
        let stamp = now_rfc3339_ms();
        assert!(stamp.ends_with('Z') && stamp.len() == 24, "{stamp}");
    }

    #[test]
    fn lookup_finds_what_serde_json_pointer_finds() {
        let v = json!({"metadata": {"name": "ws", "labels": {"a/b": "x", "c~d": "y"}},
            "spec": {"containers": [{"name": "main"}, {"name": "side"}], "": {"e": 1}},
            "n": null});
        for ptr in [
            "",
            "/",
            "/metadata/name",
            "/metadata/labels/a~1b",
            "/metadata/labels/c~0d",
            "/metadata/labels/a/b",
            "/spec/containers/1/name",
            "/spec/containers/0/name",
            "/spec/containers/-0",
            "/spec/containers/01/name",
            "/spec/containers/+1/name",
            "/spec/containers/2",
            "/spec/containers/-",
            "/spec//e",
            "/n",
            "/n/x",
            "/metadata/name/x",
            "metadata/name",
            "/missing",
        ] {
            assert_eq!(lookup(&v, ptr), v.pointer(ptr), "{ptr:?}");
            assert_eq!(v.lookup(ptr), v.pointer(ptr), "{ptr:?}");
        }
        assert_eq!(lookup(&v, "/spec/containers/1/name"), Some(&json!("side")));
        // Escaped tokens, which go to serde_json, still find their keys.
        assert_eq!(lookup(&v, "/metadata/labels/a~1b"), Some(&json!("x")));
        assert_eq!(lookup(&v, "/metadata/labels/c~0d"), Some(&json!("y")));
        assert_eq!(
            lookup(&v, "/spec/containers/0"),
            Some(&json!({"name": "main"}))
        );
        assert_eq!(lookup(&v, "/spec/containers/99999999999999999999999"), None);
    }

    #[test]
    fn cr_conditions_keep_their_transition_time_while_unchanged() {
        let mut o = json!({});
        set_cr_condition(&mut o, "Ready", "False", "AwaitingCheckpoint", "m");
        let t0 = o["status"]["conditions"][0]["lastTransitionTime"].clone();
        o["status"]["conditions"][0]["lastTransitionTime"] = json!("2000-01-01T00:00:00Z");
        set_cr_condition(&mut o, "Ready", "False", "AwaitingCheckpoint", "m2");
        assert_eq!(
            o["status"]["conditions"][0]["lastTransitionTime"],
            "2000-01-01T00:00:00Z"
        );
        set_cr_condition(&mut o, "Ready", "True", "AllSnapshotsAvailable", "");
        assert_ne!(
            o["status"]["conditions"][0]["lastTransitionTime"],
            "2000-01-01T00:00:00Z"
        );
        assert!(t0.is_string());
        assert_eq!(condition_status(&o, "Ready"), Some("True"));
    }
}

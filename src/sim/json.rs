//! Reading the simulator's objects (`serde_json` values) and stamping them: the one place
//! for the accessors the API and every controller use.

use serde_json::Value;

/// The string at JSON pointer `ptr`, if there is one.
pub fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
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
}

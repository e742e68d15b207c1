//! Errors the simulated API server returns, rendered as `metav1.Status` with the real
//! reason and HTTP code, so clients react to them as they would to a real API server.

use serde_json::{Value, json};

use super::kinds::KindInfo;

/// An API error: HTTP code, Status reason and message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, kind: &KindInfo, name: &str) -> Self {
        let mut d = json!({"name": name, "kind": kind.plural});
        if !kind.group.is_empty() {
            d["group"] = json!(kind.group);
        }
        self.details = Some(d);
        self
    }

    pub fn not_found(kind: &KindInfo, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", kind.qualified_plural()),
        )
        .with_details(kind, name)
    }

    pub fn namespace_not_found(ns: &str) -> Self {
        Self::new(404, "NotFound", format!("namespaces \"{ns}\" not found"))
    }

    pub fn already_exists(kind: &KindInfo, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", kind.qualified_plural()),
        )
        .with_details(kind, name)
    }

    pub fn conflict(kind: &KindInfo, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                kind.qualified_plural()
            ),
        )
        .with_details(kind, name)
    }

    pub fn stale(kind: &KindInfo, name: &str) -> Self {
        Self::conflict(
            kind,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub fn invalid(kind: &KindInfo, name: &str, field: &str, why: impl Into<String>) -> Self {
        let why = why.into();
        let mut e = Self::new(
            422,
            "Invalid",
            format!(
                "{}.{} \"{name}\" is invalid: {field}: {why}",
                kind.kind,
                if kind.group.is_empty() {
                    "core"
                } else {
                    kind.group
                }
            ),
        )
        .with_details(kind, name);
        if let Some(d) = e.details.as_mut() {
            d["causes"] = json!([{"reason": "FieldValueInvalid", "message": why, "field": field}]);
        }
        e
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    pub fn unsupported_media_type(content_type: &str, kind: Option<&KindInfo>) -> Self {
        let message = match kind {
            Some(k) => format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {content_type} for {})",
                k.qualified_plural()
            ),
            None => format!("the body of the request was in an unknown format: {content_type}"),
        };
        Self::new(415, "UnsupportedMediaType", message)
    }

    pub fn expired(requested: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn too_many_requests() -> Self {
        Self::new(
            429,
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `metav1.Status` body.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

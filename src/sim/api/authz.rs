//! Authorization of resource requests, as the real API server's RBAC authorizer sees them.
//!
//! Every authenticated resource request becomes an RBAC tuple (verb, group,
//! resource[/subresource], namespaced) in the [`Audit`]. With enforcement on (simulator
//! profile `[rbac] enforce = "deploy"`), a request the deploy rules
//! ([`crate::platform::rbac`]) do not allow gets the real 403 `metav1.Status`. The
//! SelfSubjectAccessReview kind is answered here from the same rules. Discovery, OpenAPI and
//! the simulator's own endpoints (`/sim/v1/...`) are not resource requests and never checked.

use std::collections::BTreeSet;
use std::sync::Mutex;

use axum::body::Bytes;
use axum::extract::{Request, State as AxState};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::path::{self, ResourcePath, Target};
use super::{State, json_response};
use crate::platform::rbac::{DeployRbac, Scope};
use crate::sim::error::ApiError;
use crate::sim::kinds::KindInfo;

/// One kind of request seen by the simulator, in RBAC terms.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AuditEntry {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete` or `deletecollection`.
    pub verb: String,
    /// API group; empty for the core group.
    pub group: String,
    /// Plural resource, with a subresource as `pods/status`.
    pub resource: String,
    /// Whether the request named a namespace (for a Namespace object, its own name, as on a
    /// real API server).
    pub namespaced: bool,
    /// Whether the request was allowed (always, unless enforcement is on).
    pub allowed: bool,
}

/// The deduplicated audit of client requests.
#[derive(Debug, Default)]
pub struct Audit {
    seen: Mutex<BTreeSet<AuditEntry>>,
}

impl Audit {
    pub fn record(&self, entry: AuditEntry) {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(entry);
    }

    /// Every distinct entry, sorted.
    pub fn entries(&self) -> Vec<AuditEntry> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

/// A resource request's authorization attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub kind: &'static KindInfo,
    pub verb: &'static str,
    /// `pods` or `pods/status`.
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl Attributes {
    /// The attributes of a request, as the real API server derives them; `None` for methods
    /// that are no resource verb.
    pub fn of(method: &Method, path: &ResourcePath, query: Option<&str>) -> Option<Self> {
        let watch = form_urlencoded::parse(query.unwrap_or("").as_bytes())
            .any(|(k, v)| k == "watch" && (v == "true" || v == "1"));
        let verb = match (method, path.name.is_some()) {
            (&Method::GET, true) => "get",
            (&Method::GET, false) if watch => "watch",
            (&Method::GET, false) => "list",
            (&Method::POST, _) => "create",
            (&Method::PUT, _) => "update",
            (&Method::PATCH, _) => "patch",
            (&Method::DELETE, true) => "delete",
            (&Method::DELETE, false) => "deletecollection",
            _ => return None,
        };
        let resource = match &path.subresource {
            Some(sub) => format!("{}/{sub}", path.kind.plural),
            None => path.kind.plural.to_string(),
        };
        // `/api/v1/namespaces/NAME` is in namespace NAME for the authorizer.
        let namespace = if path.kind.kind == "Namespace" && path.kind.group.is_empty() {
            path.name.clone()
        } else {
            path.namespace.clone()
        };
        Some(Self {
            kind: path.kind,
            verb,
            resource,
            namespace,
            name: path.name.clone(),
        })
    }

    /// The second check of a WebSocket upgrade (a `GET`) to exec, attach or port-forward:
    /// `create` on the same subresource, besides `get`
    /// (`AuthorizePodWebsocketUpgradeCreatePermission`, beta and on by default since 1.35), so
    /// a role that only reads cannot open a shell.
    pub fn also_create(&self) -> Option<Self> {
        let streaming =
            ["pods/exec", "pods/attach", "pods/portforward"].contains(&self.resource.as_str());
        (self.verb == "get" && streaming).then(|| Self {
            verb: "create",
            ..self.clone()
        })
    }

    fn allowed_by(&self, rbac: &DeployRbac) -> bool {
        rbac.allows_in(
            self.verb,
            self.kind.group,
            &self.resource,
            self.namespace.as_deref(),
        )
    }

    /// The real API server's 403 for this request.
    pub fn forbidden(&self, user: &str) -> ApiError {
        let qualified = self.kind.qualified_plural();
        let subject = match &self.name {
            Some(n) => format!("{qualified} \"{n}\""),
            None => qualified,
        };
        let scope = match &self.namespace {
            Some(ns) => format!("in the namespace \"{ns}\""),
            None => "at the cluster scope".to_string(),
        };
        let mut e = ApiError::forbidden(format!(
            "{subject} is forbidden: User \"{user}\" cannot {} resource \"{}\" in API group \"{}\" {scope}",
            self.verb, self.resource, self.kind.group
        ));
        let mut details = json!({"kind": self.kind.plural});
        if let Some(n) = &self.name {
            details["name"] = json!(n);
        }
        if !self.kind.group.is_empty() {
            details["group"] = json!(self.kind.group);
        }
        e.details = Some(details);
        e
    }
}

/// Middleware: records every resource request in the audit and, with enforcement on,
/// refuses what the deploy rules do not allow.
pub async fn authorize(AxState(state): AxState<State>, req: Request, next: Next) -> Response {
    let attrs = match path::parse(req.uri().path()) {
        Ok(Target::Resource(p)) => Attributes::of(req.method(), &p, req.uri().query()),
        _ => None,
    };
    let checks = attrs.into_iter().flat_map(|a| {
        let create = a.also_create();
        std::iter::once(a).chain(create)
    });
    for a in checks {
        let allowed = state.rbac.is_none_or(|r| a.allowed_by(r));
        state.audit.record(AuditEntry {
            verb: a.verb.to_string(),
            group: a.kind.group.to_string(),
            resource: a.resource.clone(),
            namespaced: a.namespace.is_some(),
            allowed,
        });
        if let (false, Some(rbac)) = (allowed, state.rbac) {
            return a.forbidden(&rbac.user()).into_response();
        }
    }
    next.run(req).await
}

/// Paths every authenticated user may GET on a real cluster (`system:discovery`,
/// `system:public-info-viewer`).
fn public_non_resource(path: &str) -> bool {
    ["/api", "/apis", "/openapi"]
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")))
        || matches!(path, "/version" | "/healthz" | "/livez" | "/readyz")
}

/// `POST .../selfsubjectaccessreviews`: the review echoed back with `status.allowed` and a
/// reason, answered from the enforced rules (everything is allowed when enforcement is off).
pub fn review(
    state: &State,
    method: Method,
    path: &ResourcePath,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let kind = path.kind;
    if method != Method::POST || path.name.is_some() {
        return Err(ApiError::method_not_allowed());
    }
    let mut obj: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding JSON body: {e}")))?;
    if !obj.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let str_at = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (allowed, reason) = match (
        spec.get("resourceAttributes").filter(|v| v.is_object()),
        spec.get("nonResourceAttributes").filter(|v| v.is_object()),
    ) {
        (Some(ra), None) => {
            let verb = str_at(ra, "verb");
            let group = str_at(ra, "group");
            let mut resource = str_at(ra, "resource");
            let sub = str_at(ra, "subresource");
            if !sub.is_empty() {
                resource = format!("{resource}/{sub}");
            }
            let ns = str_at(ra, "namespace");
            let ns = (!ns.is_empty()).then_some(ns.as_str());
            match state.rbac {
                None => (true, not_enforced()),
                Some(rbac) => match rbac.grant(&verb, &group, &resource, ns) {
                    Some(p) => (true, allowed_reason(rbac, &p.scope)),
                    None => (
                        false,
                        format!(
                            "RBAC: no rule of Role \"{}\" or ClusterRole \"{}\" allows {verb} on \"{resource}\" in API group \"{group}\"",
                            rbac.role_name(),
                            rbac.cluster_role_name()
                        ),
                    ),
                },
            }
        }
        (None, Some(nra)) => {
            let ok = str_at(nra, "verb") == "get" && public_non_resource(&str_at(nra, "path"));
            match (state.rbac, ok) {
                (None, _) => (true, not_enforced()),
                (Some(_), true) => (
                    true,
                    "RBAC: allowed by ClusterRoleBinding \"system:discovery\" of ClusterRole \"system:discovery\" to Group \"system:authenticated\"".into(),
                ),
                (Some(_), false) => (false, String::new()),
            }
        }
        _ => {
            return Err(ApiError::invalid(
                kind,
                "",
                "spec.resourceAttributes",
                "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
    };
    obj["apiVersion"] = json!(kind.api_version());
    obj["kind"] = json!(kind.kind);
    if obj.get("metadata").is_none_or(|m| !m.is_object()) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]["creationTimestamp"] = Value::Null;
    obj["status"] = if reason.is_empty() {
        json!({"allowed": allowed})
    } else {
        json!({"allowed": allowed, "reason": reason})
    };
    Ok(json_response(StatusCode::CREATED, &obj))
}

fn not_enforced() -> String {
    "the simulator does not enforce RBAC (profile [rbac] enforce = \"off\")".into()
}

/// The real authorizer's reason; the deploy manifests name each binding after its role.
fn allowed_reason(rbac: &DeployRbac, scope: &Scope) -> String {
    let sa = format!(
        "ServiceAccount \"{}/{}\"",
        crate::platform::rbac::SERVICE_ACCOUNT,
        rbac.namespace()
    );
    match scope {
        Scope::Namespace(ns) => format!(
            "RBAC: allowed by RoleBinding \"{}/{ns}\" of Role \"{}\" to {sa}",
            rbac.role_name(),
            rbac.role_name()
        ),
        Scope::Cluster => format!(
            "RBAC: allowed by ClusterRoleBinding \"{}\" of ClusterRole \"{}\" to {sa}",
            rbac.cluster_role_name(),
            rbac.cluster_role_name()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: Method, p: &str, query: Option<&str>) -> Attributes {
        let Ok(Target::Resource(r)) = path::parse(p) else {
            panic!("{p}")
        };
        Attributes::of(&method, &r, query).unwrap()
    }

    #[test]
    fn requests_map_to_rbac_verbs_and_scopes() {
        let a = attrs(
            Method::GET,
            "/api/v1/namespaces/n/pods",
            Some("&watch=true"),
        );
        assert_eq!((a.verb, a.namespace.as_deref()), ("watch", Some("n")));
        let a = attrs(Method::GET, "/api/v1/pods", Some("limit=500"));
        assert_eq!((a.verb, a.namespace.as_deref()), ("list", None));
        let a = attrs(Method::DELETE, "/api/v1/namespaces/n/pods", None);
        assert_eq!(a.verb, "deletecollection");
        let a = attrs(
            Method::PATCH,
            "/apis/kubeflow.org/v1beta1/namespaces/n/workspaces/w/status",
            None,
        );
        assert_eq!(
            (a.verb, a.resource.as_str()),
            ("patch", "workspaces/status")
        );
        let a = attrs(Method::GET, "/api/v1/namespaces/wsgate-test", None);
        assert_eq!(
            (a.verb, a.namespace.as_deref(), a.name.as_deref()),
            ("get", Some("wsgate-test"), Some("wsgate-test"))
        );
        assert_eq!(attrs(Method::PUT, "/api/v1/nodes/x", None).verb, "update");
    }

    #[test]
    fn websocket_exec_and_port_forward_need_get_and_create() {
        for sub in ["exec", "portforward"] {
            let a = attrs(
                Method::GET,
                &format!("/api/v1/namespaces/n/pods/p/{sub}"),
                Some("command=ls"),
            );
            assert_eq!(
                (a.verb, a.resource.as_str()),
                ("get", &*format!("pods/{sub}"))
            );
            let also = a.also_create().unwrap();
            assert_eq!(
                (also.verb, also.resource),
                ("create", format!("pods/{sub}"))
            );
        }
        assert!(path::parse("/api/v1/namespaces/n/secrets/s/exec").is_err());
        let log = attrs(Method::GET, "/api/v1/namespaces/n/pods/p", None);
        assert!(log.also_create().is_none());
    }

    #[test]
    fn forbidden_reads_like_the_real_api_server() {
        let user = "system:serviceaccount:wsgate-test:wsgate";
        let a = attrs(
            Method::GET,
            "/api/v1/namespaces/wsgate-test/pods/p/status",
            None,
        );
        let e = a.forbidden(user);
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "pods \"p\" is forbidden: User \"system:serviceaccount:wsgate-test:wsgate\" cannot get resource \"pods/status\" in API group \"\" in the namespace \"wsgate-test\""
        );
        let e = attrs(
            Method::POST,
            "/apis/kubeflow.org/v1beta1/workspacekinds",
            None,
        )
        .forbidden(user);
        assert_eq!(
            e.message,
            "workspacekinds.kubeflow.org is forbidden: User \"system:serviceaccount:wsgate-test:wsgate\" cannot create resource \"workspacekinds\" in API group \"kubeflow.org\" at the cluster scope"
        );
        assert_eq!(e.to_status()["reason"], "Forbidden");
    }
}

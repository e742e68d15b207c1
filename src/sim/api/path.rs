//! Resolves a request path under `/api/v1` or `/apis/<group>/<version>` to a served kind,
//! namespace, name and subresource.

use crate::sim::error::ApiError;
use crate::sim::kinds::{self, KindInfo};

/// What a resource path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `GET /api/v1` or `GET /apis/<g>/<v>`: the group/version's resource list.
    GroupVersion { group: String, version: String },
    /// A collection or an item of a served kind.
    Resource(ResourcePath),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    pub kind: &'static KindInfo,
    /// The namespace in the URL, if any.
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

fn not_found() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

/// Parses a URL path (without query).
pub fn parse(path: &str) -> Result<Target, ApiError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(not_found()),
    };
    if rest.is_empty() || rest == [""] {
        return Ok(Target::GroupVersion {
            group: group.to_string(),
            version: version.to_string(),
        });
    }
    let find = |plural: &str| kinds::find(group, version, plural).ok_or_else(not_found);
    let (namespace, plural, name, sub) = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if group.is_empty() && !matches!(*plural, "status" | "finalize")
                || !group.is_empty() =>
        {
            (
                Some(*ns),
                *plural,
                tail.first().copied(),
                tail.get(1).copied(),
            )
        }
        [plural, tail @ ..] => (None, *plural, tail.first().copied(), tail.get(1).copied()),
        [] => return Err(not_found()),
    };
    if rest.len() > 5 {
        return Err(not_found());
    }
    let kind = find(plural)?;
    if namespace.is_some() && !kind.namespaced {
        return Err(not_found());
    }
    let streams = kind.kind == "Pod" && matches!(sub, Some("exec" | "portforward"));
    if let Some(sub) = sub
        && !(sub == "status" && kind.status)
        && !streams
    {
        return Err(not_found());
    }
    if name.is_some() && namespace.is_none() && kind.namespaced {
        return Err(not_found());
    }
    Ok(Target::Resource(ResourcePath {
        kind,
        namespace: namespace.map(str::to_string),
        name: name.filter(|n| !n.is_empty()).map(str::to_string),
        subresource: sub.map(str::to_string),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match parse(path).unwrap() {
            Target::Resource(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parses_core_and_group_paths() {
        let r = res("/api/v1/namespaces/n/pods/p");
        assert_eq!(
            (r.kind.kind, r.namespace.as_deref(), r.name.as_deref()),
            ("Pod", Some("n"), Some("p"))
        );
        let r = res("/api/v1/namespaces/n");
        assert_eq!(
            (r.kind.kind, r.namespace, r.name.as_deref()),
            ("Namespace", None, Some("n"))
        );
        let r = res("/api/v1/namespaces/n/status");
        assert_eq!(
            (r.kind.kind, r.subresource.as_deref()),
            ("Namespace", Some("status"))
        );
        let r = res("/apis/kubeflow.org/v1beta1/namespaces/n/workspaces/w/status");
        assert_eq!(
            (r.kind.kind, r.subresource.as_deref()),
            ("Workspace", Some("status"))
        );
        let r = res("/apis/kubeflow.org/v1beta1/workspaces");
        assert_eq!(
            (r.kind.kind, r.namespace, r.name),
            ("Workspace", None, None)
        );
        let r = res("/apis/kubeflow.org/v1beta1/workspacekinds/k");
        assert_eq!(r.name.as_deref(), Some("k"));
        assert_eq!(
            parse("/apis/kubeflow.org/v1beta1").unwrap(),
            Target::GroupVersion {
                group: "kubeflow.org".into(),
                version: "v1beta1".into()
            }
        );
    }

    #[test]
    fn rejects_what_the_server_does_not_serve() {
        for p in [
            "/apis/unknown.io/v1/things",
            "/apis/kubeflow.org/v1/workspaces",
            "/api/v1/namespaces/n/workspacekinds/k",
            "/api/v1/pods/p",
            "/api/v1/namespaces/n/events/e/status",
            "/apis/kubeflow.org/v1beta1/namespaces/n/workspaces/w/exec",
            "/nothing",
        ] {
            assert_eq!(parse(p).unwrap_err().code, 404, "{p}");
        }
    }
}

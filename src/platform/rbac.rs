//! wsgate's own RBAC as deployed: `deploy/base/role.yaml` and `deploy/base/clusterrole.yaml`,
//! compiled in and parsed as k8s-openapi `Role` and `ClusterRole`, flattened into one
//! permission per (verb, group, resource, scope), and the one check of whether a request is
//! allowed. The simulator enforces these rules and `wsgate doctor` checks a cluster against
//! them: the manifests are the single source of truth.
//!
//! Only exact rules are accepted: no `*`, no `resourceNames`, no `nonResourceURLs` (a
//! least-privilege role needs none of them, and the check stays exact).

use std::sync::LazyLock;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};

/// `deploy/base/role.yaml`: everything wsgate does in its test namespace.
pub const ROLE_YAML: &str = include_str!("../../deploy/base/role.yaml");
/// `deploy/base/clusterrole.yaml`: the cluster-wide reads.
pub const CLUSTER_ROLE_YAML: &str = include_str!("../../deploy/base/clusterrole.yaml");
/// The Role of `deploy/components/port-forward`.
pub const PORT_FORWARD_ROLE_YAML: &str =
    include_str!("../../deploy/components/port-forward/role.yaml");
/// The ServiceAccount the deploy manifests bind both roles to (in the Role's namespace).
pub const SERVICE_ACCOUNT: &str = "wsgate";

/// The verbs RBAC knows for resource requests.
pub const VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// Why RBAC manifests cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RbacError {
    #[error("cannot parse {file} as a {kind}")]
    Parse {
        file: String,
        kind: &'static str,
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    #[error("{file}: the Role has no metadata.namespace")]
    NoNamespace { file: String },
    #[error("{file}: rule {rule}: {what}")]
    Unsupported {
        file: String,
        rule: usize,
        what: String,
    },
}

/// Where a permission applies.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Granted by the Role: requests in this namespace only.
    Namespace(String),
    /// Granted by the ClusterRole (bound cluster-wide): every namespace and cluster-scoped
    /// requests.
    Cluster,
}

/// One verb on one resource, as a rule grants it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Permission {
    pub verb: String,
    /// API group; empty for the core group.
    pub group: String,
    /// Plural resource, with a subresource as `pods/log`.
    pub resource: String,
    pub scope: Scope,
}

impl Permission {
    /// Whether this permission allows `verb` on `resource` in `group`, for a request in
    /// `namespace` (`None`: cluster-scoped, or across all namespaces).
    pub fn grants(&self, verb: &str, group: &str, resource: &str, namespace: Option<&str>) -> bool {
        self.verb == verb
            && self.group == group
            && self.resource == resource
            && match &self.scope {
                Scope::Cluster => true,
                Scope::Namespace(ns) => namespace == Some(ns.as_str()),
            }
    }
}

/// The deployed Role and ClusterRole, and their permissions.
#[derive(Debug, Clone)]
pub struct DeployRbac {
    pub role: Role,
    pub cluster_role: ClusterRole,
    namespace: String,
    permissions: Vec<Permission>,
}

fn flatten(
    file: &str,
    rules: &[PolicyRule],
    scope: &Scope,
    out: &mut Vec<Permission>,
) -> Result<(), RbacError> {
    for (i, rule) in rules.iter().enumerate() {
        let unsupported = |what: String| RbacError::Unsupported {
            file: file.to_string(),
            rule: i + 1,
            what,
        };
        if rule.resource_names.as_ref().is_some_and(|n| !n.is_empty()) {
            return Err(unsupported("resourceNames are not supported".into()));
        }
        if rule
            .non_resource_urls
            .as_ref()
            .is_some_and(|n| !n.is_empty())
        {
            return Err(unsupported("nonResourceURLs are not supported".into()));
        }
        let groups = rule.api_groups.clone().unwrap_or_default();
        let resources = rule.resources.clone().unwrap_or_default();
        if groups.is_empty() || resources.is_empty() || rule.verbs.is_empty() {
            return Err(unsupported(
                "every rule needs apiGroups, resources and verbs".into(),
            ));
        }
        for verb in &rule.verbs {
            if !VERBS.contains(&verb.as_str()) {
                return Err(unsupported(format!(
                    "verb {verb:?} is not one of {VERBS:?}"
                )));
            }
        }
        if let Some(w) = groups.iter().chain(&resources).find(|s| s.contains('*')) {
            return Err(unsupported(format!("wildcard {w:?} is not allowed")));
        }
        for group in &groups {
            for resource in &resources {
                for verb in &rule.verbs {
                    out.push(Permission {
                        verb: verb.clone(),
                        group: group.clone(),
                        resource: resource.clone(),
                        scope: scope.clone(),
                    });
                }
            }
        }
    }
    Ok(())
}

impl DeployRbac {
    /// Parses a Role and a ClusterRole (YAML, one document each).
    pub fn parse(role_yaml: &str, cluster_role_yaml: &str) -> Result<Self, RbacError> {
        let (role_file, cluster_file) = ("deploy/base/role.yaml", "deploy/base/clusterrole.yaml");
        let role: Role = serde_saphyr::from_str(role_yaml).map_err(|source| RbacError::Parse {
            file: role_file.to_string(),
            kind: "Role",
            source: Box::new(source),
        })?;
        let cluster_role: ClusterRole =
            serde_saphyr::from_str(cluster_role_yaml).map_err(|source| RbacError::Parse {
                file: cluster_file.to_string(),
                kind: "ClusterRole",
                source: Box::new(source),
            })?;
        let namespace = role
            .metadata
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| RbacError::NoNamespace {
                file: role_file.to_string(),
            })?;
        let mut permissions = Vec::new();
        flatten(
            role_file,
            role.rules.as_deref().unwrap_or_default(),
            &Scope::Namespace(namespace.clone()),
            &mut permissions,
        )?;
        flatten(
            cluster_file,
            cluster_role.rules.as_deref().unwrap_or_default(),
            &Scope::Cluster,
            &mut permissions,
        )?;
        permissions.sort();
        permissions.dedup();
        Ok(Self {
            role,
            cluster_role,
            namespace,
            permissions,
        })
    }

    /// The rules compiled into wsgate (`deploy/base`). They are checked by tests, so this
    /// cannot fail in a built binary.
    pub fn embedded() -> &'static DeployRbac {
        static EMBEDDED: LazyLock<DeployRbac> = LazyLock::new(|| {
            DeployRbac::parse(ROLE_YAML, CLUSTER_ROLE_YAML)
                .expect("deploy/base/role.yaml and clusterrole.yaml are valid (tested)")
        });
        &EMBEDDED
    }

    /// The rules of `deploy/base` plus `deploy/components/port-forward` (what
    /// `session.connect` other than `pod-ip` needs).
    pub fn embedded_with_port_forward() -> &'static DeployRbac {
        static WITH: LazyLock<DeployRbac> = LazyLock::new(|| {
            let mut rbac = DeployRbac::embedded().clone();
            let file = "deploy/components/port-forward/role.yaml";
            let role: Role = serde_saphyr::from_str(PORT_FORWARD_ROLE_YAML)
                .expect("deploy/components/port-forward/role.yaml is valid (tested)");
            let scope = Scope::Namespace(rbac.namespace.clone());
            flatten(
                file,
                role.rules.as_deref().unwrap_or_default(),
                &scope,
                &mut rbac.permissions,
            )
            .expect("deploy/components/port-forward/role.yaml has no wildcards (tested)");
            rbac.permissions.sort();
            rbac.permissions.dedup();
            rbac
        });
        &WITH
    }

    /// The namespace the Role (and the ServiceAccount) live in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The user name the API server sees for the ServiceAccount:
    /// `system:serviceaccount:<namespace>:wsgate`.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{SERVICE_ACCOUNT}", self.namespace)
    }

    /// Every permission, sorted, each once.
    pub fn permissions(&self) -> &[Permission] {
        &self.permissions
    }

    /// Whether the rules allow `verb` on `resource` (`pods/log` for a subresource) in `group`,
    /// for a request in `namespace` (`None`: cluster-scoped or across all namespaces).
    pub fn allows_in(
        &self,
        verb: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> bool {
        self.grant(verb, group, resource, namespace).is_some()
    }

    /// The permission that allows the request, preferring the Role's (namespaced) one.
    pub fn grant(
        &self,
        verb: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> Option<&Permission> {
        self.permissions
            .iter()
            .find(|p| p.grants(verb, group, resource, namespace))
    }

    /// The Role's name (`metadata.name`).
    pub fn role_name(&self) -> &str {
        self.role.metadata.name.as_deref().unwrap_or_default()
    }

    /// The ClusterRole's name (`metadata.name`).
    pub fn cluster_role_name(&self) -> &str {
        self.cluster_role
            .metadata
            .name
            .as_deref()
            .unwrap_or_default()
    }

    /// [`DeployRbac::allows_in`] with `namespaced` meaning "in the Role's namespace".
    pub fn allows(&self, verb: &str, group: &str, resource: &str, namespaced: bool) -> bool {
        let ns = namespaced.then_some(self.namespace.as_str());
        self.allows_in(verb, group, resource, ns)
    }
}

/// Whether the deployed rules allow `verb` on `resource` in `group`; `namespaced`: a request
/// in the test namespace (Role and ClusterRole apply), otherwise cluster-scoped or across all
/// namespaces (ClusterRole only).
pub fn allows(verb: &str, group: &str, resource: &str, namespaced: bool) -> bool {
    DeployRbac::embedded().allows(verb, group, resource, namespaced)
}

/// The deployed permissions, flattened: one per (verb, group, resource, scope).
pub fn permissions() -> &'static [Permission] {
    DeployRbac::embedded().permissions()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_forward_component_adds_get_and_create_on_pods_portforward_only() {
        let base = DeployRbac::embedded();
        let with = DeployRbac::embedded_with_port_forward();
        for verb in ["get", "create"] {
            assert!(!base.allows_in(verb, "", "pods/portforward", Some("wsgate-test")));
            assert!(with.allows_in(verb, "", "pods/portforward", Some("wsgate-test")));
            assert!(!with.allows_in(verb, "", "pods/portforward", Some("default")));
        }
        // The base grants exec (the file evidence) in the test namespace only.
        for verb in ["get", "create"] {
            assert!(base.allows_in(verb, "", "pods/exec", Some("wsgate-test")));
            assert!(!base.allows_in(verb, "", "pods/exec", Some("default")));
        }
        let added: Vec<&Permission> = with
            .permissions()
            .iter()
            .filter(|p| !base.permissions().contains(p))
            .collect();
        assert_eq!(added.len(), 2, "{added:?}");
    }

    #[test]
    fn embedded_rules_parse_and_scope_correctly() {
        let rbac = DeployRbac::embedded();
        assert_eq!(rbac.namespace(), "wsgate-test");
        assert_eq!(rbac.user(), "system:serviceaccount:wsgate-test:wsgate");
        // Role: only in its namespace.
        assert!(allows("create", "kubeflow.org", "workspaces", true));
        assert!(!allows("create", "kubeflow.org", "workspaces", false));
        assert!(!rbac.allows_in("create", "kubeflow.org", "workspaces", Some("default")));
        // ClusterRole: everywhere.
        assert!(allows("list", "", "nodes", false));
        assert!(rbac.allows_in("list", "", "pods", Some("default")));
        // The one cluster-wide write: node taints for the `taint` squeeze.
        assert!(allows("patch", "", "nodes", false));
        // Never: other writes outside the Role, subresources not named.
        assert!(!allows("delete", "", "nodes", false));
        assert!(!allows("patch", "", "nodes/status", false));
        assert!(!allows("patch", "kubeflow.org", "workspaces/status", true));
        assert!(!allows("get", "", "pods/log", true));
    }

    #[test]
    fn permissions_are_flat_sorted_and_unique() {
        let p = permissions();
        assert!(!p.is_empty());
        assert!(p.windows(2).all(|w| w[0] < w[1]));
        assert!(p.iter().all(|p| VERBS.contains(&p.verb.as_str())));
    }

    #[test]
    fn wildcards_names_and_missing_namespace_are_refused() {
        let role = |rules: &str| {
            format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: r\n  namespace: n\nrules:\n{rules}"
            )
        };
        let cr =
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: c\n";
        for (rules, needle) in [
            (
                "  - apiGroups: [\"\"]\n    resources: [\"*\"]\n    verbs: [get]\n",
                "wildcard",
            ),
            (
                "  - apiGroups: [\"\"]\n    resources: [pods]\n    verbs: [\"*\"]\n",
                "verb",
            ),
            (
                "  - apiGroups: [\"\"]\n    resources: [pods]\n    resourceNames: [a]\n    verbs: [get]\n",
                "resourceNames",
            ),
        ] {
            let err = DeployRbac::parse(&role(rules), cr).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
        let no_ns = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: r\n";
        assert!(matches!(
            DeployRbac::parse(no_ns, cr),
            Err(RbacError::NoNamespace { .. })
        ));
        assert!(matches!(
            DeployRbac::parse("rules: 3", cr),
            Err(RbacError::Parse { kind: "Role", .. })
        ));
    }
}

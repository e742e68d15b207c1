//! The kinds the simulator serves: group, version, plural, scope and subresources.
//! Discovery, routing, validation and the Table printer all read this one registry. Jobs,
//! CronJobs and the RBAC kinds are stored only (no controllers), so that `kubectl apply` of
//! `deploy/` works; SelfSubjectAccessReview is answered, never stored (`api::authz`).

/// One served kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KindInfo {
    /// API group; empty for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub short_names: &'static [&'static str],
    pub namespaced: bool,
    /// Whether the kind has a `/status` subresource.
    pub status: bool,
    /// Whether the kind is a custom resource (strategic merge patch is refused for those).
    pub custom: bool,
    /// The verbs served and advertised in discovery.
    pub verbs: &'static [&'static str],
}

/// The verbs of a kind whose objects are stored.
pub const STORED_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The verbs of a review kind: answered on create, never stored.
pub const REVIEW_VERBS: &[&str] = &["create"];

impl KindInfo {
    /// `apiVersion` as objects carry it: `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The resource name as errors print it: `pods` or `workspaces.kubeflow.org`.
    pub fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The verbs advertised in discovery.
    pub fn verbs(&self) -> &'static [&'static str] {
        self.verbs
    }

    /// Whether objects of this kind are stored (false for review kinds such as
    /// SelfSubjectAccessReview, which are only answered).
    pub fn stored(&self) -> bool {
        self.verbs.contains(&"get")
    }
}

const fn core(
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    short_names: &'static [&'static str],
    namespaced: bool,
    status: bool,
) -> KindInfo {
    KindInfo {
        group: "",
        version: "v1",
        kind,
        plural,
        singular,
        short_names,
        namespaced,
        status,
        custom: false,
        verbs: STORED_VERBS,
    }
}

const fn rbac(
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
) -> KindInfo {
    KindInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind,
        plural,
        singular,
        short_names: &[],
        namespaced,
        status: false,
        custom: false,
        verbs: STORED_VERBS,
    }
}

/// Every kind the simulator serves.
pub const KINDS: &[KindInfo] = &[
    core("Namespace", "namespaces", "namespace", &["ns"], false, true),
    core("Node", "nodes", "node", &["no"], false, true),
    core("Pod", "pods", "pod", &["po"], true, true),
    core("Event", "events", "event", &["ev"], true, false),
    core(
        "ResourceQuota",
        "resourcequotas",
        "resourcequota",
        &["quota"],
        true,
        true,
    ),
    core(
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        &["pvc"],
        true,
        true,
    ),
    core("Service", "services", "service", &["svc"], true, true),
    core(
        "ServiceAccount",
        "serviceaccounts",
        "serviceaccount",
        &["sa"],
        true,
        false,
    ),
    core("ConfigMap", "configmaps", "configmap", &["cm"], true, false),
    core("Secret", "secrets", "secret", &[], true, false),
    KindInfo {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        singular: "deployment",
        short_names: &["deploy"],
        namespaced: true,
        status: true,
        custom: false,
        verbs: STORED_VERBS,
    },
    KindInfo {
        group: "apps",
        version: "v1",
        kind: "StatefulSet",
        plural: "statefulsets",
        singular: "statefulset",
        short_names: &["sts"],
        namespaced: true,
        status: true,
        custom: false,
        verbs: STORED_VERBS,
    },
    // Stored only: the simulator's pod network is the loopback, which no policy limits;
    // `wsgate doctor` reads them.
    KindInfo {
        group: "networking.k8s.io",
        version: "v1",
        kind: "NetworkPolicy",
        plural: "networkpolicies",
        singular: "networkpolicy",
        short_names: &["netpol"],
        namespaced: true,
        status: false,
        custom: false,
        verbs: STORED_VERBS,
    },
    KindInfo {
        group: "batch",
        version: "v1",
        kind: "Job",
        plural: "jobs",
        singular: "job",
        short_names: &[],
        namespaced: true,
        status: true,
        custom: false,
        verbs: STORED_VERBS,
    },
    KindInfo {
        group: "batch",
        version: "v1",
        kind: "CronJob",
        plural: "cronjobs",
        singular: "cronjob",
        short_names: &["cj"],
        namespaced: true,
        status: true,
        custom: false,
        verbs: STORED_VERBS,
    },
    rbac("Role", "roles", "role", true),
    rbac("ClusterRole", "clusterroles", "clusterrole", false),
    rbac("RoleBinding", "rolebindings", "rolebinding", true),
    rbac(
        "ClusterRoleBinding",
        "clusterrolebindings",
        "clusterrolebinding",
        false,
    ),
    KindInfo {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SelfSubjectAccessReview",
        plural: "selfsubjectaccessreviews",
        singular: "selfsubjectaccessreview",
        short_names: &[],
        namespaced: false,
        status: false,
        custom: false,
        verbs: REVIEW_VERBS,
    },
    KindInfo {
        group: "kubeflow.org",
        version: "v1beta1",
        kind: "Workspace",
        plural: "workspaces",
        singular: "workspace",
        short_names: &["ws"],
        namespaced: true,
        status: true,
        custom: true,
        verbs: STORED_VERBS,
    },
    KindInfo {
        group: "kubeflow.org",
        version: "v1beta1",
        kind: "WorkspaceKind",
        plural: "workspacekinds",
        singular: "workspacekind",
        short_names: &["wsk"],
        namespaced: false,
        status: true,
        custom: true,
        verbs: STORED_VERBS,
    },
    pod_snapshot_kind(
        "PodSnapshotStorageConfig",
        "podsnapshotstorageconfigs",
        "podsnapshotstorageconfig",
        false,
    ),
    pod_snapshot_kind(
        "PodSnapshotPolicy",
        "podsnapshotpolicies",
        "podsnapshotpolicy",
        true,
    ),
    pod_snapshot_kind(
        "PodSnapshotManualTrigger",
        "podsnapshotmanualtriggers",
        "podsnapshotmanualtrigger",
        true,
    ),
    pod_snapshot_kind("PodSnapshot", "podsnapshots", "podsnapshot", true),
];

/// A kind of GKE Pod Snapshots (`podsnapshot.gke.io/v1`): custom, with a status
/// subresource, no short names.
const fn pod_snapshot_kind(
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
) -> KindInfo {
    KindInfo {
        group: "podsnapshot.gke.io",
        version: "v1",
        kind,
        plural,
        singular,
        short_names: &[],
        namespaced,
        status: true,
        custom: true,
        verbs: STORED_VERBS,
    }
}

/// Finds a served kind by group, version and plural.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static KindInfo> {
    KINDS
        .iter()
        .find(|k| k.group == group && k.version == version && k.plural == plural)
}

/// Finds a served kind by `apiVersion` and `kind`.
pub fn find_by_kind(api_version: &str, kind: &str) -> Option<&'static KindInfo> {
    KINDS
        .iter()
        .find(|k| k.kind == kind && k.api_version() == api_version)
}

/// The group/versions served, in discovery order (core first).
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for k in KINDS {
        if !out.contains(&(k.group, k.version)) {
            out.push((k.group, k.version));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_match_the_platform() {
        assert!(
            find("kubeflow.org", "v1beta1", "workspaces")
                .unwrap()
                .namespaced
        );
        assert!(
            !find("kubeflow.org", "v1beta1", "workspacekinds")
                .unwrap()
                .namespaced
        );
        assert!(
            !find("podsnapshot.gke.io", "v1", "podsnapshotstorageconfigs")
                .unwrap()
                .namespaced
        );
        assert!(
            find("podsnapshot.gke.io", "v1", "podsnapshots")
                .unwrap()
                .namespaced
        );
        assert!(!find("", "v1", "nodes").unwrap().namespaced);
        assert_eq!(
            find_by_kind("apps/v1", "StatefulSet").unwrap().plural,
            "statefulsets"
        );
    }

    #[test]
    fn group_versions_are_unique_and_core_first() {
        let gv = group_versions();
        assert_eq!(gv[0], ("", "v1"));
        let mut sorted = gv.clone();
        sorted.dedup();
        assert_eq!(sorted.len(), gv.len());
    }
}

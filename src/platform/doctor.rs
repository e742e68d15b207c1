//! `wsgate doctor`'s checks of a target's prerequisites: the CRDs at the versions wsgate
//! speaks, the snapshot add-on running, the snapshot storage config Ready, the WorkspaceKind
//! and the options the profile names, a GPU node pool, the namespace's opt-in label, and
//! the current identity's RBAC (a SelfSubjectAccessReview for every permission in deploy/).
//! Each check says what is wrong and how to fix it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use serde::Serialize;

use super::crd::{PodSnapshotStorageConfig, WorkspaceKind};
use super::{gpu, rbac, target};
use crate::config::Config;

/// The add-on's Deployment (gke-pod-snapshots.md §5).
pub const ADDON: (&str, &str) = ("kubeflow-workspaces", "gke-workspace-snapshot-addon");
/// The storage config the add-on uses by default.
pub const STORAGE_CONFIG: &str = "kubeflow-pod-snapshot-storage-config";
/// The annotation that enables snapshots on a WorkspaceKind or Workspace.
pub const SNAPSHOT_ENABLED: &str = "podsnapshot.gke.kubeflow.org/enabled";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

/// One check's result.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
    /// What to do about a warning or failure.
    pub fix: Option<String>,
}

fn ok(name: impl Into<String>, detail: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        status: Status::Ok,
        detail: detail.into(),
        fix: None,
    }
}

fn bad(status: Status, name: impl Into<String>, detail: impl Into<String>, fix: &str) -> Check {
    Check {
        name: name.into(),
        status,
        detail: detail.into(),
        fix: Some(fix.into()),
    }
}

/// Runs every check against the target `client` talks to.
pub async fn checks(client: &kube::Client, cfg: &Config) -> Vec<Check> {
    let mut out = Vec::new();
    out.push(
        crds(
            client,
            "Workspace CRDs",
            "kubeflow.org/v1beta1",
            &["workspaces", "workspacekinds"],
            "install Kubeflow Workspaces with the v1beta1 CRDs (kubeflow/notebooks v2)",
        )
        .await,
    );
    out.push(
        crds(
            client,
            "Pod Snapshot CRDs",
            "podsnapshot.gke.io/v1",
            &[
                "podsnapshots",
                "podsnapshotpolicies",
                "podsnapshotmanualtriggers",
                "podsnapshotstorageconfigs",
            ],
            "enable Pod Snapshots on the cluster (addons_config.pod_snapshot_config.enabled)",
        )
        .await,
    );
    out.push(addon(client).await);
    out.push(storage(client).await);
    out.push(kind(client, cfg).await);
    out.push(gpus(client).await);
    out.push(opt_in(client, &cfg.target.namespace).await);
    out.extend(access(client, &cfg.target.namespace).await);
    out
}

async fn crds(
    client: &kube::Client,
    name: &str,
    group_version: &str,
    want: &[&str],
    fix: &str,
) -> Check {
    match client.list_api_group_resources(group_version).await {
        Ok(list) => {
            let missing: Vec<&str> = want
                .iter()
                .copied()
                .filter(|w| !list.resources.iter().any(|r| r.name == *w))
                .collect();
            if missing.is_empty() {
                ok(name, format!("{group_version}: {}", want.join(", ")))
            } else {
                bad(
                    Status::Fail,
                    name,
                    format!("{group_version} lacks {}", missing.join(", ")),
                    fix,
                )
            }
        }
        Err(e) => bad(
            Status::Fail,
            name,
            format!("{group_version} is not served ({})", short(&e)),
            fix,
        ),
    }
}

async fn addon(client: &kube::Client) -> Check {
    let name = "snapshot add-on";
    let api: Api<Deployment> = Api::namespaced(client.clone(), ADDON.0);
    let fix = "install GKE Workspaces' snapshot add-on (Deployment gke-workspace-snapshot-addon in namespace kubeflow-workspaces)";
    match api.get_opt(ADDON.1).await {
        Ok(Some(d)) => {
            let ready = d
                .status
                .as_ref()
                .and_then(|s| s.available_replicas)
                .unwrap_or(0);
            if ready > 0 {
                ok(name, format!("{}/{}: {ready} available", ADDON.0, ADDON.1))
            } else {
                bad(
                    Status::Fail,
                    name,
                    format!("{}/{} has no available replica", ADDON.0, ADDON.1),
                    "check the add-on's pods: kubectl -n kubeflow-workspaces describe deploy gke-workspace-snapshot-addon",
                )
            }
        }
        Ok(None) => bad(
            Status::Fail,
            name,
            format!("no Deployment {}/{}", ADDON.0, ADDON.1),
            fix,
        ),
        Err(e) => bad(
            Status::Warn,
            name,
            format!("cannot read it ({})", short(&e)),
            fix,
        ),
    }
}

async fn storage(client: &kube::Client) -> Check {
    let name = "snapshot storage";
    let api: Api<PodSnapshotStorageConfig> = Api::all(client.clone());
    match api.get_opt(STORAGE_CONFIG).await {
        Ok(Some(s)) => {
            let ready = s
                .status
                .as_ref()
                .and_then(|st| st.get("conditions"))
                .and_then(|c| c.as_array())
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c.get("type").and_then(|t| t.as_str()) == Some("Ready"))
                })
                .cloned();
            let status = ready
                .as_ref()
                .and_then(|c| c.get("status"))
                .and_then(|s| s.as_str());
            if status == Some("True") {
                ok(
                    name,
                    format!("PodSnapshotStorageConfig {STORAGE_CONFIG} is Ready"),
                )
            } else {
                let why = ready
                    .as_ref()
                    .and_then(|c| c.get("message"))
                    .and_then(|m| m.as_str())
                    .unwrap_or("no Ready condition");
                bad(
                    Status::Fail,
                    name,
                    format!("PodSnapshotStorageConfig {STORAGE_CONFIG} is not Ready: {why}"),
                    "grant the GKE service agent storage.objects.* on the snapshot bucket",
                )
            }
        }
        Ok(None) => bad(
            Status::Fail,
            name,
            format!("no PodSnapshotStorageConfig {STORAGE_CONFIG}"),
            "create the storage config the add-on uses (see the GKE Workspaces install guide)",
        ),
        Err(e) => bad(
            Status::Warn,
            name,
            format!("cannot read it ({})", short(&e)),
            "grant get on podsnapshotstorageconfigs (deploy/base/clusterrole.yaml)",
        ),
    }
}

fn option_ids(kind: &WorkspaceKind, option: &str) -> Vec<String> {
    kind.spec
        .pod_template
        .pointer(&format!("/options/{option}/values"))
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("id").and_then(|i| i.as_str()).map(str::to_string))
        .collect()
}

async fn kind(client: &kube::Client, cfg: &Config) -> Check {
    let want = &cfg.workspace.kind;
    let name = format!("WorkspaceKind {want}");
    let api: Api<WorkspaceKind> = Api::all(client.clone());
    let k = match api.get_opt(want).await {
        Ok(Some(k)) => k,
        Ok(None) => {
            return bad(
                Status::Fail,
                name,
                "not found",
                "create it, or name another with --set workspace.kind=NAME",
            );
        }
        Err(e) => {
            return bad(
                Status::Warn,
                name,
                format!("cannot read it ({})", short(&e)),
                "grant get on workspacekinds (deploy/base/clusterrole.yaml)",
            );
        }
    };
    let mut problems = Vec::new();
    let enabled = k
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SNAPSHOT_ENABLED))
        .is_some_and(|v| v == "true");
    if !enabled {
        problems.push(format!(
            "no {SNAPSHOT_ENABLED}=\"true\": pause will not snapshot"
        ));
    }
    for (option, id) in [
        ("imageConfig", &cfg.workspace.image_config),
        ("podConfig", &cfg.workspace.pod_config),
    ] {
        let ids = option_ids(&k, option);
        if !ids.contains(id) {
            problems.push(format!(
                "{option} {id:?} is not offered ({})",
                ids.join(", ")
            ));
        }
    }
    if problems.is_empty() {
        ok(
            name,
            format!(
                "snapshot-enabled; imageConfig {} and podConfig {} offered",
                cfg.workspace.image_config, cfg.workspace.pod_config
            ),
        )
    } else {
        bad(
            Status::Fail,
            name,
            problems.join("; "),
            "fix the WorkspaceKind, or choose offered options with --set workspace.image_config=/pod_config=",
        )
    }
}

async fn gpus(client: &kube::Client) -> Check {
    let name = "GPU node pool";
    match gpu::nodes(client).await {
        Ok(nodes) if nodes.iter().any(|n| n.allocatable > 0) => {
            let mut by_model: std::collections::BTreeMap<String, i64> = Default::default();
            for n in &nodes {
                *by_model.entry(n.accelerator.clone()).or_default() += n.allocatable;
            }
            let list: Vec<String> = by_model.iter().map(|(m, g)| format!("{g} x {m}")).collect();
            ok(
                name,
                format!(
                    "{} (GPU checkpointing needs NVIDIA driver >= 570 on these nodes)",
                    list.join(", ")
                ),
            )
        }
        Ok(_) => bad(
            Status::Fail,
            name,
            "no node offers nvidia.com/gpu",
            "add a GPU node pool (e.g. nvidia-tesla-t4) with the gVisor runtime",
        ),
        Err(e) => bad(
            Status::Warn,
            name,
            format!("cannot list nodes ({e})"),
            "grant list on nodes (deploy/base/clusterrole.yaml)",
        ),
    }
}

async fn opt_in(client: &kube::Client, namespace: &str) -> Check {
    let name = format!("namespace {namespace}");
    match target::check_opt_in(client, namespace).await {
        Ok(()) => ok(name, format!("labelled {}=true", target::OPT_IN_LABEL)),
        Err(e) => bad(
            Status::Fail,
            name,
            e.to_string(),
            &format!(
                "kubectl label namespace {namespace} {}=true (only in a namespace meant for tests)",
                target::OPT_IN_LABEL
            ),
        ),
    }
}

/// One SelfSubjectAccessReview per permission deploy/ grants: what wsgate will need.
async fn access(client: &kube::Client, namespace: &str) -> Vec<Check> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut denied = Vec::new();
    let mut unknown = Vec::new();
    let perms = rbac::permissions();
    for p in perms {
        let ns = match &p.scope {
            rbac::Scope::Namespace(_) => Some(namespace.to_string()),
            rbac::Scope::Cluster => None,
        };
        let (resource, subresource) = match p.resource.split_once('/') {
            Some((r, s)) => (r.to_string(), Some(s.to_string())),
            None => (p.resource.clone(), None),
        };
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(p.verb.clone()),
                    group: Some(p.group.clone()),
                    resource: Some(resource),
                    subresource,
                    namespace: ns.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let what = format!(
            "{} {}{}{}",
            p.verb,
            p.resource,
            if p.group.is_empty() {
                String::new()
            } else {
                format!(".{}", p.group)
            },
            ns.map(|n| format!(" in {n}")).unwrap_or_default()
        );
        match api.create(&PostParams::default(), &review).await {
            Ok(r) if r.status.as_ref().is_some_and(|s| s.allowed) => {}
            Ok(_) => denied.push(what),
            Err(e) => unknown.push(format!("{what} ({})", short(&e))),
        }
    }
    let name = "RBAC of the current identity";
    let fix = "apply deploy/base (kubectl apply -k deploy/base) and run as ServiceAccount wsgate, or grant the same rules";
    let mut out = Vec::new();
    if denied.is_empty() && unknown.is_empty() {
        out.push(ok(
            name,
            format!("all {} permissions wsgate uses are allowed", perms.len()),
        ));
    }
    if !denied.is_empty() {
        out.push(bad(
            Status::Fail,
            name,
            format!("denied: {}", denied.join(", ")),
            fix,
        ));
    }
    if !unknown.is_empty() {
        out.push(bad(
            Status::Warn,
            name,
            format!("could not ask: {}", unknown.join(", ")),
            fix,
        ));
    }
    out
}

fn short(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}", s.code, s.reason),
        other => other.to_string(),
    }
}

/// The checks as a table with the fixes under each failure.
pub fn table(checks: &[Check]) -> String {
    let mut out = format!("{:<36} {:<6} {}\n", "check", "status", "detail");
    for c in checks {
        let status = match c.status {
            Status::Ok => "ok",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        };
        out.push_str(&format!("{:<36} {:<6} {}\n", c.name, status, c.detail));
        if let Some(f) = &c.fix {
            out.push_str(&format!("{:<36} {:<6} fix: {f}\n", "", ""));
        }
    }
    out
}

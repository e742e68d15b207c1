//! `wsgate doctor`'s checks of a target's prerequisites: the CRDs at the versions wsgate
//! speaks, the snapshot add-on running, the snapshot storage config Ready, the WorkspaceKind
//! and the options the profile names (offered, and allowed together by its filterRules), the
//! add-on's tenant namespaces, NetworkPolicies in the way, a GPU node pool, the namespace's
//! opt-in label, and
//! the current identity's RBAC (a SelfSubjectAccessReview for every permission in deploy/).
//! Each check says what is wrong and how to fix it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde::Serialize;

use super::crd::{PodSnapshotStorageConfig, WorkspaceKind};
use super::{gpu, rbac, target};
use crate::config::Config;

/// The add-on's Deployment (gke-pod-snapshots.md §5).
pub const ADDON: (&str, &str) = ("kubeflow-workspaces", "gke-workspace-snapshot-addon");
pub use super::names::SNAPSHOT_ENABLED;
pub use super::names::STORAGE_CONFIG;

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
    out.push(tenants(client, &cfg.target.namespace).await);
    out.push(network_policies(client, &cfg.target.namespace).await);
    out.push(gpus(client).await);
    out.push(opt_in(client, &cfg.target.namespace).await);
    out.extend(access(client, &cfg.target.namespace).await);
    out.extend(port_forward_access(client, cfg).await);
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
        // The add-on reads it case-blind (`snapshotEnabled`, `strings.EqualFold`).
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !enabled {
        problems.push(format!(
            "no {SNAPSHOT_ENABLED}=\"true\": pause will not snapshot"
        ));
    }
    let choice = match super::options::choose(
        &k.name_any(),
        &k.spec,
        &cfg.workspace.image_config,
        &cfg.workspace.pod_config,
        super::options::namespace_labels(client, &cfg.target.namespace)
            .await
            .as_ref(),
    ) {
        Ok(c) => Some(c),
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    };
    match (problems.is_empty(), choice) {
        (true, Some(c)) => ok(
            name,
            format!(
                "snapshot-enabled; imageConfig {} with podConfig {} offered and allowed by its \
                 filterRules{}",
                c.image_config,
                c.pod_config,
                c.picked.map(|p| format!(" ({p})")).unwrap_or_default()
            ),
        ),
        _ => bad(
            Status::Fail,
            name,
            problems.join("; "),
            "fix the WorkspaceKind, or choose options it offers and allows together with \
             --set workspace.image_config=/pod_config= (\"\" lets wsgate pick)",
        ),
    }
}

/// The tenant namespaces the add-on reconciles, from its Deployment: the `-tenants` flag,
/// else the `TENANT_NAMESPACES` variable (gke-labs/workspaces
/// `providers/gke/cmd/snapshot-addon/main.go`). `Ok(vec![])`: every namespace. `Err`: the
/// value is not written in the Deployment (a ConfigMap or Secret reference).
pub fn tenant_namespaces(d: &Deployment) -> Result<Vec<String>, String> {
    let containers = d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let split = |v: &str| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect()
    };
    for c in containers {
        let args: Vec<&String> = c
            .command
            .iter()
            .flatten()
            .chain(c.args.iter().flatten())
            .collect();
        for (i, a) in args.iter().enumerate() {
            let flag = a.trim_start_matches('-');
            if a.starts_with('-') && flag == "tenants" {
                return Ok(args.get(i + 1).map(|v| split(v)).unwrap_or_default());
            }
            if a.starts_with('-')
                && let Some(v) = flag.strip_prefix("tenants=")
            {
                return Ok(split(v));
            }
        }
        for e in c.env.iter().flatten() {
            if e.name == "TENANT_NAMESPACES" {
                return match (&e.value, &e.value_from) {
                    (_, Some(_)) => Err(format!(
                        "container {} takes TENANT_NAMESPACES from a reference",
                        c.name
                    )),
                    (v, None) => Ok(split(v.as_deref().unwrap_or(""))),
                };
            }
        }
    }
    Ok(Vec::new())
}

/// Whether the add-on reconciles the test namespace. Outside its tenants, its webhook still
/// holds every pause (`Checkpointing`) and gates every pod's readiness, but nothing ever
/// completes either: pauses never finish and workspace pods never become Ready.
async fn tenants(client: &kube::Client, namespace: &str) -> Check {
    let name = "add-on tenant namespaces";
    let api: Api<Deployment> = Api::namespaced(client.clone(), ADDON.0);
    let fix = format!(
        "add {namespace} to the add-on's tenants (its -tenants flag or TENANT_NAMESPACES on \
         Deployment {}/{}), or test in one of its tenant namespaces",
        ADDON.0, ADDON.1
    );
    match api.get_opt(ADDON.1).await {
        Ok(Some(d)) => match tenant_namespaces(&d) {
            Ok(list) if list.is_empty() => ok(name, "the add-on reconciles every namespace"),
            Ok(list) if list.iter().any(|t| t == namespace) => ok(
                name,
                format!(
                    "{namespace} is one of the add-on's tenants ({})",
                    list.join(", ")
                ),
            ),
            Ok(list) => bad(
                Status::Fail,
                name,
                format!(
                    "the add-on reconciles only {}: in {namespace} a pause would stay in \
                     Checkpointing for ever and workspace pods would never become Ready",
                    list.join(", ")
                ),
                &fix,
            ),
            Err(why) => bad(
                Status::Warn,
                name,
                format!("cannot tell whether {namespace} is a tenant: {why}"),
                &fix,
            ),
        },
        Ok(None) => bad(
            Status::Warn,
            name,
            "no add-on Deployment to read its tenants from",
            &fix,
        ),
        Err(e) => bad(
            Status::Warn,
            name,
            format!("cannot read the add-on's Deployment ({})", short(&e)),
            &format!(
                "grant get on deployments in {}, or check its TENANT_NAMESPACES by hand",
                ADDON.0
            ),
        ),
    }
}

/// Whether a NetworkPolicy in the test namespace keeps the harness from the workspace pods
/// (GKE Workspaces' tenant isolation admits only the access proxy and the controller,
/// gke-labs/workspaces `providers/gke/manifests/tenant/`). The harness reaches Jupyter at the
/// pod's address: a policy that selects workspace pods and limits who may connect is named,
/// with the peers it admits.
async fn network_policies(client: &kube::Client, namespace: &str) -> Check {
    let name = "network policies";
    let api: Api<NetworkPolicy> = Api::namespaced(client.clone(), namespace);
    let list = match api.list(&Default::default()).await {
        Ok(l) => l.items,
        Err(kube::Error::Api(s)) if s.code == 404 => {
            return ok(name, "the cluster serves no NetworkPolicy API");
        }
        Err(e) => {
            return bad(
                Status::Warn,
                name,
                format!("cannot list them in {namespace} ({})", short(&e)),
                "grant list on networkpolicies (deploy/base/role.yaml), or check by hand: \
                 kubectl get networkpolicy -n NAMESPACE",
            );
        }
    };
    let workspace_pod: std::collections::BTreeMap<String, String> = [(
        super::workspace::WORKSPACE_LABEL.to_string(),
        "any".to_string(),
    )]
    .into();
    let mut limiting = Vec::new();
    for p in &list {
        let Some(spec) = &p.spec else { continue };
        let selects = spec
            .pod_selector
            .as_ref()
            .map(|sel| {
                kube::core::Selector::try_from(sel.clone())
                    .is_ok_and(|s| kube::core::SelectorExt::matches(&s, &workspace_pod))
            })
            .unwrap_or(true);
        let ingress_type = spec
            .policy_types
            .as_ref()
            .map(|t| t.iter().any(|t| t == "Ingress"))
            .unwrap_or(true);
        if !selects || !ingress_type {
            continue;
        }
        let rules = spec.ingress.as_deref().unwrap_or_default();
        let open = rules
            .iter()
            .any(|r| r.from.as_ref().is_none_or(Vec::is_empty));
        if open {
            continue;
        }
        let peers: Vec<String> = rules
            .iter()
            .flat_map(|r| r.from.iter().flatten())
            .map(|peer| serde_json::to_string(peer).unwrap_or_else(|_| "a peer".into()))
            .collect();
        limiting.push(format!(
            "{} admits {}",
            p.name_any(),
            if peers.is_empty() {
                "nobody".to_string()
            } else {
                peers.join(", ")
            }
        ));
    }
    if limiting.is_empty() {
        ok(
            name,
            format!("none in {namespace} limits who reaches the workspace pods"),
        )
    } else {
        bad(
            Status::Warn,
            name,
            format!(
                "{}: wsgate reaches Jupyter at the pod's address, so it must run where these \
                 admit it",
                limiting.join("; ")
            ),
            "run wsgate from a pod or namespace these policies admit, or add an ingress rule for \
             it in the test namespace",
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
    let perms = rbac::permissions();
    let (denied, unknown) = review_all(client, namespace, perms.iter()).await;
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
    out.extend(could_not_ask(name, &unknown, fix));
    out
}

/// The warning for the reviews the API server could not answer, if any.
fn could_not_ask(name: &str, unknown: &[String], fix: &str) -> Option<Check> {
    (!unknown.is_empty()).then(|| {
        bad(
            Status::Warn,
            name,
            format!("could not ask: {}", unknown.join(", ")),
            fix,
        )
    })
}

/// Asks the API server about each permission (in `namespace` where it is namespaced):
/// the ones denied, and the ones it could not answer, each as words.
async fn review_all(
    client: &kube::Client,
    namespace: &str,
    perms: impl Iterator<Item = &rbac::Permission>,
) -> (Vec<String>, Vec<String>) {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut denied = Vec::new();
    let mut unknown = Vec::new();
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
    (denied, unknown)
}

/// What `session.connect` needs beyond deploy/base: nothing for `pod-ip`; `get` and
/// `create` on pods/portforward (deploy/components/port-forward) for `port-forward`, a
/// failure when denied; for `auto` it is said in an ok line, since `auto` port-forwards
/// only when the pod's address does not answer (never inside the cluster network).
async fn port_forward_access(client: &kube::Client, cfg: &Config) -> Vec<Check> {
    use crate::config::SessionConnect;
    let name = "port-forward (session.connect)";
    let connect = cfg.session.connect;
    if connect == SessionConnect::PodIp {
        return Vec::new();
    }
    let base = rbac::permissions();
    let extra: Vec<&rbac::Permission> = rbac::DeployRbac::embedded_with_port_forward()
        .permissions()
        .iter()
        .filter(|p| !base.contains(p))
        .collect();
    let (denied, unknown) = review_all(client, &cfg.target.namespace, extra.iter().copied()).await;
    let fix = "add deploy/components/port-forward to your overlay (components: \
               [../../components/port-forward]), or set session.connect = \"pod-ip\" where \
               the harness reaches the pod network";
    if denied.is_empty() && unknown.is_empty() {
        return vec![ok(
            name,
            format!(
                "session.connect = {}: pods/portforward is allowed",
                connect.as_str()
            ),
        )];
    }
    let mut out = Vec::new();
    if !denied.is_empty() {
        out.push(match connect {
            SessionConnect::PortForward => bad(
                Status::Fail,
                name,
                format!(
                    "session.connect = port-forward, but denied: {}",
                    denied.join(", ")
                ),
                fix,
            ),
            // Inside the cluster network (the deployed Jobs) the pod's address answers and
            // the port-forward is never needed: said, not warned.
            _ => ok(
                name,
                format!(
                    "session.connect = auto: pods/portforward is not granted, so the pod's \
                     address must answer (a run outside the cluster network needs \
                     deploy/components/port-forward; denied: {})",
                    denied.join(", ")
                ),
            ),
        });
    }
    out.extend(could_not_ask(name, &unknown, fix));
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn addon(container: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "gke-workspace-snapshot-addon"},
            "spec": {"selector": {}, "template": {"spec": {"containers": [container]}}}
        }))
        .unwrap()
    }

    #[test]
    fn the_tenants_come_from_the_flag_else_the_variable() {
        let env = |v: serde_json::Value| addon(json!({"name": "addon", "env": [v]}));
        assert_eq!(
            tenant_namespaces(&env(
                json!({"name": "TENANT_NAMESPACES", "value": " team-a, ,team-b "})
            )),
            Ok(vec!["team-a".to_string(), "team-b".to_string()])
        );
        assert_eq!(
            tenant_namespaces(&env(json!({"name": "TENANT_NAMESPACES", "value": ""}))),
            Ok(vec![])
        );
        assert!(
            tenant_namespaces(&env(json!({"name": "TENANT_NAMESPACES",
                "valueFrom": {"configMapKeyRef": {"name": "x", "key": "y"}}})))
            .is_err()
        );
        let flags = addon(
            json!({"name": "addon", "args": ["-tenants=team-c", "-workers=4"],
            "env": [{"name": "TENANT_NAMESPACES", "value": "team-a"}]}),
        );
        assert_eq!(tenant_namespaces(&flags), Ok(vec!["team-c".to_string()]));
        let split = addon(json!({"name": "addon", "args": ["--tenants", "team-d,team-e"]}));
        assert_eq!(
            tenant_namespaces(&split),
            Ok(vec!["team-d".to_string(), "team-e".to_string()])
        );
        assert_eq!(
            tenant_namespaces(&addon(json!({"name": "addon"}))),
            Ok(vec![])
        );
    }
}

//! `wsgate doctor` on what makes a real GKE Workspaces cluster fail: a NetworkPolicy that
//! keeps the harness from the workspace pods, and options the kind's filterRules refuse.

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, PostParams};
use serde_json::json;
use wsgate::platform::doctor::{Check, Status, checks};

use crate::common::start_platform;

fn config(overrides: &[(&str, &str)]) -> wsgate::config::Config {
    wsgate::config::load(&wsgate::config::LoadRequest {
        profile: None,
        env: Default::default(),
        overrides: overrides
            .iter()
            .map(|(k, v)| wsgate::config::Override::new(*k, *v, "--set"))
            .collect(),
    })
    .expect("the embedded defaults load")
    .config
}

fn named<'a>(all: &'a [Check], name: &str) -> &'a Check {
    all.iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check {name}: {all:#?}"))
}

#[tokio::test]
async fn a_network_policy_limiting_who_reaches_workspace_pods_is_named() {
    let sim = start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let cfg = config(&[]);
    let before = checks(&client, &cfg).await;
    assert_eq!(named(&before, "network policies").status, Status::Ok);
    let api: Api<NetworkPolicy> = Api::namespaced(client.clone(), "wsgate-test");
    let policy = |name: &str, selector: serde_json::Value| -> NetworkPolicy {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"podSelector": selector, "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"namespaceSelector": {"matchLabels":
                    {"kubernetes.io/metadata.name": "gke-workspaces-access"}}}]}]}
        }))
        .unwrap()
    };
    // A policy for other pods is not in the way.
    api.create(
        &PostParams::default(),
        &policy("db-only", json!({"matchLabels": {"app": "db"}})),
    )
    .await
    .unwrap();
    let after = checks(&client, &cfg).await;
    assert_eq!(named(&after, "network policies").status, Status::Ok);
    // The tenant isolation shape: every pod, ingress only from the access proxy.
    api.create(&PostParams::default(), &policy("isolation", json!({})))
        .await
        .unwrap();
    let after = checks(&client, &cfg).await;
    let c = named(&after, "network policies");
    assert_eq!(c.status, Status::Warn, "{c:?}");
    assert!(c.detail.contains("isolation admits"), "{c:?}");
    assert!(c.detail.contains("gke-workspaces-access"), "{c:?}");
    assert!(!c.detail.contains("db-only"), "{c:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn options_the_filter_rules_refuse_fail_the_kind_check_with_the_kinds_words() {
    let sim = start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let all = checks(
        &client,
        &config(&[
            ("workspace.image_config", "jupyterlab-gpu"),
            ("workspace.pod_config", "small_cpu"),
        ]),
    )
    .await;
    let c = named(&all, "WorkspaceKind jupyterlab-resumable");
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(
        c.detail
            .contains("This image requires an accelerator (GPU) pod, but a CPU pod was selected."),
        "{c:?}"
    );
    assert!(
        c.detail.contains("A GPU image requires a GPU pod."),
        "{c:?}"
    );
    // Left empty, the options are picked from the kind: its GPU option and the GPU image.
    let all = checks(
        &client,
        &config(&[("workspace.image_config", ""), ("workspace.pod_config", "")]),
    )
    .await;
    let c = named(&all, "WorkspaceKind jupyterlab-resumable");
    assert_eq!(c.status, Status::Ok, "{c:?}");
    assert!(
        c.detail
            .contains("imageConfig jupyterlab-gpu with podConfig gpu_t4_spot"),
        "{c:?}"
    );
    sim.shutdown().await;
}

/// The add-on reconciles only its tenant namespaces: a test namespace outside them would
/// hold every pause in Checkpointing, and doctor says so, reading the add-on's Deployment.
#[tokio::test]
async fn a_test_namespace_outside_the_addons_tenants_fails_the_tenant_check() {
    let sim = start_platform(|p| p.addon.tenant_namespaces = vec!["team-a".into()]).await;
    let client = sim.client().await.unwrap();
    let all = checks(&client, &config(&[])).await;
    let c = named(&all, "add-on tenant namespaces");
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(c.detail.contains("reconciles only team-a"), "{c:?}");
    assert!(c.detail.contains("Checkpointing for ever"), "{c:?}");
    assert!(
        c.fix.as_deref().unwrap_or("").contains("TENANT_NAMESPACES"),
        "{c:?}"
    );
    sim.shutdown().await;
    let sim =
        start_platform(|p| p.addon.tenant_namespaces = vec!["team-a".into(), "wsgate-test".into()])
            .await;
    let client = sim.client().await.unwrap();
    let all = checks(&client, &config(&[])).await;
    assert_eq!(named(&all, "add-on tenant namespaces").status, Status::Ok);
    sim.shutdown().await;
}

/// `session.connect` beyond `pod-ip` needs deploy/components/port-forward: checked against
/// an API server enforcing deploy/base alone (refused: a failure for `port-forward`, said
/// for `auto`, nothing for `pod-ip`) and base with the component (allowed).
#[tokio::test]
async fn the_port_forward_permission_is_checked_as_session_connect_needs_it() {
    use wsgate::sim::profile::RbacEnforce;
    let name = "port-forward (session.connect)";
    let base_only = start_platform(|p| p.rbac.enforce = RbacEnforce::Deploy).await;
    let client = base_only.client().await.unwrap();
    let all = checks(&client, &config(&[("session.connect", "port-forward")])).await;
    let c = named(&all, name);
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(
        c.detail.contains("create pods/portforward in wsgate-test"),
        "{c:?}"
    );
    assert!(
        c.fix
            .as_deref()
            .unwrap()
            .contains("deploy/components/port-forward")
    );
    let all = checks(&client, &config(&[("session.connect", "auto")])).await;
    let c = named(&all, name);
    assert_eq!(c.status, Status::Ok, "{c:?}");
    assert!(c.detail.contains("the pod's address must answer"), "{c:?}");
    let all = checks(&client, &config(&[("session.connect", "pod-ip")])).await;
    assert!(all.iter().all(|c| c.name != name), "{all:#?}");

    let with = start_platform(|p| {
        p.rbac.enforce = RbacEnforce::Deploy;
        p.rbac.port_forward = true;
    })
    .await;
    let client = with.client().await.unwrap();
    let all = checks(&client, &config(&[("session.connect", "port-forward")])).await;
    assert_eq!(named(&all, name).status, Status::Ok, "{all:#?}");
}

/// Without the add-on's Deployment (another install, or none) the tenant check cannot
/// decide: it warns, says why and what to add, and does not fail the cluster.
#[tokio::test]
async fn without_the_addons_deployment_the_tenant_check_warns_with_the_fix() {
    use k8s_openapi::api::apps::v1::Deployment;
    let sim = start_platform(|p| p.addon.tenant_namespaces = vec!["team-a".into()]).await;
    let client = sim.client().await.unwrap();
    let (ns, name) = wsgate::platform::doctor::ADDON;
    Api::<Deployment>::namespaced(client.clone(), ns)
        .delete(name, &Default::default())
        .await
        .unwrap();
    let all = checks(&client, &config(&[])).await;
    let c = named(&all, "add-on tenant namespaces");
    assert_eq!(c.status, Status::Warn, "{c:?}");
    assert!(c.detail.contains("no add-on Deployment"), "{c:?}");
    assert!(
        c.fix.as_deref().unwrap_or("").contains("TENANT_NAMESPACES"),
        "{c:?}"
    );
    sim.shutdown().await;
}

//! wsgate's deployed RBAC against the simulator with enforcement on (`[rbac] enforce =
//! "deploy"`): requests outside the rules get the real API server's 403, SelfSubjectAccessReview
//! answers from the same rules, and the least-privilege proof in both directions: the
//! harness's own platform code runs a whole workspace lifecycle with nothing refused, and
//! every deployed permission is needed by some request it made.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Api, ListParams, PostParams};
use wsgate::platform::crd::{PodSnapshot, Workspace, WorkspaceKind, WorkspaceState};
use wsgate::platform::janitor::{self, Selection};
use wsgate::platform::ledger::{self, CleanupOutcome, Ledger};
use wsgate::platform::rbac::{DeployRbac, Permission};
use wsgate::platform::wait::{self, WaitFor};
use wsgate::platform::workspace::{self as ws, NewWorkspace};
use wsgate::platform::{gpu, pause, snapshots, squeeze, status, target};
use wsgate::sim::SimHandle;
use wsgate::sim::api::authz::AuditEntry;
use wsgate::sim::profile::RbacEnforce;

const NS: &str = wsgate::sim::server::TEST_NAMESPACE;
const USER: &str = "system:serviceaccount:wsgate-test:wsgate";
/// The budget of every wait in the lifecycle (generous: a debug build on two cores).
const BUDGET: Duration = Duration::from_secs(60);

/// Deployed permissions no request in the lifecycle below needs, each because only a command
/// this test does not exercise uses it. Keep it minimal; every entry says why.
const NOT_EXERCISED: &[(&str, &str, &str)] = &[];

async fn enforcing() -> SimHandle {
    crate::common::start_platform(|p| p.rbac.enforce = RbacEnforce::Deploy).await
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other}"),
    }
}

#[tokio::test]
async fn enforcement_refuses_what_the_rules_do_not_allow_with_the_real_403() {
    let sim = enforcing().await;
    let client = sim.client().await.expect("client");

    // Inside the rules: ClusterRole (nodes, pods everywhere) and Role (workspaces in NS).
    Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("list nodes is allowed");
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("list pods in any namespace is allowed");
    Api::<Workspace>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("list workspaces in the test namespace is allowed");

    // A WebSocket exec needs `get` and `create` on pods/exec; the deployed rules grant them
    // in the test namespace only (the file evidence), never elsewhere.
    let refused = Api::<Pod>::namespaced(client.clone(), "default")
        .exec("any-pod", ["true"], &kube::api::AttachParams::default())
        .await;
    let Err(e) = refused else {
        panic!("exec outside the test namespace is outside the deployed rules")
    };
    assert_eq!(
        api_error(e).message,
        "pods \"any-pod\" is forbidden: User \"{USER}\" cannot get resource \"pods/exec\" in API group \"\" in the namespace \"default\""
            .replace("{USER}", USER)
    );

    // A port-forward for session.connect: refused without deploy/components/port-forward,
    // and the harness says what to grant.
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "any-pod", "namespace": NS, "uid": "u-1"},
        "status": {"podIP": "127.0.0.1"},
    }))
    .unwrap();
    let refused = wsgate::platform::forward::route(
        &client,
        wsgate::config::SessionConnect::PortForward,
        &pod,
        8888,
        wsgate::platform::forward::StatusProbe::jupyter("/api"),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        refused.contains("cannot get resource \"pods/portforward\"")
            && refused.contains("deploy/components/port-forward"),
        "{refused}"
    );

    // Outside: cluster-scoped, another namespace, a subresource.
    let s = api_error(
        Api::<WorkspaceKind>::all(client.clone())
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        format!(
            "workspacekinds.kubeflow.org is forbidden: User \"{USER}\" cannot list resource \"workspacekinds\" in API group \"kubeflow.org\" at the cluster scope"
        )
    );
    let s = api_error(
        Api::<Secret>::namespaced(client.clone(), "default")
            .get("db-password")
            .await
            .unwrap_err(),
    );
    assert_eq!(
        s.message,
        format!(
            "secrets \"db-password\" is forbidden: User \"{USER}\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\""
        )
    );
    let s = api_error(
        Api::<Workspace>::namespaced(client.clone(), NS)
            .get_status("ws-a")
            .await
            .unwrap_err(),
    );
    assert_eq!(
        s.message,
        format!(
            "workspaces.kubeflow.org \"ws-a\" is forbidden: User \"{USER}\" cannot get resource \"workspaces/status\" in API group \"kubeflow.org\" in the namespace \"{NS}\""
        )
    );

    // The audit (also served at /sim/v1/audit, same token) records both outcomes; discovery
    // and the simulator's own endpoints are not checked.
    let raw = crate::common::raw_client(&sim);
    for path in ["/apis", "/api/v1", "/sim/v1/audit"] {
        let r = raw
            .get(format!("{}{path}", sim.url()))
            .bearer_auth(sim.token())
            .send()
            .await
            .expect("request");
        assert_eq!(r.status(), 200, "{path}");
    }
    let served: serde_json::Value = raw
        .get(format!("{}/sim/v1/audit", sim.url()))
        .bearer_auth(sim.token())
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    let served: Vec<AuditEntry> =
        serde_json::from_value(served["entries"].clone()).expect("audit entries");
    assert_eq!(served, sim.audit());
    let entry =
        |verb: &str, group: &str, resource: &str, namespaced: bool, allowed: bool| AuditEntry {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            namespaced,
            allowed,
        };
    for e in [
        entry("list", "", "nodes", false, true),
        entry("list", "kubeflow.org", "workspacekinds", false, false),
        entry("get", "", "secrets", true, false),
        entry("get", "kubeflow.org", "workspaces/status", true, false),
    ] {
        assert!(served.contains(&e), "{e:?} not in {served:#?}");
    }
    let unauthenticated = raw
        .get(format!("{}/sim/v1/audit", sim.url()))
        .send()
        .await
        .expect("request");
    assert_eq!(unauthenticated.status(), 401);
    sim.shutdown().await;
}

fn review(verb: &str, group: &str, resource: &str, ns: Option<&str>) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                namespace: ns.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn ask(client: &kube::Client, r: &SelfSubjectAccessReview) -> (bool, String) {
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), r)
        .await
        .expect("a SelfSubjectAccessReview is answered");
    let status = answer.status.expect("status");
    assert_eq!(answer.spec, r.spec, "the review is echoed back");
    (status.allowed, status.reason.unwrap_or_default())
}

#[tokio::test]
async fn self_subject_access_review_answers_from_the_enforced_rules() {
    let sim = enforcing().await;
    let client = sim.client().await.expect("client");
    let (allowed, reason) = ask(
        &client,
        &review("create", "kubeflow.org", "workspaces", Some(NS)),
    )
    .await;
    assert!(allowed);
    assert_eq!(
        reason,
        "RBAC: allowed by RoleBinding \"wsgate/wsgate-test\" of Role \"wsgate\" to ServiceAccount \"wsgate/wsgate-test\""
    );
    let (allowed, reason) = ask(&client, &review("list", "", "nodes", None)).await;
    assert!(allowed);
    assert!(
        reason.contains("ClusterRoleBinding \"wsgate-read\""),
        "{reason}"
    );
    for denied in [
        review("create", "kubeflow.org", "workspaces", Some("default")),
        review("delete", "", "nodes", None),
        review("list", "kubeflow.org", "workspacekinds", None),
    ] {
        let (allowed, reason) = ask(&client, &denied).await;
        assert!(!allowed, "{denied:?}");
        assert!(reason.starts_with("RBAC: no rule"), "{reason}");
    }
    // Listing reviews is not in the rules: refused before anything else, as on a real server.
    let reviews = Api::<SelfSubjectAccessReview>::all(client.clone());
    let refused = reviews.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_error(refused).code, 403);
    sim.shutdown().await;

    // Without enforcement everything is allowed, and says why; reviews are create-only.
    let sim = crate::common::start_sim().await;
    let client = sim.client().await.expect("client");
    let (allowed, reason) = ask(&client, &review("patch", "", "nodes", None)).await;
    assert!(allowed);
    assert!(reason.contains("does not enforce"), "{reason}");
    let reviews = Api::<SelfSubjectAccessReview>::all(client.clone());
    let refused = reviews.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_error(refused).code, 405);
    sim.shutdown().await;
}

fn wait_for(phase: &str, what: &str) -> WaitFor {
    let mut w = WaitFor::new(phase, BUDGET, what);
    w.progress_every = None;
    w
}

async fn wait_state(client: &kube::Client, name: &str, state: WorkspaceState) {
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    wait::until(
        &api,
        name,
        &wait_for(&format!("rbac:{state}"), &format!("be {state}")),
        ws::describe,
        |o| ws::is_state(o, state),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Fails the lifecycle with what it was doing and the error.
trait OrFail<T> {
    fn or_fail(self, what: &str) -> T;
}

impl<T, E: std::fmt::Display> OrFail<T> for Result<T, E> {
    fn or_fail(self, what: &str) -> T {
        self.unwrap_or_else(|e| panic!("lifecycle: {what}: {e}"))
    }
}

/// A finalizer the test puts on objects (through the simulator's store, not the API) so
/// that their deletion is pending when the cleanup looks, as `kubernetes.io/pvc-protection`
/// holds a PVC whose pod is still terminating on a real cluster.
const HOLD: &str = "wsgate.dev/rbac-test-hold";

fn set_hold(sim: &SimHandle, plural: &str, name: &str, hold: bool) {
    let kind = wsgate::sim::kinds::find("", "v1", plural).expect("a served core kind");
    sim.store()
        .modify(kind, Some(NS), name, false, false, |cur| {
            let mut next = cur.clone();
            next["metadata"]["finalizers"] = if hold {
                serde_json::json!([HOLD])
            } else {
                serde_json::json!([])
            };
            Ok(next)
        })
        .unwrap_or_else(|e| panic!("cannot set the hold on {plural}/{name}: {e}"));
}

/// Sweeps `found` while the listed objects' deletions are held: each hold is released once
/// the sweep watches that resource (its delete-and-wait saw the object still there).
async fn sweep_with_held_deletions(
    sim: &SimHandle,
    client: &kube::Client,
    found: Vec<wsgate::platform::ledger::Entry>,
) {
    let mut held: Vec<(String, String)> = found
        .iter()
        .filter(|f| {
            matches!(
                f.kind.as_str(),
                "PersistentVolumeClaim" | "Secret" | "ResourceQuota"
            )
        })
        .map(|f| (f.plural.clone(), f.name.clone()))
        .collect();
    for (plural, name) in &held {
        set_hold(sim, plural, name, true);
    }
    let sweep = tokio::spawn({
        let client = client.clone();
        async move {
            let claim = Selection::Run("rbac-least-privilege".into());
            janitor::sweep(&client, &claim, &found, BUDGET).await
        }
    });
    let deadline = tokio::time::Instant::now() + BUDGET;
    while !held.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the sweep never watched {held:?}"
        );
        let audit = sim.audit();
        held.retain(|(plural, name)| {
            let watched = audit
                .iter()
                .any(|e| e.verb == "watch" && e.resource == *plural && e.namespaced);
            if watched {
                set_hold(sim, plural, name, false);
            }
            !watched
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for r in sweep.await.expect("the sweep task") {
        // The probe pod's delete is not waited for (gpu::probe_schedulable): the janitor may
        // find it still terminating and meet it gone.
        let probe = r.object.contains("wsgate-gpu-probe-");
        assert!(
            r.outcome == CleanupOutcome::Deleted
                || (probe && r.outcome == CleanupOutcome::AlreadyGone),
            "{}: {:?}",
            r.object,
            r.outcome
        );
    }
}

/// The harness's platform code through one whole workspace lifecycle, as the suite, the
/// status command and the janitor use it.
async fn lifecycle(sim: &SimHandle, client: &kube::Client) {
    let run_id = "rbac-least-privilege";
    // Already expired, so that the janitor's expiry selection would take it too.
    let labels: BTreeMap<String, String> =
        ledger::labels(run_id, chrono::Utc::now() - chrono::Duration::hours(1));
    let mut ledger = Ledger::default();
    let new = NewWorkspace {
        namespace: NS.into(),
        name: "rbac-ws".into(),
        kind: "jupyterlab-resumable".into(),
        image_config: "jupyterlab-gpu".into(),
        pod_config: "gpu_t4_spot".into(),
        home_pvc: "rbac-ws-home".into(),
        home_size: "1Gi".into(),
        labels: labels.clone(),
        annotations: Default::default(),
    };

    // `wsgate run`: the namespace opt-in, the token Secret (created, then updated), the home
    // PVC and the Workspace.
    target::check_opt_in(client, NS).await.or_fail("opt-in");
    ws::put_token(client, &mut ledger, NS, "t0ken", &labels)
        .await
        .or_fail("create the token");
    ws::put_token(client, &mut ledger, NS, "t0ken-2", &labels)
        .await
        .or_fail("update the token");
    // Putting the token it already holds writes nothing: a write retried after its answer
    // was lost (it did commit) ends there instead of in a 409 on a stale resourceVersion.
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), NS);
    let version = |s: k8s_openapi::api::core::v1::Secret| s.metadata.resource_version;
    let before = version(secrets.get("jupyter-token").await.or_fail("read the token"));
    ws::put_token(client, &mut ledger, NS, "t0ken-2", &labels)
        .await
        .or_fail("put the same token again");
    let after = version(secrets.get("jupyter-token").await.or_fail("read the token"));
    assert_eq!(before, after, "the same token was written again");
    ws::create_home(client, &mut ledger, &new)
        .await
        .or_fail("home");
    let uid = ws::create(client, &mut ledger, &new)
        .await
        .or_fail("create")
        .metadata
        .uid
        .expect("a created Workspace has a uid");
    wait_state(client, &new.name, WorkspaceState::Running).await;
    let pods = ws::pods(client, NS, &new.name).await.or_fail("pods");
    assert!(!pods.is_empty(), "a running workspace has a pod");
    // The verdict's volume evidence: the run's files read in the container through exec.
    let files = BTreeMap::from([("gone".to_string(), "no-such-file".to_string())]);
    let read = wsgate::platform::volume::file_checksums(client, &pods[0], &files, "cell", BUDGET)
        .await
        .or_fail("file checksums through pods/exec");
    assert_eq!(read["gone"], wsgate::verdict::FileState::Missing);

    // GPU accounting (the GPU-release step and the run's GPU sampler).
    let all_pods: Api<Pod> = Api::all(client.clone());
    gpu::free(client, "nvidia-tesla-t4")
        .await
        .or_fail("free GPUs");
    gpu::nodes_with_pods(client)
        .await
        .or_fail("nodes with pods");
    wait::next_change(&all_pods, None, Duration::from_millis(200)).await;

    // Pause, wait for its snapshot, status in plain words, force a cold start.
    ws::set_paused(client, NS, &new.name, &uid, true)
        .await
        .or_fail("pause");
    // As the suite, the gate and the drill: the trigger is watched beside the Workspace.
    pause::until_paused(client, NS, &new.name, &wait_for("rbac:Paused", "be Paused"))
        .await
        .or_fail("pause to Paused");
    let snap_api: Api<PodSnapshot> = Api::namespaced(client.clone(), NS);
    let snap_labels = format!(
        "{}={}",
        snapshots::TRIGGERED_BY,
        snapshots::trigger_name(&new.name)
    );
    let deadline = tokio::time::Instant::now() + BUDGET;
    while snapshots::of_workspace(client, NS, &new.name)
        .await
        .or_fail("snapshots")
        .is_empty()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no PodSnapshot within {BUDGET:?}"
        );
        wait::next_change(&snap_api, Some(&snap_labels), Duration::from_millis(500)).await;
    }
    // `wsgate status`: the namespace's workspaces, each with its snapshots.
    let listed = Api::<Workspace>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .or_fail("status list");
    for w in &listed.items {
        let snaps = snapshots::of_workspace(client, NS, &new.name)
            .await
            .or_fail("status snapshots");
        assert_eq!(status::describe(w, &snaps).status, "Paused");
    }
    // The snapshot-cleanup step wakes on snapshot changes while some remain.
    wait::next_change(&snap_api, Some(&snap_labels), Duration::from_millis(200)).await;
    let ws_uid = ledger
        .uid_of::<Workspace>(NS, &new.name)
        .map(str::to_string);
    let deleted = snapshots::delete_all(
        client,
        &Selection::Run(run_id.into()),
        NS,
        &new.name,
        ws_uid.as_deref(),
    )
    .await
    .or_fail("delete snapshots");
    assert!(deleted > 0);

    // The capacity squeeze, lifted; resume; restore evidence; a probe pod on the free GPU.
    gpu::squeeze_with_quota(client, &mut ledger, NS, &labels, 0)
        .await
        .or_fail("squeeze");
    let claim = Selection::Run(run_id.into());
    gpu::lift_quota(client, &ledger, &claim, BUDGET)
        .await
        .or_fail("lift");
    ws::set_paused(client, NS, &new.name, &uid, false)
        .await
        .or_fail("resume");
    wait_state(client, &new.name, WorkspaceState::Running).await;
    let pods = ws::pods(client, NS, &new.name).await.or_fail("pods");
    snapshots::restore_event(client, &pods[0])
        .await
        .or_fail("restore event");
    // The opt-in squeeze methods: placeholder pods on the free GPUs, and node taints;
    // each lifted.
    let placeholders = squeeze::squeeze_with_placeholders(
        client,
        &mut ledger,
        NS,
        "nvidia-tesla-t4",
        &labels,
        &wait_for("rbac:placeholders", "be Running"),
    )
    .await
    .or_fail("placeholder squeeze");
    assert!(
        !placeholders.is_empty(),
        "the T4s were free for placeholders"
    );
    squeeze::lift_placeholders(client, &ledger, &claim, BUDGET)
        .await
        .or_fail("lift placeholders");
    squeeze::squeeze_with_taint(client, &mut ledger, "nvidia-tesla-t4", &labels)
        .await
        .or_fail("taint squeeze");
    squeeze::lift_taints(client, &ledger, &claim)
        .await
        .or_fail("lift taints");
    gpu::probe_schedulable(
        client,
        &mut ledger,
        NS,
        "nvidia-tesla-t4",
        None,
        &labels,
        &wait_for("rbac:probe", "be scheduled"),
    )
    .await
    .or_fail("probe pod");
    // Squeezes left in place, as a failed scenario leaves them, for the cleanup below.
    gpu::squeeze_with_quota(client, &mut ledger, NS, &labels, 0)
        .await
        .or_fail("squeeze again");
    squeeze::squeeze_with_taint(client, &mut ledger, "nvidia-tesla-t4", &labels)
        .await
        .or_fail("taint squeeze again");

    // `wsgate janitor` / the run's interrupted-run sweep: find by labels, delete and wait.
    let found = janitor::find_all(client, NS, &Selection::Run(run_id.into()))
        .await
        .or_fail("janitor find");
    for kind in [
        "Workspace",
        "ResourceQuota",
        "PersistentVolumeClaim",
        "Secret",
    ] {
        assert!(
            found.iter().any(|f| f.kind == kind),
            "{kind} not found: {found:?}"
        );
    }
    let taints = janitor::find_taints(client, &Selection::Run(run_id.into()))
        .await
        .or_fail("janitor find taints");
    assert!(!taints.is_empty(), "the taint left in place is found");
    for r in janitor::sweep_taints(client, &claim, &taints, BUDGET).await {
        assert_eq!(r.outcome, CleanupOutcome::Deleted, "{}", r.object);
    }
    assert!(
        janitor::find_taints(client, &Selection::Run(run_id.into()))
            .await
            .or_fail("janitor find taints again")
            .is_empty()
    );
    sweep_with_held_deletions(sim, client, found).await;
    // The scenario ledger's cleanup for entries whose create never answered (no uid): it
    // reads each by name first. Everything is gone by now.
    for entry in &mut ledger.entries {
        entry.uid = None;
    }
    for r in ledger.cleanup(client, &claim, BUDGET, false).await {
        assert_eq!(r.outcome, CleanupOutcome::AlreadyGone, "{}", r.object);
    }
}

/// Whether `p` is needed: some allowed request is granted by `p` and by no other permission.
fn needed(p: &Permission, all: &[Permission], audit: &[AuditEntry], ns: &str) -> bool {
    audit.iter().filter(|e| e.allowed).any(|e| {
        let in_ns = e.namespaced.then_some(ns);
        p.grants(&e.verb, &e.group, &e.resource, in_ns)
            && !all
                .iter()
                .filter(|q| *q != p)
                .any(|q| q.grants(&e.verb, &e.group, &e.resource, in_ns))
    })
}

#[tokio::test]
async fn the_harness_needs_every_deployed_permission_and_is_refused_nothing() {
    let sim = enforcing().await;
    let client = sim.client().await.expect("client");
    lifecycle(&sim, &client).await;
    // `wsgate doctor`'s checks, as the deployed identity: every one passes.
    let cfg = wsgate::config::load(&wsgate::config::LoadRequest {
        profile: None,
        env: Default::default(),
        overrides: Vec::new(),
    })
    .expect("the embedded defaults load")
    .config;
    let checks = wsgate::platform::doctor::checks(&client, &cfg).await;
    assert!(
        checks
            .iter()
            .all(|c| c.status == wsgate::platform::doctor::Status::Ok),
        "{}",
        wsgate::platform::doctor::table(&checks)
    );
    let audit = sim.audit();
    sim.shutdown().await;

    // Nothing the harness did was refused (each request was granted by the rules).
    let refused: Vec<&AuditEntry> = audit.iter().filter(|e| !e.allowed).collect();
    assert!(
        refused.is_empty(),
        "refused under the deployed rules: {refused:#?}"
    );

    // Every permission is needed: drop it and some request above would be refused.
    let rbac = DeployRbac::embedded();
    let all = rbac.permissions();
    let exempt = |p: &Permission| {
        NOT_EXERCISED
            .iter()
            .any(|(v, g, r)| p.verb == *v && p.group == *g && p.resource == *r)
    };
    let unused: Vec<&Permission> = all
        .iter()
        .filter(|p| !exempt(p) && !needed(p, all, &audit, rbac.namespace()))
        .collect();
    assert!(
        unused.is_empty(),
        "deployed but not needed by the harness (remove them, or list them in NOT_EXERCISED with the reason): {unused:#?}\naudit: {audit:#?}"
    );
    // And the allow-list stays minimal: each entry is deployed and really not exercised.
    for (v, g, r) in NOT_EXERCISED {
        let p = all
            .iter()
            .find(|p| p.verb == *v && p.group == *g && p.resource == *r)
            .unwrap_or_else(|| panic!("NOT_EXERCISED names {v} {g}/{r}, which is not deployed"));
        assert!(
            !needed(p, all, &audit, rbac.namespace()),
            "{v} {g}/{r} is exercised: remove it from NOT_EXERCISED"
        );
    }
}

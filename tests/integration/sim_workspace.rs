//! The simulator's Kubeflow workspace controller through kube-rs: owned ServiceAccount,
//! StatefulSet and Service (labels, ownerReferences, garbage collection), the pod template,
//! state derivation (Pending -> Running, pause -> Paused with the GPU released, resume,
//! Unschedulable and unknown-kind errors), status fields in epoch ms, and auto-pause after
//! a successful Jupyter activity probe against a stand-in `/api/status` server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::runtime::wait::{Condition, await_condition, conditions};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use wsgate::platform::crd::{Workspace, WorkspaceKind, WorkspaceState};
use wsgate::sim::SimHandle;
use wsgate::sim::truth::Transition;

const NS: &str = "wsgate-test";
const LABEL: &str = "notebooks.kubeflow.org/workspace-name";
/// Every wait in these tests gets this budget; the simulator's delays are milliseconds.
const BUDGET: Duration = Duration::from_secs(20);

async fn wait_for<K, C>(api: &Api<K>, name: &str, what: &str, cond: C) -> K
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    C: Condition<K>,
{
    tokio::time::timeout(BUDGET, await_condition(api.clone(), name, cond))
        .await
        .unwrap_or_else(|_| panic!("{what}: not within the {BUDGET:?} test budget"))
        .expect("watch works")
        .unwrap_or_else(|| panic!("{what}: object gone"))
}

async fn wait_deleted<K>(api: &Api<K>, name: &str, uid: &str, what: &str)
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    tokio::time::timeout(
        BUDGET,
        await_condition(api.clone(), name, conditions::is_deleted(uid)),
    )
    .await
    .unwrap_or_else(|_| panic!("{what}: not deleted within the {BUDGET:?} test budget"))
    .expect("watch works");
}

fn workspace(name: &str, kind: &str, pod_config: &str, home: Option<&str>) -> Workspace {
    let volumes = home.map_or(json!({}), |h| json!({"home": h}));
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"paused": false, "kind": kind, "podTemplate": {
            "volumes": volumes,
            "options": {"imageConfig": "jupyterlab-gpu", "podConfig": pod_config}}}
    }))
    .unwrap()
}

/// Creates `ws` and waits until it is Running.
async fn create_running(wss: &Api<Workspace>, ws: Workspace) -> Workspace {
    let name = ws.name_any();
    wss.create(&PostParams::default(), &ws).await.unwrap();
    wait_for(
        wss,
        &name,
        &format!("{name} Running"),
        in_state(WorkspaceState::Running),
    )
    .await
}

fn state(w: Option<&Workspace>) -> Option<WorkspaceState> {
    w.and_then(|w| w.status.as_ref()).map(|s| s.state)
}

fn in_state(want: WorkspaceState) -> impl Fn(Option<&Workspace>) -> bool {
    move |w| state(w) == Some(want)
}

fn status_json(w: &Workspace) -> Value {
    serde_json::to_value(w.status.as_ref().expect("status")).unwrap()
}

async fn set_paused(api: &Api<Workspace>, name: &str, paused: bool) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": paused}})),
    )
    .await
    .expect("patch spec.paused");
}

/// The one object of a kind the Workspace owns (by label, checked by ownerReference uid).
async fn owned_one<K>(api: &Api<K>, ws: &Workspace) -> K
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let list = api
        .list(&ListParams::default().labels(&format!("{LABEL}={}", ws.name_any())))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1, "exactly one owned object");
    let obj = list.items.into_iter().next().unwrap();
    let owner = obj
        .meta()
        .owner_references
        .as_ref()
        .expect("ownerReferences");
    assert!(
        owner.iter().any(|r| r.controller == Some(true)
            && r.kind == "Workspace"
            && Some(&r.uid) == ws.metadata.uid.as_ref()),
        "controlled by the Workspace: {owner:?}"
    );
    obj
}

fn workspace_states(sim: &SimHandle, name: &str) -> Vec<String> {
    sim.truth()
        .events()
        .into_iter()
        .filter(|e| e.transition == Transition::WorkspaceState && e.name == name)
        .filter_map(|e| e.detail)
        .collect()
}

#[tokio::test]
async fn workspace_owns_its_objects_pauses_resumes_and_is_garbage_collected() {
    let sim = crate::common::start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "demo-home"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    }))
    .unwrap();
    pvcs.create(&PostParams::default(), &pvc).await.unwrap();
    let wss: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let ws = create_running(
        &wss,
        workspace("demo", "jupyterlab", "gpu_t4_spot", Some("demo-home")),
    )
    .await;
    let st = ws.status.clone().unwrap();
    assert_eq!(st.state_message, "Workspace is running");
    assert!(st.last_running_time > 0);
    assert_eq!(st.pause_time, 0);
    assert_eq!(
        st.pod_template_pod.service_account_name.as_deref(),
        Some("ws-demo")
    );
    assert!(!st.pod_template_pod.node_name.is_empty());
    // The upstream gpu_t4_spot option names no toleration and selects the compute class:
    // the API server's admission gave the pod the request and the toleration of
    // nvidia.com/gpu, and it runs on a T4 node of class gpu-t4-spot.
    let pod = Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels(&format!("{LABEL}=demo")))
        .await
        .unwrap()
        .items
        .remove(0);
    let pspec = pod.spec.clone().unwrap();
    let gpu_toleration = pspec.tolerations.unwrap_or_default().into_iter().any(|t| {
        t.key.as_deref() == Some("nvidia.com/gpu")
            && t.operator.as_deref() == Some("Exists")
            && t.effect.as_deref() == Some("NoSchedule")
    });
    assert!(gpu_toleration, "{pod:?}");
    let requests = pspec.containers[0]
        .resources
        .clone()
        .unwrap()
        .requests
        .unwrap();
    assert_eq!(requests["nvidia.com/gpu"].0, "1");
    let node = Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .get(pspec.node_name.as_deref().unwrap())
        .await
        .unwrap();
    let node_labels = node.metadata.labels.unwrap();
    assert_eq!(node_labels["cloud.google.com/compute-class"], "gpu-t4-spot");
    assert_eq!(
        node_labels["cloud.google.com/gke-accelerator"],
        "nvidia-tesla-t4"
    );
    let raw = status_json(&ws);
    assert_eq!(
        raw["podTemplateOptions"]["imageConfig"],
        json!({"desired": "jupyterlab-gpu", "redirectChain": []})
    );
    assert_eq!(
        raw["podTemplateOptions"]["podConfig"]["desired"],
        "gpu_t4_spot"
    );
    assert_eq!(raw["pendingRestart"], false);

    // The owned objects, found by label and checked by ownerReference uid.
    let sa: ServiceAccount = owned_one(&Api::namespaced(client.clone(), NS), &ws).await;
    assert_eq!(sa.name_any(), "ws-demo");
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    let sts = owned_one(&sts_api, &ws).await;
    let sts_name = sts.name_any();
    assert!(sts_name.starts_with("ws-demo-") && sts_name.len() == "ws-demo-".len() + 5);
    let spec = sts.spec.clone().unwrap();
    assert_eq!(spec.replicas, Some(1));
    let selector = spec.selector.match_labels.clone().unwrap();
    assert_eq!(selector.get(LABEL).map(String::as_str), Some("demo"));
    assert_eq!(
        selector.get("statefulset").map(String::as_str),
        Some("demo")
    );
    let pod_spec = spec.template.spec.clone().unwrap();
    assert_eq!(pod_spec.service_account_name.as_deref(), Some("ws-demo"));
    let main = &pod_spec.containers[0];
    assert_eq!(main.name, "main");
    assert_eq!(
        main.image.as_deref(),
        Some("ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-pytorch-cuda-full:v1.11.0")
    );
    let env = main.env.clone().unwrap();
    let nb_prefix = env.iter().find(|e| e.name == "NB_PREFIX").unwrap();
    assert_eq!(
        nb_prefix.value.as_deref(),
        Some("/workspace/connect/wsgate-test/demo/jupyterlab/")
    );
    let token = env.iter().find(|e| e.name == "JUPYTER_TOKEN").unwrap();
    let key_ref = token
        .value_from
        .as_ref()
        .unwrap()
        .secret_key_ref
        .as_ref()
        .unwrap();
    assert_eq!(
        (
            key_ref.name.as_str(),
            key_ref.key.as_str(),
            key_ref.optional
        ),
        ("jupyter-token", "token", Some(true))
    );
    let home = &pod_spec.volumes.as_ref().unwrap()[0];
    assert_eq!(home.name, "home-volume");
    assert_eq!(
        home.persistent_volume_claim.as_ref().unwrap().claim_name,
        "demo-home"
    );
    assert_eq!(
        main.volume_mounts.as_ref().unwrap()[0].mount_path,
        "/home/jovyan"
    );
    let gpu_limit = &main.resources.as_ref().unwrap().limits.as_ref().unwrap()["nvidia.com/gpu"];
    assert_eq!(gpu_limit.0, "1");
    let svc: Service = owned_one(&Api::namespaced(client.clone(), NS), &ws).await;
    let svc_spec = svc.spec.unwrap();
    assert_eq!(svc_spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(svc_spec.ports.as_ref().unwrap()[0].port, 8888);
    assert_eq!(
        svc_spec
            .selector
            .unwrap()
            .get("statefulset")
            .map(String::as_str),
        Some("demo")
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod_name = format!("{sts_name}-0");
    assert_eq!(st.pod_template_pod.name, pod_name);
    let pod = pods.get(&pod_name).await.unwrap();
    assert_eq!(pod.labels().get(LABEL).map(String::as_str), Some("demo"));
    let states = workspace_states(&sim, "demo");
    assert!(
        matches!(states[0].as_str(), "Unknown" | "Pending"),
        "{states:?}"
    );
    assert_eq!(
        states.last().map(String::as_str),
        Some("Running"),
        "{states:?}"
    );

    // The WorkspaceKind counts it and is protected while in use.
    let kinds: Api<WorkspaceKind> = Api::all(client.clone());
    let k = kinds.get("jupyterlab").await.unwrap();
    assert!(
        k.finalizers()
            .iter()
            .any(|f| f == "notebooks.kubeflow.org/workspacekind-protection")
    );
    assert_eq!(
        k.status.as_ref().and_then(|s| s.get("workspaces")),
        Some(&json!(1))
    );

    // Pause: replicas 0, the pod goes, the GPU is released, the state ends Paused.
    set_paused(&wss, "demo", true).await;
    let ws = wait_for(
        &wss,
        "demo",
        "demo Paused",
        in_state(WorkspaceState::Paused),
    )
    .await;
    let st = ws.status.clone().unwrap();
    assert!(st.pause_time > 0);
    assert_eq!(st.state_message, "Workspace is paused");
    assert_eq!(st.pod_template_pod.name, "");
    assert!(
        pods.get_opt(&pod_name).await.unwrap().is_none(),
        "the pod is gone"
    );
    let sts = sts_api.get(&sts_name).await.unwrap();
    assert_eq!(sts.spec.unwrap().replicas, Some(0));
    let released = sim
        .truth()
        .events()
        .iter()
        .any(|e| e.transition == Transition::GpuReleased && e.name == pod_name);
    assert!(released, "the GPU was released");
    let states = workspace_states(&sim, "demo");
    let running = states.iter().rposition(|s| s == "Running").unwrap();
    assert!(
        states[running + 1..]
            .iter()
            .all(|s| s == "Terminating" || s == "Paused"),
        "{states:?}"
    );
    // Paused Workspaces keep their Service and ServiceAccount.
    let _: Service = owned_one(&Api::namespaced(client.clone(), NS), &ws).await;
    let _: ServiceAccount = owned_one(&Api::namespaced(client.clone(), NS), &ws).await;

    // Resume.
    let first_running = st.last_running_time;
    set_paused(&wss, "demo", false).await;
    let ws = wait_for(
        &wss,
        "demo",
        "demo Running again",
        in_state(WorkspaceState::Running),
    )
    .await;
    let st = ws.status.clone().unwrap();
    assert_eq!(st.pause_time, 0);
    assert!(st.last_running_time > 0 && st.last_running_time >= first_running);
    let pod = pods.get(&pod_name).await.unwrap();

    // Deleting the Workspace garbage-collects everything it owned.
    let sa_uid = Api::<ServiceAccount>::namespaced(client.clone(), NS)
        .get("ws-demo")
        .await
        .unwrap()
        .uid()
        .unwrap();
    let svc_api: Api<Service> = Api::namespaced(client.clone(), NS);
    let svc = owned_one(&svc_api, &ws).await;
    let sts = sts_api.get(&sts_name).await.unwrap();
    wss.delete("demo", &DeleteParams::default()).await.unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), NS);
    wait_deleted(&sas, "ws-demo", &sa_uid, "ServiceAccount").await;
    wait_deleted(&sts_api, &sts_name, &sts.uid().unwrap(), "StatefulSet").await;
    wait_deleted(&svc_api, &svc.name_any(), &svc.uid().unwrap(), "Service").await;
    wait_deleted(&pods, &pod_name, &pod.uid().unwrap(), "pod").await;
    wait_for(
        &kinds,
        "jupyterlab",
        "kind count back to 0",
        |k: Option<&WorkspaceKind>| {
            k.and_then(|k| k.status.as_ref())
                .and_then(|s| s.get("workspaces"))
                == Some(&json!(0))
        },
    )
    .await;
}

#[tokio::test]
async fn third_gpu_workspace_on_two_gpus_is_unschedulable_until_one_pauses() {
    let sim = crate::common::start_platform(|_| {}).await;
    let wss: Api<Workspace> = Api::namespaced(sim.client().await.unwrap(), NS);
    let names = ["g1", "g2", "g3"];
    for n in names {
        wss.create(
            &PostParams::default(),
            &workspace(n, "jupyterlab", "gpu_t4_spot", None),
        )
        .await
        .unwrap();
    }
    let settled = |w: Option<&Workspace>| {
        matches!(
            state(w),
            Some(WorkspaceState::Running | WorkspaceState::Error)
        )
    };
    let mut running = Vec::new();
    let mut errored = Vec::new();
    for n in names {
        let w = wait_for(&wss, n, &format!("{n} Running or Error"), settled).await;
        let st = w.status.unwrap();
        if st.state == WorkspaceState::Running {
            running.push(n);
        } else {
            errored.push((n, st.state_message));
        }
    }
    assert_eq!(running.len(), 2, "two GPUs, two Running: {errored:?}");
    let (waiting, message) = &errored[0];
    assert!(
        message.starts_with("Workspace Pod is unschedulable: 0/3 nodes are available")
            && message.contains("Insufficient nvidia.com/gpu"),
        "{message}"
    );
    // Pausing one frees its GPU, and the waiting Workspace runs.
    set_paused(&wss, running[0], true).await;
    wait_for(&wss, running[0], "paused", in_state(WorkspaceState::Paused)).await;
    wait_for(
        &wss,
        waiting,
        "the waiting Workspace Running",
        in_state(WorkspaceState::Running),
    )
    .await;
}

#[tokio::test]
async fn unknown_kind_or_option_is_an_error_with_every_status_field() {
    let sim = crate::common::start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let wss: Api<Workspace> = Api::namespaced(client.clone(), NS);
    wss.create(
        &PostParams::default(),
        &workspace("lost", "no-such-kind", "tiny_cpu", None),
    )
    .await
    .unwrap();
    let w = wait_for(&wss, "lost", "lost Error", in_state(WorkspaceState::Error)).await;
    assert_eq!(
        w.status.unwrap().state_message,
        "Workspace references unknown WorkspaceKind: no-such-kind"
    );
    // The raw status carries every field the CRD requires.
    let raw: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NS, &ApiResource::erase::<Workspace>(&()));
    let status = raw.get("lost").await.unwrap().data["status"].clone();
    for ptr in [
        "/state",
        "/stateMessage",
        "/pauseTime",
        "/lastRunningTime",
        "/pendingRestart",
        "/activity/lastActivity",
        "/activity/lastUpdate",
        "/podTemplateOptions/imageConfig",
        "/podTemplateOptions/podConfig",
        "/podTemplatePod/name",
        "/podTemplatePod/nodeName",
    ] {
        assert!(
            status.pointer(ptr).is_some(),
            "status{ptr} missing: {status}"
        );
    }

    wss.create(
        &PostParams::default(),
        &workspace("huge", "jupyterlab", "huge_gpu", None),
    )
    .await
    .unwrap();
    let w = wait_for(&wss, "huge", "huge Error", in_state(WorkspaceState::Error)).await;
    assert_eq!(
        w.status.unwrap().state_message,
        r#"Workspace has invalid podConfig: podConfig with id "huge_gpu" not found"#
    );
    let sts: Api<StatefulSet> = Api::namespaced(client, NS);
    let owned = sts
        .list(&ListParams::default().labels(&format!("{LABEL}=huge")))
        .await
        .unwrap();
    assert!(
        owned.items.is_empty(),
        "nothing is generated from an invalid option"
    );
}

/// A WorkspaceKind like the seeded one, with its image port on `port` and a short idle rule.
fn idle_kind(port: u16) -> WorkspaceKind {
    serde_json::from_value(json!({
        "metadata": {"name": "idle-test"},
        "spec": {
            "spawner": {"displayName": "Idle test", "description": "auto-pause", "icon": {"url": "https://x/i.png"}, "logo": {"url": "https://x/l.svg"}},
            "podTemplate": {
                "volumeMounts": {"home": "/home/jovyan"},
                "ports": [{"id": "jupyterlab", "protocol": "HTTP", "defaultDisplayName": "JupyterLab"}],
                "activityProbe": {"jupyter": {"lastActivity": true, "portId": "jupyterlab"}, "minProbeIntervalSeconds": 100, "probeIntervalSeconds": 300},
                "options": {
                    "imageConfig": {"spawner": {"default": "img"}, "values": [{"id": "img", "spawner": {"displayName": "img"},
                        "spec": {"image": "jupyter:test", "ports": [{"id": "jupyterlab", "port": port}]}}]},
                    "podConfig": {"spawner": {"default": "tiny_cpu"}, "values": [{"id": "tiny_cpu", "spawner": {"displayName": "tiny"},
                        "spec": {"resources": {"requests": {"cpu": "100m"}}}}]}
                }
            },
            "activityRules": [{"config": {"secondsSinceActive": 16}, "effect": {"pauseWorkspace": true}}]
        }
    }))
    .unwrap()
}

/// Serves Jupyter's `/api/status` for Workspace `idle` on `addr`: `last_activity` an hour
/// ago, only with the right token. Counts the authorised calls.
async fn stand_in_jupyter(
    addr: std::net::SocketAddr,
    last_activity: String,
    hits: Arc<AtomicUsize>,
) {
    use axum::http::{HeaderMap, StatusCode};
    let app = axum::Router::new().route(
        "/workspace/connect/wsgate-test/idle/jupyterlab/api/status",
        axum::routing::get(move |headers: HeaderMap| async move {
            if headers
                .get("authorization")
                .is_none_or(|v| v != "token sekrit")
            {
                return (StatusCode::FORBIDDEN, String::new());
            }
            hits.fetch_add(1, Ordering::SeqCst);
            (
                StatusCode::OK,
                json!({"last_activity": last_activity, "connections": 0, "kernels": 0}).to_string(),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("bind the pod's IP on loopback");
    tokio::spawn(async move { axum::serve(listener, app).await });
}

fn last_probe_result(w: Option<&Workspace>) -> Option<String> {
    w.and_then(|w| w.status.as_ref())
        .and_then(|s| s.activity.last_probe.as_ref())
        .and_then(|p| p.get("result"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

#[tokio::test]
async fn idle_workspace_is_paused_only_after_a_successful_probe() {
    let sim = crate::common::start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    // A port free on loopback; the pod's own IP (127.0.x.y) will serve on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    Api::<WorkspaceKind>::all(client.clone())
        .create(&PostParams::default(), &idle_kind(port))
        .await
        .unwrap();
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("jupyter-token".into()),
            ..Default::default()
        },
        data: Some([("token".to_string(), ByteString(b"sekrit".to_vec()))].into()),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let wss: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let mut ws = workspace("idle", "idle-test", "tiny_cpu", None);
    ws.spec.pod_template.options.image_config = "img".into();
    wss.create(&PostParams::default(), &ws).await.unwrap();

    // Nothing serves yet: the probe fails, and a failed probe never pauses.
    let w = wait_for(&wss, "idle", "a failed probe", |w: Option<&Workspace>| {
        last_probe_result(w).as_deref() == Some("Failure")
    })
    .await;
    assert_eq!(state(Some(&w)), Some(WorkspaceState::Running));
    assert!(!w.spec.paused);
    let probe = w
        .status
        .as_ref()
        .unwrap()
        .activity
        .last_probe
        .clone()
        .unwrap();
    assert!(
        probe["message"]
            .as_str()
            .unwrap()
            .starts_with("Jupyter probe failed: "),
        "{probe}"
    );

    let pod_name = w.status.as_ref().unwrap().pod_template_pod.name.clone();
    let pod = Api::<Pod>::namespaced(client.clone(), NS)
        .get(&pod_name)
        .await
        .unwrap();
    let ip: std::net::IpAddr = pod.status.unwrap().pod_ip.unwrap().parse().unwrap();
    let idle_since = chrono::Utc::now() - chrono::Duration::hours(1);
    let hits = Arc::new(AtomicUsize::new(0));
    stand_in_jupyter((ip, port).into(), idle_since.to_rfc3339(), hits.clone()).await;

    // The next probe (after minProbeIntervalSeconds, scaled) succeeds and pauses it.
    let w = wait_for(
        &wss,
        "idle",
        "paused for inactivity",
        |w: Option<&Workspace>| w.is_some_and(|w| w.spec.paused),
    )
    .await;
    assert!(hits.load(Ordering::SeqCst) >= 1, "the probe sent the token");
    let activity = &w.status.as_ref().unwrap().activity;
    assert_eq!(activity.last_activity, idle_since.timestamp_millis());
    let probe = activity.last_probe.clone().unwrap();
    assert_eq!(probe["result"], "Success");
    assert_eq!(probe["message"], "Jupyter probe succeeded");
    assert_eq!(activity.last_update, probe["endTime"].as_i64().unwrap());
    // eligibleAfter = lastActivity + secondsSinceActive (16 s, scaled by activity_scale).
    let idle = sim
        .platform()
        .unwrap()
        .profile
        .timing
        .scaled(16.0)
        .as_millis() as i64;
    let eligible = activity.rules.as_ref().unwrap()["pauseWorkspace"]["eligibleAfter"].as_i64();
    assert_eq!(eligible, Some(idle_since.timestamp_millis() + idle));
    wait_for(
        &wss,
        "idle",
        "idle Paused",
        in_state(WorkspaceState::Paused),
    )
    .await;
}

/// The StatefulSet follows its inputs: a change to the Workspace's pod metadata, then to
/// its WorkspaceKind's, reaches the StatefulSet's pod template (the controller keeps what
/// it rendered and renders again only when an input changed).
#[tokio::test]
async fn the_statefulset_follows_changes_to_the_workspace_and_its_kind() {
    let sim = crate::common::start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let wss: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let stss: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    let kinds: Api<WorkspaceKind> = Api::all(client.clone());
    let ws = create_running(&wss, workspace("follow", "jupyterlab", "tiny_cpu", None)).await;
    let sts: StatefulSet = owned_one(&stss, &ws).await;
    let sts_name = sts.name_any();
    let template_label = |key: &'static str| {
        move |s: Option<&StatefulSet>| {
            s.and_then(|s| s.spec.as_ref())
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.labels.as_ref())
                .is_some_and(|l| l.get(key).map(String::as_str) == Some("yes"))
        }
    };
    // The Workspace's own pod metadata.
    wss.patch(
        "follow",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"podTemplate": {"podMetadata": {"labels": {"from-workspace": "yes"}}}}})),
    )
    .await
    .unwrap();
    wait_for(
        &stss,
        &sts_name,
        "the Workspace's label in the pod template",
        template_label("from-workspace"),
    )
    .await;
    // The kind's pod metadata: its generation changes, and so does the template.
    kinds
        .patch(
            "jupyterlab",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"podTemplate": {"podMetadata": {"labels": {"from-kind": "yes"}}}}}),
            ),
        )
        .await
        .unwrap();
    let sts = wait_for(
        &stss,
        &sts_name,
        "the kind's label in the pod template",
        template_label("from-kind"),
    )
    .await;
    assert!(template_label("from-workspace")(Some(&sts)), "{sts:?}");
}

//! The simulated cluster through kube-rs: nodes from the profile, the scheduler and kubelet
//! (GPU requests, taints, Unschedulable, graceful deletion, a GPU free only once its pod is
//! gone), the StatefulSet controller, and the seeded objects.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;
use wsgate::platform::crd::{PodSnapshotStorageConfig, WorkspaceKind};

const NS: &str = "wsgate-test";
/// Every wait in these tests gets this budget; the simulator's delays are milliseconds.
const BUDGET: Duration = Duration::from_secs(20);

fn gpu_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": 1}}}]
        }
    }))
    .unwrap()
}

async fn wait_for<K, C>(api: &Api<K>, name: &str, what: &str, cond: C) -> K
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    C: kube::runtime::wait::Condition<K>,
{
    tokio::time::timeout(BUDGET, await_condition(api.clone(), name, cond))
        .await
        .unwrap_or_else(|_| panic!("{what}: not within the {BUDGET:?} test budget"))
        .expect("watch works")
        .unwrap_or_else(|| panic!("{what}: object gone"))
}

fn scheduled_false(p: Option<&Pod>) -> bool {
    p.and_then(|p| p.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "PodScheduled" && c.status == "False")
        })
}

#[tokio::test]
async fn seeded_cluster_matches_the_default_profile() {
    let sim = crate::common::start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let nodes = nodes
        .list(&ListParams::default().labels("cloud.google.com/gke-accelerator=nvidia-tesla-t4"))
        .await
        .unwrap();
    assert_eq!(nodes.items.len(), 2);
    for n in &nodes.items {
        let gpus = &n.status.as_ref().unwrap().allocatable.as_ref().unwrap()["nvidia.com/gpu"];
        assert_eq!(gpus.0, "1");
        assert_eq!(
            n.labels().get("sandbox.gke.io/runtime").map(String::as_str),
            Some("gvisor")
        );
    }
    let kinds: Api<WorkspaceKind> = Api::all(client.clone());
    let k = kinds.get("jupyterlab-resumable").await.unwrap();
    assert_eq!(
        k.annotations()
            .get("podsnapshot.gke.kubeflow.org/enabled")
            .map(String::as_str),
        Some("true")
    );
    let storage: Api<PodSnapshotStorageConfig> = Api::all(client);
    assert!(
        storage
            .get("kubeflow-pod-snapshot-storage-config")
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn gpu_pods_schedule_until_the_pool_is_full_and_a_gpu_frees_only_when_its_pod_is_gone() {
    let sim = crate::common::start_platform(|_| {}).await;
    let pods: Api<Pod> = Api::namespaced(sim.client().await.unwrap(), NS);
    for name in ["g1", "g2", "g3"] {
        pods.create(&PostParams::default(), &gpu_pod(name))
            .await
            .unwrap();
    }
    let g1 = wait_for(&pods, "g1", "g1 running", conditions::is_pod_running()).await;
    wait_for(&pods, "g2", "g2 running", conditions::is_pod_running()).await;
    let g3 = wait_for(&pods, "g3", "g3 unschedulable", scheduled_false).await;
    let cond = g3
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap();
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    assert!(
        cond.message
            .unwrap()
            .contains("Insufficient nvidia.com/gpu")
    );
    assert!(
        g1.status
            .unwrap()
            .pod_ip
            .is_some_and(|ip| ip.starts_with("127."))
    );

    // Graceful deletion: the pod is marked first, and g3 only schedules once g1 is gone.
    pods.delete("g1", &DeleteParams::default()).await.unwrap();
    wait_for(
        &pods,
        "g3",
        "g3 running after g1 left",
        conditions::is_pod_running(),
    )
    .await;
    let truth = sim.truth().events();
    let pos = |t: wsgate::sim::truth::Transition, name: &str| {
        truth
            .iter()
            .position(|e| e.transition == t && e.name == name)
    };
    use wsgate::sim::truth::Transition::*;
    let released = pos(GpuReleased, "g1").expect("g1's GPU released");
    let allocated = truth
        .iter()
        .rposition(|e| e.transition == GpuAllocated && e.name == "g3")
        .unwrap();
    assert!(
        released < allocated,
        "g3 got a GPU only after g1 released it"
    );
    assert!(pods.get_opt("g1").await.unwrap().is_none());
}

#[tokio::test]
async fn statefulset_runs_its_pod_and_scales_to_zero() {
    let sim = crate::common::start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    let s: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}
    }))
    .unwrap();
    sts.create(&PostParams::default(), &s).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let p = wait_for(
        &pods,
        "web-0",
        "web-0 running",
        conditions::is_pod_running(),
    )
    .await;
    assert_eq!(p.labels().get("app").map(String::as_str), Some("web"));
    wait_for(&sts, "web", "readyReplicas 1", |s: Option<&StatefulSet>| {
        s.and_then(|s| s.status.as_ref())
            .and_then(|st| st.ready_replicas)
            == Some(1)
    })
    .await;
    sts.patch(
        "web",
        &Default::default(),
        &kube::api::Patch::Merge(json!({"spec": {"replicas": 0}})),
    )
    .await
    .unwrap();
    tokio::time::timeout(
        BUDGET,
        await_condition(
            pods.clone(),
            "web-0",
            conditions::is_deleted(&p.uid().unwrap()),
        ),
    )
    .await
    .expect("web-0 deleted within budget")
    .unwrap();
}

#[tokio::test]
async fn resource_quota_refuses_gpu_pods_and_reports_usage() {
    use k8s_openapi::api::core::v1::{Event, ResourceQuota};
    let sim = crate::common::start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(&PostParams::default(), &gpu_pod("before"))
        .await
        .unwrap();
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), NS);
    let q: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "squeeze"}, "spec": {"hard": {"requests.nvidia.com/gpu": "1"}}
    }))
    .unwrap();
    quotas.create(&PostParams::default(), &q).await.unwrap();
    let err = pods
        .create(&PostParams::default(), &gpu_pod("after"))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert!(
        status.message.contains("exceeded quota: squeeze"),
        "{}",
        status.message
    );
    wait_for(
        &quotas,
        "squeeze",
        "quota usage reported",
        |q: Option<&ResourceQuota>| {
            q.and_then(|q| q.status.as_ref())
                .and_then(|s| s.used.as_ref())
                .and_then(|u| u.get("requests.nvidia.com/gpu"))
                .is_some_and(|v| v.0 == "1")
        },
    )
    .await;

    // A StatefulSet that cannot create its pod says so in a Warning event.
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    let s: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "gpu"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "gpu"}},
                 "template": {"metadata": {"labels": {"app": "gpu"}}, "spec": gpu_pod("x").spec}}
    }))
    .unwrap();
    sts.create(&PostParams::default(), &s).await.unwrap();
    let events: Api<Event> = Api::namespaced(client, NS);
    let deadline = tokio::time::Instant::now() + BUDGET;
    loop {
        let evs = events
            .list(&ListParams::default().fields("involvedObject.name=gpu,reason=FailedCreate"))
            .await
            .unwrap();
        if let Some(e) = evs.items.first() {
            assert!(
                e.message
                    .as_deref()
                    .unwrap_or("")
                    .contains("exceeded quota")
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no FailedCreate event within {BUDGET:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn fault_api_errors_answers_429_and_500_as_statuses() {
    let sim = crate::common::start_platform(|p| p.faults.api_error_rate = 0.5).await;
    let http = crate::common::raw_client(&sim);
    let (mut ok, mut throttled, mut failed) = (0, 0, 0);
    for _ in 0..80 {
        let r = http
            .get(format!("{}/api/v1/namespaces/{NS}/pods", sim.url()))
            .bearer_auth(sim.token())
            .send()
            .await
            .unwrap();
        match r.status().as_u16() {
            200 => ok += 1,
            429 => {
                assert_eq!(
                    r.headers().get("retry-after").and_then(|v| v.to_str().ok()),
                    Some("1")
                );
                let body: serde_json::Value = r.json().await.unwrap();
                assert_eq!(body["reason"], "TooManyRequests");
                throttled += 1;
            }
            500 => {
                let body: serde_json::Value = r.json().await.unwrap();
                assert_eq!(body["kind"], "Status");
                failed += 1;
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert!(
        ok > 0 && throttled > 0 && failed > 0,
        "ok {ok}, 429 {throttled}, 500 {failed}"
    );
}

#[tokio::test]
async fn fault_watch_drops_ends_streams_early_and_watchers_still_see_every_change() {
    use futures::{StreamExt, TryStreamExt};
    use kube::runtime::{WatchStreamExt, watcher};
    let sim = crate::common::start_platform(|p| {
        p.faults
            .enabled
            .push(wsgate::sim::faults::Fault::WatchDrops)
    })
    .await;
    let http = crate::common::raw_client(&sim);
    let started = tokio::time::Instant::now();
    let _ = http
        .get(format!(
            "{}/api/v1/namespaces/{NS}/pods?watch=true&timeoutSeconds=60",
            sim.url()
        ))
        .bearer_auth(sim.token())
        .send()
        .await
        .unwrap()
        .text()
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the stream was dropped before its timeout"
    );

    let pods: Api<Pod> = Api::namespaced(sim.client().await.unwrap(), NS);
    let mut names = watcher(pods.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    let creator = {
        let pods = pods.clone();
        tokio::spawn(async move {
            for i in 0..6 {
                pods.create(&PostParams::default(), &gpu_pod(&format!("w{i}")))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 6 {
        let p = tokio::time::timeout(BUDGET, names.try_next())
            .await
            .expect("changes keep arriving")
            .unwrap()
            .unwrap();
        seen.insert(p.name_any());
    }
    creator.await.unwrap();
}

#[tokio::test]
async fn fault_gpu_not_released_keeps_the_gpu_allocated_after_the_pod_is_gone() {
    let sim = crate::common::start_platform(|p| {
        p.faults
            .enabled
            .push(wsgate::sim::faults::Fault::GpuNotReleased)
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(sim.client().await.unwrap(), NS);
    for name in ["g1", "g2"] {
        pods.create(&PostParams::default(), &gpu_pod(name))
            .await
            .unwrap();
        wait_for(&pods, name, "running", conditions::is_pod_running()).await;
    }
    let g1 = pods.get("g1").await.unwrap();
    pods.delete("g1", &DeleteParams::default()).await.unwrap();
    tokio::time::timeout(
        BUDGET,
        await_condition(
            pods.clone(),
            "g1",
            conditions::is_deleted(&g1.uid().unwrap()),
        ),
    )
    .await
    .expect("g1 deleted within budget")
    .unwrap();
    pods.create(&PostParams::default(), &gpu_pod("g3"))
        .await
        .unwrap();
    let g3 = wait_for(&pods, "g3", "g3 unschedulable", scheduled_false).await;
    assert!(
        g3.spec.unwrap().node_name.is_none(),
        "the leaked GPU is not handed out again"
    );
    use wsgate::sim::truth::Transition::GpuReleased;
    assert!(
        !sim.truth()
            .events()
            .iter()
            .any(|e| e.transition == GpuReleased && e.name == "g1")
    );
}

/// A pod whose ConfigMap volume does not exist is held in `ContainerCreating` with the
/// kubelet's `FailedMount` Warning, and starts once the ConfigMap is created (the snapshot
/// add-on's pod webhook mounts `jupyter-ipc-config`, which a namespace may not have yet).
#[tokio::test]
async fn a_missing_config_map_holds_the_pod_in_container_creating_until_it_exists() {
    use k8s_openapi::api::core::v1::{ConfigMap, Event};
    let sim = crate::common::start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "mounts"},
        "spec": {
            "containers": [{"name": "main", "image": "busybox",
                "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}]}],
            "volumes": [
                {"name": "cfg", "configMap": {"name": "not-yet"}},
                {"name": "maybe", "configMap": {"name": "never", "optional": true}}
            ]
        }
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let held = wait_for(&pods, "mounts", "container waiting", |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| !cs.is_empty())
    })
    .await;
    let status = held.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    let waiting = status.container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .waiting
        .unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("ContainerCreating"));
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let said: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some("mounts"))
        .filter(|e| e.reason.as_deref() == Some("FailedMount"))
        .map(|e| {
            format!(
                "{} {}",
                e.type_.unwrap_or_default(),
                e.message.unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        said,
        [r#"Warning MountVolume.SetUp failed for volume "cfg" : configmap "not-yet" not found"#],
        "one event, the required volume only"
    );
    // Still held a moment later; then the ConfigMap comes and the pod starts.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let still = pods.get("mounts").await.unwrap();
    assert_eq!(still.status.unwrap().phase.as_deref(), Some("Pending"));
    let maps: Api<ConfigMap> = Api::namespaced(client, NS);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "not-yet"}, "data": {"k": "v"}}))
            .unwrap();
    maps.create(&PostParams::default(), &cm).await.unwrap();
    wait_for(
        &pods,
        "mounts",
        "running once the ConfigMap exists",
        conditions::is_pod_running(),
    )
    .await;
}

/// The garbage collector's rule: an object created for an owner that is already gone (a
/// controller that read its owner just before the delete) is removed, so a StatefulSet
/// made for a deleted Workspace cannot run a pod that holds a GPU for ever.
#[tokio::test]
async fn an_object_whose_owner_is_gone_is_garbage_collected() {
    let sim = crate::common::start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client, NS);
    let sts: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "orphan", "ownerReferences": [{"apiVersion": "kubeflow.org/v1beta1",
            "kind": "Workspace", "name": "gone", "uid": "0b6f4a4e-0000-4000-8000-000000000000",
            "controller": true}]},
        "spec": {"replicas": 1, "serviceName": "orphan",
            "selector": {"matchLabels": {"app": "orphan"}},
            "template": {"metadata": {"labels": {"app": "orphan"}},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}
    }))
    .unwrap();
    let created = sets.create(&PostParams::default(), &sts).await.unwrap();
    assert_eq!(created.name_any(), "orphan", "the create is answered");
    assert!(sets.get_opt("orphan").await.unwrap().is_none(), "collected");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        pods.get_opt("orphan-0").await.unwrap().is_none(),
        "no pod ran for it"
    );
}

/// A profile's drawn delays come from `sim.seed`'s streams: the same seed gives pods
/// started in the same order the same start times, another seed other ones.
#[tokio::test]
async fn drawn_pod_starts_are_the_same_for_the_same_seed() {
    async fn pod_starts(seed: u64) -> f64 {
        wsgate::install_crypto_provider();
        let mut opts = wsgate::sim::SimOptions::with_platform();
        let p = opts.platform.as_mut().unwrap();
        p.profile.runtime.kind = wsgate::sim::profile::RuntimeKind::None;
        p.profile.timing.pod_start_ms =
            toml::from_str::<toml::Table>("d = { quantiles = [[0, 20], [1, 900]] }").unwrap()["d"]
                .clone()
                .try_into()
                .unwrap();
        p.seed = seed;
        let sim = wsgate::sim::SimHandle::start(opts).await.unwrap();
        let pods: Api<Pod> = Api::namespaced(sim.client().await.unwrap(), NS);
        for name in ["s1", "s2", "s3", "s4"] {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]}
            }))
            .unwrap();
            pods.create(&PostParams::default(), &pod).await.unwrap();
            wait_for(&pods, name, "running", conditions::is_pod_running()).await;
        }
        let imposed = sim.truth().imposed();
        let start = imposed
            .iter()
            .find(|s| s.delay == wsgate::sim::truth::Imposed::PodStart)
            .expect("pod starts imposed");
        assert_eq!(start.count, 4);
        sim.shutdown().await;
        start.total_ms
    }
    let (a, b, c) = (
        pod_starts(7).await,
        pod_starts(7).await,
        pod_starts(8).await,
    );
    assert_eq!(a, b, "the same seed, the same delays");
    assert_ne!(a, c, "another seed, other delays");
    assert!(
        a > 4.0 * 20.0 && a < 4.0 * 900.0,
        "{a} ms drawn within the range"
    );
}

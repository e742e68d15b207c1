//! GKE Pod Snapshots in the simulator through kube-rs (`none` runtime): the add-on's pause
//! and resume of a Workspace (held pause, readiness gate, policy and trigger, PodSnapshot
//! conditions, `ps-name`, `PodRestored` and the `GKEPodSnapshotting` event, cleanup), the
//! bucket objects through the listing endpoint, the agent on hand-made objects (trigger
//! failures, restore matching by spec hash, retention and group pruning), and every
//! snapshot fault, run-wide and per object. The add-on as upstream's: a repeated pause
//! restamps and replaces the trigger, a trigger with another stamp is replaced, a pause
//! whose pod is gone completes with no snapshot and the resume cold-starts, a deleted
//! Workspace's policy drains (or times out), tenant namespaces limit only the reconciler,
//! and the IPC ConfigMap is kept and mounted.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event, PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{Condition, await_condition, conditions};
use kube::runtime::{reflector, watcher};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use wsgate::platform::crd::{
    PodSnapshot, PodSnapshotManualTrigger, PodSnapshotPolicy, Workspace, WorkspaceKind,
    WorkspaceState,
};
use wsgate::sim::SimHandle;
use wsgate::sim::faults::Fault;
use wsgate::sim::truth::{Imposed, Transition, TruthEvent};

use crate::common::raw_client;

const NS: &str = "wsgate-test";
const LABEL: &str = "notebooks.kubeflow.org/workspace-name";
const FAULT: &str = "sim.wsgate.dev/fault";
const STATE: &str = "podsnapshot.gke.kubeflow.org/checkpoint-state";
const STARTED_AT: &str = "podsnapshot.gke.kubeflow.org/checkpoint-started-at";
const LAST: &str = "podsnapshot.gke.kubeflow.org/last-checkpoint-name";
const GATE: &str = "podsnapshot.gke.kubeflow.org/active";
const PS_NAME: &str = "podsnapshot.gke.io/ps-name";
const TRIGGERED_BY: &str = "gke-pod-snapshot-triggered-by";
const BUCKET: &str = "wsgate-sim-snapshots";
/// Every wait in these tests gets this budget; the simulator's delays are milliseconds
/// (a checkpoint of the nominal 512 MiB takes 250 ms, a restore 300 ms, slow-restore 3 s).
const BUDGET: Duration = Duration::from_secs(20);

async fn wait_for<K, C>(api: &Api<K>, name: &str, what: &str, cond: C) -> K
where
    K: Resource + Clone + Debug + serde::de::DeserializeOwned + Send + 'static,
    C: Condition<K>,
{
    tokio::time::timeout(BUDGET, await_condition(api.clone(), name, cond))
        .await
        .unwrap_or_else(|_| panic!("{what}: not within the {BUDGET:?} test budget"))
        .expect("watch works")
        .unwrap_or_else(|| panic!("{what}: object gone"))
}

/// Waits until the add-on has cleared its three state annotations from Workspace `name`.
async fn wait_state_cleared(a: &Apis, name: &str) {
    wait_for(
        &a.ws,
        name,
        "annotations cleared",
        |w: Option<&Workspace>| {
            w.is_some_and(|w| {
                [STATE, STARTED_AT, LAST]
                    .iter()
                    .all(|k| ann(w, k).is_none())
            })
        },
    )
    .await;
}

async fn wait_gone<K>(api: &Api<K>, name: &str, what: &str)
where
    K: Resource + Clone + Debug + serde::de::DeserializeOwned + Send + 'static,
{
    tokio::time::timeout(
        BUDGET,
        await_condition(api.clone(), name, |o: Option<&K>| o.is_none()),
    )
    .await
    .unwrap_or_else(|_| panic!("{what}: not gone within the {BUDGET:?} test budget"))
    .expect("watch works");
}

/// Watches a (label-selected) list until `done` holds for its current contents.
async fn wait_list<K>(
    api: &Api<K>,
    labels: &str,
    what: &str,
    done: impl Fn(&[Arc<K>]) -> bool,
) -> Vec<Arc<K>>
where
    K: Resource + Clone + Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    let (reader, writer) = reflector::store();
    let mut cfg = watcher::Config::default();
    if !labels.is_empty() {
        cfg = cfg.labels(labels);
    }
    let stream = reflector(writer, watcher(api.clone(), cfg));
    let wait = async {
        futures::pin_mut!(stream);
        let mut listed = false;
        while let Some(ev) = stream.try_next().await.expect("watch works") {
            listed |= matches!(ev, watcher::Event::InitDone);
            if listed && done(&reader.state()) {
                return reader.state();
            }
        }
        panic!("{what}: the watch ended")
    };
    tokio::time::timeout(BUDGET, wait)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within the {BUDGET:?} test budget"))
}

fn status(obj: &impl serde::Serialize) -> Value {
    serde_json::to_value(obj)
        .ok()
        .and_then(|v| v.get("status").cloned())
        .unwrap_or(Value::Null)
}

fn cond(obj: &impl serde::Serialize, type_: &str) -> Option<Value> {
    status(obj)
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

fn cond_is(type_: &str, want: &str) -> impl Fn(&Value) -> bool {
    let type_ = type_.to_string();
    let want = want.to_string();
    move |obj: &Value| {
        obj.pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == type_ && c["status"] == want))
    }
}

/// A condition on a typed object, usable with `await_condition`.
fn has_cond<K: serde::Serialize>(type_: &str, want: &str) -> impl Fn(Option<&K>) -> bool {
    let check = cond_is(type_, want);
    move |o: Option<&K>| o.is_some_and(|o| check(&serde_json::to_value(o).unwrap()))
}

fn ann(obj: &impl ResourceExt, key: &str) -> Option<String> {
    obj.annotations().get(key).cloned()
}

fn in_state(want: WorkspaceState) -> impl Fn(Option<&Workspace>) -> bool {
    move |w| w.and_then(|w| w.status.as_ref()).map(|s| s.state) == Some(want)
}

struct Apis {
    ws: Api<Workspace>,
    pods: Api<Pod>,
    snaps: Api<PodSnapshot>,
    triggers: Api<PodSnapshotManualTrigger>,
    policies: Api<PodSnapshotPolicy>,
    events: Api<Event>,
}

async fn apis(sim: &SimHandle) -> Apis {
    let c = sim.client().await.unwrap();
    Apis {
        ws: Api::namespaced(c.clone(), NS),
        pods: Api::namespaced(c.clone(), NS),
        snaps: Api::namespaced(c.clone(), NS),
        triggers: Api::namespaced(c.clone(), NS),
        policies: Api::namespaced(c.clone(), NS),
        events: Api::namespaced(c, NS),
    }
}

/// A PVC and a snapshot-enabled GPU Workspace, with optional per-object faults.
async fn create_workspace(a: &Apis, sim: &SimHandle, name: &str, faults: &str) {
    let options = ("jupyterlab-resumable", "jupyterlab-gpu", "gpu_t4_spot");
    create_workspace_of(a, sim, name, faults, options).await;
}

/// A PVC and a Workspace of `(kind, imageConfig, podConfig)`, with optional faults.
async fn create_workspace_of(
    a: &Apis,
    sim: &SimHandle,
    name: &str,
    faults: &str,
    (kind, image, pod_config): (&str, &str, &str),
) {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(sim.client().await.unwrap(), NS);
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-home")},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .unwrap();
    pvcs.create(&PostParams::default(), &pvc).await.unwrap();
    let mut annotations = json!({});
    if !faults.is_empty() {
        annotations[FAULT] = json!(faults);
    }
    let w: Workspace = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"paused": false, "kind": kind, "podTemplate": {
            "volumes": {"home": format!("{name}-home")},
            "options": {"imageConfig": image, "podConfig": pod_config}}}
    }))
    .unwrap();
    a.ws.create(&PostParams::default(), &w).await.unwrap();
}

async fn set_paused(a: &Apis, name: &str, paused: bool) {
    a.ws.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": paused}})),
    )
    .await
    .expect("patch spec.paused");
}

async fn workspace_pod(a: &Apis, name: &str) -> Pod {
    let list = a
        .pods
        .list(&ListParams::default().labels(&format!("{LABEL}={name}")))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1, "one pod of {name}: {list:?}");
    list.items.into_iter().next().unwrap()
}

/// Creates a Workspace, waits for Running, pauses it and waits for Paused. Returns the
/// first pod and the snapshot the pause produced.
async fn run_and_pause(a: &Apis, sim: &SimHandle, name: &str, faults: &str) -> (Pod, String) {
    create_workspace(a, sim, name, faults).await;
    wait_for(&a.ws, name, "Running", in_state(WorkspaceState::Running)).await;
    let pod = workspace_pod(a, name).await;
    set_paused(a, name, true).await;
    let w = wait_for(&a.ws, name, "Paused", in_state(WorkspaceState::Paused)).await;
    (pod, ann(&w, LAST).unwrap_or_default())
}

async fn bucket_listing(sim: &SimHandle, prefix: &str) -> Value {
    let url = format!("{}/storage/v1/b/{BUCKET}/o?prefix={prefix}", sim.url());
    let r = raw_client(sim)
        .get(url)
        .bearer_auth(sim.token())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "listing answers: {}", r.status());
    r.json().await.unwrap()
}

fn listed(listing: &Value) -> Vec<(String, String)> {
    listing["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            (
                o["name"].as_str().unwrap().to_string(),
                o["size"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn truth_count(events: &[TruthEvent], t: Transition) -> usize {
    events.iter().filter(|e| e.transition == t).count()
}

fn restored_message(pod: &Pod) -> Option<String> {
    cond(pod, "PodRestored")
        .filter(|c| c["status"] == "True")
        .map(|c| c["message"].as_str().unwrap_or("").to_string())
}

/// Waits for the pod's `PodRestored=True`: GKE writes it some time after the pod is Ready.
async fn wait_restored(a: &Apis, pod: &str) -> Pod {
    wait_for(&a.pods, pod, "PodRestored=True", |p: Option<&Pod>| {
        p.is_some_and(|p| restored_message(p).is_some())
    })
    .await
}

/// Sleeps past the profile's Ready -> `PodRestored` lag, so that a missing condition is
/// really missing and not merely late.
async fn past_the_restored_lag(sim: &SimHandle) {
    let lag = sim
        .platform()
        .unwrap()
        .profile
        .timing
        .pod_restored_after_ready_ms
        .median();
    tokio::time::sleep(lag + Duration::from_millis(500)).await;
}

async fn snapshot_events(a: &Apis) -> Vec<Event> {
    a.events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("GKEPodSnapshotting"))
        .collect()
}

#[tokio::test]
async fn pause_checkpoints_into_a_pod_snapshot_and_resume_restores_from_it() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    create_workspace(&a, &sim, "nb", "").await;
    wait_for(&a.ws, "nb", "Running", in_state(WorkspaceState::Running)).await;
    let pod = workspace_pod(&a, "nb").await;
    let pod_name = pod.name_any();
    let spec = pod.spec.clone().unwrap();
    assert_eq!(spec.runtime_class_name.as_deref(), Some("gvisor"));
    assert!(
        spec.readiness_gates
            .unwrap_or_default()
            .iter()
            .any(|g| g.condition_type == GATE),
        "the add-on adds its readiness gate"
    );
    let home = sim
        .platform()
        .unwrap()
        .pods
        .volumes_root
        .join(NS)
        .join("nb-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("notes.txt"), "on disk").unwrap();

    // Pause: held at paused=false while the checkpoint runs, the pod drained.
    set_paused(&a, "nb", true).await;
    let held = wait_for(&a.ws, "nb", "Checkpointing", |w: Option<&Workspace>| {
        w.is_some_and(|w| ann(w, STATE).as_deref() == Some("Checkpointing"))
    })
    .await;
    assert!(!held.spec.paused, "the add-on holds the pause");
    // The hold is ground truth, recorded once, as the write that carried it committed.
    let holds: Vec<_> = sim
        .truth()
        .events()
        .into_iter()
        .filter(|e| e.transition == Transition::PauseHeld)
        .collect();
    assert_eq!(holds.len(), 1, "{holds:?}");
    assert_eq!(holds[0].name, "nb");
    let started = ann(&held, STARTED_AT).expect("checkpoint-started-at");
    chrono::DateTime::parse_from_rfc3339(&started).expect("an RFC 3339 time");
    wait_for(&a.pods, &pod_name, "gate False", |p: Option<&Pod>| {
        p.is_some_and(|p| {
            cond(p, GATE).is_some_and(|c| c["status"] == "False")
                && cond(p, "Ready").is_some_and(|c| c["status"] == "False")
        })
    })
    .await;
    let trig = wait_for(
        &a.triggers,
        "ws-nb-trigger",
        "Triggered=True",
        has_cond("Triggered", "True"),
    )
    .await;
    assert_eq!(trig.spec.target_pod, pod_name);
    assert_eq!(cond(&trig, "Triggered").unwrap()["reason"], "Complete");
    assert!(
        trig.owner_references()
            .iter()
            .any(|r| r.kind == "Workspace" && r.name == "nb")
    );
    assert_eq!(
        trig.labels().get("podsnapshot.gke.io/targetNode"),
        spec.node_name.as_ref()
    );
    let snap_name = status(&trig)["snapshotCreated"]["name"]
        .as_str()
        .expect("snapshotCreated.name")
        .to_string();
    uuid::Uuid::parse_str(&snap_name).expect("the snapshot is named by a UUID");
    let snap = wait_for(
        &a.snaps,
        &snap_name,
        "snapshot Ready",
        has_cond("Ready", "True"),
    )
    .await;
    let snap_uid = snap.uid().unwrap();
    assert_eq!(snap.spec.policy_name, "ws-nb-policy");
    assert_eq!(
        snap.labels().get(TRIGGERED_BY).map(String::as_str),
        Some("ws-nb-trigger")
    );
    assert_eq!(
        ann(&snap, "podsnapshot.gke.io/origin-pod").as_deref(),
        Some(pod_name.as_str())
    );
    assert!(
        snap.finalizers()
            .contains(&"podsnapshot.gke.io/podsnapshot-finalizer".to_string())
    );
    for (t, reason) in [
        ("Checkpoint", "Succeeded"),
        ("StorageReplicated", "Succeeded"),
        ("Ready", "AllSnapshotsAvailable"),
    ] {
        assert_eq!(cond(&snap, t).unwrap()["reason"], reason, "{t}");
    }
    assert_eq!(
        ann(&snap, "sim.wsgate.dev/gpu-model").as_deref(),
        Some("nvidia-tesla-t4")
    );

    // Paused: the add-on let the pause through; the pod is gone, the bytes are in the bucket.
    let paused = wait_for(&a.ws, "nb", "Paused", in_state(WorkspaceState::Paused)).await;
    assert!(paused.spec.paused);
    assert_eq!(ann(&paused, STATE).as_deref(), Some("Ready"));
    assert_eq!(ann(&paused, LAST).as_deref(), Some(snap_name.as_str()));
    assert!(a.pods.get_opt(&pod_name).await.unwrap().is_none());
    let policy = a.policies.get("ws-nb-policy").await.unwrap();
    assert_eq!(policy.spec.selector, json!({"matchLabels": {LABEL: "nb"}}));
    assert_eq!(
        policy.spec.trigger_config,
        json!({"type": "manual", "postCheckpoint": "stop"})
    );
    assert_eq!(
        policy.spec.retention_config,
        Some(json!({"lastAccessTimeout": "7d"}))
    );
    assert_eq!(
        policy.spec.storage_config_name,
        "kubeflow-pod-snapshot-storage-config"
    );
    let prefix = format!("kubeflow-notebooks/{snap_uid}/");
    let objects = listed(&bucket_listing(&sim, &prefix).await);
    assert_eq!(
        objects.iter().map(|o| o.0.as_str()).collect::<Vec<_>>(),
        [
            format!("{prefix}checkpoint.img"),
            format!("{prefix}pages.img"),
            format!("{prefix}pages_meta.img")
        ]
    );
    assert_eq!(objects[1].1, (512u64 << 20).to_string(), "pages.img size");
    let probe = listed(&bucket_listing(&sim, "kubeflow-notebooks/_perm_check").await);
    assert_eq!(probe.len(), 1, "the policy's permission probe");

    // Resume: the new pod is pinned to the snapshot and restored from it.
    set_paused(&a, "nb", false).await;
    wait_for(
        &a.ws,
        "nb",
        "Running again",
        in_state(WorkspaceState::Running),
    )
    .await;
    let new_pod = workspace_pod(&a, "nb").await;
    assert_ne!(new_pod.uid(), pod.uid());
    assert_eq!(ann(&new_pod, PS_NAME).as_deref(), Some(snap_name.as_str()));
    let new_pod = wait_restored(&a, &new_pod.name_any()).await;
    let message = restored_message(&new_pod).expect("PodRestored=True");
    // GKE's message names the PodSnapshot by its name (a UUID GKE makes), not its uid.
    assert_ne!(snap_name, snap_uid);
    assert!(message.contains(&snap_name), "{message}");
    assert!(!message.contains(&snap_uid), "{message}");
    let events = snapshot_events(&a).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].type_.as_deref(), Some("Normal"));
    assert_eq!(events[0].involved_object.uid, new_pod.uid());
    assert!(
        events[0]
            .message
            .as_deref()
            .unwrap_or("")
            .contains(&format!("{NS}/{snap_name}"))
    );

    // Cleanup after the restore: snapshots, trigger, annotations and bucket objects go.
    wait_list(
        &a.snaps,
        &format!("{TRIGGERED_BY}=ws-nb-trigger"),
        "snapshots deleted",
        |l| l.is_empty(),
    )
    .await;
    wait_gone(&a.triggers, "ws-nb-trigger", "trigger deleted").await;
    wait_state_cleared(&a, "nb").await;
    assert!(listed(&bucket_listing(&sim, &prefix).await).is_empty());
    assert_eq!(
        std::fs::read_to_string(home.join("notes.txt")).unwrap(),
        "on disk"
    );
    let truth = sim.truth().events();
    let at = |t: Transition| truth.iter().position(|e| e.transition == t);
    let order = [
        Transition::CheckpointStarted,
        Transition::CheckpointFinished,
        Transition::Restored,
        Transition::SnapshotDeleted,
    ]
    .map(|t| at(t).unwrap_or_else(|| panic!("{t:?} recorded")));
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
}

#[tokio::test]
async fn a_failed_checkpoint_leaves_the_workspace_checkpointing_with_its_pod_until_deleted() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    create_workspace(&a, &sim, "cf", "checkpoint-fails").await;
    wait_for(&a.ws, "cf", "Running", in_state(WorkspaceState::Running)).await;
    let pod = workspace_pod(&a, "cf").await;
    set_paused(&a, "cf", true).await;
    // As upstream's add-on: no failure path. The trigger says Failed, the pause stays held.
    let trig = wait_for(
        &a.triggers,
        "ws-cf-trigger",
        "Triggered=False",
        has_cond::<PodSnapshotManualTrigger>("Triggered", "False"),
    )
    .await;
    let triggered = cond(&trig, "Triggered").unwrap();
    assert_eq!(triggered["reason"], json!("Failed"));
    assert!(!triggered["message"].as_str().unwrap_or("").is_empty());
    let snaps = a
        .snaps
        .list(&ListParams::default().labels(&format!("{TRIGGERED_BY}=ws-cf-trigger")))
        .await
        .unwrap();
    assert_eq!(snaps.items.len(), 1);
    assert_eq!(
        cond(&snaps.items[0], "Checkpoint").unwrap()["reason"],
        "Failed"
    );
    assert_ne!(cond(&snaps.items[0], "Ready").unwrap()["status"], "True");
    // Longer than the settle and the failed checkpoint: nothing moves on.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let w = a.ws.get("cf").await.unwrap();
    assert!(!w.spec.paused, "the pause stays held");
    assert_eq!(ann(&w, STATE).as_deref(), Some("Checkpointing"));
    assert!(ann(&w, LAST).is_none());
    let p = a.pods.get(&pod.name_any()).await.unwrap();
    assert_eq!(p.uid(), pod.uid());
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Running"));
    let warned = a.events.list(&ListParams::default()).await.unwrap();
    assert!(
        !warned
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("CheckpointFailed")),
        "no invented Warning event"
    );
    let truth = sim.truth().events();
    assert_eq!(truth_count(&truth, Transition::CheckpointFailed), 1);

    // Deleting it still works: the add-on and the agent do not hold it.
    a.ws.delete("cf", &Default::default()).await.unwrap();
    wait_gone(&a.ws, "cf", "Workspace deleted").await;
    wait_gone(&a.pods, &pod.name_any(), "pod deleted").await;
    wait_gone(&a.triggers, "ws-cf-trigger", "trigger deleted").await;
}

#[tokio::test]
async fn a_hung_checkpoint_stays_awaiting_and_the_pause_stays_held() {
    let sim =
        crate::common::start_platform(|p| p.faults.enabled = vec![Fault::CheckpointHangs]).await;
    let a = apis(&sim).await;
    create_workspace(&a, &sim, "hang", "").await;
    wait_for(&a.ws, "hang", "Running", in_state(WorkspaceState::Running)).await;
    let pod = workspace_pod(&a, "hang").await;
    set_paused(&a, "hang", true).await;
    let snaps = wait_list(
        &a.snaps,
        &format!("{TRIGGERED_BY}=ws-hang-trigger"),
        "a snapshot in progress past its upload time",
        |l| l.iter().any(|s| cond(&**s, "InProgress").is_some()),
    )
    .await;
    let ready = cond(&*snaps[0], "Ready").unwrap();
    assert_eq!(
        (&ready["status"], &ready["reason"]),
        (&json!("False"), &json!("AwaitingCheckpoint"))
    );
    let w = a.ws.get("hang").await.unwrap();
    assert!(!w.spec.paused);
    assert_eq!(ann(&w, STATE).as_deref(), Some("Checkpointing"));
    let trig = a.triggers.get("ws-hang-trigger").await.unwrap();
    assert_eq!(cond(&trig, "Triggered").unwrap()["status"], "Unknown");
    let p = a.pods.get(&pod.name_any()).await.unwrap();
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Running"));
}

#[tokio::test]
async fn a_snapshot_whose_deletion_is_stuck_stays_deleting_with_its_bytes() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    let (_, snap_name) = run_and_pause(&a, &sim, "sd", "snapshot-stuck-deleting").await;
    let uid = a.snaps.get(&snap_name).await.unwrap().uid().unwrap();
    set_paused(&a, "sd", false).await;
    wait_for(&a.ws, "sd", "Running", in_state(WorkspaceState::Running)).await;
    wait_list(&a.events, "", "SnapshotDeletionFailed event", |l| {
        l.iter().any(|e| {
            e.reason.as_deref() == Some("SnapshotDeletionFailed")
                && e.involved_object.name.as_deref() == Some(snap_name.as_str())
        })
    })
    .await;
    let snap = a.snaps.get(&snap_name).await.unwrap();
    assert!(snap.metadata.deletion_timestamp.is_some(), "Deleting");
    let objects = listed(&bucket_listing(&sim, &format!("kubeflow-notebooks/{uid}/")).await);
    assert_eq!(objects.len(), 3, "the bytes stay: {objects:?}");
    assert_eq!(
        truth_count(&sim.truth().events(), Transition::SnapshotDeleted),
        0
    );
    assert_eq!(
        sim.faults_injected(),
        [("snapshot-stuck-deleting".to_string(), 1)].into()
    );
}

/// Pauses and resumes a Workspace whose resume cannot restore; returns the resumed pod.
async fn cold_resume(sim: &SimHandle, a: &Apis, name: &str, faults: &str) -> Pod {
    let (_, snap) = run_and_pause(a, sim, name, faults).await;
    assert!(!snap.is_empty(), "the checkpoint itself succeeds");
    // The fault has not acted yet: the first start had nothing to restore from.
    assert_eq!(
        sim.faults_injected(),
        Default::default(),
        "before the resume"
    );
    set_paused(a, name, false).await;
    wait_for(&a.ws, name, "Running", in_state(WorkspaceState::Running)).await;
    past_the_restored_lag(sim).await;
    let pod = workspace_pod(a, name).await;
    assert_eq!(ann(&pod, PS_NAME).as_deref(), Some(snap.as_str()));
    assert!(restored_message(&pod).is_none(), "no PodRestored condition");
    assert!(
        snapshot_events(a).await.is_empty(),
        "no GKEPodSnapshotting event"
    );
    let truth = sim.truth().events();
    assert_eq!(truth_count(&truth, Transition::Restored), 0);
    assert_eq!(truth_count(&truth, Transition::ColdStarted), 2);
    pod
}

#[tokio::test]
async fn silent_cold_start_run_wide_resumes_without_a_trace() {
    let sim =
        crate::common::start_platform(|p| p.faults.enabled = vec![Fault::SilentColdStart]).await;
    let a = apis(&sim).await;
    cold_resume(&sim, &a, "scs", "").await;
    assert_eq!(
        sim.faults_injected(),
        [("silent-cold-start".to_string(), 1)].into(),
        "one restore refused, counted once"
    );
}

#[tokio::test]
async fn gpu_model_mismatch_on_a_workspace_cold_starts_its_resume() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    cold_resume(&sim, &a, "gmm", "gpu-model-mismatch").await;
    assert_eq!(
        sim.faults_injected(),
        [("gpu-model-mismatch".to_string(), 1)].into()
    );
}

#[tokio::test]
async fn slow_restore_takes_ten_times_the_restore_time() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    let (_, snap) = run_and_pause(&a, &sim, "slow", "slow-restore").await;
    set_paused(&a, "slow", false).await;
    wait_for(&a.ws, "slow", "Running", in_state(WorkspaceState::Running)).await;
    let pod = workspace_pod(&a, "slow").await;
    let pod = wait_restored(&a, &pod.name_any()).await;
    assert!(restored_message(&pod).unwrap().contains(&snap));
    let restored = sim
        .truth()
        .events()
        .into_iter()
        .find(|e| e.transition == Transition::Restored)
        .expect("a restore");
    assert_eq!(restored.detail.as_deref(), Some(snap.as_str()));
    let restore_ms = sim
        .platform()
        .unwrap()
        .profile
        .timing
        .restore_ms
        .median()
        .as_secs_f64()
        * 1000.0;
    assert_eq!(restored.imposed_delay_ms, Some(10.0 * restore_ms));
    assert_eq!(
        sim.faults_injected(),
        [("slow-restore".to_string(), 1)].into()
    );
}

#[tokio::test]
async fn pod_restored_comes_the_profile_lag_after_the_pod_is_ready() {
    let sim = crate::common::start_platform(|p| {
        p.timing.pod_restored_after_ready_ms = wsgate::sim::delay::Delay::Fixed(2000)
    })
    .await;
    let a = apis(&sim).await;
    let (_, snap) = run_and_pause(&a, &sim, "lag", "").await;
    set_paused(&a, "lag", false).await;
    wait_for(&a.ws, "lag", "Running", in_state(WorkspaceState::Running)).await;
    let pod = workspace_pod(&a, "lag").await;
    let pod = wait_restored(&a, &pod.name_any()).await;
    assert!(restored_message(&pod).unwrap().contains(&snap));
    let at = |type_: &str| {
        let c = cond(&pod, type_).unwrap_or_else(|| panic!("{type_} condition"));
        chrono::DateTime::parse_from_rfc3339(c["lastTransitionTime"].as_str().unwrap()).unwrap()
    };
    // Timestamps are whole seconds: a lag of 2 s is at least 2 s between them.
    assert!(
        at("PodRestored") >= at("Ready") + chrono::Duration::seconds(2),
        "Ready {} PodRestored {}",
        at("Ready"),
        at("PodRestored")
    );
    let imposed = sim.truth().imposed();
    let lag = imposed
        .iter()
        .find(|i| i.delay == Imposed::PodRestoredLag)
        .unwrap_or_else(|| panic!("PodRestoredLag imposed: {imposed:?}"));
    assert_eq!((lag.count, lag.total_ms), (1, 2000.0));
    // The ground truth records the write itself, at least the lag after the pod was Ready.
    let events = sim.truth().events();
    let when = |t: Transition| {
        events
            .iter()
            .rfind(|e| e.transition == t && e.name == pod.name_any())
            .map(|e| e.at)
            .unwrap_or_else(|| panic!("{t:?} of the pod: {events:?}"))
    };
    let written = events
        .iter()
        .find(|e| e.transition == Transition::PodRestoredWritten)
        .expect("PodRestoredWritten recorded");
    assert_eq!(written.detail.as_deref(), Some(snap.as_str()));
    assert!(
        when(Transition::PodRestoredWritten) - when(Transition::PodReady)
            >= chrono::Duration::milliseconds(2000)
    );
}

/// Every value of every `ResourceList` under `v` (any `limits`, `requests`, `hard`, `used`,
/// `capacity` or `allocatable` map), with its path.
fn quantities(v: &Value, path: &str, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{path}/{k}");
                let list = [
                    "limits",
                    "requests",
                    "hard",
                    "used",
                    "capacity",
                    "allocatable",
                ];
                if list.contains(&k.as_str())
                    && let Some(q) = x.as_object()
                {
                    out.extend(q.iter().map(|(n, q)| (format!("{p}/{n}"), q.clone())));
                } else {
                    quantities(x, &p, out);
                }
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                quantities(x, &format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn a_gpu_workspace_pod_and_the_nodes_serve_quantities_as_strings() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    create_workspace(&a, &sim, "qty", "").await;
    wait_for(&a.ws, "qty", "Running", in_state(WorkspaceState::Running)).await;
    // The WorkspaceKind's pod config says `nvidia.com/gpu: 1` as a number; a real API
    // server stores and serves every quantity as a string (Python's client insists).
    let mut found = Vec::new();
    for path in [
        format!("/api/v1/namespaces/{NS}/pods"),
        "/api/v1/nodes".to_string(),
        format!("/api/v1/namespaces/{NS}/persistentvolumeclaims"),
    ] {
        let r = raw_client(&sim)
            .get(format!("{}{path}", sim.url()))
            .bearer_auth(sim.token())
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        quantities(&r.json::<Value>().await.unwrap(), &path, &mut found);
    }
    assert!(
        found
            .iter()
            .any(|(p, q)| p.ends_with("limits/nvidia.com/gpu") && q == "1"),
        "{found:?}"
    );
    let numbers: Vec<_> = found.iter().filter(|(_, q)| !q.is_string()).collect();
    assert!(
        numbers.is_empty(),
        "quantities that are not strings: {numbers:?}"
    );
}

#[tokio::test]
async fn duplicate_restore_attempts_restore_one_snapshot_twice() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    let (_, snap) = run_and_pause(&a, &sim, "dup", "duplicate-restore-attempts").await;
    set_paused(&a, "dup", false).await;
    let restores = wait_list(&a.events, "", "two GKEPodSnapshotting events", |l| {
        l.iter()
            .filter(|e| e.reason.as_deref() == Some("GKEPodSnapshotting"))
            .count()
            >= 2
    })
    .await;
    let mut pods: Vec<_> = restores
        .iter()
        .filter(|e| e.reason.as_deref() == Some("GKEPodSnapshotting"))
        .map(|e| {
            assert!(e.message.as_deref().unwrap_or("").contains(&snap));
            e.involved_object.name.clone().unwrap_or_default()
        })
        .collect();
    pods.sort();
    assert_eq!(pods.len(), 2);
    assert_eq!(pods[1], format!("{}-duplicate", pods[0]));
    assert_eq!(truth_count(&sim.truth().events(), Transition::Restored), 2);
    // The add-on cleans up after the first restore: the duplicate goes with the snapshots.
    wait_gone(&a.pods, &pods[1], "duplicate pod deleted").await;
    wait_gone(&a.snaps, &snap, "snapshot deleted").await;
}

#[tokio::test]
async fn lose_home_files_empties_the_home_volume_during_the_pause() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    create_workspace(&a, &sim, "lhf", "lose-home-files").await;
    wait_for(&a.ws, "lhf", "Running", in_state(WorkspaceState::Running)).await;
    let home = sim
        .platform()
        .unwrap()
        .pods
        .volumes_root
        .join(NS)
        .join("lhf-home");
    std::fs::create_dir_all(home.join("data")).unwrap();
    std::fs::write(home.join("notes.txt"), "on disk").unwrap();
    set_paused(&a, "lhf", true).await;
    wait_for(&a.ws, "lhf", "Paused", in_state(WorkspaceState::Paused)).await;
    assert!(home.is_dir(), "the volume stays");
    assert_eq!(std::fs::read_dir(&home).unwrap().count(), 0, "its files go");
    set_paused(&a, "lhf", false).await;
    wait_for(&a.ws, "lhf", "Running", in_state(WorkspaceState::Running)).await;
    assert!(!home.join("notes.txt").exists());
}

// --- The agent on hand-made objects -------------------------------------------------------

fn cpu_pod(name: &str, app: &str, image: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"runtimeClassName": "gvisor",
                 "containers": [{"name": "main", "image": image}]}
    }))
    .unwrap()
}

fn policy(name: &str, app: &str, post: &str, extra: Value) -> PodSnapshotPolicy {
    let mut spec = json!({
        "selector": {"matchLabels": {"app": app}},
        "storageConfigName": "kubeflow-pod-snapshot-storage-config",
        "triggerConfig": {"type": "manual", "postCheckpoint": post},
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn trigger(name: &str, pod: &str) -> PodSnapshotManualTrigger {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"targetPod": pod}})).unwrap()
}

/// Triggers a checkpoint of `pod` and waits for its PodSnapshot to be Ready.
async fn snapshot_of(a: &Apis, trigger_name: &str, pod: &str) -> PodSnapshot {
    a.triggers
        .create(&PostParams::default(), &trigger(trigger_name, pod))
        .await
        .unwrap();
    let t = wait_for(
        &a.triggers,
        trigger_name,
        "Triggered=True",
        has_cond("Triggered", "True"),
    )
    .await;
    let name = status(&t)["snapshotCreated"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    wait_for(&a.snaps, &name, "Ready", has_cond("Ready", "True")).await
}

#[tokio::test]
async fn triggers_fail_with_the_reason() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    let mut plain = cpu_pod("plain", "x", "busybox");
    plain.spec.as_mut().unwrap().runtime_class_name = None;
    for p in [plain, cpu_pod("orphan", "nobody", "busybox")] {
        a.pods.create(&PostParams::default(), &p).await.unwrap();
        wait_for(
            &a.pods,
            &p.name_any(),
            "running",
            conditions::is_pod_running(),
        )
        .await;
    }
    a.policies
        .create(
            &PostParams::default(),
            &policy("px", "x", "stop", json!({})),
        )
        .await
        .unwrap();
    for (t, pod, why) in [
        ("t-missing", "nope", "not found"),
        ("t-plain", "plain", "runtimeClassName must be gvisor"),
        ("t-orphan", "orphan", "no PodSnapshotPolicy"),
    ] {
        a.triggers
            .create(&PostParams::default(), &trigger(t, pod))
            .await
            .unwrap();
        let got = wait_for(
            &a.triggers,
            t,
            "Triggered=False",
            has_cond("Triggered", "False"),
        )
        .await;
        let c = cond(&got, "Triggered").unwrap();
        assert_eq!(c["reason"], "Failed");
        assert!(c["message"].as_str().unwrap().contains(why), "{c}");
    }
    let px = wait_for(&a.policies, "px", "policy Ready", has_cond("Ready", "True")).await;
    assert_eq!(cond(&px, "Ready").unwrap()["reason"], "Ready");
    let mut bad = policy("py", "y", "stop", json!({}));
    bad.spec.storage_config_name = "missing".into();
    a.policies
        .create(&PostParams::default(), &bad)
        .await
        .unwrap();
    let py = wait_for(
        &a.policies,
        "py",
        "policy not Ready",
        has_cond("Ready", "False"),
    )
    .await;
    assert_eq!(cond(&py, "Ready").unwrap()["reason"], "TriggerFailed");
}

#[tokio::test]
async fn a_restore_needs_the_same_distilled_spec_and_stop_completes_the_source_pod() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    a.policies
        .create(
            &PostParams::default(),
            &policy("pr", "r", "stop", json!({})),
        )
        .await
        .unwrap();
    a.pods
        .create(&PostParams::default(), &cpu_pod("src", "r", "img:1"))
        .await
        .unwrap();
    wait_for(&a.pods, "src", "running", conditions::is_pod_running()).await;
    let snap = snapshot_of(&a, "tr", "src").await;
    assert_eq!(
        ann(&snap, "sim.wsgate.dev/machine-series").as_deref(),
        Some("e2")
    );
    let src = wait_for(&a.pods, "src", "Completed", |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Succeeded")
    })
    .await;
    let terminated = src.status.unwrap().container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(terminated.reason.as_deref(), Some("Completed"));
    // Another image: a different distilled spec, so a silent cold start.
    a.pods
        .create(&PostParams::default(), &cpu_pod("other", "r", "img:2"))
        .await
        .unwrap();
    wait_for(&a.pods, "other", "running", conditions::is_pod_running()).await;
    past_the_restored_lag(&sim).await;
    let other = a.pods.get("other").await.unwrap();
    assert!(restored_message(&other).is_none());
    // The same spec with other env and resources: restored.
    let mut same = cpu_pod("same", "r", "img:1");
    let c = &mut same.spec.as_mut().unwrap().containers[0];
    c.env = Some(vec![
        serde_json::from_value(json!({"name": "X", "value": "1"})).unwrap(),
    ]);
    c.resources = Some(serde_json::from_value(json!({"requests": {"cpu": "1"}})).unwrap());
    a.pods.create(&PostParams::default(), &same).await.unwrap();
    let same = wait_restored(&a, "same").await;
    let message = restored_message(&same).expect("restored");
    assert!(message.contains(&snap.name_any()), "{message}");
    assert!(!message.contains(&snap.uid().unwrap()), "{message}");
}

#[tokio::test]
async fn retention_deletes_snapshots_after_their_last_access_timeout() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    a.policies
        .create(
            &PostParams::default(),
            &policy(
                "pt",
                "t",
                "resume",
                json!({"retentionConfig": {"lastAccessTimeout": "2s"}}),
            ),
        )
        .await
        .unwrap();
    a.pods
        .create(&PostParams::default(), &cpu_pod("keep", "t", "img"))
        .await
        .unwrap();
    wait_for(&a.pods, "keep", "running", conditions::is_pod_running()).await;
    let snap = snapshot_of(&a, "tt", "keep").await;
    let uid = snap.uid().unwrap();
    let prefix = format!("kubeflow-notebooks/{uid}/");
    assert_eq!(listed(&bucket_listing(&sim, &prefix).await).len(), 3);
    wait_gone(&a.snaps, &snap.name_any(), "expired snapshot deleted").await;
    assert!(listed(&bucket_listing(&sim, &prefix).await).is_empty());
    // postCheckpoint: resume leaves the pod running.
    let keep = a.pods.get("keep").await.unwrap();
    assert_eq!(keep.status.unwrap().phase.as_deref(), Some("Running"));
}

#[tokio::test]
async fn group_retention_keeps_the_newest_snapshots() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    let rules = json!({"snapshotGroupingRules": {"groupByLabelValue": {
        "labels": ["app"], "groupRetentionPolicy": {"maxSnapshotCountPerGroup": 1}}}});
    a.policies
        .create(&PostParams::default(), &policy("pg", "g", "resume", rules))
        .await
        .unwrap();
    a.pods
        .create(&PostParams::default(), &cpu_pod("grp", "g", "img"))
        .await
        .unwrap();
    wait_for(&a.pods, "grp", "running", conditions::is_pod_running()).await;
    let first = snapshot_of(&a, "g1", "grp").await;
    assert_eq!(first.labels().get("app").map(String::as_str), Some("g"));
    let second = snapshot_of(&a, "g2", "grp").await;
    wait_gone(&a.snaps, &first.name_any(), "the older snapshot pruned").await;
    assert!(a.snaps.get_opt(&second.name_any()).await.unwrap().is_some());
}

#[tokio::test]
async fn the_bucket_listing_needs_a_platform() {
    let sim = crate::common::start_sim().await;
    let r = raw_client(&sim)
        .get(format!("{}/storage/v1/b/{BUCKET}/o", sim.url()))
        .bearer_auth(sim.token())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], 404);
}

/// The pod's condition `type_` as (status, reason, message).
fn cond_of(pod: &Pod, type_: &str) -> Option<(String, String, String)> {
    let c = cond(pod, type_)?;
    let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
    Some((s("status"), s("reason"), s("message")))
}

fn checkpointing_pod(p: Option<&Pod>) -> bool {
    p.is_some_and(|p| {
        let want = |status: &str| {
            Some((
                status.to_string(),
                "CheckpointingInProgress".to_string(),
                "Pausing: taking GKE PodSnapshot".to_string(),
            ))
        };
        cond_of(p, GATE) == want("False") && cond_of(p, "Ready") == want("False")
    })
}

fn stamped(stamp: String) -> impl Fn(Option<&PodSnapshotManualTrigger>) -> bool {
    move |t| t.is_some_and(|t| ann(t, STARTED_AT).as_deref() == Some(stamp.as_str()))
}

#[tokio::test]
async fn a_repeated_pause_restamps_and_replaces_the_trigger_and_the_gate_says_why() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    create_workspace(&a, &sim, "again", "checkpoint-hangs").await;
    wait_for(&a.ws, "again", "Running", in_state(WorkspaceState::Running)).await;
    let pod = workspace_pod(&a, "again").await;
    assert_eq!(
        cond_of(&pod, GATE),
        Some((
            "True".into(),
            "WorkspaceActive".into(),
            "Workspace pod is active".into()
        ))
    );
    assert_eq!(
        cond_of(&pod, "Ready").map(|c| (c.0, c.1)),
        Some(("True".into(), "ContainersReady".into()))
    );
    set_paused(&a, "again", true).await;
    let held = a.ws.get("again").await.unwrap();
    assert!(!held.spec.paused);
    let first = ann(&held, STARTED_AT).expect("stamped");
    assert!(first.ends_with('Z') && !first.contains('.'), "{first}");
    wait_for(
        &a.pods,
        &pod.name_any(),
        "gate and Ready False",
        checkpointing_pod,
    )
    .await;
    let old = wait_for(
        &a.triggers,
        "ws-again-trigger",
        "trigger",
        stamped(first.clone()),
    )
    .await;
    assert_eq!(old.spec.target_pod, pod.name_any());
    let owner = &old.owner_references()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("Workspace", Some(false), Some(true))
    );
    // The stamp has whole seconds: the second pause must come in another second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    set_paused(&a, "again", true).await;
    let again = a.ws.get("again").await.unwrap();
    assert!(!again.spec.paused, "held again");
    assert_eq!(ann(&again, STATE).as_deref(), Some("Checkpointing"));
    let second = ann(&again, STARTED_AT).expect("stamped");
    assert_ne!(second, first, "a new stamp");
    let new = wait_for(
        &a.triggers,
        "ws-again-trigger",
        "a new trigger",
        stamped(second),
    )
    .await;
    assert_ne!(new.uid(), old.uid(), "the old trigger was deleted");
}

#[tokio::test]
async fn a_trigger_left_from_an_earlier_pause_is_deleted_and_replaced() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    create_workspace(&a, &sim, "lo", "").await;
    wait_for(&a.ws, "lo", "Running", in_state(WorkspaceState::Running)).await;
    let pod = workspace_pod(&a, "lo").await;
    let mut left = trigger("ws-lo-trigger", "an-earlier-pod");
    left.metadata.annotations =
        Some([(STARTED_AT.to_string(), "2000-01-01T00:00:00Z".to_string())].into());
    let left = a
        .triggers
        .create(&PostParams::default(), &left)
        .await
        .unwrap();
    let (_, snap) = {
        set_paused(&a, "lo", true).await;
        let w = wait_for(&a.ws, "lo", "Paused", in_state(WorkspaceState::Paused)).await;
        ((), ann(&w, LAST).unwrap_or_default())
    };
    assert!(!snap.is_empty(), "paused through a snapshot");
    let used = a.triggers.get("ws-lo-trigger").await.unwrap();
    assert_ne!(used.uid(), left.uid());
    assert_eq!(used.spec.target_pod, pod.name_any());
    let stamp = ann(&used, STARTED_AT).expect("stamped");
    assert_ne!(stamp, "2000-01-01T00:00:00Z");
    assert_eq!(
        status(&used)["snapshotCreated"]["name"].as_str(),
        Some(snap.as_str())
    );
}

#[tokio::test]
async fn a_pause_whose_pod_is_gone_completes_without_a_snapshot_and_the_resume_cold_starts() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    create_workspace(&a, &sim, "gone", "checkpoint-hangs").await;
    wait_for(&a.ws, "gone", "Running", in_state(WorkspaceState::Running)).await;
    let pod = workspace_pod(&a, "gone").await;
    set_paused(&a, "gone", true).await;
    wait_for(
        &a.triggers,
        "ws-gone-trigger",
        "trigger",
        |t: Option<&_>| t.is_some(),
    )
    .await;
    a.pods
        .delete(&pod.name_any(), &Default::default())
        .await
        .unwrap();
    let paused = wait_for(&a.ws, "gone", "paused", |w: Option<&Workspace>| {
        w.is_some_and(|w| w.spec.paused)
    })
    .await;
    assert_eq!(ann(&paused, STATE).as_deref(), Some("Ready"));
    assert_eq!(ann(&paused, LAST), None, "no snapshot to restore");
    assert_eq!(ann(&paused, STARTED_AT), None);
    wait_for(&a.ws, "gone", "Paused", in_state(WorkspaceState::Paused)).await;

    set_paused(&a, "gone", false).await;
    let resumed = a.ws.get("gone").await.unwrap();
    assert_eq!(ann(&resumed, STATE).as_deref(), Some("Restoring"));
    wait_for(&a.ws, "gone", "Running", in_state(WorkspaceState::Running)).await;
    let new_pod = workspace_pod(&a, "gone").await;
    assert_ne!(new_pod.uid(), pod.uid());
    assert_eq!(ann(&new_pod, PS_NAME), None, "no pin");
    wait_state_cleared(&a, "gone").await;
    wait_gone(&a.triggers, "ws-gone-trigger", "trigger deleted").await;
    assert_eq!(
        truth_count(&sim.truth().events(), Transition::ColdStarted),
        2,
        "the first start and the resume"
    );
}

/// Pauses a Workspace whose snapshot's deletion is stuck, deletes the Workspace and waits
/// for the snapshot to be terminating; returns it.
async fn delete_with_a_stuck_snapshot(a: &Apis, sim: &SimHandle, name: &str) -> PodSnapshot {
    let (_, snap) = run_and_pause(a, sim, name, "snapshot-stuck-deleting").await;
    assert!(!snap.is_empty());
    a.ws.delete(name, &Default::default()).await.unwrap();
    wait_gone(&a.ws, name, "Workspace deleted").await;
    wait_for(
        &a.snaps,
        &snap,
        "snapshot terminating",
        |s: Option<&PodSnapshot>| s.is_some_and(|s| s.metadata.deletion_timestamp.is_some()),
    )
    .await
}

#[tokio::test]
async fn a_deleted_workspaces_policy_stays_until_its_snapshots_are_gone() {
    let sim = crate::common::start_platform(|p| p.timing.addon_drain_interval_ms = 100).await;
    let a = apis(&sim).await;
    let snap = delete_with_a_stuck_snapshot(&a, &sim, "drain").await;
    // Many drain intervals, far from the 5 min timeout: the finalizer still needs it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        a.policies
            .get_opt("ws-drain-policy")
            .await
            .unwrap()
            .is_some()
    );
    // The finalizer lets go: the snapshot goes, then the policy and the trigger.
    a.snaps
        .patch(
            &snap.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    wait_gone(&a.snaps, &snap.name_any(), "snapshot gone").await;
    wait_gone(&a.policies, "ws-drain-policy", "policy retired").await;
    wait_gone(&a.triggers, "ws-drain-trigger", "trigger retired").await;
}

#[tokio::test]
async fn a_policy_pinned_by_a_wedged_snapshot_is_retired_after_the_drain_timeout() {
    let sim = crate::common::start_platform(|p| {
        p.timing.addon_drain_interval_ms = 100;
        p.timing.addon_drain_timeout_ms = 1000;
    })
    .await;
    let a = apis(&sim).await;
    let snap = delete_with_a_stuck_snapshot(&a, &sim, "wedged").await;
    wait_gone(&a.policies, "ws-wedged-policy", "policy retired anyway").await;
    let still = a.snaps.get(&snap.name_any()).await.unwrap();
    assert!(
        still.metadata.deletion_timestamp.is_some(),
        "still terminating"
    );
}

#[tokio::test]
async fn outside_the_tenant_namespaces_a_pause_is_held_forever_and_pods_never_turn_ready() {
    let sim = crate::common::start_platform(|p| {
        p.addon.tenant_namespaces = vec!["team-a".into(), "team-b".into()];
        p.timing.addon_settle_ms = 0;
    })
    .await;
    let a = apis(&sim).await;
    let c = sim.client().await.unwrap();
    let addon: Api<Deployment> = Api::namespaced(c.clone(), "kubeflow-workspaces");
    let d = addon.get("gke-workspace-snapshot-addon").await.unwrap();
    let env = d.spec.unwrap().template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap_or_default();
    assert!(
        env.iter()
            .any(|e| e.name == "TENANT_NAMESPACES" && e.value.as_deref() == Some("team-a,team-b")),
        "{env:?}"
    );
    create_workspace(&a, &sim, "outside", "").await;
    let running = wait_list(&a.pods, &format!("{LABEL}=outside"), "pod Running", |l| {
        l.iter()
            .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
    })
    .await;
    let pod_name = running[0].name_any();
    // The webhook gated it; nothing publishes the gate's condition.
    let pod = a.pods.get(&pod_name).await.unwrap();
    assert!(
        pod.spec
            .unwrap()
            .readiness_gates
            .unwrap_or_default()
            .iter()
            .any(|g| g.condition_type == GATE)
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let pod = a.pods.get(&pod_name).await.unwrap();
    assert_eq!(cond_of(&pod, GATE), None);
    assert_eq!(
        cond_of(&pod, "Ready").map(|c| c.0).as_deref(),
        Some("False")
    );
    // The pause webhook still holds the pause; nothing takes the snapshot.
    set_paused(&a, "outside", true).await;
    // The gate turns False; Ready was False already and keeps its reason.
    let gated = wait_for(&a.pods, &pod_name, "gate False", |p: Option<&Pod>| {
        p.is_some_and(|p| cond_of(p, GATE).is_some())
    })
    .await;
    assert_eq!(
        cond_of(&gated, GATE),
        Some((
            "False".into(),
            "CheckpointingInProgress".into(),
            "Pausing: taking GKE PodSnapshot".into()
        ))
    );
    assert_eq!(
        cond_of(&gated, "Ready").map(|c| c.0).as_deref(),
        Some("False")
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let w = a.ws.get("outside").await.unwrap();
    assert!(!w.spec.paused);
    assert_eq!(ann(&w, STATE).as_deref(), Some("Checkpointing"));
    assert!(
        a.triggers
            .get_opt("ws-outside-trigger")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        a.policies
            .get_opt("ws-outside-policy")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn the_ipc_config_map_is_kept_and_mounted_into_workspace_pods() {
    let sim = crate::common::start_platform(|_| {}).await;
    let a = apis(&sim).await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client().await.unwrap(), NS);
    create_workspace(&a, &sim, "ipc", "").await;
    wait_for(&a.ws, "ipc", "Running", in_state(WorkspaceState::Running)).await;
    let want = [(
        "jupyter_server_config.py".to_string(),
        "import asyncio\nimport selectors\nclass PollEventLoopPolicy(asyncio.DefaultEventLoopPolicy):\n    def _loop_factory(self):\n        return asyncio.SelectorEventLoop(selectors.PollSelector())\nasyncio.set_event_loop_policy(PollEventLoopPolicy())\n\nc.KernelManager.transport = 'ipc'\n".to_string(),
    )]
    .into();
    let cm = cms.get("jupyter-ipc-config").await.unwrap();
    assert_eq!(cm.data.as_ref(), Some(&want));
    let spec = workspace_pod(&a, "ipc").await.spec.unwrap();
    let volume = spec
        .volumes
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.name == "jupyter-ipc-config")
        .expect("the IPC config volume");
    assert_eq!(volume.config_map.unwrap().name, "jupyter-ipc-config");
    let mount = spec.containers[0]
        .volume_mounts
        .clone()
        .unwrap_or_default()
        .into_iter()
        .find(|m| m.name == "jupyter-ipc-config")
        .expect("the IPC config mount");
    assert_eq!(
        (mount.mount_path.as_str(), mount.sub_path.as_deref()),
        (
            "/etc/jupyter/jupyter_server_config.py",
            Some("jupyter_server_config.py")
        )
    );
    // Changed or deleted, it is put back on the add-on's next pass over a Workspace there.
    let ws_api = &a.ws;
    let touch = |n: u32| async move {
        ws_api
            .patch(
                "ipc",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"touched": n.to_string()}}})),
            )
            .await
            .unwrap();
    };
    cms.patch(
        "jupyter-ipc-config",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"jupyter_server_config.py": "# edited"}})),
    )
    .await
    .unwrap();
    touch(1).await;
    let same = |want: &std::collections::BTreeMap<String, String>| {
        let want = want.clone();
        move |c: Option<&ConfigMap>| c.is_some_and(|c| c.data.as_ref() == Some(&want))
    };
    wait_for(&cms, "jupyter-ipc-config", "data put back", same(&want)).await;
    cms.delete("jupyter-ipc-config", &Default::default())
        .await
        .unwrap();
    touch(2).await;
    wait_for(&cms, "jupyter-ipc-config", "recreated", same(&want)).await;
}

/// The add-on's socket-settle grace (upstream's `-settle-grace-period`, 3 s): the trigger is
/// created no sooner than that after the pause's `checkpoint-started-at`, and carries the
/// stamp. Both times are whole seconds, so 3 s of grace is at least 3 s between them.
#[tokio::test]
async fn the_trigger_waits_out_the_settle_grace_after_the_pause_stamp() {
    let sim = crate::common::start_platform(|p| p.timing.addon_settle_ms = 3000).await;
    let a = apis(&sim).await;
    create_workspace(&a, &sim, "settle", "").await;
    wait_for(
        &a.ws,
        "settle",
        "Running",
        in_state(WorkspaceState::Running),
    )
    .await;
    set_paused(&a, "settle", true).await;
    let held = a.ws.get("settle").await.unwrap();
    let stamp = ann(&held, STARTED_AT).expect("the pause is held and stamped");
    assert_eq!(ann(&held, STATE).as_deref(), Some("Checkpointing"));
    let trigger = wait_for(
        &a.triggers,
        "ws-settle-trigger",
        "trigger created",
        |t: Option<&PodSnapshotManualTrigger>| t.is_some(),
    )
    .await;
    assert_eq!(ann(&trigger, STARTED_AT).as_deref(), Some(stamp.as_str()));
    let parse = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap();
    let created = trigger.metadata.creation_timestamp.as_ref().unwrap().0;
    let gap = parse(&created.to_string()).signed_duration_since(parse(&stamp));
    assert!(
        gap >= chrono::Duration::seconds(3) && gap < chrono::Duration::seconds(10),
        "stamp {stamp}, trigger created {created}: {gap}"
    );
    let imposed = sim.truth().imposed();
    let settle = imposed
        .iter()
        .find(|i| i.delay == Imposed::AddonSettle)
        .unwrap_or_else(|| panic!("AddonSettle imposed: {imposed:?}"));
    assert_eq!((settle.count, settle.total_ms), (1, 3000.0));
    wait_for(&a.ws, "settle", "Paused", in_state(WorkspaceState::Paused)).await;
}

/// A node pool of one GKE compute class (`cloud.google.com/compute-class`), as GKE labels
/// the nodes it creates for the class.
fn class_pool(name: &str, class: &str, gpus: u32) -> wsgate::sim::profile::NodePool {
    let mut labels = std::collections::BTreeMap::new();
    labels.insert(
        "cloud.google.com/compute-class".to_string(),
        class.to_string(),
    );
    wsgate::sim::profile::NodePool {
        name: name.to_string(),
        count: 1,
        machine_type: "g2-standard-16".to_string(),
        machine_series: "g2".to_string(),
        cpu: "16".to_string(),
        memory: "64Gi".to_string(),
        accelerator: (gpus > 0).then(|| "nvidia-l4".to_string()),
        gpus_per_node: gpus,
        driver_version: (gpus > 0).then(|| "570.172.08".to_string()),
        gvisor: true,
        taints: if gpus > 0 {
            vec![wsgate::sim::profile::Taint {
                key: "nvidia.com/gpu".to_string(),
                value: "present".to_string(),
                effect: "NoSchedule".to_string(),
            }]
        } else {
            Vec::new()
        },
        labels,
    }
}

/// gVisor cannot host TPU devices (upstream webhook.go, `mutatePod`): a Workspace of a
/// snapshot-enabled kind whose pod option asks for `google.com/tpu` runs without the
/// sandbox, the readiness gate, the IPC config or a pin, and its pause goes through at
/// once: no hold, no `checkpoint-state`, no trigger and no PodSnapshot.
#[tokio::test]
async fn a_tpu_workspace_of_an_enabled_kind_is_never_snapshotted() {
    let sim = crate::common::start_platform(|p| {
        p.node_pools
            .push(class_pool("tpu", "tpu-v5-1-single-host", 0));
    })
    .await;
    let a = apis(&sim).await;
    let client = sim.client().await.unwrap();
    // The resumable kind with the plain kind's tpu_1 option added (upstream's resumable kind
    // has none; a platform team may add one).
    let kinds: Api<WorkspaceKind> = Api::all(client.clone());
    let mut kind = serde_json::to_value(kinds.get("jupyterlab-resumable").await.unwrap()).unwrap();
    kind["metadata"] = json!({"name": "jupyterlab-resumable-tpu",
        "annotations": kind["metadata"]["annotations"].clone()});
    kind.as_object_mut().unwrap().remove("status");
    kind["spec"]["podTemplate"]["options"]["podConfig"]["values"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "tpu_1",
            "spawner": {"displayName": "TPU v5 1x1", "description": "Pod with 1 TPU v5 lite chip"},
            "spec": {"nodeSelector": {"cloud.google.com/compute-class": "tpu-v5-1-single-host"},
                "resources": {"requests": {"cpu": "2", "memory": "4Gi"},
                              "limits": {"cpu": "2", "memory": "4Gi", "google.com/tpu": "1"}}}}));
    assert_eq!(
        kind["metadata"]["annotations"]["podsnapshot.gke.kubeflow.org/enabled"], "true",
        "a snapshot-enabled kind: {kind}"
    );
    let kind: WorkspaceKind = serde_json::from_value(kind).unwrap();
    kinds.create(&PostParams::default(), &kind).await.unwrap();
    let options = ("jupyterlab-resumable-tpu", "jupyterlab-cpu", "tpu_1");
    create_workspace_of(&a, &sim, "tpu", "", options).await;
    wait_for(&a.ws, "tpu", "Running", in_state(WorkspaceState::Running)).await;
    let pod = workspace_pod(&a, "tpu").await;
    let spec = serde_json::to_value(pod.spec.as_ref().unwrap()).unwrap();
    assert_eq!(
        spec["containers"][0]["resources"]["limits"]["google.com/tpu"],
        "1"
    );
    assert_eq!(spec.get("runtimeClassName"), None, "no gVisor: {spec}");
    assert_eq!(spec.get("readinessGates"), None, "no gate: {spec}");
    let volumes = spec["volumes"].to_string();
    assert!(!volumes.contains("jupyter-ipc-config"), "{volumes}");
    assert_eq!(ann(&pod, PS_NAME), None, "no pin");
    assert_eq!(cond_of(&pod, GATE), None, "no active condition");

    set_paused(&a, "tpu", true).await;
    let held = a.ws.get("tpu").await.unwrap();
    assert!(held.spec.paused, "the pause is not held");
    assert_eq!(ann(&held, STATE), None);
    assert_eq!(ann(&held, STARTED_AT), None);
    wait_for(&a.ws, "tpu", "Paused", in_state(WorkspaceState::Paused)).await;
    assert!(
        a.triggers
            .get_opt("ws-tpu-trigger")
            .await
            .unwrap()
            .is_none(),
        "no trigger"
    );
    assert!(
        a.snaps
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "no PodSnapshot"
    );
    assert_eq!(
        truth_count(&sim.truth().events(), Transition::CheckpointFinished),
        0
    );
}

/// The VS Code kind's `gpu_best_available` option selects the compute class
/// `gpu-best-available`: on a cluster with that class its pod runs on a node of the class,
/// with the GPU it asks for (the default profile has no such nodes, so there it is Pending).
#[tokio::test]
async fn a_gpu_best_available_workspace_runs_on_a_node_of_that_class() {
    let sim = crate::common::start_platform(|p| {
        p.node_pools
            .push(class_pool("best", "gpu-best-available", 1));
    })
    .await;
    let a = apis(&sim).await;
    let client = sim.client().await.unwrap();
    let options = ("codeserver", "codeserver-python-gpu", "gpu_best_available");
    create_workspace_of(&a, &sim, "vs", "", options).await;
    wait_for(&a.ws, "vs", "Running", in_state(WorkspaceState::Running)).await;
    let pod = workspace_pod(&a, "vs").await;
    let node_name = pod.spec.as_ref().unwrap().node_name.clone().unwrap();
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client);
    let node = nodes.get(&node_name).await.unwrap();
    assert_eq!(
        node.labels()
            .get("cloud.google.com/compute-class")
            .map(String::as_str),
        Some("gpu-best-available"),
        "{node_name}"
    );
    let limits = serde_json::to_value(&pod.spec.as_ref().unwrap().containers[0].resources).unwrap();
    assert_eq!(limits["limits"]["nvidia.com/gpu"], "1", "{limits}");
}

/// The other side of the tenant list: a namespace on it is reconciled as if the list were
/// empty (the pod turns Ready, a pause checkpoints into a PodSnapshot).
#[tokio::test]
async fn inside_the_tenant_namespaces_a_pause_checkpoints() {
    let sim = crate::common::start_platform(|p| {
        p.addon.tenant_namespaces = vec!["team-a".into(), NS.into()];
        p.timing.addon_settle_ms = 0;
    })
    .await;
    let a = apis(&sim).await;
    let (pod, snap) = run_and_pause(&a, &sim, "inside", "").await;
    assert_eq!(
        cond_of(&pod, GATE).map(|c| c.0).as_deref(),
        Some("True"),
        "the add-on published its gate"
    );
    assert!(!snap.is_empty(), "the pause produced a snapshot");
    assert!(a.snaps.get_opt(&snap).await.unwrap().is_some());
}

/// A Workspace deleted without ever pausing has no snapshots: its policy is retired at the
/// first look, with no drain to wait for.
#[tokio::test]
async fn a_deleted_workspace_without_snapshots_retires_its_policy_at_once() {
    // A drain interval longer than the wait below: a policy that went through the drain
    // (a second look) would still be there when the wait runs out.
    let sim = crate::common::start_platform(|p| p.timing.addon_drain_interval_ms = 60_000).await;
    let a = apis(&sim).await;
    create_workspace(&a, &sim, "never", "").await;
    wait_for(&a.ws, "never", "Running", in_state(WorkspaceState::Running)).await;
    wait_for(
        &a.policies,
        "ws-never-policy",
        "the add-on's policy",
        |p: Option<&PodSnapshotPolicy>| p.is_some(),
    )
    .await;
    a.ws.delete("never", &Default::default()).await.unwrap();
    wait_gone(&a.ws, "never", "Workspace deleted").await;
    wait_gone(&a.policies, "ws-never-policy", "policy retired").await;
    assert!(
        a.snaps
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "no snapshot was ever made"
    );
}

//! The objects a simulated GKE Workspaces cluster starts with: nodes from the profile's
//! pools, the `jupyterlab-resumable` WorkspaceKind (snapshot-enabled), a plain `jupyterlab`
//! kind without snapshots, and the PodSnapshotStorageConfig. Both kinds carry the GKE kind's
//! 14400 s catch-all idle rule and, before it, a 1600 s rule for the `gpu_t4_idle` podConfig.

use serde_json::{Value, json};

use super::kinds;
use super::profile::SimProfile;
use super::store::Store;

/// The annotation that enables pause/resume through Pod Snapshots (GKE Workspaces add-on).
pub const SNAPSHOT_ENABLED: &str = "podsnapshot.gke.kubeflow.org/enabled";
/// The storage config the add-on uses by default.
pub const STORAGE_CONFIG: &str = "kubeflow-pod-snapshot-storage-config";
/// Node annotation with the NVIDIA driver version (restore compatibility).
pub const DRIVER_ANNOTATION: &str = "sim.wsgate.dev/nvidia-driver-version";

fn kind(name: &str) -> &'static kinds::KindInfo {
    kinds::KINDS
        .iter()
        .find(|k| k.kind == name)
        .expect("served kind")
}

/// The Node objects for every pool of the profile.
pub fn nodes(profile: &SimProfile) -> Vec<Value> {
    let mut out = Vec::new();
    for pool in &profile.node_pools {
        for i in 0..pool.count {
            let name = format!("gke-sim-{}-{i}", pool.name);
            let mut labels = json!({
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "cloud.google.com/gke-nodepool": pool.name,
                "cloud.google.com/machine-family": pool.machine_series,
                "node.kubernetes.io/instance-type": pool.machine_type,
            });
            if let Some(acc) = &pool.accelerator {
                labels["cloud.google.com/gke-accelerator"] = json!(acc);
            }
            if pool.gvisor {
                labels["sandbox.gke.io/runtime"] = json!("gvisor");
            }
            for (k, v) in &pool.labels {
                labels[k] = json!(v);
            }
            let mut annotations = json!({});
            if let Some(d) = &pool.driver_version {
                annotations[DRIVER_ANNOTATION] = json!(d);
            }
            let mut capacity = json!({"cpu": pool.cpu, "memory": pool.memory, "pods": "110"});
            if pool.gpus_per_node > 0 {
                capacity["nvidia.com/gpu"] = json!(pool.gpus_per_node.to_string());
            }
            out.push(json!({
                "metadata": {"name": name, "labels": labels, "annotations": annotations},
                "spec": {"taints": pool.taints, "providerID": format!("gce://wsgate-sim/us-central1-a/{name}")},
                "status": {
                    "capacity": capacity,
                    "allocatable": capacity,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
                    "nodeInfo": {"kubeletVersion": "v1.35.7-gke.1000", "containerRuntimeVersion": "containerd://2.0.4", "osImage": "Container-Optimized OS from Google", "architecture": "amd64", "operatingSystem": "linux"},
                    "addresses": [{"type": "InternalIP", "address": "10.128.0.2"}, {"type": "Hostname", "address": name}],
                },
            }));
        }
    }
    out
}

fn pod_configs() -> Value {
    json!({
        "spawner": {"default": "gpu_t4"},
        "values": [
            {"id": "tiny_cpu", "spawner": {"displayName": "Tiny CPU", "description": "100m CPU, 128Mi"},
             "spec": {"resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}},
            {"id": "gpu_t4", "spawner": {"displayName": "1x NVIDIA T4", "description": "4 CPU, 16Gi, one T4",
              "labels": [{"key": "gpu", "value": "nvidia-tesla-t4"}]},
             "spec": {
                "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "resources": {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"nvidia.com/gpu": 1}}}},
            // The same T4, under the short idle rule of `activity_rules` (idle.feature):
            // only Workspaces that choose this option can be paused for inactivity quickly.
            {"id": IDLE_POD_CONFIG, "spawner": {"displayName": "1x NVIDIA T4, short idle pause",
              "description": "4 CPU, 16Gi, one T4; paused after 1600 s without activity",
              "labels": [{"key": "gpu", "value": "nvidia-tesla-t4"}, {"key": IDLE_LABEL.0, "value": IDLE_LABEL.1}]},
             "spec": {
                "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "resources": {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"nvidia.com/gpu": 1}}}}
        ]
    })
}

/// The podConfig option whose Workspaces the short idle rule pauses.
pub const IDLE_POD_CONFIG: &str = "gpu_t4_idle";
/// The spawner label that selects it in `activityRules[].match.matchPodConfig`.
pub const IDLE_LABEL: (&str, &str) = ("idle-pause", "short");

/// First match wins (kubeflow-workspaces.md §5): the short rule for the podConfig labelled
/// [`IDLE_LABEL`] (1600 s, at least 2x the probe interval, so the webhook would not warn),
/// then the catch-all of the GKE `jupyterlab-resumable` kind (14400 s), which stays last.
///
/// The short rule has `minRunningSeconds: 600`: a Jupyter server restored from a snapshot
/// reports its pre-pause `last_activity`, so the first probe after a resume (activity was
/// reset on entering Running) finds it long idle, and without a minimum running time the
/// Workspace is paused again at once, before anyone can reconnect (idle.feature found this).
fn activity_rules() -> Value {
    json!([
        {"match": {"matchPodConfig": {"selector": {"matchLabels": {(IDLE_LABEL.0): IDLE_LABEL.1}}}},
         "config": {"secondsSinceActive": 1600, "minRunningSeconds": 600},
         "effect": {"pauseWorkspace": true}},
        {"config": {"secondsSinceActive": 14400, "minRunningSeconds": 0}, "effect": {"pauseWorkspace": true}}
    ])
}

fn workspace_kind(name: &str, snapshots: bool) -> Value {
    let mut annotations = json!({});
    if snapshots {
        annotations[SNAPSHOT_ENABLED] = json!("true");
    }
    json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "spawner": {
                "displayName": if snapshots { "JupyterLab (resumable)" } else { "JupyterLab" },
                "description": "JupyterLab with PyTorch and CUDA",
                "icon": {"url": "https://jupyter.org/assets/favicons/apple-touch-icon-152x152.png"},
                "logo": {"url": "https://jupyter.org/assets/logos/rectanglelogo-greytext-orangebody-greymoons.svg"}
            },
            "podTemplate": {
                "volumeMounts": {"home": "/home/jovyan"},
                "ports": [{"id": "jupyterlab", "protocol": "HTTP", "defaultDisplayName": "JupyterLab", "httpProxy": {"removePathPrefix": false}}],
                "extraEnv": [{"name": "NB_PREFIX", "value": "{{ httpPathPrefix \"jupyterlab\" }}"}],
                "activityProbe": {"jupyter": {"lastActivity": true, "portId": "jupyterlab"}, "minProbeIntervalSeconds": 100, "probeIntervalSeconds": 300},
                "options": {
                    "imageConfig": {
                        "spawner": {"default": "jupyter-pytorch-cuda-full:v1.10.0"},
                        "values": [{"id": "jupyter-pytorch-cuda-full:v1.10.0", "spawner": {"displayName": "PyTorch CUDA v1.10.0"},
                                    "spec": {"image": "ghcr.io/kubeflow/notebooks/jupyter-pytorch-cuda-full:v1.10.0", "ports": [{"id": "jupyterlab", "port": 8888}]}}]
                    },
                    "podConfig": pod_configs()
                }
            },
            "activityRules": activity_rules()
        }
    })
}

/// Creates the nodes, WorkspaceKinds and storage config in a fresh store.
/// Where GKE Workspaces runs its snapshot add-on.
pub const ADDON_NAMESPACE: &str = "kubeflow-workspaces";

pub fn seed(store: &Store, profile: &SimProfile) {
    let put = |k: &str, ns: Option<&str>, obj: Value| {
        let kind = kind(k);
        let status = obj.get("status").cloned();
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        store
            .create(kind, ns, obj, false)
            .expect("seeding a fresh store cannot conflict");
        if let Some(status) = status {
            store
                .modify(kind, ns, &name, true, false, |cur| {
                    let mut c = cur.clone();
                    c["status"] = status;
                    Ok(c)
                })
                .expect("seeded object exists");
        }
    };
    for n in nodes(profile) {
        put("Node", None, n);
    }
    put(
        "WorkspaceKind",
        None,
        workspace_kind("jupyterlab-resumable", true),
    );
    put("WorkspaceKind", None, workspace_kind("jupyterlab", false));
    // The GKE Workspaces snapshot add-on's Deployment (stored only: the simulator's add-on
    // controller is what acts), so `wsgate doctor` finds it where GKE puts it, with the
    // profile's tenant namespaces as its `TENANT_NAMESPACES` (gke-labs/workspaces
    // `providers/gke/cmd/snapshot-addon/main.go`).
    put(
        "Namespace",
        None,
        json!({"metadata": {"name": ADDON_NAMESPACE,
            "labels": {"kubernetes.io/metadata.name": ADDON_NAMESPACE}}}),
    );
    put(
        "Deployment",
        Some(ADDON_NAMESPACE),
        json!({
            "metadata": {"name": "gke-workspace-snapshot-addon", "labels": {"app": "gke-workspace-snapshot-addon"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "gke-workspace-snapshot-addon"}},
                "template": {"metadata": {"labels": {"app": "gke-workspace-snapshot-addon"}},
                    "spec": {"containers": [{"name": "addon", "image": "gke-workspace-snapshot-addon",
                        "env": [{"name": "TENANT_NAMESPACES", "value": profile.addon.tenant_env()}]}]}}},
            "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 1, "observedGeneration": 1},
        }),
    );
    put(
        "PodSnapshotStorageConfig",
        None,
        json!({
            "metadata": {"name": STORAGE_CONFIG},
            "spec": {"snapshotStorageConfig": {"gcs": {"bucket": profile.storage.bucket, "path": profile.storage.path}}},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "storage access validated", "lastTransitionTime": super::store::meta::now_rfc3339()}], "observedGeneration": 1},
        }),
    );
}

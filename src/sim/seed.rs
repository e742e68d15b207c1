//! The objects a simulated GKE Workspaces cluster starts with: nodes from the profile's
//! pools, gke-labs/workspaces' `jupyterlab-resumable` WorkspaceKind (snapshot-enabled by its
//! annotations) and its plain `jupyterlab` kind, with their options, filterRules and activity
//! rules as upstream defines them; the add-on's Deployment; and the PodSnapshotStorageConfig.
//! The one simulator addition is the `gpu_t4_spot_idle` option of the resumable kind and the
//! short activity rule before the kind's 14400 s catch-all, for idle.feature. The stateless
//! `codeserver` kind (VS Code) is seeded as upstream writes it, see [`codeserver_kind`].

use serde_json::{Value, json};

use super::kinds;
use super::profile::SimProfile;
use super::store::Store;
use crate::sim::json::Lookup as _;

pub use crate::platform::names::SNAPSHOT_ENABLED;
pub use crate::platform::names::STORAGE_CONFIG;
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
                labels[crate::platform::names::ACCELERATOR_LABEL] = json!(acc);
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
                    // Every field of NodeSystemInfo: none is omitempty, so a real API server
                    // always writes all ten ("" where the kubelet sets none, as v1.31+
                    // kubelets do for kubeProxyVersion), and clients' models require them.
                    "nodeInfo": {
                        "machineID": node_id(&name, "machine"),
                        "systemUUID": node_id(&name, "system"),
                        "bootID": node_id(&name, "boot"),
                        "kernelVersion": "6.6.87+",
                        "osImage": "Container-Optimized OS from Google",
                        "containerRuntimeVersion": "containerd://2.0.4",
                        "kubeletVersion": "v1.35.7-gke.1000",
                        "kubeProxyVersion": "",
                        "operatingSystem": "linux",
                        "architecture": "amd64",
                    },
                    "addresses": [{"type": "InternalIP", "address": "10.128.0.2"}, {"type": "Hostname", "address": name}],
                },
            }));
        }
    }
    out
}

/// A stable identifier for one of a node's ids, derived from its name (32 hex digits, as
/// machine ids are).
fn node_id(node: &str, which: &str) -> String {
    use sha2::Digest as _;
    hex::encode(&sha2::Sha256::digest(format!("{which}:{node}"))[..16])
}

/// A spawner label list (`[{key, value}]`) from pairs.
fn spawner_labels(pairs: &[(&str, &str)]) -> Value {
    Value::Array(
        pairs
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect(),
    )
}

/// A CPU podConfig option of the upstream kinds.
fn cpu_pod(
    id: &str,
    name: &str,
    description: &str,
    label: (&str, &str),
    resources: Value,
) -> Value {
    json!({"id": id,
        "spawner": {"displayName": name, "description": description,
            "labels": spawner_labels(&[("accelerator", "cpu"), ("cpu", label.0), ("memory", label.1)])},
        "spec": {"affinity": {}, "resources": resources}})
}

/// The one-T4 spot option as upstream defines it: the GKE compute class selects the node
/// (GKE adds the GPU toleration itself, see the API server's admission), 12 CPU and 40Gi
/// because GKE copies the GPU's state through process memory on a checkpoint.
fn gpu_t4_spot(id: &str, name: &str, description: &str, extra_labels: &[(&str, &str)]) -> Value {
    let mut labels = vec![("accelerator", "gpu"), ("cpu", "12"), ("memory", "40Gi")];
    labels.extend_from_slice(extra_labels);
    json!({"id": id,
        "spawner": {"displayName": name, "description": description, "labels": spawner_labels(&labels)},
        "spec": {
            "nodeSelector": {COMPUTE_CLASS_LABEL: T4_COMPUTE_CLASS},
            "resources": {"requests": {"cpu": "12", "memory": "40Gi"},
                          "limits": {"cpu": "12", "memory": "40Gi", "nvidia.com/gpu": "1"}}}})
}

/// The podConfig options of gke-labs/workspaces' kinds (in the upstream order), plus, for
/// the resumable kind, the simulator's one addition [`IDLE_POD_CONFIG`].
fn pod_configs(resumable: bool) -> Value {
    let mut values = vec![
        cpu_pod(
            "tiny_cpu",
            "Tiny CPU",
            "Pod with 0.1 CPU, 128 Mb RAM",
            ("100m", "128Mi"),
            json!({"requests": {"cpu": "100m", "memory": "128Mi"}}),
        ),
        cpu_pod(
            "medium_cpu",
            "Medium CPU",
            "Pod with 2 CPU, 4 GB RAM",
            ("2", "4Gi"),
            json!({"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}),
        ),
        cpu_pod(
            "small_cpu",
            "Small CPU",
            "Pod with 1 CPU, 4 GB RAM",
            ("1000m", "4Gi"),
            json!({"requests": {"cpu": "1000m", "memory": "2Gi"}, "limits": {"cpu": "2000m", "memory": "4Gi"}}),
        ),
        gpu_t4_spot(
            T4_POD_CONFIG,
            "GPU T4 Spot",
            "Pod with 1 T4 GPU (16 GB VRAM), 12 CPU, 40 GB RAM",
            &[],
        ),
    ];
    if resumable {
        // Simulator only: the same T4 under a short activity rule, for idle.feature.
        values.push(gpu_t4_spot(
            IDLE_POD_CONFIG,
            "GPU T4 Spot, short idle pause (simulator)",
            "GPU T4 Spot, paused after 1600 s without activity; not in the upstream kind",
            &[(IDLE_LABEL.0, IDLE_LABEL.1)],
        ));
    } else {
        values.push(json!({"id": "tpu_1",
            "spawner": {"displayName": "TPU v5 1x1", "description": "Pod with 1 TPU v5 lite chip",
                "labels": spawner_labels(&[("accelerator", "tpu")])},
            "spec": {"nodeSelector": {COMPUTE_CLASS_LABEL: "tpu-v5-1-single-host"},
                "resources": {"requests": {"cpu": "20", "memory": "40Gi"},
                              "limits": {"cpu": "20", "memory": "40Gi", "google.com/tpu": "1"}}}}));
    }
    json!({"spawner": {"default": "small_cpu"}, "values": values})
}

/// An imageConfig option of the upstream kinds: JupyterLab on port 8888.
fn image(id: &str, name: &str, description: &str, labels: &[(&str, &str)], image: &str) -> Value {
    json!({"id": id,
        "spawner": {"displayName": name, "description": description, "labels": spawner_labels(labels)},
        "spec": {"image": image, "imagePullPolicy": "IfNotPresent", "ports": [{"id": "jupyterlab", "port": 8888}]}})
}

/// The imageConfig options. Upstream leaves the CPU and GPU images as placeholders for the
/// user's own build (`images/jupyterlab/Dockerfile.gpu` is FROM Kubeflow's
/// jupyter-pytorch-cuda-full v1.11.0): the simulator names those Kubeflow images.
fn image_configs(resumable: bool) -> Value {
    let mut values = vec![
        image(
            "jupyterlab-cpu",
            "jupyterlab (CPU)",
            "JupyterLab with SciPy, JAX (CPU), and Kubeflow Spark SDK",
            &[("python_version", "3.12.9"), ("accelerator", "cpu")],
            "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-scipy:v1.11.0",
        ),
        image(
            T4_IMAGE_CONFIG,
            "jupyterlab (GPU)",
            "JupyterLab with PyTorch (CUDA 13.0), JAX (CUDA), Transformers, and Kubeflow Spark SDK",
            &[
                ("python_version", "3.12.13"),
                ("pytorch_version", "2.12.0"),
                ("cuda_version", "13.0"),
                ("nccl_version", "2.29.7"),
                ("accelerator", "gpu"),
            ],
            "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-pytorch-cuda-full:v1.11.0",
        ),
    ];
    if !resumable {
        values.push(image(
            "jupyterlab-tpu",
            "jupyterlab (TPU)",
            "JupyterLab with TPU JAX (libtpu) and Kubeflow Spark SDK",
            &[("python_version", "3.12.9"), ("accelerator", "tpu")],
            "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-jax-tpu:v1.11.0",
        ));
    }
    values.push(image(
        "jupyter-scipy:v1.10.0",
        "jupyter-scipy:v1.10.0 (Upstream)",
        "Upstream JupyterLab with SciPy Packages",
        &[("python_version", "3.12.9"), ("accelerator", "cpu")],
        "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-scipy:v1.10.0",
    ));
    json!({"spawner": {"default": "jupyterlab-cpu"}, "values": values})
}

/// One filterRule: both conditions must hold; it hides the option in the UI and the
/// backend denies it with `text`.
fn filter_rule(scope: &str, on: &str, this: &str, accel: &str, text: &str) -> Value {
    json!({"scope": scope,
        "match": [
            {on: {"selector": {"matchLabels": {"accelerator": accel}}}},
            {this: {"selector": {"matchExpressions": [{"key": "accelerator", "operator": "NotIn", "values": [accel]}]}}},
        ],
        "effect": {"ui": {"hide": true}, "api": {"deny": true, "denyMessage": {"text": text}}}})
}

/// The kinds' filterRules: a GPU image on a CPU pod option and the reverse are denied (and,
/// for the plain kind, the same for TPUs).
fn filter_rules(resumable: bool) -> Value {
    let (img, pod) = ("matchImageConfig", "matchPodConfig");
    let mut rules = vec![filter_rule(
        "IMAGE_CONFIG",
        pod,
        img,
        "cpu",
        if resumable {
            "This image requires an accelerator (GPU) pod, but a CPU pod was selected."
        } else {
            "This image requires an accelerator (GPU or TPU) pod, but a CPU pod was selected."
        },
    )];
    rules.push(filter_rule(
        "IMAGE_CONFIG",
        pod,
        img,
        "gpu",
        "This image is not built for CUDA GPUs; please select a GPU-enabled image.",
    ));
    if !resumable {
        rules.push(filter_rule(
            "IMAGE_CONFIG",
            pod,
            img,
            "tpu",
            "This image is not built for TPUs (missing libtpu); please select a TPU-enabled image.",
        ));
    }
    rules.push(filter_rule(
        "POD_CONFIG",
        img,
        pod,
        "cpu",
        if resumable {
            "A CPU image cannot be scheduled on an accelerator (GPU) pod."
        } else {
            "A CPU image cannot be scheduled on an accelerator (GPU or TPU) pod."
        },
    ));
    rules.push(filter_rule(
        "POD_CONFIG",
        img,
        pod,
        "gpu",
        "A GPU image requires a GPU pod.",
    ));
    if !resumable {
        rules.push(filter_rule(
            "POD_CONFIG",
            img,
            pod,
            "tpu",
            "A TPU image requires a TPU pod.",
        ));
    }
    Value::Array(rules)
}

/// The node label a GKE ComputeClass gives its nodes, and the class the T4 option selects.
pub const COMPUTE_CLASS_LABEL: &str = "cloud.google.com/compute-class";
pub const T4_COMPUTE_CLASS: &str = "gpu-t4-spot";
/// The upstream GPU options of the resumable kind.
pub const T4_POD_CONFIG: &str = "gpu_t4_spot";
pub const T4_IMAGE_CONFIG: &str = "jupyterlab-gpu";
/// Simulator only: the podConfig option whose Workspaces the short idle rule pauses.
pub const IDLE_POD_CONFIG: &str = "gpu_t4_spot_idle";
/// The spawner label that selects it in `activityRules[].match.matchPodConfig`.
pub const IDLE_LABEL: (&str, &str) = ("idle-pause", "short");

/// Upstream's rule pauses after `catch_all` seconds without activity (resumable: 14400 s,
/// plain: 86400 s). The simulator puts one rule before it on the resumable kind: the podConfig
/// labelled [`IDLE_LABEL`] is paused after 1600 s (at least 2x the probe interval, so the
/// webhook would not warn), for idle.feature (first match wins, kubeflow-workspaces.md §5).
///
/// The short rule has `minRunningSeconds: 600`: a Jupyter server restored from a snapshot
/// reports its pre-pause `last_activity`, so the first probe after a resume (activity was
/// reset on entering Running) finds it long idle, and without a minimum running time the
/// Workspace is paused again at once, before anyone can reconnect (idle.feature found this).
fn activity_rules(resumable: bool) -> Value {
    let catch_all = json!({"config": {"secondsSinceActive": if resumable { 14400 } else { 86400 }},
        "match": {}, "effect": {"pauseWorkspace": true}});
    if !resumable {
        return json!([catch_all]);
    }
    json!([
        {"match": {"matchPodConfig": {"selector": {"matchLabels": {(IDLE_LABEL.0): IDLE_LABEL.1}}}},
         "config": {"secondsSinceActive": 1600, "minRunningSeconds": 600},
         "effect": {"pauseWorkspace": true}},
        catch_all
    ])
}

/// gke-labs/workspaces' `jupyterlab-resumable` (examples/resumable-notebooks/manifests/
/// workspacekind-resumable.yaml) and `jupyterlab` (images/workspacekinds/jupyterlab.yaml)
/// kinds, as upstream writes them, with the additions named in [`pod_configs`] and
/// [`activity_rules`].
fn workspace_kind(name: &str, resumable: bool) -> Value {
    let mut annotations = json!({});
    if resumable {
        annotations[SNAPSHOT_ENABLED] = json!("true");
        annotations[crate::platform::names::STORAGE_CONFIG_ANNOTATION] = json!(STORAGE_CONFIG);
    }
    let prefix = "{{ httpPathPrefix \"jupyterlab\" }}";
    json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "spawner": {
                "displayName": if resumable { "JupyterLab Notebook (Resumable)" } else { "JupyterLab Notebook" },
                "description": if resumable {
                    "A Workspace which runs JupyterLab in a Pod with stateful pause and resume support"
                } else {
                    "A Workspace which runs JupyterLab in a Pod"
                },
                "icon": {"url": "https://jupyter.org/assets/favicons/apple-touch-icon-152x152.png"},
                "logo": {"url": "https://upload.wikimedia.org/wikipedia/commons/3/38/Jupyter_logo.svg"}
            },
            "filterRules": filter_rules(resumable),
            "activityRules": activity_rules(resumable),
            "podTemplate": {
                "podMetadata": {"labels": {}, "annotations": {}},
                "serviceAccount": {"clusterRoles": [{"name": "kubeflow-edit"}]},
                "activityProbe": {"minProbeIntervalSeconds": 100, "probeIntervalSeconds": 300,
                    "jupyter": {"lastActivity": true, "portId": "jupyterlab"}},
                "probes": {
                    "startupProbe": {"tcpSocket": {"port": 8888}, "periodSeconds": 5, "failureThreshold": 60},
                    "readinessProbe": {"tcpSocket": {"port": 8888}, "periodSeconds": 5}
                },
                "volumeMounts": {"home": "/home/jovyan"},
                "ports": [{"id": "jupyterlab", "defaultDisplayName": "JupyterLab", "protocol": "HTTP",
                    "httpProxy": {"removePathPrefix": false, "requestHeaders": {}}}],
                "extraEnv": [
                    {"name": "NB_PREFIX", "value": prefix},
                    {"name": "JUPYTERHUB_SERVICE_PREFIX", "value": prefix},
                    {"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"},
                    {"name": "PATH", "value": "/home/jovyan/.local/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin:/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
                    {"name": "GCS_BUCKET", "value": "wsgate-sim-snapshots"}
                ],
                "extraVolumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
                "extraVolumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
                "securityContext": {"fsGroup": 100, "seccompProfile": {"type": "RuntimeDefault"}},
                "containerSecurityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                    "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                "options": {
                    "imageConfig": image_configs(resumable),
                    "podConfig": pod_configs(resumable)
                }
            }
        }
    })
}

/// The kind name of gke-labs/workspaces' stateless VS Code kind.
pub const CODESERVER_KIND: &str = "codeserver";
/// Kubeflow's code-server image, which upstream's own builds extend
/// (`images/codeserver-python/Dockerfile*`: `FROM …/codeserver-python:v1.11.0`).
pub const CODESERVER_IMAGE: &str =
    "ghcr.io/kubeflow/kubeflow/notebook-servers/codeserver-python:v1.11.0";

/// An imageConfig option of the codeserver kind: code-server on port 8888, port id
/// `codeserver`.
fn codeserver_image(id: &str, name: &str, description: &str, accel: &str) -> Value {
    json!({"id": id,
        "spawner": {"displayName": name, "description": description,
            "labels": spawner_labels(&[("python_version", "3.12"), ("accelerator", accel)])},
        "spec": {"image": CODESERVER_IMAGE, "imagePullPolicy": "IfNotPresent",
            "ports": [{"id": "codeserver", "port": 8888}]}})
}

/// gke-labs/workspaces' `codeserver` kind (images/workspacekinds/codeserver-python.yaml), as
/// upstream writes it: not snapshot-enabled (no annotations), no activity probe and no
/// probes, the `codeserver` port with its path prefix removed by the access proxy (code-server
/// serves at `/`, so no `NB_PREFIX`), options `codeserver-python-{cpu,gpu,tpu}` (upstream's
/// placeholders for the user's builds, named here by the Kubeflow image they extend) and
/// `codeserver-python:v1.11.0`; pod options `medium_cpu`, `small_cpu` (default),
/// `gpu_best_available` (compute class `gpu-best-available`), `tpu_1`, `tpu_4`; the same six
/// filterRules as the plain `jupyterlab` kind. Upstream's `REGISTRY` and `GCS_BUCKET` values
/// are envsubst placeholders; the simulator fills them with its own names.
fn codeserver_kind() -> Value {
    let pod_configs = json!({"spawner": {"default": "small_cpu"}, "values": [
        cpu_pod("medium_cpu", "Medium CPU", "Pod with 2 CPU, 4 GB RAM", ("2", "4Gi"),
            json!({"requests": {"cpu": "2", "memory": "4Gi"}})),
        cpu_pod("small_cpu", "Small CPU", "Pod with 1 CPU, 2 GB RAM", ("1000m", "2Gi"),
            json!({"requests": {"cpu": "1000m", "memory": "2Gi"}})),
        {"id": "gpu_best_available",
            "spawner": {"displayName": "GPU (best available)",
                "description": "Pod with 1 GPU (T4 or L4, Spot first then on-demand), 12 CPU, 40 GB RAM",
                "labels": spawner_labels(&[("accelerator", "gpu"), ("cpu", "12"), ("memory", "40Gi")])},
            "spec": {"nodeSelector": {COMPUTE_CLASS_LABEL: "gpu-best-available"},
                "resources": {"requests": {"cpu": "12", "memory": "40Gi"},
                              "limits": {"cpu": "12", "memory": "40Gi", "nvidia.com/gpu": "1"}}}},
        {"id": "tpu_1",
            "spawner": {"displayName": "TPU v5 1x1", "description": "Pod with 1 TPU v5 lite chip",
                "labels": spawner_labels(&[("accelerator", "tpu")])},
            "spec": {"nodeSelector": {COMPUTE_CLASS_LABEL: "tpu-v5-1-single-host"},
                "resources": {"requests": {"cpu": "20", "memory": "40Gi"},
                              "limits": {"google.com/tpu": "1"}}}},
        {"id": "tpu_4",
            "spawner": {"displayName": "TPU v5 2x2", "description": "Pod with 4 TPU v5 lite chips",
                "labels": spawner_labels(&[("accelerator", "tpu")])},
            "spec": {"nodeSelector": {COMPUTE_CLASS_LABEL: "tpu-v5-4-single-host"},
                "resources": {"requests": {"cpu": "90", "memory": "150Gi"},
                              "limits": {"cpu": "90", "memory": "150Gi", "google.com/tpu": "4"}}}},
    ]});
    let image_configs = json!({"spawner": {"default": "codeserver-python-cpu"}, "values": [
        codeserver_image("codeserver-python-cpu", "codeserver-python (CPU)",
            "code-server with Conda Python", "cpu"),
        codeserver_image("codeserver-python-gpu", "codeserver-python (GPU)",
            "code-server with Conda Python, CUDA, PyTorch, and GPU JAX", "gpu"),
        codeserver_image("codeserver-python-tpu", "codeserver-python (TPU)",
            "code-server with Conda Python, and TPU JAX (libtpu)", "tpu"),
        codeserver_image("codeserver-python:v1.11.0", "codeserver-python:v1.11.0 (Upstream)",
            "Upstream Kubeflow code-server with Conda Python", "cpu"),
    ]});
    let icon =
        "https://upload.wikimedia.org/wikipedia/commons/9/9a/Visual_Studio_Code_1.35_icon.svg";
    json!({
        "metadata": {"name": CODESERVER_KIND},
        "spec": {
            "spawner": {"displayName": "VS Code (code-server)",
                "description": "A Workspace which runs VS Code (code-server) in a Pod",
                "icon": {"url": icon}, "logo": {"url": icon}},
            "filterRules": filter_rules(false),
            "podTemplate": {
                "podMetadata": {"labels": {}, "annotations": {}},
                "serviceAccount": {"clusterRoles": [{"name": "kubeflow-edit"}]},
                "volumeMounts": {"home": "/home/jovyan"},
                "ports": [{"id": "codeserver", "defaultDisplayName": "VS Code (code-server)", "protocol": "HTTP",
                    "httpProxy": {"removePathPrefix": true, "requestHeaders": {}}}],
                "extraEnv": [
                    {"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"},
                    {"name": "PATH", "value": "/home/jovyan/.local/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin:/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
                    {"name": "REGISTRY", "value": "us-central1-docker.pkg.dev/wsgate-sim/workspaces"},
                    {"name": "GCS_BUCKET", "value": "wsgate-sim-notebooks"},
                    {"name": "WORKSPACE_NAME", "valueFrom": {"fieldRef":
                        {"fieldPath": "metadata.labels['notebooks.kubeflow.org/workspace-name']"}}}
                ],
                "extraVolumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
                "extraVolumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
                "securityContext": {"fsGroup": 100, "seccompProfile": {"type": "RuntimeDefault"}},
                "containerSecurityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                    "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                "options": {"imageConfig": image_configs, "podConfig": pod_configs}
            }
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
            .lookup("/metadata/name")
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
    put("WorkspaceKind", None, codeserver_kind());
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

//! GPU capacity as the cluster shows it: per node, allocatable `nvidia.com/gpu` against what
//! the pods bound there request; a probe pod that proves a GPU can be scheduled again; and
//! the capacity squeeze (a ResourceQuota in the test namespace).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod, ResourceQuota};
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;

use super::idempotent;
use super::ledger::Ledger;
use super::wait::{self, WaitError, WaitFor};

pub use super::names::ACCELERATOR_LABEL;
pub use super::names::GPU_RESOURCE as GPU;
/// The well-known node label a probe pins itself to one node with.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// The ResourceQuota a squeeze creates.
pub const SQUEEZE_QUOTA: &str = "wsgate-gpu-squeeze";

#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("cannot lift the squeeze: {object}: {detail}")]
    Lift { object: String, detail: String },
    #[error("cannot {action}")]
    Api {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Wait(#[from] WaitError),
}

fn api_err(action: impl Into<String>) -> impl FnOnce(kube::Error) -> GpuError {
    let action = action.into();
    move |source| GpuError::Api { action, source }
}

/// One node's GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGpus {
    pub node: String,
    pub accelerator: String,
    pub allocatable: i64,
    /// Requested by pods bound to the node that still exist.
    pub used: i64,
}

fn quantity(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> i64 {
    q.0.parse().unwrap_or(0)
}

/// GPUs a pod requests (limits, else requests, over its containers).
pub fn pod_gpus(pod: &Pod) -> i64 {
    pod.spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .filter_map(|c| c.resources.as_ref())
                .map(|r| {
                    r.limits
                        .as_ref()
                        .and_then(|l| l.get(GPU))
                        .or_else(|| r.requests.as_ref().and_then(|l| l.get(GPU)))
                        .map(quantity)
                        .unwrap_or(0)
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Every GPU node with its allocatable and used GPUs.
pub async fn nodes(client: &kube::Client) -> Result<Vec<NodeGpus>, GpuError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let node_list = nodes
        .list(&ListParams::default())
        .await
        .map_err(api_err("list nodes"))?;
    let pod_list = pods
        .list(&ListParams::default())
        .await
        .map_err(api_err("list pods"))?;
    let mut used: BTreeMap<String, i64> = BTreeMap::new();
    for p in &pod_list.items {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
            *used.entry(n).or_default() += pod_gpus(p);
        }
    }
    Ok(node_list
        .items
        .iter()
        .filter_map(|n| {
            let allocatable = n
                .status
                .as_ref()?
                .allocatable
                .as_ref()?
                .get(GPU)
                .map(quantity)?;
            let name = n.metadata.name.clone()?;
            Some(NodeGpus {
                accelerator: n
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(ACCELERATOR_LABEL))
                    .cloned()
                    .unwrap_or_default(),
                used: used.get(&name).copied().unwrap_or(0),
                allocatable,
                node: name,
            })
        })
        .collect())
}

/// Free GPUs of one accelerator model across the cluster.
pub async fn free(client: &kube::Client, accelerator: &str) -> Result<i64, GpuError> {
    Ok(nodes(client)
        .await?
        .iter()
        .filter(|n| n.accelerator == accelerator)
        .map(|n| (n.allocatable - n.used).max(0))
        .sum())
}

/// Creates a pod that asks for one GPU of `accelerator` (on `node` when given: the node a
/// paused workspace left, so that it is that GPU which must come back, not any other free
/// one), waits until it is scheduled (within `wait`), deletes it, and returns the node it
/// landed on.
#[allow(clippy::too_many_arguments)]
pub async fn probe_schedulable(
    client: &kube::Client,
    ledger: &mut Ledger,
    namespace: &str,
    accelerator: &str,
    node: Option<&str>,
    labels: &BTreeMap<String, String>,
    wait_for: &WaitFor,
) -> Result<String, GpuError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let name = format!(
        "wsgate-gpu-probe-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let mut selector = serde_json::Map::new();
    selector.insert(ACCELERATOR_LABEL.into(), json!(accelerator));
    if let Some(node) = node {
        selector.insert(HOSTNAME_LABEL.into(), json!(node));
    }
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": selector,
            "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"limits": {GPU: 1}}}]
        }
    }))
    .expect("a valid pod");
    let i = ledger.record::<Pod>(Some(namespace), &name);
    let created = idempotent::create(&api, &pod)
        .await
        .map_err(api_err(format!("create probe pod {name}")))?;
    let probe_uid = created.metadata.uid.clone();
    ledger.created(i, created.metadata.uid);
    let describe = |p: Option<&Pod>| match p
        .and_then(|p| p.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
    {
        None => "not scheduled yet".to_string(),
        Some(cs) => cs
            .iter()
            .find(|c| c.type_ == "PodScheduled")
            .map(|c| {
                format!(
                    "PodScheduled={} {}",
                    c.status,
                    c.message.clone().unwrap_or_default()
                )
            })
            .unwrap_or_else(|| "not scheduled yet".into()),
    };
    let scheduled = wait::until(&api, &name, wait_for, describe, |p| {
        p.and_then(|p| p.spec.as_ref())
            .and_then(|s| s.node_name.as_ref())
            .is_some()
    })
    .await?;
    let node = scheduled
        .and_then(|p| p.spec.and_then(|s| s.node_name))
        .unwrap_or_default();
    // Bound to the probe's uid: only the pod this call created goes.
    let mut dp = DeleteParams::default().grace_period(0);
    dp.preconditions = Some(kube::api::Preconditions {
        uid: probe_uid,
        resource_version: None,
    });
    let _ = api.delete(&name, &dp).await;
    Ok(node)
}

/// Squeezes GPU capacity in `namespace` with a ResourceQuota of `gpus` GPUs (0: none).
pub async fn squeeze_with_quota(
    client: &kube::Client,
    ledger: &mut Ledger,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    gpus: u32,
) -> Result<(), GpuError> {
    let api: Api<ResourceQuota> = Api::namespaced(client.clone(), namespace);
    let q: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": SQUEEZE_QUOTA, "labels": labels},
        "spec": {"hard": {format!("requests.{GPU}"): gpus.to_string()}}
    }))
    .expect("a valid quota");
    let i = ledger.record::<ResourceQuota>(Some(namespace), SQUEEZE_QUOTA);
    let created = idempotent::create(&api, &q)
        .await
        .map_err(api_err("create the squeeze quota"))?;
    ledger.created(i, created.metadata.uid);
    Ok(())
}

/// Lifts the quota squeeze: deletes the quota this run created (the ledger's entry, bound
/// to its uid, and only if it is `claim`'s; [`super::ownership`]) and waits until it is gone.
pub async fn lift_quota(
    client: &kube::Client,
    ledger: &Ledger,
    claim: &super::ownership::Claim,
    budget: std::time::Duration,
) -> Result<(), GpuError> {
    use super::ledger::CleanupOutcome;
    let Some(entry) = ledger
        .entries
        .iter()
        .find(|e| e.kind == "ResourceQuota" && e.name == SQUEEZE_QUOTA)
    else {
        return Err(GpuError::Lift {
            object: format!("ResourceQuota {SQUEEZE_QUOTA}"),
            detail: "this run created no squeeze quota".into(),
        });
    };
    match super::ledger::delete_and_wait(client, claim, entry, budget).await {
        CleanupOutcome::Deleted | CleanupOutcome::AlreadyGone | CleanupOutcome::Kept => Ok(()),
        CleanupOutcome::Leaked(detail) | CleanupOutcome::Refused(detail) => Err(GpuError::Lift {
            object: entry.describe(),
            detail,
        }),
    }
}

/// Every GPU node with the names of the GPU pods bound to it.
pub async fn nodes_with_pods(
    client: &kube::Client,
) -> Result<Vec<(NodeGpus, Vec<String>)>, GpuError> {
    let pods: Api<Pod> = Api::all(client.clone());
    let pod_list = pods
        .list(&ListParams::default())
        .await
        .map_err(api_err("list pods"))?;
    Ok(nodes(client)
        .await?
        .into_iter()
        .map(|n| {
            let names = pod_list
                .items
                .iter()
                .filter(|p| {
                    pod_gpus(p) > 0
                        && p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                            == Some(n.node.as_str())
                })
                .map(|p| {
                    format!(
                        "{}/{}",
                        p.metadata.namespace.clone().unwrap_or_default(),
                        p.metadata.name.clone().unwrap_or_default()
                    )
                })
                .collect();
            (n, names)
        })
        .collect())
}

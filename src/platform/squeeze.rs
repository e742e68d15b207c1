//! The opt-in squeeze methods beside [`super::gpu::squeeze_with_quota`]: placeholder pods
//! that hold every free GPU of the workspace's accelerator, or a NoSchedule taint on that
//! accelerator's GPU nodes. Both are recorded in the ledger before they exist and lifted
//! UID-aware (pods deleted and waited for) or exactly (only this run's taint is removed).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::json;

use super::gpu::{self, ACCELERATOR_LABEL, GPU, GpuError};
use super::idempotent;
use super::ledger::{self, CleanupOutcome, EXPIRES_LABEL, Ledger, RUN_ID_LABEL};
use super::ownership::{self, Claim};
use super::taint::{self, NodeTaint, TaintError};
use super::wait::{self, WaitFor};

/// The name prefix of every placeholder pod.
pub const PLACEHOLDER_PREFIX: &str = "wsgate-gpu-placeholder-";
/// The label saying what a wsgate pod is for.
pub const ROLE_LABEL: &str = "wsgate.dev/role";
/// [`ROLE_LABEL`] on placeholder pods.
pub const PLACEHOLDER_ROLE: &str = "squeeze-placeholder";

#[derive(Debug, thiserror::Error)]
pub enum SqueezeError {
    #[error(transparent)]
    Gpu(#[from] GpuError),
    #[error(transparent)]
    Taint(#[from] TaintError),
    #[error("no GPU node has accelerator {accelerator:?}: nothing to taint")]
    NoNodes { accelerator: String },
    #[error(
        "the run labels carry no {RUN_ID_LABEL} and {EXPIRES_LABEL}: a taint without them could not be swept by the janitor"
    )]
    Unlabelled,
    #[error("cannot lift the squeeze: {object}: {detail}")]
    Lift { object: String, detail: String },
}

fn placeholder(name: &str, accelerator: &str, labels: &BTreeMap<String, String>) -> Pod {
    let mut labels = labels.clone();
    labels.insert(ROLE_LABEL.into(), PLACEHOLDER_ROLE.into());
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {ACCELERATOR_LABEL: accelerator},
            "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "hold", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"limits": {GPU: 1}}}]
        }
    }))
    .expect("a valid pod")
}

fn describe_pod(p: Option<&Pod>) -> String {
    let Some(p) = p else {
        return "gone".into();
    };
    let phase = p
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".into());
    let unscheduled = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .filter(|c| c.status == "False")
        .and_then(|c| c.message.clone());
    match unscheduled {
        Some(m) => format!("{phase}, unschedulable: {m}"),
        None => phase,
    }
}

/// Creates one placeholder pod per free GPU of `accelerator` (each asks for one GPU, with
/// the accelerator's node selector and the GPU toleration), each recorded in the ledger
/// first, and waits (within `wait_for`) until every one is Running on its GPU. Returns the
/// pod names; none when no GPU was free.
pub async fn squeeze_with_placeholders(
    client: &kube::Client,
    ledger: &mut Ledger,
    namespace: &str,
    accelerator: &str,
    labels: &BTreeMap<String, String>,
    wait_for: &WaitFor,
) -> Result<Vec<String>, SqueezeError> {
    let free = gpu::free(client, accelerator).await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let batch = &uuid::Uuid::new_v4().simple().to_string()[..6];
    let mut names = Vec::new();
    for i in 0..free {
        let name = format!("{PLACEHOLDER_PREFIX}{batch}-{i}");
        let at = ledger.record::<Pod>(Some(namespace), &name);
        let created = idempotent::create(&api, &placeholder(&name, accelerator, labels))
            .await
            .map_err(|source| GpuError::Api {
                action: format!("create placeholder pod {name}"),
                source,
            })?;
        ledger.created(at, created.metadata.uid);
        names.push(name);
    }
    for name in &names {
        wait::until(&api, name, wait_for, describe_pod, |p| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Running")
        })
        .await
        .map_err(GpuError::from)?;
    }
    Ok(names)
}

/// Deletes every placeholder pod in the ledger, bound to its uid, and waits (within
/// `budget` each) until it is gone, so its GPU is free again.
pub async fn lift_placeholders(
    client: &kube::Client,
    ledger: &Ledger,
    claim: &Claim,
    budget: Duration,
) -> Result<usize, SqueezeError> {
    let mut lifted = 0;
    for e in ledger
        .entries
        .iter()
        .filter(|e| e.kind == "Pod" && e.name.starts_with(PLACEHOLDER_PREFIX))
    {
        match ledger::delete_and_wait(client, claim, e, budget).await {
            CleanupOutcome::Deleted => lifted += 1,
            CleanupOutcome::AlreadyGone | CleanupOutcome::Kept => {}
            CleanupOutcome::Leaked(detail) | CleanupOutcome::Refused(detail) => {
                return Err(SqueezeError::Lift {
                    object: e.describe(),
                    detail,
                });
            }
        }
    }
    Ok(lifted)
}

/// Puts a NoSchedule squeeze taint, whose value names the run and its expiry (from the run
/// `labels`), on every GPU node of `accelerator`; each is recorded in the ledger first.
pub async fn squeeze_with_taint(
    client: &kube::Client,
    ledger: &mut Ledger,
    accelerator: &str,
    labels: &BTreeMap<String, String>,
) -> Result<Vec<NodeTaint>, SqueezeError> {
    let run_id = labels.get(RUN_ID_LABEL).ok_or(SqueezeError::Unlabelled)?;
    let expires = labels
        .get(EXPIRES_LABEL)
        .and_then(|e| e.parse::<i64>().ok())
        .and_then(|e| chrono::DateTime::from_timestamp(e, 0))
        .ok_or(SqueezeError::Unlabelled)?;
    let nodes: Vec<String> = gpu::nodes(client)
        .await?
        .into_iter()
        .filter(|n| n.accelerator == accelerator)
        .map(|n| n.node)
        .collect();
    if nodes.is_empty() {
        return Err(SqueezeError::NoNodes {
            accelerator: accelerator.to_string(),
        });
    }
    let mut added = Vec::new();
    for node in nodes {
        let t = NodeTaint::squeeze(&node, run_id, expires);
        ledger.record_taint(t.clone());
        taint::add(client, &t).await?;
        added.push(t);
    }
    Ok(added)
}

/// Takes this run's squeeze taints (those in the ledger that are `claim`'s) off their nodes.
pub async fn lift_taints(
    client: &kube::Client,
    ledger: &Ledger,
    claim: &Claim,
) -> Result<usize, SqueezeError> {
    let mut lifted = 0;
    for t in &ledger.taints {
        if let Err(not_ours) = ownership::check_taint(t, claim) {
            return Err(SqueezeError::Lift {
                object: t.describe(),
                detail: not_ours.to_string(),
            });
        }
        if taint::remove(client, t).await? {
            lifted += 1;
        }
    }
    Ok(lifted)
}

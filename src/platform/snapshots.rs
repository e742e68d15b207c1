//! A workspace's PodSnapshots as the GKE Workspaces add-on labels them, their readiness,
//! and the restore evidence on the resumed pod (`PodRestored`, `GKEPodSnapshotting`).

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, ListParams};

use super::crd::PodSnapshot;
use crate::verdict::{ConditionEvidence, EventEvidence};

/// The label on every PodSnapshot a manual trigger produced.
pub const TRIGGERED_BY: &str = "gke-pod-snapshot-triggered-by";
/// The event reason of a restore.
pub const RESTORE_EVENT: &str = "GKEPodSnapshotting";

/// The trigger the add-on creates for a workspace.
pub fn trigger_name(workspace: &str) -> String {
    format!("ws-{workspace}-trigger")
}

/// The workspace's PodSnapshots.
pub async fn of_workspace(
    client: &kube::Client,
    namespace: &str,
    workspace: &str,
) -> Result<Vec<PodSnapshot>, kube::Error> {
    let api: Api<PodSnapshot> = Api::namespaced(client.clone(), namespace);
    let list = api
        .list(&ListParams::default().labels(&format!("{TRIGGERED_BY}={}", trigger_name(workspace))))
        .await?;
    Ok(list.items)
}

fn condition(s: &PodSnapshot, type_: &str) -> Option<(String, String)> {
    s.status
        .as_ref()?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(|t| t.as_str()) == Some(type_))
        .map(|c| {
            (
                c.get("status")
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_string(),
                c.get("reason")
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_string(),
            )
        })
}

/// Whether a snapshot is usable (`Ready=True`), the readiness to gate on per GKE docs.
pub fn is_ready(s: &PodSnapshot) -> bool {
    condition(s, "Ready").is_some_and(|(status, _)| status == "True")
        && s.metadata.deletion_timestamp.is_none()
}

/// A snapshot's state in words: `Ready`, `Deleting`, or the Ready reason.
pub fn describe(s: &PodSnapshot) -> String {
    if s.metadata.deletion_timestamp.is_some() {
        return "Deleting".into();
    }
    match condition(s, "Ready") {
        Some((status, _)) if status == "True" => "Ready".into(),
        Some((_, reason)) if !reason.is_empty() => reason,
        _ => "AwaitingCheckpoint".into(),
    }
}

/// One line per snapshot for a failure message: its name, where it stands, and the
/// checkpoint's own reason when the checkpoint failed.
pub fn summarize(snaps: &[PodSnapshot]) -> Vec<String> {
    snaps
        .iter()
        .map(|s| {
            let name = s.metadata.name.as_deref().unwrap_or("?");
            match checkpoint_failure(s) {
                Some(why) => format!("{name}: {} (checkpoint: {why})", describe(s)),
                None => format!("{name}: {}", describe(s)),
            }
        })
        .collect()
}

/// Deletes every snapshot of the workspace (to force a cold start).
pub async fn delete_all(
    client: &kube::Client,
    namespace: &str,
    workspace: &str,
) -> Result<usize, kube::Error> {
    let api: Api<PodSnapshot> = Api::namespaced(client.clone(), namespace);
    let all = of_workspace(client, namespace, workspace).await?;
    for s in &all {
        if let Some(name) = &s.metadata.name {
            super::idempotent::delete(&api, name, &DeleteParams::default()).await?;
        }
    }
    Ok(all.len())
}

/// The pod's `PodRestored` condition.
pub fn pod_restored(pod: &Pod) -> Option<ConditionEvidence> {
    let c = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodRestored")?;
    Some(ConditionEvidence {
        status: c.status.clone(),
        reason: c.reason.clone(),
        message: c.message.clone(),
    })
}

/// The pod's restore event, if GKE recorded one.
pub async fn restore_event(
    client: &kube::Client,
    pod: &Pod,
) -> Result<Option<EventEvidence>, kube::Error> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let api: Api<Event> = Api::namespaced(client.clone(), &ns);
    let evs = api
        .list(&ListParams::default().fields(&format!(
            "involvedObject.name={name},reason={RESTORE_EVENT}"
        )))
        .await?;
    let uid = pod.metadata.uid.clone();
    Ok(evs
        .items
        .into_iter()
        .rev()
        .find(|e| uid.is_none() || e.involved_object.uid == uid)
        .map(|e| EventEvidence {
            reason: e.reason.unwrap_or_default(),
            message: e.message.unwrap_or_default(),
        }))
}

/// Why a snapshot's checkpoint failed: its `Checkpoint=False` (or `Ready=False/Failed`)
/// condition as `reason: message` (gke-pod-snapshots.md). `None` while it has not failed.
pub fn checkpoint_failure(s: &PodSnapshot) -> Option<String> {
    let conditions = s.status.as_ref()?.get("conditions")?.as_array()?;
    let field = |c: &serde_json::Value, k: &str| {
        c.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string()
    };
    conditions
        .iter()
        .find(|c| {
            field(c, "status") == "False"
                && (field(c, "type") == "Checkpoint"
                    || (field(c, "type") == "Ready" && field(c, "reason") == "Failed"))
        })
        .map(|c| match (field(c, "reason"), field(c, "message")) {
            (r, m) if m.is_empty() => r,
            (r, m) if r.is_empty() => m,
            (r, m) => format!("{r}: {m}"),
        })
}

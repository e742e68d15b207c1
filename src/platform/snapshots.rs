//! A workspace's PodSnapshots as the GKE Workspaces add-on labels them, their readiness,
//! and the restore evidence on the resumed pod (`PodRestored`, `GKEPodSnapshotting`).

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, ListParams};

use super::crd::PodSnapshot;
use crate::verdict::{ConditionEvidence, EventEvidence};

pub use super::names::RESTORE_EVENT;
pub use super::names::TRIGGERED_BY;

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

/// Why the snapshots of a workspace were not deleted.
#[derive(Debug, thiserror::Error)]
pub enum DeleteSnapshotsError {
    /// The Workspace is not this run's (labels, uid or namespace say so): its snapshots are
    /// the platform's record of someone else's work, and left alone.
    #[error(transparent)]
    NotOurs(#[from] super::ownership::NotOurs),
    #[error("the Workspace {namespace}/{name} is gone: no snapshots of it are deleted")]
    NoWorkspace { namespace: String, name: String },
    #[error(transparent)]
    Namespace(#[from] super::target::TargetError),
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// Deletes every snapshot of a workspace wsgate created (to force a cold start, as an
/// upgrade that invalidates snapshots would). PodSnapshots carry GKE's labels, not
/// wsgate's, so the rule is applied to the Workspace they belong to: it must live in an
/// opted-in namespace, carry wsgate's labels of `claim` and, when known, have
/// `workspace_uid`. Each snapshot is deleted with its uid as a precondition. Returns how
/// many were deleted.
pub async fn delete_all(
    client: &kube::Client,
    claim: &super::ownership::Claim,
    namespace: &str,
    workspace: &str,
    workspace_uid: Option<&str>,
) -> Result<usize, DeleteSnapshotsError> {
    use kube::api::Preconditions;
    super::target::check_opt_in(client, namespace).await?;
    let wsapi: Api<super::crd::Workspace> = Api::namespaced(client.clone(), namespace);
    let Some(ws) = wsapi.get_opt(workspace).await? else {
        return Err(DeleteSnapshotsError::NoWorkspace {
            namespace: namespace.into(),
            name: workspace.into(),
        });
    };
    super::ownership::check_meta(
        &format!("Workspace {namespace}/{workspace}"),
        &ws.metadata,
        claim,
        workspace_uid,
    )?;
    let api: Api<PodSnapshot> = Api::namespaced(client.clone(), namespace);
    let all = of_workspace(client, namespace, workspace).await?;
    let mut deleted = 0;
    for s in &all {
        let (Some(name), Some(uid)) = (&s.metadata.name, &s.metadata.uid) else {
            continue;
        };
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => deleted += 1,
            // Gone already, or (409 on the uid) another object has the name now.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(deleted)
}

/// The pod's `PodRestored` condition.
pub fn pod_restored(pod: &Pod) -> Option<ConditionEvidence> {
    let c = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == super::names::POD_RESTORED)?;
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

//! A workspace's condition in plain words, the answer to "is my workspace paused, waiting
//! for resources, or ready?": Ready; Paused (with its snapshot); Checkpointing; Waiting for
//! GPU (with the reason); Restoring; Error (with the message).

use super::crd::{PodSnapshot, Workspace, WorkspaceState};
use super::snapshots;

pub use super::names::CHECKPOINT_STATE;

/// One row of `wsgate status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusRow {
    pub name: String,
    pub status: String,
    pub detail: String,
}

fn waiting_reason(message: &str) -> Option<&'static str> {
    let m = message.to_lowercase();
    if m.contains("exceeded quota") {
        Some("GPU quota exhausted")
    } else if m.contains("insufficient nvidia.com/gpu") {
        Some("no free GPU in the pool")
    } else if m.contains("unschedulable") || m.contains("nodes are available") {
        Some("no node fits")
    } else {
        None
    }
}

/// Describes one workspace from its object and its PodSnapshots.
pub fn describe(ws: &Workspace, snaps: &[PodSnapshot]) -> StatusRow {
    let name = ws.metadata.name.clone().unwrap_or_default();
    let status = ws.status.clone().unwrap_or_default();
    let checkpoint = ws
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CHECKPOINT_STATE))
        .map(String::as_str);
    let ready_snapshot = snaps.iter().find(|s| snapshots::is_ready(s));
    let (word, detail) = match (status.state, checkpoint) {
        (WorkspaceState::Running, _) => ("Ready", status.state_message.clone()),
        (_, Some("Checkpointing")) => (
            "Checkpointing",
            "saving memory and GPU state to the snapshot".to_string(),
        ),
        (WorkspaceState::Paused, _) => (
            "Paused",
            match ready_snapshot {
                Some(s) => format!(
                    "snapshot {} ready",
                    s.metadata.name.clone().unwrap_or_default()
                ),
                None => "no snapshot: resume starts a fresh session (files kept)".to_string(),
            },
        ),
        (_, _) if waiting_reason(&status.state_message).is_some() => (
            "Waiting for GPU",
            format!(
                "{}: {}",
                waiting_reason(&status.state_message).unwrap_or_default(),
                status.state_message
            ),
        ),
        (_, Some("Restoring")) => ("Restoring", status.state_message.clone()),
        (WorkspaceState::Error, _) => ("Error", status.state_message.clone()),
        (other, _) => (
            match other {
                WorkspaceState::Pending => "Starting",
                WorkspaceState::Terminating => "Stopping",
                _ => "Unknown",
            },
            status.state_message.clone(),
        ),
    };
    StatusRow {
        name,
        status: word.to_string(),
        detail,
    }
}

/// The rows as an aligned table.
pub fn table(rows: &[StatusRow]) -> String {
    let w0 = rows
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(0)
        .max("WORKSPACE".len());
    let w1 = rows
        .iter()
        .map(|r| r.status.len())
        .max()
        .unwrap_or(0)
        .max("STATUS".len());
    let mut out = format!("{:<w0$}  {:<w1$}  DETAIL\n", "WORKSPACE", "STATUS");
    for r in rows {
        out.push_str(&format!(
            "{:<w0$}  {:<w1$}  {}\n",
            r.name, r.status, r.detail
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ws(state: &str, message: &str, checkpoint: Option<&str>) -> Workspace {
        let mut annotations = json!({});
        if let Some(c) = checkpoint {
            annotations[CHECKPOINT_STATE] = json!(c);
        }
        serde_json::from_value(json!({
            "apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace",
            "metadata": {"name": "nb", "annotations": annotations},
            "spec": {"kind": "k", "podTemplate": {"options": {"imageConfig": "i", "podConfig": "p"}}},
            "status": {"state": state, "stateMessage": message}
        }))
        .unwrap()
    }

    fn ready_snapshot() -> PodSnapshot {
        serde_json::from_value(json!({
            "apiVersion": "podsnapshot.gke.io/v1", "kind": "PodSnapshot",
            "metadata": {"name": "6f1c"}, "spec": {"policyName": "ws-nb-policy"},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "AllSnapshotsAvailable"}]}
        }))
        .unwrap()
    }

    #[test]
    fn plain_words_for_every_situation() {
        let d = |w: Workspace, s: &[PodSnapshot]| {
            let r = describe(&w, s);
            (r.status, r.detail)
        };
        assert_eq!(
            d(ws("Running", "Workspace is running", None), &[]).0,
            "Ready"
        );
        assert_eq!(
            d(ws("Unknown", "", Some("Checkpointing")), &[]).0,
            "Checkpointing"
        );
        assert_eq!(
            d(
                ws("Paused", "Workspace is paused", Some("Ready")),
                &[ready_snapshot()]
            ),
            ("Paused".into(), "snapshot 6f1c ready".into())
        );
        assert!(d(ws("Paused", "", None), &[]).1.contains("fresh session"));
        let (word, detail) = d(
            ws(
                "Error",
                "Workspace StatefulSet has warning event: create Pod x failed error: pods \"x\" is forbidden: exceeded quota: q",
                Some("Restoring"),
            ),
            &[],
        );
        assert_eq!(word, "Waiting for GPU");
        assert!(detail.starts_with("GPU quota exhausted"));
        assert_eq!(d(ws("Pending", "", Some("Restoring")), &[]).0, "Restoring");
        assert_eq!(
            d(
                ws(
                    "Error",
                    "Workspace references unknown WorkspaceKind: x",
                    None
                ),
                &[]
            )
            .0,
            "Error"
        );
    }
}

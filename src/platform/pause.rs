//! Waiting for a pause to end: the Workspace Paused within a named budget, while the add-on's
//! trigger (`ws-<name>-trigger`) is watched beside it.
//!
//! The GKE Workspaces snapshot add-on's pause has no failure path (gke-labs/workspaces
//! `providers/gke/internal/snapshot/reconcile.go`): when the checkpoint fails (the trigger's
//! `Triggered=False`, reason `Failed`) the Workspace stays `Checkpointing` with its pod
//! running and its GPU held, for ever. Waiting out the whole budget would only say "not
//! Paused"; this wait ends at once and names the trigger's condition and the PodSnapshot's.
//! A target without the trigger kind (plain Kubeflow), or a harness not allowed to watch it,
//! waits on the Workspace alone.

use std::time::Duration;

use kube::api::Api;

use super::crd::{PodSnapshotManualTrigger, Workspace, WorkspaceState};
use super::snapshots;
use super::wait::{self, WaitError, WaitFor};
use super::workspace as ws;

pub use super::names::CHECKPOINT_STATE;
/// How long to look again at a failed trigger that belongs to no pause in progress (one an
/// earlier pause left, about to be replaced).
const STALE_TRIGGER_RECHECK: Duration = Duration::from_secs(1);

/// Why a pause did not end Paused.
#[derive(Debug, thiserror::Error)]
pub enum PauseError {
    #[error(transparent)]
    Wait(#[from] WaitError),
    #[error(
        "checkpoint failed: trigger {trigger} Triggered=False {reason}: {message}{snapshot}; \
         the workspace stays in Checkpointing with its pod running and its GPU held"
    )]
    CheckpointFailed {
        trigger: String,
        reason: String,
        message: String,
        /// `; PodSnapshot <name> <reason: message>`, when the trigger made one.
        snapshot: String,
    },
}

/// The trigger's `Triggered` condition as (status, reason, message).
fn triggered(t: &PodSnapshotManualTrigger) -> Option<(String, String, String)> {
    let c = t
        .status
        .as_ref()?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(|v| v.as_str()) == Some("Triggered"))?;
    let field = |k: &str| {
        c.get(k)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    Some((field("status"), field("reason"), field("message")))
}

fn failed(t: Option<&PodSnapshotManualTrigger>) -> bool {
    t.and_then(triggered).is_some_and(|(s, _, _)| s == "False")
}

/// Waits for the Workspace `name` to be Paused within `wf`'s budget; a failed checkpoint of
/// the pause in progress ends the wait at once. Returns the Workspace as last seen.
pub async fn until_paused(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    wf: &WaitFor,
) -> Result<Option<Workspace>, PauseError> {
    let api: Api<Workspace> = Api::namespaced(client.clone(), namespace);
    let paused = wait::until(&api, name, wf, ws::describe, |o| {
        ws::is_state(o, WorkspaceState::Paused)
    });
    tokio::pin!(paused);
    let failure = checkpoint_failure(client, namespace, name, wf);
    tokio::pin!(failure);
    tokio::select! {
        biased;
        done = &mut paused => Ok(done?),
        found = &mut failure => match found {
            Some(e) => Err(e),
            // The trigger cannot be watched here: the Workspace alone decides.
            None => Ok(paused.await?),
        },
    }
}

/// Watches the workspace's trigger until it fails while the Workspace is `Checkpointing`;
/// `None` when the trigger cannot be watched (no such kind, no permission, budget spent).
async fn checkpoint_failure(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    wf: &WaitFor,
) -> Option<PauseError> {
    let trigger = snapshots::trigger_name(name);
    let triggers: Api<PodSnapshotManualTrigger> = Api::namespaced(client.clone(), namespace);
    let workspaces: Api<Workspace> = Api::namespaced(client.clone(), namespace);
    let mut quiet = wf.clone();
    quiet.progress_every = None;
    loop {
        let found = wait::until_unspanned(&triggers, &trigger, &quiet, |_| String::new(), failed)
            .await
            .ok()??;
        let checkpointing = workspaces.get_opt(name).await.ok()?.is_some_and(|w| {
            w.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(CHECKPOINT_STATE))
                .is_some_and(|s| s == "Checkpointing")
        });
        if !checkpointing {
            tokio::time::sleep(STALE_TRIGGER_RECHECK).await;
            continue;
        }
        let (_, reason, message) = triggered(&found).unwrap_or_default();
        let snapshot = snapshots::of_workspace(client, namespace, name)
            .await
            .unwrap_or_default()
            .iter()
            .filter_map(|s| {
                let why = snapshots::checkpoint_failure(s)?;
                Some(format!(
                    "; PodSnapshot {} {why}",
                    s.metadata.name.as_deref().unwrap_or("?")
                ))
            })
            .collect();
        return Some(PauseError::CheckpointFailed {
            trigger,
            reason,
            message,
            snapshot,
        });
    }
}

/// A watch over one Workspace, started just before a pause or resume request, that records
/// when it was first seen `Checkpointing` (the add-on's `checkpoint-state` annotation) and
/// first seen in each state: the moments phases end, stamped from the watch event that
/// shows them, not when a later step looks. Stops when dropped.
pub struct WorkspaceWatch {
    seen: std::sync::Arc<std::sync::Mutex<FirstSeen>>,
    task: tokio::task::JoinHandle<()>,
}

/// What a [`WorkspaceWatch`] saw first, and when.
#[derive(Debug, Default)]
struct FirstSeen {
    checkpointing: Option<super::attempts::Seen>,
    states: Vec<(WorkspaceState, super::attempts::Seen)>,
}

impl FirstSeen {
    fn record(&mut self, w: &Workspace) {
        if is_checkpointing(w) {
            self.checkpointing
                .get_or_insert_with(super::attempts::Seen::now);
        }
        let state = w.status.as_ref().map(|s| s.state).unwrap_or_default();
        if !self.states.iter().any(|(s, _)| *s == state) {
            self.states.push((state, super::attempts::Seen::now()));
        }
    }
}

impl WorkspaceWatch {
    /// Starts watching `namespace/name`; returns once the first list is in (within
    /// `within`, the caller's named budget), so a change after this call is not missed. What
    /// the first list shows is not counted: a `Checkpointing` left by an earlier, failed
    /// pause is not this pause's, and the state before the request is not its outcome.
    pub async fn start(
        client: &kube::Client,
        namespace: &str,
        name: &str,
        within: Duration,
    ) -> Result<Self, String> {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};

        let api: Api<Workspace> = Api::namespaced(client.clone(), namespace);
        let seen = std::sync::Arc::new(std::sync::Mutex::new(FirstSeen::default()));
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
        let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let record = seen.clone();
        let task = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut stream = watcher(api, cfg).default_backoff().boxed();
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(watcher::Event::Apply(w)) => {
                        record.lock().unwrap_or_else(|e| e.into_inner()).record(&w);
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                    }
                    _ => {}
                }
            }
        });
        match tokio::time::timeout(within, ready_rx).await {
            Ok(Ok(())) => Ok(Self { seen, task }),
            Ok(Err(_)) => Err("the Workspace watch ended before its first list".to_string()),
            Err(_) => {
                task.abort();
                Err(format!(
                    "the Workspace watch gave no first list within {within:?}"
                ))
            }
        }
    }

    /// When the Workspace was first seen `Checkpointing` since [`Self::start`].
    pub fn checkpointing(&self) -> Option<super::attempts::Seen> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .checkpointing
    }

    /// When the Workspace was first seen in `state` since [`Self::start`].
    pub fn first(&self, state: WorkspaceState) -> Option<super::attempts::Seen> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .states
            .iter()
            .find(|(s, _)| *s == state)
            .map(|(_, at)| *at)
    }
}

impl Drop for WorkspaceWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn is_checkpointing(w: &Workspace) -> bool {
    w.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CHECKPOINT_STATE))
        .is_some_and(|s| s == "Checkpointing")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger(status: serde_json::Value) -> PodSnapshotManualTrigger {
        let mut t = PodSnapshotManualTrigger::new("ws-x-trigger", Default::default());
        t.status = Some(status);
        t
    }

    #[test]
    fn only_a_false_triggered_condition_is_a_failure() {
        let failed_one = trigger(serde_json::json!({"conditions": [
            {"type": "Triggered", "status": "False", "reason": "Failed", "message": "runsc said no"}
        ]}));
        assert!(failed(Some(&failed_one)));
        assert_eq!(
            triggered(&failed_one),
            Some(("False".into(), "Failed".into(), "runsc said no".into()))
        );
        let pending = trigger(serde_json::json!({"conditions": [
            {"type": "Triggered", "status": "Unknown"}
        ]}));
        assert!(!failed(Some(&pending)));
        assert!(!failed(Some(&trigger(serde_json::json!({})))));
        assert!(!failed(None));
    }

    #[test]
    fn the_failure_names_the_trigger_condition_and_what_it_costs() {
        let e = PauseError::CheckpointFailed {
            trigger: "ws-x-trigger".into(),
            reason: "Failed".into(),
            message: "runsc said no".into(),
            snapshot: String::new(),
        };
        assert_eq!(
            e.to_string(),
            "checkpoint failed: trigger ws-x-trigger Triggered=False Failed: runsc said no; the \
             workspace stays in Checkpointing with its pod running and its GPU held"
        );
    }
}

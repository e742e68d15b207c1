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
use kube::runtime::watcher;

use super::attempts::Seen;
use super::board::FirstStates;
use super::crd::{PodSnapshotManualTrigger, Workspace, WorkspaceState};
use super::snapshots;
use super::wait::{self, WaitError, WaitFor};
use super::watched::{Observe, Watched};
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
/// shows them, not when a later step looks. Beside it, a watch over the Workspace's
/// PodSnapshots (the add-on's trigger label) records when each was first seen Ready and
/// when the last of them was gone. Stops when dropped.
pub struct WorkspaceWatch {
    workspace: Watched<WorkspaceLog>,
    /// `None` where the target has no PodSnapshot kind, or the harness may not watch it:
    /// the steps then stamp when they look.
    snapshots: Option<Watched<SnapshotLog>>,
}

/// What a [`WorkspaceWatch`] saw of the Workspace first, and when. What the first list
/// shows is not counted: a `Checkpointing` left by an earlier, failed pause is not this
/// pause's, and the state before the request is not its outcome.
#[derive(Debug, Default)]
struct WorkspaceLog {
    checkpointing: Option<Seen>,
    /// First seen waiting for resources ([`ws::waits_for_resources`]).
    waiting: Option<Seen>,
    states: FirstStates,
    /// Whether the first list is done: what it shows is the state before the request, not
    /// a transition; what a later relist shows (the watch expired or was dropped) is.
    listed_once: bool,
}

impl WorkspaceLog {
    fn saw(&mut self, w: &Workspace) {
        if is_checkpointing(w) {
            self.checkpointing.get_or_insert_with(Seen::now);
        }
        if ws::waits_for_resources(Some(w)) {
            self.waiting.get_or_insert_with(Seen::now);
        }
        self.states
            .saw(w.status.as_ref().map(|s| s.state).unwrap_or_default());
    }
}

impl Observe<Workspace> for WorkspaceLog {
    fn event(&mut self, ev: watcher::Event<Workspace>) {
        match ev {
            watcher::Event::Apply(w) => self.saw(&w),
            // A transition made while the watch was re-listing arrives in the relist only.
            watcher::Event::InitApply(w) if self.listed_once => self.saw(&w),
            watcher::Event::InitDone => self.listed_once = true,
            _ => {}
        }
    }
}

/// What a [`WorkspaceWatch`] saw of the Workspace's PodSnapshots.
#[derive(Debug, Default)]
struct SnapshotLog {
    /// By name: first seen Ready after the start (one Ready in the first list is an
    /// earlier pause's, not stamped).
    ready: Vec<(String, Seen)>,
    /// The PodSnapshots that exist now.
    alive: std::collections::BTreeSet<String>,
    /// When the last one was gone, after at least one had been seen.
    gone: Option<Seen>,
    /// The names the (re)list in progress shows.
    listed: std::collections::BTreeSet<String>,
    /// Whether the first list is done.
    listed_once: bool,
}

impl SnapshotLog {
    fn apply(&mut self, s: &super::crd::PodSnapshot) {
        let Some(name) = s.metadata.name.clone() else {
            return;
        };
        if self.listed_once && snapshots::is_ready(s) && !self.ready.iter().any(|(n, _)| *n == name)
        {
            self.ready.push((name.clone(), Seen::now()));
        }
        self.alive.insert(name);
        self.gone = None;
    }

    fn remove(&mut self, name: &str) {
        if self.alive.remove(name) && self.alive.is_empty() {
            self.gone = Some(Seen::now());
        }
    }
}

impl Observe<super::crd::PodSnapshot> for SnapshotLog {
    fn event(&mut self, ev: watcher::Event<super::crd::PodSnapshot>) {
        match ev {
            watcher::Event::Apply(s) => self.apply(&s),
            watcher::Event::InitApply(s) => {
                self.listed.extend(s.metadata.name.clone());
                self.apply(&s);
            }
            watcher::Event::Delete(s) => self.remove(s.metadata.name.as_deref().unwrap_or("")),
            watcher::Event::Init => self.listed.clear(),
            watcher::Event::InitDone => {
                // One deleted while the watch was down sends no Delete.
                let gone: Vec<String> = self.alive.difference(&self.listed).cloned().collect();
                for name in gone {
                    self.remove(&name);
                }
                self.listed_once = true;
            }
        }
    }
}

impl WorkspaceWatch {
    /// Starts watching `namespace/name` and its PodSnapshots; returns once both first lists
    /// are in (within `within`, the caller's named budget), so a change after this call is
    /// not missed. A PodSnapshot watch that cannot start is left out (the steps then stamp
    /// when they look); a Workspace watch that cannot start is the error.
    pub async fn start(
        client: &kube::Client,
        namespace: &str,
        name: &str,
        within: Duration,
    ) -> Result<Self, String> {
        let (workspace, snapshots) = tokio::join!(
            Watched::start(
                Api::<Workspace>::namespaced(client.clone(), namespace),
                watcher::Config::default().fields(&format!("metadata.name={name}")),
                WorkspaceLog::default(),
                within,
                "the Workspace watch",
            ),
            Watched::start(
                Api::<super::crd::PodSnapshot>::namespaced(client.clone(), namespace),
                watcher::Config::default().labels(&format!(
                    "{}={}",
                    snapshots::TRIGGERED_BY,
                    snapshots::trigger_name(name)
                )),
                SnapshotLog::default(),
                within,
                "the PodSnapshot watch",
            ),
        );
        let snapshots = snapshots
            .inspect_err(
                |e| tracing::debug!(error = %e, "the steps stamp snapshots when they look"),
            )
            .ok();
        Ok(Self {
            workspace: workspace?,
            snapshots,
        })
    }

    /// When PodSnapshot `name` was first seen Ready since [`Self::start`].
    pub fn snapshot_ready(&self, name: &str) -> Option<Seen> {
        let log = self.snapshots.as_ref()?.log();
        log.ready.iter().find(|(n, _)| n == name).map(|(_, at)| *at)
    }

    /// When the last of the Workspace's PodSnapshots was seen gone, if none is left now.
    pub fn snapshots_gone(&self) -> Option<Seen> {
        self.snapshots.as_ref()?.log().gone
    }

    /// When the Workspace was first seen `Checkpointing` since [`Self::start`].
    pub fn checkpointing(&self) -> Option<Seen> {
        self.workspace.log().checkpointing
    }

    /// When the Workspace was first seen waiting for resources (not Running, its message
    /// naming quota, insufficient GPUs or an unschedulable pod) since [`Self::start`].
    pub fn waiting(&self) -> Option<Seen> {
        self.workspace.log().waiting
    }

    /// When the Workspace was first seen in `state` since [`Self::start`].
    pub fn first(&self, state: WorkspaceState) -> Option<Seen> {
        self.workspace.log().states.get(state)
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
    use crate::platform::crd::PodSnapshot;

    fn snapshot(name: &str, ready: bool) -> PodSnapshot {
        let mut s = PodSnapshot::new(name, Default::default());
        s.status = Some(serde_json::json!({"conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" }}
        ]}));
        s
    }

    /// A Ready snapshot in the first list is an earlier pause's: not stamped. One that turns
    /// Ready after it is stamped once, at its first sighting; the last one gone is stamped,
    /// also when a relist shows it gone (its Delete was missed while the watch was down).
    #[test]
    fn snapshots_are_stamped_when_the_watch_sees_them_change() {
        let mut log = SnapshotLog::default();
        log.event(watcher::Event::Init);
        log.event(watcher::Event::InitApply(snapshot("old", true)));
        log.event(watcher::Event::InitDone);
        assert!(log.ready.is_empty());
        log.event(watcher::Event::Apply(snapshot("new", false)));
        assert!(log.ready.is_empty());
        log.event(watcher::Event::Apply(snapshot("new", true)));
        let first = log.ready.clone();
        log.event(watcher::Event::Apply(snapshot("new", true)));
        assert_eq!(log.ready, first);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].0, "new");
        log.event(watcher::Event::Delete(snapshot("old", true)));
        assert!(log.gone.is_none(), "one is left");
        // The watch expired; `new` was deleted meanwhile and the relist lists nothing.
        log.event(watcher::Event::Init);
        log.event(watcher::Event::InitDone);
        assert!(log.gone.is_some());
        assert!(log.alive.is_empty());
        // A new one coming back means they are not gone any more.
        log.event(watcher::Event::Apply(snapshot("again", false)));
        assert!(log.gone.is_none());
    }

    fn workspace(state: WorkspaceState) -> Workspace {
        let mut w = Workspace::new("ws", Default::default());
        w.status = Some(super::super::crd::WorkspaceStatus {
            state,
            ..Default::default()
        });
        w
    }

    /// The first list shows the state before the request (not stamped); a state first seen
    /// in a later relist (the watch was down when it changed) is stamped, once.
    #[test]
    fn a_state_first_seen_in_a_relist_is_stamped() {
        let mut log = WorkspaceLog::default();
        log.event(watcher::Event::Init);
        log.event(watcher::Event::InitApply(workspace(WorkspaceState::Paused)));
        log.event(watcher::Event::InitDone);
        assert!(log.states.get(WorkspaceState::Paused).is_none());
        log.event(watcher::Event::Apply(workspace(WorkspaceState::Pending)));
        assert!(log.states.get(WorkspaceState::Pending).is_some());
        assert!(log.states.get(WorkspaceState::Running).is_none());
        // The watch expired; it went Running meanwhile.
        log.event(watcher::Event::Init);
        log.event(watcher::Event::InitApply(workspace(
            WorkspaceState::Running,
        )));
        let running = log.states.get(WorkspaceState::Running).expect("stamped");
        log.event(watcher::Event::InitDone);
        log.event(watcher::Event::Apply(workspace(WorkspaceState::Running)));
        assert_eq!(log.states.get(WorkspaceState::Running), Some(running));
    }

    /// Waiting for resources is stamped when the watch first sees the state whose message
    /// names the cause (upstream: `Error` with the StatefulSet's quota warning), not when
    /// it first sees the Workspace not Running; and once.
    #[test]
    fn waiting_for_resources_is_stamped_when_its_message_is_first_seen() {
        let with_message = |state, message: &str| {
            let mut w = workspace(state);
            if let Some(s) = w.status.as_mut() {
                s.state_message = message.to_string();
            }
            w
        };
        let mut log = WorkspaceLog::default();
        log.event(watcher::Event::Init);
        log.event(watcher::Event::InitApply(workspace(WorkspaceState::Paused)));
        log.event(watcher::Event::InitDone);
        log.event(watcher::Event::Apply(with_message(
            WorkspaceState::Unknown,
            "Workspace is in an unknown state",
        )));
        assert!(log.waiting.is_none(), "not waiting yet: no cause named");
        log.event(watcher::Event::Apply(with_message(
            WorkspaceState::Error,
            "Workspace StatefulSet has warning event: pods \"ws-0\" is forbidden: exceeded quota: wsgate-squeeze",
        )));
        let first = log.waiting.expect("stamped");
        log.event(watcher::Event::Apply(with_message(
            WorkspaceState::Error,
            "Workspace Pod is unschedulable: 0/2 nodes are available",
        )));
        assert_eq!(log.waiting, Some(first));
        // Running with an old message is not waiting.
        let mut fresh = WorkspaceLog::default();
        fresh.event(watcher::Event::InitDone);
        fresh.event(watcher::Event::Apply(with_message(
            WorkspaceState::Running,
            "exceeded quota",
        )));
        assert!(fresh.waiting.is_none());
    }

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

//! The trial's platform steps: create the Workspace, wait for its states, pause, find the
//! snapshot the pause made, resume, delete. Every write is bound to the uid of the Workspace
//! this run created.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use serde::{Deserialize, Serialize};

use super::TrialError;
use crate::config::Config;
use crate::platform::attempts::{AttemptWatch, Seen};
use crate::platform::crd::{PodSnapshot, Workspace, WorkspaceState};
use crate::platform::ledger::Ledger;
use crate::platform::pause::{self, PauseError, WorkspaceWatch};
use crate::platform::wait::{self, WaitFor};
use crate::platform::workspace::{self as ws, NewWorkspace};
use crate::platform::{idempotent, snapshots};

/// A PodSnapshot by name and uid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRef {
    /// `metadata.name`: a UUID GKE makes; what the `PodRestored` message names.
    pub name: String,
    /// `metadata.uid` (the API server's): the prefix of the snapshot's bucket objects.
    pub uid: String,
}

/// The resume: when it was requested, and the pod watch that has run since (restore
/// attempts in flight, Ready, `PodRestored`).
pub struct Resumed {
    pub watch: Arc<AttemptWatch>,
    pub at: Seen,
}

/// One Workspace this run created, through the trial's steps.
pub struct Trial {
    client: kube::Client,
    pub workspace: NewWorkspace,
    /// The Workspace's uid, from its create: every later write is bound to it.
    pub uid: String,
    /// The node its pod ran on when the pause was requested.
    pub node_before_pause: Option<String>,
    /// The marker stored in the kernel before the pause, once stored.
    pub marked: Option<super::Marked>,
    /// The newest Ready PodSnapshot, once looked for (after the pause, before the resume):
    /// the one the resume should restore from.
    pub snapshot: Option<SnapshotRef>,
    /// Whether [`Trial::snapshot`] was Ready when last looked at before the resume: only
    /// then is there something to restore from, and `PodRestored` worth waiting for.
    pub snapshot_ready: bool,
    /// The resume, once requested.
    pub resumed: Option<Resumed>,
    /// The Workspace watch of the last watched pause or resume: when each state was first
    /// seen after the request.
    watch: Option<WorkspaceWatch>,
    /// The files written through exec before the pause (the stateless kind's check).
    pub editor: Option<super::EditorFiles>,
    /// The Workspace as the last [`Trial::wait_state`] saw it, taken by the next pause or
    /// resume request as its first guess of the current version ([`ws::set_paused_from`]).
    last_seen: std::sync::Mutex<Option<Workspace>>,
}

impl Trial {
    /// The Workspace the config describes: its kind and options, a home PVC named after it.
    pub fn from_config(
        cfg: &Config,
        name: String,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    ) -> NewWorkspace {
        NewWorkspace {
            namespace: cfg.target.namespace.clone(),
            home_pvc: format!("{name}-home"),
            name,
            kind: cfg.workspace.kind.clone(),
            image_config: cfg.workspace.image_config.clone(),
            pod_config: cfg.workspace.pod_config.clone(),
            home_size: cfg.workspace.home_pvc_size.clone(),
            labels,
            annotations,
        }
    }

    /// Creates the home PVC and the Workspace, both recorded in `ledger` before they exist.
    pub async fn create(
        client: &kube::Client,
        ledger: &mut Ledger,
        new: NewWorkspace,
    ) -> Result<Trial, TrialError> {
        ws::create_home(client, ledger, &new).await?;
        let uid = ws::create(client, ledger, &new)
            .await?
            .metadata
            .uid
            .ok_or_else(|| {
                TrialError::Gone(format!(
                    "workspace {}/{} was created without a uid",
                    new.namespace, new.name
                ))
            })?;
        Ok(Trial::adopt(client, new, uid))
    }

    /// A trial over a Workspace an earlier step of this run created (the gate's verify,
    /// from its state file): `uid` is the one its create returned.
    pub fn adopt(client: &kube::Client, workspace: NewWorkspace, uid: String) -> Trial {
        Trial {
            client: client.clone(),
            workspace,
            uid,
            node_before_pause: None,
            marked: None,
            snapshot: None,
            snapshot_ready: false,
            resumed: None,
            watch: None,
            editor: None,
            last_seen: Default::default(),
        }
    }

    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    fn api(&self) -> Api<Workspace> {
        Api::namespaced(self.client.clone(), &self.workspace.namespace)
    }

    /// A wait for `state` within the budget `budget` of the config.
    pub fn wait_for(
        cfg: &Config,
        budget: &str,
        state: WorkspaceState,
    ) -> Result<WaitFor, TrialError> {
        let limit = cfg
            .budgets
            .get(budget)
            .ok_or_else(|| TrialError::Config(format!("unknown budget {budget:?}")))?;
        Ok(WaitFor::new(budget, limit, format!("be {state}")))
    }

    /// Waits for `state` within `wf`. A pause waits for the checkpoint too (a failed one
    /// ends the wait with why, a slow one says where the snapshots stood). A Workspace seen
    /// with another uid is a namesake: the trial stops and leaves it alone. Returns when the
    /// state was first seen, as the watch of a watched pause or resume saw it. Keeps the
    /// Workspace it ended on for the next pause or resume (see [`Trial::pause`]), and
    /// forgets the one an earlier wait kept.
    pub async fn wait_state(
        &self,
        wf: &WaitFor,
        state: WorkspaceState,
    ) -> Result<Option<Seen>, TrialError> {
        let (ns, name) = (&self.workspace.namespace, &self.workspace.name);
        self.take_last_seen();
        let seen = if state == WorkspaceState::Paused {
            match pause::until_paused(&self.client, ns, name, wf).await {
                Ok(seen) => seen,
                Err(PauseError::Wait(wait)) => {
                    let snapshots = match self.snapshots().await {
                        Ok(snaps) => snapshots::summarize(&snaps),
                        Err(e) => vec![crate::output::one_line(&e)],
                    };
                    return Err(TrialError::PauseBudget {
                        wait: Box::new(wait),
                        snapshots,
                    });
                }
                Err(e) => return Err(e.into()),
            }
        } else {
            wait::until(&self.api(), name, wf, ws::describe, |o| {
                ws::is_state(o, state)
            })
            .await?
        };
        match seen.as_ref().and_then(|w| w.metadata.uid.clone()) {
            Some(theirs) if theirs != self.uid => Err(TrialError::Replaced {
                workspace: format!("{ns}/{name}"),
                ours: self.uid.clone(),
                theirs,
            }),
            _ => {
                *self.last_seen.lock().unwrap_or_else(|e| e.into_inner()) = seen;
                Ok(self.watch.as_ref().and_then(|w| w.first(state)))
            }
        }
    }

    /// When the Workspace was first seen `Checkpointing` after a watched pause.
    pub fn checkpointing(&self) -> Option<Seen> {
        self.watch.as_ref().and_then(WorkspaceWatch::checkpointing)
    }

    /// When the last watched pause or resume first saw the Workspace wait for resources.
    pub fn waiting_for_resources(&self) -> Option<Seen> {
        self.watch.as_ref().and_then(WorkspaceWatch::waiting)
    }

    /// When PodSnapshot `name` was first seen Ready by the last watched pause or resume.
    pub fn snapshot_ready_seen(&self, name: &str) -> Option<Seen> {
        self.watch.as_ref().and_then(|w| w.snapshot_ready(name))
    }

    /// When the watch of the last watched pause or resume saw the last of the Workspace's
    /// PodSnapshots gone (none is left now).
    pub fn snapshots_gone_seen(&self) -> Option<Seen> {
        self.watch.as_ref().and_then(WorkspaceWatch::snapshots_gone)
    }

    /// Starts the Workspace watch that sees what the next request does, within `within`
    /// for its first list.
    async fn watch(&mut self, within: Duration) -> Result<(), TrialError> {
        let (ns, name) = (&self.workspace.namespace, &self.workspace.name);
        let watch = WorkspaceWatch::start(&self.client, ns, name, within)
            .await
            .map_err(TrialError::WorkspaceWatch)?;
        self.watch = Some(watch);
        Ok(())
    }

    /// [`Trial::pause`] under a Workspace watch started first (within `within`), so the
    /// moments it turns `Checkpointing` and `Paused` are stamped as they are seen. Returns
    /// when the pause was requested.
    pub async fn pause_watched(&mut self, within: Duration) -> Result<Seen, TrialError> {
        self.watch(within).await?;
        self.pause().await
    }

    /// The workspace's pods (normally zero or one).
    pub async fn pods(&self) -> Result<Vec<Pod>, TrialError> {
        Ok(ws::pods(
            &self.client,
            &self.workspace.namespace,
            &self.workspace.name,
        )
        .await?)
    }

    /// Its current pod: the one not terminating.
    pub async fn current_pod(&self) -> Result<Option<Pod>, TrialError> {
        Ok(self
            .pods()
            .await?
            .into_iter()
            .find(|p| p.metadata.deletion_timestamp.is_none()))
    }

    /// Requests the pause (once: see [`ws::set_paused`]), after noting the node its pod runs
    /// on, starting from the version the last wait saw unless the marker was stored or files
    /// were written since ([`ws::set_paused_from`]). Returns when it was requested.
    pub async fn pause(&mut self) -> Result<Seen, TrialError> {
        let pods = self.pods().await?;
        self.node_before_pause = pods.iter().find_map(|p| p.spec.as_ref()?.node_name.clone());
        let (ns, name) = (&self.workspace.namespace, &self.workspace.name);
        let at = Seen::now();
        // The culler's probes rewrite a Running Workspace's status now and then: after the
        // seconds that storing the marker or writing files takes, the version seen by the
        // wait is likely stale, and starting from it would cost a 409. A Paused Workspace is
        // left alone until resumed.
        let fresh = self.marked.is_none() && self.editor.is_none();
        let seen = self.take_last_seen().filter(|_| fresh);
        ws::set_paused_from(&self.client, ns, name, &self.uid, true, seen).await?;
        Ok(at)
    }

    /// The workspace's PodSnapshots.
    pub async fn snapshots(&self) -> Result<Vec<PodSnapshot>, TrialError> {
        let (ns, name) = (&self.workspace.namespace, &self.workspace.name);
        snapshots::of_workspace(&self.client, ns, name)
            .await
            .map_err(|source| TrialError::Api {
                what: format!("list the PodSnapshots of workspace {ns}/{name}"),
                source,
            })
    }

    /// Finds the newest Ready PodSnapshot (the one a resume restores from) and keeps it as
    /// [`Trial::snapshot`]; returns every snapshot seen, for messages and the bucket checks.
    pub async fn find_ready_snapshot(&mut self) -> Result<Vec<PodSnapshot>, TrialError> {
        let snaps = self.snapshots().await?;
        self.snapshot = snaps
            .iter()
            .filter(|s| snapshots::is_ready(s))
            .max_by_key(|s| s.metadata.creation_timestamp.clone())
            .and_then(|s| {
                Some(SnapshotRef {
                    name: s.metadata.name.clone()?,
                    uid: s.metadata.uid.clone()?,
                })
            });
        self.snapshot_ready = self.snapshot.is_some();
        Ok(snaps)
    }

    /// Whether the snapshot the trial expects ([`Trial::snapshot`], e.g. from a gate's
    /// state file) is still there and Ready; kept as [`Trial::snapshot_ready`].
    pub async fn check_snapshot_ready(&mut self) -> Result<bool, TrialError> {
        self.snapshot_ready = match &self.snapshot {
            None => false,
            Some(want) => self.snapshots().await?.iter().any(|s| {
                s.metadata.name.as_deref() == Some(want.name.as_str()) && snapshots::is_ready(s)
            }),
        };
        Ok(self.snapshot_ready)
    }

    /// Requests the resume, with a pod watch of its own started first (every pod of the
    /// workspace from here on is a restore attempt, even one cleaned up before anyone
    /// looks) and a Workspace watch, so the moment it is Running again is stamped as it is
    /// seen. Both watches list within `within`. Returns when the resume was requested.
    pub async fn resume_watched(&mut self, within: Duration) -> Result<Seen, TrialError> {
        let pods = self.attempt_watch(within).await?;
        self.watch(within).await?;
        self.request_resume(pods).await
    }

    /// Requests the resume under a namespace's pod watch already running (the drill resumes
    /// many workspaces under one, marked resumed by the caller).
    pub async fn resume_under(&mut self, pods: Arc<AttemptWatch>) -> Result<Seen, TrialError> {
        // What a pause's watch saw (the state stays Running while it checkpoints) is not
        // this resume's.
        self.watch = None;
        self.request_resume(pods).await
    }

    async fn attempt_watch(&self, within: Duration) -> Result<Arc<AttemptWatch>, TrialError> {
        let pods = AttemptWatch::start(&self.client, &self.workspace.namespace, within)
            .await
            .map_err(TrialError::PodWatch)?;
        pods.mark_resumed();
        Ok(Arc::new(pods))
    }

    async fn request_resume(&mut self, pods: Arc<AttemptWatch>) -> Result<Seen, TrialError> {
        let at = Seen::now();
        self.resumed = Some(Resumed { watch: pods, at });
        let (ns, name) = (&self.workspace.namespace, &self.workspace.name);
        let seen = self.take_last_seen();
        ws::set_paused_from(&self.client, ns, name, &self.uid, false, seen).await?;
        Ok(at)
    }

    /// Forgets what the last wait saw of the Workspace, after a step that wrote to it: the
    /// next pause or resume then reads it first.
    pub fn forget_seen(&self) {
        self.take_last_seen();
    }

    /// What the last wait saw of the Workspace, once.
    fn take_last_seen(&self) -> Option<Workspace> {
        self.last_seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Deletes the Workspace, bound to its uid (a namesake is not deleted).
    pub async fn delete(&self) -> Result<(), kube::Error> {
        let dp = DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        idempotent::delete(&self.api(), &self.workspace.name, &dp)
            .await
            .map(drop)
    }
}

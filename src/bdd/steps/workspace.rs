//! Workspace lifecycle steps: create, pause, resume, state within a budget, pods, GPUs,
//! snapshots.

use cucumber::{given, then, when};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use crate::bdd::world::{StepResult, WsWorld, said};
use crate::platform::crd::WorkspaceState;
use crate::platform::wait::{self, WaitFor};
use crate::platform::workspace as ws;
use crate::platform::{gpu, snapshots};
use crate::timeline::Mark;
use crate::trial::Trial;

fn state_of(name: &str) -> Result<WorkspaceState, String> {
    match name {
        "Running" => Ok(WorkspaceState::Running),
        "Paused" => Ok(WorkspaceState::Paused),
        "Pending" => Ok(WorkspaceState::Pending),
        "Error" => Ok(WorkspaceState::Error),
        other => Err(format!(
            "unknown workspace state {other:?} (Running, Paused, Pending, Error)"
        )),
    }
}

/// Puts the run's Jupyter token into the namespace's Secret, owned by the run, not by this
/// scenario (see `RunContext::shared`): a scenario's cleanup must not delete it under the
/// feet of scenarios running beside it. Later puts find it and only update it.
pub(crate) async fn ensure_token(w: &WsWorld) -> StepResult {
    let mut shared = w.ctx.shared.lock().await;
    ws::put_token(
        &w.ctx.client,
        &mut shared,
        &w.ctx.config.target.namespace,
        w.ctx.token.expose(),
        &w.ctx.labels(),
    )
    .await
    .map_err(|e| said(&e))
}

/// Creates a Workspace of `kind` with podConfig `pod_config` and waits for it to be Running.
pub(crate) async fn create_running(
    w: &mut WsWorld,
    kind: String,
    pod_config: String,
) -> StepResult {
    let image_config = w.ctx.config.workspace.image_config.clone();
    create_running_with(w, kind, image_config, pod_config).await
}

/// Creates a Workspace of `kind` with imageConfig `image_config` and podConfig `pod_config`
/// and waits for it to be Running.
pub(crate) async fn create_running_with(
    w: &mut WsWorld,
    kind: String,
    image_config: String,
    pod_config: String,
) -> StepResult {
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..6];
    let name = format!("wsgate-{suffix}");
    let mut labels = w.ctx.labels();
    labels.insert("wsgate.dev/scenario".into(), suffix.to_string());
    let mut new = Trial::from_config(&w.ctx.config, name.clone(), labels, Default::default());
    new.kind = kind;
    new.image_config = image_config;
    new.pod_config = pod_config;
    ensure_token(w).await?;
    let trial = Trial::create(&w.ctx.client, &mut w.ledger, new)
        .await
        .map_err(|e| said(&e))?;
    w.mark(Mark::WorkspaceCreated, Some(name));
    w.trial = Some(trial);
    wait_state(w, WorkspaceState::Running, "workspace_running").await
}

#[given(expr = "a snapshot-enabled GPU workspace is Running")]
async fn snapshot_enabled_running(w: &mut WsWorld) -> StepResult {
    let kind = w.ctx.config.workspace.kind.clone();
    let pod_config = w.ctx.config.workspace.pod_config.clone();
    create_running(w, kind, pod_config).await
}

#[given(expr = "a GPU workspace of kind {string} is Running")]
async fn kind_running(w: &mut WsWorld, kind: String) -> StepResult {
    let pod_config = w.ctx.config.workspace.pod_config.clone();
    create_running(w, kind, pod_config).await
}

/// Waits for a state within a named budget and records the observation.
pub async fn wait_state(w: &mut WsWorld, state: WorkspaceState, budget: &str) -> StepResult {
    let limit = w.budget(budget)?;
    let wf = WaitFor::new(budget, limit, format!("be {state}"));
    let trial = w.trial()?;
    // When the watch started at the request saw the state, not when this step returned.
    let seen = trial.wait_state(&wf, state).await.map_err(|e| said(&e))?;
    let checkpointing = trial.checkpointing();
    let name = trial.workspace.name.clone();
    // Its pod's binding, as the resume's pod watch saw it.
    let bound = trial
        .resumed
        .as_ref()
        .and_then(|r| r.watch.scheduled_seen(&name));
    let stamp = |w: &mut WsWorld, mark: Mark| match seen {
        Some(s) => w.mark_observed_at(mark, s.at, None),
        None => w.mark(mark, None),
    };
    let resumed = w.timeline.last(Mark::ResumeRequested).is_some();
    match state {
        WorkspaceState::Running if resumed => {
            stamp(w, Mark::WorkspaceResumed);
            if let Some(s) = bound
                && w.timeline.last(Mark::PodScheduled).is_none()
            {
                w.mark_observed_at(Mark::PodScheduled, s.at, None);
            }
        }
        WorkspaceState::Running => stamp(w, Mark::WorkspaceRunning),
        WorkspaceState::Paused => {
            stamp(w, Mark::WorkspacePaused);
            // Once per pause: the last Checkpointing mark is older than the last request.
            let requested = w.timeline.last(Mark::PauseRequested).map(|o| o.at);
            let marked = w.timeline.last(Mark::Checkpointing).map(|o| o.at);
            if let Some(s) = checkpointing
                && marked.is_none_or(|m| requested.is_some_and(|r| m < r))
            {
                w.mark_observed_at(Mark::Checkpointing, s.at, None);
            }
        }
        _ => {}
    }
    Ok(())
}

#[then(expr = "the workspace is {word} within the {string} budget")]
async fn is_state_within(w: &mut WsWorld, state: String, budget: String) -> StepResult {
    let state = state_of(&state)?;
    wait_state(w, state, &budget).await
}

#[when(expr = "the workspace is paused")]
async fn pause(w: &mut WsWorld) -> StepResult {
    // Watched from before the request, so the moments it turns Checkpointing and Paused
    // are seen as they happen.
    let within = w.budget("pause_to_paused")?;
    let at = w
        .trial_mut()?
        .pause_watched(within)
        .await
        .map_err(|e| said(&e))?;
    w.mark_observed_at(Mark::PauseRequested, at.at, None);
    Ok(())
}

#[when(expr = "the workspace is resumed")]
async fn resume(w: &mut WsWorld) -> StepResult {
    // The snapshot the resume should restore from: the newest Ready one.
    let trial = w.trial_mut()?;
    trial.find_ready_snapshot().await.map_err(|e| said(&e))?;
    let expected = trial.snapshot.as_ref().map(|s| s.name.clone());
    // Every pod of the workspace from here on is a restore attempt: the trial watches them
    // all from before the request, so one cleaned up before a later step looks still counts.
    let within = w.budget("resume_to_running")?;
    let trial = w.trial_mut()?;
    let at = trial.resume_watched(within).await.map_err(|e| said(&e))?;
    w.mark_observed_at(Mark::ResumeRequested, at.at, expected);
    Ok(())
}

#[then(expr = "the workspace has no pod")]
async fn no_pod(w: &mut WsWorld) -> StepResult {
    let new = w.ws()?.clone();
    let pods = ws::pods(&w.ctx.client, &new.namespace, &new.name)
        .await
        .map_err(|e| said(&e))?;
    if pods.is_empty() {
        w.mark(Mark::PodGone, None);
        Ok(())
    } else {
        let names: Vec<_> = pods
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        Err(format!("the paused workspace still has pods: {names:?}"))
    }
}

#[then(expr = "the GPU is free again within the {string} budget")]
async fn gpu_free(w: &mut WsWorld, budget: String) -> StepResult {
    let limit = w.budget(&budget)?;
    let node = w
        .trial()?
        .node_before_pause
        .clone()
        .ok_or("the workspace had no pod on a node before the pause")?;
    let deadline = tokio::time::Instant::now() + limit;
    // The node's GPU usage comes from the pods bound there; re-read on every pod change.
    let pods: Api<Pod> = Api::all(w.ctx.client.clone());
    loop {
        let nodes = gpu::nodes(&w.ctx.client).await.map_err(|e| said(&e))?;
        let n = nodes
            .iter()
            .find(|n| n.node == node)
            .ok_or(format!("node {node} has no GPUs"))?;
        if n.used < n.allocatable {
            w.mark(Mark::GpuReleased, Some(node));
            return Ok(());
        }
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        if remaining.is_zero() {
            return Err(format!(
                "budget `{budget}` ({limit:?}) ran out: node {node} still has {}/{} GPUs in use",
                n.used, n.allocatable
            ));
        }
        // Wake on the next pod change (or at the deadline), then look again.
        wait::next_change(
            &pods,
            None,
            remaining.min(std::time::Duration::from_secs(1)),
        )
        .await;
    }
}

#[then(expr = "a probe pod asking for the same accelerator gets scheduled")]
async fn probe_pod(w: &mut WsWorld) -> StepResult {
    let limit = w.budget("gpu_release")?;
    let ns = w.ws()?.namespace.clone();
    let accelerator = w.ctx.config.workspace.accelerator.clone();
    let labels = w.ctx.labels();
    let wf = WaitFor::new("gpu_release", limit, "be scheduled");
    let client = w.ctx.client.clone();
    // The GPU the workspace held must come back, not just any GPU of the model: with two
    // nodes, a probe free to land anywhere passes while the paused workspace's GPU leaks.
    let node = w.trial()?.node_before_pause.clone();
    gpu::probe_schedulable(
        &client,
        &mut w.ledger,
        &ns,
        &accelerator,
        node.as_deref(),
        &labels,
        &wf,
    )
    .await
    .map(|_| ())
    .map_err(|e| match &node {
        Some(node) => format!(
            "the GPU the workspace held on node {node} did not come back to the pool \
             (or another pod took it): {e}"
        ),
        None => e.to_string(),
    })
}

#[then(expr = "the workspace's PodSnapshot is Ready")]
async fn snapshot_ready(w: &mut WsWorld) -> StepResult {
    let new = w.ws()?.clone();
    let snaps = snapshots::of_workspace(&w.ctx.client, &new.namespace, &new.name)
        .await
        .map_err(|e| format!("cannot list PodSnapshots: {e}"))?;
    w.snapshots_seen
        .extend(snaps.iter().filter_map(|s| s.metadata.uid.clone()));
    match snaps.iter().find(|s| snapshots::is_ready(s)) {
        Some(s) => {
            // When the pause's watch saw it turn Ready; now (later) if it has not yet.
            let name = s.metadata.name.clone().unwrap_or_default();
            match w.trial()?.snapshot_ready_seen(&name) {
                Some(seen) => w.mark_observed_at(Mark::SnapshotReady, seen.at, Some(name)),
                None => w.mark(Mark::SnapshotReady, Some(name)),
            }
            Ok(())
        }
        None => Err(format!(
            "no Ready PodSnapshot for workspace {}; found: {:?}",
            new.name,
            snaps
                .iter()
                .map(|s| (
                    s.metadata.name.clone().unwrap_or_default(),
                    snapshots::describe(s)
                ))
                .collect::<Vec<_>>()
        )),
    }
}

#[when(expr = "the workspace's snapshots are deleted")]
async fn delete_snapshots(w: &mut WsWorld) -> StepResult {
    let new = w.ws()?.clone();
    let uid = w
        .ledger
        .uid_of::<crate::platform::crd::Workspace>(&new.namespace, &new.name);
    let claim = crate::platform::ownership::Claim::Run(w.ctx.run_id.clone());
    snapshots::delete_all(&w.ctx.client, &claim, &new.namespace, &new.name, uid)
        .await
        .map(|_| ())
        .map_err(|e| format!("cannot delete the PodSnapshots: {e}"))
}

#[then(expr = "the workspace's PodSnapshots are gone within the {string} budget")]
async fn snapshots_gone(w: &mut WsWorld, budget: String) -> StepResult {
    let limit = w.budget(&budget)?;
    let new = w.ws()?.clone();
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let snaps = snapshots::of_workspace(&w.ctx.client, &new.namespace, &new.name)
            .await
            .map_err(|e| format!("cannot list PodSnapshots: {e}"))?;
        w.snapshots_seen
            .extend(snaps.iter().filter_map(|s| s.metadata.uid.clone()));
        if snaps.is_empty() {
            // When the resume's watch saw the last one go; now if it has not yet.
            match w.trial()?.snapshots_gone_seen() {
                Some(seen) => w.mark_observed_at(Mark::SnapshotsCleanedUp, seen.at, None),
                None => w.mark(Mark::SnapshotsCleanedUp, None),
            }
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            let left = super::snapshots::left_behind(w, &snaps).await;
            let summary = left.summary();
            let hint = left
                .hint
                .as_deref()
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
            w.snapshots_left = Some(left);
            return Err(format!(
                "budget `{budget}` ({limit:?}) ran out: {summary}{hint}"
            ));
        }
        let api: Api<crate::platform::crd::PodSnapshot> =
            Api::namespaced(w.ctx.client.clone(), &new.namespace);
        let labels = format!(
            "{}={}",
            snapshots::TRIGGERED_BY,
            snapshots::trigger_name(&new.name)
        );
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        wait::next_change(
            &api,
            Some(&labels),
            remaining.min(std::time::Duration::from_secs(1)),
        )
        .await;
    }
}

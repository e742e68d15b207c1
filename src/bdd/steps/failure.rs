//! Restore-failure steps: ask the simulator for a per-workspace fault (through the
//! Kubernetes API, only on the simulator), and see what a user sees when the checkpoint fails:
//! the pause fails at once naming the trigger's condition, the workspace stays Checkpointing
//! with its GPU held, and no more than one checkpoint is made.

use cucumber::{given, then};

use crate::bdd::world::{StepResult, WsWorld};
use crate::platform::crd::Workspace;
use crate::platform::pause::{self, PauseError};
use crate::platform::wait::WaitFor;
use crate::platform::{gpu, snapshots, workspace as ws};
use crate::timeline::Mark;

/// The simulator's per-object fault annotation (`src/sim/faults.rs`; not imported: the
/// harness talks to the simulator only through the Kubernetes API).
const SIM_FAULT: &str = "sim.wsgate.dev/fault";

/// Puts a simulator fault on the scenario's Workspace; refused on a real cluster.
pub(crate) async fn inject(w: &mut WsWorld, fault: &str) -> StepResult {
    if !w.ctx.simulator {
        return Err(format!(
            "not applicable on a real cluster: the fault {fault:?} exists only in the simulator"
        ));
    }
    w.annotate_ws(SIM_FAULT, fault).await?;
    let new = w.ws()?.clone();
    w.log
        .push(format!("simulator fault {fault} on Workspace {}", new.name));
    Ok(())
}

#[given(expr = "the simulator will make the checkpoint fail for this workspace")]
async fn checkpoint_fails(w: &mut WsWorld) -> StepResult {
    inject(w, "checkpoint-fails").await
}

#[given(expr = "the simulator will resume this workspace on a node with another GPU model")]
async fn gpu_model_mismatch(w: &mut WsWorld) -> StepResult {
    inject(w, "gpu-model-mismatch").await
}

/// The pause of a workspace whose checkpoint fails: the add-on has no failure path
/// (gke-labs/workspaces `reconcile.go`), so the wait for Paused must end at once naming the
/// trigger's condition, and the workspace must be left `Checkpointing` with its pod running
/// and its GPU held. Logs the GPU-seconds held since the pause request.
#[then(expr = "the pause fails because the checkpoint failed")]
async fn pause_fails(w: &mut WsWorld) -> StepResult {
    let new = w.ws()?.clone();
    let client = w.ctx.client.clone();
    let wf = WaitFor::new("pause_to_paused", w.budget("pause_to_paused")?, "be Paused");
    let message = match pause::until_paused(&client, &new.namespace, &new.name, &wf).await {
        Ok(_) => {
            return Err(
                "the workspace paused although its checkpoint failed: the platform invents a \
                 failure path upstream's add-on does not have"
                    .into(),
            );
        }
        Err(PauseError::Wait(e)) => {
            return Err(format!(
                "the pause neither completed nor said that the checkpoint failed: {e}"
            ));
        }
        Err(e @ PauseError::CheckpointFailed { .. }) => e.to_string(),
    };
    let trigger = snapshots::trigger_name(&new.name);
    if !message.contains(&format!("trigger {trigger} Triggered=False")) {
        return Err(format!(
            "the failure does not name the trigger's condition: {message}"
        ));
    }
    let api: kube::Api<Workspace> = kube::Api::namespaced(client.clone(), &new.namespace);
    let cur = api
        .get_opt(&new.name)
        .await
        .map_err(|e| format!("cannot read Workspace {}: {e}", new.name))?
        .ok_or_else(|| format!("Workspace {} is gone after the failed pause", new.name))?;
    let state = cur
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(pause::CHECKPOINT_STATE))
        .cloned();
    if state.as_deref() != Some("Checkpointing") || cur.spec.paused {
        return Err(format!(
            "after the failed checkpoint the workspace is {} (checkpoint-state {state:?}, \
             spec.paused {}), not held in Checkpointing",
            ws::describe(Some(&cur)),
            cur.spec.paused
        ));
    }
    let pods = ws::pods(&client, &new.namespace, &new.name)
        .await
        .map_err(|e| e.to_string())?;
    let running: Vec<_> = pods
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .collect();
    let gpus: i64 = running.iter().map(|p| gpu::pod_gpus(p)).sum();
    if running.is_empty() || gpus == 0 {
        return Err(format!(
            "after the failed checkpoint the workspace has {} running pod(s) holding {gpus} GPU(s), \
             expected its pod running with its GPU held",
            running.len()
        ));
    }
    let held = w
        .timeline
        .last(Mark::PauseRequested)
        .map(|o| (chrono::Utc::now() - o.at).num_milliseconds().max(0) as f64 / 1000.0)
        .unwrap_or_default();
    let line = format!(
        "{message}; {gpus} GPU(s) held {held:.1} s since the pause request \
         ({:.1} GPU-seconds, and counting until the workspace is deleted)",
        held * gpus as f64
    );
    crate::say!("    {line}");
    w.log.push(line);
    Ok(())
}

#[then(expr = "at most one checkpoint was attempted")]
async fn one_checkpoint(w: &mut WsWorld) -> StepResult {
    let new = w.ws()?.clone();
    let snaps = snapshots::of_workspace(&w.ctx.client, &new.namespace, &new.name)
        .await
        .map_err(|e| format!("cannot list PodSnapshots: {e}"))?;
    if snaps.len() <= 1 {
        return Ok(());
    }
    Err(format!(
        "{} PodSnapshots for one pause: competing checkpoints ({:?})",
        snaps.len(),
        snaps
            .iter()
            .map(|s| (
                s.metadata.name.clone().unwrap_or_default(),
                snapshots::describe(s)
            ))
            .collect::<Vec<_>>()
    ))
}

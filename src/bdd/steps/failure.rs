//! Restore-failure steps: ask the simulator for a per-workspace fault (through the
//! Kubernetes API, only on the simulator), and see what a user sees when the checkpoint fails:
//! a readable state, the trigger's reason, and no more than one checkpoint.

use cucumber::{given, then};

use crate::bdd::world::{StepResult, WsWorld};
use crate::platform::crd::WorkspaceState;
use crate::platform::{snapshots, workspace as ws};

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
    let new = w.ws()?.clone();
    ws::annotate(&w.ctx.client, &new.namespace, &new.name, SIM_FAULT, fault)
        .await
        .map_err(|e| e.to_string())?;
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

#[then(expr = "the workspace says in plain words that the checkpoint failed")]
async fn says_checkpoint_failed(w: &mut WsWorld) -> StepResult {
    let new = w.ws()?.clone();
    let client = w.ctx.client.clone();
    let api: kube::Api<crate::platform::crd::Workspace> =
        kube::Api::namespaced(client.clone(), &new.namespace);
    let cur = api
        .get_opt(&new.name)
        .await
        .map_err(|e| format!("cannot read Workspace {}: {e}", new.name))?;
    let state = ws::describe(cur.as_ref());
    let readable = cur
        .as_ref()
        .and_then(|c| c.status.as_ref())
        .is_some_and(|s| s.state == WorkspaceState::Paused && !s.state_message.is_empty());
    if !readable {
        return Err(format!(
            "the workspace shows {state} after a failed checkpoint, not Paused with a message"
        ));
    }
    let snaps = snapshots::of_workspace(&client, &new.namespace, &new.name)
        .await
        .map_err(|e| format!("cannot list PodSnapshots: {e}"))?;
    let ready: Vec<_> = snaps
        .iter()
        .filter(|s| snapshots::is_ready(s))
        .filter_map(|s| s.metadata.name.clone())
        .collect();
    if !ready.is_empty() {
        return Err(format!(
            "the workspace paused after a failed checkpoint, yet PodSnapshots are Ready: {ready:?}"
        ));
    }
    let failures: Vec<String> = snaps
        .iter()
        .filter_map(snapshots::checkpoint_failure)
        .collect();
    let warnings = ws::warnings(&client, &new.namespace, &new.name)
        .await
        .map_err(|e| e.to_string())?;
    if failures.is_empty() && warnings.is_empty() {
        return Err(format!(
            "the workspace is {state} with no Ready snapshot, but neither a PodSnapshot condition nor a Warning event on the Workspace says why"
        ));
    }
    let why = failures.join("; ");
    println!("    workspace: {state}; checkpoint: {why}");
    for line in &warnings {
        println!("    warning: {line}");
    }
    w.log
        .push(format!("workspace {state}; checkpoint failed: {why}"));
    w.log
        .extend(warnings.into_iter().map(|l| format!("warning: {l}")));
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

//! Snapshot cleanup steps: delete the workspace, make retention expire a snapshot (on the
//! simulator), check the bucket objects where the target lists them, and report snapshots
//! stuck in Deleting with the storage-permission hint and the bytes they leave behind.

use cucumber::{given, then, when};
use kube::api::Api;

use crate::bdd::world::{StepResult, WsWorld};
use crate::platform::crd::PodSnapshot;
use crate::platform::snapshot_storage::{self as storage, STUCK_HINT};
use crate::platform::snapshots;
use crate::platform::wait;
use crate::report::{LeftSnapshot, SnapshotsLeft};

/// The simulator's Workspace annotation that shortens the add-on's `lastAccessTimeout`
/// (`src/sim/controllers/addon.rs`; not imported: the harness talks to the simulator only
/// through the Kubernetes API).
const SIM_LAST_ACCESS_TIMEOUT: &str = "sim.wsgate.dev/last-access-timeout";

/// What `snaps` leave behind: each with its state, the estimate from the resident memory the
/// kernel measured before the pause, and, on the simulator, the bytes listed in the bucket.
pub async fn left_behind(w: &mut WsWorld, snaps: &[PodSnapshot]) -> SnapshotsLeft {
    let list: Vec<LeftSnapshot> = snaps
        .iter()
        .map(|s| LeftSnapshot {
            name: s.metadata.name.clone().unwrap_or_default(),
            uid: s.metadata.uid.clone().unwrap_or_default(),
            state: snapshots::describe(s),
        })
        .collect();
    let resident = w
        .trial
        .as_ref()
        .and_then(|t| t.marked.as_ref())
        .and_then(|m| m.before.kernel.as_ref())
        .and_then(|k| k.resident_bytes);
    let estimated_bytes = resident.map(|r| r * list.len() as u64);
    let mut bucket_bytes = None;
    if w.ctx.simulator {
        match storage::location(&w.ctx.client).await {
            Ok(Some(loc)) => {
                let mut total = 0;
                let mut all = true;
                for s in &list {
                    match storage::listed(&w.ctx.client, &loc, &s.uid).await {
                        Ok((n, b)) => {
                            w.log
                                .push(format!("{}: {n} object(s), {b} bytes", loc.url(&s.uid)));
                            total += b;
                        }
                        Err(e) => {
                            w.log.push(e);
                            all = false;
                        }
                    }
                }
                bucket_bytes = all.then_some(total);
            }
            Ok(None) => w
                .log
                .push("no snapshot storage config: the bucket cannot be listed".into()),
            Err(e) => w.log.push(format!("cannot read the storage config: {e}")),
        }
    }
    let hint = list
        .iter()
        .any(|s| s.state == "Deleting")
        .then(|| STUCK_HINT.to_string());
    SnapshotsLeft {
        snapshots: list,
        estimated_bytes,
        bucket_bytes,
        hint,
    }
}

#[given(expr = "the simulator expires this workspace's snapshots {string} after their last access")]
async fn short_retention(w: &mut WsWorld, timeout: String) -> StepResult {
    if !w.ctx.simulator {
        return Err(format!(
            "not applicable on a real cluster: the add-on gives every policy lastAccessTimeout 7d; \
             only the simulator lets a scenario shorten it (to {timeout:?})"
        ));
    }
    w.annotate_ws(SIM_LAST_ACCESS_TIMEOUT, &timeout).await?;
    let new = w.ws()?.clone();
    w.log.push(format!(
        "simulator: the snapshot policy of Workspace {} expires snapshots {timeout} after their last access",
        new.name
    ));
    Ok(())
}

#[given(expr = "the simulator will leave this workspace's snapshots stuck in Deleting")]
async fn stuck_deleting(w: &mut WsWorld) -> StepResult {
    super::failure::inject(w, "snapshot-stuck-deleting").await
}

#[when(expr = "the workspace is deleted")]
async fn delete_workspace(w: &mut WsWorld) -> StepResult {
    // Bound to the uid the scenario created, as the ledger's cleanup would be. NotFound
    // counts as done: under `api-errors` a delete that committed can answer 500, and the
    // client's retry then meets its own earlier delete.
    let trial = w.trial()?;
    let name = trial.workspace.name.clone();
    trial
        .delete()
        .await
        .map(|_| w.log.push(format!("Workspace {name} deleted")))
        .map_err(|e| format!("cannot delete Workspace {name}: {e}"))
}

#[then(expr = "the snapshots' objects in the bucket are gone where the target lists them")]
async fn bucket_gone(w: &mut WsWorld) -> StepResult {
    if w.snapshots_seen.is_empty() {
        return Err(
            "no PodSnapshot was seen: check `the workspace's PodSnapshot is Ready` first".into(),
        );
    }
    if !w.ctx.simulator {
        w.log.push(
            "bucket objects not checked: a real cluster's bucket needs Google Cloud credentials, which wsgate does not use"
                .into(),
        );
        return Ok(());
    }
    let loc = storage::location(&w.ctx.client)
        .await
        .map_err(|e| format!("cannot read the storage config: {e}"))?
        .ok_or("no snapshot storage config: the bucket cannot be listed")?;
    let mut left = Vec::new();
    for uid in w.snapshots_seen.clone() {
        let (n, bytes) = storage::listed(&w.ctx.client, &loc, &uid).await?;
        if n > 0 {
            left.push(format!("{}: {n} object(s), {bytes} bytes", loc.url(&uid)));
        }
    }
    if left.is_empty() {
        w.log.push(format!(
            "bucket: nothing left under the prefixes of {} snapshot(s)",
            w.snapshots_seen.len()
        ));
        Ok(())
    } else {
        Err(format!(
            "the PodSnapshots are gone but their bucket objects are not: {left:?}"
        ))
    }
}

#[then(
    expr = "the workspace's PodSnapshots are reported stuck in Deleting after the {string} budget"
)]
async fn reported_stuck(w: &mut WsWorld, budget: String) -> StepResult {
    let cleanup = w.budget("snapshot_cleanup")?;
    let hold = w.budget(&budget)?;
    let new = w.ws()?.clone();
    let client = w.ctx.client.clone();
    let api: Api<PodSnapshot> = Api::namespaced(client.clone(), &new.namespace);
    let labels = format!(
        "{}={}",
        snapshots::TRIGGERED_BY,
        snapshots::trigger_name(&new.name)
    );
    let list = || async {
        snapshots::of_workspace(&client, &new.namespace, &new.name)
            .await
            .map_err(|e| format!("cannot list PodSnapshots: {e}"))
    };
    // First every snapshot is being deleted (within snapshot_cleanup) ...
    let deadline = tokio::time::Instant::now() + cleanup;
    loop {
        let snaps = list().await?;
        if snaps.is_empty() {
            return Err(
                "the PodSnapshots were deleted completely: nothing is stuck in Deleting".into(),
            );
        }
        if snaps
            .iter()
            .all(|s| s.metadata.deletion_timestamp.is_some())
        {
            break;
        }
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        if remaining.is_zero() {
            return Err(format!(
                "budget `snapshot_cleanup` ({cleanup:?}) ran out before every PodSnapshot was being deleted"
            ));
        }
        wait::next_change(
            &api,
            Some(&labels),
            remaining.min(std::time::Duration::from_secs(1)),
        )
        .await;
    }
    // ... then they are still there after the named budget: stuck, not slow.
    let until = tokio::time::Instant::now() + hold;
    loop {
        let remaining = until.saturating_duration_since(tokio::time::Instant::now());
        if remaining.is_zero() {
            break;
        }
        wait::next_change(&api, Some(&labels), remaining).await;
        if list().await?.is_empty() {
            return Err(format!(
                "the PodSnapshots finished deleting within `{budget}` ({hold:?}): not stuck"
            ));
        }
    }
    let snaps = list().await?;
    if snaps.is_empty() {
        return Err(format!(
            "the PodSnapshots finished deleting within `{budget}` ({hold:?}): not stuck"
        ));
    }
    let left = left_behind(w, &snaps).await;
    let summary = left.summary();
    // Reported means: with the hint a platform engineer acts on, and with the bytes it costs.
    let Some(hint) = left.hint.clone() else {
        return Err(format!(
            "the PodSnapshots are stuck ({summary}) but the report gives no hint about why"
        ));
    };
    if left.estimated_bytes.is_none() && left.bucket_bytes.is_none() {
        return Err(format!(
            "the PodSnapshots are stuck ({summary}) but the report has no figure for the bytes \
             they keep: neither an estimate nor a bucket listing"
        ));
    }
    crate::say!("    {summary}");
    crate::say!("    hint: {hint}");
    w.log.push(format!("stuck after {hold:?}: {summary}"));
    w.log.push(format!("hint: {hint}"));
    w.snapshots_left = Some(left);
    Ok(())
}

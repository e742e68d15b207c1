//! `gate prepare`, before the upgrade: a Running snapshot-enabled workspace with the model
//! loaded, the marker in kernel memory and the files written, then paused, and the state
//! for `gate verify`. On failure everything created so far is removed again.

use super::state::{GateState, SCHEMA};
use crate::config::Config;
use crate::platform::crd::WorkspaceState;
use crate::platform::ledger::{self, Ledger};
use crate::platform::snapshots;
use crate::platform::workspace as ws;
use crate::session::Secret;
use crate::trial::{Trial, TrialError};

/// What `prepare` needs besides the config.
pub struct PrepareOptions {
    /// The gate's run id (labels everything it creates).
    pub run_id: String,
    /// How long what prepare leaves may stay before the janitor removes it.
    pub expires_in: chrono::Duration,
    /// The API server's address, for the state file.
    pub server: String,
    /// The Jupyter token for the new workspace (kept in its Secret, never in the state).
    pub token: Secret,
}

/// Prepares the gate; `progress` hears one line per step.
pub async fn prepare(
    client: &kube::Client,
    cfg: &Config,
    opts: &PrepareOptions,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<GateState, TrialError> {
    let mut ledger = Ledger::default();
    match prepare_into(client, cfg, opts, &mut ledger, progress).await {
        Ok(state) => Ok(state),
        Err(e) => {
            progress(&format!("prepare failed ({e}); removing what it created"));
            let results = ledger
                .cleanup(
                    client,
                    &crate::platform::ownership::Claim::Run(opts.run_id.clone()),
                    cfg.budgets.delete.duration(),
                    false,
                )
                .await;
            for r in results {
                progress(&format!("  {}: {:?}", r.object, r.outcome));
            }
            Err(e)
        }
    }
}

async fn prepare_into(
    client: &kube::Client,
    cfg: &Config,
    opts: &PrepareOptions,
    ledger: &mut Ledger,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<GateState, TrialError> {
    let ns = cfg.target.namespace.clone();
    let expires_at = chrono::Utc::now() + opts.expires_in;
    let labels = ledger::labels(&opts.run_id, expires_at);
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..6];
    let name = format!("wsgate-gate-{suffix}");
    ws::put_token(client, ledger, &ns, opts.token.expose(), &labels).await?;
    let new = Trial::from_config(cfg, name.clone(), labels, Default::default());
    let mut trial = Trial::create(client, ledger, new).await?;
    progress(&format!(
        "created workspace {ns}/{name} (kind {}, pod config {})",
        trial.workspace.kind, trial.workspace.pod_config
    ));
    let running = Trial::wait_for(cfg, "workspace_running", WorkspaceState::Running)?;
    trial.wait_state(&running, WorkspaceState::Running).await?;
    progress("workspace Running; loading the model and storing the marker");

    let marked = trial
        .mark(cfg, &opts.token, opts.run_id.clone())
        .await?
        .clone();
    progress(&format!(
        "marker stored in kernel {} (model {}); pausing",
        marked.kernel_id, cfg.workspace.model
    ));

    trial.pause().await?;
    let paused = Trial::wait_for(cfg, "pause_to_paused", WorkspaceState::Paused)?;
    trial.wait_state(&paused, WorkspaceState::Paused).await?;
    let snaps = trial.find_ready_snapshot().await?;
    let Some(ready) = &trial.snapshot else {
        // Without a snapshot taken before the upgrade, verify could only blame the upgrade
        // for a loss that happened here.
        let found = snapshots::summarize(&snaps);
        return Err(TrialError::NoSnapshot(format!(
            "workspace {ns}/{name} paused, but no PodSnapshot is Ready (found: {found:?}): the \
             platform cannot checkpoint now, before the upgrade, so the gate has nothing to \
             verify across it; fix the checkpoint first (`wsgate doctor`, the PodSnapshot's \
             conditions) and prepare again"
        )));
    };
    progress(&format!(
        "workspace Paused; PodSnapshot {} is Ready",
        ready.name
    ));
    Ok(GateState {
        schema: SCHEMA.into(),
        run_id: opts.run_id.clone(),
        prepared_at: chrono::Utc::now(),
        expires_at,
        server: opts.server.clone(),
        namespace: ns,
        workspace: name,
        workspace_uid: trial.uid,
        kind: trial.workspace.kind,
        image_config: trial.workspace.image_config,
        pod_config: trial.workspace.pod_config,
        node_before_pause: trial.node_before_pause,
        snapshot: trial.snapshot,
        kernel_id: marked.kernel_id,
        nonce: marked.nonce.seal(),
        plan: marked.plan,
        before: marked.before,
        ledger: ledger.clone(),
    })
}

//! `gate prepare`, before the upgrade: a Running snapshot-enabled workspace with the model
//! loaded, the marker in kernel memory and the files written, then paused, and the state
//! for `gate verify`. On failure everything created so far is removed again.

use kube::api::Api;

use super::state::{GateState, SCHEMA, SnapshotRef};
use super::{GateError, budget, jupyter_for, model, session_budgets, start_kernel};
use crate::config::Config;
use crate::platform::crd::{Workspace, WorkspaceState};
use crate::platform::ledger::{self, Ledger};
use crate::platform::wait::{self, WaitFor};
use crate::platform::workspace::{self as ws, NewWorkspace};
use crate::platform::{pause, snapshots};
use crate::session::{MarkerPlan, Nonce, Secret};

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
) -> Result<GateState, GateError> {
    let mut ledger = Ledger::default();
    match prepare_into(client, cfg, opts, &mut ledger, progress).await {
        Ok(state) => Ok(state),
        Err(e) => {
            progress(&format!("prepare failed ({e}); removing what it created"));
            let results = ledger
                .cleanup(
                    client,
                    &crate::platform::ownership::Claim::Run(opts.run_id.clone()),
                    budget(cfg, "delete")?,
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
) -> Result<GateState, GateError> {
    let ns = cfg.target.namespace.clone();
    let expires_at = chrono::Utc::now() + opts.expires_in;
    let labels = ledger::labels(&opts.run_id, expires_at);
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..6];
    let name = format!("wsgate-gate-{suffix}");
    let new = NewWorkspace {
        namespace: ns.clone(),
        name: name.clone(),
        kind: cfg.workspace.kind.clone(),
        image_config: cfg.workspace.image_config.clone(),
        pod_config: cfg.workspace.pod_config.clone(),
        home_pvc: format!("{name}-home"),
        home_size: cfg.workspace.home_pvc_size.clone(),
        labels: labels.clone(),
        annotations: Default::default(),
    };
    ws::put_token(client, ledger, &ns, opts.token.expose(), &labels).await?;
    ws::create_home(client, ledger, &new).await?;
    // The uid of what this run created binds every later write to it.
    let workspace_uid = ws::create(client, ledger, &new)
        .await?
        .metadata
        .uid
        .ok_or_else(|| {
            GateError::Gone(format!("workspace {ns}/{name} was created without a uid"))
        })?;
    progress(&format!(
        "created workspace {ns}/{name} (kind {}, pod config {})",
        new.kind, new.pod_config
    ));
    let api: Api<Workspace> = Api::namespaced(client.clone(), &ns);
    let running = wait_state(
        &api,
        cfg,
        &name,
        WorkspaceState::Running,
        "workspace_running",
    )
    .await?;
    if running.and_then(|w| w.metadata.uid).as_deref() != Some(workspace_uid.as_str()) {
        return Err(GateError::Gone(format!(
            "workspace {ns}/{name} (uid {workspace_uid}) was replaced by a namesake while it \
             started; the gate leaves the namesake alone"
        )));
    }
    progress("workspace Running; loading the model and storing the marker");

    let budgets = session_budgets(cfg)?;
    let jc = jupyter_for(client, cfg, &ns, &name, &opts.token).await?;
    let kernel_id = start_kernel(&jc, &budgets).await?;
    let nonce = Nonce::generate();
    let plan = MarkerPlan::new(model(cfg), opts.run_id.clone());
    let before = crate::session::mark(&jc, &kernel_id, &nonce, &plan, &budgets).await?;
    progress(&format!(
        "marker stored in kernel {kernel_id} (model {}); pausing",
        cfg.workspace.model
    ));

    let pods = ws::pods(client, &ns, &name).await?;
    let node_before_pause = pods.iter().find_map(|p| p.spec.as_ref()?.node_name.clone());
    ws::set_paused(client, &ns, &name, &workspace_uid, true).await?;
    let wf = WaitFor::new(
        "pause_to_paused",
        budget(cfg, "pause_to_paused")?,
        "be Paused",
    );
    pause::until_paused(client, &ns, &name, &wf).await?;
    let snaps = snapshots::of_workspace(client, &ns, &name)
        .await
        .map_err(|source| GateError::Api {
            what: format!("list the PodSnapshots of workspace {ns}/{name}"),
            source,
        })?;
    let snapshot = snaps
        .iter()
        .filter(|s| snapshots::is_ready(s))
        .max_by_key(|s| s.metadata.creation_timestamp.clone())
        .and_then(|s| {
            Some(SnapshotRef {
                name: s.metadata.name.clone()?,
                uid: s.metadata.uid.clone()?,
            })
        });
    let Some(ready) = &snapshot else {
        // Without a snapshot taken before the upgrade, verify could only blame the upgrade
        // for a loss that happened here.
        let found = snapshots::summarize(&snaps);
        return Err(GateError::NoSnapshot(format!(
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
        workspace_uid,
        kind: new.kind,
        image_config: new.image_config,
        pod_config: new.pod_config,
        node_before_pause,
        snapshot,
        kernel_id,
        nonce: nonce.seal(),
        plan,
        before,
        ledger: ledger.clone(),
    })
}

/// Waits for `state` within the named budget; returns the Workspace as last seen.
pub(super) async fn wait_state(
    api: &Api<Workspace>,
    cfg: &Config,
    name: &str,
    state: WorkspaceState,
    budget_name: &str,
) -> Result<Option<Workspace>, GateError> {
    let wf = WaitFor::new(
        budget_name,
        budget(cfg, budget_name)?,
        format!("be {state}"),
    );
    Ok(wait::until(api, name, &wf, ws::describe, |o| ws::is_state(o, state)).await?)
}

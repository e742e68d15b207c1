//! Release-gate steps: prepare into a state file, invalidate the snapshot as an upgrade
//! might, verify from the state file alone, and assert the gate's verdict.

use cucumber::{then, when};

use crate::bdd::world::{StepResult, WsWorld};
use crate::gate::{self, GateState, PrepareOptions, VerifyOptions};
use crate::platform::snapshots;

fn prepared(w: &WsWorld) -> Result<GateState, String> {
    let path = w
        .gate_state
        .as_ref()
        .ok_or("the release gate was not prepared: add `When the release gate is prepared`")?;
    GateState::read(path).map_err(|e| e.to_string())
}

#[when(expr = "the release gate is prepared")]
async fn prepare(w: &mut WsWorld) -> StepResult {
    super::kernel::require_kernels(w)?;
    super::workspace::ensure_token(w).await?;
    let opts = PrepareOptions {
        run_id: w.ctx.run_id.clone(),
        expires_in: chrono::Duration::hours(i64::from(w.ctx.config.run.expiry_hours)),
        server: "(the run's target)".into(),
        token: w.ctx.token.clone(),
    };
    let progress = super::Progress::new("gate");
    let say = |l: &str| progress.say(l);
    let result = gate::prepare(&w.ctx.client, &w.ctx.config, &opts, &say).await;
    w.log.extend(progress.into_lines());
    let state = result.map_err(|e| e.to_string())?;
    // Until verify removes them, the scenario's cleanup owns what prepare created.
    w.ledger
        .entries
        .extend(state.ledger.entries.iter().cloned());
    let path = w
        .ctx
        .config
        .reports
        .dir
        .join(&w.ctx.run_id)
        .join(format!("gate-state-{}.json", state.workspace));
    state.write(&path).map_err(|e| e.to_string())?;
    w.gate_state = Some(path);
    Ok(())
}

#[then(expr = "the gate's state file holds no secret")]
async fn no_secret(w: &mut WsWorld) -> StepResult {
    let state = prepared(w)?;
    let path = w.gate_state.clone().ok_or("no state file")?;
    let raw = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
    if raw.contains(w.ctx.token.expose()) {
        return Err(format!("{} contains the Jupyter token", path.display()));
    }
    let nonce = state.nonce.unseal().ok_or("the sealed nonce is damaged")?;
    for needle in nonce.disk_needles() {
        if raw
            .as_bytes()
            .windows(needle.len())
            .any(|w| w == needle.as_slice())
        {
            return Err(format!("{} contains the marker nonce", path.display()));
        }
    }
    Ok(())
}

#[when(
    expr = "the prepared workspace's snapshots are deleted, as an upgrade that invalidates them would"
)]
async fn invalidate(w: &mut WsWorld) -> StepResult {
    let state = prepared(w)?;
    let claim = crate::platform::ownership::Claim::Run(state.run_id.clone());
    let n = snapshots::delete_all(
        &w.ctx.client,
        &claim,
        &state.namespace,
        &state.workspace,
        Some(&state.workspace_uid),
    )
    .await
    .map_err(|e| format!("cannot delete the prepared workspace's PodSnapshots: {e}"))?;
    if n == 0 {
        return Err("the prepared workspace had no PodSnapshot to delete".into());
    }
    Ok(())
}

#[when(expr = "the release gate is verified from its state file")]
async fn verify(w: &mut WsWorld) -> StepResult {
    let state = prepared(w)?;
    let progress = super::Progress::new("gate");
    let say = |l: &str| progress.say(l);
    let options = VerifyOptions::default();
    let result = gate::verify(&w.ctx.client, &w.ctx.config, &state, options, &say).await;
    w.log.extend(progress.into_lines());
    let outcome = result.map_err(|e| e.to_string())?;
    w.verdict = Some(outcome.restore.clone());
    w.gate_outcome = Some(outcome);
    Ok(())
}

#[then(expr = "the gate verdict is {string}")]
async fn verdict_is(w: &mut WsWorld, expected: String) -> StepResult {
    let outcome = w
        .gate_outcome
        .as_ref()
        .ok_or("the release gate was not verified")?;
    let got = format!("{:?}", outcome.verdict);
    if got == expected {
        return Ok(());
    }
    Err(format!(
        "gate verdict {got}, expected {expected}: {}; restore evidence: {}",
        outcome.summary,
        outcome.restore.decided_by.join("; ")
    ))
}

//! Capacity steps: squeeze the GPUs (the configured method), see a clear waiting state on
//! resume, count restore attempts, and lift the squeeze.

use cucumber::{then, when};
use kube::api::Api;

use crate::bdd::world::{StepResult, WsWorld};
use crate::config::SqueezeMethod;
use crate::platform::crd::Workspace;
use crate::platform::wait::{self, WaitFor};
use crate::platform::{gpu, snapshots, squeeze, workspace as ws};
use crate::timeline::Mark;

#[when(expr = "the GPUs are squeezed")]
async fn squeeze(w: &mut WsWorld) -> StepResult {
    let ns = w.ws()?.namespace.clone();
    let labels = w.ctx.labels();
    let client = w.ctx.client.clone();
    let accelerator = w.ctx.config.workspace.accelerator.clone();
    let method = w.ctx.config.squeeze.method;
    let detail = match method {
        SqueezeMethod::Quota => gpu::squeeze_with_quota(&client, &mut w.ledger, &ns, &labels, 0)
            .await
            .map(|()| {
                format!(
                    "ResourceQuota {}: requests.{}=0",
                    gpu::SQUEEZE_QUOTA,
                    gpu::GPU
                )
            })
            .map_err(|e| e.to_string())?,
        SqueezeMethod::PlaceholderPods => {
            let limit = w.budget("squeeze")?;
            let wf = WaitFor::new("squeeze", limit, "be Running on its GPU");
            let pods = squeeze::squeeze_with_placeholders(
                &client,
                &mut w.ledger,
                &ns,
                &accelerator,
                &labels,
                &wf,
            )
            .await
            .map_err(|e| e.to_string())?;
            format!(
                "{} placeholder pod(s) hold the free {accelerator} GPUs",
                pods.len()
            )
        }
        SqueezeMethod::Taint => {
            let taints = squeeze::squeeze_with_taint(&client, &mut w.ledger, &accelerator, &labels)
                .await
                .map_err(|e| e.to_string())?;
            let names: Vec<_> = taints.iter().map(|t| t.describe()).collect();
            names.join(", ")
        }
    };
    w.log.push(format!("squeeze ({method}): {detail}"));
    w.squeeze = Some(method);
    Ok(())
}

#[when(expr = "the squeeze is lifted")]
async fn lift(w: &mut WsWorld) -> StepResult {
    w.ws()?;
    let client = w.ctx.client.clone();
    let method = w
        .squeeze
        .ok_or("nothing to lift: no `When the GPUs are squeezed` step ran")?;
    match method {
        SqueezeMethod::Quota => {
            let budget = w.budget("delete")?;
            let claim = crate::platform::ownership::Claim::Run(w.ctx.run_id.clone());
            gpu::lift_quota(&client, &w.ledger, &claim, budget)
                .await
                .map_err(|e| e.to_string())
        }
        SqueezeMethod::PlaceholderPods => {
            let budget = w.budget("delete")?;
            let claim = crate::platform::ownership::Claim::Run(w.ctx.run_id.clone());
            squeeze::lift_placeholders(&client, &w.ledger, &claim, budget)
                .await
                .map(|n| {
                    w.log
                        .push(format!("squeeze lifted: {n} placeholder pod(s) deleted"))
                })
                .map_err(|e| e.to_string())
        }
        SqueezeMethod::Taint => squeeze::lift_taints(
            &client,
            &w.ledger,
            &crate::platform::ownership::Claim::Run(w.ctx.run_id.clone()),
        )
        .await
        .map(|n| w.log.push(format!("squeeze lifted: {n} taint(s) removed")))
        .map_err(|e| e.to_string()),
    }
}

#[then(expr = "the workspace shows a waiting state within the {string} budget")]
async fn shows_waiting(w: &mut WsWorld, budget: String) -> StepResult {
    let limit = w.budget(&budget)?;
    let new = w.ws()?.clone();
    let api: Api<Workspace> = Api::namespaced(w.ctx.client.clone(), &new.namespace);
    let wf = WaitFor::new(budget, limit, "show that it waits for resources");
    let got = wait::until(&api, &new.name, &wf, ws::describe, ws::waits_for_resources)
        .await
        .map_err(|e| e.to_string())?;
    // When the resume's watch saw it, not when this step looked.
    let detail = Some(ws::describe(got.as_ref()));
    match w.trial()?.waiting_for_resources() {
        Some(seen) => w.mark_observed_at(Mark::WaitingForResources, seen.at, detail),
        None => w.mark(Mark::WaitingForResources, detail),
    }
    let pods = ws::pods(&w.ctx.client, &new.namespace, &new.name)
        .await
        .map_err(|e| e.to_string())?;
    w.max_pods_seen = w.max_pods_seen.max(pods.len());
    Ok(())
}

#[then(expr = "at most one restore attempt is in flight")]
async fn one_attempt(w: &mut WsWorld) -> StepResult {
    let new = w.ws()?.clone();
    let pods = ws::pods(&w.ctx.client, &new.namespace, &new.name)
        .await
        .map_err(|e| e.to_string())?;
    w.max_pods_seen = w.max_pods_seen.max(pods.len());
    if let Some(resumed) = &w.trial()?.resumed {
        w.max_pods_seen = w.max_pods_seen.max(resumed.watch.max_alive(&new.name));
    }
    if w.max_pods_seen <= 1 {
        Ok(())
    } else {
        Err(format!(
            "{} pods of the workspace were seen at once: competing restore attempts",
            w.max_pods_seen
        ))
    }
}

#[then(expr = "the workspace's PodSnapshot is still Ready")]
async fn still_ready(w: &mut WsWorld) -> StepResult {
    let new = w.ws()?.clone();
    let snaps = snapshots::of_workspace(&w.ctx.client, &new.namespace, &new.name)
        .await
        .map_err(|e| format!("cannot list PodSnapshots: {e}"))?;
    let Some(expected) = w.trial()?.snapshot.as_ref().map(|s| s.name.clone()) else {
        // Nothing was Ready when the resume was asked for: the snapshot was never there to
        // be consumed, and the cause is the checkpoint, not the wait.
        let found = snapshots::summarize(&snaps);
        return Err(format!(
            "no PodSnapshot was Ready when the resume was requested, so there is none to keep \
             while it waits; the workspace's PodSnapshots: {found:?}"
        ));
    };
    match snaps
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(expected.as_str()))
    {
        Some(s) if snapshots::is_ready(s) => Ok(()),
        Some(s) => Err(format!(
            "the snapshot is {} while the resume waits",
            snapshots::describe(s)
        )),
        None => Err("the snapshot was consumed or deleted while the resume waited".into()),
    }
}

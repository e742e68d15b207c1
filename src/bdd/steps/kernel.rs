//! Kernel steps: store the marker and files before the pause, collect the evidence after
//! the resume, and assert the verdict, the files, the model and the recorded phases.

use cucumber::{given, then};

use crate::bdd::world::{StepResult, WsWorld};
use crate::platform::{snapshots, workspace as ws};
use crate::session::protocol::Budgets;
use crate::session::{JupyterClient, MarkerPlan, Nonce, PlatformEvidence};
use crate::timeline::Mark;
use crate::verdict::{self, FilesState};

fn budgets(w: &WsWorld) -> Result<Budgets, String> {
    crate::gate::session_budgets(&w.ctx.config).map_err(|e| e.to_string())
}

/// A Jupyter client for the workspace's current pod.
async fn jupyter(w: &WsWorld) -> Result<JupyterClient, String> {
    let new = w.ws()?;
    crate::gate::jupyter_for(
        &w.ctx.client,
        &w.ctx.config,
        &new.namespace,
        &new.name,
        &w.ctx.token,
    )
    .await
    .map_err(|e| e.to_string())
}

pub(crate) fn require_kernels(w: &WsWorld) -> StepResult {
    if w.ctx.simulator && w.ctx.config.sim.runtime.as_str() == "none" {
        return Err("not applicable: the simulator's `none` runtime runs no kernels (set sim.runtime = \"jupyter\")".into());
    }
    Ok(())
}

#[given(
    expr = "the kernel has loaded the model, stored a marker in memory only and written its files"
)]
async fn mark(w: &mut WsWorld) -> StepResult {
    require_kernels(w)?;
    let budgets = budgets(w)?;
    let jc = jupyter(w).await?;
    let kernel = crate::gate::start_kernel(&jc, &budgets)
        .await
        .map_err(|e| e.to_string())?;
    w.mark(Mark::KernelReachable, Some(kernel.clone()));
    let nonce = Nonce::generate();
    let plan = MarkerPlan::new(crate::gate::model(&w.ctx.config), w.ctx.run_id.clone());
    let evidence = crate::session::mark(&jc, &kernel, &nonce, &plan, &budgets)
        .await
        .map_err(|e| e.to_string())?;
    w.mark(Mark::ModelLoaded, None);
    w.mark(Mark::MarkerStored, None);
    w.kernel_id = Some(kernel);
    w.nonce = Some(nonce);
    w.plan = Some(plan);
    w.before = Some(evidence);
    Ok(())
}

/// Makes every later cell of the kernel `ms` longer. The delay lives in the kernel process
/// only (an input transformer): a restored process keeps it, a fresh one does not.
#[given(expr = "every cell the kernel runs takes {int} ms longer")]
async fn slow_cells(w: &mut WsWorld, ms: u64) -> StepResult {
    require_kernels(w)?;
    let kernel = w
        .kernel_id
        .clone()
        .ok_or("no kernel yet: add the step that loads the model and stores the marker first")?;
    let budgets = budgets(w)?;
    let jc = jupyter(w).await?;
    crate::session::slow_every_cell(&jc, &kernel, std::time::Duration::from_millis(ms), &budgets)
        .await
        .map_err(|e| e.to_string())
}

/// Collects the evidence after the resume (once) and decides the verdict.
async fn decide(w: &mut WsWorld) -> StepResult {
    if w.verdict.is_some() {
        return Ok(());
    }
    require_kernels(w)?;
    let (Some(nonce), Some(plan), Some(kernel), Some(before)) = (
        w.nonce.clone(),
        w.plan.clone(),
        w.kernel_id.clone(),
        w.before.clone(),
    ) else {
        return Err("no marker was stored before the pause: add the step that loads the model and stores the marker".into());
    };
    let budgets = budgets(w)?;
    let jc = jupyter(w).await?;
    let (after, stamps) = crate::session::collect_evidence_stamped(
        &jc,
        &kernel,
        &nonce,
        &plan,
        &budgets,
        Some(&before),
    )
    .await
    .map_err(|e| e.to_string())?;
    // Stamped where each happened, not now that all the evidence is in.
    for (mark, at) in [
        (Mark::KernelReconnected, stamps.kernel_answered),
        (Mark::NextCellDone, stamps.first_cell_done),
        (Mark::RecoveryDone, stamps.recovery_done),
    ] {
        if let Some(at) = at {
            w.mark_observed_at(mark, at, None);
        }
    }
    let new = w.ws()?.clone();
    let mut platform = PlatformEvidence {
        observed: true,
        expected_snapshot: w.snapshot_name.clone(),
        ..Default::default()
    };
    let waited = wait_pod_restored(w, &new.name, &mut platform).await?;
    let pods = ws::pods(&w.ctx.client, &new.namespace, &new.name)
        .await
        .map_err(|e| e.to_string())?;
    let pod = pods
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none());
    if let Some(pod) = &pod {
        if !waited {
            platform.pod_restored = snapshots::pod_restored(pod);
            if platform.pod_restored.is_some() {
                w.mark(Mark::PodRestored, None);
            }
        }
        platform.restore_event = snapshots::restore_event(&w.ctx.client, pod)
            .await
            .map_err(|e| e.to_string())?;
    }
    let v = verdict::decide(&before, &after, &platform);
    w.after = Some(after);
    w.verdict = Some(v);
    Ok(())
}

/// Waits, within the `pod_restored` budget from the resume, for the pod's `PodRestored`
/// condition (GKE writes it after the pod is Ready) and marks when the pod was first Ready
/// and when the condition came. Only when a Ready snapshot existed before the resume and
/// the resume's pod watch runs; `false` when it did not wait (the caller reads once).
async fn wait_pod_restored(
    w: &mut WsWorld,
    workspace: &str,
    platform: &mut PlatformEvidence,
) -> Result<bool, String> {
    if w.snapshot_name.is_none() {
        return Ok(false);
    }
    let budget = w.budget("pod_restored")?;
    let Some(watch) = &w.attempts else {
        return Ok(false);
    };
    let seen = watch.wait_pod_restored(workspace, budget).await;
    platform.pod_restored_budget_s = Some(budget.as_secs_f64().ceil() as u64);
    if let Some(ready) = seen.ready {
        w.mark_at(Mark::PodReady, ready.at, None);
    }
    if let Some((condition, at)) = seen.condition {
        w.mark_at(Mark::PodRestored, at.at, condition.message.clone());
        platform.pod_restored = Some(condition);
    }
    Ok(true)
}

#[then(expr = "the verdict is {string}")]
async fn verdict_is(w: &mut WsWorld, expected: String) -> StepResult {
    decide(w).await?;
    let v = w.verdict.as_ref().ok_or("no verdict")?;
    let got = format!("{:?}", v.kind);
    if v.false_restore() {
        // Never a pass, even where a fresh session was expected: the platform said restored.
        return Err(format!(
            "FALSE RESTORE: verdict {got}, expected {expected}: the platform claimed a restore \
             and the process state was lost; decided by: {}",
            v.decided_by.join("; ")
        ));
    }
    if got == expected {
        return Ok(());
    }
    Err(format!(
        "verdict {got}, expected {expected}{}; decided by: {}; contradictions: {:?}",
        v.reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default(),
        v.decided_by.join("; "),
        v.contradictions
    ))
}

#[then(expr = "the files are unchanged")]
async fn files_unchanged(w: &mut WsWorld) -> StepResult {
    decide(w).await?;
    let v = w.verdict.as_ref().ok_or("no verdict")?;
    if v.files == FilesState::Intact {
        Ok(())
    } else {
        Err(format!(
            "files after the resume: {:?}; {}",
            v.files,
            v.decided_by.join("; ")
        ))
    }
}

#[then(expr = "a cell using the loaded model runs without reloading it")]
async fn model_kept(w: &mut WsWorld) -> StepResult {
    decide(w).await?;
    let before = w
        .before
        .as_ref()
        .and_then(|e| e.kernel.as_ref())
        .and_then(|k| k.model.as_ref());
    let after = w
        .after
        .as_ref()
        .and_then(|e| e.kernel.as_ref())
        .and_then(|k| k.model.as_ref());
    match (before, after) {
        (Some(b), Some(a))
            if a.object_id == b.object_id
                && a.weight_hash == b.weight_hash
                && a.output_digest == b.output_digest =>
        {
            Ok(())
        }
        (Some(b), Some(a)) => Err(format!(
            "the model was not the same object after the resume (object id {} -> {}, weights {} -> {})",
            b.object_id, a.object_id, b.weight_hash, a.weight_hash
        )),
        (_, None) => {
            Err("no model in the kernel after the resume: it would have to be reloaded".into())
        }
        (None, _) => Err("no model was loaded before the pause".into()),
    }
}

#[then(expr = "the work is recovered from the files and the application checkpoint")]
async fn recovered(w: &mut WsWorld) -> StepResult {
    decide(w).await?;
    match w.after.as_ref().and_then(|e| e.recovery.as_ref()) {
        Some(r) if r.loaded => Ok(()),
        Some(r) => Err(format!(
            "recovery from the checkpoint failed: {}",
            r.error.clone().unwrap_or_default()
        )),
        None => Err(
            "no recovery was attempted (the process came back, or the kernel was unreachable)"
                .into(),
        ),
    }
}

#[then(expr = "the phases from resume request to next cell are recorded")]
async fn phases_recorded(w: &mut WsWorld) -> StepResult {
    let phases = w.timeline.phases();
    for need in ["resume_to_running", "resume_to_next_cell"] {
        if !phases.iter().any(|p| p.name == need) {
            return Err(format!(
                "phase {need} was not recorded; observed: {:?}",
                w.timeline
                    .observations
                    .iter()
                    .map(|o| o.mark)
                    .collect::<Vec<_>>()
            ));
        }
    }
    for p in &phases {
        println!(
            "    phase {:<24} {:>9.1} ms",
            p.name,
            p.duration.as_secs_f64() * 1000.0
        );
    }
    Ok(())
}

/// The report's phases are as far apart as the cells behind them: the first cell after the
/// resume completes at least `ms` after the kernel answered, when every cell takes `ms`
/// longer. Stamped at one instant after all the evidence was in, they would be equal.
#[then(expr = "the next cell completes at least {int} ms after the kernel answered")]
async fn next_cell_spacing(w: &mut WsWorld, ms: u64) -> StepResult {
    decide(w).await?;
    let phases = w.timeline.phases();
    let get = |n: &str| phases.iter().find(|p| p.name == n).map(|p| p.duration);
    let (Some(kernel), Some(cell)) = (get("resume_to_kernel"), get("resume_to_next_cell")) else {
        return Err(format!(
            "resume_to_kernel and resume_to_next_cell must both be recorded; phases: {:?}",
            phases.iter().map(|p| p.name.as_str()).collect::<Vec<_>>()
        ));
    };
    let kernel_ms = kernel.as_secs_f64() * 1000.0;
    let cell_ms = cell.as_secs_f64() * 1000.0;
    println!(
        "    resume to kernel {kernel_ms:.1} ms; resume to next cell {cell_ms:.1} ms ({:.1} ms apart)",
        cell_ms - kernel_ms
    );
    if cell_ms - kernel_ms >= ms as f64 {
        Ok(())
    } else {
        Err(format!(
            "resume_to_next_cell ({cell_ms:.1} ms) is only {:.1} ms after resume_to_kernel \
             ({kernel_ms:.1} ms), though every cell takes {ms} ms longer: the phases are not \
             stamped where they happen",
            cell_ms - kernel_ms
        ))
    }
}

#[then(expr = "the recovery time is recorded beside the restore time")]
async fn recovery_recorded(w: &mut WsWorld) -> StepResult {
    let phases = w.timeline.phases();
    let get = |n: &str| phases.iter().find(|p| p.name == n).map(|p| p.duration);
    match (get("resume_to_running"), get("resume_to_recovered")) {
        (Some(r), Some(c)) => {
            println!(
                "    resume to Running {:.1} ms; resume to recovered work {:.1} ms",
                r.as_secs_f64() * 1000.0,
                c.as_secs_f64() * 1000.0
            );
            Ok(())
        }
        _ => Err("the recovery phase was not recorded".into()),
    }
}

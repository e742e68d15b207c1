//! Kernel steps: store the marker and files before the pause, collect the evidence after
//! the resume, and assert the verdict, the files, the model and the recorded phases.

use cucumber::{given, then};

use crate::bdd::world::{StepResult, WsWorld, said};
use crate::timeline::Mark;
use crate::verdict::FilesState;

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
    let (ctx, label) = (w.ctx.clone(), w.ctx.run_id.clone());
    let marked = w
        .trial_mut()?
        .mark(&ctx.config, &ctx.token, label)
        .await
        .map_err(|e| said(&e))?;
    let (kernel, reachable) = (marked.kernel_id.clone(), marked.reachable_at);
    if let Some(at) = reachable {
        w.mark_observed_at(Mark::KernelReachable, at, Some(kernel));
    }
    w.mark(Mark::ModelLoaded, None);
    w.mark(Mark::MarkerStored, None);
    Ok(())
}

/// Makes every later cell of the kernel `ms` longer. The delay lives in the kernel process
/// only (an input transformer): a restored process keeps it, a fresh one does not.
#[given(expr = "every cell the kernel runs takes {int} ms longer")]
async fn slow_cells(w: &mut WsWorld, ms: u64) -> StepResult {
    require_kernels(w)?;
    let trial = w.trial()?;
    let kernel =
        trial.marked.as_ref().map(|m| m.kernel_id.clone()).ok_or(
            "no kernel yet: add the step that loads the model and stores the marker first",
        )?;
    let budgets = crate::trial::session_budgets(&w.ctx.config);
    let jc = trial
        .jupyter(&w.ctx.config, &w.ctx.token)
        .await
        .map_err(|e| said(&e))?;
    crate::session::slow_every_cell(&jc, &kernel, std::time::Duration::from_millis(ms), &budgets)
        .await
        .map_err(|e| said(&e))
}

/// Collects the evidence after the resume (once) and decides the verdict.
async fn decide(w: &mut WsWorld) -> StepResult {
    if w.verdict.is_some() {
        return Ok(());
    }
    require_kernels(w)?;
    let ctx = w.ctx.clone();
    let trial = w.trial()?;
    trial.marked().map_err(|e| said(&e))?;
    let (after, stamps) = trial
        .kernel_evidence(&ctx.config, &ctx.token)
        .await
        .map_err(|e| said(&e))?;
    let seen = trial
        .platform_evidence(&ctx.config, true)
        .await
        .map_err(|e| said(&e))?;
    let verdict = trial.decide(&after, &seen.evidence).map_err(|e| said(&e))?;
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
    if let Some(ready) = seen.ready {
        w.mark_at(Mark::PodReady, ready.at, None);
    }
    match (seen.restored, &seen.evidence.pod_restored) {
        (Some(at), Some(c)) => w.mark_at(Mark::PodRestored, at.at, c.message.clone()),
        (None, Some(_)) if seen.read_once => w.mark(Mark::PodRestored, None),
        _ => {}
    }
    w.after = Some(after);
    w.verdict = Some(verdict);
    Ok(())
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
        .trial
        .as_ref()
        .and_then(|t| t.marked.as_ref())
        .and_then(|m| m.before.kernel.as_ref())
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
        crate::say!(
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
    crate::say!(
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
            crate::say!(
                "    resume to Running {:.1} ms; resume to recovered work {:.1} ms",
                r.as_secs_f64() * 1000.0,
                c.as_secs_f64() * 1000.0
            );
            Ok(())
        }
        _ => Err("the recovery phase was not recorded".into()),
    }
}

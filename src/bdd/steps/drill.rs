//! Drill steps: N paused workspaces resume at once on M GPUs (the namespace held to M by a
//! ResourceQuota), then the outcome per workspace, the attempts and the spread of times.

use cucumber::{then, when};

use crate::bdd::world::{StepResult, WsWorld};
use crate::drill::{self, DrillPlan, DrillReport};

fn report(w: &WsWorld) -> Result<&DrillReport, String> {
    w.drill
        .as_ref()
        .ok_or_else(|| "no drill ran in this scenario: add `When a drill resumes ...`".into())
}

#[when(
    expr = "a drill resumes {int} paused workspaces at once on {int} GPU(s), {int} of them kernel-checked"
)]
async fn run(w: &mut WsWorld, workspaces: usize, gpus: u32, sample: usize) -> StepResult {
    if sample > 0 {
        super::kernel::require_kernels(w)?;
    }
    super::workspace::ensure_token(w).await?;
    let plan = DrillPlan {
        workspaces,
        gpus,
        sample,
        quota: true,
        sample_annotations: Default::default(),
        run_id: w.ctx.run_id.clone(),
        labels: w.ctx.labels(),
        token: w.ctx.token.clone(),
    };
    let progress = super::Progress::new("drill");
    let say = |l: &str| progress.say(l);
    let result = {
        let (client, config) = (w.ctx.client.clone(), w.ctx.config.clone());
        drill::run(&client, &config, &plan, &mut w.ledger, &say).await
    };
    w.log.extend(progress.into_lines());
    let report = result.map_err(|e| e.to_string())?;
    for line in report.table().lines() {
        crate::say!("    {line}");
    }
    w.drill = Some(report);
    Ok(())
}

/// Restored, each by the evidence it had: the kernel-checked ones `Restored` (the nonce,
/// PID, kernel and model came back), the others `PlatformRestored` (the pod's word only).
#[then(
    expr = "every workspace ends Restored: {int} by kernel evidence, the others PlatformRestored"
)]
async fn all_restored(w: &mut WsWorld, by_kernel: usize) -> StepResult {
    use crate::drill::PLATFORM_RESTORED;
    let r = report(w)?;
    let checked = r.results.iter().filter(|x| x.sampled).count();
    if checked != by_kernel {
        return Err(format!(
            "{checked} workspace(s) were kernel-checked, the scenario expects {by_kernel}"
        ));
    }
    let not: Vec<String> = r
        .results
        .iter()
        .filter(|x| {
            let want = if x.sampled {
                "Restored"
            } else {
                PLATFORM_RESTORED
            };
            x.verdict != want || x.to_running.is_none()
        })
        .map(|x| {
            format!(
                "{}: {}{}",
                x.name,
                x.verdict,
                x.problem
                    .as_deref()
                    .map(|p| format!(" ({p})"))
                    .unwrap_or_default()
            )
        })
        .collect();
    if !not.is_empty() {
        return Err(format!("not restored: {}", not.join("; ")));
    }
    Ok(())
}

#[then(expr = "no workspace had more than one restore attempt at a time")]
async fn one_attempt(w: &mut WsWorld) -> StepResult {
    let r = report(w)?;
    let many: Vec<String> = r
        .results
        .iter()
        .filter(|x| x.max_attempts > 1)
        .map(|x| format!("{}: {} at once", x.name, x.max_attempts))
        .collect();
    if many.is_empty() {
        Ok(())
    } else {
        Err(format!("competing restore attempts: {}", many.join("; ")))
    }
}

#[then(expr = "some workspaces waited for a GPU, and the waits are reported as p50, p95 and max")]
async fn spread(w: &mut WsWorld) -> StepResult {
    let r = report(w)?;
    let (Some(waited), Some(running)) = (r.waited, r.to_running) else {
        return Err("the drill measured no waiting or resume times".into());
    };
    if waited.count != r.workspaces || running.count != r.workspaces {
        return Err(format!(
            "times measured for {} and {} of {} workspaces",
            waited.count, running.count, r.workspaces
        ));
    }
    // With fewer GPUs than workspaces, the last ones must have waited for the first ones.
    if waited.max_s <= waited.p50_s && r.gpus as usize * 2 <= r.workspaces {
        return Err(format!(
            "no workspace waited longer than the median ({:.2} s) on {} GPUs for {}",
            waited.p50_s, r.gpus, r.workspaces
        ));
    }
    Ok(())
}

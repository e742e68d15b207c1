//! Idle steps (idle.feature): a Workspace under its kind's activity rule, left idle until
//! the platform pauses it, or kept busy by a long cell that prints progress. The harness
//! reads only the platform's statements (`status.activity`) and never calls the Jupyter
//! API while it waits: API requests count as activity.

use std::sync::{Arc, Mutex};

use cucumber::{given, then, when};
use kube::api::Api;

use crate::bdd::world::{StepResult, WsWorld};
use crate::platform::crd::Workspace;
use crate::platform::idle::{self, BusyRecord, BusySample, Statement};
use crate::platform::wait::{self, WaitFor};
use crate::platform::workspace as ws;
use crate::session::Budget;
use crate::timeline::Mark;

#[given(expr = "a GPU workspace whose podConfig has an idle pause rule is Running")]
async fn idle_running(w: &mut WsWorld) -> StepResult {
    let cfg = w.ctx.config.clone();
    let (kind, pod_config) = (cfg.workspace.kind, cfg.workspace.idle_pod_config);
    // Before anything is created: is there a rule to test at all?
    let rule = idle::rule_for(&w.ctx.client, &kind, &pod_config, &cfg.target.namespace)
        .await
        .map_err(|e| e.to_string())?;
    w.log.push(format!(
        "activityRules[{}] of {kind} applies to podConfig {pod_config}: secondsSinceActive {} s, probe every {} s",
        rule.index, rule.seconds_since_active, rule.probe_interval_seconds
    ));
    if rule.min_running_seconds == 0 {
        // A Jupyter server restored from a snapshot reports its pre-pause last_activity: the
        // first probe after a resume finds it idle, and this rule pauses it again at once.
        w.log.push(format!(
            "note: activityRules[{}] has minRunningSeconds 0, so a workspace restored from a snapshot can be paused again by the first probe after its resume",
            rule.index
        ));
    }
    w.idle_rule = Some(rule);
    super::workspace::create_running(w, kind, pod_config).await
}

#[when(expr = "the kernel is left idle")]
async fn left_idle(w: &mut WsWorld) -> StepResult {
    // Nothing to do but to stay away: from here on the harness sends the workspace's Jupyter
    // server no request (each would count as activity) and only watches the Workspace.
    w.ws()?;
    w.log
        .push("the harness leaves the kernel idle: no Jupyter requests from here on".into());
    Ok(())
}

/// Waits (watching, within `budget`) until the platform states when the Workspace becomes
/// eligible for pause; returns that statement and the platform's timescale.
async fn await_statement(w: &mut WsWorld, budget: &str) -> Result<(Statement, f64), String> {
    let limit = w.budget(budget)?;
    let rule = w.idle_rule.ok_or("no activity rule found: start with the Given step that creates the workspace under an idle pause rule")?;
    let new = w.ws()?.clone();
    let api: Api<Workspace> = Api::namespaced(w.ctx.client.clone(), &new.namespace);
    let wf = WaitFor::new(budget, limit, "state when it becomes eligible for pause");
    let found = wait::until(&api, &new.name, &wf, ws::describe, |o| {
        o.is_some_and(|o| idle::states_eligibility(&idle::statement(o)))
    })
    .await
    .map_err(|e| e.to_string())?
    .ok_or("the workspace is gone")?;
    let s = idle::statement(&found);
    let scale = idle::timescale(&rule, &s).ok_or_else(|| {
        format!("the platform states eligibleAfter {:?} no later than lastActivity {}: not a threshold of activityRules[{}]", s.eligible_after, s.last_activity, rule.index)
    })?;
    let now = chrono::Utc::now().timestamp_millis();
    idle::check_budget(&w.ctx.config.workspace.kind, &rule, &s, now, limit)
        .map_err(|e| e.to_string())?;
    Ok((s, scale))
}

#[then(
    expr = "the platform pauses the workspace for inactivity within the {string} budget, not before it is eligible"
)]
async fn paused_for_inactivity(w: &mut WsWorld, budget: String) -> StepResult {
    let started = tokio::time::Instant::now();
    let limit = w.budget(&budget)?;
    let (first, _) = await_statement(w, &budget).await?;
    let new = w.ws()?.clone();
    let api: Api<Workspace> = Api::namespaced(w.ctx.client.clone(), &new.namespace);
    let remaining = limit.saturating_sub(started.elapsed());
    let wf = WaitFor::new(budget.as_str(), remaining, "be paused by its activity rule");
    let paused = wait::until(&api, &new.name, &wf, ws::describe, |o| {
        o.is_some_and(idle::pause_started)
    })
    .await
    .map_err(|e| {
        format!(
            "{e}; the platform stated eligibleAfter {:?} (lastActivity {})",
            first.eligible_after, first.last_activity
        )
    })?
    .ok_or("the workspace is gone")?;
    let observed = chrono::Utc::now();
    // The pause is the platform's: this scenario never asked for one.
    if w.timeline.last(Mark::PauseRequested).is_some() {
        return Err("the harness requested a pause in this scenario: the idle pause cannot be told apart from it".into());
    }
    let s = idle::statement(&paused);
    let eligible_after = idle::check_pause(&s).map_err(|e| e.to_string())?;
    let eligible_at = chrono::DateTime::from_timestamp_millis(eligible_after)
        .ok_or(format!("eligibleAfter {eligible_after} ms is not a time"))?;
    w.mark_at(
        Mark::IdleEligible,
        eligible_at,
        Some(format!(
            "eligibleAfter {eligible_after}, lastActivity {}",
            s.last_activity
        )),
    );
    w.mark(
        Mark::IdlePauseStarted,
        Some(format!(
            "{} ms after eligibleAfter",
            (observed.timestamp_millis() - eligible_after)
        )),
    );
    Ok(())
}

#[then(expr = "the pause latency after eligibility is recorded")]
async fn latency_recorded(w: &mut WsWorld) -> StepResult {
    let phases = w.timeline.phases();
    let get = |n: &str| phases.iter().find(|p| p.name == n).map(|p| p.duration);
    match (
        get("idle_eligible_to_pause"),
        get("idle_eligible_to_paused"),
    ) {
        (Some(pause), Some(paused)) => {
            crate::say!(
                "    idle eligible → pause {:.1} ms; idle eligible → Paused {:.1} ms",
                pause.as_secs_f64() * 1000.0,
                paused.as_secs_f64() * 1000.0
            );
            Ok(())
        }
        _ => Err(format!(
            "the idle pause phases were not recorded; observed: {:?}",
            w.timeline
                .observations
                .iter()
                .map(|o| o.mark)
                .collect::<Vec<_>>()
        )),
    }
}

#[when(
    expr = "the kernel runs a cell that prints progress for longer than the idle threshold plus two probe intervals"
)]
async fn busy_cell(w: &mut WsWorld) -> StepResult {
    super::kernel::require_kernels(w)?;
    let rule = w.idle_rule.ok_or("no activity rule found: start with the Given step that creates the workspace under an idle pause rule")?;
    let (s, scale) = await_statement(w, "idle_pause").await?;
    let length = idle::busy_cell_length(&rule, scale);
    let every = idle::busy_print_every(&rule, scale);
    let limit = w.budget("idle_pause")?;
    let cell_budget = w.budget("cell")?;
    if length + cell_budget > limit {
        return Err(format!(
            "the busy cell must run {length:?} (secondsSinceActive {} s plus two probe intervals of {} s), \
             more than budget `idle_pause` ({limit:?}) less budget `cell` ({cell_budget:?}): raise budgets.idle_pause",
            rule.seconds_since_active, rule.probe_interval_seconds
        ));
    }
    let budgets = crate::trial::session_budgets(&w.ctx.config);
    let new = w.ws()?.clone();
    let jc = w
        .trial()?
        .jupyter(&w.ctx.config, &w.ctx.token)
        .await
        .map_err(|e| e.to_string())?;
    let kernel = crate::session::start_kernel(&jc, &budgets.connect)
        .await
        .map_err(|e| e.to_string())?;
    w.mark(Mark::KernelReachable, Some(kernel.clone()));

    let samples: Arc<Mutex<Vec<BusySample>>> = Arc::default();
    let api: Api<Workspace> = Api::namespaced(w.ctx.client.clone(), &new.namespace);
    let wf = WaitFor::new("idle_pause", limit, "stay unpaused while the cell runs");
    let seen = samples.clone();
    // Watch (not poll) the Workspace for as long as the cell runs; a pause ends it at once.
    let watch = wait::until(&api, &new.name, &wf, ws::describe, move |o| {
        let Some(o) = o else { return false };
        let sample = BusySample {
            pause_started: idle::pause_started(o),
            last_activity: idle::statement(o).last_activity,
        };
        seen.lock().expect("not poisoned").push(sample);
        sample.pause_started
    });
    let budget = Budget::new("idle_pause", limit - cell_budget);
    let cell = crate::session::protocol::busy_cell(&jc, &kernel, length, every, &budgets, &budget);
    let start_activity = s.last_activity;
    let outcome = tokio::select! {
        cell = cell => Some(cell.map_err(|e| e.to_string())?),
        paused = watch => {
            paused.map_err(|e| e.to_string())?;
            None
        }
    };
    let threshold = idle::scaled(rule.seconds_since_active, scale);
    let record = BusyRecord {
        activity_at_start: start_activity,
        samples: std::mem::take(&mut *samples.lock().expect("not poisoned")),
        threshold,
    };
    if let Some(o) = outcome {
        w.log.push(format!(
            "busy cell: {} progress lines in {:.1} s (asked {length:?}, every {every:?}); {} Workspace updates seen",
            o.lines,
            o.seconds,
            record.samples.len()
        ));
    }
    w.busy = Some(record);
    Ok(())
}

fn busy(w: &WsWorld) -> Result<&BusyRecord, String> {
    w.busy
        .as_ref()
        .ok_or_else(|| "no busy cell ran: add the step that runs the long cell".to_string())
}

#[then(expr = "the workspace was not paused while the cell ran")]
async fn not_paused(w: &mut WsWorld) -> StepResult {
    let r = busy(w)?;
    if r.paused() {
        return Err(format!(
            "the platform paused the workspace while its kernel was busy printing progress; \
             lastActivity went from {} to {} (threshold {:?})",
            r.activity_at_start,
            r.latest_activity(),
            r.threshold
        ));
    }
    Ok(())
}

#[then(expr = "the workspace's last activity advanced while the cell ran")]
async fn activity_advanced(w: &mut WsWorld) -> StepResult {
    let r = busy(w)?;
    if r.advanced_past_threshold() {
        crate::say!(
            "    lastActivity advanced {:.1} s while the cell ran (threshold {:.1} s)",
            r.advance().as_secs_f64(),
            r.threshold.as_secs_f64()
        );
        return Ok(());
    }
    Err(format!(
        "status.activity.lastActivity advanced only {:?} while the cell ran (threshold {:?}, {} updates seen): \
         the activity probe did not see the cell's output as activity",
        r.advance(),
        r.threshold,
        r.samples.len()
    ))
}

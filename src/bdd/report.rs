//! Filling a scenario's report from what cucumber saw (steps, outcome) and what the World
//! collected (timeline, evidence, verdict, snapshot). Glue: the model and writers live in
//! `crate::report`.

use cucumber::event::ScenarioFinished;
use cucumber::gherkin;

use super::world::WsWorld;
use crate::report::{ScenarioReport, ScenarioStatus, StepReport, StepStatus};

/// The scenario's identity and outcome, from the Gherkin and the finish event; the steps
/// come from the step log once the run is over ([`add_steps`]).
pub fn scenario_report(
    feature: &gherkin::Feature,
    scenario: &gherkin::Scenario,
    finished: &ScenarioFinished,
) -> ScenarioReport {
    let (status, failure) = match finished {
        ScenarioFinished::StepFailed(_, _, err) => (ScenarioStatus::Failed, Some(err.to_string())),
        ScenarioFinished::BeforeHookFailed(info) => (
            ScenarioStatus::Failed,
            Some(format!("before hook failed: {info:?}")),
        ),
        ScenarioFinished::StepSkipped => (
            ScenarioStatus::Skipped,
            Some("a step has no definition".to_string()),
        ),
        ScenarioFinished::StepPassed => (ScenarioStatus::Passed, None),
    };
    ScenarioReport {
        feature: feature.name.clone(),
        name: scenario.name.clone(),
        tags: feature
            .tags
            .iter()
            .chain(scenario.tags.iter())
            .cloned()
            .collect(),
        status,
        failure,
        // Every step as not run; the step log fills in what happened ([`add_steps`]).
        steps: feature
            .background
            .iter()
            .flat_map(|b| b.steps.iter())
            .chain(scenario.steps.iter())
            .map(|s| StepReport {
                keyword: s.keyword.trim().to_string(),
                text: s.value.clone(),
                status: StepStatus::NotRun,
                error: None,
            })
            .collect(),
        ..Default::default()
    }
}

/// Puts the logged outcome of each step that ran in place; steps after a failure stay
/// "not run". The failure message then names the failed step.
pub fn add_steps(report: &mut ScenarioReport, logged: Vec<StepReport>) {
    for (slot, step) in report.steps.iter_mut().zip(logged) {
        *slot = step;
    }
    if let Some(failed) = report.steps.iter().find(|s| s.status == StepStatus::Failed) {
        report.failure = Some(format!(
            "{} {}: {}",
            failed.keyword,
            failed.text,
            failed.error.clone().unwrap_or_default()
        ));
    }
}

/// Adds what the World collected.
pub fn add_world(report: &mut ScenarioReport, w: &WsWorld) {
    report.phases = w.timeline.phases();
    report.duration = w.timeline.observations.last().map(|o| o.offset);
    report.timeline = w.timeline.clone();
    report.verdict = w.verdict.clone();
    report.files_verdict = w.files_verdict.clone();
    let trial = w.trial.as_ref();
    report.evidence_before = trial.and_then(|t| Some(t.marked.as_ref()?.before.clone()));
    report.evidence_after = w.after.clone();
    let snapshot = trial.and_then(|t| t.snapshot.as_ref());
    report.snapshot_name = snapshot.map(|s| s.name.clone());
    report.snapshot_uid = snapshot.map(|s| s.uid.clone());
    report.snapshots_left = w.snapshots_left.clone();
    report.log = w.log.clone();
}

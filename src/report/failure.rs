//! What went wrong in a failed scenario and in which phase, in words every writer shares.

use std::time::Duration;

use serde::Serialize;

use super::fmt::{first_line, phase_label};
use super::model::{ScenarioReport, ScenarioStatus};
use crate::timeline::{Mark, PHASES, Timeline};

/// A failed scenario's failure, summarised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailureSummary {
    /// One line: what went wrong, and in which phase.
    pub message: String,
    /// The whole error.
    pub detail: String,
    /// The failed step, as written in the feature.
    pub step: Option<String>,
    /// The phase that started but did not complete (the earliest of the latest-started).
    pub phase: Option<String>,
    /// The last thing observed.
    pub last_observed: Option<String>,
}

/// The failure of `scenario`, or `None` when it did not fail.
pub fn failure_summary(scenario: &ScenarioReport) -> Option<FailureSummary> {
    if scenario.status != ScenarioStatus::Failed {
        return None;
    }
    let step = scenario.failed_step();
    let detail = scenario
        .failure
        .clone()
        .or_else(|| step.and_then(|s| s.error.clone()))
        .unwrap_or_else(|| "the scenario failed without an error message".to_string());
    let phase = open_phase(&scenario.timeline);
    let last_observed = scenario
        .timeline
        .observations
        .iter()
        .max_by_key(|o| o.offset)
        .map(|o| mark_name(o.mark));
    let mut message = first_line(&detail).to_string();
    match (&phase, &last_observed) {
        (Some(p), Some(last)) => message.push_str(&format!(
            " (in phase {}; last observed: {last})",
            phase_label(p)
        )),
        (None, Some(last)) => message.push_str(&format!(" (after {last})")),
        _ => {}
    }
    Some(FailureSummary {
        message,
        detail,
        step: step.map(|s| s.line()),
        phase,
        last_observed,
    })
}

/// The phase that was under way when the scenario stopped: a phase whose start was observed
/// but whose end never came after it, unless a later phase (in [`PHASES`] order) that
/// started no earlier did complete (a cold start completes resume -> recovered, so its
/// resume -> next cell was never under way). Of the rest, the latest-started; on a tie the
/// first in order (resume -> scheduled before resume -> Running).
fn open_phase(timeline: &Timeline) -> Option<String> {
    let state: Vec<(Option<Duration>, bool)> = PHASES
        .iter()
        .map(|def| match timeline.last(def.from) {
            Some(from) if !kind_seen(timeline, def.name, from.offset) => (None, false),
            Some(from) => (
                Some(from.offset),
                timeline.first_after(def.to, from.offset).is_some(),
            ),
            None => (None, false),
        })
        .collect();
    let mut best: Option<(Duration, &str)> = None;
    for (i, def) in PHASES.iter().enumerate() {
        let (Some(start), false) = state[i] else {
            continue;
        };
        let overtaken = state[i + 1..]
            .iter()
            .any(|(s, done)| *done && s.is_some_and(|s| s >= start));
        if overtaken {
            continue;
        }
        if best.is_none_or(|(b, _)| start > b) {
            best = Some((start, def.name));
        }
    }
    best.map(|(_, name)| name.to_string())
}

/// Phases of a VS Code workspace (code-server answered before the phase started) and
/// phases of a JupyterLab one (restore and kernel): a scenario is only ever under way in
/// those of its own kind, so a stateless scenario is never "waiting for PodRestored" and a
/// JupyterLab one never for code-server.
const VSCODE_ONLY: &[&str] = &["resume_to_editor"];
const JUPYTER_ONLY: &[&str] = &[
    "ready_to_pod_restored",
    "resume_to_pod_restored",
    "resume_to_kernel",
    "resume_to_next_cell",
    "resume_to_recovered",
];

/// Whether the phase `name`, started at `start`, belongs to the scenario's kind.
fn kind_seen(timeline: &Timeline, name: &str, start: Duration) -> bool {
    let vscode = timeline
        .observations
        .iter()
        .any(|o| o.mark == Mark::EditorAnswered && o.offset <= start);
    if VSCODE_ONLY.contains(&name) {
        vscode
    } else {
        !(vscode && JUPYTER_ONLY.contains(&name))
    }
}

/// `waiting_for_resources`.
pub(crate) fn mark_name(mark: Mark) -> String {
    serde_json::to_value(mark)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{mark:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::{StepReport, StepStatus};

    fn scenario(marks: &[(Mark, u64)]) -> ScenarioReport {
        let start = chrono::Utc::now();
        let mut t = Timeline::new(start);
        for (m, ms) in marks {
            t.push(*m, start, Duration::from_millis(*ms), None);
        }
        let mut s = ScenarioReport::new("f", "s").with_timeline(t);
        s.status = ScenarioStatus::Failed;
        s.steps = vec![
            StepReport {
                keyword: "When".into(),
                text: "the workspace is resumed".into(),
                status: StepStatus::Passed,
                error: None,
            },
            StepReport {
                keyword: "Then".into(),
                text: "the workspace is Running within the \"resume_to_running\" budget".into(),
                status: StepStatus::Failed,
                error: Some("budget resume_to_running (300 s) ran out\nlast state: Pending".into()),
            },
        ];
        s
    }

    #[test]
    fn names_the_phase_under_way_and_the_failed_step() {
        let s = scenario(&[
            (Mark::PauseRequested, 0),
            (Mark::GpuReleased, 500),
            (Mark::ResumeRequested, 1000),
            (Mark::WaitingForResources, 1500),
        ]);
        let f = failure_summary(&s).unwrap();
        assert_eq!(f.phase.as_deref(), Some("resume_to_scheduled"));
        assert_eq!(
            f.message,
            "budget resume_to_running (300 s) ran out (in phase resume → scheduled; last \
             observed: waiting_for_resources)"
        );
        assert_eq!(
            f.step.as_deref(),
            Some("Then the workspace is Running within the \"resume_to_running\" budget")
        );
        assert!(f.detail.contains("last state: Pending"));
    }

    #[test]
    fn the_editor_phase_is_under_way_only_in_a_vscode_scenario() {
        // code-server answered before the pause: after the resume it is awaited.
        let s = scenario(&[
            (Mark::EditorAnswered, 0),
            (Mark::ResumeRequested, 100),
            (Mark::WorkspaceResumed, 900),
        ]);
        let f = failure_summary(&s).unwrap();
        assert_eq!(
            f.phase.as_deref(),
            Some("resume_to_editor"),
            "{}",
            f.message
        );
        // A JupyterLab scenario never waits for code-server.
        let s = scenario(&[(Mark::ResumeRequested, 100), (Mark::WorkspaceResumed, 900)]);
        let f = failure_summary(&s).unwrap();
        assert_eq!(
            f.phase.as_deref(),
            Some("resume_to_pod_restored"),
            "{}",
            f.message
        );
    }

    #[test]
    fn a_scheduled_pod_moves_the_open_phase_on_and_a_complete_timeline_has_none() {
        let s = scenario(&[(Mark::ResumeRequested, 0), (Mark::PodScheduled, 900)]);
        assert_eq!(
            failure_summary(&s).unwrap().phase.as_deref(),
            Some("resume_to_running")
        );
        let s = scenario(&[(Mark::WorkspaceCreated, 0), (Mark::WorkspaceRunning, 900)]);
        let f = failure_summary(&s).unwrap();
        assert_eq!(f.phase, None);
        assert!(
            f.message.ends_with("(after workspace_running)"),
            "{}",
            f.message
        );
        // A cold start completes resume -> recovered: resume -> next cell was never under way.
        let s = scenario(&[
            (Mark::ResumeRequested, 0),
            (Mark::WorkspaceResumed, 900),
            (Mark::RecoveryDone, 2000),
        ]);
        let f = failure_summary(&s).unwrap();
        assert_eq!(f.phase, None, "{}", f.message);
        assert!(
            f.message.ends_with("(after recovery_done)"),
            "{}",
            f.message
        );
        let mut passed = s.clone();
        passed.status = ScenarioStatus::Passed;
        assert_eq!(failure_summary(&passed), None);
    }
}

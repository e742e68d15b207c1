//! A cucumber writer that records each step's outcome per scenario, so the reports can say
//! which step failed and which never ran. It prints nothing; the terminal writer runs beside
//! it (`tee`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cucumber::{Event, World, Writer, cli, event, gherkin, parser};

use crate::report::{StepReport, StepStatus};

/// A scenario's identity: feature name, scenario name, scenario line.
pub type ScenarioKey = (String, String, usize);

/// Step outcomes per scenario, in the order they were reported.
#[derive(Debug, Clone, Default)]
pub struct StepLog(pub Arc<Mutex<HashMap<ScenarioKey, Vec<StepReport>>>>);

impl StepLog {
    pub fn key(feature: &gherkin::Feature, scenario: &gherkin::Scenario) -> ScenarioKey {
        (
            feature.name.clone(),
            scenario.name.clone(),
            scenario.position.line,
        )
    }

    fn record<W>(&self, key: ScenarioKey, step: &gherkin::Step, ev: &event::Step<W>) {
        let (status, error) = match ev {
            event::Step::Started => return,
            event::Step::Passed(..) => (StepStatus::Passed, None),
            event::Step::Skipped => (
                StepStatus::Skipped,
                Some("no step definition matches".to_string()),
            ),
            event::Step::Failed(_, _, _, err) => (StepStatus::Failed, Some(err.to_string())),
        };
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_default()
            .push(StepReport {
                keyword: step.keyword.trim().to_string(),
                text: step.value.clone(),
                status,
                error,
            });
    }

    /// The recorded steps of a scenario.
    pub fn steps(&self, key: &ScenarioKey) -> Vec<StepReport> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
            .unwrap_or_default()
    }
}

impl<W: World> Writer<W> for StepLog {
    type Cli = cli::Empty;

    async fn handle_event(
        &mut self,
        event: parser::Result<Event<event::Cucumber<W>>>,
        _cli: &Self::Cli,
    ) {
        let Ok(ev) = event else { return };
        let event::Cucumber::Feature(feature, fev) = &ev.value else {
            return;
        };
        let (scenario, sev) = match fev {
            event::Feature::Scenario(s, r) => (s, &r.event),
            event::Feature::Rule(_, event::Rule::Scenario(s, r)) => (s, &r.event),
            _ => return,
        };
        let key = Self::key(feature, scenario);
        match sev {
            event::Scenario::Step(step, e) | event::Scenario::Background(step, e) => {
                self.record(key, step, e)
            }
            _ => {}
        }
    }
}

impl cucumber::writer::NonTransforming for StepLog {}

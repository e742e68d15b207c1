//! Running the suite: check the features, run the scenarios with cucumber (tag and name
//! filters, concurrency, fail-fast), and clean up each scenario's ledger when it finishes,
//! whatever its outcome, after its evidence has been collected.

use std::path::PathBuf;
use std::sync::Arc;

use cucumber::{World as _, WriterExt as _, writer};
use futures::FutureExt;

use super::context::{self, RunContext};
use super::features::{self, Problem};
use super::steplog::StepLog;
use super::world::WsWorld;
use crate::report::ScenarioStatus;

/// What a suite run needs besides the context.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    pub features: PathBuf,
}

/// Why the suite could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("the feature files have problems (nothing was created):\n{}", .0.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Features(Vec<Problem>),
    #[error("invalid tag expression {expr:?}: {message}")]
    Tags { expr: String, message: String },
    #[error("invalid scenario name filter {0:?}")]
    Name(String),
}

/// How the suite went.
#[derive(Debug, Clone, Default)]
pub struct SuiteOutcome {
    pub scenarios: usize,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    /// Scenarios whose verdict is a false restore (`Verdict::false_restore`).
    pub false_restores: usize,
    /// Objects cleanup could not remove.
    pub leaks: Vec<String>,
}

impl SuiteOutcome {
    pub fn exit_code(&self) -> i32 {
        if self.scenarios == 0 {
            // A typo in --tags or --name must not pass a gate by running nothing.
            crate::exit_code::USAGE
        } else if self.false_restores > 0 {
            // The worst failure a run can report has its own code, as in `wsgate gate verify`.
            crate::exit_code::FALSE_RESTORE
        } else if self.failed > 0 || self.skipped > 0 {
            crate::exit_code::FAILED
        } else if !self.leaks.is_empty() {
            crate::exit_code::CLEANUP_LEAK
        } else {
            crate::exit_code::SUCCESS
        }
    }
}

/// Runs the suite against the context's target.
pub async fn run(ctx: Arc<RunContext>, opts: &SuiteOptions) -> Result<SuiteOutcome, SuiteError> {
    features::check(&opts.features).map_err(SuiteError::Features)?;
    let run_cfg = ctx.config.run.clone();
    let tags_filter = match &run_cfg.tags {
        Some(expr) => Some(
            expr.parse::<cucumber::gherkin::tagexpr::TagOperation>()
                .map_err(|e| SuiteError::Tags {
                    expr: expr.clone(),
                    message: e.to_string(),
                })?,
        ),
        None => None,
    };
    let re_filter = match &run_cfg.name {
        Some(n) => Some(regex::Regex::new(n).map_err(|_| SuiteError::Name(n.clone()))?),
        None => None,
    };
    context::install(ctx.clone());
    let cli = cucumber::cli::Opts {
        re_filter,
        tags_filter,
        parser: Default::default(),
        runner: cucumber::runner::basic::Cli {
            concurrency: Some(run_cfg.concurrency as usize),
            fail_fast: run_cfg.fail_fast,
            ..Default::default()
        },
        writer: Default::default(),
        custom: cucumber::cli::Empty,
    };
    let keep = run_cfg.keep;
    let step_log = StepLog::default();
    let writer = WsWorld::cucumber()
        .with_writer(
            writer::Basic::new(
                crate::output::Stdout,
                cucumber::writer::Coloring::Auto,
                cucumber::writer::Verbosity::Default,
            )
            .summarized()
            .tee::<WsWorld, _>(step_log.clone())
            .normalized(),
        )
        .fail_on_skipped()
        .after(move |feature, _rule, scenario, finished, world| {
            let failed = matches!(
                finished,
                cucumber::event::ScenarioFinished::StepFailed(..)
                    | cucumber::event::ScenarioFinished::BeforeHookFailed(_)
            );
            let name = scenario.name.clone();
            let mut report = super::report::scenario_report(feature, scenario, finished);
            let key = StepLog::key(feature, scenario);
            async move {
                let Some(w) = world else {
                    if let Some(ctx) = context::current() {
                        ctx.scenarios
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push((key, report));
                    }
                    return;
                };
                // Evidence first, then cleanup: the report keeps what the scenario saw.
                super::report::add_world(&mut report, w);
                w.ctx
                    .scenarios
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((key, report));
                let keep_it = keep.keeps(failed);
                let budget = w
                    .budget("delete")
                    .unwrap_or(std::time::Duration::from_secs(120));
                let results = w
                    .ledger
                    .cleanup(
                        &w.ctx.client,
                        &crate::platform::ownership::Claim::Run(w.ctx.run_id.clone()),
                        budget,
                        keep_it,
                    )
                    .await;
                let mut all = w.ctx.cleanup.lock().unwrap_or_else(|e| e.into_inner());
                for r in results {
                    all.push((name.clone(), r));
                }
            }
            .boxed_local()
        })
        .with_cli(cli)
        .run(opts.features.clone())
        .await;
    // What the scenarios shared goes last, once none of them needs it.
    let any_failed = ctx
        .scenarios
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|(_, r)| r.status == ScenarioStatus::Failed);
    let keep_shared = keep.keeps(any_failed);
    let budget = ctx.config.budgets.delete.duration();
    let shared = ctx
        .shared
        .lock()
        .await
        .cleanup(
            &ctx.client,
            &crate::platform::ownership::Claim::Run(ctx.run_id.clone()),
            budget,
            keep_shared,
        )
        .await;
    ctx.cleanup
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(shared.into_iter().map(|r| ("(run)".to_string(), r)));
    {
        let mut scenarios = ctx.scenarios.lock().unwrap_or_else(|e| e.into_inner());
        for (key, report) in scenarios.iter_mut() {
            super::report::add_steps(report, step_log.steps(key));
        }
    }
    drop(writer);
    let scenarios = ctx
        .scenarios
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let count = |st: ScenarioStatus| scenarios.iter().filter(|(_, r)| r.status == st).count();
    let leaks = ctx
        .leaks()
        .into_iter()
        .map(|(scenario, r)| format!("{} (scenario {scenario:?}): {:?}", r.object, r.outcome))
        .collect();
    Ok(SuiteOutcome {
        scenarios: scenarios.len(),
        passed: count(ScenarioStatus::Passed),
        failed: count(ScenarioStatus::Failed),
        skipped: count(ScenarioStatus::Skipped),
        false_restores: scenarios
            .iter()
            .filter(|(_, r)| r.verdict.as_ref().is_some_and(|v| v.false_restore()))
            .count(),
        leaks,
    })
}

#[cfg(test)]
mod tests {
    use super::SuiteOutcome;
    use crate::exit_code;

    #[test]
    fn a_false_restore_outranks_a_plain_failure_and_a_leak() {
        let ran = SuiteOutcome {
            scenarios: 3,
            passed: 2,
            failed: 1,
            ..Default::default()
        };
        assert_eq!(ran.exit_code(), exit_code::FAILED);
        let lied = SuiteOutcome {
            false_restores: 1,
            leaks: vec!["Workspace x".into()],
            ..ran.clone()
        };
        assert_eq!(lied.exit_code(), exit_code::FALSE_RESTORE);
        let nothing = SuiteOutcome {
            false_restores: 1,
            ..Default::default()
        };
        assert_eq!(
            nothing.exit_code(),
            exit_code::USAGE,
            "a run of nothing first"
        );
    }
}

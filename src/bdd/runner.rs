//! Running the suite: check the features, run the scenarios with cucumber (tag and name
//! filters, concurrency, fail-fast), and clean up each scenario's ledger when it finishes,
//! whatever its outcome, after its evidence has been collected.

use std::path::PathBuf;
use std::sync::Arc;

use cucumber::{World as _, WriterExt as _, writer};
use futures::FutureExt;

use super::context::{self, RunContext};
use super::features::{self, Problem};
use super::world::WsWorld;
use crate::config::Keep;

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
    pub parse_errors: usize,
    pub hook_errors: usize,
    /// Objects cleanup could not remove.
    pub leaks: Vec<String>,
}

impl SuiteOutcome {
    pub fn exit_code(&self) -> i32 {
        if self.failed > 0 || self.parse_errors > 0 || self.hook_errors > 0 || self.skipped > 0 {
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
    let writer = WsWorld::cucumber()
        .with_writer(writer::Basic::stdout().summarized())
        .fail_on_skipped()
        .after(move |_feature, _rule, scenario, finished, world| {
            let failed = matches!(
                finished,
                cucumber::event::ScenarioFinished::StepFailed(..)
                    | cucumber::event::ScenarioFinished::BeforeHookFailed(_)
            );
            let name = scenario.name.clone();
            async move {
                let Some(w) = world else { return };
                let keep_it = match keep {
                    Keep::Always => true,
                    Keep::Failed => failed,
                    Keep::Never => false,
                };
                let budget = w
                    .budget("delete")
                    .unwrap_or(std::time::Duration::from_secs(120));
                let results = w.ledger.cleanup(&w.ctx.client, budget, keep_it).await;
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
    let stats = writer.scenarios_stats();
    let leaks = ctx
        .leaks()
        .into_iter()
        .map(|(scenario, r)| format!("{} (scenario {scenario:?}): {:?}", r.object, r.outcome))
        .collect();
    Ok(SuiteOutcome {
        scenarios: stats.passed + stats.failed + stats.skipped + stats.retried,
        passed: stats.passed,
        failed: stats.failed,
        skipped: stats.skipped,
        parse_errors: cucumber::writer::Stats::parsing_errors(&writer),
        hook_errors: cucumber::writer::Stats::hook_errors(&writer),
        leaks,
    })
}

//! `wsgate janitor`: removes what wsgate runs left behind in a namespace, by label: all
//! objects of one run (`--run-id`), or every object whose expiry has passed.

use clap::Args;

use super::CommandError;
use crate::cli::TargetArgs;
use crate::config::{self, LoadRequest, TargetKind};
use crate::platform::janitor::{self, Selection};
use crate::platform::ledger::CleanupOutcome;
use crate::platform::target;

#[derive(Debug, Clone, Args)]
pub struct JanitorArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Remove everything of this run (default: everything whose expiry has passed)
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// List what would be removed; remove nothing
    #[arg(long)]
    pub dry_run: bool,
}

pub async fn janitor(args: JanitorArgs) -> Result<i32, CommandError> {
    let resolved = config::load(&LoadRequest {
        profile: None,
        env: std::env::vars().collect(),
        overrides: args.target.overrides(),
    })?;
    let cfg = resolved.config;
    if cfg.target.kind == TargetKind::Sim {
        return Err(CommandError::Usage(
            "`wsgate janitor` cleans a cluster: pass --target cluster with --context or --kubeconfig".into(),
        ));
    }
    let retry = crate::platform::retry::RetryPolicy::from_config(&cfg.api);
    let client = target::connect(target::cluster_config(&cfg.target).await?, retry).await?;
    let ns = cfg.target.namespace.clone();
    let selection = match &args.run_id {
        Some(id) => Selection::Run(id.clone()),
        None => Selection::ExpiredBefore(chrono::Utc::now()),
    };
    let entries = janitor::find_all(&client, &ns, &selection)
        .await
        .map_err(|source| {
            CommandError::Target(target::TargetError::Namespace {
                namespace: ns.clone(),
                source,
            })
        })?;
    if entries.is_empty() {
        println!("nothing to remove in namespace {ns}");
        return Ok(crate::exit_code::SUCCESS);
    }
    if args.dry_run {
        println!("would remove ({} objects):", entries.len());
        for e in &entries {
            println!("  {}", e.describe());
        }
        return Ok(crate::exit_code::SUCCESS);
    }
    let results = janitor::sweep(&client, &entries, cfg.budgets.delete.duration()).await;
    let mut leaked = false;
    for r in &results {
        leaked |= matches!(r.outcome, CleanupOutcome::Leaked(_));
        println!("  {:<60} {:?}", r.object, r.outcome);
    }
    Ok(if leaked {
        crate::exit_code::CLEANUP_LEAK
    } else {
        crate::exit_code::SUCCESS
    })
}

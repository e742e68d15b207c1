//! `wsgate janitor`: removes what wsgate runs left behind in a namespace, by label: all
//! objects of one run (`--run-id`), or every object whose expiry has passed; likewise the
//! squeeze taints on nodes (`squeeze.method = \"taint\"`), whose value names run and expiry.

use super::CommandError;
use crate::cli::janitor::JanitorArgs;
use crate::config::{self, LoadRequest, TargetKind};
use crate::platform::janitor::{self, Selection};
use crate::platform::target;

pub async fn janitor(args: JanitorArgs) -> Result<i32, CommandError> {
    let resolved = config::load(&LoadRequest {
        profile: None,
        env: crate::config::process_env()?,
        overrides: args.target.overrides(),
    })?;
    let cfg = resolved.config;
    // Checked before anything is read: an empty id would select every object whose run-id
    // label is empty.
    if let Some(id) = &args.run_id {
        crate::platform::ownership::check_run_id(id)
            .map_err(|why| CommandError::Usage(format!("--run-id: {why}")))?;
    }
    if cfg.target.kind == TargetKind::Sim {
        return Err(CommandError::Usage(
            "`wsgate janitor` cleans a cluster: pass --target cluster with --context or --kubeconfig".into(),
        ));
    }
    let retry = crate::platform::retry::RetryPolicy::from_config(&cfg.api);
    let client = target::connect(target::cluster_config(&cfg.target).await?, retry).await?;
    let ns = cfg.target.namespace.clone();
    // It deletes only wsgate-labelled objects, and still only where wsgate may act at all.
    target::check_opt_in(&client, &ns).await?;
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
    // Squeeze taints are on nodes (cluster-wide); reading nodes needs only the ClusterRole.
    let taints = janitor::find_taints(&client, &selection)
        .await
        .map_err(|source| CommandError::Target(target::TargetError::Nodes { source }))?;
    if entries.is_empty() && taints.is_empty() {
        crate::say!("nothing to remove in namespace {ns} or on the nodes");
        return Ok(crate::exit_code::SUCCESS);
    }
    if args.dry_run {
        crate::say!(
            "would remove ({} objects, {} node taints):",
            entries.len(),
            taints.len()
        );
        for t in &taints {
            crate::say!("  {}", t.describe());
        }
        for e in &entries {
            crate::say!("  {}", e.describe());
        }
        return Ok(crate::exit_code::SUCCESS);
    }
    let budget = cfg.budgets.delete.duration();
    let mut results = janitor::sweep_taints(&client, &selection, &taints, budget).await;
    results.extend(janitor::sweep(&client, &selection, &entries, budget).await);
    let mut leaked = false;
    for r in &results {
        leaked |= r.is_leak();
        crate::say!("  {:<60} {:?}", r.object, r.outcome);
    }
    Ok(if leaked {
        crate::exit_code::CLEANUP_LEAK
    } else {
        crate::exit_code::SUCCESS
    })
}

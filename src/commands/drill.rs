//! `wsgate drill --workspaces N --gpus M`: a capacity-contention drill. On the embedded
//! simulator the pool has exactly M one-GPU nodes and the `none` runtime, with the sampled
//! workspaces running real Jupyter servers; on a cluster the namespace is held to M GPUs
//! with a ResourceQuota.

use super::CommandError;
use crate::cli::drill::DrillArgs;
use crate::config::TargetKind;
use crate::drill::{self, DrillPlan};
use crate::platform::ledger::{self, CleanupOutcome, Ledger};
use crate::platform::target;

/// The most workspaces one drill takes (`--workspaces`): a bound on what it creates in the
/// namespace and on the harness's memory; a thousand is the size the drill benchmark runs.
pub const MAX_WORKSPACES: usize = 5000;

fn say(line: &str) {
    println!("drill: {line}");
}

pub async fn drill(args: DrillArgs) -> Result<i32, CommandError> {
    if args.workspaces > MAX_WORKSPACES {
        return Err(CommandError::Usage(format!(
            "--workspaces {} is above the most one drill takes ({MAX_WORKSPACES}); run \
             several drills, or fewer workspaces",
            args.workspaces
        )));
    }
    if args.gpus == 0 || args.gpus as usize >= args.workspaces {
        return Err(CommandError::Usage(format!(
            "a drill needs 0 < M < N: --gpus {} for --workspaces {}",
            args.gpus, args.workspaces
        )));
    }
    if args.sample > args.workspaces {
        return Err(CommandError::Usage(format!(
            "--sample {} is more than --workspaces {}",
            args.sample, args.workspaces
        )));
    }
    let resolved = super::load_config(
        &args.target,
        args.profile.as_deref(),
        args.reports.as_deref(),
        &args.set,
    )?;
    let mut cfg = resolved.config;
    let run_id = super::run::new_run_id();
    let retry = crate::platform::retry::RetryPolicy::from_config(&cfg.api);
    let (client, sim, quota, sample_annotations, target_words) = match cfg.target.kind {
        TargetKind::Sim => {
            let gpus = args.gpus;
            let sim = super::run::start_simulator_with(&cfg, |p| {
                p.runtime.kind = crate::sim::profile::RuntimeKind::None;
                let mut first = true;
                for pool in p.node_pools.iter_mut().filter(|n| n.gpus_per_node > 0) {
                    pool.count = if first { gpus } else { 0 };
                    pool.gpus_per_node = 1;
                    first = false;
                }
            })
            .await?;
            say(&format!(
                "target: the embedded simulator at {} (not a real cluster): {} one-GPU nodes, \
                 runtime none, the sampled workspaces on real Jupyter servers",
                sim.url(),
                args.gpus
            ));
            let annotations = [(
                crate::sim::pods::RUNTIME_ANNOTATION.to_string(),
                "jupyter".to_string(),
            )]
            .into();
            let words = format!(
                "the embedded simulator at {} (not a real cluster)",
                sim.url()
            );
            (
                target::connect(sim.config().await?, retry).await?,
                Some(sim),
                false,
                annotations,
                words,
            )
        }
        TargetKind::Cluster => {
            let kc = target::cluster_config(&cfg.target).await?;
            say(&format!("target: cluster at {}", kc.cluster_url));
            let words = format!("the cluster at {}", kc.cluster_url);
            (
                target::connect(kc, retry).await?,
                None,
                true,
                Default::default(),
                words,
            )
        }
    };
    target::check_opt_in(&client, &cfg.target.namespace).await?;
    if let Some(picked) = crate::platform::options::settle(&client, &mut cfg).await? {
        say(&picked);
    }
    let expires = chrono::Utc::now() + chrono::Duration::hours(i64::from(cfg.run.expiry_hours));
    let plan = DrillPlan {
        workspaces: args.workspaces,
        gpus: args.gpus,
        sample: args.sample,
        quota,
        sample_annotations,
        run_id: run_id.clone(),
        labels: ledger::labels(&run_id, expires),
        token: crate::session::Secret::new(super::run::random_hex(24)),
    };
    say(&format!("run id {run_id}"));
    let mut ledger = Ledger::default();
    let outcome = tokio::select! {
        r = drill::run(&client, &cfg, &plan, &mut ledger, &say) => Some(r),
        signal = super::interrupted() => {
            eprintln!("{}: interrupted; removing what drill {run_id} created", signal?);
            None
        }
    };
    // Everything the drill created carries its run id: sweep by label, which also finds
    // what an interrupted drill had not recorded yet.
    let budget = cfg.budgets.delete.duration();
    let ns = &cfg.target.namespace;
    let mut results = crate::platform::janitor::sweep_run(&client, ns, &run_id, budget).await;
    let selection = crate::platform::janitor::Selection::Run(run_id.clone());
    results.extend(ledger.cleanup(&client, &selection, budget, false).await);
    let leaks: Vec<_> = results.iter().filter(|r| r.is_leak()).collect();
    for l in &leaks {
        eprintln!("leak: {} {:?}", l.object, l.outcome);
    }
    for r in &results {
        if let CleanupOutcome::Refused(why) = &r.outcome {
            eprintln!("{why}");
        }
    }
    if let Some(sim) = sim {
        sim.shutdown().await;
    }
    let Some(outcome) = outcome else {
        return Ok(crate::exit_code::INTERRUPTED);
    };
    // The whole chain: the cause (a 409 naming whose object it is) is what to act on.
    let report = outcome.map_err(|e| CommandError::Usage(crate::output::one_line(&e)));
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: the drill could not run to its end: {e}");
            return Ok(crate::exit_code::FAILED);
        }
    };
    println!();
    print!("{}", report.table());
    let redactor = crate::report::Redactor::new(vec![plan.token.expose().to_string()]);
    match crate::report::write_json(&report, &cfg.reports.dir, &run_id, "drill.json", &redactor) {
        Ok(path) => say(&format!("report written to {}", path.display())),
        Err(e) => eprintln!("warning: {e}"),
    }
    let page = report.html(&run_id, &target_words);
    match crate::report::write_page(&page, &cfg.reports.dir, &run_id, "drill.html", &redactor) {
        Ok(path) => say(&format!("page written to {}", path.display())),
        Err(e) => eprintln!("warning: {e}"),
    }
    let problems = report.problems();
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("problem: {p}");
        }
        return Ok(crate::exit_code::FAILED);
    }
    say(&format!(
        "all {} workspaces restored; at most one restore attempt each",
        report.workspaces
    ));
    if !leaks.is_empty() {
        return Ok(crate::exit_code::CLEANUP_LEAK);
    }
    Ok(crate::exit_code::SUCCESS)
}

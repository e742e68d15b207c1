//! `wsgate drill --workspaces N --gpus M`: a capacity-contention drill. On the embedded
//! simulator the pool has exactly M one-GPU nodes and the `none` runtime, with the sampled
//! workspaces running real Jupyter servers; on a cluster the namespace is held to M GPUs
//! with a ResourceQuota.

use super::CommandError;
use super::shell::{self, Ended, Target, until_interrupted};
use crate::cli::drill::DrillArgs;
use crate::drill::{self, DrillPlan};
use crate::platform::ledger::{self, Ledger};

/// The most workspaces one drill takes (`--workspaces`): a bound on what it creates in the
/// namespace and on the harness's memory; a thousand is the size the drill benchmark runs.
pub const MAX_WORKSPACES: usize = 5000;

fn say(line: &str) {
    crate::say!("drill: {line}");
}

/// Refuses sizes a drill cannot take, before anything is contacted.
fn check_size(args: &DrillArgs) -> Result<(), CommandError> {
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
    Ok(())
}

/// The simulated pool of a drill: `gpus` one-GPU nodes (the first GPU pool's), the `none`
/// runtime (the sampled workspaces get real Jupyter servers by annotation).
fn drill_pool(p: &mut crate::sim::profile::SimProfile, gpus: u32) {
    p.runtime.kind = crate::sim::profile::RuntimeKind::None;
    let mut first = true;
    for pool in p.node_pools.iter_mut().filter(|n| n.gpus_per_node > 0) {
        pool.count = if first { gpus } else { 0 };
        pool.gpus_per_node = 1;
        first = false;
    }
}

pub async fn drill(args: DrillArgs) -> Result<i32, CommandError> {
    check_size(&args)?;
    let resolved = super::load_config(
        &args.target,
        args.profile.as_deref(),
        args.reports.as_deref(),
        &args.set,
    )?;
    let mut cfg = resolved.config;
    crate::report::check_reports_dir(&cfg.reports.dir).map_err(|e| {
        CommandError::writing_reports(e, "--reports (or reports.dir) before the drill starts")
    })?;
    let run_id = super::run::new_run_id();
    let gpus = args.gpus;
    let target = Target::open(&cfg, |p| drill_pool(p, gpus)).await?;
    let simulated = target.sim.is_some();
    if simulated {
        say(&format!(
            "target: {}: {} one-GPU nodes, runtime none, the sampled workspaces on real \
             Jupyter servers",
            target.words, args.gpus
        ));
    } else {
        say(&format!("target: cluster at {}", target.server));
    }
    if let Err(e) = target.settle_options(&mut cfg, &say).await {
        target.close().await;
        return Err(e);
    }
    let expires = chrono::Utc::now() + chrono::Duration::hours(i64::from(cfg.run.expiry_hours));
    let plan = DrillPlan {
        workspaces: args.workspaces,
        gpus: args.gpus,
        sample: args.sample,
        quota: !simulated,
        sample_annotations: if simulated {
            [(
                crate::sim::pods::RUNTIME_ANNOTATION.to_string(),
                "jupyter".to_string(),
            )]
            .into()
        } else {
            Default::default()
        },
        run_id: run_id.clone(),
        labels: ledger::labels(&run_id, expires),
        token: crate::session::Secret::new(super::run::random_hex(24)),
    };
    say(&format!("run id {run_id}"));
    let mut ledger = Ledger::default();
    let client = target.client.clone();
    let ended = until_interrupted(drill::run(&client, &cfg, &plan, &mut ledger, &say)).await?;
    if let Ended::Interrupted(signal) = &ended {
        crate::say_err!("{signal}: interrupted; removing what drill {run_id} created");
    }
    // Everything the drill created carries its run id: sweep by label, which also finds
    // what an interrupted drill had not recorded yet. Each pass ends when the pods of the
    // Workspaces it deleted are gone too (`ledger::wait_for_workspace_pods`).
    let mut results = shell::sweep(&client, &cfg, &run_id).await;
    let selection = crate::platform::janitor::Selection::Run(run_id.clone());
    let budget = cfg.budgets.delete.duration();
    let mut recorded = ledger.cleanup(&client, &selection, budget, false).await;
    // What the sweep already named a leak (a pod still terminating, say) is said once.
    recorded
        .retain(|r| !(r.is_leak() && results.iter().any(|s| s.object == r.object && s.is_leak())));
    shell::say_cleanup(&recorded);
    results.extend(recorded);
    let leaked = results.iter().any(|r| r.is_leak());
    let words = target.words.clone();
    target.close().await;
    let Ended::Done(outcome) = ended else {
        return Ok(crate::exit_code::INTERRUPTED);
    };
    // The whole chain: the cause (a 409 naming whose object it is) is what to act on.
    match outcome {
        Ok(report) => Ok(finish(&report, &cfg, &run_id, &plan, &words, leaked)),
        Err(e) => {
            let e = crate::output::one_line(&e);
            crate::say_err!("error: the drill could not run to its end: {e}");
            Ok(crate::exit_code::FAILED)
        }
    }
}

/// Prints the drill's table, writes `drill.json` and `drill.html`, and gives the exit code.
fn finish(
    report: &drill::DrillReport,
    cfg: &crate::config::Config,
    run_id: &str,
    plan: &DrillPlan,
    words: &str,
    leaked: bool,
) -> i32 {
    crate::say!();
    crate::output::say_text(&report.table().to_string());
    let redactor = crate::report::Redactor::new(vec![plan.token.expose().to_string()]);
    match crate::report::write_json(report, &cfg.reports.dir, run_id, "drill.json", &redactor) {
        Ok(path) => say(&format!("report written to {}", path.display())),
        Err(e) => crate::say_err!("warning: {e}"),
    }
    let page = report.html(run_id, words);
    match crate::report::write_page(&page, &cfg.reports.dir, run_id, "drill.html", &redactor) {
        Ok(path) => say(&format!("page written to {}", path.display())),
        Err(e) => crate::say_err!("warning: {e}"),
    }
    let problems = report.problems();
    if !problems.is_empty() {
        for p in &problems {
            crate::say_err!("problem: {p}");
        }
        if report.false_restore() {
            return crate::exit_code::FALSE_RESTORE;
        }
        return crate::exit_code::FAILED;
    }
    say(&format!(
        "all {} workspaces restored; at most one restore attempt each",
        report.workspaces
    ));
    if leaked {
        return crate::exit_code::CLEANUP_LEAK;
    }
    crate::exit_code::SUCCESS
}

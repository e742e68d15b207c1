//! `wsgate gate prepare` (before an upgrade) and `wsgate gate verify --state FILE` (after
//! it): a release gate that spans the upgrade. The state file is the only hand-off, so the
//! two may run in different processes on different machines; both talk to a cluster (for
//! the simulator, start `wsgate sim` and use the kubeconfig it writes).

use super::CommandError;
use super::shell::{self, Ended, Target, until_interrupted};
use crate::cli::gate::{CommonArgs, GateArgs, GateCommand, PrepareArgs, VerifyArgs};
use crate::config::{Config, TargetKind};
use crate::gate::{self, GateState, GateVerdict, PrepareOptions, VerifyOptions};
use crate::platform::ledger::CleanupOutcome;

/// The resolved config and the cluster, opened (the simulator is refused: it would not
/// outlive prepare's process).
async fn connect(common: &CommonArgs) -> Result<(Config, Target), CommandError> {
    let resolved = super::load_config(
        &common.target,
        common.profile.as_deref(),
        common.reports.as_deref(),
        &common.set,
    )?;
    for w in &resolved.warnings {
        crate::say_err!("warning: {w}");
    }
    let cfg = resolved.config;
    if cfg.target.kind == TargetKind::Sim {
        return Err(CommandError::Usage(
            "`wsgate gate` spans an upgrade, so prepare and verify run in separate processes and \
             the embedded simulator would not outlive the first: pass --target cluster with \
             --context or --kubeconfig (to try it on the simulator, start `wsgate sim` and use \
             the kubeconfig it writes)"
                .into(),
        ));
    }
    let target = Target::open(&cfg, |_| {}).await?;
    Ok((cfg, target))
}

fn say(line: &str) {
    crate::say!("gate: {line}");
}

/// After an interrupt: removes everything the gate's run created (found by its run-id
/// label, taints included), says what it removed and what it could not, and gives the exit
/// code.
async fn sweep_interrupted(client: &kube::Client, cfg: &Config, run_id: &str) -> i32 {
    for r in shell::sweep(client, cfg, run_id).await {
        if !r.is_leak() && !matches!(r.outcome, CleanupOutcome::Refused(_)) {
            say(&format!("cleanup: {}: {:?}", r.object, r.outcome));
        }
    }
    crate::exit_code::INTERRUPTED
}

pub async fn gate(args: GateArgs) -> Result<i32, CommandError> {
    match args.command {
        GateCommand::Prepare(a) => prepare(a).await,
        GateCommand::Verify(a) => verify(a).await,
    }
}

async fn prepare(args: PrepareArgs) -> Result<i32, CommandError> {
    let (mut cfg, target) = connect(&args.common).await?;
    target.settle_options(&mut cfg, &say).await?;
    let (client, server) = (target.client, target.server);
    let opts = PrepareOptions {
        run_id: format!("gate-{}", super::run::random_hex(4)),
        expires_in: chrono::Duration::hours(i64::from(args.expires_in_hours)),
        server,
        token: crate::session::Secret::new(super::run::random_hex(24)),
    };
    say(&format!(
        "preparing the release gate (run id {}) in namespace {}",
        opts.run_id, cfg.target.namespace
    ));
    let prepared = match until_interrupted(gate::prepare(&client, &cfg, &opts, &say)).await? {
        Ended::Done(r) => r,
        Ended::Interrupted(signal) => {
            crate::say_err!(
                "{signal}: interrupted; removing what gate prepare {} created",
                opts.run_id
            );
            return Ok(sweep_interrupted(&client, &cfg, &opts.run_id).await);
        }
    };
    let state = prepared?;
    state.write(&args.common.state)?;
    say(&format!(
        "state written to {}; the workspace {} stays paused until `wsgate gate verify --state {}` \
         after the upgrade (or until {} when `wsgate janitor` may remove it)",
        args.common.state.display(),
        state.workspace,
        args.common.state.display(),
        state.expires_at.format("%Y-%m-%d %H:%M UTC"),
    ));
    Ok(crate::exit_code::SUCCESS)
}

/// The gate's verdict, summary, guidance, phases and restore verdict, on stdout.
fn print_outcome(outcome: &gate::GateOutcome) {
    crate::say!();
    crate::say!("gate verdict: {}", outcome.verdict);
    crate::say!("  {}", outcome.summary);
    if let Some(g) = &outcome.guidance {
        crate::say!("  guidance for users: {g}");
    }
    match outcome.resume_to_next_cell {
        Some(d) => crate::say!(
            "  resume -> Running {:.2} s; resume -> next cell done {:.2} s",
            outcome.resume_to_running.as_secs_f64(),
            d.as_secs_f64()
        ),
        None => crate::say!(
            "  resume -> Running {:.2} s",
            outcome.resume_to_running.as_secs_f64()
        ),
    }
    crate::output::say_text(&outcome.restore.to_string());
}

/// `gate-verify.json` and `gate-verify.html` under `dir`, with the token redacted; a file
/// that cannot be written is a warning (the verdict is already on stdout).
fn write_results(
    outcome: &gate::GateOutcome,
    dir: &std::path::Path,
    run_id: &str,
    server: &str,
    token: Option<String>,
) {
    let redactor = crate::report::Redactor::new(token.into_iter().collect());
    match crate::report::write_json(outcome, dir, run_id, "gate-verify.json", &redactor) {
        Ok(path) => say(&format!("result written to {}", path.display())),
        Err(e) => crate::say_err!("warning: {e}"),
    }
    let page = outcome.html(run_id, &format!("the cluster at {server}"));
    match crate::report::write_page(&page, dir, run_id, "gate-verify.html", &redactor) {
        Ok(path) => say(&format!("page written to {}", path.display())),
        Err(e) => crate::say_err!("warning: {e}"),
    }
}

async fn verify(args: VerifyArgs) -> Result<i32, CommandError> {
    // Read the state first: a bad file is a usage error before anything is contacted.
    let state = GateState::read(&args.common.state)?;
    let mut common = args.common.clone();
    if common.target.namespace.is_none() {
        common.target.namespace = Some(state.namespace.clone());
    }
    let (cfg, target) = connect(&common).await?;
    let (client, server) = (target.client, target.server);
    if cfg.target.namespace != state.namespace {
        return Err(CommandError::Usage(format!(
            "the state file is for namespace {:?}, not {:?}",
            state.namespace, cfg.target.namespace
        )));
    }
    if server != state.server {
        crate::say_err!(
            "warning: prepare talked to {}, verify talks to {server} (a new endpoint after the upgrade?)",
            state.server
        );
    }
    crate::report::check_reports_dir(&cfg.reports.dir).map_err(|e| {
        CommandError::writing_reports(e, "--reports (or reports.dir) before verify starts")
    })?;
    say(&format!(
        "verifying the release gate {} (prepared {}) on workspace {}/{}",
        state.run_id,
        state.prepared_at.format("%Y-%m-%d %H:%M UTC"),
        state.namespace,
        state.workspace
    ));
    // The token, for the result's redactor (verify removes its Secret when it is done).
    let token = match crate::trial::read_token(&client, &state.namespace).await {
        Ok(t) => Some(t),
        Err(e) => {
            crate::say_err!(
                "warning: {e}: the result file is written without the token's redaction"
            );
            None
        }
    };
    let work = gate::verify(
        &client,
        &cfg,
        &state,
        VerifyOptions { keep: args.keep },
        &say,
    );
    let verified = match until_interrupted(work).await? {
        Ended::Done(r) => r,
        Ended::Interrupted(signal) => {
            if args.keep || crate::platform::ownership::check_run_id(&state.run_id).is_err() {
                crate::say_err!(
                    "{signal}: interrupted; the workspace and its objects are left in place"
                );
                return Ok(crate::exit_code::INTERRUPTED);
            }
            crate::say_err!(
                "{signal}: interrupted; removing what gate {} created",
                state.run_id
            );
            return Ok(sweep_interrupted(&client, &cfg, &state.run_id).await);
        }
    };
    let outcome = verified?;
    print_outcome(&outcome);
    let token = token.map(|t| t.expose().to_string());
    write_results(&outcome, &cfg.reports.dir, &state.run_id, &server, token);
    shell::say_cleanup(&outcome.cleanup);
    let leaks: Vec<_> = outcome.cleanup.iter().filter(|r| r.is_leak()).collect();
    let code = if args.require_restore && outcome.verdict == GateVerdict::SnapshotInvalidated {
        crate::exit_code::FRESH_SESSION
    } else {
        outcome.exit_code()
    };
    if code == crate::exit_code::SUCCESS && !leaks.is_empty() {
        return Ok(crate::exit_code::CLEANUP_LEAK);
    }
    Ok(code)
}

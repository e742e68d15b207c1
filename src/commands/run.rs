//! `wsgate run`: resolve the configuration, connect to the target (the embedded simulator
//! unless a cluster is named), and run the suite. `--dry-run` prints the plan only.

use std::path::Path;

use super::CommandError;
use super::shell::Target;
use crate::cli::{KeepArg, RunArgs};
use crate::config::{self, LoadRequest, Override, Resolved, TargetKind};
use crate::platform::target;
use crate::sim::SimHandle;

fn overrides(args: &RunArgs) -> Result<Vec<Override>, CommandError> {
    let mut out = args.target.overrides();
    if let Some(t) = &args.tags {
        out.push(Override::new("run.tags", t.clone(), "--tags"));
    }
    if let Some(n) = &args.name {
        out.push(Override::new("run.name", n.clone(), "--name"));
    }
    if let Some(c) = args.concurrency {
        out.push(Override::new(
            "run.concurrency",
            c.to_string(),
            "--concurrency",
        ));
    }
    if args.fail_fast {
        out.push(Override::new("run.fail_fast", "true", "--fail-fast"));
    }
    if let Some(k) = args.keep {
        let v = match k {
            KeepArg::Never => "never",
            KeepArg::Failed => "failed",
            KeepArg::Always => "always",
        };
        out.push(Override::new("run.keep", v, "--keep"));
    }
    if let Some(r) = &args.reports {
        out.push(Override::new(
            "reports.dir",
            r.display().to_string(),
            "--reports",
        ));
    }
    for s in &args.set {
        out.push(Override::from_assignment(s, "--set")?);
    }
    Ok(out)
}

/// Where the suite's features come from: the ones shipped in the binary, or `--features`.
fn feature_source(args: &RunArgs) -> Option<std::path::PathBuf> {
    // An absolute path: cucumber would resolve a relative one that does not exist against
    // the directory wsgate was built in.
    args.features
        .as_ref()
        .map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()))
}

/// The feature files the suite would run: the `.feature` files under `dir` (or the one file
/// it names), else the shipped ones.
fn feature_files(dir: Option<&Path>) -> Vec<String> {
    match dir {
        Some(dir) => crate::bdd::features::files(dir)
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        None => crate::bdd::features::SHIPPED
            .iter()
            .map(|(name, _)| format!("{name} (shipped)"))
            .collect(),
    }
}

fn print_plan(resolved: &Resolved, features: Option<&Path>) {
    let c = &resolved.config;
    println!("# wsgate run --dry-run: nothing is created, nothing is contacted\n");
    println!("{}", resolved.render());
    println!("# Plan");
    match c.target.kind {
        TargetKind::Sim => println!(
            "- target: the embedded simulator (not a real cluster), profile {}",
            c.sim.profile.display()
        ),
        TargetKind::Cluster => println!(
            "- target: a real cluster (context {}), namespace {:?} must carry {}=true",
            c.target
                .context
                .as_deref()
                .unwrap_or("from --kubeconfig/KUBECONFIG/in-cluster"),
            c.target.namespace,
            target::OPT_IN_LABEL
        ),
    }
    let files = feature_files(features);
    if files.is_empty() {
        println!(
            "- features: none found under {}",
            features
                .map(Path::display)
                .map(|d| d.to_string())
                .unwrap_or_default()
        );
    } else {
        for f in files {
            println!("- feature: {f}");
        }
    }
    println!("- reports: {}/<run-id>/", c.reports.dir.display());
}

pub async fn run(args: RunArgs) -> Result<i32, CommandError> {
    let request = LoadRequest {
        profile: args.profile.clone(),
        env: crate::config::process_env()?,
        overrides: overrides(&args)?,
    };
    let resolved = config::load(&request)?;
    for w in &resolved.warnings {
        crate::say_err!("warning: {w}");
    }
    let given = feature_source(&args);
    if args.dry_run {
        print_plan(&resolved, given.as_deref());
        return Ok(crate::exit_code::SUCCESS);
    }
    let mut cfg = resolved.config.clone();
    let (features, shipped_dir) = features_to_run(given)?;
    // Check the features before anything is started or created.
    crate::bdd::features::check(&features).map_err(crate::bdd::SuiteError::Features)?;
    crate::report::check_reports_dir(&cfg.reports.dir).map_err(|e| {
        CommandError::writing_reports(e, "--reports (or reports.dir) before the run starts")
    })?;
    let target = open_target(&mut cfg).await?;
    let Target {
        client,
        sim,
        server,
        version,
        ..
    } = target;
    let server = Server {
        url: server,
        version,
    };
    let ctx = run_context(client, sim.is_some(), cfg);
    crate::say!("run id: {}", ctx.run_id);
    let started_at = chrono::Utc::now();
    let suite_options = crate::bdd::runner::SuiteOptions { features };
    // Caught from here on: the suite's first request comes after this line.
    let mut interrupts = super::Interrupts::install()?;
    let sampler = sample_gpus(ctx.client.clone());
    let suite = crate::bdd::run(ctx.clone(), &suite_options);
    let sim_failed = async {
        match &sim {
            Some(s) => s.failed().await,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        outcome = suite => outcome?,
        message = sim_failed => {
            // The simulator stopped on its own (a controller panicked) and took its cluster
            // and every pod process with it: there is nothing left to clean up.
            crate::say_err!("error: {message}");
            crate::say_err!("error: the embedded simulator stopped; the run is abandoned (a bug in wsgate's simulator: please report it with this message)");
            let gpu_allocation = stop_sampler(sampler).await;
            write_reports(&ctx, &resolved, gpu_allocation, started_at, server, sim.as_ref(), crate::exit_code::INTERNAL);
            return Ok(crate::exit_code::INTERNAL);
        }
        signal = interrupts.recv() => {
            return Ok(interrupted(signal, &ctx, &resolved, sampler, started_at, server, sim).await);
        }
    };
    let gpu_allocation = stop_sampler(sampler).await;
    let written = write_reports(
        &ctx,
        &resolved,
        gpu_allocation,
        started_at,
        server,
        sim.as_ref(),
        outcome.exit_code(),
    );
    let source = match &shipped_dir {
        Some(_) => "wsgate (`wsgate run --dry-run` lists them)".to_string(),
        None => suite_options.features.display().to_string(),
    };
    summarize(&outcome, &ctx.config, &source);
    if let Some(sim) = sim {
        sim.shutdown().await;
    }
    // A run that passed but lost its reports (the disk filled up during the run) says so.
    match outcome.exit_code() {
        crate::exit_code::SUCCESS if !written => Ok(crate::exit_code::OUTPUT),
        code => Ok(code),
    }
}

/// The run's context: a new run id and Jupyter token (`WSGATE_JUPYTER_TOKEN` pins it: tests
/// check that no report contains it).
fn run_context(
    client: kube::Client,
    simulator: bool,
    config: config::Config,
) -> std::sync::Arc<crate::bdd::RunContext> {
    std::sync::Arc::new(crate::bdd::RunContext {
        client,
        run_id: new_run_id(),
        token: crate::session::Secret::new(
            std::env::var("WSGATE_JUPYTER_TOKEN")
                .ok()
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| random_hex(24)),
        ),
        simulator,
        cleanup: Default::default(),
        shared: Default::default(),
        scenarios: Default::default(),
        config,
    })
}

/// The features to run: the directory or file given, or the shipped ones written to a
/// temporary directory that lives as long as the run (cucumber reads files; nothing is read
/// from the working directory).
fn features_to_run(
    given: Option<std::path::PathBuf>,
) -> Result<(std::path::PathBuf, Option<tempfile::TempDir>), CommandError> {
    if let Some(dir) = given {
        return Ok((dir, None));
    }
    let io = |source| CommandError::Io {
        what: "write the shipped features to a temporary directory",
        source,
    };
    let tmp = tempfile::Builder::new()
        .prefix("wsgate-shipped-")
        .tempdir()
        .map_err(io)?;
    let dir = crate::bdd::features::write_shipped(tmp.path()).map_err(io)?;
    Ok((dir, Some(tmp)))
}

/// Opens the run's target, says which it is and that the namespace is opted in, and
/// settles the workspace options.
async fn open_target(cfg: &mut config::Config) -> Result<Target, CommandError> {
    let target = Target::open(cfg, |_| {}).await?;
    match &target.sim {
        Some(_) => crate::say!(
            "target: {}{}",
            target.words,
            if cfg.sim.enforce_rbac {
                "; it enforces the RBAC of deploy/base"
            } else {
                ""
            }
        ),
        None => crate::say!("target: cluster at {}", target.server),
    }
    crate::say!(
        "namespace {:?} is opted in ({}=true)",
        cfg.target.namespace,
        target::OPT_IN_LABEL
    );
    if let Err(e) = target.settle_options(cfg, &|l| crate::say!("{l}")).await {
        target.close().await;
        return Err(e);
    }
    Ok(target)
}

/// The run's last lines: the counts, each leak, and why a run of no scenario fails.
fn summarize(outcome: &crate::bdd::SuiteOutcome, cfg: &config::Config, source: &str) {
    crate::say!(
        "{} scenarios: {} passed, {} failed, {} skipped",
        outcome.scenarios,
        outcome.passed,
        outcome.failed,
        outcome.skipped
    );
    for leak in &outcome.leaks {
        crate::say_err!("leak: {leak}");
    }
    if outcome.scenarios == 0 {
        crate::say_err!(
            "error: no scenario matched (tags: {}, name: {}): nothing ran, and a run of nothing \
             does not pass; check --tags and --name against the features in {source}",
            cfg.run.tags.as_deref().unwrap_or("(any)"),
            cfg.run.name.as_deref().unwrap_or("(any)"),
        );
    }
}

/// After SIGINT or SIGTERM: the in-flight scenarios are abandoned; everything this run
/// created carries its run-id label, so it is swept by label (taints included), and the
/// reports are still written. Returns the exit code.
async fn interrupted(
    signal: &str,
    ctx: &std::sync::Arc<crate::bdd::RunContext>,
    resolved: &config::Resolved,
    sampler: GpuSampler,
    started_at: chrono::DateTime<chrono::Utc>,
    server: Server,
    sim: Option<SimHandle>,
) -> i32 {
    crate::say_err!(
        "{signal}: interrupted; removing what run {} created",
        ctx.run_id
    );
    let budget = ctx.config.budgets.delete.duration();
    let ns = &ctx.config.target.namespace;
    let results = crate::platform::janitor::sweep_run(&ctx.client, ns, &ctx.run_id, budget).await;
    ctx.cleanup
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(
            results
                .into_iter()
                .map(|r| ("(interrupted)".to_string(), r)),
        );
    // Sampled until the sweep is done, so the report shows the GPUs it freed.
    let gpu_allocation = stop_sampler(sampler).await;
    let code = crate::exit_code::INTERRUPTED;
    write_reports(
        ctx,
        resolved,
        gpu_allocation,
        started_at,
        server,
        sim.as_ref(),
        code,
    );
    for (_, leak) in ctx.leaks() {
        crate::say_err!("leak: {} {:?}", leak.object, leak.outcome);
    }
    if let Some(sim) = sim {
        sim.shutdown().await;
    }
    code
}

/// The API server a run ran against, as its report names it.
struct Server {
    url: String,
    /// Its `gitVersion`.
    version: String,
}

/// Writes every report format under `reports/<run-id>/`, with the run's secrets redacted,
/// and prints the phase table. A report that cannot be written is said on standard error and
/// the run's outcome stands, except that a run that passed then exits 74; returns whether the
/// reports were written.
fn write_reports(
    ctx: &crate::bdd::RunContext,
    resolved: &Resolved,
    gpu_allocation: Vec<crate::report::GpuSample>,
    started_at: chrono::DateTime<chrono::Utc>,
    server: Server,
    sim: Option<&SimHandle>,
    exit_code: i32,
) -> bool {
    use crate::report::{
        CleanupEntry, Redactor, RunReport, TargetInfo, TargetKind as ReportTarget,
    };
    let cfg = &ctx.config;
    let faults_injected = sim.map(SimHandle::faults_injected).unwrap_or_default();
    let scenarios = ctx
        .scenarios
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(_, r)| r.clone())
        .collect();
    let cleanup = ctx
        .cleanup
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(scenario, r)| CleanupEntry::from_result(scenario.clone(), r.clone()))
        .collect();
    let report = RunReport {
        run_id: ctx.run_id.clone(),
        started_at,
        finished_at: chrono::Utc::now(),
        target: TargetInfo {
            kind: if ctx.simulator {
                ReportTarget::Sim
            } else {
                ReportTarget::Cluster
            },
            server: server.url,
            server_version: server.version,
            namespace: cfg.target.namespace.clone(),
            faults_injected,
        },
        profile: resolved
            .layers
            .iter()
            .find(|l| l.ends_with(".toml"))
            .cloned(),
        scenarios,
        cleanup,
        gpu_allocation,
        exit_code,
        ..Default::default()
    };
    crate::output::say_text(&crate::report::phase_table(&report));
    let mut secrets = vec![ctx.token.expose().to_string()];
    secrets.extend(sim.map(|s| s.token().to_string()));
    match crate::report::write_all(&report, &cfg.reports.dir, &Redactor::new(secrets)) {
        Ok(files) => {
            if let Some(first) = files.first().and_then(|f| f.parent()) {
                crate::say!("reports: {}/", first.display());
            }
            true
        }
        Err(e) => {
            crate::say_err!("error: cannot write the reports: {e}");
            false
        }
    }
}

/// Samples which pods hold which GPUs every half second, keeping a node's sample only when
/// its allocation changed: the report's node allocation over time.
struct GpuSampler {
    samples: std::sync::Arc<std::sync::Mutex<Vec<crate::report::GpuSample>>>,
    task: tokio::task::JoinHandle<()>,
}

fn sample_gpus(client: kube::Client) -> GpuSampler {
    let samples: std::sync::Arc<std::sync::Mutex<Vec<crate::report::GpuSample>>> =
        Default::default();
    let out = samples.clone();
    let task = tokio::spawn(async move {
        let mut last: std::collections::BTreeMap<String, (i64, Vec<String>)> = Default::default();
        loop {
            if let Ok(nodes) = crate::platform::gpu::nodes_with_pods(&client).await {
                let now = chrono::Utc::now();
                for (node, pods) in nodes {
                    let state = (node.used, pods.clone());
                    if last.get(&node.node) != Some(&state) {
                        last.insert(node.node.clone(), state);
                        out.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(crate::report::GpuSample::from_node(now, &node, pods));
                    }
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    });
    GpuSampler { samples, task }
}

async fn stop_sampler(sampler: GpuSampler) -> Vec<crate::report::GpuSample> {
    sampler.task.abort();
    let _ = sampler.task.await;
    std::mem::take(&mut *sampler.samples.lock().unwrap_or_else(|e| e.into_inner()))
}

pub(crate) fn random_hex(bytes: usize) -> String {
    use rand::RngExt;
    let mut rng = rand::rng();
    (0..bytes)
        .map(|_| format!("{:02x}", rng.random::<u8>()))
        .collect()
}

/// `r<UTC yyyymmdd-hhmmss>-<4 hex>`: sortable, and valid as a label value.
pub(crate) fn new_run_id() -> String {
    format!(
        "r{}-{}",
        chrono::Utc::now().format("%Y%m%d-%H%M%S"),
        random_hex(2)
    )
}

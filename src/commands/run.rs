//! `wsgate run`: resolve the configuration, connect to the target (the embedded simulator
//! unless a cluster is named), and run the suite. `--dry-run` prints the plan only.

use std::path::Path;

use super::CommandError;
use crate::cli::{KeepArg, RunArgs};
use crate::config::{self, LoadRequest, Override, Resolved, TargetKind};
use crate::platform::target;
use crate::sim::{SimHandle, SimOptions};

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

/// The feature files the suite would run, sorted.
fn feature_files(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "feature"))
        .map(|p| p.display().to_string())
        .collect();
    out.sort();
    out
}

fn print_plan(resolved: &Resolved) {
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
    let features = feature_files(Path::new("features"));
    if features.is_empty() {
        println!("- features: none found under features/ (the suite is not built yet)");
    } else {
        for f in features {
            println!("- feature: {f}");
        }
    }
    println!("- reports: {}/<run-id>/", c.reports.dir.display());
}

pub async fn run(args: RunArgs) -> Result<i32, CommandError> {
    let request = LoadRequest {
        profile: args.profile.clone(),
        env: std::env::vars().collect(),
        overrides: overrides(&args)?,
    };
    let resolved = config::load(&request)?;
    for w in &resolved.warnings {
        eprintln!("warning: {w}");
    }
    if args.dry_run {
        print_plan(&resolved);
        return Ok(crate::exit_code::SUCCESS);
    }
    let cfg = &resolved.config;
    let (client, _sim) = match cfg.target.kind {
        TargetKind::Sim => {
            let sim = SimHandle::start(SimOptions::with_platform()).await?;
            println!(
                "target: the embedded simulator at {} (not a real cluster)",
                sim.url()
            );
            (sim.client().await?, Some(sim))
        }
        TargetKind::Cluster => {
            let kc = target::cluster_config(&cfg.target).await?;
            println!("target: cluster at {}", kc.cluster_url);
            (target::connect(kc).await?, None)
        }
    };
    target::check_opt_in(&client, &cfg.target.namespace).await?;
    println!(
        "namespace {:?} is opted in ({}=true)",
        cfg.target.namespace,
        target::OPT_IN_LABEL
    );
    Err(CommandError::NotBuilt {
        command: "run",
        what:
            "the target was reached and checked, but the verification suite (features and steps) \
               is not built yet; nothing was created"
                .to_string(),
    })
}

//! `wsgate doctor`: checks a target's prerequisites and prints a table with fixes. Against
//! the embedded simulator (the default target) it checks the simulator, as a demonstration.

use super::CommandError;
use crate::cli::doctor::DoctorArgs;
use crate::config::TargetKind;
use crate::platform::doctor::{self, Status};
use crate::platform::target;

pub async fn doctor(args: DoctorArgs) -> Result<i32, CommandError> {
    let cfg = super::load_config(&args.target, args.profile.as_deref(), None, &args.set)?.config;
    let retry = crate::platform::retry::RetryPolicy::from_config(&cfg.api);
    let (client, sim) = match cfg.target.kind {
        TargetKind::Sim => {
            let sim = super::shell::start_simulator_with(&cfg, |_| {}).await?;
            crate::say_err!(
                "target: the embedded simulator at {} (not a real cluster; name one with --target cluster)",
                sim.url()
            );
            (
                target::connect(sim.config().await?, retry).await?,
                Some(sim),
            )
        }
        TargetKind::Cluster => {
            let kc = target::cluster_config(&cfg.target).await?;
            crate::say_err!("target: cluster at {}", kc.cluster_url);
            (target::connect(kc, retry).await?, None)
        }
    };
    let checks = doctor::checks(&client, &cfg).await;
    if let Some(sim) = sim {
        sim.shutdown().await;
    }
    if args.json {
        let text = serde_json::to_string_pretty(&checks).map_err(|e| CommandError::Io {
            what: "write the checks as JSON",
            source: std::io::Error::other(e),
        })?;
        println!("{text}");
    } else {
        print!("{}", doctor::table(&checks));
    }
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
    if failed > 0 {
        crate::say_err!(
            "{failed} check(s) failed, {warned} warning(s): fix them before running wsgate here"
        );
        return Ok(crate::exit_code::TARGET);
    }
    if warned > 0 {
        crate::say_err!("all required checks passed, {warned} warning(s)");
    }
    Ok(crate::exit_code::SUCCESS)
}

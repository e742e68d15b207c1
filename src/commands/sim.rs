//! `wsgate sim`: the embedded simulator on its own, for kubectl and exploration.

use super::{CommandError, Interrupts};
use crate::cli::SimArgs;
use crate::exit_code;
use crate::sim::profile::SimProfile;
use crate::sim::{SimHandle, SimOptions};

pub async fn sim(args: SimArgs) -> Result<i32, CommandError> {
    if let Some(crate::cli::SimCommand::Calibrate(c)) = &args.command {
        return calibrate(c);
    }
    if args.prepare_runtime {
        let venv = crate::sim::runtime::venv::ensure_venv()?;
        crate::say!("simulator runtime ready: {}", venv.root.display());
        return Ok(exit_code::SUCCESS);
    }
    let options = options(&args)?;
    // Before the line that says how to stop it: a SIGTERM sent on reading it is caught.
    let mut interrupts = Interrupts::install()?;
    let sim = SimHandle::start(options).await?;
    sim.write_kubeconfig(&args.kubeconfig)?;
    crate::say!(
        "wsgate simulator (not a real cluster) listening on {}",
        sim.url()
    );
    crate::say!("kubeconfig: {}", args.kubeconfig.display());
    crate::say!(
        "try: KUBECONFIG={} kubectl get namespaces",
        args.kubeconfig.display()
    );
    crate::say!("stop with Ctrl-C (SIGINT) or SIGTERM");
    tokio::select! {
        signal = interrupts.recv() => {
            crate::say!("{signal}: shutting down the simulator");
            sim.shutdown().await;
            Ok(exit_code::SUCCESS)
        }
        message = sim.failed() => {
            crate::say_err!("error: {message}");
            crate::say_err!("error: the simulator stopped, and every pod process with it (a bug in wsgate's simulator: please report it with this message)");
            Ok(exit_code::INTERNAL)
        }
    }
}

/// What `wsgate sim`'s flags ask of the simulator: its port, profile and seed.
fn options(args: &SimArgs) -> Result<SimOptions, CommandError> {
    let profile = match &args.sim_profile {
        Some(path) => {
            SimProfile::load(path).map_err(|e| CommandError::SimProfile(e.to_string()))?
        }
        None => SimProfile::default_profile(),
    };
    Ok(SimOptions {
        port: args.port,
        ..SimOptions::of_platform(profile, args.seed)
    })
}

/// `wsgate sim calibrate`: reads every report first, then writes the profile in one piece.
fn calibrate(args: &crate::cli::CalibrateArgs) -> Result<i32, CommandError> {
    use crate::sim::calibrate::{self, Options};
    let mut reports = Vec::new();
    for path in &args.reports {
        reports.push((path.clone(), crate::report::read_report(path)?));
    }
    let (base_name, base_text) = match crate::sim::profile::shipped(&args.base) {
        Some((name, text)) => (format!("{name} (shipped)"), text.to_string()),
        None => {
            let text = std::fs::read_to_string(&args.base).map_err(|e| {
                CommandError::SimProfile(format!(
                    "cannot read the base profile {}: {e}",
                    args.base.display()
                ))
            })?;
            (args.base.display().to_string(), text)
        }
    };
    let base = SimProfile::parse(&base_name, &base_text)
        .map_err(|e| CommandError::SimProfile(e.to_string()))?;
    let options = Options {
        allow_simulated: args.allow_simulated,
        settle_ms: base.timing.addon_settle_ms as f64,
        base_mib_per_s: base.timing.checkpoint_mib_per_s,
        base_restore_mib_per_s: base.timing.restore_mib_per_s,
    };
    let calibration =
        calibrate::calibrate(&reports, &options).map_err(|e| CommandError::Usage(e.to_string()))?;
    let text = calibration
        .profile(&base_text, &base_name)
        .map_err(|e| CommandError::Usage(e.to_string()))?;
    // What it writes must load as a profile: checked before anything is written.
    SimProfile::parse(&args.out.display().to_string(), &text).map_err(|e| {
        CommandError::SimProfile(format!(
            "the calibrated profile is invalid (a bug in wsgate): {e}"
        ))
    })?;
    if !calibrate::may_overwrite(&args.out) {
        return Err(CommandError::Usage(format!(
            "{} exists and was not written by `wsgate sim calibrate`: choose another --out, or remove it yourself",
            args.out.display()
        )));
    }
    crate::output::say_text(&calibration.render());
    crate::report::write_file(&args.out, &text)
        .map_err(|e| CommandError::writing_reports(e, "--out"))?;
    crate::say!("wrote {}", args.out.display());
    crate::say!(
        "use it: wsgate run --set sim.profile={} (or sim --sim-profile)",
        args.out.display()
    );
    Ok(exit_code::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    /// `--seed` and `--sim-profile` reach the simulator's options.
    #[test]
    fn the_seed_and_profile_flags_reach_the_simulator() {
        let cli = crate::cli::Cli::try_parse_from([
            "wsgate",
            "sim",
            "--seed",
            "42",
            "--sim-profile",
            "field-restore-lag",
        ])
        .unwrap();
        let crate::cli::Command::Sim(args) = cli.command else {
            panic!("not sim")
        };
        let platform = super::options(&args).unwrap().platform.unwrap();
        assert_eq!(platform.seed, 42);
        crate::sim::profile::tests::assert_is_shipped(&platform.profile, "field-restore-lag");
    }
}

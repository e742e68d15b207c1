//! `wsgate sim`: the embedded simulator on its own, for kubectl and exploration.

use super::{CommandError, Interrupts};
use crate::cli::SimArgs;
use crate::exit_code;
use crate::sim::profile::SimProfile;
use crate::sim::{SimHandle, SimOptions};

pub async fn sim(args: SimArgs) -> Result<i32, CommandError> {
    if args.prepare_runtime {
        let venv = crate::sim::runtime::venv::ensure_venv()?;
        crate::say!("simulator runtime ready: {}", venv.root.display());
        return Ok(exit_code::SUCCESS);
    }
    let mut options = SimOptions {
        port: args.port,
        ..SimOptions::with_platform()
    };
    if let Some(platform) = options.platform.as_mut() {
        platform.seed = args.seed;
    }
    if let Some(path) = &args.sim_profile {
        let profile =
            SimProfile::load(path).map_err(|e| CommandError::SimProfile(e.to_string()))?;
        if let Some(platform) = options.platform.as_mut() {
            platform.profile = profile;
        }
    }
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

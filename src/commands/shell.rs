//! The command shell: what every command that works on a target does the same way, written
//! once. [`Target::open`] starts the embedded simulator or connects to the cluster the
//! config names (with its retry policy) and checks the namespace's opt-in label;
//! [`Target::settle_options`] settles the workspace options left `""`; [`until_interrupted`] runs a command's work until it ends
//! or SIGINT/SIGTERM arrives; [`sweep`] removes everything a run's label marks (taints
//! included) and says what it could not; [`Target::close`] stops the simulator.

use std::future::Future;

use super::CommandError;
use crate::config::{Config, TargetKind};
use crate::platform::ledger::{CleanupOutcome, CleanupResult};
use crate::platform::target;
use crate::sim::SimHandle;
use crate::sim::profile::SimProfile;

/// An opened target.
pub struct Target {
    pub client: kube::Client,
    /// The embedded simulator when it is the target; [`Target::close`] stops it.
    pub sim: Option<SimHandle>,
    /// The API server's URL.
    pub server: String,
    /// The API server's `gitVersion`.
    pub version: String,
    /// The target in words, for output and pages: "the embedded simulator at … (not a real
    /// cluster)" or "the cluster at …".
    pub words: String,
}

impl Target {
    /// Opens `cfg.target`: starts the embedded simulator (its profile changed by `edit`) or
    /// connects to the cluster, then checks that the test namespace is opted in. The
    /// simulator is stopped again when a later step fails.
    pub async fn open(
        cfg: &Config,
        edit: impl FnOnce(&mut SimProfile),
    ) -> Result<Target, CommandError> {
        let retry = crate::platform::retry::RetryPolicy::from_config(&cfg.api);
        let ((client, version), sim, server) = match cfg.target.kind {
            TargetKind::Sim => {
                let sim = start_simulator_with(cfg, edit).await?;
                let url = sim.url();
                let client = match sim.config().await {
                    Ok(kc) => target::connect_versioned(kc, retry)
                        .await
                        .map_err(CommandError::from),
                    Err(e) => Err(e.into()),
                };
                match client {
                    Ok(client) => (client, Some(sim), url),
                    Err(e) => {
                        sim.shutdown().await;
                        return Err(e);
                    }
                }
            }
            TargetKind::Cluster => {
                let kc = target::cluster_config(&cfg.target).await?;
                let url = kc.cluster_url.to_string();
                (target::connect_versioned(kc, retry).await?, None, url)
            }
        };
        let words = match sim {
            Some(_) => format!("the embedded simulator at {server} (not a real cluster)"),
            None if version.ends_with(crate::platform::names::SIM_VERSION_MARK) => format!(
                "wsgate's simulator at {server} (version {version}; named as a cluster, but not a real one)"
            ),
            None => format!("the cluster at {server}"),
        };
        let opened = Target {
            client,
            sim,
            server,
            version,
            words,
        };
        match target::check_opt_in(&opened.client, &cfg.target.namespace).await {
            Ok(()) => Ok(opened),
            Err(e) => {
                opened.close().await;
                Err(e.into())
            }
        }
    }

    /// Settles the workspace options the config leaves `""` against the kind (what it
    /// picked is said through `say`), for a command about to create a workspace.
    pub async fn settle_options(
        &self,
        cfg: &mut Config,
        say: &dyn Fn(&str),
    ) -> Result<(), CommandError> {
        if let Some(picked) = crate::platform::options::settle(&self.client, cfg).await? {
            say(&picked);
        }
        Ok(())
    }

    /// Stops the embedded simulator, if it is the target.
    pub async fn close(self) {
        if let Some(sim) = self.sim {
            sim.shutdown().await;
        }
    }
}

/// How a command's work ended.
pub enum Ended<T> {
    Done(T),
    /// SIGINT or SIGTERM arrived first (its name).
    Interrupted(&'static str),
}

/// Runs `work` until it ends or SIGINT/SIGTERM arrives. The handlers are installed before
/// `work` is first polled, so a signal after its first request is never lost.
pub async fn until_interrupted<T>(work: impl Future<Output = T>) -> Result<Ended<T>, CommandError> {
    let mut interrupts = super::Interrupts::install()?;
    tokio::select! {
        biased;
        signal = interrupts.recv() => Ok(Ended::Interrupted(signal)),
        r = work => Ok(Ended::Done(r)),
    }
}

/// Removes everything in the test namespace that carries `run_id`'s label, and the squeeze
/// taints it left on nodes, within the delete budget; prints each leak and each refusal.
pub async fn sweep(client: &kube::Client, cfg: &Config, run_id: &str) -> Vec<CleanupResult> {
    let budget = cfg.budgets.delete.duration();
    let ns = &cfg.target.namespace;
    let results = crate::platform::janitor::sweep_run(client, ns, run_id, budget).await;
    say_cleanup(&results);
    results
}

/// Prints each leak (`leak: …`) and each refusal among `results`.
pub fn say_cleanup(results: &[CleanupResult]) {
    for r in results {
        match &r.outcome {
            CleanupOutcome::Refused(why) => crate::say_err!("{why}"),
            outcome if r.is_leak() => crate::say_err!("leak: {} {outcome:?}", r.object),
            _ => {}
        }
    }
}

/// Starts the embedded simulator from the configured profile and runtime, after `edit`.
pub(crate) async fn start_simulator_with(
    cfg: &crate::config::Config,
    edit: impl FnOnce(&mut crate::sim::profile::SimProfile),
) -> Result<crate::sim::SimHandle, CommandError> {
    Ok(crate::sim::SimHandle::start(sim_options(cfg, edit)?).await?)
}

/// What the config asks of the embedded simulator: `sim.profile` (then `edit`),
/// `sim.runtime`, `sim.enforce_rbac` and `sim.seed`.
fn sim_options(
    cfg: &crate::config::Config,
    edit: impl FnOnce(&mut crate::sim::profile::SimProfile),
) -> Result<crate::sim::SimOptions, CommandError> {
    let mut profile = crate::sim::profile::SimProfile::load(&cfg.sim.profile)
        .map_err(|e| CommandError::SimProfile(e.to_string()))?;
    profile.runtime.kind = match cfg.sim.runtime {
        crate::config::SimRuntime::Jupyter => crate::sim::profile::RuntimeKind::Jupyter,
        crate::config::SimRuntime::None => crate::sim::profile::RuntimeKind::None,
    };
    if cfg.sim.enforce_rbac {
        profile.rbac.enforce = crate::sim::profile::RbacEnforce::Deploy;
        // deploy/components/port-forward, which such a harness is deployed with.
        profile.rbac.port_forward = cfg.session.connect != crate::config::SessionConnect::PodIp;
    }
    edit(&mut profile);
    Ok(crate::sim::SimOptions::of_platform(profile, cfg.sim.seed))
}

#[cfg(test)]
mod tests {
    /// `sim.seed`, `sim.runtime` and `sim.profile` (`--set` or env) reach the simulator.
    #[test]
    fn the_sim_keys_reach_the_simulator() {
        let cfg = crate::config::load(&crate::config::LoadRequest {
            profile: None,
            env: Default::default(),
            overrides: vec![
                crate::config::Override::new("sim.seed", "7", "--set"),
                crate::config::Override::new("sim.runtime", "none", "--set"),
                crate::config::Override::new("sim.profile", "field-restore-lag", "--set"),
            ],
        })
        .unwrap()
        .config;
        let mut edited = false;
        let platform = super::sim_options(&cfg, |_| edited = true)
            .unwrap()
            .platform
            .unwrap();
        assert!(edited);
        assert_eq!(platform.seed, 7);
        assert_eq!(
            platform.profile.runtime.kind,
            crate::sim::profile::RuntimeKind::None
        );
        crate::sim::profile::tests::assert_is_shipped(&platform.profile, "field-restore-lag");
    }
}

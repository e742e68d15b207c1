//! Checks across keys, on the typed configuration: contradictions are errors naming the key
//! and the layer that set it; risky but legal combinations become warnings.

use super::error::ConfigError;
use super::origin::Origin;
use super::types::{Config, Keep, Model, SimRuntime, TargetKind};

/// The warnings for `config`, or the first contradiction. `origin_of` names the layer that
/// set a dotted key.
pub(crate) fn check(
    config: &Config,
    origin_of: impl Fn(&str) -> Origin,
) -> Result<Vec<String>, ConfigError> {
    let target = &config.target;
    let on_sim = target.kind == TargetKind::Sim;
    if on_sim
        && config.sim.runtime == SimRuntime::Jupyter
        && config.workspace.model == Model::Qwen3bT4
    {
        return Err(ConfigError::Invalid {
            key: "workspace.model".into(),
            origin: origin_of("workspace.model"),
            reason: format!(
                "\"{}\" needs a real NVIDIA T4; with target.kind = \"sim\" (from {}) use \
                 \"sim-tiny\" (--set workspace.model=sim-tiny), or target a cluster",
                Model::Qwen3bT4,
                origin_of("target.kind").short()
            ),
        });
    }

    // A kubeconfig or context names a cluster: with the simulator as the target it would be
    // ignored, and the user would believe a cluster was tested.
    let cluster_key = if target.kubeconfig.is_some() {
        Some("target.kubeconfig")
    } else if target.context.is_some() {
        Some("target.context")
    } else {
        None
    };
    if let (true, Some(key)) = (on_sim, cluster_key) {
        return Err(ConfigError::Invalid {
            key: key.into(),
            origin: origin_of(key),
            reason: format!(
                "it names a cluster, but target.kind is \"sim\" (from {}): add --target cluster \
                 to test that cluster, or drop it to use the embedded simulator",
                origin_of("target.kind").short()
            ),
        });
    }

    let api = &config.api;
    if api.retry_max_backoff < api.retry_backoff {
        return Err(ConfigError::Invalid {
            key: "api.retry_max_backoff".into(),
            origin: origin_of("api.retry_max_backoff"),
            reason: format!(
                "{} is shorter than api.retry_backoff ({}, from {}): the longest wait cannot be \
                 shorter than the first",
                api.retry_max_backoff,
                api.retry_backoff,
                origin_of("api.retry_backoff").short()
            ),
        });
    }

    let mut warnings = Vec::new();
    if api.retry_attempts > 1 && api.retry_max_backoff.as_secs_f64() < 1.0 {
        warnings.push(format!(
            "api.retry_max_backoff ({}, from {}) is under 1 s: a 429 with \"Retry-After: 1\", as \
             real API servers send it, will not be retried",
            api.retry_max_backoff,
            origin_of("api.retry_max_backoff").short()
        ));
    }
    if target.insecure_skip_tls_verify {
        warnings.push(format!(
            "target.insecure_skip_tls_verify = true (from {}): the API server's certificate is \
             NOT verified, so anyone on the network path can impersonate the cluster and read \
             its credentials. Use it only against a throwaway test cluster.",
            origin_of("target.insecure_skip_tls_verify").short()
        ));
    }
    if on_sim {
        for (key, set) in [
            ("target.kubeconfig", target.kubeconfig.is_some()),
            ("target.context", target.context.is_some()),
        ] {
            if set {
                warnings.push(format!(
                    "{key} (from {}) is ignored: target.kind is \"sim\"; use --target cluster to \
                     run against a cluster",
                    origin_of(key).short()
                ));
            }
        }
    }
    let budgets = &config.budgets;
    if budgets.gpu_release < budgets.pause_to_paused {
        warnings.push(format!(
            "budgets.gpu_release ({}) is shorter than budgets.pause_to_paused ({}): both run from \
             the pause request and the GPU is only released after the checkpoint, so \
             gpu_release will run out first",
            budgets.gpu_release, budgets.pause_to_paused
        ));
    }
    if !on_sim && config.run.keep == Keep::Always {
        warnings.push(format!(
            "run.keep = \"always\" (from {}): kept Workspaces hold their GPUs until they are \
             paused or `wsgate janitor` deletes them after run.expiry_hours ({} h)",
            origin_of("run.keep").short(),
            config.run.expiry_hours
        ));
    }
    Ok(warnings)
}

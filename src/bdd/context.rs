//! What every scenario of one run shares: the cluster client, the resolved configuration,
//! the run id, the Jupyter token, and the cleanup results the run has collected.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use crate::config::Config;
use crate::platform::ledger::{self, CleanupResult};
use crate::session::Secret;

/// Shared by every scenario of a run.
pub struct RunContext {
    pub client: kube::Client,
    pub config: Config,
    pub run_id: String,
    /// The Jupyter token the run puts into the namespace's `jupyter-token` Secret.
    pub token: Secret,
    /// Whether the target is the embedded simulator (kernel steps need its runtime).
    pub simulator: bool,
    /// Every scenario's cleanup results, for the exit code and the reports.
    pub cleanup: Mutex<Vec<(String, CleanupResult)>>,
    /// What the scenarios share, created once and removed after the last scenario: the
    /// namespace's Jupyter token Secret. In a scenario's own ledger, that scenario's cleanup
    /// would delete it under the feet of scenarios still running beside it.
    pub shared: tokio::sync::Mutex<crate::platform::ledger::Ledger>,
    /// Every finished scenario's report.
    pub scenarios: Mutex<Vec<(super::steplog::ScenarioKey, crate::report::ScenarioReport)>>,
}

impl std::fmt::Debug for RunContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext")
            .field("run_id", &self.run_id)
            .field("namespace", &self.config.target.namespace)
            .field("simulator", &self.simulator)
            .finish_non_exhaustive()
    }
}

impl RunContext {
    /// The labels for every object the run creates (run id, expiry, managed-by).
    pub fn labels(&self) -> BTreeMap<String, String> {
        let expires =
            chrono::Utc::now() + chrono::Duration::hours(i64::from(self.config.run.expiry_hours));
        ledger::labels(&self.run_id, expires)
    }

    /// Objects that cleanup could not remove.
    pub fn leaks(&self) -> Vec<(String, CleanupResult)> {
        self.cleanup
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, r)| r.is_leak())
            .cloned()
            .collect()
    }
}

static CURRENT: RwLock<Option<Arc<RunContext>>> = RwLock::new(None);

/// Makes `ctx` the context new scenarios get.
pub fn install(ctx: Arc<RunContext>) {
    *CURRENT.write().unwrap_or_else(|e| e.into_inner()) = Some(ctx);
}

/// The context of the running suite.
pub fn current() -> Option<Arc<RunContext>> {
    CURRENT.read().unwrap_or_else(|e| e.into_inner()).clone()
}

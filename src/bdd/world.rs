//! The World of one scenario: its workspace, timeline, evidence, verdict and ledger.
//! Glue state only; the logic lives in `platform`, `session` and `verdict`.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::context::{self, RunContext};
use crate::platform::ledger::Ledger;
use crate::platform::workspace::NewWorkspace;
use crate::session::Evidence;
use crate::timeline::{Mark, Timeline};
use crate::trial::Trial;
use crate::verdict::Verdict;

/// A step failure: the message says what went wrong and in which phase.
pub type StepResult = Result<(), String>;

/// The suite was started without a run context.
#[derive(Debug, thiserror::Error)]
#[error("no run context installed: start the suite through `wsgate run`")]
pub struct NoContext;

#[derive(cucumber::World)]
#[world(init = Self::new)]
pub struct WsWorld {
    pub ctx: Arc<RunContext>,
    /// The scenario's workspace through the pause/resume trial, once created.
    pub trial: Option<Trial>,
    pub ledger: Ledger,
    pub timeline: Timeline,
    started: Instant,
    /// The kernel's evidence after the resume, once collected.
    pub after: Option<Evidence>,
    pub verdict: Option<Verdict>,
    /// The stateless kind's verdict (files, settings, extensions), once decided.
    pub files_verdict: Option<crate::verdict::FilesVerdict>,
    /// The most pods the workspace had at once while waiting (restore attempts).
    pub max_pods_seen: usize,
    /// What the scenario did, line by line, for the report's system-out.
    pub log: Vec<String>,
    /// The release gate's state file, once prepared.
    pub gate_state: Option<std::path::PathBuf>,
    /// The release gate's outcome, once verified.
    pub gate_outcome: Option<crate::gate::GateOutcome>,
    /// The drill's report, once run.
    pub drill: Option<crate::drill::DrillReport>,
    /// The squeeze method in force, once the GPUs were squeezed.
    pub squeeze: Option<crate::config::SqueezeMethod>,
    /// Every PodSnapshot (uid) of the workspace a step saw, for the bucket checks.
    pub snapshots_seen: std::collections::BTreeSet<String>,
    /// The snapshots a step found left behind, with their bytes.
    pub snapshots_left: Option<crate::report::SnapshotsLeft>,
    /// The activity rule that pauses the idle scenario's Workspace.
    pub idle_rule: Option<crate::platform::idle::PauseRule>,
    /// What the watch saw while a busy cell ran.
    pub busy: Option<crate::platform::idle::BusyRecord>,
}

impl std::fmt::Debug for WsWorld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsWorld")
            .field("workspace", &self.trial.as_ref().map(|t| &t.workspace.name))
            .field("verdict", &self.verdict.as_ref().map(|v| v.kind))
            .finish_non_exhaustive()
    }
}

impl WsWorld {
    async fn new() -> Result<Self, NoContext> {
        let ctx = context::current().ok_or(NoContext)?;
        Ok(Self {
            ctx,
            trial: None,
            ledger: Ledger::default(),
            timeline: Timeline::new(chrono::Utc::now()),
            started: Instant::now(),
            after: None,
            verdict: None,
            files_verdict: None,
            max_pods_seen: 0,
            log: Vec::new(),
            gate_state: None,
            gate_outcome: None,
            drill: None,
            squeeze: None,
            snapshots_seen: Default::default(),
            snapshots_left: None,
            idle_rule: None,
            busy: None,
        })
    }

    /// Records an observation now.
    pub fn mark(&mut self, mark: Mark, detail: Option<String>) {
        let offset = self.started.elapsed();
        self.log.push(format!(
            "{:>9.1} ms  {mark:?}{}",
            offset.as_secs_f64() * 1000.0,
            detail
                .as_deref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        ));
        self.timeline.push(mark, chrono::Utc::now(), offset, detail);
    }

    /// Records a moment the platform stated (not observed now), in its place on the timeline.
    pub fn mark_at(
        &mut self,
        mark: Mark,
        at: chrono::DateTime<chrono::Utc>,
        detail: Option<String>,
    ) {
        self.insert_mark(mark, at, detail, "stated by the platform");
    }

    /// Records a moment the harness observed earlier (a step's own stamp, taken as it
    /// happened), in its place on the timeline.
    pub fn mark_observed_at(
        &mut self,
        mark: Mark,
        at: chrono::DateTime<chrono::Utc>,
        detail: Option<String>,
    ) {
        self.insert_mark(mark, at, detail, "observed then");
    }

    fn insert_mark(
        &mut self,
        mark: Mark,
        at: chrono::DateTime<chrono::Utc>,
        detail: Option<String>,
        source: &str,
    ) {
        let now_offset = self.started.elapsed();
        let now_at = chrono::Utc::now();
        self.timeline
            .insert_at(mark, at, now_at, now_offset, detail.clone());
        let offset = now_offset.saturating_sub((now_at - at).to_std().unwrap_or_default());
        self.log.push(format!(
            "{:>9.1} ms  {mark:?} ({source}{})",
            offset.as_secs_f64() * 1000.0,
            detail.map(|d| format!(": {d}")).unwrap_or_default()
        ));
    }

    /// The scenario's trial, or a failure saying a Given step is missing.
    pub fn trial(&self) -> Result<&Trial, String> {
        self.trial.as_ref().ok_or_else(no_workspace)
    }

    /// The scenario's trial, to take a step.
    pub fn trial_mut(&mut self) -> Result<&mut Trial, String> {
        self.trial.as_mut().ok_or_else(no_workspace)
    }

    /// The scenario's workspace, or a failure saying a Given step is missing.
    pub fn ws(&self) -> Result<&NewWorkspace, String> {
        Ok(&self.trial()?.workspace)
    }

    /// The uid of the scenario's Workspace as its create returned it: every write to the
    /// Workspace is bound to it, so a namesake is never touched.
    pub fn ws_uid(&self) -> Result<String, String> {
        Ok(self.trial()?.uid.clone())
    }

    /// Sets one annotation on the scenario's Workspace, bound to its uid (the version the
    /// trial's last wait saw is then stale: forgotten).
    pub async fn annotate_ws(&self, key: &str, value: &str) -> Result<(), String> {
        let new = self.ws()?;
        let uid = self.ws_uid()?;
        self.trial()?.forget_seen();
        crate::platform::workspace::annotate(
            &self.ctx.client,
            &new.namespace,
            &new.name,
            &uid,
            key,
            value,
        )
        .await
        .map_err(|e| e.to_string())
    }

    /// A budget from the configuration by name.
    pub fn budget(&self, name: &str) -> Result<Duration, String> {
        self.ctx.config.budgets.get(name).ok_or_else(|| {
            format!("unknown budget {name:?}: see [budgets] in `wsgate run --dry-run`")
        })
    }
}

/// A step's message for an error: its text and each cause under it, said once
/// (`cannot list the PodSnapshots of workspace ns/ws: forbidden (HTTP 403 Forbidden)`).
pub fn said(e: &(dyn std::error::Error + 'static)) -> String {
    crate::output::one_line(e)
}

fn no_workspace() -> String {
    "no workspace in this scenario: start with a `Given ... workspace is Running` step".to_string()
}

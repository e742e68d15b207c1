//! The versioned report model: pure data, one [`RunReport`] per `wsgate run`, written as
//! JSON (`schemas/report-v1.schema.json` describes it) and rendered by every other writer.
//! Fields are plain and public so that the suite runner can fill them as it goes; the
//! `Default`s never claim success (a scenario nobody finished reads as skipped).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::platform::ledger::{CleanupOutcome, CleanupResult};
use crate::timeline::{PhaseDuration, Timeline};
use crate::verdict::{Evidence, Verdict};

/// The version of the JSON report this build writes and reads. A change that removes or
/// renames a field, or changes a field's meaning, bumps it (and adds a new schema file).
pub const SCHEMA_VERSION: u32 = 1;

/// One run of the suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Always [`SCHEMA_VERSION`] when written by this build.
    pub schema_version: u32,
    /// `r<yyyymmdd-hhmmss>-<hex>`; also the report directory's name.
    pub run_id: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub target: TargetInfo,
    /// The profile file layered over the defaults, if any.
    #[serde(default)]
    pub profile: Option<String>,
    /// Every scenario, in the order they finished.
    #[serde(default)]
    pub scenarios: Vec<ScenarioReport>,
    /// GPU allocation samples per node over the run.
    #[serde(default)]
    pub gpu_allocation: Vec<GpuSample>,
    /// What cleanup did with each object the scenarios created.
    #[serde(default)]
    pub cleanup: Vec<CleanupEntry>,
    /// The exit code the run ended with (see `crate::exit_code`).
    pub exit_code: i32,
}

impl Default for RunReport {
    fn default() -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            run_id: String::new(),
            started_at: DateTime::<Utc>::default(),
            finished_at: DateTime::<Utc>::default(),
            target: TargetInfo::default(),
            profile: None,
            scenarios: Vec::new(),
            gpu_allocation: Vec::new(),
            cleanup: Vec::new(),
            exit_code: 0,
        }
    }
}

impl RunReport {
    /// An empty report of a run that started at `started_at`.
    pub fn new(run_id: impl Into<String>, started_at: DateTime<Utc>, target: TargetInfo) -> Self {
        Self {
            run_id: run_id.into(),
            started_at,
            finished_at: started_at,
            target,
            ..Self::default()
        }
    }

    /// How many scenarios ended with `status`.
    pub fn count(&self, status: ScenarioStatus) -> usize {
        self.scenarios.iter().filter(|s| s.status == status).count()
    }

    /// The cleanup entries that are leaks.
    pub fn leaks(&self) -> impl Iterator<Item = &CleanupEntry> {
        self.cleanup.iter().filter(|c| c.is_leak())
    }

    /// Wall-clock length of the run.
    pub fn duration(&self) -> Duration {
        (self.finished_at - self.started_at)
            .to_std()
            .unwrap_or_default()
    }
}

/// Where the run ran. Never holds credentials: `server` is the API server URL only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetInfo {
    pub kind: TargetKind,
    /// The API server URL (no user info, no token).
    pub server: String,
    /// The API server's `gitVersion` (`/version`), when the run recorded it. A simulator
    /// says `+wsgate-sim` in it, whether embedded or started on its own (`wsgate sim`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub server_version: String,
    pub namespace: String,
    /// On the embedded simulator: how many times each simulator fault acted during the run
    /// (by fault name; faults that never acted are left out). A fault switched on that
    /// shows no count here changed nothing the run did.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub faults_injected: std::collections::BTreeMap<String, u64>,
}

/// The kind of target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// The embedded simulator (not a real cluster).
    #[default]
    Sim,
    /// A real cluster.
    Cluster,
}

impl TargetInfo {
    /// Whether the run's target was a simulator: the embedded one, or one started on its
    /// own (`wsgate sim`) and named as a cluster, which its `gitVersion` gives away.
    pub fn is_simulator(&self) -> bool {
        self.kind == TargetKind::Sim
            || self
                .server_version
                .ends_with(crate::platform::names::SIM_VERSION_MARK)
    }
}

impl TargetKind {
    /// `sim` or `cluster`.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Sim => "sim",
            TargetKind::Cluster => "cluster",
        }
    }
}

/// How a scenario ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScenarioStatus {
    Passed,
    Failed,
    /// Also the default: a scenario nobody finished never reads as passed.
    #[default]
    Skipped,
}

impl ScenarioStatus {
    /// `passed`, `failed` or `skipped`.
    pub fn as_str(self) -> &'static str {
        match self {
            ScenarioStatus::Passed => "passed",
            ScenarioStatus::Failed => "failed",
            ScenarioStatus::Skipped => "skipped",
        }
    }
}

/// How a step ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Passed,
    Failed,
    Skipped,
    /// Not reached: an earlier step failed (the default).
    #[default]
    NotRun,
}

impl StepStatus {
    /// `passed`, `failed`, `skipped` or `not_run`.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Passed => "passed",
            StepStatus::Failed => "failed",
            StepStatus::Skipped => "skipped",
            StepStatus::NotRun => "not_run",
        }
    }
}

/// One scenario of the suite.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScenarioReport {
    /// The feature's name (its `Feature:` line).
    pub feature: String,
    /// The scenario's name.
    pub name: String,
    /// Tags without the `@`, the feature's included.
    #[serde(default)]
    pub tags: Vec<String>,
    pub status: ScenarioStatus,
    #[serde(default)]
    pub steps: Vec<StepReport>,
    /// What went wrong, in one message (the failed step's error if nothing better is known).
    #[serde(default)]
    pub failure: Option<String>,
    /// Wall-clock length of the scenario; when unset, the timeline's span stands in.
    #[serde(default, with = "opt_millis")]
    pub duration: Option<Duration>,
    pub timeline: Timeline,
    /// The phases the timeline completed (`Timeline::phases()`).
    #[serde(default)]
    pub phases: Vec<PhaseDuration>,
    #[serde(default)]
    pub verdict: Option<Verdict>,
    /// The stateless kind's verdict (VS Code: files, settings, extensions kept or lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_verdict: Option<crate::verdict::FilesVerdict>,
    #[serde(default)]
    pub evidence_before: Option<Evidence>,
    #[serde(default)]
    pub evidence_after: Option<Evidence>,
    /// The name of the PodSnapshot the resume restored from (or was expected to): what
    /// GKE's `PodRestored` message names.
    #[serde(default)]
    pub snapshot_name: Option<String>,
    /// The same PodSnapshot's `metadata.uid` (its bucket objects' prefix).
    #[serde(default)]
    pub snapshot_uid: Option<String>,
    /// The snapshot's size in bytes, where the platform reports it.
    #[serde(default)]
    pub snapshot_bytes: Option<u64>,
    /// The workspace's PodSnapshots still present at the scenario's last look, and the
    /// bytes they hold; `None` when no step looked for leftovers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshots_left: Option<SnapshotsLeft>,
    /// The scenario's log lines, in order.
    #[serde(default)]
    pub log: Vec<String>,
}

/// PodSnapshots left behind, and what they cost in storage. PodSnapshot has no size field,
/// so the size is either an estimate or, where the target lets the harness list the bucket,
/// the listed bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotsLeft {
    /// Each snapshot still present: name, uid and state (`Ready`, `Deleting`, ...).
    pub snapshots: Vec<LeftSnapshot>,
    /// An estimate of their bytes: the resident memory the kernel measured before the pause
    /// (kernel plus Jupyter server, VmRSS) per snapshot; a snapshot holds about the pod's
    /// resident memory. `None` when the kernel was not asked.
    pub estimated_bytes: Option<u64>,
    /// The bytes listed in the snapshot bucket under their prefixes; `None` when the target
    /// does not let the harness list the bucket.
    pub bucket_bytes: Option<u64>,
    /// What to check, when a snapshot is stuck.
    pub hint: Option<String>,
}

/// One PodSnapshot left behind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftSnapshot {
    pub name: String,
    pub uid: String,
    pub state: String,
}

impl SnapshotsLeft {
    /// `2 PodSnapshots left (Deleting): about 1.2 GiB (estimate), 1.1 GiB in the bucket`.
    pub fn summary(&self) -> String {
        let states: std::collections::BTreeSet<&str> =
            self.snapshots.iter().map(|s| s.state.as_str()).collect();
        let mut out = format!(
            "{} PodSnapshot(s) left ({})",
            self.snapshots.len(),
            states.into_iter().collect::<Vec<_>>().join(", ")
        );
        let mut sizes = Vec::new();
        if let Some(b) = self.estimated_bytes {
            sizes.push(format!(
                "about {} (estimate from resident memory)",
                super::fmt::bytes(b)
            ));
        }
        if let Some(b) = self.bucket_bytes {
            sizes.push(format!("{} listed in the bucket", super::fmt::bytes(b)));
        }
        if sizes.is_empty() {
            sizes.push("size unknown".into());
        }
        out.push_str(": ");
        out.push_str(&sizes.join(", "));
        out
    }
}

impl ScenarioReport {
    /// A scenario report with nothing but its names (status Skipped until set).
    pub fn new(feature: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            feature: feature.into(),
            name: name.into(),
            ..Self::default()
        }
    }

    /// Sets the timeline and derives `phases` from it.
    pub fn with_timeline(mut self, timeline: Timeline) -> Self {
        self.phases = timeline.phases();
        self.timeline = timeline;
        self
    }

    /// The verdict column: the restore verdict's label, or the stateless kind's.
    pub fn verdict_label(&self) -> Option<String> {
        self.verdict
            .as_ref()
            .map(|v| v.label())
            .or_else(|| self.files_verdict.as_ref().map(|v| v.label()))
    }

    /// The duration of the phase called `name`, if measured.
    pub fn phase(&self, name: &str) -> Option<Duration> {
        self.phases
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.duration)
    }

    /// `duration`, or else the span of the timeline's observations.
    pub fn elapsed(&self) -> Duration {
        self.duration.unwrap_or_else(|| {
            self.timeline
                .observations
                .iter()
                .map(|o| o.offset)
                .max()
                .unwrap_or_default()
        })
    }

    /// The first step that failed.
    pub fn failed_step(&self) -> Option<&StepReport> {
        self.steps.iter().find(|s| s.status == StepStatus::Failed)
    }
}

/// One step of a scenario.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepReport {
    /// `Given`, `When`, `Then`, `And`, `But`.
    pub keyword: String,
    pub text: String,
    pub status: StepStatus,
    #[serde(default)]
    pub error: Option<String>,
}

impl StepReport {
    /// `When the workspace is resumed`.
    pub fn line(&self) -> String {
        format!("{} {}", self.keyword.trim(), self.text)
    }
}

/// GPUs of one node at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuSample {
    pub at: DateTime<Utc>,
    pub node: String,
    /// The node's `cloud.google.com/gke-accelerator` label.
    pub accelerator: String,
    /// Allocatable `nvidia.com/gpu`.
    pub allocatable: i64,
    /// Requested by the pods bound to the node.
    pub used: i64,
    /// The pods holding them, `namespace/name`.
    #[serde(default)]
    pub pods: Vec<String>,
}

impl GpuSample {
    /// A sample of one node as `crate::platform::gpu` reads it.
    pub fn from_node(
        at: DateTime<Utc>,
        node: &crate::platform::gpu::NodeGpus,
        pods: Vec<String>,
    ) -> Self {
        Self {
            at,
            node: node.node.clone(),
            accelerator: node.accelerator.clone(),
            allocatable: node.allocatable,
            used: node.used,
            pods,
        }
    }
}

/// What cleanup did with one object, and for which scenario.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CleanupEntry {
    pub scenario: String,
    /// `Workspace wsgate-test/ws-a`.
    pub object: String,
    pub outcome: CleanupOutcome,
}

impl CleanupEntry {
    /// From the ledger's result for `scenario`.
    pub fn from_result(scenario: impl Into<String>, result: CleanupResult) -> Self {
        Self {
            scenario: scenario.into(),
            object: result.object,
            outcome: result.outcome,
        }
    }

    /// Whether the object was left behind.
    pub fn is_leak(&self) -> bool {
        self.outcome.is_leak()
    }
}

/// `Option<Duration>` as fractional milliseconds, like the timeline's durations.
mod opt_millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_secs_f64() * 1000.0)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        match Option::<f64>::deserialize(d)? {
            None => Ok(None),
            Some(ms) => crate::timeline::millis_in_range(ms)
                .map(Some)
                .map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::Mark;

    #[test]
    fn defaults_never_claim_success() {
        assert_eq!(ScenarioReport::default().status, ScenarioStatus::Skipped);
        assert_eq!(StepReport::default().status, StepStatus::NotRun);
        assert_eq!(RunReport::default().schema_version, SCHEMA_VERSION);
    }

    #[test]
    fn with_timeline_derives_phases_and_the_report_round_trips() {
        let start = DateTime::parse_from_rfc3339("2026-03-02T02:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut t = Timeline::new(start);
        for (m, ms) in [
            (Mark::ResumeRequested, 1000),
            (Mark::WorkspaceResumed, 12_600),
        ] {
            let d = Duration::from_millis(ms);
            t.push(
                m,
                start + chrono::Duration::milliseconds(ms as i64),
                d,
                None,
            );
        }
        let mut s = ScenarioReport::new("f", "s").with_timeline(t);
        s.duration = Some(Duration::from_millis(15_250));
        assert_eq!(
            s.phase("resume_to_running"),
            Some(Duration::from_millis(11_600))
        );
        let mut r = RunReport::new("r20260302-020000-ab12", start, TargetInfo::default());
        r.scenarios.push(s);
        r.cleanup.push(CleanupEntry {
            scenario: "s".into(),
            object: "Workspace ns/ws".into(),
            outcome: CleanupOutcome::Leaked("stuck".into()),
        });
        let json = serde_json::to_string(&r).unwrap();
        let back: RunReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back.scenarios[0].elapsed(), Duration::from_millis(15_250));
        assert_eq!(back.leaks().count(), 1);
        assert_eq!(back.scenarios[0].phases, r.scenarios[0].phases);
    }
}

#[cfg(test)]
mod snapshots_left_tests {
    use super::*;

    #[test]
    fn the_summary_names_states_and_labels_the_estimate() {
        let mut left = SnapshotsLeft {
            snapshots: vec![
                LeftSnapshot {
                    name: "a".into(),
                    uid: "u1".into(),
                    state: "Deleting".into(),
                },
                LeftSnapshot {
                    name: "b".into(),
                    uid: "u2".into(),
                    state: "Ready".into(),
                },
            ],
            estimated_bytes: Some(2 * 1024 * 1024 * 1024),
            bucket_bytes: None,
            hint: None,
        };
        assert_eq!(
            left.summary(),
            "2 PodSnapshot(s) left (Deleting, Ready): about 2.0 GiB (estimate from resident memory)"
        );
        left.estimated_bytes = None;
        assert_eq!(
            left.summary(),
            "2 PodSnapshot(s) left (Deleting, Ready): size unknown"
        );
        left.bucket_bytes = Some(900);
        assert!(left.summary().ends_with(": 900 B listed in the bucket"));
    }
}

//! The evidence a verdict is decided from: pure data, serialisable, never a secret.
//!
//! [`Evidence`] is one collection, before pause or after resume, of what the kernel, the
//! Jupyter server and the disk scan showed. [`PlatformEvidence`] is what the cluster said
//! about the resume (the `PodRestored` condition, the `GKEPodSnapshotting` event, files seen
//! on the volume). `crate::session` collects the former; the platform layer the latter.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// When the evidence was collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// After the marker was stored, before the pause.
    BeforePause,
    /// After the resume (or any later check).
    AfterResume,
}

/// One collection of evidence from the Jupyter side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Before pause or after resume.
    pub phase: Phase,
    /// When the collection finished.
    pub collected_at: DateTime<Utc>,
    /// The kernel id the marker was stored in (the one asked about).
    pub kernel_id: String,
    /// Whether the server still listed that kernel.
    pub kernel_listed: bool,
    /// What the kernel reported about itself; `None` when no kernel could be asked.
    pub kernel: Option<KernelEvidence>,
    /// Files as the Jupyter server's Contents API served them (outside the kernel);
    /// `None` when the files are not reachable through it.
    pub files_via_server: Option<BTreeMap<String, FileState>>,
    /// The search of the kernel's home and working directory for the nonce.
    pub disk_scan: Option<DiskScan>,
    /// Rebuilding the model from the application checkpoint (only after a fresh start).
    pub recovery: Option<RecoveryEvidence>,
    /// Free-form facts worth reporting (e.g. "kernel gone; a scratch kernel was started").
    pub notes: Vec<String>,
}

/// What one kernel process reported about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelEvidence {
    /// The kernel id the REST API gave for the kernel that answered.
    pub kernel_id: String,
    /// The kernel id from the process's own connection file name.
    pub kernel_id_in_process: Option<String>,
    /// Whether the marker is in kernel memory, and its digest.
    pub marker: MarkerObservation,
    /// The kernel's PID (inside its PID namespace).
    pub pid: u32,
    /// When the process started, from `/proc/self/stat`.
    pub process_start: Option<ProcessStart>,
    /// The host name the kernel sees (a restored pod usually has a new one).
    pub hostname: Option<String>,
    /// IPython's execution counter.
    pub execution_count: u64,
    /// The model object in kernel memory; `None` when there is none.
    pub model: Option<ModelEvidence>,
    /// Bytes of GPU memory allocated by the process, where a GPU exists.
    pub gpu_memory_allocated: Option<u64>,
    /// Resident memory (VmRSS) of the kernel and its parent, the Jupyter server, from
    /// `/proc`: an estimate of what a snapshot of the pod holds. `None` where unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident_bytes: Option<u64>,
    /// The background ticker started with the marker; `None` when it is not running.
    pub ticker: Option<TickerEvidence>,
    /// The input, checkpoint and output files as the kernel reads them.
    pub files: BTreeMap<String, FileState>,
}

/// The marker as found in kernel memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum MarkerObservation {
    /// The marker variable exists; `digest` is a keyed sha256 of the nonce, never the nonce.
    Present { digest: String },
    /// No marker variable in kernel memory.
    Absent,
}

/// Process start time as `/proc` gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessStart {
    /// Field 22 of `/proc/self/stat`: clock ticks after boot.
    pub ticks_after_boot: u64,
    /// The same as a UTC epoch time (boot time + ticks / CLK_TCK).
    pub epoch_s: f64,
    /// `/proc/sys/kernel/random/boot_id`, so that ticks are only compared within a boot.
    pub boot_id: Option<String>,
}

/// The model held in kernel memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelEvidence {
    /// The model name (`sim-tiny`, `qwen2.5-3b-t4`).
    pub name: String,
    /// sha256 of the weights the model uses now.
    pub weight_hash: String,
    /// Python `id()` of the model object.
    pub object_id: u64,
    /// sha256 of the model's output on the stored input (greedy token ids for an LLM).
    pub output_digest: String,
}

/// The background ticker started with the marker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TickerEvidence {
    /// Whether its thread is alive.
    pub alive: bool,
    /// Ticks so far.
    pub ticks: u64,
    /// The intended interval between ticks.
    pub interval_s: f64,
    /// The longest monotonic-clock gap between two ticks, including the gap up to now.
    pub max_gap_s: f64,
    /// The same measured on the wall clock.
    pub max_gap_wall_s: f64,
    /// Seconds since the ticker started (monotonic).
    pub age_s: f64,
}

/// A file as someone read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum FileState {
    /// The file exists; sha256 of its bytes.
    Present { sha256: String, size: u64 },
    /// The file does not exist.
    Missing,
    /// It exists but could not be read.
    Unreadable { reason: String },
}

/// The search for the nonce on disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskScan {
    /// The directories walked (the places below, with those inside another left out).
    pub roots: Vec<String>,
    /// The cut-off on the kernel's clock (UTC epoch seconds): files not written or changed
    /// since then cannot hold the nonce. `None` in reports written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_epoch_s: Option<f64>,
    /// Files read in full (any size: they are streamed).
    pub files_scanned: u64,
    /// Bytes read.
    pub bytes_scanned: u64,
    /// Files or directories the kernel's user may not read (a fresh kernel of the same
    /// user could not read them either).
    pub skipped_unreadable: u64,
    /// Files not written or changed since the cut-off (they cannot hold the nonce), not read.
    #[serde(default)]
    pub skipped_older: u64,
    /// The file-count limit was reached before the walk ended.
    pub truncated: bool,
    /// Files that contain the nonce (in any encoding searched for).
    pub hits: Vec<String>,
    /// Every place a fresh kernel could re-hydrate the marker from, and whether the scan
    /// covered it. Empty in reports written before places were recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub places: Vec<ScanPlace>,
}

impl DiskScan {
    /// The places a fresh kernel could write to that the scan did not cover, each with why.
    pub fn gaps(&self) -> Vec<String> {
        self.places
            .iter()
            .filter(|p| p.exists && p.writable && !p.covered)
            .map(|p| {
                format!(
                    "{} {} ({})",
                    p.what,
                    p.path,
                    p.gap.as_deref().unwrap_or("not covered")
                )
            })
            .collect()
    }

    /// The places, said briefly: `home /home/jovyan, tmp /tmp, dev_shm /dev/shm (absent)`.
    pub fn places_said(&self) -> String {
        self.places
            .iter()
            .map(|p| {
                let state = if !p.exists {
                    " (absent)"
                } else if !p.covered {
                    " (NOT covered)"
                } else if !p.writable {
                    " (read-only)"
                } else {
                    ""
                };
                format!("{} {}{state}", p.what, p.path)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One place the disk scan looked at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanPlace {
    /// What it is: `home`, `cwd`, `tmpdir`, `tmp`, `dev_shm`, `ipython`, `jupyter_runtime`,
    /// or `mount` (another writable volume from `/proc/self/mountinfo`).
    pub what: String,
    /// Its real path, as the kernel sees it.
    pub path: String,
    /// Whether it exists (an absent place holds nothing to re-hydrate from).
    pub exists: bool,
    /// Whether the kernel's user may write there.
    pub writable: bool,
    /// The walked root it lies in.
    pub within: Option<String>,
    /// Whether the walk of its root finished and read every file it could.
    pub covered: bool,
    /// Why it was not covered.
    pub gap: Option<String>,
}

/// Rebuilding from the application checkpoint in a fresh process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryEvidence {
    /// Whether the checkpoint could be loaded at all.
    pub loaded: bool,
    /// sha256 of the recovered weights.
    pub weight_hash: Option<String>,
    /// sha256 of the recovered model's output on the stored input.
    pub output_digest: Option<String>,
    /// Why loading failed.
    pub error: Option<String>,
}

/// What the cluster said about the resume.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlatformEvidence {
    /// Whether a platform was observed at all (false for a plain Jupyter server).
    pub observed: bool,
    /// The pod's `PodRestored` condition, if it has one.
    pub pod_restored: Option<ConditionEvidence>,
    /// The name of the snapshot the resume should have restored from (GKE's `PodRestored`
    /// message carries the PodSnapshot's name, a UUID GKE makes, not its `metadata.uid`).
    pub expected_snapshot: Option<String>,
    /// When the harness waited for `PodRestored` (GKE writes it after the pod is Ready):
    /// the `pod_restored` budget, in whole seconds from the resume. `None`: read once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_restored_budget_s: Option<u64>,
    /// The `GKEPodSnapshotting` restore event, if one was seen.
    pub restore_event: Option<EventEvidence>,
    /// Files as seen on the volume from outside Jupyter (`pods/exec` into the workspace's
    /// container), if they could be read.
    pub files: Option<BTreeMap<String, FileState>>,
    /// Why the volume's files could not be read that way (no `pods/exec` permission, no
    /// shell in the image, a budget that ran out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_unread: Option<String>,
}

impl PlatformEvidence {
    /// No platform: a plain Jupyter server (`wsgate probe`).
    pub fn not_observed() -> Self {
        PlatformEvidence::default()
    }

    /// What the platform said about the restore, one line each for its `PodRestored`
    /// condition and its restore event (none when no platform was observed).
    pub fn said(&self) -> Vec<String> {
        if !self.observed {
            return Vec::new();
        }
        let condition = match &self.pod_restored {
            Some(c) => format!(
                "PodRestored: {}{}{}",
                c.status,
                c.reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default(),
                c.message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ),
            None => match self.pod_restored_budget_s {
                Some(n) => format!(
                    "PodRestored: not written within the `pod_restored` budget ({n} s from the \
                     resume): evidence of a cold start"
                ),
                None => "PodRestored: no such condition on the pod".to_owned(),
            },
        };
        let event = match &self.restore_event {
            Some(e) => format!("event {}: {}", e.reason, e.message),
            None => "restore event: none seen".to_owned(),
        };
        vec![condition, event]
    }

    /// Whether the platform claims the pod was restored from a snapshot.
    pub fn claims_restore(&self) -> bool {
        self.observed
            && (self
                .pod_restored
                .as_ref()
                .is_some_and(|c| c.status == "True")
                || self
                    .restore_event
                    .as_ref()
                    .is_some_and(|e| e.message.contains("Successfully restored")))
    }
}

/// A pod condition, as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConditionEvidence {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// The condition's reason.
    pub reason: Option<String>,
    /// The condition's message (GKE puts the PodSnapshot's name here).
    pub message: Option<String>,
}

/// An event, as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventEvidence {
    /// The event's reason (`GKEPodSnapshotting`).
    pub reason: String,
    /// The event's message.
    pub message: String,
}

//! The trial's platform evidence after the resume: the pod's `PodRestored` condition,
//! waited for (GKE writes it after the pod is Ready) when a Ready snapshot was there to
//! restore from, and the `GKEPodSnapshotting` restore event.

use std::time::Duration;

use super::{Trial, TrialError};
use crate::config::Config;
use crate::platform::attempts::Seen;
use crate::platform::{snapshots, volume};
use crate::session::PlatformEvidence;

/// What the platform said about the resume, and when the resume's pod watch saw it.
#[derive(Debug, Clone)]
pub struct PlatformSeen {
    pub evidence: PlatformEvidence,
    /// When a live pod of the workspace was first seen Ready after the resume.
    pub ready: Option<Seen>,
    /// When its `PodRestored` condition was first seen (the platform's statement).
    pub restored: Option<Seen>,
    /// Ready -> `PodRestored`, when both were seen.
    pub lag: Option<Duration>,
    /// `PodRestored` was not waited for (no Ready snapshot before the resume, or no watch)
    /// and was read from the pod once, now.
    pub read_once: bool,
}

impl Trial {
    /// Gathers the platform's evidence about the resume. With a Ready snapshot to restore
    /// from and the resume's pod watch, `PodRestored` is waited for within the
    /// `pod_restored` budget (counted from the resume, or for a pod that queued for a GPU
    /// from its binding); otherwise it is read once. `full` also reads the pod's restore
    /// event and, for a marked trial, the checksums of its files on the home volume through
    /// `pods/exec`, independently of Jupyter, within the `cell` budget (two more requests:
    /// the drill reads them for its sample only).
    pub async fn platform_evidence(
        &self,
        cfg: &Config,
        full: bool,
    ) -> Result<PlatformSeen, TrialError> {
        let mut seen = PlatformSeen {
            evidence: PlatformEvidence {
                observed: true,
                expected_snapshot: self.snapshot.as_ref().map(|s| s.name.clone()),
                ..Default::default()
            },
            ready: None,
            restored: None,
            lag: None,
            read_once: true,
        };
        if let (true, Some(resumed)) = (self.snapshot_ready, &self.resumed) {
            let limit = cfg.budgets.pod_restored.duration();
            let watched = resumed
                .watch
                .wait_pod_restored(&self.workspace.name, limit)
                .await;
            seen.evidence.pod_restored_budget_s = Some(limit.as_secs_f64().ceil() as u64);
            seen.lag = watched.lag();
            seen.ready = watched.ready;
            seen.read_once = false;
            if let Some((condition, at)) = watched.condition {
                seen.restored = Some(at);
                seen.evidence.pod_restored = Some(condition);
            }
        }
        if let Some(pod) = self.current_pod().await? {
            if seen.read_once {
                seen.evidence.pod_restored = snapshots::pod_restored(&pod);
            }
            if full {
                seen.evidence.restore_event = snapshots::restore_event(self.client(), &pod)
                    .await
                    .map_err(|source| TrialError::Api {
                    what: "read the pod's restore event".into(),
                    source,
                })?;
            }
            if let (true, Some(marked)) = (full, &self.marked) {
                let files = marked.plan.files();
                let limit = cfg.budgets.cell.duration();
                match volume::file_checksums(self.client(), &pod, &files, "cell", limit).await {
                    Ok(read) => seen.evidence.files = Some(read),
                    Err(e) => seen.evidence.files_unread = Some(crate::output::one_line(&e)),
                }
            }
        }
        Ok(seen)
    }
}

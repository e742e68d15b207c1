//! `gate verify`, after the upgrade: from the state file alone, resume the workspace once,
//! collect the evidence and decide. Restored passes; a snapshot the upgrade invalidated
//! (a fresh session, files and application checkpoint recoverable) is reported as such with
//! guidance for users; anything else fails. A restore that needed more than one attempt
//! fails too: retries never count toward a gate verdict. Removes what prepare created.

use std::fmt;
use std::time::Duration;

use kube::api::Api;
use serde::Serialize;

use super::state::GateState;
use crate::config::Config;
use crate::platform::crd::{Workspace, WorkspaceState};
use crate::platform::ledger::CleanupResult;
use crate::platform::ownership::{self, Claim};
use crate::platform::workspace::{self as ws, NewWorkspace};
use crate::session::PlatformEvidence;
use crate::trial::{Marked, Trial, TrialError, read_token};
use crate::verdict::{FilesState, Verdict, VerdictKind};

/// What `verify` may do besides deciding.
#[derive(Debug, Clone, Copy, Default)]
pub struct VerifyOptions {
    /// Leave the workspace and its objects in place.
    pub keep: bool,
}

/// The gate's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GateVerdict {
    /// The paused process came back across the upgrade.
    Restored,
    /// The upgrade invalidated the snapshot: a fresh session, with the files and the
    /// application checkpoint recoverable. Only when the platform did not claim a restore.
    SnapshotInvalidated,
    /// The platform claimed a restore (`PodRestored=True` or its restore event) but the
    /// kernel's process state is gone: a false restore, the worst outcome for a gate.
    RestoreClaimedButLost,
    /// Anything else.
    Failed,
}

impl fmt::Display for GateVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GateVerdict::Restored => "PASS: restored across the upgrade",
            GateVerdict::SnapshotInvalidated => {
                "PASS WITH WARNING: the upgrade invalidated the snapshot; files recoverable"
            }
            GateVerdict::RestoreClaimedButLost => {
                "FAIL: the platform claimed a restore, but the paused process was lost"
            }
            GateVerdict::Failed => "FAIL",
        })
    }
}

/// What `verify` found.
#[derive(Debug, Clone, Serialize)]
pub struct GateOutcome {
    pub verdict: GateVerdict,
    /// Why, in one line.
    pub summary: String,
    /// What to tell users, when the outcome needs it.
    pub guidance: Option<String>,
    /// The restore verdict with its evidence.
    pub restore: Verdict,
    /// Whether the snapshot prepare recorded was still there (and Ready) before the resume.
    pub snapshot_before_resume: Option<bool>,
    /// Pods the workspace went through during the resume (1 unless the platform retried).
    pub attempts: usize,
    /// Container restarts of the resumed pod.
    pub restarts: i32,
    pub resume_to_running: Duration,
    /// Resume requested -> the first cells after it (marker, loaded model) completed: the
    /// figure users feel, stamped when those cells completed.
    pub resume_to_next_cell: Option<Duration>,
    /// The resumed pod Ready -> its `PodRestored` condition, when both were seen.
    pub pod_restored_lag: Option<Duration>,
    /// What cleanup did (empty with `keep`).
    pub cleanup: Vec<CleanupResult>,
}

impl GateOutcome {
    /// The exit code: 0 when the gate passes (also with a warning), else the restore
    /// verdict's code (1 when the verdict itself was Restored but needed retries).
    pub fn exit_code(&self) -> i32 {
        match self.verdict {
            GateVerdict::Restored | GateVerdict::SnapshotInvalidated => crate::exit_code::SUCCESS,
            GateVerdict::RestoreClaimedButLost => crate::exit_code::FALSE_RESTORE,
            GateVerdict::Failed => match self.restore.kind {
                VerdictKind::Restored => crate::exit_code::FAILED,
                _ => self.restore.exit_code(),
            },
        }
    }
}

/// What the platform itself said about the restore (its PodRestored condition and restore
/// event), in parentheses; empty when it was not observed. It tells a snapshot the platform
/// refused (PodRestored False, with why) from a silent cold start (no condition at all) and
/// from a restore that came back without its process.
fn platform_said(platform: &PlatformEvidence) -> String {
    let said = platform.said();
    if said.is_empty() {
        String::new()
    } else {
        format!(" (the platform said: {})", said.join("; "))
    }
}

/// Decides the gate from the restore verdict, what the platform said, and the number of
/// attempts.
pub fn gate_verdict(
    restore: &Verdict,
    platform: &PlatformEvidence,
    attempts: usize,
    restarts: i32,
    recovered: bool,
) -> (GateVerdict, String, Option<String>) {
    // The platform said "restored" and the kernel says otherwise (its state is gone, no kernel
    // answered, another marker): never a pass, whatever the files say, and it outranks a
    // retry (a lost process after two attempts is still a false restore). The rule is the
    // verdict's own, the same one the suite, the reports and `report --compare` apply.
    if restore.false_restore() {
        return (
            GateVerdict::RestoreClaimedButLost,
            format!(
                "the platform claimed a restore{} but the kernel's process state did not come \
                 back (restore verdict {}{}): users would be told their session was restored \
                 while their variables and loaded models are gone",
                platform_said(platform),
                restore.kind,
                restore
                    .reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
            None,
        );
    }
    if attempts > 1 || restarts > 0 {
        return (
            GateVerdict::Failed,
            format!(
                "the resume needed {attempts} pod(s) and {restarts} container restart(s); \
                 retries never count toward a gate verdict (restore verdict: {})",
                restore.kind
            ),
            None,
        );
    }
    match restore.kind {
        VerdictKind::Restored => (
            GateVerdict::Restored,
            "the paused kernel process came back with its memory, model and files".into(),
            None,
        ),
        VerdictKind::FreshSession if restore.files == FilesState::Intact && recovered => (
            GateVerdict::SnapshotInvalidated,
            format!(
                "the resume opened a fresh session{}: the paused process was not restored \
                 across the upgrade; the files and the application checkpoint were",
                platform_said(platform)
            ),
            Some(
                "Workspaces paused before this upgrade come back as fresh sessions: kernel \
                 memory (variables, loaded models) is lost, files are kept. Ask users to save \
                 their work and application checkpoints before the upgrade, or to resume \
                 their workspaces first."
                    .into(),
            ),
        ),
        kind => (
            GateVerdict::Failed,
            format!(
                "restore verdict {kind}{}",
                restore
                    .reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ),
            None,
        ),
    }
}

/// Verifies the gate; `progress` hears one line per step.
pub async fn verify(
    client: &kube::Client,
    cfg: &Config,
    state: &GateState,
    opts: VerifyOptions,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<GateOutcome, TrialError> {
    // The state file came from another machine: its run id and every ledger entry are
    // checked before anything is touched (crate::platform::ownership).
    ownership::check_run_id(&state.run_id)
        .map_err(|why| TrialError::Config(format!("the state file's run_id: {why}")))?;
    let claim = Claim::Run(state.run_id.clone());
    let (ledger, refused) = state.ledger.vet(&state.namespace, &claim);
    for r in &refused {
        progress(&format!("refused: {}: {:?}", r.object, r.outcome));
    }
    let decided = decide(client, cfg, state, &claim, progress).await;
    let cleanup = if opts.keep {
        progress("keeping the workspace and its objects (--keep)");
        refused
    } else {
        let mut results = refused;
        results.extend(
            ledger
                .cleanup(client, &claim, cfg.budgets.delete.duration(), false)
                .await,
        );
        for r in &results {
            progress(&format!("cleanup: {}: {:?}", r.object, r.outcome));
        }
        results
    };
    let mut outcome = decided?;
    outcome.cleanup = cleanup;
    Ok(outcome)
}

async fn decide(
    client: &kube::Client,
    cfg: &Config,
    state: &GateState,
    claim: &Claim,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<GateOutcome, TrialError> {
    let ns = &state.namespace;
    let name = &state.workspace;
    let api: Api<Workspace> = Api::namespaced(client.clone(), ns);
    let found = api.get_opt(name).await.map_err(|source| TrialError::Api {
        what: format!("read workspace {ns}/{name}"),
        source,
    })?;
    let Some(found) = found.filter(|w| w.metadata.uid.as_deref() == Some(&state.workspace_uid))
    else {
        return Err(TrialError::Gone(format!(
            "workspace {ns}/{name} (uid {}) from the state file is gone: the gate cannot decide; \
             run `wsgate gate prepare` again before the next upgrade",
            state.workspace_uid
        )));
    };
    // Resuming is a patch: only of the Workspace this gate's prepare made.
    ownership::check_meta(
        &format!("Workspace {ns}/{name}"),
        &found.metadata,
        claim,
        Some(&state.workspace_uid),
    )
    .map_err(|e| TrialError::Gone(format!("{e}: the gate cannot decide")))?;
    if !ws::is_state(Some(&found), WorkspaceState::Paused) {
        return Err(TrialError::Gone(format!(
            "workspace {ns}/{name} is not Paused ({}): something resumed or changed it since \
             prepare, so the gate cannot decide",
            ws::describe(Some(&found))
        )));
    }
    let mut trial = adopt(client, state)?;
    let snapshot_before_resume = match &state.snapshot {
        None => None,
        Some(_) => Some(trial.check_snapshot_ready().await?),
    };
    match (&state.snapshot, snapshot_before_resume) {
        (Some(s), Some(true)) => progress(&format!("PodSnapshot {} is still Ready", s.name)),
        (Some(s), _) => progress(&format!(
            "PodSnapshot {} from prepare is gone or not Ready any more",
            s.name
        )),
        (None, _) => progress("prepare recorded no Ready PodSnapshot"),
    }
    let token = read_token(client, ns).await?;

    progress(&format!("resuming workspace {ns}/{name}"));
    let resumed = trial
        .resume_watched(cfg.budgets.resume_to_running.duration())
        .await?;
    let running = Trial::wait_for(cfg, "resume_to_running", WorkspaceState::Running)?;
    // Stamped when the Workspace watch saw it Running, not when the wait returned.
    let resume_to_running = match trial.wait_state(&running, WorkspaceState::Running).await? {
        Some(seen) => seen.instant.saturating_duration_since(resumed.instant),
        None => resumed.instant.elapsed(),
    };
    let pods = trial.pods().await?;
    let attempts = pods.len();
    let restarts = pods
        .iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .and_then(|p| p.status.as_ref()?.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0);
    progress(&format!(
        "workspace Running after {:.1} s; collecting the evidence",
        resume_to_running.as_secs_f64()
    ));

    let (after, stamps) = trial.kernel_evidence(cfg, &token).await?;
    let resume_to_next_cell = stamps
        .first_cell_done
        .and_then(|at| (at - resumed.at).to_std().ok());
    let seen = trial.platform_evidence(cfg, true).await?;
    if let Some(limit) = seen.evidence.pod_restored_budget_s {
        match (&seen.evidence.pod_restored, seen.restored) {
            (Some(c), Some(at)) => progress(&format!(
                "PodRestored {} {:.1} s after the resume{}",
                c.status,
                (at.instant - resumed.instant).as_secs_f64(),
                seen.lag
                    .map(|l| format!(", {:.1} s after the pod was Ready", l.as_secs_f64()))
                    .unwrap_or_default()
            )),
            _ => progress(&format!(
                "no PodRestored within the `pod_restored` budget ({limit} s)"
            )),
        }
    }
    let platform = seen.evidence;
    let restore = trial.decide(&after, &platform)?;
    let recovered = after.recovery.as_ref().is_some_and(|r| r.loaded);
    let (verdict, summary, guidance) =
        gate_verdict(&restore, &platform, attempts, restarts, recovered);
    Ok(GateOutcome {
        verdict,
        summary,
        guidance,
        restore,
        snapshot_before_resume,
        attempts,
        restarts,
        resume_to_running,
        resume_to_next_cell,
        pod_restored_lag: seen.lag,
        cleanup: Vec::new(),
    })
}

/// The trial prepare began, from the state file alone: its Workspace (by uid), its marker
/// (the nonce unsealed) and the snapshot it paused into.
fn adopt(client: &kube::Client, state: &GateState) -> Result<Trial, TrialError> {
    let nonce = state
        .nonce
        .unseal()
        .ok_or_else(|| TrialError::Config("the state file's sealed nonce is damaged".into()))?;
    let workspace = NewWorkspace {
        namespace: state.namespace.clone(),
        name: state.workspace.clone(),
        kind: state.kind.clone(),
        image_config: state.image_config.clone(),
        pod_config: state.pod_config.clone(),
        home_pvc: format!("{}-home", state.workspace),
        home_size: String::new(),
        labels: Default::default(),
        annotations: Default::default(),
    };
    let mut trial = Trial::adopt(client, workspace, state.workspace_uid.clone());
    trial.node_before_pause = state.node_before_pause.clone();
    trial.snapshot = state.snapshot.clone();
    trial.marked = Some(Marked {
        kernel_id: state.kernel_id.clone(),
        nonce,
        plan: state.plan.clone(),
        before: state.before.clone(),
        reachable_at: None,
    });
    Ok(trial)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::{Contradiction, ProcessState};

    fn verdict(kind: VerdictKind, files: FilesState) -> Verdict {
        Verdict {
            kind,
            process: ProcessState::Unknown,
            files,
            reason: None,
            decided_by: Vec::new(),
            contradictions: Vec::new(),
        }
    }

    #[test]
    fn restored_passes_only_at_the_first_attempt() {
        let none = PlatformEvidence::not_observed();
        let v = verdict(VerdictKind::Restored, FilesState::Intact);
        assert_eq!(
            gate_verdict(&v, &none, 1, 0, false).0,
            GateVerdict::Restored
        );
        assert_eq!(gate_verdict(&v, &none, 2, 0, false).0, GateVerdict::Failed);
        assert_eq!(gate_verdict(&v, &none, 1, 1, false).0, GateVerdict::Failed);
    }

    #[test]
    fn a_fresh_session_passes_with_guidance_only_when_the_work_is_recoverable() {
        let none = PlatformEvidence::not_observed();
        let fresh = verdict(VerdictKind::FreshSession, FilesState::Intact);
        let (g, summary, guidance) = gate_verdict(&fresh, &none, 1, 0, true);
        assert_eq!(g, GateVerdict::SnapshotInvalidated);
        assert!(!summary.contains("platform said"), "{summary}");
        let refused = PlatformEvidence {
            observed: true,
            pod_restored: Some(crate::verdict::ConditionEvidence {
                status: "False".into(),
                reason: Some("RestoreFailed".into()),
                message: Some("the GPU model changed".into()),
            }),
            ..Default::default()
        };
        let (_, summary, _) = gate_verdict(&fresh, &refused, 1, 0, true);
        assert!(
            summary.contains(
                "(the platform said: PodRestored: False (RestoreFailed): the GPU model changed; \
                 restore event: none seen)"
            ),
            "{summary}"
        );
        assert!(guidance.is_some_and(|t| t.contains("fresh sessions")));
        assert_eq!(
            gate_verdict(&fresh, &none, 1, 0, false).0,
            GateVerdict::Failed
        );
        let lost = verdict(VerdictKind::FilesLost, FilesState::Lost);
        assert_eq!(
            gate_verdict(&lost, &none, 1, 0, true).0,
            GateVerdict::Failed
        );
        let unsure = verdict(VerdictKind::Inconclusive, FilesState::Intact);
        assert_eq!(
            gate_verdict(&unsure, &none, 1, 0, true).0,
            GateVerdict::Failed
        );
    }

    /// The `kernel-dies` case: GKE restored the pod (`PodRestored=True`), the files and the
    /// application checkpoint are there, the kernel's memory is not. Before, this passed
    /// with a warning (SnapshotInvalidated, exit 0).
    #[test]
    fn a_claimed_restore_without_the_process_is_a_fail_of_its_own() {
        let claimed = PlatformEvidence {
            observed: true,
            pod_restored: Some(crate::verdict::ConditionEvidence {
                status: "True".into(),
                reason: Some("Restored".into()),
                message: Some("Restored from snapshot 5f0c".into()),
            }),
            ..Default::default()
        };
        let mut fresh = verdict(VerdictKind::FreshSession, FilesState::Intact);
        fresh.process = ProcessState::Fresh;
        fresh
            .contradictions
            .push(Contradiction::PlatformClaimsRestoreButNonceGone);
        let (g, summary, guidance) = gate_verdict(&fresh, &claimed, 1, 0, true);
        assert_eq!(g, GateVerdict::RestoreClaimedButLost);
        assert!(summary.contains("PodRestored: True"), "{summary}");
        assert!(guidance.is_none());
        // No kernel answered at all: the process state is not there either.
        let mut unknown = verdict(VerdictKind::Inconclusive, FilesState::Intact);
        unknown
            .contradictions
            .push(Contradiction::PlatformClaimsRestoreButKernelDisagrees {
                detail: "no kernel answered after the resume".into(),
            });
        assert_eq!(
            gate_verdict(&unknown, &claimed, 1, 0, true).0,
            GateVerdict::RestoreClaimedButLost
        );
        // A lost process after a retried resume is still a false restore (exit 14), not
        // the retries' plain failure: before, the retry check came first.
        assert_eq!(
            gate_verdict(&fresh, &claimed, 2, 0, true).0,
            GateVerdict::RestoreClaimedButLost
        );
        assert_eq!(
            gate_verdict(&unknown, &claimed, 1, 3, true).0,
            GateVerdict::RestoreClaimedButLost
        );
        // The process came back and only the files were lost: a plain FAIL (FilesLost).
        let mut files_lost = verdict(VerdictKind::FilesLost, FilesState::Lost);
        files_lost.process = ProcessState::Restored;
        assert_eq!(
            gate_verdict(&files_lost, &claimed, 1, 0, true).0,
            GateVerdict::Failed
        );
        let outcome = GateOutcome {
            verdict: GateVerdict::RestoreClaimedButLost,
            summary: summary.clone(),
            guidance: None,
            restore: fresh.clone(),
            snapshot_before_resume: Some(true),
            attempts: 1,
            restarts: 0,
            resume_to_running: Duration::from_secs(1),
            resume_to_next_cell: None,
            pod_restored_lag: None,
            cleanup: Vec::new(),
        };
        assert_eq!(outcome.exit_code(), crate::exit_code::FALSE_RESTORE);
    }
}

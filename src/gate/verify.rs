//! `gate verify`, after the upgrade: from the state file alone, resume the workspace once,
//! collect the evidence and decide. Restored passes; a snapshot the upgrade invalidated
//! (a fresh session, files and application checkpoint recoverable) is reported as such with
//! guidance for users; anything else fails. A restore that needed more than one attempt
//! fails too: retries never count toward a gate verdict. Removes what prepare created.

use std::fmt;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret as KubeSecret;
use kube::api::Api;
use serde::Serialize;

use super::prepare::wait_state;
use super::state::GateState;
use super::{GateError, budget, jupyter_for, session_budgets};
use crate::config::Config;
use crate::platform::attempts::AttemptWatch;
use crate::platform::crd::{Workspace, WorkspaceState};
use crate::platform::ledger::CleanupResult;
use crate::platform::ownership::{self, Claim};
use crate::platform::snapshots;
use crate::platform::workspace::{self as ws, TOKEN_SECRET};
use crate::session::{PlatformEvidence, Secret};
use crate::verdict::{self, FilesState, ProcessState, Verdict, VerdictKind};

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
    // The platform said "restored" and the kernel says its process state is not there (gone,
    // or no kernel answered): never a pass, whatever the files say.
    if platform.claims_restore() && restore.process != ProcessState::Restored {
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
) -> Result<GateOutcome, GateError> {
    // The state file came from another machine: its run id and every ledger entry are
    // checked before anything is touched (crate::platform::ownership).
    ownership::check_run_id(&state.run_id)
        .map_err(|why| GateError::Config(format!("the state file's run_id: {why}")))?;
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
                .cleanup(client, &claim, budget(cfg, "delete")?, false)
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
) -> Result<GateOutcome, GateError> {
    let ns = &state.namespace;
    let name = &state.workspace;
    let api: Api<Workspace> = Api::namespaced(client.clone(), ns);
    let found = api.get_opt(name).await.map_err(|source| GateError::Api {
        what: format!("read workspace {ns}/{name}"),
        source,
    })?;
    let Some(found) = found.filter(|w| w.metadata.uid.as_deref() == Some(&state.workspace_uid))
    else {
        return Err(GateError::Gone(format!(
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
    .map_err(|e| GateError::Gone(format!("{e}: the gate cannot decide")))?;
    if !ws::is_state(Some(&found), WorkspaceState::Paused) {
        return Err(GateError::Gone(format!(
            "workspace {ns}/{name} is not Paused ({}): something resumed or changed it since \
             prepare, so the gate cannot decide",
            ws::describe(Some(&found))
        )));
    }
    let snapshot_before_resume =
        match &state.snapshot {
            None => None,
            Some(want) => {
                let snaps = snapshots::of_workspace(client, ns, name)
                    .await
                    .map_err(|source| GateError::Api {
                        what: format!("list the PodSnapshots of workspace {ns}/{name}"),
                        source,
                    })?;
                Some(snaps.iter().any(|s| {
                    s.metadata.name.as_deref() == Some(&want.name) && snapshots::is_ready(s)
                }))
            }
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
    let nonce = state
        .nonce
        .unseal()
        .ok_or_else(|| GateError::Config("the state file's sealed nonce is damaged".into()))?;

    progress(&format!("resuming workspace {ns}/{name}"));
    // The resume's pods, watched from the request on: when one is Ready, when it shows
    // PodRestored (GKE writes it after Ready).
    let watch = AttemptWatch::start(client, ns)
        .await
        .map_err(GateError::PodWatch)?;
    watch.mark_resumed();
    let resumed_at = Instant::now();
    let resumed_utc = chrono::Utc::now();
    ws::set_paused(client, ns, name, &state.workspace_uid, false).await?;
    wait_state(
        &api,
        cfg,
        name,
        WorkspaceState::Running,
        "resume_to_running",
    )
    .await?;
    let resume_to_running = resumed_at.elapsed();
    let pods = ws::pods(client, ns, name).await?;
    let attempts = pods.len();
    let pod = pods
        .iter()
        .find(|p| p.metadata.deletion_timestamp.is_none());
    let restarts = pod
        .and_then(|p| p.status.as_ref()?.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0);
    progress(&format!(
        "workspace Running after {:.1} s; collecting the evidence",
        resume_to_running.as_secs_f64()
    ));

    let budgets = session_budgets(cfg)?;
    let jc = jupyter_for(client, cfg, ns, name, &token).await?;
    let (after, stamps) = crate::session::collect_evidence_stamped(
        &jc,
        &state.kernel_id,
        &nonce,
        &state.plan,
        &budgets,
        Some(&state.before),
    )
    .await?;
    let resume_to_next_cell = stamps
        .first_cell_done
        .and_then(|at| (at - resumed_utc).to_std().ok());
    let mut platform = PlatformEvidence {
        observed: true,
        expected_snapshot: state.snapshot.as_ref().map(|s| s.name.clone()),
        ..Default::default()
    };
    // Wait for PodRestored only when a Ready snapshot was there to restore from.
    let mut pod_restored_lag = None;
    if snapshot_before_resume == Some(true) {
        let limit = budget(cfg, "pod_restored")?;
        let seen = watch.wait_pod_restored(name, limit).await;
        platform.pod_restored_budget_s = Some(limit.as_secs_f64().ceil() as u64);
        pod_restored_lag = seen.lag();
        match &seen.condition {
            Some((c, at)) => progress(&format!(
                "PodRestored {} {:.1} s after the resume{}",
                c.status,
                (at.instant - resumed_at).as_secs_f64(),
                pod_restored_lag
                    .map(|l| format!(", {:.1} s after the pod was Ready", l.as_secs_f64()))
                    .unwrap_or_default()
            )),
            None => progress(&format!(
                "no PodRestored within the `pod_restored` budget ({:.0} s)",
                limit.as_secs_f64()
            )),
        }
        platform.pod_restored = seen.condition.map(|(c, _)| c);
    }
    if let Some(pod) = pod {
        if platform.pod_restored_budget_s.is_none() {
            platform.pod_restored = snapshots::pod_restored(pod);
        }
        platform.restore_event = snapshots::restore_event(client, pod)
            .await
            .map_err(|source| GateError::Api {
                what: "read the pod's restore event".into(),
                source,
            })?;
    }
    let restore = verdict::decide(&state.before, &after, &platform);
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
        pod_restored_lag,
        cleanup: Vec::new(),
    })
}

/// The workspace's Jupyter token, from the namespace's Secret (never from the state file).
pub async fn read_token(client: &kube::Client, ns: &str) -> Result<Secret, GateError> {
    let api: Api<KubeSecret> = Api::namespaced(client.clone(), ns);
    let secret = api
        .get_opt(TOKEN_SECRET.0)
        .await
        .map_err(|source| GateError::Api {
            what: format!("read Secret {ns}/{}", TOKEN_SECRET.0),
            source,
        })?;
    secret
        .and_then(|s| s.data?.remove(TOKEN_SECRET.1))
        .and_then(|b| String::from_utf8(b.0).ok())
        .map(Secret::new)
        .ok_or_else(|| {
            GateError::Gone(format!(
                "Secret {ns}/{} with the workspace's Jupyter token is gone: verify cannot reach \
                 the kernel",
                TOKEN_SECRET.0
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

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
            .push(crate::verdict::Contradiction::PlatformClaimsRestoreButNonceGone);
        let (g, summary, guidance) = gate_verdict(&fresh, &claimed, 1, 0, true);
        assert_eq!(g, GateVerdict::RestoreClaimedButLost);
        assert!(summary.contains("PodRestored: True"), "{summary}");
        assert!(guidance.is_none());
        // No kernel answered at all: the process state is not there either.
        let unknown = verdict(VerdictKind::Inconclusive, FilesState::Intact);
        assert_eq!(
            gate_verdict(&unknown, &claimed, 1, 0, true).0,
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

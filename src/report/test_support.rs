//! Report fixtures the writers' unit tests share.

use super::model::{RunReport, ScenarioReport, ScenarioStatus};
use crate::verdict::{Contradiction, FilesState, ProcessState, Verdict, VerdictKind};

/// A failed scenario whose process was lost while the platform claimed a restore: a false
/// restore. With `claimed = false` the same evidence without the platform's claim.
pub fn kernel_dies_scenario(claimed: bool) -> ScenarioReport {
    let mut s = ScenarioReport::new("Pause", "kernel dies");
    s.status = ScenarioStatus::Failed;
    s.verdict = Some(fresh_session(claimed));
    s
}

/// A FreshSession verdict, a false restore when the platform `claimed` one.
pub fn fresh_session(claimed: bool) -> Verdict {
    Verdict {
        kind: VerdictKind::FreshSession,
        process: ProcessState::Fresh,
        files: FilesState::Intact,
        reason: None,
        decided_by: Vec::new(),
        contradictions: if claimed {
            vec![Contradiction::PlatformClaimsRestoreButNonceGone]
        } else {
            Vec::new()
        },
    }
}

/// A run of one scenario.
pub fn run_of(s: ScenarioReport) -> RunReport {
    RunReport {
        run_id: "r".into(),
        scenarios: vec![s],
        ..RunReport::default()
    }
}

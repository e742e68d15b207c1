//! The gate's HTML page (`reports/<gate-run-id>/gate-verify.html`), beside
//! `gate-verify.json`: the decision, the figures and the evidence, in the run report's style
//! (see `report::html`).

use std::fmt::Write;
use std::time::Duration;

use super::{GateOutcome, GateVerdict};
use crate::platform::ledger::CleanupOutcome;
use crate::report::fmt::{duration, html};
use crate::report::html::{page, status_mark, verdict};

impl GateOutcome {
    /// The page of this verification of gate run `run_id` against `target` (in words).
    pub fn html(&self, run_id: &str, target: &str) -> String {
        let mut out = String::new();
        let (mark, class) = match self.verdict {
            GateVerdict::Restored => ("passed", "passed"),
            GateVerdict::SnapshotInvalidated => ("warning", "warning"),
            GateVerdict::RestoreClaimedButLost | GateVerdict::Failed => ("failed", "failed"),
        };
        let _ = write!(
            out,
            "<h1>wsgate gate verify {}</h1>\n<p>Target: {}.</p>\n<p class=\"{class}\">{} <strong>{}</strong></p>\n<p>{}</p>\n",
            html(run_id),
            html(target),
            status_mark(mark),
            html(&self.verdict.to_string()),
            html(&self.summary),
        );
        if let Some(g) = &self.guidance {
            let _ = writeln!(out, "<p>Guidance for users: {}</p>", html(g));
        }
        let cell = |d: Option<Duration>| d.map(duration).unwrap_or_else(|| "–".into());
        out.push_str("<table><tr><th>Figure</th><th>Value</th></tr>");
        for (label, value) in [
            ("resume → Running", duration(self.resume_to_running)),
            ("resume → next cell", cell(self.resume_to_next_cell)),
            ("pod Ready → PodRestored", cell(self.pod_restored_lag)),
            ("pods during the resume", self.attempts.to_string()),
            ("container restarts", self.restarts.to_string()),
            (
                "snapshot Ready before the resume",
                match self.snapshot_before_resume {
                    Some(true) => "yes".into(),
                    Some(false) => "no".into(),
                    None => "–".into(),
                },
            ),
        ] {
            let _ = write!(
                out,
                "<tr><td>{}</td><td class=\"num\">{}</td></tr>",
                html(label),
                html(&value)
            );
        }
        out.push_str("</table>\n");
        out.push_str("<h2>Restore verdict</h2>\n");
        verdict(&mut out, &self.restore);
        if !self.cleanup.is_empty() {
            out.push_str(
                "<h2>Cleanup</h2>\n<table><tr><th></th><th>Object</th><th>Outcome</th></tr>",
            );
            for c in &self.cleanup {
                let outcome = match &c.outcome {
                    CleanupOutcome::Deleted => "deleted".to_string(),
                    CleanupOutcome::AlreadyGone => "already gone".to_string(),
                    CleanupOutcome::Kept => "kept".to_string(),
                    CleanupOutcome::Leaked(why) => format!("left behind: {why}"),
                    CleanupOutcome::Refused(why) => format!("not touched: {why}"),
                };
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                    status_mark(if c.is_leak() { "failed" } else { "passed" }),
                    html(&c.object),
                    html(&outcome)
                );
            }
            out.push_str("</table>\n");
        }
        page(&format!("wsgate gate verify {run_id}"), &out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::ledger::CleanupResult;
    use crate::verdict::{Contradiction, FilesState, ProcessState, Verdict, VerdictKind};

    fn outcome(verdict: GateVerdict, restore: Verdict) -> GateOutcome {
        GateOutcome {
            verdict,
            summary: "the nonce <came> back".into(),
            guidance: None,
            restore,
            snapshot_before_resume: Some(true),
            attempts: 1,
            restarts: 0,
            resume_to_running: Duration::from_millis(1_500),
            resume_to_next_cell: Some(Duration::from_millis(2_300)),
            pod_restored_lag: None,
            cleanup: vec![
                CleanupResult {
                    object: "Workspace wsgate-test/g1".into(),
                    outcome: CleanupOutcome::Deleted,
                },
                CleanupResult {
                    object: "Secret wsgate-test/jupyter-token".into(),
                    outcome: CleanupOutcome::Leaked("timed out".into()),
                },
            ],
        }
    }

    fn verdict(kind: VerdictKind, contradictions: Vec<Contradiction>) -> Verdict {
        Verdict {
            kind,
            process: ProcessState::Restored,
            files: FilesState::Intact,
            reason: None,
            decided_by: vec!["PID 57 is unchanged".into()],
            contradictions,
        }
    }

    #[test]
    fn the_page_shows_the_decision_the_figures_the_evidence_and_the_cleanup() {
        let page = outcome(
            GateVerdict::Restored,
            verdict(VerdictKind::Restored, vec![]),
        )
        .html("g-1", "the cluster at https://203.0.113.10");
        assert!(page.contains("PASS: restored across the upgrade"), "{page}");
        assert!(page.contains("the nonce &lt;came&gt; back"), "{page}");
        assert!(page.contains("<td class=\"num\">1.5 s</td>"), "{page}");
        assert!(page.contains("<td class=\"num\">2.3 s</td>"), "{page}");
        assert!(page.contains("PID 57 is unchanged"), "{page}");
        assert!(page.contains("left behind: timed out"), "{page}");
        // The headline and the deleted object passed, the leak failed.
        assert_eq!(page.matches("data-status=\"passed\"").count(), 2, "{page}");
        assert_eq!(page.matches("data-status=\"failed\"").count(), 1, "{page}");
        assert!(!page.chars().any(crate::report::html::needs_emoji_font));

        let lost = outcome(
            GateVerdict::RestoreClaimedButLost,
            verdict(
                VerdictKind::Inconclusive,
                vec![Contradiction::PlatformClaimsRestoreButNonceGone],
            ),
        )
        .html("g-1", "the cluster");
        assert!(
            lost.contains("FAIL: the platform claimed a restore"),
            "{lost}"
        );
        assert!(lost.contains("(false restore)"), "{lost}");
        assert!(lost.contains("class=\"failed\">contradiction:"), "{lost}");
        let warned = outcome(
            GateVerdict::SnapshotInvalidated,
            verdict(VerdictKind::FreshSession, vec![]),
        )
        .html("g-1", "the cluster");
        assert!(warned.contains("data-status=\"warning\""), "{warned}");
    }
}

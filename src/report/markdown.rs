//! The Markdown summary (also what goes to `$GITHUB_STEP_SUMMARY`): a table of scenarios
//! with status, verdict and the key phases, the failures with their messages, verdict
//! contradictions, cleanup leaks and the GPU allocation peaks.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::failure::failure_summary;
use super::fmt::{KEY_PHASES, duration, md_cell, phase_label};
use super::model::{RunReport, ScenarioStatus, TargetKind};
use crate::platform::ledger::CleanupOutcome;

/// The Markdown summary of `report`.
pub fn markdown(report: &RunReport) -> String {
    let mut out = String::new();
    header(&mut out, report);
    scenario_table(&mut out, report);
    failures(&mut out, report);
    contradictions(&mut out, report);
    snapshots_left(&mut out, report);
    cleanup(&mut out, report);
    gpu(&mut out, report);
    out
}

fn snapshots_left(out: &mut String, r: &RunReport) {
    let left: Vec<_> = r
        .scenarios
        .iter()
        .filter_map(|s| Some((s, s.snapshots_left.as_ref()?)))
        .filter(|(_, l)| !l.snapshots.is_empty())
        .collect();
    if left.is_empty() {
        return;
    }
    out.push_str(
        "## Snapshots left behind

| Scenario | Snapshots | Hint |
|---|---|---|
",
    );
    for (s, l) in left {
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            md_cell(&s.name),
            md_cell(&l.summary()),
            md_cell(l.hint.as_deref().unwrap_or(""))
        );
    }
    out.push('\n');
}

/// The status as an icon readers can scan.
pub(crate) fn icon(status: ScenarioStatus) -> &'static str {
    match status {
        ScenarioStatus::Passed => "✅",
        ScenarioStatus::Failed => "❌",
        ScenarioStatus::Skipped => "⏭️",
    }
}

/// `the embedded simulator at URL (not a real cluster)` or `the cluster at URL`.
pub(crate) fn target_words(report: &RunReport) -> String {
    match report.target.kind {
        TargetKind::Sim => format!(
            "the embedded simulator at {} (not a real cluster)",
            report.target.server
        ),
        TargetKind::Cluster if report.target.is_simulator() => format!(
            "wsgate's simulator at {} (version {}; named as a cluster, but not a real one)",
            report.target.server, report.target.server_version
        ),
        TargetKind::Cluster => format!("the cluster at {}", report.target.server),
    }
}

fn header(out: &mut String, r: &RunReport) {
    let _ = writeln!(out, "# wsgate run `{}`\n", r.run_id);
    let _ = writeln!(
        out,
        "- target: {}, namespace `{}`",
        target_words(r),
        r.target.namespace
    );
    if let Some(p) = &r.profile {
        let _ = writeln!(out, "- profile: `{p}`");
    }
    let _ = writeln!(
        out,
        "- started {}, took {}, exit code {}\n",
        r.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
        duration(r.duration()),
        r.exit_code
    );
    let _ = writeln!(
        out,
        "**{} scenarios: {} passed, {} failed, {} skipped**\n",
        r.scenarios.len(),
        r.count(ScenarioStatus::Passed),
        r.count(ScenarioStatus::Failed),
        r.count(ScenarioStatus::Skipped)
    );
    let false_restores = r
        .scenarios
        .iter()
        .filter(|s| s.verdict.as_ref().is_some_and(|v| v.false_restore()))
        .count();
    if false_restores > 0 {
        let _ = writeln!(
            out,
            "**{false_restores} false restore(s): the platform claimed a restore and the \
             process state was lost. Never ship this.**\n"
        );
    }
}

fn scenario_table(out: &mut String, r: &RunReport) {
    if r.scenarios.is_empty() {
        out.push_str("No scenario ran.\n\n");
        return;
    }
    out.push_str("| | Scenario | Feature | Verdict |");
    for (_, label) in KEY_PHASES {
        let _ = write!(out, " {label} |");
    }
    out.push_str("\n|:-:|---|---|---|");
    out.push_str(&"--:|".repeat(KEY_PHASES.len()));
    out.push('\n');
    for s in &r.scenarios {
        let verdict = s.verdict_label().unwrap_or_else(|| "–".to_string());
        let _ = write!(
            out,
            "| {} | {} | {} | {} |",
            icon(s.status),
            md_cell(&s.name),
            md_cell(&s.feature),
            verdict
        );
        for (name, _) in KEY_PHASES {
            let cell = s.phase(name).map(duration).unwrap_or_else(|| "–".into());
            let _ = write!(out, " {cell} |");
        }
        out.push('\n');
    }
    out.push('\n');
}

fn failures(out: &mut String, r: &RunReport) {
    let failed: Vec<_> = r
        .scenarios
        .iter()
        .filter_map(|s| Some((s, failure_summary(s)?)))
        .collect();
    if failed.is_empty() {
        return;
    }
    out.push_str("## Failures\n\n");
    for (s, f) in failed {
        let _ = writeln!(out, "### ❌ {}\n", md_cell(&s.name));
        let _ = writeln!(out, "- feature: {}", md_cell(&s.feature));
        if let Some(step) = &f.step {
            let _ = writeln!(out, "- failed step: `{}`", step.replace('`', "'"));
        }
        if let Some(p) = &f.phase {
            let _ = writeln!(out, "- phase under way: {}", phase_label(p));
        }
        if let Some(last) = &f.last_observed {
            let _ = writeln!(out, "- last observed: `{last}`");
        }
        let fence = if f.detail.contains("```") {
            "~~~~"
        } else {
            "```"
        };
        let _ = writeln!(out, "\n{fence}text\n{}\n{fence}\n", f.detail.trim_end());
    }
}

fn contradictions(out: &mut String, r: &RunReport) {
    let rows: Vec<_> = r
        .scenarios
        .iter()
        .filter_map(|s| Some((s, s.verdict.as_ref()?)))
        .filter(|(_, v)| !v.contradictions.is_empty() || v.reason.is_some())
        .collect();
    if rows.is_empty() {
        return;
    }
    out.push_str(
        "## Verdict notes\n\n| Scenario | Verdict | Reason and contradictions |\n|---|---|---|\n",
    );
    for (s, v) in rows {
        let mut notes: Vec<String> = v.reason.iter().cloned().collect();
        notes.extend(v.contradictions.iter().map(|c| {
            let tag = if c.invalidates() {
                " (invalidates)"
            } else {
                ""
            };
            format!("{c}{tag}")
        }));
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            md_cell(&s.name),
            v.label(),
            md_cell(&notes.join("; "))
        );
    }
    out.push('\n');
}

fn cleanup(out: &mut String, r: &RunReport) {
    if r.cleanup.is_empty() {
        return;
    }
    out.push_str("## Cleanup\n\n");
    let kept = r
        .cleanup
        .iter()
        .filter(|c| c.outcome == CleanupOutcome::Kept)
        .count();
    let leaks: Vec<_> = r.leaks().collect();
    let refused: Vec<_> = r
        .cleanup
        .iter()
        .filter_map(|c| match &c.outcome {
            CleanupOutcome::Refused(why) => Some((c, why)),
            _ => None,
        })
        .collect();
    if !refused.is_empty() {
        let _ = writeln!(
            out,
            "**{} object(s) left alone: not wsgate's to touch** (a tampered ledger or state \
             file, or someone else's object of the same name):\n",
            refused.len()
        );
        object_table(out, refused.iter().map(|(c, why)| (*c, why.as_ref())));
    }
    if leaks.is_empty() {
        let _ = writeln!(
            out,
            "No leaks: {} of {} objects removed, {kept} kept on request.\n",
            r.cleanup.len() - kept - refused.len(),
            r.cleanup.len()
        );
        return;
    }
    let _ = writeln!(
        out,
        "**{} of {} objects left behind** ({kept} kept on request):\n",
        leaks.len(),
        r.cleanup.len()
    );
    object_table(
        out,
        leaks.into_iter().map(|c| match &c.outcome {
            CleanupOutcome::Leaked(why) => (c, why.as_str()),
            _ => (c, ""),
        }),
    );
}

/// A table of cleanup objects with why each is listed.
fn object_table<'a>(
    out: &mut String,
    rows: impl Iterator<Item = (&'a super::model::CleanupEntry, &'a str)>,
) {
    out.push_str("| Scenario | Object | Why |\n|---|---|---|\n");
    for (c, why) in rows {
        let _ = writeln!(
            out,
            "| {} | `{}` | {} |",
            md_cell(&c.scenario),
            md_cell(&c.object),
            md_cell(why)
        );
    }
    out.push('\n');
}

fn gpu(out: &mut String, r: &RunReport) {
    if r.gpu_allocation.is_empty() {
        return;
    }
    // node -> (accelerator, allocatable, peak used, samples)
    let mut nodes: BTreeMap<&str, (&str, i64, i64, usize)> = BTreeMap::new();
    for g in &r.gpu_allocation {
        let e = nodes.entry(&g.node).or_insert((&g.accelerator, 0, 0, 0));
        e.1 = e.1.max(g.allocatable);
        e.2 = e.2.max(g.used);
        e.3 += 1;
    }
    out.push_str("## GPU allocation\n\n| Node | Accelerator | Allocatable | Peak used | Samples |\n|---|---|--:|--:|--:|\n");
    for (node, (acc, alloc, peak, n)) in nodes {
        let _ = writeln!(
            out,
            "| `{}` | {} | {alloc} | {peak} | {n} |",
            md_cell(node),
            md_cell(acc)
        );
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A false restore is said at the top of the summary and in the verdict column.
    #[test]
    fn a_false_restore_is_said_at_the_top_and_in_its_row() {
        use crate::report::test_support::{kernel_dies_scenario, run_of};
        let text = markdown(&run_of(kernel_dies_scenario(true)));
        assert!(
            text.contains("**1 false restore(s): the platform claimed a restore"),
            "{text}"
        );
        assert!(text.contains("| FreshSession (false restore) |"), "{text}");
        // Without the platform's claim: neither.
        let text = markdown(&run_of(kernel_dies_scenario(false)));
        assert!(!text.contains("false restore"), "{text}");
    }

    /// A simulator started on its own and named as a cluster is said to be a simulator,
    /// from the `gitVersion` the run recorded; a real cluster's version changes nothing.
    #[test]
    fn a_simulator_named_as_a_cluster_is_said_to_be_one() {
        use crate::report::test_support::{kernel_dies_scenario, run_of};
        let mut run = run_of(kernel_dies_scenario(false));
        run.target.kind = TargetKind::Cluster;
        run.target.server_version = "v1.32.4-gke.1200".into();
        assert!(!run.target.is_simulator());
        assert!(markdown(&run).contains("target: the cluster at"));
        run.target.server_version = "v1.32.4+wsgate-sim".into();
        assert!(run.target.is_simulator());
        let text = markdown(&run);
        assert!(
            text.contains("wsgate's simulator at") && text.contains("not a real one"),
            "{text}"
        );
    }
}

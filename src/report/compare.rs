//! Two runs side by side: which scenarios started failing, whose verdict changed, and which
//! phases got slower (or faster) by more than a threshold. Scenarios are matched by feature
//! and name (the n-th of equal names with the n-th, for drills and outlines).

use std::fmt::Write;
use std::time::Duration;

use serde::Serialize;

use super::fmt::{duration, phase_label, signed_duration};
use super::model::{RunReport, ScenarioReport, ScenarioStatus, TargetKind};

/// When a phase change counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Threshold {
    /// Relative change, in percent of the baseline.
    pub percent: f64,
    /// Absolute change; smaller changes are noise whatever their percentage.
    #[serde(with = "secs")]
    pub min_delta: Duration,
}

impl Default for Threshold {
    fn default() -> Self {
        Self {
            percent: 20.0,
            min_delta: Duration::from_secs(1),
        }
    }
}

/// One phase of one scenario in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseDelta {
    pub phase: String,
    #[serde(with = "secs")]
    pub before: Duration,
    #[serde(with = "secs")]
    pub after: Duration,
    /// Percent change against `before` (infinite when `before` is zero).
    pub percent: f64,
}

/// One scenario in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioDelta {
    pub feature: String,
    pub name: String,
    pub status_before: ScenarioStatus,
    pub status_after: ScenarioStatus,
    pub verdict_before: Option<String>,
    pub verdict_after: Option<String>,
    /// The second run's verdict is a false restore (`Verdict::false_restore`): a regression
    /// whatever the first run said.
    pub false_restore_after: bool,
    /// The failure message in the second run, when it started failing.
    pub failure_after: Option<String>,
    /// Phases beyond the threshold, slower.
    pub slower: Vec<PhaseDelta>,
    /// Phases beyond the threshold, faster.
    pub faster: Vec<PhaseDelta>,
    /// Phases measured before but not after.
    pub no_longer_measured: Vec<String>,
}

impl ScenarioDelta {
    /// Passed before, failed now.
    pub fn started_failing(&self) -> bool {
        self.status_before == ScenarioStatus::Passed && self.status_after == ScenarioStatus::Failed
    }

    /// Failed before, passes now.
    pub fn fixed(&self) -> bool {
        self.status_before == ScenarioStatus::Failed && self.status_after == ScenarioStatus::Passed
    }

    /// The verdict changed between the runs.
    pub fn verdict_changed(&self) -> bool {
        self.verdict_before.is_some() && self.verdict_before != self.verdict_after
    }

    fn label(&self) -> String {
        format!("{} › {}", self.feature, self.name)
    }
}

/// The comparison of run `before` (A) with run `after` (B).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub before_run: String,
    pub after_run: String,
    pub threshold: Threshold,
    pub scenarios: Vec<ScenarioDelta>,
    /// In A only (`feature › name`).
    pub removed: Vec<String>,
    /// In B only.
    pub added: Vec<String>,
    /// Where each run ran (`sim` or `cluster`).
    pub before_target: TargetKind,
    pub after_target: TargetKind,
    /// Every phase both runs measured in scenarios that passed in both, as B over A: how close a simulator run on a
    /// calibrated profile comes to the cluster's run it was calibrated from.
    pub ratios: Vec<PhaseRatio>,
}

/// One phase across the matched scenarios that measured it in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseRatio {
    pub phase: String,
    /// How many matched scenarios measured it in both runs.
    pub scenarios: usize,
    /// The median in A and in B.
    #[serde(with = "secs")]
    pub before: Duration,
    #[serde(with = "secs")]
    pub after: Duration,
    /// B's median over A's; `None` when A's is zero.
    pub ratio: Option<f64>,
}

/// The medians of every phase the matched scenario pairs both measured, in report order.
fn ratios(pairs: &[(&ScenarioReport, &ScenarioReport)]) -> Vec<PhaseRatio> {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        super::fmt::quantile(&v, 0.5)
    };
    crate::timeline::PHASES
        .iter()
        .filter_map(|def| {
            let both: Vec<(f64, f64)> = pairs
                .iter()
                .filter_map(|(a, b)| {
                    Some((
                        a.phase(def.name)?.as_secs_f64(),
                        b.phase(def.name)?.as_secs_f64(),
                    ))
                })
                .collect();
            if both.is_empty() {
                return None;
            }
            let before = median(both.iter().map(|p| p.0).collect());
            let after = median(both.iter().map(|p| p.1).collect());
            Some(PhaseRatio {
                phase: def.name.to_string(),
                scenarios: both.len(),
                before: Duration::from_secs_f64(before),
                after: Duration::from_secs_f64(after),
                ratio: (before > 0.0).then(|| after / before),
            })
        })
        .collect()
}

impl Comparison {
    /// Scenarios that started failing, changed verdict, are a false restore in B, or have a
    /// slower phase. A slower phase counts only between runs on the same kind of target: a
    /// simulator run against a cluster run is a calibration check, not a regression.
    pub fn regressions(&self) -> usize {
        let same_kind = self.before_target == self.after_target;
        self.scenarios
            .iter()
            .filter(|s| {
                s.started_failing()
                    || s.verdict_changed()
                    || s.false_restore_after
                    || (same_kind && !s.slower.is_empty())
            })
            .count()
    }

    /// Scenarios whose verdict in B is a false restore: the comparison's exit code is then
    /// `FALSE_RESTORE`, as the run's and the gate's are.
    pub fn false_restores(&self) -> usize {
        self.scenarios
            .iter()
            .filter(|s| s.false_restore_after)
            .count()
    }

    /// The exit code of `report --compare`: a false restore in B outranks any other
    /// regression (the same order as `run`'s), a regression is a failure.
    pub fn exit_code(&self) -> i32 {
        if self.false_restores() > 0 {
            crate::exit_code::FALSE_RESTORE
        } else if self.regressions() > 0 {
            crate::exit_code::FAILED
        } else {
            crate::exit_code::SUCCESS
        }
    }
}

/// Compares `before` (A) with `after` (B).
pub fn compare(before: &RunReport, after: &RunReport, threshold: Threshold) -> Comparison {
    let key = |s: &ScenarioReport| (s.feature.clone(), s.name.clone());
    let mut used = vec![false; after.scenarios.len()];
    let mut scenarios = Vec::new();
    let mut pairs = Vec::new();
    let mut removed = Vec::new();
    for a in &before.scenarios {
        let found = after
            .scenarios
            .iter()
            .enumerate()
            .find(|(i, b)| !used[*i] && key(b) == key(a));
        match found {
            Some((i, b)) => {
                used[i] = true;
                scenarios.push(delta(a, b, threshold));
                if a.status == ScenarioStatus::Passed && b.status == ScenarioStatus::Passed {
                    pairs.push((a, b));
                }
            }
            None => removed.push(format!("{} › {}", a.feature, a.name)),
        }
    }
    let added = after
        .scenarios
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(b, _)| format!("{} › {}", b.feature, b.name))
        .collect();
    Comparison {
        before_run: before.run_id.clone(),
        after_run: after.run_id.clone(),
        threshold,
        scenarios,
        removed,
        added,
        // A simulator started on its own and named as a cluster is a simulator here.
        before_target: kind_of(&before.target),
        after_target: kind_of(&after.target),
        ratios: ratios(&pairs),
    }
}

/// The kind of target a run really had: a simulator's `gitVersion` says so even where the
/// run named it a cluster.
fn kind_of(t: &super::TargetInfo) -> super::TargetKind {
    match t.is_simulator() {
        true => super::TargetKind::Sim,
        false => t.kind,
    }
}

fn delta(a: &ScenarioReport, b: &ScenarioReport, t: Threshold) -> ScenarioDelta {
    let mut slower = Vec::new();
    let mut faster = Vec::new();
    let mut no_longer_measured = Vec::new();
    for p in &a.phases {
        let Some(after) = b.phase(&p.name) else {
            no_longer_measured.push(p.name.clone());
            continue;
        };
        let before = p.duration;
        let change = after.abs_diff(before);
        let percent = if before.is_zero() {
            f64::INFINITY
        } else {
            (after.as_secs_f64() - before.as_secs_f64()) / before.as_secs_f64() * 100.0
        };
        if change < t.min_delta || percent.abs() <= t.percent {
            continue;
        }
        let d = PhaseDelta {
            phase: p.name.clone(),
            before,
            after,
            percent,
        };
        if after > before {
            slower.push(d);
        } else {
            faster.push(d);
        }
    }
    let failure_after = (b.status == ScenarioStatus::Failed)
        .then(|| super::failure_summary(b).map(|f| f.message))
        .flatten();
    ScenarioDelta {
        feature: a.feature.clone(),
        name: a.name.clone(),
        status_before: a.status,
        status_after: b.status,
        verdict_before: a.verdict_label(),
        verdict_after: b.verdict_label(),
        false_restore_after: b.verdict.as_ref().is_some_and(|v| v.false_restore()),
        failure_after,
        slower,
        faster,
        no_longer_measured,
    }
}

/// The comparison for a terminal.
pub fn render(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "A = {}, B = {}; a phase counts when it changed by more than {}% and at least {}\n",
        c.before_run,
        c.after_run,
        c.threshold.percent,
        duration(c.threshold.min_delta)
    );
    let false_restores: Vec<_> = c
        .scenarios
        .iter()
        .filter(|s| s.false_restore_after)
        .collect();
    if !false_restores.is_empty() {
        let _ = writeln!(
            out,
            "FALSE RESTORE in B ({}): the platform claimed a restore and the process state was lost:",
            false_restores.len()
        );
        for s in false_restores {
            let _ = writeln!(out, "  ✘ {}", s.label());
        }
        out.push('\n');
    }
    let failing: Vec<_> = c.scenarios.iter().filter(|s| s.started_failing()).collect();
    if !failing.is_empty() {
        let _ = writeln!(out, "Started failing ({}):", failing.len());
        for s in failing {
            let _ = writeln!(out, "  ✘ {}", s.label());
            if let Some(f) = &s.failure_after {
                let _ = writeln!(out, "      {f}");
            }
        }
        out.push('\n');
    }
    let verdicts: Vec<_> = c.scenarios.iter().filter(|s| s.verdict_changed()).collect();
    if !verdicts.is_empty() {
        let _ = writeln!(out, "Verdict changed ({}):", verdicts.len());
        for s in verdicts {
            let _ = writeln!(
                out,
                "  {}: {} → {}",
                s.label(),
                s.verdict_before.as_deref().unwrap_or("none"),
                s.verdict_after.as_deref().unwrap_or("none")
            );
        }
        out.push('\n');
    }
    phase_section(&mut out, "Slower", c, |s| &s.slower);
    phase_section(&mut out, "Faster", c, |s| &s.faster);
    let fixed: Vec<_> = c.scenarios.iter().filter(|s| s.fixed()).collect();
    if !fixed.is_empty() {
        let _ = writeln!(out, "Fixed ({}):", fixed.len());
        for s in fixed {
            let _ = writeln!(out, "  ✔ {}", s.label());
        }
        out.push('\n');
    }
    for (title, list) in [("Only in A", &c.removed), ("Only in B", &c.added)] {
        if !list.is_empty() {
            let _ = writeln!(out, "{title} ({}):", list.len());
            for l in list {
                let _ = writeln!(out, "  {l}");
            }
            out.push('\n');
        }
    }
    ratio_section(&mut out, c);
    let n = c.regressions();
    if n == 0 {
        let _ = writeln!(
            out,
            "No regressions in {} matched scenarios.",
            c.scenarios.len()
        );
    } else {
        let _ = writeln!(
            out,
            "{n} of {} matched scenarios regressed.",
            c.scenarios.len()
        );
    }
    out
}

/// Every phase both runs measured, B over A (the table a calibration is judged by).
fn ratio_section(out: &mut String, c: &Comparison) {
    if c.ratios.is_empty() {
        return;
    }
    let (a, b) = (c.before_target.as_str(), c.after_target.as_str());
    let _ = writeln!(
        out,
        "Phase by phase, B ({b}) over A ({a}), medians of the scenarios that passed in both:"
    );
    if a != b {
        let _ = writeln!(
            out,
            "  (a {b} run against a {a} run: slower phases are listed, not counted as regressions)"
        );
    }
    let _ = writeln!(
        out,
        "  {:<28} {:>9} {:>10} {:>10} {:>7}",
        "phase", "scenarios", "A", "B", "B / A"
    );
    for r in &c.ratios {
        let ratio = r
            .ratio
            .map(|x| format!("{x:.2}"))
            .unwrap_or_else(|| "-".to_string());
        let _ = writeln!(
            out,
            "  {:<28} {:>9} {:>10} {:>10} {:>7}",
            phase_label(&r.phase),
            r.scenarios,
            duration(r.before),
            duration(r.after),
            ratio
        );
    }
    out.push('\n');
}

fn phase_section(
    out: &mut String,
    title: &str,
    c: &Comparison,
    pick: impl Fn(&ScenarioDelta) -> &Vec<PhaseDelta>,
) {
    let rows: Vec<_> = c
        .scenarios
        .iter()
        .flat_map(|s| pick(s).iter().map(move |d| (s, d)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "{title} ({}):", rows.len());
    for (s, d) in rows {
        let pct = if d.percent.is_finite() {
            format!("{:+.0}%", d.percent)
        } else {
            "new".to_string()
        };
        let _ = writeln!(
            out,
            "  {}: {} {} → {} ({}, {pct})",
            s.label(),
            phase_label(&d.phase),
            duration(d.before),
            duration(d.after),
            signed_duration(d.before, d.after)
        );
    }
    out.push('\n');
}

/// Durations as seconds in the JSON output.
mod secs {
    use serde::Serializer;
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::PhaseDuration;

    fn scenario(name: &str, status: ScenarioStatus, phases: &[(&str, u64)]) -> ScenarioReport {
        let mut s = ScenarioReport::new("Pause", name);
        s.status = status;
        s.phases = phases
            .iter()
            .map(|(n, ms)| PhaseDuration {
                name: n.to_string(),
                duration: Duration::from_millis(*ms),
            })
            .collect();
        s
    }

    fn run(id: &str, scenarios: Vec<ScenarioReport>) -> RunReport {
        RunReport {
            run_id: id.into(),
            scenarios,
            ..RunReport::default()
        }
    }

    #[test]
    fn slower_needs_both_the_percentage_and_the_absolute_delta() {
        let a = run(
            "A",
            vec![scenario(
                "s",
                ScenarioStatus::Passed,
                &[
                    ("resume_to_running", 12_000),
                    ("resume_to_scheduled", 200),
                    ("pause_to_gpu_free", 120_000),
                    ("resume_to_next_cell", 15_000),
                ],
            )],
        );
        let b = run(
            "B",
            vec![scenario(
                "s",
                ScenarioStatus::Passed,
                &[
                    ("resume_to_running", 18_500),  // +54%, +6.5 s: slower
                    ("resume_to_scheduled", 900),   // +350% but +0.7 s: noise
                    ("pause_to_gpu_free", 130_000), // +8%: under the threshold
                    ("resume_to_next_cell", 9_000), // -40%: faster
                ],
            )],
        );
        let c = compare(&a, &b, Threshold::default());
        let s = &c.scenarios[0];
        assert_eq!(s.slower.len(), 1, "{s:?}");
        assert_eq!(s.slower[0].phase, "resume_to_running");
        assert!((s.slower[0].percent - 54.17).abs() < 0.01);
        assert_eq!(s.faster.len(), 1);
        assert_eq!(c.regressions(), 1);
        let text = render(&c);
        assert!(
            text.contains("resume → Running 12.0 s → 18.5 s (+6.5 s, +54%)"),
            "{text}"
        );
        assert!(
            text.contains("1 of 1 matched scenarios regressed"),
            "{text}"
        );
    }

    #[test]
    fn started_failing_removed_added_and_repeated_names() {
        let a = run(
            "A",
            vec![
                scenario("d", ScenarioStatus::Passed, &[("resume_to_running", 1000)]),
                scenario("d", ScenarioStatus::Passed, &[("resume_to_running", 1000)]),
                scenario("gone", ScenarioStatus::Passed, &[]),
            ],
        );
        let mut failing = scenario("d", ScenarioStatus::Failed, &[]);
        failing.failure = Some("budget resume_to_running ran out".into());
        let b = run(
            "B",
            vec![
                scenario("d", ScenarioStatus::Passed, &[("resume_to_running", 1000)]),
                failing,
                scenario("new", ScenarioStatus::Passed, &[]),
            ],
        );
        let c = compare(&a, &b, Threshold::default());
        assert_eq!(c.scenarios.len(), 2);
        assert!(!c.scenarios[0].started_failing());
        assert!(c.scenarios[1].started_failing());
        assert_eq!(c.scenarios[1].no_longer_measured, ["resume_to_running"]);
        assert_eq!(c.removed, ["Pause › gone"]);
        assert_eq!(c.added, ["Pause › new"]);
        assert_eq!(c.regressions(), 1);
        let text = render(&c);
        assert!(
            text.contains(
                "Started failing (1):\n  ✘ Pause › d\n      budget resume_to_running ran out"
            ),
            "{text}"
        );
        let same = compare(&a, &a, Threshold::default());
        assert_eq!(same.regressions(), 0);
        assert!(render(&same).contains("No regressions in 3 matched scenarios."));
    }

    fn with_verdict(mut s: ScenarioReport, false_restore: bool) -> ScenarioReport {
        s.verdict = Some(crate::report::test_support::fresh_session(false_restore));
        s
    }

    /// A false restore in B is a regression, even when A had the same verdict kind and the
    /// scenario failed in both (so neither "started failing" nor a kind change shows it).
    #[test]
    fn a_false_restore_in_b_is_a_regression_of_its_own() {
        let failed = |fr| with_verdict(scenario("k", ScenarioStatus::Failed, &[]), fr);
        let a = run("A", vec![failed(true)]);
        let b = run("B", vec![failed(true)]);
        let c = compare(&a, &b, Threshold::default());
        assert!(c.scenarios[0].false_restore_after);
        assert!(!c.scenarios[0].verdict_changed());
        assert_eq!(c.regressions(), 1);
        assert_eq!(c.exit_code(), crate::exit_code::FALSE_RESTORE);
        let text = render(&c);
        assert!(
            text.contains("FALSE RESTORE in B (1): the platform claimed a restore and the process state was lost:\n  ✘ Pause › k"),
            "{text}"
        );
        // From a plain fresh session in A to a false restore in B: the verdict changed too.
        let a = run("A", vec![failed(false)]);
        let c = compare(&a, &b, Threshold::default());
        assert!(c.scenarios[0].verdict_changed());
        assert_eq!(
            c.scenarios[0].verdict_after.as_deref(),
            Some("FreshSession (false restore)")
        );
        assert_eq!(c.regressions(), 1);
        // And back: none in B, no false-restore line.
        let c = compare(&b, &a, Threshold::default());
        assert!(!c.scenarios[0].false_restore_after);
        assert!(!render(&c).contains("FALSE RESTORE"));
        // A changed verdict without a false restore in B is a plain regression (exit 1).
        assert_eq!(c.exit_code(), crate::exit_code::FAILED);
        assert_eq!(
            compare(&a, &a, Threshold::default()).exit_code(),
            crate::exit_code::SUCCESS
        );
    }

    /// A cluster run against a simulator run: every phase both measured, as the median of
    /// B over the median of A, and the table names which run ran where.
    #[test]
    fn ratios_are_medians_of_b_over_a_phase_by_phase() {
        let real = |ms: [u64; 2]| {
            vec![
                scenario(
                    "one",
                    ScenarioStatus::Passed,
                    &[("create_to_running", ms[0]), ("resume_to_running", 1000)],
                ),
                scenario(
                    "two",
                    ScenarioStatus::Passed,
                    &[("create_to_running", ms[1])],
                ),
                scenario(
                    "three",
                    ScenarioStatus::Passed,
                    &[("create_to_running", 4000)],
                ),
            ]
        };
        let mut a = run("real", real([1000, 3000]));
        a.target.kind = TargetKind::Cluster;
        let mut b = run("sim", real([1100, 3300]));
        b.scenarios[0].phases.push(PhaseDuration {
            name: "ready_to_pod_restored".into(),
            duration: Duration::from_millis(5),
        });
        let c = compare(&a, &b, Threshold::default());
        assert_eq!(c.ratios.len(), 2, "{:?}", c.ratios);
        let create = &c.ratios[0];
        assert_eq!(create.phase, "create_to_running");
        assert_eq!(create.scenarios, 3);
        assert_eq!(create.before, Duration::from_millis(3000));
        assert_eq!(create.after, Duration::from_millis(3300));
        assert!((create.ratio.unwrap() - 1.1).abs() < 1e-9);
        assert_eq!(c.ratios[1].scenarios, 1, "measured in one pair only");
        let text = render(&c);
        assert!(text.contains("B (sim) over A (cluster)"), "{text}");
        assert!(text.contains("1.10"), "{text}");
        // A cluster run against a simulator run: B's slower phases are not regressions.
        let mut slow = b.clone();
        slow.scenarios[0].phases[0].duration = Duration::from_secs(60);
        let calibration = compare(&a, &slow, Threshold::default());
        assert!(!calibration.scenarios[0].slower.is_empty());
        assert_eq!(calibration.exit_code(), crate::exit_code::SUCCESS);
        slow.target.kind = TargetKind::Cluster;
        assert_eq!(
            compare(&a, &slow, Threshold::default()).exit_code(),
            crate::exit_code::FAILED,
            "between two cluster runs it is one"
        );
        // A simulator started on its own, named as a cluster: its gitVersion says what it is.
        slow.target.server_version = "v1.32.4+wsgate-sim".into();
        assert_eq!(
            compare(&a, &slow, Threshold::default()).exit_code(),
            crate::exit_code::SUCCESS,
            "a standalone simulator's slower phases are not a cluster's regressions"
        );
        // Only scenarios that passed in both count in the ratios.
        let mut failed = b.clone();
        failed.scenarios[1].status = ScenarioStatus::Failed;
        assert_eq!(
            compare(&a, &failed, Threshold::default()).ratios[0].scenarios,
            2
        );
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(
            json["ratios"][0]["ratio"]
                .as_f64()
                .map(|r| (r * 100.0).round()),
            Some(110.0)
        );
    }
}

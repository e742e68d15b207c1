//! Pure: what pause/resume is worth in GPU-hours, from measured runs.
//!
//! A *cycle* is a scenario of a JSON report with a pause phase and `resume_to_running`: its
//! GPU-seconds still held during the checkpoint (pause request -> GPU released), its restore
//! time (resume -> Running) and, where known, its snapshot size. From the mean overheads:
//! - [`week`]: a 168-hour week with A active hours and N pauses. Without pause a GPU is
//!   allocated all 168 hours; pause can give back at most the 168 - A idle hours, less
//!   N x (pause overhead + resume overhead). On shared nodes that is an upper bound: a
//!   released GPU saves money only when another pod takes it or the node pool scales down.
//! - [`break_even`]: for measured idle periods and candidate idle thresholds (pause after T
//!   idle), the GPU-hours each threshold reclaims: an idle period of length I reclaims
//!   I - T - (pause + resume overhead), so one shorter than T + overhead reclaims nothing
//!   and the pause costs more than it gives back.

use std::time::Duration;

use serde::Serialize;

use crate::report::{RunReport, ScenarioStatus};

/// Hours in a week.
pub const HOURS_PER_WEEK: f64 = 168.0;

/// Idle thresholds tried by default: 0 (pause at once), 5, 10, 15, 30 minutes, 1, 2, 4 hours.
pub const DEFAULT_THRESHOLDS: [Duration; 8] = [
    Duration::from_secs(0),
    Duration::from_secs(5 * 60),
    Duration::from_secs(10 * 60),
    Duration::from_secs(15 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(3600),
    Duration::from_secs(2 * 3600),
    Duration::from_secs(4 * 3600),
];

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Every way a cost calculation can be asked for wrongly.
#[derive(Debug, thiserror::Error)]
pub enum CostError {
    /// No scenario of the reports paused and resumed.
    #[error(
        "no pause/resume cycle in {reports} report(s): a cycle is a passed scenario with \
         pause_to_gpu_free (or pause_to_paused) and resume_to_running"
    )]
    NoCycles { reports: usize },
    /// Active hours outside the week.
    #[error("active hours must be between 0 and {HOURS_PER_WEEK}, not {active_hours}")]
    ActiveHours { active_hours: f64 },
}

/// One measured pause/resume cycle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cycle {
    pub run_id: String,
    pub feature: String,
    pub scenario: String,
    /// GPU-seconds still held after the pause request (pause -> GPU released), per GPU.
    pub checkpoint_gpu_seconds: f64,
    /// Whether the GPU release was observed; if not, pause -> Paused stands in for it.
    pub gpu_release_observed: bool,
    /// Resume -> Running, seconds.
    pub restore_seconds: f64,
    /// Resume -> next cell done, seconds, where measured.
    pub resume_to_next_cell_seconds: Option<f64>,
    pub snapshot_bytes: Option<u64>,
}

/// The cycles in `reports`: passed scenarios with a pause phase and resume -> Running.
pub fn cycles(reports: &[RunReport]) -> Vec<Cycle> {
    let mut out = Vec::new();
    for r in reports {
        for s in r
            .scenarios
            .iter()
            .filter(|s| s.status == ScenarioStatus::Passed)
        {
            let gpu = s.phase("pause_to_gpu_free");
            let Some(pause) = gpu.or_else(|| s.phase("pause_to_paused")) else {
                continue;
            };
            let Some(restore) = s.phase("resume_to_running") else {
                continue;
            };
            out.push(Cycle {
                run_id: r.run_id.clone(),
                feature: s.feature.clone(),
                scenario: s.name.clone(),
                checkpoint_gpu_seconds: pause.as_secs_f64(),
                gpu_release_observed: gpu.is_some(),
                restore_seconds: restore.as_secs_f64(),
                resume_to_next_cell_seconds: s
                    .phase("resume_to_next_cell")
                    .map(|d| d.as_secs_f64()),
                snapshot_bytes: s.snapshot_bytes,
            });
        }
    }
    out
}

/// The mean overheads of the measured cycles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Overheads {
    pub cycles: usize,
    /// Mean pause request -> GPU released, seconds.
    pub pause_s: f64,
    /// Mean resume -> Running, seconds.
    pub resume_s: f64,
    pub max_pause_s: f64,
    pub max_resume_s: f64,
    /// Mean snapshot size over the cycles that know it.
    pub snapshot_bytes: Option<f64>,
}

impl Overheads {
    /// Pause plus resume overhead of one cycle, seconds.
    pub fn per_cycle_s(&self) -> f64 {
        self.pause_s + self.resume_s
    }

    /// Overheads given directly (for what-if figures and tests).
    pub fn fixed(pause: Duration, resume: Duration, snapshot_bytes: Option<u64>) -> Self {
        Self {
            cycles: 0,
            pause_s: pause.as_secs_f64(),
            resume_s: resume.as_secs_f64(),
            max_pause_s: pause.as_secs_f64(),
            max_resume_s: resume.as_secs_f64(),
            snapshot_bytes: snapshot_bytes.map(|b| b as f64),
        }
    }
}

/// The mean overheads of `cycles`; `reports` only names how many reports were read.
pub fn overheads(cycles: &[Cycle], reports: usize) -> Result<Overheads, CostError> {
    if cycles.is_empty() {
        return Err(CostError::NoCycles { reports });
    }
    let n = cycles.len() as f64;
    let sizes: Vec<f64> = cycles
        .iter()
        .filter_map(|c| c.snapshot_bytes)
        .map(|b| b as f64)
        .collect();
    Ok(Overheads {
        cycles: cycles.len(),
        pause_s: cycles.iter().map(|c| c.checkpoint_gpu_seconds).sum::<f64>() / n,
        resume_s: cycles.iter().map(|c| c.restore_seconds).sum::<f64>() / n,
        max_pause_s: cycles
            .iter()
            .map(|c| c.checkpoint_gpu_seconds)
            .fold(0.0, f64::max),
        max_resume_s: cycles.iter().map(|c| c.restore_seconds).fold(0.0, f64::max),
        snapshot_bytes: (!sizes.is_empty()).then(|| sizes.iter().sum::<f64>() / sizes.len() as f64),
    })
}

/// The weekly model's inputs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WeekInput {
    /// Hours a week the notebook is in use.
    pub active_hours: f64,
    /// Pauses a week (each followed by a resume).
    pub pauses_per_week: u32,
    /// Whether GPU nodes are shared (the reclaimed hours are then an upper bound).
    pub shared_nodes: bool,
}

/// One GPU's week, with and without pause.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WeekEstimate {
    pub hours_in_week: f64,
    pub active_hours: f64,
    pub pauses_per_week: u32,
    /// Without pause the GPU is allocated all week.
    pub allocated_without_pause_gpu_hours: f64,
    /// The idle hours: the most pause can give back (168 - A).
    pub idle_gpu_hours: f64,
    /// N x (pause + resume overhead).
    pub overhead_gpu_hours: f64,
    /// Idle hours less the overhead (never below zero; zero without pauses).
    pub reclaimed_gpu_hours: f64,
    /// 168 - reclaimed.
    pub allocated_with_pause_gpu_hours: f64,
    /// Whether `reclaimed_gpu_hours` is an upper bound (shared nodes).
    pub reclaimed_is_upper_bound: bool,
    /// Snapshot storage while paused, GiB-days a week; `None` when no size is known.
    pub snapshot_gib_days: Option<f64>,
    /// What the figures assume, in words.
    pub notes: Vec<String>,
}

/// The week of one GPU with `input`'s activity and `o`'s overheads.
pub fn week(input: &WeekInput, o: &Overheads) -> Result<WeekEstimate, CostError> {
    let a = input.active_hours;
    if !(0.0..=HOURS_PER_WEEK).contains(&a) || !a.is_finite() {
        return Err(CostError::ActiveHours { active_hours: a });
    }
    let idle = HOURS_PER_WEEK - a;
    let n = f64::from(input.pauses_per_week);
    let overhead = n * o.per_cycle_s() / 3600.0;
    let reclaimed = if input.pauses_per_week == 0 {
        0.0
    } else {
        (idle - overhead).max(0.0)
    };
    let paused_hours = if input.pauses_per_week == 0 {
        0.0
    } else {
        idle
    };
    let mut notes = Vec::new();
    if input.pauses_per_week == 0 {
        notes.push("no pauses: the GPU stays allocated all week".to_string());
    } else if overhead >= idle {
        notes.push(format!(
            "{} pauses cost {overhead:.1} GPU-hours of overhead, more than the {idle:.1} idle \
             hours: pausing this often reclaims nothing",
            input.pauses_per_week
        ));
    }
    if input.shared_nodes {
        notes.push(
            "upper bound: on shared nodes a released GPU saves money only when another pod \
             takes it or the node pool scales down"
                .to_string(),
        );
    }
    let snapshot_gib_days = o.snapshot_bytes.map(|b| b / GIB * paused_hours / 24.0);
    if snapshot_gib_days.is_some() {
        notes.push(
            "snapshot storage assumes each snapshot is kept while paused and deleted after \
             its restore; retained snapshots add to it"
                .to_string(),
        );
    }
    Ok(WeekEstimate {
        hours_in_week: HOURS_PER_WEEK,
        active_hours: a,
        pauses_per_week: input.pauses_per_week,
        allocated_without_pause_gpu_hours: HOURS_PER_WEEK,
        idle_gpu_hours: idle,
        overhead_gpu_hours: overhead,
        reclaimed_gpu_hours: reclaimed,
        allocated_with_pause_gpu_hours: HOURS_PER_WEEK - reclaimed,
        reclaimed_is_upper_bound: input.shared_nodes,
        snapshot_gib_days,
        notes,
    })
}

/// What one idle threshold does to the measured idle periods.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThresholdOutcome {
    /// Pause after this many idle seconds.
    pub threshold_s: f64,
    /// Idle periods longer than the threshold: each one pauses.
    pub pauses: usize,
    /// Pauses that gave back more than their overhead.
    pub paid_off: usize,
    /// GPU-hours given back by the pauses that paid off.
    pub reclaimed_gpu_hours: f64,
    /// GPU-hours lost to pauses that cost more than they gave back.
    pub wasted_gpu_hours: f64,
    /// reclaimed - wasted.
    pub net_gpu_hours: f64,
    /// Seconds users wait for restores (pauses x resume overhead).
    pub user_wait_s: f64,
}

/// The idle-threshold break-even over measured idle periods.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakEven {
    /// Pause + resume overhead of one cycle, seconds: an idle period must last longer than
    /// threshold + this to pay off.
    pub overhead_s: f64,
    pub idle_periods: usize,
    pub idle_total_hours: f64,
    pub thresholds: Vec<ThresholdOutcome>,
    /// The threshold with the largest positive net (the longer one on a tie: fewer
    /// interruptions); `None` when no threshold pays off.
    pub best_threshold_s: Option<f64>,
}

/// What each of `thresholds` reclaims from the measured `idle` periods.
pub fn break_even(idle: &[Duration], o: &Overheads, thresholds: &[Duration]) -> BreakEven {
    let overhead = o.per_cycle_s();
    let outcomes: Vec<ThresholdOutcome> = thresholds
        .iter()
        .map(|t| {
            let t = t.as_secs_f64();
            let (mut pauses, mut paid_off) = (0, 0);
            let (mut reclaimed, mut wasted) = (0.0, 0.0);
            for i in idle.iter().map(Duration::as_secs_f64).filter(|i| *i > t) {
                pauses += 1;
                let net = i - t - overhead;
                if net > 0.0 {
                    paid_off += 1;
                    reclaimed += net;
                } else {
                    wasted -= net;
                }
            }
            ThresholdOutcome {
                threshold_s: t,
                pauses,
                paid_off,
                reclaimed_gpu_hours: reclaimed / 3600.0,
                wasted_gpu_hours: wasted / 3600.0,
                net_gpu_hours: (reclaimed - wasted) / 3600.0,
                user_wait_s: pauses as f64 * o.resume_s,
            }
        })
        .collect();
    let best_threshold_s = outcomes
        .iter()
        .filter(|o| o.net_gpu_hours > 0.0)
        .max_by(|a, b| {
            a.net_gpu_hours
                .total_cmp(&b.net_gpu_hours)
                .then(a.threshold_s.total_cmp(&b.threshold_s))
        })
        .map(|o| o.threshold_s);
    BreakEven {
        overhead_s: overhead,
        idle_periods: idle.len(),
        idle_total_hours: idle.iter().map(Duration::as_secs_f64).sum::<f64>() / 3600.0,
        thresholds: outcomes,
        best_threshold_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ScenarioReport;
    use crate::timeline::PhaseDuration;

    fn overheads_of(pause_s: u64, resume_s: u64) -> Overheads {
        Overheads::fixed(
            Duration::from_secs(pause_s),
            Duration::from_secs(resume_s),
            None,
        )
    }

    fn input(active_hours: f64, pauses_per_week: u32) -> WeekInput {
        WeekInput {
            active_hours,
            pauses_per_week,
            shared_nodes: true,
        }
    }

    #[test]
    fn a_40_hour_week_without_overhead_reclaims_128_gpu_hours_at_most() {
        let w = week(&input(40.0, 5), &overheads_of(0, 0)).unwrap();
        assert_eq!(w.allocated_without_pause_gpu_hours, 168.0);
        assert_eq!(w.idle_gpu_hours, 128.0);
        assert_eq!(w.reclaimed_gpu_hours, 128.0);
        assert_eq!(w.allocated_with_pause_gpu_hours, 40.0);
        assert!(w.reclaimed_is_upper_bound);
        assert!(w.notes.iter().any(|n| n.starts_with("upper bound")));
    }

    #[test]
    fn each_pause_costs_its_checkpoint_and_restore() {
        // Qwen2.5-3B on a T4: checkpoint ~121 s until the GPU is free, restore ~12 s.
        let o = overheads_of(121, 12);
        let w = week(&input(40.0, 10), &o).unwrap();
        let overhead = 10.0 * 133.0 / 3600.0;
        assert!((w.overhead_gpu_hours - overhead).abs() < 1e-9);
        assert!((w.reclaimed_gpu_hours - (128.0 - overhead)).abs() < 1e-9);
        assert!((w.allocated_with_pause_gpu_hours - (40.0 + overhead)).abs() < 1e-9);
        let more = week(&input(40.0, 20), &o).unwrap();
        assert!(more.reclaimed_gpu_hours < w.reclaimed_gpu_hours);
    }

    #[test]
    fn no_pauses_reclaim_nothing_and_overhead_cannot_go_below_zero() {
        let w = week(&input(40.0, 0), &overheads_of(121, 12)).unwrap();
        assert_eq!(w.reclaimed_gpu_hours, 0.0);
        assert_eq!(w.allocated_with_pause_gpu_hours, 168.0);
        // 10 000 pauses x 133 s = 369 h of overhead > 128 idle hours.
        let w = week(&input(40.0, 10_000), &overheads_of(121, 12)).unwrap();
        assert_eq!(w.reclaimed_gpu_hours, 0.0);
        assert!(w.notes[0].contains("reclaims nothing"), "{:?}", w.notes);
        let dedicated = WeekInput {
            shared_nodes: false,
            ..input(40.0, 5)
        };
        let w = week(&dedicated, &overheads_of(0, 0)).unwrap();
        assert!(!w.reclaimed_is_upper_bound);
        assert!(week(&input(169.0, 1), &overheads_of(0, 0)).is_err());
        assert!(week(&input(-1.0, 1), &overheads_of(0, 0)).is_err());
    }

    #[test]
    fn snapshot_storage_is_size_times_paused_days() {
        let o = Overheads::fixed(Duration::ZERO, Duration::ZERO, Some(8 * 1024 * 1024 * 1024));
        let w = week(&input(48.0, 5), &o).unwrap();
        // 8 GiB for 120 paused hours = 5 days.
        assert!((w.snapshot_gib_days.unwrap() - 40.0).abs() < 1e-9);
        assert_eq!(
            week(&input(48.0, 5), &overheads_of(0, 0))
                .unwrap()
                .snapshot_gib_days,
            None
        );
    }

    #[test]
    fn an_idle_period_shorter_than_the_overhead_reclaims_nothing() {
        let o = overheads_of(100, 20); // 120 s a cycle
        let idle = [Duration::from_secs(60), Duration::from_secs(119)];
        let b = break_even(&idle, &o, &[Duration::ZERO]);
        let t0 = &b.thresholds[0];
        assert_eq!((t0.pauses, t0.paid_off), (2, 0));
        assert_eq!(t0.reclaimed_gpu_hours, 0.0);
        assert!(t0.net_gpu_hours < 0.0);
        assert_eq!(b.best_threshold_s, None, "no threshold pays off");
    }

    #[test]
    fn the_best_threshold_skips_short_breaks_and_keeps_long_ones() {
        let o = overheads_of(100, 20);
        let m = |x: u64| Duration::from_secs(x * 60);
        // Twenty 30 s pauses between cells (each loses 90 s at threshold 0), two long
        // breaks and a night.
        let mut idle = vec![Duration::from_secs(30); 20];
        idle.extend([m(60), m(75), m(14 * 60)]);
        let b = break_even(&idle, &o, &DEFAULT_THRESHOLDS);
        let at = |s: u64| {
            b.thresholds
                .iter()
                .find(|t| t.threshold_s == s as f64)
                .unwrap()
        };
        assert_eq!(at(0).pauses, 23);
        assert_eq!(at(0).paid_off, 3);
        assert_eq!(
            at(300).pauses,
            3,
            "a 5 min threshold skips the short breaks"
        );
        assert!(at(300).net_gpu_hours > at(0).net_gpu_hours);
        assert!(at(300).net_gpu_hours > at(600).net_gpu_hours);
        assert_eq!(b.best_threshold_s, Some(300.0));
        // threshold 5 min: each long period reclaims I - 300 - 120 s.
        let expected = ((3600 + 4500 + 50_400) - 3 * 420) as f64 / 3600.0;
        assert!((at(300).net_gpu_hours - expected).abs() < 1e-9);
        assert_eq!(at(300).user_wait_s, 60.0);
    }

    #[test]
    fn cycles_come_from_passed_scenarios_with_both_phases() {
        let phase = |n: &str, s: u64| PhaseDuration {
            name: n.into(),
            duration: Duration::from_secs(s),
        };
        let mut full = ScenarioReport::new("f", "full");
        full.status = ScenarioStatus::Passed;
        full.phases = vec![
            phase("pause_to_gpu_free", 120),
            phase("resume_to_running", 12),
        ];
        full.snapshot_bytes = Some(1000);
        let mut cpu = ScenarioReport::new("f", "cpu");
        cpu.status = ScenarioStatus::Passed;
        cpu.phases = vec![phase("pause_to_paused", 20), phase("resume_to_running", 6)];
        let mut failed = full.clone();
        failed.status = ScenarioStatus::Failed;
        let mut no_resume = full.clone();
        no_resume.phases.truncate(1);
        let r = RunReport {
            run_id: "r1".into(),
            scenarios: vec![full, cpu, failed, no_resume],
            ..RunReport::default()
        };
        let c = cycles(std::slice::from_ref(&r));
        assert_eq!(c.len(), 2);
        assert!(c[0].gpu_release_observed && !c[1].gpu_release_observed);
        let o = overheads(&c, 1).unwrap();
        assert_eq!((o.pause_s, o.resume_s, o.max_pause_s), (70.0, 9.0, 120.0));
        assert_eq!(o.snapshot_bytes, Some(1000.0));
        assert!(matches!(
            overheads(&[], 2),
            Err(CostError::NoCycles { reports: 2 })
        ));
    }
}

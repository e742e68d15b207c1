//! `wsgate cost`: GPU-hour accounting from JSON reports: the measured pause/resume cycles,
//! one GPU's week with and without pause, and which idle threshold pays off. The figures
//! come from `crate::cost` (pure); this file reads the reports and prints.

use std::fmt::Write;
use std::time::Duration;

use serde::Serialize;

use super::CommandError;
use crate::cli::cost::CostArgs;
use crate::cost::{self, BreakEven, Cycle, Overheads, WeekEstimate, WeekInput};
use crate::report::read_report;

/// Everything `wsgate cost` computes, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct CostReport {
    pub runs: Vec<String>,
    pub cycles: Vec<Cycle>,
    pub overheads: Overheads,
    pub week: WeekEstimate,
    pub break_even: BreakEven,
}

pub async fn run(args: CostArgs) -> Result<i32, CommandError> {
    let mut reports = Vec::new();
    for path in &args.reports {
        reports.push(read_report(path)?);
    }
    let cycles = cost::cycles(&reports);
    let overheads = cost::overheads(&cycles, reports.len())?;
    let week = cost::week(
        &WeekInput {
            active_hours: args.active_hours,
            pauses_per_week: args.pauses_per_week,
            shared_nodes: !args.dedicated_nodes,
        },
        &overheads,
    )?;
    let break_even = cost::break_even(&args.idle_periods, &overheads, &cost::DEFAULT_THRESHOLDS);
    let report = CostReport {
        runs: reports.iter().map(|r| r.run_id.clone()).collect(),
        cycles,
        overheads,
        week,
        break_even,
    };
    if args.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|source| crate::report::ReportError::Serialize { source })?;
        println!("{text}");
    } else {
        print!("{}", render(&report));
    }
    Ok(crate::exit_code::SUCCESS)
}

fn secs(s: f64) -> String {
    if s <= 0.0 {
        return "0 s".to_string();
    }
    crate::report::fmt::duration(Duration::from_secs_f64(s))
}

/// The cost report as tables: the cycles, one GPU's week, the idle-threshold break-even.
pub fn render(r: &CostReport) -> String {
    let mut out = String::new();
    cycles(&mut out, r);
    week(&mut out, r);
    break_even(&mut out, r);
    out
}

/// The measured pause/resume cycles and their mean overhead.
fn cycles(out: &mut String, r: &CostReport) {
    let _ = writeln!(
        out,
        "Pause/resume cycles: {} (from {})\n",
        r.cycles.len(),
        r.runs.join(", ")
    );
    let width = r
        .cycles
        .iter()
        .map(|c| c.scenario.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(8, 48);
    let _ = writeln!(
        out,
        "  {:<width$}  {:>16}  {:>16}  {:>18}  {:>10}",
        "scenario", "checkpoint GPU-s", "resume → Running", "resume → next cell", "snapshot"
    );
    for c in &r.cycles {
        let name: String = c.scenario.chars().take(width).collect();
        let gpu = if c.gpu_release_observed {
            format!("{:.1}", c.checkpoint_gpu_seconds)
        } else {
            format!("{:.1}*", c.checkpoint_gpu_seconds)
        };
        let _ = writeln!(
            out,
            "  {name:<width$}  {gpu:>16}  {:>16}  {:>18}  {:>10}",
            secs(c.restore_seconds),
            c.resume_to_next_cell_seconds
                .map(secs)
                .unwrap_or_else(|| "-".into()),
            c.snapshot_bytes
                .map(crate::report::fmt::bytes)
                .unwrap_or_else(|| "-".into())
        );
    }
    if r.cycles.iter().any(|c| !c.gpu_release_observed) {
        out.push_str("  * GPU release not observed: pause → Paused stands in\n");
    }
    let o = &r.overheads;
    let _ = writeln!(
        out,
        "\nMean overhead of a cycle: pause → GPU free {}, resume → Running {} ({} in all; max {} and {})\n",
        secs(o.pause_s),
        secs(o.resume_s),
        secs(o.per_cycle_s()),
        secs(o.max_pause_s),
        secs(o.max_resume_s)
    );
}

/// One GPU's week with and without pause.
fn week(out: &mut String, r: &CostReport) {
    let w = &r.week;
    let _ = writeln!(
        out,
        "One GPU's week ({} h, {} h active, {} pauses):",
        w.hours_in_week, w.active_hours, w.pauses_per_week
    );
    let bound = if w.reclaimed_is_upper_bound {
        " (upper bound)"
    } else {
        ""
    };
    for (label, value) in [
        (
            "allocated without pause",
            w.allocated_without_pause_gpu_hours,
        ),
        ("idle (the most pause can free)", w.idle_gpu_hours),
        ("overhead of the pauses", w.overhead_gpu_hours),
    ] {
        let _ = writeln!(out, "  {label:<32} {value:>8.1} GPU-hours");
    }
    let _ = writeln!(
        out,
        "  {:<32} {:>8.1} GPU-hours{bound}",
        "reclaimed", w.reclaimed_gpu_hours
    );
    let _ = writeln!(
        out,
        "  {:<32} {:>8.1} GPU-hours",
        "allocated with pause", w.allocated_with_pause_gpu_hours
    );
    if let Some(d) = w.snapshot_gib_days {
        let _ = writeln!(out, "  {:<32} {d:>8.1} GiB-days", "snapshot storage");
    }
    for n in &w.notes {
        let _ = writeln!(out, "  note: {n}");
    }
}

/// The idle-threshold break-even over the measured idle periods.
fn break_even(out: &mut String, r: &CostReport) {
    let b = &r.break_even;
    let _ = writeln!(
        out,
        "\nIdle threshold: an idle period shorter than threshold + {} (pause + resume overhead) reclaims nothing.",
        secs(b.overhead_s)
    );
    if b.idle_periods == 0 {
        out.push_str("No idle periods given: pass --idle-periods (e.g. 30s,8m,1h30m,14h) for the break-even.\n");
        return;
    }
    let _ = writeln!(
        out,
        "Over {} measured idle periods ({:.1} h in all):",
        b.idle_periods, b.idle_total_hours
    );
    let _ = writeln!(
        out,
        "  {:>9}  {:>6}  {:>8}  {:>15}  {:>12}  {:>9}  {:>9}",
        "threshold",
        "pauses",
        "paid off",
        "reclaimed GPU-h",
        "wasted GPU-h",
        "net GPU-h",
        "user wait"
    );
    for t in &b.thresholds {
        let best = if b.best_threshold_s == Some(t.threshold_s) {
            "  ← best"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  {:>9}  {:>6}  {:>8}  {:>15.2}  {:>12.2}  {:>9.2}  {:>9}{best}",
            secs(t.threshold_s),
            t.pauses,
            t.paid_off,
            t.reclaimed_gpu_hours,
            t.wasted_gpu_hours,
            t.net_gpu_hours,
            secs(t.user_wait_s)
        );
    }
    match b.best_threshold_s {
        Some(t) => {
            let _ = writeln!(out, "Best idle threshold: {}", secs(t));
        }
        None => out.push_str("No threshold pays off for these idle periods.\n"),
    }
}

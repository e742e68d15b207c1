//! The terminal table of phases: one row per scenario, one column per phase that any
//! scenario measured (in `crate::timeline::PHASES` order), aligned for a monospace font.

use super::fmt::{duration, phase_label};
use super::model::RunReport;
use crate::timeline::PHASES;

/// Scenario names longer than this are cut (with `…`).
const NAME_WIDTH: usize = 40;

/// The phase table of `report`, ending in a newline; a one-line note when nothing ran.
pub fn phase_table(report: &RunReport) -> String {
    if report.scenarios.is_empty() {
        return "no scenarios\n".to_string();
    }
    let mut names: Vec<String> = PHASES
        .iter()
        .map(|p| p.name.to_string())
        .filter(|n| report.scenarios.iter().any(|s| s.phase(n).is_some()))
        .collect();
    // Phases the timeline does not define (a newer writer) go last, in first-seen order.
    for s in &report.scenarios {
        for p in &s.phases {
            if !names.contains(&p.name) {
                names.push(p.name.clone());
            }
        }
    }
    // Two header lines: `resume →` over `Running`.
    let mut top = vec![String::new(); 3];
    let mut header = vec!["scenario".to_string(), "status".into(), "verdict".into()];
    for n in &names {
        let label = phase_label(n);
        match label.split_once(" → ") {
            Some((from, to)) => {
                top.push(format!("{from} →"));
                header.push(to.to_string());
            }
            None => {
                top.push(String::new());
                header.push(label);
            }
        }
    }
    let mut rows = vec![top, header];
    for s in &report.scenarios {
        let mut row = vec![
            cut(&s.name, NAME_WIDTH),
            s.status.as_str().to_string(),
            s.verdict_label().unwrap_or_else(|| "-".into()),
        ];
        row.extend(
            names
                .iter()
                .map(|n| s.phase(n).map(duration).unwrap_or_else(|| "-".into())),
        );
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                let pad = widths[c] - cell.chars().count();
                // Headers and text columns left-aligned, durations right-aligned.
                if c < 3 || i < 2 {
                    format!("{cell}{}", " ".repeat(pad))
                } else {
                    format!("{}{cell}", " ".repeat(pad))
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
        if i == 1 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            out.push_str(&rule.join("  "));
            out.push('\n');
        }
    }
    out
}

fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(width - 1).collect();
        s.push('…');
        s
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::report::model::{ScenarioReport, ScenarioStatus};
    use crate::timeline::PhaseDuration;

    fn phase(name: &str, ms: u64) -> PhaseDuration {
        PhaseDuration {
            name: name.into(),
            duration: Duration::from_millis(ms),
        }
    }

    #[test]
    fn columns_are_the_measured_phases_in_timeline_order_and_aligned() {
        let mut a = ScenarioReport::new("f", "resume restores the process");
        a.status = ScenarioStatus::Passed;
        a.phases = vec![
            phase("resume_to_running", 11_600),
            phase("pause_to_gpu_free", 121_400),
        ];
        let mut b = ScenarioReport::new("f", "x".repeat(60));
        b.status = ScenarioStatus::Failed;
        b.phases = vec![phase("drain_to_empty", 5)];
        let r = RunReport {
            scenarios: vec![a, b],
            ..RunReport::default()
        };
        let t = phase_table(&r);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        let (top, header) = (lines[0], lines[1]);
        let col = |line: &str, text: &str| {
            line.chars().count()
                - line.split_once(text).unwrap().1.chars().count()
                - text.chars().count()
        };
        let (gpu, run, custom) = (
            col(header, "GPU free"),
            col(header, "Running"),
            col(header, "empty"),
        );
        assert!(gpu < run && run < custom, "{t}");
        assert_eq!(
            col(top, "pause →"),
            gpu,
            "`pause →` sits over `GPU free`:\n{t}"
        );
        assert_eq!(col(top, "drain →"), custom, "{t}");
        assert!(
            lines[3].contains("2 m 01 s") && lines[3].contains("11.6 s"),
            "{t}"
        );
        assert!(lines[4].contains('…') && lines[4].contains("5 ms"), "{t}");
        let width = |l: &str| l.chars().count();
        assert_eq!(width(lines[2]), width(lines[3]), "{t}");
        assert_eq!(phase_table(&RunReport::default()), "no scenarios\n");
    }
}

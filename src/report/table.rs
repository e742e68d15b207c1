//! The terminal table of phases: one row per scenario, one column per phase that any
//! scenario measured (in `crate::timeline::PHASES` order), aligned for a monospace font.

use super::fmt::{duration, phase_label};
use super::model::RunReport;
use crate::timeline::PHASES;

/// Scenario names longer than this are cut (with `…`).
const NAME_WIDTH: usize = 48;

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
    let mut header = vec!["scenario".to_string(), "status".into(), "verdict".into()];
    header.extend(names.iter().map(|n| phase_label(n)));
    let mut rows = vec![header];
    for s in &report.scenarios {
        let mut row = vec![
            cut(&s.name, NAME_WIDTH),
            s.status.as_str().to_string(),
            s.verdict
                .as_ref()
                .map(|v| v.kind.to_string())
                .unwrap_or_else(|| "-".into()),
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
                // Text columns left-aligned, durations right-aligned.
                if c < 3 {
                    format!("{cell}{}", " ".repeat(pad))
                } else {
                    format!("{}{cell}", " ".repeat(pad))
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
        if i == 0 {
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
        let mut b = ScenarioReport::new("f", &"x".repeat(60));
        b.status = ScenarioStatus::Failed;
        b.phases = vec![phase("drain_to_empty", 5)];
        let r = RunReport {
            scenarios: vec![a, b],
            ..RunReport::default()
        };
        let t = phase_table(&r);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        let header = lines[0];
        let gpu = header.find("pause → GPU free").unwrap();
        let run = header.find("resume → Running").unwrap();
        let custom = header.find("drain → empty").unwrap();
        assert!(gpu < run && run < custom, "{t}");
        assert!(
            lines[2].contains("2 m 01 s") && lines[2].contains("11.6 s"),
            "{t}"
        );
        assert!(lines[3].contains('…') && lines[3].contains("5 ms"), "{t}");
        let width = |l: &str| l.chars().count();
        assert_eq!(width(lines[1]), width(lines[2].trim_end()), "{t}");
        assert_eq!(phase_table(&RunReport::default()), "no scenarios\n");
    }
}

//! The drill's HTML page (`reports/<run-id>/drill.html`), beside `drill.json`: what a person
//! reads after a drill, in the run report's style (see `report::html`).

use std::fmt::Write;
use std::time::Duration;

use super::{DrillReport, Spread};
use crate::report::fmt::{duration, html};
use crate::report::html::{HISTOGRAM_MIN, histogram, page, status_mark};

impl DrillReport {
    /// The page of this drill, run `run_id` against `target` (in words).
    pub fn html(&self, run_id: &str, target: &str) -> String {
        let mut out = String::new();
        let problems = self.problems();
        let ok = self.results.len() - problems.len();
        let _ = write!(
            out,
            "<h1>wsgate drill {}</h1>\n<p>Target: {}.<br>{} paused workspaces resumed at once on \
             {} GPUs, {} of them kernel-checked; from the resume of all to the last one checked: \
             {}.</p>\n<p>{} <strong>{ok} of {} ended restored{}</strong></p>\n",
            html(run_id),
            html(target),
            self.workspaces,
            self.gpus,
            self.sample,
            duration(Duration::from_secs_f64(self.wall_s.max(0.0))),
            status_mark(if problems.is_empty() {
                "passed"
            } else {
                "failed"
            }),
            self.results.len(),
            if problems.is_empty() {
                String::new()
            } else {
                format!(
                    ", <span class=\"failed\">{} with a problem</span>",
                    problems.len()
                )
            },
        );
        out.push_str(
            "<table><tr><th>Phase</th><th>p50</th><th>p95</th><th>max</th><th>n</th></tr>",
        );
        for (label, s) in [
            ("waited for a GPU", &self.waited),
            ("resume → Running", &self.to_running),
            ("pod Ready → PodRestored", &self.ready_to_pod_restored),
        ] {
            spread_row(&mut out, label, s.as_ref());
        }
        out.push_str("</table>\n");
        let figures: Vec<String> = [
            (
                "waited for a GPU",
                self.results.iter().map(|r| r.waited).collect::<Vec<_>>(),
            ),
            (
                "resume → Running",
                self.results.iter().map(|r| r.to_running).collect(),
            ),
        ]
        .into_iter()
        .filter_map(|(label, values)| {
            let values: Vec<Duration> = values.into_iter().flatten().collect();
            (values.len() >= HISTOGRAM_MIN)
                .then(|| histogram(label, &values))
                .flatten()
        })
        .collect();
        if !figures.is_empty() {
            out.push_str("<h2>Distribution</h2>\n");
            for f in figures {
                out.push_str(&f);
                out.push('\n');
            }
        }
        out.push_str(
            "<h2>Workspaces</h2>\n<table><tr><th></th><th>Workspace</th><th>Kernel-checked</th>\
             <th>Waited</th><th>To Running</th><th>Ready → PodRestored</th><th>Attempts</th>\
             <th>Verdict</th><th>Problem</th></tr>\n",
        );
        let cell = |d: Option<Duration>| d.map(duration).unwrap_or_else(|| "–".into());
        for r in &self.results {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td{}>{}</td></tr>",
                status_mark(if r.problem.is_none() {
                    "passed"
                } else {
                    "failed"
                }),
                html(&r.name),
                if r.sampled { "yes" } else { "no" },
                cell(r.waited),
                cell(r.to_running),
                cell(r.ready_to_pod_restored),
                r.max_attempts,
                html(&r.verdict),
                if r.problem.is_some() {
                    " class=\"failed\""
                } else {
                    ""
                },
                html(r.problem.as_deref().unwrap_or("")),
            );
        }
        out.push_str("</table>\n");
        page(&format!("wsgate drill {run_id}"), &out)
    }
}

fn spread_row(out: &mut String, label: &str, s: Option<&Spread>) {
    match s {
        Some(s) => {
            let d = |secs: f64| duration(Duration::from_secs_f64(secs.max(0.0)));
            let _ = write!(
                out,
                "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                html(label),
                d(s.p50_s),
                d(s.p95_s),
                d(s.max_s),
                s.count
            );
        }
        None => {
            let _ = write!(
                out,
                "<tr><td>{}</td><td colspan=\"4\">not measured</td></tr>",
                html(label)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{PLATFORM_RESTORED, WorkspaceResult, spread};
    use super::*;

    fn result(name: &str, waited_ms: u64, problem: Option<&str>) -> WorkspaceResult {
        WorkspaceResult {
            name: name.into(),
            sampled: false,
            waited: Some(Duration::from_millis(waited_ms)),
            to_running: Some(Duration::from_millis(waited_ms + 400)),
            ready_to_pod_restored: None,
            verdict: if problem.is_none() {
                PLATFORM_RESTORED.into()
            } else {
                "not Running".into()
            },
            max_attempts: 1,
            problem: problem.map(str::to_owned),
        }
    }

    #[test]
    fn the_page_shows_every_workspace_its_verdict_and_the_spreads_without_emoji() {
        let mut results: Vec<WorkspaceResult> = (0..9)
            .map(|i| result(&format!("wsgate-drill-abc123-00{i}"), 100 * i, None))
            .collect();
        results.push(result(
            "wsgate-drill-abc123-<9>",
            50,
            Some("pod <gone> & replaced"),
        ));
        let mut report = DrillReport {
            workspaces: results.len(),
            gpus: 2,
            sample: 0,
            waited: spread(&results.iter().map(|r| r.waited).collect::<Vec<_>>()),
            to_running: spread(&results.iter().map(|r| r.to_running).collect::<Vec<_>>()),
            ready_to_pod_restored: None,
            results,
            wall_s: 4.2,
        };
        let page = report.html("r1", "the embedded simulator");
        for i in 0..9 {
            assert!(
                page.contains(&format!("<td>wsgate-drill-abc123-00{i}</td>")),
                "{page}"
            );
        }
        // Escaped, and marked failed.
        assert!(page.contains("wsgate-drill-abc123-&lt;9&gt;"), "{page}");
        assert!(page.contains("pod &lt;gone&gt; &amp; replaced"), "{page}");
        assert_eq!(page.matches("data-status=\"passed\"").count(), 9);
        // One per failed workspace and one in the headline.
        assert_eq!(page.matches("data-status=\"failed\"").count(), 2);
        assert!(page.contains("9 of 10 ended restored"), "{page}");
        assert!(page.contains(PLATFORM_RESTORED));
        assert!(
            page.contains("not measured"),
            "Ready -> PodRestored was not measured"
        );
        assert!(
            page.contains("<h2>Distribution</h2>"),
            "ten waits get a histogram"
        );
        assert!(
            !page.chars().any(crate::report::html::needs_emoji_font),
            "no mark may need an emoji font"
        );
        // A failure is not a false restore; a kernel-checked one that is makes the drill's.
        assert!(!report.false_restore());
        report.results[9].verdict = format!("FreshSession {}", super::super::FALSE_RESTORE_MARK);
        assert!(report.false_restore());
    }
}

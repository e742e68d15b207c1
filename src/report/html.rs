//! One self-contained HTML page (inline CSS, inline SVG, no external assets, no scripts):
//! the run header, the scenario table, histograms of the key phases when there are many
//! scenarios (drills), and per scenario its SVG timeline, phases, steps, verdict and log.

use std::fmt::Write;
use std::time::Duration;

use super::failure::failure_summary;
use super::fmt::{KEY_PHASES, bytes, duration, html, phase_label};
use super::markdown::target_words;
use super::model::{RunReport, ScenarioReport, StepStatus};
use super::svg;
use crate::platform::ledger::CleanupOutcome;

/// From this many measured values on, a key phase gets a histogram.
pub const HISTOGRAM_MIN: usize = 8;

const CSS: &str = "body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1100px;color:#1f2328;padding:0 16px}\
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #d0d7de}h3{font-size:15px;margin-bottom:4px}\
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}\
td.num{text-align:right;font-variant-numeric:tabular-nums}th{background:#f6f8fa}\
.passed{color:#1a7f37}.failed{color:#cf222e}.skipped,.not_run{color:#6e7781}\
.badge{display:inline-block;padding:1px 8px;border-radius:10px;background:#ddf4ff;font-size:12px}\
.badge.sim{background:#fff8c5}pre{background:#f6f8fa;padding:8px;overflow-x:auto;white-space:pre-wrap}\
section.scenario{border:1px solid #d0d7de;border-radius:6px;padding:4px 16px 12px;margin:16px 0}\
svg text{font:11px system-ui,sans-serif;fill:#1f2328}svg text.mark,svg text.band,svg text.gap-label,svg text.count{text-anchor:middle}\
svg text.hi,svg text.mark-end{text-anchor:end}svg .axis{stroke:#57606a;stroke-width:1.5}svg .tick{stroke:#57606a;stroke-width:2}\
svg .lead{stroke:#afb8c1;stroke-dasharray:2 2}svg .gap{fill:#fff;stroke:#afb8c1;stroke-dasharray:3 3}\
svg .b-pause{fill:#f5a524}svg .b-resume{fill:#4b8df8}svg .b-wait{fill:#e5534b}svg .b-cell{fill:#2da44e}svg .open{opacity:.45;stroke:#1f2328;stroke-dasharray:4 2}\
svg text.band{fill:#fff;font-weight:600}svg .bar{fill:#4b8df8}figure{margin:12px 0}figcaption{font-weight:600}\
svg.status{vertical-align:-3px}.warning{color:#9a6700}";

/// A whole page: `body` (HTML) under the title `title` (text), with the one stylesheet.
/// The drill's and the gate's pages are built on it, so all of wsgate's pages read alike.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{CSS}</style></head><body>\n{body}</body></html>\n",
        html(title)
    )
}

/// How an outcome is marked in a page: drawn as inline SVG, so that it shows in a browser
/// without an emoji font (a headless browser with only a distribution's default fonts
/// drew the emoji marks as empty boxes). `status` is `passed`, `failed`, `warning` or
/// anything else (`skipped`: grey); the SVG carries it as `data-status` and as its
/// accessible name.
pub fn status_mark(status: &str) -> String {
    let (fill, path) = match status {
        "passed" => (MARK_PASSED, "M4.5 8.5l2.3 2.3 4.7-5"),
        "failed" => (MARK_FAILED, "M5 5l6 6M11 5l-6 6"),
        "warning" => (MARK_WARNING, "M8 4.2v4.6M8 11.3v.3"),
        _ => (MARK_SKIPPED, "M4.8 8h6.4"),
    };
    let status = html(status);
    format!(
        "<svg class=\"status\" data-status=\"{status}\" width=\"16\" height=\"16\" viewBox=\"0 0 16 16\" role=\"img\" aria-label=\"{status}\"><title>{status}</title><circle cx=\"8\" cy=\"8\" r=\"8\" fill=\"{fill}\"/><path d=\"{path}\" stroke=\"#fff\" stroke-width=\"2\" stroke-linecap=\"round\" fill=\"none\"/></svg>"
    )
}

/// The marks' fill colours: used nowhere else on a page, so a screenshot shows whether
/// the marks were drawn.
pub const MARK_PASSED: &str = "#1f883d";
pub const MARK_FAILED: &str = "#d1242f";
pub const MARK_WARNING: &str = "#bf8700";
pub const MARK_SKIPPED: &str = "#8c959f";

/// Whether `c` is drawn from an emoji or symbol font (dingbats such as ✔ ✘, pictographs
/// such as ✅ ❌, the emoji variation selector): where no such font is installed, a browser
/// shows an empty box. Pages use [`status_mark`] instead.
pub fn needs_emoji_font(c: char) -> bool {
    matches!(c as u32, 0x2600..=0x27BF | 0x2B00..=0x2BFF | 0xFE0F | 0x1F000..=0x1FAFF)
}

/// A restore verdict as a paragraph: its label, its reason, and the evidence and
/// contradictions as a list (the run report's scenarios and the gate's page).
pub fn verdict(out: &mut String, v: &crate::verdict::Verdict) {
    verdict_head(out, &v.label(), v.reason.as_deref(), &v.decided_by);
    for c in &v.contradictions {
        let _ = write!(
            out,
            "<li class=\"failed\">contradiction: {}</li>",
            html(&c.to_string())
        );
    }
    out.push_str("</ul>\n");
}

/// The stateless kind's verdict as a paragraph: its label, its reason, and one line per
/// file (what it stands for, its path, how it came back).
fn files_verdict(out: &mut String, v: &crate::verdict::FilesVerdict) {
    verdict_head(out, &v.label(), v.reason.as_deref(), &v.decided_by);
    out.push_str("</ul>\n");
}

/// `<p>Verdict: <strong>label</strong> (reason)</p><ul>` and one item per line of evidence;
/// the caller closes the list.
fn verdict_head(out: &mut String, label: &str, reason: Option<&str>, decided_by: &[String]) {
    let _ = write!(out, "<p>Verdict: <strong>{}</strong>", html(label));
    if let Some(r) = reason {
        let _ = write!(out, " ({})", html(r));
    }
    out.push_str("</p><ul>");
    for line in decided_by {
        let _ = write!(out, "<li>{}</li>", html(line));
    }
}

/// A histogram of `values` as an inline SVG figure titled `label` (none for no values).
pub fn histogram(label: &str, values: &[Duration]) -> Option<String> {
    svg::histogram(label, values)
}

/// The HTML page of `report`.
pub fn html_page(report: &RunReport) -> String {
    let mut out = String::new();
    header(&mut out, report);
    table(&mut out, report);
    histograms(&mut out, report);
    for (i, s) in report.scenarios.iter().enumerate() {
        scenario(&mut out, i, s);
    }
    cleanup(&mut out, report);
    page(&format!("wsgate run {}", report.run_id), &out)
}

fn header(out: &mut String, r: &RunReport) {
    let (class, kind) = match r.target.is_simulator() {
        true => ("badge sim", "simulator"),
        false => ("badge", "cluster"),
    };
    let _ = write!(
        out,
        "<h1>wsgate run {} <span class=\"{class}\">{kind}</span></h1>\n<p>Target: {}, namespace <code>{}</code>",
        html(&r.run_id),
        html(&target_words(r)),
        html(&r.target.namespace)
    );
    if let Some(p) = &r.profile {
        let _ = write!(out, "; profile <code>{}</code>", html(p));
    }
    let _ = write!(
        out,
        ".<br>Started {}, took {}, exit code {}.</p>\n<p><strong>{} scenarios: <span class=\"passed\">{} passed</span>, <span class=\"failed\">{} failed</span>, <span class=\"skipped\">{} skipped</span></strong></p>\n",
        r.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
        duration(r.duration()),
        r.exit_code,
        r.scenarios.len(),
        r.count(super::ScenarioStatus::Passed),
        r.count(super::ScenarioStatus::Failed),
        r.count(super::ScenarioStatus::Skipped),
    );
}

fn table(out: &mut String, r: &RunReport) {
    if r.scenarios.is_empty() {
        return;
    }
    out.push_str("<table><tr><th></th><th>Scenario</th><th>Feature</th><th>Verdict</th>");
    for (_, label) in KEY_PHASES {
        let _ = write!(out, "<th>{}</th>", html(label));
    }
    out.push_str("</tr>\n");
    for (i, s) in r.scenarios.iter().enumerate() {
        let _ = write!(
            out,
            "<tr><td>{}</td><td><a href=\"#s{i}\">{}</a></td><td>{}</td><td>{}</td>",
            status_mark(s.status.as_str()),
            html(&s.name),
            html(&s.feature),
            s.verdict_label().unwrap_or_else(|| "–".into())
        );
        for (name, _) in KEY_PHASES {
            let cell = s.phase(name).map(duration).unwrap_or_else(|| "–".into());
            let _ = write!(out, "<td class=\"num\">{cell}</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

fn histograms(out: &mut String, r: &RunReport) {
    let mut figures = Vec::new();
    for (name, label) in KEY_PHASES {
        let values: Vec<Duration> = r.scenarios.iter().filter_map(|s| s.phase(name)).collect();
        if values.len() >= HISTOGRAM_MIN {
            figures.extend(svg::histogram(label, &values));
        }
    }
    if !figures.is_empty() {
        out.push_str("<h2>Distribution</h2>\n");
        for f in figures {
            out.push_str(&f);
            out.push('\n');
        }
    }
}

fn scenario(out: &mut String, i: usize, s: &ScenarioReport) {
    let _ = write!(
        out,
        "<section class=\"scenario\" id=\"s{i}\"><h3>{} {}</h3><p>{} <span class=\"{}\">{}</span>",
        status_mark(s.status.as_str()),
        html(&s.name),
        html(&s.feature),
        s.status.as_str(),
        s.status.as_str()
    );
    if !s.tags.is_empty() {
        let tags: Vec<String> = s.tags.iter().map(|t| format!("@{}", html(t))).collect();
        let _ = write!(out, " · {}", tags.join(" "));
    }
    out.push_str("</p>\n");
    if let Some(f) = failure_summary(s) {
        let _ = write!(
            out,
            "<p class=\"failed\"><strong>{}</strong>",
            html(&f.message)
        );
        if let Some(step) = &f.step {
            let _ = write!(out, "<br>Failed step: <code>{}</code>", html(step));
        }
        let _ = writeln!(out, "</p><pre>{}</pre>", html(&f.detail));
    }
    if let Some(svg) = svg::timeline(&s.timeline, Some(s.elapsed())) {
        out.push_str(&svg);
        out.push('\n');
    }
    if !s.phases.is_empty() {
        out.push_str("<table><tr><th>Phase</th><th>Duration</th></tr>");
        for p in &s.phases {
            let _ = write!(
                out,
                "<tr><td>{}</td><td class=\"num\">{}</td></tr>",
                html(&phase_label(&p.name)),
                duration(p.duration)
            );
        }
        out.push_str("</table>\n");
    }
    if let Some(v) = &s.verdict {
        verdict(out, v);
    }
    if let Some(v) = &s.files_verdict {
        files_verdict(out, v);
    }
    if s.snapshot_name.is_some() || s.snapshot_uid.is_some() || s.snapshot_bytes.is_some() {
        let _ = writeln!(
            out,
            "<p>Snapshot: <code>{}</code>{}{}</p>",
            html(s.snapshot_name.as_deref().unwrap_or("unknown")),
            s.snapshot_uid
                .as_deref()
                .map(|u| format!(" (uid <code>{}</code>)", html(u)))
                .unwrap_or_default(),
            s.snapshot_bytes
                .map(|b| format!(", {}", bytes(b)))
                .unwrap_or_default()
        );
    }
    if !s.steps.is_empty() {
        out.push_str("<details><summary>Steps</summary><ul>");
        for step in &s.steps {
            let _ = write!(
                out,
                "<li class=\"{}\">{} — {}",
                step.status.as_str(),
                html(&step.line()),
                step.status.as_str()
            );
            if let (StepStatus::Failed, Some(e)) = (step.status, &step.error) {
                let _ = write!(out, "<pre>{}</pre>", html(e));
            }
            out.push_str("</li>");
        }
        out.push_str("</ul></details>\n");
    }
    if !s.log.is_empty() {
        let _ = writeln!(
            out,
            "<details><summary>Log ({} lines)</summary><pre>{}</pre></details>",
            s.log.len(),
            html(&s.log.join("\n"))
        );
    }
    out.push_str("</section>\n");
}

fn cleanup(out: &mut String, r: &RunReport) {
    if r.cleanup.is_empty() {
        return;
    }
    let leaks: Vec<_> = r.leaks().collect();
    out.push_str("<h2>Cleanup</h2>\n");
    if leaks.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"passed\">No leaks ({} objects).</p>",
            r.cleanup.len()
        );
        return;
    }
    let _ = write!(
        out,
        "<p class=\"failed\"><strong>{} of {} objects left behind.</strong></p><table><tr><th>Scenario</th><th>Object</th><th>Why</th></tr>",
        leaks.len(),
        r.cleanup.len()
    );
    for c in leaks {
        let why = match &c.outcome {
            CleanupOutcome::Leaked(w) => w.as_str(),
            _ => "",
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
            html(&c.scenario),
            html(&c.object),
            html(why)
        );
    }
    out.push_str("</table>\n");
}

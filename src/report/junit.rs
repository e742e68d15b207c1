//! JUnit XML: a `<testsuite>` per feature, a `<testcase>` per scenario, with `<properties>`
//! for the phase timings (ms), the verdict and the snapshot uid, a `<failure>` that says what
//! went wrong and in which phase, and the scenario's steps and log in `<system-out>`.
//! `junit-report` writes the document; `<properties>` (which it does not know) are added in
//! one pass over its output with quick-xml.

use junit_report::{Duration as JDuration, OffsetDateTime, Report, TestCase, TestSuite};
use quick_xml::events::{BytesEnd, BytesStart, Event};
use quick_xml::{Reader, Writer};

use super::ReportError;
use super::failure::failure_summary;
use super::model::{RunReport, ScenarioReport, ScenarioStatus, StepStatus};

/// The JUnit XML of `report`.
pub fn junit_xml(report: &RunReport) -> Result<String, ReportError> {
    let mut suites: Vec<(String, Vec<&ScenarioReport>)> = Vec::new();
    for s in &report.scenarios {
        match suites.iter_mut().find(|(f, _)| *f == s.feature) {
            Some((_, list)) => list.push(s),
            None => suites.push((s.feature.clone(), vec![s])),
        }
    }
    let mut junit = Report::new();
    let mut suite_props = Vec::new();
    let mut case_props = Vec::new();
    for (feature, scenarios) in &suites {
        let mut suite = TestSuite::new(&xml_text(feature));
        suite.set_timestamp(timestamp(
            scenarios
                .iter()
                .filter_map(|s| s.timeline.started_at)
                .min()
                .unwrap_or(report.started_at),
        ));
        for s in scenarios {
            suite.add_testcase(testcase(s));
            case_props.push(scenario_properties(s));
        }
        junit.add_testsuite(suite);
        suite_props.push(run_properties(report));
    }
    let mut raw = Vec::new();
    junit
        .write_xml(&mut raw)
        .map_err(|source| ReportError::Junit { source })?;
    add_properties(&raw, &suite_props, &case_props)
}

fn testcase(s: &ScenarioReport) -> TestCase {
    let name = xml_text(&s.name);
    let time = JDuration::seconds_f64(s.elapsed().as_secs_f64());
    let mut case = match (s.status, failure_summary(s)) {
        (ScenarioStatus::Passed, _) | (ScenarioStatus::Failed, None) => {
            TestCase::success(&name, time)
        }
        (ScenarioStatus::Skipped, _) => TestCase::skipped(&name),
        (ScenarioStatus::Failed, Some(f)) => {
            let kind = match &f.phase {
                Some(p) => format!("phase {p}"),
                None => "step".to_string(),
            };
            let mut case = TestCase::failure(&name, time, &kind, &xml_text(&f.message));
            let mut cause = String::new();
            if let Some(step) = &f.step {
                cause.push_str(&format!("failed step: {step}\n"));
            }
            if let Some(p) = &f.phase {
                cause.push_str(&format!("phase under way: {p}\n"));
            }
            if let Some(last) = &f.last_observed {
                cause.push_str(&format!("last observed: {last}\n"));
            }
            cause.push('\n');
            cause.push_str(&f.detail);
            if let junit_report::TestResult::Failure { cause: c, .. } = &mut case.result {
                *c = Some(cdata(&cause));
            }
            case
        }
    };
    case.set_classname(&xml_text(&s.feature));
    case.set_system_out(&cdata(&system_out(s)));
    case
}

/// The steps with their outcome, then the log.
fn system_out(s: &ScenarioReport) -> String {
    let mut out = String::new();
    for step in &s.steps {
        let mark = match step.status {
            StepStatus::Passed => "✔",
            StepStatus::Failed => "✘",
            StepStatus::Skipped => "↷",
            StepStatus::NotRun => "·",
        };
        out.push_str(&format!("{mark} {}\n", step.line()));
        if let Some(e) = &step.error {
            for line in e.lines() {
                out.push_str(&format!("    {line}\n"));
            }
        }
    }
    if !s.log.is_empty() {
        out.push_str("--- log ---\n");
        for line in &s.log {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn run_properties(r: &RunReport) -> Vec<(String, String)> {
    let mut p = vec![
        ("wsgate.run_id".to_string(), r.run_id.clone()),
        (
            "wsgate.schema_version".to_string(),
            r.schema_version.to_string(),
        ),
        (
            "target.kind".to_string(),
            r.target.kind.as_str().to_string(),
        ),
        ("target.server".to_string(), r.target.server.clone()),
        ("target.namespace".to_string(), r.target.namespace.clone()),
    ];
    if let Some(profile) = &r.profile {
        p.push(("profile".to_string(), profile.clone()));
    }
    p
}

fn scenario_properties(s: &ScenarioReport) -> Vec<(String, String)> {
    let mut p: Vec<(String, String)> = s
        .phases
        .iter()
        .map(|ph| {
            (
                format!("phase.{}.ms", ph.name),
                (ph.duration.as_secs_f64() * 1000.0).round().to_string(),
            )
        })
        .collect();
    if let Some(v) = &s.verdict {
        // The label says a false restore, as every other writer does.
        p.push(("verdict".to_string(), v.label()));
        if let Some(reason) = &v.reason {
            p.push(("verdict.reason".to_string(), reason.clone()));
        }
        for (i, c) in v.contradictions.iter().enumerate() {
            p.push((format!("verdict.contradiction.{i}"), c.to_string()));
        }
    }
    if let Some(v) = &s.files_verdict {
        p.push(("files_verdict".to_string(), v.kind.to_string()));
        for f in &v.files {
            let line = v
                .decided_by
                .iter()
                .find(|l| l.starts_with(&format!("{} (", f.name)))
                .cloned()
                .unwrap_or_default();
            p.push((format!("files_verdict.{}", f.name), line));
        }
    }
    if let Some(name) = &s.snapshot_name {
        p.push(("snapshot.name".to_string(), name.clone()));
    }
    if let Some(uid) = &s.snapshot_uid {
        p.push(("snapshot.uid".to_string(), uid.clone()));
    }
    if let Some(b) = s.snapshot_bytes {
        p.push(("snapshot.bytes".to_string(), b.to_string()));
    }
    if !s.tags.is_empty() {
        p.push(("tags".to_string(), s.tags.join(" ")));
    }
    p
}

/// Re-writes `raw` indented, with `<properties>` as the first child of the i-th testsuite
/// and of the j-th testcase (in document order).
fn add_properties(
    raw: &[u8],
    suites: &[Vec<(String, String)>],
    cases: &[Vec<(String, String)>],
) -> Result<String, ReportError> {
    let xml = |source| ReportError::Xml { source };
    let io = |e: std::io::Error| ReportError::Xml {
        source: quick_xml::Error::from(e),
    };
    let mut reader = Reader::from_reader(raw);
    let mut writer = Writer::new_with_indent(Vec::new(), b' ', 2);
    let (mut suite_i, mut case_i) = (0usize, 0usize);
    loop {
        let event = reader.read_event().map_err(xml)?;
        let (start, empty) = match &event {
            Event::Start(e) => (Some(e.to_owned()), false),
            Event::Empty(e) => (Some(e.to_owned()), true),
            Event::Eof => break,
            _ => (None, false),
        };
        let props = match start.as_ref().map(|e| e.name().as_ref().to_vec()) {
            Some(n) if n == b"testsuite" => {
                suite_i += 1;
                suites.get(suite_i - 1)
            }
            Some(n) if n == b"testcase" => {
                case_i += 1;
                cases.get(case_i - 1)
            }
            _ => None,
        };
        match (start, props) {
            (Some(start), Some(props)) if !props.is_empty() => {
                let end =
                    BytesEnd::new(String::from_utf8_lossy(start.name().as_ref()).into_owned());
                writer.write_event(Event::Start(start)).map_err(io)?;
                writer
                    .write_event(Event::Start(BytesStart::new("properties")))
                    .map_err(io)?;
                for (name, value) in props {
                    let p = BytesStart::new("property").with_attributes([
                        ("name", xml_text(name).as_str()),
                        ("value", xml_text(value).as_str()),
                    ]);
                    writer.write_event(Event::Empty(p)).map_err(io)?;
                }
                writer
                    .write_event(Event::End(BytesEnd::new("properties")))
                    .map_err(io)?;
                if empty {
                    writer.write_event(Event::End(end)).map_err(io)?;
                }
            }
            _ => writer.write_event(event).map_err(io)?,
        }
    }
    let mut out = String::from_utf8_lossy(&writer.into_inner()).into_owned();
    out.push('\n');
    Ok(out)
}

/// Text that XML 1.0 can hold: control characters other than tab and newlines become
/// U+FFFD (ANSI colour codes in logs would make the document invalid).
fn xml_text(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => '\u{FFFD}',
            c => c,
        })
        .collect()
}

/// Text for a CDATA section: XML-safe, and `]]>` split so that it cannot end the section.
fn cdata(text: &str) -> String {
    xml_text(text).replace("]]>", "]]]]><![CDATA[>")
}

fn timestamp(at: chrono::DateTime<chrono::Utc>) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(at.timestamp_millis()) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::StepReport;

    #[test]
    fn control_characters_and_cdata_ends_cannot_break_the_document() {
        let mut r = RunReport {
            run_id: "r1".into(),
            ..RunReport::default()
        };
        let mut s = ScenarioReport::new("F <&>", "S \u{1b}[31mred\u{1b}[0m");
        s.status = ScenarioStatus::Failed;
        s.steps.push(StepReport {
            keyword: "Then".into(),
            text: "it fails".into(),
            status: StepStatus::Failed,
            error: Some("boom ]]> after".into()),
        });
        s.log.push("line with ]]> inside".into());
        r.scenarios.push(s);
        let xml = junit_xml(&r).unwrap();
        let mut reader = Reader::from_str(&xml);
        let mut text = String::new();
        loop {
            match reader.read_event().expect("well-formed") {
                Event::Eof => break,
                Event::CData(c) => text.push_str(&String::from_utf8_lossy(&c)),
                _ => {}
            }
        }
        assert!(text.contains("boom ]]> after"), "{text}");
        assert!(text.contains("line with ]]> inside"), "{text}");
        assert!(!xml.contains('\u{1b}'));
        assert!(
            xml.contains(r#"<testsuite id="0" name="F &lt;&amp;&gt;""#),
            "{xml}"
        );
    }

    #[test]
    fn a_false_restore_is_the_verdict_property_and_the_page_says_it() {
        use crate::report::test_support::{kernel_dies_scenario, run_of};
        let xml = junit_xml(&run_of(kernel_dies_scenario(true))).unwrap();
        assert!(
            xml.contains(r#"name="verdict" value="FreshSession (false restore)""#),
            "{xml}"
        );
        let page = crate::report::html::html_page(&run_of(kernel_dies_scenario(true)));
        assert!(page.contains("FreshSession (false restore)"), "{page}");
        let xml = junit_xml(&run_of(kernel_dies_scenario(false))).unwrap();
        assert!(!xml.contains("false restore"), "{xml}");
    }
}

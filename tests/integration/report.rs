//! Reports: golden JUnit, JSON and Markdown rendered from a realistic run (volatile values
//! redacted), the JUnit structure CI tools expect, the JSON schema, redaction of secrets in
//! every file `write_all` writes, the self-contained HTML page, and `wsgate report` and
//! `wsgate cost` on the fixture reports in fixtures/reports/.
//!
//! `WSGATE_BLESS=1 cargo test --test integration report::` rewrites the golden and fixture
//! files from the example runs; review the diff before committing it.

pub(crate) mod fixture;
mod schema;

use crate::common::{text, wsgate};
use std::path::{Path, PathBuf};

use base64::Engine;
use quick_xml::Reader;
use quick_xml::events::Event;
use wsgate::report::{
    self, Redactor, RunReport, ScenarioStatus, json::to_json, junit::junit_xml, markdown::markdown,
    redact_volatile,
};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn bless() -> bool {
    std::env::var_os("WSGATE_BLESS").is_some_and(|v| v == "1")
}

/// Compares `actual` with the file at `rel` (or rewrites it when blessing).
fn golden(rel: &str, actual: &str) {
    let path = Path::new(ROOT).join(rel);
    if bless() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{rel}: {e} (WSGATE_BLESS=1 writes it)"));
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{rel} differs from the rendering at line {}:\n  golden: {:?}\n  actual: {:?}\n(WSGATE_BLESS=1 rewrites it)",
            line + 1,
            expected.lines().nth(line).unwrap_or("<end>"),
            actual.lines().nth(line).unwrap_or("<end>")
        );
    }
}

fn schema() -> serde_json::Value {
    serde_json::from_str(report::json::SCHEMA).unwrap()
}

fn fixture_path(name: &str) -> PathBuf {
    Path::new(ROOT).join("fixtures/reports").join(name)
}

#[test]
fn golden_junit_json_and_markdown() {
    wsgate::install_crypto_provider();
    let a = fixture::run_a();
    golden(
        "tests/golden/report/junit.xml",
        &redact_volatile(&junit_xml(&a).unwrap()),
    );
    golden(
        "tests/golden/report/report.json",
        &redact_volatile(&to_json(&a).unwrap()),
    );
    golden(
        "tests/golden/report/summary.md",
        &redact_volatile(&markdown(&a)),
    );
}

#[test]
fn fixture_reports_are_the_example_runs() {
    golden(
        "fixtures/reports/nightly-a.json",
        &to_json(&fixture::run_a()).unwrap(),
    );
    golden(
        "fixtures/reports/nightly-b.json",
        &to_json(&fixture::run_b()).unwrap(),
    );
}

#[test]
fn every_json_report_and_golden_validates_against_the_schema() {
    let schema = schema();
    let mut docs: Vec<(String, String)> = vec![
        ("run A".into(), to_json(&fixture::run_a()).unwrap()),
        ("run B".into(), to_json(&fixture::run_b()).unwrap()),
        ("run A with its server's version".into(), {
            let mut r = fixture::run_a();
            r.target.server_version = "v1.32.4-gke.1200".into();
            to_json(&r).unwrap()
        }),
        ("drill".into(), to_json(&fixture::drill(3)).unwrap()),
        (
            "empty".into(),
            to_json(&RunReport {
                run_id: "r0".into(),
                ..RunReport::default()
            })
            .unwrap(),
        ),
    ];
    for rel in [
        "tests/golden/report/report.json",
        "fixtures/reports/nightly-a.json",
        "fixtures/reports/nightly-b.json",
    ] {
        docs.push((
            rel.into(),
            std::fs::read_to_string(Path::new(ROOT).join(rel)).unwrap(),
        ));
    }
    for (name, text) in docs {
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let errors = schema::validate(&schema, &value);
        assert!(errors.is_empty(), "{name}:\n{}", errors.join("\n"));
    }
}

#[test]
fn the_schema_check_rejects_what_the_schema_forbids() {
    let schema = schema();
    let good = serde_json::to_value(fixture::run_a()).unwrap();
    let broken = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = good.clone();
        f(&mut v);
        schema::validate(&schema, &v)
    };
    assert!(!broken(&|v| v["schema_version"] = 2.into()).is_empty());
    assert!(!broken(&|v| v["scenarios"][0]["status"] = "ok".into()).is_empty());
    assert!(!broken(&|v| v["scenarios"][0]["extra"] = 1.into()).is_empty());
    assert!(!broken(&|v| v["target"]["kind"] = "prod".into()).is_empty());
    assert!(!broken(&|v| v["started_at"] = "yesterday".into()).is_empty());
    assert!(
        !broken(&|v| {
            v["cleanup"][0]["outcome"] = serde_json::json!({"status": "leaked"});
        })
        .is_empty()
    );
    assert!(
        !broken(&|v| {
            v.as_object_mut().unwrap().remove("exit_code");
        })
        .is_empty()
    );
}

/// The JUnit elements and attributes the common schema (Jenkins/Ant, as CI tools read it)
/// requires, checked by parsing.
#[test]
fn junit_has_the_structure_ci_tools_expect() {
    let a = fixture::run_a();
    let xml = junit_xml(&a).unwrap();
    let mut reader = Reader::from_str(&xml);
    let mut stack: Vec<String> = Vec::new();
    let mut suites = 0;
    let mut cases: Vec<(String, Vec<(String, String)>)> = Vec::new();
    let mut declared = (0usize, 0usize); // tests, failures over all suites
    let mut failures: Vec<(String, String)> = Vec::new();
    let mut skipped = 0;
    let mut system_out = 0;
    let mut first_child_of_case: Vec<String> = Vec::new();
    loop {
        let event = reader.read_event().expect("well-formed XML");
        let (e, empty) = match &event {
            Event::Start(e) => (e.clone(), false),
            Event::Empty(e) => (e.clone(), true),
            Event::End(_) => {
                stack.pop();
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
        let attr = |k: &str| {
            e.try_get_attribute(k).unwrap().map(|a| {
                a.normalized_value(quick_xml::XmlVersion::Explicit1_0)
                    .unwrap()
                    .into_owned()
            })
        };
        let parent = stack.last().cloned().unwrap_or_default();
        if parent == "testcase" && first_child_of_case.len() < cases.len() {
            first_child_of_case.push(name.clone());
        }
        match name.as_str() {
            "testsuites" => assert!(parent.is_empty()),
            "testsuite" => {
                assert_eq!(parent, "testsuites");
                suites += 1;
                for required in ["name", "tests", "failures", "errors", "time", "timestamp"] {
                    assert!(attr(required).is_some(), "testsuite lacks {required}");
                }
                declared.0 += attr("tests").unwrap().parse::<usize>().unwrap();
                declared.1 += attr("failures").unwrap().parse::<usize>().unwrap();
            }
            "testcase" => {
                assert_eq!(parent, "testsuite");
                for required in ["name", "classname", "time"] {
                    assert!(attr(required).is_some(), "testcase lacks {required}");
                }
                cases.push((attr("name").unwrap(), Vec::new()));
            }
            "properties" => assert!(parent == "testcase" || parent == "testsuite", "{parent}"),
            "property" => {
                assert_eq!(parent, "properties");
                let (n, v) = (
                    attr("name").expect("property name"),
                    attr("value").expect("property value"),
                );
                if stack.iter().any(|s| s == "testcase") {
                    cases.last_mut().unwrap().1.push((n, v));
                }
            }
            "failure" => {
                assert_eq!(parent, "testcase");
                failures.push((
                    attr("message").expect("message"),
                    attr("type").expect("type"),
                ));
            }
            "skipped" => {
                assert_eq!(parent, "testcase");
                skipped += 1;
            }
            "system-out" => {
                assert!(parent == "testcase" || parent == "testsuite");
                system_out += 1;
            }
            other => panic!("unexpected element <{other}> in JUnit"),
        }
        if !empty {
            stack.push(name);
        }
    }
    let features: std::collections::BTreeSet<_> = a.scenarios.iter().map(|s| &s.feature).collect();
    assert_eq!(suites, features.len(), "a testsuite per feature");
    assert_eq!(cases.len(), a.scenarios.len(), "a testcase per scenario");
    assert_eq!(declared.0, a.scenarios.len());
    assert_eq!(declared.1, a.count(ScenarioStatus::Failed));
    assert_eq!(failures.len(), a.count(ScenarioStatus::Failed));
    assert_eq!(skipped, a.count(ScenarioStatus::Skipped));
    assert_eq!(
        system_out,
        a.scenarios.len(),
        "every scenario's log is in system-out"
    );
    assert!(
        first_child_of_case.iter().all(|c| c == "properties"),
        "{first_child_of_case:?}"
    );

    // Properties carry the phase timings (ms), the verdict and the snapshot uid.
    let restored = &cases[0].1;
    let prop = |k: &str| {
        restored
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    let expected_ms = a.scenarios[0]
        .phase("resume_to_running")
        .unwrap()
        .as_millis()
        .to_string();
    assert_eq!(
        prop("phase.resume_to_running.ms"),
        Some(expected_ms.as_str())
    );
    assert_eq!(prop("verdict"), Some("Restored"));
    assert_eq!(prop("snapshot.name"), Some(fixture::SNAPSHOT_NAME));
    assert_eq!(prop("snapshot.uid"), Some(fixture::SNAPSHOT_UID));

    // The failure says what went wrong and in which phase.
    let (message, kind) = &failures[0];
    assert!(
        message.contains("budget resume_to_running (300 s) ran out"),
        "{message}"
    );
    assert!(message.contains("in phase resume → scheduled"), "{message}");
    assert_eq!(kind, "phase resume_to_scheduled");
}

#[test]
fn no_file_write_all_writes_contains_a_secret() {
    let token = "wsg-tok-4e9b0a7c1d2f3e5a6b8c9d0e1f2a3b4c";
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("jovyan:{token}"));
    let mut r = fixture::run_a();
    let s = &mut r.scenarios[2];
    s.steps[7].error = Some(format!(
        "GET https://203.0.113.10/workspace/connect/wsgate-test/ws/jupyterlab/api/kernels?token={token} returned 403"
    ));
    s.failure = Some(format!("kernel refused token {token}"));
    s.log.push(format!("Authorization: token {token}"));
    s.log.push(format!("Authorization: Basic {basic}"));
    r.scenarios[0]
        .evidence_after
        .as_mut()
        .unwrap()
        .notes
        .push(format!("reconnected with ?token={token}"));
    r.scenarios[0].timeline.observations[0].detail = Some(format!("token={token}"));
    let dir = tempfile::tempdir().unwrap();
    let step_summary = dir.path().join("step-summary.md");
    let redactor = Redactor::new(vec![token.to_string()]);
    let written = report::write_all_to(&r, dir.path(), &redactor, Some(&step_summary)).unwrap();
    assert_eq!(written.len(), report::FILES.len());
    let mut files = written.clone();
    files.push(step_summary);
    let b64 = base64::engine::general_purpose::STANDARD.encode(token);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(!text.contains(token), "{} contains the token", f.display());
        assert!(!text.contains(&b64), "{} contains its base64", f.display());
        assert!(
            !text.contains(&basic),
            "{} contains the Basic header",
            f.display()
        );
        assert!(
            !text.contains("wsg-tok-"),
            "{} contains part of the token",
            f.display()
        );
        assert!(
            text.contains("[REDACTED]"),
            "{} shows where it redacted",
            f.display()
        );
    }
    // The redacted JSON is still a valid report.
    let back = report::read_report(&written[0]).unwrap();
    assert_eq!(back.scenarios.len(), r.scenarios.len());
}

#[test]
fn the_html_page_is_self_contained_with_a_timeline_per_scenario_and_histograms_for_drills() {
    let a = fixture::run_a();
    let page = report::html::html_page(&a);
    for external in ["src=", "<link", "<script", "url(", "href=\"http", "@import"] {
        assert!(!page.contains(external), "external reference {external}");
    }
    // Every scenario's status is drawn (table row and heading), none needs an emoji font.
    for status in [
        report::ScenarioStatus::Passed,
        report::ScenarioStatus::Failed,
        report::ScenarioStatus::Skipped,
    ] {
        let n = a.scenarios.iter().filter(|s| s.status == status).count();
        assert_eq!(
            page.matches(&format!("data-status=\"{}\"", status.as_str()))
                .count(),
            2 * n,
            "{status:?}"
        );
    }
    let boxes: Vec<char> = page
        .chars()
        .filter(|c| report::html::needs_emoji_font(*c))
        .collect();
    assert!(
        boxes.is_empty(),
        "characters a browser without an emoji font draws as boxes: {boxes:?}"
    );
    let with_timeline = a
        .scenarios
        .iter()
        .filter(|s| !s.timeline.observations.is_empty())
        .count();
    assert_eq!(
        page.matches("<svg class=\"timeline\"").count(),
        with_timeline
    );
    assert!(
        !page.contains("class=\"histogram\""),
        "no histogram for 4 scenarios"
    );
    let drill = fixture::drill(report::html::HISTOGRAM_MIN + 4);
    let page = report::html::html_page(&drill);
    assert!(page.contains("class=\"histogram\""));
    assert!(page.contains(&format!(
        "resume → Running over {} scenarios",
        drill.scenarios.len()
    )));
}

#[test]
fn report_compare_shows_what_got_slower_and_what_started_failing() {
    let (a, b) = (
        fixture_path("nightly-a.json"),
        fixture_path("nightly-b.json"),
    );
    let o = wsgate(&[
        "report",
        "--compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(wsgate::exit_code::FAILED), "{t}");
    assert!(t.contains("Started failing (1):"), "{t}");
    assert!(
        t.contains("The snapshot is deleted before the resume"),
        "{t}"
    );
    assert!(
        t.contains("Verdict changed (1):") && t.contains("FreshSession → Inconclusive"),
        "{t}"
    );
    assert!(
        t.contains("resume → Running 11.6 s → 18.5 s (+6.9 s, +59%)"),
        "{t}"
    );
    assert!(t.contains("Fixed (1):"), "{t}");
    // A larger threshold hides the slowdown, not the failure.
    let o = wsgate(&[
        "report",
        "--compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--threshold",
        "80",
        "--json",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let slower: usize = json["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["slower"].as_array().unwrap().len())
        .sum();
    assert_eq!(slower, 0);
    assert_eq!(o.status.code(), Some(wsgate::exit_code::FAILED));
    let o = wsgate(&[
        "report",
        "--compare",
        a.to_str().unwrap(),
        a.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::SUCCESS),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("No regressions"));
}

#[test]
fn report_re_renders_markdown_and_html_and_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let a = fixture_path("nightly-a.json");
    let o = wsgate(&[
        "report",
        a.to_str().unwrap(),
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let md = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    assert_eq!(md, markdown(&fixture::run_a()));
    assert!(
        std::fs::read_to_string(dir.path().join("report.html"))
            .unwrap()
            .contains("<svg")
    );
    assert!(
        text(&o).contains("resume →") && text(&o).contains("GPU free"),
        "the phase table: {}",
        text(&o)
    );

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"schema_version\": 7}").unwrap();
    for args in [
        vec!["report".to_string(), bad.display().to_string()],
        vec![
            "report".to_string(),
            dir.path().join("missing.json").display().to_string(),
        ],
        vec!["report".to_string()],
        vec!["cost".to_string()],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = wsgate(&args);
        assert_eq!(
            o.status.code(),
            Some(wsgate::exit_code::USAGE),
            "{args:?}: {}",
            text(&o)
        );
    }
    let o = wsgate(&["report", bad.to_str().unwrap()]);
    assert!(text(&o).contains("schema version 7"), "{}", text(&o));
}

#[test]
fn cost_reads_the_cycles_from_a_report() {
    let a = fixture_path("nightly-a.json");
    let o = wsgate(&[
        "cost",
        a.to_str().unwrap(),
        "--active-hours",
        "40",
        "--pauses-per-week",
        "5",
        "--idle-periods",
        "30s,45s,8m,1h,14h",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // Independently: the passed scenarios with both phases, from the fixture itself.
    let run = fixture::run_a();
    let cycles: Vec<_> = run
        .scenarios
        .iter()
        .filter(|s| s.status == ScenarioStatus::Passed)
        .filter_map(|s| Some((s.phase("pause_to_gpu_free")?, s.phase("resume_to_running")?)))
        .collect();
    assert_eq!(json["cycles"].as_array().unwrap().len(), cycles.len());
    let n = cycles.len() as f64;
    let per_cycle: f64 = cycles
        .iter()
        .map(|(p, r)| (p.as_secs_f64() + r.as_secs_f64()) / n)
        .sum();
    let reclaimed = 128.0 - 5.0 * per_cycle / 3600.0;
    let got = json["week"]["reclaimed_gpu_hours"].as_f64().unwrap();
    assert!((got - reclaimed).abs() < 1e-6, "{got} vs {reclaimed}");
    assert_eq!(json["week"]["reclaimed_is_upper_bound"], true);
    assert_eq!(json["break_even"]["idle_periods"], 5);
    assert!(json["week"]["snapshot_gib_days"].as_f64().unwrap() > 0.0);

    let o = wsgate(&[
        "cost",
        a.to_str().unwrap(),
        "--idle-periods",
        "30s,45s,8m,1h,14h",
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("reclaimed") && t.contains("(upper bound)"),
        "{t}"
    );
    assert!(t.contains("← best"), "{t}");

    // A report without a pause/resume cycle is a usage error that says why.
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.json");
    let r = RunReport {
        run_id: "r0".into(),
        ..RunReport::default()
    };
    std::fs::write(&empty, to_json(&r).unwrap()).unwrap();
    let o = wsgate(&["cost", empty.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::USAGE),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("no pause/resume cycle"), "{}", text(&o));
    let o = wsgate(&["cost", a.to_str().unwrap(), "--idle-periods", "soon"]);
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::USAGE),
        "{}",
        text(&o)
    );
}

/// The headless browser the page tests render with: `WSGATE_TEST_BROWSER`, else Debian's
/// `chromium-headless-shell` or `chromium` on the PATH. Under CI one must exist (`.ci/run`
/// installs it); elsewhere the test says it was skipped.
fn browser() -> Option<PathBuf> {
    if let Some(b) = std::env::var_os("WSGATE_TEST_BROWSER") {
        return Some(PathBuf::from(b));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium-headless-shell", "chromium"] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "no headless browser: install Debian's chromium-headless-shell (.ci/run does)"
    );
    eprintln!("SKIPPED: no chromium-headless-shell or chromium on the PATH");
    None
}

/// `page` as the browser loads it: its DOM after parsing, and a screenshot of the first
/// 1200x800 pixels as RGB rows.
fn render(browser: &Path, page: &Path, dir: &Path) -> (String, Vec<[u8; 3]>) {
    let url = format!("file://{}", page.display());
    let common = [
        "--no-sandbox",
        "--disable-gpu",
        "--headless",
        "--hide-scrollbars",
    ];
    let o = crate::common::within(60, browser)
        .args(common)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let dom = String::from_utf8(o.stdout).unwrap();
    let shot = dir.join("shot.png");
    let o = crate::common::within(60, browser)
        .args(common)
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1200,800")
        .arg(&url)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected screenshot colour type {other:?}"),
    };
    let pixels = buf[..info.buffer_size()]
        .chunks_exact(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    (dom, pixels)
}

/// `text` as a browser serialises it in its DOM (only `&`, `<` and `>` escaped).
fn dom_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// How many pixels have exactly the colour `hex` (`#rrggbb`).
fn pixels_of(pixels: &[[u8; 3]], hex: &str) -> usize {
    let v = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap();
    let rgb = [(v >> 16) as u8, (v >> 8) as u8, v as u8];
    pixels.iter().filter(|p| **p == rgb).count()
}

/// The HTML report of a run and a drill's page, as a person sees them: rendered by a
/// headless Chromium with only the distribution's fonts. The status marks are drawn (their
/// colours are in the screenshot; emoji marks came out as empty boxes), and the DOM has
/// every scenario row with its verdict and key phases, and every workspace of the drill.
#[test]
fn the_html_pages_render_in_a_headless_browser_with_every_row_verdict_and_phase() {
    let Some(browser) = browser() else { return };
    let dir = tempfile::tempdir().unwrap();
    let fixture = fixture_path("nightly-b.json");
    let o = wsgate(&[
        "report",
        fixture.to_str().unwrap(),
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let run = report::read_report(&fixture).unwrap();
    let (dom, pixels) = render(&browser, &dir.path().join("report.html"), dir.path());
    let table = &dom[dom.find("<table>").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    assert_eq!(
        table.matches("<tr>").count(),
        run.scenarios.len() + 1,
        "{table}"
    );
    for (i, s) in run.scenarios.iter().enumerate() {
        let row = table.split("<tr>").nth(i + 2).unwrap();
        assert!(row.contains(&dom_text(&s.name)), "{} in {row}", s.name);
        assert!(
            row.contains(&format!("data-status=\"{}\"", s.status.as_str())),
            "{row}"
        );
        if let Some(v) = &s.verdict {
            assert!(
                row.contains(&format!("<td>{}</td>", dom_text(&v.label()))),
                "{row}"
            );
        }
        for (name, _) in report::KEY_PHASES {
            if let Some(d) = s.phase(name) {
                assert!(row.contains(&report::fmt::duration(d)), "{name} in {row}");
            }
        }
    }
    let count =
        |status: ScenarioStatus| run.scenarios.iter().filter(|s| s.status == status).count();
    assert!(count(ScenarioStatus::Passed) > 0 && count(ScenarioStatus::Failed) > 0);
    use report::html::{MARK_FAILED, MARK_PASSED, MARK_SKIPPED};
    for (status, colour) in [
        (ScenarioStatus::Passed, MARK_PASSED),
        (ScenarioStatus::Failed, MARK_FAILED),
        (ScenarioStatus::Skipped, MARK_SKIPPED),
    ] {
        // A 16 px disc is about 200 pixels, less its white stroke.
        let drawn = pixels_of(&pixels, colour);
        assert!(
            drawn >= 60 * count(status),
            "{status:?}: {drawn} pixels of {colour} for {} marks: the marks were not drawn",
            count(status)
        );
    }

    // A drill's page: a real drill of 3 workspaces on 2 GPUs against the simulator.
    let reports = dir.path().join("drill");
    let o = wsgate(&[
        "drill",
        "--workspaces",
        "3",
        "--gpus",
        "2",
        "--sample",
        "0",
        "--set",
        &format!("reports.dir={}", reports.display()),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let run_dir = std::fs::read_dir(&reports)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("drill.json")).unwrap())
            .unwrap();
    let (dom, pixels) = render(&browser, &run_dir.join("drill.html"), dir.path());
    let results = json["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    for r in results {
        let name = r["name"].as_str().unwrap();
        let row = dom
            .split("<tr>")
            .find(|row| row.contains(&format!("<td>{name}</td>")))
            .unwrap_or_else(|| panic!("no row for {name}: {dom}"));
        assert!(row.contains(r["verdict"].as_str().unwrap()), "{row}");
        assert!(row.contains("data-status=\"passed\""), "{row}");
    }
    assert!(dom.contains("3 of 3 ended restored"), "{dom}");
    assert!(
        pixels_of(&pixels, MARK_PASSED) >= 60 * 4,
        "the drill's marks were not drawn"
    );
}

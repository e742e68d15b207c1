//! Loading and checking feature files before anything is created: every file must parse,
//! and every step (Scenario Outline examples expanded) must match exactly one definition.

use std::path::{Path, PathBuf};

use cucumber::gherkin::{self, GherkinEnv};

use super::world::WsWorld;

/// One problem in the feature files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
        }
    }
}

/// The feature files shipped in the binary (`features/` of the source tree at build time),
/// by file name: `wsgate run` without `--features` runs these, wherever it is started.
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "capacity.feature",
        include_str!("../../features/capacity.feature"),
    ),
    (
        "drill.feature",
        include_str!("../../features/drill.feature"),
    ),
    (
        "fresh_session.feature",
        include_str!("../../features/fresh_session.feature"),
    ),
    ("gate.feature", include_str!("../../features/gate.feature")),
    ("idle.feature", include_str!("../../features/idle.feature")),
    (
        "pause_resume.feature",
        include_str!("../../features/pause_resume.feature"),
    ),
    (
        "restore_failure.feature",
        include_str!("../../features/restore_failure.feature"),
    ),
    (
        "snapshots.feature",
        include_str!("../../features/snapshots.feature"),
    ),
    (
        "stateless.feature",
        include_str!("../../features/stateless.feature"),
    ),
];

/// Writes the shipped features into `dir/features/` (cucumber reads files) and returns
/// that directory.
pub fn write_shipped(dir: &Path) -> std::io::Result<PathBuf> {
    let out = dir.join("features");
    std::fs::create_dir_all(&out)?;
    for (name, text) in SHIPPED {
        std::fs::write(out.join(name), text)?;
    }
    Ok(out)
}

/// The feature files under `dir` (sorted), or the one file `dir` names.
pub fn files(dir: &Path) -> Vec<PathBuf> {
    if dir.is_file() {
        return vec![dir.to_path_buf()];
    }
    let mut out: Vec<PathBuf> = walk(dir);
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|e| {
            let p = e.path();
            if p.is_dir() {
                walk(&p)
            } else if p.extension().is_some_and(|x| x == "feature") {
                vec![p]
            } else {
                Vec::new()
            }
        })
        .collect()
}

/// The step texts a scenario runs: each Examples row substituted into `<placeholders>`.
fn expanded(scenario: &gherkin::Scenario) -> Vec<(gherkin::Step, usize)> {
    let rows: Vec<Vec<(String, String)>> = scenario
        .examples
        .iter()
        .filter_map(|ex| ex.table.as_ref())
        .flat_map(|t| {
            let header = t.rows.first().cloned().unwrap_or_default();
            t.rows
                .iter()
                .skip(1)
                .map(move |r| header.iter().cloned().zip(r.iter().cloned()).collect())
                .collect::<Vec<_>>()
        })
        .collect();
    let rows = if rows.is_empty() {
        vec![Vec::new()]
    } else {
        rows
    };
    let mut out = Vec::new();
    for row in rows {
        for step in &scenario.steps {
            let mut s = step.clone();
            let fill = |text: &mut String| {
                for (k, v) in &row {
                    *text = text.replace(&format!("<{k}>"), v);
                }
            };
            fill(&mut s.value);
            if let Some(d) = s.docstring.as_mut() {
                fill(d);
            }
            if let Some(t) = s.table.as_mut() {
                t.rows.iter_mut().flatten().for_each(fill);
            }
            out.push((s, step.position.line));
        }
    }
    out
}

/// The `<placeholders>` an expanded Outline step still holds: names that no Examples table of
/// the scenario has as a column, so cucumber would run the step with the text `<name>` in it.
fn unfilled(step: &gherkin::Step) -> Vec<String> {
    static PLACEHOLDER: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"<([^<>\s][^<>]*)>").expect("a valid pattern")
    });
    let texts = std::iter::once(step.value.as_str())
        .chain(step.docstring.as_deref())
        .chain(
            step.table
                .iter()
                .flat_map(|t| t.rows.iter().flatten().map(String::as_str)),
        );
    let mut names: Vec<String> = texts
        .flat_map(|t| PLACEHOLDER.captures_iter(t).map(|c| c[1].to_string()))
        .collect();
    names.dedup();
    names
}

/// Why the gherkin parser refused `file`, at the line it names where it names one.
fn parse_problem(file: &Path, err: gherkin::ParseFileError) -> Problem {
    match err {
        gherkin::ParseFileError::Reading { source, .. } => Problem {
            file: file.to_path_buf(),
            line: 0,
            message: format!("cannot read the feature file: {source}"),
        },
        gherkin::ParseFileError::Parsing { error, source, .. } => {
            // The parser's error displays as "Error at LINE:COL: {expected tokens}"; the line
            // goes into `line`, and a keyword or table problem it recorded comes first.
            let text = source.to_string();
            let (line, col, expected) = text
                .strip_prefix("Error at ")
                .and_then(|rest| {
                    let (pos, expected) = rest.split_once(": ")?;
                    let (line, col) = pos.split_once(':')?;
                    Some((line.parse().ok()?, col.to_owned(), expected.to_owned()))
                })
                .unwrap_or((0, String::new(), text.clone()));
            let mut message = String::from("malformed feature file: ");
            if let Some(e) = error {
                message.push_str(&format!("{e}; "));
            }
            if col.is_empty() {
                message.push_str(&format!("expected one of {expected}"));
            } else {
                message.push_str(&format!("at column {col}, expected one of {expected}"));
            }
            Problem {
                file: file.to_path_buf(),
                line,
                message,
            }
        }
    }
}

/// The gherkin parser refuses a blank line between a line of tags and what they tag with a
/// baffling "unknown keyword" pointing elsewhere; name that line instead. `None` when the file
/// has no such line.
fn blank_line_after_tags(file: &Path) -> Option<Problem> {
    let text = std::fs::read_to_string(file).ok()?;
    let lines: Vec<&str> = text.lines().collect();
    let i = (1..lines.len())
        .find(|&i| lines[i - 1].trim_start().starts_with('@') && lines[i].trim().is_empty())?;
    Some(Problem {
        file: file.to_path_buf(),
        line: i + 1,
        message: "malformed feature file: a blank line between tags and what they tag (the Gherkin parser refuses it; remove it)".into(),
    })
}

/// Checks every feature file; returns the number of scenarios, or every problem found.
pub fn check(dir: &Path) -> Result<usize, Vec<Problem>> {
    check_with(dir, &<WsWorld as cucumber::World>::collection())
}

/// [`check`] against a given step collection (building one compiles every step's pattern).
fn check_with(
    dir: &Path,
    steps: &cucumber::step::Collection<WsWorld>,
) -> Result<usize, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut scenarios = 0;
    let found = files(dir);
    if found.is_empty() {
        problems.push(Problem {
            file: dir.to_path_buf(),
            line: 0,
            message: "no .feature files found".into(),
        });
    }
    for file in found {
        let feature = match gherkin::Feature::parse_path(&file, GherkinEnv::default()) {
            Ok(f) => f,
            Err(e) => {
                problems
                    .push(blank_line_after_tags(&file).unwrap_or_else(|| parse_problem(&file, e)));
                continue;
            }
        };
        let scenario_count = feature.scenarios.len()
            + feature
                .rules
                .iter()
                .map(|r| r.scenarios.len())
                .sum::<usize>();
        if scenario_count == 0 {
            problems.push(Problem {
                file: file.clone(),
                line: feature.position.line,
                message:
                    "the feature has no scenarios (a misspelt keyword reads as description text)"
                        .into(),
            });
        }
        let background: Vec<gherkin::Step> = feature
            .background
            .iter()
            .flat_map(|b| b.steps.clone())
            .collect();
        let all_scenarios = feature
            .scenarios
            .iter()
            .chain(feature.rules.iter().flat_map(|r| r.scenarios.iter()));
        for scenario in all_scenarios {
            scenarios += 1;
            let outline = matches!(
                scenario.keyword.trim(),
                "Scenario Outline" | "Scenario Template"
            );
            let has_rows = scenario
                .examples
                .iter()
                .any(|e| e.table.as_ref().is_some_and(|t| t.rows.len() > 1));
            if outline && !has_rows {
                problems.push(Problem {
                    file: file.clone(),
                    line: scenario.position.line,
                    message: format!(
                        "{}: {} has no Examples rows, so its <placeholders> are never filled",
                        scenario.keyword.trim(),
                        scenario.name
                    ),
                });
                continue;
            }
            let mut to_check: Vec<(gherkin::Step, usize)> = background
                .iter()
                .map(|s| (s.clone(), s.position.line))
                .collect();
            let steps_of_scenario = expanded(scenario);
            if outline {
                for (step, line) in &steps_of_scenario {
                    for name in unfilled(step) {
                        let p = Problem {
                            file: file.clone(),
                            line: *line,
                            message: format!(
                                "{}: {}: the step uses <{name}>, which no Examples table has as a column",
                                scenario.keyword.trim(),
                                scenario.name
                            ),
                        };
                        if !problems.contains(&p) {
                            problems.push(p);
                        }
                    }
                }
            }
            to_check.extend(steps_of_scenario);
            for (step, line) in to_check {
                let message = match steps.find(&step) {
                    Ok(Some(_)) => continue,
                    Ok(None) => format!("unknown step: {} {}", step.keyword.trim(), step.value),
                    Err(e) => format!(
                        "ambiguous step: {} {} ({e})",
                        step.keyword.trim(),
                        step.value
                    ),
                };
                let p = Problem {
                    file: file.clone(),
                    line,
                    message,
                };
                if !problems.contains(&p) {
                    problems.push(p);
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(scenarios)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    fn check_text(text: &str) -> Result<usize, Vec<Problem>> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("outline.feature"), text).unwrap();
        check(dir.path())
    }

    #[test]
    fn the_shipped_features_are_the_features_directory_and_all_check() {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("features");
        let on_disk: Vec<(String, String)> = files(&source)
            .iter()
            .map(|p| {
                let name = p.strip_prefix(&source).unwrap().display().to_string();
                (name, std::fs::read_to_string(p).unwrap())
            })
            .collect();
        let shipped: Vec<(String, String)> = SHIPPED
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
        assert_eq!(shipped, on_disk, "add every features/*.feature to SHIPPED");
        let dir = tempfile::tempdir().unwrap();
        let written = write_shipped(dir.path()).unwrap();
        assert_eq!(files(&written).len(), SHIPPED.len());
        assert!(check(&written).unwrap() > 0);
    }

    const OUTLINE: &str = "Feature: f
  Scenario Outline: drill <n>
    When a drill resumes <n> paused workspaces at once on <m> GPUs, 0 of them kernel-checked
    Then the verdict is \"<verdict>\"

    Examples:
      | n | m | verdict  |
      | 3 | 1 | Restored |
";

    #[test]
    fn an_outline_whose_placeholders_are_all_columns_passes() {
        assert_eq!(check_text(OUTLINE), Ok(1));
    }

    #[test]
    fn a_placeholder_that_is_no_column_is_named_with_its_line() {
        let text = OUTLINE.replace("\"<verdict>\"", "\"<verdikt>\"");
        let problems = check_text(&text).unwrap_err();
        let unfilled: Vec<_> = problems
            .iter()
            .filter(|p| p.message.contains("<verdikt>"))
            .collect();
        assert_eq!(unfilled.len(), 1, "{problems:?}");
        assert_eq!(unfilled[0].line, 4);
        assert!(
            unfilled[0]
                .message
                .contains("no Examples table has as a column"),
            "{}",
            unfilled[0]
        );
    }

    #[test]
    fn placeholders_in_a_docstring_are_checked_too() {
        let text = OUTLINE.replace(
            "    Then the verdict",
            "    And every workspace ends Restored\n      \"\"\"\n      <missing>\n      \"\"\"\n    Then the verdict",
        );
        let problems = check_text(&text).unwrap_err();
        assert!(
            problems.iter().any(|p| p.message.contains("<missing>")),
            "{problems:?}"
        );
    }

    #[test]
    fn angle_brackets_in_a_plain_scenario_are_text() {
        let text = OUTLINE
            .replace("Scenario Outline: drill <n>", "Scenario: drill")
            .replace(
                "resumes <n> paused workspaces at once on <m> GPUs",
                "resumes 3 paused workspaces at once on 1 GPUs",
            )
            .replace("\"<verdict>\"", "\"<b>\"");
        let text = text.split("\n    Examples:").next().unwrap().to_string() + "\n";
        assert_eq!(check_text(&text), Ok(1));
    }

    fn noop<'a>(
        _: &'a mut WsWorld,
        _: cucumber::step::Context,
    ) -> futures::future::LocalBoxFuture<'a, ()> {
        Box::pin(async {})
    }

    #[test]
    fn a_step_two_definitions_match_is_refused_as_ambiguous_with_its_line() {
        // The real steps plus one more whose pattern also matches a real step's text.
        let steps = <WsWorld as cucumber::World>::collection().given(
            None,
            regex::Regex::new("^a snapshot-enabled GPU workspace is (.+)$").unwrap(),
            noop,
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.feature"),
            "Feature: f\n  Scenario: s\n    Given a snapshot-enabled GPU workspace is Running\n",
        )
        .unwrap();
        let problems = check_with(dir.path(), &steps).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].line, 3);
        assert!(
            problems[0]
                .message
                .starts_with("ambiguous step: Given a snapshot-enabled GPU workspace is Running"),
            "{}",
            problems[0].message
        );
        // The same file against the real steps alone is fine.
        assert_eq!(check(dir.path()), Ok(1));
    }
}

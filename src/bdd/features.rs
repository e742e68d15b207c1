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
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
    }
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
            for (k, v) in &row {
                s.value = s.value.replace(&format!("<{k}>"), v);
            }
            out.push((s, step.position.line));
        }
    }
    out
}

/// Checks every feature file; returns the number of scenarios, or every problem found.
pub fn check(dir: &Path) -> Result<usize, Vec<Problem>> {
    let steps = <WsWorld as cucumber::World>::collection();
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
                problems.push(Problem {
                    file: file.clone(),
                    line: 0,
                    message: format!("malformed feature file: {e}"),
                });
                continue;
            }
        };
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
            let mut to_check: Vec<(gherkin::Step, usize)> = background
                .iter()
                .map(|s| (s.clone(), s.position.line))
                .collect();
            to_check.extend(expanded(scenario));
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

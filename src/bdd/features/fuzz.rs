//! A bounded fuzz of the feature check (256 cases each): arbitrary bytes and mutations of
//! the real `features/*.feature` files give a result, never a panic; every problem names
//! the file (and the line, where the parser gives one); a valid feature stays valid.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;

thread_local! {
    /// Building the step collection compiles every pattern: once per test thread.
    static STEPS: cucumber::step::Collection<WsWorld> = <WsWorld as cucumber::World>::collection();
}

/// The real feature files, by name and bytes.
fn real_features() -> Vec<(String, Vec<u8>)> {
    files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("features"))
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

/// Checks `bytes` as the only feature file of a fresh directory; returns its path too.
fn check_bytes(bytes: &[u8]) -> (PathBuf, Result<usize, Vec<Problem>>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fuzzed.feature");
    std::fs::write(&file, bytes).unwrap();
    let result = STEPS.with(|steps| check_with(dir.path(), steps));
    (file, result, dir)
}

/// Checks `bytes` as a feature file: exactly one problem, at `line`, whose message says one
/// of `says`.
fn one_problem_at(bytes: &[u8], line: usize, says: &[&str]) {
    let (file, result, _dir) = check_bytes(bytes);
    let problems = result.unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        (problems[0].file.as_path(), problems[0].line),
        (file.as_path(), line)
    );
    assert!(
        says.iter().any(|w| problems[0].message.contains(w)),
        "{}",
        problems[0]
    );
}

/// What every refusal must be: at least one problem, each naming the file and saying what is
/// wrong; a parse error carries the parser's line.
fn assert_well_formed(file: &Path, result: &Result<usize, Vec<Problem>>) {
    let Err(problems) = result else { return };
    assert!(!problems.is_empty(), "a refusal names at least one problem");
    for p in problems {
        assert_eq!(p.file, file, "{p}");
        assert!(!p.message.trim().is_empty(), "{p}");
        assert!(p.to_string().contains("fuzzed.feature"), "{p}");
        if p.message.starts_with("malformed feature file") || p.message.starts_with("unknown step")
        {
            assert!(p.line > 0, "the parser gave a line: {p}");
        }
    }
}

/// One edit of a feature file's lines.
#[derive(Debug, Clone)]
enum Mutation {
    Truncate(usize),
    InsertLine(usize, String),
    Reindent(usize, String),
    DropLine(usize),
    DuplicateLine(usize),
    OutlineWithoutExamples,
    InvalidUtf8(usize),
    HugeLine(usize, usize),
}

fn junk_line() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,40}",
        "[ \t]{0,6}(Feature|Scenario|Scenario Outline|Examples|Background|Rule|Given|When|Then|And|But|\\*|Wenn|Szenario|Scenarios|Example)[:]?[ a-z<>\"|]{0,20}",
        "[ \t]{0,6}\\|[ a-z|]{0,12}",
        "[ \t]{0,6}(\"\"\"|```)[a-z]{0,5}",
        "[ \t]{0,6}@[a-z@ ]{0,10}",
        "# language: [a-z-]{0,6}",
        Just("Feature: a second feature".to_owned()),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), junk_line()).prop_map(|(i, l)| Mutation::InsertLine(i, l)),
        (any::<usize>(), "[ \t]{0,12}").prop_map(|(i, s)| Mutation::Reindent(i, s)),
        any::<usize>().prop_map(Mutation::DropLine),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        Just(Mutation::OutlineWithoutExamples),
        any::<usize>().prop_map(Mutation::InvalidUtf8),
        (any::<usize>(), 1_000usize..20_000).prop_map(|(i, n)| Mutation::HugeLine(i, n)),
    ]
}

fn apply(bytes: Vec<u8>, m: &Mutation) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = bytes.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    let at = |i: usize, len: usize| i % len.max(1);
    match m {
        Mutation::Truncate(i) => {
            let mut b = bytes;
            let cut = at(*i, b.len() + 1);
            b.truncate(cut);
            return b;
        }
        Mutation::InsertLine(i, l) => {
            let i = at(*i, lines.len() + 1);
            lines.insert(i, l.clone().into_bytes());
        }
        Mutation::Reindent(i, indent) => {
            let i = at(*i, lines.len());
            let trimmed: Vec<u8> = lines[i].trim_ascii_start().to_vec();
            lines[i] = [indent.as_bytes(), &trimmed].concat();
        }
        Mutation::DropLine(i) => {
            let i = at(*i, lines.len());
            lines.remove(i);
        }
        Mutation::DuplicateLine(i) => {
            let i = at(*i, lines.len());
            let l = lines[i].clone();
            lines.insert(i, l);
        }
        Mutation::OutlineWithoutExamples => {
            let text = String::from_utf8_lossy(&bytes)
                .replace("Scenario:", "Scenario Outline:")
                .replace("\"Restored\"", "\"<verdict>\"");
            return text.into_bytes();
        }
        Mutation::InvalidUtf8(i) => {
            let i = at(*i, lines.len());
            lines[i].extend_from_slice(&[0xff, 0xfe, 0xc3]);
        }
        Mutation::HugeLine(i, n) => {
            let i = at(*i, lines.len() + 1);
            lines.insert(i, format!("    And {}", "x".repeat(*n)).into_bytes());
        }
    }
    lines.join(&b'\n')
}

/// Edits that keep a feature's meaning: comments, blank lines, trailing spaces, extra tags.
fn harmless() -> impl Strategy<Value = (usize, String)> {
    (
        any::<usize>(),
        prop_oneof![
            Just(String::new()),
            "  # [a-z ]{0,20}",
            "[ ]{0,4}",
            Just("  # language: en".to_owned()),
        ],
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any bytes as a feature file: a result, never a panic; every problem names the file.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let (file, result, _dir) = check_bytes(&bytes);
        assert_well_formed(&file, &result);
    }

    /// Any text that looks like Gherkin: a result, never a panic.
    #[test]
    fn arbitrary_gherkin_lines_never_panic(lines in proptest::collection::vec(junk_line(), 0..20)) {
        let (file, result, _dir) = check_bytes(lines.join("\n").as_bytes());
        assert_well_formed(&file, &result);
    }

    /// Mutated real features: a result, never a panic; every problem names the file.
    #[test]
    fn mutated_real_features_never_panic(
        pick in any::<usize>(),
        edits in proptest::collection::vec(mutation(), 1..4),
    ) {
        let features = real_features();
        let (_, original) = &features[pick % features.len()];
        let bytes = edits.iter().fold(original.clone(), apply);
        let (file, result, _dir) = check_bytes(&bytes);
        assert_well_formed(&file, &result);
    }

    /// Meaning-preserving edits of a real feature keep it valid, with the same scenarios.
    #[test]
    fn valid_features_stay_valid(
        pick in any::<usize>(),
        edits in proptest::collection::vec(harmless(), 0..4),
    ) {
        let features = real_features();
        let (name, original) = &features[pick % features.len()];
        let (_, before, _dir) = check_bytes(original);
        let count = before.unwrap_or_else(|p| panic!("{name} is valid: {p:?}"));
        let text = String::from_utf8(original.clone()).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        for (i, edit) in &edits {
            // After the Feature line, so the first line stays the feature's tags or keyword.
            let i = 1 + i % lines.len();
            // A blank line right after tags is a parser limitation with its own test below.
            let after_tags = lines[i - 1].trim_start().starts_with('@');
            if after_tags {
                continue;
            }
            if edit.trim_start().starts_with('#') || edit.trim().is_empty() {
                lines.insert(i, edit.clone());
            } else {
                lines[i - 1].push_str(edit);
            }
        }
        let (_, after, _dir) = check_bytes(lines.join("\n").as_bytes());
        prop_assert_eq!(after, Ok(count), "{} after {:?}", name, edits);
    }
}

/// Every real feature file passes the check on its own.
#[test]
fn every_real_feature_is_valid() {
    for (name, bytes) in real_features() {
        let (_, result, _dir) = check_bytes(&bytes);
        assert!(result.is_ok(), "{name}: {result:?}");
    }
}

/// Regression: a parse error used to be reported at line 0 with only "Could not parse
/// feature file"; it now names the parser's line and what it expected.
#[test]
fn a_parse_error_names_its_line() {
    let text = "Feature: f\n\n  Scenario: s\n    Given a snapshot-enabled GPU workspace is Running\n      | a | b |\n      | c |\n";
    let (file, result, _dir) = check_bytes(text.as_bytes());
    let problems = result.unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].file, file);
    assert!(problems[0].line > 0, "{}", problems[0]);
    assert!(problems[0].message.contains("expected"), "{}", problems[0]);
}

/// Regression: a file that is not UTF-8 used to say only "Could not read path"; it now says
/// why, and prints no fake line 0.
#[test]
fn a_non_utf8_file_says_why() {
    let (file, result, _dir) = check_bytes(b"Feature: \xff\xfe\n");
    let problems = result.unwrap_err();
    assert_eq!(problems[0].file, file);
    let shown = problems[0].to_string();
    assert!(shown.contains("UTF-8"), "{shown}");
    assert!(!shown.contains(":0:"), "{shown}");
}

/// Regression (found by `valid_features_stay_valid`): a line of spaces between the tags and
/// the Feature line made the parser report an "unknown keyword" at a line further down; the
/// problem now names the blank line.
#[test]
fn a_blank_line_after_tags_is_named() {
    let (file, result, _dir) = check_bytes(
        b"@gate @gpu\n \nFeature: f\n\n  Scenario: s\n    Given a snapshot-enabled GPU workspace is Running\n",
    );
    let problems = result.unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        (problems[0].file.as_path(), problems[0].line),
        (file.as_path(), 2)
    );
    assert!(
        problems[0].message.contains("after") || problems[0].message.contains("between"),
        "{}",
        problems[0]
    );
}

/// A misspelt keyword is description text to Gherkin: a feature left with no scenarios is
/// refused, at its Feature line, instead of passing as an empty suite.
#[test]
fn a_feature_without_scenarios_is_refused() {
    one_problem_at(
        b"# a comment\nFeature: f\n  Szenario: s\n    Wenn something\n",
        2,
        &["no scenarios"],
    );
}

/// Found while fuzzing: a Scenario Outline without Examples passed the check and would have
/// run its steps with literal `<placeholders>`; it is refused at the outline's line.
#[test]
fn an_outline_without_examples_is_refused() {
    one_problem_at(
        b"Feature: f\n  Scenario Outline: o\n    Then the verdict is \"<verdict>\"\n",
        2,
        &["Examples"],
    );
}

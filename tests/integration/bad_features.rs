//! `wsgate run` over a directory of malformed features: the usage exit code and a message
//! naming each bad file (with its line), before any target is started; never a panic.

/// Files each broken in its own way; every one must be named in the output.
const BAD: &[(&str, &[u8])] = &[
    ("truncated.feature", b"Feature: cut\n  Scenario: s\n    Given a snapshot-enabled GPU wor"),
    ("junk.feature", b"Feature: junk\n  Scenario: s\n    Given a snapshot-enabled GPU workspace is Running\n  }}}{{{ not gherkin\n"),
    ("keyword.feature", b"Feature: keyword\n  Scenario: s\n    Given a snapshot-enabled GPU workspace is Running\n  Szenario: unknown keyword\n    Wenn something\n"),
    ("empty.feature", b"Feature: only a description\n  Szenario: read as description text\n    Wenn something\n"),
    ("outline.feature", b"Feature: outline\n  Scenario Outline: no examples\n    Then the verdict is \"<verdict>\"\n"),
    ("placeholder.feature", b"Feature: placeholder\n  Scenario Outline: misspelt\n    Then the verdict is \"<verdikt>\"\n\n    Examples:\n      | verdict  |\n      | Restored |\n"),
    ("binary.feature", b"Feature: \xff\xfe\x00 not utf-8\n"),
    ("unknown.feature", b"Feature: unknown step\n  Scenario: s\n    Given a step nobody defined\n"),
];

#[test]
fn malformed_features_are_a_usage_error_naming_each_file() {
    let dir = tempfile::tempdir().unwrap();
    let features = dir.path().join("features");
    std::fs::create_dir(&features).unwrap();
    for (name, bytes) in BAD {
        std::fs::write(features.join(name), bytes).unwrap();
    }
    let out = crate::common::within(crate::common::COMMAND_LIMIT_S, env!("CARGO_BIN_EXE_wsgate"))
        .current_dir(dir.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("GITHUB_STEP_SUMMARY")
        .args(["run", "--features", "features", "--reports"])
        .arg(dir.path().join("reports"))
        .output()
        .unwrap();
    let text = crate::common::text(&out);
    assert_eq!(out.status.code(), Some(wsgate::exit_code::USAGE), "{text}");
    assert!(!text.contains("panicked"), "{text}");
    assert!(text.contains("nothing was created"), "{text}");
    assert!(
        !text.contains("target:"),
        "no target is started before the features pass: {text}"
    );
    for (name, _) in BAD {
        assert!(
            text.contains(&format!("features/{name}")),
            "{name} is not named:\n{text}"
        );
    }
    // Where the parser or the step check gives a line, the message carries it.
    assert!(
        text.contains("features/unknown.feature:3: unknown step"),
        "{text}"
    );
    assert!(
        text.contains("features/keyword.feature:4:"),
        "the line of the unknown keyword:\n{text}"
    );
    assert!(
        text.contains(
            "features/placeholder.feature:3: Scenario Outline: misspelt: the step uses <verdikt>"
        ),
        "an Outline placeholder with no Examples column:\n{text}"
    );
    assert!(
        text.contains("UTF-8"),
        "why binary.feature is refused:\n{text}"
    );
}

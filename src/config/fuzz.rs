//! A bounded fuzz of the loader (256 cases each): bad configuration is an error, never a panic.

use std::path::Path;

use proptest::prelude::*;

use super::*;

fn with_profile(text: &str) -> Result<Resolved, ConfigError> {
    resolve(
        Some((Path::new("fixtures/profiles/fuzz.toml"), text)),
        &[],
        &[],
    )
}

fn any_spec() -> impl Strategy<Value = &'static schema::KeySpec> {
    (0..schema::KEYS.len()).prop_map(|i| &schema::KEYS[i])
}

/// Sections and keys, known and not, for the structured fuzz below.
fn key_names() -> impl Strategy<Value = (String, String)> {
    let known = any_spec().prop_map(|s| (s.section.to_owned(), s.key.to_owned()));
    prop_oneof![4 => known, 1 => ("[a-z]{1,8}", "[a-z_]{1,12}")]
}

/// TOML values of every type, including hostile ones.
fn values() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|x| format!("{x:?}").replace("NaN", "nan")),
        any::<bool>().prop_map(|b| b.to_string()),
        "[a-z0-9@ ._()-]{0,20}".prop_map(|s| format!("{s:?}")),
        proptest::sample::select(schema::MODELS).prop_map(|s| format!("{s:?}")),
        proptest::sample::select(schema::REPORT_FORMATS).prop_map(|s| format!("[{s:?}]")),
        Just("[]".to_owned()),
        Just("{ a = 1 }".to_owned()),
        Just("1979-05-27T07:32:00Z".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any text as a profile: a result, never a panic; every error names its source.
    #[test]
    fn arbitrary_profile_text_never_panics(text in "\\PC{0,200}") {
        if let Err(err) = with_profile(&text) {
            prop_assert!(!err.to_string().is_empty());
        }
    }

    /// Well-formed profiles with arbitrary keys and values: errors name the key they are about.
    #[test]
    fn arbitrary_tables_never_panic(entries in proptest::collection::vec((key_names(), values()), 0..8)) {
        let text: String = entries
            .iter()
            .map(|((section, key), value)| format!("[{section}]\n{key} = {value}\n"))
            .collect();
        // Repeated sections are a TOML error; that too must be an error, not a panic.
        match with_profile(&text) {
            Ok(resolved) => prop_assert!(!resolved.render().is_empty()),
            Err(ConfigError::Parse { .. } | ConfigError::UnknownKey { .. }) => {}
            Err(err) => {
                let key = err.key().unwrap_or_default().to_owned();
                prop_assert!(
                    entries.iter().any(|((s, k), _)| key == format!("{s}.{k}") || key == "workspace.model"),
                    "{} does not name a key it was given", err
                );
            }
        }
    }

    /// Any text in any config variable or flag: a result, never a panic.
    #[test]
    fn arbitrary_env_and_flag_values_never_panic(
        spec in any_spec(),
        raw in "\\PC{0,40}",
    ) {
        let _ = resolve(None, &[(spec.env_var(), raw.clone())], &[]);
        let _ = resolve(None, &[], &[Override::new(spec.dotted(), raw, "--set")]);
    }
}

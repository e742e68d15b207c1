//! Loader tests: defaults, precedence, errors naming key and source, provenance.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

fn env(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn with_profile(text: &str) -> Result<Resolved, ConfigError> {
    resolve(
        Some((Path::new("fixtures/profiles/test.toml"), text)),
        &[],
        &[],
    )
}

fn secs(s: u64) -> Budget {
    Budget::from_secs_f64(s as f64).unwrap()
}

fn profile_origin() -> Origin {
    Origin::Profile(PathBuf::from("fixtures/profiles/test.toml"))
}

#[test]
fn defaults_parse_and_validate() {
    let resolved = load(&LoadRequest::default()).unwrap();
    assert_eq!(resolved.layers.len(), 1);
    assert!(resolved.warnings.is_empty(), "{:?}", resolved.warnings);
    let config = &resolved.config;
    assert_eq!(config.target.kind, TargetKind::Sim);
    assert_eq!(config.target.kubeconfig, None);
    assert!(!config.target.insecure_skip_tls_verify);
    assert_eq!(config.reports.formats, ReportFormat::ALL);
}

#[test]
fn defaults_document_every_key_with_its_env_var() {
    let doc: toml::Table = toml::from_str(DEFAULTS).unwrap();
    for spec in schema::KEYS {
        let set = doc
            .get(spec.section)
            .and_then(|s| s.get(spec.key))
            .is_some();
        assert_eq!(set, !spec.optional, "{} set in defaults", spec.dotted());
        if spec.optional {
            let commented = format!("# {} = ", spec.key);
            assert!(
                DEFAULTS.contains(&commented),
                "{} shown commented out",
                spec.dotted()
            );
        }
        assert!(
            DEFAULTS.contains(&spec.env_var()) || spec.section == "budgets",
            "{} names {}",
            spec.dotted(),
            spec.env_var()
        );
    }
    // The budgets share one flag; each still names its own variable.
    for (phase, _) in load(&LoadRequest::default())
        .unwrap()
        .config
        .budgets
        .named()
    {
        assert!(DEFAULTS.contains(&format!("WSGATE_BUDGETS__{}", phase.to_ascii_uppercase())));
    }
}

#[test]
fn schema_and_config_types_agree() {
    let mut config = load(&LoadRequest::default()).unwrap().config;
    config.target.kubeconfig = Some("k".into());
    config.target.context = Some("c".into());
    config.run.tags = Some("@a".into());
    config.run.name = Some("n".into());
    let table = toml::Table::try_from(&config).unwrap();
    let mut from_types: Vec<String> = table
        .iter()
        .flat_map(|(section, keys)| {
            let keys = keys.as_table().unwrap();
            keys.keys().map(move |k| format!("{section}.{k}"))
        })
        .collect();
    let mut from_schema: Vec<String> = schema::KEYS.iter().map(|s| s.dotted()).collect();
    from_types.sort();
    from_schema.sort();
    assert_eq!(from_types, from_schema);
    let sections: Vec<&str> = table.keys().map(String::as_str).collect();
    let mut expected = schema::SECTIONS.to_vec();
    expected.sort();
    assert_eq!(sections, expected);

    let spell = |all: Vec<&'static str>| all;
    assert_eq!(
        spell(TargetKind::ALL.iter().map(|v| v.as_str()).collect()),
        schema::TARGET_KINDS
    );
    assert_eq!(
        spell(SimRuntime::ALL.iter().map(|v| v.as_str()).collect()),
        schema::SIM_RUNTIMES
    );
    assert_eq!(
        spell(Model::ALL.iter().map(|v| v.as_str()).collect()),
        schema::MODELS
    );
    assert_eq!(
        spell(SqueezeMethod::ALL.iter().map(|v| v.as_str()).collect()),
        schema::SQUEEZE_METHODS
    );
    assert_eq!(
        spell(SessionConnect::ALL.iter().map(|v| v.as_str()).collect()),
        schema::SESSION_CONNECT
    );
    assert_eq!(
        spell(Keep::ALL.iter().map(|v| v.as_str()).collect()),
        schema::KEEP
    );
    assert_eq!(
        spell(ReportFormat::ALL.iter().map(|v| v.as_str()).collect()),
        schema::REPORT_FORMATS
    );
}

#[test]
fn profile_overrides_defaults_and_tables_merge() {
    let resolved = with_profile("[budgets]\ncell = 5\n[run]\nkeep = \"failed\"\n").unwrap();
    let config = &resolved.config;
    assert_eq!(config.budgets.cell, secs(5));
    assert_eq!(config.run.keep, Keep::Failed);
    // Keys the profile leaves out of a section it touches keep their defaults.
    let defaults = load(&LoadRequest::default()).unwrap().config;
    assert_eq!(config.budgets.model_load, defaults.budgets.model_load);
    assert_eq!(resolved.origin("budgets.cell"), Some(&profile_origin()));
    assert_eq!(
        resolved.origin("budgets.model_load"),
        Some(&Origin::Defaults)
    );
    assert_eq!(resolved.layers.len(), 2);
}

#[test]
fn env_overrides_profile() {
    let vars = env(&[
        ("WSGATE_RUN__KEEP", "always"),
        ("WSGATE_BUDGETS__CELL", "2.5"),
    ]);
    let resolved = resolve(
        Some((
            Path::new("p.toml"),
            "[run]\nkeep = \"failed\"\n[budgets]\ncell = 5\n",
        )),
        &vars,
        &[],
    )
    .unwrap();
    assert_eq!(resolved.config.run.keep, Keep::Always);
    assert_eq!(
        resolved.config.budgets.cell.duration(),
        Duration::from_millis(2500)
    );
    assert_eq!(
        resolved.origin("run.keep"),
        Some(&Origin::Env("WSGATE_RUN__KEEP".into()))
    );
}

#[test]
fn flag_overrides_env_and_later_flags_win() {
    let vars = env(&[
        ("WSGATE_RUN__KEEP", "always"),
        ("WSGATE_RUN__CONCURRENCY", "4"),
    ]);
    let overrides = [
        Override::new("run.keep", "failed", "--keep"),
        Override::new("run.keep", "never", "--set"),
        Override::new("reports.formats", "junit,json", "--format"),
    ];
    let resolved = resolve(None, &vars, &overrides).unwrap();
    assert_eq!(resolved.config.run.keep, Keep::Never);
    assert_eq!(resolved.config.run.concurrency, 4);
    assert_eq!(
        resolved.config.reports.formats,
        [ReportFormat::Junit, ReportFormat::Json]
    );
    assert_eq!(
        resolved.origin("run.keep"),
        Some(&Origin::Flag("--set".into()))
    );
    assert_eq!(resolved.layers.len(), 3);
}

#[test]
fn string_keys_take_flag_text_verbatim() {
    let overrides = [Override::new(
        "workspace.pod_config",
        "1234",
        "--pod-config",
    )];
    let resolved = resolve(None, &[], &overrides).unwrap();
    assert_eq!(resolved.config.workspace.pod_config, "1234");
}

#[test]
fn unknown_key_in_profile_names_file_and_key() {
    let err = with_profile("[budgets]\nresume_to_runing = 30\n").unwrap_err();
    let ConfigError::UnknownKey { key, origin, hint } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(key, "budgets.resume_to_runing");
    assert_eq!(origin, &profile_origin());
    assert!(
        hint.contains("did you mean `budgets.resume_to_running`"),
        "{hint}"
    );
    let msg = err.to_string();
    assert!(msg.contains("fixtures/profiles/test.toml"), "{msg}");
    assert_eq!(err.exit_code(), crate::exit_code::USAGE);
}

#[test]
fn unknown_section_and_non_table_section_are_named() {
    let err = with_profile("[budget]\ncell = 3\n").unwrap_err();
    assert!(
        matches!(&err, ConfigError::UnknownKey { key, .. } if key == "budget"),
        "{err:?}"
    );
    assert!(err.to_string().contains("did you mean [budgets]"), "{err}");
    let err = with_profile("keep = \"never\"\n").unwrap_err();
    assert!(
        matches!(&err, ConfigError::UnknownKey { key, .. } if key == "keep"),
        "{err:?}"
    );
    let err = with_profile("run = 3\n").unwrap_err();
    assert!(
        matches!(&err, ConfigError::WrongType { key, .. } if key == "run"),
        "{err:?}"
    );
}

#[test]
fn unknown_env_var_is_named() {
    let err = resolve(None, &env(&[("WSGATE_BUDGETS__RESUME", "30")]), &[]).unwrap_err();
    let ConfigError::UnknownEnv { var, hint } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(var, "WSGATE_BUDGETS__RESUME");
    assert!(hint.contains("resume_to_running"), "{hint}");
    let err = resolve(None, &env(&[("WSGATE_NOPE__X", "1")]), &[]).unwrap_err();
    assert!(err.to_string().contains("WSGATE_NOPE__X"), "{err}");
    // Documented non-config variables are ignored.
    let vars: Vec<(String, String)> = NON_CONFIG_ENV
        .iter()
        .map(|(name, _)| ((*name).to_owned(), "x".to_owned()))
        .collect();
    assert_eq!(resolve(None, &vars, &[]).unwrap().layers.len(), 1);
}

#[test]
fn unknown_flag_key_is_named() {
    let err = resolve(None, &[], &[Override::new("run.kepe", "never", "--set")]).unwrap_err();
    assert!(
        matches!(&err, ConfigError::UnknownKey { key, origin, .. }
            if key == "run.kepe" && *origin == Origin::Flag("--set".into())),
        "{err:?}"
    );
}

#[test]
fn wrong_type_is_named_with_its_source() {
    let err = with_profile("[run]\nconcurrency = \"four\"\n").unwrap_err();
    let ConfigError::WrongType {
        key,
        origin,
        expected,
        found,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(key, "run.concurrency");
    assert_eq!(origin, &profile_origin());
    assert!(expected.contains("integer"), "{expected}");
    assert!(found.contains("four"), "{found}");

    let err = resolve(None, &env(&[("WSGATE_BUDGETS__CELL", "ten")]), &[]).unwrap_err();
    assert!(
        matches!(&err, ConfigError::WrongType { key, origin, .. }
            if key == "budgets.cell" && *origin == Origin::Env("WSGATE_BUDGETS__CELL".into())),
        "{err:?}"
    );
    let err = with_profile("[target]\ninsecure_skip_tls_verify = \"yes\"\n").unwrap_err();
    assert_eq!(err.key(), Some("target.insecure_skip_tls_verify"));
    let err = with_profile("[reports]\nformats = [1, 2]\n").unwrap_err();
    assert!(matches!(err, ConfigError::WrongType { .. }), "{err:?}");
}

#[test]
fn zero_and_negative_budgets_are_rejected_in_every_layer() {
    for text in [
        "[budgets]\ncell = 0\n",
        "[budgets]\ncell = -5\n",
        "[budgets]\ncell = -0.5\n",
        "[budgets]\ncell = nan\n",
    ] {
        let err = with_profile(text).unwrap_err();
        assert!(
            matches!(&err, ConfigError::Invalid { key, origin, .. }
                if key == "budgets.cell" && *origin == profile_origin()),
            "{text}: {err:?}"
        );
    }
    let err = resolve(None, &env(&[("WSGATE_BUDGETS__DELETE", "0")]), &[]).unwrap_err();
    assert!(err.to_string().contains("WSGATE_BUDGETS__DELETE"), "{err}");
    let err = resolve(
        None,
        &[],
        &[Override::new("budgets.resume_to_running", "-1", "--set")],
    )
    .unwrap_err();
    assert!(
        matches!(&err, ConfigError::Invalid { key, .. } if key == "budgets.resume_to_running"),
        "{err:?}"
    );
    let err = with_profile("[run]\nconcurrency = 0\n").unwrap_err();
    assert_eq!(err.key(), Some("run.concurrency"));
    let err = with_profile("[run]\nexpiry_hours = -1\n").unwrap_err();
    assert_eq!(err.key(), Some("run.expiry_hours"));
}

#[test]
fn out_of_set_values_are_invalid_with_a_suggestion() {
    let err = resolve(None, &[], &[Override::new("run.keep", "faild", "--keep")]).unwrap_err();
    assert!(err.to_string().contains("did you mean \"failed\""), "{err}");
    for text in [
        "[reports]\nformats = []\n",
        "[reports]\nformats = [\"json\", \"json\"]\n",
        "[reports]\nformats = [\"pdf\"]\n",
        "[target]\nnamespace = \"Not_A_Namespace\"\n",
        "[workspace]\nhome_pvc_size = \"10GB\"\n",
        "[run]\ntags = \"@a and\"\n",
        "[run]\nname = \"(unclosed\"\n",
        "[target]\ncontext = \"\"\n",
        "[target]\ncontext = \"a\\nb\"\n",
    ] {
        let err = with_profile(text).unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { .. }),
            "{text}: {err:?}"
        );
    }
}

#[test]
fn broken_toml_and_missing_profile_are_usage_errors() {
    let err = with_profile("[budgets\n").unwrap_err();
    assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
    assert_eq!(err.exit_code(), crate::exit_code::USAGE);
    let request = LoadRequest {
        profile: Some("no/such/profile.toml".into()),
        ..LoadRequest::default()
    };
    let err = load(&request).unwrap_err();
    assert!(
        matches!(err, ConfigError::ProfileNotFound { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("no/such/profile.toml"), "{err}");
}

#[test]
fn profile_by_name_and_by_path() {
    let by_name = LoadRequest {
        profile: Some("sim-default".into()),
        ..LoadRequest::default()
    };
    let resolved = load(&by_name).unwrap();
    assert_eq!(
        resolved.origin("target.kind"),
        Some(&Origin::Profile(super::profile::shipped_origin(
            "sim-default"
        )))
    );
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, b"[run]\nconcurrency = 3\n").unwrap();
    let by_path = LoadRequest {
        profile: Some(file.path().to_path_buf()),
        ..LoadRequest::default()
    };
    assert_eq!(load(&by_path).unwrap().config.run.concurrency, 3);
}

#[test]
fn contradictions_name_the_key_and_warnings_are_loud() {
    let err = resolve(
        None,
        &[],
        &[Override::new("workspace.model", "qwen2.5-3b-t4", "--model")],
    )
    .unwrap_err();
    assert!(
        matches!(&err, ConfigError::Invalid { key, origin, .. }
            if key == "workspace.model" && *origin == Origin::Flag("--model".into())),
        "{err:?}"
    );
    let vars = env(&[("WSGATE_TARGET__INSECURE_SKIP_TLS_VERIFY", "true")]);
    let resolved = resolve(None, &vars, &[]).unwrap();
    assert_eq!(resolved.warnings.len(), 1);
    assert!(
        resolved.warnings[0].contains("NOT verified"),
        "{:?}",
        resolved.warnings
    );
    assert!(
        resolved
            .render()
            .contains("# WARNING: target.insecure_skip_tls_verify")
    );
}

#[test]
fn render_shows_provenance_and_reloads_to_the_same_config() {
    let vars = env(&[("WSGATE_RUN__KEEP", "failed")]);
    let overrides = [Override::new("budgets.cell", "12.5", "--set")];
    let resolved = resolve(
        Some((
            Path::new("fixtures/profiles/x.toml"),
            "[run]\nconcurrency = 2\n",
        )),
        &vars,
        &overrides,
    )
    .unwrap();
    let text = resolved.render();
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{key} =")))
            .unwrap_or_else(|| panic!("{key} in\n{text}"))
    };
    assert!(line("keep").ends_with("# env WSGATE_RUN__KEEP"), "{text}");
    assert!(line("cell").ends_with("# flag --set"), "{text}");
    assert!(
        line("concurrency").ends_with("# profile fixtures/profiles/x.toml"),
        "{text}"
    );
    assert!(line("namespace").ends_with("# defaults"), "{text}");
    assert!(text.contains("# kubeconfig ="), "{text}");

    let reloaded = resolve(Some((Path::new("rendered.toml"), &text)), &[], &[]).unwrap();
    assert_eq!(reloaded.config, resolved.config);
}

#[test]
fn set_assignments_split_at_the_first_equals() {
    let o = Override::from_assignment("run.name=a=b", "--set").unwrap();
    assert_eq!((o.key.as_str(), o.value.as_str()), ("run.name", "a=b"));
    assert!(Override::from_assignment("novalue", "--set").is_err());
}

#[test]
fn api_retry_keys_load_override_and_check_each_other() {
    let api = load(&LoadRequest::default()).unwrap().config.api;
    assert_eq!(api.retry_attempts, 5);
    assert_eq!(api.retry_backoff.duration(), Duration::from_millis(200));
    assert_eq!(api.retry_max_backoff, secs(5));

    let vars = env(&[("WSGATE_API__RETRY_ATTEMPTS", "3")]);
    let flags = [Override::new("api.retry_backoff", "0.05", "--set")];
    let config = resolve(None, &vars, &flags).unwrap().config;
    assert_eq!(config.api.retry_attempts, 3);
    assert_eq!(
        config.api.retry_backoff.duration(),
        Duration::from_millis(50)
    );

    let err = with_profile("[api]\nretry_attempts = 0\n").unwrap_err();
    assert_eq!(err.key(), Some("api.retry_attempts"), "{err:?}");
    let err = with_profile("[api]\nretries = 3\n").unwrap_err();
    assert!(
        matches!(&err, ConfigError::UnknownKey { key, .. } if key == "api.retries"),
        "{err:?}"
    );
    let err = with_profile("[api]\nretry_backoff = 10\nretry_max_backoff = 2\n").unwrap_err();
    assert!(
        matches!(&err, ConfigError::Invalid { key, origin, .. }
            if key == "api.retry_max_backoff" && *origin == profile_origin()),
        "{err:?}"
    );
    let resolved = with_profile("[api]\nretry_backoff = 0.1\nretry_max_backoff = 0.5\n").unwrap();
    assert!(
        resolved.warnings.iter().any(|w| w.contains("Retry-After")),
        "{:?}",
        resolved.warnings
    );
}

//! The shipped profiles: every `fixtures/profiles/*.toml` loads cleanly over the embedded
//! defaults, and every key it sets takes effect. Iterates the directory, so a new or broken
//! profile is tested without editing this file.

use std::path::{Path, PathBuf};

use wsgate::config::{self, LoadRequest, Model, Origin, TargetKind};

fn profiles() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(config::PROFILES_DIR)
        .expect("fixtures/profiles exists")
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    paths.sort();
    paths
}

fn load(path: &Path) -> config::Resolved {
    let request = LoadRequest {
        profile: Some(path.to_path_buf()),
        ..LoadRequest::default()
    };
    config::load(&request).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

#[test]
fn every_profile_loads_cleanly_and_its_keys_take_effect() {
    wsgate::install_crypto_provider();
    let paths = profiles();
    for name in [
        "sim-default",
        "nightly",
        "release-gate",
        "capacity-drill",
        "gke-t4",
    ] {
        assert!(
            paths
                .iter()
                .any(|p| p.file_stem().is_some_and(|s| s == name)),
            "fixtures/profiles/{name}.toml is missing"
        );
    }
    for path in &paths {
        let resolved = load(path);
        assert!(
            resolved.warnings.is_empty(),
            "{}: shipped profiles load without warnings: {:?}",
            path.display(),
            resolved.warnings
        );
        let text = std::fs::read_to_string(path).unwrap();
        let table: toml::Table = toml::from_str(&text).unwrap();
        for (section, keys) in &table {
            for key in keys.as_table().unwrap().keys() {
                let dotted = format!("{section}.{key}");
                assert_eq!(
                    resolved.origin(&dotted),
                    Some(&Origin::Profile(path.clone())),
                    "{}: {dotted}",
                    path.display()
                );
            }
        }
        // The dry-run rendering is itself a profile that resolves to the same configuration.
        let rendered = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(rendered.path(), resolved.render()).unwrap();
        assert_eq!(load(rendered.path()).config, resolved.config);
    }
}

/// A profile that runs Qwen2.5-3B on a T4 must leave room for the measured checkpoint
/// (115-127 s) and restore (11-12 s), or its scenarios fail on budget, not on behaviour.
#[test]
fn t4_profiles_budget_for_the_measured_checkpoint_and_restore() {
    wsgate::install_crypto_provider();
    for path in profiles() {
        let config = load(&path).config;
        if config.workspace.model != Model::Qwen3bT4 {
            continue;
        }
        assert_eq!(
            config.target.kind,
            TargetKind::Cluster,
            "{}",
            path.display()
        );
        let budgets = &config.budgets;
        assert!(
            budgets.pause_to_paused.as_secs_f64() > 127.0,
            "{}",
            path.display()
        );
        assert!(
            budgets.gpu_release >= budgets.pause_to_paused,
            "{}",
            path.display()
        );
        assert!(
            budgets.resume_to_running.as_secs_f64() > 12.0,
            "{}",
            path.display()
        );
    }
}

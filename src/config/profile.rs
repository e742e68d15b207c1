//! Finding and reading the profile file named by `--profile`.

use std::path::{Path, PathBuf};

use super::error::ConfigError;

/// Where the shipped profiles live, relative to the working directory.
pub const PROFILES_DIR: &str = "fixtures/profiles";

/// Reads the profile: `path` itself if it exists; otherwise, for a bare name such as
/// `nightly`, `fixtures/profiles/nightly.toml`. Returns the path read and its text.
pub(crate) fn read(path: &Path) -> Result<(PathBuf, String), ConfigError> {
    let resolved = if path.exists() {
        path.to_path_buf()
    } else {
        let by_name =
            bare_name(path).map(|name| Path::new(PROFILES_DIR).join(format!("{name}.toml")));
        match by_name {
            Some(candidate) if candidate.exists() => candidate,
            _ => {
                return Err(ConfigError::ProfileNotFound {
                    path: path.to_path_buf(),
                    available: available(),
                });
            }
        }
    };
    std::fs::read_to_string(&resolved)
        .map(|text| (resolved.clone(), text))
        .map_err(|error| ConfigError::ProfileUnreadable {
            path: resolved,
            error,
        })
}

/// `Some(name)` if `path` is a single component without an extension.
fn bare_name(path: &Path) -> Option<&str> {
    let mut components = path.components();
    match (components.next(), components.next()) {
        (Some(std::path::Component::Normal(name)), None) if path.extension().is_none() => {
            name.to_str()
        }
        _ => None,
    }
}

/// The profile names under [`PROFILES_DIR`], sorted and comma-separated.
fn available() -> String {
    let mut names: Vec<String> = std::fs::read_dir(PROFILES_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let path = entry.path();
            (path.extension()? == "toml").then(|| path.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    names.sort();
    if names.is_empty() {
        format!("none found under {PROFILES_DIR}/ from this directory")
    } else {
        names.join(", ")
    }
}

//! Finding and reading the profile named by `--profile`: a TOML file, or the name of one
//! of the profiles shipped in the binary.

use std::path::{Path, PathBuf};

use super::error::ConfigError;

/// Where the shipped profiles live in the source tree (`fixtures/profiles/<name>.toml`);
/// the binary carries them, so a bare name never reads the working directory.
pub const PROFILES_DIR: &str = "fixtures/profiles";

/// The profiles shipped in the binary, by name.
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "capacity-drill",
        include_str!("../../fixtures/profiles/capacity-drill.toml"),
    ),
    (
        "gke-t4",
        include_str!("../../fixtures/profiles/gke-t4.toml"),
    ),
    (
        "nightly",
        include_str!("../../fixtures/profiles/nightly.toml"),
    ),
    (
        "release-gate",
        include_str!("../../fixtures/profiles/release-gate.toml"),
    ),
    (
        "sim-default",
        include_str!("../../fixtures/profiles/sim-default.toml"),
    ),
];

/// The text of the shipped profile `name`.
pub fn shipped(name: &str) -> Option<&'static str> {
    SHIPPED.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// How a shipped profile is named where the configuration says where a value came from.
pub fn shipped_origin(name: &str) -> PathBuf {
    PathBuf::from(format!("{name} (shipped)"))
}

/// Reads the profile: a bare name such as `nightly` is the shipped profile of that name
/// (another name, `fixtures/profiles/<name>.toml` from the working directory); anything
/// else is a file path. `fixtures/profiles/<name>.toml` where no such file exists
/// (a command line written for the source tree, run elsewhere) is the shipped one too.
/// Returns where the text came from and the text.
pub(crate) fn read(path: &Path) -> Result<(PathBuf, String), ConfigError> {
    let name = bare_name(path).or_else(|| {
        let rest = path
            .to_str()?
            .strip_prefix(PROFILES_DIR)?
            .strip_prefix('/')?;
        let name = rest.strip_suffix(".toml")?;
        (!path.exists()).then_some(name)
    });
    if let Some(name) = name {
        if let Some(text) = shipped(name) {
            return Ok((shipped_origin(name), text.to_string()));
        }
        // A profile of your own kept beside the shipped ones in a checkout.
        let local = Path::new(PROFILES_DIR).join(format!("{name}.toml"));
        if !local.exists() {
            return Err(not_found(path));
        }
        return std::fs::read_to_string(&local)
            .map(|text| (local.clone(), text))
            .map_err(|error| ConfigError::ProfileUnreadable { path: local, error });
    }
    if !path.exists() {
        return Err(not_found(path));
    }
    std::fs::read_to_string(path)
        .map(|text| (path.to_path_buf(), text))
        .map_err(|error| ConfigError::ProfileUnreadable {
            path: path.to_path_buf(),
            error,
        })
}

fn not_found(path: &Path) -> ConfigError {
    ConfigError::ProfileNotFound {
        path: path.to_path_buf(),
        available: SHIPPED
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", "),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_list_is_the_profiles_directory() {
        crate::assert_ships_every_toml(PROFILES_DIR, SHIPPED);
    }

    #[test]
    fn names_are_shipped_paths_are_files() {
        let (origin, text) = read(Path::new("nightly")).unwrap();
        assert_eq!(origin, shipped_origin("nightly"));
        assert_eq!(text, shipped("nightly").unwrap());
        let missing = Path::new("fixtures/profiles/nightly.toml");
        if !missing.exists() {
            assert_eq!(read(missing).unwrap().0, shipped_origin("nightly"));
        }
        let err = read(Path::new("nope")).unwrap_err();
        assert!(
            err.to_string()
                .contains("capacity-drill, gke-t4, nightly, release-gate, sim-default"),
            "{err}"
        );
        assert!(read(Path::new("no/such.toml")).is_err());
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "[run]\n").unwrap();
        assert_eq!(
            read(file.path()).unwrap(),
            (file.path().to_path_buf(), "[run]\n".into())
        );
    }
}

//! Where a configuration value came from: the four layers, in the order they apply.

use std::fmt;
use std::path::PathBuf;

/// The source of one configuration value. Later layers win: defaults < profile < env < flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The defaults embedded in the binary (`src/config/defaults.toml`).
    Defaults,
    /// A profile file (`--profile`), as the path it was read from.
    Profile(PathBuf),
    /// One environment variable, by name (e.g. `WSGATE_RUN__KEEP`).
    Env(String),
    /// One command-line flag, as the caller names it (e.g. `--keep`).
    Flag(String),
}

impl Origin {
    /// Short form for the trailing provenance comments of [`super::Resolved::render`].
    pub fn short(&self) -> String {
        match self {
            Origin::Defaults => "defaults".to_owned(),
            Origin::Profile(path) => format!("profile {}", path.display()),
            Origin::Env(var) => format!("env {var}"),
            Origin::Flag(flag) => format!("flag {flag}"),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Defaults => f.write_str("the embedded defaults (src/config/defaults.toml)"),
            Origin::Profile(path) => write!(f, "profile {}", path.display()),
            Origin::Env(var) => write!(f, "environment variable {var}"),
            Origin::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

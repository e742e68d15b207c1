//! The configuration error type: every message names the key and the source that set it.

use std::path::PathBuf;

use super::origin::Origin;
use crate::exit_code;

/// Why a configuration could not be loaded. Every variant but [`ConfigError::Internal`] is the
/// user's to fix and maps to [`exit_code::USAGE`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A key (or section) the schema does not know.
    #[error("unknown key `{key}` in {origin}; {hint}")]
    UnknownKey {
        /// Dotted key path, e.g. `budgets.resume_to_runing`, or a section name.
        key: String,
        /// The layer that set it.
        origin: Origin,
        /// What would have been valid (and the closest match, if any).
        hint: String,
    },
    /// A `WSGATE_*` variable that looks like configuration but names no key.
    #[error("unknown configuration variable `{var}`; {hint}")]
    UnknownEnv {
        /// The variable name.
        var: String,
        /// What would have been valid.
        hint: String,
    },
    /// A `WSGATE_*` variable whose name or value is not UTF-8. Other variables that are not
    /// UTF-8 are none of wsgate's business and are skipped.
    #[error(
        "the environment variable `{var}` is not valid UTF-8; set it to UTF-8 text or unset it"
    )]
    NonUtf8Env {
        /// The variable's name, lossily decoded.
        var: String,
    },
    /// A value of the wrong TOML type.
    #[error("wrong type for `{key}` in {origin}: expected {expected}, found {found}")]
    WrongType {
        /// Dotted key path.
        key: String,
        /// The layer that set it.
        origin: Origin,
        /// What the key accepts.
        expected: String,
        /// The type and (shortened) value found.
        found: String,
    },
    /// A value of the right type that is out of range or contradicts another key.
    #[error("invalid value for `{key}` in {origin}: {reason}")]
    Invalid {
        /// Dotted key path.
        key: String,
        /// The layer that set it.
        origin: Origin,
        /// What is wrong and what to do.
        reason: String,
    },
    /// A file (or a flag or variable value) that is not valid TOML.
    #[error("could not parse {origin} as TOML")]
    Parse {
        /// The layer that failed to parse.
        origin: Origin,
        /// The parser's error, with line and column.
        #[source]
        error: Box<toml::de::Error>,
    },
    /// `--profile` names a file that does not exist.
    #[error(
        "profile `{}` not found; give a path to a TOML file or the name of a shipped profile ({available})",
        path.display()
    )]
    ProfileNotFound {
        /// The path as given.
        path: PathBuf,
        /// The shipped profiles' names, comma-separated.
        available: String,
    },
    /// The profile exists but could not be read.
    #[error("could not read profile `{}`", path.display())]
    ProfileUnreadable {
        /// The path read.
        path: PathBuf,
        /// The IO error.
        #[source]
        error: std::io::Error,
    },
    /// The merged, validated layers did not deserialise: the schema table and the `Config`
    /// types disagree. A bug in wsgate.
    #[error(
        "the validated configuration did not deserialise; this is a bug in wsgate, please report it"
    )]
    Internal {
        /// The deserialiser's error.
        #[source]
        error: Box<toml::de::Error>,
    },
}

impl ConfigError {
    /// The process exit code for this error: [`exit_code::USAGE`], or [`exit_code::INTERNAL`]
    /// for [`ConfigError::Internal`].
    pub fn exit_code(&self) -> i32 {
        match self {
            ConfigError::Internal { .. } => exit_code::INTERNAL,
            _ => exit_code::USAGE,
        }
    }

    /// The dotted key this error is about, if it is about one key.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::UnknownKey { key, .. }
            | ConfigError::WrongType { key, .. }
            | ConfigError::Invalid { key, .. } => Some(key),
            _ => None,
        }
    }
}

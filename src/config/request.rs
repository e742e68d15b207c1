//! What the caller asks `load` for: a profile, the environment, and flag overrides.

use std::path::PathBuf;

use super::error::ConfigError;
use super::origin::Origin;

/// The inputs of [`super::load`]. The defaults are always the first layer.
#[derive(Debug, Clone, Default)]
pub struct LoadRequest {
    /// The profile file, or a bare name such as `nightly` for `fixtures/profiles/nightly.toml`.
    pub profile: Option<PathBuf>,
    /// Environment variables. The CLI passes `std::env::vars()`; only `WSGATE_*` are read, and
    /// those in [`super::NON_CONFIG_ENV`] are ignored. Tests pass their own.
    pub env: Vec<(String, String)>,
    /// Flag overrides, applied last, in order (a later override of the same key wins).
    pub overrides: Vec<Override>,
}

/// One flag that sets one configuration key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// Dotted key, e.g. `budgets.resume_to_running`.
    pub key: String,
    /// The value as typed: parsed as TOML for numbers, booleans and lists, else taken as text.
    pub value: String,
    /// The flag, for messages and provenance, e.g. `--keep`.
    pub source: String,
}

impl Override {
    /// An override of `key` with `value` from the flag `source`.
    pub fn new(
        key: impl Into<String>,
        value: impl Into<String>,
        source: impl Into<String>,
    ) -> Self {
        Override {
            key: key.into(),
            value: value.into(),
            source: source.into(),
        }
    }

    /// Parses `section.key=value` (as given to a generic `--set` flag) into an override from
    /// the flag `source`. The key is checked when the configuration is loaded.
    pub fn from_assignment(assignment: &str, source: &str) -> Result<Self, ConfigError> {
        match assignment.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                Ok(Override::new(key.trim(), value, source))
            }
            _ => Err(ConfigError::Invalid {
                key: assignment.to_owned(),
                origin: Origin::Flag(source.to_owned()),
                reason: "expected SECTION.KEY=VALUE, e.g. budgets.resume_to_running=300".into(),
            }),
        }
    }
}

//! Layered configuration: the embedded, commented defaults (`defaults.toml`) -> a profile
//! file (`fixtures/profiles/*.toml`) -> environment (`WSGATE_<SECTION>__<KEY>`) -> flags.
//!
//! Each layer is parsed and checked against the key table on its own, so an unknown key, a
//! wrong type or an out-of-range value (a zero or negative budget, say) is an error naming
//! the key and the file, variable or flag that set it, never a panic. The layers are then
//! merged key by key (later wins), deserialised into the typed [`Config`] and checked across
//! keys. [`Resolved::render`] prints the result with each value's layer, for
//! `wsgate run --dry-run`.
//!
//! ```
//! use wsgate::config::{self, LoadRequest, Override, Keep};
//!
//! let request = LoadRequest {
//!     profile: None,
//!     env: vec![("WSGATE_RUN__KEEP".into(), "failed".into())],
//!     overrides: vec![Override::new("budgets.resume_to_running", "90", "--set")],
//! };
//! let resolved = config::load(&request)?;
//! assert_eq!(resolved.config.run.keep, Keep::Failed);
//! assert_eq!(resolved.config.budgets.resume_to_running.as_secs_f64(), 90.0);
//! # Ok::<(), config::ConfigError>(())
//! ```

mod budget;
mod duration;
mod env;
mod error;
mod kind;
mod layer;
mod near;
mod origin;
mod profile;
mod request;
mod resolved;
mod schema;
mod types;
mod validate;

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;

use std::path::Path;

pub use budget::Budget;
pub use duration::{DurationError, MAX_SECS as MAX_DURATION_SECS, parse_duration};
pub use env::{NON_CONFIG_ENV, process_env};
pub use error::ConfigError;
pub use origin::Origin;
pub use profile::PROFILES_DIR;
pub use request::{LoadRequest, Override};
pub use resolved::Resolved;
pub use types::{
    ApiConfig, Budgets, Config, Keep, Model, ReportFormat, ReportsConfig, RunConfig, SessionConfig,
    SessionConnect, SimConfig, SimRuntime, SqueezeConfig, SqueezeMethod, TargetConfig, TargetKind,
    WorkspaceConfig,
};

/// The embedded defaults file, every key commented (what it does, its env var and its flag).
pub const DEFAULTS: &str = include_str!("defaults.toml");

/// Loads the configuration: defaults, then `req.profile`, then the `WSGATE_*` entries of
/// `req.env`, then `req.overrides`. Reads only the profile file; touches nothing else.
pub fn load(req: &LoadRequest) -> Result<Resolved, ConfigError> {
    let profile = req.profile.as_deref().map(profile::read).transpose()?;
    let profile = profile
        .as_ref()
        .map(|(path, text)| (path.as_path(), text.as_str()));
    resolve(profile, &req.env, &req.overrides)
}

/// [`load`] with the profile's path and text already in hand.
pub(crate) fn resolve(
    profile: Option<(&Path, &str)>,
    env: &[(String, String)],
    overrides: &[Override],
) -> Result<Resolved, ConfigError> {
    let mut layers = vec![layer::from_toml(Origin::Defaults, DEFAULTS)?];
    if let Some((path, text)) = profile {
        layers.push(layer::from_toml(Origin::Profile(path.to_path_buf()), text)?);
    }
    layers.extend(layer::from_env(env)?);
    layers.extend(layer::from_overrides(overrides)?);
    Resolved::merge(layers)
}

//! One layer of configuration, parsed and checked against the schema on its own, so that a
//! bad value is reported with the layer (file, variable or flag) that set it.

use toml::Value;

use super::env;
use super::error::ConfigError;
use super::kind::{self, Problem};
use super::origin::Origin;
use super::request::Override;
use super::schema::{self, KeySpec};

/// One checked value and where it came from.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub spec: &'static KeySpec,
    pub value: Value,
    pub origin: Origin,
}

/// The checked entries of one layer, and its name for [`super::Resolved::layers`].
#[derive(Debug)]
pub(crate) struct Layer {
    pub name: String,
    pub entries: Vec<Entry>,
}

/// A TOML document (the defaults or a profile): every section must be a known table and
/// every key a known key with an acceptable value.
pub(crate) fn from_toml(origin: Origin, text: &str) -> Result<Layer, ConfigError> {
    let table: toml::Table = toml::from_str(text).map_err(|error| ConfigError::Parse {
        origin: origin.clone(),
        error: Box::new(error),
    })?;
    let mut entries = Vec::new();
    for (section, body) in table {
        if !schema::SECTIONS.contains(&section.as_str()) {
            return Err(ConfigError::UnknownKey {
                hint: schema::section_hint(&section),
                key: section,
                origin,
            });
        }
        let Value::Table(keys) = body else {
            return Err(ConfigError::WrongType {
                expected: format!("a table [{section}]"),
                found: kind::describe(&body),
                key: section,
                origin,
            });
        };
        for (key, value) in keys {
            let Some(spec) = schema::lookup(&section, &key) else {
                return Err(ConfigError::UnknownKey {
                    key: format!("{section}.{key}"),
                    hint: schema::key_hint(&section, &key),
                    origin,
                });
            };
            entries.push(checked(spec, value, origin.clone())?);
        }
    }
    Ok(Layer {
        name: origin.to_string(),
        entries,
    })
}

/// The `WSGATE_<SECTION>__<KEY>` variables among `vars`; `None` if there are none.
pub(crate) fn from_env(vars: &[(String, String)]) -> Result<Option<Layer>, ConfigError> {
    let mut entries = Vec::new();
    for (var, spec, raw) in env::config_vars(vars)? {
        entries.push(coerced(spec, &raw, Origin::Env(var))?);
    }
    Ok(layer_of(entries, "environment"))
}

/// The flag overrides, in order; `None` if there are none.
pub(crate) fn from_overrides(overrides: &[Override]) -> Result<Option<Layer>, ConfigError> {
    let mut entries = Vec::new();
    for o in overrides {
        let origin = Origin::Flag(o.source.clone());
        let (section, key) = o.key.split_once('.').unwrap_or((&o.key, ""));
        let spec = match schema::lookup(section, key) {
            Some(spec) => spec,
            None if !schema::SECTIONS.contains(&section) => {
                return Err(ConfigError::UnknownKey {
                    key: o.key.clone(),
                    origin,
                    hint: schema::section_hint(section),
                });
            }
            None => {
                return Err(ConfigError::UnknownKey {
                    key: o.key.clone(),
                    origin,
                    hint: schema::key_hint(section, key),
                });
            }
        };
        entries.push(coerced(spec, &o.value, origin)?);
    }
    Ok(layer_of(entries, "flags"))
}

fn layer_of(entries: Vec<Entry>, kind: &str) -> Option<Layer> {
    if entries.is_empty() {
        return None;
    }
    let sources: Vec<String> = entries
        .iter()
        .map(|e| match &e.origin {
            Origin::Env(name) | Origin::Flag(name) => name.clone(),
            other => other.short(),
        })
        .collect();
    Some(Layer {
        name: format!("{kind} ({})", sources.join(", ")),
        entries,
    })
}

fn coerced(spec: &'static KeySpec, raw: &str, origin: Origin) -> Result<Entry, ConfigError> {
    let value = spec
        .kind
        .coerce(raw)
        .map_err(|problem| to_error(spec, origin.clone(), problem))?;
    checked(spec, value, origin)
}

fn checked(spec: &'static KeySpec, value: Value, origin: Origin) -> Result<Entry, ConfigError> {
    match spec.kind.check(&value) {
        Ok(()) => Ok(Entry {
            spec,
            value,
            origin,
        }),
        Err(problem) => Err(to_error(spec, origin, problem)),
    }
}

fn to_error(spec: &KeySpec, origin: Origin, problem: Problem) -> ConfigError {
    let key = spec.dotted();
    match problem {
        Problem::WrongType { expected, found } => ConfigError::WrongType {
            key,
            origin,
            expected,
            found,
        },
        Problem::Invalid { reason } => ConfigError::Invalid {
            key,
            origin,
            reason,
        },
    }
}

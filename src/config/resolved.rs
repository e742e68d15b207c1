//! The merged configuration: later layers win key by key; every key remembers the layer it
//! came from, and `render` prints it for `wsgate run --dry-run`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use toml::Value;

use super::error::ConfigError;
use super::layer::{Entry, Layer};
use super::origin::Origin;
use super::schema;
use super::types::Config;
use super::validate;

/// The outcome of [`super::load`]: the typed configuration and where each value came from.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The typed, validated configuration.
    pub config: Config,
    /// The layers that contributed, in the order they applied (later wins).
    pub layers: Vec<String>,
    /// Legal but risky settings (e.g. `target.insecure_skip_tls_verify`); print them loudly.
    pub warnings: Vec<String>,
    /// The winning entry per dotted key; unset optional keys are absent.
    winners: BTreeMap<String, Entry>,
}

impl Resolved {
    /// Merges checked layers (in order), deserialises and validates across keys.
    pub(crate) fn merge(layers: Vec<Layer>) -> Result<Resolved, ConfigError> {
        let mut winners = BTreeMap::new();
        let mut names = Vec::with_capacity(layers.len());
        for layer in layers {
            names.push(layer.name);
            for entry in layer.entries {
                winners.insert(entry.spec.dotted(), entry);
            }
        }
        if let Some(missing) = schema::KEYS
            .iter()
            .find(|spec| !spec.optional && !winners.contains_key(&spec.dotted()))
        {
            return Err(ConfigError::Invalid {
                key: missing.dotted(),
                origin: Origin::Defaults,
                reason: "no layer sets this required key; the embedded defaults must (a bug in \
                         wsgate, please report it)"
                    .into(),
            });
        }
        let mut root = toml::Table::new();
        for entry in winners.values() {
            let section = root
                .entry(entry.spec.section)
                .or_insert_with(|| Value::Table(toml::Table::new()));
            if let Value::Table(section) = section {
                section.insert(entry.spec.key.to_owned(), entry.value.clone());
            }
        }
        let config: Config =
            Value::Table(root)
                .try_into()
                .map_err(|error| ConfigError::Internal {
                    error: Box::new(error),
                })?;
        let origin_of = |key: &str| {
            winners
                .get(key)
                .map_or(Origin::Defaults, |e| e.origin.clone())
        };
        let warnings = validate::check(&config, origin_of)?;
        Ok(Resolved {
            config,
            layers: names,
            warnings,
            winners,
        })
    }

    /// The layer that set the dotted `key`; `None` for an unknown or unset key.
    pub fn origin(&self, key: &str) -> Option<&Origin> {
        self.winners.get(key).map(|e| &e.origin)
    }

    /// The resolved configuration as TOML, each key followed by a comment naming the layer it
    /// came from; unset optional keys appear commented out. Warnings come first. The output
    /// parses as a profile that resolves to the same configuration.
    pub fn render(&self) -> String {
        let mut out = String::from("# wsgate: resolved configuration\n");
        let _ = writeln!(out, "# layers, later wins: {}", self.layers.join(" < "));
        for warning in &self.warnings {
            let _ = writeln!(out, "# WARNING: {warning}");
        }
        for section in schema::SECTIONS {
            let _ = writeln!(out, "\n[{section}]");
            let lines: Vec<(String, String)> = schema::KEYS
                .iter()
                .filter(|spec| spec.section == *section)
                .map(|spec| match self.winners.get(&spec.dotted()) {
                    Some(e) => (format!("{} = {}", spec.key, e.value), e.origin.short()),
                    None => (format!("# {} =", spec.key), "not set".to_owned()),
                })
                .collect();
            let width = lines
                .iter()
                .map(|(l, _)| l.chars().count())
                .max()
                .unwrap_or(0);
            for (line, note) in lines {
                // Padding by repeat: a format width above u16::MAX (a 64 KiB value) panics.
                let pad = " ".repeat(width - line.chars().count());
                let _ = writeln!(out, "{line}{pad}  # {note}");
            }
        }
        out
    }
}

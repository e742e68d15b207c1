//! The environment layer: `WSGATE_<SECTION>__<KEY>` variables, and the `WSGATE_*` variables
//! that are not configuration.

use super::error::ConfigError;
use super::schema::{self, KeySpec};

/// `WSGATE_*` variables that are read elsewhere and are not configuration keys; the loader
/// ignores them. Every other `WSGATE_*` variable that contains `__`, or that spells a key with
/// a single `_` after its section, is an error naming the variable.
pub const NON_CONFIG_ENV: &[(&str, &str)] = &[
    (
        "WSGATE_PROFILE",
        "the profile file or name, as `--profile` (read by the CLI)",
    ),
    (
        "WSGATE_LOG",
        "the tracing filter, e.g. `wsgate=debug` (read by the CLI)",
    ),
    (
        "WSGATE_JUPYTER_TOKEN",
        "the Jupyter server token for a cluster target (a secret, so never in config files)",
    ),
    (
        "WSGATE_PYTHON",
        "the Python interpreter the simulator builds its Jupyter venv with",
    ),
];

const PREFIX: &str = "WSGATE_";

/// This process's environment as text, for [`super::LoadRequest::env`]. A variable whose name
/// or value is not UTF-8 is skipped unless it is one of wsgate's own (`WSGATE_*`), which is an
/// error naming it: `std::env::vars()` would panic on any of them.
pub fn process_env() -> Result<Vec<(String, String)>, ConfigError> {
    text_vars(std::env::vars_os())
}

/// [`process_env`] over any list of variables (the testable half).
pub(crate) fn text_vars(
    vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    for (name, value) in vars {
        match (name.into_string(), value.into_string()) {
            (Ok(name), Ok(value)) => out.push((name, value)),
            (Ok(name), Err(_)) if name.starts_with(PREFIX) => {
                return Err(ConfigError::NonUtf8Env { var: name });
            }
            (Err(name), _) if name.to_string_lossy().starts_with(PREFIX) => {
                return Err(ConfigError::NonUtf8Env {
                    var: name.to_string_lossy().into_owned(),
                });
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The configuration entries among `vars`: `(variable, spec, raw value)`, sorted by name.
/// Variables outside the `WSGATE_` prefix and those in [`NON_CONFIG_ENV`] are skipped.
pub(crate) fn config_vars(
    vars: &[(String, String)],
) -> Result<Vec<(String, &'static KeySpec, String)>, ConfigError> {
    let mut found = Vec::new();
    for (var, value) in vars {
        let Some(rest) = var.strip_prefix(PREFIX) else {
            continue;
        };
        if NON_CONFIG_ENV.iter().any(|(name, _)| name == var) {
            continue;
        }
        match rest.split_once("__") {
            Some((section, key)) => {
                let (section, key) = (section.to_ascii_lowercase(), key.to_ascii_lowercase());
                let spec =
                    schema::lookup(&section, &key).ok_or_else(|| ConfigError::UnknownEnv {
                        var: var.clone(),
                        hint: unknown_hint(&section, &key),
                    })?;
                found.push((var.clone(), spec, value.clone()));
            }
            None => {
                let flat = rest.to_ascii_lowercase();
                if let Some(spec) = schema::KEYS
                    .iter()
                    .find(|s| flat == format!("{}_{}", s.section, s.key))
                {
                    return Err(ConfigError::UnknownEnv {
                        var: var.clone(),
                        hint: format!(
                            "did you mean {}? Two underscores separate the section from the key",
                            spec.env_var()
                        ),
                    });
                }
            }
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

fn unknown_hint(section: &str, key: &str) -> String {
    let not_config = format!(
        "variables that are not configuration: {}",
        NON_CONFIG_ENV
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(", ")
    );
    if !schema::SECTIONS.contains(&section) {
        return format!(
            "WSGATE_<SECTION>__<KEY> names a key of the configuration; {}; {not_config}",
            schema::section_hint(section)
        );
    }
    let mut hint = schema::key_hint(section, key);
    if let Some(near) = super::near::closest(
        key,
        schema::KEYS
            .iter()
            .filter(|s| s.section == section)
            .map(|s| s.key),
    )
    .and_then(|k| schema::lookup(section, k))
    {
        hint = format!("did you mean {}? {hint}", near.env_var());
    }
    hint
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn maps_double_underscore_to_section_and_key() {
        let found = config_vars(&vars(&[
            ("WSGATE_RUN__KEEP", "failed"),
            ("WSGATE_BUDGETS__RESUME_TO_RUNNING", "300"),
            ("WSGATE_LOG", "debug"),
            ("PATH", "/bin"),
            ("WSGATE_SOMETHING_ELSE", "x"),
        ]))
        .unwrap();
        let keys: Vec<String> = found.iter().map(|(_, s, _)| s.dotted()).collect();
        assert_eq!(keys, ["budgets.resume_to_running", "run.keep"]);
    }

    #[test]
    fn single_underscore_spelling_of_a_key_is_named() {
        let err = config_vars(&vars(&[("WSGATE_RUN_KEEP", "failed")])).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("WSGATE_RUN_KEEP") && msg.contains("WSGATE_RUN__KEEP"),
            "{msg}"
        );
    }

    #[test]
    fn every_key_round_trips_through_its_variable_name() {
        for spec in schema::KEYS {
            let found = config_vars(&vars(&[(&spec.env_var(), "x")])).unwrap();
            assert_eq!(found[0].1.dotted(), spec.dotted());
        }
    }

    #[test]
    fn variables_that_are_not_utf8_are_skipped_unless_they_are_wsgates() {
        use std::ffi::OsString;
        use std::os::unix::ffi::OsStringExt;
        let bad = || OsString::from_vec(vec![0xff, b'x']);
        let ok = |s: &str| OsString::from(s);
        let got = text_vars([
            (ok("FOO"), bad()),
            (bad(), ok("x")),
            (ok("HOME"), ok("/root")),
        ])
        .unwrap();
        assert_eq!(got, vec![("HOME".to_string(), "/root".to_string())]);
        let e = text_vars([(ok("WSGATE_BUDGETS__DELETE"), bad())]).unwrap_err();
        assert!(e.to_string().contains("WSGATE_BUDGETS__DELETE"), "{e}");
        let mut name = b"WSGATE_".to_vec();
        name.push(0xff);
        assert!(text_vars([(OsString::from_vec(name), ok("1"))]).is_err());
    }
}

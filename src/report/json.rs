//! The JSON report: the model itself, pretty-printed, versioned by `schema_version`
//! (`schemas/report-v1.schema.json`). Reading checks the version before anything else.

use std::path::Path;

use super::ReportError;
use super::model::{RunReport, SCHEMA_VERSION};

/// The schema the JSON report follows, as shipped in the repository.
pub const SCHEMA: &str = include_str!("../../schemas/report-v1.schema.json");

/// The report as pretty JSON (with a trailing newline).
pub fn to_json(report: &RunReport) -> Result<String, ReportError> {
    let mut s =
        serde_json::to_string_pretty(report).map_err(|source| ReportError::Serialize { source })?;
    s.push('\n');
    Ok(s)
}

/// Parses a JSON report; `path` names it in errors. A report of another schema version is
/// refused before its fields are looked at.
pub fn from_json(text: &str, path: &Path) -> Result<RunReport, ReportError> {
    #[derive(serde::Deserialize)]
    struct Version {
        schema_version: u32,
    }
    let json_err = |source| ReportError::Json {
        path: path.to_path_buf(),
        source,
    };
    let version: Version = serde_json::from_str(text).map_err(json_err)?;
    if version.schema_version != SCHEMA_VERSION {
        return Err(ReportError::SchemaVersion {
            path: path.to_path_buf(),
            found: version.schema_version,
            supported: SCHEMA_VERSION,
        });
    }
    serde_json::from_str(text).map_err(json_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_versions() {
        let r = RunReport {
            run_id: "r20260302-020000-a1b2".into(),
            ..RunReport::default()
        };
        let text = to_json(&r).unwrap();
        assert_eq!(from_json(&text, Path::new("a.json")).unwrap(), r);
        let v2 = text.replace("\"schema_version\": 1", "\"schema_version\": 2");
        let err = from_json(&v2, Path::new("b.json")).unwrap_err();
        assert!(
            matches!(err, ReportError::SchemaVersion { found: 2, .. }),
            "{err}"
        );
        let err = from_json("{\"run_id\": 3}", Path::new("c.json")).unwrap_err();
        assert!(err.to_string().contains("c.json"), "{err}");
    }

    #[test]
    fn the_shipped_schema_is_json_and_names_version_1() {
        let schema: serde_json::Value = serde_json::from_str(SCHEMA).unwrap();
        assert_eq!(
            schema["properties"]["schema_version"]["const"],
            serde_json::json!(SCHEMA_VERSION)
        );
    }
}

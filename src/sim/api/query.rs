//! The query parameters the API server honours, parsed leniently (`?&a=b`, `+` as space).

use crate::sim::error::ApiError;
use crate::sim::kinds::KindInfo;
use crate::sim::selector::{self, FieldSelector, LabelSelector};
use crate::sim::store::Propagation;

#[derive(Debug, Default, Clone)]
pub struct Query {
    pub watch: bool,
    pub resource_version: Option<String>,
    pub timeout_seconds: Option<u64>,
    pub allow_bookmarks: bool,
    pub send_initial_events: bool,
    pub label_selector: LabelSelector,
    pub field_selector: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub force: bool,
    pub propagation: Option<Propagation>,
    pub grace_period_seconds: Option<i64>,
}

fn truthy(v: &str) -> bool {
    matches!(v, "true" | "1" | "True")
}

pub fn parse_propagation(v: &str) -> Result<Propagation, ApiError> {
    match v {
        "Background" => Ok(Propagation::Background),
        "Foreground" => Ok(Propagation::Foreground),
        "Orphan" => Ok(Propagation::Orphan),
        other => Err(ApiError::bad_request(format!(
            "propagationPolicy: Unsupported value: \"{other}\": supported values: \"Background\", \"Foreground\", \"Orphan\""
        ))),
    }
}

impl Query {
    /// Parses a raw query string for requests on `kind`.
    pub fn parse(raw: Option<&str>, kind: &KindInfo) -> Result<Self, ApiError> {
        let mut q = Query::default();
        for (k, v) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            match k.as_ref() {
                "watch" => q.watch = truthy(&v),
                "resourceVersion" => {
                    q.resource_version = Some(v.into_owned()).filter(|s| !s.is_empty())
                }
                "timeoutSeconds" => {
                    q.timeout_seconds = Some(v.parse().map_err(|_| {
                        ApiError::bad_request(format!("invalid timeoutSeconds {v:?}"))
                    })?)
                }
                "allowWatchBookmarks" => q.allow_bookmarks = truthy(&v),
                "sendInitialEvents" => q.send_initial_events = truthy(&v),
                "labelSelector" => {
                    q.label_selector = LabelSelector::parse(&v)
                        .map_err(|e| ApiError::bad_request(e.to_string()))?
                }
                "fieldSelector" => {
                    q.field_selector =
                        FieldSelector::parse(&v, selector::supported_fields(kind.kind))
                            .map_err(|e| ApiError::bad_request(e.to_string()))?
                }
                "limit" => {
                    let n: i64 = v
                        .parse()
                        .map_err(|_| ApiError::bad_request(format!("invalid limit {v:?}")))?;
                    q.limit = (n > 0).then_some(n as usize);
                }
                "continue" => q.continue_token = Some(v.into_owned()).filter(|s| !s.is_empty()),
                "dryRun" => q.dry_run = v == "All",
                "fieldManager" => q.field_manager = Some(v.into_owned()),
                "force" => q.force = truthy(&v),
                "propagationPolicy" => q.propagation = Some(parse_propagation(&v)?),
                "gracePeriodSeconds" => {
                    q.grace_period_seconds = Some(v.parse().map_err(|_| {
                        ApiError::bad_request(format!("invalid gracePeriodSeconds {v:?}"))
                    })?)
                }
                // timeout, fieldValidation, hash, pretty, resourceVersionMatch...: accepted, ignored.
                _ => {}
            }
        }
        Ok(q)
    }

    /// The resourceVersion to resume a watch from; `None` for "current objects first".
    pub fn watch_from(&self) -> Result<Option<u64>, ApiError> {
        match self.resource_version.as_deref() {
            None | Some("0") => Ok(None),
            Some(rv) => rv
                .parse()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::kinds;

    #[test]
    fn parses_what_clients_send() {
        let pods = kinds::find("", "v1", "pods").unwrap();
        let q = Query::parse(
            Some("&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&labelSelector=app+in+%28x%2Cy%29%2C%21foo&fieldSelector=spec.nodeName%3Dn1&resourceVersion=12&limit=50"),
            pods,
        )
        .unwrap();
        assert!(q.watch && q.allow_bookmarks);
        assert_eq!(q.timeout_seconds, Some(290));
        assert_eq!(q.label_selector.0.len(), 2);
        assert_eq!(q.watch_from().unwrap(), Some(12));
        assert_eq!(q.limit, Some(50));
        assert!(Query::parse(Some("fieldSelector=spec.bogus%3D1"), pods).is_err());
        assert!(Query::parse(Some("propagationPolicy=Sideways"), pods).is_err());
        assert_eq!(
            Query::parse(Some("resourceVersion=0"), pods)
                .unwrap()
                .watch_from()
                .unwrap(),
            None
        );
    }
}

//! Label and field selectors as the API server parses them (`=`, `==`, `!=`, `in`, `notin`,
//! `key`, `!key`), and their evaluation against stored objects.

use serde_json::Value;

/// A parse error, reported to the client as 400 BadRequest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to parse requirement {requirement:?}: {reason}")]
pub struct SelectorError {
    pub requirement: String,
    pub reason: String,
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector: all requirements must hold. Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<Requirement>);

/// Splits at top-level commas (commas inside parentheses belong to `in (a,b)`).
fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn validate_key(key: &str, requirement: &str) -> Result<String, SelectorError> {
    let valid = !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if valid {
        Ok(key.to_string())
    } else {
        Err(SelectorError {
            requirement: requirement.to_string(),
            reason: format!("invalid label key {key:?}"),
        })
    }
}

fn parse_set(rest: &str, requirement: &str) -> Result<Vec<String>, SelectorError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| SelectorError {
            requirement: requirement.to_string(),
            reason: "expected a parenthesised set of values".to_string(),
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses the `labelSelector` query value (already URL-decoded, `+` as space).
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        if input.trim().is_empty() {
            return Ok(Self(reqs));
        }
        for raw in split_top_level(input) {
            let part = raw.trim();
            if part.is_empty() {
                return Err(SelectorError {
                    requirement: raw.to_string(),
                    reason: "empty requirement".to_string(),
                });
            }
            let req = if let Some(key) = part.strip_prefix('!') {
                Requirement::NotExists(validate_key(key.trim(), part)?)
            } else if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEquals(validate_key(k.trim(), part)?, v.trim().to_string())
            } else if let Some((k, v)) = part.split_once("==") {
                Requirement::Equals(validate_key(k.trim(), part)?, v.trim().to_string())
            } else if let Some((k, v)) = part.split_once('=') {
                Requirement::Equals(validate_key(k.trim(), part)?, v.trim().to_string())
            } else if let Some((k, rest)) = split_word(part, "notin") {
                Requirement::NotIn(validate_key(k, part)?, parse_set(rest, part)?)
            } else if let Some((k, rest)) = split_word(part, "in") {
                Requirement::In(validate_key(k, part)?, parse_set(rest, part)?)
            } else {
                Requirement::Exists(validate_key(part, part)?)
            };
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    /// Whether `labels` (an object's `metadata.labels`, possibly absent) satisfies every requirement.
    pub fn matches(&self, labels: Option<&Value>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl LabelSelector {
    /// From a `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`), as
    /// policies, StatefulSets and activity rules carry it. An unknown operator is an error.
    pub fn from_object(v: &Value) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for (k, val) in v
            .get("matchLabels")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            reqs.push(Requirement::Equals(
                k.clone(),
                val.as_str().unwrap_or("").to_string(),
            ));
        }
        for e in v
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = e
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let values: Vec<String> = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            reqs.push(match e.get("operator").and_then(Value::as_str) {
                Some("In") => Requirement::In(key, values),
                Some("NotIn") => Requirement::NotIn(key, values),
                Some("Exists") => Requirement::Exists(key),
                Some("DoesNotExist") => Requirement::NotExists(key),
                other => {
                    return Err(SelectorError {
                        requirement: key,
                        reason: format!("{other:?} is not a valid label selector operator"),
                    });
                }
            });
        }
        Ok(Self(reqs))
    }
}

/// Splits `key <word> (values)` where `word` stands alone between whitespace.
fn split_word<'a>(part: &'a str, word: &str) -> Option<(&'a str, &'a str)> {
    let pattern = format!(" {word} ");
    if let Some(i) = part.find(&pattern) {
        return Some((part[..i].trim(), &part[i + pattern.len()..]));
    }
    let pattern = format!(" {word}(");
    part.find(&pattern)
        .map(|i| (part[..i].trim(), &part[i + pattern.len() - 1..]))
}

/// A parsed field selector: `path=value`, `path==value`, `path!=value`, comma-separated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses and checks every field against `supported` (the fields this kind allows).
    pub fn parse(input: &str, supported: &[&str]) -> Result<Self, SelectorError> {
        let mut out = Vec::new();
        if input.trim().is_empty() {
            return Ok(Self(out));
        }
        for raw in input.split(',') {
            let part = raw.trim();
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(SelectorError {
                    requirement: part.to_string(),
                    reason: "expected field=value or field!=value".to_string(),
                });
            };
            let field = field.trim();
            if !supported.contains(&field) {
                return Err(SelectorError {
                    requirement: part.to_string(),
                    reason: format!("field label not supported: {field}"),
                });
            }
            out.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(Self(out))
    }

    /// Whether the object satisfies every clause; a missing field reads as "".
    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, equal, value)| {
            let actual = path
                .split('.')
                .try_fold(object, |v, seg| v.get(seg))
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                })
                .unwrap_or_default();
            (actual == *value) == *equal
        })
    }

    /// The value required for `metadata.name`, if the selector pins one (fast path).
    pub fn pinned_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(f, eq, _)| f == "metadata.name" && *eq)
            .map(|(_, _, v)| v.as_str())
    }
}

/// The field selectors a kind supports, as the real API server allows them.
pub fn supported_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "Pod" => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
        ],
        "Event" => &[
            "metadata.name",
            "metadata.namespace",
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        "Node" => &["metadata.name", "spec.unschedulable"],
        "Namespace" => &["metadata.name", "status.phase"],
        _ => &["metadata.name", "metadata.namespace"],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels() -> Value {
        json!({"app": "x", "tier": "gold", "notebooks.kubeflow.org/workspace-name": "ws-a"})
    }

    #[test]
    fn parses_every_operator() {
        let s = LabelSelector::parse(
            "app=x,tier==gold,env!=prod,team in (a, b),zone notin (z1),foo,!bar",
        )
        .unwrap();
        assert_eq!(
            s.0,
            vec![
                Requirement::Equals("app".into(), "x".into()),
                Requirement::Equals("tier".into(), "gold".into()),
                Requirement::NotEquals("env".into(), "prod".into()),
                Requirement::In("team".into(), vec!["a".into(), "b".into()]),
                Requirement::NotIn("zone".into(), vec!["z1".into()]),
                Requirement::Exists("foo".into()),
                Requirement::NotExists("bar".into()),
            ]
        );
    }

    #[test]
    fn matches_as_the_api_server_does() {
        let l = labels();
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&l));
        assert!(m("app=x"));
        assert!(!m("app=y"));
        assert!(m("app in (x,y)"));
        assert!(!m("app notin (x)"));
        assert!(m("missing notin (x)"));
        assert!(m("notebooks.kubeflow.org/workspace-name=ws-a"));
        assert!(m("tier,!missing"));
        assert!(!m("!tier"));
        assert!(m("env!=prod"));
        assert!(m(""));
        assert!(!LabelSelector::parse("app=x").unwrap().matches(None));
        assert!(LabelSelector::parse("!app").unwrap().matches(None));
    }

    #[test]
    fn rejects_malformed_selectors() {
        assert!(LabelSelector::parse("app in x").is_err());
        assert!(LabelSelector::parse("a,,b").is_err());
        assert!(LabelSelector::parse("bad key=1").is_err());
    }

    #[test]
    fn field_selectors_check_support_and_match() {
        let pod = json!({"metadata": {"name": "p", "namespace": "n"}, "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}});
        let f = FieldSelector::parse(
            "spec.nodeName=node-1,status.phase!=Pending",
            supported_fields("Pod"),
        )
        .unwrap();
        assert!(f.matches(&pod));
        let f = FieldSelector::parse("status.phase=Pending", supported_fields("Pod")).unwrap();
        assert!(!f.matches(&pod));
        assert!(FieldSelector::parse("spec.nodeName=x", supported_fields("Workspace")).is_err());
        let f = FieldSelector::parse("metadata.name=p", supported_fields("Workspace")).unwrap();
        assert_eq!(f.pinned_name(), Some("p"));
        assert!(FieldSelector::parse("nonsense", supported_fields("Pod")).is_err());
    }
}

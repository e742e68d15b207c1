//! What one key accepts, and the checks each layer's values go through on their own (so an
//! error names the layer that set the bad value): type, then range or set.

use toml::Value;

use super::budget::Budget;
use super::near::closest;

/// What a key accepts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// Non-empty text.
    Text,
    /// A WorkspaceKind option id, or empty to let wsgate pick one from the kind.
    OptionId,
    /// A filesystem path (non-empty text).
    Path,
    /// One string of a closed set.
    OneOf(&'static [&'static str]),
    /// `true` or `false`.
    Bool,
    /// An integer in `min..=max`.
    Count { min: i64, max: i64 },
    /// A number of seconds, integer or float, `> 0` and at most [`Budget::MAX_SECS`].
    Seconds,
    /// A non-empty list of distinct strings of a closed set.
    ListOf(&'static [&'static str]),
    /// A Kubernetes namespace name (RFC 1123 label).
    Dns1123Label,
    /// A Kubernetes resource quantity such as `10Gi`.
    Quantity,
    /// A cucumber tag expression such as `@gate and not @slow`.
    TagExpr,
    /// A regular expression.
    Regex,
}

/// Why one value was rejected; the caller adds the key and the origin.
#[derive(Debug, PartialEq)]
pub(crate) enum Problem {
    WrongType { expected: String, found: String },
    Invalid { reason: String },
}

impl Kind {
    /// What the key accepts, in words (for error messages).
    pub fn expected(&self) -> String {
        match self {
            Kind::Text => "a non-empty string".into(),
            Kind::OptionId => {
                "an option id of the WorkspaceKind, or \"\" to let wsgate pick".into()
            }
            Kind::Path => "a path (a non-empty string)".into(),
            Kind::OneOf(set) => format!("one of {}", quoted(set)),
            Kind::Bool => "true or false".into(),
            Kind::Count { min, max } => format!("an integer from {min} to {max}"),
            Kind::Seconds => "a number of seconds greater than 0, e.g. 300 or 2.5".into(),
            Kind::ListOf(set) => format!("a list of distinct values from {}", quoted(set)),
            Kind::Dns1123Label => "a Kubernetes namespace name (string)".into(),
            Kind::Quantity => "a Kubernetes quantity such as \"10Gi\" (string)".into(),
            Kind::TagExpr => "a cucumber tag expression such as \"@gate and not @slow\"".into(),
            Kind::Regex => "a regular expression (string)".into(),
        }
    }

    /// Checks a TOML value against this kind: its type, then its range or set.
    pub fn check(&self, value: &Value) -> Result<(), Problem> {
        let wrong = || Problem::WrongType {
            expected: self.expected(),
            found: describe(value),
        };
        let invalid = |reason: String| Err(Problem::Invalid { reason });
        match (self, value) {
            (Kind::Bool, Value::Boolean(_)) => Ok(()),
            (Kind::Count { min, max }, Value::Integer(n)) => {
                if n < min || n > max {
                    invalid(format!(
                        "{n} is out of range; use an integer from {min} to {max}"
                    ))
                } else {
                    Ok(())
                }
            }
            (Kind::Seconds, Value::Integer(n)) => check_seconds(*n as f64, &n.to_string()),
            (Kind::Seconds, Value::Float(x)) => check_seconds(*x, &x.to_string()),
            (Kind::ListOf(set), Value::Array(items)) => check_list(set, items).ok_or_else(wrong)?,
            (_, Value::String(s)) => self.check_text(s).ok_or_else(wrong)?,
            _ => Err(wrong()),
        }
    }

    /// Checks a string for the string-typed kinds; `None` if this kind is not string-typed.
    fn check_text(&self, s: &str) -> Option<Result<(), Problem>> {
        let invalid = |reason: String| Some(Err(Problem::Invalid { reason }));
        if matches!(
            self,
            Kind::Bool | Kind::Count { .. } | Kind::Seconds | Kind::ListOf(_)
        ) {
            return None;
        }
        if matches!(self, Kind::OptionId) && s.is_empty() {
            return Some(Ok(()));
        }
        if s.trim().is_empty() {
            return match self {
                Kind::TagExpr | Kind::Regex => {
                    invalid("must not be empty; leave the key out to run every scenario".into())
                }
                _ => invalid("must not be empty".into()),
            };
        }
        if s.chars().any(char::is_control) {
            return invalid("must be one line without control characters".into());
        }
        match self {
            Kind::Text | Kind::Path | Kind::OptionId => Some(Ok(())),
            Kind::OneOf(set) if set.contains(&s) => Some(Ok(())),
            Kind::OneOf(set) => {
                let near = closest(s, set.iter().copied())
                    .map(|n| format!(" (did you mean \"{n}\"?)"))
                    .unwrap_or_default();
                invalid(format!(
                    "\"{}\" is not one of {}{near}",
                    shorten(s),
                    quoted(set)
                ))
            }
            Kind::Dns1123Label if is_dns1123_label(s) => Some(Ok(())),
            Kind::Dns1123Label => invalid(format!(
                "\"{}\" is not a valid namespace name: use at most 63 lowercase letters, digits \
                 and '-', starting and ending with a letter or digit",
                shorten(s)
            )),
            Kind::Quantity if is_quantity(s) => Some(Ok(())),
            Kind::Quantity => invalid(format!(
                "\"{}\" is not a Kubernetes quantity; use e.g. \"10Gi\" or \"500Mi\"",
                shorten(s)
            )),
            Kind::TagExpr => Some(
                s.parse::<cucumber::gherkin::tagexpr::TagOperation>()
                    .map(drop)
                    .map_err(|e| Problem::Invalid {
                        reason: format!("not a tag expression ({e}); e.g. \"@gate and not @slow\""),
                    }),
            ),
            Kind::Regex => Some(
                regex::Regex::new(s)
                    .map(drop)
                    .map_err(|e| Problem::Invalid {
                        reason: format!("not a regular expression: {}", last_line(&e.to_string())),
                    }),
            ),
            Kind::Bool | Kind::Count { .. } | Kind::Seconds | Kind::ListOf(_) => None,
        }
    }

    /// Turns the text of an environment variable or a flag into a TOML value for this kind:
    /// string kinds take the text as is; numbers and booleans are parsed as TOML; lists accept
    /// a TOML array or comma-separated words.
    pub fn coerce(&self, raw: &str) -> Result<Value, Problem> {
        match self {
            Kind::Bool | Kind::Count { .. } | Kind::Seconds => {
                raw.trim().parse::<Value>().map_err(|_| Problem::WrongType {
                    expected: self.expected(),
                    found: format!("text \"{}\"", shorten(raw)),
                })
            }
            Kind::ListOf(_) if raw.trim_start().starts_with('[') => {
                raw.trim().parse::<Value>().map_err(|_| Problem::WrongType {
                    expected: self.expected(),
                    found: format!("text \"{}\"", shorten(raw)),
                })
            }
            Kind::ListOf(_) => Ok(Value::Array(
                raw.split(',')
                    .map(|w| Value::String(w.trim().to_owned()))
                    .collect(),
            )),
            _ => Ok(Value::String(raw.to_owned())),
        }
    }
}

fn check_seconds(secs: f64, shown: &str) -> Result<(), Problem> {
    if Budget::from_secs_f64(secs).is_some() {
        return Ok(());
    }
    let reason = if secs.is_nan() {
        "nan is not a duration; give a number of seconds greater than 0".to_owned()
    } else if secs <= 0.0 {
        format!("{shown} s is not a budget; give a number of seconds greater than 0")
    } else {
        format!(
            "{shown} s is longer than the maximum budget of {} s (7 days); is that a typo?",
            Budget::MAX_SECS
        )
    };
    Err(Problem::Invalid { reason })
}

/// `None` if an item is not a string (a type error); otherwise the membership check.
fn check_list(set: &[&str], items: &[Value]) -> Option<Result<(), Problem>> {
    let words: Vec<&str> = items.iter().map(Value::as_str).collect::<Option<_>>()?;
    let reason = if words.is_empty() {
        Some(format!("list at least one of {}", quoted(set)))
    } else if let Some(bad) = words.iter().find(|w| !set.contains(w)) {
        Some(format!(
            "\"{}\" is not one of {}",
            shorten(bad),
            quoted(set)
        ))
    } else if let Some((_, dup)) = words
        .iter()
        .enumerate()
        .find(|(i, w)| words[..*i].contains(w))
    {
        Some(format!("\"{dup}\" is listed twice"))
    } else {
        None
    };
    Some(match reason {
        Some(reason) => Err(Problem::Invalid { reason }),
        None => Ok(()),
    })
}

fn is_dns1123_label(s: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    s.len() <= 63
        && s.chars().all(|c| ok_char(c) || c == '-')
        && s.starts_with(ok_char)
        && s.ends_with(ok_char)
}

/// A Kubernetes quantity: a decimal number and an optional binary, decimal or exponent suffix.
fn is_quantity(s: &str) -> bool {
    let digits_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(digits_end);
    let number_ok = !number.is_empty()
        && number.chars().filter(|&c| c == '.').count() <= 1
        && number.chars().any(|c| c.is_ascii_digit());
    const SUFFIXES: &[&str] = &[
        "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "m", "k", "M", "G", "T", "P", "E",
    ];
    let suffix_ok = SUFFIXES.contains(&suffix)
        || suffix
            .strip_prefix(['e', 'E'])
            .and_then(|exp| exp.strip_prefix(['+', '-']).or(Some(exp)))
            .is_some_and(|exp| !exp.is_empty() && exp.chars().all(|c| c.is_ascii_digit()));
    number_ok && suffix_ok
}

fn quoted(set: &[&str]) -> String {
    set.iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The type and a shortened rendering of a value, e.g. `string "abc"`.
pub(crate) fn describe(value: &Value) -> String {
    format!("{} {}", value.type_str(), shorten(&value.to_string()))
}

/// At most 60 characters, on a char boundary, one line.
pub(crate) fn shorten(s: &str) -> String {
    let one_line = first_line(s);
    let mut out: String = one_line.chars().take(60).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// The regex crate puts the pattern and a caret first and the reason last.
fn last_line(s: &str) -> &str {
    s.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::schema::REPORT_FORMATS;

    #[test]
    fn quantities() {
        for ok in ["10Gi", "500Mi", "1", "1.5Gi", "100m", "1e3", "2E-2"] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["", "Gi", "10GB", "10 Gi", "1.2.3Gi", "-1Gi", "1e"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }

    #[test]
    fn namespaces() {
        assert!(is_dns1123_label("wsgate-test"));
        for bad in ["Wsgate", "-a", "a-", "a_b", &"a".repeat(64)] {
            assert!(!is_dns1123_label(bad), "{bad}");
        }
    }

    #[test]
    fn coerce_follows_the_kind() {
        assert_eq!(Kind::Seconds.coerce("2.5"), Ok(Value::Float(2.5)));
        assert_eq!(Kind::Text.coerce("300"), Ok(Value::String("300".into())));
        let formats = Kind::ListOf(REPORT_FORMATS).coerce("junit, json").unwrap();
        assert_eq!(Kind::ListOf(REPORT_FORMATS).check(&formats), Ok(()));
        assert!(matches!(
            Kind::Bool.coerce("yes"),
            Err(Problem::WrongType { .. })
        ));
    }

    #[test]
    fn shorten_is_char_safe() {
        let long = "é".repeat(100);
        assert_eq!(shorten(&long).chars().count(), 61);
    }
}

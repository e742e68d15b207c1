//! Redaction: secrets never reach a report file, and volatile values are masked for golden
//! tests. [`Redactor`] replaces each secret (and its base64, JSON- and XML-escaped forms,
//! including base64 of a longer string that embeds it) with `[REDACTED]`; it runs over the
//! model before rendering and over each rendered file. [`redact_volatile`] masks
//! timestamps, durations, uids and run ids so that goldens stay stable.

use std::sync::LazyLock;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use regex::Regex;

use super::model::RunReport;

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Base64 fragments shorter than this are not searched for: they would match by chance.
const MIN_FRAGMENT: usize = 8;

/// Replaces known secrets in any text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// One alternation of every form of every secret, longest first; `None` when empty.
    pattern: Option<Regex>,
}

impl Redactor {
    /// A redactor for `secrets`; empty strings are ignored.
    pub fn new(secrets: Vec<String>) -> Self {
        let mut needles: Vec<String> = Vec::new();
        for s in secrets.iter().filter(|s| !s.is_empty()) {
            needles.extend(forms(s));
        }
        needles.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        needles.dedup();
        if needles.is_empty() {
            return Self { pattern: None };
        }
        let alternation = needles
            .iter()
            .map(|n| regex::escape(n))
            .collect::<Vec<_>>()
            .join("|");
        // Escaped literals only: the pattern always compiles (size limit aside).
        let pattern = Regex::new(&alternation).ok();
        Self { pattern }
    }

    /// A redactor that knows no secrets.
    pub fn none() -> Self {
        Self::default()
    }

    /// Whether it knows no secrets.
    pub fn is_empty(&self) -> bool {
        self.pattern.is_none()
    }

    /// `text` with every form of every secret replaced by `[REDACTED]`.
    pub fn redact(&self, text: &str) -> String {
        match &self.pattern {
            Some(p) => p.replace_all(text, REDACTED).into_owned(),
            None => text.to_string(),
        }
    }

    /// The report with every string in it (map keys too) redacted.
    pub fn redact_report(&self, report: &RunReport) -> RunReport {
        if self.is_empty() {
            return report.clone();
        }
        let Ok(mut value) = serde_json::to_value(report) else {
            return report.clone();
        };
        self.redact_value(&mut value);
        serde_json::from_value(value).unwrap_or_else(|_| report.clone())
    }

    /// Every string in `value` (map keys too) redacted.
    pub fn redact_value(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(s) => *s = self.redact(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_value(v)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (k, mut v) in entries {
                    self.redact_value(&mut v);
                    map.insert(self.redact(&k), v);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

/// Every form of one secret that a report could contain.
fn forms(secret: &str) -> Vec<String> {
    let mut out = vec![secret.to_string()];
    for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
        out.push(engine.encode(secret));
    }
    // Base64 of a longer string that contains the secret (e.g. `user:token` in a Basic
    // header): the characters that depend only on the secret's bytes, for each alignment.
    for alphabet in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        for lead in 0..3 {
            let fragment = aligned_fragment(alphabet, secret.as_bytes(), lead);
            if fragment.len() >= MIN_FRAGMENT {
                out.push(fragment);
            }
        }
    }
    if let Ok(json) = serde_json::to_string(secret) {
        out.push(json[1..json.len() - 1].to_string());
    }
    out.push(
        secret
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
            .replace('\'', "&apos;"),
    );
    out.retain(|f| !f.is_empty());
    out
}

/// The base64 characters of `secret` preceded by `lead` unknown bytes that depend on the
/// secret's bytes alone (whatever comes before or after it).
fn aligned_fragment(engine: &base64::engine::GeneralPurpose, secret: &[u8], lead: usize) -> String {
    let mut bytes = vec![0u8; lead];
    bytes.extend_from_slice(secret);
    let encoded = engine.encode(&bytes);
    // In the first group, with 1 unknown byte chars 2..4 are the secret's; with 2, char 3.
    let start = match lead {
        0 => 0,
        1 => 2,
        _ => 3,
    };
    // In a last, partial group the characters that reach into the next byte are unknown.
    let n = bytes.len();
    let end = 4 * (n / 3)
        + match n % 3 {
            1 => 1,
            2 => 2,
            _ => 0,
        };
    encoded.get(start..end).unwrap_or("").to_string()
}

static VOLATILE: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    let r = |p: &str| Regex::new(p).expect("volatile patterns are valid");
    vec![
        // RFC 3339 and `2026-03-02 02:00:00 UTC`.
        (
            r(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}| UTC)?"),
            "[TIMESTAMP]",
        ),
        (r(r"\b\d{2}:\d{2}:\d{2} UTC\b"), "[TIMESTAMP]"),
        (
            r(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
            "[UID]",
        ),
        (r(r"\br\d{8}-\d{6}-[0-9a-f]{4}\b"), "[RUN_ID]"),
        // JSON numbers that are durations or clock readings.
        (
            r(r#""(duration|offset|time|[a-z_]*_ms|[a-z_]*_s)": -?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"#),
            r#""$1": "[DURATION]""#,
        ),
        // JUnit: time attributes and phase properties.
        (r(r#"\btime="[0-9.eE+-]+""#), r#"time="[DURATION]""#),
        (
            r(r#"(<property name="phase\.[a-z_]+\.ms" value=")[0-9.]+""#),
            r#"$1[DURATION]""#,
        ),
        // Human durations as `crate::report` writes them.
        (
            r(r"[+-]?\b\d+ h \d{2} m\b|[+-]?\b\d+ m \d{2} s\b|[+-]?\b\d+(?:\.\d+)? ?(?:ms|s)\b"),
            "[DURATION]",
        ),
    ]
});

/// `text` with timestamps, durations, uids and run ids replaced by placeholders
/// (`[TIMESTAMP]`, `[DURATION]`, `[UID]`, `[RUN_ID]`), for golden files.
pub fn redact_volatile(text: &str) -> String {
    let mut out = text.to_string();
    for (pattern, with) in VOLATILE.iter() {
        out = pattern.replace_all(&out, *with).into_owned();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "9f1c2e7ab04d5c36e8a1f0b2c3d4e5f6a7b8c9d0e1f2a3b4";

    #[test]
    fn secrets_and_their_base64_forms_are_replaced() {
        let r = Redactor::new(vec![TOKEN.into(), String::new()]);
        let text = format!(
            "token={TOKEN} b64={} url={}",
            STANDARD.encode(TOKEN),
            URL_SAFE_NO_PAD.encode(TOKEN)
        );
        let out = r.redact(&text);
        assert!(!out.contains(TOKEN), "{out}");
        assert!(!out.contains(&STANDARD_NO_PAD.encode(TOKEN)), "{out}");
        assert_eq!(out.matches(REDACTED).count(), 3, "{out}");
    }

    #[test]
    fn a_secret_inside_a_longer_base64_string_is_caught_at_every_alignment() {
        let r = Redactor::new(vec![TOKEN.into()]);
        for prefix in ["", "u:", "us:", "user:"] {
            let basic = STANDARD.encode(format!("{prefix}{TOKEN}:tail"));
            let out = r.redact(&format!("Authorization: Basic {basic}"));
            assert!(out.contains(REDACTED), "prefix {prefix:?}: {out}");
            // Nothing long enough to rebuild the token survives.
            let left: String = out.replace(REDACTED, " ");
            assert!(
                left.split(' ').all(|w| w.len() < basic.len() / 2 + 8),
                "prefix {prefix:?}: {out}"
            );
        }
    }

    #[test]
    fn escaped_forms_and_report_strings_are_replaced() {
        let secret = "p<a\"ss&word";
        let r = Redactor::new(vec![secret.into()]);
        assert_eq!(r.redact("x p&lt;a&quot;ss&amp;word y"), "x [REDACTED] y");
        assert_eq!(r.redact(r#"x p<a\"ss&word y"#), "x [REDACTED] y");
        let mut report = RunReport {
            run_id: "r1".into(),
            ..RunReport::default()
        };
        let mut s = super::super::ScenarioReport::new("f", "s");
        s.log.push(format!("GET /api?token={secret}"));
        report.scenarios.push(s);
        let clean = r.redact_report(&report);
        assert_eq!(clean.scenarios[0].log[0], "GET /api?token=[REDACTED]");
        assert!(Redactor::none().is_empty());
        assert_eq!(Redactor::none().redact(secret), secret);
    }

    #[test]
    fn volatile_values_become_placeholders() {
        let text = r#"at 2026-03-02T02:14:31.123Z run r20260302-020000-a1b2 uid 3f6c1a2e-8b4d-4c7a-9e21-5d0f7b9a1c44 took 11.8 s, 850 ms, 2 m 05 s, +6.5 s; "offset": 1234.5, "duration_ms": 7 time="12.5""#;
        let out = redact_volatile(text);
        assert_eq!(
            out,
            r#"at [TIMESTAMP] run [RUN_ID] uid [UID] took [DURATION], [DURATION], [DURATION], [DURATION]; "offset": "[DURATION]", "duration_ms": "[DURATION]" time="[DURATION]""#
        );
        assert_eq!(redact_volatile("8.3 GiB, 4/4 GPUs"), "8.3 GiB, 4/4 GPUs");
    }
}

//! The one grammar for a duration a user types on the command line (`probe`'s budgets,
//! `cost`'s idle periods): plain seconds (`45`, `1.5`) or `<number><unit>` parts with units
//! `ms`, `s`, `m` (or `min`), `h`, `d` (`500ms`, `1m30s`, `1.5h`, `7d`), at most
//! [`MAX_SECS`]. The simulator's `lastAccessTimeout` is not parsed here: it is the
//! platform's own field, with the platform's grammar.

use std::time::Duration;

/// The longest duration accepted: a hundred years. Anything longer is taken for a typo,
/// and the accounting multiplies durations, so it is refused rather than overflowed.
pub const MAX_SECS: f64 = 100.0 * 365.0 * 86_400.0;

/// A text that is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{text}` is not a duration: give seconds (90, 1.5) or parts with units ms, s, m, h, d \
     (500ms, 1m30s, 1.5h, 7d), up to 100 years"
)]
pub struct DurationError {
    pub text: String,
}

/// Parses `text` by the grammar above.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let err = || DurationError {
        text: text.to_string(),
    };
    let t = text.trim();
    let in_range = |secs: f64| {
        (secs.is_finite() && (0.0..=MAX_SECS).contains(&secs))
            .then(|| Duration::from_secs_f64(secs))
            .ok_or_else(err)
    };
    if let Ok(secs) = t.parse::<f64>() {
        // `inf`, `NaN` and `1e3` parse as numbers but are not durations anyone types.
        if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return in_range(secs);
        }
        return Err(err());
    }
    let mut total = 0.0;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let value: f64 = rest[..digits].parse().map_err(|_| err())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3_600.0,
            "d" => 86_400.0,
            _ => return Err(err()),
        };
        rest = &rest[unit_len..];
        total += value * unit;
    }
    if t.is_empty() {
        return Err(err());
    }
    in_range(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_grammar_for_every_duration_a_user_types() {
        let s = |text: &str| parse_duration(text).map(|d| d.as_secs_f64());
        for (text, secs) in [
            ("45", 45.0),
            ("1.5", 1.5),
            (" 90s ", 90.0),
            ("500ms", 0.5),
            ("2m", 120.0),
            ("2min", 120.0),
            ("1m30s", 90.0),
            ("1.5h", 5_400.0),
            ("1h30m", 5_400.0),
            ("7d", 604_800.0),
            ("0", 0.0),
        ] {
            assert_eq!(s(text), Ok(secs), "{text}");
        }
        for bad in [
            "",
            " ",
            "soon",
            "5 parsecs",
            "h",
            "1x",
            "-5s",
            "1e3",
            "inf",
            "NaN",
            "1..5s",
            "s1",
            "99999999999999999h",
            "36501d",
            "10m5",
            "-3",
        ] {
            let e = parse_duration(bad).unwrap_err();
            assert_eq!(e.text, bad);
            assert!(e.to_string().contains("is not a duration"), "{e}");
        }
    }
}

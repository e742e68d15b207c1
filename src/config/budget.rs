//! A time budget for one named phase: a positive, bounded number of seconds.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// How long one phase may take before the run reports that it ran out (exit code
/// [`crate::exit_code::BUDGET`]). Always greater than zero and at most [`Budget::MAX_SECS`].
/// In TOML it is a number of seconds, integer or float (`300`, `2.5`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Budget(Duration);

impl Budget {
    /// The longest budget accepted: 7 days. Anything longer is taken for a typo.
    pub const MAX_SECS: f64 = 7.0 * 24.0 * 3600.0;

    /// A budget of `secs` seconds; `None` unless `0 < secs <= MAX_SECS` (so never NaN).
    pub fn from_secs_f64(secs: f64) -> Option<Budget> {
        if secs > 0.0 && secs <= Self::MAX_SECS {
            Duration::try_from_secs_f64(secs).ok().map(Budget)
        } else {
            None
        }
    }

    /// The budget as a [`Duration`], for `tokio::time::timeout` around a wait.
    pub fn duration(self) -> Duration {
        self.0
    }

    /// The budget in seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0.as_secs_f64()
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} s", self.as_secs_f64())
    }
}

impl Serialize for Budget {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0.subsec_nanos() == 0 {
            serializer.serialize_u64(self.0.as_secs())
        } else {
            serializer.serialize_f64(self.as_secs_f64())
        }
    }
}

impl<'de> Deserialize<'de> for Budget {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Seconds;
        impl de::Visitor<'_> for Seconds {
            type Value = Budget;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(
                    f,
                    "a number of seconds greater than 0 and at most {}",
                    Budget::MAX_SECS
                )
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Budget, E> {
                Budget::from_secs_f64(v)
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Float(v), &self))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Budget, E> {
                Budget::from_secs_f64(v as f64)
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Signed(v), &self))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Budget, E> {
                Budget::from_secs_f64(v as f64)
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Unsigned(v), &self))
            }
        }
        deserializer.deserialize_any(Seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_zero_negative_nan_and_huge() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, Budget::MAX_SECS * 2.0] {
            assert_eq!(Budget::from_secs_f64(bad), None, "{bad}");
        }
        assert_eq!(
            Budget::from_secs_f64(2.5).map(Budget::duration),
            Some(Duration::from_millis(2500))
        );
    }
}

//! Pure: percentiles of a drill's durations, and the per-workspace table.

use std::time::Duration;

use serde::Serialize;

/// p50, p95 and max of a set of durations (in seconds), over the ones that were measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub count: usize,
    pub p50_s: f64,
    pub p95_s: f64,
    pub max_s: f64,
}

/// Nearest-rank percentiles of the measured values; `None` when nothing was measured.
pub fn spread(values: &[Option<Duration>]) -> Option<Spread> {
    let mut v: Vec<f64> = values.iter().flatten().map(Duration::as_secs_f64).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    Some(Spread {
        count: v.len(),
        p50_s: rank(0.50),
        p95_s: rank(0.95),
        max_s: v[v.len() - 1],
    })
}

/// `1.23 s`, or `-` when not measured.
pub fn secs(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".into(), |d| format!("{:.2} s", d.as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_over_measured_values() {
        let ms = |n: u64| Some(Duration::from_millis(n));
        let values: Vec<_> = (1..=20).map(|i| ms(i * 100)).chain([None]).collect();
        let s = spread(&values).unwrap();
        assert_eq!(s.count, 20);
        assert!((s.p50_s - 1.0).abs() < 1e-9, "{s:?}");
        assert!((s.p95_s - 1.9).abs() < 1e-9, "{s:?}");
        assert!((s.max_s - 2.0).abs() < 1e-9, "{s:?}");
        assert_eq!(spread(&[None, None]), None);
        let one = spread(&[ms(700)]).unwrap();
        assert_eq!((one.p50_s, one.p95_s, one.max_s), (0.7, 0.7, 0.7));
    }
}

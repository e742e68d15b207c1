//! The simulator's delays: a fixed number of milliseconds (what the shipped profiles use) or
//! a distribution to draw from (what `wsgate sim calibrate` writes from a real cluster's
//! reports), drawn from seeded random streams so that a run is reproducible.
//!
//! In a profile a delay is either a number, `pod_start_ms = 100`, or a table:
//!
//! ```toml
//! pod_start_ms = { samples = [2310, 2480, 3105] }                   # one of them at random
//! restore_ms = { quantiles = [[0.0, 9800], [0.5, 11200], [1.0, 14900]] }  # interpolated
//! ```
//!
//! [`Delays`] draws each delay once per object (a pod's start, its termination, a snapshot's
//! checkpoint) and gives the same value every time it is asked again, since the controllers
//! ask on every reconcile. Each kind of delay has its own stream, seeded from `sim.seed` and
//! the kind: a run whose pods ask in the same order (the suite runs its scenarios one at a
//! time) gets the same delays; pods that start at once, as in a drill, may take each
//! other's draws. The stream is SplitMix64, written here rather than taken from `rand`:
//! `rand`'s `StdRng` may change its algorithm between versions, and a seed must mean the
//! same draws in every build.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::report::fmt::quantile;

/// The longest delay a profile may give: a day, in milliseconds.
pub const MAX_DELAY_MS: f64 = 86_400_000.0;

/// One simulated delay.
#[derive(Debug, Clone, PartialEq)]
pub enum Delay {
    /// Always this many milliseconds.
    Fixed(u64),
    /// Drawn from a distribution.
    Drawn(Distribution),
}

impl Default for Delay {
    fn default() -> Self {
        Delay::Fixed(0)
    }
}

/// A distribution of milliseconds: observed samples (a draw picks one) or quantiles (a draw
/// interpolates between the two around a uniform probability).
#[derive(Debug, Clone, PartialEq)]
pub enum Distribution {
    Samples(Vec<f64>),
    /// `(probability, milliseconds)`, probabilities ascending from 0 to 1.
    Quantiles(Vec<(f64, f64)>),
}

impl Delay {
    /// A draw for probability `u` in `[0, 1)` (ignored by a fixed delay).
    pub fn at(&self, u: f64) -> Duration {
        let ms = match self {
            Delay::Fixed(ms) => *ms as f64,
            Delay::Drawn(Distribution::Samples(s)) => {
                let i = ((u * s.len() as f64) as usize).min(s.len() - 1);
                s[i]
            }
            Delay::Drawn(Distribution::Quantiles(q)) => interpolate(q, u),
        };
        Duration::from_secs_f64(ms.clamp(0.0, MAX_DELAY_MS) / 1000.0)
    }

    /// The median: what a fixed-number summary of this delay says.
    pub fn median(&self) -> Duration {
        match self {
            Delay::Drawn(Distribution::Samples(s)) => {
                let mut sorted = s.clone();
                sorted.sort_by(f64::total_cmp);
                Duration::from_secs_f64(quantile(&sorted, 0.5) / 1000.0)
            }
            d => d.at(0.5),
        }
    }

    /// Whether this delay is drawn (not a fixed number).
    pub fn is_drawn(&self) -> bool {
        matches!(self, Delay::Drawn(_))
    }
}

/// The value at probability `u` of ascending `(p, ms)` points, linear between them.
fn interpolate(q: &[(f64, f64)], u: f64) -> f64 {
    let u = u.clamp(0.0, 1.0);
    for w in q.windows(2) {
        let ((p0, v0), (p1, v1)) = (w[0], w[1]);
        if u <= p1 {
            let span = p1 - p0;
            return if span <= 0.0 {
                v1
            } else {
                v0 + (v1 - v0) * (u - p0) / span
            };
        }
    }
    q.last().map(|(_, v)| *v).unwrap_or(0.0)
}

impl Serialize for Delay {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Delay::Fixed(ms) => s.serialize_u64(*ms),
            Delay::Drawn(Distribution::Samples(v)) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("samples", &rounded(v.iter().copied()))?;
                m.end()
            }
            Delay::Drawn(Distribution::Quantiles(q)) => {
                let mut m = s.serialize_map(Some(1))?;
                let pairs: Vec<[f64; 2]> = q
                    .iter()
                    .map(|(p, v)| [(p * 1e4).round() / 1e4, (v * 10.0).round() / 10.0])
                    .collect();
                m.serialize_entry("quantiles", &pairs)?;
                m.end()
            }
        }
    }
}

/// Milliseconds to a tenth, for a profile a person reads.
fn rounded(v: impl Iterator<Item = f64>) -> Vec<f64> {
    v.map(|x| (x * 10.0).round() / 10.0).collect()
}

/// What a delay table may hold (anything else is refused by name).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    #[serde(default)]
    samples: Option<Vec<f64>>,
    #[serde(default)]
    quantiles: Option<Vec<(f64, f64)>>,
}

const EXPECTED: &str = "milliseconds (a number), { samples = [ms, ...] } or \
     { quantiles = [[probability, ms], ...] } from probability 0 to 1";

impl<'de> Deserialize<'de> for Delay {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Delay;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Delay, E> {
                if v as f64 > MAX_DELAY_MS {
                    return Err(E::custom(format!("{v} ms is more than a day")));
                }
                Ok(Delay::Fixed(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Delay, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom(format!("a delay cannot be negative ({v} ms)")))
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Delay, E> {
                check_ms(v).map_err(E::custom)?;
                Ok(Delay::Fixed(v.round() as u64))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Delay, A::Error> {
                let t = Table::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                table(t).map_err(serde::de::Error::custom)
            }
        }
        d.deserialize_any(V)
    }
}

fn check_ms(v: f64) -> Result<(), String> {
    if !v.is_finite() || v < 0.0 {
        return Err(format!(
            "a delay must be a finite, non-negative number of ms, not {v}"
        ));
    }
    if v > MAX_DELAY_MS {
        return Err(format!("{v} ms is more than a day"));
    }
    Ok(())
}

fn table(t: Table) -> Result<Delay, String> {
    match (t.samples, t.quantiles) {
        (Some(s), None) => {
            if s.is_empty() {
                return Err("`samples` is empty: give at least one ms value".into());
            }
            s.iter().try_for_each(|v| check_ms(*v))?;
            Ok(Delay::Drawn(Distribution::Samples(s)))
        }
        (None, Some(q)) => {
            if q.len() < 2 {
                return Err("`quantiles` needs at least two points, at probability 0 and 1".into());
            }
            for (p, v) in &q {
                check_ms(*v)?;
                if !(0.0..=1.0).contains(p) {
                    return Err(format!("quantile probability {p} is not between 0 and 1"));
                }
            }
            let ascending = q.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1);
            if !ascending {
                return Err("`quantiles` must ascend in probability and in ms".into());
            }
            if q[0].0 != 0.0 || q[q.len() - 1].0 != 1.0 {
                return Err("`quantiles` must start at probability 0 and end at 1".into());
            }
            Ok(Delay::Drawn(Distribution::Quantiles(q)))
        }
        _ => Err(format!("expected {EXPECTED}")),
    }
}

/// The kinds of delay drawn once per object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// A pod's start after it is bound (its uid).
    PodStart,
    /// A deleted pod's graceful termination (its uid).
    Termination,
    /// A restore from a snapshot (the restored pod's uid).
    Restore,
    /// A restored pod's Ready -> `PodRestored` (its uid).
    PodRestored,
    /// A checkpoint's fixed cost before the per-byte part (the trigger's uid).
    CheckpointFixed,
}

impl Purpose {
    const ALL: [Purpose; 5] = [
        Purpose::PodStart,
        Purpose::Termination,
        Purpose::Restore,
        Purpose::PodRestored,
        Purpose::CheckpointFixed,
    ];

    fn stream(self) -> u64 {
        // Fixed per kind, so a new kind of draw never shifts another's stream.
        match self {
            Purpose::PodStart => 0x706f_6473_7461_7274,
            Purpose::Termination => 0x7465_726d_696e_6174,
            Purpose::Restore => 0x7265_7374_6f72_6521,
            Purpose::PodRestored => 0x706f_6472_6573_7464,
            Purpose::CheckpointFixed => 0x6368_6563_6b70_7466,
        }
    }
}

/// SplitMix64 (Steele, Lea and Flood, 2014): a fixed, well-mixed 64-bit stream.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform draw in `[0, 1)` from the top 53 bits.
    fn next_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The delays of a running simulator: each drawn once per object, from a stream per kind
/// seeded by `seed`.
pub struct Delays {
    timing: super::profile::Timing,
    streams: Mutex<HashMap<Purpose, SplitMix64>>,
    drawn: Mutex<HashMap<(Purpose, String), Duration>>,
}

impl Delays {
    pub fn new(timing: &super::profile::Timing, seed: u64) -> Self {
        let streams = Purpose::ALL
            .iter()
            .map(|p| (*p, SplitMix64(seed ^ p.stream())))
            .collect();
        Delays {
            timing: timing.clone(),
            streams: Mutex::new(streams),
            drawn: Mutex::new(HashMap::new()),
        }
    }

    fn delay(&self, purpose: Purpose) -> &Delay {
        let t = &self.timing;
        match purpose {
            Purpose::PodStart => &t.pod_start_ms,
            Purpose::Termination => &t.termination_ms,
            Purpose::Restore => &t.restore_ms,
            Purpose::PodRestored => &t.pod_restored_after_ready_ms,
            Purpose::CheckpointFixed => &t.checkpoint_fixed_ms,
        }
    }

    /// `purpose`'s delay for the object `id`: drawn at the first call, the same afterwards.
    pub fn of(&self, purpose: Purpose, id: &str) -> Duration {
        let delay = self.delay(purpose);
        if let Delay::Fixed(ms) = delay {
            return Duration::from_millis(*ms);
        }
        let mut drawn = self.drawn.lock().unwrap_or_else(|e| e.into_inner());
        *drawn.entry((purpose, id.to_string())).or_insert_with(|| {
            let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
            let u = streams.get_mut(&purpose).map_or(0.5, SplitMix64::next_unit);
            delay.at(u)
        })
    }

    /// Forgets the draws for the object `id` (it is gone).
    pub fn forget(&self, id: &str) {
        self.drawn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(_, k), _| k != id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::profile::{DEFAULT_PROFILE, SimProfile};

    fn timing(extra: &str) -> Result<super::super::profile::Timing, String> {
        let text = DEFAULT_PROFILE.replace("pod_start_ms = 100", extra);
        SimProfile::parse("x", &text)
            .map(|p| p.timing)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn numbers_samples_and_quantiles_are_read_and_bad_tables_are_named() {
        assert_eq!(
            timing("pod_start_ms = 250").unwrap().pod_start_ms,
            Delay::Fixed(250)
        );
        let t = timing("pod_start_ms = { samples = [100, 300.5] }").unwrap();
        assert_eq!(
            t.pod_start_ms,
            Delay::Drawn(Distribution::Samples(vec![100.0, 300.5]))
        );
        let t = timing("pod_start_ms = { quantiles = [[0, 100], [0.5, 200], [1, 900]] }").unwrap();
        assert_eq!(t.pod_start_ms.at(0.25), Duration::from_millis(150));
        assert_eq!(t.pod_start_ms.at(0.75), Duration::from_millis(550));
        for (bad, says) in [
            ("pod_start_ms = -5", "cannot be negative"),
            ("pod_start_ms = { samples = [] }", "`samples` is empty"),
            ("pod_start_ms = { samples = [1, -2] }", "non-negative"),
            (
                "pod_start_ms = { quantiles = [[0, 1]] }",
                "at least two points",
            ),
            (
                "pod_start_ms = { quantiles = [[0, 5], [1, 2]] }",
                "must ascend",
            ),
            (
                "pod_start_ms = { quantiles = [[0.1, 1], [1, 2]] }",
                "start at probability 0",
            ),
            (
                "pod_start_ms = { quantiles = [[0, 1], [2, 2]] }",
                "between 0 and 1",
            ),
            ("pod_start_ms = { mean = 5 }", "unknown field `mean`"),
            (
                "pod_start_ms = { samples = [1], quantiles = [[0, 1], [1, 1]] }",
                "expected",
            ),
            ("pod_start_ms = \"fast\"", "expected milliseconds"),
            ("pod_start_ms = 1e12", "more than a day"),
        ] {
            let err = timing(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn a_delay_is_drawn_once_per_object_and_the_same_seed_draws_the_same() {
        let t = timing("pod_start_ms = { quantiles = [[0, 100], [1, 10000]] }").unwrap();
        let draws = |seed| {
            let d = Delays::new(&t, seed);
            (0..20)
                .map(|i| d.of(Purpose::PodStart, &format!("pod-{i}")))
                .collect::<Vec<_>>()
        };
        assert_eq!(draws(7), draws(7), "the same seed, the same delays");
        assert_ne!(draws(7), draws(8), "another seed, other delays");
        let d = Delays::new(&t, 7);
        let first = d.of(Purpose::PodStart, "p");
        assert_eq!(
            d.of(Purpose::PodStart, "p"),
            first,
            "asked again: the same draw"
        );
        // Another kind's draws never shift this one's stream.
        let e = Delays::new(&t, 7);
        let _ = e.of(Purpose::Termination, "q");
        assert_eq!(e.of(Purpose::PodStart, "p"), first);
        // A fixed delay is the number, whatever the seed.
        assert_eq!(d.of(Purpose::Termination, "p"), Duration::from_millis(50));
        d.forget("p");
        let all: Vec<_> = (0..200)
            .map(|i| d.of(Purpose::PodStart, &i.to_string()))
            .collect();
        assert!(
            all.iter()
                .all(|x| *x >= Duration::from_millis(100) && *x <= Duration::from_secs(10))
        );
        let spread = all.iter().max().unwrap().as_millis() - all.iter().min().unwrap().as_millis();
        assert!(spread > 5000, "draws spread over the range: {spread} ms");
    }

    /// The stream is SplitMix64: its first outputs for seed 0 are the published ones, so
    /// a seed means the same delays in every build.
    #[test]
    fn the_stream_is_splitmix64() {
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let u = SplitMix64(7).next_unit();
        assert!((0.0..1.0).contains(&u));
    }

    #[test]
    fn samples_are_drawn_in_their_own_proportions_and_written_back_as_read() {
        let d = Delay::Drawn(Distribution::Samples(vec![10.0, 20.0, 30.0, 40.0]));
        assert_eq!(d.at(0.0), Duration::from_millis(10));
        assert_eq!(d.at(0.99), Duration::from_millis(40));
        assert_eq!(d.median(), Duration::from_millis(25));
        let text = toml::to_string(&std::collections::BTreeMap::from([("d", d.clone())])).unwrap();
        let back: std::collections::BTreeMap<String, Delay> = toml::from_str(&text).unwrap();
        assert_eq!(back["d"], d, "{text}");
    }
}

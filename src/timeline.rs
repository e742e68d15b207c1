//! Pure: timestamped observations of a scenario and the named phases derived from pairs of
//! them (pause requested -> GPU released, resume requested -> next cell done, ...).
//! Every observation has a UTC timestamp and a monotonic offset from the timeline's start;
//! durations come from the monotonic offsets, so a wall-clock jump cannot skew them.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What was observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    WorkspaceCreated,
    WorkspaceRunning,
    KernelReachable,
    ModelLoaded,
    MarkerStored,
    PauseRequested,
    Checkpointing,
    SnapshotReady,
    PodGone,
    GpuReleased,
    WorkspacePaused,
    ResumeRequested,
    WaitingForResources,
    PodScheduled,
    /// A live pod of the resumed workspace was first seen Ready.
    PodReady,
    /// The pod's `PodRestored` condition was first seen (GKE writes it after Ready).
    PodRestored,
    WorkspaceResumed,
    KernelReconnected,
    NextCellDone,
    RecoveryDone,
    /// code-server answered its `/healthz` (the stateless kind's "next cell").
    EditorAnswered,
    SnapshotsCleanedUp,
    WorkspaceDeleted,
    /// The moment the platform stated the idle Workspace becomes eligible for pause
    /// (`status.activity.rules.pauseWorkspace.eligibleAfter`), placed on the harness's clock.
    IdleEligible,
    /// The harness saw the platform start pausing the idle Workspace on its own.
    IdlePauseStarted,
}

/// One observation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    pub mark: Mark,
    pub at: DateTime<Utc>,
    /// Monotonic time since the timeline started.
    #[serde(with = "millis")]
    pub offset: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1000.0)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        super::millis_in_range(f64::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// The longest duration a report may hold: a year, in milliseconds. Reports are read back
/// (`report`, `cost`, `--compare`), and what they hold is added and multiplied.
pub const MAX_REPORT_MS: f64 = 365.0 * 86_400.0 * 1000.0;

/// A report's milliseconds as a duration, or why they cannot be one: not a number, negative
/// (a clock that went backwards must not count as time saved), or above [`MAX_REPORT_MS`].
pub fn millis_in_range(ms: f64) -> Result<Duration, String> {
    if !ms.is_finite() {
        Err(format!("duration {ms} ms is not a number"))
    } else if ms < 0.0 {
        Err(format!("duration {ms} ms is negative"))
    } else if ms > MAX_REPORT_MS {
        Err(format!(
            "duration {ms:.3e} ms is longer than a year ({MAX_REPORT_MS} ms); the report is damaged"
        ))
    } else {
        Ok(Duration::from_secs_f64(ms / 1000.0))
    }
}

/// A named phase: from the first `from` to the first `to` after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseDef {
    pub name: &'static str,
    pub from: Mark,
    pub to: Mark,
}

/// The phases every report shows, in order.
pub const PHASES: &[PhaseDef] = &[
    PhaseDef {
        name: "create_to_running",
        from: Mark::WorkspaceCreated,
        to: Mark::WorkspaceRunning,
    },
    PhaseDef {
        name: "pause_to_checkpointing",
        from: Mark::PauseRequested,
        to: Mark::Checkpointing,
    },
    PhaseDef {
        name: "pause_to_snapshot_ready",
        from: Mark::PauseRequested,
        to: Mark::SnapshotReady,
    },
    PhaseDef {
        name: "pause_to_paused",
        from: Mark::PauseRequested,
        to: Mark::WorkspacePaused,
    },
    PhaseDef {
        name: "pause_to_gpu_free",
        from: Mark::PauseRequested,
        to: Mark::GpuReleased,
    },
    PhaseDef {
        name: "resume_to_scheduled",
        from: Mark::ResumeRequested,
        to: Mark::PodScheduled,
    },
    PhaseDef {
        name: "resume_to_running",
        from: Mark::ResumeRequested,
        to: Mark::WorkspaceResumed,
    },
    PhaseDef {
        name: "ready_to_pod_restored",
        from: Mark::PodReady,
        to: Mark::PodRestored,
    },
    PhaseDef {
        name: "resume_to_pod_restored",
        from: Mark::ResumeRequested,
        to: Mark::PodRestored,
    },
    PhaseDef {
        name: "resume_to_kernel",
        from: Mark::ResumeRequested,
        to: Mark::KernelReconnected,
    },
    PhaseDef {
        name: "resume_to_next_cell",
        from: Mark::ResumeRequested,
        to: Mark::NextCellDone,
    },
    PhaseDef {
        name: "resume_to_recovered",
        from: Mark::ResumeRequested,
        to: Mark::RecoveryDone,
    },
    PhaseDef {
        name: "resume_to_editor",
        from: Mark::ResumeRequested,
        to: Mark::EditorAnswered,
    },
    PhaseDef {
        name: "idle_eligible_to_pause",
        from: Mark::IdleEligible,
        to: Mark::IdlePauseStarted,
    },
    PhaseDef {
        name: "idle_eligible_to_paused",
        from: Mark::IdleEligible,
        to: Mark::WorkspacePaused,
    },
];

/// A phase's measured duration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseDuration {
    pub name: String,
    #[serde(with = "millis")]
    pub duration: Duration,
}

/// The observations of one scenario, in the order they were made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    pub started_at: Option<DateTime<Utc>>,
    pub observations: Vec<Observation>,
}

impl Timeline {
    /// An empty timeline that starts at `started_at`.
    pub fn new(started_at: DateTime<Utc>) -> Self {
        Self {
            started_at: Some(started_at),
            observations: Vec::new(),
        }
    }

    /// Adds an observation made `offset` after the start.
    pub fn push(
        &mut self,
        mark: Mark,
        at: DateTime<Utc>,
        offset: Duration,
        detail: Option<String>,
    ) {
        self.observations.push(Observation {
            mark,
            at,
            offset,
            detail,
        });
    }

    /// Adds an observation made at another moment than now (a time the platform stated),
    /// keeping the observations in offset order; the offset is `at` placed on the monotonic
    /// clock through the pair (`now_at`, `now_offset`), clamped to `[0, now_offset]`.
    pub fn insert_at(
        &mut self,
        mark: Mark,
        at: DateTime<Utc>,
        now_at: DateTime<Utc>,
        now_offset: Duration,
        detail: Option<String>,
    ) {
        let before_now = (now_at - at).to_std().unwrap_or(Duration::ZERO);
        let offset = now_offset.saturating_sub(before_now);
        let i = self.observations.partition_point(|o| o.offset <= offset);
        self.observations.insert(
            i,
            Observation {
                mark,
                at,
                offset,
                detail,
            },
        );
    }

    /// The first observation of `mark` at or after `after`.
    pub fn first_after(&self, mark: Mark, after: Duration) -> Option<&Observation> {
        self.observations
            .iter()
            .find(|o| o.mark == mark && o.offset >= after)
    }

    /// The last observation of `mark`.
    pub fn last(&self, mark: Mark) -> Option<&Observation> {
        self.observations.iter().rev().find(|o| o.mark == mark)
    }

    /// The duration of one phase: from the last `from` to the first `to` after it.
    pub fn phase(&self, def: &PhaseDef) -> Option<Duration> {
        let from = self.last(def.from)?;
        let to = self.first_after(def.to, from.offset)?;
        Some(to.offset - from.offset)
    }

    /// Every phase of [`PHASES`] that the observations complete.
    pub fn phases(&self) -> Vec<PhaseDuration> {
        PHASES
            .iter()
            .filter_map(|def| {
                self.phase(def).map(|d| PhaseDuration {
                    name: def.name.to_string(),
                    duration: d,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tl(marks: &[(Mark, u64)]) -> Timeline {
        let start = Utc::now();
        let mut t = Timeline::new(start);
        for (m, ms) in marks {
            let d = Duration::from_millis(*ms);
            t.push(*m, start + chrono::Duration::from_std(d).unwrap(), d, None);
        }
        t
    }

    #[test]
    fn phases_pair_the_last_start_with_the_first_end_after_it() {
        let t = tl(&[
            (Mark::WorkspaceCreated, 0),
            (Mark::WorkspaceRunning, 1200),
            (Mark::PauseRequested, 2000),
            (Mark::GpuReleased, 2500),
            (Mark::WorkspacePaused, 2600),
            (Mark::ResumeRequested, 5000),
            (Mark::WorkspaceResumed, 5400),
            (Mark::NextCellDone, 5900),
        ]);
        let p = |n: &str| {
            t.phases()
                .into_iter()
                .find(|p| p.name == n)
                .map(|p| p.duration.as_millis())
        };
        assert_eq!(p("create_to_running"), Some(1200));
        assert_eq!(p("pause_to_gpu_free"), Some(500));
        assert_eq!(p("pause_to_paused"), Some(600));
        assert_eq!(p("resume_to_running"), Some(400));
        assert_eq!(p("resume_to_next_cell"), Some(900));
        assert_eq!(p("resume_to_recovered"), None, "no recovery happened");
    }

    #[test]
    fn an_end_before_the_start_does_not_count() {
        let t = tl(&[(Mark::GpuReleased, 100), (Mark::PauseRequested, 200)]);
        assert_eq!(t.phase(&PHASES[4]), None);
        let t = tl(&[
            (Mark::PauseRequested, 100),
            (Mark::PauseRequested, 300),
            (Mark::GpuReleased, 450),
        ]);
        assert_eq!(
            t.phase(&PHASES[4]),
            Some(Duration::from_millis(150)),
            "a retried pause counts from the last request"
        );
    }

    #[test]
    fn a_stated_moment_is_placed_in_order_and_measured_against_later_marks() {
        let mut t = tl(&[
            (Mark::MarkerStored, 1_000),
            (Mark::IdlePauseStarted, 20_000),
        ]);
        let now_at = t.started_at.unwrap() + chrono::Duration::milliseconds(20_500);
        let eligible = now_at - chrono::Duration::milliseconds(2_500);
        t.insert_at(
            Mark::IdleEligible,
            eligible,
            now_at,
            Duration::from_millis(20_500),
            None,
        );
        let marks: Vec<_> = t.observations.iter().map(|o| o.mark).collect();
        assert_eq!(
            marks,
            [
                Mark::MarkerStored,
                Mark::IdleEligible,
                Mark::IdlePauseStarted
            ]
        );
        let p = |n: &str| {
            t.phases()
                .into_iter()
                .find(|p| p.name == n)
                .map(|p| p.duration)
        };
        assert_eq!(
            p("idle_eligible_to_pause"),
            Some(Duration::from_millis(2_000))
        );
        assert_eq!(p("idle_eligible_to_paused"), None, "not Paused yet");
        // A moment before the timeline started (a skewed clock) is clamped to its start.
        t.insert_at(
            Mark::IdleEligible,
            now_at - chrono::Duration::seconds(60),
            now_at,
            Duration::from_millis(20_500),
            None,
        );
        assert_eq!(t.observations[0].offset, Duration::ZERO);
    }

    #[test]
    fn timelines_round_trip_through_json() {
        let t = tl(&[(Mark::PauseRequested, 1), (Mark::WorkspacePaused, 2500)]);
        let back: Timeline = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back.phases(), t.phases());
    }
}

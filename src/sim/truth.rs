//! Ground truth: when each real transition happened in the simulator (pod scheduled,
//! running, ready, deleted; checkpoint start and end; restore; GPU allocated and released),
//! so tests can measure how late and how accurately the harness observed it.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Transition {
    PodScheduled,
    PodUnschedulable,
    PodRunning,
    PodReady,
    PodDeleted,
    GpuAllocated,
    GpuReleased,
    CheckpointStarted,
    CheckpointFinished,
    CheckpointFailed,
    /// A restore began on the node (the pod's sandbox restored from its snapshot).
    Restored,
    /// The pod's `PodRestored` condition was written (after the pod turned Ready).
    PodRestoredWritten,
    ColdStarted,
    SnapshotDeleted,
    WorkspaceState,
    /// The add-on's webhook held a pause: the Workspace's `checkpoint-state` became
    /// `Checkpointing` (recorded in the admission of the write that carried it).
    PauseHeld,
}

/// One recorded transition.
#[derive(Debug, Clone, Serialize)]
pub struct TruthEvent {
    pub at: DateTime<Utc>,
    /// Milliseconds since the simulator started (monotonic).
    pub since_start_ms: f64,
    pub transition: Transition,
    pub namespace: Option<String>,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// How long the simulator itself delayed this transition (checkpoint, restore, start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imposed_delay_ms: Option<f64>,
}

/// One reconcile: (reaction lag, time inside reconcile), in microseconds.
type Reaction = (u32, u32);

/// A delay the simulator imposes on purpose (the profile's `[timing]`), by what it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Imposed {
    /// Bind -> container started (`pod_start_ms`).
    PodStart,
    /// The extra start time of a pod restored from a snapshot (`restore_ms`).
    Restore,
    /// A checkpoint's upload (`checkpoint_min_ms`, `checkpoint_mib_per_s`).
    Checkpoint,
    /// Graceful termination of a deleted pod (`termination_ms`).
    Termination,
    /// The snapshot add-on's drain before it triggers a checkpoint (`addon_settle_ms`).
    AddonSettle,
    /// A restored pod's Ready -> its `PodRestored` condition (`pod_restored_after_ready_ms`).
    PodRestoredLag,
}

/// How many delays of one kind the simulator served, and their sum.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImposedStats {
    pub delay: Imposed,
    pub count: usize,
    pub total_ms: f64,
}

/// The recorder. Cheap to share.
pub struct Truth {
    start: Instant,
    events: Mutex<Vec<TruthEvent>>,
    /// Per controller: (reaction lag, time inside reconcile) of every reconcile, microseconds.
    reactions: Mutex<BTreeMap<(&'static str, &'static str), Vec<Reaction>>>,
    /// Per kind of delay: how many were served and their sum.
    imposed: Mutex<BTreeMap<Imposed, (usize, std::time::Duration)>>,
    /// Per fault: how many times it changed what the simulator did.
    faults: Mutex<BTreeMap<crate::sim::faults::Fault, u64>>,
}

impl Default for Truth {
    fn default() -> Self {
        Self {
            start: Instant::now(),
            events: Mutex::new(Vec::new()),
            reactions: Mutex::new(BTreeMap::new()),
            imposed: Mutex::new(BTreeMap::new()),
            faults: Mutex::new(BTreeMap::new()),
        }
    }
}

/// How quickly one controller acted: the lag from the change it reacts to (or its timer
/// falling due) to the start of its reconcile, and the time each reconcile took.
#[derive(Debug, Clone, Serialize)]
pub struct ReactionStats {
    pub controller: &'static str,
    /// The kind of the reconciled objects.
    pub kind: &'static str,
    pub reconciles: usize,
    pub lag_p50_ms: f64,
    pub lag_p99_ms: f64,
    pub lag_max_ms: f64,
    pub busy_p99_ms: f64,
    pub busy_max_ms: f64,
    pub busy_total_ms: f64,
}

fn micros(d: std::time::Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

fn percentile_ms(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    f64::from(sorted[((sorted.len() - 1) as f64 * p).round() as usize]) / 1000.0
}

impl Truth {
    /// Records a transition now.
    pub fn record(
        &self,
        transition: Transition,
        namespace: Option<&str>,
        name: &str,
        node: Option<&str>,
        detail: Option<String>,
    ) {
        self.record_delayed(transition, namespace, name, node, detail, None);
    }

    /// Records a transition the simulator delayed on purpose by `imposed`.
    pub fn record_delayed(
        &self,
        transition: Transition,
        namespace: Option<&str>,
        name: &str,
        node: Option<&str>,
        detail: Option<String>,
        imposed: Option<std::time::Duration>,
    ) {
        let ev = TruthEvent {
            at: Utc::now(),
            since_start_ms: self.start.elapsed().as_secs_f64() * 1000.0,
            transition,
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
            node: node.map(str::to_string),
            detail,
            imposed_delay_ms: imposed.map(|d| d.as_secs_f64() * 1000.0),
        };
        tracing::debug!(?transition, name, "ground truth");
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ev);
    }

    /// Records one reconcile of `controller` (of an object of `kind`): how late it started, and how long it ran.
    pub fn record_reaction(
        &self,
        controller: &'static str,
        kind: &'static str,
        lag: std::time::Duration,
        busy: std::time::Duration,
    ) {
        self.reactions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((controller, kind))
            .or_default()
            .push((micros(lag), micros(busy)));
    }

    /// Each controller's reaction figures so far, by name and kind.
    pub fn reactions(&self) -> Vec<ReactionStats> {
        let all = self.reactions.lock().unwrap_or_else(|e| e.into_inner());
        all.iter()
            .map(|((controller, kind), samples)| {
                let mut lag: Vec<u32> = samples.iter().map(|s| s.0).collect();
                let mut busy: Vec<u32> = samples.iter().map(|s| s.1).collect();
                lag.sort_unstable();
                busy.sort_unstable();
                ReactionStats {
                    controller,
                    kind,
                    reconciles: samples.len(),
                    lag_p50_ms: percentile_ms(&lag, 0.5),
                    lag_p99_ms: percentile_ms(&lag, 0.99),
                    lag_max_ms: percentile_ms(&lag, 1.0),
                    busy_p99_ms: percentile_ms(&busy, 0.99),
                    busy_max_ms: percentile_ms(&busy, 1.0),
                    busy_total_ms: busy.iter().map(|b| f64::from(*b)).sum::<f64>() / 1000.0,
                }
            })
            .collect()
    }

    /// Records that the simulator served a delay of `delay` on purpose: call it once the
    /// delayed step happened, with the delay the profile asked for.
    pub fn record_imposed(&self, what: Imposed, delay: std::time::Duration) {
        let mut all = self.imposed.lock().unwrap_or_else(|e| e.into_inner());
        let entry = all.entry(what).or_default();
        entry.0 += 1;
        entry.1 += delay;
    }

    /// Records that `fault` changed what the simulator did just now (a restore refused, a
    /// checkpoint failed, a GPU kept ...): call it where the fault acts, not where it is
    /// looked up, so that a fault that silently did nothing shows as none.
    pub fn record_fault(&self, fault: crate::sim::faults::Fault) {
        *self
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(fault)
            .or_default() += 1;
    }

    /// How many times each fault acted so far (faults that never did are left out).
    pub fn faults(&self) -> BTreeMap<crate::sim::faults::Fault, u64> {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The delays served so far, by kind (kinds with none are left out).
    pub fn imposed(&self) -> Vec<ImposedStats> {
        self.imposed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(delay, (count, total))| ImposedStats {
                delay: *delay,
                count: *count,
                total_ms: total.as_secs_f64() * 1000.0,
            })
            .collect()
    }

    /// Every transition so far, in order.
    pub fn events(&self) -> Vec<TruthEvent> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn imposed_delays_add_up_per_kind() {
        let t = Truth::default();
        assert!(t.imposed().is_empty());
        t.record_imposed(Imposed::PodStart, Duration::from_millis(100));
        t.record_imposed(Imposed::Checkpoint, Duration::from_millis(250));
        t.record_imposed(Imposed::PodStart, Duration::from_millis(40));
        let got = t.imposed();
        assert_eq!(
            got,
            vec![
                ImposedStats {
                    delay: Imposed::PodStart,
                    count: 2,
                    total_ms: 140.0
                },
                ImposedStats {
                    delay: Imposed::Checkpoint,
                    count: 1,
                    total_ms: 250.0
                },
            ]
        );
    }
}

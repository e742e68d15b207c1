//! Ground truth: when each real transition happened in the simulator (pod scheduled,
//! running, ready, deleted; checkpoint start and end; restore; GPU allocated and released),
//! so tests can measure how late and how accurately the harness observed it.

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
    Restored,
    ColdStarted,
    SnapshotDeleted,
    WorkspaceState,
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

/// The recorder. Cheap to share.
pub struct Truth {
    start: Instant,
    events: Mutex<Vec<TruthEvent>>,
}

impl Default for Truth {
    fn default() -> Self {
        Self {
            start: Instant::now(),
            events: Mutex::new(Vec::new()),
        }
    }
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

    /// Every transition so far, in order.
    pub fn events(&self) -> Vec<TruthEvent> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

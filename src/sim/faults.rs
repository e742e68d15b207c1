//! Named, injectable misbehaviours. Each exists so that a test can prove the harness
//! catches it. A fault is on for a whole run (profile `[faults] enabled`) or for one object
//! (annotation `sim.wsgate.dev/fault`, comma-separated, on the Workspace or its pod).

use crate::sim::json::Lookup as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The annotation that switches faults on for one object.
pub const FAULT_ANNOTATION: &str = "sim.wsgate.dev/fault";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// Resume cold-starts although a matching snapshot exists, with no event or condition.
    SilentColdStart,
    /// The home directory's files are gone after the pause.
    LoseHomeFiles,
    /// The checkpoint fails: PodSnapshot `Checkpoint=False/Failed`, trigger
    /// `Triggered=False/Failed`; the add-on keeps the Workspace `Checkpointing`, its pod
    /// running and its GPU held, as upstream's (no failure path).
    CheckpointFails,
    /// The checkpoint never finishes: the snapshot stays `AwaitingCheckpoint`.
    CheckpointHangs,
    /// Deleting a snapshot hangs in `Deleting` (the GKE service agent lacks storage permission).
    SnapshotStuckDeleting,
    /// The GPU stays allocated on the node after the pod is gone.
    GpuNotReleased,
    /// Resume starts two restore attempts (two pods) at once.
    DuplicateRestoreAttempts,
    /// The resume lands on a node with another GPU model: the restore cannot match.
    GpuModelMismatch,
    /// Restores take ten times longer than the profile says.
    SlowRestore,
    /// The kernel process dies after the resume.
    KernelDies,
    /// The API server answers 429 or 500 to a fraction of requests.
    ApiErrors,
    /// The API server drops watch streams early.
    WatchDrops,
    /// The workspace controller panics on a Workspace (run-wide, or one carrying this): the
    /// simulator must stop at once and leave no process behind, and `wsgate run` exit 70.
    ControllerPanics,
}

impl Fault {
    pub const ALL: &[Fault] = &[
        Fault::SilentColdStart,
        Fault::LoseHomeFiles,
        Fault::CheckpointFails,
        Fault::CheckpointHangs,
        Fault::SnapshotStuckDeleting,
        Fault::GpuNotReleased,
        Fault::DuplicateRestoreAttempts,
        Fault::GpuModelMismatch,
        Fault::SlowRestore,
        Fault::KernelDies,
        Fault::ApiErrors,
        Fault::WatchDrops,
        Fault::ControllerPanics,
    ];

    /// The name used in profiles and annotations.
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    pub fn parse(name: &str) -> Option<Fault> {
        serde_json::from_value(Value::String(name.trim().to_string())).ok()
    }
}

/// Whether `obj` carries `fault` in its fault annotation.
pub fn annotated(obj: &Value, fault: Fault) -> bool {
    obj.lookup("/metadata/annotations")
        .and_then(|a| a.get(FAULT_ANNOTATION))
        .and_then(Value::as_str)
        .is_some_and(|s| s.split(',').filter_map(Fault::parse).any(|f| f == fault))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_round_trip_and_annotations_match() {
        for f in Fault::ALL {
            assert_eq!(Fault::parse(&f.name()), Some(*f));
        }
        let o = json!({"metadata": {"annotations": {FAULT_ANNOTATION: "slow-restore, silent-cold-start"}}});
        assert!(annotated(&o, Fault::SilentColdStart));
        assert!(!annotated(&o, Fault::KernelDies));
    }
}

//! The GKE Pod Snapshot agent (in progress): triggers, PodSnapshots, restore matching,
//! retention. This first piece answers the kubelet's question "does this new pod restore
//! from a snapshot?".

use std::time::Duration;

use serde_json::Value;

use super::Ctx;

/// The pod annotation that pins the snapshot to restore from.
pub const PS_NAME: &str = "podsnapshot.gke.io/ps-name";

/// A restore the kubelet carries out when it starts a pod.
#[derive(Debug, Clone)]
pub struct RestorePlan {
    pub snapshot_name: String,
    pub snapshot_uid: String,
    /// How long the restore takes (the profile's restore time, with faults applied).
    pub delay: Duration,
}

/// Whether `pod` restores from a snapshot, and from which. `None` is a cold start.
pub fn restore_plan(_ctx: &Ctx, _pod: &Value) -> Option<RestorePlan> {
    None
}

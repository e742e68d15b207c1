//! GKE Pod Snapshot kinds (`podsnapshot.gke.io/v1`): the storage config (cluster-scoped),
//! the policy, the manual trigger and the snapshot itself (gke-pod-snapshots.md §2).
//! Conditions and status stay JSON: GKE owns their exact shape.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where snapshots are written (`spec.snapshotStorageConfig.gcs`).
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "podsnapshot.gke.io",
    version = "v1",
    kind = "PodSnapshotStorageConfig",
    plural = "podsnapshotstorageconfigs",
    status = "serde_json::Value"
)]
#[serde(rename_all = "camelCase")]
pub struct PodSnapshotStorageConfigSpec {
    pub snapshot_storage_config: serde_json::Value,
}

/// Which pods are snapshotted, how they are triggered and how long snapshots live.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "podsnapshot.gke.io",
    version = "v1",
    kind = "PodSnapshotPolicy",
    plural = "podsnapshotpolicies",
    namespaced,
    status = "serde_json::Value"
)]
#[serde(rename_all = "camelCase")]
pub struct PodSnapshotPolicySpec {
    pub selector: serde_json::Value,
    pub storage_config_name: String,
    pub trigger_config: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_config: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_grouping_rules: Option<serde_json::Value>,
}

/// A request to checkpoint one pod now.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "podsnapshot.gke.io",
    version = "v1",
    kind = "PodSnapshotManualTrigger",
    plural = "podsnapshotmanualtriggers",
    namespaced,
    status = "serde_json::Value"
)]
#[serde(rename_all = "camelCase")]
pub struct PodSnapshotManualTriggerSpec {
    pub target_pod: String,
}

/// A snapshot GKE wrote (named by a UUID; only GKE writes these).
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "podsnapshot.gke.io",
    version = "v1",
    kind = "PodSnapshot",
    plural = "podsnapshots",
    namespaced,
    status = "serde_json::Value"
)]
#[serde(rename_all = "camelCase")]
pub struct PodSnapshotSpec {
    #[serde(default)]
    pub policy_name: String,
}

//! `Workspace` (`kubeflow.org/v1beta1`, namespaced): one notebook workspace.
//! Field reference: kubeflow-workspaces.md §2-§3. Status times are epoch milliseconds.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The desired workspace.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1beta1",
    kind = "Workspace",
    plural = "workspaces",
    shortname = "ws",
    namespaced,
    status = "WorkspaceStatus",
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceSpec {
    /// Pause: the controller scales the StatefulSet to 0.
    #[serde(default)]
    pub paused: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// The WorkspaceKind name (immutable).
    pub kind: String,
    pub pod_template: WorkspacePodTemplate,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspacePodTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_metadata: Option<PodMetadata>,
    #[serde(default)]
    pub volumes: WorkspaceVolumes,
    pub options: WorkspaceOptions,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PodMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceVolumes {
    /// The home PVC name; it must already exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<DataVolume>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolume {
    pub pvc_name: String,
    pub mount_path: String,
    #[serde(default)]
    pub read_only: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceOptions {
    pub image_config: String,
    pub pod_config: String,
}

/// The states the controller derives (kubeflow-workspaces.md §4.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum WorkspaceState {
    Running,
    Terminating,
    Paused,
    Pending,
    Error,
    #[default]
    Unknown,
}

impl std::fmt::Display for WorkspaceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// What the controller reports. Every field the CRD requires is present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceStatus {
    #[serde(default)]
    pub state: WorkspaceState,
    #[serde(default)]
    pub state_message: String,
    /// Epoch ms when the controller first saw `paused=true`; 0 when not paused.
    #[serde(default)]
    pub pause_time: i64,
    /// Epoch ms of the last transition into Running; 0 if never.
    #[serde(default)]
    pub last_running_time: i64,
    #[serde(default)]
    pub pending_restart: bool,
    #[serde(default)]
    pub activity: WorkspaceActivity,
    #[serde(default)]
    pub pod_template_options: serde_json::Value,
    #[serde(default)]
    pub pod_template_pod: PodTemplatePod,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceActivity {
    #[serde(default)]
    pub last_activity: i64,
    #[serde(default)]
    pub last_update: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplatePod {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub node_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

//! `WorkspaceKind` (`kubeflow.org/v1beta1`, cluster-scoped): the template workspaces are
//! made from. The harness reads the spawner, pod template options and activity settings;
//! the rest is kept as JSON (kubeflow-workspaces.md §6).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1beta1",
    kind = "WorkspaceKind",
    plural = "workspacekinds",
    shortname = "wsk",
    status = "serde_json::Value"
)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceKindSpec {
    pub spawner: serde_json::Value,
    pub pod_template: serde_json::Value,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub activity_rules: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filter_rules: Vec<serde_json::Value>,
}

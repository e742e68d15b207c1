//! Custom resource types of the platform, with the JSON names of the real CRDs
//! (`kubeflow.org/v1beta1` Workspaces, `podsnapshot.gke.io/v1` Pod Snapshots). The simulator
//! shares these types; fields the harness does not read stay as untyped JSON.

pub mod podsnapshot;
pub mod workspace;
pub mod workspacekind;

pub use podsnapshot::{
    PodSnapshot, PodSnapshotManualTrigger, PodSnapshotPolicy, PodSnapshotStorageConfig,
};
pub use workspace::{Workspace, WorkspaceSpec, WorkspaceState, WorkspaceStatus};
pub use workspacekind::{WorkspaceKind, WorkspaceKindSpec};

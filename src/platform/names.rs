//! The platform's names: the one copy the harness and the simulator share (the simulator
//! imports nothing else of the harness but the RBAC model). Each group says whose name it is.

// Kubeflow Workspaces (kubeflow/notebooks, notebooks-v2 `workspaces/controller`).

/// The label the workspace controller puts on every object it creates for a Workspace,
/// the pod included.
pub const WORKSPACE_LABEL: &str = "notebooks.kubeflow.org/workspace-name";

// The GKE Workspaces snapshot add-on (gke-labs/workspaces `providers/gke/internal/snapshot`).

/// The annotation that enables pause/resume through Pod Snapshots on a WorkspaceKind or
/// a Workspace.
pub const SNAPSHOT_ENABLED: &str = "podsnapshot.gke.kubeflow.org/enabled";
/// The add-on's annotation that says where a pause stands (`Checkpointing`, `Ready` ...).
pub const CHECKPOINT_STATE: &str = "podsnapshot.gke.kubeflow.org/checkpoint-state";
/// The annotation on a WorkspaceKind or Workspace naming its PodSnapshotStorageConfig.
pub const STORAGE_CONFIG_ANNOTATION: &str = "podsnapshot.gke.kubeflow.org/storage-config";
/// The PodSnapshotStorageConfig the add-on uses by default.
pub const STORAGE_CONFIG: &str = "kubeflow-pod-snapshot-storage-config";

// wsgate's own simulator.

/// What the simulator's `gitVersion` ends with (`/version`), embedded or on its own.
pub const SIM_VERSION_MARK: &str = "+wsgate-sim";

// GKE Pod Snapshots (kubernetes-sigs/agent-sandbox `clients/go/gke_extensions/snapshots`).

/// The label on every PodSnapshot a manual trigger produced, naming the trigger.
pub const TRIGGERED_BY: &str = "gke-pod-snapshot-triggered-by";
/// The pod condition GKE writes on a pod restored from a snapshot (after it is Ready).
pub const POD_RESTORED: &str = "PodRestored";
/// The event reason of a checkpoint or restore.
pub const RESTORE_EVENT: &str = "GKEPodSnapshotting";

// GKE nodes and the NVIDIA device plugin.

/// The extended resource a GPU is requested and allocated as.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// The node label naming the GPU model.
pub const ACCELERATOR_LABEL: &str = "cloud.google.com/gke-accelerator";

// wsgate's own.

/// The label a namespace must carry before wsgate runs destructive steps in it.
pub const OPT_IN_LABEL: &str = "wsgate.dev/test-namespace";
/// Label: the run that created an object.
pub const RUN_ID_LABEL: &str = "wsgate.dev/run-id";
/// Label: when the janitor may remove the object (UTC epoch seconds).
pub const EXPIRES_LABEL: &str = "wsgate.dev/expires";
/// Label: who manages the object.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "wsgate");

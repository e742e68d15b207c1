//! The gate's state file: everything `gate verify` needs from `gate prepare`, and nothing
//! secret. The Jupyter token stays in the namespace's Secret; the nonce is sealed (see
//! `session::marker`); the cluster's address is kept only to warn when verify talks to
//! another one. Written atomically with mode 0600.

use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::platform::ledger::Ledger;
use crate::session::marker::SealedNonce;
use crate::session::protocol::MarkerPlan;
use crate::session::state_file::{StateFileError, StateKind};
use crate::trial::SnapshotRef;
use crate::verdict::Evidence;

/// The schema tag of the current format.
pub const SCHEMA: &str = "wsgate.dev/gate-state/v1";

/// What `gate prepare` leaves for `gate verify`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateState {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The gate's run id (the label on everything it created).
    pub run_id: String,
    pub prepared_at: DateTime<Utc>,
    /// When the janitor may remove what prepare left, if verify never runs.
    pub expires_at: DateTime<Utc>,
    /// The API server prepare talked to (no credentials).
    pub server: String,
    pub namespace: String,
    /// The Workspace and its uid (verify refuses a namesake).
    pub workspace: String,
    pub workspace_uid: String,
    /// The WorkspaceKind and options it was created with.
    pub kind: String,
    pub image_config: String,
    pub pod_config: String,
    /// The node the workspace ran on before the pause.
    pub node_before_pause: Option<String>,
    /// The PodSnapshot the pause produced (name, uid). Verify identifies it by its name, as
    /// GKE's `PodRestored` message does; the uid is kept for the bucket layout.
    pub snapshot: Option<SnapshotRef>,
    /// The kernel that holds the marker.
    pub kernel_id: String,
    /// The nonce, sealed (not the nonce itself).
    pub nonce: SealedNonce,
    /// What was stored where.
    pub plan: MarkerPlan,
    /// The evidence from before the pause.
    pub before: Evidence,
    /// What prepare created, in order (verify removes it in reverse).
    pub ledger: Ledger,
}

/// The gate's state file, for messages.
pub static KIND: StateKind = StateKind {
    what: "gate state",
    when_missing: "run `wsgate gate prepare --state FILE` before the upgrade",
};

/// Why the state file could not be used.
pub type StateError = StateFileError;

impl GateState {
    /// Reads and validates a state file.
    pub fn read(path: &Path) -> Result<Self, StateError> {
        let state = KIND.read(path, SCHEMA, |s: &GateState| &s.schema)?;
        if state.nonce.unseal().is_none() {
            return Err(KIND.invalid(path, "the sealed nonce is damaged"));
        }
        Ok(state)
    }

    /// Writes the state file atomically, mode 0600 (see `write_private_json`).
    pub fn write(&self, path: &Path) -> Result<(), StateError> {
        KIND.write(path, self)
    }
}

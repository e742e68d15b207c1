//! The state file `wsgate probe mark` writes and `wsgate probe check` reads: the plan, the
//! sealed nonce and the evidence from before the pause. It never holds a token; it is
//! written atomically with mode 0600.

use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::marker::SealedNonce;
use super::protocol::MarkerPlan;
use super::state_file::{StateFileError, StateKind};
use crate::verdict::Evidence;

/// The schema tag of the current format.
pub const SCHEMA: &str = "wsgate.dev/probe-state/v1";

/// What `probe mark` leaves for `probe check`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeState {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The server's base URL (no token, no query).
    pub url: String,
    /// The kernel that holds the marker.
    pub kernel_id: String,
    /// Whether `probe mark` started that kernel.
    pub kernel_started_by_probe: bool,
    /// The nonce, sealed (not the nonce itself).
    pub nonce: SealedNonce,
    /// The digest the kernel reported for the nonce.
    pub marker_digest: String,
    /// What was stored where.
    pub plan: MarkerPlan,
    /// When the marker was stored.
    pub marked_at: DateTime<Utc>,
    /// The evidence from before the pause.
    pub before: Evidence,
}

/// The probe's state file, for messages.
pub static KIND: StateKind = StateKind {
    what: "probe state",
    when_missing: "run `wsgate probe mark` first",
};

impl ProbeState {
    /// Reads and validates a state file.
    pub fn read(path: &Path) -> Result<Self, StateFileError> {
        KIND.read(path, SCHEMA, |s: &ProbeState| &s.schema)
    }

    /// Writes the state file atomically (a temporary file beside it, then a rename).
    pub fn write(&self, path: &Path) -> Result<(), StateFileError> {
        KIND.write(path, self)
    }
}
